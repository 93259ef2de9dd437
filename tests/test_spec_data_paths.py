"""A spec's relative data path is read from the spec file's folder, so `sweep plan` works from any
folder; a trial's id names its data by content (two files behind one path string get two ids,
one file under two paths one id); stores written with the older, path-string ids still resume.
The real `depthwidth` console script in a subprocess.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import cli, spec_toml, write_spec

ROOT = Path(__file__).resolve().parent.parent


def plan(spec: Path, cwd: Path, storage: Path) -> list[dict]:
    r = cli("sweep", "plan", spec, "--json", "--storage", storage, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def project(folder: Path, text: str, data: str = "data/corpus.txt") -> Path:
    """A spec in `folder` training on `text` (repeated) in the file `data`, named relative to it."""
    (folder / data).parent.mkdir(parents=True, exist_ok=True)
    (folder / data).write_text(text * 50)
    spec = spec_toml(
        "paths",
        model={"family": "transformer"},
        data={"source": "text", "path": data, "vocab_size": None},
        train={"eval_every": None, "eval_batches": None, "warmup_steps": None},
        grid={"depth": [1, 2], "width": [8]},
        budget={"steps": 20},
    )
    return write_spec(folder, spec)


def test_a_relative_data_path_is_read_from_the_specs_folder(tmp_path):
    spec = project(tmp_path / "project", "to be or not to be ")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    here = plan(spec, spec.parent, tmp_path / "none")
    there = plan(spec, elsewhere, tmp_path / "none")
    assert [t["trial_id"] for t in here] == [t["trial_id"] for t in there] and len(here) == 2


def test_ids_follow_the_datas_content_not_the_path_string(tmp_path):
    a = project(tmp_path / "a", "to be or not to be ")
    b = project(tmp_path / "b", "all the world's a stage ")  # same string, another file
    c = project(tmp_path / "c", "to be or not to be ")  # same content, another folder
    ids = {
        k: [t["trial_id"] for t in plan(s, tmp_path, tmp_path / "none")]
        for k, s in (("a", a), ("b", b), ("c", c))
    }
    assert ids["a"] == ids["c"]
    assert not set(ids["a"]) & set(ids["b"])


def old_trial_id(spec: Path, depth: int, written_path: str) -> str:
    """The id as it was computed before data paths were resolved: SHA-256 of the three configs'
    canonical JSON, with the data path as the string written in the spec."""
    from sweeps.plans.spec import parse_spec

    t = next(
        t for t in parse_spec(spec.read_text(), str(spec), str(spec.parent)).trials if t.model.depth == depth
    )
    parts = {
        "model": t.model.to_dict(),
        "data": {**t.data.to_dict(), "path": written_path},
        "train": t.train.to_dict(),
    }
    parts["train"] = {
        k: v
        for k, v in parts["train"].items()
        if k not in ("device", "threads", "compile", "checkpoint_every")
        and not (k == "eps" and v == 1e-8)
        # fields added later still, at the values that reproduce the runs of that time
        and not (k == "schedule" and v == "cosine")
        and not (k == "cooldown_fraction" and v == 0.2)
        and not (k == "cooldown" and v == "1-sqrt")
    }
    parts["model"] = {
        k: v
        for k, v in parts["model"].items()
        if not (k == "base_depth" and v == 2) and not (k == "depth_alpha" and v == 1.0)
    }
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def test_a_store_written_with_path_string_ids_still_resumes(tmp_path):
    from analysis.fitting import synthetic

    spec = project(tmp_path / "project", "to be or not to be ")
    old = old_trial_id(spec, 1, "data/corpus.txt")
    runs = synthetic.make_runs("two_regime", [1], [8], dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0))
    store = synthetic.write_store(tmp_path / "store", runs.assign(trial_id=old))
    trials = plan(spec, spec.parent, store)
    done = [t for t in trials if t["done"]]
    assert [t["trial_id"] for t in done] == [old]  # known by its stored id: not run again
    assert [t["depth"] for t in trials if not t["done"]] == [2]


def test_a_store_of_the_smoke_spec_keeps_every_trial_id():
    store = ROOT.parent / "shared" / "repro" / "smoke-overclaim"
    if not (store / "runs.parquet").is_file():
        pytest.skip("the smoke-overclaim store is not here")
    trials = plan(ROOT / "sweeps" / "smoke.toml", ROOT, store)
    stored = set(pd.read_parquet(store / "runs.parquet")["trial_id"])
    assert {t["trial_id"] for t in trials} == stored and all(t["done"] for t in trials)
