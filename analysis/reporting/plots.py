"""Figure builders for the depth–width report; each returns a matplotlib Figure (Agg, never shown).

Views after Kaplan et al. 2020 (Figure 5: aspect ratio; Figure 6: loss vs N per depth; Figure 2:
learning curves) and Levine et al. 2020 (transition width vs depth, L_th = log_b d). Every builder
reads the data and the stored report only, so `depthwidth plot` redraws without refitting.
"""

from __future__ import annotations

import textwrap

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import cm, colors  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from analysis.fitting.powerlaw import FitResult  # noqa: E402
from depthwidth.published import KAPLAN_2020, LEVINE_INTERCEPT, LEVINE_SLOPE, THEORY_BASE  # noqa: E402

# Every loss axis names its unit: a cross-entropy in nats per token (a byte, for byte-level text).
LOSS_UNIT = "nats per token"


def _fit(d: dict | None) -> FitResult | None:
    if not d or d.get("status") != "ok" or not d.get("theta"):
        return None
    return FitResult.from_dict(d)


def _depth_colours(depths) -> dict:
    cmap = matplotlib.colormaps["plasma"]
    depths = sorted(depths)
    return {d: cmap(0.85 * i / max(1, len(depths) - 1)) for i, d in enumerate(depths)}


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", wrap=True, fontsize=9)


def plain_log_ticks(ax, axis: str = "y") -> None:
    """A log axis spanning less than a decade has at most one major tick: label its minor ticks
    in plain numbers (2.7, 2.8) instead of 2.85×10^0."""
    get = ax.get_ylim if axis == "y" else ax.get_xlim
    lo, hi = sorted(get())
    if lo > 0 and hi / lo < 10:
        a = ax.yaxis if axis == "y" else ax.xaxis
        a.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.3g"))
        a.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.3g"))
        ticks = matplotlib.ticker.MaxNLocator(nbins=5).tick_values(lo, hi)
        a.set_major_locator(matplotlib.ticker.FixedLocator(ticks[(ticks >= lo) & (ticks <= hi)]))
        a.set_minor_locator(matplotlib.ticker.NullLocator())


def loss_vs_n(runs: pd.DataFrame, report: dict) -> Figure:
    """Kaplan Figure 6 view: loss vs non-embedding N per depth with its fit (a depth whose fit is
    not identified has its points joined, thin), the deep envelope, and crossovers with their
    intervals where any is found."""
    fig = Figure(figsize=(9.5, 5))
    ax = fig.add_subplot()
    depths = sorted(runs["depth"].unique())
    col = _depth_colours(depths)
    per_depth = report["power_laws"]["per_depth"]
    many = len(depths) > 8  # then a colour bar names the depths, and the legend the kinds of line
    named = set()

    def label(kind: str, own: str) -> str | None:
        if not many:
            return own
        if kind in named:
            return None
        named.add(kind)
        return kind

    for d, g in runs.groupby("depth"):
        f = _fit(per_depth.get(str(d)))
        sizes = g["n_params"].nunique()
        why = (per_depth.get(str(d)) or {}).get("status", "none").replace("_", " ")
        ax.scatter(
            g["n_params"],
            g["loss"],
            s=14,
            color=col[d],
            zorder=3,
            label=None if many or f is not None or sizes > 1 else f"depth {d}: one size, no fit ({why})",
        )
        if f is not None:
            N = np.logspace(np.log10(g["n_params"].min()), np.log10(g["n_params"].max()), 100)
            ax.plot(N, f.predict(N=N), color=col[d], lw=1.2, label=label("per-depth fit", f"depth {d}: fit"))
        elif sizes > 1:
            m = g.groupby("n_params")["loss"].mean().sort_index()
            ax.plot(
                m.index,
                m.to_numpy(),
                color=col[d],
                lw=0.8,
                ls=(0, (4, 2)),
                label=label("points joined (no per-depth fit)", f"depth {d}: points joined (no fit: {why})"),
            )
    if many:
        cmap = colors.ListedColormap([col[d] for d in depths])
        bar = fig.colorbar(
            cm.ScalarMappable(norm=colors.Normalize(-0.5, len(depths) - 0.5), cmap=cmap), ax=ax, label="depth"
        )
        shown = np.unique(np.linspace(0, len(depths) - 1, min(len(depths), 10)).round().astype(int))
        bar.set_ticks(shown, labels=[str(depths[i]) for i in shown])
    env = _fit(report["power_laws"].get("envelope"))
    if env is not None:
        N = np.logspace(np.log10(runs["n_params"].min()), np.log10(runs["n_params"].max()), 100)
        ax.plot(N, env.predict(N=N), "k--", lw=1, label="deep envelope fit")
    found = [c for c in report["crossovers"] if c["status"] == "ok"]
    for k, c in enumerate(found):
        f = _fit(per_depth.get(str(c["depths"][1])))
        y = f.predict(N=np.array([c["n_params"]]))[0]
        xerr = None
        if c.get("n_params_ci"):
            lo, hi = c["n_params_ci"]
            xerr = [[max(c["n_params"] - lo, 0)], [max(hi - c["n_params"], 0)]]
        ax.errorbar(
            [c["n_params"]],
            [y],
            xerr=xerr,
            fmt="x",
            color="k",
            ms=7,
            capsize=3,
            zorder=4,
            label="crossover (deeper starts to win), 95% interval" if k == 0 else None,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_ticks(ax, "y")
    ax.set_xlabel("non-embedding parameters N")
    ax.set_ylabel(f"validation loss ({LOSS_UNIT})")
    ax.set_title("Loss vs N per depth" + ("; x = crossover" if found else "; no crossover in range"))
    # beside the axes, never over the points (a legend inside covers some of them at any place)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def _visible(y: np.ndarray, lo: float, hi: float) -> bool:
    y = np.asarray(y, float)
    return bool(np.any(np.isfinite(y) & (y >= lo) & (y <= hi)))


def _shape_sides(ax, shapes: pd.DataFrame, b: float | None) -> None:
    """The shapes run: filled below L_th = log_b d, hollow above (b = 3 without a fitted b)."""
    side_b = b or THEORY_BASE
    below = shapes["depth"] < np.log(shapes["width"].astype(float)) / np.log(side_b)
    which = f"fitted L_th (b = {side_b:.3g})" if b else "log_3 d (no fitted b)"
    for mask, face, words in ((below, "tab:blue", "below"), (~below, "none", "above")):
        if mask.any():
            ax.scatter(
                shapes.loc[mask, "width"],
                shapes.loc[mask, "depth"],
                s=40,
                marker="o",
                facecolors=face,
                edgecolors="tab:blue",
                zorder=4,
                label=f"{int(mask.sum())} shape{'s' if mask.sum() > 1 else ''} run {words} {which}",
            )


def _fitted_lth(ax, w: np.ndarray, thr: dict, ylim: tuple) -> list[str]:
    """The fitted L_th = log_b d and its 95% band where they reach the view; notes for the rest."""
    b, ci = thr["base"], thr.get("base_ci")
    status = "claimed" if thr.get("claimed") else "not claimed"
    lth = np.log(w) / np.log(b)
    notes = []
    if _visible(lth, *ylim):
        ax.plot(w, lth, color="tab:red", lw=1.5, label=f"fitted L_th = log_{b:.3g} d ({status})")
    else:
        notes.append(f"fitted L_th = log_{b:.3g} d lies outside this view")
    if ci and None not in ci:
        lo, hi = np.log(w) / np.log(max(ci)), np.log(w) / np.log(min(ci))
        if _visible(np.r_[lo, hi], *ylim) or (lo.min() < ylim[0] and hi.max() > ylim[1]):
            ax.fill_between(
                w,
                lo,
                np.minimum(hi, 10 * ylim[1]),
                color="tab:red",
                alpha=0.15,
                lw=0,
                label=f"95% band, b in [{ci[0]:.3g}, {ci[1]:.3g}]",
            )
    return notes


def _share_inside(y: np.ndarray, lo: float, hi: float) -> float:
    """The share of a curve's samples (evenly spaced along the view's x) inside [lo, hi]."""
    y = np.asarray(y, float)
    return float(np.mean(np.isfinite(y) & (y >= lo) & (y <= hi)))


def _references(ax, w: np.ndarray, ylim: tuple) -> list[str]:
    """The theory's log_3 d and Levine et al.'s empirical d*(L), each drawn (and named in the
    legend) only where a tenth of it or more lies inside the view; otherwise a note says so."""
    notes = []
    for y, style, name in (
        (
            np.log(w) / np.log(THEORY_BASE),
            dict(color="k", ls=":", lw=1.2),
            "theory L_th = log_3 d (Levine et al. 2020)",
        ),
        (
            (np.log(w) - LEVINE_INTERCEPT) / LEVINE_SLOPE,
            dict(color="grey", ls="-.", lw=1),
            "Levine et al. empirical d*(L)",
        ),
    ):
        inside = np.isfinite(y) & (y >= ylim[0]) & (y <= ylim[1])
        if _share_inside(y, *ylim) >= 0.1:
            ax.plot(w, y, label=name, **style)
        elif inside.any():
            notes.append(
                f"{name} falls inside this view only at widths {w[inside].min():.3g}-{w[inside].max():.3g}: not drawn"
            )
        else:
            notes.append(f"{name} lies {'below' if np.nanmax(y) < ylim[0] else 'above'} this view: not drawn")
    return notes


def _transition_lines(ax, thr: dict, w: np.ndarray, ylim: tuple) -> list[str]:
    """The transition points found, and the line log d = a + beta·L through them where its base
    e^beta is a threshold base (> 1); a base at or below 1 would make L_th fall as the width
    grows, which no L_th = log_b d does, so a note says why no line is drawn."""
    notes = []
    for fit_, colour, name in (
        (thr["transition_fit"], "tab:green", "crossovers"),
        (thr["knee_fit"], "tab:purple", "knees"),
    ):
        pts = fit_.get("points") or []
        if pts:
            ax.scatter(
                [p["width"] for p in pts],
                [p["depth"] for p in pts],
                color=colour,
                marker="s",
                s=30,
                zorder=5,
                label=f"transition points ({name})",
            )
        if fit_.get("status") != "ok" or not fit_.get("beta"):
            continue
        if not fit_["base"] > 1:
            notes.append(
                f"no line through the {name}: its base {fit_['base']:.3g} is not above 1, so L_th would "
                f"fall as the width grows; that is no threshold of L_th = log_b d"
            )
            continue
        line = (np.log(w) - fit_["a"]) / fit_["beta"]
        if _visible(line, *ylim):
            ax.plot(w, line, color=colour, lw=1, label=f"line through them: base {fit_['base']:.3g}")
        else:
            notes.append(f"the line through the {name} (base {fit_['base']:.3g}) lies outside this view")
    return notes


def threshold_plot(runs: pd.DataFrame, report: dict) -> Figure:
    """Which shapes lie on which side of the threshold: every shape run at (width, depth), filled
    below L_th and hollow above it (under the fitted b, or b = 3 when there is none), the fitted
    L_th = log_b d with its 95% band, the theory's log_3 d, and the transition points found with
    their fitted line. A base at or below 1 is not a threshold base: it is not drawn, and a note
    under the axes says why. Lines outside the view are named in a note, not in the legend."""
    thr = report["threshold"]
    shapes = runs.groupby(["depth", "width"], as_index=False).size()
    widths = np.sort(shapes["width"].unique()).astype(float)
    w = np.logspace(np.log10(widths.min() / 1.25), np.log10(widths.max() * 1.25), 100)
    b, notes = thr.get("base"), []
    if b is not None and not b > 1:
        notes.append(f"the fitted base b = {b:.3g} is not above 1, so it is no threshold base: no L_th drawn")
        b = None
    # the view is the runs': an unclaimed fit's L_th may lie far past them, and is then named in
    # a note; a claimed one lies inside them (it is located there)
    ylim = (0, float(shapes["depth"].max()) + 1)
    fig = Figure(figsize=(7, 4.8))
    ax = fig.add_subplot()
    _shape_sides(ax, shapes, b)
    notes += _fitted_lth(ax, w, {**thr, "base": b}, ylim) if b else []
    notes += _references(ax, w, ylim)
    notes += _transition_lines(ax, thr, w, ylim)
    ax.set_xscale("log")
    ax.set_xlim(w[0], w[-1])
    ax.set_ylim(*ylim)
    shown = widths[np.unique(np.linspace(0, len(widths) - 1, min(len(widths), 7)).round().astype(int))]
    ax.set_xticks(shown, [f"{v:g}" for v in shown], rotation=45 if len(widths) > 5 else 0)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("width d (ticks: widths run)")
    ax.set_ylabel("depth L")
    claimed = thr.get("claimed") and b and thr.get("base_ci")
    title = "Shapes run against the depth threshold L_th = log_b d"
    if claimed:
        lo, hi = thr["base_ci"]
        title += f":\nb = {b:.3g}, 95% interval [{lo:.3g}, {hi:.3g}] (claimed)"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    lines = [line for n in notes for line in textwrap.wrap(n, 110, subsequent_indent="  ")]
    if lines:
        fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, va="bottom", ha="left", color="dimgrey")
    fig.tight_layout(rect=(0, (0.13 * len(lines) + 0.08) / fig.get_figheight() if lines else 0, 1, 1))
    return fig


def quoted_law(report: dict) -> str:
    """The threshold law the report's text quotes: the headline's, else its cross-check's, else
    the preferred law when it has a threshold, else the two-regime law."""
    thr, reg = report.get("threshold") or {}, report["regimes"]
    for source in (thr, thr.get("cross_check") or {}):
        if source.get("law") in ("two_regime", "combined"):
            return source["law"]
    return reg.get("preferred") if reg.get("preferred") in ("two_regime", "combined") else "two_regime"


def _kappa_fit(report: dict) -> FitResult | None:
    return _fit(report["regimes"]["models"].get(quoted_law(report)))


def _tokens_text(t: float) -> str:
    """A token count in a few characters: 102k, 1.2M, 100B."""
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if t >= div:
            return f"{t / div:.3g}{unit}"
    return f"{t:.3g}"


def token_budgets(runs: pd.DataFrame, most: int = 6) -> tuple[np.ndarray, list[tuple[str, float]]]:
    """Each run's token budget: (index per run, [(name, tokens)]): one budget per distinct count,
    or, past `most` counts, up to 4 bands equal in log tokens, each at its geometric mean. Runs
    without a token count share one budget with NaN tokens."""
    t = runs["tokens"].to_numpy(float) if "tokens" in runs.columns else np.full(len(runs), np.nan)
    known = np.isfinite(t) & (t > 0)
    values = np.unique(t[known])
    if len(values) <= most:
        band = np.searchsorted(values, t)
        at = values
    else:
        edges = np.geomspace(values[0], values[-1], 5)
        band = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, 3)
        at = {k: np.exp(np.log(t[known & (band == k)]).mean()) for k in np.unique(band[known])}
    used = np.unique(band[known])
    index = np.full(len(runs), -1)
    names = []
    for i, k in enumerate(used):
        index[known & (band == k)] = i
        names.append((("" if len(values) <= most else "~") + f"{_tokens_text(at[k])} tokens", float(at[k])))
    if (~known).any():
        index[~known] = len(names)
        names.append(("no token count", np.nan))
    return index, names


def _once(named: set, text: str) -> str | None:
    """A legend label the first time it is drawn: the figure has one legend for all its panels."""
    if text in named:
        return None
    named.add(text)
    return text


def _depth_panel(ax, g: pd.DataFrame, w: float, f: FitResult | None, budgets: list, named: set) -> None:
    """One width's panel: the runs coloured by token budget, the threshold law's curve (one per
    budget, in its colour, when the law has a data term), and each L_th inside the view (the
    double-exponential side shaded only where L_th falls inside it)."""
    lo, Lmax = 0.5, 1.04 * g["depth"].max() + 0.5  # room for the deepest run's marker
    L = np.linspace(0.6, Lmax, 120)
    per_layer = float(np.mean(g["n_params"] / g["depth"]))  # N grows linearly in depth
    cols = dict(N=per_layer * L, depth=L, width=np.full_like(L, w))
    data_term = f is not None and "D" in f.law.terms
    for k, (name, tokens, colour) in enumerate(budgets):
        mine = g[g["_budget"] == k]
        if mine.empty:
            continue
        runs_label = "runs" if len(budgets) == 1 else f"runs, {name}"
        ax.scatter(mine["depth"], mine["loss"], s=12, color=colour, zorder=3, label=_once(named, runs_label))
        if data_term and np.isfinite(tokens):  # the data-aware law, drawn at this budget's tokens
            curve = "tab:red" if len(budgets) == 1 else colour
            y = f.predict(**cols, D=np.full_like(L, tokens))
            ax.plot(L, y, color=curve, lw=1.2, label=_once(named, f"{f.name} fit at {name}"))
    if f is not None and not data_term:
        ax.plot(L, f.predict(**cols), color="tab:red", lw=1.2, label=_once(named, f"{f.name} fit"))
    shown, off = [], []
    if f is not None:
        b = f.params["b"]
        lth = np.log(w) / np.log(b)
        if lo < lth < Lmax:
            ax.axvspan(lo, lth, color="tab:orange", alpha=0.12, lw=0, label=_once(named, "L < L_th"))
            ax.axvline(lth, color="tab:red", ls="--", lw=1, label=_once(named, f"L_th = log_{b:.2g} d"))
            shown.append(f"L_th = {lth:.2g}")
        else:
            off.append(f"L_th = {lth:.2g} (b = {b:.2g})")
    l3 = np.log(w) / np.log(THEORY_BASE)
    if lo < l3 < Lmax:
        ax.axvline(l3, color="k", ls=":", lw=1, label=_once(named, "log_3 d (theory)"))
        shown.append(f"log_3 d = {l3:.2g}")
    else:
        off.append(f"log_3 d = {l3:.2g}")
    ax.set_xlim(lo, Lmax)
    title = f"width {w:g}" + (f": {', '.join(shown)}" if shown else "")
    ax.set_title(title + (f"\n(off view: {'; '.join(off)})" if off else ""), fontsize=8)
    ax.set_xlabel("depth L")
    ax.set_ylabel(f"loss ({LOSS_UNIT})")


def loss_vs_depth(runs: pd.DataFrame, report: dict, max_panels: int = 6) -> Figure:
    """Loss vs depth at fixed widths with the threshold law the report's text quotes (`quoted_law`),
    the runs coloured by token budget
    and, when the law has a data term, its curve drawn at each budget in that budget's colour;
    each width's L_th marked where it falls inside the depths drawn, the double-exponential side
    (L < L_th) shaded up to it. One legend, beside the panels, off the points."""
    widths = np.sort(runs["width"].unique())
    if len(widths) > max_panels:
        widths = widths[np.unique(np.linspace(0, len(widths) - 1, max_panels).round().astype(int))]
    ncol = min(3, len(widths))
    nrow = int(np.ceil(len(widths) / ncol))
    free = nrow * ncol - len(widths)  # empty slots in the last row hold the legend; else beside
    side = 0.0 if free else 2.4  # inches beside the panels for the legend
    fig = Figure(figsize=(4 * ncol + side, 3.4 * nrow + 0.8))
    f = _kappa_fit(report)
    index, names = token_budgets(runs)
    runs = runs.assign(_budget=index)
    cmap = matplotlib.colormaps["viridis"]
    budgets = [
        (name, t, "k" if len(names) == 1 else cmap(0.8 * i / max(1, len(names) - 1)))
        for i, (name, t) in enumerate(names)
    ]
    named: set = set()
    axes = []
    for k, w in enumerate(widths):
        axes.append(fig.add_subplot(nrow, ncol, k + 1))
        _depth_panel(axes[-1], runs[runs["width"] == w], float(w), f, budgets, named)
    title = "Loss vs depth at fixed width" + (f", with the {f.name} law the report quotes" if f else "")
    fig.suptitle(title, fontsize=10)
    if f is None:
        fig.text(
            0.5,
            0.01,
            "no identified threshold law to draw (see the report)",
            ha="center",
            va="bottom",
            fontsize=8,
            color="grey",
        )
    right = 1 - side / fig.get_figwidth()
    fig.tight_layout(rect=(0, 0.04 if f is None else 0, right, 1))
    handles = [h for ax in axes for h in ax.get_legend_handles_labels()[0]]
    labels = [lab for ax in axes for lab in ax.get_legend_handles_labels()[1]]
    if free:
        box = axes[0].get_subplotspec().get_gridspec()[nrow - 1, ncol - free :].get_position(fig)
        fig.legend(handles, labels, fontsize=7, loc="center", bbox_to_anchor=box.bounds)
    else:
        fig.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(right + 0.005, 0.5))
    return fig


def _interpolators(cfg: pd.DataFrame) -> dict:
    """Per depth with two or more widths: log-loss linear in log N between its measured sizes,
    defined only inside them (no extrapolation)."""
    out = {}
    for d, g in cfg.groupby("depth"):
        g = g.sort_values("n_params")
        if len(g) >= 2:
            out[d] = (np.log(g["n_params"].to_numpy(float)), np.log(g["loss"].to_numpy(float)))
    return out


def phase_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """Each measured shape's loss over the best loss any depth reaches at its N, where that best
    is measured or interpolated inside another depth's measured sizes. `rel` is NaN, with
    `why`, where no other depth covers that N: a ratio of 1 there would compare a run with itself."""
    cfg = runs.groupby(["depth", "width"], as_index=False).agg(
        loss=("loss", "mean"), n_params=("n_params", "mean")
    )
    interp = _interpolators(cfg)
    rel, why = [], []
    for r in cfg.itertuples():
        ln = np.log(r.n_params)
        others = [
            float(np.exp(np.interp(ln, x, y)))
            for d, (x, y) in interp.items()
            if d != r.depth and x[0] - 1e-9 <= ln <= x[-1] + 1e-9
        ]
        if not others:
            rel.append(np.nan)
            why.append("no other depth measured at this N")
        else:
            rel.append(r.loss / min(min(others), r.loss))
            why.append("")
    return cfg.assign(rel=rel, why=why)


def phase_map(runs: pd.DataFrame, report: dict) -> Figure:
    """Depth × width map of each shape's loss over the best loss at equal N (measured, or
    interpolated inside another depth's measured sizes), one row per depth and one column per
    width that were run, with L = log_b d overlaid for b = 3 and the claimed b. Cells whose N no
    other depth covers are hatched; cells not run are blank, and the title says so only when
    there is one."""
    fig = Figure(figsize=(7.5, 5))
    ax = fig.add_subplot()
    cfg = phase_cells(runs)
    depths, widths = np.sort(cfg["depth"].unique()), np.sort(cfg["width"].unique())
    M = np.full((len(depths), len(widths)), np.nan)
    measured = np.zeros_like(M, bool)
    for r in cfg.itertuples():
        i, j = np.searchsorted(depths, r.depth), np.searchsorted(widths, r.width)
        M[i, j], measured[i, j] = r.rel, True
    edges_x, edges_y = np.arange(len(widths) + 1) - 0.5, np.arange(len(depths) + 1) - 0.5
    if np.isfinite(M).any():
        mesh = ax.pcolormesh(edges_x, edges_y, np.ma.masked_invalid(M), cmap="viridis_r", shading="flat")
        fig.colorbar(mesh, ax=ax, label="loss / best loss at equal N (measured or interpolated)")
    for k, (i, j) in enumerate(zip(*np.nonzero(measured & ~np.isfinite(M)))):
        ax.fill_between(
            [j - 0.5, j + 0.5],
            i - 0.5,
            i + 0.5,
            facecolor="none",
            edgecolor="grey",
            hatch="///",
            lw=0,
            label="run, but no other depth at its N" if k == 0 else None,
        )
    # Threshold lines in row/column coordinates: L_th(d) placed between the rows of the depths
    # around it (rows are the depths run, evenly spaced, so the line bends where depths are sparse).
    cols = np.arange(len(widths))

    def row_of(L):  # NaN outside the depths run: a line there would sit on the border
        inside = (L >= depths[0]) & (L <= depths[-1])
        return np.where(inside, np.interp(L, depths, np.arange(len(depths))), np.nan)

    thr = report["threshold"]
    base = thr.get("base") if thr.get("claimed") else None
    off = []
    for b, style, name in (
        (THEORY_BASE, "k:", "L = log_3 d (theory)"),
        (base, "r--", f"L = log_{base or 0:.3g} d (fitted)"),
    ):
        if not b:
            continue
        rows = row_of(np.log(widths) / np.log(b))
        if np.isfinite(rows).any():
            ax.plot(cols, rows, style, lw=2, marker="o" if np.isfinite(rows).sum() == 1 else None, label=name)
        else:
            off.append(f"{name.split(' (')[0]} lies outside the depths run")
    if off:
        ax.text(0.5, 1.01, "; ".join(off), transform=ax.transAxes, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(cols, [f"{w:g}" for w in widths], rotation=45 if len(widths) > 8 else 0, fontsize=8)
    ax.set_yticks(np.arange(len(depths)), [str(int(d)) for d in depths], fontsize=8)
    ax.set_xlim(-0.5, len(widths) - 0.5)
    ax.set_ylim(-0.5, len(depths) - 0.5)
    ax.set_xlabel("width d (the widths run)")
    ax.set_ylabel("depth L (the depths run)")
    blank = " (blank: not run)" if not measured.all() else ""
    ax.set_title(f"Depth × width phase map{blank}", pad=14 if off else 6)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    fig.tight_layout()
    return fig


def aspect_ratio(shape: dict) -> Figure:
    """Kaplan Figure 5 view: loss increase vs aspect ratio d/L within fixed-N bands."""
    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.add_subplot()
    cmap = matplotlib.colormaps["viridis"]
    bands = shape.get("bands", [])
    Ns = [b["n_params"] for b in bands]
    norm = colors.LogNorm(min(Ns), max(Ns) * 1.0001) if Ns else None
    for b in bands:
        o = np.argsort(b["aspect_ratio"])
        ax.plot(
            np.array(b["aspect_ratio"])[o],
            100 * np.array(b["loss_increase"])[o],
            "o-",
            color=cmap(norm(b["n_params"])),
            ms=4,
        )
    if norm is not None:
        fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="N of the band")
    ax.axhline(
        100 * KAPLAN_2020["shape"]["max_loss_increase"],
        color="grey",
        ls=":",
        label="Kaplan et al.: within 3% over 40x",
    )
    ax.set_xscale("log")
    ax.set_xlabel("aspect ratio d / L")
    ax.set_ylabel("loss increase over the band's best (%)")
    ax.set_title("Shape sensitivity at fixed N")
    ax.legend(fontsize=7)
    return fig


def learning_curves(
    curves: pd.DataFrame, fit_dict: dict | None, ax=None, title: str | None = None, xlabel: str = "step S"
) -> Figure:
    """Learning curves coloured by N with the L(N,S) fit dashed for a sample of sizes."""
    own = ax is None
    fig = Figure(figsize=(6.5, 4.5)) if ax is None else ax.figure
    ax = fig.add_subplot() if ax is None else ax
    Ns = curves["n_params"].to_numpy(float)
    norm = colors.LogNorm(Ns.min(), Ns.max() * 1.0001)
    cmap = matplotlib.colormaps["viridis"]
    c = curves[curves["step"] > 0].sort_values(["trial_id", "step"])
    ids = c["trial_id"].to_numpy()
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    xy = np.c_[c["step"].to_numpy(float), c["loss"].to_numpy(float)]
    # One collection for all runs: a thousand separate lines take seconds to build and draw.
    segs = np.split(xy, cuts)
    first = np.r_[0, cuts]
    lc = LineCollection(segs, colors=cmap(norm(c["n_params"].to_numpy(float)[first])), lw=0.8, alpha=0.8)
    ax.add_collection(lc)
    ax.update_datalim(xy)
    ax.autoscale_view()
    f = _fit(fit_dict)
    drawn = f is not None
    if f is not None:
        # Only over the steps the fit used (thin_curves drops the first 0.1% of each run).
        s_max = float(curves["step"].max())
        s_min = max(float(curves.loc[curves["step"] > 0, "step"].min()), 1e-3 * s_max)
        S = np.logspace(np.log10(s_min), np.log10(s_max), 100)
        uniq = np.unique(Ns)
        for N in uniq[np.unique(np.linspace(0, len(uniq) - 1, min(12, len(uniq))).round().astype(int))]:
            ax.plot(S, f.predict(N=np.full_like(S, N), S=S), "--", color=cmap(norm(N)), lw=1)
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="N")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"loss ({LOSS_UNIT})")
    ax.set_title(
        title
        or (
            "Learning curves and the L(N,S) fit (dashed)"
            if drawn
            else "Learning curves (no identified L(N,S) fit to draw)"
        ),
        fontsize=10,
    )
    plain_log_ticks(ax, "y")
    plain_log_ticks(ax, "x")
    if own:
        fig.tight_layout()
    return fig


def side_by_side(
    curves: pd.DataFrame | None, ours: dict | None, digitized: pd.DataFrame, theirs: dict
) -> Figure:
    """Our learning curves beside digitized published ones, each with its own L(N,S) fit."""
    fig = Figure(figsize=(12, 4.5))
    fig.subplots_adjust(left=0.06, right=0.97, bottom=0.12, wspace=0.25)
    a1, a2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    if curves is not None and len(curves):
        fitted = "with their L(N,S) fit" if _fit(ours) is not None else "(no identified L(N,S) fit to draw)"
        learning_curves(curves, ours, ax=a1, title=f"the analysed runs {fitted}")
    else:
        _note(a1, "no learning curves in this store")
    learning_curves(
        digitized,
        theirs,
        ax=a2,
        title="Kaplan et al. 2020 Figure 2 (digitized), same code",
        xlabel="step S = tokens / 2^19",
    )
    return fig


def lr_curves(tuning: dict, max_panels: int = 12) -> Figure:
    """The μTransfer view (Yang et al. 2021, Figure 1): seed-mean loss vs learning rate, one panel
    per depth and one line per width (other tuning axes at each shape's best), the chosen
    setting starred (hollow where it sits at the grid's edge), the band spanning the seeds."""
    s, best = pd.DataFrame(tuning["settings"]), pd.DataFrame(tuning["best"])
    others = [a for a in tuning["axes"] if a != "lr"]
    if others:
        s = s.merge(best[list(tuning["shape_columns"]) + others], on=list(tuning["shape_columns"]) + others)
    depths = sorted(s["depth"].unique())
    if len(depths) > max_panels:
        depths = [
            depths[i] for i in np.unique(np.linspace(0, len(depths) - 1, max_panels).round().astype(int))
        ]
    ncol = min(4, len(depths))
    nrow = int(np.ceil(len(depths) / ncol))
    fig = Figure(figsize=(3.6 * ncol, 3.0 * nrow + 0.6))
    cmap = matplotlib.colormaps["viridis"]
    widths = sorted(s["width"].unique())
    col = {w: cmap(0.9 * i / max(1, len(widths) - 1)) for i, w in enumerate(widths)}
    for k, d in enumerate(depths):
        ax = fig.add_subplot(nrow, ncol, k + 1)
        for (w, *_), g in s[s["depth"] == d].groupby(
            ["width"] + [c for c in ("tokens",) if c in tuning["shape_columns"]]
        ):
            g = g.sort_values("lr")
            ax.plot(
                g["lr"],
                g["loss"],
                marker="o",
                ms=3,
                color=col[w],
                lw=1.2,
                label=f"width {w:g}" if k == 0 else None,
            )
            ax.fill_between(g["lr"], g["loss_min"], g["loss_max"], color=col[w], alpha=0.12, lw=0)
            b = best[(best["depth"] == d) & (best["width"] == w)]
            for _, r in b.iterrows():
                y = g.loc[np.isclose(g["lr"], r["lr"]), "loss"]
                ax.plot(
                    [r["lr"]],
                    [y.iloc[0] if len(y) else np.nan],
                    marker="*",
                    ms=12,
                    mec="k",
                    mfc="none" if r["at_edge"] else col[w],
                    zorder=4,
                )
        ax.set_xscale("log")
        lrs = sorted(s.loc[s["depth"] == d, "lr"].unique())
        ax.set_xticks(lrs, [f"{v:.2g}" for v in lrs])  # the swept values, not decades
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(f"depth {d}", fontsize=9)
        ax.set_xlabel("learning rate", fontsize=8)
        ax.set_ylabel(f"loss ({LOSS_UNIT})", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.legend(fontsize=7, loc="upper right", ncol=min(4, len(widths)))
    fig.suptitle(
        f"Loss vs learning rate per shape (★ chosen; hollow = at the grid's edge); "
        f"parametrization: {', '.join(tuning['parametrization'])}",
        fontsize=9,
        x=0.4,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig


def chinchilla_plot(points: pd.DataFrame, chin: dict) -> Figure:
    """Left: loss vs N coloured by compute C = 6ND, with the fitted L(N, D) along lines of
    constant C. Right: the compute-optimal N*(C) and D*(C) with their 95% bands, N* beside
    Hoffmann et al. 2022 and Besiroglu et al. 2024, the data's own (C, N) in grey."""
    fig = Figure(figsize=(12, 4.6))
    fig.subplots_adjust(left=0.07, right=0.97, bottom=0.12, wspace=0.3)
    a1, a2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    N, D = points["n_params"].to_numpy(float), points["tokens"].to_numpy(float)
    C = 6 * N * D
    norm = colors.LogNorm(C.min(), C.max() * 1.0001)
    cmap = matplotlib.colormaps["viridis"]
    a1.scatter(N, points["loss"], c=cmap(norm(C)), s=10, zorder=3)
    p = chin["params"]
    for c in np.quantile(C, [0.05, 0.3, 0.55, 0.8, 0.97]):
        near = np.abs(np.log10(C / c)) <= 0.25  # drawn over the sizes run at about this compute
        if near.sum() < 2:
            continue
        n = np.logspace(np.log10(N[near].min()), np.log10(N[near].max()), 120)
        d = c / (6 * n)
        a1.plot(n, p["E"] + p["A"] * n ** -p["alpha"] + p["B"] * d ** -p["beta"], color=cmap(norm(c)), lw=1.2)
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=a1, label="C = 6 N D (FLOP)")
    a1.set_xscale("log")
    a1.set_xlabel("parameters N")
    a1.set_ylabel(f"loss ({LOSS_UNIT})")
    a1.set_title("L(N, D) fit along lines of constant compute (within 10^±0.25)")
    co = chin["compute_optimal"]
    al = co["allocation"]
    a2.scatter(C, N, s=6, color="lightgrey", label="data (C, N)")
    a2.plot(al["C"], al["N"], color="tab:red", label=f"ours N*(C): N* ∝ C^{co['a']:.3f}")
    # D*'s exponent is not called b here: b is the threshold base of L_th = log_b d
    a2.plot(al["C"], al["D"], color="tab:blue", label=f"ours D*(C): D* ∝ C^{co['b']:.3f}")
    for key, colour in (("N", "tab:red"), ("D", "tab:blue")):
        if al.get(f"{key}_ci"):
            a2.fill_between(al["C"], al[f"{key}_ci"][0], al[f"{key}_ci"][1], color=colour, alpha=0.2, lw=0)
    pub = chin["published"]
    for key, style, name in (
        ("besiroglu2024", "--", "Besiroglu et al. 2024"),
        ("hoffmann2022", ":", "Hoffmann et al. 2022"),
    ):
        a2.plot(
            al["C"],
            co[key]["N"],
            "k" + style,
            lw=1,
            label=f"{name} N*: a = {pub[key]['compute_optimal']['a']:.3f}",
        )
    a2.axvspan(al["data_C_range"][1], al["C"][-1], color="grey", alpha=0.08, lw=0)
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_xlabel("training compute C (FLOP)")
    a2.set_ylabel("compute-optimal N*(C) and D*(C)")
    a2.set_title("Compute-optimal allocation, 95% bands (shaded: beyond the data)", fontsize=10)
    a2.legend(fontsize=7)
    return fig


def make_all(
    runs: pd.DataFrame, curves: pd.DataFrame, report: dict, points: pd.DataFrame | None = None
) -> tuple[dict, dict]:
    """Every report figure that the data allow: ({name: Figure}, {name: reason skipped})."""
    figs, skipped = {}, {}
    if runs.empty:
        return figs, {"all": "no transformer runs with status ok"}
    chin = report.get("chinchilla") or {}
    if chin.get("status") == "ok" and points is not None and len(points):
        figs["chinchilla"] = chinchilla_plot(points, chin)
    elif chin:
        skipped["chinchilla"] = chin.get("reason") or chin.get("status", "")
    if "depth" not in runs.columns:
        if len(curves):
            figs["learning_curves"] = learning_curves(curves, report["learning_curves"]["fit"])
        skipped["shape figures"] = "the input has no depth and width"
        return figs, skipped
    figs["loss_vs_n"] = loss_vs_n(runs, report)
    figs["threshold"] = threshold_plot(runs, report)
    figs["loss_vs_depth"] = loss_vs_depth(runs, report)
    figs["phase_map"] = phase_map(runs, report)
    shape = report["kaplan"]["ours"]["shape"]
    if shape.get("status") == "ok":
        figs["aspect_ratio"] = aspect_ratio(shape)
    else:
        skipped["aspect_ratio"] = shape.get("reason", "")
    if len(curves):
        figs["learning_curves"] = learning_curves(curves, report["learning_curves"]["fit"])
    else:
        skipped["learning_curves"] = "no learning curves in the input"
    tuning = report.get("tuning") or {}
    if "lr" in tuning.get("axes", ()):
        figs["lr_curves"] = lr_curves(tuning)
    else:
        skipped["lr_curves"] = "no learning-rate axis was swept"
    from analysis.reporting.copying import copying_plot

    if (report.get("copying") or {}).get(
        "status"
    ) == "ok":  # the probe of text runs (depthwidth/copyprobe.py)
        figs["copying"] = copying_plot(report["copying"])
    return figs, skipped
