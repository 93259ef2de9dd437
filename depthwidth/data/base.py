"""The data-source interface every corpus and task implements.

A batch is a pure function of (seed, split, index): resuming a run needs only the step
count, and the same seed gives the same stream on every machine (numpy's PCG64 is portable).
Sources import torch only when they make a batch: planning a sweep reads their vocabulary and
sequence length without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

_SPLIT_ID = {"train": 0, "val": 1}


class DataError(ValueError):
    """Bad data input (missing path, empty file, sequence longer than the data)."""


class DataSource:
    """Yields (x, y) LongTensor pairs of shape (batch, seq_len).

    Language data: y is x shifted by one token. Tasks (copy/denoise): y is the target sequence.
    """

    vocab_size: int
    seq_len: int
    seed: int

    def rng(self, split: str, index: int) -> np.random.Generator:
        """The generator for one batch: seeded by (seed, split, index), independent of history."""
        if split not in _SPLIT_ID:
            raise DataError(f"split = {split!r} is unknown; expected 'train' or 'val'.")
        return np.random.default_rng([self.seed, _SPLIT_ID[split], index])

    def batch(self, split: str, index: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def unigram_entropy(self) -> float:
        """Entropy (nats) of the unigram distribution of the targets: the loss of a model that
        ignores context. A trained model should land well below it."""
        raise NotImplementedError

    def extra_metrics(self, logits: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """Task-specific metrics (e.g. copy accuracy); none for language data."""
        return {}

    def describe(self) -> str:
        return type(self).__name__


def entropy_of_counts(counts: np.ndarray) -> float:
    p = counts[counts > 0].astype(np.float64)
    p /= p.sum()
    return float(-(p * np.log(p)).sum())
