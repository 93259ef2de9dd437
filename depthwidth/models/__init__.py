"""Model families: the transformer (depth x width study) and the recurrent family of
Kerg et al. 2020 (lstm, rnn, memrnn, relrnn, rellstm). Every model maps (B, T) tokens to
(B, T, V) logits."""

from __future__ import annotations

import torch.nn as nn

from depthwidth.config import TRANSFORMER, ModelConfig


def build_model(cfg: ModelConfig) -> nn.Module:
    if cfg.family == TRANSFORMER:
        from depthwidth.models.transformer import Transformer

        return Transformer(cfg)
    from depthwidth.models.relrnn import build_recurrent

    return build_recurrent(cfg)
