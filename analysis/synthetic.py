"""Synthetic sweeps with planted laws, for checking that the fits recover what was put in.

Losses follow Kaplan et al. 2020's shape-agnostic law or the two-regime law of docs/science.md §4
(threshold base b); learning curves add Kaplan's step term (S_c/S)^α_S. Noise is multiplicative
log-normal, like the ≈2% seed-to-seed spread Kaplan report.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.fitcore import log_kappa
from depthwidth.accounting import kaplan_n_params


def planted_loss(law: str, depth, width, p: dict) -> np.ndarray:
    """Noise-free loss of a (depth, width) grid under `law` ('kaplan', 'two_regime', 'combined')."""
    L = np.asarray(depth, float)
    d = np.asarray(width, float)
    N = kaplan_n_params(L, d)
    out = np.full(L.shape, p["E"], float)
    if law in ("kaplan", "combined"):
        out = out + p["A_N"] * N ** -p["alpha_N"]
    if law in ("two_regime", "combined"):
        lk, _ = log_kappa(L, np.log(d), np.log(p["b"]))
        out = out + p["A_kappa"] * np.exp(-p["alpha_kappa"] * lk)
    return out


def make_runs(law: str, depths, widths, params: dict, seeds=(0,), noise: float = 0.01,
              seed: int = 0) -> pd.DataFrame:
    """One row per (depth, width, seed) with the runs-store columns the analysis reads."""
    rng = np.random.default_rng(seed)
    D, W, S = (a.ravel() for a in np.meshgrid(depths, widths, seeds, indexing="ij"))
    clean = planted_loss(law, D, W, params)
    loss = clean * np.exp(rng.normal(0.0, noise, clean.shape))
    return pd.DataFrame({
        "trial_id": [f"t{i:05d}" for i in range(len(D))], "family": "transformer",
        "depth": D.astype(int), "width": W.astype(int), "heads": 1, "seed": S.astype(int),
        "n_params": kaplan_n_params(D, W.astype(float)), "loss": loss, "clean_loss": clean,
    })


def make_curves(runs: pd.DataFrame, alpha_S: float, S_c: float, steps=None, noise: float = 0.005,
                seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Learning curves L(S) = L_∞ + (S_c/S)^α_S with L_∞ each run's clean loss (Kaplan eq. 1.6).

    Returns (runs with final_val_loss = last point of the curve, long-format curves)."""
    rng = np.random.default_rng(seed)
    steps = np.unique(np.round(np.logspace(1, 4, 100)).astype(int)) if steps is None else np.asarray(steps)
    n = len(steps)
    base = runs["clean_loss"].to_numpy(float)[:, None] + (S_c / steps[None, :].astype(float)) ** alpha_S
    val = base * np.exp(rng.normal(0.0, noise, base.shape))
    curves = pd.DataFrame({
        "trial_id": np.repeat(runs["trial_id"].to_numpy(), n), "step": np.tile(steps, len(runs)),
        "tokens": np.tile(steps, len(runs)) * 4096, "flops": 0.0,
        "train_loss": val.ravel(), "val_loss": val.ravel(), "lr": 1e-3, "wall_s": 0.0,
    })
    out = runs.copy()
    out["final_val_loss"] = val[:, -1]
    out["final_train_loss"] = val[:, -1]
    out["steps"] = int(steps[-1])
    out["tokens"] = int(steps[-1]) * 4096
    return out, curves


def write_store(directory: str | Path, runs: pd.DataFrame, curves: pd.DataFrame | None = None) -> Path:
    """A results store as docs/design.md describes it: runs.parquet (+ curves.parquet)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    r = runs.copy()
    for k in ("final_val_loss", "final_train_loss"):
        r[k] = r[k].fillna(r["loss"]) if k in r else r["loss"]
    defaults = {"status": "ok", "n_params_total": r["n_params"] * 1.1, "flops_per_token": 2 * r["n_params"],
                "tokens": 0, "steps": 0, "wall_s": 0.0, "depthwidth_version": "synthetic",
                "torch_version": "none", "device": "none"}
    for k, v in defaults.items():
        r[k] = r[k].fillna(v) if k in r else v
    r.drop(columns=[c for c in ("loss", "clean_loss") if c in r]).to_parquet(d / "runs.parquet")
    if curves is not None:
        curves.to_parquet(d / "curves.parquet")
    return d


def lr_optimum(depth, width, drift: dict) -> np.ndarray:
    """Planted best learning rate lr*(L, d) = lr0 · (d/64)^width_exp · (L/4)^depth_exp."""
    return (drift["lr0"] * (np.asarray(width, float) / 64.0) ** drift["width_exp"]
            * (np.asarray(depth, float) / 4.0) ** drift["depth_exp"])


def make_tuned_runs(law: str, depths, widths, params: dict, lrs, drift: dict,
                    sharpness: float = 0.15, seeds=(0, 1), noise: float = 0.01,
                    seed: int = 0) -> pd.DataFrame:
    """A grid of depth x width x learning rate x seed whose best lr drifts with shape.

    log loss = log L_law(depth, width) + sharpness · (log10 lr − log10 lr*(depth, width))²
    + noise: at its own optimum every shape reaches the planted law, away from it the loss rises
    by `sharpness` (in log-loss per decade²). Columns as `make_runs`, plus lr and lr_opt."""
    rng = np.random.default_rng(seed)
    D, W, R, S = (a.ravel() for a in np.meshgrid(depths, widths, lrs, seeds, indexing="ij"))
    clean = planted_loss(law, D, W, params)
    opt = lr_optimum(D, W, drift)
    off = sharpness * (np.log10(R) - np.log10(opt)) ** 2
    loss = clean * np.exp(off + rng.normal(0.0, noise, clean.shape))
    return pd.DataFrame({
        "trial_id": [f"t{i:05d}" for i in range(len(D))], "family": "transformer",
        "depth": D.astype(int), "width": W.astype(int), "heads": 1, "seed": S.astype(int),
        "lr": R.astype(float), "lr_opt": opt, "n_params": 12.0 * D * W.astype(float) ** 2,
        "loss": loss, "clean_loss": clean,
    })
