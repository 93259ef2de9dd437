"""Where a store lives: a local path or a pyarrow filesystem URI (s3://bucket/prefix, gs://,
hdfs://, or an S3-compatible server with `?endpoint_override=HOST:PORT&scheme=http`), parsed once
into a `Location`. The sweep service and the analysis both read and write through it, local or
remote alike; every write is atomic. No torch, no Ray; the only error raised is `StoreError`.
"""

from __future__ import annotations

import io
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from runstore.files import StoreError, atomic_file, is_remote, local_path, reason, uri_join

ARROW_ERRORS = (pa.ArrowException, OSError, ValueError)


class Location:
    """A folder (or one file) given as a local path or a URI, parsed once.

    `path(name)` is a path inside `fs`; `display(name)` is what a user types or reads (a local
    path, or the URI with its options kept at the end)."""

    def __init__(self, location: str | os.PathLike):
        self.location = str(location)
        if is_remote(self.location):
            try:
                self.fs, root = pafs.FileSystem.from_uri(self.location)
            except ARROW_ERRORS as exc:
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
        except ARROW_ERRORS as exc:
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
        except ARROW_ERRORS as exc:
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
        except (*ARROW_ERRORS, TypeError) as exc:
            kind = {".csv": "CSV", ".parquet": "parquet"}.get(suffix, "JSON lines")
            raise StoreError(
                f"{label} cannot be read as {kind} ({reason(exc)}); it was left untouched."
            ) from None
        require_columns(label, df.columns, required)
        return df

    def list_dirs(self, name: str = "") -> list[pafs.FileInfo]:
        return [i for i in self._list(name) if i.type == pafs.FileType.Directory]

    def list_files(self, name: str = "") -> list[str]:
        """The base names of the files directly in folder `name` (none when it is missing)."""
        return [i.base_name for i in self._list(name) if i.type == pafs.FileType.File]

    def _list(self, name: str) -> list[pafs.FileInfo]:
        try:
            return self.fs.get_file_info(pafs.FileSelector(self.path(name), allow_not_found=True))
        except ARROW_ERRORS:
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
        except ARROW_ERRORS as exc:
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
        except ARROW_ERRORS as exc:
            raise StoreError(f"{self.display(name)} could not be deleted ({reason(exc)}).") from None

    def delete_dir(self, path: str) -> bool:
        """Delete a folder given as a path inside `fs`; False when it could not be deleted."""
        try:
            self.fs.delete_dir(path)
            return True
        except (*ARROW_ERRORS, FileNotFoundError):
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
        except ARROW_ERRORS as exc:
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
        except ARROW_ERRORS as exc:
            raise StoreError(
                f"{self.display(name)} could not be written ({reason(exc)}); the files are in {local_dir}."
            ) from None


def require_columns(label: str, columns, required) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        raise StoreError(f"{label} lacks the required column {missing[0]!r}; it was left untouched.")
