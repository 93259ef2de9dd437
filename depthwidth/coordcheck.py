"""μP coordinate check (Yang et al. 2021, Tensor Programs V, §D.1 / the `mup` package's tool).

Train the same model at several widths for a few AdamW steps at one learning rate and record the
typical size (mean |x|) of every block's output and of the logits after each step. Under μP the
curves for different widths lie on top of each other; under the standard parametrization they
grow with width. Both a diagnostic (`coord_check(...)` -> DataFrame, `plot_coord_check`) and a test.
"""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F

from depthwidth.config import ModelConfig
from depthwidth.models.transformer import Transformer


def coord_check(widths: list[int], parametrization: str, depth: int = 2, steps: int = 4,
                lr: float = 1e-2, base_width: int = 32, seq_len: int = 16, vocab_size: int = 32,
                batch_size: int = 8, seeds: int = 2, heads: int = 4) -> pd.DataFrame:
    """Rows: parametrization, width, seed, step (0 = init), layer, act_size (mean |x|)."""
    rows = []
    g = torch.Generator().manual_seed(1234)
    x = torch.randint(0, vocab_size, (batch_size, seq_len + 1), generator=g)
    x, y = x[:, :-1], x[:, 1:]
    for width in widths:
        for seed in range(seeds):
            torch.manual_seed(seed)
            cfg = ModelConfig(depth=depth, width=width, heads=heads, seq_len=seq_len,
                              vocab_size=vocab_size, parametrization=parametrization,
                              base_width=base_width)
            model = Transformer(cfg)
            groups = model.param_groups(weight_decay=0.0)
            for grp in groups:
                grp["lr"] = lr * grp["lr_scale"]
            opt = torch.optim.AdamW(groups, lr=lr)
            for step in range(steps + 1):
                logits, states = model(x, return_states=True)
                acts = {f"block{i}": s for i, s in enumerate(states)} | {"logits": logits}
                for layer, a in acts.items():
                    rows.append(dict(parametrization=parametrization, width=width, seed=seed,
                                     step=step, layer=layer, act_size=a.detach().abs().mean().item()))
                if step == steps:
                    break
                loss = F.cross_entropy(logits.reshape(-1, vocab_size), y.reshape(-1))
                opt.zero_grad()
                loss.backward()
                opt.step()
    return pd.DataFrame(rows)


def width_spread(df: pd.DataFrame, step: int | None = None) -> pd.Series:
    """Per layer: max/min over widths of the seed-averaged activation size at `step` (default last)."""
    step = df["step"].max() if step is None else step
    m = df[df["step"] == step].groupby(["layer", "width"])["act_size"].mean()
    return m.groupby("layer").max() / m.groupby("layer").min()


def plot_coord_check(df: pd.DataFrame):
    """One panel per parametrization: activation size vs width, one line per layer, last step."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pars = list(dict.fromkeys(df["parametrization"]))
    fig, axes = plt.subplots(1, len(pars), figsize=(5 * len(pars), 4), squeeze=False)
    last = df["step"].max()
    for ax, par in zip(axes[0], pars):
        d = df[(df["parametrization"] == par) & (df["step"] == last)]
        for layer, g in d.groupby("layer"):
            m = g.groupby("width")["act_size"].mean()
            ax.plot(m.index, m.values, marker="o", label=layer)
        ax.set(xscale="log", yscale="log", xlabel="width", ylabel="mean |activation|",
               title=f"{par}: after {last} steps")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
