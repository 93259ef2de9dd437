"""The recurrence-vs-attention report (Kerg et al. 2020, docs/science.md §6) from stored runs only:
accuracy vs delay T per model on copy/denoise and sequential digits (with the memoryless
baseline beside the loss), ‖∂L/∂h_t‖ vs distance from the answer per model and ρ, cost of a
training step vs T with fitted exponents (≈ 1 for relrnn, ≈ 2 for memrnn), and accuracy /
gradient stability over the (ν, ρ) grid. numpy, pandas and matplotlib only: no torch, no ray.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from analysis.kerg import relrnn_compare as rc  # noqa: E402
from analysis.kerg.relrnn_compare import ALL_TASKS, COLOURS, SOLVED, chance  # noqa: E402,F401
from analysis.reporting.markup import escape, writes_markdown  # noqa: E402
from depthwidth.config import RECURRENT_FAMILIES as RECURRENT  # noqa: E402
from depthwidth.config import SCREENED_FAMILIES as SCREENED  # noqa: E402

# TASKS: the delay tasks (answer in the last 10 outputs, T free); CLASSIFICATION: one answer
# after the 64 pixels of a UCI digit.
from depthwidth.data import CLASSIFICATION_SOURCES as CLASSIFICATION  # noqa: E402
from depthwidth.data import TASK_SOURCES as TASKS  # noqa: E402
from depthwidth.data.digits import CLASSES  # noqa: E402
from depthwidth.data.digits import PIXELS as DIGITS_T
from depthwidth.data.tasks import ALPHABET, N_SYMBOLS  # noqa: E402
from depthwidth.data.tasks import baseline_loss as copy_baseline  # noqa: E402

COST_METRICS = {  # column -> axis label; each a cost of one training step
    "step_flops": "matmul FLOPs per step",
    "step_activation_bytes": "activation bytes per step",
    "step_peak_bytes": "peak device bytes per step",
    "step_wall_s": "seconds per step (probe; else run wall / steps)",
}


def baseline_loss(task_length: float, task: str = "copy") -> float:
    """Memoryless cross-entropy on copy/denoise, 10·ln 8 / (T + 20) (docs/science.md §6); on
    digits the loss of the answer alone, ln 10 for a guess over the classes."""
    return math.log(CLASSES) if task in CLASSIFICATION else copy_baseline(task_length)


def fit_exponent(x, y) -> dict[str, Any]:
    """Least squares of log y = log a + p·log x: the exponent p of y ∝ x^p, with R²."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = x[ok], y[ok]
    if len(np.unique(x)) < 2:
        return {
            "status": "insufficient_data",
            "n_points": int(len(x)),
            "reason": "needs positive values at two or more distinct T",
        }
    lx, ly = np.log(x), np.log(y)
    p, la = np.polyfit(lx, ly, 1)
    resid = ly - (la + p * lx)
    ss = float(((ly - ly.mean()) ** 2).sum())
    return {
        "status": "ok",
        "exponent": float(p),
        "prefactor": float(math.exp(la)),
        "r2": float(1 - (resid**2).sum() / ss) if ss > 0 else 1.0,
        "n_points": int(len(x)),
        "x_min": float(x.min()),
        "x_max": float(x.max()),
    }


def _metrics_json(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return {}
    return {}


def _as_list(value: Any) -> list | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) > 0:
        return [float(v) for v in value]
    return None


def recurrent_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The recurrent runs with one column per quantity the report needs. Values the store keeps
    inside its `metrics` / `data_config` JSON columns are lifted out; absent ones are NaN."""
    if "family" not in runs.columns:
        return pd.DataFrame()
    df = runs[runs["family"].isin(RECURRENT)].copy().reset_index(drop=True)
    if df.empty:
        return df
    metrics = [_metrics_json(v) for v in df.get("metrics", pd.Series([None] * len(df)))]
    data_cfg = [_metrics_json(v) for v in df.get("data_config", pd.Series([None] * len(df)))]
    model_cfg = [_metrics_json(v) for v in df.get("model_config", pd.Series([None] * len(df)))]
    scalar_sources = {
        "data_source": (data_cfg, "source", "copy"),
        "task_length": (data_cfg, "task_length", np.nan),
        "nu": (model_cfg, "nu", np.nan),
        "rho": (model_cfg, "rho", np.nan),
    }
    for col, (src, key, default) in scalar_sources.items():
        if col not in df.columns:
            df[col] = [s.get(key, default) for s in src]
    for col in ("accuracy", "baseline_loss", "grad_start_ratio", "bits_per_char", *COST_METRICS):
        if col not in df.columns:
            df[col] = [m.get(col, np.nan) for m in metrics]
        df[col] = pd.to_numeric(df[col], errors="coerce")
    for col in ("grad_t", "grad_norms", "grad_profile_steps", "grad_profile_t"):
        own = df[col] if col in df.columns else pd.Series([None] * len(df))
        df[col] = [
            _as_list(o) if _as_list(o) is not None else _as_list(m.get(col)) for o, m in zip(own, metrics)
        ]
    df["grad_profile_norms"] = [_as_lists(m.get("grad_profile_norms")) for m in metrics]
    df["task_length"] = pd.to_numeric(df["task_length"], errors="coerce")
    is_digits = df["data_source"].isin(CLASSIFICATION)
    df.loc[is_digits, "task_length"] = DIGITS_T  # the delay of a digit is its 64 pixels
    is_task = df["data_source"].isin(TASKS)
    seq = pd.to_numeric(df["seq_len"], errors="coerce") if "seq_len" in df.columns else np.nan
    df["seq_len"] = np.where(is_task, df["task_length"] + 2 * N_SYMBOLS, np.where(is_digits, DIGITS_T, seq))
    memoryless = np.where(
        is_digits, math.log(CLASSES), [baseline_loss(T) if pd.notna(T) else np.nan for T in df["task_length"]]
    )
    df["baseline_loss"] = df["baseline_loss"].where(
        df["baseline_loss"].notna() | ~(is_task | is_digits), memoryless
    )
    if "status" not in df.columns:
        df["status"] = "ok"
    if "seed" not in df.columns:
        df["seed"] = 0
    if "steps" in df.columns and "wall_s" in df.columns:
        per_step = pd.to_numeric(df["wall_s"], errors="coerce") / pd.to_numeric(df["steps"], errors="coerce")
        df["step_wall_s"] = df["step_wall_s"].fillna(per_step)  # whole-run average as a fallback
    df["model"] = [_label(f, n, r) for f, n, r in zip(df["family"], df["nu"], df["rho"])]
    return df


def _as_lists(value: Any) -> list[list[float]] | None:
    """A list of equally long lists of numbers (profiles at several evaluations), or None."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, (list, tuple)) or not value:
        return None
    rows = [_as_list(v) for v in value]
    return rows if all(r is not None and len(r) == len(rows[0]) for r in rows) else None


def _label(family: str, nu: Any, rho: Any) -> str:
    if family in SCREENED and pd.notna(nu) and pd.notna(rho):
        return f"{family} ν={int(nu)} ρ={int(rho)}"
    return family


def _point(src: str, model: str, T, g: pd.DataFrame) -> dict[str, Any]:
    """What names one (task, model, T) point of a table: the model's family and ν, ρ, and its runs."""
    return {
        "task": src,
        "model": model,
        "family": g["family"].iloc[0],
        "nu": _int(g["nu"].iloc[0]),
        "rho": _int(g["rho"].iloc[0]),
        "T": _int(T),
        "n_runs": int(len(g)),
    }


def accuracy_table(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per task, model and T: accuracy over seeds (diverged/failed runs count as 0), val loss,
    and the memoryless baseline."""
    rows = []
    tasks = df[df["data_source"].isin(ALL_TASKS)]
    for (src, model, T), g in tasks.groupby(["data_source", "model", "task_length"], sort=True):
        acc = np.where(g["status"] == "ok", g["accuracy"].fillna(0.0), 0.0)
        loss = pd.to_numeric(g.get("final_val_loss"), errors="coerce")
        rows.append(
            {
                **_point(src, model, T, g),
                "n_ok": int((g["status"] == "ok").sum()),
                "accuracy_mean": float(acc.mean()),
                "accuracy_min": float(acc.min()),
                "accuracy_max": float(acc.max()),
                "val_loss_mean": float(np.nanmean(loss)) if np.isfinite(loss).any() else None,
                "baseline_loss": baseline_loss(T, src),
                "chance": chance(src),
            }
        )
    return rows


def _int(v: Any) -> int | None:
    return int(v) if pd.notna(v) else None


def solved_up_to(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task and model: the largest T solved (mean accuracy ≥ 0.99) and the smallest T not."""
    out: dict[tuple, dict] = {}
    for r in table:
        e = out.setdefault(
            (r["task"], r["model"]),
            {"task": r["task"], "model": r["model"], "largest_T_solved": None, "smallest_T_failed": None},
        )
        if r["accuracy_mean"] >= SOLVED:
            e["largest_T_solved"] = max(r["T"], e["largest_T_solved"] or 0)
        elif e["smallest_T_failed"] is None or r["T"] < e["smallest_T_failed"]:
            e["smallest_T_failed"] = r["T"]
    return list(out.values())


def cost_exponents(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Exponent p of (cost of one training step) ∝ (sequence length)^p per model and metric,
    over runs that share width, depth and batch size (linear: p ≈ 1, quadratic: p ≈ 2)."""
    out = []
    keys = [k for k in ("model", "width", "depth", "batch_size") if k in df.columns]
    ok = df[df["status"] == "ok"]
    for key, g in ok.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for metric in COST_METRICS:
            fit = fit_exponent(g["seq_len"], g[metric])
            if fit["status"] == "ok":
                out.append(
                    {
                        **{k: (v.item() if hasattr(v, "item") else v) for k, v in zip(keys, key)},
                        "metric": metric,
                        **fit,
                    }
                )
    return out


def grad_stability(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per model and T: the median over seeds of the share of gradient reaching the first 10
    steps (gradprobe.start_ratio), with its decades of decay, log10."""
    rows = []
    with_ratio = df[df["grad_start_ratio"].notna()]
    for (src, model, T), g in with_ratio.groupby(["data_source", "model", "task_length"], sort=True):
        r = float(g["grad_start_ratio"].median())
        rows.append(
            {
                **_point(src, model, T, g),
                "grad_start_ratio": r,
                "log10_ratio": math.log10(r) if r > 0 else None,
            }
        )
    return rows


def _save(fig: Figure, out_dir: Path | None, name: str, written: list[str]) -> None:
    if out_dir is not None:
        for ext in ("png", "pdf"):
            fig.savefig(out_dir / f"{name}.{ext}", dpi=120 if ext == "png" else None)
    written.append(name)


def _variant(model: str, table: pd.DataFrame) -> dict[str, Any]:
    """Line style and marker telling apart the (ν, ρ) variants of one family (same colour)."""
    family = model.split(" ")[0]
    variants = sorted(table.loc[table["family"] == family, "model"].unique())
    k = variants.index(model) if model in variants else 0
    return {"ls": ("-", "--", ":", "-.")[k % 4], "marker": "osD^v<>"[k % 7]}


def fig_accuracy_vs_T(table: list[dict[str, Any]]) -> Figure:
    """Top: accuracy on the last 10 outputs vs T per model (chance 1/8 dashed). Bottom: final
    val loss vs T with the memoryless baseline 10·ln 8/(T + 20)."""
    t = pd.DataFrame(table)
    tasks = sorted(t["task"].unique())
    fig = Figure(figsize=(5.2 * len(tasks), 7.5))
    axes = fig.subplots(2, len(tasks), squeeze=False)
    for j, task in enumerate(tasks):
        sub = t[t["task"] == task]
        for model, g in sub.groupby("model"):
            g = g.sort_values("T")
            style = dict(color=COLOURS.get(g["family"].iloc[0]), label=model, ms=4, **_variant(model, sub))
            spread = [g["accuracy_mean"] - g["accuracy_min"], g["accuracy_max"] - g["accuracy_mean"]]
            axes[0, j].errorbar(g["T"], g["accuracy_mean"], yerr=spread, **style)
            if g["val_loss_mean"].notna().any():
                axes[1, j].plot(g["T"], g["val_loss_mean"], **style)
        Ts = np.linspace(sub["T"].min(), sub["T"].max(), 100)
        digits = task in CLASSIFICATION
        axes[0, j].axhline(
            chance(task), ls="--", c="grey", lw=1, label=f"chance (1/{CLASSES if digits else ALPHABET})"
        )
        what = "the class after 64 pixels" if digits else "the last 10 outputs"
        axes[0, j].set(
            title=f"{task}: accuracy on {what}", xlabel="delay T", ylabel="accuracy", ylim=(0, 1.05)
        )
        axes[1, j].plot(Ts, [baseline_loss(T, task) for T in Ts], "k--", lw=1, label="memoryless baseline")
        axes[1, j].set(
            title=f"{task}: final validation loss",
            xlabel="delay T",
            ylabel="cross-entropy (nats/" + ("answer)" if digits else "step)"),
            yscale="log",
        )
        for ax in axes[:, j]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def fig_grad_vs_distance(df: pd.DataFrame) -> Figure:
    """‖∂L/∂h_t‖ vs distance from the last output, L − 1 − t, one panel per family, one line
    per ρ (mean over seeds) at the largest T with profiles. The authors' gradient plot."""
    have = df[df["grad_norms"].notna() & df["grad_t"].notna()]
    fams = [f for f in RECURRENT if f in set(have["family"])]
    fig = Figure(figsize=(4.2 * len(fams), 3.6))
    axes = fig.subplots(1, len(fams), squeeze=False)[0]
    for ax, fam in zip(axes, fams):
        sub = have[have["family"] == fam]
        T = sub["task_length"].max() if sub["task_length"].notna().any() else None
        sub = sub[sub["task_length"] == T] if T is not None else sub
        for (rho, nu), g in sub.groupby([sub["rho"].fillna(-1), sub["nu"].fillna(-1)]):
            t = np.asarray(g["grad_t"].iloc[0])
            norms = np.nanmean(np.array([n for n in g["grad_norms"] if len(n) == len(t)]), axis=0)
            dist = (g["seq_len"].iloc[0] - 1 if pd.notna(g["seq_len"].iloc[0]) else t.max()) - t
            label = f"ρ={int(rho)} ν={int(nu)}" if fam in SCREENED else fam
            ax.plot(dist, np.maximum(norms, 1e-300), marker=".", ms=3, label=label)
        ax.set(
            title=f"{fam}" + (f", T={int(T)}" if T is not None else ""),
            yscale="log",
            xlabel="steps before the last output (L − 1 − t)",
            ylabel="‖∂L/∂h_t‖",
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def fig_cost_vs_T(df: pd.DataFrame, exps: list[dict[str, Any]]) -> Figure:
    """Cost of one training step vs sequence length, log-log, per model, fitted exponent in the
    legend: linear for relrnn (memory O(ν+ρ) per step), quadratic for memrnn."""
    ok = df[df["status"] == "ok"]
    metrics = [m for m in COST_METRICS if (ok[m] > 0).any()]
    fig = Figure(figsize=(4.2 * max(1, len(metrics)), 3.8))
    axes = fig.subplots(1, max(1, len(metrics)), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        for e in (e for e in exps if e["metric"] == metric):
            g = ok[ok["model"] == e["model"]]
            for k in ("width", "depth", "batch_size"):
                if k in e:
                    g = g[g[k] == e[k]]
            g = g.groupby("seq_len")[metric].median()
            c = COLOURS.get(e["model"].split(" ")[0])
            ax.loglog(g.index, g.values, "o", ms=4, color=c)
            xs = np.geomspace(e["x_min"], e["x_max"], 20)
            ax.loglog(
                xs,
                e["prefactor"] * xs ** e["exponent"],
                "-",
                color=c,
                lw=1,
                label=f"{e['model']} (p = {e['exponent']:.2f})",
            )
        ax.set(xlabel="sequence length (T + 20 on copy/denoise)", ylabel=COST_METRICS[metric])
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def fig_nu_rho(df: pd.DataFrame) -> Figure:
    """Heatmaps over the (ν, ρ) grid at the largest T per screened family and task: mean
    accuracy and log10 of the gradient share reaching the start (gradient stability)."""
    grids = []
    for (fam, src), g in df[df["family"].isin(SCREENED)].groupby(["family", "data_source"]):
        if g[["nu", "rho"]].drop_duplicates().shape[0] >= 2:
            grids.append((fam, src, g[g["task_length"] == g["task_length"].max()]))
    fig = Figure(figsize=(8.4, 3.6 * max(1, len(grids))))
    axes = fig.subplots(max(1, len(grids)), 2, squeeze=False)
    for row, (fam, src, g) in zip(axes, grids):
        acc = np.where(g["status"] == "ok", g["accuracy"].fillna(0.0), 0.0)
        g = g.assign(acc=acc, lgr=np.log10(g["grad_start_ratio"].where(g["grad_start_ratio"] > 0)))
        for ax, col, title, cmap in (
            (row[0], "acc", "accuracy", "viridis"),
            (row[1], "lgr", "log10 gradient share at the start", "magma"),
        ):
            piv = g.pivot_table(index="rho", columns="nu", values=col, aggfunc="mean")
            if piv.empty or not np.isfinite(piv.to_numpy(float)).any():
                ax.text(0.5, 0.5, f"no {title} stored", ha="center", va="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            vals = piv.to_numpy(float)
            im = ax.imshow(
                vals,
                origin="lower",
                aspect="auto",
                cmap=cmap,
                **({"vmin": 0.0, "vmax": 1.0} if col == "acc" else {}),
            )
            for (i, k), v in np.ndenumerate(vals):
                if np.isfinite(v):
                    ax.text(k, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="w")
            ax.set_xticks(range(len(piv.columns)), [str(int(v)) for v in piv.columns])
            ax.set_yticks(range(len(piv.index)), [str(int(v)) for v in piv.index])
            ax.set(
                xlabel="ν (buffer)",
                ylabel="ρ (relevant set)",
                title=f"{fam} {src} T={int(g['task_length'].max())}: {title}",
            )
            fig.colorbar(im, ax=ax)
    fig.tight_layout()
    return fig


def report_relrnn(
    runs_df: pd.DataFrame, curves_df: pd.DataFrame | None, out_dir: str | Path | None
) -> dict[str, Any]:
    """Tables and figures of the recurrent family; figures go to out_dir (PNG + PDF) when given.
    Returns a JSON-ready dict; status 'insufficient_data' when there are no recurrent runs."""
    df = recurrent_runs(runs_df)
    if df.empty:
        return {"status": "insufficient_data", "reason": "no runs of a recurrent family"}
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    curves = curves_df if curves_df is not None else pd.DataFrame()
    table = accuracy_table(df)
    exps = cost_exponents(df)
    stab = grad_stability(df)
    written: list[str] = []
    skipped: dict[str, str] = {}
    comp = rc.comparison(df)
    head = rc.headline(comp)
    words = rc.sentences(comp, head)
    over_training = rc.gradient_over_training(df, curves)
    bpc = rc.bits_per_char(df)
    n_grid = df[df["family"].isin(SCREENED)][["nu", "rho"]].drop_duplicates().shape[0]
    figures = [
        ("relrnn_accuracy_vs_T", bool(table), "no copy/denoise runs", lambda: fig_accuracy_vs_T(table)),
        (
            "relrnn_grad_vs_distance",
            bool(df["grad_norms"].notna().any()),
            "no stored gradient profiles (metrics grad_t / grad_norms)",
            lambda: fig_grad_vs_distance(df),
        ),
        ("relrnn_cost_vs_T", bool(exps), "no step costs at two or more T", lambda: fig_cost_vs_T(df, exps)),
        ("relrnn_nu_rho", n_grid >= 2, "fewer than two (ν, ρ) points", lambda: fig_nu_rho(df)),
        (
            "relrnn_learning_curves",
            not curves.empty
            and "trial_id" in curves.columns
            and bool({"accuracy", "val_loss"} & set(curves.columns)),
            "no curves of accuracy or loss",
            lambda: rc.fig_learning_curves(df, curves),
        ),
    ]
    profiled = [t for t in ALL_TASKS if (df["grad_profile_norms"].notna() & (df["data_source"] == t)).any()]
    figures += [
        (f"relrnn_grad_during_training_{t}", True, "", lambda t=t: rc.fig_grad_during_training(df, curves, t))
        for t in profiled
    ]
    if not profiled:
        skipped["relrnn_grad_during_training"] = (
            "no gradient profiles recorded during training (metrics grad_profile_*)"
        )
    for name, possible, why, build in figures:
        if possible:
            _save(build(), out, name, written)
        else:
            skipped[name] = why
    result = {
        "status": "ok",
        "n_runs": int(len(df)),
        "n_ok": int((df["status"] == "ok").sum()),
        "families": sorted(map(str, df["family"].unique())),
        "tasks": sorted(map(str, df["data_source"].unique())),
        "accuracy": table,
        "solved": solved_up_to(table),
        "cost_exponents": exps,
        "gradient_stability": stab,
        "comparison": comp,
        "headline": head,
        "comparison_text": words,
        "gradient_over_training": over_training,
        "bits_per_char": bpc,
        "figures": written,
        "figures_skipped": skipped,
    }
    result["answer"] = rc.answer(head)
    result["markdown"] = section_markdown(result)
    return result


@writes_markdown
def section_markdown(result: dict[str, Any]) -> str:
    """The recurrent section of report.md from the section's own fields (report.json's `relrnn`),
    every string in them escaped first; "" for a section without results (a failed one)."""
    if "comparison_text" not in result:
        return ""
    return (
        escape(result.get("answer", ""))  # the answer first (its task names come from the data)
        + "\n\n"
        + rc.markdown(result["comparison_text"], [], [])
        + markdown(result)
        + "\n"
        + rc.markdown([], result["gradient_over_training"], result["bits_per_char"])
    )


@writes_markdown
def markdown(r: dict[str, Any]) -> str:
    """The recurrent section of report.md."""
    L = [
        f"Runs: {r['n_runs']} ({r['n_ok']} ok); families {', '.join(r['families'])}; "
        f"tasks {', '.join(r['tasks'])}. Solved = mean accuracy on the last 10 outputs ≥ {SOLVED}.",
        "",
    ]
    if r["solved"]:
        L += ["| task | model | largest T solved | smallest T failed |", "|---|---|---|---|"]
        L += [
            f"| {s['task']} | {s['model']} | {s['largest_T_solved'] or '-'} | "
            f"{s['smallest_T_failed'] or '-'} |"
            for s in r["solved"]
        ] + [""]
    flops = [e for e in r["cost_exponents"] if e["metric"] in ("step_flops", "step_activation_bytes")]
    if flops:
        L += ["| model | cost of a step | exponent p (cost ∝ L^p) | R² | L range |", "|---|---|---|---|---|"]
        L += [
            f"| {e['model']} | {e['metric']} | {e['exponent']:.2f} | {e['r2']:.3f} | "
            f"{e['x_min']:g}–{e['x_max']:g} |"
            for e in flops
        ] + [""]
    if r["gradient_stability"]:
        L += [
            "| task | model | T | share of ‖∂L/∂h_t‖ reaching the first 10 steps, end of training |",
            "|---|---|---|---|",
        ]
        L += [
            f"| {g['task']} | {g['model']} | {g['T']} | {g['grad_start_ratio']:.2e} |"
            for g in r["gradient_stability"]
        ] + [""]
    return "\n".join(L)
