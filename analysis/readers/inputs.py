"""Validating and shaping runs for the analysis: a results store (runs.parquet + curves.parquet,
docs/design.md "The results store") or a CSV / parquet / JSON-lines file of runs or curves.

Reading goes through runstore/ (location.py, tables.py), the store's one home, so local paths and
URIs (s3://...) behave alike. A file is recognised by its columns (analysis/readers/formats.py): Gemstones' checkpoints,
Epoch's Chinchilla points, or the generic table with loss and depth + width and/or n_params
(a `step` column makes it long-format learning curves, `tokens` gives each row its training
tokens). Without n_params, N is derived from the shape (docs/science.md §2); without a shape, only
the shape-free parts of the analysis run. Only parquet, CSV and JSON lines are read (never
pickles). Bad input raises InputError: one sentence naming the column and row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.readers.formats import n_params_for, recognise
from analysis.readers.halving import finals, halving_note
from depthwidth.accounting import kaplan_n_params
from runstore.files import StoreError
from runstore.layout import ANALYSIS_DIR, CURVES, RUNS, STATUSES
from runstore.location import Location
from runstore.schema import TableError, check_table, one_row_per_run
from runstore.tables import has_runs, read_tables

TABLE_SUFFIXES = (".csv", ".parquet", ".jsonl", ".ndjson")


class InputError(ValueError):
    """Unusable analysis input; the message names the file, column and row."""


@dataclass(frozen=True)
class Dataset:
    runs: (
        pd.DataFrame
    )  # every transformer run used in fits: run_id, [depth, width], n_params, loss, seed, tokens
    curves: pd.DataFrame  # run_id, trial_id, n_params, step, loss (val loss) [, tokens] of those runs
    all_runs: pd.DataFrame  # the table as read (all families and statuses)
    all_curves: pd.DataFrame  # the curves as read
    source: Path | str  # a local path, or the URI it was read from
    kind: str  # "store" | "csv" | "parquet" | "jsonl"
    n_excluded: dict  # status -> count of transformer runs left out of the fits
    families: tuple
    layout: str = "store"  # "store" | "generic" | "gemstones" | "epoch" (analysis/readers/formats.py)
    has_shape: bool = True  # depth and width known for every run
    n_params_source: dict = field(default_factory=dict)  # which N the fits use, and why
    notes: tuple = ()  # how the input was read
    halving: dict = field(default_factory=dict)  # a successive halving's summary (analysis/halving.py)
    n_duplicates: int = 0  # rows dropped as exact repeats of a trial_id (and step)


def locate(source: str | Path) -> tuple[Location, str]:
    """The input's location and what it is: 'dir', 'file' or 'missing'."""
    try:
        loc = Location(source)
        return loc, loc.kind()
    except StoreError as exc:
        raise InputError(f"input '{source}' cannot be read ({exc})") from None


def default_out(source: str | Path, kind: str) -> Location:
    """Where a report goes unless --out says otherwise: a store's analysis/ folder, or a folder
    named after a file beside it (local or remote alike)."""
    loc = Location(source)
    if kind == "store" or loc.kind() == "dir":
        return loc.child(ANALYSIS_DIR)
    return loc.sibling(Path(loc.name).stem + "_analysis")


def _row_error(name: str, col: str, pos: int, value, why: str, csv: bool) -> InputError:
    line = f" (line {pos + 2} of the file)" if csv else ""
    return InputError(f"{name}: column '{col}' row {pos + 1}{line} is {value!r}; {why}.")


def checked(table: pd.DataFrame, name: str, csv: bool) -> pd.DataFrame:
    """The table through the one schema of tables (runstore/schema.py), its numbers as numbers;
    InputError naming the file, column, row and value of its first bad cell."""
    try:
        return check_table(table, name, csv)
    except TableError as exc:
        raise InputError(str(exc)) from None


def _require(df: pd.DataFrame, cols: list[str], name: str) -> None:
    for c in cols:
        if c not in df.columns:
            have = ", ".join(map(str, df.columns)) or "none"
            raise InputError(f"{name}: missing required column '{c}' (columns present: {have}).")


def _check_positive(df: pd.DataFrame, cols: list[str], name: str, csv: bool) -> None:
    for c in cols:
        vals = pd.to_numeric(df[c], errors="coerce").to_numpy(float)
        bad = ~np.isfinite(vals) | (vals <= 0)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raw = df[c].iloc[pos]
            why = "it must be a finite positive number"
            raise _row_error(
                name, c, int(df.index[pos]), raw.item() if hasattr(raw, "item") else raw, why, csv
            )


def _check_size(df: pd.DataFrame, name: str, csv: bool) -> None:
    """Kaplan's N = 12·depth·width² must stay a finite number: a width such as 1e300 passes the
    positivity check, then overflows every fit and figure."""
    depth = pd.to_numeric(df["depth"], errors="coerce").to_numpy(float)
    width = pd.to_numeric(df["width"], errors="coerce").to_numpy(float)
    with np.errstate(over="ignore"):
        bad = ~np.isfinite(kaplan_n_params(depth, width))
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        col = "width" if width[pos] >= depth[pos] else "depth"
        raise _row_error(
            name,
            col,
            int(df.index[pos]),
            float(df[col].iloc[pos]),
            "Kaplan's N = 12·depth·width² overflows at that size",
            csv,
        )


def _read(loc: Location, name: str = "") -> pd.DataFrame:
    try:
        return loc.read_table(name).reset_index(drop=True)
    except StoreError as exc:
        raise InputError(str(exc)) from None


N_CHOICES = ("non-embedding", "total")


def load(source: str | Path, n: str = "non-embedding") -> Dataset:
    """Read and validate a store directory, a runs CSV / parquet, or a long-format curves CSV,
    given as a local path or a URI. `n` picks the parameter count every fit uses (N_CHOICES;
    see with_convention)."""
    if n not in N_CHOICES:
        raise InputError(f"--n {n!r} is invalid: expected one of {', '.join(N_CHOICES)}.")
    return with_convention(_load(source), n)


def _load(source: str | Path) -> Dataset:
    loc, kind = locate(source)
    src = source if isinstance(source, str) and not loc.is_local else Path(loc.root)
    if kind == "missing":
        raise InputError(f"input path '{source}' does not exist.")
    if kind == "dir":
        if not has_runs(loc):
            raise InputError(f"directory '{source}' has no {RUNS}, so it is not a results store.")
        try:  # the base tables plus any parts a running sweep has added, each trial once
            runs, curves, _ = read_tables(loc, required=(), curve_required=())
        except StoreError as exc:
            raise InputError(str(exc)) from None
        runs = checked(runs, RUNS, csv=False)
        return _build(runs, curves, RUNS, CURVES, src, "store", csv=False)
    if Path(loc.name).suffix.lower() not in TABLE_SUFFIXES:
        raise InputError(f"{source}: expected a results directory or a .csv, .parquet or .jsonl file.")
    return _load_file(_read(loc), loc.name, src)


def _load_file(table: pd.DataFrame, name: str, src: Path | str) -> Dataset:
    layout = recognise(table.reset_index(drop=True))
    table = layout.table.reset_index(drop=True)
    suffix = Path(name).suffix.lower().lstrip(".")
    kind = {"ndjson": "jsonl"}.get(suffix, suffix)
    csv = kind == "csv"
    _check_shape_columns(table, name)
    table, dup_note = _drop_duplicates(checked(table, name, csv), name, csv)
    n_dup = len(layout.table) - len(table)
    if "step" in table.columns:
        runs, curves = _split_long(table, name, csv)
    else:
        runs, curves = table, pd.DataFrame()
    ds = _build(
        runs, curves, name, name, src, kind, csv=csv, layout=layout.name, notes=layout.notes + dup_note
    )
    return replace(ds, n_duplicates=n_dup)


def _drop_duplicates(table: pd.DataFrame, name: str, csv: bool) -> tuple[pd.DataFrame, tuple]:
    """Each run once, as the store keeps it: rows repeating a trial_id (and step, in curves) with
    the same values are dropped, with a note; repeats that disagree are refused, because which
    one is the run cannot be told. Without a trial_id column every row is its own run."""
    try:
        table, n = one_row_per_run(table, name, csv)
    except TableError as exc:
        raise InputError(str(exc)) from None
    if not n:
        return table, ()
    what = "rows" if "step" in table.columns else "runs"
    note = (
        f"{n} duplicate {what} dropped: rows repeating a trial_id{' and step' * (what == 'rows')} "
        f"with identical values count once, as in a results store"
    )
    return table, (note,)  # the index keeps each row's place in the file


def _check_shape_columns(table: pd.DataFrame, name: str) -> None:
    """depth and width come together or not at all; without them n_params is required."""
    have = [c for c in ("depth", "width") if c in table.columns]
    if len(have) == 1:
        other = "width" if have[0] == "depth" else "depth"
        raise InputError(
            f"{name}: has column '{have[0]}' but no '{other}'; give both (a shape) "
            f"or neither (then n_params is required)."
        )
    if not have and "n_params" not in table.columns:
        cols = ", ".join(map(str, table.columns)) or "none"
        raise InputError(
            f"{name}: missing required column 'n_params' (without depth and width "
            f"the parameter count must be given; columns present: {cols})."
        )


def _split_long(table: pd.DataFrame, name: str, csv: bool):
    """Long-format curves (one row per run and step) → one run per curve (its last point) + curves."""
    # a file with neither is told about 'loss', the name the documented table uses
    loss_col = "val_loss" if "val_loss" in table.columns and "loss" not in table.columns else "loss"
    _require(table, [loss_col], name)
    _check_positive(
        table,
        [c for c in ("depth", "width") if c in table.columns]
        + [loss_col]
        + [c for c in ("n_params", "tokens") if c in table.columns],
        name,
        csv,
    )
    keys = (
        ["trial_id"]
        if "trial_id" in table.columns
        else [c for c in ("depth", "width", "seed", "n_params", "family", "lr") if c in table.columns]
    )
    t = table.copy()
    t["trial_id"] = (
        t.groupby(keys, sort=False).ngroup().astype(str) if keys != ["trial_id"] else t["trial_id"]
    )
    last = t.sort_values("step").groupby("trial_id", sort=False).tail(1).sort_index()
    runs = last.rename(columns={loss_col: "loss"}).drop(columns=["step"])
    curves = t.rename(columns={loss_col: "val_loss"})
    return runs.reset_index(drop=True), curves.reset_index(drop=True)


# Columns that hold what a run measured, not what it was: they are averaged over repeats.
MEASURED = ("loss", "final_val_loss", "final_train_loss", "val_loss", "train_loss", "wall_s", "trial_id")


def _merge_repeats(used: pd.DataFrame, loss_col: str) -> tuple[pd.DataFrame, tuple]:
    """Rows of an unlabelled table (no trial_id, a seed column) that agree in every column but the
    measured ones (same shape, setting, seed, ...) are one run measured several times: they
    become one run, its loss the geometric mean (the fits work in log loss), so each counts once
    and a table of 200,000 such rows is fitted as fast as its distinct configurations."""
    keys = [c for c in used.columns if c not in MEASURED and c != loss_col]
    if used.empty or not keys:
        return used.copy(), ()
    logl = np.log(pd.to_numeric(used[loss_col], errors="coerce").astype(float))
    g = used.assign(_logl=logl.to_numpy()).groupby(keys, sort=False, dropna=False)
    if g.ngroups == len(used):
        return used.copy(), ()
    first = g.head(1).copy()  # in the table's order; the index keeps each row's place
    mean = g["_logl"].transform("mean").loc[first.index]
    first[loss_col] = np.exp(mean.to_numpy())
    first["n_rows"] = g["_logl"].transform("size").loc[first.index].to_numpy()
    note = (
        f"{len(used):,} rows are {len(first):,} configurations (rows that agree in every "
        f"column but the loss); each is fitted once, at the geometric mean of its losses"
    )
    return first.drop(columns=["_logl"]), (note,)


def _build(runs, curves, name, curves_name, src, kind, csv, layout="store", notes=()) -> Dataset:
    # a store names it final_val_loss; a file with neither is told about 'loss', its documented name
    stored = "final_val_loss" in runs.columns or kind == "store"
    loss_col = "final_val_loss" if stored and "loss" not in runs.columns else "loss"
    has_shape = "depth" in runs.columns and "width" in runs.columns
    _require(runs, (["depth", "width"] if kind == "store" or has_shape else ["n_params"]) + [loss_col], name)
    runs = runs.copy()  # checked by the schema (runstore/schema.py) as it was read
    if "status" not in runs.columns:
        runs["status"] = "ok"
    if "family" not in runs.columns:
        runs["family"] = "transformer"
    labelled = "trial_id" in runs.columns
    if not labelled:
        runs["trial_id"] = [str(i) for i in range(len(runs))]
    runs["trial_id"] = runs["trial_id"].astype(str)
    families = tuple(sorted(map(str, runs["family"].dropna().unique())))
    tf = runs[runs["family"] == "transformer"]
    final, halving = finals(tf)  # status ok, and promoted at every rung of a successive halving
    used = tf[final]
    if halving:
        notes = tuple(notes) + (halving_note(halving),)
    checked = ["n_params"] + (["tokens"] if kind != "store" else [])
    _check_positive(
        used,
        (["depth", "width"] if has_shape else []) + [loss_col] + [c for c in checked if c in used],
        name,
        csv,
    )
    n_excluded = {s: int((tf["status"] == s).sum()) for s in STATUSES if s != "ok"}
    if not n_excluded.get("stopped"):  # only a successive halving stops runs
        n_excluded.pop("stopped", None)
    if halving.get("finished_not_promoted"):
        n_excluded["not promoted"] = halving["finished_not_promoted"]
    if has_shape:
        _check_size(used, name, csv)
    # without a seed column, rows of one shape may be different seeds: never merged
    fit_runs, merged = (
        (used.copy(), ())
        if labelled or kind == "store" or "seed" not in used
        else _merge_repeats(used, loss_col)
    )
    notes = tuple(notes) + merged
    fit_runs["loss"] = fit_runs[loss_col].astype(float)
    if has_shape:
        fit_runs["depth"] = fit_runs["depth"].astype(float).round().astype(int)
        fit_runs["width"] = fit_runs["width"].astype(float)
    derived, n_source = n_params_for(fit_runs, has_shape)
    if derived is not None:
        fit_runs["n_params"] = derived
    fit_runs["n_params"] = fit_runs["n_params"].astype(float)
    # A store written without token counts holds 0 there: unknown, not bad input.
    tokens = (
        pd.to_numeric(fit_runs["tokens"], errors="coerce").astype(float)
        if "tokens" in fit_runs.columns
        else pd.Series(np.nan, index=fit_runs.index)
    )
    fit_runs["tokens"] = tokens.where(tokens > 0)
    if "seed" not in fit_runs.columns:
        fit_runs["seed"] = 0
    fit_runs = fit_runs.reset_index(drop=True)
    fit_runs["run_id"] = np.arange(len(fit_runs))
    fit_curves = _fit_curves(curves, fit_runs, curves_name, csv)
    return Dataset(
        runs=fit_runs,
        curves=fit_curves,
        all_runs=runs,
        all_curves=curves,
        source=src,
        kind=kind,
        n_excluded=n_excluded,
        families=families,
        layout=layout,
        has_shape=has_shape,
        n_params_source=n_source,
        notes=tuple(notes),
        halving=halving,
    )


def _conventions(ds: Dataset) -> tuple[str, pd.Series, pd.Series, str]:
    """(what the fits' N is now, the non-embedding counts, the total counts, how the totals were
    found); a count that cannot be known is NaN."""
    runs, used = ds.runs, ds.n_params_source.get("used")
    nan = pd.Series(np.nan, index=runs.index)
    if used in ("derived", "kaplan_12Ld2") or (used == "n_params" and ds.kind == "store"):
        now = "non-embedding"
    elif ds.layout == "epoch":
        now = "total"  # Chinchilla's model sizes count every parameter
    else:
        now = "as given"
    nonemb = runs["n_params"].astype(float) if now == "non-embedding" else nan
    if "n_params_total" in runs.columns:
        total = pd.to_numeric(runs["n_params_total"], errors="coerce").astype(float)
        how = "the input's n_params_total column"
    elif now == "total":
        total, how = runs["n_params"].astype(float), "the input's parameter counts"
    elif "vocab_size" in runs.columns and now == "non-embedding" and ds.has_shape:
        total = nonemb + pd.to_numeric(runs["vocab_size"], errors="coerce") * runs["width"]
        how = (
            "the non-embedding N plus one vocab_size × width token embedding (a read-out tied "
            "to it; untied, it would add as much again)"
        )
    else:
        total, how = nan, ""
    if not (total > 0).all():
        total = nan
    return now, nonemb, total, how


def with_convention(ds: Dataset, n: str = "non-embedding") -> Dataset:
    """The dataset with N in the convention `n` ('non-embedding': Kaplan et al. 2020's count of
    the blocks' weight matrices, docs/science.md §2; 'total': every parameter, Hoffmann et al.
    2022's count), and runs columns n_params_nonemb / n_params_total holding both where they can
    be known (NaN where not). The report states which one the fits used; a convention the input
    cannot give is refused (InputError)."""
    if ds.runs.empty:
        return ds
    now, nonemb, total, how = _conventions(ds)
    src = dict(ds.n_params_source)
    runs = ds.runs.assign(n_params_nonemb=nonemb, n_params_total=total)
    if n == "total" and now != "total":
        if total.isna().any():
            cols = ", ".join(map(str, ds.all_runs.columns))
            raise InputError(
                f"--n total needs every run's total parameter count: give a column "
                f"n_params_total, or vocab_size beside depth and width (columns "
                f"present: {cols})."
            )
        runs["n_params"] = total
        src.update(used="total", why=f"total parameter counts (--n total), from {how}")
        now = "total"
    src["convention"] = now
    src["total_from"] = how or None
    lead = {
        "non-embedding": "non-embedding N (Kaplan et al. 2020's convention)",
        "total": "total N, every parameter (Hoffmann et al. 2022's convention)",
        "as given": "N as the input gives it (whether it counts embeddings is not known)",
    }[now]
    if not src.get("why", "").startswith(lead):
        src["why"] = f"{lead}: {src.get('why', '')}"
    curves = ds.curves
    if len(curves):
        curves = curves.assign(n_params=curves["run_id"].map(runs.set_index("run_id")["n_params"]))
    return replace(ds, runs=runs, curves=curves, n_params_source=src)


def nothing_to_fit(ds: Dataset) -> str | None:
    """Why a dataset has no transformer run to fit, as one sentence, or None when it has one.
    Raises InputError when nothing at all can be reported (no rows, or every run diverged or
    failed); a table of recurrent runs only still gets its recurrent-family report, and the
    sentence says the depth-width sections are empty."""
    if len(ds.runs):
        return None
    name = Path(str(ds.source)).name if ds.kind != "store" else str(ds.source)
    runs = ds.all_runs
    if runs.empty:
        raise InputError(f"{name}: has no runs (only a header), so there is nothing to fit.")
    tf = runs[runs["family"] == "transformer"]
    if len(tf):
        counts = ", ".join(f"{s} {n}" for s, n in ds.n_excluded.items() if n)
        raise InputError(
            f"{name}: nothing to fit: none of its {len(tf)} transformer runs has status ok ({counts})."
        )
    fams = ", ".join(ds.families)
    from depthwidth.config import RECURRENT_FAMILIES

    if not any(f in RECURRENT_FAMILIES for f in ds.families):
        raise InputError(f"{name}: nothing to fit: no run is a transformer (column 'family' holds {fams}).")
    return (
        f"nothing to fit in the depth-width sections: all {len(runs)} runs are {fams}, not "
        f"transformer; the recurrent-family section reports them"
    )


def _fit_curves(curves: pd.DataFrame, fit_runs: pd.DataFrame, name: str, csv: bool) -> pd.DataFrame:
    cols = ["run_id", "trial_id", "n_params", "step", "loss", "tokens"]
    if curves.empty:
        return pd.DataFrame(columns=cols)
    loss_col = "val_loss" if "val_loss" in curves.columns else "loss"
    _require(curves, ["trial_id", "step", loss_col], name)
    c = curves.copy()
    c["trial_id"] = c["trial_id"].astype(str)
    c = c[c["trial_id"].isin(set(fit_runs["trial_id"]))]
    # A curve point without a validation measurement (NaN) is a gap, not bad input.
    c = c[~c[loss_col].isna()]
    _check_positive(c, [loss_col], name, csv)
    checked(c[["step", loss_col]], name, csv)  # step 0 (before training) is a point, as the store allows
    c = c.drop(columns=[k for k in ("run_id", "n_params") if k in c.columns])
    c = c.merge(fit_runs[["trial_id", "run_id", "n_params"]], on="trial_id")
    c["loss"] = c[loss_col].astype(float)
    c["step"] = c["step"].astype(float)
    c["tokens"] = pd.to_numeric(c["tokens"], errors="coerce") if "tokens" in c.columns else np.nan
    return c[cols].reset_index(drop=True)
