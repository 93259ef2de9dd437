"""Is a fitted parameter identified by the data? Bounds, intervals and a profile for b.

A fit whose parameter sits on its search bound, or whose 95% interval covers the whole allowed
range, has not located that parameter: it is reported `not_identified`, never as an estimate
(docs/science.md §3–4). For the threshold base b of the κ-laws a profile-likelihood interval
(Venzon & Moolgavkar 1988; Gaussian deviance of the log-loss residuals, as AIC and BIC use) says
whether the data bound b on both sides, on one, or on neither (its fits: analysis/fitting/profile.py).
"""

from __future__ import annotations

import numpy as np
from scipy.special import chdtri

from analysis.fitting.fitcore import Law

_EDGE = 1e-4  # within this fraction of the range from a bound counts as on it
_SPAN = 0.02  # an interval reaching within 2% of the range of both bounds spans it
CHI2_95 = float(chdtri(1, 0.05))  # 3.84, chi-square(1)'s 95% point: one parameter profiled


def human_name(law: Law, raw: str) -> str:
    """The reported name of a raw parameter: e -> E, a_t -> A_t, alpha_t, c -> b."""
    if raw == "e":
        return "E"
    if raw == "c":
        return "b"
    if raw.startswith("a_"):
        return "A_" + raw[2:]
    return raw


def _raw_value(raw: str, v: float) -> float:
    return float(np.exp(v)) if raw in ("e", "c") else float(v)


def bound_hits(law: Law, theta: np.ndarray, logy: np.ndarray) -> dict[str, str]:
    """Parameters sitting on a search bound: {reported name: 'its lower bound 1.1'}."""
    lo, hi = law.bounds(np.exp(logy))
    out = {}
    for k, raw in enumerate(law.param_names()):
        if raw.startswith("a_"):
            continue  # the log-scale bounds (±300) only keep the solver finite
        edge = _EDGE * (hi[k] - lo[k])
        for side, b in (("lower", lo[k]), ("upper", hi[k])):
            if abs(theta[k] - b) <= edge:
                out[human_name(law, raw)] = f"its {side} bound {_raw_value(raw, b):.3g}"
    return out


def spans_range(law: Law, draws: np.ndarray, logy: np.ndarray) -> dict[str, str]:
    """Parameters whose 95% bootstrap interval runs from one bound to the other."""
    if draws is None or len(draws) < 10:
        return {}
    lo, hi = law.bounds(np.exp(logy))
    q_lo, q_hi = np.percentile(draws, [2.5, 97.5], axis=0)
    out = {}
    for k, raw in enumerate(law.param_names()):
        if raw.startswith("a_"):
            continue
        edge = _SPAN * (hi[k] - lo[k])
        if q_lo[k] <= lo[k] + edge and q_hi[k] >= hi[k] - edge:
            out[human_name(law, raw)] = (
                f"its 95% bootstrap interval spans the whole allowed range "
                f"[{_raw_value(raw, lo[k]):.3g}, {_raw_value(raw, hi[k]):.3g}]"
            )
    return out


def _profile_interval(b: np.ndarray, dev: np.ndarray, b_hat: float) -> dict:
    """The 95% interval of b: the values around the point fit b̂ whose deviance (measured from the
    point fit, analysis/fitting/profile.py `deviance`) is under the chi-square point, read off
    where it crosses between grid values. b̂ is a value of the profile with deviance 0 by
    definition, so the interval holds the estimate it is quoted beside."""
    grid, grid_dev = np.array(b, float), np.array(dev, float)
    on_grid = np.isclose(grid, b_hat, rtol=1e-12, atol=0.0)
    grid[on_grid], grid_dev[on_grid] = b_hat, 0.0  # the point fit's own deviance is 0
    b, dev = grid, grid_dev
    if not on_grid.any():  # read the interval with b̂ among the values (the lists keep the grid's)
        order = np.argsort(np.r_[grid, b_hat], kind="stable")
        b, dev = np.r_[grid, b_hat][order], np.r_[grid_dev, 0.0][order]
    k = int(np.argmin(np.abs(np.log(b / b_hat))))
    inside = dev <= CHI2_95
    i = k
    while i > 0 and inside[i - 1]:
        i -= 1
    j = k
    while j < len(b) - 1 and inside[j + 1]:
        j += 1

    def cross(a: int, c: int) -> float:  # log-linear interpolation of D = 3.84 between a and c
        da, dc = dev[a], dev[c]
        t = min(max((CHI2_95 - da) / (dc - da), 0.0), 1.0) if dc != da else 0.0
        return float(np.exp(np.log(b[a]) + t * (np.log(b[c]) - np.log(b[a]))))

    open_below, open_above = i == 0, j == len(b) - 1
    interval = [
        float(b[0]) if open_below else cross(i, i - 1),
        float(b[-1]) if open_above else cross(j, j + 1),
    ]
    return {
        "param": "b",
        "method": "profile likelihood (Gaussian deviance of the log-loss residuals, chi-square 1 df, 95%)",
        "b": grid.tolist(),
        "deviance": grid_dev.tolist(),
        "interval": interval,
        "open_below": bool(open_below),
        "open_above": bool(open_above),
        "spans_range": bool(open_below and open_above),
    }


def describe_profile(p: dict) -> str:
    """The profile interval in words: closed, a one-sided limit, or the whole range."""
    lo, hi = p["interval"]
    if p["spans_range"]:
        return f"the profile does not bound b anywhere in [{lo:.3g}, {hi:.3g}]"
    if p["open_below"]:
        return f"the profile only bounds b from above: b < {hi:.3g} (open down to the bound {lo:.3g})"
    if p["open_above"]:
        return f"the profile only bounds b from below: b > {lo:.3g} (open up to the bound {hi:.3g})"
    return f"profile 95% interval [{lo:.3g}, {hi:.3g}]"
