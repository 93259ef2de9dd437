"""Where a store is, said plainly: every command that names a store names it by its absolute path
(a relative one is read from the folder the command runs in), `sweep plan` says where the store
will be and whether it is there yet, and `sweep results` shows the settings that tell apart the
runs of one shape (the learning rate always, any other tuning field that varies in the store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import EXE, cli
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.fitting import synthetic
from runstore.store import ResultStore

PLANTED = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)


def store_with(path: Path, beta2=None) -> Path:
    """A small store of two depths x two learning rates x two seeds; `beta2(i)` gives run i's
    beta2 in its stored train_config (none stored when not given)."""
    runs = synthetic.make_tuned_runs(
        "two_regime",
        [1, 2],
        [16],
        PLANTED,
        lrs=[1e-3, 3e-3],
        drift=dict(lr0=2e-3, width_exp=0.0, depth_exp=0.0),
    )
    if beta2 is not None:
        runs["train_config"] = [
            json.dumps({"lr": lr, "beta2": beta2(i), "eps": 1e-8}) for i, lr in enumerate(runs["lr"])
        ]
    runs["flops"] = 6.0 * runs["n_params"] * 1e5  # a column every run the sweep stores has
    runs, curves = synthetic.make_curves(runs, 0.6, 50.0, steps=[25, 50])
    return synthetic.write_store(path, runs, curves)


def test_sweep_plan_from_another_folder_says_where_it_looks_and_that_nothing_is_there(tmp_path):
    r = cli("sweep", "plan", "smoke", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    header, store_line = r.stdout.splitlines()[:2]
    assert header == "sweep 'smoke': 36 trials"
    assert store_line == (
        f"store {tmp_path / 'results' / 'smoke'} (the spec's storage.path 'results/smoke', from the "
        "folder this command runs in): not there yet; `depthwidth sweep run` makes it"
    )
    assert "0 trials already in the store" not in r.stdout and not list(tmp_path.iterdir())


def test_sweep_plan_says_a_store_is_there_and_counts_its_trials(tmp_path):
    store_with(tmp_path / "kept")
    r = cli("sweep", "plan", "smoke", "--storage", "kept", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == (
        f"store {tmp_path / 'kept'} (--storage 'kept', from the folder this command runs in): "
        "it holds finished trials (counted below)"
    )
    assert "0 trials already in the store, 36 to run" in r.stdout  # none of them is smoke's
    (tmp_path / "empty").mkdir()
    r = cli("sweep", "plan", "smoke", "--storage", str(tmp_path / "empty"), cwd=tmp_path)
    assert (
        r.stdout.splitlines()[1]
        == f"store {tmp_path / 'empty'}: the folder is there, with no finished trial yet"
    )


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1), max_size=4))
def test_a_store_is_named_by_its_absolute_path_whatever_relative_path_named_it(parts):
    relative = os.path.join(*parts) if parts else "."
    store = ResultStore(relative)
    assert os.path.isabs(store.location)
    assert store.location == os.path.abspath(relative)
    assert ResultStore(store.location).location == store.location


def test_slurm_status_names_the_store_by_its_absolute_path(tmp_path):
    store = store_with(tmp_path / "kept")
    (store / "spec.toml").write_text(
        (Path(__file__).resolve().parent.parent / "sweeps" / "smoke.toml").read_text()
    )
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no squeue: no SLURM asked
    r = subprocess.run(
        [EXE, "sweep", "slurm-status", "kept", "--job", "12345"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"store {tmp_path / 'kept'}"


def test_a_store_behind_a_uri_keeps_its_uri():
    uri = "s3://bucket/prefix?endpoint_override=127.0.0.1:9000&scheme=http"
    assert ResultStore(uri).location == uri


def test_sweep_results_shows_the_learning_rate_and_the_tuning_fields_that_vary(tmp_path):
    store_with(tmp_path / "varying", beta2=lambda i: 0.95 if i % 2 else 0.99)
    r = cli("sweep", "results", "varying", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    first, head, *rows = r.stdout.splitlines()
    assert first == f"store {tmp_path / 'varying'}: 8 runs"
    columns = head.split()
    assert columns[:8] == ["trial_id", "family", "depth", "width", "heads", "seed", "lr", "beta2"]
    lr_at, beta2_at = columns.index("lr"), columns.index("beta2")
    assert {row.split()[lr_at] for row in rows} == {"0.001", "0.003"}
    assert {row.split()[beta2_at] for row in rows} == {"0.95", "0.99"}
    assert "eps" not in columns  # the same in every run: not a setting that tells runs apart
    store_with(tmp_path / "plain")  # no stored configs: the learning rate all the same
    r = cli("sweep", "results", "plain", cwd=tmp_path)
    assert r.returncode == 0 and "lr" in r.stdout.splitlines()[1].split()
    assert "beta2" not in r.stdout
