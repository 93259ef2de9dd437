"""Benchmark of `depthwidth sweep specs`: the list of bundled specs with their planned cost, as it
prints (costs kept in sweeps/bundled-costs.json while each spec is unchanged) against planning
every bundled spec in full, which is what the list did before and still does for a changed spec.

Both through a fresh interpreter in a subprocess, timed as wall and CPU seconds (the children's
user + system time), with the load average before and after. Target: the list in at most 2 s.

    python bench/spec_list.py   (--smoke: one run of each, the full planning of the smoke spec only)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXE = str(Path(sys.executable).parent / "depthwidth")
PLAN_ALL = (
    "import sys\n"
    "from sweeps.plans.bundled import bundled_specs\n"
    "from sweeps.plans.speccosts import planned\n"
    "names = sys.argv[1:] or list(bundled_specs())\n"
    "for n in names: planned(bundled_specs()[n])\n"
)


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of `cmd`, which must succeed and print nothing on stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd="/", timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0 or r.stderr:
        raise SystemExit(f"{cmd[:3]} failed ({r.returncode}): {r.stderr.strip()[:500]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="one run each; plan only the smoke spec")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    repeats = 1 if args.smoke else args.repeats
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    cases = [
        ("`depthwidth sweep specs` (kept costs)", [EXE, "sweep", "specs"]),
        (
            "every bundled spec planned in full" if not args.smoke else "the smoke spec planned in full",
            [sys.executable, "-c", PLAN_ALL] + (["smoke"] if args.smoke else []),
        ),
    ]
    print("| case | runs | wall s (median, min-max) | CPU s (median) |")
    print("|---|---|---|---|")
    for label, cmd in cases:
        runs = [timed(cmd) for _ in range(repeats)]
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(
            f"| {label} | {repeats} | {statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) "
            f"| {statistics.median(cpus):.2f} |"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
