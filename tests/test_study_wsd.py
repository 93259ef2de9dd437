"""The shipped CPU study on warmup-stable-decay (docs/studies/threshold-cpu.md, section 7): its runs
table is the plan `sweeps/threshold-cpu-wsd.toml` names (every trial id of the plan, once), each
shorter budget a cooldown branch of the 900-step run of its shape, rate and seed whose compute is
its cooldown alone, and `depthwidth analyze` on it gives the verdict the page states."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sweeps.plans.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "docs" / "studies" / "data" / "threshold-cpu-wsd.csv"
SPEC = REPO / "sweeps" / "threshold-cpu-wsd.toml"
PAGE = REPO / "docs" / "studies" / "threshold-cpu.md"
# section 7's verdict line: "The WSD table's verdict (`depthwidth analyze <csv>`): **<status>**"
VERDICT = re.compile(
    r"The WSD table's verdict \(`depthwidth analyze (?P<src>\S+)`\): \*\*(?P<status>\w+)\*\*"
)


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return pd.read_csv(TABLE, dtype={"trial_id": str, "branched_from": str}, keep_default_na=False)


def test_the_table_is_the_plan_every_budget_from_one_run(runs):
    spec = load_spec(str(SPEC), allow_missing_data=True)
    assert runs["trial_id"].is_unique
    assert set(runs["trial_id"]) == {t.trial_id for t in spec.trials}  # all 1,440, nothing else
    assert (runs["status"] == "ok").all() and set(runs["schedule"]) == {"wsd"}
    assert sorted(runs["steps"].unique()) == [100, 200, 300, 600, 900]
    full = runs[runs["steps"] == 900].set_index("trial_id")  # the runs the branches are taken from
    branches = runs[runs["steps"] < 900]
    assert branches["branched_from"].value_counts().reindex(full.index).eq(4).all()  # 4 each
    assert (runs.loc[runs["steps"] == 900, "branched_from"] == "").all()
    # each branch names the 900-step run of its own shape, rate and seed
    parent = full.loc[branches["branched_from"]]
    for col in ("depth", "width", "lr", "seed"):
        assert (parent[col].to_numpy() == branches[col].to_numpy()).all(), col
    # a branch cost its cooldown alone (20% of its budget); a run its whole length
    share = branches["flops_spent"] / branches["flops"]
    assert share.round(3).eq(0.2).all()
    assert (full["flops_spent"] == full["flops"]).all()


def test_analyze_on_the_table_gives_the_verdict_section_7_states(tmp_path):
    m = VERDICT.search(PAGE.read_text())
    assert m, "section 7 states no verdict line"
    assert (REPO / m["src"]).resolve() == TABLE.resolve()
    p = subprocess.run(
        [sys.executable, "-m", "analysis", "analyze", str(TABLE), "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr
    thr = json.loads((tmp_path / "r" / "report.json").read_text())["threshold"]
    assert thr["status"] == m["status"]
    if not thr.get("claimed"):
        assert thr["reason"] in " ".join(PAGE.read_text().split())
