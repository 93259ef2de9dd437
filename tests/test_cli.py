"""The real `depthwidth` console script in a subprocess: help, one training run, bad input."""

import os
import subprocess
import sys

import pytest
from helpers import cli


def test_help_lists_subcommands():
    r = cli("--help")
    assert r.returncode == 0
    assert "train" in r.stdout


def test_train_prints_progress_and_final_losses_beside_unigram_entropy(tmp_path):
    out = tmp_path / "run.json"
    flags = "--depth 1 --width 16 --heads 2 --seq-len 32 --steps 20 --batch-size 8 --threads 1"
    r = cli("train", *flags.split(), "--json", out)
    assert r.returncode == 0, r.stderr
    assert "step     20/20" in r.stdout
    line = [s for s in r.stdout.splitlines() if s.startswith("final train loss")][0]
    assert "val loss" in line and "unigram entropy" in line
    import json

    result = json.loads(out.read_text())
    assert result["status"] == "ok" and result["steps"] == 20 and len(result["curve"]) == 10


def test_train_completep_names_its_parametrization(tmp_path):
    out = tmp_path / "run.json"
    flags = "--depth 4 --width 32 --heads 2 --seq-len 16 --steps 10 --batch-size 4 --threads 1"
    completep = "--parametrization completep --base-depth 2 --base-width 16"
    r = cli("train", *flags.split(), *completep.split(), "--json", out)
    assert r.returncode == 0, r.stderr
    assert "parametrization=completep (base_width=16, base_depth=2, alpha=1)" in r.stdout
    import json

    result = json.loads(out.read_text())
    assert result["status"] == "ok" and result["steps"] == 10


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--width", "30", "--heads", "4"], "ModelConfig.width = 30"),
        (["--parametrization", "completep", "--depth-alpha", "2"], "ModelConfig.depth_alpha = 2.0"),
        (["--parametrization", "completep", "--base-depth", "0"], "ModelConfig.base_depth = 0"),
        (["--depth", "0"], "ModelConfig.depth = 0"),
        (["--data", "wiki"], "--data = 'wiki'"),
        (["--data", "text:/nonexistent/file.txt"], "/nonexistent/file.txt"),
        (["--preset", "huge"], "preset = 'huge'"),
        (["--steps", "0"], "TrainConfig.steps = 0"),
    ],
)
def test_bad_input_one_sentence_exit_2(args, needle, tmp_path):
    r = cli("train", *args, "--json", str(tmp_path / "x.json"))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_train_imports_neither_matplotlib_nor_pandas():
    """`depthwidth train` parses the whole command line (every subcommand registers), trains and
    prints without loading the analysis stack: each CLI imports its heavy modules in its handlers."""
    code = (
        "import sys; from depthwidth.cli import main; "
        "code = main(['train', '--depth', '1', '--width', '8', '--heads', '2', '--seq-len', '8', "
        "'--steps', '2', '--batch-size', '2', '--threads', '1']); "
        "heavy = [m for m in ('matplotlib', 'pandas', 'scipy', 'ray') if m in sys.modules]; "
        "print('HEAVY', heavy); sys.exit(code)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout
