"""Parameter, FLOP and memory accounting for one config (Kaplan et al. 2020, Table 1;
docs/science.md §2). The one home of these formulas: the sweep plan, the budgets, train() and the
analysis all take N, training FLOPs and memory from here.

Rule for N (Kaplan's non-embedding parameters): every weight matrix inside the blocks
(W_QKV, W_O, and the two FFN matrices), i.e. N = 2·d·L·(2·d_attn + d_ff) with d_attn = d.
Kaplan drops biases and LayerNorm gains, and so does N; they are counted in n_params_total,
which adds token and position embeddings and an untied read-out. Training compute per token is
3 × Kaplan's forward count (forward + backward), so it keeps the attention-context term.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from depthwidth.config import SCREENED_FAMILIES, TRANSFORMER, ModelConfig

BYTES_FP32 = 4
KAPLAN_FFN_RATIO = 4.0  # d_ff = 4·d, which makes N = 12·L·d²


def kaplan_n_params(depth, width, ffn_ratio: float = KAPLAN_FFN_RATIO):
    """Kaplan's N = L·(4·d² + 2·d·d_ff) = 2·d·L·(2·d + d_ff); 12·L·d² at d_ff = 4d. Works on
    numbers and on numpy/pandas arrays alike."""
    return depth * (4.0 + 2.0 * ffn_ratio) * width * width


def width_for_params(depth, n_params, ffn_ratio: float = KAPLAN_FFN_RATIO):
    """The width at which a depth-`depth` model has N parameters (inverse of kaplan_n_params)."""
    return (n_params / ((4.0 + 2.0 * ffn_ratio) * depth)) ** 0.5


@dataclass(frozen=True)
class ParamCount:
    n_params: int  # Kaplan's N: non-embedding weight matrices
    n_params_total: int  # everything the module holds
    n_small: int  # biases + LayerNorm parameters in the blocks and final norm (not in N)
    n_embedding: int  # token + position embeddings (+ untied head)


def count_params(cfg: ModelConfig) -> ParamCount:
    if cfg.family != TRANSFORMER:
        return _count_module(cfg)
    d, L, ff, V = cfg.width, cfg.depth, cfg.d_ff, cfg.vocab_size
    n = L * (4 * d * d + 2 * d * ff)  # kaplan_n_params in integers: = 12·L·d² at d_ff = 4d
    ln_per = (2 if cfg.bias else 1) * d if cfg.layernorm else 0
    n_ln = L * (2 if ff > 0 else 1) * ln_per + ln_per  # ln1 (+ ln2) per block, + ln_f
    n_bias = L * (4 * d + ((ff + d) if ff > 0 else 0)) if cfg.bias else 0
    n_emb = V * d + cfg.seq_len * d + (0 if cfg.tied_embeddings else V * d)
    return ParamCount(n, n + n_ln + n_bias + n_emb, n_ln + n_bias, n_emb)


@functools.lru_cache(maxsize=4096)
def _count_module(cfg: ModelConfig) -> ParamCount:
    """Recurrent families: count the real module (built on the meta device, no memory). Cached:
    a plan asks for every trial's N, FLOPs and memory, and a grid repeats its model configs."""
    import torch

    from depthwidth.models import build_model

    with torch.device("meta"):
        model = build_model(cfg)
    total = sum(p.numel() for p in model.parameters())
    emb = sum(p.numel() for n, p in model.named_parameters() if _is_embedding_name(n))
    small = sum(p.numel() for n, p in model.named_parameters() if p.dim() < 2 and not _is_embedding_name(n))
    return ParamCount(total - emb - small, total, small, emb)


def _is_embedding_name(name: str) -> bool:
    return name.split(".")[0] in ("tok_emb", "emb", "embedding", "pos_emb", "head", "out", "readout")


def _attended_states(cfg: ModelConfig) -> float:
    """Mean number of stored states a step attends to over a sequence of L = seq_len steps
    (Kerg et al. 2020, docs/science.md §6). Step t reads the states pushed so far, t + 1 of
    them, capped at ν + ρ under relevancy screening: mean min(t + 1, ν + ρ) over t < L (→ ν + ρ
    for L ≫ ν + ρ); for full attention (memrnn) the mean of t + 1, (L + 1)/2."""
    L = cfg.seq_len
    if cfg.family in SCREENED_FAMILIES:
        cap = min(cfg.nu + cfg.rho, L)
        return (cap * (cap + 1) / 2 + cap * (L - cap)) / L  # Σ_t min(t + 1, cap) / L
    if cfg.family == "memrnn":
        return (L + 1) / 2
    return 0.0


def flops_per_token(cfg: ModelConfig) -> float:
    """Forward FLOPs per token, Kaplan Table 1: 2N + 2·n_layer·n_ctx·d_attn."""
    n = count_params(cfg).n_params
    if cfg.family != TRANSFORMER:
        # additive attention over n̄ stored states: scores and context, ~4·H FLOPs per state
        return 2.0 * n + cfg.depth * 4.0 * cfg.width * _attended_states(cfg)
    return 2.0 * n + 2.0 * cfg.depth * cfg.seq_len * cfg.width


def train_flops_per_token(cfg: ModelConfig) -> float:
    """Training compute per token: forward + backward ≈ 3 × forward (Kaplan §2.1), i.e.
    6N + 6·n_layer·n_ctx·d_attn; Kaplan's C ≈ 6N drops the context term, which is not small at
    the widths a laptop trains (at d = 64, n_ctx = 64 it is a sixth of the total). Recurrent
    families: 3 × the forward count with its attention term over the stored states."""
    return 3.0 * flops_per_token(cfg)


def memory_estimate(cfg: ModelConfig, batch_size: int, bytes_per_act: int = BYTES_FP32) -> int:
    """Bytes for one AdamW training step: weights + grads + two Adam moments (fp32), plus the
    activations autograd keeps. Per layer and token it keeps ~ the block inputs/outputs of
    each sub-layer (≈ 10·d), the FFN hidden before and after GELU (2·d_ff), and on the
    plain attention path the H·T score and probability rows (2·H·T). Plus logits and their
    gradient (2·V per token). An estimate to compare configs, accurate to a small factor."""
    total = count_params(cfg).n_params_total
    state = 4 * total * BYTES_FP32
    tokens = batch_size * cfg.seq_len
    if cfg.family == TRANSFORMER:
        per_layer = 10 * cfg.width + 2 * cfg.d_ff + 2 * cfg.heads * cfg.seq_len
        acts = tokens * (cfg.depth * per_layer + 2 * cfg.vocab_size)
    else:
        # recurrent state and gates (8·H) plus, for the attentive families, the per-state
        # attention terms autograd keeps (3·H·n̄ + 2·H + n̄; matches measured saved bytes)
        n_bar = _attended_states(cfg)
        per_layer = 8 * cfg.width + (3 * cfg.width * n_bar + 2 * cfg.width + n_bar if n_bar else 0)
        acts = tokens * (cfg.depth * per_layer + 2 * cfg.vocab_size)
    return int(state + acts * bytes_per_act)


def machine_memory_bytes(available: bool = False) -> int | None:
    """This machine's memory in bytes, total or (available=True) free for new work now, within a
    container's cgroup limit when one is set; None where neither can be read."""
    info: dict[str, int] = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            info[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    mem = info.get("MemAvailable" if available else "MemTotal")
    if mem is None:
        try:
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return None
    try:  # cgroup v2: a container's limit, less what it already uses when asking what is free
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            room = int(limit)
            if available:
                room -= int(Path("/sys/fs/cgroup/memory.current").read_text())
            mem = min(mem, room)
    except (OSError, ValueError):
        pass
    return max(int(mem), 0)
