"""Every output through the one guarded, atomic path (docs/rules.md, "Files a command writes"):
`design --out` and `design --propose --out` are checked whole before any work, never write inside
a results store or through a link, and `analyze --out STORE` never deletes a file its folder's
report-files.json names unless a report writes such files. Bounds and messages of `design`'s
options. Each through the real CLI: exit code 2, one sentence, nothing changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import cli, sentence
from test_table_schema import tiny_folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """tiny3.toml (a plan `design` rates) and a store of tiny.toml carried from a runs table."""
    folder = tiny_folder(tmp_path_factory.mktemp("guards"))
    r = cli("sweep", "run", "tiny.toml", "--from", "runs.csv", "--no-analyze", cwd=folder)
    assert r.returncode == 0, r.stderr
    (folder / "stores" / "tiny" / "tune").mkdir(exist_ok=True)
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): (os.readlink(p).encode() if p.is_symlink() else p.read_bytes())
        for p in sorted(folder.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


def design(tiny: Path, *args) -> list:
    return ["design", tiny / "tiny3.toml", "--replicates", "2", "--bootstrap", "5", "--jobs", "1", *args]


def test_design_out_is_never_a_store_nor_inside_one(tiny, tmp_path):
    store = tiny / "stores" / "tiny"
    (tmp_path / "to_runs").mkdir()
    (tmp_path / "to_runs" / "outcomes.csv").symlink_to(store / "runs.parquet")
    (tmp_path / "to_store").symlink_to(store)
    (tmp_path / "to_parts").symlink_to(store / "tune")
    before = snapshot(tiny)
    for out, words in (
        (store, "it is the folder of the results store"),
        (tmp_path / "to_store", "it is the folder of the results store"),
        (store / "parts" / "new", "its power.png would be one of the own files of the results store"),
        (store / "tune", "its power.png would be one of the own files of the results store"),
        (tmp_path / "to_parts", "its power.png would be one of the own files of the results store"),
        (tmp_path / "to_runs", "its outcomes.csv would be one of the own files of the results store"),
    ):
        msg = sentence(cli(*design(tiny, "--out", out)))
        assert msg.startswith(f"--out = {str(out)!r} is invalid: ") and words in msg, msg
        assert snapshot(tiny) == before
    for out in (store, store / "tune"):
        msg = sentence(cli(*design(tiny, "--propose", "--budget", "4cpu-h", "--out", out)))
        assert "results store" in msg and snapshot(tiny) == before


def test_design_out_checks_every_file_before_any_work(tiny, tmp_path):
    (tmp_path / "existing.txt").write_text("kept")
    msg = sentence(cli(*design(tiny, "--propose", "--budget", "4cpu-h", "--out", tmp_path / "existing.txt")))
    assert msg == f"--out = {str(tmp_path / 'existing.txt')!r} is invalid: it is a file, not a folder."
    for name in ("outcomes.csv", "design.json", "power.png"):
        d = tmp_path / f"d_{name}"
        (d / name).mkdir(parents=True)
        msg = sentence(cli(*design(tiny, "--out", d)))
        assert msg == f"--out file = {str(d / name)!r} is invalid: it is a folder, not a file."
        assert [p.name for p in d.iterdir()] == [name]  # power.png not written before it
    p = tmp_path / "p"
    (p / "candidates.csv").mkdir(parents=True)
    msg = sentence(cli(*design(tiny, "--propose", "--budget", "4cpu-h", "--out", p)))
    assert "candidates.csv' is invalid: it is a folder, not a file." in msg
    assert (tmp_path / "existing.txt").read_text() == "kept"


def test_design_writes_each_file_atomically_and_replaces_a_link_not_its_target(tiny, tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("someone else's\n")
    d = tmp_path / "d"
    d.mkdir()
    (d / "outcomes.csv").symlink_to(other)
    r = cli(*design(tiny, "--effects", "3", "--out", d))
    assert r.returncode == 0, r.stderr
    assert other.read_text() == "someone else's\n"
    assert not (d / "outcomes.csv").is_symlink() and (d / "outcomes.csv").read_text().startswith("effect")
    assert sorted(p.name for p in d.iterdir()) == ["design.json", "outcomes.csv", "power.png"]
    assert (d / "power.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_manifest_names_only_files_a_report_writes(tiny, tmp_path):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(tiny / "stores" / "tiny", store)
    (store / "notes.txt").write_text("mine")
    (store / "design").mkdir()
    (store / "design" / "design.json").write_text("{}")
    names = ["runs.parquet", "curves.parquet", "spec.toml", "notes.txt", "design/design.json"]
    names += ["../outside.png", "tune", ".lock", "old.png"]
    (store / "old.png").write_bytes(b"an earlier report's figure")
    (tmp_path / "outside.png").write_bytes(b"outside")
    (store / "report-files.json").write_text(json.dumps({"files": names}))
    r = cli("analyze", store, "--out", store, "--bootstrap", "5")
    assert r.returncode == 0, r.stderr
    for kept in ("runs.parquet", "curves.parquet", "spec.toml", "notes.txt", "design/design.json"):
        assert (store / kept).exists(), kept
    assert (tmp_path / "outside.png").exists() and (store / "tune").is_dir()
    assert not (store / "old.png").exists()  # a figure the earlier report wrote goes
    r = cli("sweep", "results", store)
    assert r.returncode == 0 and r.stdout.count(" ok ") == 8, r.stdout + r.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (
            ["--replicates", "1000000000000"],
            "--replicates = 1000000000000 is invalid: it must be at most 10,000.",
        ),
        (["--replicates", "100000000"], "--replicates = 100000000 is invalid: it must be at most 10,000."),
        (["--bootstrap", "100000000"], "--bootstrap = 100000000 is invalid: it must be at most 10,000."),
        (["--propose"], "--propose needs --budget, e.g. --budget 4cpu-h."),
        (["--propose", "--budget", "4cpu-h", "--target", "nan"], "--target = nan is invalid: the threshold"),
        (["--propose", "--budget", "4cpu-h", "--target", "1000"], "between 1.1 and 100 (the analysis's"),
        (["--propose", "--budget", "4cpu-h", "--target", "1.05"], "--target = 1.05 is invalid"),
        (["--propose", "--budget", "4cpu-h", "--candidates", "0"], "--candidates = 0 is invalid"),
        (["--propose", "--budget", "4cpu-h", "--screen", "20000"], "--screen = 20000 is invalid"),
        (["--propose", "--budget", "4cpu-h", "--finalists", "-1"], "--finalists = -1 is invalid"),
        (["--effects", "1000"], "--effects = '1000' is invalid: each threshold base b must lie strictly"),
    ],
)
def test_design_options_are_bounded_with_one_sentence(tiny, tmp_path, args, words):
    r = cli("design", tiny / "tiny3.toml", "--out", tmp_path / "d", *args)
    assert words in sentence(r)
    assert not (tmp_path / "d").exists() and not (tmp_path / "tiny-proposal").exists()
