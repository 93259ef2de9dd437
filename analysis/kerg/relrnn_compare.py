"""The recurrence-vs-attention comparison in words and over training (Kerg et al. 2020,
docs/science.md §6): per task and delay T, which model reached which accuracy at what cost,
with the headline at the longest T (screened model against LSTM); ‖∂L/∂h_t‖ profiles recorded at
several evaluations during training; bits per character on text. From stored runs only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

from analysis.reporting.markup import writes_markdown
from depthwidth.config import RECURRENT_FAMILIES as RECURRENT
from depthwidth.config import SCREENED_FAMILIES as SCREENED
from depthwidth.data import CLASSIFICATION_SOURCES, TASK_SOURCES
from depthwidth.data.digits import CLASSES
from depthwidth.data.tasks import ALPHABET

# the delay tasks (answer in the last 10 outputs, T free), then one answer after a UCI digit's pixels
ALL_TASKS = TASK_SOURCES + CLASSIFICATION_SOURCES
SOLVED = 0.99  # accuracy on the last 10 outputs that counts as solving the task
COLOURS = {
    "lstm": "tab:blue",
    "rnn": "tab:orange",
    "memrnn": "tab:green",
    "relrnn": "tab:red",
    "rellstm": "tab:purple",
}

LEARNED = 0.9  # accuracy that counts as having learned a task, short of solving it


def chance(task: str) -> float:
    return 1 / CLASSES if task in CLASSIFICATION_SOURCES else 1 / ALPHABET


def _median(g: pd.DataFrame, col: str) -> float | None:
    v = pd.to_numeric(g[col], errors="coerce") if col in g.columns else pd.Series(dtype=float)
    return float(v.median()) if v.notna().any() else None


def _verdict(acc: float, chance_level: float) -> str:
    if acc >= SOLVED:
        return "solved it"
    if acc >= LEARNED:
        return "learned it"
    if acc >= chance_level + 0.1:
        return "partly learned it"
    # e.g. 0 on copy: the model answers blank, the commonest target, at the last 10 steps
    return "stayed near chance" if acc >= chance_level - 0.05 else "stayed below chance"


def comparison(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per task and T, one entry per model: median accuracy over seeds (a diverged or failed run
    counts as 0) with its spread (min–max) and mean, the training budget (steps × batch) and its
    cost (median run seconds, training FLOPs by the accounting, measured activation bytes of one
    step). The median, not the mean, carries the verdict: one seed that learns late (copy's
    plateau ends at a seed-dependent step) moves it less."""
    out = []
    tasks = df[df["data_source"].isin(ALL_TASKS)]
    for (src, T), at in tasks.groupby(["data_source", "task_length"], sort=True):
        models = []
        for model, g in at.groupby("model", sort=True):
            acc = np.where(g["status"] == "ok", g["accuracy"].fillna(0.0), 0.0)
            models.append(
                {
                    "model": model,
                    "family": str(g["family"].iloc[0]),
                    "n_runs": int(len(g)),
                    "accuracy": float(np.median(acc)),
                    "accuracy_mean": float(acc.mean()),
                    "accuracy_min": float(acc.min()),
                    "accuracy_max": float(acc.max()),
                    "verdict": _verdict(float(np.median(acc)), chance(str(src))),
                    "steps": _median(g, "steps"),
                    "batch_size": _median(g, "batch_size"),
                    "wall_s": _median(g, "wall_s"),
                    "flops": _median(g, "flops"),
                    "step_activation_bytes": _median(g, "step_activation_bytes"),
                }
            )
        models.sort(key=lambda m: -m["accuracy"])
        out.append({"task": str(src), "T": int(T), "chance": chance(str(src)), "models": models})
    return out


def headline(comp: list[dict[str, Any]]) -> dict[str, Any]:
    """At the longest T of each task that has both: the best screened model (relrnn/rellstm)
    against the LSTM, and whether the screened one reached ≥ 0.9 with the LSTM ≥ 0.2 below, in
    the median over seeds (`holds`) and seed by seed (`holds_every_seed`: its worst seed against
    the LSTM's best)."""
    heads = []
    for task in sorted({c["task"] for c in comp}):
        rows = sorted((c for c in comp if c["task"] == task), key=lambda c: c["T"])
        for c in reversed(rows):
            screened = [m for m in c["models"] if m["family"] in SCREENED]
            lstm = [m for m in c["models"] if m["family"] == "lstm"]
            if screened and lstm:
                best = max(screened, key=lambda m: m["accuracy"])
                margin = best["accuracy"] - lstm[0]["accuracy"]
                worst = best["accuracy_min"] - lstm[0]["accuracy_max"]
                heads.append(
                    {
                        "task": task,
                        "T": c["T"],
                        "screened": best["model"],
                        "screened_accuracy": best["accuracy"],
                        "screened_min": best["accuracy_min"],
                        "screened_max": best["accuracy_max"],
                        "screened_runs": best["n_runs"],
                        "lstm_accuracy": lstm[0]["accuracy"],
                        "lstm_min": lstm[0]["accuracy_min"],
                        "lstm_max": lstm[0]["accuracy_max"],
                        "lstm_runs": lstm[0]["n_runs"],
                        "margin": margin,
                        "worst_margin": worst,
                        "same_budget": (best["steps"], best["batch_size"])
                        == (lstm[0]["steps"], lstm[0]["batch_size"]),
                        "holds": bool(best["accuracy"] >= LEARNED and margin >= 0.2),
                        "holds_every_seed": bool(best["accuracy_min"] >= LEARNED and worst >= 0.2),
                    }
                )
                break
    return {"status": "ok" if heads else "insufficient_data", "by_task": heads}


def answer(head: dict[str, Any]) -> str:
    """The recurrent study's answer in one sentence (at most 250 characters): at the longest delay
    of each task run, does the screened model beat the LSTM by the claim's margin?"""
    by = head.get("by_task") or []
    if not by:
        return "These runs cannot compare relevancy screening with the LSTM: no task has both at one delay."
    every = [f"{h['task']} (T = {h['T']})" for h in by if h["holds_every_seed"]]
    median = [f"{h['task']} (T = {h['T']})" for h in by if h["holds"] and not h["holds_every_seed"]]
    fails = [f"{h['task']} (T = {h['T']})" for h in by if not h["holds"]]
    claim = f"accuracy ≥ {LEARNED}, 0.2 above the LSTM"
    text = _screening_text(claim, every, median, fails)
    if len(text) >= 250:  # many tasks: their names without the delays
        text = _screening_text(claim, *([t.split(" (")[0] for t in g] for g in (every, median, fails)))
    return text + "."


def _screening_text(claim: str, every: list, median: list, fails: list) -> str:
    if not every and not median:
        text = f"Relevancy screening does not beat the LSTM by the claim's margin ({claim}) at the longest delay of {', '.join(fails)}"
    else:
        text = f"Relevancy screening beats the LSTM by the claim's margin ({claim})"
        text += f" on every seed at {', '.join(every)}" if every else ""
        text += (" and" if every else "") + f" in the median only at {', '.join(median)}" if median else ""
        text += f", but not at {', '.join(fails)}" if fails else ""
    return text


def _cost(m: dict[str, Any]) -> str:
    parts = []
    if m["steps"] is not None and m["batch_size"] is not None:
        parts.append(f"{m['steps']:.0f} steps × {m['batch_size']:.0f}")
    if m["wall_s"] is not None:
        parts.append(f"{m['wall_s']:.0f} s")
    if m["flops"] is not None:
        parts.append(f"{m['flops']:.2g} training FLOPs")
    if m["step_activation_bytes"] is not None:
        parts.append(f"{m['step_activation_bytes'] / 1e6:.3g} MB of activations per step")
    return ", ".join(parts)


def _spread(acc: float, lo: float, hi: float, n: int) -> str:
    """'median 0.995 over 3 seeds, spread 0.989–1.000' (min–max), or the one run's accuracy."""
    if n > 1:
        return f"median {acc:.3f} over {n} seeds, spread {lo:.3f}–{hi:.3f}"
    return f"{acc:.3f}, 1 seed"


def sentences(comp: list[dict[str, Any]], head: dict[str, Any]) -> list[str]:
    """The comparison as sentences, one per task and T, then the headline per task."""
    out = []
    for c in comp:
        parts = [
            f"{m['model']} {m['verdict']} (accuracy "
            f"{_spread(m['accuracy'], m['accuracy_min'], m['accuracy_max'], m['n_runs'])}; "
            f"{_cost(m)})"
            for m in c["models"]
        ]
        out.append(f"{c['task']}, T = {c['T']} (chance {c['chance']:.3f}): " + "; ".join(parts) + ".")
    for h in head.get("by_task", []):
        if h["holds_every_seed"]:
            verb = "holds here, on every seed"
        elif h["holds"]:
            verb = "holds here in the median but not on every seed"
        else:
            verb = "does not hold here"
        budget = "the same" if h["same_budget"] else "a different"
        seeds = (
            f" and {h['worst_margin']:+.3f} between its worst seed and the LSTM's best"
            if max(h["screened_runs"], h["lstm_runs"]) > 1
            else ""
        )
        out.append(
            f"At the longest delay of {h['task']} (T = {h['T']}), {h['screened']} reaches "
            f"{_spread(h['screened_accuracy'], h['screened_min'], h['screened_max'], h['screened_runs'])} "
            f"against the LSTM's "
            f"{_spread(h['lstm_accuracy'], h['lstm_min'], h['lstm_max'], h['lstm_runs'])} with "
            f"{budget} training budget, a margin of {h['margin']:+.3f} in the median{seeds}: "
            f"the claim (screened ≥ {LEARNED}, LSTM ≥ 0.2 below) {verb}."
        )
    return out


def gradient_over_training(df: pd.DataFrame, curves: pd.DataFrame) -> list[dict[str, Any]]:
    """Per task, model and T: the share of ‖∂L/∂h_t‖ reaching the first 10 steps
    (gradprobe.start_ratio) at the first and last evaluation and its smallest value in between,
    median over seeds, from the curves' `grad_start_ratio`."""
    if curves is None or curves.empty or "grad_start_ratio" not in curves.columns:
        return []
    rows = []
    for (src, model, T), g in df.groupby(["data_source", "model", "task_length"], sort=True):
        first, lowest, last = [], [], []
        for tid in g["trial_id"]:
            c = curves[(curves["trial_id"] == tid) & curves["grad_start_ratio"].notna()]
            if c.empty:
                continue
            r = c.sort_values("step")["grad_start_ratio"].to_numpy(float)
            first.append(r[0]), lowest.append(r.min()), last.append(r[-1])
        if first:
            rows.append(
                {
                    "task": str(src),
                    "model": model,
                    "family": str(g["family"].iloc[0]),
                    "rho": None if pd.isna(g["rho"].iloc[0]) else int(g["rho"].iloc[0]),
                    "T": int(T),
                    "n_runs": len(first),
                    "first": float(np.median(first)),
                    "lowest": float(np.median(lowest)),
                    "last": float(np.median(last)),
                }
            )
    return rows


def fig_grad_during_training(df: pd.DataFrame, curves: pd.DataFrame | None, src: str | None = None) -> Figure:
    """Top: ‖∂L/∂h_t‖ vs distance from the last output at the evaluations a run kept
    (colour = training step, geometric mean over seeds), one panel per model at the largest T
    of task `src` (default: the first task with profiles). Bottom: the share reaching the
    first 10 steps vs step, per run."""
    have = df[df["grad_profile_norms"].notna()]
    if src is None:
        src = next(s for s in ALL_TASKS if s in set(have["data_source"]))
    sub = have[have["data_source"] == src]
    T = sub["task_length"].max()
    sub = sub[sub["task_length"] == T]
    models = sorted(sub["model"].unique(), key=lambda m: (RECURRENT.index(m.split(" ")[0]), m))
    fig = Figure(figsize=(3.6 * len(models), 6.6))
    axes = fig.subplots(2, len(models), squeeze=False)
    cmap = colormaps["viridis"]
    for j, model in enumerate(models):
        g = sub[sub["model"] == model]
        steps = g["grad_profile_steps"].iloc[0]
        t = np.asarray(g["grad_profile_t"].iloc[0], float)
        stack = [
            np.asarray(p, float)
            for p, s in zip(g["grad_profile_norms"], g["grad_profile_steps"])
            if s == steps and np.shape(p) == (len(steps), len(t))
        ]
        logs = np.log10(np.maximum(np.array(stack), 1e-300)).mean(axis=0)  # (k, n)
        dist = g["seq_len"].iloc[0] - 1 - t
        for k, step in enumerate(steps):
            axes[0, j].plot(
                dist, 10 ** logs[k], color=cmap(k / max(1, len(steps) - 1)), lw=1, label=f"step {int(step)}"
            )
        axes[0, j].set(
            title=f"{model}, {src} T={int(T)}",
            yscale="log",
            xlabel="steps before the last output",
            ylabel="‖∂L/∂h_t‖",
        )
        axes[0, j].legend(fontsize=6)
        if curves is not None and "grad_start_ratio" in curves.columns:
            for tid in g["trial_id"]:
                c = curves[(curves["trial_id"] == tid) & curves["grad_start_ratio"].notna()]
                c = c.sort_values("step")
                axes[1, j].plot(
                    c["step"],
                    np.maximum(c["grad_start_ratio"], 1e-300),
                    color=COLOURS.get(model.split(" ")[0]),
                    lw=1,
                    alpha=0.8,
                )
        axes[1, j].set(
            yscale="log", xlabel="training step", ylabel="share of ‖∂L/∂h_t‖ at the first 10 steps"
        )
    fig.tight_layout()
    return fig


def fig_learning_curves(df: pd.DataFrame, curves: pd.DataFrame) -> Figure:
    """Validation accuracy (or loss) vs step for every recurrent run at the largest T per task."""
    col = "accuracy" if "accuracy" in curves.columns else "val_loss"
    tasks = sorted(df["data_source"].unique())
    fig = Figure(figsize=(5.2 * len(tasks), 3.8))
    axes = fig.subplots(1, len(tasks), squeeze=False)[0]
    for ax, src in zip(axes, tasks):
        sub = df[df["data_source"] == src]
        T = sub["task_length"].max()
        for _, run in sub[sub["task_length"] == T].iterrows():
            c = curves[curves["trial_id"] == run["trial_id"]].sort_values("step")
            ax.plot(c["step"], c[col], color=COLOURS.get(run["family"]), lw=1, alpha=0.8, label=run["model"])
        handles, labels = ax.get_legend_handles_labels()
        keep = {lab: h for h, lab in zip(handles, labels)}
        ax.legend(keep.values(), keep.keys(), fontsize=7)
        ax.set(title=f"{src}" + (f", T={int(T)}" if pd.notna(T) else ""), xlabel="step", ylabel=col)
    fig.tight_layout()
    return fig


def bits_per_char(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Character-level text runs: final validation bits per character per model (median over
    seeds), beside the unigram entropy in bits."""
    text = df[(df["data_source"] == "text") & df["bits_per_char"].notna()]
    rows = []
    for model, g in text.groupby("model", sort=True):
        uni = _median(g, "unigram_entropy")
        rows.append(
            {
                "model": model,
                "n_runs": int(len(g)),
                "bits_per_char": float(g["bits_per_char"].median()),
                "unigram_bits": uni / math.log(2) if uni is not None else None,
            }
        )
    return rows


@writes_markdown
def markdown(comp_words: list[str], grad: list[dict[str, Any]], bpc: list[dict[str, Any]]) -> str:
    L: list[str] = []
    if comp_words:
        L += ["### Comparison", ""] + [f"- {s}" for s in comp_words] + [""]
    if grad:
        L += [
            "### ‖∂L/∂h_t‖ during training (share reaching the first 10 steps, median over seeds)",
            "",
            "| task | model | T | first eval | lowest | last eval |",
            "|---|---|---|---|---|---|",
        ]
        L += [
            f"| {g['task']} | {g['model']} | {g['T']} | {g['first']:.2e} | {g['lowest']:.2e} | "
            f"{g['last']:.2e} |"
            for g in grad
        ] + [""]
    if bpc:
        L += [
            "### Character-level text",
            "",
            "| model | runs | bits per character | unigram bits |",
            "|---|---|---|---|",
        ]
        L += [
            f"| {b['model']} | {b['n_runs']} | {b['bits_per_char']:.3f} | {b['unigram_bits']:.3f} |"
            if b["unigram_bits"] is not None
            else f"| {b['model']} | {b['n_runs']} | {b['bits_per_char']:.3f} | - |"
            for b in bpc
        ] + [""]
    return "\n".join(L)
