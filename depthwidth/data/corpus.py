"""A raw corpus read as a stream of documents, for `depthwidth data prepare`.

A document is a file of a folder, a record of a JSONL file or a row of a Parquet file (its
`field`), or, in one plain-text file, a run of lines between blank lines (so one file of plays
splits by speech). Files are read line by line and Parquet by row groups: memory stays bounded
by the longest document, and a document longer than MAX_PIECE arrives in pieces that share its
index, so the split by document still keeps it whole on one side.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from depthwidth.data.base import DataError

JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet",)
MAX_PIECE = 4 << 20  # characters of one document handed on at once


@dataclass(frozen=True)
class Piece:
    """Text of document number `doc` (0, 1, 2, ... in reading order)."""

    doc: int
    text: str


class Corpus:
    """The files of CORPUS in reading order (sorted by relative path, hidden names skipped)."""

    def __init__(self, path: str, field: str = "text", flag: str = "CORPUS"):
        self.path, self.field, self.flag = path, field, flag
        root = Path(path).expanduser()
        if not root.exists():
            raise DataError(f"{flag} = {path!r} is invalid: it does not exist.")
        if root.is_dir():
            self.files = sorted(
                (
                    f
                    for f in root.rglob("*")
                    if f.is_file() and not any(s.startswith(".") for s in f.relative_to(root).parts)
                ),
                key=lambda f: f.relative_to(root).as_posix(),
            )
        else:
            self.files = [root]
        self.folder = root.is_dir()
        self.bytes = sum(f.stat().st_size for f in self.files)
        if self.bytes == 0:
            what = "a folder with no text" if self.folder else "an empty file"
            raise DataError(f"{flag} = {path!r} is invalid: it is {what}, so there is nothing to prepare.")

    def pieces(self, progress=None) -> Iterator[Piece]:
        """Every document's text, in order; `progress(bytes_read)` is called as files are read."""
        doc, done = 0, 0
        for f in self.files:
            suffix = f.suffix.lower()
            if suffix in PARQUET_SUFFIXES:
                reader = self._parquet(f, doc)
            elif suffix in JSON_SUFFIXES:
                reader = self._jsonl(f, doc)
            else:
                reader = self._text(f, doc, whole=self.folder)
            for piece in reader:
                doc = piece.doc + 1
                if piece.text:
                    yield piece
            done += f.stat().st_size
            if progress is not None:
                progress(done)

    def _lines(self, f: Path) -> Iterator[tuple[int, int, str]]:
        """(line number, byte offset, text) of each line, refused at the first invalid UTF-8."""
        offset = 0
        with open(f, "rb") as fh:
            for number, raw in enumerate(fh, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(
                        f"{self.flag} = {self.path!r} is invalid: {str(f)!r} is not UTF-8 text, with "
                        f"an invalid byte at offset {offset + exc.start} (line {number})."
                    ) from None
                yield number, offset, line
                offset += len(raw)

    def _text(self, f: Path, doc: int, whole: bool) -> Iterator[Piece]:
        """A file of a folder is one document; one file on its own splits at blank lines."""
        buf: list[str] = []
        size = 0
        for number, _, line in self._lines(f):
            if number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            if not whole and not line.strip():
                if buf:
                    yield Piece(doc, "".join(buf))
                    doc, buf, size = doc + 1, [], 0
                continue
            buf.append(line)
            size += len(line)
            if size >= MAX_PIECE:
                yield Piece(doc, "".join(buf))
                buf, size = [], 0
        yield Piece(doc, "".join(buf))  # the last (or, for an empty file, an empty) piece

    def _record_text(self, record, f: Path, where: str) -> str:
        if not isinstance(record, dict) or self.field not in record:
            keys = ", ".join(map(str, record)) if isinstance(record, dict) else type(record).__name__
            raise DataError(
                f"--field = {self.field!r} is invalid: {where} of {str(f)!r} has no field "
                f"{self.field!r} (it holds: {keys or 'nothing'})."
            )
        value = record[self.field]
        if value is None:
            return ""
        if not isinstance(value, str):
            raise DataError(
                f"--field = {self.field!r} is invalid: {where} of {str(f)!r} holds a "
                f"{type(value).__name__}, not text, in that field."
            )
        return value

    def _jsonl(self, f: Path, doc: int) -> Iterator[Piece]:
        for number, _, line in self._lines(f):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(
                    f"{self.flag} = {self.path!r} is invalid: line {number} of {str(f)!r} is not "
                    f"JSON ({exc.msg})."
                ) from None
            yield Piece(doc, self._record_text(record, f, f"line {number}"))
            doc += 1

    def _parquet(self, f: Path, doc: int) -> Iterator[Piece]:
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(f)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise DataError(
                f"{self.flag} = {self.path!r} is invalid: cannot read {str(f)!r} ({exc})."
            ) from None
        names = pf.schema_arrow.names
        if self.field not in names:
            self._record_text(dict.fromkeys(names), f, "the table")
        row = 0
        for batch in pf.iter_batches(batch_size=1024, columns=[self.field]):
            for value in batch.column(0).to_pylist():
                yield Piece(doc, self._record_text({self.field: value}, f, f"row {row}"))
                doc, row = doc + 1, row + 1


def available_cores() -> int:
    """The cores this process may run on (its affinity), for Rust's encoding threads."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
