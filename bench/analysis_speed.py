"""Benchmark of `analysis.reporting.report.analyze` on a planted sweep (run by hand, not in the tests).

The sweep is the one the performance target names: 1000 runs (10 depths × 25 widths × 4 seeds) with
100-point learning curves, losses from the two-regime law of docs/science.md §4 (b = 3) plus Kaplan's
step term, analysed with 1000 bootstrap refits. Prints the per-stage times as a markdown table.

    python bench/analysis_speed.py [--bootstrap 1000] [--out DIR]   (--smoke: 3x4 runs, 5 refits)

`--memory` instead measures the peak memory (ru_maxrss of a child process) of `analyze` against the
number of bootstrap replicates on two planted sweeps, beside the estimate the CLI bounds
`--bootstrap` with (analysis.fitting.fitcore.bootstrap_bytes).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis.fitting import synthetic
from analysis.reporting.report import analyze

PARAMS = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)
# (depths, widths, seeds, curve points per run) of the sweeps --memory measures
MEMORY_SWEEPS = [(4, 4, 1, 0), (4, 4, 1, 20), (6, 8, 2, 20)]


def peak_rss(depths: int, widths: int, seeds: int, points: int, boot: int) -> dict:
    """Peak resident memory of one `analyze` in a fresh process, and the sweep's size."""
    code = f"""
import json, resource, sys, tempfile
sys.path.insert(0, {str(Path(__file__).parent)!r})
from pathlib import Path
import analysis_speed as b
with tempfile.TemporaryDirectory() as tmp:
    store, runs, curves = b.planted_store(Path(tmp), {depths}, {widths}, {seeds}, {points})
    b.analyze(store, bootstrap={boot}, seed=0)
print(json.dumps(dict(runs=len(runs), points=len(curves), mb=resource.getrusage(
    resource.RUSAGE_SELF).ru_maxrss / 1024)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def planted_store(tmp: Path, depths: int, widths: int, seeds: int, points: int):
    w = np.unique(np.round(np.logspace(np.log10(16), np.log10(2048), widths)).astype(int))
    runs = synthetic.make_runs(
        "two_regime", range(1, depths + 1), w, PARAMS, seeds=tuple(range(seeds)), noise=0.01
    )
    curves = None
    if points:
        steps = np.unique(np.round(np.logspace(1, 4, points)).astype(int))
        runs, curves = synthetic.make_curves(runs, alpha_S=0.6, S_c=50.0, steps=steps)
    store = synthetic.write_store(tmp / "bench", runs, curves)
    return store, runs, curves if curves is not None else []


def memory(boots: tuple[int, int]) -> None:
    from analysis.fitting.fitcore import bootstrap_bytes

    print("| runs | curve points | bytes per replicate, measured | estimate (bootstrap_bytes) |")
    print("|---|---|---|---|")
    for sweep in MEMORY_SWEEPS:
        lo, hi = (peak_rss(*sweep, b) for b in boots)
        per = (hi["mb"] - lo["mb"]) * 2**20 / (boots[1] - boots[0])
        print(
            f"| {lo['runs']} | {lo['points']} | {per:,.0f} | "
            f"{bootstrap_bytes(1, lo['runs'], lo['points']):,.0f} |",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--depths", type=int, default=10)
    ap.add_argument("--widths", type=int, default=25)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="seconds: a 3 x 4 grid, 5 bootstrap refits")
    ap.add_argument("--memory", action="store_true", help="peak memory per bootstrap replicate")
    a = ap.parse_args()
    if a.memory:
        memory((0, 20) if a.smoke else (20000, 80000))
        return
    if a.smoke:
        a.bootstrap, a.depths, a.widths, a.seeds = 5, 3, 4, 1
    widths = np.unique(np.round(np.logspace(np.log10(16), np.log10(2048), a.widths)).astype(int))
    runs = synthetic.make_runs(
        "two_regime", range(1, a.depths + 1), widths, PARAMS, seeds=tuple(range(a.seeds)), noise=0.01
    )
    runs, curves = synthetic.make_curves(runs, alpha_S=0.6, S_c=50.0)
    with tempfile.TemporaryDirectory() as tmp:
        store = synthetic.write_store(Path(tmp) / "bench", runs, curves)
        t0 = time.perf_counter()
        rep = analyze(store, out_dir=a.out, bootstrap=a.bootstrap, seed=0)
        total = time.perf_counter() - t0
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True)
    print(
        f"machine: {cpu.stdout.strip() or platform.processor()}; load average "
        f"{open('/proc/loadavg').read().split()[0] if Path('/proc/loadavg').exists() else '?'}"
    )
    print(f"runs: {rep['n_runs']}, curve points: {len(curves)}, bootstrap: {a.bootstrap}")
    print("\n| stage | wall s | CPU s |\n|---|---|---|")
    for k, v in rep["timings_s"].items():
        print(f"| {k} | {v:.2f} | {rep['cpu_s'][k]:.2f} |")
    print(f"| analyze() call | {total:.2f} | |")
    methods = {
        "per-depth L(N)": {f["bootstrap_method"] for f in rep["power_laws"]["per_depth"].values()},
        "L(N,S)": {rep["learning_curves"]["fit"]["bootstrap_method"]},
        **{f"regimes.{k}": {m["bootstrap_method"]} for k, m in rep["regimes"]["models"].items()},
    }
    print("\nbootstrap method: " + "; ".join(f"{k} {'/'.join(sorted(v))}" for k, v in methods.items()))
    thr = rep["threshold"]
    if thr.get("base") is None or not thr.get("base_ci"):
        print(f"threshold.base not identified ({thr.get('reason', 'no interval')}; planted 3)")
    else:
        lo, hi = thr["base_ci"]
        print(f"threshold.base = {thr['base']:.4g} [{lo:.4g}, {hi:.4g}] (planted 3)")


if __name__ == "__main__":
    main()
