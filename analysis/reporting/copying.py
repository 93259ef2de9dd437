"""The copying probe in the report (depthwidth/copyprobe.py; docs/science.md §11): does a model
copy in context, by shape, and does its loss follow? Present when the runs carry `copy_gain`.

One selection rule decides which runs enter, for the table and the figure alike (`select`): at
each shape's largest token budget, each seed's run with the lowest validation loss (its best
setting of the tuning axes for that seed). The gain is measured against the control where the
runs have it (`copy_gain_vs_control`: the control's second-half loss less the repeat's, at the
same positions), else against the first half (`copy_gain`, which position alone also lowers).
Each shape's mean comes with a 95% interval over its seeds (Student's t).
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

from analysis.reporting.markup import writes_markdown

COLUMN = "copy_gain"
CONTROL = "copy_gain_vs_control"
RULE = (
    "at each shape's largest token budget, each seed's run with the lowest validation loss "
    "(its best setting for that seed)"
)
_WORDS = {
    CONTROL: "copy gain against the control (the control's second-half loss less the repeat's)",
    COLUMN: "copy gain against the first half (the first half's loss less the repeat's; no control "
    "in these runs, so position alone counts too)",
}


def has_probe(runs: pd.DataFrame) -> bool:
    return COLUMN in runs.columns and runs[COLUMN].notna().any()


def measure(runs: pd.DataFrame) -> str:
    """The gain the report reads: against the control where every probed run has it."""
    probed = runs[runs[COLUMN].notna()]
    if CONTROL in runs.columns and len(probed) and probed[CONTROL].notna().all():
        return CONTROL
    return COLUMN


def select(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that enter (RULE): each (depth, width, seed) at its shape's largest budget, the
    one with the lowest loss. A table without token counts is one budget."""
    r = runs[runs[COLUMN].notna()]
    if "tokens" in r.columns and r["tokens"].notna().any():
        top = r.groupby(["depth", "width"])["tokens"].transform("max")
        r = r[(r["tokens"] == top) | top.isna()]
    seed = r["seed"] if "seed" in r.columns else pd.Series(0, index=r.index)
    r = r.assign(seed=seed).sort_values("loss", kind="stable")
    return r.groupby(["depth", "width", "seed"], sort=True).head(1).sort_values(["depth", "width", "seed"])


def interval(values) -> list | None:
    """The mean's 95% interval over seeds (Student's t); None with fewer than two."""
    v = np.asarray(values, float)
    if len(v) < 2:
        return None
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return [float(v.mean() - half), float(v.mean() + half)]


def _summary(g: pd.DataFrame, col: str) -> dict:
    return {
        "n_seeds": int(len(g)),
        "gain": float(g[col].mean()),
        "gain_ci": interval(g[col]),
        "copy_gain": float(g[COLUMN].mean()),
        "loss": float(g["loss"].mean()),
        "loss_ci": interval(g["loss"]),
    }


def section(runs: pd.DataFrame) -> dict:
    """The report's `copying` section: the rule, the gain read, each shape's and each depth's
    mean with its interval over seeds, and the runs that entered (for the figure)."""
    if not has_probe(runs):
        return {"status": "absent", "reason": "the runs carry no copy_gain (the probe runs on text)"}
    col, sel = measure(runs), select(runs)
    shapes = [
        {"depth": int(d), "width": float(w), **_summary(g, col)}
        for (d, w), g in sel.groupby(["depth", "width"])
    ]
    # A depth's value per seed: that seed's mean over the widths, so the interval is over seeds.
    per_seed = sel.groupby(["depth", "seed"])[list(dict.fromkeys([col, COLUMN, "loss"]))].mean().reset_index()
    depths = [{"depth": int(d), **_summary(g, col)} for d, g in per_seed.groupby("depth")]
    tokens = sel["tokens"] if "tokens" in sel.columns else pd.Series(dtype=float)
    return {
        "status": "ok",
        "rule": RULE,
        "measure": col,
        "measure_text": _WORDS[col],
        "control": col == CONTROL,
        "n_runs": int(len(sel)),
        "tokens": sorted({float(t) for t in tokens.dropna()}),
        "shapes": shapes,
        "depths": depths,
        "runs": [
            {"depth": int(d), "width": float(w), "seed": int(s), "gain": float(g), "loss": float(lo)}
            for d, w, s, g, lo in zip(sel["depth"], sel["width"], sel["seed"], sel[col], sel["loss"])
        ],
    }


def _ci_text(ci) -> str:
    return f"[{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "(one seed: no interval)"


@writes_markdown
def markdown(c: dict | None) -> list[str]:
    """report.md's copying section: the rule, the measure and a row per shape."""
    if not c or c.get("status") != "ok":
        return []
    L = ["## In-context copying (docs/science.md §11)", ""]
    L += [
        f"Runs entering: {c['rule']} ({c['n_runs']} runs). Measure: {c['measure_text']}, in nats "
        "per token; 95% intervals over seeds (Student's t).",
        "",
        "| depth | width | seeds | copy gain (95% over seeds) | against the first half | loss (nats per token) |",
        "|---|---|---|---|---|---|",
    ]
    for s in c["shapes"]:
        L.append(
            f"| {s['depth']} | {s['width']:g} | {s['n_seeds']} | {s['gain']:.3g} {_ci_text(s['gain_ci'])} | "
            f"{s['copy_gain']:.3g} | {s['loss']:.4g} {_ci_text(s['loss_ci'])} |"
        )
    per = "; ".join(f"depth {d['depth']}: {d['gain']:.3g} {_ci_text(d['gain_ci'])}" for d in c["depths"])
    return L + ["", f"By depth (each seed's mean over the widths): {per}.", ""]


def _colours(n: int) -> list:
    """n colours told apart at a glance: tab10's, in order."""
    cmap = matplotlib.colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def copying_plot(c: dict) -> Figure:
    """Left: the copy gain against depth, one line per width through the seed means with their
    95% intervals over seeds, each run a faint point. Right: each run's validation loss against
    its copy gain, one colour per depth: if the loss step from one layer to two is the copying
    step, the depth-1 runs sit apart on both axes at once. `c` is the report's copying section."""
    runs = pd.DataFrame(c["runs"])
    shapes = pd.DataFrame(c["shapes"])
    fig = Figure(figsize=(11, 4.6))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    widths = sorted(shapes["width"].unique())
    for w, colour in zip(widths, _colours(len(widths))):
        g = shapes[shapes["width"] == w].sort_values("depth")
        lo = [s["gain"] - s["gain_ci"][0] if s["gain_ci"] else 0.0 for _, s in g.iterrows()]
        hi = [s["gain_ci"][1] - s["gain"] if s["gain_ci"] else 0.0 for _, s in g.iterrows()]
        left.errorbar(
            g["depth"],
            g["gain"],
            yerr=[lo, hi],
            marker="o",
            ms=4,
            capsize=3,
            color=colour,
            label=f"width {w:g}",
        )
        mine = runs[runs["width"] == w]
        left.scatter(mine["depth"], mine["gain"], s=8, color=colour, alpha=0.35)
    left.axhline(0, color="0.6", lw=0.8)
    left.set_xlabel("depth (layers)")
    what = "against the control" if c["control"] else "against the first half"
    left.set_ylabel(f"copy gain {what} (nats per token)")
    left.set_xticks(sorted(runs["depth"].unique()))
    left.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    depths = sorted(runs["depth"].unique())
    for d, colour in zip(depths, _colours(len(depths))):
        g = runs[runs["depth"] == d]
        right.scatter(g["gain"], g["loss"], s=16, color=colour, label=f"depth {int(d)}")
    right.set_xlabel(f"copy gain {what} (nats per token)")
    right.set_ylabel("validation loss (nats per token)")
    right.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    t = c.get("tokens") or []
    budget = "" if not t else f"; {t[0]:.3g} tokens" if len(t) == 1 else f"; {t[0]:.3g} to {t[-1]:.3g} tokens"
    fig.suptitle(
        f"In-context copying: mean and 95% interval over seeds{budget}\nruns: {c['rule']}",
        fontsize=9,
    )
    fig.tight_layout()
    return fig
