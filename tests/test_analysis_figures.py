"""Every figure the analysis writes shows what it names (analysis.reporting.plots.make_all).

On stores made here (a tuned grid across L_th, a grid wholly below it, Chinchilla-style points)
and on the smoke sweep in ../shared/repro when present, each figure is drawn and checked: every
visible text lies inside the canvas, and every legend entry names an artist that is drawn with
data inside its axes' view.
"""

from pathlib import Path

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import Container
from matplotlib.text import Text

from analysis.fitting import synthetic
from analysis.laws import tokens, tuning
from analysis.readers.inputs import load
from analysis.reporting import plots
from analysis.reporting.report import analyze

REPRO = Path(__file__).resolve().parent.parent.parent / "shared" / "repro"
DRIFT = dict(lr0=3e-3, width_exp=0.0, depth_exp=0.0)


def tuned_store(path, depths, widths, b):
    runs = synthetic.make_tuned_runs(
        "two_regime",
        depths,
        widths,
        dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=b),
        lrs=[1e-3, 3e-3, 1e-2],
        drift=DRIFT,
        seed=5,
    )
    runs, curves = synthetic.make_curves(runs, 0.6, 50.0, steps=[25, 50, 100, 200, 400, 800])
    return synthetic.write_store(path, runs, curves)


def figures_of(source, tmp_path):
    """The report's figures, rebuilt from its data and report as `analyze` builds them."""
    report = analyze(source, out_dir=tmp_path / "report", bootstrap=10, seed=0)
    ds, _ = tuning.apply(load(source), (), "auto", False)
    points, _ = tokens.token_points(ds.runs, ds.curves)
    figs, _ = plots.make_all(ds.runs, ds.curves, report, points)
    assert set(figs) == set(report["figures"]["written"])
    return figs


def _display_points(artist) -> np.ndarray:
    """The artist's data in display coordinates (pixels), whatever its transform."""
    if isinstance(artist, Container):  # an errorbar: its data line
        artist = artist[0]
    if isinstance(artist, matplotlib.lines.Line2D):
        return artist.get_transform().transform(artist.get_xydata())
    if isinstance(artist, matplotlib.collections.PathCollection):  # a scatter: its points
        return artist.get_offset_transform().transform(artist.get_offsets())
    if isinstance(artist, matplotlib.collections.Collection):  # a band: its outline
        verts = [p.vertices for p in artist.get_paths() if len(p.vertices)]
        return artist.get_transform().transform(np.vstack(verts)) if verts else np.empty((0, 2))
    if isinstance(artist, matplotlib.patches.Patch):
        return artist.get_transform().transform(artist.get_path().vertices)
    raise AssertionError(f"legend handle of an unexpected kind: {artist!r}")


def _undrawn_tick_labels(fig) -> set:
    """Tick labels matplotlib keeps but does not draw: those of ticks outside the view."""
    out = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            tol = 1e-9 * max(abs(lo), abs(hi), 1.0)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                loc = tick.get_loc()
                if loc is None or not (lo - tol <= loc <= hi + tol):
                    out.update({tick.label1, tick.label2})
    return out


def check_figure(name: str, fig) -> None:
    canvas = FigureCanvasAgg(fig)  # the builders make bare Figures; Agg is what savefig uses
    canvas.draw()
    renderer = canvas.get_renderer()
    canvas = fig.bbox
    undrawn = _undrawn_tick_labels(fig)
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or t in undrawn:
            continue
        box = t.get_window_extent(renderer)
        inside = (
            box.x0 >= canvas.x0 - 1
            and box.y0 >= canvas.y0 - 1
            and box.x1 <= canvas.x1 + 1
            and box.y1 <= canvas.y1 + 1
        )
        assert inside, f"{name}: text {t.get_text()!r} at {box.bounds} outside the canvas {canvas.bounds}"
    legends = [(ax.get_legend(), ax.get_legend_handles_labels()) for ax in fig.axes if ax.get_legend()]
    for leg in fig.legends:
        pairs = [hl for ax in fig.axes for hl in zip(*ax.get_legend_handles_labels())]
        legends.append((leg, tuple(zip(*pairs)) if pairs else ((), ())))
    for leg, (handles, labels) in legends:
        assert len(handles) == len(leg.get_texts()), f"{name}: legend entries without artists"
        for h, label in zip(handles, labels):
            art = h[0] if isinstance(h, Container) else h
            assert art.get_visible(), f"{name}: legend entry {label!r} is not drawn"
            ax = art.axes
            xy = _display_points(h)
            xy = xy[np.isfinite(xy).all(axis=1)]
            box = ax.bbox
            seen = (
                (xy[:, 0] >= box.x0 - 1)
                & (xy[:, 0] <= box.x1 + 1)
                & (xy[:, 1] >= box.y0 - 1)
                & (xy[:, 1] <= box.y1 + 1)
            )
            assert seen.any(), f"{name}: legend entry {label!r} has no data inside the view"


@pytest.fixture(scope="module")
def across(tmp_path_factory):
    """Depths 1-6 x widths 16-128 x 3 learning rates, b = 3: every width has runs on both sides."""
    tmp = tmp_path_factory.mktemp("across")
    return figures_of(tuned_store(tmp / "store", range(1, 7), [16, 32, 64, 128], 3.0), tmp)


@pytest.fixture(scope="module")
def one_side(tmp_path_factory):
    """Depths 1-4 x widths 16-64, b = 1.5: every run lies below L_th (7-10 layers)."""
    tmp = tmp_path_factory.mktemp("one_side")
    return figures_of(tuned_store(tmp / "store", range(1, 5), [16, 32, 64], 1.5), tmp)


def test_figures_across_the_threshold(across):
    assert {"loss_vs_n", "threshold", "loss_vs_depth", "phase_map", "learning_curves", "lr_curves"} <= set(
        across
    )
    for name, fig in across.items():
        check_figure(name, fig)


def test_figures_on_one_side_of_the_threshold(one_side):
    for name, fig in one_side.items():
        check_figure(name, fig)
    # The threshold figure shows the shapes run in a view fitted to them: the unclaimed fitted
    # line (L_th 7-10 layers) lies above it, and a note under the axes says so.
    fig = one_side["threshold"]
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert any(lab.startswith("12 shapes run below fitted L_th") for lab in labels)
    assert ax.get_ylim() == (0, 5)
    assert any("fitted L_th = log_1.49 d lies outside this view" in t.get_text() for t in fig.texts)


def test_chinchilla_figure(tmp_path):
    pts = synthetic.make_chinchilla(
        dict(E=1.7, A=400.0, B=400.0, alpha=0.34, beta=0.28), n_sizes=8, n_budgets=5
    )
    pts.to_csv(tmp_path / "points.csv", index=False)
    figs = figures_of(tmp_path / "points.csv", tmp_path)
    assert "chinchilla" in figs
    for name, fig in figs.items():
        check_figure(name, fig)


def test_plain_tick_labels_on_a_log_axis_under_a_decade():
    fig = matplotlib.figure.Figure()
    ax = fig.add_subplot()
    ax.plot([1e3, 1e5], [2.6, 2.9])
    ax.set_yscale("log")
    plots.plain_log_ticks(ax, "y")
    FigureCanvasAgg(fig).draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and all("10^" not in s and "times" not in s for s in labels), labels


@pytest.mark.skipif(
    not (REPRO / "smoke-overclaim" / "runs.parquet").exists(), reason="../shared/repro absent"
)
def test_figures_of_the_smoke_sweep(tmp_path):
    for name, fig in figures_of(REPRO / "smoke-overclaim", tmp_path).items():
        check_figure(name, fig)


def test_the_gallery_script_runs_end_to_end():
    """docs/make_gallery.py --smoke: a planted store through every figure, into a temporary folder."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    r = subprocess.run(
        [sys.executable, str(repo / "docs" / "make_gallery.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=repo,
    )
    assert r.returncode == 0, r.stderr
    assert "gallery: " in r.stdout and "# Gallery: every figure of the report" in r.stdout


def test_kaplan_side_by_side_figure(tmp_path):
    """`depthwidth kaplan --digitized`'s figure: two panels of curves, with and without a fit."""
    store = tuned_store(tmp_path / "store", range(1, 4), [16, 32], 3.0)
    curves = load(store).curves
    report = analyze(store, out_dir=tmp_path / "report", bootstrap=0, seed=0)
    fit = report["learning_curves"]["fit"]
    fig = plots.side_by_side(curves, fit, curves, {"status": "not_identified"})
    check_figure("kaplan_side_by_side", fig)


# -- the three figures of the study, each case drawn and read back from its artists ---------------

PLANTED_D = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0, B_D=50.0, alpha_D=0.3)
BUDGETS = (1e5, 3e5, 9e5)


def _data_term_report() -> dict:
    """The two-regime law with a data term, PLANTED_D exactly (centres 0: a = log A)."""
    p = PLANTED_D
    fit = {
        "status": "ok",
        "name": "two_regime",
        "formula": "",
        "terms": ["kappa", "D"],
        "irreducible": True,
        "theta": [
            np.log(p["E"]),
            np.log(p["A_kappa"]),
            p["alpha_kappa"],
            np.log(p["B_D"]),
            p["alpha_D"],
            np.log(p["b"]),
        ],
        "centres": {"mid_kappa": 0.0, "mid_D": 0.0},
        "params": {"b": p["b"]},
    }
    return {
        "regimes": {"preferred": "two_regime", "models": {"two_regime": fit}},
        "threshold": {"base": None},
    }


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_loss_vs_depth_draws_the_data_law_at_each_budget_in_its_colour():
    runs = synthetic.make_runs(
        "two_regime", [1, 2, 3, 4, 6], [16, 32, 64, 128], PLANTED_D, noise=0.0, tokens=BUDGETS
    )
    fig = plots.loss_vs_depth(runs, _data_term_report())
    check_figure("loss_vs_depth", fig)
    panels = [ax for ax in fig.axes if ax.get_title().startswith("width")]
    assert len(panels) == 4
    for ax in panels:
        w = float(ax.get_title().split(":")[0].split()[1])
        dots = {
            c.get_label(): c for c in ax.collections if isinstance(c, matplotlib.collections.PathCollection)
        }
        curves = [line for line in ax.lines if len(line.get_xdata()) > 2]  # not the vertical markers
        assert (
            len(curves) == len(BUDGETS)
            and len({matplotlib.colors.to_hex(c.get_color()) for c in curves}) == 3
        )
        for line in curves:
            colour = matplotlib.colors.to_hex(line.get_color())
            # the points of the same colour are that budget's runs, and the curve passes through them
            same = [
                c
                for c in ax.collections
                if isinstance(c, matplotlib.collections.PathCollection)
                and matplotlib.colors.to_hex(c.get_facecolor()[0]) == colour
            ]
            assert len(same) == 1, (w, colour, list(dots))
            depth, loss = same[0].get_offsets().T
            tokens = runs.loc[
                (runs["width"] == w) & np.isclose(runs["loss"].to_numpy()[:, None], loss).any(1), "tokens"
            ]
            assert tokens.nunique() == 1  # one budget per colour
            on_curve = np.interp(depth, line.get_xdata(), line.get_ydata())
            assert np.allclose(on_curve, loss, rtol=2e-3), (w, tokens.iloc[0])
    # one legend for the figure, naming each budget's runs and curve once, off every panel
    assert not any(ax.get_legend() for ax in fig.axes) and len(fig.legends) == 1
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    for name in ("100k tokens", "300k tokens", "900k tokens"):
        assert f"runs, {name}" in texts and f"two_regime fit at {name}" in texts
    renderer = fig.canvas.get_renderer()
    box = fig.legends[0].get_window_extent(renderer)
    assert not any(_overlaps(box, ax.get_window_extent(renderer)) for ax in fig.axes)


def test_loss_vs_depth_without_a_data_term_draws_one_curve():
    runs = synthetic.make_runs("two_regime", [1, 2, 3, 4], [16, 32, 64], PLANTED_D, noise=0.0, tokens=BUDGETS)
    report = _data_term_report()
    fit = report["regimes"]["models"]["two_regime"]
    fit.update(terms=["kappa"], theta=[fit["theta"][i] for i in (0, 1, 2, 5)], centres={"mid_kappa": 0.0})
    fig = plots.loss_vs_depth(runs, report)
    check_figure("loss_vs_depth", fig)
    for ax in fig.axes:
        assert len([line for line in ax.lines if len(line.get_xdata()) > 2]) == 1
        assert (
            len(ax.collections)
            - sum(isinstance(c, matplotlib.collections.PolyCollection) for c in ax.collections)
            == 3
        )


def _threshold_report(knee_beta: float, base=None) -> dict:
    knees = [{"width": w, "depth": d} for w, d in ((16.0, 2.2), (32.0, 3.3), (64.0, 2.0), (128.0, 2.0))]
    none = {"status": "insufficient_data", "points": [], "beta": None}
    a = np.log(32.0) - knee_beta * 3.0
    knee = {"status": "ok", "points": knees, "a": a, "beta": knee_beta, "base": float(np.exp(knee_beta))}
    return {"threshold": {"base": base, "base_ci": None, "transition_fit": none, "knee_fit": knee}}


def _texts(fig) -> str:
    return " ".join(t.get_text() for t in fig.texts)


def test_threshold_draws_no_line_whose_base_is_not_a_threshold_base():
    runs = synthetic.make_runs("two_regime", [1, 2, 3, 4, 6, 8], [16, 32, 64, 128], PLANTED_D, noise=0.0)
    fig = plots.threshold_plot(runs, _threshold_report(-0.582))  # base 0.559: L_th falls with width
    check_figure("threshold", fig)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "transition points (knees)" in labels
    assert not any(lab.startswith("line through them") for lab in labels)
    assert "no line through the knees: its base 0.559 is not above 1" in _texts(fig)
    # a base above 1 is a threshold base: its line is drawn, and no note is needed
    fig = plots.threshold_plot(runs, _threshold_report(0.9))
    check_figure("threshold", fig)
    assert "line through them: base 2.46" in fig.axes[0].get_legend_handles_labels()[1]
    assert "no line through" not in _texts(fig)
    # the headline's own base at or below 1: no fitted L_th, and a note says why
    fig = plots.threshold_plot(runs, _threshold_report(0.9, base=0.8))
    check_figure("threshold", fig)
    assert not any("fitted L_th" in lab for lab in fig.axes[0].get_legend_handles_labels()[1])
    assert "the fitted base b = 0.8 is not above 1" in _texts(fig)


def test_threshold_names_a_reference_only_where_it_falls_inside_the_view():
    levine = "Levine et al. empirical d*(L)"
    # widths 16-128, depths to 8: Levine's d*(L) reaches the view only past width 150, in a corner
    runs = synthetic.make_runs("two_regime", [1, 2, 4, 8], [16, 32, 64, 128], PLANTED_D, noise=0.0)
    fig = plots.threshold_plot(runs, _threshold_report(0.9))
    check_figure("threshold", fig)
    assert levine not in fig.axes[0].get_legend_handles_labels()[1]
    assert not any(line.get_label() == levine for line in fig.axes[0].lines)
    assert f"{levine} falls inside this view only at widths" in _texts(fig)
    # widths 128-512: it crosses the view, so it is drawn and named
    runs = synthetic.make_runs("two_regime", [1, 2, 4, 8], [128, 256, 512], PLANTED_D, noise=0.0)
    fig = plots.threshold_plot(runs, _threshold_report(0.9))
    check_figure("threshold", fig)
    assert levine in fig.axes[0].get_legend_handles_labels()[1] and levine not in _texts(fig)


def test_power_figure_ticks_the_effects_and_puts_the_null_beside_the_axis():
    from analysis.power.design import power_figure

    bs = (2.2, 3.0, 4.5)
    summary = {
        "power": {str(b): p for b, p in zip(bs, (0.9, 1.0, 1.0))},
        "power_mc": {str(b): {"ci": [0.8, 1.0]} for b in bs},
        "false_claim": {"rate": 0.0, "ci": [0.0, 0.13]},
    }
    fig = power_figure(summary, "plan")
    check_figure("power", fig)
    null, ax = fig.axes
    assert ax.get_xscale() == "log"
    ticks = [(t.get_position()[0], t.get_text()) for t in ax.get_xticklabels() if t.get_text()]
    assert ticks == [(2.2, "2.2"), (3.0, "3"), (4.5, "4.5")]  # plain numbers, at the effects only
    assert all(not t.label1.get_visible() or not t.label1.get_text() for t in ax.xaxis.get_minor_ticks())
    # the null's marker is in its own panel, at no b; the b axis holds the effects' rates alone
    (bar,) = null.containers
    assert bar[0].get_ydata()[0] == 0.0 and "null" in null.get_xticklabels()[0].get_text()
    assert [list(c[0].get_xdata()) for c in ax.containers] == [list(bs)]
    # without a null: one panel
    fig = power_figure({**summary, "false_claim": None}, "plan")
    check_figure("power", fig)
    assert len(fig.axes) == 1


def test_the_copying_figure_shows_each_width_and_each_run():
    """Drawn from the report's copying section (one selection: each seed's best run at the
    shape's largest budget): one line per width through the seed means by depth with error bars
    over seeds, every selected run in the loss-against-copying panel, one told-apart colour per
    depth, and every loss axis in nats per token."""
    import numpy as np
    import pandas as pd

    from analysis.reporting.copying import copying_plot, has_probe, section

    rows = []
    for depth in (1, 2, 4):
        for width in (32, 64):
            for seed in range(3):
                for budget in (1e5, 9e5):
                    gain = (0.05 if depth == 1 else 1.5) + 0.01 * seed
                    loss = 2.0 - 0.2 * (depth > 1) - 0.01 * seed + (0.3 if budget < 5e5 else 0)
                    rows.append(
                        dict(depth=depth, width=width, seed=seed, tokens=budget, copy_gain=gain, loss=loss)
                    )
    runs = pd.DataFrame(rows)
    assert has_probe(runs) and not has_probe(runs.drop(columns="copy_gain"))
    fig = copying_plot(section(runs))
    left, right = fig.axes
    bars = [c for c in left.containers if c.get_label().startswith("width")]
    assert [c.get_label() for c in bars] == ["width 32", "width 64"]
    for c in bars:
        line, _, (yerr,) = c
        assert list(line.get_xdata()) == [1, 2, 4]
        assert np.allclose(line.get_ydata(), [0.06, 1.51, 1.51])  # seed means at the largest budget
        assert len(yerr.get_segments()) == 3  # an interval over seeds at each depth
    points = [c for c in right.collections if c.get_label().startswith("depth")]
    assert (
        sum(len(c.get_offsets()) for c in points) == 3 * 2 * 3
    )  # the selected runs, none at the smaller budget
    colours = [tuple(c.get_facecolor()[0]) for c in points]
    assert len(set(colours)) == 3  # one colour per depth
    assert "nats per token" in right.get_ylabel() and "nats per token" in left.get_ylabel()
    check_figure("copying", fig)
