"""The in-context copying probe (Olsson et al. 2022, "In-context Learning and Induction Heads";
docs/science.md §11): the loss on the second half of a sequence of random tokens repeated once.

The tokens are drawn independently from the training data's own token frequencies (uniformly from
the vocabulary where those are not known): the first half then carries no context a model could
use beyond the frequencies, and costs about the unigram entropy; a token the data never holds
would measure only how badly a model rates the impossible. In the second half each token is the
one that followed the same token one half earlier, which an induction head (two composing
attention layers) can copy. `copy_loss` is the mean loss over the second half's copyable targets,
`copy_gain` the first half's loss less it: near zero for a model that cannot copy, up to about the
unigram entropy for a perfect copier. The probe batch is fixed (its own generator, never the run's
RNG), so it is the same at every evaluation of every run on one corpus and context.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PROBE_ROWS = 8  # sequences per evaluation: a small share of an evaluation's forward passes
PROBE_SEED = 20220924  # the probe's own generator


def probe_batch(
    vocab_size: int, seq_len: int, rows: int = PROBE_ROWS, counts=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) of `rows` sequences: h random tokens (from `counts`' frequencies where given), the
    same h again (h = seq_len // 2 + 1, cut to the seq_len + 1 tokens x and y need), shifted by
    one as a language model reads them."""
    half = seq_len // 2 + 1
    g = torch.Generator().manual_seed(PROBE_SEED + 1009 * vocab_size + seq_len)
    if counts is None:
        first = torch.randint(0, vocab_size, (rows, half), generator=g)
    else:  # the data's unigram distribution (counts: one per token of the vocabulary)
        p = torch.as_tensor(counts, dtype=torch.float64)
        first = torch.multinomial(p / p.sum(), rows * half, replacement=True, generator=g).view(rows, half)
    seq = torch.cat([first, first], dim=1)[:, : seq_len + 1]  # (rows, seq_len + 1)
    return seq[:, :-1], seq[:, 1:]


def target_spans(seq_len: int) -> tuple[slice, slice]:
    """Positions of y scored: the first half's targets after its first (nothing to copy yet),
    and the second half's targets that an earlier occurrence predicts (from the second token of
    the repeat on: the repeat's first token follows the first half's last, seen nowhere before).
    Target j of y is token j + 1 of the sequence."""
    half = seq_len // 2 + 1
    return slice(1, half - 1), slice(half, seq_len)


def copy_metrics(logits: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """copy_loss and copy_gain from the model's logits (rows, seq_len, vocab) on probe_batch."""
    first, second = target_spans(y.size(1))
    loss = F.cross_entropy(logits.float().transpose(1, 2), y, reduction="none")  # (rows, seq_len)
    copy_loss = loss[:, second].mean()
    return {"copy_loss": copy_loss, "copy_gain": loss[:, first].mean() - copy_loss}
