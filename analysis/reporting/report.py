"""`analyze`: every fit of the depth–width study from a results store or CSV, written as a report.

Runs the Kaplan et al. 2020 power laws, the crossovers and optimal depth, the two-regime models and
the threshold base of Levine et al. 2020's L_th = log_b d (docs/science.md §2–4), then writes
report.json (stable keys), report.md and the figures (PNG + PDF) under <store>/analysis/.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from analysis.fitting import powerlaw
from analysis.fitting._blas import single_threaded
from analysis.fitting.fitcore import bootstrap_bytes
from analysis.laws import chinchilla, kaplan, levine, regimes, sensitivity, threshold, tokens, tuning
from analysis.readers.inputs import Dataset, InputError, default_out, load, locate, nothing_to_fit
from analysis.reporting import adaptive_report, copying, design_note, plots
from analysis.reporting.answer import answer, kaplan_answer
from analysis.reporting.markdown import render, render_kaplan
from analysis.reporting.output import ReportOutput, check_fingerprint, fingerprint
from depthwidth.accounting import machine_memory_bytes
from depthwidth.clitools import reason, store_containing, store_owning
from depthwidth.config import RECURRENT_FAMILIES
from depthwidth.published import KAPLAN_2020
from runstore.files import StoreError, atomic_file
from runstore.layout import ANALYSIS_DIR
from runstore.location import Location

REPORT_VERSION = 2
# The sections `plot` and `kaplan` read from a stored report.json (each a JSON object).
REPORT_KEYS = ("inputs", "power_laws", "learning_curves", "chinchilla", "regimes", "threshold", "kaplan")


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("depthwidth")
    except Exception:  # not installed: the analysis also runs from a bare checkout
        return None


class Stopwatch:
    """Wall-clock and CPU seconds per stage (CPU shows the work when the machine is shared)."""

    def __init__(self, say=None):
        self.wall, self.cpu = {}, {}
        self._w, self._c = time.perf_counter(), time.process_time()
        self._say = say  # progress: called with one line per finished stage

    def lap(self, name: str) -> None:
        w, c = time.perf_counter(), time.process_time()
        self.wall[name] = round(w - self._w, 4)
        self.cpu[name] = round(c - self._c, 4)
        self._w, self._c = w, c
        if self._say:
            self._say(f"{name} done ({self.wall[name]:.1f} s)")


NO_SHAPE = (
    "the input has no depth and width columns, so this section, which compares shapes, "
    "cannot run; the shape-free sections (learning curves, L(N, D)) still do"
)


def absent(reason: str = NO_SHAPE, **keys) -> dict:
    """A report section that cannot exist for this input, with the keys readers expect."""
    return {"status": "absent", "reason": reason, **keys}


@dataclass
class _Fits:
    """What one section fits and a later one reuses (in memory only)."""

    per_depth: dict = field(default_factory=dict)
    envelope: powerlaw.FitResult | None = None
    env_runs: object = None
    learning_curves: powerlaw.FitResult | None = None
    regimes: dict = field(default_factory=dict)
    points: object = None
    points_source: dict = field(default_factory=dict)


def inputs_section(ds: Dataset) -> dict:
    """How the input was read: its layout, whether it has shapes, and which N the fits use."""
    return {
        "layout": ds.layout,
        "kind": ds.kind,
        "has_shape": ds.has_shape,
        "n_params": ds.n_params_source,
        "notes": list(ds.notes),
        "n_duplicates_dropped": int(ds.n_duplicates),
    }


def power_laws_section(ds: Dataset, fits: _Fits, bootstrap: int, seed: int) -> dict:
    """L(N) per depth and on the deep envelope (Kaplan et al. 2020 Figure 6)."""
    if not ds.has_shape:
        return absent(per_depth={}, envelope=absent())
    runs = ds.runs
    fits.per_depth = powerlaw.fit_per_depth(runs, bootstrap, seed)
    fits.env_runs = powerlaw.deep_envelope(runs) if len(runs) else runs
    fits.envelope = powerlaw.fit_power_law(
        fits.env_runs["n_params"],
        fits.env_runs["loss"],
        name="deep envelope",
        groups=fits.env_runs["run_id"].to_numpy(),
        n_boot=bootstrap,
        seed=seed + 1,
    )
    return {
        "per_depth": {str(d): f.to_dict() for d, f in fits.per_depth.items()},
        "envelope": fits.envelope.to_dict(),
    }


def learning_curves_section(ds: Dataset, fits: _Fits, bootstrap: int, seed: int) -> dict:
    """L(N, S), Kaplan et al. 2020 eq. 1.6 with a floor, over every learning curve."""
    lc, conv = powerlaw.fit_learning_curves(ds.curves, bootstrap, seed + 2)
    fits.learning_curves = lc
    return {
        "fit": lc.to_dict(),
        "n_runs_with_curves": int(ds.curves["run_id"].nunique()),
        "converged_losses": conv.to_dict(orient="records"),
    }


def chinchilla_section(ds: Dataset, fits: _Fits, bootstrap: int, seed: int) -> dict:
    """L(N, D) = E + A/N^alpha + B/D^beta and the compute-optimal allocation (docs/science.md §8)."""
    fits.points, fits.points_source = tokens.token_points(ds.runs, ds.curves)
    points, note = _published_convention(ds, fits.points)
    out = chinchilla.fit_chinchilla(points, fits.points_source, bootstrap, seed + 6)
    return {**out, **note}


def _published_convention(ds: Dataset, points):
    """Hoffmann et al.'s and Besiroglu et al.'s constants count every parameter, so L(N, D) is
    fitted on total counts wherever the input gives them, whatever N the other fits use."""
    conv = ds.n_params_source.get("convention")
    total = ds.runs.get("n_params_total")
    if conv != "total" and total is not None and len(total) and total.notna().all():
        if len(points):
            points = points.assign(
                n_params=points["run_id"].map(ds.runs.set_index("run_id")["n_params_total"])
            )
        text = (
            f"L(N, D) is fitted on total parameter counts ({ds.n_params_source.get('total_from')}), "
            f"the convention of Hoffmann et al. 2022 and Besiroglu et al. 2024, so its constants "
            f"compare with theirs; the other fits use {conv} N"
        )
        return points, {"n_convention": "total", "convention_note": text}
    if conv == "total":
        return points, {
            "n_convention": "total",
            "convention_note": (
                "L(N, D) is fitted on total parameter counts, the convention of Hoffmann et al. 2022 "
                "and Besiroglu et al. 2024"
            ),
        }
    return points, {
        "n_convention": conv,
        "convention_note": (
            f"L(N, D) is fitted on {conv} N, while Hoffmann et al. 2022 and Besiroglu et al. 2024 count "
            f"every parameter: A and alpha differ from theirs by convention as well as by data (a "
            f"vocab_size or n_params_total column gives the total counts)"
        ),
    }


def crossover_sections(ds: Dataset, fits: _Fits) -> tuple[list, dict, dict]:
    """Crossovers of every pair of depths, the optimal depth per N, the transition-width fit."""
    if not ds.has_shape:
        return [], absent(points=[]), absent(points=[])
    runs, per_depth = ds.runs, fits.per_depth
    cross = threshold.all_crossovers(runs, per_depth)
    opt = threshold.optimal_depth(runs, per_depth)
    depths_ok = sorted(d for d, f in per_depth.items() if f.ok)
    points = threshold.transition_points(cross, depths_ok)
    transition = threshold.fit_transition(points, threshold.transition_draws(runs, cross, points, per_depth))
    return cross, opt, transition


def regimes_section(ds: Dataset, fits: _Fits, bootstrap: int, seed: int) -> dict:
    """The candidate laws, with data terms where D varies (docs/science.md §4, §9)."""
    if not ds.has_shape:
        return absent(models={}, preferred=None)
    shaped = fits.points is not None and len(fits.points) and fits.points["depth"].notna().all()
    fits.regimes = regimes.fit_regimes(
        ds.runs,
        bootstrap,
        seed + 3,
        points=fits.points if shaped else None,
        points_source=fits.points_source if shaped else None,
    )
    return {k: v for k, v in fits.regimes.items() if k != "fits"}


def threshold_section(
    ds: Dataset, reg: dict, transition: dict, design: dict, bootstrap: int, seed: int
) -> dict:
    """The headline threshold.base with the knee cross-check (docs/science.md §4)."""
    if not ds.has_shape:
        return absent(
            base=None,
            base_ci=None,
            claimed=False,
            consistent_with_theory=None,
            method=None,
            transition_fit=absent(points=[]),
            knee_fit=absent(points=[]),
        )
    knee_fit = threshold.knees(ds.runs, bootstrap, seed + 4)
    return threshold.headline(reg, transition, knee_fit, design, grid=threshold.swept_grid(ds.runs))


def sensitivity_section(ds: Dataset, fits: _Fits, leave_out: bool = True) -> dict:
    """The loss laws refitted with each depth, width, token budget and seed left out in turn
    (analysis/laws/sensitivity.py), on the same points and weights as the fits on all runs."""
    if not ds.has_shape or not fits.regimes.get("fits"):
        return absent(refits=[], headline=None)
    if not leave_out:
        return absent("not run: the sensitivity check was turned off", refits=[], headline=None)
    data_aware = fits.regimes.get("data_terms")
    table = fits.points if data_aware else ds.runs
    checkpoints = data_aware and fits.points_source.get("kind") == "checkpoints"
    weights = table["weight"].to_numpy(float) if checkpoints else None
    return sensitivity.sensitivity(ds.runs, table.reset_index(drop=True), fits.regimes["fits"], weights)


def kaplan_section(ds: Dataset, fits: _Fits, bootstrap: int, seed: int) -> dict:
    """Our exponents, shape sensitivity and depth collapse beside Kaplan et al. 2020."""
    if not ds.has_shape:
        lc = fits.learning_curves
        alpha_s = (
            {"value": lc.params["alpha_S"], "ci": lc.ci.get("alpha_S"), "S_c": lc.params["S_c"]}
            if lc is not None and lc.ok
            else None
        )
        return {
            "ours": {
                "alpha_N": None,
                "alpha_S": alpha_s,
                "shape": absent(bands=[]),
                "depth_collapse": absent(depths=[]),
            },
            **kaplan.published_block(),
        }
    ref = fits.regimes["fits"].get("kaplan")
    if ref is not None and "D" in ref.law.terms:
        # Shapes are compared on final losses; the data-aware law needs a D for each, so the
        # shape-agnostic trend is refitted on the final losses alone.
        ref = powerlaw.fit_power_law(
            ds.runs["n_params"],
            ds.runs["loss"],
            name="kaplan (final)",
            groups=ds.runs["run_id"].to_numpy(),
            n_boot=0,
        )
    out = kaplan.compare(
        ds.runs,
        {
            "envelope": fits.envelope,
            "envelope_runs": fits.env_runs,
            "learning_curves": fits.learning_curves,
            "kaplan": ref,
        },
        bootstrap,
        seed + 5,
    )
    conv = ds.n_params_source.get("convention")
    out["n_convention"] = conv
    out["convention_note"] = (
        "Kaplan et al. 2020 count non-embedding parameters, as these fits do"
        if conv == "non-embedding"
        else f"Kaplan et al. 2020 count non-embedding parameters, these fits use {conv} N: their "
        f"exponents compare across conventions"
    )
    return out


def regime_accounting_section(ds: Dataset, head: dict) -> dict:
    """Runs below and above L_th under b = 3 and the fitted b; Levine et al.'s predictions."""
    if not ds.has_shape:
        return absent()
    b = head.get("base") if head.get("claimed") else None
    return levine.accounting(ds.runs, b, head.get("status", "not_claimed"))


def build_report(
    ds: Dataset,
    bootstrap: int = 200,
    seed: int = 0,
    watch: Stopwatch | None = None,
    leave_out: bool = True,
) -> dict:
    """All fits for one dataset, one section at a time. Never raises on thin data: each part that
    cannot be fitted carries status 'insufficient_data' or 'not_identified' and a reason; parts
    the input cannot have (shape comparisons without a shape) are 'absent' with the reason.
    `leave_out` runs the sensitivity check (each slice of the design left out in turn)."""
    lap = (watch or Stopwatch()).lap
    fits = _Fits()
    runs = ds.runs
    power_laws = power_laws_section(ds, fits, bootstrap, seed)
    lap("power_laws")
    learning = learning_curves_section(ds, fits, bootstrap, seed)
    lap("learning_curves")
    chin = chinchilla_section(ds, fits, bootstrap, seed)
    lap("chinchilla")
    cross, opt, transition = crossover_sections(ds, fits)
    lap("crossovers")
    reg = regimes_section(ds, fits, bootstrap, seed)
    lap("regimes")
    design = levine.design_advice(runs) if ds.has_shape and len(runs) else absent()
    head = threshold_section(ds, reg, transition, design, bootstrap, seed)
    lap("threshold")
    sens = sensitivity_section(ds, fits, leave_out)
    lap("sensitivity")
    comp = kaplan_section(ds, fits, bootstrap, seed)
    lap("kaplan")
    accounting = regime_accounting_section(ds, head)
    lap("regime_accounting")
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
        "inputs": inputs_section(ds),
        "depths": sorted(int(d) for d in runs["depth"].unique()) if ds.has_shape else [],
        "widths": sorted(float(w) for w in runs["width"].unique()) if ds.has_shape else [],
        "power_laws": power_laws,
        "learning_curves": learning,
        "chinchilla": chin,
        "crossovers": cross,
        "optimal_depth": opt,
        "regimes": reg,
        "design": design,
        "threshold": head,
        "sensitivity": sens,
        "regime_accounting": accounting,
        "kaplan": comp,
        **adaptive_report.entry(ds.source),  # the runs an adaptive sweep chose, and why
        # the plan's power, when `design` rated this very plan into the store
        **design_note.entry(ds.source, ds.all_runs["trial_id"] if ds.kind == "store" else ()),
    }
    return powerlaw.json_safe(report)


def _relrnn(ds: Dataset, out_dir: Path | None) -> dict:
    """The recurrent family's own report (analysis/kerg/relrnn.py), when that module is present."""
    try:
        from analysis.kerg.relrnn import report_relrnn
    except ImportError as exc:
        return {"status": "unavailable", "reason": f"analysis.kerg.relrnn could not be imported ({exc})"}
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
    points, _ = tokens.token_points(ds.runs, ds.curves)  # the same points the fits used
    figs, skipped = plots.make_all(ds.runs, ds.curves, report, points)
    written = write_figures(figs, out)
    return {"written": written, "skipped": skipped}


def check_named(out_dir: str | Path | None) -> None:
    """An --out that names nothing is refused, not read as the current folder."""
    if out_dir is not None and not str(out_dir).strip():
        raise InputError(f"--out = {str(out_dir)!r} is invalid: it names no folder; give a path.")


def output_location(out_dir: str | Path | None, source: str | Path, kind: str) -> Location:
    """The report's destination, checked to be writable before any fit runs."""
    check_named(out_dir)
    try:
        if out_dir is not None:
            dest = Location.writable(out_dir, "--out")
            if dest.is_local and (store := store_owning(Path(dest.root) / "report.json")):
                raise InputError(
                    f"--out = {str(out_dir)!r} is invalid: it is inside the results "
                    f"store {str(store)!r}'s own files; write the report elsewhere."
                )
            return dest
        dest = default_out(source, kind)
        dest.check_writable("the report folder")
        return dest
    except StoreError as exc:
        raise InputError(str(exc)) from None


def check_bootstrap(bootstrap, seed, n_runs: int | None = None, n_points: int = 0) -> None:
    """The bootstrap's count and seed, before any fit runs: non-negative integers, and replicates
    whose estimated memory (analysis.fitting.fitcore.bootstrap_bytes) fits half of what this machine has
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
        raise InputError(
            f"bootstrap = {bootstrap} is invalid: its replicates need about "
            f"{need / 1e9:.3g} GB for {n_runs} runs, more than half of the "
            f"{free / 1e9:.3g} GB this machine has free; use at most {most:,}."
        )


@single_threaded
def analyze(
    source: str | Path,
    out_dir: str | Path | None = None,
    bootstrap: int = 200,
    seed: int = 0,
    tune: tuple = (),
    selection: str = "auto",
    no_tune: bool = False,
    progress=None,
    n: str = "non-embedding",
    leave_out: bool = True,
) -> dict:
    """Fit, plot and write the report for a results store or CSV; returns the report dict.
    Every fit sees each shape at its best setting of the tuning axes (analysis.laws.tuning; `tune`
    names extra axes, `no_tune` averages every setting instead).

    Bad input, or an output that cannot be written, raises analysis.readers.inputs.InputError before any
    fit runs; nothing is written unless the whole report is. `progress`, if given, is called
    with one line per finished stage (the CLI prints them on stderr). `leave_out` runs the
    sensitivity check (the report's `sensitivity` section; off, the section is 'absent')."""
    check_bootstrap(bootstrap, seed)
    watch = Stopwatch(progress)
    ds = load(source, n)
    source_print = fingerprint(ds.all_runs, ds.all_curves)  # the data as read, as `plot` reads it
    if empty := nothing_to_fit(ds):  # raises when there is nothing to report at all
        ds = replace(ds, notes=(empty,) + ds.notes)

    # the copying probe reads each seed's own best setting (analysis/reporting/copying.py), so it
    # selects from the runs before each shape is reduced to its tuned setting
    copying_section = copying.section(ds.runs) if ds.has_shape else absent()
    ds, tuned = tuning.apply(ds, tuple(tune), selection, no_tune)
    check_bootstrap(bootstrap, seed, len(ds.runs), len(ds.curves))
    dest = output_location(out_dir, source, ds.kind)
    watch.lap("load")
    out = ReportOutput(dest, "--out" if out_dir is not None else "the report folder")
    try:
        report = build_report(ds, int(bootstrap), int(seed), watch, leave_out)
        report["source_fingerprint"] = source_print
        report["tuning"] = tuned
        report["copying"] = powerlaw.json_safe(copying_section)
        if (report["chinchilla"].get("points") or {}).get("kind"):  # a data term was fitted
            report["inputs"]["notes"].append(report["chinchilla"]["convention_note"])
        report["nothing_to_fit"] = empty
        report["report_dir"] = dest.display()
        if any(f in RECURRENT_FAMILIES for f in ds.families):
            report["relrnn"] = powerlaw.json_safe(_relrnn(ds, out.work))
            watch.lap("relrnn")
        report = {"answer": answer(report), **report}  # the answer first, before any statistic
        report["figures"] = figures_for(ds, report, out.work)
        watch.lap("plots")
        report["timings_s"], report["cpu_s"] = watch.wall, watch.cpu
        write_report(report, out.work)
        write_page(report, ds, out.work)
    except BaseException:
        out.discard()
        raise
    out.publish(replace=True)
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
    """report.html beside report.md: the same report as one self-contained page (analysis/reporting/html.py)."""
    from analysis.reporting.html import write_html

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
            if lacking := [k for k in REPORT_KEYS if not isinstance(report.get(k), dict)]:
                raise ValueError(f"it lacks {', '.join(lacking)}")
        except ValueError as exc:
            raise InputError(
                f"{cand.display('report.json')} is not a readable report "
                f"({reason(exc)}); run `depthwidth analyze` again to rewrite it."
            ) from None
        return cand, report
    raise InputError(f"no report.json under '{path}' (run `depthwidth analyze {path}` first).")


@single_threaded
def replot(path: str | Path, force: bool = False) -> dict:
    """Redraw every figure from a stored report and its source data, without refitting. The data
    must be what the report fitted (its source_fingerprint), unless `force`."""
    dest, report = find_report(path)
    conv = ((report.get("inputs") or {}).get("n_params") or {}).get("convention")
    ds = load(report["source"], "total" if conv == "total" else "non-embedding")
    check_fingerprint(report, ds.all_runs, ds.all_curves, dest.display("report.json"), force)
    if report.get("tuning"):  # the same runs as the fits: each shape's chosen setting
        req = report["tuning"]["requested"]
        ds, _ = tuning.apply(ds, tuple(req["tune"]), req["selection"], req["disabled"])
    report["answer"] = report.get("answer") or answer(report)  # a report written before answers
    out = ReportOutput(dest)
    try:
        report["figures"] = figures_for(ds, report, out.work)
        with atomic_file(out.work / "report.md", "w") as f:
            f.write(render(report))
        write_page(report, ds, out.work)
    except BaseException:
        out.discard()
        raise
    out.publish(replace=False)
    return report


def kaplan_folder(path: str | Path, out_dir: str | Path | None) -> Location:
    """Where `kaplan` writes: --out, or a folder of its own beside the input (`STORE_kaplan`,
    `runs_kaplan` for runs.csv), never inside a results store, whose report folder every analysis
    rewrites (a sweep's would delete the comparison)."""
    check_named(out_dir)
    if out_dir is None:
        loc, kind = locate(path)
        if loc.is_local and (store := store_containing(loc.root)) is not None:
            loc, kind = Location(store), "dir"
        return loc.sibling((loc.name if kind == "dir" else Path(loc.name).stem) + "_kaplan")
    try:
        dest = Location.writable(out_dir, "--out")
    except StoreError as exc:
        raise InputError(str(exc)) from None
    if dest.is_local and (store := store_containing(dest.root)) is not None:
        raise InputError(
            f"--out = {str(out_dir)!r} is invalid: it lies inside the results store {str(store)!r}, "
            f"whose report folder each analysis rewrites; write the comparison beside it (the "
            f"default, {str(store)}_kaplan)."
        )
    return dest


def _kaplan_inputs(path, dest: Location, bootstrap: int, seed: int) -> dict:
    """The report to compare: the input's own, else one `kaplan` wrote before into `dest`, else
    one analysed now into `dest` (so nothing is written into a store)."""
    for where in (path, dest.display()):
        try:
            return find_report(where)[1]
        except InputError as exc:
            if not str(exc).startswith("no report.json"):
                raise
    load(path)  # a clear error when `path` is not an analysable input either
    return analyze(path, out_dir=dest.display(), bootstrap=bootstrap, seed=seed)


def _alpha_s_reason(report: dict) -> str:
    fit = (report.get("learning_curves") or {}).get("fit") or {}
    if not fit:
        return "not fitted: the input holds no learning curves"
    return f"not fitted: {fit.get('reason') or str(fit.get('status', 'absent')).replace('_', ' ')}"


@single_threaded
def kaplan_report(
    path: str | Path,
    digitized: str | Path | None = None,
    bootstrap: int = 200,
    seed: int = 0,
    out_dir: str | Path | None = None,
) -> dict:
    """Our fits beside Kaplan et al. 2020 (+ digitized published curves fitted with the same code);
    writes kaplan.json, kaplan.md and, with `digitized`, the side-by-side figure into a folder of
    their own (`kaplan_folder`; its absolute path is the result's `folder`). Reads the input's
    report, or analyses it into that folder when it has none yet."""
    check_bootstrap(bootstrap, seed)
    dig = kaplan.load_digitized(digitized) if digitized is not None else None  # validate first
    if dig is not None:
        check_bootstrap(bootstrap, seed, dig["trial_id"].nunique(), len(dig))
    dest = kaplan_folder(path, out_dir)
    report = _kaplan_inputs(path, dest, bootstrap, seed)
    result = {"source": report["source"], **report["kaplan"]}
    if not (result.get("ours") or {}).get("alpha_S"):
        result["ours"] = {**result.get("ours", {}), "alpha_S_reason": _alpha_s_reason(report)}
    out = ReportOutput(dest, "--out" if out_dir is not None else "the comparison's folder")
    try:
        if dig is not None:
            fitted = kaplan.fit_digitized(dig, n_boot=bootstrap, seed=seed)
            result["digitized"] = {"file": str(Path(digitized).resolve()), **fitted}
            ds = load(report["source"])
            fig = plots.side_by_side(
                ds.curves,
                report["learning_curves"]["fit"],
                dig.assign(step=dig["tokens"] / KAPLAN_2020["setup"]["batch_tokens"]),
                fitted["learning_curves"],
            )
            result["figures"] = {"written": write_figures({"kaplan_side_by_side": fig}, out.work)}
        result = powerlaw.json_safe({"answer": kaplan_answer(result), **result})
        with atomic_file(out.work / "kaplan.json", "w") as f:
            f.write(json.dumps(result, indent=1, allow_nan=False))
        with atomic_file(out.work / "kaplan.md", "w") as f:
            f.write(render_kaplan(result))
    except BaseException:
        out.discard()
        raise
    out.publish(replace=False)
    return {**result, "folder": dest.display(), "report": report.get("report_dir")}
