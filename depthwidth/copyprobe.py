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

The control: the same first halves, each followed by a fresh draw instead of its repeat, scored at
the same positions. Whatever a model gains from position alone (more context to read the token
frequencies from, however it uses it) it gains there too, so `copy_gain_vs_control`, the control's
second-half loss less the repeat's, is what copying alone is worth; a model that cannot copy sits
near zero on it wherever it sits on `copy_gain`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PROBE_ROWS = 8  # sequences per evaluation: a small share of an evaluation's forward passes
PROBE_SEED = 20220924  # the probe's own generator
CONTROL_SEED = 20221103  # the control's second halves: a generator of their own


def probe_batch(
    vocab_size: int, seq_len: int, rows: int = PROBE_ROWS, counts=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) of `rows` sequences: h random tokens (from `counts`' frequencies where given), the
    same h again (h = seq_len // 2 + 1, cut to the seq_len + 1 tokens x and y need), shifted by
    one as a language model reads them."""
    half = seq_len // 2 + 1
    first = _draw(vocab_size, rows, half, counts, PROBE_SEED + 1009 * vocab_size + seq_len)
    seq = torch.cat([first, first], dim=1)[:, : seq_len + 1]  # (rows, seq_len + 1)
    return seq[:, :-1], seq[:, 1:]


def control_batch(
    vocab_size: int, seq_len: int, rows: int = PROBE_ROWS, counts=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) of the control: probe_batch's first halves, each followed by a fresh draw of the
    same distribution where the probe repeats it."""
    half = seq_len // 2 + 1
    first = _draw(vocab_size, rows, half, counts, PROBE_SEED + 1009 * vocab_size + seq_len)
    fresh = _draw(vocab_size, rows, half, counts, CONTROL_SEED + 1009 * vocab_size + seq_len)
    seq = torch.cat([first, fresh], dim=1)[:, : seq_len + 1]
    return seq[:, :-1], seq[:, 1:]


def _draw(vocab_size: int, rows: int, n: int, counts, seed: int) -> torch.Tensor:
    """(rows, n) tokens from `counts`' frequencies (one count per token), else uniform."""
    g = torch.Generator().manual_seed(seed)
    if counts is None:
        return torch.randint(0, vocab_size, (rows, n), generator=g)
    p = torch.as_tensor(counts, dtype=torch.float64)
    return torch.multinomial(p / p.sum(), rows * n, replacement=True, generator=g).view(rows, n)


def target_spans(seq_len: int) -> tuple[slice, slice]:
    """Positions of y scored: the first half's targets after its first (nothing to copy yet),
    and the second half's targets that an earlier occurrence predicts (from the second token of
    the repeat on: the repeat's first token follows the first half's last, seen nowhere before).
    Target j of y is token j + 1 of the sequence."""
    half = seq_len // 2 + 1
    return slice(1, half - 1), slice(half, seq_len)


def copy_metrics(
    logits: torch.Tensor,
    y: torch.Tensor,
    control_logits: torch.Tensor | None = None,
    control_y: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """copy_loss and copy_gain from the model's logits (rows, seq_len, vocab) on probe_batch;
    with the logits on control_batch, also the control's loss at the same positions and the
    gain over it."""
    first, second = target_spans(y.size(1))
    loss = F.cross_entropy(logits.float().transpose(1, 2), y, reduction="none")  # (rows, seq_len)
    copy_loss = loss[:, second].mean()
    out = {"copy_loss": copy_loss, "copy_gain": loss[:, first].mean() - copy_loss}
    if control_logits is not None:
        ctl = F.cross_entropy(control_logits.float().transpose(1, 2), control_y, reduction="none")
        out["copy_control_loss"] = ctl[:, second].mean()
        out["copy_gain_vs_control"] = out["copy_control_loss"] - copy_loss
    return out
