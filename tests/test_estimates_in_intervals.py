"""No estimate outside its own interval. The profile interval of b is read from a deviance
measured against the point fit itself (analysis/fitting/profile.py `deviance`), so it holds the
estimate whatever the profile looks like; a slice's refit moves its point to a better profile
value when one beats it (analysis/laws/sensitivity.py). Every report kept under docs/ is read and
no row shows an estimate outside its interval.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.fitting import identify

REPO = Path(__file__).resolve().parent.parent
CPU_STUDY = REPO / "docs" / "studies" / "data" / "threshold-cpu.csv"

# (estimate, interval) pairs as the reports keep them; a fit's params beside its ci by name.
PAIRS = (
    ("base", "base_ci"),
    ("b", "interval"),
    ("L_th", "L_th_ci"),
    ("n_params", "n_params_ci"),
    ("value", "ci"),
)


def _interval(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v)


def estimate_pairs(obj, path: str = "") -> list[tuple[str, float, list]]:
    """Every (where, estimate, interval) in a report.json, walking it whole."""
    out = []
    if isinstance(obj, dict):
        for e, i in PAIRS:
            if isinstance(obj.get(e), (int, float)) and _interval(obj.get(i)):
                out.append((f"{path}.{e}", float(obj[e]), obj[i]))
        if isinstance(obj.get("params"), dict) and isinstance(obj.get("ci"), dict):
            for k, v in obj["params"].items():
                if isinstance(v, (int, float)) and _interval(obj["ci"].get(k)):
                    out.append((f"{path}.params.{k}", float(v), obj["ci"][k]))
        for k, v in obj.items():
            out += estimate_pairs(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for j, v in enumerate(obj):
            out += estimate_pairs(v, f"{path}[{j}]")
    return out


def outside(pairs) -> list:
    """The pairs whose estimate lies outside its interval (beyond rounding to 1e-9)."""
    return [
        (p, v, ci)
        for p, v, ci in pairs
        if not min(ci) - 1e-9 * abs(min(ci)) <= v <= max(ci) + 1e-9 * abs(max(ci))
    ]


@settings(max_examples=300, deadline=None)
@given(
    dev=st.lists(st.floats(0, 50) | st.just(float("inf")), min_size=2, max_size=30),
    at=st.floats(0, 1),
    shift=st.floats(-0.5, 0.5),
)
def test_the_profile_interval_holds_its_estimate(dev, at, shift):
    """Whatever the deviances read on the grid, and wherever the point fit's b falls on it or
    between its values, the interval holds b̂."""
    grid = np.exp(np.linspace(np.log(1.1), np.log(100), len(dev)))
    b_hat = float(np.exp(np.clip(np.log(grid[int(at * (len(dev) - 1))]) + shift, np.log(1.1), np.log(100))))
    iv = identify._profile_interval(grid, np.array(dev), b_hat)
    lo, hi = iv["interval"]
    assert lo <= b_hat <= hi
    assert len(iv["b"]) == len(iv["deviance"]) == len(grid)  # the profile's own values, b̂ or not


def test_the_deviance_is_measured_from_the_point_fit():
    """A profile value that fits the log losses better than the point fit (as the Huber optimum
    need not be the least-squares one) has deviance 0, not a negative one; one that fits worse is
    measured against the point fit, not against the best value on the grid."""
    from analysis.fitting import fitcore
    from analysis.fitting.profile import deviance
    from analysis.laws.regimes import MODELS

    law = MODELS["kaplan"]
    X = fitcore.make_X(law, N=np.array([1e4, 1e5, 1e6]))
    logy = np.log([3.0, 2.5, 2.2])
    w = np.ones(3)
    th = np.array([[np.log(1.5), np.log(30.0), 0.3], [np.log(1.0), np.log(30.0), 0.3]])
    lp, _ = law.evaluate(th, X, jac=False)
    rss = np.sum((logy - lp) ** 2, axis=1)
    dev = deviance(law, X, logy, w, th, np.ones(2), float(rss[0]), 3.0)
    assert dev[0] == 0.0
    assert dev[1] == pytest.approx(3.0 * np.log(max(rss[1], rss[0]) / rss[0]))


@pytest.mark.skipif(not CPU_STUDY.exists(), reason="the CPU study's runs table is not in this checkout")
def test_the_cpu_studys_slices_hold_their_estimates():
    """The CPU study's depth-2 row read 'two_regime: 23.2 [29.1, 71.8]': the Huber point fit had a
    larger least-squares residual than a profile value at b = 55, and the interval was measured
    from that value. Every slice's b now lies inside its own interval."""
    from analysis.laws import regimes, sensitivity, tokens, tuning
    from analysis.readers.inputs import load

    ds, _ = tuning.apply(load(CPU_STUDY), (), "auto", False)
    points, source = tokens.token_points(ds.runs, ds.curves)
    fits = regimes.fit_regimes(ds.runs, 0, 3, points=points, points_source=source)
    s = sensitivity.sensitivity(ds.runs, points.reset_index(drop=True), fits["fits"])
    rows = [s["reference"]] + s["refits"]
    assert len(rows) == 18
    pairs = [(r["left_out"], r["threshold_law"]["b"], r["threshold_law"]["interval"]) for r in rows]
    assert outside(pairs) == []
    for name, m in fits["models"].items():
        if m.get("profile") and m.get("params", {}).get("b") is not None:
            lo, hi = m["profile"]["interval"]
            assert lo <= m["params"]["b"] <= hi, name


NUMBER = r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?"
# "23.2 [29.1, 71.8]": an estimate quoted beside its interval in report.md's rows and sentences
MD_PAIR = re.compile(rf"(?<![\w.\[-])({NUMBER}) \[({NUMBER}), ({NUMBER})\]")


def md_outside(text: str) -> list:
    """The estimates of report.md quoted outside their interval (beyond the 3 significant digits
    they are written with)."""
    bad = []
    for m in MD_PAIR.finditer(text):
        v, lo, hi = map(float, m.groups())
        slack = 5e-3 * max(abs(v), abs(lo), abs(hi))
        if not lo - slack <= v <= hi + slack:
            bad.append(m.group(0))
    return bad


def test_md_pairs_are_read():
    assert md_outside("two_regime: 23.2 [29.1, 71.8] (open); width 16: 12.9 [1.9, 29.1]") == [
        "23.2 [29.1, 71.8]"
    ]
    assert md_outside("| E | 0.992 [0.218, 1.57] | depths [1, 2, 3, 4]; 1e+05 [2e+04, 3e+05]") == []


def reports_in_docs() -> list[Path]:
    return sorted(p for name in ("report.json", "report.md") for p in (REPO / "docs").rglob(name))


def test_every_report_in_docs_keeps_its_estimates_inside_their_intervals():
    """Each report under docs/ (the gallery's, the studies'): no estimate outside its interval,
    in any section of report.json or any row of report.md; and report.md opens with the answer."""
    reports = reports_in_docs()
    assert any(p.name == "report.json" for p in reports), (
        "the gallery keeps the smoke report under docs/gallery/"
    )
    for path in reports:
        if path.name == "report.json":
            report = json.loads(path.read_text())
            pairs = estimate_pairs(report)
            assert pairs, f"{path}: no estimate with an interval"
            assert outside(pairs) == [], path
            continue
        text = path.read_text()
        assert md_outside(text) == [], path
        lines = [line for line in text.splitlines() if line.strip()]
        assert lines[0].startswith("# ") and len(lines[1]) <= 250 and lines[1].endswith("."), path
        if path.with_name("report.json").exists():
            assert lines[1] == json.loads(path.with_name("report.json").read_text())["answer"], path
