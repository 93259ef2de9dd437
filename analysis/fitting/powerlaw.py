"""Kaplan-style loss laws as frozen fit results: L(N) = E + A·N^−α and
L(N, S) = E + (N_c/N)^α_N + (S_c/S)^α_S.

Follows Kaplan et al. 2020 (eq. 1.6, Tables 3 and 5) for the forms and Hoffmann et al. 2022 /
Besiroglu et al. 2024 for the estimator (docs/science.md §2–3): log-space summed Huber, multi-start
L-BFGS-B, bootstrap over runs for 95% percentile intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from analysis.fitting import fitcore, identify
from analysis.fitting.fitcore import Law
from analysis.fitting.profile import profile_and_refit

OK, INSUFFICIENT, FAILED, NOT_IDENTIFIED = "ok", "insufficient_data", "failed", "not_identified"
_FORMULA_TERM = {
    "N": "(N_c/N)^alpha_N",
    "S": "(S_c/S)^alpha_S",
    "D": "(D_c/D)^alpha_D",
    "width": "A_width*w^-alpha_width",
    "depth": "A_depth*L^-alpha_depth",
    "kappa": "A_kappa*kappa_b(L,d)^-alpha_kappa",
}


def json_safe(v: Any) -> Any:
    """Plain JSON values: numpy scalars and arrays unwrapped, NaN/inf as None (report.json is
    written with allow_nan=False so other tools can read it)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.ndarray):
        return json_safe(v.tolist())
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    if v is None or isinstance(v, (int, str)):
        return v
    return None if pd.isna(v) else str(v)


@dataclass(frozen=True)
class FitResult:
    """One fitted law: estimates with 95% bootstrap intervals, status, residuals and diagnostics."""

    name: str
    formula: str
    status: str
    reason: str = ""
    params: dict = field(default_factory=dict)
    ci: dict = field(default_factory=dict)
    n_points: int = 0
    n_groups: int = 0
    n_boot: int = 0
    bootstrap_method: str = "none"
    objective: float = float("nan")
    converged: bool = False
    residuals: tuple = ()
    law: Law | None = field(default=None, repr=False)
    theta: tuple = field(default=(), repr=False)
    centres: dict = field(default_factory=dict, repr=False)
    boot_theta: Any = field(default=None, repr=False, compare=False)
    weights: Any = field(default=None, repr=False, compare=False)  # per point; None = all 1
    not_identified: dict = field(default_factory=dict)  # reported name -> why
    profile: dict | None = None  # profile likelihood of b (κ-laws)
    profile_theta: Any = field(default=None, repr=False, compare=False)  # (grid of ln b, θ rows)
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status == OK

    def _X(self, cols: dict) -> dict:
        X = fitcore.make_X(self.law, **cols)
        X.update(self.centres)
        return X

    def predict(self, theta: np.ndarray | None = None, **cols) -> np.ndarray:
        """Loss at the given N / S / depth, width; with `theta` (B, p) returns (B, n)."""
        th = np.asarray(self.theta if theta is None else theta, float)
        logP, _ = self.law.evaluate(np.atleast_2d(th), self._X(cols), jac=False)
        return np.exp(logP[0] if theta is None or np.ndim(theta) == 1 else logP)

    def to_dict(self) -> dict:
        # A fit that is not ok keeps no raw parameters either, so nothing downstream can draw
        # or quote it as an estimate.
        return json_safe(
            {
                "name": self.name,
                "formula": self.formula,
                "status": self.status,
                "reason": self.reason,
                "params": dict(self.params),
                "ci": {k: list(v) for k, v in self.ci.items()},
                "n_points": self.n_points,
                "n_groups": self.n_groups,
                "n_boot": self.n_boot,
                "bootstrap_method": self.bootstrap_method,
                "objective": self.objective,
                "converged": self.converged,
                "residuals": list(self.residuals),
                "theta": list(self.theta) if self.ok else [],
                "centres": dict(self.centres),
                "terms": list(self.law.terms) if self.law else None,
                "irreducible": self.law.irreducible if self.law else None,
                "not_identified": dict(self.not_identified),
                "profile": self.profile,
                "note": self.note,
            }
        )

    @classmethod
    def from_dict(cls, d: dict) -> FitResult:
        """Rebuild a stored fit (without its bootstrap draws) so figures can be redrawn."""
        law = Law(d["name"], tuple(d["terms"]), bool(d["irreducible"])) if d.get("terms") else None
        nan = float("nan")
        return cls(
            name=d["name"],
            formula=d["formula"],
            status=d["status"],
            reason=d.get("reason", ""),
            params={k: (nan if v is None else v) for k, v in d.get("params", {}).items()},
            ci={k: tuple(v) for k, v in d.get("ci", {}).items()},
            n_points=d.get("n_points", 0),
            n_groups=d.get("n_groups", 0),
            n_boot=d.get("n_boot", 0),
            bootstrap_method=d.get("bootstrap_method", "none"),
            converged=bool(d.get("converged")),
            residuals=tuple(d.get("residuals", ())),
            law=law,
            theta=tuple(d.get("theta") or ()),
            centres=dict(d.get("centres") or {}),
            not_identified=dict(d.get("not_identified") or {}),
            profile=d.get("profile"),
            note=d.get("note", ""),
        )


def formula(law: Law) -> str:
    parts = ["E"] if law.irreducible else []
    parts += [_FORMULA_TERM[t] for t in law.terms]
    return "L = " + " + ".join(parts)


def named_params(law: Law, theta: np.ndarray, centres: dict) -> dict[str, np.ndarray]:
    """Human parameters from raw θ (rows = draws): E, and per term A_t, alpha_t, t_c (and b)."""
    th = np.atleast_2d(theta)
    out: dict[str, np.ndarray] = {}
    i = 0
    if law.irreducible:
        out["E"] = np.exp(th[:, 0])
        i = 1
    for t in law.terms:
        a, al = th[:, i], th[:, i + 1]
        mid = centres["mid_" + t]
        sym = t
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            out[f"A_{sym}"] = np.exp(a + al * mid)  # L-term = A·x^−α
            out[f"alpha_{sym}"] = al
            if t in ("N", "S", "D"):
                out[f"{sym}_c"] = np.exp(mid + a / al)  # Kaplan's (x_c/x)^α form
        i += 2
    if law.has_kappa:
        out["b"] = np.exp(th[:, -1])
    return out


def insufficient(name: str, law: Law, reason: str, n_points: int = 0, n_groups: int = 0) -> FitResult:
    return FitResult(
        name=name,
        formula=formula(law),
        status=INSUFFICIENT,
        reason=reason,
        n_points=n_points,
        n_groups=n_groups,
        law=law,
    )


FLOORLESS_NOTE = (
    "the floor E fell to its lower bound (the data ask for no floor), so the law was refitted without it"
)


def fit(
    law: Law,
    name: str,
    logy: np.ndarray,
    cols: dict,
    groups: np.ndarray | None = None,
    n_boot: int = 200,
    seed: int = 0,
    strata: np.ndarray | None = None,
    min_distinct: int | None = None,
    distinct_of: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    floor_fallback: bool = True,
    profile: bool = False,
) -> FitResult:
    """Fit `law` to log-losses `logy` at variables `cols`, bootstrap over `groups` (runs).

    `weights` weigh each point (e.g. 1/k for each of a run's k checkpoints, so every run counts
    once). A parameter left on its search bound, or whose interval spans the allowed range, makes
    the fit `not_identified` (docs/science.md §3), with one exception: a floor E on its lower
    bound (e^-12 × the smallest loss) means the data ask for no floor, so with `floor_fallback`
    the law is refitted without E, as Kaplan's pure form, and says so. With `profile` a κ-law
    also gets the profile-likelihood interval of b (analysis/fitting/profile.py), and its point
    fit restarts from any profile value with a lower loss."""
    n = len(logy)
    groups = np.arange(n) if groups is None else np.asarray(groups)
    n_groups = len(np.unique(groups))
    w = np.ones(n) if weights is None else np.asarray(weights, float)
    need = law.n_params + 1 if min_distinct is None else min_distinct
    distinct = len(np.unique(distinct_of if distinct_of is not None else groups))
    if distinct < need:
        return insufficient(
            name,
            law,
            f"needs at least {need} distinct points for {law.n_params} parameters, has {distinct}",
            n,
            n_groups,
        )
    try:
        X = fitcore.make_X(law, **cols)
        theta, obj, converged = fitcore.fit_law(law, X, logy, w)
        if not np.all(np.isfinite(theta)):
            raise FloatingPointError("no start reached a finite loss")
        hits = identify.bound_hits(law, theta, logy)
        if floor_fallback and law.irreducible and hits.get("E", "").startswith("its lower"):
            return _floorless(
                law, name, logy, cols, groups, n_boot, seed, strata, need, distinct_of, weights, profile
            )
        prof = warm = None
        if profile and law.has_kappa:
            # The profile may find a lower loss than the point fit did; then the fit restarts there.
            n_eff = float(np.sum(w)) if weights is not None else n_groups
            prof, theta, obj, refit_ok, warm = profile_and_refit(law, X, logy, w, theta, obj, n_eff)
            converged = converged if refit_ok is None else refit_ok
            hits = identify.bound_hits(law, theta, logy)
        logP, _ = law.evaluate(theta[None, :], X, jac=False)
        resid = logy - logP[0]
        centres = {k: v for k, v in X.items() if k.startswith("mid_")}
        boot, boot_method = _bootstrap(law, theta, X, logy, groups, n_boot, seed, strata, w, n_groups)
    except (FloatingPointError, ValueError, np.linalg.LinAlgError) as exc:
        return FitResult(
            name=name,
            formula=formula(law),
            status=FAILED,
            reason=str(exc),
            n_points=n,
            n_groups=n_groups,
            law=law,
        )
    unidentified = {**identify.spans_range(law, boot, logy), **hits}
    if prof is not None and prof["spans_range"]:
        unidentified.setdefault("b", identify.describe_profile(prof))
    common = dict(
        name=name,
        formula=formula(law),
        n_points=n,
        n_groups=n_groups,
        n_boot=len(boot),
        bootstrap_method=boot_method,
        objective=obj,
        converged=converged,
        residuals=tuple(float(r) for r in resid),
        law=law,
        theta=tuple(float(t) for t in theta),
        centres=centres,
        boot_theta=boot,
        weights=None if weights is None else w,
        profile=prof,
        profile_theta=warm,
    )
    if unidentified:
        why = "; ".join(f"{k}: {v}" for k, v in unidentified.items())
        return FitResult(
            status=NOT_IDENTIFIED,
            reason=f"not identified by these data ({why})",
            not_identified=unidentified,
            **common,
        )
    est = {k: float(v[0]) for k, v in named_params(law, theta, centres).items()}
    return FitResult(status=OK, params=est, ci=percentile_ci(law, boot, centres), **common)


def _floorless(law, name, logy, cols, groups, n_boot, seed, strata, need, distinct_of, weights, profile):
    """The law refitted without its floor E (which fell to its lower bound), saying so."""
    floorless = Law(law.name, law.terms, irreducible=False)
    res = fit(
        floorless,
        name,
        logy,
        cols,
        groups,
        n_boot,
        seed,
        strata,
        min(need, floorless.n_params + 1),
        distinct_of,
        weights,
        False,
        profile,
    )
    return replace(res, note="; ".join(filter(None, [FLOORLESS_NOTE, res.note])))


def _bootstrap(law, theta, X, logy, groups, n_boot, seed, strata, w, n_groups):
    """Bootstrap draws of theta over the runs (none under 3 runs) and the method used."""
    if n_groups < 3:
        return np.empty((0, law.n_params)), "none"
    return fitcore.bootstrap(law, theta, X, logy, groups, n_boot, seed, strata, w=w)


def percentile_ci(law: Law, boot: np.ndarray, centres: dict) -> dict[str, tuple[float, float]]:
    """95% percentile intervals of the named parameters over bootstrap draws (none under 10)."""
    if len(boot) < 10:
        return {}
    big = np.finfo(float).max  # an overflowing draw is the largest float, so it still counts
    return {
        k: tuple(
            float(q)
            for q in np.nanpercentile(
                np.nan_to_num(np.asarray(v, float), nan=np.nan, posinf=big, neginf=-big), [2.5, 97.5]
            )
        )
        for k, v in named_params(law, boot, centres).items()
    }


def fit_power_law(
    n_params: np.ndarray,
    loss: np.ndarray,
    name: str = "L(N)",
    groups: np.ndarray | None = None,
    n_boot: int = 200,
    seed: int = 0,
    irreducible: bool | str = "auto",
) -> FitResult:
    """L(N) = E + A·N^−α; with irreducible='auto' the floor E is fitted only when at least five
    distinct sizes are present, else Kaplan's pure form (N_c/N)^α_N (needs three)."""
    N = np.asarray(n_params, float)
    y = np.asarray(loss, float)
    distinct = len(np.unique(N))
    if irreducible == "auto":
        irreducible = distinct >= 5
    law = Law(name, ("N",), irreducible=bool(irreducible))
    need = 5 if law.irreducible else 3
    return fit(law, name, np.log(y), {"N": N}, groups, n_boot, seed, min_distinct=need, distinct_of=N)


def thin_curves(
    curves: pd.DataFrame, points_per_curve: int = 12, min_step_fraction: float = 1e-3
) -> pd.DataFrame:
    """Keep at most `points_per_curve` points per run, log-spaced in step, from
    `min_step_fraction` of the run's last step on: each decade of training then weighs the same,
    long curves do not swamp short ones, and the warmup transient (not a power law) is left out."""
    out = []
    for _, g in curves[curves["step"] > 0].groupby("trial_id", sort=False):
        g = g.sort_values("step")
        s = g["step"].to_numpy(float)
        g = g[s >= min_step_fraction * s[-1]]
        if len(g) > points_per_curve:
            ls = np.log(g["step"].to_numpy(float))
            targets = np.linspace(ls[0], ls[-1], points_per_curve)
            idx = np.unique(np.abs(ls[None, :] - targets[:, None]).argmin(axis=1))
            g = g.iloc[idx]
        out.append(g)
    return pd.concat(out, ignore_index=True) if out else curves.iloc[0:0]


def fit_learning_curves(
    curves: pd.DataFrame,
    n_boot: int = 200,
    seed: int = 0,
    points_per_curve: int = 12,
    min_step_fraction: float = 1e-3,
    irreducible: bool = True,
) -> tuple[FitResult, pd.DataFrame]:
    """Kaplan eq. 1.6 with an optional floor across all curves of a sweep.

    `curves` needs columns trial_id, n_params, step, loss. Returns the fit and, per run, the
    converged-loss estimate L_∞ = median over its points of (loss − (S_c/S)^α_S), i.e. the curve
    extrapolated to S → ∞ with the sweep's shared step exponent."""
    law = Law("L(N,S)", ("N", "S"), irreducible=irreducible)
    th = thin_curves(curves, points_per_curve, min_step_fraction)
    n_runs = th["trial_id"].nunique() if len(th) else 0
    n_sizes = th["n_params"].nunique() if len(th) else 0
    if n_runs < 3 or n_sizes < 3 or len(th) < law.n_params + 2:
        res = insufficient(
            "L(N,S)",
            law,
            f"needs curves from at least 3 runs of 3 sizes; has {n_runs} runs of {n_sizes} sizes",
            len(th),
            n_runs,
        )
        return res, pd.DataFrame(columns=["trial_id", "n_params", "final_loss", "converged_loss"])
    res = fit(
        law,
        "L(N,S)",
        np.log(th["loss"].to_numpy(float)),
        {"N": th["n_params"].to_numpy(float), "S": th["step"].to_numpy(float)},
        groups=th["trial_id"].to_numpy(),
        n_boot=n_boot,
        seed=seed,
        min_distinct=3,
        distinct_of=th["n_params"].to_numpy(),
    )
    per_run = converged_losses(res, th)
    return res, per_run


def converged_losses(res: FitResult, th: pd.DataFrame) -> pd.DataFrame:
    cols = ["trial_id", "n_params", "final_loss", "converged_loss"]
    if not res.ok or th.empty:
        return pd.DataFrame(columns=cols)
    p = res.params
    step_term = (p["S_c"] / th["step"].to_numpy(float)) ** p["alpha_S"]
    tmp = th.assign(_linf=th["loss"].to_numpy(float) - step_term)
    g = tmp.sort_values("step").groupby("trial_id", sort=False)
    out = pd.DataFrame(
        {
            "n_params": g["n_params"].first(),
            "final_loss": g["loss"].last(),
            "converged_loss": g["_linf"].median(),
        }
    ).reset_index()
    return out[cols]


def deep_envelope(runs: pd.DataFrame) -> pd.DataFrame:
    """The lower envelope of loss over N: the (depth, width) configurations, seeds averaged,
    that beat every smaller configuration. Kaplan's Figure 6 trend that depths ≥ 2 collapse onto."""
    cfg = runs.groupby(["depth", "width"], as_index=False).agg(
        n_params=("n_params", "mean"), loss=("loss", "mean")
    )
    cfg = cfg.sort_values(["n_params", "loss"]).reset_index(drop=True)
    best = np.minimum.accumulate(cfg["loss"].to_numpy())
    keep = cfg["loss"].to_numpy() <= best
    keep &= np.r_[True, cfg["loss"].to_numpy()[1:] < best[:-1]]
    env = cfg[keep]
    return runs.merge(env[["depth", "width"]], on=["depth", "width"])


def fit_per_depth(runs: pd.DataFrame, n_boot: int = 200, seed: int = 0) -> dict[int, FitResult]:
    """L(N) for each depth over its widths (and seeds), bootstrapped over its runs."""
    fits = {}
    for i, (d, g) in enumerate(sorted(runs.groupby("depth"), key=lambda kv: kv[0])):
        f = fit_power_law(
            g["n_params"].to_numpy(),
            g["loss"].to_numpy(),
            name=f"depth={int(d)}",
            groups=g["run_id"].to_numpy(),
            n_boot=n_boot,
            seed=seed + 7 * i,
        )
        widths = sorted(g["width"].unique())
        if f.status == INSUFFICIENT and len(widths) < 3:
            f = replace(
                f,
                reason=f"depth {int(d)} has {len(widths)} width"
                f"{'s' if len(widths) > 1 else ''} ({', '.join(f'{w:g}' for w in widths)}); "
                f"a per-depth L(N) needs at least 3",
            )
        fits[int(d)] = f
    return fits
