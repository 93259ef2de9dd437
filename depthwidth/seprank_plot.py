"""The seprank figure (`depthwidth seprank --plot`): measured separation ranks against depth per
width beside the monomial bound, and the growth per added layer (docs/science.md §5)."""

from __future__ import annotations

from math import log

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

from depthwidth import theory  # noqa: E402


def plot_seprank(rows: list[dict]) -> Figure:
    """Left: measured rank vs depth per width (solid), the monomial bound (dashed), L_th (▲).
    Right: ln rank(L) / ln rank(L-1) against L - L_th: 3 while each layer cubes the rank
    (double-exponential regime), falling towards 1 past the threshold."""
    fig = Figure(figsize=(12, 4.8))
    ax, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    widths = sorted({r["width"] for r in rows})
    cmap = matplotlib.colormaps["viridis"]
    for n, d in enumerate(widths):
        color = cmap(n / max(1, len(widths) - 1) * 0.9)
        mine = sorted((r for r in rows if r["width"] == d), key=lambda r: r["depth"])
        ax.plot(
            [r["depth"] for r in mine], [float(r["bound"]) for r in mine], "--", color=color, lw=1, alpha=0.7
        )
        ok = [r for r in mine if r["status"] == "ok"]
        ax.plot(
            [r["depth"] for r in ok], [r["rank"] for r in ok], "o-", color=color, lw=1.8, label=f"d = {d}"
        )
        ax.plot(
            [theory.threshold_depth(d)],
            [0.0],
            "^",
            color=color,
            ms=9,
            clip_on=False,
            transform=ax.get_xaxis_transform(),
        )  # x in data, y at the bottom of the axes
        steps = [
            (b["depth"] - theory.threshold_depth(d), log(b["rank"]) / log(a["rank"]))
            for a, b in zip(ok, ok[1:])
            if b["depth"] == a["depth"] + 1 and a["rank"] > 1
        ]
        if steps:
            ax2.plot(*zip(*steps), "o-", color=color, label=f"d = {d}")
    ax.set_yscale("log")
    ax.set_xlabel("depth L")
    ax.set_ylabel("separation rank (exact, over GF(p))")
    ax.set_xticks(sorted({r["depth"] for r in rows}))
    ax.set_xlim(
        min(0.5, min(theory.threshold_depth(d) for d in widths) - 0.2), max(r["depth"] for r in rows) + 0.3
    )
    r0 = rows[0]
    ax.set_title(
        f"T = {r0['tokens']} tokens, {r0['heads']} head(s)"
        f"{', residual' if r0['residual'] else ''}: measured rank (solid) vs "
        f"C(|P|d + 3^L, 3^L) (dashed)\n▲ marks L_th = log_3 d for each width d",
        fontsize=9,
    )
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    ax.grid(True, which="major", alpha=0.3)
    ax2.axhline(3.0, color="0.4", ls=":", lw=1)
    ax2.axhline(1.0, color="0.4", ls=":", lw=1)
    ax2.axvline(0.0, color="0.4", lw=0.8)
    ax2.set_xlabel("L - L_th  (depth past the threshold; the step L-1 -> L)")
    ax2.set_ylabel("ln rank(L) / ln rank(L-1)")
    ax2.set_ylim(0.8, 3.3)
    ax2.set_title(
        "growth per added layer: 3 = rank cubed (double-exponential),\n"
        "towards 1 = saturated (exponential in L and d)",
        fontsize=9,
    )
    ax2.grid(True, alpha=0.3)
    if ax2.lines[3:]:
        ax2.legend(fontsize=8, ncol=2, loc="lower left")
    fig.tight_layout()
    return fig
