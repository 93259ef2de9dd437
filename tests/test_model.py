"""The transformer against hand-computed parameter and FLOP counts, μP's coordinate check across
width and CompleteP's across depth, the parameter groups of both, and the linear-attention mode
against a direct evaluation of Levine et al.'s formula."""

import math

import pytest
import torch

from depthwidth.accounting import count_params, flops_per_token, memory_estimate, train_flops_per_token
from depthwidth.config import ModelConfig
from depthwidth.coordcheck import coord_check, depth_coord_check, depth_spread, width_spread
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
    n = 12 * 6 * 512**2
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
    cfg = ModelConfig(
        depth=1,
        width=d,
        heads=H,
        attention="linear",
        layernorm=False,
        ffn_ratio=0.0,
        residual=True,
        vocab_size=10,
        seq_len=T,
    )
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


def test_completep_coordinates_stay_put_across_16x_depth_while_standard_and_mup_grow():
    """After 4 AdamW steps at one learning rate, depths 2..32 at width 32: under CompleteP the
    block at each quarter of the stack, the last block and the logits stay within a factor 2
    across depths; under the standard parametrization and under μP (width-only) the blocks'
    mean |activation| spreads by more than 5x (the residual stream sums L unscaled branches)."""
    torch.set_num_threads(1)
    depths = [2, 4, 8, 16, 32]
    cp = depth_spread(depth_coord_check(depths, "completep", seeds=1))
    assert set(cp.index) == {"q1", "q2", "q3", "last", "logits"}
    assert (cp < 2.0).all(), cp.to_dict()
    for par in ("standard", "mup"):
        other = depth_spread(depth_coord_check(depths, par, seeds=1))
        blocks = ["q1", "q2", "q3", "last"]
        assert (other[blocks] > 5.0).all(), (par, other.to_dict())
        assert (other[blocks] > 2 * cp[blocks]).all(), (par, other.to_dict(), cp.to_dict())


def test_completep_groups_follow_dey_2025_table_1():
    """m_N = 4 (width 128 / base 32), m_L = 4 (depth 8 / base 2), α = 1 then α = 0.5: hidden lr
    × m_N^-1·m_L^(α-1), hidden weight decay × m_N, ε × m_N^-1·m_L^-α inside the blocks and ×
    m_N^-1 outside, LayerNorm lr × m_L^(α-1), branches × m_L^-α; init as μP."""
    base = dict(
        depth=8,
        width=128,
        heads=4,
        vocab_size=20,
        parametrization="completep",
        base_width=32,
        base_depth=2,
        bias=True,
    )
    for alpha in (1.0, 0.5):
        cfg = ModelConfig(**base, depth_alpha=alpha)
        model = Transformer(cfg)
        groups = model.param_groups(0.1, eps=1e-8)
        by_id = {id(p): g for g in groups for p in g["params"]}
        qkv = model.blocks[3].attn.qkv
        g = by_id[id(qkv.weight)]
        assert g["lr_scale"] == pytest.approx(4 ** (alpha - 1) / 4)
        assert g["weight_decay"] == pytest.approx(0.1 * 4)
        assert g["eps"] == pytest.approx(1e-8 / 4 * 4**-alpha)
        for p in (model.blocks[0].ln1.weight, model.blocks[5].mlp.fc.bias):
            assert by_id[id(p)]["lr_scale"] == pytest.approx(4 ** (alpha - 1))
            assert by_id[id(p)]["weight_decay"] == 0.0
            assert by_id[id(p)]["eps"] == pytest.approx(1e-8 / 4 * 4**-alpha)
        emb, ln_f = by_id[id(model.tok_emb.weight)], by_id[id(model.ln_f.weight)]
        assert emb["lr_scale"] == 1.0 and emb["weight_decay"] == 0.1 and emb["eps"] == pytest.approx(2.5e-9)
        assert ln_f["lr_scale"] == 1.0 and ln_f["weight_decay"] == 0.0
        assert sum(p.numel() for p in groups[0]["params"]) == count_params(cfg).n_params
        assert model.blocks[0].branch_mult == pytest.approx(4**-alpha)
        assert model.output_mult == pytest.approx(0.25)
        assert model.blocks[0].attn.scale == pytest.approx(1 / 32)  # μP's 1/d_head
        assert max(p.std().item() for p in model.hidden_matrices()) < 0.02 / 2 * 1.2
    # the branch multiplier is really applied: a completep block equals a μP block whose branch
    # outputs are scaled by hand
    cfg = ModelConfig(**base)
    cp, mu = Transformer(cfg), Transformer(cfg.replace(parametrization="mup"))
    mu.load_state_dict(cp.state_dict())
    x = torch.randn(2, 5, 128)
    blk_cp, blk_mu = cp.blocks[0], mu.blocks[0]
    a = blk_mu.attn(blk_mu.ln1(x))
    h = x + a / 4
    expected = h + blk_mu.mlp(blk_mu.ln2(h)) / 4
    torch.testing.assert_close(blk_cp(x), expected)
