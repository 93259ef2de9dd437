"""The shipped CPU threshold study (docs/studies/threshold-cpu.md): its runs table has the design
the page claims (24 shapes, each at three token budgets shared by every size, the seeds complete
that the page names), and `depthwidth analyze` on it reproduces the verdict the page states, to the
printed precision."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.readers.halving import finals

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "docs" / "studies" / "data" / "threshold-cpu.csv"
PAGE = REPO / "docs" / "studies" / "threshold-cpu.md"
# the page's verdict line, e.g. "Verdict of `depthwidth analyze docs/...csv`: **not_claimed**"
# or "...: **claimed**, b = 3.1 [2.4, 4.6]"
VERDICT = re.compile(
    r"Verdict of `depthwidth analyze (?P<src>\S+)`: \*\*(?P<status>\w+)\*\*"
    r"(?:, b = (?P<b>[\d.]+) \[(?P<lo>[\d.]+), (?P<hi>[\d.]+)\])?"
)


def _same_at_printed_precision(printed: str, value: float) -> bool:
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return round(value, decimals) == pytest.approx(float(printed))


def test_the_shipped_table_has_the_design_the_page_claims():
    runs = pd.read_csv(TABLE, dtype={"trial_id": str})
    assert set(runs["sweep"]) == {"threshold-cpu"} and runs["trial_id"].is_unique
    keep, info = finals(runs)
    fin = runs[keep]
    assert info["axis"] == "lr"
    assert fin["parametrization"].eq("completep").all()
    # token budgets do not move with N: each is shared by shapes of many sizes, and every shape
    # has a final at each of the three
    assert sorted(fin["tokens"].unique()) == [102400, 307200, 921600]
    assert fin.groupby("tokens")["n_params"].nunique().min() >= 15  # 18 distinct N among the 24 shapes
    # the seeds with a final at every shape and budget are the ones the page says
    shapes = fin.groupby(["depth", "width"]).ngroups
    cells = fin.groupby("seed").apply(lambda g: g.groupby(["depth", "width", "tokens"]).ngroups)
    complete = sorted(int(s) for s, n in cells.items() if n == shapes * 3)
    m = re.search(r"Seeds with a final at every shape and budget: ([\d, ]+)\.", PAGE.read_text())
    assert m, "the page does not say which seeds are complete"
    assert complete == [int(x) for x in m[1].split(",")]
    assert shapes == 24 and len(complete) >= 4  # the plan's four seeds at every shape and budget


@pytest.fixture(scope="module")
def study_report(tmp_path_factory) -> dict:
    """`depthwidth analyze` on the shipped table, run once for the tests below."""
    out = tmp_path_factory.mktemp("study") / "r"
    p = subprocess.run(
        [sys.executable, "-m", "analysis", "analyze", str(TABLE), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr
    return {"json": json.loads((out / "report.json").read_text()), "stdout": p.stdout}


def test_analyze_on_the_shipped_table_reproduces_the_page_verdict(study_report):
    m = VERDICT.search(PAGE.read_text())
    assert m, "the page states no verdict line"
    assert (REPO / m["src"]).resolve() == TABLE.resolve()
    thr = study_report["json"]["threshold"]
    assert thr["status"] == m["status"]
    if not thr.get("claimed"):  # the page quotes why not
        assert thr["reason"] in " ".join(PAGE.read_text().split())
    if m["b"] is not None:
        assert _same_at_printed_precision(m["b"], thr["base"])
        lo, hi = thr["base_ci"]
        assert _same_at_printed_precision(m["lo"], lo) and _same_at_printed_precision(m["hi"], hi)
    else:
        assert thr.get("base") is None


def test_the_study_preference_for_shape_rests_on_depth_1(study_report):
    """Without the one-layer runs the shape-agnostic law is preferred; the headline says so."""
    s = study_report["json"]["sensitivity"]
    assert s["status"] == "ok" and s["left_out"] == ["depth", "width", "token budget", "seed"]
    assert len(s["refits"]) == 6 + 4 + 3 + 4
    assert s["reference"]["preferred"] == "width_depth"
    row = next(r for r in s["refits"] if r["left_out"] == "depth 1")
    assert row["preferred"] == "kaplan" and row["n_runs"] == 240
    assert s["changed"] == ["depth 1"]
    sentence = "the preference for shape rests on depth 1: without it, N alone is preferred"
    # without depth 1 the two-regime law's b also runs to its bound: a second knife-edge, same slice
    assert s["headline"] == sentence + "; b is identified on all runs ([20.9, 100]) but not without depth 1"
    assert sentence in study_report["stdout"]  # the verdict line `analyze` prints
    # b = 3 stays outside the best threshold law's profile interval with any one slice left out
    assert all(r["threshold_law"]["excludes_theory"] for r in [s["reference"]] + s["refits"])
