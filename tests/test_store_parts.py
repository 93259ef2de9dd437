"""The store's tables as a compacted base plus append-only parts (runstore/tables.py): every
finished trial is read exactly once with the curve of the same version, through reruns, through a
compaction interrupted at each of its steps, and by a reader racing the writer; the parts stay a
bounded fraction of the rows, so recording a trial costs O(1) amortised."""

from __future__ import annotations

import threading
from dataclasses import replace

import pandas as pd
import pytest

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.result import RunResult
from runstore import layout, tables
from runstore.files import StoreError
from runstore.layout import PARTS_DIR
from runstore.location import Location
from runstore.store import COMPACT_RATIO, ResultStore
from runstore.tables import read_tables
from sweeps.plans.trialconfig import TrialConfig
from sweeps.plans.trialoutcome import TrialOutcome
from sweeps.running.record import record_of

TRIAL = TrialConfig(
    "t",
    ModelConfig(depth=1, width=8, heads=2, vocab_size=16, seq_len=16),
    DataConfig(source="pcfg", vocab_size=16),
    TrainConfig(lr=1e-3, batch_size=4, steps=3),
)


def record(store: ResultStore, tid: str, version: float) -> None:
    """A trial whose losses all equal `version`, so a reader can tell which write it sees."""
    curve = [
        {
            "step": s,
            "tokens": s,
            "flops": 1.0,
            "train_loss": version,
            "val_loss": version,
            "lr": 1e-3,
            "wall_s": 0.1,
        }
        for s in (1, 2, 3)
    ]
    res = {
        "status": "ok",
        "final_train_loss": version,
        "final_val_loss": version,
        "steps": 3,
        "tokens": 3,
        "flops": 3.0,
        "wall_s": 0.3,
        "n_params": 10,
        "n_params_total": 20,
        "flops_per_token": 1.0,
        "device": "cpu",
        "torch_version": "x",
        "depthwidth_version": "x",
        "unigram_entropy": 1.0,
        "vocab_size": 16,
        "curve": curve,
        "metrics": {},
        "error": "",
    }
    run = record_of("p", replace(TRIAL, trial_id=tid), TrialOutcome(tid, RunResult.from_dict(res)))
    store.add_trial(run.record, run.curve, run.beside)


def check_consistent(runs: pd.DataFrame, curves: pd.DataFrame) -> dict[str, float]:
    """Each trial once, with its whole curve from the same version; returns tid -> version."""
    assert runs["trial_id"].is_unique
    version = runs.set_index("trial_id")["final_val_loss"].to_dict()
    assert set(curves["trial_id"]) == set(version)
    for tid, c in curves.groupby("trial_id"):
        assert sorted(c["step"]) == [1, 2, 3], tid
        assert (c["val_loss"] == version[tid]).all(), tid
    return version


def n_parts(root) -> int:
    d = root / PARTS_DIR
    return len(list(d.glob("*.runs.parquet"))) if d.exists() else 0


def test_parts_stay_a_bounded_fraction_and_read_as_one_table(tmp_path):
    store = ResultStore(str(tmp_path / "st"))
    for i in range(120):
        record(store, f"t{i:04d}", float(i + 1))  # an ok run's loss is above 0
        rows_folded = len(pd.read_parquet(tmp_path / "st" / "runs.parquet"))
        assert n_parts(tmp_path / "st") <= max(1, rows_folded // COMPACT_RATIO)
    assert n_parts(tmp_path / "st") > 0  # the last trials are still parts, not yet folded
    runs, curves, _ = read_tables(Location(str(tmp_path / "st")))
    assert check_consistent(runs, curves) == {f"t{i:04d}": float(i + 1) for i in range(120)}
    assert list(runs["trial_id"]) == [f"t{i:04d}" for i in range(120)]  # in the order written
    store.close()  # the driver's end folds everything
    assert n_parts(tmp_path / "st") == 0 and not (tmp_path / "st" / PARTS_DIR).exists()
    folded = pd.read_parquet(tmp_path / "st" / "runs.parquet")
    assert list(folded["trial_id"]) == list(runs["trial_id"])


def test_a_rerun_in_a_part_replaces_the_folded_row_and_its_curve(tmp_path):
    store = ResultStore(str(tmp_path / "st"))
    for i in range(40):
        record(store, f"t{i:02d}", 1.0)
    store.close()
    store = ResultStore(str(tmp_path / "st"))
    record(store, "t03", 2.0)  # 40 folded rows: this stays a part
    record(store, "t03", 3.0)
    assert n_parts(tmp_path / "st") == 2
    runs, curves, _ = read_tables(Location(str(tmp_path / "st")))
    version = check_consistent(runs, curves)
    assert len(version) == 40 and version["t03"] == 3.0 and runs["trial_id"].iloc[-1] == "t03"
    assert ResultStore(str(tmp_path / "st")).finished_ids() == {f"t{i:02d}" for i in range(40)}


@pytest.mark.parametrize("crash_at", ["curves_base", "runs_base", "deleting_parts"])
def test_an_interrupted_compaction_loses_nothing_and_counts_nothing_twice(tmp_path, monkeypatch, crash_at):
    root = tmp_path / "st"
    store = ResultStore(str(root))
    for i in range(40):
        record(store, f"t{i:02d}", 1.0)
    store.close()
    store = ResultStore(str(root))
    for i in range(3):  # a rerun of a folded trial and two new trials, as parts
        record(store, ["t05", "n1", "n2"][i], 5.0)
    expected = {**{f"t{i:02d}": 1.0 for i in range(40)}, "t05": 5.0, "n1": 5.0, "n2": 5.0}

    class Crash(Exception):
        pass

    real_write, real_delete = Location.write_table, Location.delete
    writes: list[str] = []

    def write_table(self, name, table):
        if name in (layout.CURVES, layout.RUNS):
            writes.append(name)
            if (crash_at == "curves_base" and name == layout.CURVES) or (
                crash_at == "runs_base" and name == layout.RUNS
            ):
                raise Crash(name)
        return real_write(self, name, table)

    def delete(self, name):
        if crash_at == "deleting_parts" and name.endswith("0000000041.runs.parquet"):
            raise Crash(name)  # some parts deleted, others left behind
        return real_delete(self, name)

    monkeypatch.setattr(Location, "write_table", write_table)
    monkeypatch.setattr(Location, "delete", delete)
    with pytest.raises(Crash):
        store.compact()
    monkeypatch.undo()
    runs, curves, _ = read_tables(Location(str(root)))
    assert check_consistent(runs, curves) == expected
    # a later writer continues where the interrupted one stopped, and folds cleanly
    again = ResultStore(str(root))
    record(again, "n3", 7.0)
    again.close()
    runs, curves, _ = read_tables(Location(str(root)))
    assert check_consistent(runs, curves) == {**expected, "n3": 7.0}
    assert n_parts(root) == 0


def test_a_curves_part_without_its_runs_part_is_not_a_trial(tmp_path):
    root = tmp_path / "st"
    store = ResultStore(str(root))
    record(store, "a", 1.0)
    store.close()
    # a writer killed between a trial's two part files leaves only the curves part
    curve = pd.DataFrame(
        [
            {
                "trial_id": "ghost",
                "step": 1,
                "tokens": 1,
                "flops": 1.0,
                "train_loss": 9.0,
                "val_loss": 9.0,
                "lr": 1e-3,
                "wall_s": 0.1,
            }
        ]
    )
    Location(str(root)).write_table(tables.part_name(5, "curves"), tables._arrow(curve))
    runs, curves, snap = read_tables(Location(str(root)))
    assert check_consistent(runs, curves) == {"a": 1.0} and snap.parts == []
    store = ResultStore(str(root))
    record(store, "b", 2.0)
    store.close()
    runs, curves, _ = read_tables(Location(str(root)))
    assert check_consistent(runs, curves) == {"a": 1.0, "b": 2.0}


def test_a_reader_racing_the_writer_never_sees_a_trial_twice_or_half(tmp_path):
    root = tmp_path / "st"
    store = ResultStore(str(root))
    seen: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        loc = Location(str(root))
        while not done.is_set():
            try:
                if not tables.has_runs(loc):
                    continue
                runs, curves, _ = read_tables(loc)
                seen.append(len(check_consistent(runs, curves)))
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                errors.append(exc)
                return

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(100):  # new trials, with reruns of earlier ones mixed in
            record(store, f"t{i % 70:03d}", float(i + 1))
    finally:
        done.set()
        t.join(timeout=60)
    assert not errors, errors[0]
    assert len(seen) > 10 and seen == sorted(seen)  # trials only ever appear, never vanish
    store.close()
    runs, curves, _ = read_tables(Location(str(root)))
    assert check_consistent(runs, curves) == {f"t{i % 70:03d}": float(i + 1) for i in range(100)}


def test_analysis_reads_a_store_with_parts_as_the_folded_one(tmp_path):
    from analysis.readers.inputs import load

    root = tmp_path / "st"
    store = ResultStore(str(root))
    for i in range(40):
        record(store, f"t{i:02d}", 1.0 + i / 100)
    assert n_parts(root) > 0
    with_parts = load(str(root))
    store.close()
    folded = load(str(root))
    pd.testing.assert_frame_equal(with_parts.all_runs, folded.all_runs)
    pd.testing.assert_frame_equal(with_parts.all_curves, folded.all_curves)
    assert len(folded.all_runs) == 40 and len(folded.all_curves) == 120


def test_a_damaged_part_is_named_and_left_untouched(tmp_path):
    root = tmp_path / "st"
    store = ResultStore(str(root))
    for i in range(40):
        record(store, f"t{i:02d}", 1.0)
    part = next((root / PARTS_DIR).glob("*.runs.parquet"))
    part.write_bytes(b"not parquet")
    with pytest.raises(StoreError, match=str(part)):
        read_tables(Location(str(root)))
    assert part.read_bytes() == b"not parquet"
