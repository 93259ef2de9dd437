"""The figures show what the report's text says, read off the figure objects: loss_vs_depth draws
the threshold law the text quotes; loss_vs_n's legend covers no point; chinchilla.png does not
call the data exponent b (b is the threshold base); threshold.png's y-axis is the runs' depths,
with a claimed b and its interval drawn; every loss axis says its unit, nats per token.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from test_analysis_figures import figures_of, tuned_store

from analysis.laws import tuning
from analysis.readers.inputs import load
from analysis.reporting import plots


@pytest.fixture(scope="module")
def across(tmp_path_factory):
    """Depths 1-6 x widths 16-128 x 3 learning rates, b = 3: located and claimed."""
    from analysis.reporting.report import analyze

    tmp = tmp_path_factory.mktemp("across")
    store = tuned_store(tmp / "store", range(1, 7), [16, 32, 64, 128], 3.0)
    report = analyze(store, out_dir=tmp / "report", bootstrap=20, seed=0)
    ds, _ = tuning.apply(load(store), (), "auto", False)
    return report, ds


def _figs(report, ds):
    from analysis.laws import tokens

    points, _ = tokens.token_points(ds.runs, ds.curves)
    figs, _ = plots.make_all(ds.runs, ds.curves, report, points)
    for fig in figs.values():
        FigureCanvasAgg(fig).draw()
    return figs


def _points_px(ax) -> np.ndarray:
    """Every scatter point of the axes in display pixels."""
    pts = [
        c.get_offset_transform().transform(c.get_offsets()) for c in ax.collections if len(c.get_offsets())
    ]
    return np.vstack(pts) if pts else np.empty((0, 2))


def test_the_legend_of_loss_vs_n_covers_no_point(across):
    fig = _figs(*across)["loss_vs_n"]
    ax = fig.axes[0]
    box = ax.get_legend().get_window_extent()
    xy = _points_px(ax)
    assert len(xy) == len(across[1].runs)
    inside = (xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1)
    assert not inside.any(), xy[inside]
    assert box.x1 <= fig.bbox.x1 + 1  # and stays on the canvas


def test_every_loss_axis_names_its_unit(across):
    for name, fig in _figs(*across).items():
        for ax in fig.axes:
            label = ax.get_ylabel()
            ratio = "increase" in label or " / " in label  # a loss relative to another: no unit
            if "loss" in label and not ratio:
                assert "nats per token" in label, (name, label)


def test_threshold_png_fits_the_runs_and_draws_a_claimed_b(across):
    report, ds = across
    assert report["threshold"]["claimed"]
    ax = _figs(report, ds)["threshold"].axes[0]
    assert ax.get_ylim() == (0, ds.runs["depth"].max() + 1)
    lo, hi = report["threshold"]["base_ci"]
    assert (
        f"b = {report['threshold']['base']:.3g}, 95% interval [{lo:.3g}, {hi:.3g}] (claimed)"
        in ax.get_title()
    )
    labels = ax.get_legend_handles_labels()[1]
    assert any(lab.startswith("fitted L_th = log_") and "(claimed)" in lab for lab in labels)
    assert any(lab.startswith("95% band") for lab in labels)


def test_an_unclaimed_fit_does_not_stretch_the_threshold_axis(across):
    """A fit whose L_th lies at 20 layers is named in a note, not drawn by stretching the axis."""
    report, ds = across
    far = copy.deepcopy(report)
    far["threshold"].update(base=1.2, base_ci=[1.15, 1.3], claimed=False, status="not_claimed")
    fig = plots.threshold_plot(ds.runs, far)
    ax = fig.axes[0]
    assert ax.get_ylim() == (0, ds.runs["depth"].max() + 1)
    assert "(claimed)" not in ax.get_title()
    assert any("fitted L_th = log_1.2 d lies outside this view" in t.get_text() for t in fig.texts)


def test_loss_vs_depth_draws_the_law_the_text_quotes(across):
    """With the separable law preferred and the combined law quoted as the cross-check, the
    curves are the combined law's, not the two-regime law's."""
    report, ds = across
    quoted = copy.deepcopy(report)
    assert quoted["regimes"]["models"]["combined"].get("theta")
    quoted["regimes"]["preferred"] = "width_depth"
    quoted["threshold"] = {**quoted["threshold"], "law": None, "cross_check": {"law": "combined"}}
    assert plots.quoted_law(quoted) == "combined"
    fig = plots.loss_vs_depth(ds.runs, quoted)
    labels = {t.get_text() for leg in fig.legends for t in leg.get_texts()}
    assert any(lab.startswith("combined") for lab in labels) and not any(
        lab.startswith("two_regime") for lab in labels
    )
    assert "the combined law the report quotes" in fig._suptitle.get_text()
    # the headline's own law, where it has one, comes first
    assert plots.quoted_law(
        {**quoted, "threshold": {"law": "two_regime", "cross_check": {"law": "combined"}}}
    ) == ("two_regime")


def test_chinchilla_png_does_not_call_the_data_exponent_b(tmp_path):
    from analysis.fitting import synthetic

    pts = synthetic.make_chinchilla(
        dict(E=1.7, A=400.0, B=400.0, alpha=0.34, beta=0.28), n_sizes=8, n_budgets=5
    )
    pts.to_csv(tmp_path / "points.csv", index=False)
    fig = figures_of(tmp_path / "points.csv", tmp_path)["chinchilla"]
    texts = [
        t.get_text() for ax in fig.axes for t in (ax.get_legend().get_texts() if ax.get_legend() else [])
    ]
    assert texts and not any("b =" in t for t in texts), texts
    assert any(t.startswith("ours D*(C): D* ∝ C^") for t in texts)
    assert "nats per token" in fig.axes[0].get_ylabel()
