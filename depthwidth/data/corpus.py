"""A raw corpus read as a stream of documents, for `depthwidth data prepare`.

A document is a file of a folder, a record of a JSONL file or a row of a Parquet file (its
`field`), or, in one plain-text file, a run of lines between blank lines (so one file of plays
splits by speech). Memory stays bounded whatever the corpus's shape: files are read READ_BYTES at
a time (a line without end arrives in parts), Parquet by row groups, and a document longer than
MAX_PIECE characters is handed on in pieces cut at whitespace, which share its index, so the split
by document still keeps it whole on one side (docs/rules.md, "Bounds of data prepare").
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from depthwidth.data.base import DataError

JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet",)
MAX_PIECE = 1 << 20  # characters of one document handed on at once (to the BPE, to one encoding)
READ_BYTES = 1 << 20  # bytes of a text file read at once
MAX_RECORD_CHARS = 1 << 28  # one JSONL line, parsed whole
_WHITESPACE = " \n\t\r\f\v"


@dataclass(frozen=True)
class Piece:
    """Text of document number `doc` (0, 1, 2, ... in reading order); `where` names the file and
    the line or row it starts at, for messages."""

    doc: int
    text: str
    where: str = ""


def cut(text: str, limit: int = MAX_PIECE) -> int:
    """Where a piece of a long document ends: before the last whitespace in the second half of
    its first `limit` characters, so the next piece starts with it as the BPE's pre-tokenizer
    would split there; at `limit` for text without whitespace (a blob is cut, not kept whole)."""
    best = max(text.rfind(c, limit // 2, limit) for c in _WHITESPACE)
    return best if best > 0 else limit


class _Document:
    """One document's text as it is read, handed on in pieces of at most MAX_PIECE characters."""

    def __init__(self, doc: int, where: str):
        self.doc, self.where, self.parts, self.size = doc, where, [], 0
        self.has_text = False

    def add(self, text: str) -> Iterator[Piece]:
        self.parts.append(text)
        self.size += len(text)
        self.has_text = self.has_text or bool(text)
        if self.size <= MAX_PIECE:
            return
        whole, start = "".join(self.parts), 0  # joined once: a long record is cut in one pass
        while len(whole) - start > MAX_PIECE:
            i = start + cut(whole[start : start + MAX_PIECE], MAX_PIECE)
            yield Piece(self.doc, whole[start:i], self.where)
            start = i
        rest = whole[start:]
        self.parts, self.size = [rest], len(rest)

    def end(self) -> Piece:
        return Piece(self.doc, "".join(self.parts), self.where)


class Corpus:
    """The files of CORPUS in reading order (sorted by relative path, hidden names skipped).
    `read` counts the bytes read so far, for progress."""

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
        self.read = 0
        if self.bytes == 0:
            what = "a folder with no text" if self.folder else "an empty file"
            raise DataError(f"{flag} = {path!r} is invalid: it is {what}, so there is nothing to prepare.")

    def pieces(self) -> Iterator[Piece]:
        """Every document's text, in order, in pieces of at most MAX_PIECE characters."""
        doc, self.read = 0, 0
        for f in self.files:
            suffix = f.suffix.lower()
            if suffix in PARQUET_SUFFIXES:
                reader = self._parquet(f, doc)
            elif suffix in JSON_SUFFIXES:
                reader = self._jsonl(f, doc)
            else:
                reader = self._text(f, doc, whole=self.folder)
            done = self.read
            for piece in reader:
                doc = piece.doc + 1
                if piece.text:
                    yield piece
            self.read = done + f.stat().st_size

    def _invalid(self, why: str) -> DataError:
        return DataError(f"{self.flag} = {self.path!r} is invalid: {why}.")

    def _chunks(self, f: Path) -> Iterator[tuple[int, str, bool]]:
        """(line number, text, whether it ends the line) of each part of each line, at most
        READ_BYTES bytes at once; a byte-order mark at the start is dropped; refused at the first
        invalid UTF-8."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        offset, number = 0, 1
        with open(f, "rb") as fh:
            while True:
                raw = fh.readline(READ_BYTES)
                pending = len(decoder.getstate()[0])
                try:
                    text = decoder.decode(raw, final=not raw)
                except UnicodeDecodeError as exc:
                    raise self._invalid(
                        f"{str(f)!r} is not UTF-8 text, with an invalid byte at offset "
                        f"{offset - pending + exc.start} (line {number})"
                    ) from None
                if not raw:
                    return
                if offset == 0:
                    text = text.removeprefix("\ufeff")
                ends = raw.endswith(b"\n")
                yield number, text, ends
                offset += len(raw)
                self.read += len(raw)
                number += ends

    def _text(self, f: Path, doc: int, whole: bool) -> Iterator[Piece]:
        """A file of a folder is one document; one file on its own splits at blank lines (lines
        of whitespace alone, up to MAX_PIECE characters: a longer one is text)."""
        where = repr(str(f))
        current = _Document(doc, f"{where} line 1")
        blank: list[str] = []  # the parts of the line so far while they are whitespace alone
        line_start = True
        for number, text, ends in self._chunks(f):
            if whole:
                yield from current.add(text)
                continue
            if line_start:
                blank, maybe_blank = [], True
            if maybe_blank and not text.strip() and sum(map(len, blank)) + len(text) <= MAX_PIECE:
                blank.append(text)
                if ends:  # a blank line: the document so far ends
                    if current.has_text:
                        yield current.end()
                        doc += 1
                    current = _Document(doc, f"{where} line {number + 1}")
            else:
                maybe_blank = False
                for part in (*blank, text):
                    yield from current.add(part)
                blank = []
            line_start = ends
        yield current.end()  # the last (or, for an empty file, an empty) piece

    def _record_text(self, record, f: Path, where: str) -> str:
        if not isinstance(record, dict) or self.field not in record:
            keys = ", ".join(map(repr, record)) if isinstance(record, dict) else type(record).__name__
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
        if not value.isascii():
            try:  # JSON's \ud800 escapes make a string no tokenizer can take
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise self._invalid(
                    f"{where} of {str(f)!r} holds text that is not valid Unicode (the lone "
                    f"surrogate {value[exc.start]!r} at character {exc.start})"
                ) from None
        return value

    def _record(self, f: Path, number: int, line: str):
        try:
            return json.loads(line)
        except RecursionError:
            why = "it is nested too deeply"
        except json.JSONDecodeError as exc:
            why = exc.msg
            if f.suffix.lower() == ".json" and number == 1 and line.lstrip()[:1] in ("[", "{"):
                raise self._invalid(
                    f"{str(f)!r} is read as JSON lines, one record per line, and this one is one "
                    f"JSON document; write one record per line (jq -c '.[]' does)"
                ) from None
        raise self._invalid(f"line {number} of {str(f)!r} is not JSON ({why})")

    def _jsonl(self, f: Path, doc: int) -> Iterator[Piece]:
        parts: list[str] = []
        size = 0
        for number, text, ends in self._chunks(f):
            parts.append(text)
            size += len(text)
            if size > MAX_RECORD_CHARS:
                raise self._invalid(
                    f"line {number} of {str(f)!r} is longer than {MAX_RECORD_CHARS:,} characters, "
                    f"the most one JSON record may hold; split that record"
                )
            if not ends:
                continue
            line, parts, size = "".join(parts), [], 0
            if line.strip():
                yield from self._split(doc, self._record(f, number, line), f, f"line {number}")
                doc += 1
        if parts and "".join(parts).strip():  # a last line without a newline
            yield from self._split(doc, self._record(f, number, "".join(parts)), f, f"line {number}")

    def _split(self, doc: int, record, f: Path, where: str) -> Iterator[Piece]:
        current = _Document(doc, f"{str(f)!r} {where}")
        yield from current.add(self._record_text(record, f, where))
        yield current.end()

    def _parquet(self, f: Path, doc: int) -> Iterator[Piece]:
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(f)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise self._invalid(f"cannot read {str(f)!r} ({exc})") from None
        names = pf.schema_arrow.names
        if self.field not in names:
            self._record_text(dict.fromkeys(names), f, "the table")
        rows, row, start = max(1, pf.metadata.num_rows), 0, self.read
        for batch in pf.iter_batches(batch_size=1024, columns=[self.field]):
            for value in batch.column(0).to_pylist():
                yield from self._split(doc, {self.field: value}, f, f"row {row}")
                doc, row = doc + 1, row + 1
            self.read = start + f.stat().st_size * row // rows


def available_cores() -> int:
    """The cores this process may run on (its affinity), for Rust's encoding threads."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
