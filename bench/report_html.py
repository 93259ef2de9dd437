"""Benchmark of report.html in a headless Chromium (run by hand, not in the tests).

A planted sweep of 5,000 runs (10 depths × 25 widths × 20 seeds, two-regime law of
docs/science.md §4 with b = 3) with 50 evaluations each is analysed (`analyze`, no bootstrap: the
page is measured, not the fits); then the system's Chromium (Debian's chromium + chromium-driver,
through selenium) opens report.html from disk, and the script times the page load (navigation
start to the script's ready flag), a sort of the runs table, a filter, and drawing one shape's
curves. Each browser figure is the median of --repeats fresh loads.

    python bench/report_html.py [--smoke] [--repeats 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the browser helper

from analysis.fitting import synthetic  # noqa: E402
from analysis.reporting.report import analyze  # noqa: E402

PARAMS = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)

_TIMINGS = """
const t = performance.getEntriesByType('navigation')[0];
return {ready: window.reportReadyAt, dom: t.domContentLoadedEventEnd, load: t.loadEventEnd};
"""
_INTERACT = """
const t0 = performance.now();
document.querySelector('#runs-table th[data-col="final_val_loss"]').click();
const t1 = performance.now();
const f = document.getElementById('filter'); f.value = 'depth:4 seed<10';
f.dispatchEvent(new Event('input'));
const t2 = performance.now();
document.querySelector('#runs-table tbody tr').click();
const t3 = performance.now();
return {sort: t1 - t0, filter: t2 - t1, curves: t3 - t2,
        rows: document.querySelectorAll('#runs-table tbody tr').length,
        lines: document.querySelectorAll('#chart polyline.val').length};
"""


def make_store(folder: Path, depths: int, widths: int, seeds: int, evals: int) -> Path:
    w = np.unique(np.round(np.logspace(np.log10(16), np.log10(2048), widths)).astype(int))
    runs = synthetic.make_runs(
        "two_regime", range(1, depths + 1), w, PARAMS, seeds=tuple(range(seeds)), noise=0.01
    )
    steps = np.unique(np.round(np.logspace(1, 4, evals)).astype(int))
    runs, curves = synthetic.make_curves(runs, alpha_S=0.6, S_c=50.0, steps=steps)
    runs["lr"] = 1e-3
    return synthetic.write_store(folder / "bench", runs, curves)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="200 runs x 10 evaluations, one load")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    import browser

    dims = (4, 10, 5, 10) if a.smoke else (10, 25, 20, 50)
    repeats = 1 if a.smoke else a.repeats
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(Path(tmp), *dims)
        t0 = time.perf_counter()
        report = analyze(store, bootstrap=0)
        t_analyze = time.perf_counter() - t0
        page = Path(report["report_dir"]) / "report.html"
        size = page.stat().st_size
        loads, inter = [], []
        for _ in range(repeats):
            driver, profile = browser.start()
            try:
                driver.get(page.as_uri())
                loads.append(driver.execute_script(_TIMINGS))
                inter.append(driver.execute_script(_INTERACT))
                errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
                if errors:
                    raise SystemExit(f"console errors: {errors}")
            finally:
                browser.stop(driver, profile)
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True)
    print(
        f"machine: {cpu.stdout.strip() or platform.processor()}; load average "
        f"{open('/proc/loadavg').read().split()[0]}"
    )
    chromium = subprocess.run([browser.find_browser()[0], "--version"], capture_output=True, text=True)
    print(f"browser: {chromium.stdout.strip()}")
    print(
        f"runs: {report['n_runs']}, evaluations per run: {dims[3]}, report.html: {size / 1e6:.2f} MB "
        f"(analyze without bootstrap {t_analyze:.1f} s)"
    )
    med = lambda xs: statistics.median(xs)  # noqa: E731
    print(f"\n| step | median ms (of {repeats}) |\n|---|---|")
    print(f"| DOMContentLoaded | {med([x['dom'] for x in loads]):.0f} |")
    print(f"| load event | {med([x['load'] for x in loads]):.0f} |")
    print(f"| script ready (table + first chart drawn) | {med([x['ready'] for x in loads]):.0f} |")
    for k, label in (
        ("sort", f"sort {report['n_runs']} rows by loss"),
        ("filter", "filter `depth:4 seed<10`"),
        ("curves", "click a run: its shape's curves"),
    ):
        print(f"| {label} | {med([x[k] for x in inter]):.1f} |")
    print(f"\nrows shown after the filter: {inter[-1]['rows']}; curves drawn: {inter[-1]['lines']}")


if __name__ == "__main__":
    main()
