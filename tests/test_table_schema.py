"""One schema for every table that enters depthwidth (runstore/schema.py, docs/rules.md "One
schema for tables"): `sweep run --from`, `analyze` and `design --pilot` refuse the same bad cells
with one sentence naming the file, column, row and value, exit code 2 and nothing written, and a
store never holds a row its readers refuse. The runs tables are written directly from the small
spec's trials, so carrying them all runs nothing (no Ray, about a second a command)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import cli, exported_row, sentence, spec_toml, write_spec

from runstore.record import REQUIRED_RUN_COLUMNS
from runstore.schema import TableError, check_table

# a small CompleteP grid, two learning rates a shape, stored in stores/tiny
TABLES = {
    "model": {
        "family": "transformer",
        "heads": 2,
        "seq_len": 16,
        "parametrization": "completep",
        "base_width": 16,
        "base_depth": 1,
    },
    "data": {"source": "pcfg", "vocab_size": 32},
    "train": {"batch_size": 4, "warmup_steps": 2},
    "budget": {"steps": 20, "evals": 2},
    "resources": {"cpus": 1, "max_failures": 0},
    "storage": {"path": "stores/tiny"},
}


def tiny_spec(depths=(1, 2), widths=(16, 32), grid: dict | None = None, **tables) -> str:
    """TABLES over `depths` x `widths` and two learning rates; `grid` adds to the grid, `tables`
    are laid over TABLES as in spec_toml."""
    grid = {"depth": list(depths), "width": list(widths), "lr": [3e-3, 1e-2], **(grid or {})}
    return spec_toml("tiny", base=TABLES, grid=grid, **tables)


TINY = tiny_spec()  # 2 depths x 2 widths x 2 learning rates: 8 trials
TINY3 = tiny_spec(depths=(1, 2, 3))


def runs_of(spec_path: Path) -> pd.DataFrame:
    """A runs table as `sweep results --csv` writes it, one ok row per trial of the spec: the
    columns its configuration fixes, as a sweep records them, and planted losses."""
    from sweeps.plans.spec import load_spec
    from sweeps.plans.trialconfig import TrialConfig
    from sweeps.running.record import config_columns, planned_columns

    rows = []
    for i, t in enumerate(load_spec(spec_path).trials):
        tc = TrialConfig.of(t)
        cols = {**config_columns(tc), **planned_columns(tc)}
        keep = ("trial_id", "family", "depth", "width", "heads", "seed", "n_params", "n_params_total")
        keep += ("flops_per_token", "tokens", "steps", "lr", "batch_size", "seq_len")
        rows.append(exported_row({k: cols[k] for k in keep}, 3.2 - 0.01 * i, 3.3 - 0.01 * i))
    return pd.DataFrame(rows)


def tiny_folder(folder: Path) -> Path:
    """`folder` holding tiny.toml, tiny3.toml (a plan `design` rates) and runs.csv, the runs table
    of tiny.toml."""
    write_spec(folder, TINY, "tiny.toml")
    write_spec(folder, TINY3, "tiny3.toml")
    runs_of(folder / "tiny.toml").to_csv(folder / "runs.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_folder(tmp_path_factory.mktemp("tiny"))


def _bad(table: pd.DataFrame, col: str, row: int, value) -> pd.DataFrame:
    t = table.copy()
    t[col] = t[col].astype(object)
    t.loc[row, col] = value
    return t


BAD_CELLS = [
    ("lr", "abc", "it must be a number"),
    ("depth", "two", "it must be a number"),
    ("final_val_loss", "nan", "a run with status ok must have a finite positive loss below 1e6"),
    ("final_val_loss", -2.0, "a run with status ok must have a finite positive loss below 1e6"),
    ("final_val_loss", 1e308, "a run with status ok must have a finite positive loss below 1e6"),
    ("final_train_loss", "inf", "a run with status ok must have a finite positive loss below 1e6"),
    ("depth", 2.5, "a shape column must be a whole number from 1 to 2^53"),
    ("width", 0, "a shape column must be a whole number from 1 to 2^53"),
    ("seed", -1, "it must be a whole number from 0 to 2^53"),
    ("steps", 1.5, "it must be a whole number from 0 to 2^53"),
    ("lr", 0.0, "it must be a finite number above 0"),
    ("n_params", -5, "it must be a finite number at least 0"),
    ("status", "running", "expected one of ok, diverged, failed, stopped"),
]


@pytest.mark.parametrize("col, value, why", BAD_CELLS)
def test_from_refuses_a_bad_cell_with_nothing_written(tiny, tmp_path, col, value, why):
    table = tmp_path / "T.csv"
    _bad(pd.read_csv(tiny / "runs.csv", dtype={"trial_id": str}), col, 2, value).to_csv(table, index=False)
    store = tmp_path / "store"
    r = cli("sweep", "run", tiny / "tiny.toml", "--storage", store, "--from", table, "--no-analyze")
    msg = sentence(r)
    assert msg.startswith(f"--from {table}: column '{col}' row 3 (line 4 of the file) is ")
    assert why in msg
    assert not store.exists()


@pytest.mark.parametrize("col, value, why", [BAD_CELLS[i] for i in (0, 2, 4, 6)])
def test_analyze_and_pilot_refuse_the_same_cells(tiny, tmp_path, col, value, why):
    table = tmp_path / "T.csv"
    _bad(pd.read_csv(tiny / "runs.csv", dtype={"trial_id": str}), col, 2, value).to_csv(table, index=False)
    for r in (
        cli("analyze", table, "--out", tmp_path / "out", "--bootstrap", "5"),
        cli("design", tiny / "tiny3.toml", "--pilot", table, "--replicates", "1", "--out", tmp_path / "d"),
    ):
        msg = sentence(r)
        assert f"T.csv: column '{col}' row 3 (line 4 of the file) is " in msg and why in msg, msg
    assert not (tmp_path / "out").exists() and not (tmp_path / "d").exists()


def test_a_parquet_runs_table_is_checked_alike(tiny, tmp_path):
    table = tmp_path / "T.parquet"
    t = pd.read_csv(tiny / "runs.csv", dtype={"trial_id": str})
    t.loc[5, "final_val_loss"] = math.nan
    t.to_parquet(table, index=False)
    r = cli("sweep", "run", tiny / "tiny.toml", "--storage", tmp_path / "s", "--from", table, "--no-analyze")
    assert sentence(r).startswith(f"--from {table}: column 'final_val_loss' row 6 is nan;")
    r = cli("analyze", table, "--out", tmp_path / "out")
    assert "T.parquet: column 'final_val_loss' row 6 is nan;" in sentence(r)
    assert not (tmp_path / "s").exists() and not (tmp_path / "out").exists()


def test_a_row_under_another_trials_id_is_refused(tiny, tmp_path):
    t = pd.read_csv(tiny / "runs.csv", dtype={"trial_id": str})
    for col, value in (("depth", 99), ("width", 4096), ("lr", 0.5), ("seed", 7), ("heads", 4)):
        table = tmp_path / f"{col}.csv"
        t.assign(**{col: t[col].where(t.index != 1, value)}).to_csv(table, index=False)
        r = cli("sweep", "run", tiny / "tiny.toml", "--storage", tmp_path / "s", "--from", table)
        msg = sentence(r)
        assert msg.startswith(f"--from {table}: row 2 has trial_id {t.loc[1, 'trial_id']!r}")
        assert f"but its {col} is {value!r}" in msg
        assert not (tmp_path / "s").exists()


def test_repeats_of_a_trial_id_carry_once_when_equal_and_are_refused_when_not(tiny, tmp_path):
    t = pd.read_csv(tiny / "runs.csv", dtype={"trial_id": str})
    clash = tmp_path / "clash.csv"
    pd.concat([t, t.iloc[[2]].assign(final_val_loss=1.5)], ignore_index=True).to_csv(clash, index=False)
    r = cli("sweep", "run", tiny / "tiny.toml", "--storage", tmp_path / "s", "--from", clash)
    msg = sentence(r)
    assert f"trial_id {t.loc[2, 'trial_id']!r} appears in rows 3 and 9 (lines 4 and 10 of the file)" in msg
    assert "column 'final_val_loss'" in msg and not (tmp_path / "s").exists()
    same = tmp_path / "same.csv"
    pd.concat([t, t.iloc[[2]]], ignore_index=True).to_csv(same, index=False)
    r = cli("sweep", "run", tiny / "tiny.toml", "--storage", tmp_path / "s", "--from", same, "--no-analyze")
    assert r.returncode == 0, r.stderr
    assert "8 finished trial(s) carried" in r.stdout and "nothing to run" in r.stdout
    stored = pd.read_parquet(tmp_path / "s" / "runs.parquet")
    assert len(stored) == 8 and stored["trial_id"].is_unique
    # what the store holds, its readers take: analyze and the --csv export read back
    out = tmp_path / "again.csv"
    assert cli("sweep", "results", tmp_path / "s", "--csv", out).returncode == 0
    r = cli("analyze", out, "--out", tmp_path / "a", "--bootstrap", "5")
    assert r.returncode == 0, r.stderr
    r = cli("sweep", "run", tiny / "tiny.toml", "--storage", tmp_path / "s2", "--from", out, "--no-analyze")
    assert r.returncode == 0 and "8 finished trial(s) carried" in r.stdout, r.stderr


def test_the_store_writer_refuses_a_row_its_readers_would(tmp_path):
    from runstore.files import StoreError
    from runstore.record import RunRecord
    from runstore.store import ResultStore
    from sweeps.plans.spec import load_spec
    from sweeps.plans.trialconfig import TrialConfig
    from sweeps.running.record import config_columns, planned_columns

    tc = TrialConfig.of(load_spec(_spec(tmp_path)).trials[0])
    row = runs_of(_spec(tmp_path)).iloc[0].to_dict()
    rec = RunRecord.from_dict({**config_columns(tc), **planned_columns(tc), **row})
    store = ResultStore(str(tmp_path / "s"))
    for col, value in (("final_val_loss", math.nan), ("lr", "abc"), ("depth", 0)):
        with pytest.raises(StoreError, match=f"was not recorded: .*column '{col}' row 1"):
            store.add_trial(dataclasses.replace(rec, **{col: value}))
    assert not (tmp_path / "s").exists()
    store.add_trial(dataclasses.replace(rec, status="diverged", final_val_loss=math.inf))  # not ok: kept
    assert store.runs()["status"].tolist() == ["diverged"]


def _spec(folder: Path) -> Path:
    return write_spec(folder, TINY, "tiny.toml")


def test_the_schema_keeps_good_tables_and_coerces_numbers():
    t = pd.DataFrame(
        {
            "trial_id": ["a", "b", "c"],
            "depth": ["1", "2", "3"],
            "width": [16, 16, 16],
            "lr": [1e-3, np.nan, 2e-3],
            "final_val_loss": [3.0, math.inf, math.nan],
            "status": ["ok", "diverged", "failed"],
            "note": ["x", "y", "z"],
        }
    )
    out = check_table(t, "t.csv", csv=True)
    assert out["depth"].tolist() == [1, 2, 3] and out["note"].tolist() == ["x", "y", "z"]
    with pytest.raises(TableError, match=r"t.csv: column 'heads' row 1 is 2.5; a shape column"):
        check_table(t.assign(heads=[2.5, 2, 2]), "t.csv")
    with pytest.raises(TableError, match="column 'depth' row 2 is nan; every run of a results store"):
        check_table(t.assign(depth=[1, None, 3]), "t.csv", store=True)
    assert set(REQUIRED_RUN_COLUMNS) >= {"final_val_loss", "status"}


def test_a_pilot_without_depth_or_width_names_the_missing_column(tiny, tmp_path):
    t = pd.read_csv(tiny / "runs.csv", dtype={"trial_id": str})
    for drop, missing in ((["depth", "width"], "no 'depth' column"), (["depth"], "no 'depth'")):
        pilot = tmp_path / "pilot.csv"
        t.drop(columns=drop).to_csv(pilot, index=False)
        msg = sentence(cli("design", tiny / "tiny3.toml", "--pilot", pilot, "--out", tmp_path / "d"))
        assert msg.startswith(f"--pilot = {str(pilot)!r} is invalid: ") and missing in msg
        assert not (tmp_path / "d").exists()
