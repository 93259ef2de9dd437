"""`depthwidth analyze | plot | kaplan` end to end in subprocesses, on a CSV and a store.

Good input writes the report and exits 0; bad input exits 2 with one sentence naming the column
and row on stderr and writes nothing.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import synthetic

BIN = Path(sys.executable).parent


def depthwidth_cmd() -> list[str]:
    exe = BIN / "depthwidth"
    exe = str(exe) if exe.exists() else shutil.which("depthwidth")
    if exe is None:
        pytest.skip("the depthwidth console script is not installed (pip install -e .)")
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120).stdout
    if "analyze" not in help_text:
        pytest.skip("the depthwidth console script does not list `analyze` yet")
    return [exe]


def run(cmd, cwd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cwd)


def write_csv(path: Path, bad_row: int | None = None) -> Path:
    runs = synthetic.make_runs("two_regime", [1, 2, 3, 4, 5], [16, 32, 64, 128],
                               dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0), noise=0.02)
    df = runs[["depth", "width", "seed", "loss"]].copy()
    if bad_row is not None:
        df.loc[bad_row, "loss"] = -0.5
    df.to_csv(path, index=False)
    return path


def test_analyze_plot_kaplan_on_a_csv(tmp_path):
    cmd = depthwidth_cmd()
    csv = write_csv(tmp_path / "my_runs.csv")
    out = tmp_path / "out"
    res = run(cmd + ["analyze", str(csv), "--out", str(out), "--bootstrap", "20", "--seed", "1"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "20 runs analysed" in res.stdout and str(out / "report.md") in res.stdout
    for f in ("report.json", "report.md", "loss_vs_n.png", "loss_vs_n.pdf", "threshold.png"):
        assert (out / f).is_file(), f
    res = run(cmd + ["plot", str(out)], tmp_path)
    assert res.returncode == 0 and "phase_map" in res.stdout, res.stderr
    res = run(cmd + ["kaplan", str(out), "--bootstrap", "10"], tmp_path)
    assert res.returncode == 0 and "| alpha_N |" in res.stdout, res.stderr
    assert (out / "kaplan.json").is_file()


def test_bad_csv_exits_2_names_column_and_row_and_writes_nothing(tmp_path):
    cmd = depthwidth_cmd()
    csv = write_csv(tmp_path / "bad.csv", bad_row=6)
    out = tmp_path / "out"
    res = run(cmd + ["analyze", str(csv), "--out", str(out)], tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "column 'loss' row 7 (line 8 of the file) is -0.5" in lines[0]
    assert not out.exists() and not (tmp_path / "bad_analysis").exists()


def test_python_m_analysis_runs_without_the_simulator(tmp_path):
    csv = write_csv(tmp_path / "runs.csv")
    res = run([sys.executable, "-m", "analysis", "analyze", str(csv), "--bootstrap", "-1"], tmp_path)
    assert res.returncode == 2 and "--bootstrap = -1 is invalid" in res.stderr
    assert not (tmp_path / "runs_analysis").exists()
