"""The fitting engine shared by every loss law: sums of power terms fitted in log space.

A law is `L = E + Σ_k exp(a_k − α_k·z_k)` with z_k the log of N, S, D (tokens), width, depth or
κ_b (docs/science.md §3–4, §8–9).
It is fitted as Hoffmann et al. 2022 (Approach 3) and Besiroglu et al. 2024 recommend: summed
Huber loss (δ = 1e-3) on log-loss residuals, a grid of starts, L-BFGS-B, bootstrap over runs.
The bootstrap refits are batched: one Levenberg–Marquardt / IRLS solver runs all replicates at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from analysis.fitting._blas import single_threaded

HUBER_DELTA = 1e-3
ALPHA_BOUNDS = (1e-3, 5.0)
BASE_BOUNDS = (1.1, 100.0)  # the threshold base b the fits search; `design` rates b inside it alone
LOG_BASE_BOUNDS = (np.log(BASE_BOUNDS[0]), np.log(BASE_BOUNDS[1]))
_A_BOUNDS = (-300.0, 300.0)
_MAX_ELEMENTS = 4_000_000  # replicates × points × params held at once by the batched solver


def huber(r: np.ndarray, delta: float = HUBER_DELTA) -> np.ndarray:
    a = np.abs(r)
    m = np.minimum(a, delta)
    return m * (a - 0.5 * m)  # ½r² inside ±δ, δ(|r| − δ/2) outside


def log_kappa(depth: np.ndarray, log_width: np.ndarray, c: np.ndarray):
    """ln κ_b(L, d) and its derivative in c = ln b (docs/science.md §4), broadcast over c's batch.

    Below L_th = ln d / c: ln κ = ln ln d + c·L. Above: ln κ = ln ln d + ln d + ln(1 + c·L − ln d);
    both branches and their slopes meet at L_th, so the fit sees a smooth surface.
    """
    ell = log_width
    cl = c * depth
    below = cl <= ell
    sat = np.maximum(1.0 + cl - ell, 1e-300)
    lk = np.log(ell) + np.where(below, cl, ell + np.log(sat))
    dlk = np.where(below, depth, depth / sat)
    return lk, dlk


@dataclass(frozen=True)
class Law:
    """A sum-of-power-terms law. `terms` names each term's variable: 'N', 'S', 'D', 'width',
    'depth' or 'kappa'."""

    name: str
    terms: tuple[str, ...]
    irreducible: bool = True

    @property
    def has_kappa(self) -> bool:
        return "kappa" in self.terms

    @property
    def n_params(self) -> int:
        return int(self.irreducible) + 2 * len(self.terms) + int(self.has_kappa)

    def param_names(self) -> list[str]:
        names = ["e"] if self.irreducible else []
        for t in self.terms:
            names += [f"a_{t}", f"alpha_{t}"]
        return names + (["c"] if self.has_kappa else [])

    def bounds(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = [], []
        if self.irreducible:
            # E lies below every loss up to noise; far below means "no floor".
            lo.append(np.log(y.min()) - 12.0)
            hi.append(np.log(y.max()))
        for _ in self.terms:
            lo += [_A_BOUNDS[0], ALPHA_BOUNDS[0]]
            hi += [_A_BOUNDS[1], ALPHA_BOUNDS[1]]
        if self.has_kappa:
            lo.append(LOG_BASE_BOUNDS[0])
            hi.append(LOG_BASE_BOUNDS[1])
        return np.array(lo), np.array(hi)

    def evaluate(self, theta: np.ndarray, X: dict[str, np.ndarray], jac: bool = True):
        """log L for parameter rows theta (B, p) at points X (n,) -> (B, n), and its Jacobian
        laid out (B, p, n) so the Gauss–Newton products run on contiguous rows.

        Each term's a_k is stored against the centred variable z_k − X['mid_k'] so that a and α
        are not nearly collinear when ln N ~ 20.
        """
        theta = np.atleast_2d(theta)
        B, n = theta.shape[0], X["n"]
        c = theta[:, -1:] if self.has_kappa else None
        i = int(self.irreducible)
        P = np.repeat(np.exp(theta[:, :1]), n, axis=1) if self.irreducible else np.zeros((B, n))
        terms = []
        with np.errstate(over="ignore", under="ignore"):
            for t in self.terms:
                a, al = theta[:, i : i + 1], theta[:, i + 1 : i + 2]
                dz_dc = None
                if t == "kappa":
                    z, dz_dc = log_kappa(X["depth"][None, :], X["log_width"][None, :], c)
                    zc = z - X["mid_kappa"]
                else:
                    zc = (X["log_" + t] - X["mid_" + t])[None, :]
                T = np.exp(a - al * zc)
                P += T
                terms.append((i, al, zc, T, dz_dc))
                i += 2
        np.maximum(P, 1e-300, out=P)
        logP = np.log(P)
        if not jac:
            return logP, None
        inv = 1.0 / P
        J = np.empty((B, self.n_params, n))
        if self.irreducible:
            np.multiply(np.exp(theta[:, :1]), inv, out=J[:, 0])
        if self.has_kappa:
            J[:, -1] = 0.0
        for j, al, zc, T, dz_dc in terms:
            np.multiply(T, inv, out=J[:, j])
            np.multiply(J[:, j], -zc, out=J[:, j + 1])
            if dz_dc is not None:
                J[:, -1] -= al * J[:, j] * dz_dc
        return logP, J


def make_X(law: Law, **cols: np.ndarray) -> dict[str, np.ndarray]:
    """Package the variables a law needs (N, S, depth, width) with fixed centring constants."""
    X: dict = {}
    n = None
    for t in law.terms:
        if t == "kappa":
            X["depth"] = np.asarray(cols["depth"], float)
            X["log_width"] = np.log(np.asarray(cols["width"], float))
            lk, _ = log_kappa(X["depth"], X["log_width"], np.log(3.0))
            X["mid_kappa"] = float(np.median(lk))
            n = len(X["depth"])
        else:
            X["log_" + t] = np.log(np.asarray(cols[t], float))
            X["mid_" + t] = float(np.median(X["log_" + t]))
            n = len(X["log_" + t])
    X["n"] = n
    return X


def subset_X(X: dict, idx: np.ndarray) -> dict:
    out = {k: (v[idx] if isinstance(v, np.ndarray) else v) for k, v in X.items()}
    out["n"] = int(len(idx))
    return out


def start_grid(law: Law, X: dict, logy: np.ndarray, floors=None, alphas=None) -> np.ndarray:
    """Initial values: floors at fractions of the smallest loss, exponents and bases on grids;
    each term's scale is then set so the terms share the median excess loss. `floors` and
    `alphas` replace the default grids (a coarser grid for profiles)."""
    y = np.exp(logy)
    k = len(law.terms)
    if floors is None:
        floors = [0.95, 0.7, 0.3, 1e-3]
    if not law.irreducible:
        floors = [0.0]
    if alphas is None:
        # Three power terms would make 4^3 exponent combinations per floor; three values each
        # cover the same range of shapes at less than half the cost.
        alphas = [0.05, 0.15, 0.4, 1.0] if k < 3 else [0.1, 0.35, 1.0]
    # Bases up to 30: a κ-law's loss can have one optimum near b = 1.1 and another near the
    # upper bound (every run past L_th), and a start on each side lets the fit see both.
    cs = np.log([1.5, 2.5, 4.0, 8.0, 30.0]) if law.has_kappa else [None]
    starts = []
    for f in floors:
        E = f * y.min()
        excess = max(np.median(y) - E, 1e-3 * np.median(y)) / k
        for al_combo in np.array(np.meshgrid(*([alphas] * k))).reshape(k, -1).T:
            for c in cs:
                th = [np.log(max(E, 1e-12))] if law.irreducible else []
                for _term, al in zip(law.terms, al_combo):
                    th += [np.log(excess), al]
                if c is not None:
                    th.append(c)
                starts.append(th)
    lo, hi = law.bounds(y)
    return np.clip(np.array(starts), lo, hi)


def batched_lm(
    law: Law,
    theta0: np.ndarray,
    X: dict,
    logy: np.ndarray,
    W: np.ndarray,
    iters: int = 100,
    tol: float = 1e-8,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Minimise Σ_i W[b,i]·huber(logy_i − f_i(θ_b)) for every row b at once.

    Iteratively reweighted Gauss–Newton (weights ψ(r)/r majorise the Huber loss) with a
    Levenberg–Marquardt damping per replicate and projection onto the bounds; a step is kept only
    when it lowers that replicate's summed Huber loss. A row stops when a kept step changes its
    loss by less than `tol` (relative). `bounds` (lo, hi), each (p,) or (B, p), replaces the law's
    own; a row with lo = hi in a column holds that parameter fixed (a profile).
    Returns (theta (B, p), objective (B,)).
    """
    theta = np.array(theta0, float, copy=True)
    B, p = theta.shape
    n = X["n"]
    lo, hi = law.bounds(np.exp(logy)) if bounds is None else bounds
    lo, hi = np.broadcast_to(lo, (B, p)), np.broadcast_to(hi, (B, p))
    chunk = max(1, _MAX_ELEMENTS // max(1, n * p))
    if B > chunk:
        outs = [
            batched_lm(
                law,
                theta[s : s + chunk],
                X,
                logy,
                W[s : s + chunk],
                iters,
                tol,
                (lo[s : s + chunk], hi[s : s + chunk]),
            )
            for s in range(0, B, chunk)
        ]
        return np.concatenate([o[0] for o in outs]), np.concatenate([o[1] for o in outs])
    theta = np.clip(theta, lo, hi)
    lam = np.full(B, 1e-3)
    logP, J = law.evaluate(theta, X)
    r = logy[None, :] - logP
    obj = np.sum(W * huber(r), axis=1)
    active = np.isfinite(obj)
    eye = np.eye(p)
    for _ in range(iters):
        ia = np.flatnonzero(active)
        if ia.size == 0:
            break
        ra, Ja, Wa = r[ia], J[ia], W[ia]
        w = Wa * (HUBER_DELTA / np.maximum(np.abs(ra), HUBER_DELTA))  # ψ(r)/r: 1 inside ±δ
        Jw = Ja * w[:, None, :]  # (b, p, n)
        H = Jw @ Ja.transpose(0, 2, 1)  # (b, p, p) Gauss–Newton matrix
        g = (Jw @ ra[:, :, None])[:, :, 0]  # (b, p)
        D = np.diagonal(H, axis1=1, axis2=2)
        A = H + lam[ia, None, None] * (D[:, :, None] * eye + 1e-12 * eye)
        try:
            step = np.linalg.solve(A, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            step = np.stack([np.linalg.lstsq(A[k], g[k], rcond=None)[0] for k in range(len(ia))])
        cand = np.clip(theta[ia] + step, lo[ia], hi[ia])
        lp_c, J_c = law.evaluate(cand, X)
        r_c = logy[None, :] - lp_c
        obj_c = np.sum(Wa * huber(r_c), axis=1)
        better = np.isfinite(obj_c) & (obj_c < obj[ia])
        gain = np.where(better, (obj[ia] - obj_c) / np.maximum(obj[ia], 1e-300), 0.0)
        acc = ia[better]
        theta[acc], r[acc], J[acc], obj[acc] = cand[better], r_c[better], J_c[better], obj_c[better]
        lam[acc] = np.maximum(lam[acc] / 3.0, 1e-9)
        rej = ia[~better]
        lam[rej] = lam[rej] * 4.0
        # A row stops once its steps no longer change the loss, or its damping has exploded.
        done = (better & (gain < tol)) | (~better & (lam[ia] > 1e10))
        active[ia[done]] = False
    return theta, obj


def polish(
    law: Law,
    theta: np.ndarray,
    X: dict,
    logy: np.ndarray,
    w: np.ndarray,
    bounds=None,
    ftol: float = 1e-15,
    maxiter: int = 1000,
):
    """L-BFGS-B on the summed Huber loss from one start (docs/science.md §3); returns (θ, obj, ok).
    `bounds` (lo, hi) replaces the law's own; lo = hi holds a parameter fixed (a profile).
    `ftol` is L-BFGS-B's relative stopping change of the loss (in units of δ), `maxiter` its
    iteration cap.

    On the kinked, nearly L1 Huber surface the batched Gauss–Newton steps can stall far from an
    optimum that L-BFGS-B reaches from the same point, so every fit ends with this polish."""
    lo, hi = law.bounds(np.exp(logy)) if bounds is None else bounds

    def f(th):
        logP, J = law.evaluate(th[None, :], X)
        r = logy - logP[0]
        psi = np.clip(r, -HUBER_DELTA, HUBER_DELTA)
        return float(np.sum(w * huber(r))) / HUBER_DELTA, -(J[0] @ (w * psi)) / HUBER_DELTA

    res = minimize(
        f,
        theta,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options={"maxiter": maxiter, "ftol": ftol, "gtol": 1e-12},
    )
    return res.x, res.fun * HUBER_DELTA, bool(res.success)


@single_threaded
def fit_law(
    law: Law,
    X: dict,
    logy: np.ndarray,
    w: np.ndarray | None = None,
    starts: np.ndarray | None = None,
    keep: int = 4,
    probe_points: int | None = None,
):
    """Best fit from a grid of starts (docs/science.md §3).

    Every start takes a few batched LM steps (on a random subset of `probe_points` when the data
    are larger: 3000, or as few as 1000 when there are so many starts that starts × points would
    exceed 3e5). The `keep` best, and for a κ-law also the best in each third of the range of
    ln b (its loss can have a local optimum at each end), are solved to convergence on all
    points, and each is polished by L-BFGS-B (`finish`). Returns (theta, objective, converged)."""
    n = X["n"]
    w = np.ones(n) if w is None else np.asarray(w, float)
    if starts is None:
        starts = start_grid(law, X, logy)
    if probe_points is None:
        probe_points = int(np.clip(3e5 / len(starts), 1000, 3000))
    if len(starts) > keep:
        idx = (
            np.arange(n)
            if n <= probe_points
            else np.sort(np.random.default_rng(0).choice(n, probe_points, replace=False))
        )
        Xs = subset_X(X, idx)
        th0, obj0 = batched_lm(
            law, starts, Xs, logy[idx], np.broadcast_to(w[idx], (len(starts), len(idx))), iters=15, tol=0.0
        )
        starts = th0[_spread_picks(law, th0, obj0, keep)]
    th, obj = batched_lm(law, starts, X, logy, np.broadcast_to(w, (len(starts), n)), iters=300, tol=1e-10)
    return finish(law, th, obj, X, logy, w)


def _spread_picks(law: Law, theta: np.ndarray, obj: np.ndarray, keep: int) -> np.ndarray:
    """Rows to solve on: the `keep` lowest losses, and for a κ-law the lowest in each third of
    the range of c = ln b, so that a second basin is solved even when it probes worse."""
    o = np.where(np.isfinite(obj), obj, np.inf)
    order = np.argsort(o, kind="stable")
    picks = list(order[:keep])
    if law.has_kappa:
        edges = np.linspace(*LOG_BASE_BOUNDS, 4)[1:-1]
        third = np.digitize(theta[:, -1], edges)
        for t in range(3):
            members = [i for i in order if third[i] == t and np.isfinite(o[i])]
            if members and members[0] not in picks:
                picks.append(members[0])
    return np.array(picks)


def finish(
    law: Law,
    theta: np.ndarray,
    obj: np.ndarray,
    X: dict,
    logy: np.ndarray,
    w: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
):
    """The best of several solved candidates (rows of `theta`, losses `obj`): each whose loss is
    within a factor 3 of the best is polished by L-BFGS-B (a stalled Gauss–Newton solve can sit
    well above the optimum of its basin), and the winner gets a last batched solve.
    Returns (theta, objective, converged)."""
    o = np.where(np.isfinite(obj), obj, np.inf)
    if not np.isfinite(o.min()):
        return np.full(law.n_params, np.nan), np.inf, False
    solved = []
    for k in np.flatnonzero(o <= 3.0 * o.min()):
        t2, o2, ok = polish(law, theta[k], X, logy, w, bounds)
        solved.append((t2, float(o2), ok) if o2 < o[k] else (theta[k], float(o[k]), ok))
    best_th, best_obj, ok = min(solved, key=lambda s: s[1])
    # L-BFGS-B often stops in its line search on the kinked Huber surface; the point counts as
    # converged when a further batched solve cannot lower the loss by one part in a million.
    bnd = None if bounds is None else (bounds[0][None, :], bounds[1][None, :])
    t3, o3 = batched_lm(law, best_th[None, :], X, logy, w[None, :], iters=50, tol=1e-12, bounds=bnd)
    converged = bool(ok or (best_obj - o3[0]) <= 1e-6 * max(best_obj, 1e-300))
    if o3[0] < best_obj:
        best_th, best_obj = t3[0], float(o3[0])
    return best_th, best_obj, converged


def resample_counts(
    groups: np.ndarray, n_boot: int, seed: int, strata: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap draws of groups (runs) with replacement, within strata if given, as counts:
    returns (counts (n_boot, G), inverse index point -> group)."""
    rng = np.random.default_rng(seed)
    uniq, inv = np.unique(groups, return_inverse=True)
    G = len(uniq)
    if strata is None:
        strata_g = np.zeros(G, int)
    else:
        strata_g = np.zeros(G, int)
        strata_g[inv] = np.unique(np.asarray(strata), return_inverse=True)[1]
    counts = np.zeros(n_boot * G)
    rows = np.arange(n_boot)[:, None] * G
    for s in np.unique(strata_g):
        members = np.flatnonzero(strata_g == s)
        draws = members[rng.integers(0, len(members), size=(n_boot, len(members)))]
        counts += np.bincount((rows + draws).ravel(), minlength=n_boot * G)
    return counts.reshape(n_boot, G), inv


def one_step_draws(
    law: Law,
    theta_hat: np.ndarray,
    X: dict,
    logy: np.ndarray,
    counts: np.ndarray,
    inv: np.ndarray,
    w: np.ndarray | None = None,
) -> np.ndarray | None:
    """Estimating-function bootstrap (Hu & Kalbfleisch 2000): one Newton step from θ̂ per
    replicate, θ_b = θ̂ + H_b⁻¹ g_b, with the scores ψ(r)·J and Hessian terms summed per run, so a
    replicate costs O(runs·p²) instead of a refit over every point.

    The Huber Hessian weighs each point by ψ'(r) = 1{|r| < δ}, an estimate of 2δ·f(0) (f the
    residual density) that is too noisy when few residuals fall inside δ = 1e-3; the indicator is
    therefore widened to a Gaussian kernel of Silverman's bandwidth (never narrower than δ).
    Parameters sitting on a bound, or with no pull on the loss, are held at θ̂. Returns None when
    fewer than 10 residuals per parameter fall within one bandwidth. `w` weighs each point (its
    share of its run's weight), as in the fit."""
    w = np.ones(len(logy)) if w is None else np.asarray(w, float)
    logP, J = law.evaluate(theta_hat[None, :], X)
    J = J[0]  # (p, n)
    r = logy - logP[0]
    n, p = len(r), law.n_params
    spread = min(np.std(r), np.subtract(*np.percentile(r, [75, 25])) / 1.34)
    h = max(HUBER_DELTA, 0.9 * spread * n**-0.2)
    if np.sum(np.abs(r) < h) < 10 * p:
        return None
    kern = w * 2 * HUBER_DELTA * np.exp(-0.5 * (r / h) ** 2) / (h * np.sqrt(2 * np.pi))
    lo, hi = law.bounds(np.exp(logy))
    diag = np.einsum("pn,n,pn->p", J, kern, J)
    free = (np.abs(theta_hat - lo) > 1e-9) & (np.abs(hi - theta_hat) > 1e-9) & (diag > 1e-12 * diag.max())
    Jf = J[free]
    q = int(free.sum())
    G = counts.shape[1]
    score = np.zeros((G, q))
    np.add.at(score, inv, (w * np.clip(r, -HUBER_DELTA, HUBER_DELTA) * Jf).T)
    hess = np.zeros((G, q * q))
    np.add.at(hess, inv, ((Jf[:, None, :] * Jf[None, :, :]) * kern).reshape(q * q, -1).T)
    g = counts @ score  # Σ w ψ J; the full-data sum is ≈ 0
    H = (counts @ hess).reshape(-1, q, q)
    H += 1e-12 * np.trace(H, axis1=1, axis2=2)[:, None, None] * np.eye(q)
    out = np.repeat(theta_hat[None, :], len(counts), axis=0)
    out[:, free] += np.linalg.solve(H, g[:, :, None])[:, :, 0]
    return np.clip(out, lo, hi)


# Peak memory of a whole `analyze` per bootstrap replicate, read from ru_maxrss on planted sweeps
# (analysis.fitting.synthetic): about 7.7 kB at 16 runs and 14 kB at 96 runs with 1,920 curve points
# (Linux x86-64, numpy 2). The replicates of every fit are held at once, so memory grows
# linearly in their number; rounded up here so that the estimate stays an upper bound.
BOOT_BYTES_FIXED, BOOT_BYTES_PER_RUN, BOOT_BYTES_PER_POINT = 8_000, 100, 8


def bootstrap_bytes(n_boot: int, n_runs: int, n_points: int = 0) -> float:
    """Estimated peak bytes that `n_boot` bootstrap replicates of the analysis take."""
    return float(n_boot) * (BOOT_BYTES_FIXED + BOOT_BYTES_PER_RUN * n_runs + BOOT_BYTES_PER_POINT * n_points)


@single_threaded
def bootstrap(
    law: Law,
    theta_hat: np.ndarray,
    X: dict,
    logy: np.ndarray,
    groups: np.ndarray,
    n_boot: int,
    seed: int,
    strata: np.ndarray | None = None,
    refit_budget: float = 1e6,
    w: np.ndarray | None = None,
) -> tuple[np.ndarray, str]:
    """Refit on `n_boot` resamples of the groups (runs), drawn within strata if given.

    Resampling is expressed as integer weights per point, so all replicates share one design and
    are solved together by batched LM ('refit'). When replicates × points × parameters exceeds
    `refit_budget` the one-step estimating-function bootstrap is used instead ('one_step').
    `w` weighs each point within its group, as in the fit. Returns (the (n_ok, p) parameter
    draws, method); failed refits are dropped."""
    if n_boot <= 0:
        return np.empty((0, law.n_params)), "none"
    w = np.ones(len(logy)) if w is None else np.asarray(w, float)
    counts, inv = resample_counts(groups, n_boot, seed, strata)
    if n_boot * X["n"] * law.n_params > refit_budget:
        try:
            th = one_step_draws(law, theta_hat, X, logy, counts, inv, w)
        except np.linalg.LinAlgError:  # a replicate's Hessian is singular: refit them all
            th = None
        if th is not None:
            return th[np.all(np.isfinite(th), axis=1)], "one_step"
    # Refits stop at a relative loss change of 1e-6: tighter moves the interval ends by < 1e-4
    # of their width while costing several times the iterations on the near-L1 Huber surface.
    th, obj = batched_lm(
        law, np.repeat(theta_hat[None, :], n_boot, axis=0), X, logy, counts[:, inv] * w[None, :], tol=1e-6
    )
    ok = np.all(np.isfinite(th), axis=1) & np.isfinite(obj)
    return th[ok], "refit"
