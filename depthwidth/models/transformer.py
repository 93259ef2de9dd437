"""A GPT-style decoder whose depth and width are the experiment's knobs, read top to bottom:
norm -> attention -> MLP -> block -> model (after karpathy/nanoGPT).

`attention="linear"` is the un-normalised multi-head attention Levine et al. 2020 analyse
(docs/science.md §1): no softmax, o_i = scale * sum_j <q_i, k_j> v_j; with layernorm=False and
ffn_ratio=0 the analysed network is reached exactly. `parametrization="mup"` applies μP
(Yang et al. 2021, Tensor Programs V) and `"completep"` μP plus CompleteP's depth rules (Dey et
al. 2025, docs/science.md §7) in the fenced section below.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from depthwidth.config import ModelConfig


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads, self.head_dim, self.kind = cfg.heads, cfg.head_dim, cfg.attention
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width, bias=cfg.bias)  # rows: [W_Q; W_K; W_V]
        self.proj = nn.Linear(cfg.width, cfg.width, bias=cfg.bias)  # W_O
        # Score scale: 1/sqrt(d_head) (standard) or 1/d_head (μP: keeps q·k O(1) as width grows,
        # since q and k become correlated during training). A plain attribute so the
        # separation-rank simulator can set 1.0 for exact integer evaluation.
        self.scale = 1.0 / (math.sqrt(cfg.head_dim) if cfg.parametrization == "standard" else cfg.head_dim)

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, H, T, d_head)
        q, k, v = (t.view(B, T, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        if self.kind == "softmax":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=self.scale)
        else:
            scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, T, T), no softmax
            if causal:
                scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), 0.0)
            y = scores @ v  # (B, H, T, d_head)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble heads: (B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.width, cfg.d_ff, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_ff, cfg.width, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


def _norm(cfg: ModelConfig) -> nn.Module:
    return nn.LayerNorm(cfg.width, bias=cfg.bias) if cfg.layernorm else nn.Identity()


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.residual = cfg.residual
        # CompleteP (Dey et al. 2025): each residual branch × m_L^-α, m_L = depth / base_depth,
        # so the L branches together move the residual stream by O(1) at any depth. 1 otherwise.
        self.branch_mult = cfg.depth_mult**-cfg.depth_alpha
        self.ln1, self.attn = _norm(cfg), Attention(cfg)
        self.mlp = MLP(cfg) if cfg.d_ff > 0 else None  # ffn_ratio = 0: attention only
        self.ln2 = _norm(cfg) if self.mlp is not None else nn.Identity()

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        a = self.attn(self.ln1(x), causal)
        x = x + self.branch_mult * a if self.residual else a
        if self.mlp is not None:
            m = self.mlp(self.ln2(x))
            x = x + self.branch_mult * m if self.residual else m
        return x


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.vocab_size < 2:
            raise ValueError("ModelConfig.vocab_size must be resolved from the data before building.")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.width)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.depth))
        self.ln_f = _norm(cfg)
        self.head = nn.Linear(cfg.width, cfg.vocab_size, bias=False)
        if cfg.tied_embeddings:
            self.head.weight = self.tok_emb.weight
        self.reset_parameters()

    # ---------------------------------------------------------------- μP (fenced) ----------
    # Width multiplier m_N = width / base_width (1 under "standard"). Following Tensor Programs V,
    # Table 3 (Adam): hidden matrices get init std / sqrt(m_N) and learning rate / m_N; embeddings
    # keep both; the read-out is multiplied by 1/m_N. Attention uses 1/d_head (see Attention).
    # Under "standard" every weight is N(0, init_std) and all multipliers are 1 (nanoGPT/GPT-2).
    #
    # "completep" adds the depth rules of Dey et al. 2025 (Table 1; checked against the reference
    # implementation, EleutherAI/nanoGPT-mup branch completep), m_L = depth / base_depth, α =
    # depth_alpha: residual branches × m_L^-α (Block); learning rate of every parameter inside the
    # blocks × m_L^(α-1) (1 at α = 1); hidden matrices' weight decay × m_N, so that AdamW's
    # decay per step lr·λ does not shrink with width; AdamW ε × m_N^-1 for every parameter, since
    # the read-out's 1/m_N shrinks every gradient, and × m_L^-α more inside the blocks, whose
    # gradients the branch multiplier shrinks. (The reference code applies m_N^-1·m_L^-α to all
    # groups; outside the blocks we keep ε·m_N^-1, the size of those gradients. Either way ε
    # stays far below √v at the default 1e-8.)
    @property
    def output_mult(self) -> float:
        return 1.0 / self.cfg.width_mult

    def hidden_matrices(self) -> list[nn.Parameter]:
        return [p for n, p in self.named_parameters() if p.dim() == 2 and n.startswith("blocks.")]

    def param_groups(self, weight_decay: float, eps: float = 1e-8) -> list[dict]:
        """AdamW groups, each with `lr_scale` applied on top of the schedule's lr, and its own
        weight decay and ε."""
        cfg = self.cfg
        m_n, m_l, alpha = cfg.width_mult, cfg.depth_mult, cfg.depth_alpha
        hidden = {id(p) for p in self.hidden_matrices()}
        in_blocks = {id(p) for p in self.blocks.parameters()}
        hidden_2d = [p for p in self.parameters() if id(p) in hidden]
        other_2d = [p for p in self.parameters() if p.dim() == 2 and id(p) not in hidden]
        vectors = [p for p in self.parameters() if p.dim() < 2]
        if cfg.parametrization != "completep":  # standard, μP: μP's width rule on hidden lr only
            groups = [
                dict(params=hidden_2d, lr_scale=1.0 / m_n, weight_decay=weight_decay, eps=eps),
                dict(params=other_2d, lr_scale=1.0, weight_decay=weight_decay, eps=eps),
                dict(params=vectors, lr_scale=1.0, weight_decay=0.0, eps=eps),
            ]
            return [g for g in groups if g["params"]]
        depth_lr = m_l ** (alpha - 1.0)
        eps_out, eps_in = eps / m_n, eps / m_n * m_l**-alpha
        groups = [
            dict(params=hidden_2d, lr_scale=depth_lr / m_n, weight_decay=weight_decay * m_n, eps=eps_in),
            dict(
                params=[p for p in vectors if id(p) in in_blocks],
                lr_scale=depth_lr,
                weight_decay=0.0,
                eps=eps_in,
            ),
            dict(params=other_2d, lr_scale=1.0, weight_decay=weight_decay, eps=eps_out),
            dict(
                params=[p for p in vectors if id(p) not in in_blocks],
                lr_scale=1.0,
                weight_decay=0.0,
                eps=eps_out,
            ),
        ]
        return [g for g in groups if g["params"]]

    def reset_parameters(self) -> None:
        std, m = self.cfg.init_std, self.cfg.width_mult
        for name, p in self.named_parameters():
            if p.dim() < 2:
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            elif name.startswith("blocks."):
                nn.init.normal_(p, std=std / math.sqrt(m))
            else:
                nn.init.normal_(p, std=std)

    # ------------------------------------------------------------ end μP -------------------

    def forward_hidden(self, h: torch.Tensor, causal: bool = True) -> torch.Tensor:
        """The block stack alone on input vectors h (B, T, d): no embedding, no final norm/head."""
        for block in self.blocks:
            h = block(h, causal)
        return h

    def forward(self, idx: torch.Tensor, return_states: bool = False):
        B, T = idx.shape
        if T > self.cfg.seq_len:
            raise ValueError(f"sequence length {T} exceeds ModelConfig.seq_len = {self.cfg.seq_len}.")
        pos = torch.arange(T, device=idx.device)
        h = self.tok_emb(idx) + self.pos_emb(pos)  # (B, T, d)
        states = []
        for block in self.blocks:
            h = block(h)
            states.append(h)
        logits = self.head(self.ln_f(h)) * self.output_mult  # (B, T, V)
        return (logits, states) if return_states else logits
