"""A store written before the results store became its own package (runstore/) reads as it did:
its runs and curves, the same trial_ids (those its spec still gives), and `depthwidth analyze` on
it. The store is the smoke sweep's, kept in ../shared/repro/smoke-overclaim/ and read where it is
(copied before anything writes into it); the test is skipped where that folder is absent.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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
