"""The copy and denoise tasks of Arjovsky et al. 2016 as used by Kerg et al. 2020 (docs/science.md §6).

Tokens: 0 = blank, 1..8 = the alphabet, 9 = the delimiter (vocabulary 10). A sequence is T + 20
steps long; the target is blank except for the last 10 steps, which repeat the 10 symbols.
Accuracy counts the last 10 outputs; `baseline_loss` is the memoryless cross-entropy.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

from depthwidth.config import DataConfig
from depthwidth.data.base import DataError, DataSource
from depthwidth.data.pcfg import _check_request

BLANK, DELIMITER = 0, 9
N_SYMBOLS = 10  # symbols to remember
ALPHABET = 8  # symbols 1..8
VOCAB = 10


def baseline_loss(task_length: float) -> float:
    """Cross-entropy of the best memoryless model: blanks are certain, the last 10 outputs are a
    uniform guess among 8 symbols; averaged over the T + 20 positions (docs/science.md §6)."""
    return N_SYMBOLS * math.log(ALPHABET) / (task_length + 2 * N_SYMBOLS)


class CopyTask(DataSource):
    """source "copy": the 10 symbols, T − 1 blanks, the delimiter, 10 blanks.
    source "denoise": the 10 symbols at random distinct positions (in order) among the first
    T + 9 steps, then the delimiter and 10 blanks. Both: target = T + 10 blanks, then the symbols.

    The length T + 20 is set by the task, so the `seq_len` asked for is not used: the model
    takes `self.seq_len` from the source (depthwidth.data.resolve).
    """

    def __init__(self, cfg: DataConfig, seq_len: int | None = None):
        if cfg.source not in ("copy", "denoise"):
            raise DataError(f"DataConfig.source = {cfg.source!r} is not a copy/denoise task.")
        self.kind = cfg.source
        self.delay = cfg.task_length  # T
        self.seq_len = cfg.task_length + 2 * N_SYMBOLS
        self.vocab_size = VOCAB
        self.seed = cfg.seed

    def batch(self, split: str, index: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        _check_request(split, index, batch_size)
        rng = self.rng(split, index)
        T, n, B = self.delay, N_SYMBOLS, batch_size
        symbols = rng.integers(1, ALPHABET + 1, size=(B, n))
        x = np.zeros((B, self.seq_len), dtype=np.int64)
        if self.kind == "copy":
            x[:, :n] = symbols
        else:
            # n distinct positions among the first T + n − 1, kept in order: the argsort of
            # uniform keys is a random permutation per row, vectorised over the batch.
            pos = np.sort(np.argsort(rng.random((B, T + n - 1)), axis=1)[:, :n], axis=1)
            np.put_along_axis(x, pos, symbols, axis=1)
        x[:, T + n - 1] = DELIMITER
        y = np.zeros((B, self.seq_len), dtype=np.int64)
        y[:, -n:] = symbols
        return torch.from_numpy(x), torch.from_numpy(y)

    def unigram_entropy(self) -> float:
        """Entropy (nats) of the target tokens: (T + 10) blanks and 10 uniform symbols of 8."""
        L = self.seq_len
        p_blank = (L - N_SYMBOLS) / L
        p_sym = N_SYMBOLS / (ALPHABET * L)
        return float(-(p_blank * math.log(p_blank) + ALPHABET * p_sym * math.log(p_sym)))

    def baseline_loss(self) -> float:
        return baseline_loss(self.delay)

    def extra_metrics(self, logits: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        pred = logits[:, -N_SYMBOLS:].argmax(dim=-1)
        accuracy = (pred == y[:, -N_SYMBOLS:]).float().mean().item()
        return {"accuracy": accuracy, "baseline_loss": self.baseline_loss()}

    def describe(self) -> str:
        return f"{self.kind} task T={self.delay} (sequence {self.seq_len})"
