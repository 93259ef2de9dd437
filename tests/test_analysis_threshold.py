"""Planted recovery for the threshold estimators (analysis.laws.regimes, analysis.laws.threshold).

The two-regime law of docs/science.md §4 is planted with b = 2, 3, 5; per-depth power laws are planted
to cross at known sizes; and a shape-agnostic Kaplan sweep must not yield a claimed threshold.
"""

import numpy as np
import pandas as pd
import pytest

from analysis.fitting import powerlaw, synthetic
from analysis.laws import regimes, threshold

WIDTHS = np.unique(np.round(np.logspace(np.log10(16), np.log10(1024), 8)).astype(int))


def _runs(df: pd.DataFrame) -> pd.DataFrame:
    return df.reset_index(drop=True).assign(run_id=lambda d: np.arange(len(d)))


@pytest.mark.parametrize("b", [2.0, 3.0, 5.0])
def test_two_regime_law_recovers_planted_threshold_base(b):
    p = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=b)
    runs = _runs(synthetic.make_runs("two_regime", range(1, 11), WIDTHS, p, noise=0.015, seed=int(b)))
    reg = regimes.fit_regimes(runs, n_boot=100, seed=1)
    m = reg["models"]["two_regime"]
    assert reg["preferred"] in ("two_regime", "combined")
    assert m["params"]["b"] == pytest.approx(b, rel=0.05)
    assert m["ci"]["b"][0] <= b <= m["ci"]["b"][1]
    assert m["params"]["alpha_kappa"] == pytest.approx(0.3, rel=0.1)
    # The wrong law is worse out of sample as well as in BIC.
    assert m["cv_error"] < reg["models"]["kaplan"]["cv_error"]
    head = threshold.headline(reg, threshold.fit_transition([]), threshold.fit_transition([]))
    assert head["claimed"] and head["base"] == pytest.approx(b, rel=0.05)
    assert head["consistent_with_theory"] is (head["base_ci"][0] <= 3.0 <= head["base_ci"][1])
    assert head["consistent_with_theory"] is (b == 3.0)


def test_null_kaplan_sweep_claims_no_threshold():
    """Loss depends on N alone (Kaplan's shape-agnostic law): no threshold may be claimed."""
    p = dict(E=1.5, A_N=30.0, alpha_N=0.3)
    runs = _runs(synthetic.make_runs("kaplan", range(1, 7), WIDTHS, p, seeds=(0, 1), noise=0.02))
    reg = regimes.fit_regimes(runs, n_boot=100, seed=2)
    head = threshold.headline(reg, threshold.fit_transition([]), threshold.fit_transition([]))
    assert reg["preferred"] == "kaplan" or not head["claimed"]
    assert not head["claimed"] and head["base"] is None
    assert reg["models"]["kaplan"]["params"]["alpha_N"] == pytest.approx(0.3, rel=0.1)


def crossing_sweep(N_star: dict, alphas: dict, E=1.0, A1=10.0, noise=0.01, seeds=(0, 1, 2)):
    """Per-depth L_d(N) = E + A_d·N^-a_d with A_d chained so depth d+1 overtakes d at N_star[d]."""
    depths = sorted(alphas)
    A = {depths[0]: A1}
    for d, e in zip(depths, depths[1:]):
        A[e] = A[d] * N_star[d] ** (alphas[e] - alphas[d])
    rng = np.random.default_rng(0)
    rows = []
    for d in depths:
        for w in np.unique(np.round(np.logspace(np.log10(2), np.log10(4000), 16)).astype(int)):
            N = 12.0 * d * w**2
            for s in seeds:
                y = (E + A[d] * N ** -alphas[d]) * np.exp(rng.normal(0, noise))
                rows.append(dict(depth=d, width=float(w), n_params=N, seed=s, loss=y))
    return _runs(pd.DataFrame(rows))


def test_crossover_location_is_recovered_with_interval():
    runs = crossing_sweep({2: 1e6}, {2: 0.2, 4: 0.3})
    fits = powerlaw.fit_per_depth(runs, n_boot=200, seed=0)
    c = threshold.crossover(runs, 2, fits[2], 4, fits[4])
    assert c["status"] == "ok"
    assert c["n_params"] == pytest.approx(1e6, rel=0.25)
    assert c["n_params_ci"][0] <= 1e6 <= c["n_params_ci"][1]
    assert c["p_crossover"] > 0.95
    # Widths at N* follow N = 12 L d^2 for each depth.
    assert c["widths"][0] == pytest.approx(np.sqrt(c["n_params"] / 24), rel=0.05)
    assert c["widths"][1] == pytest.approx(np.sqrt(c["n_params"] / 48), rel=0.05)


def test_no_crossover_in_range_is_a_valid_answer():
    runs = crossing_sweep({2: 1e12}, {2: 0.2, 4: 0.3})  # would cross far beyond the data
    fits = powerlaw.fit_per_depth(runs, n_boot=50, seed=0)
    c = threshold.crossover(runs, 2, fits[2], 4, fits[4])
    assert c["status"] == "no_crossover_in_range" and c["which"] == "shallower_better_throughout"


def test_transition_widths_recover_planted_base():
    """Consecutive depths overtake each other where the width is b^(L+1/2): the fit of
    log d = a + beta*L through the transition points returns e^beta = b."""
    b = 2.5
    depths = [1, 2, 3, 4, 5]
    N_star = {d: 12.0 * (d + 0.5) * b ** (2 * d + 1) for d in depths[:-1]}
    runs = crossing_sweep(N_star, {d: 0.1 + 0.05 * d for d in depths}, noise=0.005)
    fits = powerlaw.fit_per_depth(runs, n_boot=200, seed=0)
    cross = threshold.all_crossovers(runs, fits)
    pts = threshold.transition_points(cross, depths)
    assert [p["depths"] for p in pts] == [[1, 2], [2, 3], [3, 4], [4, 5]]
    tf = threshold.fit_transition(pts, threshold.transition_draws(runs, cross, pts, fits))
    assert tf["base"] == pytest.approx(b, rel=0.1)
    assert tf["base_ci"][0] <= b <= tf["base_ci"][1]
    # The headline takes the model-free transition estimate whenever one exists.
    reg = {
        "preferred": "two_regime",
        "models": {
            "two_regime": {"status": "ok", "params": {"b": 9.0}, "ci": {"b": [8.0, 10.0]}, "n_boot": 10}
        },
    }
    head = threshold.headline(reg, tf, threshold.fit_transition([]))
    assert head["base"] == tf["base"] and head["method"].startswith("transition widths")
    assert head["claimed"] and head["cross_check"]["agree"] is False
    opt = threshold.optimal_depth(runs, fits)
    got = [(p["n_params"], p["depth"]) for p in opt["points"]]
    assert all(d == 1 for n, d in got if n < 0.5 * N_star[1])
    assert all(d == 5 for n, d in got if n > 2 * N_star[4])


def test_knee_finds_a_planted_breakpoint():
    L = np.arange(1, 11, dtype=float)
    y = np.where(L <= 4.3, -0.5 * (L - 4.3), -0.05 * (L - 4.3))
    assert threshold.knee(L, y) == pytest.approx(4.3, abs=0.05)
    assert threshold.knee(L, 0.1 * (L - 4) ** 2) is None  # loss rising again: not a knee


def _planted_headline(depths, widths, b, seed=0):
    """The headline of a two-regime grid planted at base b, with and without the located rule."""
    p = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=b)
    runs = _runs(synthetic.make_runs("two_regime", depths, widths, p, seeds=(0, 1), noise=0.01, seed=seed))
    reg = regimes.fit_regimes(runs, n_boot=60, seed=1)
    empty = threshold.fit_transition([])
    free = threshold.headline(reg, empty, empty)
    return free, threshold.headline(reg, empty, empty, grid=threshold.swept_grid(runs))


def test_grid_straddling_the_threshold_locates_and_claims_it():
    """Depths 1-8 at widths 16-256 run across L_th = log_3 d (2.5 to 5): b is claimed, near 3."""
    _, head = _planted_headline(range(1, 9), [16, 32, 64, 128, 256], 3.0)
    assert head["claimed"] and head["status"] == "claimed"
    assert head["base"] == pytest.approx(3.0, rel=0.05)
    loc = head["location"]
    assert loc["located"] and len(loc["located_widths"]) >= 3
    for p in loc["per_width"]:
        assert p["L_th_ci"][0] <= p["L_th"] <= p["L_th_ci"][1]


@pytest.mark.parametrize(
    "depths, widths, b, side, words",
    [
        # b = 1.5 puts L_th at 6.8-10.3 layers at widths 16-64: every run lies below it.
        (
            range(1, 5),
            [16, 32, 64],
            1.5,
            "beyond",
            "depth still pays at every depth swept (1–4); any threshold lies beyond depth 4",
        ),
        # b = 2 puts L_th at 2-4 layers at widths 4-16: every run of depth 5-8 lies past it.
        (
            range(5, 9),
            [4, 8, 16],
            2.0,
            "below",
            "every depth swept (5–8) lies past the fitted threshold; any threshold lies below depth 5",
        ),
    ],
)
def test_grid_wholly_on_one_side_does_not_claim(depths, widths, b, side, words):
    """The law alone recovers b from runs on one side (so the unchecked headline would claim it),
    but the threshold is not located in the runs: not claimed, b kept as an extrapolation."""
    free, head = _planted_headline(depths, widths, b)
    assert free["claimed"] and free["base"] == pytest.approx(b, rel=0.1)
    assert not head["claimed"] and head["status"] == "not_claimed" and head["extrapolation"]
    assert head["base"] == free["base"]  # still reported, marked as an extrapolation
    assert {p["side"] for p in head["location"]["per_width"]} == {side}
    assert words in head["location"]["text"] and words in head["reason"]


def test_located_rule_by_hand():
    """L_th = ln d / ln b against the depths at each width: inside with runs on both sides,
    beyond, below, or inside with an interval reaching outside the depths run."""
    grid = {27.0: [1, 2, 3, 4, 5], 9.0: [1, 2, 3]}
    loc = threshold.locate(3.0, [2.9, 3.1], grid)  # L_th = 3 at 27 (located), 2 at 9 (located)
    assert loc["located"] and loc["located_widths"] == [9.0, 27.0]
    wide = threshold.locate(3.0, [1.5, 6.0], grid)  # L_th(27) interval [1.84, 8.1]: too wide
    assert not wide["located"] and {p["side"] for p in wide["per_width"]} == {"wide"}
    assert "at no width swept" in wide["text"]
    assert threshold.locate(1.2, [1.1, 1.3], grid)["per_width"][0]["side"] == "beyond"
    assert threshold.locate(50.0, [40.0, 60.0], grid)["per_width"][0]["side"] == "below"
    # The deepest run exactly at L_th leaves no run above it: not located.
    assert threshold.locate(3.0, [3.0, 3.0], {27.0: [1, 2, 3]})["per_width"][0]["side"] == "wide"
