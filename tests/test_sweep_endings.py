"""How a sweep's end reads on the terminal: the progress line counts the trials that run, Ray's
start-up notices stay out of the way without --verbose, and a sweep that ends abnormally (Ray's
memory monitor killing its trials, the store's disk filling up) prints one paragraph with what
happened, what is kept and the command that continues it, never a traceback. The memory monitor
and the full disk are real: a threshold no process can stay under, and a small tmpfs (root only)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
import time

import pandas as pd
import pytest
from helpers import hook_env, ray_sweep, run_sweep, sweep_running, trial_ids, wait_for, write_spec

from sweeps.running.outcome import continue_command, paragraph
from sweeps.running.progress import ProgressView


def test_log_lines_follow_each_start():
    """In a log (no terminal) a change of the running count is a line at once: drawn only at
    the 30 s throttle, the log showed "1 running" while two trials trained."""
    out, now = io.StringIO(), [0.0]
    view = ProgressView("p", {"a": 1, "b": 1, "c": 1}, {}, stream=out, tty=False, clock=lambda: now[0])
    view.started("a")
    now[0] = 0.1
    view.started("b")
    assert out.getvalue().splitlines()[-1].startswith("[p] 0/3 done | 2 running | 1 pending")
    now[0] = 0.2
    view.finished("a", "ok", 1.0)
    view.started("c")
    assert out.getvalue().splitlines()[-1].startswith("[p] 1/3 done | 2 running | 0 pending")


def test_paragraph_says_what_happened_what_is_kept_and_how_to_continue():
    cmd = continue_command("sweeps/smoke.toml", "results/x", None, 2)
    assert cmd == "depthwidth sweep run sweeps/smoke.toml --storage results/x --max-concurrent 2"
    text = paragraph(
        "s",
        n_todo=4,
        n_missing=2,
        n_stored=5,
        store="results/x",
        command=cmd,
        errors={"d2 w16": "killed by Ray's memory monitor: the node ran out of memory (OutOfMemoryError)"},
        max_failures=1,
    )
    assert "\n" not in text and text.startswith("[s] Ray's memory monitor killed 1 trial (d2 w16)")
    assert "Kept: 5 finished trials in results/x" in text and text.endswith(cmd)
    from runstore.files import StoreError

    text = paragraph(
        "s",
        n_todo=4,
        n_missing=1,
        n_stored=3,
        store="results/x",
        command=cmd,
        store_failure=StoreError(
            "results/x/runs.parquet could not be written (No "
            "space left on device); what was stored before is kept."
        ),
    )
    assert "the store could not be written (results/x/runs.parquet could not be written (No space" in text
    assert text.count("Continue with") + text.count("continue with") == 1


@pytest.mark.slow
def test_memory_monitor_kills_are_one_paragraph(tmp_path):
    spec = write_spec(tmp_path, ray_sweep("oom", [1], [8], steps=10), "oom.toml")
    spec.write_text(spec.read_text().replace("max_failures = 2", "max_failures = 0"))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # a threshold no process stays under: the memory monitor kills the trial's worker at once
    env.update(RAY_memory_usage_threshold="0.001", RAY_memory_monitor_refresh_ms="100")
    res = run_sweep(["run", str(spec), "--storage", str(tmp_path / "store"), "--no-analyze"], env)
    assert res.returncode == 1, res.stdout + res.stderr
    last = [line for line in res.stdout.splitlines() if line.startswith("[oom] Ray's memory monitor")]
    assert len(last) == 1, res.stdout
    assert "because the node ran out of memory" in last[0] and "Kept: 0 finished trials" in last[0]
    assert last[0].endswith(f"continue with: depthwidth sweep run {spec} --storage {tmp_path / 'store'}")
    assert "Traceback" not in res.stdout + res.stderr and "ERROR" not in res.stderr, res.stderr
    assert "Token authentication" not in res.stderr  # start-up notices need --verbose


def _can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = tempfile.mkdtemp(prefix="dw-mount-")
    ok = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe], capture_output=True
        ).returncode
        == 0
    )
    if ok:
        subprocess.run(["umount", probe], check=True)
    os.rmdir(probe)
    return ok


@pytest.mark.slow
@pytest.mark.skipif(not _can_mount(), reason="needs root and tmpfs mounts for a real full disk")
def test_full_disk_is_one_paragraph_and_loses_nothing_stored(ray_cluster, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)], check=True)
    try:
        store = disk / "store"
        spec = write_spec(tmp_path, ray_sweep("full", [1], [8, 16], steps=20, max_failures=0), "full.toml")
        first, held = trial_ids(spec)
        hook = tmp_path / "hook"
        env = hook_env(ray_cluster.env, hook)
        (hook / "hold").write_text(held)
        args = ["run", str(spec), "--address", ray_cluster.address, "--storage", str(store), "--no-analyze"]
        with sweep_running(args, env) as proc:
            wait_for(
                lambda: (hook / f"{held}.pid").exists() and (store / "runs.parquet").exists(),
                150,
                "one trial stored and the other held",
                proc,
            )
            stored = (store / "runs.parquet").read_bytes()
            with open(disk / "filler", "wb") as f:  # the disk fills up under the running sweep
                try:
                    while True:
                        f.write(b"\0" * (1 << 20))
                except OSError:
                    pass
            (hook / "hold").unlink()
            out, err = proc.communicate(timeout=180)
        assert proc.returncode == 1, out + err
        # the checkpoint a trial writes, or its row in the store, whichever hits the full disk first
        closing = [line for line in out.splitlines() if "continue with:" in line]
        assert len(closing) == 1 and closing[0].startswith(
            ("[full] The store's disk is full", "[full] The sweep stopped because the store")
        ), out
        assert "No space left on device" in closing[0] and "Kept: 1 finished trial in" in closing[0]
        assert closing[0].endswith(
            f"continue with: depthwidth sweep run {spec} --storage {store} --address {ray_cluster.address}"
        )
        assert "Traceback" not in out + err, err
        assert (store / "runs.parquet").read_bytes() == stored  # what was stored is intact
        assert list(pd.read_parquet(store / "runs.parquet")["trial_id"]) == [first]

        (disk / "filler").unlink()  # space again: the same command finishes the sweep
        done = run_sweep(args, ray_cluster.env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert sorted(pd.read_parquet(store / "runs.parquet")["trial_id"]) == sorted([first, held])
    finally:
        for _ in range(10):
            if subprocess.run(["umount", str(disk)], capture_output=True).returncode == 0:
                break
            time.sleep(1)
