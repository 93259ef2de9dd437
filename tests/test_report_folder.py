"""A report folder always holds one consistent report: `analyze --out D` publishes it as a whole,
removes what an earlier report wrote there and this one did not, keeps (and names) the finished
report when it cannot be published, leaves no working folder when killed, and `plot` refuses to
draw data that changed since the fit. The real `depthwidth` console script in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import EXE, cli, sentence

from analysis.fitting import synthetic

PLANTED = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)


def shaped_csv(path: Path) -> Path:
    runs = synthetic.make_runs("two_regime", [1, 2, 3, 4], [16, 32, 64], PLANTED, noise=0.02)
    runs[["depth", "width", "seed", "loss"]].to_csv(path, index=False)
    return path


def shapeless_csv(path: Path) -> Path:
    synthetic.make_chinchilla(
        dict(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.37), n_sizes=6, n_budgets=4, seed=1
    ).to_csv(path, index=False)
    return path


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_second_dataset_replaces_the_whole_report_and_keeps_other_files(tmp_path):
    out = tmp_path / "D"
    r = cli("analyze", shaped_csv(tmp_path / "a.csv"), "--out", out, "--bootstrap", "5")
    assert r.returncode == 0, r.stderr
    first = set(listing(out))
    assert {"threshold.png", "phase_map.pdf", "report.json", "report-files.json"} <= first
    (out / "notes.txt").write_text("mine")
    r = cli("analyze", shapeless_csv(tmp_path / "b.csv"), "--out", out, "--bootstrap", "5")
    assert r.returncode == 0, r.stderr
    files = json.loads((out / "report-files.json").read_text())["files"]
    assert listing(out) == sorted(files + ["notes.txt", "report-files.json"])
    assert "threshold.png" not in files and "chinchilla.png" in files  # nothing of the first is left
    assert json.loads((out / "report.json").read_text())["source"].endswith("b.csv")
    assert not [p for p in tmp_path.iterdir() if "depthwidth" in p.name]  # no working folder left


def test_a_report_folder_from_before_the_manifest_is_cleared_by_its_figure_list(tmp_path):
    out = tmp_path / "D"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"source": "x", "figures": {"written": ["old_fig"]}}))
    for name in ("old_fig.png", "old_fig.pdf", "report.md", "keep.png"):
        (out / name).write_text("old")
    r = cli("analyze", shapeless_csv(tmp_path / "b.csv"), "--out", out, "--bootstrap", "5")
    assert r.returncode == 0, r.stderr
    assert "old_fig.png" not in listing(out) and "old_fig.pdf" not in listing(out)
    assert (out / "keep.png").read_text() == "old"  # not the report's: left alone


def test_a_report_that_cannot_be_published_is_kept_and_named_and_nothing_is_copied(tmp_path):
    out = tmp_path / "D"
    (out / "report.json").mkdir(parents=True)
    r = cli("analyze", shaped_csv(tmp_path / "a.csv"), "--out", out, "--bootstrap", "5")
    msg = sentence(r)
    assert msg.startswith(
        f"{out} could not be written ({out / 'report.json'} is a folder, where "
        f"the report writes a file); the finished report is kept in "
    )
    kept = Path(msg.rpartition(" kept in ")[2].rstrip("."))
    assert kept.is_dir() and (kept / "report.json").is_file() and (kept / "threshold.png").is_file()
    assert listing(out) == ["report.json"]  # not one figure was copied beside the folder
    r = cli("analyze", shaped_csv(tmp_path / "a.csv"), "--out", tmp_path / "E", "--bootstrap", "5")
    assert r.returncode == 0 and kept.is_dir()  # the next run's clean-up leaves a kept report alone


def test_plot_refuses_data_that_changed_since_the_fit_unless_forced(tmp_path):
    csv = shaped_csv(tmp_path / "a.csv")
    out = tmp_path / "D"
    assert cli("analyze", csv, "--out", out, "--bootstrap", "5").returncode == 0
    assert cli("plot", out).returncode == 0
    before = {n: (out / n).read_bytes() for n in listing(out)}
    runs = synthetic.make_runs("two_regime", [1, 2], [16], PLANTED)  # a smaller table, same file
    runs[["depth", "width", "seed", "loss"]].to_csv(csv, index=False)
    r = cli("plot", out)
    assert sentence(r) == (
        f"{out / 'report.json'} cannot be redrawn: its source {csv} has changed "
        f"since it was fitted (now 2 runs and 0 curve points; the report fitted "
        f"12 and 0); run `depthwidth analyze` again to refit, or give --force to "
        f"draw the data as it is now against the old fits."
    )
    assert {n: (out / n).read_bytes() for n in listing(out)} == before
    r = cli("plot", out, "--force")
    assert r.returncode == 0, r.stderr


def test_plot_on_a_report_json_without_its_sections_is_not_a_readable_report(tmp_path):
    csv = shaped_csv(tmp_path / "a.csv")
    out = tmp_path / "D"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"source": str(csv), "threshold": {}}))
    r = cli("plot", out)
    assert sentence(r) == (
        f"{out / 'report.json'} is not a readable report (it lacks inputs, "
        f"power_laws, learning_curves, chinchilla, regimes, kaplan); run "
        f"`depthwidth analyze` again to rewrite it."
    )
    assert listing(out) == ["report.json"]


def _work_folders(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith(".depthwidth-report-")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_analyze_leaves_no_working_folder(tmp_path, sig):
    csv = shaped_csv(tmp_path / "a.csv")
    out = tmp_path / "D"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.Popen(
        [EXE, "analyze", str(csv), "--out", str(out), "--bootstrap", "2000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while not _work_folders(tmp_path) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _work_folders(tmp_path), "the analysis never started its report"
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode in (128 + sig, -sig), err
    assert "Traceback" not in err and not out.exists()
    if sig == signal.SIGTERM:
        assert _work_folders(tmp_path) == []
        return
    assert len(_work_folders(tmp_path)) == 1  # nothing can run on SIGKILL: the next run cleans
    r = cli("analyze", csv, "--out", tmp_path / "E", "--bootstrap", "5")
    assert r.returncode == 0, r.stderr
    assert _work_folders(tmp_path) == []


def test_a_report_file_list_never_reaches_outside_its_folder(tmp_path):
    out = tmp_path / "D"
    out.mkdir()
    outside = tmp_path / "precious.txt"
    outside.write_text("mine")
    (out / "report-files.json").write_text(json.dumps({"files": ["../precious.txt", str(outside)]}))
    r = cli("analyze", shapeless_csv(tmp_path / "b.csv"), "--out", out, "--bootstrap", "5")
    assert r.returncode == 0, r.stderr
    assert outside.read_text() == "mine"
