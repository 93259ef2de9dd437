"""Real corpora: UTF-8 text as byte-level tokens, and nanoGPT-style token files.

Text: one file, or every file under a folder (sorted by relative path, hidden names skipped,
concatenated as-is, held in memory), tokenised as raw bytes: vocabulary 256 (loss scales
depend on the tokenizer, so compare exponents with Kaplan et al. 2020, not losses; docs/science.md
§2). Tokens: a flat little-endian uint16 array (nanoGPT's `train.bin` format) read through
np.memmap, vocabulary = max token + 1; or a folder that `depthwidth data prepare` wrote, whose
meta.json gives the dtype (uint16 or uint32) and vocabulary and whose train.bin and val.bin are
already split by document. Otherwise both split by position (the last `val_fraction` is
validation); both draw uniformly random windows of seq_len + 1 tokens inside one split.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

from depthwidth.config import DataConfig
from depthwidth.data.base import DataError, DataSource, entropy_of_counts
from depthwidth.data.pcfg import _check_request
from depthwidth.data.tokenmeta import DTYPES, META, SPLIT_FILES, largest_id, meta_beside, verify

_CHUNK = 1 << 24  # tokens per pass when scanning a memmap, to bound memory on large files


class _WindowSource(DataSource):
    """Random windows of seq_len + 1 tokens from a 1-D token array split by position."""

    kind = "tokens"

    def _setup(
        self, cfg: DataConfig, seq_len: int, tokens: np.ndarray, vocab_size: int, splits: dict | None = None
    ) -> None:
        """`splits`: the two splits as given (a prepared folder's), else `tokens` split by position."""
        if seq_len < 1:
            raise DataError(f"seq_len = {seq_len!r} is invalid: it must be at least 1.")
        self.cfg, self.seq_len, self.seed, self.vocab_size = cfg, seq_len, cfg.seed, vocab_size
        n = len(tokens)
        n_val = int(round(n * cfg.val_fraction))
        self.splits = splits or {"train": tokens[: n - n_val], "val": tokens[n - n_val :]}
        for split, arr in self.splits.items():
            if len(arr) < seq_len + 1:
                raise DataError(
                    f"seq_len = {seq_len} is longer than the data: the {split} split of "
                    f"DataConfig.path = {cfg.path!r} holds {len(arr)} {self.kind}, fewer than "
                    f"seq_len + 1 = {seq_len + 1}."
                )
        self._entropy: float | None = None

    def batch(self, split: str, index: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        _check_request(split, index, batch_size)
        data = self.splits[split]
        rng = self.rng(split, index)
        T = self.seq_len + 1
        starts = rng.integers(0, len(data) - T + 1, size=batch_size)
        # Fancy indexing copies just these windows out of the (possibly memory-mapped) array.
        w = torch.from_numpy(data[starts[:, None] + np.arange(T)].astype(np.int64))
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()

    def token_counts(self) -> np.ndarray:
        """How often each token occurs in the train split (counted once, in chunks)."""
        if getattr(self, "_counts", None) is None:
            data = self.splits["train"]
            counts = np.zeros(self.vocab_size, dtype=np.int64)
            for lo in range(0, len(data), _CHUNK):
                counts += np.bincount(data[lo : lo + _CHUNK], minlength=self.vocab_size)
            self._counts = counts
        return self._counts

    def unigram_entropy(self) -> float:
        """Entropy of the train split's token frequencies."""
        if self._entropy is None:
            self._entropy = entropy_of_counts(self.token_counts())
        return self._entropy

    def _sizes(self) -> str:
        return f"{len(self.splits['train']):,} train / {len(self.splits['val']):,} val {self.kind}"


# Serialised-object formats: refused by name, since reading one as data hides a mistake and
# loading one could run code. Raw bytes are never sniffed: a real uint16 token file may start
# with any two bytes, including a pickle opcode.
PICKLE_SUFFIXES = (".pkl", ".pickle", ".pt", ".pth", ".joblib", ".npy", ".npz", ".ckpt")


def _existing(cfg: DataConfig) -> Path:
    p = Path(cfg.path).expanduser()
    if not p.exists():
        raise DataError(f"DataConfig.path = {cfg.path!r} does not exist.")
    if p.suffix.lower() in PICKLE_SUFFIXES:
        raise DataError(
            f"DataConfig.path = {cfg.path!r} is a serialised-object file ({p.suffix}); "
            f"depthwidth reads only UTF-8 text or raw token files and never "
            f"unpickles data."
        )
    return p


def _text_files(root: Path) -> list[Path]:
    """Regular files under a folder, sorted by relative path, skipping hidden names."""
    files = [
        f
        for f in root.rglob("*")
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(root).parts)
    ]
    return sorted(files, key=lambda f: f.relative_to(root).as_posix())


class TextSource(_WindowSource):
    """A UTF-8 file or folder of files as byte tokens (vocabulary 256)."""

    kind = "bytes"

    def __init__(self, cfg: DataConfig, seq_len: int):
        root = _existing(cfg)
        files = _text_files(root) if root.is_dir() else [root]
        if not files:
            raise DataError(f"DataConfig.path = {cfg.path!r} is a folder with no files.")
        parts = []
        for f in files:
            raw = f.read_bytes()
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"DataConfig.path = {cfg.path!r} is not UTF-8 text: {str(f)!r} has "
                    f"an invalid byte at offset {exc.start}."
                ) from None
            parts.append(raw)
        blob = b"".join(parts)
        if not blob:
            what = "a folder of empty files" if root.is_dir() else "an empty file"
            raise DataError(f"DataConfig.path = {cfg.path!r} is {what}.")
        self.n_files = len(files)
        self._setup(cfg, seq_len, np.frombuffer(blob, dtype=np.uint8), 256)

    def extra_metrics(self, logits: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """Bits per character: the cross-entropy in bits, loss / ln 2, per byte (the unit of
        character-level language modelling, e.g. on Penn Treebank; one byte per character of
        ASCII text, more for other UTF-8 characters)."""
        import torch.nn.functional as F

        nats = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item()
        return {"bits_per_char": nats / math.log(2)}

    def describe(self) -> str:
        return (
            f"UTF-8 text as bytes from {self.cfg.path} ({self.n_files} file"
            f"{'s' if self.n_files != 1 else ''}): {self._sizes()}, vocab 256"
        )


class TokenFileSource(_WindowSource):
    """nanoGPT-style flat token files, memory-mapped. A folder that `depthwidth data prepare`
    wrote: its train.bin and val.bin are the two splits, its meta.json gives the dtype (uint16 or
    uint32) and the vocabulary. One file: split by position; uint16 with vocabulary = max token + 1,
    unless a meta.json beside it gives the dtype and vocabulary."""

    def __init__(self, cfg: DataConfig, seq_len: int):
        p = _existing(cfg)
        meta_path = meta_beside(p)
        # a prepared folder is checked against its files (tokenmeta.verify) before it is read
        self.meta = verify(meta_path) if meta_path is not None else None
        if p.is_dir() and self.meta is None:
            raise DataError(
                f"DataConfig.path = {cfg.path!r} is a folder without a {META}; source 'tokens' needs "
                f"one token file or a folder that `depthwidth data prepare` wrote."
            )
        if p.is_dir():
            dtype = DTYPES[self.meta["dtype"]]
            splits = {s: np.memmap(p / name, dtype=dtype, mode="r") for s, name in SPLIT_FILES.items()}
            self._setup(cfg, seq_len, splits["train"], self.meta["vocab_size"], splits=splits)
            return
        dtype = DTYPES[self.meta["dtype"]] if self.meta else "<u2"
        size, width = p.stat().st_size, np.dtype(dtype).itemsize
        if size == 0:
            raise DataError(f"DataConfig.path = {cfg.path!r} is an empty file.")
        if size % width:
            raise DataError(
                f"DataConfig.path = {cfg.path!r} has {size} bytes, not a multiple of {width} "
                f"as a {np.dtype(dtype).name} token file needs."
            )
        tokens = np.memmap(p, dtype=dtype, mode="r")
        top = largest_id(p, dtype)  # read once, in chunks (a verified split: from the cache)
        if self.meta and top >= self.meta["vocab_size"]:
            raise DataError(
                f"DataConfig.path = {cfg.path!r} is invalid: it holds token id {top:,}, not below the "
                f"vocab_size = {self.meta['vocab_size']:,} of the {META} beside it."
            )
        # a bare file: at least 2 so a model can be built for one repeated token
        vocab = self.meta["vocab_size"] if self.meta else max(2, top + 1)
        self._setup(cfg, seq_len, tokens, vocab)

    def describe(self) -> str:
        dtype = self.meta["dtype"] if self.meta else "uint16"
        what = "prepared tokens" if self.meta and Path(self.cfg.path).is_dir() else f"{dtype} tokens"
        return f"{what} from {self.cfg.path}: {self._sizes()}, vocab {self.vocab_size}"
