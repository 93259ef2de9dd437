"""The description a prepared corpus carries beside its token files (`depthwidth data prepare`):
meta.json names the vocabulary size, the token dtype (uint16 where the vocabulary fits, else
uint32), the tokenizer's hash, the document and token counts of each split, and `hash`, the
prepared data's identity, which a sweep's trial_id hashes (sweeps/plans/datapath.py).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from depthwidth.data.base import DataError

META = "meta.json"
FORMAT = "depthwidth-tokens-1"
TOKENIZER = "tokenizer.json"
SPLIT_FILES = {"train": "train.bin", "val": "val.bin"}
PREPARED_NAMES = (META, TOKENIZER, *SPLIT_FILES.values())  # what a prepared folder holds
DTYPES = {"uint16": "<u2", "uint32": "<u4"}
UINT16_VOCAB = 1 << 16  # token ids 0 .. 65535 fit in uint16


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
        "tokenizer_sha256": meta["tokenizer_sha256"],
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


def read_meta(meta_path: str | Path, field: str = "DataConfig.path") -> dict[str, Any]:
    """meta.json, checked: its format, vocabulary, dtype and split counts are what the reader
    needs, and its token files hold as many tokens as it says (a file replaced since is caught)."""
    meta_path = Path(meta_path)
    where = f"{field} = {str(meta_path.parent)!r}"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{where} is invalid: cannot read its {META} ({exc}).") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DataError(f"{where} is invalid: its {META} is not one `depthwidth data prepare` wrote.")
    vocab = meta.get("vocab_size")
    if not isinstance(vocab, int) or vocab < 2 or meta.get("dtype") not in DTYPES:
        raise DataError(
            f"{where} is invalid: its {META} names vocab_size = {vocab!r} and dtype = "
            f"{meta.get('dtype')!r}; expected a vocabulary of at least 2 and uint16 or uint32."
        )
    if vocab > UINT16_VOCAB and meta["dtype"] == "uint16":
        raise DataError(f"{where} is invalid: vocab_size = {vocab} does not fit its dtype uint16.")
    for split, name in SPLIT_FILES.items():
        f = meta_path.parent / name
        want = (meta.get(split) or {}).get("tokens")
        have = f.stat().st_size if f.is_file() else None
        if have is None or not isinstance(want, int) or have != want * int(DTYPES[meta["dtype"]][-1]):
            raise DataError(
                f"{where} is invalid: {name} holds {have} bytes where its {META} says {want} "
                f"{meta['dtype']} tokens; prepare it again (depthwidth data prepare ... --force)."
            )
    return meta
