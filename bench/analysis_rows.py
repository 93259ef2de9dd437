"""Benchmark of `depthwidth analyze` on a large runs table: 200,000 rows over 50 shapes.

The table: 10 depths × 5 widths, 4 learning rates (a planted optimum, so the tuning selection
runs), 4 seeds, and 250 rows per run (repeated evaluations of the same run, the way a table
exported from a logger repeats a configuration), losses from the two-regime law of
docs/science.md §4 (b = 3). The CLI runs in a subprocess at the default bootstrap (200); the
wall time, the CPU time of the child and the machine's load are printed.

    python bench/analysis_rows.py [--rows-per-run 250] [--bootstrap 200]   (--smoke: 2,000 rows)
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from analysis.fitting import synthetic

PARAMS = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)
LRS = (3e-4, 1e-3, 3e-3, 1e-2)


def table(depths: int, widths: int, seeds: int, rows_per_run: int) -> pd.DataFrame:
    w = [16 * 2**k for k in range(widths)]
    runs = synthetic.make_runs(
        "two_regime", range(1, depths + 1), w, PARAMS, seeds=tuple(range(seeds)), noise=0.01
    )
    rng = np.random.default_rng(1)
    parts = []
    for lr in LRS:  # the optimum sits at 1e-3: 3% worse per decade away from it, squared
        r = runs[["depth", "width", "seed", "loss"]].assign(lr=lr)
        r["loss"] = r["loss"] * (1 + 0.03 * np.log10(lr / 1e-3) ** 2)
        parts.append(r)
    runs = pd.concat(parts, ignore_index=True)
    rep = runs.loc[runs.index.repeat(rows_per_run)].reset_index(drop=True)
    rep["loss"] = rep["loss"] * np.exp(rng.normal(0, 0.002, len(rep)))  # evaluation noise
    return rep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows-per-run", type=int, default=250)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--smoke", action="store_true", help="a 3 x 2 grid, 2,000 rows, 5 refits")
    a = ap.parse_args()
    dims = (3, 2, 2, 40) if a.smoke else (10, 5, 4, a.rows_per_run)
    boot = 5 if a.smoke else a.bootstrap
    df = table(*dims)
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "runs.csv"
        df.to_csv(csv, index=False)
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "depthwidth.cli",
                "analyze",
                str(csv),
                "--out",
                str(Path(tmp) / "out"),
                "--bootstrap",
                str(boot),
            ],
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"analyze failed ({res.returncode}): {res.stderr.strip()}")
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True)
    print(
        f"machine: {cpu.stdout.strip() or platform.processor()}, {os.cpu_count()} cores; load "
        f"average {load0:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(
        f"rows: {len(df):,} over {df.groupby(['depth', 'width']).ngroups} shapes "
        f"({len(LRS)} lr x {dims[2]} seeds x {dims[3]} rows per run); bootstrap {boot}"
    )
    print(f"analyze: {wall:.1f} s wall, {child.ru_utime + child.ru_stime:.1f} s CPU")
    print("progress lines (stderr):\n" + res.stderr.strip())
    print(res.stdout.strip())


if __name__ == "__main__":
    main()
