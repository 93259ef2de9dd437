"""The profile likelihood of the threshold base b = e^c of the κ-laws (docs/science.md §4).

Every other parameter is refitted with c held at each value of a grid over its search range. A
profile is only as good as its worst solve, and the summed Huber loss of a κ-law can have an
optimum at each end of the range: each value is solved from a set of starts, polished by L-BFGS-B,
then started again from its neighbours' solutions, sweeping up and down the grid until no value
improves. When a value beats the point fit, the point fit restarts from there (`profile_and_refit`),
so no reported fit is worse than the minimum of its own profile.
"""

from __future__ import annotations

import numpy as np

from analysis.fitting import fitcore
from analysis.fitting._blas import single_threaded
from analysis.fitting.fitcore import Law
from analysis.fitting.identify import _profile_interval

PROFILE_POINTS = 24
_FTOL = 1e-10  # L-BFGS-B's stop for a profile value: a deviance change of ~1e-7 per run
_GAIN = 1e-6  # a neighbour's start counts as an improvement above this relative gain
_SWEEPS = 4
# A value whose best fit lets a term vanish (its scale drifting to the bound) creeps for hundreds
# of iterations at a nearly constant loss; its neighbours' starts finish what the cap leaves.
_MAXITER = 60


def _at_c(law: Law, logy: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
    """The law's bounds with c held at `c`."""
    lo, hi = law.bounds(np.exp(logy))
    lo, hi = lo.copy(), hi.copy()
    lo[-1] = hi[-1] = c
    return lo, hi


def fits_at_fixed_c(
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
    """For each c in `cs`, the best batched solve with c held there: every start (rows of the
    other parameters) takes 15 steps on at most 1000 points, the `keep` best per c are solved on
    all points. Returns (theta (len(cs), p), summed Huber loss (len(cs),))."""
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


def _polish_at(law, X, logy, w, start: np.ndarray, c: float) -> tuple[np.ndarray, float]:
    s = np.array(start, float)
    s[-1] = c
    if not np.all(np.isfinite(s)):
        return s, np.inf
    t, o, _ = fitcore.polish(law, s, X, logy, w, _at_c(law, logy, c), ftol=_FTOL, maxiter=_MAXITER)
    return t, (float(o) if np.isfinite(o) else np.inf)


def _neighbour_pass(
    law: Law, X: dict, logy: np.ndarray, w: np.ndarray, grid: np.ndarray, th, obj, fresh
) -> set:
    """One batched pass: each neighbour of a value in `fresh` (whose solution is new) is started
    from that solution, with c held at its own value, and keeps it where it is lower. Returns the
    values that moved."""
    G = len(grid)
    pairs = sorted({(s, t) for s in fresh for t in (s - 1, s + 1) if 0 <= t < G})
    if not pairs:
        return set()
    src, tgt = np.array(pairs).T
    rows = th[src].copy()
    rows[:, -1] = grid[tgt]
    lo, hi = law.bounds(np.exp(logy))
    rlo, rhi = np.tile(lo, (len(rows), 1)), np.tile(hi, (len(rows), 1))
    rlo[:, -1] = rhi[:, -1] = rows[:, -1]
    t, o = fitcore.batched_lm(
        law, rows, X, logy, np.broadcast_to(w, (len(rows), X["n"])), iters=30, tol=1e-8, bounds=(rlo, rhi)
    )
    o = np.where(np.isfinite(o), o, np.inf)
    moved = set()
    for k in np.argsort(o):
        g = int(tgt[k])
        if o[k] < obj[g] * (1 - _GAIN):
            th[g], obj[g] = t[k], o[k]
            moved.add(g)
    return moved


def sweep(law: Law, X: dict, logy: np.ndarray, w: np.ndarray, grid: np.ndarray, th, obj):
    """Polish every value by L-BFGS-B, start its neighbours from each new solution (batched
    passes, until none moves), and polish again the values that moved, until none does. A
    profile solved so is continuous wherever the law's best fit moves continuously with c: an
    isolated dip or jump means a neighbour was left in a worse basin. Works in place."""
    todo = range(len(grid))
    for _ in range(_SWEEPS):
        for g in todo:
            t, o = _polish_at(law, X, logy, w, th[g], grid[g])
            if o < obj[g]:
                th[g], obj[g] = t, o
        fresh, moved = set(todo), set()
        for _ in range(_SWEEPS):
            fresh = _neighbour_pass(law, X, logy, w, grid, th, obj, fresh)
            moved |= fresh
            if not fresh:
                break
        if not moved:
            break
        todo = sorted(moved)
    return th, obj


def _grid(law: Law, logy: np.ndarray, c_hat: float, points: int) -> np.ndarray:
    """Values of c: `points` across the search range, and a fine grid two coarse steps either side
    of ĉ (it resolves a profile narrower than a step), and ĉ itself."""
    lo, hi = law.bounds(np.exp(logy))
    coarse = np.linspace(lo[-1], hi[-1], points)
    step = coarse[1] - coarse[0]
    fine = np.clip(c_hat + np.linspace(-2 * step, 2 * step, 9), lo[-1], hi[-1])
    return np.unique(np.r_[coarse, fine, c_hat])


def profile_fits(
    law: Law,
    X: dict,
    logy: np.ndarray,
    w: np.ndarray,
    theta_hat: np.ndarray,
    points: int = PROFILE_POINTS,
    warm: tuple[np.ndarray, np.ndarray] | None = None,
):
    """The profile's fits: (grid of c, θ per value (G, p), summed Huber loss per value (G,)).

    Each value is first solved from θ̂ and a coarse set of starts, or, given `warm` (grid, θ rows)
    of an earlier profile, from the warm row nearest in c and θ̂; then polished and swept."""
    grid = _grid(law, logy, float(theta_hat[-1]), points)
    if warm is None:
        starts = fitcore.start_grid(law, X, logy, floors=[0.95, 0.3], alphas=[0.15, 0.6])[:, :-1]
        starts = np.unique(np.round(np.vstack([starts, theta_hat[None, :-1]]), 12), axis=0)
        th, obj = fits_at_fixed_c(law, X, logy, w, grid, starts, keep=1, iters=50, tol=1e-8)
    else:
        wc, wth = warm
        near = wth[np.abs(grid[:, None] - wc[None, :]).argmin(axis=1), :-1]
        rows = np.c_[np.vstack([near, np.tile(theta_hat[:-1], (len(grid), 1))]), np.r_[grid, grid]]
        lo, hi = law.bounds(np.exp(logy))
        rlo, rhi = np.tile(lo, (len(rows), 1)), np.tile(hi, (len(rows), 1))
        rlo[:, -1] = rhi[:, -1] = rows[:, -1]
        t2, o2 = fitcore.batched_lm(
            law, rows, X, logy, np.broadcast_to(w, (len(rows), X["n"])), iters=50, tol=1e-8, bounds=(rlo, rhi)
        )
        o2 = np.where(np.isfinite(o2), o2, np.inf).reshape(2, len(grid))
        pick = o2.argmin(axis=0)
        th, obj = t2.reshape(2, len(grid), -1)[pick, np.arange(len(grid))], o2[pick, np.arange(len(grid))]
    return (grid, *sweep(law, X, logy, w, grid, th, obj))


def deviance(law: Law, X: dict, logy: np.ndarray, w: np.ndarray, th, obj, rss_hat: float, n_eff: float):
    """D(b) = n_eff·ln(RSS(b)/RSS(b̂)), 0 where RSS(b) is lower: weighted RSS of the log residuals
    against the point fit's own; n_eff is the number of independent runs, so checkpoints of one
    run do not count as separate evidence.

    The fits minimise a Huber loss, whose optimum need not be the least-squares one: measured
    from the lowest RSS on the grid instead, the point fit itself could sit outside its interval
    (b = 23.2 beside [29.1, 71.8]). Measured from the point fit, the interval holds it, and holds
    every b that fits the log losses at least as well."""
    logP, _ = law.evaluate(th, X, jac=False)
    rss = np.where(np.isfinite(obj), np.sum(w[None, :] * (logy[None, :] - logP) ** 2, axis=1), np.inf)
    ref = max(rss_hat, 1e-300)
    return n_eff * np.log(np.maximum(rss, ref) / ref)


@single_threaded
def profile_and_refit(
    law: Law,
    X: dict,
    logy: np.ndarray,
    w: np.ndarray,
    theta_hat: np.ndarray,
    obj_hat: float,
    n_eff: float,
    points: int = PROFILE_POINTS,
    warm: tuple[np.ndarray, np.ndarray] | None = None,
):
    """The profile of b and the point fit made consistent with it: when a profile value's loss is
    below the point fit's, b is freed again from there and the profile redone around the new ĉ
    (warm-started from the last one), at most three times.

    Returns (profile dict, θ̂, its loss, whether a refit converged (None without one), and
    (grid, θ rows) of the profile). The dict has the interval of `identify._profile_interval` and
    each value's summed Huber loss ("objective")."""
    theta_hat, converged = np.asarray(theta_hat, float), None
    for _ in range(3):
        grid, th, obj = profile_fits(law, X, logy, w, theta_hat, points, warm)
        warm = (grid, th)
        g = int(np.argmin(obj))
        if not obj[g] < obj_hat * (1 - 1e-9):
            break
        # finish() keeps the lower of its start and its polish, so the refit is at most obj[g].
        theta_hat, obj_hat, converged = fitcore.finish(law, th[[g]], obj[[g]], X, logy, w)
    lp_hat, _ = law.evaluate(theta_hat[None, :], X, jac=False)
    rss_hat = float(np.sum(w * (logy - lp_hat[0]) ** 2))
    dev = deviance(law, X, logy, w, th, obj, rss_hat, n_eff)
    prof = _profile_interval(np.exp(grid), dev, float(np.exp(theta_hat[-1])))
    prof["objective"] = [float(o) if np.isfinite(o) else None for o in obj]
    return prof, theta_hat, obj_hat, converged, warm
