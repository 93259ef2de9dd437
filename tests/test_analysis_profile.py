"""The profile of b and the point fit agree (analysis.fitting.profile): on a planted case whose
two-regime loss has two optima, one at each end of b's range, no reported point fit is worse than
its own profile's minimum, a fit started in the wrong basin is moved to the better one by its
profile, and the profile is one rise and one fall, without isolated jumps."""

import numpy as np
import pytest

from analysis.fitting import fitcore, powerlaw, synthetic
from analysis.laws import regimes

# Shape-agnostic losses with a data term, on the CPU study's depth >= 2 grid: the two-regime law
# fits them either with every run below L_th (b at 1.1) or every run above it (b at 100).
KAPLAN_D = dict(E=0.9, A_N=27.0, alpha_N=0.55, B_D=16.7, alpha_D=0.19)


def _two_optima(seed: int = 0):
    runs = synthetic.make_runs(
        "kaplan",
        [2, 3, 4, 6, 8],
        [16, 32, 64, 128],
        KAPLAN_D,
        seeds=(0, 1),
        noise=0.01,
        seed=seed,
        tokens=[1e5, 3e5, 9e5],
    )
    cols = {
        "N": runs["n_params"].to_numpy(float),
        "depth": runs["depth"].to_numpy(float),
        "width": runs["width"].to_numpy(float),
        "D": runs["tokens"].to_numpy(float),
    }
    return regimes.DATA_MODELS["two_regime"], np.log(runs["loss"].to_numpy()), cols


def _fit(law, logy, cols):
    return powerlaw.fit(law, "two_regime", logy, cols, n_boot=0, profile=True)


def _turns(values: np.ndarray, tiny: float) -> int:
    """How often a sequence changes direction, steps smaller than `tiny` ignored."""
    d = np.diff(values)
    s = np.sign(d[np.abs(d) > tiny])
    return int(np.sum(s[1:] != s[:-1]))


def test_the_point_fit_is_the_minimum_of_its_profile_and_the_profile_is_smooth():
    law, logy, cols = _two_optima()
    res = _fit(law, logy, cols)
    obj = np.array(res.profile["objective"], float)
    assert res.objective <= obj.min() * (1 + 1e-9)
    # The planted two optima: a local one at the lower bound, the global one at the upper.
    assert obj[1] > obj[0] > obj[-1] and int(np.argmin(obj)) == len(obj) - 1
    assert res.not_identified == {"b": "its upper bound 100"}
    # One rise then one fall, in the loss the fit minimises and in the deviance reported.
    assert _turns(obj, 1e-6 * obj.min()) == 1
    assert _turns(np.array(res.profile["deviance"]), 0.05) == 1


def test_a_point_fit_stopped_at_the_worse_optimum_is_moved_by_its_profile(monkeypatch):
    law, logy, cols = _two_optima()
    X = fitcore.make_X(law, **cols)
    lo, hi = law.bounds(np.exp(logy))
    at_low = (lo, np.r_[hi[:-1], lo[-1]])  # b held at its lower bound, 1.1

    def stopped_at_low_b(law, X, logy, w=None, **kw):
        """A multi-start that only ever reached the optimum at b = 1.1."""
        w = np.ones(len(logy)) if w is None else w
        starts = fitcore.start_grid(law, X, logy)
        W = np.broadcast_to(w, (len(starts), len(w)))
        th, obj = fitcore.batched_lm(law, starts, X, logy, W, iters=30, bounds=at_low)
        best = np.argsort(obj)[:2]
        return fitcore.finish(law, th[best], obj[best], X, logy, w, bounds=at_low)

    stuck_theta, stuck, _ = stopped_at_low_b(law, X, logy)
    # A local optimum of the free fit: the loss rises as b leaves its bound.
    assert fitcore.polish(law, stuck_theta, X, logy, np.ones(len(logy)))[1] == pytest.approx(stuck, rel=1e-6)
    monkeypatch.setattr(fitcore, "fit_law", stopped_at_low_b)
    res = _fit(law, logy, cols)
    assert res.objective < stuck * (1 - 1e-3)
    assert res.objective <= min(res.profile["objective"]) * (1 + 1e-9)
    assert np.exp(res.theta[-1]) == pytest.approx(100.0, rel=1e-3)
