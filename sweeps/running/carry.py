"""`sweep run SPEC --from TABLE`: carry finished trials from a runs table into the store.

A store's own files do not travel (its parts, Tune's checkpoints and the Parquet files are
usually left out of version control); a runs table exported with `depthwidth sweep results STORE
--csv FILE` does. Run on another machine with `--from FILE`, a sweep takes every row of FILE that
is one of its trials (its trial_id, or one of the trial's older ids) and that the store lacks,
records it as a finished trial, and runs only the rest: no finished run is lost in a move. The
trial_id is a hash of everything that defines the run, so a row carried this way is the same run.
Rows that are not trials of the spec are left out and counted. Their loss curves are not in a runs table: the
carried trials have none in the store. The table passes the one schema of tables
(runstore/schema.py) whole before anything is written, and a row's shape and settings must be
those of the trial its trial_id names.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from runstore.record import REQUIRED_RUN_COLUMNS, TEXT_RUN_COLUMNS
from runstore.schema import TableError, check_table, one_row_per_run
from sweeps.plans.errors import SpecError

# columns whose empty CSV cell means "" (a CSV cannot tell an empty string from a missing value):
# the record's text columns, and a halved trial's `halving` beside them
TEXT_COLUMNS = (*TEXT_RUN_COLUMNS, "halving")


def read_table(path: str) -> pd.DataFrame:
    """The runs table at `path` (.csv or .parquet), checked; SpecError naming the file otherwise."""
    p = Path(path)
    if p.suffix not in (".csv", ".parquet"):
        raise SpecError(f"--from = {path!r} is invalid: expected a runs table ending in .csv or .parquet.")
    if not p.is_file():
        raise SpecError(f"--from = {path!r} is invalid: no such file.")
    try:
        table = pd.read_csv(p, dtype={"trial_id": str}) if p.suffix == ".csv" else pd.read_parquet(p)
    except Exception as exc:  # any unreadable file: one sentence
        raise SpecError(f"--from = {path!r} is invalid: it cannot be read as a runs table ({exc}).") from None
    missing = [c for c in REQUIRED_RUN_COLUMNS if c not in table.columns]
    if missing:
        raise SpecError(
            f"--from = {path!r} is invalid: it lacks the column {missing[0]!r} of a runs table "
            f"(write one with `depthwidth sweep results STORE --csv FILE`)."
        )
    for c in TEXT_COLUMNS:
        if c in table.columns:
            table[c] = table[c].fillna("").astype(str)
    try:  # every row, before any is written: a store never holds a row its readers refuse
        table = check_table(
            table.reset_index(drop=True), f"--from {path}", csv=p.suffix == ".csv", store=True
        )
        table, _ = one_row_per_run(table, f"--from {path}", csv=p.suffix == ".csv")
    except TableError as exc:
        raise SpecError(str(exc)) from None
    return table


# The columns of a runs row that the trial's configuration fixes: (config, field).
CONFIG_COLUMNS = {
    "family": ("model", "family"),
    "depth": ("model", "depth"),
    "width": ("model", "width"),
    "heads": ("model", "heads"),
    "seq_len": ("model", "seq_len"),
    "seed": ("train", "seed"),
    "lr": ("train", "lr"),
    "batch_size": ("train", "batch_size"),
}


def _check_config(rec: dict[str, Any], pos: int, trial, path: str) -> None:
    """A row carried as `trial` holds that trial's shape and settings: a trial_id copied onto
    another run's row would otherwise put that run into the fits under the wrong shape."""
    for col, (section, name) in CONFIG_COLUMNS.items():
        if col not in rec:
            continue
        want = getattr(getattr(trial, section), name)
        got = _plain(rec[col])
        same = got == want if isinstance(want, str) else _close(got, want)
        if not same:
            raise SpecError(
                f"--from {path}: row {pos + 1} has trial_id {rec['trial_id']!r}, a trial of this "
                f"spec with {col} = {want!r}, but its {col} is {got!r}; a row is carried only "
                f"with the configuration its trial_id names."
            )


def _close(got: Any, want: Any) -> bool:
    try:
        return math.isclose(float(got), float(want), rel_tol=1e-9)
    except (TypeError, ValueError):
        return False


def rows_to_carry(
    table: pd.DataFrame, spec, stored: set[str], path: str = "TABLE"
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(the rows of `table` that are trials of `spec` the store lacks, counts of the rest);
    SpecError when a row's configuration is not that of the trial its trial_id names."""
    ids = {t.trial_id for t in spec.trials} | {a for t in spec.trials for a in t.aliases}
    known = {a: t.trial_id for t in spec.trials for a in (t.trial_id, *t.aliases)}
    trial_of = {a: t for t in spec.trials for a in (t.trial_id, *t.aliases)}
    for pos, rec in zip(table.index, table.to_dict(orient="records")):
        if str(rec["trial_id"]) in trial_of:
            _check_config(rec, int(pos), trial_of[str(rec["trial_id"])], path)
    have = {known.get(s, s) for s in stored}
    rows, counts = [], {"other": 0, "held": 0, "repeat": 0}
    taken: set[str] = set()
    for rec in table.to_dict(orient="records"):
        tid = str(rec["trial_id"])
        if tid not in ids:
            counts["other"] += 1
        elif known[tid] in have:
            counts["held"] += 1
        elif known[tid] in taken:
            counts["repeat"] += 1
        else:
            taken.add(known[tid])
            rows.append({k: _plain(v) for k, v in rec.items()})
    return rows, counts


def _plain(v: Any) -> Any:
    """numpy scalars as Python's, so the store's Parquet part gets plain types."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return math.nan
    return v


def carry(store, spec, table: pd.DataFrame, path: str, out) -> int:
    """Record the finished trials of `spec` in `table` (read_table's) in `store`; how many."""
    rows, counts = rows_to_carry(table, spec, set(store.runs()["trial_id"]), path)
    for row in rows:
        store.add_trial(row, [])
    held = f", {counts['held']} already in the store" if counts["held"] else ""
    other = f", {counts['other']} not trials of this spec left out" if counts["other"] else ""
    repeat = f", {counts['repeat']} repeated" if counts["repeat"] else ""
    print(
        f"[{spec.name}] {len(rows)} finished trial(s) carried from {path}{held}{other}{repeat}",
        file=out,
    )
    return len(rows)
