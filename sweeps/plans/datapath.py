"""Data paths in a spec: a relative path is read from the spec file's folder (as config tools do),
and a trial's id names the data by its content, not by the path string, so one id never points at
two different files and the same file under another mount keeps its id (docs/design.md, "Outputs
and inputs"); a prepared corpus is named by the identity of its checked token files, so two
corpora never share an id. Ids computed the old way stay valid as aliases, so existing stores resume.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

from depthwidth.data.tokenmeta import meta_beside, verify
from runstore.files import is_remote

SMALL_FILE = 64 * 2**20  # hashed whole; a larger file by its size and its first and last MiB
_SAMPLE = 2**20


class UnsetVariable(ValueError):
    """A data path names an environment variable that is not set."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def expand(path: str) -> str:
    """`$VAR` and `${VAR}` in a data path replaced by the environment's value, so a bundled spec
    can name a corpus that lives anywhere (sweeps/threshold-gpu-text.toml); an unset one raises."""
    if "$" not in path:
        return path
    out = os.path.expandvars(path)
    if (m := re.search(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", out)) is not None:
        raise UnsetVariable(m.group(1))
    return out


def resolve(path: str, base_dir: str | None) -> str:
    """`path` as an absolute, normalised local path: environment variables expanded, a relative
    one taken from `base_dir` (the spec file's folder). URIs, empty paths and a spec without a
    folder are left as written."""
    if not path or is_remote(path):
        return path
    path = expand(path)
    if base_dir is None:
        return path
    p = os.path.expanduser(path)
    return os.path.normpath(p if os.path.isabs(p) else os.path.join(base_dir, p))


def _file_digest(p: Path, size: int) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        if size <= SMALL_FILE:
            for block in iter(lambda: f.read(_SAMPLE), b""):
                h.update(block)
            return h.hexdigest()
        h.update(f.read(_SAMPLE))
        f.seek(size - _SAMPLE)
        h.update(f.read(_SAMPLE))
    return f"{size}:{h.hexdigest()}"


@functools.lru_cache(maxsize=256)
def _identity(path: str, stamp: tuple) -> str:
    p = Path(path)
    if p.is_file():
        return "sha256:" + _file_digest(p, p.stat().st_size)
    h = hashlib.sha256()  # a folder of text files (depthwidth.data.text): names and contents
    for f in sorted(
        q for q in p.rglob("*") if q.is_file() and not any(s.startswith(".") for s in q.relative_to(p).parts)
    ):
        h.update(f.relative_to(p).as_posix().encode() + b"\0")
        h.update(_file_digest(f, f.stat().st_size).encode() + b"\0")
    return "sha256-folder:" + h.hexdigest()


def _prepared(path: str) -> str | None:
    """A prepared corpus (`depthwidth data prepare`) is named by its identity, the hash of its
    tokens and tokenizer, once its files are checked against its meta.json (tokenmeta.verify,
    which raises DataError naming the file when they differ), so replacing its tokens changes the
    id or is refused; one of its token files read alone adds the file's name (it is then split by
    position). None for data without a meta.json: a bare token file or text keeps the content
    hash its stores' ids were made from."""
    meta = meta_beside(path)
    if meta is None:
        return None
    digest = verify(meta)["hash"]
    return f"prepared:{digest}" + ("" if os.path.isdir(path) else f":{os.path.basename(path)}")


def identity(path: str) -> str:
    """What a trial's id hashes for its data: a prepared corpus's checked identity, else the
    content's SHA-256 (sampled above SMALL_FILE), or the path as written when it cannot be read
    here (a URI, or a file missing on this machine, which the data's own check then reports)."""
    if not path or is_remote(path):
        return path
    if (prepared := _prepared(path)) is not None:
        return prepared
    try:
        st = os.stat(path)
        stamp = (st.st_size, st.st_mtime_ns, st.st_ino)  # a changed file is hashed again
        return _identity(os.path.abspath(path), stamp)
    except OSError:
        return path


def legacy_paths(written: str, resolved: str) -> list[str]:
    """The path strings an id was computed from before paths were resolved: as written in the
    spec, and as the resolved file seen from the current folder (the id of a store written when
    the spec named the file relative to the folder the sweep ran from)."""
    out = [written]
    if resolved and not is_remote(resolved) and os.path.isabs(resolved):
        rel = os.path.relpath(resolved)
        if rel not in out:
            out.append(rel)
    return out
