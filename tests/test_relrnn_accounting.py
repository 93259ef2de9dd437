"""Recurrent FLOP and memory accounting with its attention terms (Kerg et al. 2020,
docs/science.md §6), pinned against counts done by hand, against torch's FlopCounterMode on a
real training step, and as `sweep plan` and train() use them.
"""

from __future__ import annotations

import pytest
import torch
from helpers import spec_toml

from depthwidth.accounting import count_params, flops_per_token, memory_estimate, train_flops_per_token
from depthwidth.config import ModelConfig
from depthwidth.gradprobe import step_cost
from depthwidth.models import build_model

B, L, H, V = 3, 10, 16, 10  # batch, sequence length, width, vocabulary


def cfg(family: str, **kw) -> ModelConfig:
    return ModelConfig(
        **{**dict(family=family, width=H, depth=1, nu=2, rho=3, vocab_size=V, seq_len=L), **kw}
    )


def test_forward_flops_per_token_by_hand():
    """2N for the matrices (rec V, W_a, U_a: N = 3H² = 768) plus 4·H FLOPs per attended state
    (scores vᵀ tanh(·) and context Σ α_i h_i). relrnn ν=2, ρ=3 attends to min(t + 1, 5) states
    at step t: 1, 2, 3, 4, then 5 for the last six of ten steps, mean 40/10 = 4; memrnn to
    t + 1, mean 5.5."""
    assert flops_per_token(cfg("relrnn")) == 2 * 768 + 4 * 16 * 4.0 == 1792
    assert flops_per_token(cfg("memrnn")) == 2 * 768 + 4 * 16 * 5.5 == 1888
    assert flops_per_token(cfg("rellstm")) == 2 * (4 * 256 + 512) + 4 * 16 * 4.0  # 4 gates in V
    assert flops_per_token(cfg("lstm")) == 2 * 4 * 256 and flops_per_token(cfg("rnn")) == 2 * 256
    long = cfg("relrnn", seq_len=1000)  # the filling phase fades: → ν + ρ = 5
    assert flops_per_token(long) == pytest.approx(2 * 768 + 4 * 16 * (5 - 10 / 1000))
    for family in ("relrnn", "memrnn", "lstm"):  # training = 3 × forward, attention included
        assert train_flops_per_token(cfg(family)) == 3 * flops_per_token(cfg(family))


@pytest.mark.parametrize("family", ["relrnn", "memrnn", "rellstm", "lstm", "rnn"])
def test_training_flops_match_the_flop_counter(family):
    """One forward + backward on B sequences, counted by FlopCounterMode, equals 3 × (the
    accounting's forward count + the read-out's 2HV, which N leaves out) per token, less the
    backward work that cannot happen at the ends: at t = 0 the input gradients of V s₋₁ (and
    W_a s₋₁) with s₋₁ = 0, and at the last step the query, the key and the attention, whose
    s_t feeds nothing (each forward only)."""
    torch.manual_seed(0)
    c = cfg(family)
    model = build_model(c)
    x, y = torch.randint(0, V, (B, L)), torch.randint(0, V, (B, L))
    measured = step_cost(model, x, y)["step_flops"]
    G = 4 if family in ("lstm", "rellstm") else 1
    ends = 2 * B * G * H * H  # input gradient of V s₋₁
    if family in ("relrnn", "memrnn", "rellstm"):
        n_last = 5 if family != "memrnn" else L
        ends += 2 * B * H * H  # input gradient of W_a s₋₁
        ends += 2 * (2 * B * H * H) * 2  # last step: backward of W_a s and U_a h
        ends += 2 * (2 * B * n_last * H) * 2  # last step: backward of scores and context
    assert measured == 3 * (flops_per_token(c) + 2 * H * V) * B * L - ends


def test_memory_estimate_by_hand():
    """Weights, gradients and two Adam moments (16 bytes a parameter), plus per token and layer
    8H for the cell and, with attention, 3H·n̄ + 2H + n̄, plus 2V for logits and their
    gradient, 4 bytes each."""
    for family, n_bar in (("relrnn", 4.0), ("memrnn", 5.5)):
        c = cfg(family)
        per_token = 8 * H + 3 * H * n_bar + 2 * H + n_bar + 2 * V
        assert memory_estimate(c, B) == int(16 * count_params(c).n_params_total + 4 * B * L * per_token)
    lstm = cfg("lstm")
    assert memory_estimate(lstm, B) == int(
        16 * count_params(lstm).n_params_total + 4 * B * L * (8 * H + 2 * V)
    )
    # at T ≫ ν + ρ memrnn's activations grow as T², relrnn's as T
    rel = [memory_estimate(cfg("relrnn", seq_len=T), B) for T in (1000, 2000)]
    mem = [memory_estimate(cfg("memrnn", seq_len=T), B) for T in (1000, 2000)]
    assert 1.9 < rel[1] / rel[0] < 2.01 and 3.9 < mem[1] / mem[0] < 4.01


def test_sweep_plan_and_train_count_the_same_attention_flops(tmp_path):
    """`sweep plan` charges steps × batch × (T + 20) × 3 × the forward count with attention; a
    run of the same trial reports the same training FLOPs."""
    from sweeps.plans.plan import plan_rows
    from sweeps.plans.spec import parse_spec

    text = spec_toml(
        "acct",
        base={},
        model={"width": 16, "depth": 1, "nu": 2, "rho": 3},
        data={"source": "copy", "task_length": 30},
        train={"batch_size": 4, "eval_every": 3, "eval_batches": 1},
        grid={"family": ["relrnn", "memrnn"]},
        budget={"steps": 3},
    )
    spec = parse_spec(text, "acct.toml")
    rows = {r.family: r for r in plan_rows(spec)}
    N = 3 * H * H
    for family, n_bar in (("relrnn", (15 + 5 * 45) / 50), ("memrnn", 51 / 2)):
        per_token = 3 * (2 * N + 4 * H * n_bar)
        assert rows[family].flops == pytest.approx(3 * 4 * 50 * per_token, rel=1e-12)
    assert rows["memrnn"].flops > 1.5 * rows["relrnn"].flops  # 25.5 attended states against 4.8
    from depthwidth.train import train

    trial = next(t for t in spec.trials if t.model.family == "memrnn")
    result = train(trial.model, trial.data, trial.train.replace(threads=1))
    assert result.status == "ok" and result.flops == pytest.approx(rows["memrnn"].flops, rel=1e-12)
