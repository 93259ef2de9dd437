"""bench/gpu.py is the one-call GPU check: on a machine without CUDA it must say so and exit 3,
and its whole flow (timing window, MFU table, report file) must work, checked here on the CPU
with --smoke, so the first GPU it meets does not find a bug in the script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "gpu.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_so_and_exits_3(tmp_path):
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "gpu.md")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 3
    assert r.stderr == "bench/gpu.py: no CUDA device is available on this machine; run it on a GPU host.\n"
    assert not (tmp_path / "gpu.md").exists()


def test_cpu_smoke_runs_the_whole_script(tmp_path):
    out = tmp_path / "gpu.md"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    rows = [line for line in out.read_text().splitlines() if line.startswith("| 128 |")]
    assert len(rows) == 1
    n, tok_s = rows[0].split("|")[2].strip(), float(rows[0].split("|")[3].replace(",", ""))
    assert n == "393,216" and tok_s > 0  # 12·L·d² at L = 2, d = 128


def test_bad_steps_are_refused(tmp_path):
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu-smoke", "--steps", "15", "--out", str(tmp_path / "gpu.md")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "--steps = 15 is invalid" in r.stderr
