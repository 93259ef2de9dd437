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
    # The threshold figure shows the shapes run, and the fitted line with its band.
    ax = one_side["threshold"].axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert any(lab.startswith("12 shapes run below fitted L_th") for lab in labels)
    assert any(lab.startswith("95% band") for lab in labels)


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
