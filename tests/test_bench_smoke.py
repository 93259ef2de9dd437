"""Every benchmark script runs end to end with `--smoke` (a seconds-long run of its whole flow), so
the first time someone runs one by hand it does not stop on a bug in the script. A smoke run
prints its table and writes nothing: neither into the folder it runs in nor into docs/bench/.
The four that start Ray (sweep_overhead, cluster_overhead, sweep_scale, gpu_sweeps) are slow: most
of their minute is Ray's start-up. bench/gpu.py's smoke run is checked, table and all, in
tests/test_bench_gpu_script.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p.name for p in (REPO / "bench").glob("*.py"))
STARTS_RAY = {"sweep_overhead.py", "cluster_overhead.py", "sweep_scale.py", "gpu_sweeps.py"}
CHECKED_ELSEWHERE = {"gpu.py"}
# A line each smoke run prints when it has gone through to its end.
LAST_WORDS = {
    "analysis_speed.py": "threshold.base",
    "analysis_sensitivity.py": "sensitivity added:",
    "design_power.py": "design power vs independent check:",
    "cluster_overhead.py": "| node loss:",
    "data_sources.py": "| tokens (2^16 uint16, memmap) |",
    "pcfg_learnability.py": "| 1 | 32 | 5 |",
    "relrnn_scaling.py": "| step | train loss | val loss |",
    "seprank_rank.py": "| depth 8 width 1 |",
    "sweep_overhead.py": "store_500_rows_read_s",
    "train_throughput.py": "| 1 | 16 |",
    "report_html.py": "rows shown after the filter:",
    "cpu_threads.py": "cells in",
    "sweep_scale.py": "overhead_per_trial_s",
    "gpu_sweeps.py": "ddp_max_relative_difference",
    "transfer.py": "Target: the CompleteP optimum moves by at most one grid step",
    "analysis_rows.py": "report: ",
    "plan_scale.py": "load average after:",
    "design.py": "adaptive vs grid done in",
    "copy_probe.py": "| depth 1 x width 16 |",
    "wsd.py": "smoke: planted difference -0.0200, measured",
    "data_prepare.py": "`data prepare` / encode_batch_fast",
    "spec_list.py": "| the smoke spec planned in full |",
    "wsd_gain.py": "smoke: planted gain 0.050 to 0.110 over widths 16-128, measured",
    "copy_context.py": "smoke: planted final gains 0.005 and 1.005, measured",
}
NEEDS_BROWSER = {"report_html.py"}


def test_every_bench_script_has_a_smoke_run():
    for name in SCRIPTS:
        assert "--smoke" in (REPO / "bench" / name).read_text(), name
    assert set(SCRIPTS) == set(LAST_WORDS) | CHECKED_ELSEWHERE, "a new script needs its smoke check here"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[pytest.mark.slow] if n in STARTS_RAY else [])
        for n in SCRIPTS
        if n not in CHECKED_ELSEWHERE
    ],
)
def test_bench_script_smoke_run(name, tmp_path):
    if name in NEEDS_BROWSER:
        import browser

        if browser.find_browser() is None:
            pytest.skip("report.html is measured in Chromium with chromedriver, not installed here")
    docs = REPO / "docs" / "bench"
    before = {p.name: p.stat().st_mtime_ns for p in docs.iterdir()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        OMP_NUM_THREADS="1",
        MPLBACKEND="Agg",
        RAY_USAGE_STATS_ENABLED="0",
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    r = subprocess.run(
        [sys.executable, str(REPO / "bench" / name), "--smoke"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert LAST_WORDS[name] in r.stdout, r.stdout[-3000:]
    assert list(tmp_path.iterdir()) == []
    assert {p.name: p.stat().st_mtime_ns for p in docs.iterdir()} == before
