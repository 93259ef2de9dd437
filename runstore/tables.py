"""The runs and curves tables of a store: a compacted base plus append-only parts
(`read_tables`, `append_part`, `compact`), so recording a trial costs the same at the 5,000th
trial as at the first (docs/design.md, "The results store"). No torch, no Ray; the only error
raised is `StoreError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pyarrow as pa

from runstore.files import StoreError, reason
from runstore.layout import CURVE_COLUMNS, CURVES, PARTS_DIR, RUNS
from runstore.location import ARROW_ERRORS, Location, require_columns
from runstore.record import REQUIRED_RUN_COLUMNS, upgraded_row

# Each finished trial is one part, parts/<seq>.curves.parquet then parts/<seq>.runs.parquet (the
# runs part commits it); `compact` folds the parts into runs.parquet and curves.parquet, each
# stamped with a generation and the last part it holds ("through"), and only then deletes them.
# A reader takes the base, then every part after "through", and the newest row of each trial:
# parts left behind by an interrupted compaction are older than "through" and so never count
# twice, and a reader that raced a compaction (a part gone, or a new generation) reads again.
_GEN, _THROUGH = b"depthwidth.generation", b"depthwidth.through"  # the names stores have always carried
_PART_RE = re.compile(r"^(\d{10})\.(runs|curves)\.parquet$")
_READ_ATTEMPTS = 50


def part_name(seq: int, kind: str) -> str:
    return f"{PARTS_DIR}/{seq:010d}.{kind}.parquet"


class Snapshot:
    """What `read_tables` saw: the generation and last part of the runs base, its row count, and
    the parts after it (their numbers, which the writer continues from)."""

    def __init__(self, generation: int, through: int, base_rows: int, parts: list[int]):
        self.generation, self.through, self.base_rows, self.parts = generation, through, base_rows, parts

    @property
    def last(self) -> int:
        return max([self.through, *self.parts])


def _read_arrow(loc: Location, name: str, required: Iterable[str]) -> tuple[pa.Table | None, int, int]:
    """(table or None when missing, generation, through) of one base file."""
    kind = loc.kind(name)
    if kind == "missing":
        return None, 0, -1
    if kind == "dir":
        raise StoreError(
            f"{loc.display(name)} is a folder, not a parquet file; it was left "
            f"untouched: move it aside to start the store over."
        )
    try:
        table = _read_file(loc, name)
    except FileNotFoundError:
        raise _Raced() from None
    except (*ARROW_ERRORS, TypeError) as exc:
        raise StoreError(
            f"{loc.display(name)} cannot be read as parquet ({reason(exc)}); it was left untouched."
        ) from None
    require_columns(loc.display(name), table.column_names, required)
    meta = table.schema.metadata or {}
    return table, int(meta.get(_GEN, b"0")), int(meta.get(_THROUGH, b"-1"))


def _parts(loc: Location) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for name in loc.list_files(PARTS_DIR):
        m = _PART_RE.match(name)
        if m:
            out.setdefault(int(m.group(1)), set()).add(m.group(2))
    return out


def _read_file(loc: Location, name: str) -> pa.Table:
    """One open file, read whole: a file replaced meanwhile is read as the old one or the new
    one, never the footer of one and the pages of the other."""
    import pyarrow.parquet as pq

    with loc.fs.open_input_file(loc.path(name)) as f:
        return pq.read_table(f)


class _Raced(Exception):
    """A part vanished or the base changed while it was read: a compaction ran meanwhile."""


def _read_part(loc: Location, seq: int, kind: str) -> pa.Table:
    try:
        t = _read_file(loc, part_name(seq, kind))
    except FileNotFoundError:
        raise _Raced() from None
    except (*ARROW_ERRORS, TypeError) as exc:
        if loc.kind(part_name(seq, kind)) == "missing":
            raise _Raced() from None
        raise StoreError(
            f"{loc.display(part_name(seq, kind))} cannot be read as parquet "
            f"({reason(exc)}); it was left untouched."
        ) from None
    return _with_seq(t, seq)


def read_tables(
    loc: Location,
    required: Iterable[str] = REQUIRED_RUN_COLUMNS,
    curve_required: Iterable[str] = CURVE_COLUMNS,
):
    """(runs, curves, snapshot): every finished trial once, with the curve of that same version,
    as pandas DataFrames (empty, with the schema's columns, in a new store)."""
    need = (tuple(required), tuple(curve_required))
    for _ in range(_READ_ATTEMPTS):
        try:
            return _read_once(loc, *need)
        except _Raced:
            continue
    raise StoreError(f"{loc.display()} kept changing while it was read; try again.")


def _with_seq(table: pa.Table | None, seq: int) -> pa.Table | None:
    if table is None:
        return None
    return table.append_column("_seq", pa.array([seq] * table.num_rows, pa.int64()))


def _frame(tables: list[pa.Table | None], columns: Iterable[str]):
    import pandas as pd

    tables = [t for t in tables if t is not None]
    if not tables:
        return pd.DataFrame(columns=[*columns, "_seq"])
    return pa.concat_tables(tables, promote_options="permissive").to_pandas()


def _read_once(loc: Location, required: tuple[str, ...], curve_required: tuple[str, ...]):
    runs_base, gen, through_r = _read_arrow(loc, RUNS, required)
    curves_base, _, through_c = _read_arrow(loc, CURVES, curve_required)
    listed = _parts(loc)
    # a part counts once its runs file exists; a lone curves file is an interrupted write
    seqs = sorted(s for s, kinds in listed.items() if "runs" in kinds and s > through_r)
    run_parts = [_read_part(loc, s, "runs") for s in seqs]
    curve_parts = [_read_part(loc, s, "curves") for s in seqs if s > through_c and "curves" in listed[s]]
    if _read_arrow_generation(loc) != gen:
        raise _Raced()
    runs = _frame([_with_seq(runs_base, -1), *run_parts], required or CURVE_COLUMNS[:1])
    curves = _frame([_with_seq(curves_base, -1), *curve_parts], curve_required or CURVE_COLUMNS)
    snap = Snapshot(gen, through_r, 0 if runs_base is None else runs_base.num_rows, seqs)
    runs = upgraded(runs)
    if "trial_id" in runs.columns and "trial_id" in curves.columns:
        runs = runs.drop_duplicates("trial_id", keep="last")  # base, then parts in order: newest wins
        # each trial's curve comes from the part holding its newest runs row when that part is
        # newer than the curves base, else from the base
        newest = runs.loc[runs["_seq"] > through_c].set_index("trial_id")["_seq"]
        want = curves["trial_id"].map(newest).fillna(-1).astype("int64")
        curves = curves[(want == curves["_seq"]) & curves["trial_id"].isin(runs["trial_id"])]
    return (
        runs.drop(columns="_seq").reset_index(drop=True),
        curves.drop(columns="_seq").reset_index(drop=True),
        snap,
    )


def _read_arrow_generation(loc: Location) -> int:
    import pyarrow.parquet as pq

    if loc.kind(RUNS) != "file":
        return 0
    try:
        with loc.fs.open_input_file(loc.path(RUNS)) as f:
            meta = pq.read_schema(f).metadata or {}
    except (*ARROW_ERRORS, TypeError):
        raise _Raced() from None
    return int(meta.get(_GEN, b"0"))


def has_runs(loc: Location) -> bool:
    """The location holds finished trials: a runs base or a runs part."""
    return loc.exists(RUNS) or any("runs" in k for k in _parts(loc).values())


def _arrow(df) -> pa.Table:
    return pa.Table.from_pandas(df, preserve_index=False).combine_chunks()


def append_part(
    loc: Location,
    seq: int,
    runs: list[dict],
    curves: list[dict],
    curve_columns: Iterable[str] = CURVE_COLUMNS,
) -> None:
    """Record trials (one runs row each, and their curves, as records) as part `seq`: curves
    first, then the runs part, which makes them count. The single writer numbers parts one after
    another. A part is small and read once, so it is written plain (no compression, statistics
    or dictionaries): about half the time of a default parquet write."""
    cols = list(curve_columns)
    empty = {"trial_id": pa.string(), "step": pa.int64(), "tokens": pa.int64()}
    curve_table = (
        pa.Table.from_pylist(curves)
        if curves
        else pa.table({c: pa.array([], empty.get(c, pa.float64())) for c in cols})
    )
    for name, table in (
        (part_name(seq, "curves"), curve_table.select(cols)),
        (part_name(seq, "runs"), pa.Table.from_pylist(runs)),
    ):
        loc.write_table(name, table, compression="none", write_statistics=False, use_dictionary=False)


def compact(loc: Location, required: Iterable[str] = REQUIRED_RUN_COLUMNS) -> Snapshot:
    """Fold every part into the base files (curves first, runs last, each one atomic write),
    then delete the parts; returns the store as it now is. Interrupted at any point, the store
    still reads as the same table. Only the store's single writer calls this."""
    runs, curves, snap = read_tables(loc, required)
    stale = [s for s in _parts(loc) if s <= snap.last]
    if not stale:
        return snap
    stamp = {_GEN: str(snap.generation + 1).encode(), _THROUGH: str(snap.last).encode()}
    for name, df in ((CURVES, curves), (RUNS, runs)):
        table = _arrow(df)
        loc.write_table(name, table.replace_schema_metadata({**(table.schema.metadata or {}), **stamp}))
    for seq, kinds in _parts(loc).items():
        if seq <= snap.last:
            for kind in kinds:
                loc.delete(part_name(seq, kind))
    if not loc.list_files(PARTS_DIR):
        loc.delete_dir(loc.path(PARTS_DIR))
    return Snapshot(snap.generation + 1, snap.last, len(runs), [])


def upgraded(runs):
    """A runs table with every row in today's meaning (runstore/record.py `upgraded_row`): rows
    written before `last_step` existed get it, and their planned budget in `steps`."""
    if "steps" not in runs.columns or runs.empty:
        return runs
    old = runs["last_step"].isna().to_numpy() if "last_step" in runs.columns else [True] * len(runs)
    if not any(old):
        return runs
    runs = runs.copy()
    at = runs.index[old]
    fixed = [upgraded_row({**r, "last_step": None}) for r in runs.loc[at].to_dict("records")]
    if "last_step" not in runs.columns:
        runs["last_step"] = runs["steps"]
    runs.loc[at, "steps"] = [r["steps"] for r in fixed]
    runs.loc[at, "last_step"] = [r["last_step"] for r in fixed]
    runs["last_step"] = runs["last_step"].astype("int64")
    return runs
