"""The description a prepared corpus carries beside its token files (`depthwidth data prepare`):
meta.json names the vocabulary size, the token dtype (uint16 where every id fits, else uint32),
the tokenizer's hash, the document and token counts and SHA-256 of each split, and `hash`, the
prepared data's identity, which a sweep's trial_id hashes (sweeps/plans/datapath.py). A prepared
folder is trusted for what it is, not for what its meta.json claims (`verify`): the token files
are read once, in chunks, for their SHA-256 and their largest id, and must match it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from depthwidth.data.base import DataError

META = "meta.json"
FORMAT = "depthwidth-tokens-1"  # the mark of a meta.json that `depthwidth data prepare` wrote
TOKENIZER = "tokenizer.json"
SPLIT_FILES = {"train": "train.bin", "val": "val.bin"}
PREPARED_NAMES = (META, TOKENIZER, *SPLIT_FILES.values())  # what a prepared folder holds
DTYPES = {"uint16": "<u2", "uint32": "<u4"}
UINT16_VOCAB = 1 << 16  # token ids 0 .. 65535 fit in uint16
MAX_VOCAB = 1 << 22  # 4.2M symbols: far above any tokenizer in use, and an embedding that fits
META_MAX_BYTES = 1 << 20  # a meta.json is a few hundred bytes; a larger one is not ours
SCAN_BYTES = 16 << 20  # bytes of a token file read at once when it is checked
CACHE_BYTES = 64 << 20  # token files this large have their scan kept across processes
CACHE_ENTRIES = 256


def dtype_for(vocab_size: int) -> str:
    """nanoGPT's uint16 where every id fits, else uint32."""
    return "uint16" if vocab_size <= UINT16_VOCAB else "uint32"


def identity_hash(meta: dict[str, Any]) -> str:
    """SHA-256 over what decides the tokens a model sees: the vocabulary, the dtype, the
    tokenizer and the two token files' own hashes (never a path, a date or the corpus's name)."""
    core = {
        "format": FORMAT,
        "vocab_size": meta["vocab_size"],
        "dtype": meta["dtype"],
        "tokenizer_sha256": meta.get("tokenizer_sha256"),
        "eot_id": meta.get("eot_id"),
        "splits": {s: meta[s]["sha256"] for s in SPLIT_FILES},
    }
    blob = json.dumps(core, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def meta_beside(path: str | Path) -> Path | None:
    """The meta.json that describes `path`: inside it (a prepared folder) or beside it (one of
    its token files); None for a bare token file."""
    p = Path(path).expanduser()
    meta = p / META if p.is_dir() else p.parent / META
    return meta if meta.is_file() else None


def parse_meta(meta_path: Path, where: str) -> Any:
    """meta.json's JSON, or one sentence: unreadable, too large, too deeply nested, not JSON."""
    try:
        with open(meta_path, "rb") as f:
            raw = f.read(META_MAX_BYTES + 1)
        if len(raw) > META_MAX_BYTES:
            raise ValueError(f"it is larger than {META_MAX_BYTES:,} bytes")
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        why = "it is nested too deeply"
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        why = str(exc)
    raise DataError(f"{where} is invalid: cannot read its {META} ({why}).")


def is_own_meta(meta_path: Path) -> bool:
    """A meta.json that `data prepare` wrote (its format mark), whatever else it holds."""
    try:
        meta = parse_meta(meta_path, "")
    except DataError:
        return False
    return isinstance(meta, dict) and meta.get("format") == FORMAT


def _split_counts(meta: dict[str, Any], folder: Path, where: str) -> None:
    """Each split names a positive token count and a SHA-256, and its file has that many tokens."""
    width = np.dtype(DTYPES[meta["dtype"]]).itemsize
    for split, name in SPLIT_FILES.items():
        s = meta.get(split)
        tokens = s.get("tokens") if isinstance(s, dict) else None
        sha = s.get("sha256") if isinstance(s, dict) else None
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not isinstance(sha, str):
            raise DataError(
                f"{where} is invalid: its {META} names no token count and SHA-256 for the {split} split."
            )
        if tokens < 1:
            raise DataError(
                f"{where} is invalid: its {name} holds no tokens ({META}: {split}.tokens = {tokens}); "
                f"prepare it again with a {'larger' if split == 'val' else 'smaller'} --val-fraction."
            )
        f = folder / name
        if not f.is_file():
            raise DataError(f"{where} is invalid: its {name} is missing; prepare it again.")
        have = f.stat().st_size
        if have != tokens * width:
            raise DataError(
                f"{where} is invalid: its {name} holds {have:,} bytes where its {META} says "
                f"{tokens:,} {meta['dtype']} tokens ({tokens * width:,} bytes); prepare it again "
                f"(depthwidth data prepare ... --force)."
            )


def read_meta(meta_path: str | Path, field: str = "DataConfig.path") -> dict[str, Any]:
    """meta.json, checked for itself: its format, a vocabulary data prepare could make, the dtype
    data prepare stores that vocabulary in, positive split counts that match the files' sizes."""
    meta_path = Path(meta_path)
    where = f"{field} = {str(meta_path.parent)!r}"
    meta = parse_meta(meta_path, where)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DataError(f"{where} is invalid: its {META} is not one `depthwidth data prepare` wrote.")
    vocab, dtype = meta.get("vocab_size"), meta.get("dtype")
    if isinstance(vocab, bool) or not isinstance(vocab, int) or not 2 <= vocab <= MAX_VOCAB:
        raise DataError(
            f"{where} is invalid: its {META} names vocab_size = {vocab!r}, where data prepare makes "
            f"from 2 to {MAX_VOCAB:,} symbols."
        )
    if not isinstance(dtype, str) or dtype != dtype_for(vocab):
        raise DataError(
            f"{where} is invalid: its {META} names dtype = {dtype!r} for vocab_size = {vocab:,}, "
            f"which data prepare stores as {dtype_for(vocab)}."
        )
    _split_counts(meta, meta_path.parent, where)
    return meta


def _stamp(path: Path) -> tuple:
    st = path.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "depthwidth" / "token-scans.json"


def _cached_scans() -> dict[str, Any]:
    try:
        with open(_cache_path(), "rb") as f:
            found = json.loads(f.read(META_MAX_BYTES).decode())
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}


def _remember(key: str, value: list) -> None:
    """Keep a large file's scan for later processes (a sweep's trials, the next `sweep plan`), the
    newest CACHE_ENTRIES of them; a cache that cannot be written is only slower."""
    from runstore.files import atomic_file

    scans = _cached_scans()
    scans.pop(key, None)
    scans[key] = value
    with contextlib.suppress(OSError):
        with atomic_file(_cache_path(), "w") as f:
            f.write(json.dumps(dict(list(scans.items())[-CACHE_ENTRIES:])))


@functools.lru_cache(maxsize=64)
def _scan(path: str, dtype: str, stamp: tuple) -> tuple[str, int]:
    """(SHA-256, largest id) of a token file, read in chunks of SCAN_BYTES; cached by the file's
    size, times and inode (in this process, and for files of CACHE_BYTES or more in the user's
    cache folder), so a file written since, or replaced, is read again."""
    key = json.dumps([path, dtype, list(stamp)])
    if stamp[0] >= CACHE_BYTES:
        hit = _cached_scans().get(key)
        if isinstance(hit, list) and len(hit) == 2 and isinstance(hit[0], str) and isinstance(hit[1], int):
            return hit[0], hit[1]
    sha, top = hashlib.sha256(), -1
    buf = bytearray(SCAN_BYTES)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            chunk = memoryview(buf)[:n]
            sha.update(chunk)
            if n >= np.dtype(dtype).itemsize:
                top = max(
                    top, int(np.frombuffer(chunk, dtype=dtype, count=n // np.dtype(dtype).itemsize).max())
                )
    if stamp[0] >= CACHE_BYTES:
        _remember(key, [sha.hexdigest(), top])
    return sha.hexdigest(), top


def largest_id(path: str | Path, dtype: str) -> int:
    """The largest token id in a token file (read in chunks; cached like `verify`)."""
    p = Path(path)
    return _scan(os.path.abspath(p), dtype, _stamp(p))[1]


def verify(meta_path: str | Path, field: str = "DataConfig.path") -> dict[str, Any]:
    """meta.json checked against the token files it describes (`read_meta`, then each file read
    once): every id below the vocabulary, each file's SHA-256 the one recorded, and `hash` the
    identity of those contents, so the identity a trial id hashes is the data's, not a claim."""
    meta_path = Path(meta_path)
    meta = read_meta(meta_path, field)
    where = f"{field} = {str(meta_path.parent)!r}"
    dtype = DTYPES[meta["dtype"]]
    for split, name in SPLIT_FILES.items():
        f = meta_path.parent / name
        sha, top = _scan(os.path.abspath(f), dtype, _stamp(f))
        if top >= meta["vocab_size"]:
            raise DataError(
                f"{where} is invalid: its {name} holds token id {top:,}, not below the vocab_size = "
                f"{meta['vocab_size']:,} its {META} names; prepare it again."
            )
        if sha != meta[split]["sha256"]:
            raise DataError(
                f"{where} is invalid: its {name} is not the file its {META} describes (its SHA-256 "
                f"differs: the tokens were changed since data prepare wrote them); prepare it again."
            )
    if meta.get("hash") != identity_hash(meta):
        raise DataError(
            f"{where} is invalid: its {META} names hash = {meta.get('hash')!r}, which is not the "
            f"identity of the data it describes; prepare it again."
        )
    return meta
