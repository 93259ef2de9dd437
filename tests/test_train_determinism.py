"""A CPU trial repeats bit for bit: same seed and thread count give the same losses and accuracy
(torch's deterministic kernels on, docs/bench/relrnn.md), and another seed gives other ones."""

from __future__ import annotations

import torch

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.train import deterministic_kernels, train


def run(seed: int) -> list[tuple[float, float, float]]:
    model = ModelConfig(family="relrnn", width=16, depth=1, nu=3, rho=4)
    data = DataConfig(source="copy", task_length=5)
    cfg = TrainConfig(
        steps=12,
        batch_size=16,
        lr=1e-2,
        warmup_steps=0,
        eval_every=4,
        eval_batches=1,
        threads=1,
        seed=seed,
        device="cpu",
    )
    r = train(model, data, cfg)
    assert r.status == "ok"
    return [(c["train_loss"], c["val_loss"], c["accuracy"]) for c in r.curve]


def test_a_cpu_trial_repeats_bit_for_bit():
    first = run(0)
    assert torch.are_deterministic_algorithms_enabled()
    assert run(0) == first  # exact equality, not approx
    assert run(1) != first


def test_deterministic_kernels_are_switched_off_again_for_another_device():
    deterministic_kernels(torch.device("cpu"))
    assert torch.are_deterministic_algorithms_enabled()
    deterministic_kernels(torch.device("meta"))
    assert not torch.are_deterministic_algorithms_enabled()
    deterministic_kernels(torch.device("cpu"))
    assert torch.are_deterministic_algorithms_enabled()
