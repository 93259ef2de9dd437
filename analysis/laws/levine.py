"""What Levine et al. 2020 predict for a design, and whether the runs agree.

Under L_th = log_b d (docs/science.md §1, b = 3 in theory) a run of depth L and width d is below
the threshold (depth-efficient: at equal N the deeper model should win) when L < L_th and above it
(depth and width trade evenly: at equal N the loss should not depend on shape, as Kaplan et al.
2020 Figure 5 found) when L > L_th. This module counts the runs in each regime under b = 3 and
the fitted b, tests both predictions on pairs of runs of nearly equal N, and says which design
would identify b when these runs do not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.fitting.powerlaw import fit_power_law
from analysis.laws.kaplan import shape_sensitivity
from depthwidth.published import KAPLAN_2020, THEORY_BASE

PAIR_DECADES = 0.1  # runs whose N differ by at most 10^0.1 (26%) count as nearly equal N
PARITY = KAPLAN_2020["shape"]["max_loss_increase"]  # 3%: Kaplan's "little effect" of shape
MIN_PAIRS = 3


def regime_counts(runs: pd.DataFrame, b: float) -> dict:
    """Runs (and distinct shapes) below, at and above L_th = log_b d."""
    L = runs["depth"].to_numpy(float)
    lth = np.log(runs["width"].to_numpy(float)) / np.log(b)
    side = np.where(np.isclose(L, lth, rtol=0, atol=1e-9), "at", np.where(L < lth, "below", "above"))
    cfg = runs.assign(_side=side).drop_duplicates(["depth", "width"])
    return {
        "b": float(b),
        **{k: int(np.sum(side == k)) for k in ("below", "at", "above")},
        "shapes": {k: int(np.sum(cfg["_side"] == k)) for k in ("below", "at", "above")},
    }


def _pairs(cfg: pd.DataFrame) -> pd.DataFrame:
    """Pairs of shapes of different depth whose N lie within PAIR_DECADES of each other, with
    the difference in trend-corrected log-loss (deeper minus shallower)."""
    rows = []
    c = cfg.to_dict("records")
    for i in range(len(c)):
        for j in range(i + 1, len(c)):
            a, b = c[i], c[j]
            if a["depth"] == b["depth"] or abs(np.log10(a["n_params"] / b["n_params"])) > PAIR_DECADES:
                continue
            deep, shallow = (a, b) if a["depth"] > b["depth"] else (b, a)
            rows.append(
                {
                    "deeper": [int(deep["depth"]), float(deep["width"])],
                    "shallower": [int(shallow["depth"]), float(shallow["width"])],
                    "diff": float(deep["rel"] - shallow["rel"]),
                }
            )
    return pd.DataFrame(rows, columns=["deeper", "shallower", "diff"])


def _test(pairs: pd.DataFrame, regime: str) -> dict:
    n = len(pairs)
    out = {
        "n_pairs": n,
        "median_abs_diff": None,
        "max_abs_diff": None,
        "deeper_better_fraction": None,
        "agree": None,
    }
    if n < MIN_PAIRS:
        out["verdict"] = (
            f"{n} pair(s) of shapes {regime} the threshold at nearly equal N: too "
            f"few to test (needs {MIN_PAIRS})"
        )
        return out
    d = pairs["diff"].to_numpy(float)
    out.update(
        median_abs_diff=float(np.median(np.abs(d))),
        max_abs_diff=float(np.max(np.abs(d))),
        deeper_better_fraction=float(np.mean(d < 0)),
    )
    if regime == "above":
        out["agree"] = bool(out["median_abs_diff"] <= PARITY)
        out["verdict"] = (
            f"above the threshold the loss at nearly equal N differs by a median "
            f"{100 * out['median_abs_diff']:.1f}% between shapes (max "
            f"{100 * out['max_abs_diff']:.1f}%, {n} pairs), "
            + ("within" if out["agree"] else "beyond")
            + f" the {100 * PARITY:.0f}% Kaplan et al. call little effect: "
            + ("consistent with parity" if out["agree"] else "shape still matters here")
        )
    else:
        out["agree"] = bool(out["deeper_better_fraction"] > 0.5)
        out["verdict"] = (
            f"below the threshold the deeper shape has the lower loss at nearly equal "
            f"N in {100 * out['deeper_better_fraction']:.0f}% of {n} pairs "
            + (
                "(depth pays, as predicted)"
                if out["agree"]
                else "(depth does not pay here, against the prediction)"
            )
        )
    return out


def accounting(runs: pd.DataFrame, fitted_b: float | None, b_status: str) -> dict:
    """Counts under b = 3 and the fitted b, Levine et al.'s prediction for this design, and
    whether the runs agree (descriptive: no interval; seeds are averaged per shape first)."""
    if runs.empty:
        return {"status": "insufficient_data", "reason": "no runs"}
    cfg = runs.groupby(["depth", "width"], as_index=False).agg(
        n_params=("n_params", "mean"), loss=("loss", "mean")
    )
    trend = fit_power_law(cfg["n_params"], cfg["loss"], name="L(N) for the regime tests", n_boot=0)
    ref = trend.predict(N=cfg["n_params"].to_numpy(float)) if trend.ok else np.ones(len(cfg))
    cfg["rel"] = np.log(cfg["loss"].to_numpy(float) / ref)
    lth = np.log(cfg["width"]) / np.log(THEORY_BASE)
    counts3 = regime_counts(runs, THEORY_BASE)
    tests = {}
    for regime, mask in (("below", cfg["depth"] < lth), ("above", cfg["depth"] > lth)):
        pairs = _pairs(cfg[mask.to_numpy()])
        tests[regime] = _test(pairs, regime)
    above = runs[runs["depth"] > np.log(runs["width"]) / np.log(THEORY_BASE)]
    shape = (
        shape_sensitivity(above, trend if trend.ok else None)
        if len(above)
        else {"status": "insufficient_data", "reason": "no runs above the threshold", "bands": []}
    )
    tests["above"]["shape_sensitivity"] = {
        k: shape.get(k) for k in ("status", "reason", "max_loss_increase", "aspect_ratio_range")
    } | {"n_bands": len(shape["bands"])}
    n = counts3["below"] + counts3["at"] + counts3["above"]
    prediction = (
        f"Levine et al. 2020 (b = 3): {counts3['below']} of {n} runs lie below L_th = "
        f"log_3 d, where at equal N the deeper model should win, and {counts3['above']} "
        f"above it, where depth and width should trade evenly (loss at equal N "
        f"independent of shape)"
    )
    if counts3["below"] == 0:
        prediction += "; the design tests only the saturating regime, not the transition"
    elif counts3["above"] == 0:
        prediction += "; the design tests only the depth-efficient regime, not the transition"
    fitted = (
        regime_counts(runs, fitted_b)
        if fitted_b is not None
        else {"b": None, "status": b_status, "reason": "no identified fitted b to count under"}
    )
    return {
        "status": "ok",
        "reason": "",
        "theory_b3": counts3,
        "fitted": fitted,
        "prediction": prediction,
        "tests": tests,
        "pair_decades": PAIR_DECADES,
        "parity_threshold": PARITY,
    }


def _round_width(w: float) -> int:
    step = 64 if w >= 256 else 8
    return int(max(step, step * round(w / step)))


def design_advice(runs: pd.DataFrame) -> dict:
    """How many widths each depth has, and a design that would identify b: three widths across
    the data's range, each at every depth from two below log_3 of the narrowest width to two
    above log_3 of the widest, so that every depth has three widths (the per-depth fits and
    crossovers) and every width has depths on both sides of its threshold (the κ-laws)."""
    per = runs.groupby("depth")["width"].apply(lambda s: sorted(float(w) for w in s.unique()))
    widths_per_depth = {int(d): ws for d, ws in per.items()}
    w_lo, w_hi = float(runs["width"].min()), float(runs["width"].max())
    if w_hi / w_lo < 4:
        w_lo, w_hi = w_lo, w_lo * 4
    widths = sorted({_round_width(w) for w in (w_lo, np.sqrt(w_lo * w_hi), w_hi)})
    lo = max(1, int(np.floor(np.log(widths[0]) / np.log(THEORY_BASE))) - 2)
    hi = int(np.ceil(np.log(widths[-1]) / np.log(THEORY_BASE))) + 2
    depths = list(range(lo, hi + 1))
    rich = [d for d, ws in widths_per_depth.items() if len(ws) >= 3]
    lth = [np.log(w) / np.log(THEORY_BASE) for w in widths]
    text = (
        f"widths {', '.join(map(str, widths))} each at depths {lo}–{hi} (a full grid: "
        f"log_3 d runs from {lth[0]:.2g} to {lth[-1]:.2g} at these widths, so every width has "
        f"depths on both sides of its threshold and every depth has {len(widths)} widths)"
    )
    return {
        "widths_per_depth": {str(k): v for k, v in widths_per_depth.items()},
        "depths_with_3_widths": rich,
        "n_depths": len(widths_per_depth),
        "suggested": {"widths": widths, "depths": depths},
        "text": text,
    }
