"""The two depth regimes as a loss model (docs/science.md §4, ours; after Levine et al. 2020).

Three candidate laws fitted on every (depth, width) run: `kaplan` (shape-agnostic E + A·N^−α,
Kaplan et al. 2020), `two_regime` (E + A·κ_b^−α with the threshold base b free) and `combined`
(E + A·N^−α + B·κ_b^−β). They are compared by AIC, BIC and leave-one-depth-out error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import fitcore
from analysis.fitcore import Law
from analysis.powerlaw import OK, FitResult, fit, insufficient

MODELS = {
    "kaplan": Law("kaplan", ("N",)),
    "two_regime": Law("two_regime", ("kappa",)),
    "combined": Law("combined", ("N", "kappa")),
}


def information_criteria(res: FitResult) -> tuple[float, float]:
    """AIC and BIC from the log-loss residuals under a Gaussian likelihood:
    n·ln(RSS/n) + 2k and n·ln(RSS/n) + k·ln n (constants common to all models dropped)."""
    r = np.asarray(res.residuals)
    n, k = len(r), res.law.n_params
    rss = max(float(np.sum(r * r)), 1e-300)
    base = n * np.log(rss / n)
    return base + 2 * k, base + k * np.log(n)


def leave_one_depth_out(law: Law, res: FitResult, runs: pd.DataFrame) -> float | None:
    """RMS log-loss error on each depth when the law is fitted to the other depths (pooled).

    The held-out fits differ only in which points weigh zero, so they are solved together by the
    batched solver, each from the full-data estimate; a depth is skipped when the rest has fewer
    distinct configurations than the law has parameters."""
    depths = np.sort(runs["depth"].unique())
    if len(depths) < 3 or not res.ok:
        return None
    logy = np.log(runs["loss"].to_numpy(float))
    X = fitcore.make_X(law, **_cols(runs))
    X.update(res.centres)
    dep = runs["depth"].to_numpy()
    cfg = runs["depth"].astype(str) + ":" + runs["width"].astype(str)
    keep = [d for d in depths if cfg[dep != d].nunique() > law.n_params]
    if not keep:
        return None
    W = np.stack([(dep != d).astype(float) for d in keep])
    th, obj = fitcore.batched_lm(law, np.repeat(np.array(res.theta)[None, :], len(keep), axis=0),
                                 X, logy, W, iters=300, tol=1e-10)
    logP, _ = law.evaluate(th, X, jac=False)
    err = np.concatenate([(logy - logP[k])[dep == d] for k, d in enumerate(keep)
                          if np.all(np.isfinite(th[k]))])
    return float(np.sqrt(np.mean(err * err))) if err.size else None


def _cols(runs: pd.DataFrame) -> dict:
    return {"N": runs["n_params"].to_numpy(float), "depth": runs["depth"].to_numpy(float),
            "width": runs["width"].to_numpy(float)}


def fit_regimes(runs: pd.DataFrame, n_boot: int = 200, seed: int = 0) -> dict:
    """Fit the three laws on `runs` (columns depth, width, n_params, loss, run_id).

    Returns {'models': {name: {params, ci, aic, bic, cv_error, status, ...}}, 'preferred': name,
    'fits': {name: FitResult}}; 'preferred' is the lowest BIC among the fits that succeeded."""
    models, fits = {}, {}
    n_depths = runs["depth"].nunique() if len(runs) else 0
    n_widths = runs["width"].nunique() if len(runs) else 0
    logy = np.log(runs["loss"].to_numpy(float)) if len(runs) else np.empty(0)
    cfg = runs[["depth", "width"]].to_numpy() if len(runs) else np.empty((0, 2))
    distinct = np.array([f"{d}:{w}" for d, w in cfg])
    for i, (name, law) in enumerate(MODELS.items()):
        # κ_b needs several depths and widths: with a single depth b is not identified.
        if law.has_kappa and (n_depths < 3 or n_widths < 2):
            res = _insufficient(law, name, n_depths, n_widths, len(runs))
        elif law.has_kappa and runs["width"].min() < 2:
            res = insufficient(name, law, "kappa_b needs ln d > 0, but a run has width "
                               f"{runs['width'].min():g}", len(runs), len(runs))
        elif len(runs) == 0:
            res = _insufficient(law, name, 0, 0, 0)
        else:
            res = fit(law, name, logy, _cols(runs), groups=runs["run_id"].to_numpy(),
                      n_boot=n_boot, seed=seed + 101 * i, distinct_of=distinct)
        fits[name] = res
        entry = res.to_dict()
        entry.pop("residuals", None)
        if res.ok:
            aic, bic = information_criteria(res)
            entry.update(aic=aic, bic=bic, cv_error=leave_one_depth_out(law, res, runs),
                         rms_log_error=float(np.sqrt(np.mean(np.square(res.residuals)))))
        else:
            entry.update(aic=None, bic=None, cv_error=None, rms_log_error=None)
        models[name] = entry
    ok = {k: v for k, v in models.items() if v["status"] == OK}
    preferred = min(ok, key=lambda k: ok[k]["bic"]) if ok else None
    return {"models": models, "preferred": preferred, "criterion": "bic", "fits": fits}


def _insufficient(law: Law, name: str, n_depths: int, n_widths: int, n: int) -> FitResult:
    if n == 0:
        return insufficient(name, law, "no runs to fit")
    return insufficient(name, law, f"the threshold base needs at least 3 depths and 2 widths; "
                        f"has {n_depths} depths and {n_widths} widths", n, n)
