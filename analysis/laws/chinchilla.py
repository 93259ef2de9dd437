"""Chinchilla's L(N, D) = E + A/N^α + B/D^β and its compute-optimal allocation.

Hoffmann et al. 2022, Approach 3 (arXiv:2203.15556), fitted as Besiroglu et al. 2024 replicated it
(arXiv:2404.10102): log-space summed Huber (δ = 1e-3) from a grid of starts, bootstrap over runs,
on the shared engine of analysis/fitting/fitcore.py (docs/science.md §3, §8). Their published constants
(depthwidth/published.py) are set beside ours. Compute is C = 6·N·D, as in both papers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.fitting.fitcore import Law
from analysis.fitting.powerlaw import OK, FitResult, fit, insufficient, json_safe, named_params
from depthwidth.published import BESIROGLU_2024, HOFFMANN_2022

LAW = Law("chinchilla", ("N", "D"))
_NAMES = {"E": "E", "A_N": "A", "A_D": "B", "alpha_N": "alpha", "alpha_D": "beta"}
ALLOCATION_POINTS = 30


def compute_optimal(E, A, B, alpha, beta, C):
    """N*(C) = G·(C/6)^a, D*(C) = G^−1·(C/6)^b with a = β/(α+β), b = α/(α+β),
    G = (αA/(βB))^(1/(α+β)) (Hoffmann et al. 2022 eq. 4; docs/science.md §8). Broadcasts over
    parameter arrays (draws) against C."""
    alpha, beta, A, B = (np.asarray(v, float) for v in (alpha, beta, A, B))
    # an extreme bootstrap draw may put N* at 0 or inf: its D* is then inf or 0, a value the
    # percentile intervals count as it is, not a fault to warn about
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        a, b = beta / (alpha + beta), alpha / (alpha + beta)
        G = (alpha * A / (beta * B)) ** (1.0 / (alpha + beta))
        c6 = np.asarray(C, float) / 6.0
        n_star = G[..., None] * c6 ** a[..., None] if np.ndim(G) else G * c6**a
        d_star = c6 / n_star
    return {"a": a, "b": b, "G": G, "N": n_star, "D": d_star}


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num/den per draw, inf or nan where an extreme draw overflows (counted, not warned)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return num / den


def published() -> dict:
    """Hoffmann's and Besiroglu's constants with the allocation exponents they imply."""
    out = {}
    for key, src in (("hoffmann2022", HOFFMANN_2022), ("besiroglu2024", BESIROGLU_2024)):
        p = src["params"]
        co = compute_optimal(**p, C=1.0)
        out[key] = {
            "source": src["source"],
            "params": dict(p),
            "se": src.get("se"),
            "method": src.get("method"),
            "compute_optimal": {"a": float(co["a"]), "b": float(co["b"]), "G": float(co["G"])},
        }
    return out


def _rename(d: dict) -> dict:
    return {_NAMES[k]: v for k, v in d.items() if k in _NAMES}


def fit_chinchilla(points: pd.DataFrame, source: dict, n_boot: int = 200, seed: int = 0) -> dict:
    """The `chinchilla` section of report.json: status, params {E, A, B, alpha, beta}, ci, se,
    compute_optimal {a, b, G, tokens_per_param, ...} with intervals, and the published constants."""
    out = {
        "law": "L = E + A/N^alpha + B/D^beta",
        "points": source,
        "published": published(),
        "compute": "C = 6 N D (Hoffmann et al. 2022)",
    }
    if source.get("kind") is None:
        res = insufficient("L(N,D)", LAW, f"no data term can be fitted: {source['why']}")
        return {**out, **_entry(res)}
    N = points["n_params"].to_numpy(float)
    D = points["tokens"].to_numpy(float)
    if len(np.unique(N)) < 3:
        res = insufficient(
            "L(N,D)",
            LAW,
            f"needs at least 3 model sizes, has {len(np.unique(N))}",
            len(points),
            points["run_id"].nunique(),
        )
        return {**out, **_entry(res)}
    weights = points["weight"].to_numpy(float) if source["kind"] == "checkpoints" else None
    res = fit(
        LAW,
        "L(N,D)",
        np.log(points["loss"].to_numpy(float)),
        {"N": N, "D": D},
        groups=points["run_id"].to_numpy(),
        n_boot=n_boot,
        seed=seed,
        distinct_of=np.char.add(N.astype(str), D.astype(str)),
        weights=weights,
        floor_fallback=False,
    )
    entry = {**out, **_entry(res)}
    if res.status == OK:
        entry["compute_optimal"] = _allocation(res, float(np.max(6 * N * D)), float(np.min(6 * N * D)))
        entry["besiroglu_se_distance"] = {
            k: (entry["params"][k] - v) / BESIROGLU_2024["se"][k] for k, v in BESIROGLU_2024["params"].items()
        }
    return json_safe(entry)


def _entry(res: FitResult) -> dict:
    e = {
        "status": res.status,
        "reason": res.reason,
        "params": _rename(res.params),
        "ci": {k: list(v) for k, v in _rename(res.ci).items()},
        "se": {},
        "n_points": res.n_points,
        "n_runs": res.n_groups,
        "n_boot": res.n_boot,
        "bootstrap_method": res.bootstrap_method,
        "converged": res.converged,
        "not_identified": _rename(res.not_identified),
        "compute_optimal": None,
        "fit": {k: v for k, v in res.to_dict().items() if k != "residuals"},
    }
    if res.status == OK and res.boot_theta is not None and len(res.boot_theta) >= 10:
        draws = _rename(named_params(res.law, res.boot_theta, res.centres))
        e["se"] = {k: float(np.std(v, ddof=1)) for k, v in draws.items()}
    return e


def _allocation(res: FitResult, c_max: float, c_min: float) -> dict:
    """a, b, G and tokens per parameter at the largest compute in the data, with 95% bootstrap
    intervals, and N*(C), D*(C) on a grid from the data's smallest compute to 100× its largest."""
    p = _rename(res.params)
    grid = np.logspace(np.log10(c_min), np.log10(c_max) + 2, ALLOCATION_POINTS)
    co = compute_optimal(p["E"], p["A"], p["B"], p["alpha"], p["beta"], np.r_[c_max, grid])
    out = {
        "a": float(co["a"]),
        "b": float(co["b"]),
        "G": float(co["G"]),
        "C_ref": c_max,
        "tokens_per_param": float(co["D"][0] / co["N"][0]),
        "ci": {},
        "allocation": {
            "C": grid.tolist(),
            "N": co["N"][1:].tolist(),
            "D": co["D"][1:].tolist(),
            "N_ci": None,
            "D_ci": None,
            "data_C_range": [c_min, c_max],
        },
    }
    if res.boot_theta is not None and len(res.boot_theta) >= 10:
        d = _rename(named_params(res.law, res.boot_theta, res.centres))
        cb = compute_optimal(d["E"], d["A"], d["B"], d["alpha"], d["beta"], np.r_[c_max, grid])
        q = lambda v: [float(x) for x in np.nanpercentile(v, [2.5, 97.5], axis=0).tolist()]
        out["ci"] = {
            "a": q(cb["a"]),
            "b": q(cb["b"]),
            "G": q(cb["G"]),
            "tokens_per_param": q(_ratio(cb["D"][:, 0], cb["N"][:, 0])),
        }
        nq = np.nanpercentile(cb["N"][:, 1:], [2.5, 97.5], axis=0)
        dq = np.nanpercentile(cb["D"][:, 1:], [2.5, 97.5], axis=0)
        out["allocation"].update(N_ci=nq.tolist(), D_ci=dq.tolist())
    for key, src in (("hoffmann2022", HOFFMANN_2022), ("besiroglu2024", BESIROGLU_2024)):
        pc = compute_optimal(**src["params"], C=np.r_[c_max, grid])
        out[key] = {"tokens_per_param": float(pc["D"][0] / pc["N"][0]), "N": pc["N"][1:].tolist()}
    return out
