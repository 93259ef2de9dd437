"""RelRNN (Kerg et al. 2020, docs/science.md §6) learns the copy task through the shared train() loop.

CPU-sized: delay T = 10 (30 steps a sequence), width 32, ν = 10, ρ = 15, batch 32, Adam at
lr 2e-2 for 1000 steps, fixed seed (measured: 99.7% from step 800, 100% at step 1000). The
T = 100 run is recorded by `python bench/relrnn_scaling.py copy` in docs/bench/relrnn.md.
Also: RelRNN as a character-level language model on a text file (bits/char = loss / ln 2),
and the gradient profiles every recurrent run records while it trains.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.train import train


@pytest.mark.slow
def test_relrnn_learns_copy_beyond_99_percent():
    torch.set_num_threads(1)
    model = ModelConfig(family="relrnn", width=32, depth=1, nu=10, rho=15)
    data = DataConfig(source="copy", task_length=10, seed=0)
    cfg = TrainConfig(
        steps=1000,
        batch_size=32,
        lr=2e-2,
        warmup_steps=0,
        min_lr_ratio=1.0,
        beta2=0.999,
        grad_clip=1.0,
        eval_every=100,
        eval_batches=2,
        seed=0,
    )
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
    cfg = TrainConfig(
        steps=150, batch_size=16, lr=1e-2, warmup_steps=10, eval_every=75, eval_batches=2, seed=0
    )
    result = train(model, data, cfg)
    assert result.status == "ok", result.error
    bits_per_char = result.final_val_loss / math.log(2)
    assert result.vocab_size == 256
    assert result.final_val_loss < result.unigram_entropy, (bits_per_char, result.unigram_entropy)


def test_text_runs_report_bits_per_character(tmp_path):
    """A recurrent character-level run on a text file reports bits per character = loss / ln 2
    at every evaluation and in its final metrics, and learns below the unigram's bits."""
    torch.set_num_threads(1)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat. the dog sat on the log. " * 60)
    result = train(
        ModelConfig(family="lstm", width=32, depth=1, seq_len=32),
        DataConfig(source="text", path=str(corpus)),
        TrainConfig(steps=60, batch_size=16, lr=2e-2, warmup_steps=0, eval_every=30, eval_batches=2, seed=0),
    )
    assert result.status == "ok", result.error
    for point in result.curve:
        assert point["bits_per_char"] == pytest.approx(point["val_loss"] / math.log(2), rel=1e-6)
    assert result.metrics["bits_per_char"] == pytest.approx(result.final_val_loss / math.log(2), rel=1e-6)
    assert result.metrics["bits_per_char"] < result.unigram_entropy / math.log(2)


def test_gradient_profiles_are_recorded_during_training():
    """Every evaluation of a recurrent run measures ‖∂L/∂h_t‖ (the share at the start goes to
    the curve); the run keeps the profiles, the last equal to the end-of-run probe's."""
    torch.set_num_threads(1)
    result = train(
        ModelConfig(family="relrnn", width=16, depth=1, nu=4, rho=3),
        DataConfig(source="copy", task_length=8),
        TrainConfig(steps=20, batch_size=8, lr=1e-2, warmup_steps=0, eval_every=5, eval_batches=1, seed=0),
    )
    assert result.status == "ok", result.error
    assert [c["step"] for c in result.curve] == [5, 10, 15, 20]
    assert all(0 < c["grad_start_ratio"] <= 1 for c in result.curve)
    m = result.metrics
    assert m["grad_profile_steps"] == [5, 10, 15, 20] and m["grad_profile_t"] == m["grad_t"]
    assert np.shape(m["grad_profile_norms"]) == (4, len(m["grad_t"]))
    np.testing.assert_allclose(m["grad_profile_norms"][-1], m["grad_norms"], rtol=1e-5)
    assert m["grad_profile_norms"][0] != m["grad_profile_norms"][-1]  # training changed them
    assert result.curve[-1]["grad_start_ratio"] == pytest.approx(m["grad_start_ratio"], rel=1e-5)


def test_at_most_eight_profiles_are_kept_evenly_spaced():
    from depthwidth.train import PROFILES_KEPT, _profiles_over_training

    curve = [{"step": 10 * (i + 1), "grad_t": [0, 1], "grad_norms": [float(i), 1.0]} for i in range(20)]
    kept = _profiles_over_training(curve)
    assert PROFILES_KEPT == 8 and len(kept["grad_profile_steps"]) == 8
    assert kept["grad_profile_steps"][0] == 10 and kept["grad_profile_steps"][-1] == 200
    assert [p[0] for p in kept["grad_profile_norms"]] == [0, 3, 5, 8, 11, 14, 16, 19]
    assert _profiles_over_training(curve[:3])["grad_profile_steps"] == [10, 20, 30]
    assert _profiles_over_training([{"step": 1, "val_loss": 1.0}]) == {}
