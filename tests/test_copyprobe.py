"""The copying probe (depthwidth/copyprobe.py, docs/science.md §11): the batch and the scored
positions by hand, the metrics on planted logits, and the probe in a text run's curve."""

from __future__ import annotations

import math

import pytest
import torch

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.copyprobe import copy_metrics, probe_batch, target_spans


@pytest.mark.parametrize("seq_len", [15, 16])
def test_the_probe_batch_repeats_its_random_half(seq_len):
    x, y = probe_batch(50, seq_len)
    assert x.shape == y.shape == (8, seq_len)
    seq = torch.cat([x, y[:, -1:]], dim=1)  # the seq_len + 1 tokens read
    half = seq_len // 2 + 1
    assert torch.equal(seq[:, half:], seq[:, : seq_len + 1 - half])
    assert torch.equal(probe_batch(50, seq_len)[0], x)  # fixed: the same at every evaluation
    first, second = target_spans(seq_len)
    # seq_len 16: half 9, scored first-half targets are tokens 2..8, second-half 10..16
    if seq_len == 16:
        assert (first.start, first.stop, second.start, second.stop) == (1, 8, 9, 16)
    # every scored second-half target is the token that followed its previous occurrence
    for j in range(second.start, second.stop):
        assert torch.equal(y[:, j], seq[:, j + 1 - half])


def test_a_perfect_copier_gains_the_first_halfs_loss():
    vocab, seq_len = 20, 16
    x, y = probe_batch(vocab, seq_len)
    logits = torch.zeros(8, seq_len, vocab)  # uniform everywhere: ln(vocab) per target
    _, second = target_spans(seq_len)
    p = 0.9  # the copier puts 0.9 on the right token in the second half
    right = math.log(p * (vocab - 1) / (1 - p))
    for j in range(second.start, second.stop):
        logits[torch.arange(8), j, y[:, j]] = right
    m = copy_metrics(logits, y)
    assert float(m["copy_loss"]) == pytest.approx(-math.log(p), rel=1e-5)
    assert float(m["copy_gain"]) == pytest.approx(math.log(vocab) + math.log(p), rel=1e-5)


def test_a_text_run_records_the_probe_at_every_evaluation(tmp_path):
    from depthwidth.train import train

    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat and the dog sat on the log. " * 200)
    cfg = TrainConfig(steps=20, eval_every=10, batch_size=4, threads=1, warmup_steps=2)
    model = ModelConfig(depth=2, width=16, heads=2, seq_len=16)
    run = train(model, DataConfig(source="text", path=str(text)), cfg)
    keys = ("copy_loss", "copy_gain", "copy_control_loss", "copy_gain_vs_control")
    assert [all(k in e for k in keys) for e in run.curve] == [True, True]
    assert math.isfinite(run.metrics["copy_loss"]) and math.isfinite(run.metrics["copy_gain"])
    synthetic = train(model, DataConfig(source="pcfg", vocab_size=32), cfg)
    assert "copy_loss" not in synthetic.curve[-1]  # on by default for text only


def test_the_probe_draws_the_datas_own_tokens_by_their_frequency():
    """With the data's token counts, the probe's random half holds only tokens the data holds, in
    about their proportions; a token the data never holds would only measure how badly a model
    rates the impossible."""
    counts = torch.zeros(256, dtype=torch.int64)
    counts[[10, 20, 30]] = torch.tensor([6000, 3000, 1000])
    x, _ = probe_batch(256, 255, rows=8, counts=counts.numpy())
    seen, n = torch.unique(x, return_counts=True)
    assert set(seen.tolist()) == {10, 20, 30}
    share = dict(zip(seen.tolist(), (n / n.sum()).tolist()))
    assert share[10] == pytest.approx(0.6, abs=0.06) and share[30] == pytest.approx(0.1, abs=0.04)


def test_the_control_repeats_nothing_and_a_position_only_model_gains_nothing_over_it():
    """The control holds the probe's first halves followed by fresh draws: a model whose loss
    falls with position alone (here: the same planted falling loss on every row) has a copy gain
    on the probe but none against the control; a copier gains against both."""
    from depthwidth.copyprobe import control_batch

    vocab, seq_len = 20, 16
    x, y = probe_batch(vocab, seq_len)
    cx, cy = control_batch(vocab, seq_len)
    half = seq_len // 2 + 1
    assert torch.equal(cx[:, :half], x[:, :half])  # the same first halves
    seq = torch.cat([cx, cy[:, -1:]], dim=1)
    assert not torch.equal(seq[:, half:], seq[:, : seq_len + 1 - half])  # no repeat

    # position only: the right token's logit grows with position, whatever the token
    def by_position(targets):
        logits = torch.zeros(8, seq_len, vocab)
        for j in range(seq_len):
            logits[torch.arange(8), j, targets[:, j]] = 0.2 * j
        return logits

    m = copy_metrics(by_position(y), y, by_position(cy), cy)
    assert float(m["copy_gain"]) > 0.5  # the later positions look better ...
    assert float(m["copy_gain_vs_control"]) == pytest.approx(0.0, abs=1e-6)  # ... and that is all
    copier = by_position(y)
    _, second = target_spans(seq_len)
    for j in range(second.start, second.stop):
        copier[torch.arange(8), j, y[:, j]] = 8.0
    m = copy_metrics(copier, y, by_position(cy), cy)
    assert float(m["copy_gain_vs_control"]) > 1.0
