"""Trials of several data-parallel workers through Ray Train inside Tune (sweeps/running/distributed.py),
on CPU with gloo, through the real CLI on embedded Ray: one trial as 2 workers with half the batch
each, held after its first checkpoint while every port of the sweep's processes is checked to
listen on 127.0.0.1 alone (the workers' process group included), then one worker killed. Train
restarts both workers from that checkpoint, the row records 2 workers and the resume, and the stored curve is the curve of one
process training the whole batch (tests/test_distributed_train.py holds the tolerance)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pandas as pd
import pytest
from helpers import hook_env, spec_toml, starts, sweep_running, trial_ids, wait_for, write_spec
from test_distributed_train import RTOL
from test_security import assert_listens_on_loopback_only

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

# one trial as two workers with half the batch each
SPEC = spec_toml(
    "workers",
    train={"batch_size": 8, "eval_batches": 2},
    grid={"depth": [1], "width": [16]},
    budget={"steps": 20},
    resources={"cpus": 1, "workers": 2, "max_failures": 2},
)


def test_a_two_worker_trial_listens_on_loopback_only_and_resumes_with_both_workers_when_one_dies(
    tmp_path,
):
    spec = write_spec(tmp_path, SPEC, "w.toml")
    (tid,) = trial_ids(spec)
    store, hook = tmp_path / "store", tmp_path / "hook"
    env = {k: v for k, v in hook_env(dict(os.environ), hook).items() if k != "RAY_ADDRESS"}
    (hook / "hold").write_text(tid)  # rank 0 waits after its first checkpoint (step 5)
    with sweep_running(["run", str(spec), "--storage", str(store), "--no-analyze"], env) as proc:
        wait_for(lambda: (hook / f"{tid}.pid").exists(), 300, "rank 0's first checkpoint", proc)
        # Ray Train counts a reported checkpoint once its controller has registered it (it then
        # writes its checkpoint manager's snapshot); a worker killed before that restarts from
        # the one before
        wait_for(
            lambda: any(
                "checkpoint_" in p.read_text()
                for p in (store / "tune").glob(f"*/{tid}/checkpoint_manager_snapshot.json")
            ),
            120,
            "Ray Train to register the checkpoint",
            proc,
        )
        if Path("/proc/net/tcp").exists():  # Linux: the listening sockets are read from /proc
            assert_listens_on_loopback_only(proc.pid)
        os.kill(int((hook / f"{tid}.pid").read_text()), signal.SIGKILL)  # one of the two workers
        (hook / "hold").unlink()
        out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, out + err
    runs = pd.read_parquet(store / "runs.parquet").set_index("trial_id")
    row = runs.loc[tid]
    assert row["workers"] == 2 and row["status"] == "ok" and row["steps"] == 20
    assert row["resumed_from_step"] == 5
    log = (hook / "starts.log").read_text().split()
    assert [s for t, s in starts(hook) if t == tid] == [0, 5]
    assert log[4] == "2" and log[-1] == "2"  # both attempts ran as 2 workers
    assert not list((store / "tune").glob(f"*/{tid}"))  # finished: its checkpoints are gone

    from depthwidth.train import train
    from sweeps.plans.spec import load_spec

    (trial,) = load_spec(spec).trials
    alone = train(trial.model, trial.data, trial.train.replace(threads=1))
    curve = pd.read_parquet(store / "curves.parquet").sort_values("step")
    assert list(curve["step"]) == [5, 10, 15, 20]
    assert list(curve["val_loss"]) == pytest.approx([p["val_loss"] for p in alone.curve], rel=RTOL)
    assert row["final_train_loss"] == pytest.approx(alone.final_train_loss, rel=RTOL)
