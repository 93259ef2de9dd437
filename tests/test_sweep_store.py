"""The results store (docs/design.md's contract) and the progress view, without Ray: rows and curves
written and read back, atomic replacement, spec.toml history, a corrupted runs.parquet refused
(never overwritten), a pyarrow URI store, CSV export, the single-writer lock, and the ETA."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest
from helpers import add_run, row_of, spec_toml, stored_run, write_spec

from runstore.files import StoreError
from runstore.layout import CURVE_COLUMNS
from runstore.record import REQUIRED_RUN_COLUMNS
from runstore.store import ResultStore
from sweeps import cli
from sweeps.plans.spec import parse_spec
from sweeps.running.progress import ProgressView, fmt_duration, trial_cost

SPEC = spec_toml("st", train=None, grid={"depth": [1, 2], "width": [8]}, budget={"steps": 10})


def planted_result(depth: int, loss: float, status: str = "ok", metrics: dict | None = None) -> dict:
    """A RunResult.to_dict() as train() returns it, with values chosen by the test."""
    curve = [
        {
            "step": s,
            "tokens": s * 64,
            "flops": s * 64 * 6e3,
            "train_loss": loss + 1 / s,
            "val_loss": loss + 0.5 / s,
            "lr": 1e-3,
            "wall_s": 0.1 * s,
            **(metrics or {}),
        }
        for s in (5, 10)
    ]
    return {
        "status": status,
        "final_train_loss": loss + 0.1,
        "final_val_loss": loss,
        "steps": 10,
        "tokens": 640,
        "flops": 640 * 6e3,
        "wall_s": 1.0,
        "n_params": 768 * depth,
        "n_params_total": 900 * depth,
        "flops_per_token": 2e3 * depth,
        "device": "cpu",
        "torch_version": "2.x",
        "depthwidth_version": "0.1.0",
        "unigram_entropy": 2.5,
        "vocab_size": 16,
        "curve": curve,
        "metrics": metrics or {},
        "error": "",
    }


def add(store: ResultStore, trial, loss: float, **kw) -> dict:
    res = planted_result(trial.model.depth, loss, **kw)
    return add_run(store, stored_run("st", trial, res, "n1", "127.0.0.1"))


def test_rows_and_curves_round_trip_with_required_columns(tmp_path):
    trials = parse_spec(SPEC, "s.toml").trials
    store = ResultStore(str(tmp_path / "st"))
    add(store, trials[0], 2.0)
    add(store, trials[1], 1.5, metrics={"accuracy": 0.75})
    runs = pd.read_parquet(tmp_path / "st" / "runs.parquet")
    assert list(runs.columns[: len(REQUIRED_RUN_COLUMNS)]) == list(REQUIRED_RUN_COLUMNS)
    assert list(runs["trial_id"]) == [t.trial_id for t in trials]
    assert list(runs["final_val_loss"]) == [2.0, 1.5]
    assert list(runs["depth"]) == [1, 2] and list(runs["n_params"]) == [768, 1536]
    assert runs["accuracy"].isna().tolist() == [True, False] and runs["accuracy"].iloc[1] == 0.75
    assert runs["embedding_rank"].tolist() == [8, 8]  # min(vocab 16, width 8)
    assert runs["node_ip"].tolist() == ["127.0.0.1"] * 2
    cfg = pd.read_json(io.StringIO(runs["model_config"].iloc[1]), typ="series")
    assert cfg["depth"] == 2 and cfg["heads"] == 2
    curves = pd.read_parquet(tmp_path / "st" / "curves.parquet")
    assert list(curves.columns[: len(CURVE_COLUMNS)]) == list(CURVE_COLUMNS)
    assert curves.groupby("trial_id")["step"].apply(list).to_dict() == {t.trial_id: [5, 10] for t in trials}
    assert not [p.name for p in (tmp_path / "st").iterdir() if p.name.endswith(".tmp")]
    # a fresh reader sees the same thing
    again = ResultStore(str(tmp_path / "st"))
    assert again.finished_ids() == {t.trial_id for t in trials}


def test_replacing_a_trial_keeps_one_row_and_one_curve(tmp_path):
    trials = parse_spec(SPEC, "s.toml").trials
    store = ResultStore(str(tmp_path / "st"))
    add(store, trials[0], 2.0)
    add(store, trials[1], 1.5)
    add(store, trials[0], 1.9)  # --rerun
    runs = pd.read_parquet(tmp_path / "st" / "runs.parquet").set_index("trial_id")
    assert len(runs) == 2 and runs.loc[trials[0].trial_id, "final_val_loss"] == 1.9
    curves = pd.read_parquet(tmp_path / "st" / "curves.parquet")
    assert (curves["trial_id"] == trials[0].trial_id).sum() == 2


def test_spec_history_appends_never_rewrites(tmp_path):
    store = ResultStore(str(tmp_path / "st"))
    store.write_spec(SPEC, "a.toml")
    store.write_spec(SPEC, "a.toml")  # the same spec again: no change
    assert (tmp_path / "st" / "spec.toml").read_text() == SPEC
    extended = SPEC.replace("width = [8]", "width = [8, 16]")
    store.write_spec(extended, "b.toml")
    store.write_spec(extended, "b.toml")
    text = (tmp_path / "st" / "spec.toml").read_text()
    assert text.startswith(SPEC) and text.count("# ---- extension submitted") == 1
    assert "from b.toml" in text and "# width = [8, 16]" in text
    assert store.first_spec_text() == SPEC
    assert parse_spec(text, "stored").trials == parse_spec(SPEC, "s").trials  # still the first spec


@pytest.mark.parametrize("damage", ["garbage", "truncated", "no_trial_id"])
def test_corrupted_runs_parquet_is_refused_and_left_untouched(tmp_path, capsys, damage):
    trials = parse_spec(SPEC, "s.toml").trials
    root = tmp_path / "st"
    store = ResultStore(str(root))
    store.write_spec(SPEC, "s.toml")
    add(store, trials[0], 2.0)
    runs = root / "runs.parquet"
    if damage == "garbage":
        runs.write_bytes(b"this is not parquet")
    elif damage == "truncated":
        runs.write_bytes(runs.read_bytes()[:100])
    else:
        pd.read_parquet(runs).drop(columns=["trial_id"]).to_parquet(runs)
    before = runs.read_bytes()
    with pytest.raises(StoreError) as err:
        ResultStore(str(root)).check()
    assert str(runs) in str(err.value) and "left untouched" in str(err.value)
    spec = write_spec(tmp_path, SPEC, "s.toml")
    assert cli.main(["run", str(spec), "--storage", str(root)]) == 2
    msg = capsys.readouterr().err
    assert msg.startswith(f"depthwidth: error: {runs} ") and msg.count("\n") == 1
    assert cli.main(["results", str(root)]) == 2
    assert str(runs) in capsys.readouterr().err
    assert runs.read_bytes() == before  # never overwritten
    assert sorted(p.name for p in root.iterdir()) == ["curves.parquet", "runs.parquet", "spec.toml"]


def test_store_on_a_pyarrow_uri(tmp_path):
    trials = parse_spec(SPEC, "s.toml").trials
    uri = f"file://{tmp_path}/uri-store"
    store = ResultStore(uri)
    add(store, trials[0], 2.0)
    store.write_spec(SPEC, "s.toml")
    assert pd.read_parquet(tmp_path / "uri-store" / "runs.parquet")["trial_id"].tolist() == [
        trials[0].trial_id
    ]
    assert ResultStore(uri).finished_ids() == {trials[0].trial_id}


def test_results_command_prints_and_exports_csv(tmp_path, capsys):
    trials = parse_spec(SPEC, "s.toml").trials
    store = ResultStore(str(tmp_path / "st"))
    add(store, trials[0], 2.0)
    add(store, trials[1], 1.5)
    assert cli.main(["results", str(tmp_path / "st")]) == 0
    out = capsys.readouterr().out
    assert "final_val_loss" in out and "2.0000" in out and "1.5000" in out
    csv = tmp_path / "runs.csv"
    assert cli.main(["results", str(tmp_path / "st"), "--csv", str(csv)]) == 0
    back = pd.read_csv(csv)
    assert back["final_val_loss"].tolist() == [2.0, 1.5] and set(REQUIRED_RUN_COLUMNS) <= set(back.columns)


def test_one_writer_per_store(tmp_path):
    a, b = ResultStore(str(tmp_path / "st")), ResultStore(str(tmp_path / "st"))
    a.lock()
    with pytest.raises(StoreError, match="being written by another running sweep"):
        b.lock()
    a.unlock()
    b.lock()
    b.unlock()


def test_progress_view_counts_and_eta():
    now = [100.0]
    out = io.StringIO()
    # two trials of equal cost and one of twice the cost: 4 units of work in all
    view = ProgressView(
        "demo",
        {"a": 10, "b": 10, "c": 20},
        {"a": "d1 w8", "b": "d2 w8", "c": "d4 w8"},
        stream=out,
        tty=False,
        clock=lambda: now[0],
    )
    view.started("a")
    view.started("b")
    now[0] = 110.0
    view.finished("a", "ok", 2.5)
    view.progressed("b", 0.5)
    line = view.line()
    # 1.5 of 4 units done in 10 s of work -> 2.5 units left at the same rate = 16.7 s
    assert line == (
        "[demo] 1/3 done | 1 running | 1 pending | 0 failed | best val 2.5000 (d1 w8) | "
        "0:10 elapsed, ETA 0:17"
    )
    view.finished("b", "diverged", math.nan)
    view.errored("c", "worker died")
    view.close()
    text = out.getvalue()
    assert "trial d4 w8 failed in Ray: worker died" in text
    assert text.splitlines()[-1].startswith("[demo] 2/3 done, 1 diverged | 0 running | 0 pending | 1 failed")
    assert fmt_duration(3725) == "1:02:05" and fmt_duration(math.nan) == "?"
    assert trial_cost(100, 0.0) == 100 and trial_cost(100, 100 * 5e8) == 200


def test_profiles_and_profiles_over_training_stay_in_the_metrics_json(tmp_path):
    """A per-step profile (list of numbers) and profiles at several evaluations (list of
    such lists) are kept in the metrics JSON; anything else that is not a number is dropped."""
    import json

    trial = parse_spec(SPEC, "s.toml").trials[0]
    res = planted_result(1, 2.0)
    res["metrics"] = {
        "accuracy": 0.5,
        "grad_norms": [1.0, 0.5],
        "grad_profile_steps": [5, 10],
        "grad_profile_norms": [[1.0, 0.1], [1.0, 0.2]],
        "note": "text",
        "mixed": [1.0, "a"],
    }
    row = row_of(stored_run("st", trial, res))
    kept = json.loads(row["metrics"])
    assert kept == {
        "accuracy": 0.5,
        "grad_norms": [1.0, 0.5],
        "grad_profile_steps": [5, 10],
        "grad_profile_norms": [[1.0, 0.1], [1.0, 0.2]],
    }
    assert row["accuracy"] == 0.5 and "grad_profile_norms" not in row
