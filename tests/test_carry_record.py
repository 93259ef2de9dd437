"""`--from` carries a row only as the whole record a run of the trial its trial_id names would have
(sweeps/running/carry.py): every column the configuration fixes, the counts of its resolved model,
what a run that ended trained and spent, and a `branched_from` that is empty or the spec's run for
that budget. A property test changes one column of one row to arbitrary values and sees the row
refused; the reproducers go through the real CLI. Also: the plan and the run agree on what is a
cooldown branch, and a spec whose one run would hold two budgets of one length is refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from helpers import cli, exported_row, sentence, spec_toml, write_spec
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sweeps.plans.errors import SpecError
from sweeps.plans.spec import load_spec
from sweeps.plans.trialconfig import TrialConfig
from sweeps.running.carry import rows_to_carry
from sweeps.running.record import config_columns, planned_columns

# depths 1 and 2 of a CompleteP model, each one WSD run whose shorter budgets are its cooldown
# branches
ONE_RUN = {
    "model": {"heads": 2, "seq_len": 16, "parametrization": "completep", "base_width": 16, "base_depth": 1},
    "data": {"source": "pcfg", "vocab_size": 32},
    "train": {"batch_size": 4, "warmup_steps": 2, "eval_every": 10, "schedule": "wsd"},
    "grid": {"depth": [1, 2], "width": [16], "lr": [3e-3], "steps": [20, 40]},
    "budget": {"from_one_run": True},
    "resources": {"cpus": 1, "max_failures": 0},
}


def spec_file(folder: Path, steps=(20, 40), name: str = "onerun.toml") -> Path:
    return write_spec(folder, spec_toml("onerun", base=ONE_RUN, grid={"steps": list(steps)}), name)


def table_of(spec, only: set[int] | None = None) -> pd.DataFrame:
    """The runs table a sweep of `spec` would export (`sweep results --csv`), one ok row per trial
    (of the budgets `only`), with planted losses."""
    rows = []
    for i, t in enumerate(spec.trials):
        if only is not None and t.train.steps not in only:
            continue
        tc = TrialConfig.of(t, branched_from=spec.branched_from.get(t.trial_id, ""))
        rows.append(
            exported_row({**config_columns(tc), **planned_columns(tc)}, 3.0 - 0.01 * i, 3.1 - 0.01 * i)
        )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("carry")
    spec = load_spec(spec_file(folder))
    return spec, table_of(spec)


def test_a_table_of_whole_records_is_carried_whole(planted):
    spec, table = planted
    rows, left = rows_to_carry(table, spec, set())
    assert len(rows) == len(spec.trials) == 4 and (left.other, left.held, left.repeat) == (0, 0, 0)
    assert sum(1 for r in rows if r["branched_from"]) == 2


# the columns a row's configuration fixes, and those a run that ended at its budget fixes
CHECKED = [
    *("family", "depth", "width", "heads", "seed", "steps", "attention", "parametrization"),
    *("seq_len", "ffn_ratio", "nu", "rho", "data_source", "task_length", "data_seed", "lr"),
    *("batch_size", "model_config", "data_config", "train_config", "schedule"),
    *("n_params", "n_params_total", "flops_per_token", "vocab_size", "embedding_rank"),
    *("tokens", "flops", "last_step", "flops_spent"),
]
VALUES = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False),
    st.text(max_size=30),
)


def _differs(old, new) -> bool:
    if isinstance(old, str) or isinstance(new, str):
        return str(old) != str(new)
    try:
        return not math.isclose(float(old), float(new), rel_tol=1e-9)
    except (TypeError, ValueError, OverflowError):
        return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=st.integers(0, 3), col=st.sampled_from(CHECKED), value=VALUES)
def test_any_change_to_a_column_the_trial_fixes_is_refused(planted, row, col, value):
    spec, table = planted
    old = table.loc[row, col]
    assume(_differs(old, value))
    forged = table.copy()
    forged[col] = forged[col].astype(object)
    forged.loc[row, col] = value
    with pytest.raises(
        SpecError, match=f"row {row + 1} has trial_id .* with {col} = .*; a row is carried only"
    ):
        rows_to_carry(forged, spec, set())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=st.integers(0, 3), section=st.sampled_from(["model", "train", "data"]), value=st.integers(2, 99))
def test_a_config_json_that_names_another_run_is_refused(planted, row, section, value):
    """The JSON columns are compared as what defines the run: any field of them changed."""
    spec, table = planted
    col = f"{section}_config"
    cfg = json.loads(table.loc[row, col])
    field = {"model": "depth", "train": "warmup_steps", "data": "vocab_size"}[section]
    assume(cfg[field] != value)
    forged = table.copy()
    forged.loc[row, col] = json.dumps({**cfg, field: value})
    with pytest.raises(SpecError, match=f"its {col} is"):
        rows_to_carry(forged, spec, set())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=st.integers(0, 3), value=st.text(min_size=1, max_size=20))
def test_a_branched_from_other_than_the_specs_run_is_refused(planted, row, value):
    spec, table = planted
    assume(value != spec.branched_from.get(table.loc[row, "trial_id"]))
    forged = table.copy()
    forged.loc[row, "branched_from"] = value
    with pytest.raises(SpecError, match="its branched_from is"):
        rows_to_carry(forged, spec, set())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    row=st.integers(0, 3),
    cols=st.sets(st.sampled_from(CHECKED), min_size=1, max_size=6),
    blank=st.sampled_from([math.nan, None]),
)
def test_a_column_left_empty_is_carried_as_the_trial_fixes_it(planted, row, cols, blank):
    """An empty cell (an older export, or a NaN) is what the configuration fixes: a run that ended
    is never carried with an unknown count or cost, whichever cells the table left empty."""
    spec, table = planted
    holed = table.copy()
    for col in cols:
        holed[col] = holed[col].astype(object)
        holed.loc[row, col] = blank
    whole, _ = rows_to_carry(table, spec, set())
    rows, _ = rows_to_carry(holed, spec, set())
    for col in CHECKED:
        assert not _differs(rows[row][col], whole[row][col]), (col, rows[row][col], whole[row][col])


def test_a_run_that_did_not_end_may_spend_less_but_never_more_than_its_budget(planted):
    spec, table = planted
    stopped = table.copy()
    stopped.loc[0, ["status", "tokens", "last_step"]] = ["diverged", 64, 1]
    stopped.loc[0, ["flops", "flops_spent"]] = [1.0, 1.0]
    rows, _ = rows_to_carry(stopped, spec, set())
    assert rows[0]["last_step"] == 1 and rows[0]["steps"] == table.loc[0, "steps"]
    stopped.loc[0, "flops_spent"] = 1e300
    with pytest.raises(SpecError, match="its flops_spent is 1e.300 .more than its budget's"):
        rows_to_carry(stopped, spec, set())


@pytest.mark.parametrize(
    "col, value, words",
    [
        ("n_params", 1, "with n_params = "),  # forged parameter counts are never fitted as given
        ("flops_spent", 1e300, "with flops_spent = "),
        ("flops_spent", -1.0, "column 'flops_spent' row 1 (line 2 of the file) is -1.0"),
        ("branched_from", "ffffffffffffffff", "its branched_from is 'ffffffffffffffff'"),
    ],
)
def test_from_refuses_a_forged_row_through_the_cli_with_nothing_written(tmp_path, col, value, words):
    spec = spec_file(tmp_path)
    table = table_of(load_spec(spec))
    table[col] = table[col].astype(object)
    table.loc[0, col] = value
    table.to_csv(tmp_path / "t.csv", index=False)
    r = cli("sweep", "run", spec, "--storage", tmp_path / "s", "--from", tmp_path / "t.csv", "--no-analyze")
    assert r.returncode == 2 and words in sentence(r), r.stderr
    assert not (tmp_path / "s").exists()


def test_from_carries_an_empty_flops_spent_as_the_plans_never_as_nan(tmp_path):
    spec = spec_file(tmp_path)
    table = table_of(load_spec(spec))
    planned = table.set_index("trial_id")["flops_spent"]
    table["flops_spent"] = math.nan
    table.to_csv(tmp_path / "t.csv", index=False)
    store = tmp_path / "s"
    r = cli("sweep", "run", spec, "--storage", store, "--from", tmp_path / "t.csv", "--no-analyze")
    assert r.returncode == 0 and "4 finished trial(s) carried" in r.stdout, r.stderr
    runs = pd.read_parquet(store / "runs.parquet").set_index("trial_id")
    assert runs["flops_spent"].to_dict() == pytest.approx(planned.to_dict(), rel=1e-12)


def test_a_budget_added_after_its_run_is_stored_is_planned_and_run_in_full(tmp_path):
    """The plan and the run agree on what is a cooldown branch: a budget added once its run is in
    the store is a run of its own, priced in full by `sweep plan` and trained in full by the sweep."""
    first = spec_file(tmp_path, [20, 40])
    table_of(load_spec(first)).to_csv(tmp_path / "t.csv", index=False)
    store = tmp_path / "s"
    r = cli("sweep", "run", first, "--storage", store, "--from", tmp_path / "t.csv", "--no-analyze")
    assert r.returncode == 0 and "4 finished trial(s) carried" in r.stdout, r.stderr
    more = spec_file(tmp_path, [10, 20, 40], "more.toml")
    r = cli("sweep", "plan", more, "--storage", store, "--json")
    assert r.returncode == 0, r.stderr
    plan = {o["trial_id"]: o for o in map(json.loads, r.stdout.splitlines())}
    new = [o for o in plan.values() if o["steps"] == 10]
    assert len(new) == 2 and all(o["branched_from"] == "" and o["flops"] == o["budget_flops"] for o in new)
    r = cli("sweep", "run", more, "--storage", store, "--no-analyze")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    runs = pd.read_parquet(store / "runs.parquet").set_index("trial_id")
    for o in new:
        row = runs.loc[o["trial_id"]]
        assert row["branched_from"] == "" and row["flops_spent"] == pytest.approx(o["flops"], rel=1e-12)


def test_two_budgets_of_one_length_in_one_run_are_refused_when_the_spec_is_read(tmp_path):
    grid = {"steps": None, "eval_every": [2, 5]}
    train = {"steps": 20, "eval_every": None}
    twin = write_spec(tmp_path, spec_toml("onerun", base=ONE_RUN, grid=grid, train=train), "twin.toml")
    r = cli("sweep", "plan", twin)
    assert (
        r.returncode == 2 and "grid.eval_every = " in sentence(r) and "two budgets of 20 steps" in sentence(r)
    )


def test_an_early_rung_on_wsd_names_the_field_the_spec_sets(tmp_path):
    text = spec_toml(
        "onerun",
        base=ONE_RUN,
        train={"eval_every": 2},
        grid={"steps": None, "lr": [3e-3, 1e-2, 3e-2]},
        budget={"from_one_run": None, "steps": 30},
        halving={"at": [0.05]},
    )
    r = cli("sweep", "plan", write_spec(tmp_path, text, "h.toml"))
    assert r.returncode == 2 and 'halving.at = [0.05] is invalid with schedule = "wsd"' in sentence(r)


def test_the_planted_trainables_rows_are_whole_records(planted):
    """The planted trainable (sweeps/running/planted.py) records what train() would: its rows, as
    the store writes them, are carried by --from as they are."""
    from sweeps.plans.trialoutcome import TrialOutcome
    from sweeps.running.planted import planted_result
    from sweeps.running.record import record_of

    spec, _ = planted
    rows = []
    for t in spec.trials:
        tc = TrialConfig.of(t, branched_from=spec.branched_from.get(t.trial_id, ""))
        run = record_of("onerun", tc, TrialOutcome(t.trial_id, planted_result(tc)))
        rows.append({**run.record.to_dict(), **run.beside})
    carried, _ = rows_to_carry(pd.DataFrame(rows), spec, set())
    assert len(carried) == len(spec.trials)
