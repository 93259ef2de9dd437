"""Inputs and outputs that cannot work are refused before the work starts: one sentence naming the
flag or field and its value on stderr, exit code 2, nothing written, and no traceback. Each case
is the real `depthwidth` entry point (in this process, for speed); none trains or fits for long.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pandas as pd
import pytest

from analysis.fitting import synthetic
from depthwidth.cli import main as depthwidth

PLANTED = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = depthwidth(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_sentence(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("depthwidth: error: "), err
    assert "Traceback" not in err
    return lines[0][len("depthwidth: error: ") :]


@pytest.fixture
def readonly(tmp_path) -> Path:
    """A folder this process cannot write: chmod 555, or for root (whom modes do not stop) the
    read-only /proc/sys."""
    if os.geteuid() != 0:
        d = tmp_path / "readonly"
        d.mkdir()
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    if os.access("/proc/sys", os.W_OK):
        pytest.skip("no read-only folder is available to root here")
    yield Path("/proc/sys")


@pytest.fixture
def runs_csv(tmp_path) -> Path:
    runs = synthetic.make_runs("two_regime", [1, 2, 3], [16, 32, 64], PLANTED, noise=0.02)
    path = tmp_path / "runs.csv"
    runs[["depth", "width", "seed", "loss"]].to_csv(path, index=False)
    return path


def test_analyze_refuses_an_out_that_is_a_file_or_read_only_before_fitting(
    capsys, tmp_path, runs_csv, readonly
):
    blocker = tmp_path / "afile"
    blocker.write_text("")
    before = sorted(tmp_path.rglob("*"))
    code, out, err = run(capsys, "analyze", str(runs_csv), "--out", str(blocker))
    assert code == 2 and out == ""
    assert one_sentence(err) == f"--out = '{blocker}' is invalid: '{blocker}' is a file, not a folder."
    code, out, err = run(capsys, "analyze", str(runs_csv), "--out", str(readonly / "report"))
    assert code == 2 and out == ""
    assert one_sentence(err) == (f"--out = '{readonly / 'report'}' is invalid: '{readonly}' is not writable.")
    assert sorted(tmp_path.rglob("*")) == before


def test_analyze_refuses_a_width_too_large_for_a_shape_and_leaves_no_folder(capsys, tmp_path, runs_csv):
    df = pd.read_csv(runs_csv)
    df["width"] = df["width"].astype(float)
    df.loc[3, "width"] = 1e300
    huge = tmp_path / "huge.csv"
    df.to_csv(huge, index=False)
    code, _, err = run(capsys, "analyze", str(huge), "--bootstrap", "0")
    assert code == 2
    assert one_sentence(err) == (
        "huge.csv: column 'width' row 4 (line 5 of the file) is 1e+300; "
        "a shape column must be a whole number from 1 to 2^53."
    )
    assert not (tmp_path / "huge_analysis").exists()


@pytest.mark.parametrize(
    "content,why",
    [
        ("", "cannot be read as CSV (No columns to parse from file)."),
        ("N,tokens,loss\n", "holds no curve points (the file has no rows)."),
    ],
)
def test_kaplan_refuses_an_empty_digitized_csv(capsys, tmp_path, runs_csv, content, why):
    digitized = tmp_path / "digitized.csv"
    digitized.write_text(content)
    code, out, err = run(capsys, "kaplan", str(runs_csv), "--digitized", str(digitized))
    assert code == 2 and out == ""
    assert one_sentence(err) == f"digitized.csv: {why}"
    assert not (tmp_path / "runs_analysis").exists()


def test_plot_refuses_a_truncated_report(capsys, tmp_path):
    report = tmp_path / "analysis" / "report.json"
    report.parent.mkdir()
    report.write_text('{"report_version": 1, "source": "/x", "thresh')
    code, _, err = run(capsys, "plot", str(tmp_path / "analysis"))
    assert code == 2
    assert one_sentence(err).startswith(f"{report} is not a readable report (")
    assert sorted(p.name for p in report.parent.iterdir()) == ["report.json"]


def test_results_csv_to_a_read_only_folder_is_refused(capsys, tmp_path, readonly):
    runs = synthetic.make_runs("two_regime", [1, 2], [16, 32], PLANTED)
    store = synthetic.write_store(tmp_path / "store", runs)
    target = readonly / "runs.csv"
    code, out, err = run(capsys, "sweep", "results", str(store), "--csv", str(target))
    assert code == 2 and out == ""
    assert one_sentence(err) == f"--csv = '{target}' is invalid: the folder '{readonly}' is not writable."


def test_plan_and_results_on_an_unreachable_object_store(capsys, tmp_path, monkeypatch):
    for k, v in dict(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    ).items():
        monkeypatch.setenv(k, v)
    with socket.socket() as s:  # a free port: nothing answers there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"s3://bucket/sweep?endpoint_override=127.0.0.1:{port}&scheme=http"
    spec = Path(__file__).resolve().parent.parent / "sweeps" / "smoke.toml"
    for argv in (("sweep", "plan", str(spec), "--storage", uri), ("sweep", "results", uri)):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "", argv
        assert one_sentence(err).startswith(
            f"s3://bucket/sweep/runs.parquet?endpoint_override=127.0.0.1:"
            f"{port}&scheme=http cannot be reached ("
        )


@pytest.mark.parametrize("value", ["inf", "nan", "-1"])
def test_theory_refuses_a_budget_that_is_not_a_positive_finite_number(capsys, value):
    code, out, err = run(capsys, "theory", "--params", value)
    assert code == 2 and out == ""
    assert one_sentence(err) == f"--params {float(value)} is invalid: must be a positive finite number."


def test_train_checks_its_json_output_before_training(capsys, tmp_path):
    target = tmp_path / "missing" / "x.json"
    code, out, err = run(
        capsys, "train", "--depth", "1", "--width", "8", "--heads", "2", "--steps", "2", "--json", str(target)
    )
    assert code == 2 and out == ""  # not one step was trained
    assert one_sentence(err) == (
        f"--json = '{target}' is invalid: the folder '{target.parent}' does not exist."
    )


@pytest.mark.parametrize("flag,value", [("--seed", "-5"), ("--bootstrap", "-1")])
def test_analyze_and_kaplan_refuse_a_negative_seed_or_count(capsys, runs_csv, flag, value):
    for command in ("analyze", "kaplan"):
        code, out, err = run(capsys, command, str(runs_csv), flag, value)
        assert code == 2 and out == ""
        assert one_sentence(err) == f"{flag} = {value} is invalid: it must be a non-negative integer."
    assert not (runs_csv.parent / "runs_analysis").exists()


def test_analyze_bounds_the_bootstrap_by_its_memory_estimate(capsys, runs_csv):
    from analysis.fitting.fitcore import bootstrap_bytes
    from depthwidth.accounting import machine_memory_bytes

    free = machine_memory_bytes(available=True)
    if free is None:
        pytest.skip("this machine's free memory cannot be read")
    n = 1_000_000_000
    code, out, err = run(capsys, "analyze", str(runs_csv), "--bootstrap", str(n))
    assert code == 2 and out == ""
    msg = one_sentence(err)
    assert msg.startswith(f"bootstrap = {n} is invalid: its replicates need about ")
    assert "for 9 runs, more than half of the " in msg and "this machine has free; use at most " in msg
    most = int(msg.rsplit("use at most ", 1)[1].rstrip(".").replace(",", ""))
    assert 0 < most < n and bootstrap_bytes(most, 9) < free  # what it offers fits
    assert not (runs_csv.parent / "runs_analysis").exists()


def test_submit_checks_a_store_path_that_does_not_exist_yet(capsys, tmp_path, readonly):
    """A store path is the cluster's shared folder, mounted here too (docs/cluster.md): one that
    can never be written is refused before any cluster is asked (nothing listens at --address)."""
    spec = Path(__file__).resolve().parent.parent / "sweeps" / "smoke.toml"
    blocker = tmp_path / "afile"
    blocker.write_text("")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{s.getsockname()[1]}"
    for store, why in (
        (blocker / "store", f"'{blocker}' is a file, not a folder"),
        (readonly / "store", f"'{readonly}' is not writable"),
    ):
        code, out, err = run(
            capsys, "sweep", "submit", str(spec), "--address", address, "--storage", str(store)
        )
        assert code == 2 and out == ""
        assert one_sentence(err) == f"--storage = '{store}' is invalid: {why}."
    assert blocker.read_text() == ""


def test_train_refuses_a_model_larger_than_the_machine_before_building_it(capsys):
    from depthwidth.accounting import machine_memory_bytes

    if machine_memory_bytes() is None:
        pytest.skip("this machine's memory cannot be read")
    code, out, err = run(
        capsys,
        "train",
        "--depth",
        "1",
        "--width",
        "1000000000",
        "--heads",
        "2",
        "--steps",
        "1",
        "--device",
        "cpu",
    )
    assert code == 2 and out == ""
    msg = one_sentence(err)
    assert msg.startswith(
        "depth = 1, width = 1000000000, batch_size = 32 is invalid: training it needs "
        "about 1.92e+11 GB (weights, gradients, AdamW moments and activations), more "
        "than the "
    )
    assert msg.endswith(" GB this machine has.")


def test_train_refuses_a_seed_beyond_64_bits(capsys):
    code, out, err = run(capsys, "train", "--seed", str(2**64), "--steps", "1")
    assert code == 2 and out == ""
    assert one_sentence(err) == (
        f"TrainConfig.seed = {2**64} is invalid: it must fit a 64-bit integer (below 2**63)."
    )
