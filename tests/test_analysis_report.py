"""The analysis report end to end on small stores (analysis.reporting.report, analysis.reporting.plots, analysis.laws.kaplan).

A sweep as small as the sweep service's smoke grid (depths 1-4 x widths 16-64, one seed, short
curves) must give a complete report with plots; a thinner one must still give a report whose fits
say `insufficient_data`. Figures are real files with data on them; `plot` redraws without fitting.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.fitting import fitcore, synthetic
from analysis.reporting import plots
from analysis.reporting.report import analyze, kaplan_report, replot

P = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)


def smoke_store(path, depths=(1, 2, 3, 4), widths=(16, 32, 64), extra_runs=None):
    runs = synthetic.make_runs("two_regime", depths, widths, P, noise=0.02, seed=7)
    runs, curves = synthetic.make_curves(runs, 0.6, 50.0, steps=[25, 50, 100, 200, 400, 800, 1600])
    if extra_runs is not None:
        runs = pd.concat([runs, extra_runs], ignore_index=True)
    return synthetic.write_store(path, runs, curves)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    store = smoke_store(tmp_path_factory.mktemp("smoke") / "store")
    return store, analyze(store, bootstrap=30, seed=0)


def test_report_has_the_stable_keys_and_sane_values(smoke):
    store, r = smoke
    on_disk = json.loads((store / "analysis" / "report.json").read_text())
    for key in (
        "n_runs",
        "power_laws",
        "learning_curves",
        "crossovers",
        "optimal_depth",
        "regimes",
        "threshold",
        "kaplan",
    ):
        assert key in on_disk, key
    assert on_disk["n_runs"] == 12 and on_disk["n_excluded"] == {"diverged": 0, "failed": 0}
    models = on_disk["regimes"]["models"]
    assert set(models) == {"kaplan", "two_regime", "combined", "width_depth"}
    for m in models.values():
        assert {"params", "aic", "bic", "cv_error"} <= set(m)
    assert on_disk["regimes"]["preferred"] in models
    thr = on_disk["threshold"]
    assert {"base", "base_ci", "method", "consistent_with_theory", "transition_fit"} <= set(thr)
    # Twelve runs, four depths: every per-depth law is Kaplan's two-parameter form.
    assert all(
        f["status"] == "ok" and f["terms"] == ["N"] for f in on_disk["power_laws"]["per_depth"].values()
    )
    assert len(on_disk["crossovers"]) == 6
    # The planted law has b = 3; even 12 runs put it in the interval.
    assert thr["base_ci"][0] <= 3.0 <= thr["base_ci"][1]
    tf = thr["transition_fit"]
    assert tf["status"] in ("ok", "insufficient_data") and (tf["status"] == "ok" or tf["reason"])
    md = (store / "analysis" / "report.md").read_text()
    assert "## What the data say about L_th" in md and "![loss_vs_n](loss_vs_n.png)" in md


def test_figures_are_written_and_hold_data(smoke):
    store, r = smoke
    out = store / "analysis"
    assert set(r["figures"]["written"]) >= {
        "loss_vs_n",
        "threshold",
        "loss_vs_depth",
        "phase_map",
        "learning_curves",
    }
    assert "aspect_ratio" in r["figures"]["skipped"]  # no fixed-N band with 3 shapes in this grid
    for name in r["figures"]["written"]:
        assert (out / f"{name}.png").stat().st_size > 15_000, name
        assert (out / f"{name}.pdf").stat().st_size > 5_000, name
    from analysis.readers.inputs import load

    ds = load(store)
    figs, _ = plots.make_all(ds.runs, ds.curves, r)
    for name, fig in figs.items():
        artists = [a for ax in fig.axes for a in (*ax.lines, *ax.collections)]
        points = sum(
            len(np.atleast_1d(getattr(a, "get_xdata", lambda a=a: a.get_offsets())())) for a in artists
        )
        assert points > 0, name
    assert any(len(c.get_paths()) == 12 for c in figs["learning_curves"].axes[0].collections)


def test_plot_redraws_from_the_stored_report_without_fitting(smoke, monkeypatch):
    store, _ = smoke
    out = store / "analysis"
    before = (out / "report.json").read_bytes()
    (out / "phase_map.png").unlink()

    def no_fitting(*a, **k):
        raise AssertionError("plot must not refit")

    monkeypatch.setattr(fitcore, "fit_law", no_fitting)
    monkeypatch.setattr(fitcore, "batched_lm", no_fitting)
    r = replot(store)
    assert (out / "phase_map.png").stat().st_size > 15_000
    assert (out / "report.json").read_bytes() == before
    assert "phase_map" in r["figures"]["written"]


def test_thin_data_reports_insufficient_data_and_still_writes(tmp_path):
    store = smoke_store(tmp_path / "thin", depths=(2,), widths=(16, 32))
    r = analyze(store, bootstrap=10)
    assert r["n_runs"] == 2
    assert r["power_laws"]["per_depth"]["2"]["status"] == "insufficient_data"
    assert r["learning_curves"]["fit"]["status"] == "insufficient_data"
    assert r["regimes"]["models"]["two_regime"]["status"] == "insufficient_data"
    assert (
        "2 widths" in r["regimes"]["models"]["two_regime"]["reason"]
        or "depths" in r["regimes"]["models"]["two_regime"]["reason"]
    )
    assert r["threshold"]["base"] is None and not r["threshold"]["claimed"]
    assert (store / "analysis" / "report.json").is_file()
    assert (store / "analysis" / "loss_vs_n.png").stat().st_size > 10_000


def test_recurrent_runs_go_to_the_relrnn_report_not_the_depth_fits(tmp_path):
    rec = pd.DataFrame(
        {
            "trial_id": ["rr0", "rr1"],
            "family": ["relrnn", "lstm"],
            "depth": 1,
            "width": 64,
            "heads": 1,
            "seed": 0,
            "n_params": 1e4,
            "loss": [0.2, 0.5],
            "status": "ok",
            "data_source": "copy",
            "task_length": 100,
            "nu": 10,
            "rho": 15,
            "accuracy": [1.0, 0.4],
        }
    )
    store = smoke_store(tmp_path / "mixed", extra_runs=rec)
    r = analyze(store, bootstrap=10)
    assert r["n_runs"] == 12  # the transformer rows only
    assert "relrnn" in r and r["relrnn"].get("status") != "unavailable"


def test_kaplan_digitized_curves_give_kaplans_exponents(smoke, shared_data):
    """Kaplan et al.'s own Figure 2 curves, fitted by our L(N,S) code, give back their Table 3/5
    values: alpha_S = 0.76 and S_c = 2.1e3 steps inside our 95% intervals, alpha_N near 0.077."""
    path = shared_data / "kaplan2020_fig2_digitized.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    store, _ = smoke
    k = kaplan_report(store, digitized=path, bootstrap=100)
    lc = k["digitized"]["learning_curves"]
    assert lc["status"] == "ok" and k["digitized"]["n_curves"] >= 10
    assert lc["ci"]["alpha_S"][0] <= 0.76 <= lc["ci"]["alpha_S"][1]
    assert lc["ci"]["S_c"][0] <= 2.1e3 <= lc["ci"]["S_c"][1]
    assert lc["params"]["alpha_N"] == pytest.approx(0.077, rel=0.2)
    # written into a folder of its own beside the store, which no analysis of the store rewrites
    folder = Path(k["folder"])
    assert folder == store.parent / f"{store.name}_kaplan" and k["report"] == str(store / "analysis")
    assert (folder / "kaplan_side_by_side.png").stat().st_size > 20_000
    assert "| alpha_S |" in (folder / "kaplan.md").read_text()
    assert not [p for p in store.rglob("kaplan*")]


def test_levine_departure_points_by_hand():
    from analysis.laws.kaplan import levine_departures

    d6 = next(d for d in levine_departures() if d["depth"] == 6)
    assert d6["width_theory"] == 729 and d6["n_params_theory"] == pytest.approx(12 * 6 * 729**2)
    d70 = levine_departures([70])[0]
    assert d70["width_empirical"] == pytest.approx(7510, rel=0.01)  # BloombergGPT's width


def test_analysis_imports_neither_torch_nor_ray():
    code = (
        "import sys, analysis, analysis.reporting.report, analysis.cli, analysis.reporting.plots, analysis.laws.kaplan, "
        "analysis.laws.threshold, analysis.laws.regimes, analysis.fitting.synthetic; "
        "bad = [m for m in ('torch', 'ray') if m in sys.modules]; print(bad); sys.exit(bool(bad))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
