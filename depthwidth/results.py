"""The results store, the contract between the sweep service and the analysis (docs/design.md,
"The results store"): where a store lives, what it holds, and how it is read and written.

A location is a local path or a pyarrow filesystem URI (s3://bucket/prefix, gs://, hdfs://, or an
S3-compatible server with `?endpoint_override=HOST:PORT&scheme=http`), parsed once into a
`Location`. Both sides read and write through it, local or remote alike. The runs and curves
tables are a compacted base plus append-only parts (`read_tables`, `append_part`, `compact`), so
recording a trial costs the same at the 5,000th trial as at the first. No torch, no Ray; the only
error this module raises is `StoreError`.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.fs as pafs

from depthwidth.clitools import reason
from depthwidth.schema import STATUSES

# -- the schema -------------------------------------------------------------------------------
RUNS = "runs.parquet"
CURVES = "curves.parquet"
SPEC = "spec.toml"
TUNE_DIR = "tune"  # Ray Tune's storage (trial checkpoints) lives inside the store
ANALYSIS_DIR = "analysis"  # report.json, report.md and the figures
REQUIRED_RUN_COLUMNS = (
    "trial_id",
    "family",
    "depth",
    "width",
    "heads",
    "seed",
    "n_params",
    "n_params_total",
    "flops_per_token",
    "tokens",
    "steps",
    "final_train_loss",
    "final_val_loss",
    "status",
    "wall_s",
    "depthwidth_version",
    "torch_version",
    "device",
)
CURVE_COLUMNS = ("trial_id", "step", "tokens", "flops", "train_loss", "val_loss", "lr", "wall_s")
OK, DIVERGED, FAILED, STOPPED = STATUSES  # depthwidth/schema.py, the one schema of tables

_ARROW_ERRORS = (pa.ArrowException, OSError, ValueError)
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class StoreError(RuntimeError):
    """The store cannot be read or written; the message names the file."""


def is_remote(location: str | os.PathLike) -> bool:
    """A URI other than file:// (those are plain local paths)."""
    s = str(location)
    return bool(_URI_RE.match(s)) and not s.startswith("file://")


def local_path(location: str | os.PathLike) -> str:
    s = str(location)
    return os.path.abspath(s[len("file://") :] if s.startswith("file://") else s)


def uri_join(location: str, name: str) -> str:
    """`location`/`name`, keeping a URI's query (s3://b/p?endpoint_override=...) at the end."""
    if not name:
        return location
    base, sep, query = location.partition("?")
    return f"{base.rstrip('/')}/{name}{sep}{query}"


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Write a local file atomically: to a temporary name in the same folder, flushed to disk,
    then renamed over `path`, so readers see the old file or the new one and never a part.
    On an error the temporary file is removed and `path` is left as it was."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; a result is not
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a power cut
        dir_fd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class Location:
    """A folder (or one file) given as a local path or a URI, parsed once.

    `path(name)` is a path inside `fs`; `display(name)` is what a user types or reads (a local
    path, or the URI with its options kept at the end)."""

    def __init__(self, location: str | os.PathLike):
        self.location = str(location)
        if is_remote(self.location):
            try:
                self.fs, root = pafs.FileSystem.from_uri(self.location)
            except _ARROW_ERRORS as exc:
                raise StoreError(
                    f"{self.location!r} is not a usable filesystem URI ({reason(exc)})."
                ) from None
            self.root, self.is_local = root.rstrip("/"), False
        else:
            self.fs, self.root, self.is_local = pafs.LocalFileSystem(), local_path(self.location), True

    def __repr__(self) -> str:
        return f"Location({self.location!r})"

    # -- names ------------------------------------------------------------------------------
    def path(self, name: str = "") -> str:
        return f"{self.root}/{name}" if name else self.root

    def display(self, name: str = "") -> str:
        if self.is_local:
            return os.path.join(self.root, name) if name else self.root
        return uri_join(self.location, name)

    def child(self, name: str) -> Location:
        return Location(self.display(name))

    def sibling(self, name: str) -> Location:
        """A location named `name` in the same folder as this one."""
        if self.is_local:
            return Location(os.path.join(os.path.dirname(self.root), name))
        base, sep, query = self.location.partition("?")
        return Location(f"{base.rstrip('/').rpartition('/')[0]}/{name}{sep}{query}")

    @property
    def name(self) -> str:
        return self.root.rstrip("/").rpartition("/")[2]

    # -- reading ----------------------------------------------------------------------------
    def _info(self, name: str) -> pafs.FileType:
        try:
            return self.fs.get_file_info(self.path(name)).type
        except _ARROW_ERRORS as exc:
            raise StoreError(f"{self.display(name)} cannot be reached ({reason(exc)}).") from None

    def exists(self, name: str = "") -> bool:
        """A file of that name exists."""
        return self._info(name) == pafs.FileType.File

    def is_dir(self, name: str = "") -> bool:
        return self._info(name) == pafs.FileType.Directory

    def kind(self, name: str = "") -> str:
        """'file', 'dir' or 'missing'."""
        t = self._info(name)
        return {pafs.FileType.File: "file", pafs.FileType.Directory: "dir"}.get(t, "missing")

    def read_bytes(self, name: str = "") -> bytes:
        try:
            with self.fs.open_input_stream(self.path(name)) as f:
                return f.read()
        except _ARROW_ERRORS as exc:
            raise StoreError(f"{self.display(name)} cannot be read ({reason(exc)}).") from None

    def read_text(self, name: str = "") -> str:
        return self.read_bytes(name).decode("utf-8", errors="replace")

    def read_table(self, name: str = "", required: Iterable[str] = ()):
        """A parquet, CSV or JSON-lines file (by its suffix) as a DataFrame; StoreError names the
        file when it cannot be read or lacks a required column. Never unpickles anything."""
        import pandas as pd
        import pyarrow.parquet as pq

        label = self.display(name)
        suffix = Path(name or self.root).suffix.lower()
        try:
            if suffix == ".csv":
                with self.fs.open_input_file(self.path(name)) as f:
                    df = pd.read_csv(f)
            elif suffix == ".parquet":
                df = pq.read_table(self.path(name), filesystem=self.fs).to_pandas()
            elif suffix in (".jsonl", ".ndjson"):
                # one JSON object per line, read as text: JSON holds no code to run
                with self.fs.open_input_file(self.path(name)) as f:
                    df = pd.read_json(io.BytesIO(f.read()), lines=True, dtype=False)
            else:
                raise StoreError(f"{label} is neither a .parquet, a .csv nor a .jsonl file.")
        except StoreError:
            raise
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise StoreError(f"{label} cannot be read as CSV ({reason(exc)}).") from None
        except (*_ARROW_ERRORS, TypeError) as exc:
            kind = {".csv": "CSV", ".parquet": "parquet"}.get(suffix, "JSON lines")
            raise StoreError(
                f"{label} cannot be read as {kind} ({reason(exc)}); it was left untouched."
            ) from None
        _require_columns(label, df.columns, required)
        return df

    def list_dirs(self, name: str = "") -> list[pafs.FileInfo]:
        return [i for i in self._list(name) if i.type == pafs.FileType.Directory]

    def list_files(self, name: str = "") -> list[str]:
        """The base names of the files directly in folder `name` (none when it is missing)."""
        return [i.base_name for i in self._list(name) if i.type == pafs.FileType.File]

    def _list(self, name: str) -> list[pafs.FileInfo]:
        try:
            return self.fs.get_file_info(pafs.FileSelector(self.path(name), allow_not_found=True))
        except _ARROW_ERRORS:
            return []

    # -- writing ----------------------------------------------------------------------------
    def write_bytes(self, name: str, data: bytes) -> None:
        """Atomic: readers see the old file or the new one, on local disks and object stores."""
        if self.is_local:
            try:
                with atomic_file(self.path(name)) as f:
                    f.write(data)
            except OSError as exc:
                raise StoreError(
                    f"{self.display(name)} could not be written ({reason(exc)}); "
                    f"what was stored before is kept."
                ) from None
            return
        tmp = f"{self.root}/.{name.replace('/', '_')}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            parent = self.path(name).rpartition("/")[0]
            self.fs.create_dir(parent, recursive=True)
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            self.fs.move(tmp, self.path(name))  # a copy on object stores: never a partial file
        except _ARROW_ERRORS as exc:
            raise StoreError(
                f"{self.display(name)} could not be written ({reason(exc)}); what was stored before is kept."
            ) from None

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode("utf-8"))

    def write_table(self, name: str, table: pa.Table, **options) -> None:
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(table, buf, **options)
        self.write_bytes(name, buf.getvalue())

    def delete(self, name: str) -> None:
        """Delete the file `name`; a file already gone is not an error."""
        try:
            self.fs.delete_file(self.path(name))
        except FileNotFoundError:
            pass
        except _ARROW_ERRORS as exc:
            raise StoreError(f"{self.display(name)} could not be deleted ({reason(exc)}).") from None

    def delete_dir(self, path: str) -> bool:
        """Delete a folder given as a path inside `fs`; False when it could not be deleted."""
        try:
            self.fs.delete_dir(path)
            return True
        except (*_ARROW_ERRORS, FileNotFoundError):
            return False

    def check_writable(self, field: str = "storage.path") -> None:
        """The location can be created and written: locally, its nearest existing ancestor is a
        writable folder; remotely, the URI parses, the filesystem answers and the bucket exists.
        Raises StoreError naming `field` and the location."""

        def bad(why: str) -> StoreError:
            return StoreError(f"{field} = {self.location!r} is invalid: {why}.")

        if self.is_local:
            probe = Path(self.root)
            while not probe.exists() and probe != probe.parent:
                probe = probe.parent
            if not probe.is_dir():
                raise bad(f"{str(probe)!r} is a file, not a folder")
            if not os.access(probe, os.W_OK | os.X_OK):
                raise bad(f"{str(probe)!r} is not writable")
            return
        probe = self.root
        try:
            while probe:
                kind = self.fs.get_file_info(probe).type
                if kind == pafs.FileType.Directory:
                    return
                if kind == pafs.FileType.File:
                    raise bad(f"{probe!r} is a file, not a folder")
                probe = probe.rpartition("/")[0]
        except _ARROW_ERRORS as exc:
            raise bad(f"the filesystem cannot be used ({reason(exc)})") from None
        raise bad(f"its bucket {self.root.split('/')[0]!r} does not exist; create it first")

    @classmethod
    def writable(cls, location: str | os.PathLike, field: str) -> Location:
        """Parse `location` and check that it can be written; errors name `field`."""
        try:
            loc = cls(location)
        except StoreError as exc:
            raise StoreError(f"{field} = {exc}") from None
        loc.check_writable(field)
        return loc

    def upload_folder(self, local_dir: str | os.PathLike, name: str = "") -> None:
        """Copy a finished local folder to `name` inside this location (a no-op when both are the
        same local folder)."""
        dest = self.path(name)
        if self.is_local:
            if os.path.abspath(local_dir) == os.path.abspath(dest):
                return
            try:  # file by file, each replaced atomically
                for src in sorted(Path(local_dir).rglob("*")):
                    if src.is_file():
                        with atomic_file(Path(dest) / src.relative_to(local_dir)) as f, open(src, "rb") as g:
                            shutil.copyfileobj(g, f)
            except OSError as exc:
                raise StoreError(
                    f"{self.display(name)} could not be written ({reason(exc)}); the "
                    f"files are in {local_dir}."
                ) from None
            return
        try:
            self.fs.create_dir(dest, recursive=True)
            pafs.copy_files(
                str(local_dir), dest, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.fs
            )
        except _ARROW_ERRORS as exc:
            raise StoreError(
                f"{self.display(name)} could not be written ({reason(exc)}); the files are in {local_dir}."
            ) from None


# -- the runs and curves tables: a compacted base plus append-only parts ----------------------
# Each finished trial is one part, parts/<seq>.curves.parquet then parts/<seq>.runs.parquet (the
# runs part commits it); `compact` folds the parts into runs.parquet and curves.parquet, each
# stamped with a generation and the last part it holds ("through"), and only then deletes them.
# A reader takes the base, then every part after "through", and the newest row of each trial:
# parts left behind by an interrupted compaction are older than "through" and so never count
# twice, and a reader that raced a compaction (a part gone, or a new generation) reads again.
PARTS_DIR = "parts"
_GEN, _THROUGH = b"depthwidth.generation", b"depthwidth.through"
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
    except (*_ARROW_ERRORS, TypeError) as exc:
        raise StoreError(
            f"{loc.display(name)} cannot be read as parquet ({reason(exc)}); it was left untouched."
        ) from None
    _require_columns(loc.display(name), table.column_names, required)
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
    except (*_ARROW_ERRORS, TypeError) as exc:
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
    except (*_ARROW_ERRORS, TypeError):
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


def _require_columns(label: str, columns, required) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        raise StoreError(f"{label} lacks the required column {missing[0]!r}; it was left untouched.")
