"""The transformer against hand-computed parameter and FLOP counts, μP's coordinate check,
and the linear-attention mode against a direct evaluation of Levine et al.'s formula."""

import math

import pytest
import torch

from depthwidth.accounting import count_params, flops_per_token, memory_estimate, train_flops_per_token
from depthwidth.config import ModelConfig
from depthwidth.coordcheck import coord_check, width_spread
from depthwidth.models.transformer import Transformer

SHAPES = [
    dict(depth=1, width=16, heads=2),
    dict(depth=3, width=48, heads=4, ffn_ratio=2.0),
    dict(depth=2, width=32, heads=4, ffn_ratio=0.0),
    dict(depth=2, width=32, heads=2, bias=True, tied_embeddings=False),
    dict(depth=4, width=24, heads=3, layernorm=False, ffn_ratio=3.0),
]


@pytest.mark.parametrize("shape", SHAPES)
def test_kaplan_n_equals_module_weight_matrices(shape):
    """Rule: N = all 2-D weights inside the blocks; biases and LayerNorm gains are excluded,
    embeddings (token, position, untied head) too. Checked against the real module."""
    cfg = ModelConfig(vocab_size=50, seq_len=16, **shape)
    model = Transformer(cfg)
    named = dict(model.named_parameters())  # tied head shares tok_emb and is listed once
    blocks_2d = sum(p.numel() for n, p in named.items() if n.startswith("blocks.") and p.dim() == 2)
    small = sum(p.numel() for n, p in named.items() if p.dim() == 1)
    counts = count_params(cfg)
    assert counts.n_params == blocks_2d
    assert counts.n_small == small
    assert counts.n_params_total == sum(p.numel() for p in named.values())


def test_standard_shape_is_12_L_d_squared():
    for L, d in [(1, 64), (6, 128), (12, 768)]:
        cfg = ModelConfig(depth=L, width=d, heads=4, vocab_size=100)
        assert count_params(cfg).n_params == 12 * L * d * d


def test_flops_follow_kaplan_table_1():
    cfg = ModelConfig(depth=6, width=512, heads=8, seq_len=1024, vocab_size=100)
    n = 12 * 6 * 512 ** 2
    assert flops_per_token(cfg) == 2 * n + 2 * 6 * 1024 * 512
    # Training = forward + backward ≈ 3 × forward, keeping the context term: 6N + 6·L·T·d.
    assert train_flops_per_token(cfg) == 6 * n + 6 * 6 * 1024 * 512


def test_memory_estimate_grows_with_batch_and_covers_adam_state():
    cfg = ModelConfig(depth=4, width=128, heads=4, vocab_size=256, seq_len=128)
    total = count_params(cfg).n_params_total
    assert memory_estimate(cfg, 1) > 16 * total  # weights + grads + 2 Adam moments in fp32
    assert memory_estimate(cfg, 64) > memory_estimate(cfg, 1)


def test_linear_attention_matches_levine_formula():
    """x'_i = sum_j sum_h <W_Q^h x_i, W_K^h x_j> W_O^h W_V^h x_j (+ x_i), docs/science.md §1."""
    torch.manual_seed(0)
    d, H, T = 8, 2, 5
    cfg = ModelConfig(depth=1, width=d, heads=H, attention="linear", layernorm=False,
                      ffn_ratio=0.0, residual=True, vocab_size=10, seq_len=T)
    model = Transformer(cfg).double()
    attn = model.blocks[0].attn
    attn.scale = 1.0
    x = torch.randn(1, T, d, dtype=torch.float64)
    Wq, Wk, Wv = attn.qkv.weight.split(d, dim=0)
    Wo = attn.proj.weight
    dh = d // H
    expect = x.clone()
    for i in range(T):
        for j in range(T):  # bidirectional, as in the BERT-like network analysed
            for h in range(H):
                s = slice(h * dh, (h + 1) * dh)
                score = (Wq[s] @ x[0, i]) @ (Wk[s] @ x[0, j])
                expect[0, i] += score * (Wo[:, s] @ (Wv[s] @ x[0, j]))
    got = model.forward_hidden(x, causal=False)
    torch.testing.assert_close(got, expect)
    # causal mode drops the j > i terms: position 0 sees only itself
    causal = model.forward_hidden(x, causal=True)
    assert not torch.allclose(causal[0, 0], got[0, 0])
    torch.testing.assert_close(causal[0, -1], got[0, -1])


def test_softmax_attention_is_causal():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(depth=2, width=16, heads=2, vocab_size=20, seq_len=8))
    x = torch.randint(0, 20, (1, 8))
    y = x.clone()
    y[0, 5] = (y[0, 5] + 1) % 20
    a, b = model(x), model(y)
    torch.testing.assert_close(a[0, :5], b[0, :5])
    assert not torch.allclose(a[0, 5:], b[0, 5:])


def test_mup_coordinates_stay_put_across_8x_width_while_standard_grows():
    """After 4 AdamW steps at one learning rate, widths 32..256: under μP every layer's mean
    |activation| stays within a factor 1.5 across widths; under the standard parametrization the
    block outputs spread by more than 3x."""
    torch.set_num_threads(1)
    widths = [32, 64, 128, 256]
    mup = width_spread(coord_check(widths, "mup"))
    std = width_spread(coord_check(widths, "standard"))
    assert (mup < 1.5).all(), mup.to_dict()
    assert (std[["block0", "block1"]] > 3.0).all(), std.to_dict()


def test_mup_learning_rate_groups():
    cfg = ModelConfig(depth=2, width=128, heads=4, vocab_size=20, parametrization="mup", base_width=32)
    model = Transformer(cfg)
    groups = model.param_groups(0.1)
    hidden = [g for g in groups if g["lr_scale"] != 1.0]
    assert len(hidden) == 1 and hidden[0]["lr_scale"] == pytest.approx(32 / 128)
    assert sum(p.numel() for p in hidden[0]["params"]) == count_params(cfg).n_params
    std = [p.std().item() for p in model.hidden_matrices()]
    assert max(std) < 0.02 / math.sqrt(4) * 1.2  # init std / sqrt(m)
    assert model.output_mult == pytest.approx(0.25)
