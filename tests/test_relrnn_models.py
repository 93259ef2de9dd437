"""The recurrent family of Kerg et al. 2020 (docs/science.md §6) against references: torch's own LSTM
and RNN, and a slow per-sequence transcription of relevancy screening; hand-computed parameter
counts; memory held per step is O(ν+ρ) for relrnn and O(t) for memrnn (states and bytes counted).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depthwidth.accounting import count_params
from depthwidth.config import ModelConfig
from depthwidth.gradprobe import saved_bytes_per_step, stored_states_per_step
from depthwidth.models import build_model
from depthwidth.models.relrnn import build_recurrent

torch.set_num_threads(1)
V = 10


def cfg(family: str, **kw) -> ModelConfig:
    return ModelConfig(family=family, vocab_size=V, **{"width": 8, "depth": 1, **kw})


def tokens(B: int, T: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kind", ["lstm", "rnn"])
def test_plain_cells_match_torch(kind):
    """Two stacked layers equal torch.nn.LSTM / nn.RNN(tanh) fed one-hot tokens."""
    torch.manual_seed(0)
    H, G = 8, (4 if kind == "lstm" else 1)
    model = build_recurrent(cfg(kind, depth=2)).double()
    ref = (torch.nn.LSTM if kind == "lstm" else torch.nn.RNN)(V, H, num_layers=2, batch_first=True).double()
    with torch.no_grad():
        ref.weight_ih_l0.copy_(model.emb.weight.T)
        ref.weight_ih_l1.copy_(model.inp[0].weight)
        for i in range(2):
            getattr(ref, f"weight_hh_l{i}").copy_(model.layers[i].rec.weight)
            getattr(ref, f"bias_ih_l{i}").copy_(model.bias[i])
            getattr(ref, f"bias_hh_l{i}").zero_()
    x = tokens(3, 17)
    out, _ = ref(torch.nn.functional.one_hot(x, V).double())
    logits, states = model(x, return_states=True)
    torch.testing.assert_close(logits, model.head(out))
    torch.testing.assert_close(torch.stack(states, 1), out)
    assert G * H == model.emb.weight.shape[1]


def naive_forward(model, x_row: torch.Tensor, family: str, nu, rho: int, log: dict) -> torch.Tensor:
    """Relevancy screening for ONE sequence, transcribed literally from docs/science.md §6 with Python
    lists (nu=None: MemRNN keeps every state). Returns logits (T, V)."""
    layer, H = model.layers[0], model.cfg.width
    s, cell = torch.zeros(H, dtype=torch.double), torch.zeros(H, dtype=torch.double)
    buffer, relevant, hs = [], [], []  # entries are [h, accumulated score, time step]
    for t, tok in enumerate(x_row.tolist()):
        pre = model.emb.weight[tok] + model.bias[0] + layer.rec.weight @ s
        if family == "rellstm":
            i, f, g, o = pre.chunk(4)
            cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(cell)
        else:
            h = torch.tanh(pre)
        buffer.append([h, 0.0, t])
        if nu is not None and len(buffer) > nu:
            leaving = buffer.pop(0)
            if len(relevant) < rho:
                relevant.append(leaving)
            elif rho > 0:
                j = min(range(rho), key=lambda k: relevant[k][1])
                if leaving[1] > relevant[j][1]:
                    relevant[j] = leaving
                    log["replaced"] = log.get("replaced", 0) + 1
        memory = buffer + relevant
        q = layer.w_a.weight @ s
        e = torch.stack([layer.v_a @ torch.tanh(q + layer.u_a.weight @ m[0]) for m in memory])
        alpha = torch.softmax(e, 0)
        for k, entry in enumerate(buffer):
            entry[1] += alpha[k].item()
        c = sum(a * m[0] for a, m in zip(alpha, memory))
        s = 0.5 * (h + c)
        hs.append(h)
    log.setdefault("relevant", []).append([m[2] for m in relevant])
    return model.head(torch.stack(hs))


@pytest.mark.parametrize(
    "family,nu,rho",
    [("relrnn", 3, 2), ("rellstm", 2, 3), ("relrnn", 0, 2), ("relrnn", 4, 0), ("memrnn", None, 0)],
)
def test_attentive_models_match_per_sequence_reference(family, nu, rho):
    torch.manual_seed(1)
    model = build_recurrent(cfg(family, nu=nu or 0, rho=rho, width=6)).double()
    with torch.no_grad():  # larger attention weights so relevance differs across states
        model.layers[0].v_a.mul_(16.0)
    x = tokens(4, 30, seed=2)
    logits = model(x)
    log: dict = {}
    for b in range(x.size(0)):
        torch.testing.assert_close(logits[b], naive_forward(model, x[b], family, nu, rho, log))
    if family != "memrnn" and rho > 0 and nu > 0:
        assert log.get("replaced", 0) > 0, "the replacement path of screening was never exercised"
    if rho > 0 and family != "memrnn":
        assert model.layers[0].relevant_steps.tolist() == log["relevant"]


def test_parameter_counts_by_hand():
    """N (accounting's non-embedding count) and totals for depth 2, width H, vocabulary V."""
    H, L = 16, 2
    for family, G, attn in [
        ("rnn", 1, 0),
        ("lstm", 4, 0),
        ("memrnn", 1, 1),
        ("relrnn", 1, 1),
        ("rellstm", 4, 1),
    ]:
        c = cfg(family, width=H, depth=L)
        n = L * G * H * H + (L - 1) * G * H * H + attn * L * 2 * H * H  # V/rec, inputs, W_a and U_a
        small = L * G * H + attn * L * H  # biases b, attention vectors v
        emb = V * G * H + H * V + V  # one-hot input weights, read-out weights and bias
        counts = count_params(c)
        assert (counts.n_params, counts.n_params_total) == (n, n + small + emb), family
        assert sum(p.numel() for p in build_model(c).parameters()) == n + small + emb


def test_batch_elements_are_independent():
    """Vectorised over the batch: a sequence's logits do not depend on its batch neighbours."""
    torch.manual_seed(3)
    model = build_recurrent(cfg("relrnn", nu=3, rho=2))
    x = tokens(5, 25, seed=4)
    torch.testing.assert_close(model(x)[2:3], model(x[2:3]))


@pytest.mark.parametrize("nu,rho", [(10, 15), (1, 3), (0, 4)])
def test_relrnn_holds_at_most_nu_plus_rho_states(nu, rho):
    model = build_recurrent(cfg("relrnn", nu=nu, rho=rho))
    T = 80
    held = stored_states_per_step(model, tokens(2, T))
    assert held.tolist() == [min(t + 1, nu + rho) for t in range(T)]
    full = stored_states_per_step(build_recurrent(cfg("memrnn")), tokens(2, T))
    assert full.tolist() == list(range(1, T + 1))


def test_activation_bytes_per_step_flat_for_relrnn_linear_for_memrnn():
    """Bytes autograd keeps per time step: constant once relrnn's memory is full; growing by a
    constant amount per step for memrnn (whose attention reads all t past states)."""
    torch.manual_seed(0)
    x = tokens(2, 120)
    y = tokens(2, 120, seed=9)
    rel = saved_bytes_per_step(build_recurrent(cfg("relrnn", nu=4, rho=6)), x, y)
    mid = rel[30:-1]  # past the filling phase, before the read-out lands in the last entry
    assert mid.max() == mid.min() > 0
    mem = saved_bytes_per_step(build_recurrent(cfg("memrnn")), x, y)
    inc = np.diff(mem[5:-1])
    assert inc.min() > 0 and inc.max() == inc.min()  # exactly linear in t
    assert mem[-2] > 10 * rel[-2]


def test_builds_on_meta_device_for_accounting():
    with torch.device("meta"):
        model = build_model(cfg("rellstm", width=32))
    assert all(p.is_meta for p in model.parameters())
