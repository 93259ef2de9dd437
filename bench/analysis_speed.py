"""Benchmark of `analysis.report.analyze` on a planted sweep (run by hand, not in the tests).

The sweep is the one the performance target names: 1000 runs (10 depths × 25 widths × 4 seeds) with
100-point learning curves, losses from the two-regime law of docs/science.md §4 (b = 3) plus Kaplan's
step term, analysed with 1000 bootstrap refits. Prints the per-stage times as a markdown table.

    python bench/analysis_speed.py [--bootstrap 1000] [--out DIR]   (--smoke: 3x4 runs, 5 refits)
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis import synthetic
from analysis.report import analyze

PARAMS = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--depths", type=int, default=10)
    ap.add_argument("--widths", type=int, default=25)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="seconds: a 3 x 4 grid, 5 bootstrap refits")
    a = ap.parse_args()
    if a.smoke:
        a.bootstrap, a.depths, a.widths, a.seeds = 5, 3, 4, 1
    widths = np.unique(np.round(np.logspace(np.log10(16), np.log10(2048), a.widths)).astype(int))
    runs = synthetic.make_runs("two_regime", range(1, a.depths + 1), widths, PARAMS,
                               seeds=tuple(range(a.seeds)), noise=0.01)
    runs, curves = synthetic.make_curves(runs, alpha_S=0.6, S_c=50.0)
    with tempfile.TemporaryDirectory() as tmp:
        store = synthetic.write_store(Path(tmp) / "bench", runs, curves)
        t0 = time.perf_counter()
        rep = analyze(store, out_dir=a.out, bootstrap=a.bootstrap, seed=0)
        total = time.perf_counter() - t0
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True)
    print(f"machine: {cpu.stdout.strip() or platform.processor()}; load average "
          f"{open('/proc/loadavg').read().split()[0] if Path('/proc/loadavg').exists() else '?'}")
    print(f"runs: {rep['n_runs']}, curve points: {len(curves)}, bootstrap: {a.bootstrap}")
    print("\n| stage | wall s | CPU s |\n|---|---|---|")
    for k, v in rep["timings_s"].items():
        print(f"| {k} | {v:.2f} | {rep['cpu_s'][k]:.2f} |")
    print(f"| analyze() call | {total:.2f} | |")
    methods = {"per-depth L(N)": {f["bootstrap_method"] for f in rep["power_laws"]["per_depth"].values()},
               "L(N,S)": {rep["learning_curves"]["fit"]["bootstrap_method"]},
               **{f"regimes.{k}": {m["bootstrap_method"]} for k, m in rep["regimes"]["models"].items()}}
    print("\nbootstrap method: " + "; ".join(f"{k} {'/'.join(sorted(v))}" for k, v in methods.items()))
    thr = rep["threshold"]
    if thr.get("base") is None or not thr.get("base_ci"):
        print(f"threshold.base not identified ({thr.get('reason', 'no interval')}; planted 3)")
    else:
        lo, hi = thr["base_ci"]
        print(f"threshold.base = {thr['base']:.4g} [{lo:.4g}, {hi:.4g}] (planted 3)")


if __name__ == "__main__":
    main()
