"""Synthetic sweeps with planted laws, for checking that the fits recover what was put in.

Losses follow Kaplan et al. 2020's shape-agnostic law, the two-regime law of docs/science.md §4
(threshold base b), or the separable width-depth law of McLeish et al. 2025 (§9); with token
budgets they gain Hoffmann et al. 2022's data term B_D·D^−α_D (§8), and learning curves add
Kaplan's step term (S_c/S)^α_S. Noise is multiplicative log-normal, like the ≈2% seed-to-seed
spread Kaplan report.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.fitting.fitcore import log_kappa
from depthwidth.accounting import kaplan_n_params


def planted_loss(law: str, depth, width, p: dict, tokens=None) -> np.ndarray:
    """Noise-free loss of a (depth, width) grid under `law` ('kaplan', 'two_regime', 'combined',
    'width_depth'), plus B_D·D^−α_D when `tokens` are given and `p` has B_D."""
    L = np.asarray(depth, float)
    d = np.asarray(width, float)
    N = kaplan_n_params(L, d)
    out = np.full(L.shape, p["E"], float)
    if law in ("kaplan", "combined"):
        out = out + p["A_N"] * N ** -p["alpha_N"]
    if law in ("two_regime", "combined"):
        lk, _ = log_kappa(L, np.log(d), np.log(p["b"]))
        out = out + p["A_kappa"] * np.exp(-p["alpha_kappa"] * lk)
    if law == "width_depth":
        out = out + p["A_width"] * d ** -p["alpha_width"] + p["A_depth"] * L ** -p["alpha_depth"]
    if tokens is not None and "B_D" in p:
        out = out + p["B_D"] * np.asarray(tokens, float) ** -p["alpha_D"]
    return out


def _run_columns(D: np.ndarray, W: np.ndarray, S: np.ndarray) -> dict:
    """The columns that name each planted run: its trial id, family, shape and seed."""
    return {
        "trial_id": [f"t{i:05d}" for i in range(len(D))],
        "family": "transformer",
        "depth": D.astype(int),
        "width": W.astype(int),
        "heads": 1,
        "seed": S.astype(int),
    }


def make_runs(
    law: str,
    depths,
    widths,
    params: dict,
    seeds=(0,),
    noise: float = 0.01,
    seed: int = 0,
    tokens=None,
    shapes=None,
) -> pd.DataFrame:
    """One row per (depth, width, seed[, token budget]) with the runs-store columns the analysis
    reads; `shapes` (a list of (depth, width)) replaces the full depths × widths grid."""
    rng = np.random.default_rng(seed)
    if shapes is None:
        shapes = [(d, w) for d in depths for w in widths]
    budgets = [None] if tokens is None else list(tokens)
    rows = [(d, w, s, t) for d, w in shapes for s in seeds for t in budgets]
    D, W, S = (np.array([r[k] for r in rows]) for k in range(3))
    T = None if tokens is None else np.array([r[3] for r in rows], float)
    clean = planted_loss(law, D, W, params, T)
    loss = clean * np.exp(rng.normal(0.0, noise, clean.shape))
    out = pd.DataFrame(
        {
            **_run_columns(D, W, S),
            "n_params": kaplan_n_params(D, W.astype(float)),
            "loss": loss,
            "clean_loss": clean,
        }
    )
    if T is not None:
        out["tokens"] = T
    return out


def make_chinchilla(
    params: dict, n_sizes: int = 12, n_budgets: int = 8, noise: float = 0.01, seed: int = 0
) -> pd.DataFrame:
    """Points of L(N, D) = E + A/N^alpha + B/D^beta (Hoffmann et al. 2022) on a grid of sizes
    1e7–1e10 and token budgets 1e9–1e12, as a generic n_params,tokens,loss table."""
    rng = np.random.default_rng(seed)
    N, D = (a.ravel() for a in np.meshgrid(np.logspace(7, 10, n_sizes), np.logspace(9, 12, n_budgets)))
    clean = params["E"] + params["A"] * N ** -params["alpha"] + params["B"] * D ** -params["beta"]
    return pd.DataFrame(
        {"n_params": N, "tokens": D, "loss": clean * np.exp(rng.normal(0.0, noise, clean.shape))}
    )


def make_curves(
    runs: pd.DataFrame, alpha_S: float, S_c: float, steps=None, noise: float = 0.005, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Learning curves L(S) = L_∞ + (S_c/S)^α_S with L_∞ each run's clean loss (Kaplan eq. 1.6).

    Returns (runs with final_val_loss = last point of the curve, long-format curves)."""
    rng = np.random.default_rng(seed)
    steps = np.unique(np.round(np.logspace(1, 4, 100)).astype(int)) if steps is None else np.asarray(steps)
    n = len(steps)
    base = runs["clean_loss"].to_numpy(float)[:, None] + (S_c / steps[None, :].astype(float)) ** alpha_S
    val = base * np.exp(rng.normal(0.0, noise, base.shape))
    curves = pd.DataFrame(
        {
            "trial_id": np.repeat(runs["trial_id"].to_numpy(), n),
            "step": np.tile(steps, len(runs)),
            "tokens": np.tile(steps, len(runs)) * 4096,
            "flops": 0.0,
            "train_loss": val.ravel(),
            "val_loss": val.ravel(),
            "lr": 1e-3,
            "wall_s": 0.0,
        }
    )
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
    defaults = {
        "status": "ok",
        "n_params_total": r["n_params"] * 1.1,
        "flops_per_token": 2 * r["n_params"],
        "tokens": 0,
        "steps": 0,
        "wall_s": 0.0,
        "depthwidth_version": "synthetic",
        "torch_version": "none",
        "device": "none",
    }
    for k, v in defaults.items():
        r[k] = r[k].fillna(v) if k in r else v
    r.drop(columns=[c for c in ("loss", "clean_loss") if c in r]).to_parquet(d / "runs.parquet")
    if curves is not None:
        curves.to_parquet(d / "curves.parquet")
    return d


def lr_optimum(depth, width, drift: dict) -> np.ndarray:
    """Planted best learning rate lr*(L, d) = lr0 · (d/64)^width_exp · (L/4)^depth_exp."""
    return (
        drift["lr0"]
        * (np.asarray(width, float) / 64.0) ** drift["width_exp"]
        * (np.asarray(depth, float) / 4.0) ** drift["depth_exp"]
    )


def make_tuned_runs(
    law: str,
    depths,
    widths,
    params: dict,
    lrs,
    drift: dict,
    sharpness: float = 0.15,
    seeds=(0, 1),
    noise: float = 0.01,
    seed: int = 0,
) -> pd.DataFrame:
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
    return pd.DataFrame(
        {
            **_run_columns(D, W, S),
            "lr": R.astype(float),
            "lr_opt": opt,
            "n_params": 12.0 * D * W.astype(float) ** 2,
            "loss": loss,
            "clean_loss": clean,
        }
    )


def write_gemstones_lines(
    path: str | Path,
    shapes=((2, 64), (4, 64), (3, 128), (6, 128), (5, 256)),
    vocab: int = 1000,
    steps=(100, 200, 400),
) -> Path:
    """Checkpoint lines in Gemstones' own JSON-lines layout (docs/science.md §9), with total
    counts built as Gemma-style blocks (15·d² + 2·d per layer) plus an untied embedding and
    read-out ((2·vocab + 1)·d), and losses falling with checkpoint and depth."""
    import json

    lines = []
    for L, d in shapes:
        total = L * (15 * d * d + 2 * d) + (2 * vocab + 1) * d
        for k, step in enumerate(steps):
            lines.append(
                {
                    "run_name": f"Gem-{d}x{L}",
                    "params_active_precise": total,
                    "width": d,
                    "depth": L,
                    "tokens": step * 4096,
                    "step": step,
                    "num_nodes": 1,
                    "seconds_per_step": 0.5,
                    "final_loss": 4.0 / (1 + k) ** 0.1 - 0.01 * L - 0.1 * np.log(d / 64),
                }
            )
    p = Path(path)
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p
