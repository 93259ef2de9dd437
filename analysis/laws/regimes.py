"""The two depth regimes as a loss model (docs/science.md §4, ours; after Levine et al. 2020).

Candidate laws fitted on every (depth, width) run: `kaplan` (shape-agnostic E + A·N^−α, Kaplan et
al. 2020), `two_regime` (E + A·κ_b^−α with the threshold base b free), `combined`
(E + A·N^−α + B·κ_b^−β) and `width_depth` (E + A·w^−a + B·L^−b, the separable form of McLeish et
al. 2025, docs/science.md §9). Where the training tokens D vary (analysis/laws/tokens.py) every law
gains a data term + B_D·D^−β_D (Hoffmann et al. 2022, §8) and is fitted on those weighted points.
They are compared by AIC, BIC and leave-one-depth-out error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.fitting import fitcore
from analysis.fitting.fitcore import Law
from analysis.fitting.powerlaw import FAILED, INSUFFICIENT, FitResult, fit, insufficient

_SHAPE_TERMS = {
    "kaplan": ("N",),
    "two_regime": ("kappa",),
    "combined": ("N", "kappa"),
    "width_depth": ("width", "depth"),
}
MODELS = {name: Law(name, terms) for name, terms in _SHAPE_TERMS.items()}
DATA_MODELS = {name: Law(name, terms + ("D",)) for name, terms in _SHAPE_TERMS.items()}


def information_criteria(res: FitResult) -> tuple[float, float]:
    """AIC and BIC from the log-loss residuals under a Gaussian likelihood:
    n·ln(RSS/n) + 2k and n·ln(RSS/n) + k·ln n (constants common to all models dropped).
    With weighted points (a run's checkpoints sharing a weight of one) RSS is weighted and n is
    the total weight, i.e. the number of runs."""
    r = np.asarray(res.residuals)
    w = np.ones(len(r)) if res.weights is None else np.asarray(res.weights)
    n, k = float(np.sum(w)), res.law.n_params
    rss = max(float(np.sum(w * r * r)), 1e-300)
    base = n * np.log(rss / n)
    return base + 2 * k, base + k * np.log(n)


def leave_one_depth_out(res: FitResult, table: pd.DataFrame) -> float | None:
    """RMS log-loss error on each depth when the law is fitted to the other depths (pooled,
    weighted as in the fit).

    The held-out fits differ only in which points weigh zero, so they are solved together by the
    batched solver, each from the full-data estimate; a depth is skipped when the rest has fewer
    distinct configurations than the law has parameters."""
    law = res.law
    depths = np.sort(table["depth"].unique())
    if len(depths) < 3 or res.status not in ("ok", "not_identified") or not res.theta:
        return None
    logy = np.log(table["loss"].to_numpy(float))
    X = fitcore.make_X(law, **_cols(table))
    X.update(res.centres)
    w = np.ones(len(table)) if res.weights is None else np.asarray(res.weights)
    dep = table["depth"].to_numpy()
    cfg = table["depth"].astype(str) + ":" + table["width"].astype(str)
    keep = [d for d in depths if cfg[dep != d].nunique() > law.n_params]
    if not keep:
        return None
    W = np.stack([(dep != d) * w for d in keep])
    th, obj = fitcore.batched_lm(
        law, np.repeat(np.array(res.theta)[None, :], len(keep), axis=0), X, logy, W, iters=300, tol=1e-10
    )
    logP, _ = law.evaluate(th, X, jac=False)
    err, wt = [], []
    for k, d in enumerate(keep):
        if np.all(np.isfinite(th[k])):
            m = dep == d
            err.append((logy - logP[k])[m])
            wt.append(w[m])
    if not err:
        return None
    err, wt = np.concatenate(err), np.concatenate(wt)
    return float(np.sqrt(np.sum(wt * err * err) / np.sum(wt)))


def _cols(table: pd.DataFrame) -> dict:
    cols = {
        "N": table["n_params"].to_numpy(float),
        "depth": table["depth"].to_numpy(float),
        "width": table["width"].to_numpy(float),
    }
    if "tokens" in table and table["tokens"].notna().all():
        cols["D"] = table["tokens"].to_numpy(float)
    return cols


def unfit_reason(law: Law, table: pd.DataFrame) -> str | None:
    """Why `law` cannot be fitted on the runs in `table` (too few depths or widths), or None."""
    n_depths, n_widths = table["depth"].nunique(), table["width"].nunique()
    if law.has_kappa and (n_depths < 3 or n_widths < 2):
        return (
            f"the threshold base needs at least 3 depths and 2 widths; "
            f"has {n_depths} depths and {n_widths} widths"
        )
    if law.has_kappa and table["width"].min() < 2:
        return f"kappa_b needs ln d > 0, but a run has width {table['width'].min():g}"
    if "width" in law.terms and (n_depths < 2 or n_widths < 2):
        return (
            f"a separable width-depth law needs at least 2 depths and 2 widths; has {n_depths} and {n_widths}"
        )
    return None


def _fit_one(name: str, law: Law, table: pd.DataFrame, weights, n_boot: int, seed: int) -> FitResult:
    if why := unfit_reason(law, table):
        return insufficient(name, law, why, len(table), len(table))
    key = table["depth"].astype(str) + ":" + table["width"].astype(str)
    if "D" in law.terms:
        key = key + ":" + table["tokens"].astype(str)
    return fit(
        law,
        name,
        np.log(table["loss"].to_numpy(float)),
        _cols(table),
        groups=table["run_id"].to_numpy(),
        n_boot=n_boot,
        seed=seed,
        distinct_of=key.to_numpy(),
        weights=weights,
        profile=law.has_kappa,
    )


def fit_regimes(
    runs: pd.DataFrame,
    n_boot: int = 200,
    seed: int = 0,
    points: pd.DataFrame | None = None,
    points_source: dict | None = None,
) -> dict:
    """Fit the candidate laws on `runs` (columns depth, width, n_params, loss, run_id), or, when
    `points` with varying tokens are given (analysis/laws/tokens.py), the laws with a data term on
    those weighted points.

    Returns {'models': {name: {params, ci, aic, bic, cv_error, status, ...}}, 'preferred': name,
    'fits': {name: FitResult}, 'data_terms': bool}. 'preferred' is the lowest BIC among the fits
    that converged, identified or not: a law whose parameter sits on a bound is still the best
    description of these data in its class, but quotes no estimate (its status says why)."""
    data_aware = points is not None and len(points) and points_source and points_source.get("kind")
    table = points if data_aware else runs
    weights = (
        points["weight"].to_numpy(float) if data_aware and points_source["kind"] == "checkpoints" else None
    )
    laws = DATA_MODELS if data_aware else MODELS
    models, fits = {}, {}
    for i, (name, law) in enumerate(laws.items()):
        if len(table) == 0:
            res = insufficient(name, law, "no runs to fit")
        else:
            res = _fit_one(name, law, table, weights, n_boot, seed + 101 * i)
        fits[name] = res
        entry = res.to_dict()
        entry.pop("residuals", None)
        if res.status not in (INSUFFICIENT, FAILED):
            aic, bic = information_criteria(res)
            r = np.asarray(res.residuals)
            w = np.ones(len(r)) if res.weights is None else np.asarray(res.weights)
            entry.update(
                aic=aic,
                bic=bic,
                cv_error=leave_one_depth_out(res, table),
                rms_log_error=float(np.sqrt(np.sum(w * r * r) / np.sum(w))),
            )
        else:
            entry.update(aic=None, bic=None, cv_error=None, rms_log_error=None)
        models[name] = entry
    ranked = {k: v for k, v in models.items() if v["bic"] is not None}
    preferred = min(ranked, key=lambda k: ranked[k]["bic"]) if ranked else None
    return {
        "models": models,
        "preferred": preferred,
        "criterion": "bic",
        "fits": fits,
        "data_terms": bool(data_aware),
        "points": points_source
        if data_aware
        else {"kind": "runs", "why": "final losses of the runs (one token budget)"},
    }
