"""The sweep service on real Ray (a head started by the `ray_cluster` fixture, and embedded Ray):
a killed trial worker, a killed driver, extending a finished sweep, a sweep through `--address`
and through the Jobs API with a token, and a resource request no node can satisfy.
Every run is the real CLI in a subprocess; models are tiny and trials last a few steps."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from helpers import (
    hook_env,
    ray_sweep,
    run_args,
    run_sweep,
    starts,
    sweep_argv,
    sweep_running,
    trial_ids,
    wait_for,
    write_spec,
)

pytest.importorskip("ray")

pytestmark = pytest.mark.slow


def test_killed_worker_restarts_trial_from_checkpoint(ray_cluster, tmp_path):
    spec = write_spec(tmp_path, ray_sweep("killworker", [1], [8, 16], steps=30), "kw.toml")
    store = tmp_path / "store"
    victim, other = trial_ids(spec)
    hook = tmp_path / "hook"
    env = hook_env(ray_cluster.env, hook)
    (hook / "hold").write_text(victim)  # the victim waits after its first checkpoint (step 5)
    args = ["run", str(spec), "--address", ray_cluster.address, "--storage", str(store), "--no-analyze"]
    with sweep_running(args, env) as proc:
        wait_for(lambda: (hook / f"{victim}.pid").exists(), 150, "the victim's checkpoint", proc)
        os.kill(int((hook / f"{victim}.pid").read_text()), signal.SIGKILL)
        (hook / "hold").unlink()
        out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, out + err
    assert "lost its worker" in out
    runs = pd.read_parquet(store / "runs.parquet")
    assert sorted(runs["trial_id"]) == sorted([victim, other])  # each trial exactly once
    row = runs.set_index("trial_id").loc[victim]
    assert row["status"] == "ok" and row["steps"] == 30 and row["resumed_from_step"] == 5
    attempts = [s for t, s in starts(hook) if t == victim]
    assert attempts == [0, 5]  # a fresh start, then a restart from the step-5 checkpoint
    curve = pd.read_parquet(store / "curves.parquet")
    assert list(curve.loc[curve["trial_id"] == victim, "step"]) == [5, 10, 15, 20, 25, 30]
    assert not list((store / "tune").glob(f"*/{victim}"))  # finished: its checkpoints are gone


def interrupted_sweep(ray_cluster, tmp_path: Path, name: str, hold_at: str = ""):
    """A 3-trial sweep, one trial at a time, whose driver is killed while the last trial waits
    at its checkpoint (the first one, or step `hold_at`). Returns the run's CLI arguments, its
    environment, the hook folder, the trial ids and runs.parquet's bytes just before the kill."""
    spec = write_spec(tmp_path, ray_sweep(name, [1], [8, 12, 16], steps=20), f"{name}.toml")
    ids = trial_ids(spec)
    hook = tmp_path / "hook"
    env = hook_env(ray_cluster.env, hook)
    (hook / "hold").write_text(ids[-1] + (f"@{hold_at}" if hold_at else ""))
    args = ["run", str(spec), "--address", ray_cluster.address, "--storage", str(tmp_path / "store")]
    args += ["--max-concurrent", "1", "--no-analyze"]  # one trial at a time
    with sweep_running(args, env, new_session=True) as proc:
        wait_for(lambda: (hook / f"{ids[-1]}.pid").exists(), 150, "the last trial's checkpoint", proc)
        before_bytes = (tmp_path / "store" / "runs.parquet").read_bytes()
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, mid-sweep
        proc.wait(timeout=30)
    # Ray ends a dead driver's workers, but not at once on a busy machine: the held trial must not
    # train on (and write later checkpoints) once the hold is lifted, so it ends here for certain
    with contextlib.suppress(ProcessLookupError):
        os.kill(int((hook / f"{ids[-1]}.pid").read_text()), signal.SIGKILL)
    (hook / "hold").unlink()
    return args, env, hook, ids, before_bytes


def test_killed_driver_rerun_runs_only_missing_trials(ray_cluster, tmp_path):
    args, env, hook, (first, second, last), before_bytes = interrupted_sweep(
        ray_cluster, tmp_path, "killdriver"
    )
    store = tmp_path / "store"
    assert (store / "runs.parquet").read_bytes() == before_bytes
    before = pd.read_parquet(store / "runs.parquet")
    assert sorted(before["trial_id"]) == sorted([first, second])

    done = run_sweep(args, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 trials to run (2 already in the store)" in done.stdout
    after = pd.read_parquet(store / "runs.parquet").set_index("trial_id")
    assert sorted(after.index) == sorted([first, second, last])
    pd.testing.assert_frame_equal(
        after.loc[before["trial_id"]].reset_index(), before.reset_index(drop=True), check_like=True
    )
    attempts = starts(hook)
    assert [t for t, _ in attempts].count(first) == 1 and [t for t, _ in attempts].count(second) == 1
    resumed = [s for t, s in attempts if t == last]
    assert resumed == [0, 5]  # the rerun picked up the interrupted trial's checkpoint
    assert after.loc[last, "resumed_from_step"] == 5 and after.loc[last, "steps"] == 20


def test_a_damaged_newest_checkpoint_falls_back_to_an_older_one(ray_cluster, tmp_path):
    """Interrupt a sweep, truncate an unfinished trial's newest checkpoint: the rerun resumes it
    from the older intact one and says so; the checkpoints of the trials the killed driver had
    already stored are deleted by the rerun."""
    args, env, hook, (first, second, last), _ = interrupted_sweep(
        ray_cluster, tmp_path, "damaged", hold_at="10"
    )  # steps 5, 10 saved
    store = tmp_path / "store"
    assert sorted(pd.read_parquet(store / "runs.parquet")["trial_id"]) == sorted([first, second])
    assert list((store / "tune").glob(f"*/{first}")) and list((store / "tune").glob(f"*/{second}"))
    newest = sorted((store / "tune").glob(f"*/{last}/checkpoint_*"))[-1] / "state.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])

    done = run_sweep(args, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resumes from its checkpoint at step 10" in done.stdout
    note_start = "its checkpoint at step 10 could not be read ("
    assert note_start in done.stdout and "; resumed from step 5 instead" in done.stdout
    row = pd.read_parquet(store / "runs.parquet").set_index("trial_id").loc[last]
    assert row["status"] == "ok" and row["steps"] == 20 and row["resumed_from_step"] == 5
    assert row["resume_note"].startswith(note_start) and row["resume_note"].endswith(
        "resumed from step 5 instead"
    )
    assert [s for t, s in starts(hook) if t == last] == [0, 5]
    assert not [p for t in (first, second, last) for p in (store / "tune").glob(f"*/{t}")]


def test_extend_finished_sweep_runs_only_new_points(ray_cluster, tmp_path):
    store = tmp_path / "store"
    hook = tmp_path / "hook"
    spec = write_spec(tmp_path, ray_sweep("extend", [1, 2], [8], steps=10), "ext.toml")
    embedded = {k: v for k, v in hook_env(dict(os.environ), hook).items() if k != "RAY_ADDRESS"}
    first = run_sweep(["run", str(spec), "--storage", str(store), "--no-analyze"], embedded)
    assert first.returncode == 0, first.stdout + first.stderr  # embedded Ray: no address
    old_ids = set(trial_ids(spec))
    before = pd.read_parquet(store / "runs.parquet")
    spec_text_before = (store / "spec.toml").read_text()

    # one more width, and a point whose learning rate makes it diverge at once
    diverging = '[[points]]\ndepth = 1\nwidth = 8\n"train.lr" = 1e4\n'
    spec = write_spec(tmp_path, ray_sweep("extend", [1, 2], [8, 16], steps=10, extra=diverging), "ext.toml")
    new_ids = set(trial_ids(spec)) - old_ids
    assert len(new_ids) == 3
    cluster_env = hook_env(ray_cluster.env, hook)
    second = run_sweep(
        ["run", str(spec), "--address", ray_cluster.address, "--storage", str(store), "--no-analyze"],
        cluster_env,
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "3 trials to run (2 already in the store)" in second.stdout and "1 diverged" in second.stdout
    started = [t for t, _ in starts(hook)]
    assert len(started) == 5 and set(started[:2]) == old_ids and set(started[2:]) == new_ids
    after = pd.read_parquet(store / "runs.parquet").set_index("trial_id")
    assert set(after.index) == old_ids | new_ids
    assert sorted(after["status"]) == ["diverged", "ok", "ok", "ok", "ok"]
    # `sweep plan` and the stored rows count training FLOPs with one formula (accounting.py)
    from sweeps.plans.plan import plan_rows
    from sweeps.plans.spec import load_spec

    for row in plan_rows(load_spec(spec)):
        stored = after.loc[row.trial_id]
        if stored["status"] == "ok":
            assert stored["flops"] == pytest.approx(row.flops, rel=1e-12), row.trial_id
            assert stored["tokens"] == row.tokens
    pd.testing.assert_frame_equal(
        after.loc[before["trial_id"]].reset_index(), before.reset_index(drop=True), check_like=True
    )
    spec_text = (store / "spec.toml").read_text()
    assert spec_text.startswith(spec_text_before) and "# ---- extension submitted" in spec_text
    assert "# width = [8, 16]" in spec_text
    again = run_sweep(["run", str(spec), "--storage", str(store), "--no-analyze"], embedded)
    assert again.returncode == 0 and "nothing to run" in again.stdout  # no Ray needed at all
    # --rerun names one stored trial: only it runs again, and its row is replaced
    target = sorted(old_ids)[0]
    rerun = run_sweep(
        run_args(spec, store, "--no-analyze", "--rerun", target, address=ray_cluster.address), cluster_env
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert [t for t, _ in starts(hook)][5:] == [target]
    final = pd.read_parquet(store / "runs.parquet").set_index("trial_id")
    assert len(final) == 5 and final.loc[target, "wall_s"] != after.loc[target, "wall_s"]  # a new row


def test_relative_text_path_is_read_from_the_specs_folder(ray_cluster, tmp_path):
    """Tune runs each trial in its own folder, and the sweep may start from any folder: a spec's
    relative data path means the spec file's folder, and the stored config names the file read."""
    text = {"source": "text", "path": "corpus.txt", "vocab_size": None}
    spec = write_spec(tmp_path / "specs", ray_sweep("textrel", [1], [8], steps=10, data=text), "text.toml")
    (tmp_path / "specs" / "corpus.txt").write_text("to be or not to be, that is the question. " * 200)
    store = tmp_path / "store"
    r = subprocess.run(
        sweep_argv(
            "run", str(spec), "--address", ray_cluster.address, "--storage", str(store), "--no-analyze"
        ),
        env=ray_cluster.env,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    runs = pd.read_parquet(store / "runs.parquet")
    assert list(runs["status"]) == ["ok"], runs["error"].tolist()
    assert f'"path": "{tmp_path / "specs" / "corpus.txt"}"' in runs["data_config"].iloc[0]


def test_submit_through_jobs_api_with_token(ray_cluster, tmp_path):
    """A spec with a `where` filter on config fields goes through the Jobs API with a token and
    the job succeeds: the job runs the spec's own text (the store keeps it verbatim)."""
    if ray_cluster.dashboard is None:
        pytest.skip("the Ray Jobs API needs the dashboard: pip install 'ray[default]'")
    spec = write_spec(tmp_path, ray_sweep("jobsweep", [1], [8, 16, 32], steps=10), "job.toml")
    spec.write_text('where = "width % heads == 0 and width <= 16"\n' + spec.read_text())
    assert len(trial_ids(spec)) == 2
    store = tmp_path / "store"
    no_token = {
        k: v
        for k, v in ray_cluster.env.items()
        if k not in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")
    }
    no_token["HOME"] = str(tmp_path / "home")  # no ~/.ray/auth_token either
    refused = run_sweep(
        ["submit", str(spec), "--address", ray_cluster.dashboard, "--storage", str(store)], no_token
    )
    assert refused.returncode == 2
    assert "requires a token and none was found" in refused.stderr
    assert "RAY_AUTH_TOKEN" in refused.stderr and "~/.ray/auth_token" in refused.stderr
    assert ray_cluster.token not in refused.stdout + refused.stderr
    assert not store.exists()

    sub = run_sweep(
        ["submit", str(spec), "--address", ray_cluster.dashboard, "--storage", str(store), "--no-analyze"],
        ray_cluster.env,
    )
    assert sub.returncode == 0, sub.stdout + sub.stderr
    assert ray_cluster.token not in sub.stdout + sub.stderr
    job_id = sub.stdout.split(" as job ")[1].split(";")[0]

    def finished() -> bool:
        st = run_sweep(["status", job_id, "--address", ray_cluster.dashboard], ray_cluster.env)
        assert st.returncode == 0, st.stderr
        return any(s in st.stdout for s in ("SUCCEEDED", "FAILED", "STOPPED"))

    wait_for(finished, 240, "the job to end")
    logs = run_sweep(["logs", job_id, "--address", ray_cluster.dashboard], ray_cluster.env)
    st = run_sweep(["status", job_id, "--address", ray_cluster.dashboard], ray_cluster.env)
    assert "SUCCEEDED" in st.stdout, logs.stdout
    assert "2 trials to run" in logs.stdout
    runs = pd.read_parquet(store / "runs.parquet")
    assert sorted(runs["trial_id"]) == sorted(trial_ids(spec))
    assert (runs["status"] == "ok").all() and (runs["node_ip"] != "").all()
    assert (store / "spec.toml").read_text() == spec.read_text()


def test_cluster_refusals_write_nothing(ray_cluster, tmp_path):
    spec = write_spec(tmp_path, ray_sweep("toobig", [1], [8]), "big.toml")
    spec.write_text(spec.read_text().replace("cpus = 1", "cpus = 64"))
    store = tmp_path / "store"
    res = run_sweep(
        ["run", str(spec), "--address", ray_cluster.address, "--storage", str(store)], ray_cluster.env
    )
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "depthwidth: error: resources.cpus = 64 is invalid: no node of the "
        "cluster has that many CPUs (the largest has 2)."
    )
    # a CPU trial larger than the memory of every node (its row fits the store's counts)
    wide = write_spec(tmp_path, ray_sweep("toowide", [1], [100_000_000]), "wide.toml")
    res = run_sweep(
        ["run", str(wide), "--address", ray_cluster.address, "--storage", str(store)], ray_cluster.env
    )
    assert res.returncode == 2
    assert res.stderr.startswith(
        f"depthwidth: error: {wide}: the trial at depth=1, width=100000000 is "
        f"invalid: it needs about 1.92e+09 GB to train, more than the "
    )
    assert res.stderr.endswith(" GB the largest Ray node had free when Ray started.\n")
    no_token = {k: v for k, v in ray_cluster.env.items() if not k.startswith("RAY_AUTH")}
    no_token["HOME"] = str(tmp_path / "home")
    res = run_sweep(["run", str(spec), "--address", ray_cluster.address, "--storage", str(store)], no_token)
    assert res.returncode == 2
    assert res.stderr.strip() == (
        f"depthwidth: error: the Ray cluster at {ray_cluster.address} requires a token and none was "
        "found: put the cluster's token in the RAY_AUTH_TOKEN environment variable or in "
        "~/.ray/auth_token (or point RAY_AUTH_TOKEN_PATH at a file holding it); `ray get-auth-token` "
        "on the head node prints it."
    )
    assert not store.exists()
