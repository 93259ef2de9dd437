"""A store written before the results store became its own package (runstore/) reads as it did:
its runs and curves, the same trial_ids (those its spec still gives), and `depthwidth analyze` on
it. The store is the smoke sweep's, kept in ../shared/repro/smoke-overclaim/ and read where it is
(copied before anything writes into it); the test is skipped where that folder is absent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from runstore.layout import CURVE_COLUMNS, CURVES, RUNS, SPEC
from runstore.location import Location
from runstore.record import REQUIRED_RUN_COLUMNS, RunRecord
from runstore.store import ResultStore, spec_versions
from runstore.tables import read_tables
from sweeps.plans.spec import parse_spec

OLD_STORE = Path(__file__).resolve().parent.parent.parent / "shared" / "repro" / "smoke-overclaim"


@pytest.fixture
def old_store() -> Path:
    if not (OLD_STORE / RUNS).is_file():
        pytest.skip(f"{OLD_STORE} is absent: the store written before runstore/ is not on this machine")
    return OLD_STORE


def test_an_older_store_reads_its_runs_and_curves_and_keeps_its_trial_ids(old_store):
    raw_runs = pq.read_table(old_store / RUNS).to_pandas()
    raw_curves = pq.read_table(old_store / CURVES).to_pandas()
    runs, curves, snap = read_tables(Location(str(old_store)))
    assert len(runs) == len(raw_runs) == 36 and snap.parts == []
    assert set(REQUIRED_RUN_COLUMNS) <= set(runs.columns)
    assert set(CURVE_COLUMNS) <= set(curves.columns) and len(curves) == len(raw_curves)
    assert sorted(runs["trial_id"]) == sorted(raw_runs["trial_id"])
    assert set(curves["trial_id"]) == set(runs["trial_id"])
    # the writer's view of it agrees, and the spec it was run from still gives these trial_ids
    store = ResultStore(str(old_store))
    store.check()
    assert store.finished_ids() == set(raw_runs["trial_id"])
    spec = parse_spec(spec_versions((old_store / SPEC).read_text())[0], str(old_store / SPEC))
    assert {t.trial_id for t in spec.trials} == set(raw_runs["trial_id"])
    # each row is a run record; the columns added since (schedule, flops_spent, ...) take defaults
    records = [RunRecord.from_dict(r) for r in runs.to_dict("records")]
    assert [r.trial_id for r in records] == list(runs["trial_id"])
    assert all(r.schedule == "cosine" and r.branched_from == "" for r in records)


def test_depthwidth_analyze_reads_an_older_store(old_store, tmp_path):
    store = tmp_path / "smoke"
    shutil.copytree(old_store, store)
    for f in store.rglob("*"):
        f.chmod(0o644)
    store.chmod(0o755)
    exe = Path(sys.executable).parent / "depthwidth"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "depthwidth.cli"]
    res = subprocess.run(
        [*cmd, "analyze", str(store), "--bootstrap", "20"], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    assert (store / "analysis" / "report.json").is_file()


def test_rows_written_before_last_step_read_in_todays_meaning(old_store, tmp_path):
    """`steps` is the planned budget in every row and `last_step` where the run got to: a store
    written before `last_step` existed reads that way, its stopped rows' budget taken from their
    train_config, whether the store is read whole or as a `--from` table."""
    runs, _, _ = read_tables(Location(str(old_store)))
    assert (runs["last_step"] == runs["steps"]).all() and runs["last_step"].dtype.kind == "i"
    old = pq.read_table(old_store / RUNS).to_pandas()
    assert "last_step" not in old.columns
    # a stopped row as an older store wrote it: `steps` the rung it stopped at
    stopped = old.iloc[[0]].copy()
    planned = json.loads(stopped["train_config"].iloc[0])["steps"]
    stopped[["status", "steps", "trial_id"]] = ["stopped", planned // 3, "0123456789abcdef"]
    store = tmp_path / "st"
    store.mkdir()
    pd.concat([old, stopped], ignore_index=True).to_parquet(store / RUNS, index=False)
    shutil.copy(old_store / CURVES, store / CURVES)
    runs, _, _ = read_tables(Location(str(store)))
    row = runs.set_index("trial_id").loc["0123456789abcdef"]
    assert (row["steps"], row["last_step"]) == (planned, planned // 3)
    assert RunRecord.from_dict(row.to_dict() | {"trial_id": "0123456789abcdef"}).last_step == planned // 3
