"""Published layouts of loss data, recognised by their columns, and the non-embedding N.

Gemstones' JSON lines (McLeish et al. 2025: one line per checkpoint of each run, docs/science.md
§9), Epoch's extraction of Chinchilla's Figure 4 (Besiroglu et al. 2024: model size, training
FLOP, loss; tokens D = C/(6N), §8) and the project's own generic table. Each is turned into the
generic columns the analysis reads (trial_id, depth, width, n_params, tokens, step, loss), and
the parameter count used is stated with the reason, because published counts include embeddings
where Kaplan's N (§2) does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from depthwidth.accounting import kaplan_n_params

GEMSTONES_COLUMNS = ("run_name", "width", "depth", "tokens", "step", "final_loss")
EPOCH_COLUMNS = ("Model Size", "Training FLOP", "loss")
_EXACT = 1e-4  # a decomposition of total counts that misses no run by more than this is exact


@dataclass(frozen=True)
class Layout:
    name: str  # "gemstones" | "epoch" | "generic"
    table: pd.DataFrame  # in the generic columns
    notes: tuple = ()  # what was renamed or derived, for the report


def recognise(table: pd.DataFrame) -> Layout:
    """Which layout `table` is, by its columns (never by the file name), as generic columns."""
    cols = set(table.columns)
    if set(GEMSTONES_COLUMNS) <= cols:
        t = table.rename(
            columns={"run_name": "trial_id", "final_loss": "loss", "params_active_precise": "n_params_total"}
        )
        t["trial_id"] = t["trial_id"].astype(str)
        return Layout(
            "gemstones",
            t,
            (
                "Gemstones layout (McLeish et al. 2025): one line per checkpoint; run_name is the run, "
                "final_loss the loss at that checkpoint, tokens its training tokens",
            ),
        )
    if set(EPOCH_COLUMNS) <= cols:
        n = pd.to_numeric(table["Model Size"], errors="coerce")
        c = pd.to_numeric(table["Training FLOP"], errors="coerce")
        t = pd.DataFrame(
            {
                "n_params": table["Model Size"],
                "flops": table["Training FLOP"],
                "tokens": c / (6.0 * n),
                "loss": table["loss"],
            }
        )
        return Layout(
            "epoch",
            t,
            (
                "Epoch layout (Besiroglu et al. 2024's extraction of Hoffmann et al. 2022 Figure 4): "
                "N = Model Size, tokens D = Training FLOP / (6 N)",
            ),
        )
    return Layout("generic", table, ())


def per_width_count(depth: np.ndarray, width: np.ndarray, total: np.ndarray) -> dict | None:
    """The part of the total parameter count that does not grow with depth, per unit width.

    At a fixed width, total = L·q(d) + k(d): q the count of one layer, k what every model of that
    width has whatever its depth (token embeddings, read-out, final norm). k/d is read off every
    width measured at two or more depths; when it is the same number e for all of them (to 1e-4),
    the input's counts are exactly per-layer blocks plus e·d, and the non-embedding N is
    total − e·d. Returns {'per_width', 'widths_used', 'max_relative_miss'} or None."""
    df = pd.DataFrame(
        {"L": np.asarray(depth, float), "d": np.asarray(width, float), "P": np.asarray(total, float)}
    ).drop_duplicates()
    ks, miss = {}, 0.0
    for d, g in df.groupby("d"):
        if g["L"].nunique() < 2:
            continue
        A = np.c_[g["L"], np.ones(len(g))]
        (q, k), *_ = np.linalg.lstsq(A, g["P"].to_numpy(), rcond=None)
        miss = max(miss, float(np.max(np.abs(A @ [q, k] - g["P"]) / g["P"])))
        ks[float(d)] = k / d
    if not ks:
        return None
    e = float(np.median(list(ks.values())))
    spread = max(abs(v - e) for v in ks.values()) / max(e, 1.0)
    pred_ok = (df["P"] - e * df["d"] > 0).all()
    if max(miss, spread) > _EXACT or e <= 0 or not pred_ok:
        return None
    return {"per_width": e, "widths_used": sorted(ks), "max_relative_miss": max(miss, spread)}


def n_params_for(runs: pd.DataFrame, has_shape: bool) -> tuple[np.ndarray | None, dict]:
    """The N the fits use, and which one it is and why ({'used', 'why'}).

    A given n_params column is used as it is. Without one, with a shape: the total counts less
    their part that grows with width alone, when that part can be read off exactly
    (per_width_count), else Kaplan's 12·L·d² (docs/science.md §2). Without either, None."""
    if "n_params" in runs.columns:
        why = (
            "the input's n_params column, as given"
            if has_shape
            else "the input's parameter count, as given; the input has no depth and width, so no "
            "non-embedding count can be derived from the shape"
        )
        return None, {"used": "n_params", "why": why}
    if not has_shape:
        return None, {"used": None, "why": "the input has neither n_params nor depth and width"}
    L = runs["depth"].to_numpy(float)
    d = runs["width"].to_numpy(float)
    if "n_params_total" in runs.columns:
        total = runs["n_params_total"].to_numpy(float)
        parts = per_width_count(L, d, total)
        if parts is not None:
            e = parts["per_width"]
            used = ", ".join(f"{w:g}" for w in parts["widths_used"])
            why = (
                f"non-embedding N = total − {e:.6g}·d, derived from the shape: at every width "
                f"measured at two or more depths ({used}) the total count is a per-layer count "
                f"times depth plus {e:.6g}·d (to {parts['max_relative_miss']:.0e}), a part that "
                f"grows with width alone (token embeddings and read-out), which Kaplan's N "
                f"leaves out (docs/science.md §2); N keeps every per-layer parameter"
            )
            # parameter counts are whole numbers; the least-squares e carries rounding noise
            return np.round(total - e * d), {"used": "derived", "why": why, "decomposition": parts}
        why = (
            "Kaplan's N = 12·L·d² from the shape (docs/science.md §2): the total counts in the "
            "input do not decompose into per-layer and per-width parts, so the embeddings "
            "cannot be separated from them"
        )
        return kaplan_n_params(L, d), {"used": "kaplan_12Ld2", "why": why}
    return kaplan_n_params(L, d), {
        "used": "kaplan_12Ld2",
        "why": "Kaplan's non-embedding N = 12·L·d² from the shape "
        "(docs/science.md §2); the input gives no parameter count",
    }
