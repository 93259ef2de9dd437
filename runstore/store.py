"""The results store's writer: the sweep driver records each finished trial here.

The location, the tables and the schema below it are shared with the analysis (docs/design.md
"The results store"). This module keeps what only the writer needs: `spec.toml` (the first spec
verbatim; later, different submissions appended as comments), one runs row and its curve per
finished trial, the one-driver lock, and the row layout. The store holds only parquet, TOML and
JSON, never pickles; an unreadable file is reported, never overwritten.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from runstore.files import StoreError
from runstore.layout import CURVE_COLUMNS, LOCK, RUNS, SPEC, TUNE_DIR
from runstore.location import Location
from runstore.record import REQUIRED_RUN_COLUMNS, RunRecord
from runstore.schema import TableError, check_table
from runstore.tables import append_part, compact, has_runs, read_tables

COMPACT_RATIO = 8  # fold the parts when they number 1/8 of the folded rows: ≤ 8 row rewrites per trial


class ResultStore:
    """One sweep's folder. The sweep driver is its single writer (see `lock`)."""

    def __init__(self, location: str):
        self.loc = Location(location)
        # as people read it wherever a command names the store: a local path made absolute (a
        # relative one is read from the folder the command runs in), a URI as given
        self.location = self.loc.display()
        self.fs, self.root, self.is_local = self.loc.fs, self.loc.root, self.loc.is_local
        self._runs: pd.DataFrame | None = None
        self._curves: pd.DataFrame | None = None
        self._next: int | None = None  # the number of the next part
        self._pending = self._base_rows = 0
        self._wrote = False
        self._lock_file: Any = None

    # -- paths -------------------------------------------------------------------------------
    def path(self, name: str) -> str:
        return self.loc.path(name)

    def display(self, name: str) -> str:
        return self.loc.display(name)

    @property
    def tune_storage(self) -> str:
        """Where Ray Tune keeps trial checkpoints (a path inside `self.fs`, given to Tune together
        with the filesystem, so a URI's options such as an endpoint carry over)."""
        return self.path(TUNE_DIR)

    def exists(self, name: str) -> bool:
        return self.loc.exists(name)

    # -- reading -----------------------------------------------------------------------------
    def _read(self) -> None:
        self._runs, self._curves, snap = read_tables(self.loc, REQUIRED_RUN_COLUMNS)
        if self._next is None:  # the writer continues the numbering of parts
            self._next, self._pending, self._base_rows = snap.last + 1, len(snap.parts), snap.base_rows

    def runs(self) -> pd.DataFrame:
        if self._runs is None:
            self._read()
        return self._runs

    def curves(self) -> pd.DataFrame:
        if self._curves is None:
            self._read()
        return self._curves

    def has_runs(self) -> bool:
        return has_runs(self.loc)

    def finished_ids(self) -> set[str]:
        return set(self.runs()["trial_id"])

    def check(self) -> None:
        """Read everything once, so a damaged store stops a sweep before it runs anything."""
        self.runs()
        self.curves()
        self.first_spec_text()

    def first_spec_text(self) -> str | None:
        if not self.exists(SPEC):
            return None
        first, _, _ = self.loc.read_text(SPEC).partition(_EXTENSION_MARK)
        return first

    # -- writing -----------------------------------------------------------------------------
    def write_spec(self, text: str, source: str) -> None:
        """First submission verbatim; a later, different one appended as a commented block."""
        if not self.exists(SPEC):
            self.loc.write_text(SPEC, text)
            return
        current = self.loc.read_text(SPEC)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        first = current.partition(_EXTENSION_MARK)[0]
        if first == text or f"sha256={digest}" in current:
            return
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        block = "".join(f"# {line}\n" for line in text.splitlines())
        sep = "" if current.endswith("\n") else "\n"
        self.loc.write_text(
            SPEC, current + sep + f"{_EXTENSION_MARK} {stamp} from {source} sha256={digest}\n" + block
        )

    def add_trial(
        self,
        record: RunRecord,
        curve: Sequence[Mapping[str, Any]] = (),
        beside: Mapping[str, Any] | None = None,
    ) -> None:
        """Record one finished run: its `RunRecord`, the columns `beside` it (numbers a run reports
        beyond the record's, a halved trial's `halving`) and its curve (the evaluations as train()
        reported them). A later row of the same id (from --rerun) replaces the older one for every
        reader. Curves first, runs last: a trial counts as finished once its runs row exists. The
        parts are folded into runs.parquet and curves.parquet once they number an eighth of the
        rows already folded, so recording a trial costs O(1) amortised however large the store
        (docs/bench/sweeps.md)."""
        row = {**record.to_dict(), **(beside or {})}
        curve = make_curve(record.trial_id, curve)
        try:  # the one schema of tables: the store never holds a row its readers refuse
            check_table(pd.DataFrame([row]), self.display(RUNS), store=True)
        except TableError as exc:
            raise StoreError(f"trial {row.get('trial_id')!r} was not recorded: {exc}") from None
        if self._next is None:
            self._read()
        append_part(self.loc, self._next, [row], curve, _curve_columns(curve))
        self._next += 1
        self._pending += 1
        self._wrote = True
        self._runs = self._curves = None  # read again when asked
        if self._pending >= max(1, self._base_rows // COMPACT_RATIO):
            self.compact()

    def close(self) -> None:
        """The driver's end: fold what it wrote into the base files, then release the lock. A
        fold that cannot be written (a full disk) leaves the parts, which read as the same table."""
        try:
            if self._wrote:
                self.compact()
        except StoreError:
            pass
        finally:
            self.unlock()

    def compact(self) -> None:
        """Fold the parts into the two base files."""
        if self._pending:
            snap = compact(self.loc, REQUIRED_RUN_COLUMNS)
            self._next, self._pending, self._base_rows = snap.last + 1, 0, snap.base_rows
            self._runs = self._curves = None

    def lock(self) -> None:
        """One driver per store: an advisory lock the OS drops when the process dies."""
        if not self.is_local:
            return
        import fcntl

        os.makedirs(self.root, exist_ok=True)
        f = open(self.path(LOCK), "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise StoreError(
                f"{self.root} is being written by another running sweep; wait for it "
                f"to finish or stop it first."
            ) from None
        self._lock_file = f

    def unlock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


_EXTENSION_MARK = "# ---- extension submitted"


def _curve_columns(curve: list[dict[str, Any]]) -> list[str]:
    extra = sorted({k for c in curve for k in c} - set(CURVE_COLUMNS))
    return list(CURVE_COLUMNS) + extra


def make_curve(trial_id: str, curve: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The curve rows of one run: the curve columns of each evaluation, then its other numbers."""
    out = []
    for point in curve:
        rec: dict[str, Any] = {"trial_id": trial_id}
        for k in CURVE_COLUMNS[1:]:
            rec[k] = point.get(k, math.nan)
        for k, v in point.items():
            if k not in rec and _is_number(v):
                rec[k] = float(v)
        rec["step"], rec["tokens"] = int(rec["step"]), int(rec["tokens"])
        out.append(rec)
    return out


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def runs_table_text(df: pd.DataFrame, tuning: tuple[str, ...] = ()) -> str:
    """The runs table as people read it: the grid coordinates, the learning rate and the other
    `tuning` columns given (those that vary, sweeps/cli.py), sizes and losses."""
    if df.empty:
        return "(no finished trials)"
    cols = [
        c
        for c in (
            "trial_id",
            "family",
            "depth",
            "width",
            "heads",
            "seed",
            "lr",
            *(t for t in tuning if t != "lr"),
            "n_params",
            "steps",
            "final_train_loss",
            "final_val_loss",
            "accuracy",
            "status",
            "wall_s",
        )
        if c in df.columns
    ]
    order = [c for c in ("family", "depth", "width", *tuning, "seed") if c in cols]
    view = df[cols].sort_values(order, kind="stable")
    # tuning values in general format: an eps of 1e-8 would read 0.0000 with four decimals
    general = {c: (lambda x: f"{x:.4g}") for c in ("lr", *tuning) if c in cols}
    return view.to_string(index=False, formatters=general, float_format=lambda x: f"{x:.4f}")


def spec_versions(text: str) -> list[str]:
    """The store's spec.toml: the first spec, then each later, different one (kept as a
    commented block after an extension mark)."""
    first, *blocks = text.split(_EXTENSION_MARK)
    out = [first]
    for block in blocks:
        lines = block.splitlines()[1:]
        out.append("\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines))
    return out
