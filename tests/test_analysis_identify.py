"""Identifiability (analysis.fitting.identify, analysis.laws.levine, the status of every fit): a parameter on its
bound or an interval spanning the allowed range is `not_identified` with no estimate; sparse
planted designs (one or two widths per depth) give `not_identified` or an interval that holds the
planted b, never a wrong confident b; regime counts and the phase map by hand."""

import numpy as np
import pandas as pd
import pytest

from analysis.fitting import identify, powerlaw, synthetic
from analysis.fitting.fitcore import Law
from analysis.laws import levine, regimes, threshold
from analysis.reporting import plots

P3 = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)
WIDTHS = [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]


def test_an_exponent_on_its_bound_is_not_identified_and_quotes_nothing():
    N = np.logspace(4, 6, 12)
    y = (3e4 / N) ** 8.0  # alpha = 8 lies beyond the search range [0.001, 5]
    res = powerlaw.fit_power_law(N, y, n_boot=20, irreducible=False)
    assert res.status == "not_identified" and not res.ok
    assert res.not_identified == {"alpha_N": "its upper bound 5"}
    assert "alpha_N: its upper bound 5" in res.reason
    d = res.to_dict()
    assert d["params"] == {} and d["ci"] == {} and d["theta"] == []


def test_a_floor_on_its_lower_bound_refits_the_pure_form():
    N = np.repeat(np.logspace(4, 9, 8), 2)
    y = (8.8e13 / N) ** 0.076 * np.exp(np.random.default_rng(0).normal(0, 0.005, N.size))
    res = powerlaw.fit_power_law(N, y, n_boot=50)  # eight sizes: the floor is tried first
    assert res.ok and not res.law.irreducible and "E" not in res.params
    assert "refitted without it" in res.note
    assert res.params["alpha_N"] == pytest.approx(0.076, rel=0.05)


def test_bootstrap_interval_across_the_whole_range_is_named():
    law = Law("t", ("kappa",))
    logy = np.log([2.0, 3.0])
    lo, hi = law.bounds(np.exp(logy))
    draws = np.tile((lo + hi) / 2, (40, 1))
    draws[:20, -1], draws[20:, -1] = lo[-1], hi[-1]
    got = identify.spans_range(law, draws, logy)
    assert list(got) == ["b"] and "[1.1, 100]" in got["b"]


def test_profile_interval_tells_closed_one_sided_and_flat_apart():
    b = np.exp(np.linspace(np.log(1.1), np.log(100), 40))
    closed = identify._profile_interval(b, 20 * np.log(b / 3.0) ** 2, 3.0)
    assert not (closed["open_below"] or closed["open_above"])
    lo, hi = closed["interval"]
    # D = 20 ln(b/3)^2 = 3.84 at b = 3·exp(±sqrt(3.84/20)), up to the grid's interpolation.
    assert lo == pytest.approx(3 * np.exp(-np.sqrt(3.84 / 20)), rel=0.03)
    assert hi == pytest.approx(3 * np.exp(np.sqrt(3.84 / 20)), rel=0.03)
    rising = identify._profile_interval(b, np.maximum(0, 10 * np.log(8.0 / b)), 100.0)
    assert rising["open_above"] and not rising["open_below"] and rising["interval"][0] > 5
    assert "only bounds b from below" in identify.describe_profile(rising)
    flat = identify._profile_interval(b, np.zeros_like(b), 10.0)
    assert flat["spans_range"] and "does not bound b" in identify.describe_profile(flat)


def _sparse(seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [(d, int(w)) for d in range(1, 11) for w in rng.choice(WIDTHS, rng.integers(1, 3), replace=False)]


GEMSTONES_LIKE = [
    (28, 1024),
    (15, 1280),
    (36, 1280),
    (50, 1536),
    (18, 1792),
    (7, 1792),
    (27, 2048),
    (8, 2560),
    (23, 256),
    (27, 256),
    (71, 256),
    (80, 256),
    (12, 3072),
    (13, 384),
    (36, 384),
    (11, 512),
    (12, 512),
    (13, 512),
    (14, 512),
    (16, 512),
    (3, 768),
    (45, 768),
]


@pytest.mark.parametrize(
    "name,shapes",
    [
        ("random 1-2 widths per depth", _sparse(1)),
        ("random 1-2 widths per depth", _sparse(3)),
        ("a Gemstones-like design", GEMSTONES_LIKE),
        ("saturating regime only", [(d, w) for d in (8, 10, 12) for w in (16, 64)]),
    ],
)
def test_sparse_design_gives_not_identified_or_a_correct_interval(name, shapes):
    runs = synthetic.make_runs("two_regime", None, None, P3, shapes=shapes, noise=0.02, seed=5)
    runs = runs.assign(run_id=np.arange(len(runs)))
    assert runs.groupby("depth")["width"].nunique().max() <= 2  # no per-depth fit possible
    reg = regimes.fit_regimes(runs, n_boot=60, seed=1)
    for law in ("two_regime", "combined"):
        m = reg["models"][law]
        assert m["status"] in ("ok", "not_identified", "insufficient_data"), (law, m["status"])
        if m["status"] == "ok":
            assert m["ci"]["b"][0] <= 3.0 <= m["ci"]["b"][1], (law, m["ci"]["b"])
            lo, hi = m["profile"]["interval"]
            assert lo <= 3.0 <= hi, (law, lo, hi)
        else:
            assert m["params"] == {} and m["reason"]
    head = threshold.headline(
        reg, threshold.fit_transition([]), threshold.fit_transition([]), levine.design_advice(runs)
    )
    if head["claimed"]:
        assert head["base_ci"][0] <= 3.0 <= head["base_ci"][1]
    if head["status"] == "not_identified":
        assert "a design that would identify it: widths" in head["reason"]


def test_shape_agnostic_sparse_design_claims_no_threshold():
    runs = synthetic.make_runs(
        "kaplan", None, None, dict(E=1.5, A_N=30.0, alpha_N=0.3), shapes=_sparse(2), noise=0.02, seed=2
    )
    runs = runs.assign(run_id=np.arange(len(runs)))
    reg = regimes.fit_regimes(runs, n_boot=60, seed=2)
    head = threshold.headline(
        reg, threshold.fit_transition([]), threshold.fit_transition([]), levine.design_advice(runs)
    )
    assert not head["claimed"] and head["base"] is None


def test_regime_counts_by_hand():
    # log_3 27 = 3: depths 1 and 2 lie below, 3 at, 4 and 5 above the threshold; at b = 9,
    # log_9 27 = 1.5: depth 1 below, the rest above.
    runs = pd.DataFrame({"depth": [1, 2, 3, 4, 5, 5], "width": [27.0] * 6})
    assert levine.regime_counts(runs, 3.0) == {
        "b": 3.0,
        "below": 2,
        "at": 1,
        "above": 3,
        "shapes": {"below": 2, "at": 1, "above": 2},
    }
    assert levine.regime_counts(runs, 9.0)["below"] == 1


def test_design_advice_straddles_the_threshold_at_every_width():
    runs = pd.DataFrame(
        {"depth": [d for d, _ in GEMSTONES_LIKE], "width": [float(w) for _, w in GEMSTONES_LIKE]}
    )
    adv = levine.design_advice(runs)
    assert adv["suggested"] == {"widths": [256, 896, 3072], "depths": list(range(3, 11))}
    assert adv["depths_with_3_widths"] == [] and adv["widths_per_depth"]["12"] == [512.0, 3072.0]


def test_phase_map_marks_cells_no_other_depth_covers():
    """Smoke grid depths 1-4 x widths 16-64: the largest model (4, 64) and the smallest (1, 16)
    have no other depth at their N; they must not be drawn as a ratio of 1."""
    runs = synthetic.make_runs("two_regime", [1, 2, 3, 4], [16, 32, 64], P3, noise=0.0)
    cells = plots.phase_cells(runs).set_index(["depth", "width"])
    assert np.isnan(cells.loc[(4, 64), "rel"]) and np.isnan(cells.loc[(1, 16), "rel"])
    assert cells.loc[(4, 64), "why"] == "no other depth measured at this N"
    assert np.isfinite(cells["rel"]).sum() == 10 and (cells["rel"].dropna() >= 1.0).all()
    # (1, 32) and (4, 16) have the same N = 12288: the worse of the two sits above 1.
    pair = cells.loc[[(1, 32), (4, 16)], "rel"]
    assert pair.min() == pytest.approx(1.0) and pair.max() > 1.0


def test_a_line_whose_interval_covers_every_base_is_not_identified():
    """The knee / transition line: three points, bootstrap slopes half at -0.7 and half at 10,
    so the interval of the base runs from e^-0.7 = 0.5 to e^10 = 2.2e4."""
    pts = [{"depth": 2.0, "width": 16.0}, {"depth": 3.0, "width": 12.0}, {"depth": 4.0, "width": 14.0}]
    draws = np.c_[np.zeros(50), np.repeat([-0.7, 10.0], 25)]
    tf = threshold.fit_transition(pts, draws, source="knees")
    assert tf["status"] == "not_identified" and tf["base"] is None and "spans the whole range" in tf["reason"]


def test_loss_vs_depth_draws_no_fit_that_is_not_identified():
    runs = synthetic.make_runs("two_regime", [1, 2, 3, 4], [16, 32], P3, noise=0.0)
    ok = {
        "status": "ok",
        "name": "two_regime",
        "formula": "",
        "terms": ["kappa"],
        "irreducible": True,
        "theta": [np.log(1.5), 0.0, 0.3, np.log(3.0)],
        "centres": {"mid_kappa": 0.0},
        "params": {"b": 3.0},
    }
    report = {
        "regimes": {"preferred": "two_regime", "models": {"two_regime": ok}},
        "threshold": {"base": None},
    }
    drawn = plots.loss_vs_depth(runs, report)
    assert any("L_th = log_3 d" in line.get_label() for ax in drawn.axes for line in ax.lines)
    report["regimes"]["models"]["two_regime"] = {**ok, "status": "not_identified", "theta": [], "params": {}}
    blank = plots.loss_vs_depth(runs, report)
    labels = [line.get_label() for ax in blank.axes for line in ax.lines]
    assert not any("fit" in lab or "L_th" in lab for lab in labels)
    assert any("no identified threshold law" in t.get_text() for t in blank.texts)
