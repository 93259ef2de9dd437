"""`depthwidth data prepare`: a raw corpus in, nanoGPT-style token files out, offline.

The tokenizer is Hugging Face `tokenizers` (Rust): a byte-level BPE trained on the corpus's own
train documents (`vocab`), or a given tokenizer.json. Documents go to train or validation by a
hash of their index and the seed (a split by document, never by position), are encoded in
batches on every core (encode_batch runs Rust threads), and are written as flat little-endian
uint16 (uint32 above 65,536 symbols) with the end-of-text token before each document. Everything
is written into a hidden folder beside the output and moved into place at the end, meta.json
last (depthwidth/data/tokenmeta.py): a failed run leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from depthwidth.data.base import DataError
from depthwidth.data.corpus import Corpus, Piece, available_cores
from depthwidth.data.tokenmeta import (
    DTYPES,
    FORMAT,
    META,
    PREPARED_NAMES,
    SPLIT_FILES,
    TOKENIZER,
    dtype_for,
    identity_hash,
)

EOT = "<|endoftext|>"
# end-of-text tokens of common tokenizers, looked for in a given tokenizer.json
EOT_NAMES = (EOT, "<|end_of_text|>", "</s>", "<eos>", "<|eos|>")
MIN_VOCAB = 256 + 1  # the 256 bytes of a byte-level BPE and the end-of-text token
MAX_VOCAB = 1 << 22  # 4.2M symbols: far above any tokenizer in use, and an embedding that fits
DEFAULT_VOCAB = 32768
BATCH_CHARS = 8 << 20  # characters handed to one encode_batch call
SAY_EVERY_S = 2.0


@dataclass(frozen=True)
class Request:
    """One `data prepare` command, as given."""

    corpus: str
    out: str
    field: str = "text"
    vocab: int | None = None
    tokenizer: str | None = None
    val_fraction: float = 0.005
    seed: int = 0
    sample_bytes: float = 1e9
    force: bool = False


def is_val(doc: int, seed: int, fraction: float) -> bool:
    """Whether document `doc` is validation: splitmix64 of (seed, doc) as a uniform in [0, 1)."""
    z = (seed * 0x9E3779B97F4A7C15 + doc + 1) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return ((z ^ (z >> 31)) >> 11) / float(1 << 53) < fraction


class Progress:
    """Lines on stderr, at most one every SAY_EVERY_S seconds, for work that takes a while."""

    def __init__(self, total_bytes: int, stream=None):
        self.total, self.stream, self.t0, self.last = total_bytes, stream or sys.stderr, time.monotonic(), 0.0

    def say(self, line: str, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= SAY_EVERY_S:
            self.last = now
            print(f"data: {line} ({now - self.t0:.0f} s)", file=self.stream, flush=True)

    def share(self, done: int) -> str:
        return f"{done / 1e6:,.1f} of {self.total / 1e6:,.1f} MB ({100 * done / max(1, self.total):.0f}%)"


def check_vocab(vocab: int) -> None:
    if not MIN_VOCAB <= vocab <= MAX_VOCAB:
        raise DataError(
            f"--vocab = {vocab} is invalid: a byte-level BPE needs at least {MIN_VOCAB} symbols "
            f"(256 bytes and the end-of-text token) and this command makes at most {MAX_VOCAB:,}."
        )


def load_tokenizer(path: str):
    """A tokenizer.json, read by `tokenizers`; a file it cannot read is bad input."""
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(Path(path).expanduser()))
    except Exception as exc:  # tokenizers raises a bare Exception for a file it cannot parse
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"--tokenizer = {path!r} is invalid: cannot read it as a tokenizer.json ({why})."
        ) from None
    n = tok.get_vocab_size(with_added_tokens=True)
    if not 2 <= n <= MAX_VOCAB:
        raise DataError(
            f"--tokenizer = {path!r} is invalid: its vocabulary of {n:,} symbols is out of range."
        )
    return tok


def train_bpe(corpus: Corpus, req: Request, progress: Progress):
    """A byte-level BPE of `req.vocab` symbols trained on the train documents (at most
    `req.sample_bytes` characters of them), with the end-of-text token as its one special."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=req.vocab,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    seen = {"chars": 0}

    def texts() -> Iterator[str]:
        for piece in corpus.pieces(
            lambda done: progress.say(f"training the BPE: read {progress.share(done)}")
        ):
            if not is_val(piece.doc, req.seed, req.val_fraction):
                seen["chars"] += len(piece.text)
                yield piece.text
                if seen["chars"] >= req.sample_bytes:
                    return

    tok.train_from_iterator(texts(), trainer=trainer)
    if seen["chars"] == 0:
        raise DataError(f"CORPUS = {req.corpus!r} is invalid: it holds no text to train a tokenizer on.")
    return tok


def eot_id(tok) -> int | None:
    for name in EOT_NAMES:
        i = tok.token_to_id(name)
        if i is not None:
            return i
    return None


class _SplitWriter:
    """One split's token file, appended to and hashed as it is written."""

    def __init__(self, path: Path, dtype: str):
        self.f, self.dtype, self.sha = open(path, "wb"), DTYPES[dtype], hashlib.sha256()
        self.tokens, self.documents = 0, 0

    def write(self, ids: np.ndarray) -> None:
        data = ids.astype(self.dtype, copy=False).tobytes()
        self.f.write(data)
        self.sha.update(data)
        self.tokens += len(ids)

    def close(self) -> dict[str, Any]:
        self.f.close()
        return {"documents": self.documents, "tokens": self.tokens, "sha256": self.sha.hexdigest()}


def _batches(pieces: Iterator[Piece]) -> Iterator[list[Piece]]:
    batch: list[Piece] = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece.text)
        if size >= BATCH_CHARS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def encode(tok, corpus: Corpus, req: Request, tmp: Path, dtype: str, progress: Progress) -> dict[str, Any]:
    """Every document encoded and appended to its split's file; the split counts and hashes."""
    writers = {s: _SplitWriter(tmp / name, dtype) for s, name in SPLIT_FILES.items()}
    eot, last_doc = eot_id(tok), -1

    def report(done: int) -> None:
        tokens = sum(w.tokens for w in writers.values())
        progress.say(f"encoding: read {progress.share(done)}, {tokens:,} tokens")

    for batch in _batches(corpus.pieces(report)):
        encodings = tok.encode_batch_fast([p.text for p in batch], add_special_tokens=False)
        for piece, enc in zip(batch, encodings):
            w = writers["val" if is_val(piece.doc, req.seed, req.val_fraction) else "train"]
            ids = enc.ids
            if piece.doc != last_doc:  # a new document starts with the end-of-text token
                w.documents += 1
                last_doc = piece.doc
                if eot is not None:
                    ids = [eot, *ids]
            w.write(np.asarray(ids, dtype=np.int64))
    return {s: w.close() for s, w in writers.items()}


def _check_splits(splits: dict[str, dict[str, Any]], req: Request) -> None:
    docs = sum(s["documents"] for s in splits.values())
    if docs == 0:
        raise DataError(
            f"CORPUS = {req.corpus!r} is invalid: it holds no text, so there is nothing to prepare."
        )
    for name, s in splits.items():
        if s["tokens"] == 0:
            raise DataError(
                f"--val-fraction = {req.val_fraction:g} is invalid for CORPUS = {req.corpus!r}: none of "
                f"its {docs:,} documents went to the {name} split; a split by document needs "
                f"{'a larger' if name == 'val' else 'a smaller'} fraction or more documents."
            )


def build(req: Request, tmp: Path, stream=None) -> dict[str, Any]:
    """Prepare the corpus into the folder `tmp` (train.bin, val.bin, tokenizer.json, meta.json)."""
    corpus = Corpus(req.corpus, req.field)
    progress = Progress(corpus.bytes, stream)
    if req.tokenizer:
        tok = load_tokenizer(req.tokenizer)
        shutil.copyfile(Path(req.tokenizer).expanduser(), tmp / TOKENIZER)
    else:
        progress.say(
            f"training a {req.vocab:,}-symbol byte-level BPE on {corpus.bytes / 1e6:,.1f} MB", force=True
        )
        tok = train_bpe(corpus, req, progress)
        (tmp / TOKENIZER).write_text(tok.to_str(), encoding="utf-8")
    vocab = tok.get_vocab_size(with_added_tokens=True)
    dtype = dtype_for(vocab)
    progress.say(f"encoding with {available_cores()} threads into {dtype} tokens", force=True)
    splits = encode(tok, corpus, req, tmp, dtype, progress)
    _check_splits(splits, req)
    meta: dict[str, Any] = {
        "format": FORMAT,
        "vocab_size": vocab,
        "dtype": dtype,
        "eot_id": eot_id(tok),
        "tokenizer": TOKENIZER,
        "tokenizer_sha256": hashlib.sha256((tmp / TOKENIZER).read_bytes()).hexdigest(),
        "tokenizer_trained": not req.tokenizer,
        "documents": sum(s["documents"] for s in splits.values()),
        "tokens": sum(s["tokens"] for s in splits.values()),
        **splits,
        "split": {"by": "document", "val_fraction": req.val_fraction, "seed": req.seed},
        "source": {
            "corpus": req.corpus,
            "field": req.field,
            "bytes": corpus.bytes,
            "files": len(corpus.files),
        },
    }
    meta["hash"] = identity_hash(meta)
    (tmp / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    progress.say(f"{meta['documents']:,} documents, {meta['tokens']:,} tokens", force=True)
    return meta


def prepare(req: Request, stream=None) -> dict[str, Any]:
    """Build into a hidden folder beside `req.out`, then move each file into place, meta.json
    last; on any failure the hidden folder (and any folder made for it) goes: nothing is written."""
    out = Path(req.out).expanduser().absolute()
    made = out.parent
    while not made.parent.exists():
        made = made.parent
    made = None if made.exists() else made  # the outermost folder this command creates
    tmp = out.parent / f".{out.name}.prepare-{os.getpid()}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.mkdir()
    try:
        meta = build(req, tmp, stream)
    except BaseException:
        shutil.rmtree(made or tmp, ignore_errors=True)
        raise
    out.mkdir(exist_ok=True)
    for name in (*SPLIT_FILES.values(), TOKENIZER, META):
        os.replace(tmp / name, out / name)
    shutil.rmtree(tmp, ignore_errors=True)
    return meta


def prepared_names(folder: str | Path) -> list[str]:
    """The prepared-data files a folder already holds."""
    p = Path(folder).expanduser()
    return [n for n in PREPARED_NAMES if (p / n).exists()] if p.is_dir() else []
