"""The shipped CPU threshold study (docs/studies/threshold-cpu.md): its runs table has the design
the page claims (4+ seeds per shape and budget among the finals, token budgets that do not move
with N), and `depthwidth analyze` on it reproduces the verdict the page states, to the printed
precision."""

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
    keep, info = finals(runs)
    fin = runs[keep]
    assert info["axis"] == "lr" and info["undecided_groups"] == 0
    per = fin.groupby(["depth", "width", "tokens"])["seed"].nunique()
    assert per.min() >= 4, per[per < 4]
    budgets = fin.groupby(["depth", "width"])["tokens"].nunique()
    assert budgets.min() >= 2  # every shape at two or more token budgets ...
    assert fin.groupby("tokens")["n_params"].nunique().min() > 1  # ... each shared across sizes
    assert fin["parametrization"].eq("completep").all()


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
    if m["b"] is None:
        assert not thr.get("claimed")
        assert thr["reason"] in " ".join(PAGE.read_text().split())  # the page quotes why
    else:
        assert _same_at_printed_precision(m["b"], thr["base"])
        lo, hi = thr["base_ci"]
        assert _same_at_printed_precision(m["lo"], lo) and _same_at_printed_precision(m["hi"], hi)
