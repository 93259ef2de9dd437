"""Figure builders for the depth–width report; each returns a matplotlib Figure (Agg, never shown).

Views after Kaplan et al. 2020 (Figure 5: aspect ratio; Figure 6: loss vs N per depth; Figure 2:
learning curves) and Levine et al. 2020 (transition width vs depth, L_th = log_b d). Every builder
reads the data and the stored report only, so `depthwidth plot` redraws without refitting.
"""

from __future__ import annotations

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import cm, colors  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from analysis.powerlaw import FitResult  # noqa: E402
from depthwidth.published import KAPLAN_2020, LEVINE_INTERCEPT, LEVINE_SLOPE, THEORY_BASE  # noqa: E402


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


def loss_vs_n(runs: pd.DataFrame, report: dict) -> Figure:
    """Kaplan Figure 6 view: loss vs non-embedding N per depth, fits, crossovers marked."""
    fig = Figure(figsize=(7, 5))
    ax = fig.add_subplot()
    col = _depth_colours(runs["depth"].unique())
    per_depth = report["power_laws"]["per_depth"]
    for d, g in runs.groupby("depth"):
        ax.scatter(g["n_params"], g["loss"], s=14, color=col[d], label=f"depth {d}", zorder=3)
        f = _fit(per_depth.get(str(d)))
        if f is not None:
            N = np.logspace(np.log10(g["n_params"].min()), np.log10(g["n_params"].max()), 100)
            ax.plot(N, f.predict(N=N), color=col[d], lw=1.2)
    env = _fit(report["power_laws"].get("envelope"))
    if env is not None:
        N = np.logspace(np.log10(runs["n_params"].min()), np.log10(runs["n_params"].max()), 100)
        ax.plot(N, env.predict(N=N), "k--", lw=1, label="deep envelope")
    for c in report["crossovers"]:
        if c["status"] != "ok":
            continue
        f = _fit(per_depth.get(str(c["depths"][1])))
        y = f.predict(N=np.array([c["n_params"]]))[0]
        xerr = None
        if c.get("n_params_ci"):
            lo, hi = c["n_params_ci"]
            xerr = [[max(c["n_params"] - lo, 0)], [max(hi - c["n_params"], 0)]]
        ax.errorbar([c["n_params"]], [y], xerr=xerr, fmt="x", color="k", ms=7, capsize=3, zorder=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("non-embedding parameters N")
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title("Loss vs N per depth; x = crossover (deeper starts to win)")
    ax.legend(fontsize=7, ncol=2)
    return fig


def threshold_plot(report: dict, depths) -> Figure:
    """Transition width vs depth on a log axis: fitted line with band, theory 3^L, Levine's line."""
    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.add_subplot()
    thr = report["threshold"]
    tf, kf = thr["transition_fit"], thr["knee_fit"]
    L = np.linspace(max(0.5, min(depths) - 0.5), max(depths) + 0.5, 100)
    ax.plot(L, THEORY_BASE ** L, "k:", label="theory d = 3^L (Levine et al. 2020)")
    ax.plot(L, np.exp(LEVINE_INTERCEPT + LEVINE_SLOPE * L), color="grey", ls="-.",
            label=f"Levine et al. empirical d* = exp({LEVINE_INTERCEPT} + {LEVINE_SLOPE} L)")
    if thr.get("base"):
        ax.plot(L, thr["base"] ** L, color="tab:red", label=f"headline b = {thr['base']:.3g}")
    for fit_, colour, name in ((tf, "tab:blue", "crossovers"), (kf, "tab:green", "knees")):
        pts = fit_.get("points") or []
        if pts:
            ax.scatter([p["depth"] for p in pts], [p["width"] for p in pts], color=colour,
                       zorder=3, label=f"transition widths ({name})")
        if fit_.get("status") == "ok":
            ax.plot(L, np.exp(fit_["a"] + fit_["beta"] * L), color=colour, lw=1,
                    label=f"fit log d = a + {fit_['beta']:.3g} L ({name})")
            band = fit_.get("band")
            if band:
                ax.fill_between(band["depth"], band["width_lo"], band["width_hi"], color=colour,
                                alpha=0.2, lw=0)
    ax.set_yscale("log")
    ax.set_ylim(1, max(1e4, THEORY_BASE ** max(depths)))
    ax.set_xlabel("depth L")
    ax.set_ylabel("transition width d")
    ax.set_title("Depth threshold: width at which depth L stops paying")
    ax.legend(fontsize=7)
    return fig


def _kappa_fit(report: dict) -> FitResult | None:
    reg = report["regimes"]
    name = reg.get("preferred") if reg.get("preferred") in ("two_regime", "combined") else "two_regime"
    return _fit(reg["models"].get(name))


def loss_vs_depth(runs: pd.DataFrame, report: dict, max_panels: int = 6) -> Figure:
    """Loss vs depth at fixed widths with the two-regime fit; each width's L_th marked, the
    double-exponential region (L < L_th) shaded."""
    widths = np.sort(runs["width"].unique())
    if len(widths) > max_panels:
        widths = widths[np.unique(np.linspace(0, len(widths) - 1, max_panels).round().astype(int))]
    ncol = min(3, len(widths))
    nrow = int(np.ceil(len(widths) / ncol))
    height = 3.2 * nrow + 1.0  # margins in inches: title and note above, axis labels below
    fig = Figure(figsize=(4 * ncol, height))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.6 / height, top=1 - 0.8 / height,
                        hspace=0.5, wspace=0.3)
    f = _kappa_fit(report)
    b = f.params["b"] if f is not None else None
    if f is None:
        fig.text(0.5, 1 - 0.5 / height, "no identified threshold law to draw (see the report)",
                 ha="center", fontsize=8, color="grey")
    for k, w in enumerate(widths):
        ax = fig.add_subplot(nrow, ncol, k + 1)
        g = runs[runs["width"] == w]
        ax.scatter(g["depth"], g["loss"], s=12, color="k", zorder=3)
        Lmax = g["depth"].max() + 0.5
        if f is not None:
            L = np.linspace(0.6, Lmax, 120)
            per_layer = float(np.mean(g["n_params"] / g["depth"]))  # N grows linearly in depth
            cols = dict(N=per_layer * L, depth=L, width=np.full_like(L, w))
            if "D" in f.law.terms:  # the data-aware law, drawn at these runs' final tokens
                cols["D"] = np.full_like(L, float(g["tokens"].mean()))
            if np.all(np.isfinite(cols.get("D", [1.0]))):
                ax.plot(L, f.predict(**cols), color="tab:red", lw=1.2, label=f"{f.name} fit")
            lth = np.log(w) / np.log(b)
            ax.axvspan(0.5, min(lth, Lmax), color="tab:orange", alpha=0.12, lw=0)
            ax.axvline(lth, color="tab:red", ls="--", lw=1, label=f"L_th = log_{b:.2g} d = {lth:.2g}")
        ax.axvline(np.log(w) / np.log(THEORY_BASE), color="k", ls=":", lw=1, label="log_3 d")
        ax.set_xlim(0.5, Lmax)
        ax.set_title(f"width {w:g}", fontsize=9)
        ax.set_xlabel("depth L")
        ax.set_ylabel("loss")
        ax.legend(fontsize=6)
    fig.suptitle("Loss vs depth at fixed width (shaded: double-exponential regime)")
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
    cfg = runs.groupby(["depth", "width"], as_index=False).agg(loss=("loss", "mean"),
                                                               n_params=("n_params", "mean"))
    interp = _interpolators(cfg)
    rel, why = [], []
    for r in cfg.itertuples():
        ln = np.log(r.n_params)
        others = [float(np.exp(np.interp(ln, x, y))) for d, (x, y) in interp.items()
                  if d != r.depth and x[0] - 1e-9 <= ln <= x[-1] + 1e-9]
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
    other depth covers are hatched; cells not run are blank."""
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
        mesh = ax.pcolormesh(edges_x, edges_y, np.ma.masked_invalid(M), cmap="viridis_r",
                             shading="flat")
        fig.colorbar(mesh, ax=ax, label="loss / best loss at equal N (measured or interpolated)")
    for i, j in zip(*np.nonzero(measured & ~np.isfinite(M))):
        ax.fill_between([j - 0.5, j + 0.5], i - 0.5, i + 0.5, facecolor="none", edgecolor="grey",
                        hatch="///", lw=0)
    ax.fill_between([], [], [], facecolor="none", edgecolor="grey", hatch="///",
                    label="run, but no other depth at its N")
    # Threshold lines in row/column coordinates: L_th(d) placed between the rows of the depths
    # around it (rows are the depths run, evenly spaced, so the line bends where depths are sparse).
    cols = np.arange(len(widths))
    row_of = lambda L: np.interp(L, depths, np.arange(len(depths)), left=-0.5, right=len(depths) - 0.5)
    ax.plot(cols, row_of(np.log(widths) / np.log(THEORY_BASE)), "k:", lw=2,
            label="L = log_3 d (theory)")
    thr = report["threshold"]
    base = thr.get("base") if thr.get("claimed") else None
    if base:
        ax.plot(cols, row_of(np.log(widths) / np.log(base)), "r--", lw=2,
                label=f"L = log_{base:.3g} d (fitted)")
    ax.set_xticks(cols, [f"{w:g}" for w in widths], rotation=45 if len(widths) > 8 else 0, fontsize=8)
    ax.set_yticks(np.arange(len(depths)), [str(int(d)) for d in depths], fontsize=8)
    ax.set_xlim(-0.5, len(widths) - 0.5)
    ax.set_ylim(-0.5, len(depths) - 0.5)
    ax.set_xlabel("width d (the widths run)")
    ax.set_ylabel("depth L (the depths run)")
    ax.set_title("Depth × width phase map (blank: not run)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    fig.subplots_adjust(bottom=0.24)
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
        ax.plot(np.array(b["aspect_ratio"])[o], 100 * np.array(b["loss_increase"])[o], "o-",
                color=cmap(norm(b["n_params"])), ms=4)
    if norm is not None:
        fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="N of the band")
    ax.axhline(100 * KAPLAN_2020["shape"]["max_loss_increase"], color="grey", ls=":",
               label="Kaplan et al.: within 3% over 40x")
    ax.set_xscale("log")
    ax.set_xlabel("aspect ratio d / L")
    ax.set_ylabel("loss increase over the band's best (%)")
    ax.set_title("Shape sensitivity at fixed N")
    ax.legend(fontsize=7)
    return fig


def learning_curves(curves: pd.DataFrame, fit_dict: dict | None, ax=None, title: str | None = None,
                    xlabel: str = "step S") -> Figure:
    """Learning curves coloured by N with the L(N,S) fit dashed for a sample of sizes."""
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
    ax.set_ylabel("loss")
    ax.set_title(title or "Learning curves and the L(N,S) fit (dashed)")
    return fig


def side_by_side(curves: pd.DataFrame | None, ours: dict | None, digitized: pd.DataFrame,
                 theirs: dict) -> Figure:
    """Our learning curves beside digitized published ones, each with its own L(N,S) fit."""
    fig = Figure(figsize=(12, 4.5))
    fig.subplots_adjust(left=0.06, right=0.97, bottom=0.12, wspace=0.25)
    a1, a2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    if curves is not None and len(curves):
        learning_curves(curves, ours, ax=a1, title="the analysed runs, with their L(N,S) fit")
    else:
        _note(a1, "no learning curves in this store")
    learning_curves(digitized, theirs, ax=a2, title="Kaplan et al. 2020 Figure 2 (digitized), same code",
                    xlabel="step S = tokens / 2^19")
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
        depths = [depths[i] for i in np.unique(np.linspace(0, len(depths) - 1, max_panels).round().astype(int))]
    ncol = min(4, len(depths))
    nrow = int(np.ceil(len(depths) / ncol))
    fig = Figure(figsize=(3.6 * ncol, 3.0 * nrow + 0.6))
    cmap = matplotlib.colormaps["viridis"]
    widths = sorted(s["width"].unique())
    col = {w: cmap(0.9 * i / max(1, len(widths) - 1)) for i, w in enumerate(widths)}
    for k, d in enumerate(depths):
        ax = fig.add_subplot(nrow, ncol, k + 1)
        for (w, *rest), g in s[s["depth"] == d].groupby(["width"] + [c for c in ("tokens",)
                                                                     if c in tuning["shape_columns"]]):
            g = g.sort_values("lr")
            ax.plot(g["lr"], g["loss"], marker="o", ms=3, color=col[w], lw=1.2,
                    label=f"width {w:g}" if k == 0 else None)
            ax.fill_between(g["lr"], g["loss_min"], g["loss_max"], color=col[w], alpha=0.12, lw=0)
            b = best[(best["depth"] == d) & (best["width"] == w)]
            for _, r in b.iterrows():
                y = g.loc[np.isclose(g["lr"], r["lr"]), "loss"]
                ax.plot([r["lr"]], [y.iloc[0] if len(y) else np.nan], marker="*", ms=12,
                        mec="k", mfc="none" if r["at_edge"] else col[w], zorder=4)
        ax.set_xscale("log")
        lrs = sorted(s.loc[s["depth"] == d, "lr"].unique())
        ax.set_xticks(lrs, [f"{v:.2g}" for v in lrs])  # the swept values, not decades
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(f"depth {d}", fontsize=9)
        ax.set_xlabel("learning rate", fontsize=8)
        ax.set_ylabel("loss", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.legend(fontsize=7, loc="upper right", ncol=min(4, len(widths)))
    fig.suptitle(f"Loss vs learning rate per shape (★ chosen; hollow = at the grid's edge); "
                 f"parametrization: {', '.join(tuning['parametrization'])}", fontsize=9, x=0.4)
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
        a1.plot(n, p["E"] + p["A"] * n ** -p["alpha"] + p["B"] * d ** -p["beta"], color=cmap(norm(c)),
                lw=1.2)
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=a1, label="C = 6 N D (FLOP)")
    a1.set_xscale("log")
    a1.set_xlabel("parameters N")
    a1.set_ylabel("loss")
    a1.set_title("L(N, D) fit along lines of constant compute (within 10^±0.25)")
    co = chin["compute_optimal"]
    al = co["allocation"]
    a2.scatter(C, N, s=6, color="lightgrey", label="data (C, N)")
    a2.plot(al["C"], al["N"], color="tab:red", label=f"ours N*(C): a = {co['a']:.3f}")
    a2.plot(al["C"], al["D"], color="tab:blue", label=f"ours D*(C): b = {co['b']:.3f}")
    for key, colour in (("N", "tab:red"), ("D", "tab:blue")):
        if al.get(f"{key}_ci"):
            a2.fill_between(al["C"], al[f"{key}_ci"][0], al[f"{key}_ci"][1], color=colour,
                            alpha=0.2, lw=0)
    pub = chin["published"]
    for key, style, name in (("besiroglu2024", "--", "Besiroglu et al. 2024"),
                             ("hoffmann2022", ":", "Hoffmann et al. 2022")):
        a2.plot(al["C"], co[key]["N"], "k" + style, lw=1,
                label=f"{name} N*: a = {pub[key]['compute_optimal']['a']:.3f}")
    a2.axvspan(al["data_C_range"][1], al["C"][-1], color="grey", alpha=0.08, lw=0)
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_xlabel("training compute C (FLOP)")
    a2.set_ylabel("compute-optimal N*(C) and D*(C)")
    a2.set_title("Compute-optimal allocation, 95% bands (shaded: beyond the data)", fontsize=10)
    a2.legend(fontsize=7)
    return fig


def make_all(runs: pd.DataFrame, curves: pd.DataFrame, report: dict,
             points: pd.DataFrame | None = None) -> tuple[dict, dict]:
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
    depths = sorted(int(d) for d in runs["depth"].unique())
    figs["loss_vs_n"] = loss_vs_n(runs, report)
    figs["threshold"] = threshold_plot(report, depths)
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
    return figs, skipped
