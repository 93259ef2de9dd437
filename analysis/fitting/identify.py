"""Is a fitted parameter identified by the data? Bounds, intervals and a profile for b.

A fit whose parameter sits on its search bound, or whose 95% interval covers the whole allowed
range, has not located that parameter: it is reported `not_identified`, never as an estimate
(docs/science.md §3–4). For the threshold base b of the κ-laws a profile-likelihood interval
(Venzon & Moolgavkar 1988; Gaussian deviance of the log-loss residuals, as AIC and BIC use) says
whether the data bound b on both sides, on one, or on neither.
"""

from __future__ import annotations

import numpy as np
from scipy.special import chdtri

from analysis.fitting import fitcore
from analysis.fitting.fitcore import Law

_EDGE = 1e-4  # within this fraction of the range from a bound counts as on it
_SPAN = 0.02  # an interval reaching within 2% of the range of both bounds spans it
PROFILE_POINTS = 24
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


def _fits_at_fixed_c(
    law: Law,
    X: dict,
    logy: np.ndarray,
    w: np.ndarray,
    cs: np.ndarray,
    starts: np.ndarray,
    keep: int,
    iters: int,
    tol: float,
):
    """For each c in `cs`, the best fit with c held there: every start (rows of the other
    parameters) takes 15 steps on at most 1000 points, the `keep` best per c are solved on all
    points. Returns (theta (len(cs), p), summed Huber loss (len(cs),))."""
    lo, hi = law.bounds(np.exp(logy))
    n, S, G = X["n"], len(starts), len(cs)

    def rows_at(base, c):
        rows = np.c_[base, c]
        rlo, rhi = np.tile(lo, (len(rows), 1)), np.tile(hi, (len(rows), 1))
        rlo[:, -1] = rhi[:, -1] = c
        return rows, (rlo, rhi)

    if S > keep:
        idx = np.arange(n) if n <= 1000 else np.sort(np.random.default_rng(0).choice(n, 1000, replace=False))
        rows, bnd = rows_at(np.tile(starts, (G, 1)), np.repeat(cs, S))
        th, obj = fitcore.batched_lm(
            law,
            rows,
            fitcore.subset_X(X, idx),
            logy[idx],
            np.broadcast_to(w[idx], (len(rows), len(idx))),
            iters=15,
            tol=0.0,
            bounds=bnd,
        )
        obj = np.where(np.isfinite(obj), obj, np.inf).reshape(G, S)
        order = np.argsort(obj, axis=1)[:, :keep]
        base = th.reshape(G, S, -1)[np.arange(G)[:, None], order, :-1].reshape(G * keep, -1)
    else:
        keep = S
        base = np.tile(starts, (G, 1))
    rows, bnd = rows_at(base, np.repeat(cs, keep))
    th, obj = fitcore.batched_lm(
        law, rows, X, logy, np.broadcast_to(w, (len(rows), n)), iters=iters, tol=tol, bounds=bnd
    )
    obj = np.where(np.isfinite(obj), obj, np.inf).reshape(G, keep)
    k = np.argmin(obj, axis=1)
    return th.reshape(G, keep, -1)[np.arange(G), k], obj[np.arange(G), k]


def profile_base(
    law: Law,
    X: dict,
    logy: np.ndarray,
    w: np.ndarray,
    theta_hat: np.ndarray,
    n_eff: float,
    points: int = PROFILE_POINTS,
) -> dict:
    """Profile of the threshold base b = e^c: every other parameter refitted with c held at each
    of `points` values across its search range, on a finer grid around ĉ, and at ĉ.

    A first pass starts every value from θ̂ and a coarse grid of starts; the grid values where
    the interval's ends are decided (deviance between 3.84/8 and 8·3.84) are then refitted from
    the law's full grid of starts and from their neighbours' solutions, until they settle (an
    under-solved profile would read as a narrower interval). The deviance
    D(b) = n_eff·ln(RSS(b)/RSS_min) (weighted RSS of the log residuals; n_eff is the number of
    independent runs, so checkpoints of one run do not count as separate evidence) and the 95%
    interval is {b : D(b) ≤ 3.84}, the connected set around the minimum. An end that reaches the
    search bound is open: the data do not bound b on that side."""
    lo, hi = law.bounds(np.exp(logy))
    coarse = np.linspace(lo[-1], hi[-1], points)
    # The fine grid (two coarse steps either side of ĉ) resolves a profile narrower than a step.
    step = coarse[1] - coarse[0]
    fine = np.clip(theta_hat[-1] + np.linspace(-2 * step, 2 * step, 9), lo[-1], hi[-1])
    grid = np.unique(np.r_[coarse, fine, theta_hat[-1]])
    G = len(grid)
    coarse_starts = fitcore.start_grid(law, X, logy, floors=[0.95, 0.3], alphas=[0.15, 0.6])[:, :-1]
    coarse_starts = np.unique(np.round(np.vstack([coarse_starts, theta_hat[None, :-1]]), 12), axis=0)
    th, obj = _fits_at_fixed_c(law, X, logy, w, grid, coarse_starts, keep=1, iters=50, tol=1e-8)
    full_starts = fitcore.start_grid(law, X, logy)[:, :-1]
    lp_hat, _ = law.evaluate(theta_hat[None, :], X, jac=False)
    rss_hat = float(np.sum(w * (logy - lp_hat[0]) ** 2))

    def deviance():
        logP, _ = law.evaluate(th, X, jac=False)
        rss = np.where(np.isfinite(obj), np.sum(w[None, :] * (logy[None, :] - logP) ** 2, axis=1), np.inf)
        rss_min = max(min(rss.min(), rss_hat), 1e-300)
        return n_eff * np.log(np.maximum(rss, rss_min) / rss_min)

    dev, done = deviance(), set()
    for _ in range(4):
        edge = [g for g in np.flatnonzero((dev > CHI2_95 / 8) & (dev < 8 * CHI2_95)) if g not in done]
        if not edge:
            break
        for g in edge:
            neighbours = th[[max(g - 1, 0), min(g + 1, G - 1), g], :-1]
            t, o = _fits_at_fixed_c(
                law, X, logy, w, grid[[g]], np.vstack([full_starts, neighbours]), keep=3, iters=300, tol=1e-11
            )
            if o[0] < obj[g]:
                th[g], obj[g] = t[0], o[0]
        done.update(edge)
        dev = deviance()
    return _profile_interval(np.exp(grid), dev, float(np.exp(theta_hat[-1])))


def _profile_interval(b: np.ndarray, dev: np.ndarray, b_hat: float) -> dict:
    inside = dev <= CHI2_95
    k = int(np.argmin(np.where(np.isfinite(dev), np.abs(np.log(b / b_hat)), np.inf)))
    if not inside[k]:
        k = int(np.argmin(dev))
    if not inside[k]:  # no grid point within 3.84 of the minimum: a degenerate profile
        inside[k] = True
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
        "b": b.tolist(),
        "deviance": dev.tolist(),
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
