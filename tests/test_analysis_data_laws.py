"""Planted recovery for the laws with a data term (analysis.laws.chinchilla, analysis.laws.regimes,
analysis.laws.tokens): Chinchilla's L(N, D), the two-regime and width-depth laws with + B·D^-beta, and
the weighting that keeps one long run from outvoting the others (docs/science.md §3, §8-9)."""

import numpy as np
import pandas as pd
import pytest

from analysis.fitting import synthetic
from analysis.laws import chinchilla, regimes, tokens
from depthwidth.published import BESIROGLU_2024, HOFFMANN_2022

TRUTH = dict(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.37)


def _points(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(
        run_id=np.arange(len(df)),
        trial_id=[str(i) for i in range(len(df))],
        weight=1.0,
        depth=np.nan,
        width=np.nan,
    )


def test_chinchilla_law_recovers_planted_constants_with_intervals():
    pts = _points(synthetic.make_chinchilla(TRUTH, noise=0.01, seed=3))
    src = {"kind": "final", "why": "planted", "n_runs": len(pts), "n_points": len(pts)}
    c = chinchilla.fit_chinchilla(pts, src, n_boot=100, seed=0)
    assert c["status"] == "ok" and c["converged"]
    for k, tol in (("E", 0.02), ("alpha", 0.05), ("beta", 0.05), ("A", 0.35), ("B", 0.35)):
        assert c["params"][k] == pytest.approx(TRUTH[k], rel=tol), k
        assert c["ci"][k][0] <= TRUTH[k] <= c["ci"][k][1], k
        assert c["se"][k] > 0
    # Allocation exponents by hand: a = beta/(alpha+beta), b = alpha/(alpha+beta).
    co = c["compute_optimal"]
    assert co["a"] == pytest.approx(c["params"]["beta"] / (c["params"]["alpha"] + c["params"]["beta"]))
    assert co["a"] + co["b"] == pytest.approx(1.0)
    assert co["a"] == pytest.approx(0.37 / 0.72, abs=0.03)  # alpha, beta each within 5%
    assert co["ci"]["a"][0] <= co["a"] <= co["ci"]["a"][1]
    # N*(C)·D*(C) = C/6 along the whole allocation curve.
    al = co["allocation"]
    np.testing.assert_allclose(np.array(al["N"]) * np.array(al["D"]), np.array(al["C"]) / 6, rtol=1e-9)


def test_published_allocations_match_the_papers():
    pub = chinchilla.published()
    # Besiroglu et al. 2024 quote a = 0.513; Hoffmann's constants give 0.28/0.62 = 0.452.
    assert pub["besiroglu2024"]["compute_optimal"]["a"] == pytest.approx(
        BESIROGLU_2024["compute_optimal_a"], abs=5e-4
    )
    assert pub["hoffmann2022"]["compute_optimal"]["a"] == pytest.approx(0.28 / 0.62, rel=1e-9)
    p = HOFFMANN_2022["params"]
    G = (p["alpha"] * p["A"] / (p["beta"] * p["B"])) ** (1 / (p["alpha"] + p["beta"]))
    assert pub["hoffmann2022"]["compute_optimal"]["G"] == pytest.approx(G)


def test_constant_token_budget_has_no_data_term():
    runs = synthetic.make_runs("kaplan", [1, 2], [16, 32, 64], dict(E=1.0, A_N=10.0, alpha_N=0.2))
    runs = runs.assign(run_id=np.arange(len(runs)), tokens=1e6)
    pts, src = tokens.token_points(runs, pd.DataFrame(columns=["run_id", "tokens"]))
    assert src["kind"] is None and "fewer than 3 distinct" in src["why"] and pts.empty
    c = chinchilla.fit_chinchilla(pts, src)
    assert c["status"] == "insufficient_data" and "no data term" in c["reason"]


def test_checkpoints_are_thinned_and_every_run_weighs_one():
    """A run evaluated 500 times and one evaluated 5 times carry the same total weight."""
    runs = pd.DataFrame(
        {
            "run_id": [0, 1],
            "trial_id": ["a", "b"],
            "depth": [2, 4],
            "width": [32.0, 32.0],
            "n_params": [1e4, 2e4],
            "tokens": [1e6, 1e6],
        }
    )
    long = pd.DataFrame({"run_id": 0, "tokens": np.linspace(1e3, 1e6, 500)})
    short = pd.DataFrame({"run_id": 1, "tokens": np.linspace(2e5, 1e6, 5)})
    curves = pd.concat([long, short]).assign(loss=3.0, trial_id="x", n_params=1.0, step=1.0)
    pts, src = tokens.token_points(runs, curves)
    assert src["kind"] == "checkpoints" and "every run counts once" in src["weighting"]
    w = pts.groupby("run_id")["weight"].sum()
    np.testing.assert_allclose(w.to_numpy(), [1.0, 1.0])
    assert (pts.groupby("run_id").size() <= tokens.PER_RUN).all()
    assert pts.loc[pts["run_id"] == 0, "tokens"].min() >= tokens.MIN_TOKEN_FRACTION * 1e6
    assert set(pts["depth"]) == {2, 4}


PLANT = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0, B_D=60.0, alpha_D=0.4)


@pytest.mark.parametrize("law", ["two_regime", "width_depth"])
def test_data_term_laws_recover_planted_parameters(law):
    """Runs of a depth x width grid trained to four token budgets: the law with its data term
    gets back the shape parameters and B_D, alpha_D."""
    p = (
        dict(PLANT)
        if law == "two_regime"
        else dict(E=1.5, A_width=8.0, alpha_width=0.5, A_depth=1.0, alpha_depth=0.6, B_D=60.0, alpha_D=0.4)
    )
    budgets = [1e5, 4e5, 1.6e6, 6.4e6]
    runs = synthetic.make_runs(
        law, range(1, 9), [16, 32, 64, 128, 256], p, tokens=budgets, noise=0.01, seed=11
    )
    runs = runs.assign(run_id=np.arange(len(runs)))
    pts, src = tokens.token_points(runs, pd.DataFrame(columns=["run_id", "tokens"]))
    assert src["kind"] == "final" and src["n_tokens"] == 4
    reg = regimes.fit_regimes(runs, n_boot=60, seed=1, points=pts, points_source=src)
    assert reg["data_terms"] and reg["preferred"] in ((law, "combined") if law == "two_regime" else (law,))
    m = reg["models"][law]
    assert m["status"] == "ok" and m["terms"][-1] == "D"
    names = ["b", "alpha_kappa"] if law == "two_regime" else ["alpha_width", "alpha_depth"]
    for k in names + ["alpha_D", "A_D", "E"]:
        truth = p["B_D"] if k == "A_D" else p[k]
        tol = {"A_D": 0.35, "alpha_D": 0.1}.get(k, 0.06)  # the data term trades against E
        assert m["params"][k] == pytest.approx(truth, rel=tol), k
        assert m["ci"][k][0] <= truth <= m["ci"][k][1], k
    # The shape-agnostic law with the same data term is worse out of sample.
    assert m["cv_error"] < reg["models"]["kaplan"]["cv_error"]
