"""report.md and the one-line verdict on fits that fail in every way they can (analysis.reporting.markdown).

A real report of a planted, tuned store is the base; each case below replaces its headline with
what `threshold.headline` returns for one branch (preferred law, identification, interval, the
located rule, the cross-check) or a section with one of its failure states, and the writer must
still give a report that says which case it is in. The CLI runs on planted grids on one side of
L_th and across it, on the grid that once crashed the writer, and on the stores in ../shared/repro.
"""

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis.fitting import synthetic
from analysis.laws import threshold
from analysis.reporting.html import markdown_html
from analysis.reporting.markdown import lth_paragraph, render, verdict_line
from analysis.reporting.report import analyze

P = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)
REPRO = Path(__file__).resolve().parent.parent.parent / "shared" / "repro"
EMPTY = {
    "status": "insufficient_data",
    "reason": "needs at least 2 transition points, has 0",
    "points": [],
    "base": None,
    "base_ci": None,
}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A full report of depths 1-4 x widths 16-64 x 3 learning rates x 2 seeds, b = 3 planted."""
    runs = synthetic.make_tuned_runs(
        "two_regime",
        [1, 2, 3, 4],
        [16, 32, 64],
        P,
        lrs=[1e-3, 3e-3, 1e-2],
        drift=dict(lr0=3e-3, width_exp=0.0, depth_exp=0.0),
        seed=3,
    )
    runs, curves = synthetic.make_curves(runs, 0.6, 50.0, steps=[25, 50, 100, 200, 400, 800])
    store = synthetic.write_store(tmp_path_factory.mktemp("md") / "store", runs, curves)
    return analyze(store, bootstrap=20, seed=0)


def kappa(b, ci, status="ok", profile=None, bic=-90.0, reason="", not_identified=None):
    m = {
        "status": status,
        "params": {"b": b, "E": 1.5},
        "ci": {"b": ci},
        "n_boot": 20,
        "aic": bic,
        "bic": bic,
        "cv_error": 0.01,
        "reason": reason,
    }
    if profile:
        m["profile"] = profile
    if not_identified:
        m["not_identified"] = not_identified
    return m


def regimes_of(preferred, two_regime, combined=None, width_depth_bic=-80.0):
    bad = kappa(
        None,
        None,
        status="not_identified",
        bic=-70.0,
        reason="b: its upper bound 100",
        not_identified={"b": "its upper bound 100"},
    )
    return {
        "preferred": preferred,
        "models": {
            "kaplan": {"status": "ok", "params": {"E": 1.0, "alpha_N": 0.1}, "aic": -60.0, "bic": -60.0},
            "two_regime": two_regime,
            "combined": combined or bad,
            "width_depth": {
                "status": "ok",
                "params": {"alpha_width": 0.3},
                "aic": width_depth_bic,
                "bic": width_depth_bic,
            },
        },
    }


GRID_1_4 = {16.0: [1, 2, 3, 4], 32.0: [1, 2, 3, 4], 64.0: [1, 2, 3, 4]}
TRANSITION = {
    "status": "ok",
    "reason": "",
    "base": 2.9,
    "base_ci": [2.5, 3.4],
    "a": 0.0,
    "beta": 1.06,
    "points": [
        {"depth": 1.5, "width": 5.0, "depths": [1, 2]},
        {"depth": 2.5, "width": 15.0, "depths": [2, 3]},
    ],
    "n_boot": 20,
}

# (name, regimes, transition fit, grid, words in the L_th paragraph, words in the verdict)
CASES = [
    (
        "claimed and located",
        regimes_of("two_regime", kappa(3.0, [2.7, 3.3])),
        EMPTY,
        GRID_1_4,
        ["These runs locate a depth threshold", "contains the theory's b = 3", "width 16: 2.52"],
        "a depth threshold is located",
    ),
    (
        "fitted on one side only",
        regimes_of("two_regime", kappa(1.24, [1.13, 1.5])),
        EMPTY,
        GRID_1_4,
        [
            "do not locate a depth threshold: depth still pays at every depth swept (1–4)",
            "is an extrapolation",
        ],
        "no threshold located: depth still pays",
    ),
    (
        "interval wider than a factor of 4",
        regimes_of("two_regime", kappa(3.0, [1.2, 9.0])),
        EMPTY,
        GRID_1_4,
        ["not claimed: the 95% interval [1.2, 9] spans more than a factor of 4"],
        "no threshold claimed: the 95% interval",
    ),
    (
        "interval on a search bound",
        regimes_of(
            "two_regime",
            kappa(3.0, [1.1, 5.0], profile={"interval": [1.1, 5.0], "open_below": True, "open_above": False}),
        ),
        EMPTY,
        GRID_1_4,
        ["reaches the edge of its search range"],
        "no threshold claimed: the interval of b reaches",
    ),
    (
        "no interval",
        regimes_of("two_regime", kappa(3.0, None)),
        EMPTY,
        GRID_1_4,
        ["no bootstrap interval"],
        "no threshold claimed: no bootstrap interval",
    ),
    (
        "shape-agnostic law preferred",
        regimes_of("kaplan", kappa(3.0, [2.7, 3.3])),
        EMPTY,
        GRID_1_4,
        ["loss depends on N alone"],
        "no threshold claimed: the shape-agnostic law",
    ),
    (
        "law without a threshold preferred, b of the best threshold law quoted",
        regimes_of("width_depth", kappa(2.63, [1.76, 4.37], bic=-85.0), width_depth_bic=-95.0),
        EMPTY,
        GRID_1_4,
        ["show no threshold", "For comparison, the two_regime law gives b = 2.63"],
        "no threshold claimed: the separable width-depth law",
    ),
    (
        "law without a threshold preferred, no threshold law fitted",
        regimes_of(
            "width_depth", kappa(None, None, status="not_identified", reason="b: its lower bound 1.1")
        ),
        EMPTY,
        GRID_1_4,
        ["do not identify the threshold base", "a design that would identify it"],
        "the threshold base is not identified",
    ),
    (
        "preferred threshold law not identified",
        regimes_of(
            "two_regime",
            kappa(
                None,
                None,
                status="not_identified",
                reason="b: spans the range",
                not_identified={"b": "spans the range"},
            ),
        ),
        EMPTY,
        GRID_1_4,
        ["do not identify the threshold base", "two_regime: b: spans the range"],
        "the threshold base is not identified",
    ),
    (
        "preferred law loses a term, the other threshold law bounds b",
        regimes_of(
            "combined",
            kappa(3.0, [2.8, 3.2]),
            combined=kappa(
                None,
                None,
                status="not_identified",
                reason="alpha_N: its lower bound",
                not_identified={"alpha_N": "its lower bound"},
            ),
        ),
        EMPTY,
        GRID_1_4,
        ["the two_regime law (the preferred combined law is not identified"],
        "a depth threshold is located",
    ),
    (
        "nothing fitted at all",
        {
            "preferred": None,
            "models": {"two_regime": {"status": "insufficient_data", "reason": "too few runs", "params": {}}},
        },
        EMPTY,
        GRID_1_4,
        ["neither a threshold law nor the transition widths could be fitted"],
        "no threshold claimed: neither",
    ),
    (
        "transition widths agree with the law",
        regimes_of("two_regime", kappa(3.1, [2.6, 3.6])),
        TRANSITION,
        GRID_1_4,
        ["from transition widths", "Cross-check: the two_regime law", "which agrees"],
        "a depth threshold is located",
    ),
    (
        "transition widths disagree with the law",
        regimes_of("two_regime", kappa(9.0, [8.0, 10.0])),
        TRANSITION,
        GRID_1_4,
        ["which disagrees with the headline"],
        "a depth threshold is located",
    ),
]


@pytest.mark.parametrize("name, reg, tf, grid, words, verdict", CASES, ids=[c[0] for c in CASES])
def test_every_headline_case_is_written_in_words(base, name, reg, tf, grid, words, verdict):
    r = copy.deepcopy(base)
    r["regimes"] = reg
    r["threshold"] = threshold.headline(reg, tf, copy.deepcopy(EMPTY), r.get("design"), grid=grid)
    md = render(r)
    para = re.sub(r"\\(.)", r"\1", lth_paragraph(r))  # the text a reader sees: escapes undone
    for w in words:
        assert w in para, (w, para)
    line = verdict_line(r)
    assert line.startswith("verdict: ") and verdict in line, line
    assert "True" not in line and "False" not in line and "None" not in line
    _, body = markdown_html(md)
    assert "## What the data say about L_th" in md and body
    assert "None" not in para and "nan" not in para


def test_the_real_base_report_and_its_section_failures(base):
    """The base report itself, then each section in its failure state: the writer goes on."""
    md = render(base)
    assert md.count("Tuning axes:") == 1  # the tuning paragraph appears once
    n_in = base["tuning"]["n_runs_in"]
    assert f"{base['n_runs']} of {n_in} runs fitted, each shape at its best lr" in md
    r = copy.deepcopy(base)
    r["chinchilla"] = {"status": "not_identified", "reason": "alpha: its lower bound"}
    r["regime_accounting"] = {"status": "insufficient_data", "reason": "no runs above"}
    r["learning_curves"]["fit"] = {"status": "insufficient_data", "reason": "no curves"}
    r["power_laws"]["per_depth"] = {
        str(d): {"status": "insufficient_data", "reason": "2 widths; needs 3", "n_points": 2}
        for d in range(1, 9)
    }
    r["crossovers"] = [{"depths": [1, 2], "status": "insufficient_data"}]
    r["optimal_depth"] = {"status": "insufficient_data", "points": []}
    r["tuning"]["lr_drift"] = {"status": "no_lr_axis", "reason": "no learning-rate axis was swept"}
    r["figures"]["skipped"] = {"aspect_ratio": "no band holds 3 aspect ratios"}
    r["relrnn"] = {"status": "failed", "reason": "ValueError: x", "markdown": ""}
    r["design"] = {"status": "absent", "reason": "no shape"}
    md = render(
        r,
        design_power={
            "power": 0.8,
            "effect": "b = 3 against b = 2",
            "alpha": 0.05,
            "n_trials": 36,
            "source": "depthwidth design",
        },
    )
    for words in (
        "not_identified: alpha: its lower bound",
        "insufficient_data: no runs above",
        "insufficient_data: no curves",
        "Not fitted, too few widths: depths 1, 2, 3",
        "1 of 1 pairs of depths not compared",
        "Drift of the best learning rate: no learning",
        "Not drawn: aspect_ratio",
        "## Recurrent family",
        "ValueError: x",
        "Power of the plan (depthwidth design): 80% power to detect b = 3 against b = 2 "
        "at a 5% false-positive rate with 36 trials.",
    ):
        assert words in md, words
    r["design"] = base["design"]
    md = render(r, design_power={"text": "the plan sees b = 3 against b = 2 with 90% power"})
    assert "A design that identifies b" in md and "Power of the plan: the plan sees" in md
    r["design_power"] = {"power": None}
    assert "Power of the plan" not in render(r)


def test_a_shape_free_input_gets_its_own_report(tmp_path):
    """No depth and width: the threshold is 'absent' and the report says what was not analysed."""
    pts = synthetic.make_chinchilla(
        dict(E=1.7, A=400.0, B=400.0, alpha=0.34, beta=0.28), n_sizes=6, n_budgets=4
    )
    pts.to_csv(tmp_path / "points.csv", index=False)
    r = analyze(tmp_path / "points.csv", bootstrap=10, seed=0)
    md = render(r)
    assert lth_paragraph(r).startswith("Not analysed:") and "the threshold, the loss laws" in md
    assert verdict_line(r) == "verdict: no depth and width in the input, so no threshold is analysed"


def run_analyze(source, out, *extra):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "depthwidth.cli",
            "analyze",
            str(source),
            "--out",
            str(out),
            "--bootstrap",
            "40",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    return r, report


def planted_csv(path, law, depths, widths, params, seed=0):
    runs = synthetic.make_runs(law, depths, widths, params, seeds=(0, 1), noise=0.01, seed=seed)
    runs[["depth", "width", "n_params", "seed", "loss"]].to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "b, depths, widths, claimed, words",
    [
        (3.0, range(1, 9), [16, 32, 64, 128, 256], True, "verdict: a depth threshold is located, b = "),
        (
            1.5,
            range(1, 5),
            [16, 32, 64],
            False,
            "verdict: no threshold located: depth still pays at every depth swept (1–4); any threshold "
            "lies beyond depth 4 at these widths",
        ),
    ],
)
def test_cli_claims_only_a_located_threshold(tmp_path, b, depths, widths, claimed, words):
    csv = planted_csv(tmp_path / "runs.csv", "two_regime", depths, widths, dict(P, b=b))
    r, report = run_analyze(csv, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert words in r.stdout and "claimed:" not in r.stdout and "True" not in r.stdout
    thr = report["threshold"]
    assert thr["claimed"] is claimed and thr["location"]["located"] is claimed
    md = (tmp_path / "out" / "report.md").read_text()
    assert ("These runs locate a depth threshold" in md) is claimed
    if not claimed:
        assert thr["base"] == pytest.approx(b, rel=0.15) and thr["extrapolation"]
        assert all(p["L_th"] > 4 for p in thr["location"]["per_width"])


def test_cli_writes_a_report_when_a_law_without_threshold_is_preferred(tmp_path):
    """A width-depth grid whose best threshold law still fits b: once a KeyError in the writer."""
    p = dict(E=1.5, A_width=5.0, alpha_width=0.5, A_depth=1.0, alpha_depth=0.5)
    csv = planted_csv(tmp_path / "runs.csv", "width_depth", range(1, 5), [16, 32, 64], p)
    r, report = run_analyze(csv, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "verdict: " in r.stdout and not report["threshold"]["claimed"]
    assert "## What the data say about L_th" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.skipif(not (REPRO / "analyze-keyerror-agree.csv").exists(), reason="../shared/repro absent")
def test_cli_on_the_input_that_crashed_the_writer(tmp_path):
    r, _ = run_analyze(REPRO / "analyze-keyerror-agree.csv", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "verdict: " in r.stdout and (tmp_path / "out" / "report.md").exists()


@pytest.mark.skipif(
    not (REPRO / "smoke-overclaim" / "runs.parquet").exists(), reason="../shared/repro absent"
)
def test_cli_does_not_claim_on_the_smoke_sweep(tmp_path):
    """One run of the README's smoke sweep: every run lies below the fitted L_th."""
    r, report = run_analyze(REPRO / "smoke-overclaim", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "verdict: no threshold located: depth still pays at every depth swept (1–4)" in r.stdout
    thr = report["threshold"]
    assert not thr["claimed"] and thr["status"] != "claimed"
    md = (tmp_path / "out" / "report.md").read_text()
    assert "These runs locate" not in md and "depth still pays at every depth swept (1–4)" in md
    assert "12 of 36 runs fitted, each shape at its best lr" in md
    assert np.all([p["side"] == "beyond" for p in thr["location"]["per_width"]])


def test_a_finished_sweep_ends_with_the_verdict_and_the_report(tmp_path):
    """The sweep service's last lines: the verdict `analyze` prints, then, short, the page to open."""
    import io

    from runstore.store import ResultStore
    from sweeps.running.service import _analyze

    runs = synthetic.make_runs(
        "two_regime", [1, 2, 3, 4], [16, 32, 64], dict(P, b=1.5), seeds=(0, 1), noise=0.01
    )
    runs, curves = synthetic.make_curves(runs, 0.6, 50.0, steps=[25, 50, 100, 200, 400, 800])
    store = synthetic.write_store(tmp_path / "store", runs, curves)
    out = io.StringIO()
    _analyze(ResultStore(str(store)), out)
    *_, verdict, last = out.getvalue().strip().splitlines()
    assert verdict.startswith("verdict: no threshold located: depth still pays at every depth swept")
    page = store / "analysis" / "report.html"  # the page to open, by its absolute path
    assert last == f"report: {page}" and page.is_absolute() and page.is_file()
