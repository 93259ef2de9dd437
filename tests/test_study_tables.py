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


def test_analyze_on_the_shipped_table_reproduces_the_page_verdict(tmp_path):
    m = VERDICT.search(PAGE.read_text())
    assert m, "the page states no verdict line"
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
    if not thr.get("claimed"):  # the page quotes why not
        assert thr["reason"] in " ".join(PAGE.read_text().split())
    if m["b"] is not None:
        assert _same_at_printed_precision(m["b"], thr["base"])
        lo, hi = thr["base_ci"]
        assert _same_at_printed_precision(m["lo"], lo) and _same_at_printed_precision(m["hi"], hi)
    else:
        assert thr.get("base") is None
