"""Benchmark of `depthwidth sweep plan` on a grid of 10^6 candidate trials (six axes of 10).

Two cases through the CLI in a subprocess: the bare grid (refused at once: more trials than one
sweep plans, sweeps/plans/expand.py MAX_TRIALS) and the same grid with a `where` filter that keeps
5,600 trials (filtered while expanding, then planned). Prints wall and CPU seconds and the load.

    python bench/plan_scale.py   (--smoke: a 1,000-candidate grid, 80 trials kept)
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers import write_spec  # noqa: E402
from test_sweep_expand import big_grid  # noqa: E402  (the grid the expansion tests plan)

WHERE = "width % heads == 0 and depth <= 4 and seed < 2"
# the smoke run's grid: depth x width x seed, 1,000 candidates
SMOKE = {"lr": None, "train.warmup_steps": None, "train.weight_decay": None}


def timed(spec: Path) -> tuple[float, float, int, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "depthwidth.cli", "sweep", "plan", str(spec)], capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    first = (
        (res.stdout.splitlines() or [""])[0] if res.returncode == 0 else res.stderr.strip().splitlines()[-1]
    )
    return wall, cpu, res.returncode, first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="1,000 candidates")
    a = ap.parse_args()
    axes = SMOKE if a.smoke else None
    cases = {
        "bare grid": "",
        "filtered": WHERE + ("" if a.smoke else " and lr < 0.002 and weight_decay < 0.01"),
    }
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"{10 ** (3 if a.smoke else 6):,} candidate trials"
    )
    print("| case | exit | wall s | CPU s | first line |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for case, where in cases.items():
            spec = write_spec(Path(tmp), big_grid(where, "plan-scale", axes))
            wall, cpu, rc, first = timed(spec)
            print(f"| {case} | {rc} | {wall:.2f} | {cpu:.2f} | {first[:110]} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
