"""Small mistakes a user makes at the command line, each refused by the real `depthwidth` console
script in a subprocess with one sentence naming the field and value and exit code 2 (or, for a
spec's byte-order mark, accepted as the spec it is)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import cli, sentence

from analysis.fitting import synthetic

SMOKE = Path(__file__).resolve().parent.parent / "sweeps" / "smoke.toml"


def test_train_on_cuda_without_a_gpu_is_refused_before_training(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    r = cli(
        "train",
        "--depth",
        "1",
        "--width",
        "8",
        "--heads",
        "2",
        "--steps",
        "2",
        "--device",
        "cuda",
        cwd=tmp_path,
    )
    assert sentence(r) == (
        "--device = 'cuda' is invalid: this machine has no CUDA device that "
        "torch can use; give --device cpu (or auto, which picks a GPU when "
        "there is one)."
    )
    assert list(tmp_path.iterdir()) == []


def test_export_to_tensorboard_at_a_file_is_refused_and_says_what_to_do(tmp_path):
    runs = synthetic.make_runs(
        "two_regime", [1, 2], [16, 32], dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)
    )
    store = synthetic.write_store(tmp_path / "store", runs)
    target = tmp_path / "events"
    target.write_text("not a folder")
    r = cli("export", store, "--tensorboard", target)
    assert sentence(r) == f"--tensorboard = '{target}' is invalid: it is a file, not a folder."
    assert r.stdout == "" and target.read_text() == "not a folder"


def test_an_export_trackers_failure_says_to_run_the_export_again():
    from sweeps.plans.tracking import TrialInfo
    from sweeps.results.feed import Enabled, Trackers

    def broken():
        raise OSError("disk full")

    for after, expected in ((None, "the sweep goes on without it"), ("export", "run the same export again")):
        from sweeps.results.feed import EXPORT_STOPS

        t = (
            Trackers([Enabled("tensorboard", broken)], after=EXPORT_STOPS)
            if after
            else Trackers([Enabled("tensorboard", broken, "`x` writes what it lacks.")])
        )
        t.stored(TrialInfo("t1", "d1 w8", "s", (), {}), {"status": "ok", "steps": 1}, [])
        (warning,) = t.close(timeout=30)
        assert warning.startswith("tracking: tensorboard failed (OSError: disk full); ")
        assert expected in warning
        assert ("goes on" in warning) == (after is None)


def test_a_spec_starting_with_a_utf8_bom_is_read(tmp_path):
    spec = tmp_path / "smoke.toml"
    spec.write_bytes(b"\xef\xbb\xbf" + SMOKE.read_bytes())
    r = cli("sweep", "plan", spec, "--storage", tmp_path / "none")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("sweep 'smoke': 36 trials"), r.stdout[:300]


@pytest.mark.parametrize("command", ["plan", "run", "submit"])
def test_an_empty_storage_flag_is_refused_not_replaced_by_the_specs(tmp_path, command):
    r = cli("sweep", command, SMOKE, "--storage", "", cwd=tmp_path)
    assert sentence(r) == (
        "--storage = '' is invalid: it must name a folder or a URI (leave the "
        "flag out to use the spec's storage.path)."
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key,value", [("cpu_gflops", "1e-320"), ("gpu_tflops", "5e-324")])
def test_a_throughput_that_makes_the_estimate_infinite_is_refused(tmp_path, key, value):
    spec = tmp_path / "s.toml"
    spec.write_text(SMOKE.read_text().replace("[resources]\n", f"[resources]\n{key} = {value}\n"))
    r = cli("sweep", "plan", spec, "--storage", tmp_path / "none")
    assert sentence(r) == (
        f"{spec}: resources.{key} = {float(value)!r} is invalid: must be at "
        f"least 1e-06; a slower machine makes the plan's time estimates infinite."
    )


@pytest.mark.parametrize(
    "where,value",
    [("depth", "1"), ("width / depth", "16.0"), ("depth > 1 and width", "16"), ("not lr", "0.003")],
)
def test_a_where_that_is_not_true_or_false_is_refused(tmp_path, where, value):
    spec = tmp_path / "s.toml"
    spec.write_text(f'where = "{where}"\n' + SMOKE.read_text())
    r = cli("sweep", "plan", spec, "--storage", tmp_path / "none")
    assert sentence(r) == (
        f"{spec}: where = {where!r} is invalid: it gives {value}, not true or "
        f"false; write a comparison such as 'depth <= 4'."
    )
