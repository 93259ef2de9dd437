"""Benchmark of `depthwidth design`: its default run's time, and its power at b = 3 against an
independent planted check through `analyze` (run by hand, not in the tests).

The check plants its own replicates at b = 3 (the generator of analysis/power/design.py, other noise
draws than design's) on the trials `sweep plan` expands, passes each through
analysis.reporting.report.analyze (the function behind `depthwidth analyze`, report and figures included)
and counts the replicates that claim a threshold whose interval holds 3.

    python bench/design_power.py [--spec sweeps/threshold.toml] [--replicates 50] [--write]
    python bench/design_power.py --smoke      (a tiny spec, 2 replicates, 10 bootstrap refits)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
EXE = str(Path(sys.executable).parent / "depthwidth")
SMOKE_SPEC = """name = "smoke-design"
where = "depth <= 3 * log3(width)"
[model]
family = "transformer"
heads = 2
seq_len = 32
parametrization = "completep"
base_width = 16
base_depth = 2
[data]
source = "pcfg"
[train]
batch_size = 8
[grid]
depth = [1, 2, 3, 4, 6]
width = [16, 32, 64]
lr = [1e-3, 3e-3, 1e-2]
seed = [0, 1]
[budget]
tokens_per_param = 20
min_steps = 50
"""


def run_design(spec: str, args: list[str]) -> tuple[dict, float, float]:
    """`depthwidth design SPEC --json ...` in a subprocess: (its object, wall s, CPU s of it and
    its workers)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([EXE, "design", spec, "--json", *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        sys.exit(f"design failed: {res.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(res.stdout), wall, cpu


def _check_one(task: tuple) -> dict:
    """One independent replicate through analyze: planted at b, written as CSV, analysed."""
    from analysis.power import design as dz
    from analysis.reporting.report import analyze

    trials, model, b, rep, seed, bootstrap = task
    table = dz.planted_table(trials, b, model, np.random.default_rng([seed, rep]))
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "planted.csv"
        table.to_csv(csv, index=False)
        thr = analyze(csv, out_dir=Path(tmp) / "report", bootstrap=bootstrap, seed=rep)["threshold"]
    ci = thr.get("base_ci") or [None, None]
    claimed = bool(thr.get("claimed"))
    return {"claimed": claimed, "covers": bool(claimed and ci[0] <= b <= ci[1])}


def independent_check(
    spec_path: str, b: float, replicates: int, seed: int, bootstrap: int, jobs: int
) -> dict:
    import multiprocessing as mp

    from analysis.power import design as dz
    from sweeps.designing.design_plan import default_model, trials_frame
    from sweeps.plans.spec import load_spec

    spec = load_spec(spec_path)
    trials, _ = trials_frame(spec)
    model = dz.null_law(trials, default_model(spec, trials, None))
    tasks = [(trials, model, b, r, seed, bootstrap) for r in range(replicates)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) as ex:
        rows = list(ex.map(_check_one, tasks))
    k = sum(r["claimed"] and r["covers"] for r in rows)
    return {
        "power": k / replicates,
        "se": math.sqrt(k / replicates * (1 - k / replicates) / replicates),
        "claimed": sum(r["claimed"] for r in rows) / replicates,
        "replicates": replicates,
        "wall_s": time.perf_counter() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(REPO / "sweeps" / "threshold.toml"))
    ap.add_argument("--replicates", type=int, default=50, help="replicates of the independent check")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument(
        "--design-json", default=None, help="a `design --json` object already computed (skips timing the run)"
    )
    ap.add_argument(
        "--design-times",
        default=None,
        metavar="WALL,CPU",
        help="with --design-json: the wall and CPU seconds that run took",
    )
    ap.add_argument(
        "--check-json",
        default=None,
        help="read the independent check from this JSON if it exists, else run it and save it there",
    )
    ap.add_argument("--check-only", action="store_true", help="run the check alone (with --check-json)")
    ap.add_argument("--write", action="store_true", help="write docs/bench/design-power.md")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    design_args: list[str] = []
    tmp = None
    if a.smoke:
        tmp = tempfile.TemporaryDirectory()
        a.spec = str(Path(tmp.name) / "smoke.toml")
        Path(a.spec).write_text(SMOKE_SPEC)
        a.replicates, a.bootstrap, a.write = 2, 10, False
        design_args = ["--effects", "3", "--replicates", "2", "--bootstrap", "10"]
    load0 = os.getloadavg()[0]
    if a.check_json and Path(a.check_json).exists():
        chk = json.loads(Path(a.check_json).read_text())
    else:
        chk = independent_check(a.spec, 3.0, a.replicates, 20261202, a.bootstrap, a.jobs)
        if a.check_json:
            Path(a.check_json).write_text(json.dumps(chk))
    if a.check_only:
        print(json.dumps(chk))
        return
    if a.design_json:
        d = json.loads(Path(a.design_json).read_text())
        wall, cpu = map(float, a.design_times.split(",")) if a.design_times else (float("nan"), float("nan"))
    else:
        d, wall, cpu = run_design(a.spec, design_args)
    p, se = d["power"]["3.0"], d["power_mc"]["3.0"]["se"]
    z = (p - chk["power"]) / max(math.hypot(se, chk["se"]), 1e-9)
    fc = d["false_claim"]
    verdict = "agree" if abs(z) < 2 else "DISAGREE"
    rows = [
        ("spec", Path(a.spec).name),
        ("design wall time (s)", f"{wall:.0f}"),
        ("design CPU time, all processes (s)", f"{cpu:.0f}"),
        ("load average at the start (1 min)", f"{load0:.1f}"),
        ("design replicates per case", ", ".join(f"{k}: {v}" for k, v in d["replicates"].items())),
    ]
    rows += [
        (
            f"design power at b = {k} (median interval width)",
            f"{v:.2f} ± {d['power_mc'][k]['se']:.2f} ({d['median_interval_width'][k] or float('nan'):.3g})",
        )
        for k, v in d["power"].items()
    ]
    rows += [
        ("design false claims under the null", f"{fc['rate']:.2f} ± {fc['se']:.2f}"),
        (
            "independent check through analyze: power at b = 3",
            f"{chk['power']:.2f} ± {chk['se']:.2f} ({chk['replicates']} replicates, {chk['wall_s']:.0f} s)",
        ),
        ("difference in Monte Carlo standard errors", f"{z:+.2f} ({verdict})"),
    ]
    table = "| quantity | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    print(table)
    print("design power vs independent check:", "agree" if abs(z) < 2 else "disagree")
    if a.write:
        page = REPO / "docs" / "bench" / "design-power.md"
        page.write_text(
            "# `depthwidth design`: time and agreement with an independent check\n\n"
            f"`python bench/design_power.py --write` on {platform.machine()} "
            f"({len(os.sched_getaffinity(0))} CPUs), {time.strftime('%Y-%m-%d', time.gmtime())}, "
            f"Python {platform.python_version()}.\n\n" + table + "\n\n" + d.get("advice", "") + "\n"
        )


if __name__ == "__main__":
    main()
