"""The store's error and its one way of writing a local file: atomically, so a reader sees the
old file or the new one and never a part (docs/rules.md, "Files a command writes"). Also how a location is told
to be a URI or a local path. Standard library only, so a command that merely writes a file (a
checkpoint, a figure, a JSON) loads nothing more.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class StoreError(RuntimeError):
    """The store cannot be read or written; the message names the file."""


def reason(exc: BaseException) -> str:
    """The first line of an error, for a one-sentence message (pyarrow's run to many lines)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


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
