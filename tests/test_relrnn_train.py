"""RelRNN (Kerg et al. 2020, docs/science.md §6) learns the copy task through the shared train() loop.

CPU-sized: delay T = 10 (30 steps a sequence), width 32, ν = 10, ρ = 15, batch 32, Adam at
lr 2e-2 for 1000 steps, fixed seed (measured: 99.7% from step 800, 100% at step 1000). The
T = 100 run is recorded by `python bench/relrnn_scaling.py copy` in docs/bench/relrnn.md.
Also: RelRNN as a character-level language model on a text file (bits/char = loss / ln 2).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.train import train


@pytest.mark.slow
def test_relrnn_learns_copy_beyond_99_percent():
    torch.set_num_threads(1)
    model = ModelConfig(family="relrnn", width=32, depth=1, nu=10, rho=15)
    data = DataConfig(source="copy", task_length=10, seed=0)
    cfg = TrainConfig(steps=1000, batch_size=32, lr=2e-2, warmup_steps=0, min_lr_ratio=1.0,
                      beta2=0.999, grad_clip=1.0, eval_every=100, eval_batches=2, seed=0)
    result = train(model, data, cfg)
    assert result.status == "ok", result.error
    first, last = result.curve[0], result.curve[-1]
    baseline = last["baseline_loss"]
    assert first["accuracy"] < 0.5  # it was not solved from the start
    assert last["accuracy"] > 0.99, result.curve
    assert result.final_val_loss < baseline / 5  # the memoryless baseline is beaten by far


SHAKESPEARE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tinyshakespeare.txt"


@pytest.mark.slow
@pytest.mark.skipif(not SHAKESPEARE.is_file(), reason="../shared/data/tinyshakespeare.txt is absent")
def test_relrnn_character_language_model_on_text():
    """Character-level LM through the text loader (bytes): after 150 steps the validation
    loss is below the unigram entropy, i.e. bits per character below the unigram's."""
    torch.set_num_threads(1)
    model = ModelConfig(family="relrnn", width=64, depth=1, nu=10, rho=15, seq_len=64)
    data = DataConfig(source="text", path=str(SHAKESPEARE))
    cfg = TrainConfig(steps=150, batch_size=16, lr=1e-2, warmup_steps=10, eval_every=75,
                      eval_batches=2, seed=0)
    result = train(model, data, cfg)
    assert result.status == "ok", result.error
    bits_per_char = result.final_val_loss / math.log(2)
    assert result.vocab_size == 256
    assert result.final_val_loss < result.unigram_entropy, (bits_per_char, result.unigram_entropy)
