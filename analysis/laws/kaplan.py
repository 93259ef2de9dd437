"""Kaplan et al. 2020 and Levine et al. 2020 published constants, and our runs set beside them.

Constants are data with their sources (depthwidth/published.py; docs/science.md §1–2). The comparison puts our α_N, α_S, shape
sensitivity (Kaplan Figure 5) and depth collapse (Figure 6) next to Kaplan's, lists Levine's
predicted departure points for Figure 6's depths, and fits digitized published curves (a CSV of
N,tokens,loss or the JSON layout of a Figure 2 digitization) with the same code as our runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.fitting.powerlaw import FitResult, fit_learning_curves, fit_power_law
from analysis.readers.inputs import InputError
from depthwidth.accounting import kaplan_n_params
from depthwidth.clitools import reason
from depthwidth.published import KAPLAN_2020, LEVINE_2020


def levine_departures(depths=LEVINE_2020["kaplan_fig6_depths"]) -> list[dict]:
    """Where Levine's theory puts each Figure 6 depth's departure (d_x = 3^L, N = 12·L·d_x²)
    and the empirical optimal width d_x*(L) with its N_opt (docs/science.md §1)."""
    emp = LEVINE_2020["empirical_width"]
    out = []
    for L in depths:
        d_th = 3.0**L
        d_emp = float(np.exp(emp["a"] + emp["beta"] * L))
        out.append(
            {
                "depth": L,
                "width_theory": d_th,
                "n_params_theory": kaplan_n_params(L, d_th),
                "width_empirical": d_emp,
                "n_params_empirical": kaplan_n_params(L, d_emp),
            }
        )
    return out


def _relative_to(runs: pd.DataFrame, ref: FitResult | None) -> np.ndarray:
    """Loss over the shape-agnostic prediction at the run's N (1 = on the trend)."""
    y = runs["loss"].to_numpy(float)
    if ref is None or not ref.ok:
        return y
    return y / ref.predict(N=runs["n_params"].to_numpy(float))


def shape_sensitivity(runs: pd.DataFrame, ref: FitResult | None, band_decades: float = 0.2) -> dict:
    """Kaplan Figure 5: within bands of nearly equal N, the loss increase of each shape over the
    band's best, after dividing out the shape-agnostic trend so the small spread of N inside a
    band does not count as a shape effect. Needs a band with at least 3 aspect ratios."""
    cfg = runs.groupby(["depth", "width"], as_index=False).agg(
        n_params=("n_params", "mean"), loss=("loss", "mean")
    )
    if cfg.empty:
        return {"status": "insufficient_data", "reason": "no runs", "bands": []}
    cfg["rel"] = _relative_to(cfg, ref)
    cfg["aspect_ratio"] = cfg["width"] / cfg["depth"]
    lg = np.log10(cfg["n_params"].to_numpy(float))
    cfg["band"] = np.floor((lg - lg.min()) / band_decades).astype(int)
    bands = []
    for _band, g in cfg.groupby("band"):
        if g["aspect_ratio"].nunique() < 3:
            continue
        inc = g["rel"] / g["rel"].min() - 1.0
        bands.append(
            {
                "n_params": float(np.exp(np.log(g["n_params"]).mean())),
                "aspect_ratio": g["aspect_ratio"].tolist(),
                "loss_increase": inc.tolist(),
                "depth": g["depth"].tolist(),
                "width": g["width"].tolist(),
                "aspect_ratio_range": float(g["aspect_ratio"].max() / g["aspect_ratio"].min()),
                "max_loss_increase": float(inc.max()),
            }
        )
    if not bands:
        return {
            "status": "insufficient_data",
            "bands": [],
            "reason": f"no band of {band_decades} decades in N holds 3 or more aspect ratios",
        }
    widest = max(bands, key=lambda b: b["aspect_ratio_range"])
    return {
        "status": "ok",
        "reason": "",
        "bands": bands,
        "band_decades": band_decades,
        "max_loss_increase": max(b["max_loss_increase"] for b in bands),
        "aspect_ratio_range": widest["aspect_ratio_range"],
        "max_loss_increase_widest_band": widest["max_loss_increase"],
    }


def depth_collapse(runs: pd.DataFrame, envelope: FitResult | None) -> dict:
    """Kaplan Figure 6: how far each depth's runs sit above the deep envelope's fitted trend."""
    if envelope is None or not envelope.ok:
        return {
            "status": "insufficient_data",
            "reason": "the deep envelope could not be fitted",
            "depths": [],
        }
    out = []
    for d, g in runs.groupby("depth"):
        dev = _relative_to(g, envelope) - 1.0
        out.append(
            {
                "depth": int(d),
                "median_deviation": float(np.median(dev)),
                "max_deviation": float(np.max(dev)),
                "n_runs": int(len(g)),
            }
        )
    return {"status": "ok", "reason": "", "depths": out}


def compare(runs: pd.DataFrame, fits: dict, n_boot: int = 200, seed: int = 0) -> dict:
    """Our exponents, shape sensitivity and depth collapse beside Kaplan's published values.

    `fits` holds 'envelope' (E + A·N^−α on the deep envelope), 'learning_curves' (L(N,S)) and
    'kaplan' (the shape-agnostic law on all runs). α_N is refitted in Kaplan's own pure form
    (N_c/N)^α_N on the envelope runs so the exponents mean the same thing."""
    env_runs = fits.get("envelope_runs")
    alpha_n = None
    if env_runs is not None and env_runs["n_params"].nunique() >= 3:
        pure = fit_power_law(
            env_runs["n_params"],
            env_runs["loss"],
            name="L(N) pure, envelope",
            groups=env_runs["run_id"].to_numpy(),
            n_boot=n_boot,
            seed=seed,
            irreducible=False,
        )
        alpha_n = pure.to_dict()
    lc = fits.get("learning_curves")
    alpha_s = None
    if lc is not None and lc.ok:
        alpha_s = {"value": lc.params["alpha_S"], "ci": lc.ci.get("alpha_S"), "S_c": lc.params["S_c"]}
    ours = {
        "alpha_N": None
        if alpha_n is None or alpha_n["status"] != "ok"
        else {
            "value": alpha_n["params"]["alpha_N"],
            "ci": alpha_n["ci"].get("alpha_N"),
            "N_c": alpha_n["params"]["N_c"],
            "fit": alpha_n,
        },
        "alpha_S": alpha_s,
        "shape": shape_sensitivity(runs, fits.get("kaplan")),
        "depth_collapse": depth_collapse(runs, fits.get("envelope")),
    }
    return {"ours": ours, **published_block()}


def published_block() -> dict:
    """Kaplan's and Levine's published values and the note on comparing them."""
    return {
        "kaplan2020": KAPLAN_2020,
        "levine2020": LEVINE_2020,
        "levine_departures": levine_departures(),
        "note": "scale constants (N_c, S_c) depend on tokenizer and vocabulary: compare "
        "exponents and shapes, not absolute losses (docs/science.md §2)",
    }


def load_digitized(path: str | Path) -> pd.DataFrame:
    """Digitized curves as long format trial_id, n_params, tokens, loss: a CSV with columns
    N,tokens,loss, or the JSON layout {'curves': {'tokens': [{'n', 'x', 'loss'}, ...]}}."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"digitized file '{p}' does not exist.")
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(p.read_text())
            curves = doc["curves"]["tokens"]
            rows = [
                (str(i), float(c["n"]), float(x), float(loss))
                for i, c in enumerate(curves)
                for x, loss in zip(c["x"], c["loss"])
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                f"{p.name}: expected {{'curves': {{'tokens': [{{'n', 'x', 'loss'}}]}}}} "
                f"({type(exc).__name__}: {exc})."
            ) from None
        df = pd.DataFrame(rows, columns=["trial_id", "n_params", "tokens", "loss"])
    else:
        try:
            raw = pd.read_csv(p)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise InputError(f"{p.name}: cannot be read as CSV ({reason(exc)}).") from None
        for c in ("N", "tokens", "loss"):
            if c not in raw.columns:
                raise InputError(
                    f"{p.name}: missing required column '{c}' (columns present: {', '.join(raw.columns)})."
                )
        df = raw.rename(columns={"N": "n_params"})
        df["trial_id"] = df.groupby("n_params").ngroup().astype(str)
    if df.empty:
        raise InputError(f"{p.name}: holds no curve points (the file has no rows).")
    vals = df[["n_params", "tokens", "loss"]].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    bad = ~np.isfinite(vals) | (vals <= 0)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InputError(
            f"{p.name}: column '{['N', 'tokens', 'loss'][c]}' row {r + 1} is "
            f"{float(vals[r, c])!r}; it must be a finite positive number."
        )
    return df


def fit_digitized(
    df: pd.DataFrame,
    n_boot: int = 200,
    seed: int = 0,
    batch_tokens: float = KAPLAN_2020["setup"]["batch_tokens"],
) -> dict:
    """Fit digitized curves with the same code as our runs: L(N,S) with S = tokens / Kaplan's
    batch (2^19 tokens), and Kaplan's pure L(N) on each curve's last point."""
    curves = df.assign(step=df["tokens"] / batch_tokens)
    lc, _ = fit_learning_curves(curves, n_boot=n_boot, seed=seed)
    last = curves.sort_values("tokens").groupby("trial_id").tail(1)
    pl = fit_power_law(
        last["n_params"],
        last["loss"],
        name="L(N) pure, final losses",
        n_boot=n_boot,
        seed=seed,
        irreducible=False,
    )
    return {
        "n_curves": int(df["trial_id"].nunique()),
        "n_points": int(len(df)),
        "learning_curves": lc.to_dict(),
        "power_law": pl.to_dict(),
        "alpha_N": pl.params.get("alpha_N"),
        "alpha_S": lc.params.get("alpha_S"),
        "S_c_steps": lc.params.get("S_c"),
    }
