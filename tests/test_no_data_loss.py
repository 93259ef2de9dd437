"""Commands that write a user-named file never destroy data: they refuse to write over a results
store's own files, replace an existing file only with --force, and write atomically. Each case is
the real `depthwidth` console script in a subprocess; refusals are one sentence and exit code 2.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers import cli, sentence

from analysis.fitting import synthetic

PLANTED = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)


@pytest.fixture
def store(tmp_path) -> Path:
    runs = synthetic.make_runs("two_regime", [1, 2], [16, 32], PLANTED)
    return synthetic.write_store(tmp_path / "store", runs)


def test_results_csv_never_writes_over_the_stores_own_files(store):
    (store / "spec.toml").write_text("name = 'x'\n")
    before = {p.name: p.read_bytes() for p in store.iterdir()}
    for name in ("runs.parquet", "spec.toml", "parts/0000000001.runs.parquet"):
        for extra in ((), ("--force",)):
            r = cli("sweep", "results", store, "--csv", store / name, *extra)
            assert sentence(r) == (
                f"--csv = '{store / name}' is invalid: it is one of the results "
                f"store '{store}''s own files; write to a path outside them."
            )
    assert {p.name: p.read_bytes() for p in store.iterdir()} == before
    r = cli("sweep", "results", store)  # the store still reads
    assert r.returncode == 0, r.stderr


def test_results_csv_through_a_link_to_the_store_is_refused(store, tmp_path):
    link = tmp_path / "elsewhere.csv"
    link.symlink_to(store / "runs.parquet")
    r = cli("sweep", "results", store, "--csv", link, "--force")
    assert "own files" in sentence(r)
    assert len(pd.read_parquet(store / "runs.parquet")) == 4


def test_results_csv_replaces_an_existing_file_only_with_force(store, tmp_path):
    target = tmp_path / "runs.csv"
    target.write_text("precious\n")
    r = cli("sweep", "results", store, "--csv", target)
    assert sentence(r) == (
        f"--csv = '{target}' is invalid: the file already exists; give --force to replace it."
    )
    assert target.read_text() == "precious\n"
    r = cli("sweep", "results", store, "--csv", target, "--force")
    assert r.returncode == 0, r.stderr
    assert len(pd.read_csv(target)) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv", "store"]  # no temp file left


def test_train_json_replaces_an_existing_file_only_with_force(tmp_path):
    target = tmp_path / "run.json"
    target.write_text("{}")
    r = cli("train", "--depth", "1", "--width", "8", "--heads", "2", "--steps", "2", "--json", target)
    assert sentence(r) == (
        f"--json = '{target}' is invalid: the file already exists; give --force to replace it."
    )
    assert r.stdout == "" and target.read_text() == "{}"


def test_analyze_never_writes_a_report_among_a_stores_own_files(store, tmp_path):
    (store / "parts").mkdir()
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    for out in (store / "parts", store / "tune" / "report"):
        r = cli("analyze", store, "--out", out, "--bootstrap", "5")
        assert sentence(r) == (
            f"--out = '{out}' is invalid: it is inside the results store "
            f"'{store}''s own files; write the report elsewhere."
        )
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before
