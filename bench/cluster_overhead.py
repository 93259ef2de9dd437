"""Benchmark: what a real Ray cluster costs a small sweep, and how fast it recovers from node loss.

Runs by hand (never in the test suite), on this machine only, with the same two-node `ray start`
cluster as tests/test_multinode.py (1 CPU per node, token auth on, private temp dir):
  1. head start (GCS port open) and second-node join (both nodes alive to a driver);
  2. one 4-trial sweep through `--address` vs the same spec on embedded Ray (no address);
  3. node loss: from stopping the second node to its held trial restarting on the head.
Prints a markdown table; `--out docs/bench/cluster.md` also writes it with the machine and date.
`--smoke` runs the same flow with 10-step trials and without the embedded-Ray comparison sweep
(a check of the script; most of its minute is starting the two Ray nodes).

    python bench/cluster_overhead.py [--out docs/bench/cluster.md] [--smoke]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers import EXE, write_spec  # noqa: E402
from test_multinode import Cluster, descends_from, multinode_spec, stop_group  # noqa: E402


def sweep(spec: Path, storage: Path, env: dict, address: str | None, hook: Path | None = None):
    cmd = [EXE, "sweep", "run", str(spec), "--storage", str(storage), "--no-analyze"]
    cmd += ["--address", address] if address else []
    if hook is not None:
        env = {
            **env,
            "DEPTHWIDTH_TEST_HOOK_DIR": str(hook),
            "DEPTHWIDTH_TRIAL_HOOK": str(ROOT / "tests" / "trial_hook.py"),
        }
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def timed_sweep(spec: Path, storage: Path, env: dict, address: str | None) -> float:
    t = time.perf_counter()
    p = sweep(spec, storage, env, address)
    out, _ = p.communicate(timeout=900)
    if p.returncode != 0:
        raise SystemExit(out[-3000:])
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="also write the table to this markdown file")
    ap.add_argument("--smoke", action="store_true", help="the same flow with 10-step trials")
    args = ap.parse_args()
    short = {"steps": 10, "eval_every": 5} if args.smoke else {}
    work = Path(tempfile.mkdtemp(prefix="dwbench-"))
    rows: list[tuple[str, float]] = []
    c = Cluster(work)
    try:
        t = time.perf_counter()
        c._node("head", head=True)
        while True:
            try:
                socket.create_connection(("127.0.0.1", c.gcs), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        rows.append(("head start: `ray start --head` until the GCS port answers", time.perf_counter() - t))
        t = time.perf_counter()
        c._node("node2", head=False)
        out = subprocess.run(
            [sys.executable, "-c", __import__("test_multinode").NODES_SCRIPT, c.address],
            env=c.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert "worker" in out.stdout, out.stderr[-2000:]
        rows.append(
            (
                "second node join, seen alive by a driver (includes the driver's connect)",
                time.perf_counter() - t,
            )
        )

        spec = write_spec(work, multinode_spec("bench", work / "unused", **short), "bench.toml")
        cluster_s = timed_sweep(spec, work / "cluster", c.env, c.address)
        rows.append(("4-trial sweep through `--address` (2 nodes x 1 CPU)", cluster_s))
        if not args.smoke:
            env = {k: v for k, v in c.env.items() if not k.startswith("RAY_")}
            embedded_s = timed_sweep(spec, work / "embedded", env, None)
            rows.append(("same 4-trial sweep on embedded Ray (this machine's 2 CPUs)", embedded_s))

        hook = work / "hook"
        hook.mkdir()
        (hook / "hold").write_text("")
        spec2 = write_spec(work, multinode_spec("loss", work / "unused", **short), "loss.toml")
        p = sweep(spec2, work / "loss", c.env, c.address, hook)
        while len(list(hook.glob("*.pid"))) < 2:
            if p.poll() is not None:
                raise SystemExit(p.stdout.read()[-3000:])
            time.sleep(0.1)
        pids = {f.stem: int(f.read_text()) for f in hook.glob("*.pid")}
        lost = next(tid for tid, pid in pids.items() if descends_from(pid, c.procs["node2"].pid))
        t = time.perf_counter()
        stop_group(c.procs["node2"])
        stopped = time.perf_counter() - t
        (hook / "hold").unlink()
        while (
            sum(1 for line in (hook / "starts.log").read_text().splitlines() if line.split()[1] == lost) < 2
        ):
            time.sleep(0.1)
        resumed = time.perf_counter() - t
        p.communicate(timeout=900)
        rows.append(("node loss: SIGTERM to the second node until its processes are gone", stopped))
        rows.append(
            ("node loss: SIGTERM until the lost trial restarts on the head (from its checkpoint)", resumed)
        )
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    table = ["| step | seconds |", "|---|---:|"] + [f"| {name} | {s:.1f} |" for name, s in rows]
    text = "\n".join(table)
    print(text)
    if args.out:
        load = os.getloadavg()
        Path(args.out).write_text(
            "# Cluster overhead and node-loss recovery\n\n"
            f"Machine: {cpu}, {os.cpu_count()} cores; load average at the end {load[0]:.1f} "
            f"(other work was running). Date: {dt.date.today().isoformat()}.\n"
            f"Command: `python bench/cluster_overhead.py --out {args.out}`\n\n"
            "Tiny transformer trials (depth 1-2, width 16-32, 20 steps), 1 CPU each; the same\n"
            "two-node `ray start` cluster on one machine as tests/test_multinode.py.\n\n" + text + "\n"
        )


if __name__ == "__main__":
    main()
