"""Locations of stored results: a local path or a pyarrow filesystem URI (s3://, gs://, hdfs://,
or an S3-compatible server with `?endpoint_override=HOST:PORT&scheme=http`). Shared by the
results store (sweeps) and the analysis, which reads stores wherever they are."""

from __future__ import annotations

import os
import re

URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_remote(location: str | os.PathLike) -> bool:
    """A URI other than file:// (those are plain local paths)."""
    s = str(location)
    return bool(URI_RE.match(s)) and not s.startswith("file://")


def local_path(location: str | os.PathLike) -> str:
    s = str(location)
    return os.path.abspath(s[len("file://"):] if s.startswith("file://") else s)


def uri_join(location: str, name: str) -> str:
    """`location`/`name`, keeping a URI's query (s3://b/p?endpoint_override=...) at the end."""
    base, sep, query = location.partition("?")
    return f"{base.rstrip('/')}/{name}{sep}{query}"


def child(location: str, name: str) -> str:
    """A file inside a folder given as a local path or a URI."""
    return uri_join(location, name) if is_remote(location) else os.path.join(location, name)


def filesystem(location: str):
    """(pyarrow filesystem, path inside it) of a remote URI; OSError/ArrowInvalid propagate."""
    import pyarrow.fs as pafs

    fs, path = pafs.FileSystem.from_uri(location)
    return fs, path.rstrip("/")


def reason(exc: BaseException) -> str:
    """The first line of an error, for a one-sentence message (pyarrow's run to many lines)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
