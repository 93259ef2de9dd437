"""A spec is validated whole, once, when it is read, by every command that reads it (docs/rules.md,
"Bad input"): [adaptive] and [halving] are checked by `sweep plan` and `sweep slurm` as by
`sweep run`; the halving axis is a tuning axis and its rungs are bounded; an adaptive sweep needs
the shapes `design` needs; a storage folder that is a project's own folder needs --force; and
`analyze` quotes a stored design only for the plan the store ran. Through the real CLI: exit
code 2, one sentence, nothing written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import cli, sentence, write_spec
from test_output_guards import snapshot
from test_table_schema import TINY, TINY3, runs_of, tiny_spec


def spec(tmp_path: Path, extra: str, base: str = TINY, name: str = "s.toml") -> Path:
    return write_spec(tmp_path, base + extra, name)


@pytest.mark.parametrize(
    "table, words",
    [
        ("[adaptive]\ntarget_width = 0\n", "adaptive.target_width = 0 is invalid"),
        ("[adaptive]\nbootstrap = 5\n", "adaptive.bootstrap = 5 is invalid"),
        ("[adaptive]\nbatches = 2\n", "[adaptive] has no key 'batches'"),
        ("[halving]\naxis = 'depth'\n", "halving.axis = 'depth' is invalid: it must be a tuning axis"),
        ("[halving]\naxis = 'width'\n", "halving.axis = 'width' is invalid: it must be a tuning axis"),
        (
            "[halving]\nrungs = 1000000000000\n",
            "halving.rungs = 1000000000000 is invalid: it must be at most 20",
        ),
        ("[halving]\nrungs = 21\n", "halving.rungs = 21 is invalid: it must be at most 20"),
        ("[halving]\nrungs = 0\n", "halving.rungs = 0 is invalid"),
    ],
)
def test_every_command_that_reads_a_spec_checks_all_of_it(tmp_path, table, words):
    s = spec(tmp_path, table, TINY3)
    before = snapshot(tmp_path)
    cmds = [["sweep", "plan", s], ["sweep", "slurm", s], ["sweep", "run", s], ["design", s]]
    for cmd in cmds if "target_width" in table or "depth" in table else cmds[:1]:
        msg = sentence(cli(*cmd, cwd=tmp_path))
        assert msg.startswith(f"{s}: ") and words in msg, (cmd, msg)
    assert snapshot(tmp_path) == before


def test_the_halving_axis_is_a_tuning_axis(tmp_path):
    for axis, grid in (("seed", {"seed": [0, 1]}),):
        s = spec(tmp_path, f"[halving]\naxis = '{axis}'\n", tiny_spec(grid=grid))
        msg = sentence(cli("sweep", "plan", s))
        assert f"halving.axis = '{axis}' is invalid: it must be a tuning axis" in msg, msg
    r = cli("sweep", "plan", spec(tmp_path, "[halving]\naxis = 'lr'\n"))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "depths, widths, how",
    [
        ([1], [16], "flag"),
        ([1, 2], [16, 32], "flag"),
        ([1, 2, 3], [16], "flag"),
        ([1], [16, 32], "table"),
    ],
)
def test_an_adaptive_sweep_needs_the_shapes_design_needs(tmp_path, depths, widths, how):
    base = tiny_spec(depths, widths)
    s = spec(tmp_path, "[adaptive]\n" if how == "table" else "", base)
    store = tmp_path / "store"
    args = ["sweep", "run", s, "--storage", store] + (["--adaptive"] if how == "flag" else [])
    msg = sentence(cli(*args))
    assert msg.startswith(f"{s}: an adaptive sweep is invalid here: the plan has ")
    assert "the threshold analysis needs at least 3 depths and 2 widths, so b can never be fitted." in msg
    assert not store.exists()
    msg = sentence(cli("design", spec(tmp_path, "", base, "d.toml")))
    assert "the threshold analysis needs at least 3 depths and 2 widths" in msg


def test_a_project_folder_is_no_store_without_force(tmp_path):
    write_spec(tmp_path, tiny_spec(storage={"path": "."}), "tiny.toml")
    runs_of(tmp_path / "tiny.toml").to_csv(tmp_path / "runs.csv", index=False)
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    before = snapshot(tmp_path)
    for storage, mark in ((proj, ".git"), (other, "pyproject.toml"), (f"file://{other}", "pyproject.toml")):
        for cmd in ("run", "slurm", "submit"):
            msg = sentence(cli("sweep", cmd, tmp_path / "tiny.toml", "--storage", storage))
            assert msg.startswith("--storage = ") and "is invalid: it is a project's own folder" in msg
            assert f"(it holds {mark})" in msg and "--force" in msg
    msg = sentence(cli("sweep", "run", tmp_path / "tiny.toml", cwd=other))
    assert msg.startswith(f"{tmp_path / 'tiny.toml'}: storage.path = '.' is invalid: it is a project's own")
    assert snapshot(tmp_path) == before
    r = cli("sweep", "run", tmp_path / "tiny.toml", "--storage", proj, "--from", "runs.csv", "--force",
            "--no-analyze", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and "8 finished trial(s) carried" in r.stdout, r.stderr
    assert (proj / "runs.parquet").exists()
    r = cli("sweep", "slurm", tmp_path / "tiny.toml", "--storage", proj, "--force")
    assert r.returncode == 0, r.stderr
    assert "--force" in next(proj.rglob("*.sbatch")).read_text()


def test_analyze_quotes_a_design_only_of_the_plan_the_store_ran(tmp_path):
    from analysis.reporting.design_note import plan_fingerprint
    from sweeps.plans.spec import load_spec

    write_spec(tmp_path, TINY, "tiny.toml")
    runs_of(tmp_path / "tiny.toml").to_csv(tmp_path / "runs.csv", index=False)
    r = cli("sweep", "run", "tiny.toml", "--from", "runs.csv", "--no-analyze", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    store = tmp_path / "stores" / "tiny"
    (store / "design").mkdir()
    ids = [t.trial_id for t in load_spec(tmp_path / "tiny.toml").trials]
    write_spec(tmp_path, TINY3, "other.toml")
    other = [t.trial_id for t in load_spec(tmp_path / "other.toml").trials]
    rated = {"power": {"3.0": 0.9}, "false_claim": {"rate": 0.05, "n": 20}}
    for plan, quoted in (
        ({"trials": 12, "fingerprint": plan_fingerprint(other)}, False),
        (None, False),
        ({"trials": 8, "fingerprint": plan_fingerprint(reversed(ids))}, True),
    ):
        (store / "design" / "design.json").write_text(
            json.dumps({**rated, **({"plan": plan} if plan else {})})
        )
        r = cli("analyze", store, "--bootstrap", "5", "--out", tmp_path / "a")
        assert r.returncode == 0, r.stderr
        report = json.loads((tmp_path / "a" / "report.json").read_text())
        assert ("design_power" in report) == quoted
        assert ("rated this plan before it ran" in (tmp_path / "a" / "report.md").read_text()) == quoted
    assert os.path.isdir(store / "design")
