"""`depthwidth data prepare`: a raw corpus in, nanoGPT-style token files out, offline.

The tokenizer is Hugging Face `tokenizers` (Rust): a byte-level BPE trained on the corpus's own
train documents (`vocab`), or a given tokenizer.json (its truncation and padding switched off, so
every document is encoded whole). Documents go to train or validation by a hash of their index
and the seed (a split by document, never by position); a first pass over the documents checks
that both splits get one before any training. Documents are encoded in batches on every core and
written as flat little-endian uint16 (uint32 where the largest id is 65,536 or more) with the
end-of-text token before each. Everything is written into a hidden folder beside the output and
moved into place at the end, meta.json last (depthwidth/data/tokenmeta.py): a failed or stopped
run leaves nothing behind, and the next run removes what a killed one left.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from depthwidth.clitools import reason
from depthwidth.data.base import DataError
from depthwidth.data.corpus import Corpus, Piece, available_cores
from depthwidth.data.longwork import STOP, Progress, in_worker, rust_stderr, stopping
from depthwidth.data.tokenmeta import (
    DTYPES,
    FORMAT,
    MAX_VOCAB,
    META,
    PREPARED_NAMES,
    SPLIT_FILES,
    TOKENIZER,
    dtype_for,
    identity_hash,
    is_own_meta,
)
from runstore.outputs import NOT_IN_STORE, Claim, OutputError, claim_folder

EOT = "<|endoftext|>"
# end-of-text tokens of common tokenizers, looked for in a given tokenizer.json
EOT_NAMES = (EOT, "<|end_of_text|>", "</s>", "<eos>", "<|eos|>")
MIN_VOCAB = 256 + 1  # the 256 bytes of a byte-level BPE and the end-of-text token
DEFAULT_VOCAB = 32768
BATCH_CHARS = 4 << 20  # characters handed to one encode_batch call
MIN_VAL_TOKENS = 100_000  # fewer, and data prepare warns that the validation loss will be noisy


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


# -- the tokenizer ------------------------------------------------------------------------------
def check_vocab(vocab: int) -> None:
    if not MIN_VOCAB <= vocab <= MAX_VOCAB:
        raise DataError(
            f"--vocab = {vocab} is invalid: a byte-level BPE needs at least {MIN_VOCAB} symbols "
            f"(256 bytes and the end-of-text token) and this command makes at most {MAX_VOCAB:,}."
        )


def vocab_of(tok) -> int:
    """The ids a tokenizer can give: its largest id + 1, which a sparse vocabulary (ids beyond
    its count of entries) makes larger than its size."""
    ids = tok.get_vocab(with_added_tokens=True).values()
    return max(tok.get_vocab_size(with_added_tokens=True), max(ids, default=-1) + 1)


def load_tokenizer(path: str, progress: Progress | None = None):
    """A tokenizer.json, read by `tokenizers`; a file it cannot read is bad input. Truncation and
    padding, which would cut or fill documents, are switched off."""
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(Path(path).expanduser()))
    except BaseException as exc:  # a bare Exception for a file it cannot parse, a panic for worse
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise DataError(
            f"--tokenizer = {path!r} is invalid: cannot read it as a tokenizer.json ({reason(exc)})."
        ) from None
    n = vocab_of(tok)
    if not 2 <= n <= MAX_VOCAB:
        raise DataError(
            f"--tokenizer = {path!r} is invalid: its ids reach {n - 1:,}, where token files hold "
            f"ids below {MAX_VOCAB:,}."
        )
    cutting = [name for name in ("truncation", "padding") if getattr(tok, name)]
    tok.no_truncation()
    tok.no_padding()
    if cutting and progress is not None:
        progress.say(
            f"the tokenizer's {' and '.join(cutting)} switched off: every document is encoded whole",
            force=True,
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
        for piece in corpus.pieces():
            if STOP.is_set():
                raise RuntimeError("stopped")
            progress.say(f"training the BPE: read {progress.share(corpus.read)}")
            if not is_val(piece.doc, req.seed, req.val_fraction):
                seen["chars"] += len(piece.text)
                yield piece.text
                if seen["chars"] >= req.sample_bytes:
                    return

    in_worker(tok.train_from_iterator, texts(), trainer=trainer)
    return tok


def eot_id(tok) -> int | None:
    for name in EOT_NAMES:
        i = tok.token_to_id(name)
        if i is not None:
            return i
    return None


# -- the split, checked first -------------------------------------------------------------------
def split_refusal(req: Request, docs: int, empty: str) -> DataError:
    return DataError(
        f"--val-fraction = {req.val_fraction:g} is invalid for CORPUS = {req.corpus!r}: none of "
        f"its {docs:,} documents went to the {empty} split; a split by document needs "
        f"{'a larger' if empty == 'val' else 'a smaller'} fraction or more documents."
    )


def check_split(corpus: Corpus, req: Request, progress: Progress) -> None:
    """Read documents (no tokenizer) until each split has one, so a corpus that can never be
    split is refused before any training; a usual corpus stops after its first few hundred."""
    seen, docs, last = {True: False, False: False}, 0, -1
    progress.start()
    for piece in corpus.pieces():
        if piece.doc != last:
            last, docs = piece.doc, docs + 1
            seen[is_val(piece.doc, req.seed, req.val_fraction)] = True
            if all(seen.values()):
                return
        progress.say(f"checking the split: read {progress.share(corpus.read)}, {progress.eta(corpus.read)}")
    if docs == 0:
        raise DataError(
            f"CORPUS = {req.corpus!r} is invalid: it holds no text, so there is nothing to prepare."
        )
    raise split_refusal(req, docs, "train" if seen[True] else "val")


# -- encoding -----------------------------------------------------------------------------------
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


def _encode_batch(tok, batch: list[Piece], req: Request) -> list:
    """The batch's encodings (Rust threads); a tokenizer that fails on a document (a panic in
    its regex engine, say) is bad input, named with the first document it fails on."""
    try:
        with rust_stderr():
            return in_worker(tok.encode_batch_fast, [p.text for p in batch], add_special_tokens=False)
    except BaseException as exc:
        if stopping(exc):
            raise
        why, bad = reason(exc), batch[0]
    for piece in batch:  # which document: each alone
        try:
            with rust_stderr():
                in_worker(tok.encode_batch_fast, [piece.text], add_special_tokens=False)
        except BaseException as exc:
            if stopping(exc):
                raise
            why, bad = reason(exc), piece
            break
    flag = f"--tokenizer = {req.tokenizer!r}" if req.tokenizer else f"CORPUS = {req.corpus!r}"
    raise DataError(f"{flag} is invalid: the tokenizer fails on the document at {bad.where} ({why}).")


def encode(tok, corpus: Corpus, req: Request, tmp: Path, vocab: int, progress: Progress) -> dict[str, Any]:
    """Every document encoded and appended to its split's file; the split counts and hashes."""
    dtype = dtype_for(vocab)
    writers = {s: _SplitWriter(tmp / name, dtype) for s, name in SPLIT_FILES.items()}
    eot, last_doc = eot_id(tok), -1
    progress.start()
    for number, batch in enumerate(_batches(corpus.pieces())):
        for piece, enc in zip(batch, _encode_batch(tok, batch, req)):
            w = writers["val" if is_val(piece.doc, req.seed, req.val_fraction) else "train"]
            ids = np.asarray(enc.ids, dtype=np.int64)
            if ids.size and int(ids.max()) >= vocab:  # never wrapped into the dtype
                raise DataError(
                    f"--tokenizer = {req.tokenizer!r} is invalid: it gives id {int(ids.max()):,} for "
                    f"the document at {piece.where}, beyond its vocabulary of {vocab:,}."
                )
            if piece.doc != last_doc:  # a new document starts with the end-of-text token
                w.documents += 1
                last_doc = piece.doc
                if eot is not None:
                    ids = np.concatenate([[eot], ids])
            w.write(ids)
        tokens = sum(w.tokens for w in writers.values())
        progress.say(  # the first batch's line at once: it says how long the rest will take
            f"encoding: {progress.share(corpus.read)}, {tokens:,} tokens, {progress.eta(corpus.read)}",
            force=number == 0,
        )
    return {s: w.close() for s, w in writers.items()}


def _check_splits(splits: dict[str, dict[str, Any]], req: Request) -> None:
    docs = sum(s["documents"] for s in splits.values())
    for name, s in splits.items():
        if s["tokens"] == 0:
            raise split_refusal(req, docs, name)


def build(req: Request, tmp: Path, stream=None) -> dict[str, Any]:
    """Prepare the corpus into the folder `tmp` (train.bin, val.bin, tokenizer.json, meta.json)."""
    STOP.clear()
    corpus = Corpus(req.corpus, req.field)
    progress = Progress(corpus.bytes, stream)
    tok = load_tokenizer(req.tokenizer, progress) if req.tokenizer else None
    check_split(corpus, req, progress)
    if tok is not None:
        shutil.copyfile(Path(req.tokenizer).expanduser(), tmp / TOKENIZER)
    else:
        progress.say(
            f"training a {req.vocab:,}-symbol byte-level BPE on {corpus.bytes / 1e6:,.1f} MB", force=True
        )
        tok = train_bpe(corpus, req, progress)
        (tmp / TOKENIZER).write_text(tok.to_str(), encoding="utf-8")
    vocab = vocab_of(tok)
    progress.say(f"encoding with {available_cores()} threads into {dtype_for(vocab)} tokens", force=True)
    splits = encode(tok, corpus, req, tmp, vocab, progress)
    _check_splits(splits, req)
    meta: dict[str, Any] = {
        "format": FORMAT,
        "vocab_size": vocab,
        "dtype": dtype_for(vocab),
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


# -- the output folder --------------------------------------------------------------------------
def claim_out(req: Request) -> Claim:
    """The output folder through the one output guard (runstore/outputs.py): checked whole before
    any work and locked until the files are moved in. data prepare's own test, run then and again
    under the lock before the move: not inside CORPUS, and a prepared folder's names only where a
    meta.json that data prepare wrote marks them as its own (and replaced only with `force`)."""
    corpus = Path(os.path.realpath(Path(req.corpus).expanduser()))

    def check(out: Path) -> None:
        real = Path(os.path.realpath(out))
        if corpus.is_dir() and (real == corpus or corpus in real.parents):
            raise OutputError(
                f"--out = {req.out!r} is invalid: it lies inside CORPUS = {req.corpus!r}, which "
                f"would then read its own output."
            )
        held = [n for n in PREPARED_NAMES if (out / n).exists() or (out / n).is_symlink()]
        if held and not is_own_meta(out / META):
            raise OutputError(
                f"--out = {req.out!r} is invalid: its {', '.join(held)} "
                f"{'is' if len(held) == 1 else 'are'} not data that `depthwidth data prepare` wrote "
                f"(no {META} of its own marks them), so they are never replaced, --force or not; "
                f"prepare into a folder of its own."
            )
        if held and not req.force:
            raise OutputError(
                f"--out = {req.out!r} is invalid: it already holds prepared data ({', '.join(held)}); "
                f"give --force to replace it."
            )

    return claim_folder(req.out, "--out", PREPARED_NAMES, NOT_IN_STORE, check=check)


def prepare(req: Request, claim: Claim | None = None, stream=None) -> dict[str, Any]:
    """Build into a hidden folder beside the output (where it really is, so each file moves by a
    rename), check the output again under its lock (`claim`, made here when not given), then move
    each file into place, meta.json last. On any failure or signal the hidden folder goes: nothing
    is written."""
    if claim is None:
        claim = claim_out(req)
    out = Path(os.path.realpath(Path(req.out).expanduser().absolute()))
    tmp = out.parent / f".{out.name}.prepare-{os.getpid()}"
    try:
        # this output's working folders left by killed runs (whatever their pid, which may be
        # ours again): the claim's lock means no live run owns one; other outputs' stay theirs
        mine = re.compile(rf"\.{re.escape(out.name)}\.prepare-\d+")
        for stale in out.parent.iterdir():
            if mine.fullmatch(stale.name) and stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
        tmp.mkdir()
        meta = build(req, tmp, stream)
        claim.recheck()  # what is in the folder now, under the lock, before anything is replaced
        out.mkdir(exist_ok=True)
        for name in (*SPLIT_FILES.values(), TOKENIZER, META):
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        claim.release()
    return meta
