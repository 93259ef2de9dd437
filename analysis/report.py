"""`analyze`: every fit of the depth–width study from a results store or CSV, written as a report.

Runs the Kaplan et al. 2020 power laws, the crossovers and optimal depth, the two-regime models and
the threshold base of Levine et al. 2020's L_th = log_b d (docs/science.md §2–4), then writes
report.json (stable keys), report.md and the figures (PNG + PDF) under <store>/analysis/.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis import kaplan, plots, powerlaw, regimes, threshold, tuning
from analysis._blas import single_threaded
from analysis.fitcore import bootstrap_bytes
from analysis.inputs import Dataset, InputError, default_out, load, locate
from analysis.markdown import render, render_kaplan
from depthwidth.accounting import machine_memory_bytes
from depthwidth.clitools import reason
from depthwidth.config import RECURRENT_FAMILIES
from depthwidth.published import KAPLAN_2020
from depthwidth.results import ANALYSIS_DIR, Location, StoreError, atomic_file

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


class _Output:
    """Where a report is written: its files are made in a local working folder and copied into
    the destination (a local folder or a URI) only once all of them exist, so a failure part
    way leaves no half-written report and no empty folder behind."""

    def __init__(self, dest: Location):
        self.dest = dest
        self.work = Path(tempfile.mkdtemp(prefix="depthwidth-report-"))

    def publish(self) -> None:
        try:
            self.dest.upload_folder(self.work)
        except StoreError as exc:
            raise InputError(str(exc)) from None
        finally:
            shutil.rmtree(self.work, ignore_errors=True)

    def discard(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


def output_location(out_dir: str | Path | None, source: str | Path, kind: str) -> Location:
    """The report's destination, checked to be writable before any fit runs."""
    try:
        if out_dir is not None:
            return Location.writable(out_dir, "--out")
        dest = default_out(source, kind)
        dest.check_writable("the report folder")
        return dest
    except StoreError as exc:
        raise InputError(str(exc)) from None


def check_bootstrap(bootstrap, seed, n_runs: int | None = None, n_points: int = 0) -> None:
    """The bootstrap's count and seed, before any fit runs: non-negative integers, and replicates
    whose estimated memory (analysis.fitcore.bootstrap_bytes) fits half of what this machine has
    free, so a large count is refused instead of growing until the kernel kills a process."""
    for name, v in (("bootstrap", bootstrap), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InputError(f"{name} = {v!r} is invalid: it must be a non-negative integer.")
    if n_runs is None:  # the data's size is not known yet
        return
    free = machine_memory_bytes(available=True)
    need = bootstrap_bytes(int(bootstrap), n_runs, n_points)
    if free is not None and need > free / 2:
        most = int(free / 2 / bootstrap_bytes(1, n_runs, n_points))
        raise InputError(f"bootstrap = {bootstrap} is invalid: its replicates need about "
                         f"{need / 1e9:.3g} GB for {n_runs} runs, more than half of the "
                         f"{free / 1e9:.3g} GB this machine has free; use at most {most:,}.")


@single_threaded
def analyze(source: str | Path, out_dir: str | Path | None = None, bootstrap: int = 200,
            seed: int = 0, tune: tuple = (), selection: str = "auto", no_tune: bool = False) -> dict:
    """Fit, plot and write the report for a results store or CSV; returns the report dict.
    Every fit sees each shape at its best setting of the tuning axes (analysis.tuning; `tune`
    names extra axes, `no_tune` averages every setting instead).

    Bad input, or an output that cannot be written, raises analysis.inputs.InputError before any
    fit runs; nothing is written unless the whole report is."""
    check_bootstrap(bootstrap, seed)
    watch = Stopwatch()
    ds = load(source)
    ds, tuned = tuning.apply(ds, tuple(tune), selection, no_tune)
    check_bootstrap(bootstrap, seed, len(ds.runs), len(ds.curves))
    dest = output_location(out_dir, source, ds.kind)
    watch.lap("load")
    out = _Output(dest)
    try:
        report = build_report(ds, int(bootstrap), int(seed), watch)
        report["tuning"] = tuned
        report["report_dir"] = dest.display()
        if any(f in RECURRENT_FAMILIES for f in ds.families):
            report["relrnn"] = powerlaw.json_safe(_relrnn(ds, out.work))
            watch.lap("relrnn")
        report["figures"] = figures_for(ds, report, out.work)
        watch.lap("plots")
        report["timings_s"], report["cpu_s"] = watch.wall, watch.cpu
        write_report(report, out.work)
        write_page(report, ds, out.work)
    except BaseException:
        out.discard()
        raise
    out.publish()
    watch.lap("write")
    report["timings_s"]["total"] = round(sum(watch.wall.values()), 4)
    report["cpu_s"]["total"] = round(sum(watch.cpu.values()), 4)
    return report


def write_report(report: dict, out: Path) -> None:
    with atomic_file(out / "report.json", "w") as f:
        f.write(json.dumps(report, indent=1, sort_keys=False, allow_nan=False))
    with atomic_file(out / "report.md", "w") as f:
        f.write(render(report))


def write_page(report: dict, ds: Dataset, out: Path) -> None:
    """report.html beside report.md: the same report as one self-contained page (analysis/html.py)."""
    from analysis.html import write_html
    write_html(report, render(report), ds.all_runs, ds.all_curves, out)


def find_report(path: str | Path) -> tuple[Location, dict]:
    """The report folder and report.json of a store (its analysis/ folder), of a CSV (the
    default folder beside it), or of `path` itself; local or remote."""
    loc, kind = locate(path)
    cands = [loc.child(ANALYSIS_DIR), loc] if kind == "dir" else []
    if kind == "file":
        cands.append(default_out(path, "file"))
    for cand in cands:
        try:
            if not cand.exists("report.json"):
                continue
            text = cand.read_text("report.json")
        except StoreError as exc:
            raise InputError(str(exc)) from None
        try:
            report = json.loads(text)
            if not isinstance(report, dict) or "source" not in report:
                raise ValueError("it holds no report")
        except ValueError as exc:
            raise InputError(f"{cand.display('report.json')} is not a readable report "
                             f"({reason(exc)}); run `depthwidth analyze` again to rewrite it.") from None
        return cand, report
    raise InputError(f"no report.json under '{path}' (run `depthwidth analyze {path}` first).")


@single_threaded
def replot(path: str | Path) -> dict:
    """Redraw every figure from a stored report and its source data, without refitting."""
    dest, report = find_report(path)
    ds = load(report["source"])
    if report.get("tuning"):  # the same runs as the fits: each shape's chosen setting
        req = report["tuning"]["requested"]
        ds, _ = tuning.apply(ds, tuple(req["tune"]), req["selection"], req["disabled"])
    out = _Output(dest)
    try:
        report["figures"] = figures_for(ds, report, out.work)
        with atomic_file(out.work / "report.md", "w") as f:
            f.write(render(report))
        write_page(report, ds, out.work)
    except BaseException:
        out.discard()
        raise
    out.publish()
    return report


@single_threaded
def kaplan_report(path: str | Path, digitized: str | Path | None = None, bootstrap: int = 200,
                  seed: int = 0) -> dict:
    """Our fits beside Kaplan et al. 2020 (+ digitized published curves fitted with the same code);
    writes kaplan.json, kaplan.md and, with `digitized`, the side-by-side figure next to the report.
    Runs `analyze` first when the store has no report yet."""
    check_bootstrap(bootstrap, seed)
    dig = kaplan.load_digitized(digitized) if digitized is not None else None  # validate first
    if dig is not None:
        check_bootstrap(bootstrap, seed, dig["trial_id"].nunique(), len(dig))
    try:
        dest, report = find_report(path)
    except InputError as exc:
        if not str(exc).startswith("no report.json"):
            raise
        load(path)  # a clear error when `path` is not an analysable input either
        report = analyze(path, bootstrap=bootstrap, seed=seed)
        dest = Location(report["report_dir"])
    result = {"source": report["source"], **report["kaplan"]}
    out = _Output(dest)
    try:
        if dig is not None:
            fitted = kaplan.fit_digitized(dig, n_boot=bootstrap, seed=seed)
            result["digitized"] = {"file": str(Path(digitized).resolve()), **fitted}
            ds = load(report["source"])
            fig = plots.side_by_side(ds.curves, report["learning_curves"]["fit"],
                                     dig.assign(step=dig["tokens"] / KAPLAN_2020["setup"]["batch_tokens"]),
                                     fitted["learning_curves"])
            result["figures"] = {"written": write_figures({"kaplan_side_by_side": fig}, out.work)}
        result = powerlaw.json_safe(result)
        with atomic_file(out.work / "kaplan.json", "w") as f:
            f.write(json.dumps(result, indent=1, allow_nan=False))
        with atomic_file(out.work / "kaplan.md", "w") as f:
            f.write(render_kaplan(result))
    except BaseException:
        out.discard()
        raise
    out.publish()
    return result
