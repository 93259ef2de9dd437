"""The answer first (analysis/reporting/answer.py): every report opens with one plain sentence of
at most 250 characters answering its question for these runs, in report.json (`answer`), first
in report.md, report.html and the terminal, before any statistic. Planted tables give each kind
of answer through the real CLI; a property test states for any verdict that the sentence stays
within the design it was run on. kaplan.md, the recurrent and the adaptive sections open with
their own answers.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from helpers import cli
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.fitting import synthetic
from analysis.kerg import relrnn_compare
from analysis.reporting import adaptive_report
from analysis.reporting.answer import MAX_CHARS, answer

P = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3)


def _flat_width_64() -> pd.DataFrame:
    runs = synthetic.make_runs(
        "two_regime", range(1, 7), [16, 32, 64, 128], dict(P, b=3.0), noise=0.01, seed=1
    )
    flat = runs["width"] == 64
    runs.loc[flat, "loss"] = runs.loc[flat, "loss"].mean() * np.exp(
        np.random.default_rng(5).normal(0, 0.01, flat.sum())
    )
    return runs


TABLES = {
    # b = 3 across depths 1-6 at widths 16-256: located
    "located": lambda: synthetic.make_runs(
        "two_regime", [1, 2, 3, 4, 5, 6], [16, 32, 64, 128, 256], dict(P, b=3.0), noise=0.01, seed=1
    ),
    # b = 1.5 at depths 1-4: L_th = 6.8 to 10 layers, past every depth run
    "still pays": lambda: synthetic.make_runs(
        "two_regime", [1, 2, 3, 4], [16, 32, 64], dict(P, b=1.5), seeds=(0, 1), noise=0.01, seed=1
    ),
    # every run at depths 8-12, past log_3 d: b is not identified
    "not identified": lambda: synthetic.make_runs(
        "two_regime",
        None,
        None,
        dict(P, b=3.0),
        shapes=[(d, w) for d in (8, 10, 12) for w in (16, 64)],
        noise=0.02,
        seed=5,
    ),
    # the loss follows N alone
    "N alone": lambda: synthetic.make_runs(
        "kaplan", [1, 2, 3, 4], [16, 32, 64, 128], dict(E=1.2, A_N=30.0, alpha_N=0.3), noise=0.01, seed=1
    ),
    # shape matters (one width flat in depth), the separable law preferred: no threshold
    "shape, no threshold": _flat_width_64,
    # b = 1.5 at depths 4-8, every run past log_3 d: b = 3 excluded on the law's form alone
    "form alone": lambda: synthetic.make_runs(
        "two_regime", [4, 5, 6, 7, 8], [8, 16, 32], dict(P, b=1.5), seeds=(0, 1), noise=0.01, seed=1
    ),
}
EXPECTED = {
    "located": r"^At widths 16–256 adding layers stops paying near depth 2\.5–5 \(L_th = log_b d, b = 3\.0\d? \[",
    "still pays": r"^These runs do not locate a threshold: depth still lowers the loss at every depth swept \(1–4\) "
    r"at widths 16–64, and this design cannot place L_th \(see Design\)",
    "not identified": r"^These runs cannot place a threshold: b is not identified at depths 8–12, widths 16–64",
    "N alone": r"^In these runs \(depths 1–4, widths 16–128\) the loss depends on the parameter count alone",
    "shape, no threshold": r"^Shape matters in these runs \(depths 1–6, widths 16–128\), but the law that fits them best, "
    r"the separable width-depth law, has no threshold: they place no L_th = log_b d",
    "form alone": r"which excludes the theory's b = 3, on the law's form alone \(no run below log_3 d\)\)",
}


@pytest.mark.parametrize("kind", list(TABLES))
def test_each_kind_of_answer_comes_first_everywhere(tmp_path, kind):
    runs = TABLES[kind]()
    csv = tmp_path / "runs.csv"
    runs[["depth", "width", "seed", "loss"]].to_csv(csv, index=False)
    res = cli("analyze", csv, "--out", tmp_path / "out", "--bootstrap", 20)
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    said = report["answer"]
    assert re.search(EXPECTED[kind], said), said
    assert len(said) <= MAX_CHARS and said.endswith(".") and "\n" not in said
    assert list(report)[0] == "answer"
    assert res.stdout.splitlines()[0] == said  # the terminal: before the tuning and fit lines
    md = (tmp_path / "out" / "report.md").read_text().splitlines()
    # report.md holds the sentence escaped for Markdown (analysis/reporting/markup.py): as read
    assert unescaped(md[2]) == said and md.index("## What the data say about L_th") < md.index("## Input")
    page = (tmp_path / "out" / "report.html").read_text()
    import html

    assert page.index(f'<p class="answer">{html.escape(said)}</p>') < page.index('<p class="meta">')
    assert page.count(html.escape(said)) == 1  # shown once, not again among the fits
    if kind == "form alone":
        assert report["threshold"]["theory_basis"]["form_alone"]
        assert "rests on the law's form in the saturating regime alone" in res.stdout


def unescaped(line: str) -> str:
    """A Markdown line as a reader sees it: each backslash escape by the character it escapes."""
    return re.sub(r"\\(.)", r"\1", line)


def _report(status, pref, depths, widths, base=None, ci=None, sides=None, changed=0) -> dict:
    grid = {float(w): list(depths) for w in widths}
    per = []
    if base is not None and ci is not None:
        for w, ds in grid.items():
            lth = float(np.log(w) / np.log(base))
            lo, hi = sorted(float(np.log(w) / np.log(b)) for b in ci)
            side = sides or ("beyond" if lth > ds[-1] else "below" if lth < ds[0] else "located")
            per.append({"width": w, "depths": ds, "L_th": lth, "L_th_ci": [lo, hi], "side": side})
    thr = {
        "status": status,
        "claimed": status == "claimed",
        "base": base,
        "base_ci": ci,
        "consistent_with_theory": None if ci is None else bool(ci[0] <= 3 <= ci[1]),
        "extrapolation": status == "not_claimed"
        and bool(per)
        and {p["side"] for p in per} in ({"beyond"}, {"below"}),
        "location": {"per_width": per},
        "method": "the two_regime law",
    }
    if thr["claimed"] and (base is None or ci is None or not any(p["side"] == "located" for p in per)):
        thr.update(claimed=False, status="not_claimed", extrapolation=True)
    return {
        "threshold": thr,
        "regimes": {"preferred": pref},
        "depths": sorted(depths),
        "widths": sorted(float(w) for w in widths),
        # the slices a real check names are the design's own
        "sensitivity": {
            "status": "ok",
            "changed": [f"depth {min(depths)}", f"width {max(widths):g}", "seed 3"][:changed],
        },
    }


REPORTS = st.builds(
    _report,
    status=st.sampled_from(["claimed", "not_claimed", "not_identified"]),
    pref=st.sampled_from(["kaplan", "width_depth", "two_regime", "combined"]),
    depths=st.lists(st.integers(1, 120), min_size=1, max_size=12, unique=True).map(sorted),
    widths=st.lists(
        st.sampled_from([8, 16, 32, 64, 96, 128, 256, 1024, 4096, 16384]), min_size=1, max_size=8, unique=True
    ),
    base=st.none() | st.floats(1.1, 100),
    ci=st.none() | st.tuples(st.floats(1.1, 10), st.floats(10, 100)).map(list),
    changed=st.integers(0, 3),
)


@settings(max_examples=400, deadline=None)
@given(r=REPORTS)
def test_the_answer_is_one_sentence_within_the_design(r):
    """For any verdict: one sentence of at most 250 characters; every depth it names lies within
    the depths swept and every width within the widths swept; only a located claim says where
    adding layers stops paying."""
    said = answer(r)
    assert len(said) <= MAX_CHARS and said.endswith(".") and "\n" not in said
    lo_d, hi_d = min(r["depths"]), max(r["depths"])
    lo_w, hi_w = min(r["widths"]), max(r["widths"])
    for word, lo, hi in (("depths? ", lo_d, hi_d), ("widths? ", lo_w, hi_w)):
        for m in re.finditer(word + r"(?:swept \()?([\d.]+)(?:–([\d.]+))?", said):
            for v in filter(None, m.groups()):
                assert lo - 1e-9 <= float(v) * (1 + 1e-2) and float(v) * (1 - 1e-2) <= hi + 1e-9, (said, v)
    assert ("stops paying near depth" in said or "starts to beat" in said) == bool(r["threshold"]["claimed"])


def test_no_depth_and_width_says_what_is_reported():
    r = {"threshold": {"status": "absent"}, "depths": [], "widths": []}
    assert answer(r).startswith("These runs have no depth and width, so they cannot say at what depth")
    rel = {**r, "relrnn": {"answer": "Relevancy screening beats the LSTM."}}
    assert answer(rel) == "Relevancy screening beats the LSTM."


def _head(task, T, holds, every) -> dict:
    return {"task": task, "T": T, "holds": holds, "holds_every_seed": every}


def test_the_recurrent_study_opens_with_its_answer():
    by = [
        _head("copy", 200, True, True),
        _head("denoise", 200, True, False),
        _head("digits", 784, False, False),
    ]
    said = relrnn_compare.answer({"by_task": by})
    assert said == (
        "Relevancy screening beats the LSTM by the claim's margin (accuracy ≥ 0.9, 0.2 above the LSTM) "
        "on every seed at copy (T = 200) and in the median only at denoise (T = 200), but not at digits (T = 784)."
    )
    assert len(said) <= MAX_CHARS
    none = relrnn_compare.answer({"by_task": [_head("copy", 100, False, False)]})
    assert none.startswith("Relevancy screening does not beat the LSTM by the claim's margin")
    assert relrnn_compare.answer({"by_task": []}).startswith("These runs cannot compare relevancy screening")


def test_the_adaptive_section_opens_with_its_answer():
    a = {
        "rounds": 3,
        "choices": [{}] * 9,
        "estimates": [
            {"round": 1, "base": 3.0, "ci": [1.5, 9.0]},
            {"round": 3, "base": 3.1, "ci": [2.6, 3.7]},
        ],
        "stop": "budget is spent",
    }
    said = adaptive_report.answer(a)
    assert (
        said
        == "The adaptive sweep chose 9 cells in 3 rounds and narrowed b's interval from [1.5, 9] to [2.6, 3.7]."
    )
    md = adaptive_report.markdown({**a, "choices": [], "answer": said})
    assert unescaped(md[2]) == said


def test_kaplan_md_opens_with_its_answer():
    from analysis.reporting.answer import kaplan_answer
    from analysis.reporting.markdown import render_kaplan

    k = {
        "source": "s",
        "ours": {
            "alpha_N": {"value": 0.08, "ci": [0.07, 0.09]},
            "alpha_S": None,
            "shape": {},
            "depth_collapse": {},
        },
        "kaplan2020": {"alpha_N": {"value": 0.076}, "alpha_S": {"value": 0.76, "S_c": 2.1e3}},
        "levine_departures": [],
        "note": "n",
    }
    said = kaplan_answer(k)
    assert (
        said
        == "Beside Kaplan et al. 2020, in these runs alpha_N = 0.08 [0.07, 0.09] holds their 0.076; alpha_S is not fitted."
    )
    assert render_kaplan(k).splitlines()[2] == said


def test_an_interval_saved_as_null_is_written_as_unknown_not_a_crash():
    """report.json keeps a non-finite interval end as null; the answer read from it says '–'."""
    r = {
        "depths": [1, 2, 3],
        "widths": [16, 32],
        "threshold": {"status": "ok", "base": 2.0, "base_ci": [1.1, None]},
        "regimes": {"preferred": "two_regime"},
    }
    assert "b's interval [1.1, –] is too wide to claim at depths 1–3, widths 16–32" in answer(r)
