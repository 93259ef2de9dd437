"""Sequential digits: the UCI handwritten digits (1,797 images of 8×8 pixels, bundled with
scikit-learn) read pixel by pixel, a small real stand-in for the sequential and permuted MNIST
of Kerg et al. 2020 (docs/science.md §6). `digits`: row-major pixel order; `pdigits`: the same
pixels under one fixed seeded permutation. T = 64 steps, 10 classes, answer at the last step.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

from depthwidth.config import DataConfig
from depthwidth.data.base import DataError, DataSource, entropy_of_counts
from depthwidth.data.pcfg import _check_request

SOURCES = ("digits", "pdigits")
PIXELS = 64  # 8 × 8, the sequence length T
LEVELS = 17  # intensities 0..16, each its own input token
CLASSES = 10
IGNORE = -100  # torch's cross_entropy ignore_index: no loss at steps without an answer
# Streams of numpy's generator for the split and the permutation, apart from the batch streams
# that DataSource.rng keys on (seed, split id, index).
_SPLIT_STREAM, _PERM_STREAM = 101, 102


@lru_cache(maxsize=1)
def load_images() -> tuple[np.ndarray, np.ndarray]:
    """(pixels (1797, 64) int64 in 0..16, labels (1797,) int64), read once per process from
    the copy scikit-learn ships (no download)."""
    try:
        from sklearn.datasets import load_digits
    except ModuleNotFoundError:
        raise DataError(
            "DataConfig.source = 'digits' needs scikit-learn, which ships the UCI "
            "digits; install it with `pip install scikit-learn`."
        ) from None
    d = load_digits()
    return d.data.astype(np.int64), d.target.astype(np.int64)


def split_indices(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed train/val split of n images: a permutation seeded by the data seed alone, the
    first round(n·val_fraction) of it for validation. Both parts are sorted."""
    order = np.random.default_rng([seed, _SPLIT_STREAM]).permutation(n)
    n_val = int(round(n * val_fraction))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def pixel_order(kind: str, seed: int) -> np.ndarray:
    """The order pixels are fed in: row-major for digits, one seeded permutation for pdigits."""
    if kind == "digits":
        return np.arange(PIXELS)
    return np.random.default_rng([seed, _PERM_STREAM]).permutation(PIXELS)


class DigitsTask(DataSource):
    """Pixel-by-pixel digit classification.

    Inputs: the 64 intensities (0..16), each a token of a 17-symbol vocabulary, as the copy
    task feeds its symbols; an embedding of 17 levels can represent any function of the
    intensity, including the scalar input the authors feed. Target: the class (0..9) at the last
    step, IGNORE elsewhere, so the training loss is the cross-entropy of the answer alone.
    Train batches are drawn uniformly without replacement inside a batch, seeded by (seed,
    index); validation batch i holds validation images i·B .. (i+1)·B − 1, wrapping around, so
    `eval_batches · batch_size ≥ n_val` covers the whole validation set.
    """

    def __init__(self, cfg: DataConfig, seq_len: int | None = None):
        if cfg.source not in SOURCES:
            raise DataError(f"DataConfig.source = {cfg.source!r} is not a digits task.")
        self.kind, self.seed, self.val_fraction = cfg.source, cfg.seed, cfg.val_fraction
        self.seq_len, self.vocab_size = PIXELS, LEVELS  # set by the task, like copy's T + 20
        self.order = pixel_order(self.kind, cfg.seed)
        self._splits: dict[str, tuple[np.ndarray, np.ndarray]] | None = None

    def splits(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """{"train"/"val": (pixels in feeding order, labels)}; loaded on first use, so planning
        a sweep (vocabulary, length) never reads the images."""
        if self._splits is None:
            pixels, labels = load_images()
            train, val = split_indices(len(labels), self.val_fraction, self.seed)
            pixels = pixels[:, self.order]
            self._splits = {"train": (pixels[train], labels[train]), "val": (pixels[val], labels[val])}
        return self._splits

    def batch(self, split: str, index: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        _check_request(split, index, batch_size)
        pixels, labels = self.splits()[split]
        n = len(labels)
        if split == "train":
            rows = self.rng(split, index).choice(n, size=batch_size, replace=batch_size > n)
        else:
            rows = (index * batch_size + np.arange(batch_size)) % n
        y = np.full((batch_size, PIXELS), IGNORE, dtype=np.int64)
        y[:, -1] = labels[rows]
        return torch.from_numpy(pixels[rows].copy()), torch.from_numpy(y)

    def unigram_entropy(self) -> float:
        """Entropy (nats) of the train split's class frequencies: the loss of a model that
        ignores the pixels (≈ ln 10 = 2.303 for these nearly balanced classes)."""
        labels = self.splits()["train"][1]
        return entropy_of_counts(np.bincount(labels, minlength=CLASSES))

    def extra_metrics(self, logits: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """Accuracy of the answer at the last step, over the 10 class outputs."""
        pred = logits[:, -1, :CLASSES].argmax(dim=-1)
        accuracy = (pred == y[:, -1]).float().mean().item()
        return {"accuracy": accuracy, "baseline_loss": math.log(CLASSES)}

    def describe(self) -> str:
        s = self.splits()
        order = "row-major" if self.kind == "digits" else f"permuted (seed {self.seed})"
        return (
            f"{self.kind}: UCI digits pixel by pixel ({order}), T={PIXELS}, {CLASSES} classes, "
            f"{len(s['train'][1])} train / {len(s['val'][1])} val images"
        )
