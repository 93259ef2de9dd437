"""`sweep run SPEC --from TABLE`: carry finished trials from a runs table into the store.

A store's own files do not travel (its parts, Tune's checkpoints and the Parquet files are
usually left out of version control); a runs table exported with `depthwidth sweep results STORE
--csv FILE` does. Run on another machine with `--from FILE`, a sweep takes every row of FILE that
is one of its trials (its trial_id, or one of the trial's older ids) and that the store lacks,
records it as a finished trial, and runs only the rest: no finished run is lost in a move. The
trial_id is a hash of everything that defines the run, so a row carried this way is the same run.
Rows that are not trials of the spec are left out and counted. Their loss curves are not in a runs table: the
carried trials have none in the store. The table passes the one schema of tables
(runstore/schema.py) whole before anything is written, and a row is carried only as the whole
record a run of the trial its trial_id names would have: every column the configuration fixes
(sweeps/running/record.py `config_columns`, the same function that builds a sweep's own rows),
the counts its resolved model fixes, and, for a run that ended, the tokens and FLOPs of its
budget (`planned_columns`); `branched_from` is empty or the spec's run for that budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from runstore.layout import OK
from runstore.record import REQUIRED_RUN_COLUMNS, RUN_COLUMNS, TEXT_RUN_COLUMNS, RunRecord, config_of
from runstore.schema import TableError, check_table, one_row_per_run
from runstore.tables import upgraded
from sweeps.plans.errors import SpecError
from sweeps.plans.spec import identity
from sweeps.plans.trialconfig import TrialConfig
from sweeps.running.record import config_columns, planned_columns

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
    return upgraded(table)  # rows exported before `last_step` existed, in today's meaning


CONFIG_JSON = {"model_config": ModelConfig, "data_config": DataConfig, "train_config": TrainConfig}
SIZE_COLUMNS = ("n_params", "n_params_total", "flops_per_token", "vocab_size", "embedding_rank")
SPENT_COLUMNS = ("tokens", "flops", "last_step", "flops_spent")  # at most the budget's, where it ended


def _check_record(rec: dict[str, Any], pos: int, trial, spec, path: str) -> dict[str, Any]:
    """The row, carried as `trial`, if it is the whole record a run of that trial would have
    (SpecError naming the first column that is not), with the columns it lacks filled in from the
    configuration. A trial_id copied onto another run's row, or a row with forged counts, would otherwise
    enter the fits under the wrong shape or size."""
    branched_from = spec.branched_from.get(trial.trial_id)  # the spec's, against the row's
    branch = str(rec.get("branched_from") or "")
    if branch and branch not in _ids_of(spec, branched_from):
        why = (
            f"the run it branches from is {branched_from!r}"
            if branched_from
            else "it is not a cooldown branch of this spec"
        )
        raise _mismatch(rec, pos, path, "branched_from", branched_from or "", branch, why)
    tc = TrialConfig.of(trial, branched_from=branch)
    want = {k: v for k, v in config_columns(tc).items() if k not in ("trial_id", "branched_from")}
    planned = planned_columns(tc)
    ended = rec.get("status") == OK
    for col in (*want, *SIZE_COLUMNS, *(SPENT_COLUMNS if ended else ())):
        if col not in rec or _missing(rec[col]):
            continue
        value = want[col] if col in want else planned[col]
        if not _same(col, rec[col], value, tc):
            raise _mismatch(rec, pos, path, col, value, rec[col], "")
    if not ended:
        for col in SPENT_COLUMNS:
            got = rec.get(col)
            if got is not None and not _missing(got) and float(got) > planned[col] * (1 + 1e-9):
                why = f"more than its budget's {planned[col]:.6g}"
                raise _mismatch(rec, pos, path, col, planned[col], got, why)
    # what the table leaves out (a column written before it existed, or not exported) is what
    # the configuration fixes; a run that did not end keeps what it spent unknown
    known = {k: v for k, v in rec.items() if not _missing(v)}
    sizes = {k: planned[k] for k in SIZE_COLUMNS}
    spent = {k: planned[k] for k in SPENT_COLUMNS} if ended else {"flops": math.nan, "flops_spent": math.nan}
    return {**rec, **want, **sizes, **spent, **known}


def _ids_of(spec, trial_id: str | None) -> set[str]:
    """A trial's id and its older ids (aliases)."""
    if trial_id is None:
        return set()
    t = next(t for t in spec.trials if t.trial_id == trial_id)
    return {t.trial_id, *t.aliases}


def _same(col: str, got: Any, want: Any, tc: TrialConfig) -> bool:
    if col in CONFIG_JSON:  # compared as what defines the run, whatever the data path's spelling
        try:
            cfg = CONFIG_JSON[col].from_dict(config_of(got))
        except Exception:  # not a config of that kind at all
            return False
        section = col.split("_")[0]
        mine = identity(tc.model, tc.data, tc.train)[section]
        theirs = identity(**{"model": tc.model, "data": tc.data, "train": tc.train, section: cfg})[section]
        mine.pop("path", None), theirs.pop("path", None)
        return mine == theirs
    if isinstance(want, str):
        return str(got) == want
    return _close(got, want)


def _mismatch(rec, pos: int, path: str, col: str, want: Any, got: Any, why: str) -> SpecError:
    why = f" ({why})" if why else ""
    return SpecError(
        f"--from {path}: row {pos + 1} has trial_id {rec['trial_id']!r}, a trial of this "
        f"spec with {col} = {want!r}, but its {col} is {_plain(got)!r}{why}; a row is carried only "
        f"as the whole record of the run its trial_id names."
    )


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _close(got: Any, want: Any) -> bool:
    try:
        return math.isclose(float(got), float(want), rel_tol=1e-9)
    except (TypeError, ValueError):
        return False


@dataclass
class LeftOut:
    """The rows of a --from table that are not carried: not trials of the spec, already in the
    store, or a repeat of a row carried before them."""

    other: int = 0
    held: int = 0
    repeat: int = 0

    def text(self) -> str:
        return (
            (f", {self.held} already in the store" if self.held else "")
            + (f", {self.other} not trials of this spec left out" if self.other else "")
            + (f", {self.repeat} repeated" if self.repeat else "")
        )


def rows_to_carry(
    table: pd.DataFrame, spec, stored: set[str], path: str = "TABLE"
) -> tuple[list[dict[str, Any]], LeftOut]:
    """(the rows of `table` that are trials of `spec` the store lacks, counts of the rest);
    SpecError when a row's configuration is not that of the trial its trial_id names."""
    ids = {t.trial_id for t in spec.trials} | {a for t in spec.trials for a in t.aliases}
    known = {a: t.trial_id for t in spec.trials for a in (t.trial_id, *t.aliases)}
    trial_of = {a: t for t in spec.trials for a in (t.trial_id, *t.aliases)}
    checked = []
    for pos, rec in zip(table.index, table.to_dict(orient="records")):
        rec = {k: _plain(v) for k, v in rec.items()}
        if str(rec["trial_id"]) in trial_of:
            rec = _check_record(rec, int(pos), trial_of[str(rec["trial_id"])], spec, path)
        checked.append(rec)
    have = {known.get(s, s) for s in stored}
    rows, left = [], LeftOut()
    taken: set[str] = set()
    for rec in checked:
        tid = str(rec["trial_id"])
        if tid not in ids:
            left.other += 1
        elif known[tid] in have:
            left.held += 1
        elif known[tid] in taken:
            left.repeat += 1
        else:
            taken.add(known[tid])
            rows.append(rec)
    return rows, left


def _plain(v: Any) -> Any:
    """numpy scalars as Python's, so the store's Parquet part gets plain types."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return math.nan
    return v


def carry(store, spec, table: pd.DataFrame, path: str, out) -> int:
    """Record the finished trials of `spec` in `table` (read_table's) in `store`; how many."""
    rows, left = rows_to_carry(table, spec, set(store.runs()["trial_id"]), path)
    for row in rows:
        record = RunRecord.from_dict(row)
        store.add_trial(record, [], {k: v for k, v in row.items() if k not in RUN_COLUMNS})
    print(f"[{spec.name}] {len(rows)} finished trial(s) carried from {path}{left.text()}", file=out)
    return len(rows)
