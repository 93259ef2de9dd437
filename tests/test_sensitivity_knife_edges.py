"""The sensitivity check names every knife-edge (analysis/laws/sensitivity.py `_changes`): a slice
whose refit changes the preferred law or the claim, leaves the preferred law's lead below 2 units
of BIC, turns b from identified into not identified or back, or moves b = 3 into or out of b's
interval. Each rule has a planted table whose slice does exactly that, and the headline names it.
Budgets follow the design (FLOP budgets on an isoFLOP suite) and seeds past 8 are sampled.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_sensitivity import KAPLAN, P3, sensitivity_of

from analysis.fitting import synthetic
from analysis.laws import sensitivity
from analysis.reporting.answer import _rests_on
from analysis.reporting.markdown_sections import sensitivity_md


def _row(s: dict, label: str) -> dict:
    return next(r for r in s["refits"] if r["left_out"] == label)


@pytest.fixture(scope="module")
def depth_one_step():
    """Losses that follow N alone but for an 8% step at depth 1 (two seeds)."""
    runs = synthetic.make_runs(
        "kaplan", [1, 2, 3, 4, 6], [16, 32, 64, 128], KAPLAN, seeds=(0, 1), noise=0.01, seed=2
    )
    runs.loc[runs["depth"] == 1, "loss"] *= 1.08
    return sensitivity_of(runs)


def test_a_slice_the_preferred_law_rests_on_is_named(depth_one_step):
    """Rule (a): without depth 1 the shape-agnostic law is preferred (and the threshold law's b
    runs to its bound, so b is no longer identified either)."""
    s = depth_one_step
    assert s["reference"]["preferred"] == "combined"
    assert _row(s, "depth 1")["changes"] == ["preferred", "identified"]
    assert s["headline"].startswith(
        "the preference for shape rests on depth 1: without it, N alone is preferred"
    )


def test_a_slice_that_moves_b_3_across_the_interval_is_named(depth_one_step):
    """Rule (d): b = 3 lies outside the combined law's interval on all runs and inside it
    without depth 2, b identified in both."""
    s = depth_one_step
    ref, row = s["reference"]["threshold_law"], _row(s, "depth 2")
    assert ref["status"] == row["threshold_law"]["status"] == "ok"
    assert ref["excludes_theory"] and not row["threshold_law"]["excludes_theory"]
    assert _row(s, "depth 2")["changes"] == ["theory"]
    assert (
        "b = 3 lies outside b's interval on all runs but inside it without depth 2 (without depth 2, ["
        in s["headline"]
    )
    assert {r["left_out"] for r in s["refits"] if r["changes"]} == {"depth 1", "depth 2"}


def test_a_lead_that_falls_to_a_near_tie_is_named():
    """Rule (b): on losses that follow N alone, N alone leads by 10 units of BIC; without width
    128 by 0.4, the same law preferred: a near-tie the headline names, with its margin."""
    s = sensitivity_of(
        synthetic.make_runs("kaplan", [1, 2, 3, 4], [16, 32, 64, 128], KAPLAN, noise=0.01, seed=1)
    )
    assert s["reference"]["preferred"] == "kaplan" and s["reference"]["bic_margin"] > 2
    row = _row(s, "width 128")
    assert row["preferred"] == "kaplan" and row["bic_margin"] < 2
    assert row["changes"] == ["near_tie"] and s["changed"] == ["width 128"]
    assert s["headline"] == (
        f"N alone leads by {s['reference']['bic_margin']:.3g} units of BIC on all runs but by less "
        f"than 2, a near-tie, without width 128 (without width 128, {row['bic_margin']:.2g})"
    )


def test_a_slice_that_identifies_b_or_not_is_named():
    """Rule (c): a two-regime table (b = 3) whose width-64 runs are flat in depth; on all runs
    the two-regime law bounds b, and without depth 1, width 16 or width 32 its b runs to a
    bound (not identified) while nothing else changes."""
    runs = synthetic.make_runs("two_regime", range(1, 7), [16, 32, 64, 128], P3, noise=0.01, seed=1)
    flat = runs["width"] == 64
    runs.loc[flat, "loss"] = runs.loc[flat, "loss"].mean() * np.exp(
        np.random.default_rng(5).normal(0, 0.01, flat.sum())
    )
    s = sensitivity_of(runs)
    assert s["reference"]["threshold_law"]["status"] == "ok"
    for label in ("depth 1", "width 16", "width 32"):
        row = _row(s, label)
        assert row["changes"] == ["identified"] and row["threshold_law"]["status"] == "not_identified"
    lo, hi = s["reference"]["threshold_law"]["interval"]
    assert (
        f"b is identified on all runs ([{lo:.3g}, {hi:.3g}]) but not without depth 1, width 16 and width 32"
        in (s["headline"])
    )


def test_a_claim_that_rests_on_one_slice_is_named():
    """Rule (a), the claim: b is claimed on all runs and not without depth 1."""
    s = sensitivity_of(
        synthetic.make_runs("two_regime", [1, 2, 3, 4, 5], [16, 32, 64, 128], P3, noise=0.03, seed=4)
    )
    assert s["reference"]["status"] == "claimed"
    row = _row(s, "depth 1")
    assert "status" in row["changes"] and row["status"] != "claimed"
    assert "the verdict on b (claimed) rests on depth 1: without it, b is " in s["headline"]


def _verdict(pref="kaplan", margin=10.0, status="not_claimed", tl=None) -> dict:
    return {"preferred": pref, "bic_margin": margin, "status": status, "threshold_law": tl}


def _tl(status="ok", lo=2.0, hi=4.0) -> dict:
    return {
        "law": "two_regime",
        "status": status,
        "b": (lo * hi) ** 0.5,
        "interval": [lo, hi],
        "open": False,
        "excludes_theory": not lo <= 3 <= hi,
    }


LAWS = st.sampled_from(["kaplan", "width_depth", "two_regime", "combined"])
VERDICTS = st.builds(
    _verdict,
    pref=LAWS,
    margin=st.none() | st.floats(0, 50),
    status=st.sampled_from(["claimed", "not_claimed", "not_identified"]),
    tl=st.none()
    | st.builds(
        _tl, status=st.sampled_from(["ok", "not_identified"]), lo=st.floats(1.1, 10), hi=st.floats(10, 100)
    ),
)


@settings(max_examples=300, deadline=None)
@given(ref=VERDICTS, row=VERDICTS)
def test_each_rule_fires_exactly_when_its_condition_holds(ref, row):
    """The rules of `_changes`, stated for any pair of verdicts."""
    got = set(sensitivity._changes(ref, row))
    assert ("preferred" in got) == (row["preferred"] != ref["preferred"])
    assert ("status" in got) == ((row["status"] == "claimed") != (ref["status"] == "claimed"))
    tie = (
        row["preferred"] == ref["preferred"]
        and row["bic_margin"] is not None
        and row["bic_margin"] < 2
        and (ref["bic_margin"] is None or ref["bic_margin"] >= 2)
    )
    assert ("near_tie" in got) == tie
    ident = lambda v: bool(v["threshold_law"] and v["threshold_law"]["status"] == "ok")  # noqa: E731
    assert ("identified" in got) == (ident(ref) != ident(row))
    inside = lambda v: 3 <= v["threshold_law"]["interval"][1] and v["threshold_law"]["interval"][0] <= 3  # noqa: E731
    theory = ident(ref) and ident(row) and inside(ref) != inside(row)
    assert ("theory" in got) == theory
    text = sensitivity.headline_sentence(
        ref, [{**row, "left_out": "width 64", "changes": sorted(got)}], ["width"]
    )
    assert ("width 64" in text) == bool(got)


def test_an_isoflop_suite_is_left_out_by_flop_budget():
    """Every run its own token count (an isoFLOP suite: three budgets, each over five sizes, D =
    C/(6N)): the budgets left out are the three FLOP budgets, not fifteen single runs."""
    rows = []
    for c in (1e15, 1e16, 1e17):
        for d, w in [(1, 32), (2, 32), (2, 64), (4, 64), (4, 128)]:
            n = 12 * d * w * w
            rows.append(dict(depth=d, width=float(w), seed=0, n_params=float(n), tokens=round(c / (6 * n))))
    runs = pd.DataFrame(rows).assign(run_id=range(15))
    cuts = sensitivity.slices(runs, runs)
    budgets = [c for c in cuts if c["kind"] in ("tokens", "flops")]
    assert [c["label"] for c in budgets] == ["FLOP budget 1e15", "FLOP budget 1e16", "FLOP budget 1e17"]
    assert all(c["keep"].sum() == 10 for c in budgets)
    assert sensitivity.design_notes(runs) == [
        "every run has its own token count, so each FLOP budget is left out in turn"
    ]
    # a shared token budget stays a token budget
    shared = runs.assign(tokens=[1e5, 3e5, 9e5] * 5)
    assert {c["kind"] for c in sensitivity.slices(shared, shared)} >= {"tokens"}
    # a budget that grows with N (20 tokens per parameter) repeats neither: no budget is left out
    grown = runs.assign(tokens=20 * runs["n_params"])
    assert not any(c["kind"] in ("tokens", "flops") for c in sensitivity.slices(grown, grown))
    assert "no budget is a slice of this design" in sensitivity.design_notes(grown)[0]


def test_seeds_past_the_bound_are_sampled_and_said():
    """2,000 seeds are not 2,000 refits: 8 of them, spread over the seeds, and a note."""
    runs = pd.DataFrame(
        [dict(depth=d, width=w, seed=s) for d in (1, 2) for w in (16.0, 32.0) for s in range(2000)]
    ).assign(run_id=lambda t: range(len(t)))
    seeds = [c["value"] for c in sensitivity.slices(runs, runs) if c["kind"] == "seed"]
    assert len(seeds) == sensitivity.MAX_SEEDS_LEFT_OUT == 8
    assert seeds[0] == 0 and seeds[-1] == 1999 and seeds == sorted(set(seeds))
    note = sensitivity.design_notes(runs)[0]
    assert note.startswith("2,000 seeds: 8 of them, spread evenly over their values (0, 286, ")


def test_analyze_leaves_out_a_stated_sample_of_many_seeds(tmp_path):
    """The seed bound through the CLI: 12 shapes x 40 seeds; the report refits 8 seeds, not 40, and
    report.md says which were left out and why (the bound)."""
    import json

    from test_analysis_bad_numbers import analyze

    rng = np.random.default_rng(0)
    rows = [
        dict(
            depth=d,
            width=w,
            seed=s,
            n_params=12 * d * w * w,
            loss=3 + 50 / np.sqrt(12 * d * w * w) + 0.01 * rng.standard_normal(),
        )
        for d in (1, 2, 3, 4)
        for w in (16, 32, 64)
        for s in range(40)
    ]
    csv = tmp_path / "seeds.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    res = analyze(csv, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    s = json.loads((tmp_path / "out" / "report.json").read_text())["sensitivity"]
    assert [r["kind"] for r in s["refits"]].count("seed") == 8 and len(s["refits"]) == 4 + 3 + 8
    note = "40 seeds: 8 of them, spread evenly over their values (0, 6, 11, 17, 22, 28, 33, 39)"
    assert s["notes"][0].startswith(note)
    assert f"- {note}" in (tmp_path / "out" / "report.md").read_text()


@settings(max_examples=200, deadline=None)
@given(ref=VERDICTS, row=VERDICTS)
def test_the_table_gives_no_point_and_no_judgement_of_b_3_where_b_is_not_identified(ref, row):
    """A b on its bound or with a profile open across the range is no estimate: its row shows
    the profile interval alone, and b = 3 is judged only against an identified b's interval."""
    rows = [
        {
            **v,
            "left_out": name,
            "n_runs": 10,
            "changes": sensitivity._changes(ref, v) if name != "none" else [],
        }
        for name, v in (("none", ref), ("width 64", row))
    ]
    s = {"status": "ok", "headline": "x", "method": "y", "reference": rows[0], "refits": rows[1:]}
    md = sensitivity_md({"sensitivity": s})
    for v, line in zip(rows, [ln for ln in md if ln.startswith(("| none ", "| width 64 "))]):
        cells = [c.strip() for c in line.strip("|").split("|")]
        tl = v["threshold_law"]
        if tl is None:
            assert cells[4] == "–" and cells[5] == "–"
        elif tl["status"] != "ok":
            assert cells[4].startswith("two_regime: not identified [") and cells[5] == "–"
        else:
            assert cells[4].startswith(f"two_regime: {tl['b']:.3g} [")
            assert cells[5] == ("excluded" if tl["excludes_theory"] else "inside")


@pytest.mark.parametrize(
    "change, words",
    [
        ("preferred", "without width 256, another law is preferred"),
        ("near_tie", "without width 256, the preferred law leads by under 2 units of BIC"),
        ("identified", "without width 256, b is identified"),
    ],
)
def test_the_answer_says_what_the_slice_it_rests_on_changes(change, words):
    s = {
        "status": "ok",
        "changed": ["width 256"],
        "reference": {"threshold_law": _tl(status="not_identified")},
        "refits": [{"left_out": "width 256", "changes": [change]}],
    }
    assert _rests_on({"sensitivity": s}) == f"; {words} (see Sensitivity)"


def test_a_sentence_opening_with_a_symbol_keeps_its_case():
    from analysis.reporting.markdown_sections import _upper

    assert _upper("b is identified on all runs") == "b is identified on all runs"  # b, not B
    assert _upper("the preference for shape") == "The preference for shape"
