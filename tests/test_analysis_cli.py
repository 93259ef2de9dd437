"""`depthwidth analyze | plot | kaplan` end to end in subprocesses, on a CSV and a store.

Good input writes the report and exits 0; bad input exits 2 with one sentence naming the column
and row on stderr and writes nothing.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.fitting import synthetic

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
    runs = synthetic.make_runs(
        "two_regime",
        [1, 2, 3, 4, 5],
        [16, 32, 64, 128],
        dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0),
        noise=0.02,
    )
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
    # beside the report it read, in a folder of its own, named by its absolute path
    assert (tmp_path / "out_kaplan" / "kaplan.json").is_file() and not (out / "kaplan.json").exists()
    assert f"into {tmp_path / 'out_kaplan'}" in res.stdout


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


def test_a_table_without_shape_runs_the_shape_free_sections(tmp_path):
    """n_params,tokens,loss only: L(N, D) is fitted and drawn, every shape section says why not."""
    import json

    cmd = depthwidth_cmd()
    csv = tmp_path / "points.csv"
    synthetic.make_chinchilla(
        dict(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.37), n_sizes=8, n_budgets=6, seed=1
    ).to_csv(csv, index=False)
    out = tmp_path / "out"
    res = run(cmd + ["analyze", str(csv), "--out", str(out), "--bootstrap", "20"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "48 runs analysed (generic layout); no depth and width" in res.stdout
    assert "L(N, D) = E + A/N^alpha + B/D^beta: E = 1.8" in res.stdout
    r = json.loads((out / "report.json").read_text())
    assert r["chinchilla"]["status"] == "ok" and r["chinchilla"]["params"]["alpha"] > 0.3
    for key in ("regimes", "threshold", "power_laws", "regime_accounting"):
        assert r[key]["status"] == "absent" and "no depth and width" in r[key]["reason"], key
    assert (out / "chinchilla.png").stat().st_size > 20_000
    md = (out / "report.md").read_text()
    assert "## L(N, D)" in md and "Not analysed" in md
    res = run(cmd + ["plot", str(out)], tmp_path)
    assert res.returncode == 0 and "chinchilla" in res.stdout, res.stderr


def test_gemstones_lines_analyze_and_kaplan_into_a_folder_of_choice(tmp_path):
    cmd = depthwidth_cmd()
    data = tmp_path / "ro"
    data.mkdir()
    lines = synthetic.write_gemstones_lines(
        data / "curves.jsonl", shapes=[(L, d) for L in (2, 3, 4, 6) for d in (64, 128, 256)]
    )
    data.chmod(0o555)  # a read-only data folder: the report must go to --out
    try:
        out = tmp_path / "rep"
        res = run(cmd + ["kaplan", str(lines), "--out", str(out), "--bootstrap", "10"], tmp_path)
        assert res.returncode == 0, res.stderr
        assert (out / "report.json").is_file() and (out / "kaplan.json").is_file()
        assert "| alpha_S |" in res.stdout
        assert not any(p.name != "curves.jsonl" for p in data.iterdir())
    finally:
        data.chmod(0o755)


def test_bad_json_lines_exit_2_with_one_sentence(tmp_path):
    cmd = depthwidth_cmd()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"depth": 1, "width": 8, "loss": 2.0}\n{"oops"\n')
    res = run(cmd + ["analyze", str(bad), "--out", str(tmp_path / "o")], tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "bad.jsonl cannot be read as JSON lines" in res.stderr
    assert not (tmp_path / "o").exists()
