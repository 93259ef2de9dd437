"""`sweep run SPEC --from TABLE` (sweeps/running/carry.py): a sweep moved to another machine with only its
exported runs table resumes without running a finished trial again, through the real CLI on a
local Ray; bad tables are refused with nothing written."""

from __future__ import annotations

import subprocess

import pandas as pd
import pytest
from helpers import run_sweep, spec_toml, write_spec


def carry_spec(widths: list[int]) -> str:
    """One depth, `widths` and two seeds of the tiny model, 20 steps a trial."""
    return spec_toml(
        "carry",
        train={"eval_every": 10, "steps": 20},
        grid={"depth": [1], "width": widths, "seed": [0, 1]},
        resources={"cpus": 1, "max_failures": 1},
    )


def _cli(*args: str) -> subprocess.CompletedProcess:
    return run_sweep(list(args), timeout=300)


@pytest.mark.slow
def test_a_moved_sweep_takes_its_finished_trials_from_the_table(tmp_path):
    first = write_spec(tmp_path, carry_spec([8, 16]), "first.toml")
    p = _cli("run", str(first), "--storage", str(tmp_path / "a"), "--no-analyze")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    table = tmp_path / "runs.csv"
    p = _cli("results", str(tmp_path / "a"), "--csv", str(table))
    assert p.returncode == 0, p.stderr
    shipped = pd.read_csv(table, dtype={"trial_id": str})
    assert len(shipped) == 4
    # on the new machine: a fresh store, the sweep extended by one width
    moved = write_spec(tmp_path, carry_spec([8, 16, 24]), "moved.toml")
    p = _cli("run", str(moved), "--storage", str(tmp_path / "b"), "--from", str(table), "--no-analyze")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"4 finished trial(s) carried from {table}" in p.stdout
    assert "2 trials to run (4 already in the store)" in p.stdout
    runs = pd.read_parquet(tmp_path / "b" / "runs.parquet")
    assert len(runs) == 6 and set(shipped["trial_id"]) < set(runs["trial_id"])
    carried = runs.set_index("trial_id").loc[shipped["trial_id"]]
    assert carried["final_val_loss"].tolist() == pytest.approx(shipped["final_val_loss"].tolist(), rel=1e-12)
    assert (carried["error"] == "").all() and (carried["status"] == "ok").all()
    # again: everything is held, nothing carried twice, nothing run
    p = _cli("run", str(moved), "--storage", str(tmp_path / "b"), "--from", str(table), "--no-analyze")
    assert p.returncode == 0, p.stderr
    assert "0 finished trial(s) carried" in p.stdout and "4 already in the store" in p.stdout
    assert "nothing to run" in p.stdout
    assert len(pd.read_parquet(tmp_path / "b" / "runs.parquet")) == 6


@pytest.mark.parametrize(
    "content, name, message",
    [
        (None, "none.csv", "no such file"),
        ("trial_id,depth\nabc,1\n", "short.csv", "lacks the column 'family'"),
        ("x", "runs.json", "ending in .csv or .parquet"),
    ],
)
def test_bad_tables_are_refused_with_nothing_written(tmp_path, content, name, message):
    spec = write_spec(tmp_path, carry_spec([8]), "s.toml")
    table = tmp_path / name
    if content is not None:
        table.write_text(content)
    p = _cli("run", str(spec), "--storage", str(tmp_path / "store"), "--from", str(table))
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr and "--from" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "store").exists()
