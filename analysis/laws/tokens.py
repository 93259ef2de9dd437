"""Which (N, D, loss) points the data-aware laws fit, and how they are weighted.

A law with a data term B·D^−β (Hoffmann et al. 2022 Approach 3, docs/science.md §8; the data terms
of the shape-aware laws, §4 and §9) needs the training tokens D to vary. They vary across runs
trained to different budgets (then each run's final loss is one point), or along each run's
learning curve (then its checkpoints are the points). Checkpoints are thinned and weighted so that
every run counts once, however long it trained or however often it was evaluated.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MIN_TOKEN_FRACTION = 0.1  # checkpoints from 10% of a run's tokens on: past warmup and the transient
PER_RUN = 12  # at most this many checkpoints per run, log-spaced in tokens
MAX_POINTS = 3000  # fewer per run when there are many runs (at least 3 each)
MIN_DISTINCT_D = 3

COLUMNS = ["run_id", "trial_id", "n_params", "tokens", "loss", "weight", "depth", "width"]


def _final_points(runs: pd.DataFrame) -> pd.DataFrame:
    p = runs.assign(weight=1.0)
    for c in ("depth", "width"):
        if c not in p:
            p[c] = np.nan
    return p[COLUMNS].reset_index(drop=True)


def _thin(g: pd.DataFrame, per_run: int) -> pd.DataFrame:
    g = g.sort_values("tokens")
    if len(g) <= per_run:
        return g
    lt = np.log(g["tokens"].to_numpy(float))
    targets = np.linspace(lt[0], lt[-1], per_run)
    return g.iloc[np.unique(np.abs(lt[None, :] - targets[:, None]).argmin(axis=1))]


def checkpoint_points(
    runs: pd.DataFrame,
    curves: pd.DataFrame,
    per_run: int | None = None,
    min_fraction: float = MIN_TOKEN_FRACTION,
) -> pd.DataFrame:
    """Each run's checkpoints from `min_fraction` of its last token count on, at most `per_run`
    of them log-spaced in tokens (each decade of training weighs alike), each weighted 1/k for
    the k kept, so that every run carries a total weight of one. By default `per_run` is
    PER_RUN, fewer (but at least 3) when that would make more than MAX_POINTS points."""
    c = curves[np.isfinite(curves["tokens"].astype(float)) & (curves["tokens"].astype(float) > 0)]
    if per_run is None:
        per_run = max(3, min(PER_RUN, MAX_POINTS // max(1, c["run_id"].nunique())))
    out = []
    for _, g in c.groupby("run_id", sort=True):
        g = g[g["tokens"].astype(float) >= min_fraction * float(g["tokens"].max())]
        g = _thin(g, per_run)
        out.append(g.assign(weight=1.0 / len(g)))
    if not out:
        return pd.DataFrame(columns=COLUMNS)
    pts = pd.concat(out, ignore_index=True)
    pts["tokens"] = pts["tokens"].astype(float)
    shape = [c for c in ("depth", "width") if c in runs.columns]
    pts = pts.merge(runs[["run_id"] + shape], on="run_id", how="left")
    for col in ("depth", "width"):
        if col not in pts:
            pts[col] = np.nan
    return pts[COLUMNS].reset_index(drop=True)


def token_points(runs: pd.DataFrame, curves: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The points for the data-aware laws and a description: {'kind', 'why', 'weighting',
    'n_runs', 'n_points', 'n_tokens'}; kind is 'final', 'checkpoints' or None (D is constant)."""
    tok = runs["tokens"] if "tokens" in runs else pd.Series(np.nan, index=runs.index)
    n_final = int(tok.dropna().nunique())
    if len(runs) and tok.notna().all() and n_final >= MIN_DISTINCT_D:
        pts = _final_points(runs)
        return pts, {
            "kind": "final",
            "n_runs": int(len(runs)),
            "n_points": int(len(pts)),
            "n_tokens": n_final,
            "weighting": "each run's final loss is one point",
            "why": f"the runs were trained to {n_final} different token budgets, so each "
            f"run's final loss is one (N, D, loss) point",
        }
    has_tokens = len(curves) and "tokens" in curves and curves["tokens"].notna().any()
    if has_tokens:
        pts = checkpoint_points(runs, curves)
        n_tok = int(pts["tokens"].nunique())
        if n_tok >= MIN_DISTINCT_D:
            why = (
                f"the runs share {'one token budget' if n_final <= 1 else f'{n_final} budgets'}, "
                f"so D varies along the learning curves: each run's checkpoints from "
                f"{MIN_TOKEN_FRACTION:.0%} of its tokens on are the points. A checkpoint part "
                f"way through a run whose learning rate decays to its end is not a run trained "
                f"to that many tokens (Hoffmann et al. 2022): the data term then also carries "
                f"the schedule"
            )
            return pts, {
                "kind": "checkpoints",
                "n_runs": int(pts["run_id"].nunique()),
                "n_points": int(len(pts)),
                "n_tokens": n_tok,
                "weighting": f"at most {int(pts.groupby('run_id').size().max())} "
                f"checkpoints per run, log-spaced in "
                f"tokens, each weighted 1/k for the k kept, so every run "
                f"counts once; the bootstrap resamples whole runs",
                "why": why,
            }
    why = (
        "the training tokens are not recorded"
        if tok.isna().all() and not has_tokens
        else f"D takes fewer than {MIN_DISTINCT_D} distinct values (one token budget and no "
        f"learning curves with tokens), so a data term B·D^-beta cannot be told from the floor E"
    )
    return pd.DataFrame(columns=COLUMNS), {
        "kind": None,
        "n_runs": int(len(runs)),
        "n_points": 0,
        "n_tokens": n_final,
        "weighting": None,
        "why": why,
    }
