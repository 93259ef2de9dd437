"""`analyze`: every fit of the depth–width study from a results store or CSV, written as a report.

Runs the Kaplan et al. 2020 power laws, the crossovers and optimal depth, the two-regime models and
the threshold base of Levine et al. 2020's L_th = log_b d (SCIENCE.md §2–4), then writes
report.json (stable keys), report.md and the figures (PNG + PDF) under <store>/analysis/.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis import kaplan, plots, powerlaw, regimes, threshold
from analysis._blas import single_threaded
from analysis.inputs import RECURRENT, Dataset, InputError, default_out_dir, default_out_uri, load
from analysis.markdown import render, render_kaplan
from depthwidth.uri import filesystem, is_remote, reason

REPORT_VERSION = 1


def _version() -> str | None:
    try:
        from importlib.metadata import version
        return version("depthwidth")
    except Exception:  # not installed: the analysis also runs from a bare checkout
        return None


class Stopwatch:
    """Wall-clock and CPU seconds per stage (CPU shows the work when the machine is shared)."""

    def __init__(self):
        self.wall, self.cpu = {}, {}
        self._w, self._c = time.perf_counter(), time.process_time()

    def lap(self, name: str) -> None:
        w, c = time.perf_counter(), time.process_time()
        self.wall[name] = round(w - self._w, 4)
        self.cpu[name] = round(c - self._c, 4)
        self._w, self._c = w, c


def build_report(ds: Dataset, bootstrap: int = 200, seed: int = 0,
                 watch: Stopwatch | None = None) -> dict:
    """All fits for one dataset. Never raises on thin data: each part that cannot be fitted
    carries status 'insufficient_data' and a reason."""
    lap = (watch or Stopwatch()).lap

    runs = ds.runs
    per_depth = powerlaw.fit_per_depth(runs, bootstrap, seed)
    env_runs = powerlaw.deep_envelope(runs) if len(runs) else runs
    envelope = powerlaw.fit_power_law(env_runs["n_params"], env_runs["loss"], name="deep envelope",
                                      groups=env_runs["run_id"].to_numpy(), n_boot=bootstrap,
                                      seed=seed + 1)
    lap("power_laws")
    lc, conv = powerlaw.fit_learning_curves(ds.curves, bootstrap, seed + 2)
    lap("learning_curves")
    cross = threshold.all_crossovers(runs, per_depth)
    opt = threshold.optimal_depth(runs, per_depth)
    depths_ok = sorted(d for d, f in per_depth.items() if f.ok)
    points = threshold.transition_points(cross, depths_ok)
    transition = threshold.fit_transition(points, threshold.transition_draws(runs, cross, points, per_depth))
    lap("crossovers")
    reg = regimes.fit_regimes(runs, bootstrap, seed + 3)
    lap("regimes")
    knee_fit = threshold.knees(runs, bootstrap, seed + 4)
    head = threshold.headline(reg, transition, knee_fit)
    lap("threshold")
    comp = kaplan.compare(runs, {"envelope": envelope, "envelope_runs": env_runs,
                                 "learning_curves": lc, "kaplan": reg["fits"]["kaplan"]},
                          bootstrap, seed + 5)
    lap("kaplan")
    report = {
        "report_version": REPORT_VERSION,
        "source": ds.source if isinstance(ds.source, str) else str(Path(ds.source).resolve()),
        "kind": ds.kind,
        "depthwidth_version": _version(),
        "bootstrap": bootstrap,
        "seed": seed,
        "n_runs": int(len(runs)),
        "n_excluded": ds.n_excluded,
        "families": list(ds.families),
        "depths": sorted(int(d) for d in runs["depth"].unique()),
        "widths": sorted(float(w) for w in runs["width"].unique()),
        "power_laws": {"per_depth": {str(d): f.to_dict() for d, f in per_depth.items()},
                       "envelope": envelope.to_dict()},
        "learning_curves": {"fit": lc.to_dict(), "n_runs_with_curves": int(ds.curves["run_id"].nunique()),
                            "converged_losses": conv.to_dict(orient="records")},
        "crossovers": cross,
        "optimal_depth": opt,
        "regimes": {k: v for k, v in reg.items() if k != "fits"},
        "threshold": head,
        "kaplan": comp,
    }
    return powerlaw.json_safe(report)


def _relrnn(ds: Dataset, out_dir: Path | None) -> dict:
    """The recurrent family's own report (analysis/relrnn.py), when that module is present."""
    try:
        from analysis.relrnn import report_relrnn
    except ImportError as exc:
        return {"status": "unavailable", "reason": f"analysis.relrnn could not be imported ({exc})"}
    try:
        return report_relrnn(ds.all_runs, ds.all_curves, out_dir)
    except Exception as exc:  # a failure there must not cost the depth-width report
        return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; a report is not
    os.replace(tmp, path)


def write_figures(figs: dict, out: Path) -> list[str]:
    names = []
    for name, fig in figs.items():
        for ext in ("png", "pdf"):
            fig.savefig(out / f"{name}.{ext}", dpi=120 if ext == "png" else None)
        names.append(name)
    return names


def figures_for(ds: Dataset, report: dict, out: Path) -> dict:
    figs, skipped = plots.make_all(ds.runs, ds.curves, report)
    written = write_figures(figs, out)
    return {"written": written, "skipped": skipped}


@single_threaded
def analyze(source: str | Path, out_dir: str | Path | None = None, bootstrap: int = 200,
            seed: int = 0) -> dict:
    """Fit, plot and write the report for a results store or CSV; returns the report dict.

    Bad input raises analysis.inputs.InputError before anything is written."""
    if not isinstance(bootstrap, (int, np.integer)) or bootstrap < 0:
        raise InputError(f"bootstrap = {bootstrap!r} is invalid: it must be a non-negative integer.")
    watch = Stopwatch()
    ds = load(source)
    watch.lap("load")
    remote_out = None
    if out_dir is None and is_remote(source):  # written here, then uploaded beside the input
        remote_out = default_out_uri(str(source), ds.kind)
        out = Path(tempfile.mkdtemp(prefix="depthwidth-analysis-"))
    else:
        out = Path(out_dir) if out_dir is not None else default_out_dir(source)
    report = build_report(ds, int(bootstrap), int(seed), watch)
    out.mkdir(parents=True, exist_ok=True)
    report["report_dir"] = remote_out or str(out.resolve())
    if any(f in RECURRENT for f in ds.families):
        report["relrnn"] = powerlaw.json_safe(_relrnn(ds, out))
        watch.lap("relrnn")
    report["figures"] = figures_for(ds, report, out)
    watch.lap("plots")
    report["timings_s"], report["cpu_s"] = watch.wall, watch.cpu
    write_report(report, out)
    if remote_out is not None:
        _upload(out, remote_out)
    watch.lap("write")
    report["timings_s"]["total"] = round(sum(watch.wall.values()), 4)
    report["cpu_s"]["total"] = round(sum(watch.cpu.values()), 4)
    return report


def _upload(local: Path, uri: str) -> None:
    """Copy a finished report folder to a remote URI, then drop the local copy."""
    import shutil

    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        fs, path = filesystem(uri)
        fs.create_dir(path, recursive=True)
        pafs.copy_files(str(local), path, source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=fs)
    except (pa.ArrowException, OSError) as exc:
        first = reason(exc)
        raise InputError(f"the report could not be written to '{uri}' ({first}); it is in "
                         f"'{local}'.") from None
    shutil.rmtree(local, ignore_errors=True)


def write_report(report: dict, out: Path) -> None:
    _atomic_write(out / "report.json", json.dumps(report, indent=1, sort_keys=False, allow_nan=False))
    _atomic_write(out / "report.md", render(report))


def find_report(path: str | Path) -> Path:
    """report.json of a store (its analysis/ folder), of a CSV (the default folder beside it), or
    directly inside `path`."""
    if is_remote(path):
        raise InputError(f"'{path}' is remote; plot and kaplan read a local report folder: write one "
                         f"with `depthwidth analyze {path} --out DIR`, then pass DIR.")
    p = Path(path)
    for cand in (p / "analysis" / "report.json", p / "report.json", default_out_dir(p) / "report.json"):
        if cand.is_file():
            return cand
    raise InputError(f"no report.json under '{p}' (run `depthwidth analyze {p}` first).")


@single_threaded
def replot(path: str | Path) -> dict:
    """Redraw every figure from a stored report and its source data, without refitting."""
    rp = find_report(path)
    report = json.loads(rp.read_text())
    ds = load(report["source"])
    report["figures"] = figures_for(ds, report, rp.parent)
    _atomic_write(rp.parent / "report.md", render(report))
    return report


@single_threaded
def kaplan_report(path: str | Path, digitized: str | Path | None = None, bootstrap: int = 200,
                  seed: int = 0) -> dict:
    """Our fits beside Kaplan et al. 2020 (+ digitized published curves fitted with the same code);
    writes kaplan.json, kaplan.md and, with `digitized`, the side-by-side figure next to the report.
    Runs `analyze` first when the store has no report yet."""
    dig = kaplan.load_digitized(digitized) if digitized is not None else None  # validate first
    try:
        rp = find_report(path)
        report = json.loads(rp.read_text())
    except InputError:
        load(path)  # a clear error when `path` is not an analysable input either
        report = analyze(path, bootstrap=bootstrap, seed=seed)
        rp = Path(report["report_dir"]) / "report.json"
    out = rp.parent
    result = {"source": report["source"], **report["kaplan"]}
    if dig is not None:
        fitted = kaplan.fit_digitized(dig, n_boot=bootstrap, seed=seed)
        result["digitized"] = {"file": str(Path(digitized).resolve()), **fitted}
        ds = load(report["source"])
        fig = plots.side_by_side(ds.curves, report["learning_curves"]["fit"],
                                 dig.assign(step=dig["tokens"] / kaplan.KAPLAN_2020["setup"]["batch_tokens"]),
                                 fitted["learning_curves"])
        result["figures"] = {"written": write_figures({"kaplan_side_by_side": fig}, out)}
    result = powerlaw.json_safe(result)
    _atomic_write(out / "kaplan.json", json.dumps(result, indent=1, allow_nan=False))
    _atomic_write(out / "kaplan.md", render_kaplan(result))
    return result
