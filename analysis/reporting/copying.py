"""The copying probe's figure (depthwidth/copyprobe.py; docs/science.md §11): does a model copy
in context, by shape, and does its loss follow? Drawn when the runs carry `copy_gain`.

Left: the final copy gain (first half's loss less the repeat's, nats) against depth, one line per
width through the seed means, each run a point: a model without induction heads sits near 0.
Right: each run's final validation loss against its copy gain, coloured by depth: if the loss
step from one layer to two is the copying step, the depth-1 runs sit apart on both axes at once.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

COLUMN = "copy_gain"


def has_probe(runs: pd.DataFrame) -> bool:
    return COLUMN in runs.columns and runs[COLUMN].notna().any()


def longest_budget(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs at each shape's largest token budget (the copying a shape ends with)."""
    if "tokens" not in runs.columns:
        return runs
    top = runs.groupby(["depth", "width"])["tokens"].transform("max")
    return runs[runs["tokens"] == top]


def copying_plot(runs: pd.DataFrame) -> Figure:
    r = longest_budget(runs[runs[COLUMN].notna()])
    fig = Figure(figsize=(10.5, 4.0))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    widths = sorted(r["width"].unique())
    cmap = matplotlib.colormaps["viridis"]
    for i, w in enumerate(widths):
        g = r[r["width"] == w]
        colour = cmap(0.9 * i / max(1, len(widths) - 1))
        left.scatter(g["depth"], g[COLUMN], s=10, color=colour, alpha=0.5)
        mean = g.groupby("depth")[COLUMN].mean()
        left.plot(mean.index, mean.to_numpy(), marker="o", ms=4, color=colour, label=f"width {int(w)}")
    left.axhline(0, color="0.6", lw=0.8)
    left.set_xlabel("depth (layers)")
    left.set_ylabel("copy gain (nats): first half's loss − the repeat's")
    left.set_xticks(sorted(r["depth"].unique()))
    left.legend(fontsize=7, loc="best")
    depths = sorted(r["depth"].unique())
    dmap = matplotlib.colormaps["plasma"]
    for j, d in enumerate(depths):
        g = r[r["depth"] == d]
        right.scatter(
            g[COLUMN],
            g["final_val_loss"],
            s=14,
            color=dmap(0.85 * j / max(1, len(depths) - 1)),
            label=f"depth {int(d)}",
        )
    right.set_xlabel("copy gain (nats)")
    right.set_ylabel("final validation loss (nats)")
    right.legend(fontsize=7, loc="best", ncol=2)
    budget = f" at each shape's largest budget ({int(np.max(r['tokens'])):,} tokens)" if "tokens" in r else ""
    fig.suptitle(f"In-context copying by shape{budget}", fontsize=10)
    fig.tight_layout()
    return fig
