"""A sweep larger than one Tune run (sweeps/running/service.py runs at most CHUNK_TRIALS trials per Tune
run, since Tune keeps every trial it has run in memory): on real embedded Ray with the limit
lowered to 2, five trials run as three Tune runs and are each stored once; a Ctrl-C during the
first run stops the sweep there, and the next `sweep run` finishes the rest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pandas as pd
import pytest
from helpers import hook_env, ray_sweep, starts, trial_ids, wait_for, write_spec

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

RUN = (
    "import sys, sweeps.running.service as s; s.CHUNK_TRIALS = 2; from sweeps import cli; "
    "sys.exit(cli.main(sys.argv[1:]))"
)


def command(spec, store) -> list[str]:
    """`sweep run` of `spec` into `store` through RUN, one trial at a time."""
    run = ["run", str(spec), "--storage", str(store), "--no-analyze", "--max-concurrent", "1"]
    return [sys.executable, "-c", RUN, *run]


def test_a_sweep_in_several_tune_runs_stores_each_trial_once_and_stops_on_ctrl_c(tmp_path):
    spec = write_spec(tmp_path, ray_sweep("chunks", [1], [8, 16, 24, 32, 40], steps=10), "c.toml")
    ids = trial_ids(spec)
    store, hook = tmp_path / "store", tmp_path / "hook"
    env = {k: v for k, v in hook_env(dict(os.environ), hook).items() if k != "RAY_ADDRESS"}
    (hook / "hold").write_text(ids[1])  # the second trial of the first Tune run waits
    proc = subprocess.Popen(
        command(spec, store), env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        wait_for(lambda: (hook / f"{ids[1]}.pid").exists(), 240, "the held trial", proc)
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        wait_for(lambda: proc.poll() is not None, 120, "the driver to stop")
        (hook / "hold").unlink()
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out + err
    assert "sweep was stopped" in out or "sweep was interrupted" in out
    assert "Kept: 1 finished trial in" in out  # the closing paragraph (sweeps/running/outcome.py)
    assert {t for t, _ in starts(hook)} == set(ids[:2])  # the later Tune runs never started
    assert list(pd.read_parquet(store / "runs.parquet")["trial_id"]) == [ids[0]]

    done = subprocess.run(command(spec, store), env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 trials to run (1 already in the store)" in done.stdout
    runs = pd.read_parquet(store / "runs.parquet")
    assert sorted(runs["trial_id"]) == sorted(ids) and runs["trial_id"].is_unique
    assert (runs["status"] == "ok").all()
    assert runs.set_index("trial_id").loc[ids[1], "resumed_from_step"] == 5  # from its checkpoint
    assert not any((store / "tune").glob("*/*/checkpoint_*"))  # finished: checkpoints cleared
