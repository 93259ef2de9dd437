"""Tuning axes: every shape at its best setting before any law is fitted (docs/science.md §7).

Whether depth L+1 beats depth L at equal N is a few percent (Kaplan et al. 2020, Figure 5); a
learning rate that suits one shape and not another moves the loss by more (Porian et al. 2024).
So each shape (family, depth, width, and tokens where budgets differ) is represented by its best
setting of the swept axes that define neither the shape nor the data (lr, beta2, warmup,
batch size, weight decay, ...): the learning-rate envelope. To avoid the winner's curse the best
setting is chosen on half of the seeds and the loss reported on the others (Yang et al. 2021's
μTransfer plot, `lr_figure`, shows the choice). Pure functions of the runs table.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy.special import stdtrit

from analysis.readers.inputs import InputError
from depthwidth.config import TUNING_FIELDS

# Fields of TrainConfig / ModelConfig that tune a run without changing the model's shape or its
# data; any of them that takes several values within one shape is a tuning axis.
TRAIN_TUNABLE = TUNING_FIELDS["train"]
MODEL_TUNABLE = TUNING_FIELDS["model"]
SHAPE = ("family", "depth", "width")
RULES = ("auto", "split", "same")
# What each parametrization promises for lr*(width, depth) ∝ width^a · depth^g: 0 means the
# optimum transfers along that axis; None means no promise (docs/science.md §7).
PROMISES = {
    "standard": {"width": None, "depth": None},
    "mup": {"width": 0.0, "depth": None},
    "completep": {"width": 0.0, "depth": 0.0},
}


# Columns `--tune` may not name, with why: choosing the "best" of them per shape would compare
# different models, pick a replicate (the winner's curse the seed split exists to prevent), or
# select on the outcome itself.
NOT_AXES = {
    **dict.fromkeys(
        (
            "family",
            "depth",
            "width",
            "heads",
            "d_ff",
            "ffn_ratio",
            "vocab_size",
            "seq_len",
            "n_params",
            "n_params_total",
            "n_params_nonemb",
            "flops_per_token",
            "tokens",
            "steps",
            "step",
            "flops",
        ),
        "it defines the model or its training budget, which every fit compares, so "
        "it cannot be a setting chosen per shape",
    ),
    **dict.fromkeys(
        ("trial_id", "run_id", "run_name", "seed"),
        "it tells replicates apart, and picking the best one per shape brings back "
        "the winner's curse the seed split exists to prevent",
    ),
    **dict.fromkeys(
        (
            "status",
            "wall_s",
            "device",
            "depthwidth_version",
            "torch_version",
            "final_train_loss",
            "final_val_loss",
            "loss",
            "val_loss",
            "train_loss",
        ),
        "it is an outcome or a record of the run, not a setting of it",
    ),
}


def check_axis(col: str) -> None:
    """`col` can be a tuning axis: not a shape, budget, identity, seed or outcome column."""
    why = NOT_AXES.get(col) or (NOT_AXES["loss"] if "loss" in str(col).lower() else None)
    if why:
        raise TuningError(
            f"--tune {col!r} is invalid: {why}; name a training setting such as lr, beta2 or warmup_steps."
        )


class TuningError(InputError):
    """A `--tune` column the input lacks, or a selection rule it cannot follow (one sentence)."""


@dataclass(frozen=True)
class Selection:
    """The runs every fit uses and how they were chosen."""

    runs: pd.DataFrame  # the selected runs (the best setting of each shape)
    axes: tuple  # tuning axes found in the input
    rule: str  # "split", "same", "mixed" or "none"
    shape_cols: tuple  # the columns that define a shape
    settings: pd.DataFrame = field(default_factory=pd.DataFrame)  # shape x setting: losses
    best: pd.DataFrame = field(default_factory=pd.DataFrame)  # per shape: the chosen setting


def _config_field(runs: pd.DataFrame, column: str, name: str) -> pd.Series | None:
    if column not in runs.columns:
        return None

    def get(text):
        try:
            return json.loads(text).get(name) if isinstance(text, str) else None
        except ValueError:
            return None

    values = runs[column].map(get)
    return values if values.notna().all() else None


def with_config_fields(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with every tunable config field as a column, read from the stored resolved
    configs (train_config / model_config JSON) where the store has no column for it."""
    out = runs.copy()
    for column, names in (("train_config", TRAIN_TUNABLE), ("model_config", MODEL_TUNABLE)):
        for name in names:
            if name not in out.columns and (values := _config_field(out, column, name)) is not None:
                out[name] = values
    return out


def _varies_within(runs: pd.DataFrame, col: str, keys: list[str]) -> bool:
    if col not in runs.columns or runs[col].isna().any():
        return False
    return bool((runs.groupby(keys)[col].nunique() > 1).any())


def shape_columns(runs: pd.DataFrame, axes: tuple) -> tuple:
    """family, depth, width, plus tokens where budgets differ: where one setting of the tuning
    axes was trained for several token budgets (a budget tied to a tuning axis, such as batch
    size at a fixed step count, stays with that axis)."""
    keys = [c for c in SHAPE if c in runs.columns]
    if _varies_within(runs, "tokens", keys + list(axes)):
        keys.append("tokens")
    return tuple(keys)


def tuning_axes(runs: pd.DataFrame, extra: tuple = (), disabled: bool = False) -> tuple:
    """The tuning axes of a runs table: `extra` (named by the user, must exist) plus every
    tunable field that takes several values within one shape. `disabled`: none at all."""
    if disabled:
        return ()
    for c in extra:
        check_axis(c)
    missing = [c for c in extra if c not in runs.columns]
    if missing:
        have = ", ".join(map(str, runs.columns))
        raise TuningError(f"--tune {missing[0]!r} names no column of the runs (columns present: {have}).")
    for c in extra:
        if runs[c].isna().any():
            pos = int(np.flatnonzero(runs[c].isna().to_numpy())[0])
            raise TuningError(f"--tune {c!r}: row {pos + 1} has no value; every run needs one.")
    keys = [c for c in SHAPE if c in runs.columns]
    found = [c for c in TRAIN_TUNABLE + MODEL_TUNABLE if c not in extra and _varies_within(runs, c, keys)]
    return tuple(extra) + tuple(found)


def _rank_split(seeds: pd.Series) -> pd.Series:
    """True for the seeds that select (the first ⌊n/2⌋ by seed value), False for those reported."""
    order = seeds.rank(method="first").astype(int)
    return order <= len(seeds) // 2


def select(runs: pd.DataFrame, axes: tuple, rule: str = "auto") -> Selection:
    """Per shape, the setting of `axes` with the lowest seed-mean loss.

    rule "split": choose on the first half of the seeds of each setting, keep the other half for
    every fit (no winner's curse); "same": choose and report on all seeds (biased low by up to
    the seed noise among near-tied settings); "auto": split where every setting of a shape has
    at least 2 seeds, else same for that shape. With no axes, every run is kept (rule "none")."""
    if rule not in RULES:
        raise TuningError(f"--selection {rule!r} is invalid: expected one of {', '.join(RULES)}.")
    if not axes or runs.empty:
        return Selection(runs=runs, axes=tuple(axes), rule="none", shape_cols=shape_columns(runs, ()))
    shape = list(shape_columns(runs, axes))
    seed = runs["seed"] if "seed" in runs.columns else pd.Series(0, index=runs.index)
    r = runs.assign(_seed=seed.to_numpy())
    setting = shape + list(axes)
    n_seeds = r.groupby(setting)["_seed"].transform("nunique")
    min_per_shape = n_seeds.groupby([r[c] for c in shape]).transform("min")
    can_split = min_per_shape >= 2 if rule != "same" else pd.Series(False, index=r.index)
    if rule == "split" and not can_split.all():
        bad = r[~can_split].iloc[0]
        raise TuningError(
            "--selection 'split' needs at least 2 seeds at every setting; shape "
            + ", ".join(f"{c}={bad[c]}" for c in shape)
            + " has one."
        )
    r["_select"] = True
    idx = r.index[can_split]
    if len(idx):
        r.loc[idx, "_select"] = r.loc[idx].groupby(setting)["_seed"].transform(_rank_split).astype(bool)
    r["_report"] = ~r["_select"] | ~can_split
    r["_split"] = can_split
    sel_mean = r[r["_select"]].groupby(setting)["loss"].mean().rename("select_loss")
    all_stats = r.groupby(setting).agg(
        loss=("loss", "mean"),
        loss_min=("loss", "min"),
        loss_max=("loss", "max"),
        n_seeds=("_seed", "nunique"),
        split=("_split", "all"),
    )
    settings = all_stats.join(sel_mean).reset_index()
    best_rows = []
    for _, g in settings.groupby(shape, sort=True):
        g = g.sort_values("select_loss")
        b = g.iloc[0]
        row = {c: b[c] for c in shape}
        for a in axes:
            vals = sorted(g[a].unique())
            row[a] = b[a]
            row[f"{a}_at_edge"] = bool(len(vals) > 1 and b[a] in (vals[0], vals[-1]))
        row["at_edge"] = any(row[f"{a}_at_edge"] for a in axes)
        row["rule"] = "split" if b["split"] else "same"
        row["select_loss"] = float(b["select_loss"])
        row["runner_up_gap"] = float(g.iloc[1]["select_loss"] - b["select_loss"]) if len(g) > 1 else None
        row["n_settings"] = int(len(g))
        best_rows.append(row)
    best = pd.DataFrame(best_rows)
    chosen = r.merge(best[shape + list(axes)], on=shape + list(axes))
    chosen = chosen[chosen["_report"]]
    report_loss = chosen.groupby(shape)["loss"].mean().rename("report_loss")
    best = best.merge(report_loss.reset_index(), on=shape, how="left")
    rules = set(best["rule"])
    overall = rules.pop() if len(rules) == 1 else "mixed"
    keep = chosen.drop(columns=["_seed", "_select", "_report", "_split"]).reset_index(drop=True)
    keep = keep.sort_values("run_id").reset_index(drop=True) if "run_id" in keep else keep
    return Selection(
        runs=keep, axes=tuple(axes), rule=overall, shape_cols=tuple(shape), settings=settings, best=best
    )


def _optimum_log_lr(g: pd.DataFrame) -> tuple[float, bool]:
    """log10 of the best lr of one shape (the seed-mean loss over lr, other axes at their best):
    the vertex of a parabola in (log10 lr, log loss) through the best grid point and its two
    neighbours when it is interior and the parabola opens upwards, else the grid point (and
    whether that point is the grid's first or last)."""
    g = g.sort_values("lr")
    x, y = np.log10(g["lr"].to_numpy(float)), np.log(g["loss"].to_numpy(float))
    i = int(np.argmin(y))
    edge = len(x) > 1 and i in (0, len(x) - 1)
    if not edge and len(x) > 2:
        a, b, _ = np.polyfit(x[i - 1 : i + 2], y[i - 1 : i + 2], 2)
        if a > 0:
            return float(np.clip(-b / (2 * a), x[i - 1], x[i + 1])), False
    return float(x[i]), edge


def lr_optima(sel: Selection) -> pd.DataFrame:
    """Per shape: log10 lr* from the learning-rate curve at the other axes' best values."""
    if "lr" not in sel.axes:
        return pd.DataFrame()
    shape = list(sel.shape_cols)
    others = [a for a in sel.axes if a != "lr"]
    s = sel.settings
    if others:
        s = s.merge(sel.best[shape + others], on=shape + others)
    rows = []
    for key, g in s.groupby(shape):
        x, edge = _optimum_log_lr(g)
        rows.append(
            {**dict(zip(shape, key if isinstance(key, tuple) else (key,))), "log10_lr": x, "at_edge": edge}
        )
    return pd.DataFrame(rows)


def _exponent(X: np.ndarray, y: np.ndarray, names: list[str]) -> dict:
    """OLS of y on [1, X] with 95% t intervals on the slopes."""
    A = np.column_stack([np.ones(len(y)), X])
    dof = len(y) - A.shape[1]
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    out = {}
    if dof < 1:
        return {
            n: {"status": "not_identified", "reason": f"{len(y)} shapes for {A.shape[1]} coefficients"}
            for n in names
        }
    resid = y - A @ coef
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.pinv(A.T @ A)
    t = stdtrit(dof, 0.975)  # Student t's 97.5% point
    for k, n in enumerate(names, start=1):
        se = math.sqrt(max(cov[k, k], 0.0))
        out[n] = {
            "status": "ok",
            "exponent": float(coef[k]),
            "ci": [float(coef[k] - t * se), float(coef[k] + t * se)],
        }
    return out


def lr_drift(sel: Selection, parametrizations: list[str]) -> dict:
    """How the best lr moves with width and depth: lr* ∝ width^a · depth^g fitted by least squares
    over the shapes' optima (ln lr* on ln width, ln depth), with 95% intervals, beside what the
    parametrization promises. Optima at the grid's edge are censored (the true one may lie beyond)
    and left out; an axis with fewer than 3 distinct values among the rest is not identified."""
    opt = lr_optima(sel)
    if opt.empty:
        return {"status": "no_lr_axis", "reason": "no learning-rate axis was swept"}
    promise = PROMISES.get(parametrizations[0]) if len(parametrizations) == 1 else None
    out = {
        "status": "ok",
        "n_shapes": int(len(opt)),
        "n_at_edge": int(opt["at_edge"].sum()),
        "optima": opt.to_dict(orient="records"),
    }
    inner = opt[~opt["at_edge"]]
    cols, names = [], []
    for axis in ("width", "depth"):
        if inner[axis].nunique() >= 3:
            cols.append(np.log(inner[axis].to_numpy(float)))
            names.append(axis)
        else:
            out[axis] = {
                "status": "not_identified",
                "reason": f"{inner[axis].nunique()} distinct {axis}s with an interior optimum (needs 3)",
            }
    y = inner["log10_lr"].to_numpy(float) * math.log(10)  # natural log: exponents of width/depth
    if names:
        out.update(_exponent(np.column_stack(cols), y, names))
    for axis in ("width", "depth"):
        p = promise[axis] if promise else None
        e = out[axis]
        e["promised"] = p
        if e.get("status") == "ok" and p is not None:
            e["as_promised"] = bool(e["ci"][0] <= p <= e["ci"][1])
    out["promise_of"] = parametrizations[0] if promise else None
    if out["n_at_edge"]:
        out["note"] = (
            f"{out['n_at_edge']} of {len(opt)} optima lie at the edge of the grid, where "
            "the true optimum may lie outside it; they are left out of the fit"
        )
    return out


def parametrizations(runs: pd.DataFrame) -> list[str]:
    """The parametrizations the runs were trained under ("not recorded" when the input lacks it)."""
    if "parametrization" in runs.columns and runs["parametrization"].notna().all():
        return sorted(map(str, runs["parametrization"].unique()))
    vals = _config_field(runs, "model_config", "parametrization")
    return sorted(map(str, vals.unique())) if vals is not None else ["not recorded"]


RULE_TEXT = {
    "split": "the best setting of each shape was chosen on the first half of its seeds and every "
    "fit uses the other half (no winner's curse)",
    "same": "the best setting of each shape was chosen and reported on the same seeds (too few "
    "seeds to split): its loss is biased low by up to the seed noise among near-tied "
    "settings (see runner_up_gap)",
    "mixed": "shapes with at least 2 seeds at every setting were chosen on half the seeds and "
    "reported on the other half; the rest were chosen and reported on the same seeds",
    "none": "no tuning axis was swept: every run is used",
}


def summary(sel: Selection, runs_all: pd.DataFrame) -> dict:
    """The report's `tuning` section: axes, rule, parametrization, each shape's best setting
    (with at_edge), every setting's losses (for the figure) and the drift of the best lr."""
    pars = parametrizations(runs_all)
    return {
        "axes": list(sel.axes),
        "rule": sel.rule,
        "rule_text": RULE_TEXT[sel.rule],
        "shape_columns": list(sel.shape_cols),
        "parametrization": pars,
        "n_runs_in": int(len(runs_all)),
        "n_runs_used": int(len(sel.runs)),
        "best": sel.best.to_dict(orient="records"),
        "settings": sel.settings.to_dict(orient="records"),
        "lr_drift": lr_drift(sel, pars)
        if sel.axes
        else {"status": "no_lr_axis", "reason": "no tuning axis was swept"},
    }


def apply(ds, extra: tuple = (), rule: str = "auto", disabled: bool = False):
    """The dataset reduced to each shape's best setting (runs and their curves), and the report's
    `tuning` section. `disabled`: no tuning axis, every run kept (settings are then averaged)."""
    from analysis.fitting.powerlaw import json_safe

    runs = with_config_fields(ds.runs)
    axes = tuning_axes(runs, tuple(extra), disabled)
    halved = getattr(ds, "halving", {}).get("axis")
    if halved:  # chosen per run by successive halving: each finished final is that run's choice
        axes = tuple(a for a in axes if a != halved)
    sel = select(runs, axes, rule)
    curves = ds.curves[ds.curves["run_id"].isin(set(sel.runs["run_id"]))] if len(ds.curves) else ds.curves
    info = summary(sel, runs)
    info["requested"] = {"tune": list(extra), "selection": rule, "disabled": bool(disabled)}
    if halved:
        info["halving"] = dict(ds.halving)
    return replace(ds, runs=sel.runs, curves=curves), json_safe(info)
