"""What the sensitivity check adds to `depthwidth analyze` (run by hand, not in the tests).

`analyze` refits the loss laws with each depth, width, token budget and seed left out
(analysis/laws/sensitivity.py). This runs `analyze` on the CPU study's table with the check and
without it, alternating, and prints the median wall and CPU seconds per stage and in total.

    python bench/analysis_sensitivity.py [--source CSV] [--bootstrap 200] [--repeat 3]
    (--smoke: a planted 3 x 4 grid, 5 bootstrap refits, one repeat)
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis.fitting import synthetic
from analysis.reporting.report import analyze

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "docs" / "studies" / "data" / "threshold-cpu.csv"


def one(source: Path, bootstrap: int, leave_out: bool) -> dict:
    """One `analyze` into a temporary folder: {stage: (wall s, CPU s)} plus the call's wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rep = analyze(source, out_dir=Path(tmp) / "r", bootstrap=bootstrap, seed=0, leave_out=leave_out)
        call = time.perf_counter() - t0
    out = {k: (v, rep["cpu_s"][k]) for k, v in rep["timings_s"].items()}
    out["analyze() call"] = (call, float("nan"))
    return out, rep["sensitivity"]


def planted(tmp: Path) -> Path:
    runs = synthetic.make_runs(
        "two_regime", (1, 2, 3), (16, 32, 64, 128), dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)
    )
    return synthetic.write_store(tmp / "planted", runs, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(STUDY))
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="seconds: a planted 3 x 4 grid, 5 refits")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = planted(Path(tmp)) if a.smoke else Path(a.source)
        if a.smoke:
            a.bootstrap, a.repeat = 5, 1
        runs = {True: [], False: []}
        for _ in range(a.repeat):
            for leave_out in (False, True):
                timing, sens = one(source, a.bootstrap, leave_out)
                runs[leave_out].append(timing)
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True)
    load = open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(f"machine: {cpu.stdout.strip() or platform.processor()}; load average {load}")
    print(
        f"source: {source if not a.smoke else 'planted 3 x 4'}; bootstrap {a.bootstrap}; {a.repeat} repeats"
    )
    print("\n| stage | without: wall s | CPU s | with: wall s | CPU s |\n|---|---|---|---|---|")
    totals = {}
    for stage in runs[True][0]:
        cells = []
        for leave_out in (False, True):
            w = np.median([r.get(stage, (0.0, 0.0))[0] for r in runs[leave_out]])
            c = np.median([r.get(stage, (0.0, 0.0))[1] for r in runs[leave_out]])
            cells += [f"{w:.2f}", "–" if np.isnan(c) else f"{c:.2f}"]
            totals[(stage, leave_out)] = (w, c)
        print(f"| {stage} | " + " | ".join(cells) + " |")
    off, on = totals[("total", False)], totals[("total", True)]
    print(f"\nrefits: {len(sens['refits'])} ({', '.join(sens['left_out'])}); {sens['headline']}")
    print(
        f"sensitivity added: {on[1] - off[1]:.2f} CPU s ({100 * (on[1] - off[1]) / off[1]:.0f}% of "
        f"analyze without it); the stage itself {totals[('sensitivity', True)][1]:.2f} CPU s, "
        f"{totals[('sensitivity', True)][0]:.2f} s wall (wall varies with the machine's load)"
    )


if __name__ == "__main__":
    main()
