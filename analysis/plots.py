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
    fig = Figure(figsize=(4 * ncol, 3.2 * nrow))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.1, top=0.88, hspace=0.5, wspace=0.3)
    f = _kappa_fit(report)
    b = f.params["b"] if f is not None else None
    for k, w in enumerate(widths):
        ax = fig.add_subplot(nrow, ncol, k + 1)
        g = runs[runs["width"] == w]
        ax.scatter(g["depth"], g["loss"], s=12, color="k", zorder=3)
        Lmax = g["depth"].max() + 0.5
        if f is not None:
            L = np.linspace(0.6, Lmax, 120)
            per_layer = float(np.mean(g["n_params"] / g["depth"]))  # N grows linearly in depth
            ax.plot(L, f.predict(N=per_layer * L, depth=L, width=np.full_like(L, w)), color="tab:red",
                    lw=1.2, label=f"{f.name} fit")
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


def phase_map(runs: pd.DataFrame, report: dict) -> Figure:
    """Depth × width map of loss over the best fitted loss at equal N, with L = log_b d overlaid
    for b = 3 and the fitted b."""
    fig = Figure(figsize=(7, 4.8))
    ax = fig.add_subplot()
    cfg = runs.groupby(["depth", "width"], as_index=False).agg(loss=("loss", "mean"),
                                                               n_params=("n_params", "mean"))
    fits = {int(d): _fit(v) for d, v in report["power_laws"]["per_depth"].items()}
    fits = {d: f for d, f in fits.items() if f is not None}
    rng = runs.groupby("depth")["n_params"].agg(["min", "max"])
    best = np.full(len(cfg), np.inf)
    for d, f in fits.items():
        lo, hi = rng.loc[d]
        N = cfg["n_params"].to_numpy(float)
        cover = (N >= lo * (1 - 1e-9)) & (N <= hi * (1 + 1e-9))
        best = np.where(cover, np.minimum(best, f.predict(N=N)), best)
    best = np.where(np.isfinite(best), best, cfg["loss"].min())
    cfg["rel"] = cfg["loss"] / np.minimum(best, cfg["loss"].to_numpy(float))
    depths, widths = np.sort(cfg["depth"].unique()), np.sort(cfg["width"].unique())
    M = np.full((len(depths), len(widths)), np.nan)
    for r in cfg.itertuples():
        M[np.searchsorted(depths, r.depth), np.searchsorted(widths, r.width)] = r.rel
    ex = lambda v: np.r_[v[0] ** 1.5 / v[1] ** 0.5, np.sqrt(v[:-1] * v[1:]), v[-1] ** 1.5 / v[-2] ** 0.5] \
        if len(v) > 1 else np.array([v[0] / 1.4, v[0] * 1.4])
    ey = np.r_[depths - 0.5, depths[-1] + 0.5]
    mesh = ax.pcolormesh(ex(widths.astype(float)), ey, M, cmap="viridis_r", shading="flat")
    fig.colorbar(mesh, ax=ax, label="loss / best fitted loss at equal N")
    wgrid = np.logspace(np.log10(ex(widths.astype(float))[0]), np.log10(ex(widths.astype(float))[-1]), 100)
    ax.plot(wgrid, np.log(wgrid) / np.log(THEORY_BASE), "w:", lw=2, label="L = log_3 d (theory)")
    base = report["threshold"].get("base")
    if base:
        ax.plot(wgrid, np.log(wgrid) / np.log(base), "r--", lw=2, label=f"L = log_{base:.3g} d (fitted)")
    ax.set_xscale("log")
    ax.set_ylim(ey[0], ey[-1])
    ax.set_xlabel("width d")
    ax.set_ylabel("depth L")
    ax.set_title("Depth × width phase map")
    ax.legend(fontsize=7, loc="upper left")
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
        learning_curves(curves, ours, ax=a1, title="ours")
    else:
        _note(a1, "no learning curves in this store")
    learning_curves(digitized, theirs, ax=a2, title="Kaplan et al. 2020 Figure 2 (digitized)",
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


def make_all(runs: pd.DataFrame, curves: pd.DataFrame, report: dict) -> tuple[dict, dict]:
    """Every report figure that the data allow: ({name: Figure}, {name: reason skipped})."""
    figs, skipped = {}, {}
    if runs.empty:
        return figs, {"all": "no transformer runs with status ok"}
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
