"""Coordinate checks: μP across width (Yang et al. 2021, Tensor Programs V, §D.1 / the `mup`
package's tool) and CompleteP across depth (Dey et al. 2025, Figure 7; docs/science.md §7).

Train the same model at several widths (or depths) for a few AdamW steps at one learning rate and
record the typical size (mean |x|) of every block's output and of the logits after each step.
Under a parametrization that transfers, the curves for different sizes lie on top of each other;
otherwise they grow with size. Diagnostics (`coord_check`, `depth_coord_check` -> DataFrame, each
model trained as a `Probe` says; `width_spread`, `depth_spread`), used by the tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F

from depthwidth.config import ModelConfig, TrainConfig
from depthwidth.models.transformer import Transformer


def _probe(
    cfg: ModelConfig, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float, seed: int
) -> list[dict]:
    """Activation sizes of one model at init and after each of `steps` AdamW steps, with the same
    parameter groups (lr scale, weight decay, ε) as a training run."""
    from depthwidth.train import make_optimizer

    torch.manual_seed(seed)
    model = Transformer(cfg)
    opt = make_optimizer(model, TrainConfig(lr=lr))
    for g in opt.param_groups:
        g["lr"] = lr * g["lr_scale"]
    rows = []
    for step in range(steps + 1):
        logits, states = model(x, return_states=True)
        acts = {f"block{i}": s for i, s in enumerate(states)} | {"logits": logits}
        for layer, a in acts.items():
            rows.append(dict(step=step, layer=layer, act_size=a.detach().abs().mean().item()))
        if step == steps:
            break
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return rows


def _batch(vocab_size: int, batch_size: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    x = torch.randint(0, vocab_size, (batch_size, seq_len + 1), generator=g)
    return x[:, :-1], x[:, 1:]


@dataclass(frozen=True)
class Probe:
    """How each model of a check is trained and measured: `steps` AdamW steps at `lr` on one
    fixed batch of `batch_size` contexts of `seq_len` tokens out of `vocab_size`, once per seed
    of `seeds`; the models have `heads` heads and μP's base width `base_width`."""

    steps: int = 4
    lr: float = 1e-2
    base_width: int = 32
    seq_len: int = 16
    vocab_size: int = 32
    batch_size: int = 8
    seeds: int = 2
    heads: int = 4


def _check(probe: Probe, parametrization: str, sizes: dict[int, dict]) -> Iterator[tuple[int, int, dict]]:
    """(size, seed, row of _probe) for every model: `sizes` maps each size to the ModelConfig
    fields that make it, the rest of the model is the probe's."""
    x, y = _batch(probe.vocab_size, probe.batch_size, probe.seq_len)
    for size, fields in sizes.items():
        for seed in range(probe.seeds):
            cfg = ModelConfig(
                heads=probe.heads,
                seq_len=probe.seq_len,
                vocab_size=probe.vocab_size,
                parametrization=parametrization,
                base_width=probe.base_width,
                **fields,
            )
            for row in _probe(cfg, x, y, probe.steps, probe.lr, seed):
                yield size, seed, row


def coord_check(widths: list[int], parametrization: str, depth: int = 2, **probe) -> pd.DataFrame:
    """Rows: parametrization, width, seed, step (0 = init), layer, act_size (mean |x|); `probe`
    sets the fields of Probe."""
    sizes = {width: dict(depth=depth, width=width) for width in widths}
    return pd.DataFrame(
        [
            dict(parametrization=parametrization, width=width, seed=seed, **row)
            for width, seed, row in _check(Probe(**probe), parametrization, sizes)
        ]
    )


def width_spread(df: pd.DataFrame, step: int | None = None) -> pd.Series:
    """Per layer: max/min over widths of the seed-averaged activation size at `step` (default last)."""
    step = df["step"].max() if step is None else step
    m = df[df["step"] == step].groupby(["layer", "width"])["act_size"].mean()
    return m.groupby("layer").max() / m.groupby("layer").min()


# Layers compared across depths: the block at each quarter of the stack (depth L: block
# ceil(q·L) - 1, the first block at q = 1/4 for L < 4) and the logits.
DEPTH_LAYERS = {"q1": 0.25, "q2": 0.5, "q3": 0.75, "last": 1.0}


def depth_coord_check(
    depths: list[int],
    parametrization: str,
    width: int = 32,
    base_depth: int = 2,
    depth_alpha: float = 1.0,
    **probe,
) -> pd.DataFrame:
    """Rows: parametrization, depth, seed, step, layer (q1, q2, q3, last: the block at that
    fraction of the stack; logits), act_size (mean |x|); `probe` sets the fields of Probe."""
    names: dict[int, dict[str, list[str]]] = {}
    for depth in depths:
        # layer name(s) each probed tensor stands for; with < 4 blocks one block covers several
        names[depth] = {"logits": ["logits"]}
        for name, q in DEPTH_LAYERS.items():
            names[depth].setdefault(f"block{max(0, math.ceil(q * depth) - 1)}", []).append(name)
    sizes = {
        depth: dict(depth=depth, width=width, base_depth=base_depth, depth_alpha=depth_alpha)
        for depth in depths
    }
    return pd.DataFrame(
        [
            dict(
                parametrization=parametrization,
                depth=depth,
                seed=seed,
                step=row["step"],
                layer=n,
                act_size=row["act_size"],
            )
            for depth, seed, row in _check(Probe(**probe), parametrization, sizes)
            for n in names[depth].get(row["layer"], [])
        ]
    )


def depth_spread(df: pd.DataFrame, step: int | None = None) -> pd.Series:
    """Per layer: max/min over depths of the seed-averaged activation size at `step` (default last)."""
    step = df["step"].max() if step is None else step
    m = df[df["step"] == step].groupby(["layer", "depth"])["act_size"].mean()
    return m.groupby("layer").max() / m.groupby("layer").min()
