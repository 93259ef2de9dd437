"""Planted-parameter recovery for the Kaplan-style laws (analysis.fitting.fitcore, analysis.fitting.powerlaw).

Data are drawn from known laws with log-normal noise; each test asserts the truth lies in the
reported 95% bootstrap interval and the estimate is within a stated tolerance (docs/science.md §2–3).
"""

import numpy as np
import pandas as pd
import pytest

from analysis.fitting import fitcore, powerlaw
from analysis.fitting.fitcore import Law


def test_huber_is_quadratic_inside_delta_and_linear_outside():
    d = fitcore.HUBER_DELTA
    r = np.array([0.0, 0.5 * d, -d, 3 * d, -10 * d])
    assert fitcore.huber(r) == pytest.approx([0.0, 0.125 * d * d, 0.5 * d * d, 2.5 * d * d, 9.5 * d * d])


@pytest.mark.parametrize(
    "terms,irreducible",
    [(("N",), True), (("N",), False), (("N", "S"), True), (("kappa",), True), (("N", "kappa"), True)],
)
def test_jacobian_matches_finite_differences(terms, irreducible):
    rng = np.random.default_rng(1)
    law = Law("t", terms, irreducible)
    n = 30
    X = fitcore.make_X(
        law,
        N=rng.uniform(1e4, 1e8, n),
        S=rng.uniform(10, 1e4, n),
        depth=rng.integers(1, 9, n).astype(float),
        width=rng.uniform(16, 1024, n),
    )
    theta = np.array([0.3 if not k.startswith("alpha") else 0.4 for k in law.param_names()])
    if law.has_kappa:
        theta[-1] = 1.0
    _, J = law.evaluate(theta[None], X)
    for k in range(law.n_params):
        e = np.zeros(law.n_params)
        e[k] = 1e-6
        up = law.evaluate((theta + e)[None], X, jac=False)[0][0]
        dn = law.evaluate((theta - e)[None], X, jac=False)[0][0]
        np.testing.assert_allclose(J[0, k], (up - dn) / 2e-6, atol=1e-7)


def planted_power_law(E, A, alpha, noise, n=40, seeds=2, seed=0):
    rng = np.random.default_rng(seed)
    N = np.repeat(np.logspace(4, 9, n), seeds)
    y = (E + A * N**-alpha) * np.exp(rng.normal(0, noise, N.size))
    return N, y


def test_power_law_recovers_planted_floor_and_exponent():
    N, y = planted_power_law(E=1.7, A=400.0, alpha=0.35, noise=0.01)
    res = powerlaw.fit_power_law(N, y, n_boot=200, seed=0)
    assert res.ok and res.converged and res.law.irreducible
    for name, truth, tol in (("E", 1.7, 0.03), ("alpha_N", 0.35, 0.03), ("A_N", 400.0, 0.25)):
        assert res.params[name] == pytest.approx(truth, rel=tol), name
        lo, hi = res.ci[name]
        assert lo <= truth <= hi, (name, lo, hi)
    assert res.n_boot >= 190 and res.bootstrap_method == "refit"
    assert np.std(res.residuals) == pytest.approx(0.01, rel=0.3)


def test_pure_power_law_is_kaplans_form_with_n_c():
    # L = (N_c/N)^alpha_N with Kaplan's Table 5 constants (docs/science.md §2).
    N, y = planted_power_law(E=0.0, A=8.8e13**0.076, alpha=0.076, noise=0.005)
    res = powerlaw.fit_power_law(N, y, n_boot=200, irreducible=False)
    assert res.params["alpha_N"] == pytest.approx(0.076, rel=0.05)
    assert res.ci["alpha_N"][0] <= 0.076 <= res.ci["alpha_N"][1]
    assert res.ci["N_c"][0] <= 8.8e13 <= res.ci["N_c"][1]
    assert np.log10(res.params["N_c"]) == pytest.approx(np.log10(8.8e13), abs=0.5)


def test_too_few_sizes_is_insufficient_data_not_an_error():
    res = powerlaw.fit_power_law([1e4, 1e5], [3.0, 2.5])
    assert res.status == "insufficient_data" and "3 distinct" in res.reason
    auto = powerlaw.fit_power_law([1e4, 1e5, 1e6, 1e7], [3.0, 2.5, 2.2, 2.0], n_boot=20)
    assert auto.ok and not auto.law.irreducible  # four sizes: Kaplan's pure form, no floor


def planted_curves(n_runs=30, noise=0.01, seed=0, E=1.2, N_c=1e5, alpha_N=0.3, S_c=40.0, alpha_S=0.7):
    rng = np.random.default_rng(seed)
    N = np.logspace(4, 8, n_runs)
    S = np.unique(np.round(np.logspace(1, 4, 60)))
    rows = []
    for i, n in enumerate(N):
        y = (E + (N_c / n) ** alpha_N + (S_c / S) ** alpha_S) * np.exp(rng.normal(0, noise, S.size))
        rows.append(pd.DataFrame({"trial_id": f"r{i}", "n_params": n, "step": S, "loss": y}))
    return pd.concat(rows, ignore_index=True)


def test_learning_curve_law_recovers_planted_exponents():
    truth = dict(E=1.2, N_c=1e5, alpha_N=0.3, S_c=40.0, alpha_S=0.7)
    res, per_run = powerlaw.fit_learning_curves(planted_curves(**truth), n_boot=200, seed=3)
    assert res.ok and res.bootstrap_method == "refit"
    for name in ("alpha_N", "alpha_S", "E"):
        assert res.params[name] == pytest.approx(truth[name], rel=0.05), name
        assert res.ci[name][0] <= truth[name] <= res.ci[name][1], name
    for name in ("N_c", "S_c"):
        assert res.ci[name][0] <= truth[name] <= res.ci[name][1], name
    # Per-run converged loss: the curve extrapolated to S -> inf equals E + (N_c/N)^alpha_N.
    expect = truth["E"] + (truth["N_c"] / per_run["n_params"]) ** truth["alpha_N"]
    np.testing.assert_allclose(per_run["converged_loss"], expect, rtol=0.02)
    # What is left to gain after the last step is the step term (S_c/S_max)^alpha_S.
    left = (per_run["final_loss"] - per_run["converged_loss"]).mean()
    assert left == pytest.approx((40.0 / 1e4) ** 0.7, rel=0.3)


def test_one_step_bootstrap_agrees_with_full_refits():
    """The estimating-function bootstrap used for large fits reproduces the spread of refits."""
    c = powerlaw.thin_curves(planted_curves(n_runs=60, seed=5))
    law = Law("L(N,S)", ("N", "S"))
    X = fitcore.make_X(law, N=c["n_params"].to_numpy(), S=c["step"].to_numpy())
    logy = np.log(c["loss"].to_numpy())
    theta, _, ok = fitcore.fit_law(law, X, logy)
    refit, m1 = fitcore.bootstrap(law, theta, X, logy, c["trial_id"].to_numpy(), 200, 0, refit_budget=1e12)
    one, m2 = fitcore.bootstrap(law, theta, X, logy, c["trial_id"].to_numpy(), 200, 0, refit_budget=0)
    assert (m1, m2) == ("refit", "one_step")
    ratio = one.std(axis=0) / refit.std(axis=0)
    assert np.all((ratio > 0.75) & (ratio < 1.33)), ratio


def test_stored_fit_round_trips_and_predicts_the_same():
    N, y = planted_power_law(E=1.7, A=400.0, alpha=0.35, noise=0.01)
    res = powerlaw.fit_power_law(N, y, n_boot=20)
    back = powerlaw.FitResult.from_dict(res.to_dict())
    grid = np.logspace(4, 9, 7)
    np.testing.assert_allclose(back.predict(N=grid), res.predict(N=grid), rtol=1e-12)
    np.testing.assert_allclose(res.predict(N=grid), 1.7 + 400.0 * grid**-0.35, rtol=0.02)


def test_digitized_csv_is_fitted_with_the_same_code(tmp_path):
    from analysis.laws.kaplan import fit_digitized, load_digitized
    from analysis.readers.inputs import InputError

    c = planted_curves(n_runs=12, seed=9, S_c=40.0, alpha_S=0.7)
    csv = tmp_path / "digitized.csv"
    c.assign(tokens=c["step"] * 2**19).rename(columns={"n_params": "N"})[["N", "tokens", "loss"]].to_csv(
        csv, index=False
    )
    got = fit_digitized(load_digitized(csv), n_boot=100)
    assert got["n_curves"] == 12
    assert got["alpha_S"] == pytest.approx(0.7, rel=0.05)
    assert got["learning_curves"]["params"]["S_c"] == pytest.approx(40.0, rel=0.15)
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"N": [1e6, 1e6], "tokens": [1e6, -1.0], "loss": [3.0, 2.9]}).to_csv(bad, index=False)
    with pytest.raises(InputError, match=r"bad.csv: column 'tokens' row 2 is -1.0"):
        load_digitized(bad)
