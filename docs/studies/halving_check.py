"""The successive halving's learning-rate choice against the full grid, and its compute.

    python docs/studies/halving_check.py docs/studies/data/threshold-cpu.csv \
        docs/studies/data/threshold-cpu-grid.csv --out docs/studies/figures/threshold-cpu

Reads the study's runs table (with its `halving` column) and the full-grid table of a subset of
its groups (the same trial ids, every learning rate trained to the end), and writes
`halving-vs-grid.csv` (one row per group: the halving's choice, the grid's best, their losses),
`halving-vs-grid.png`, and a markdown summary on stdout (docs/studies/threshold-cpu.md quotes it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from analysis.readers.halving import against_grid, compute_used  # noqa: E402


def summary(cmp: pd.DataFrame, used: dict) -> str:
    lines = [
        f"- groups compared: {len(cmp)}; the halving kept the grid's best learning rate in "
        f"{int(cmp['agree'].sum())} ({cmp['agree'].mean():.0%})",
        f"- loss given up (chosen − best, nats): median {cmp['excess'].median():.4f}, mean "
        f"{cmp['excess'].mean():.4f}, largest {cmp['excess'].max():.4f} "
        f"({(cmp['excess'] / cmp['best_loss']).max():.1%} of the loss)",
        f"- chosen below the grid's best lr: {int((cmp['chosen_lr'] < cmp['best_lr']).sum())}, "
        f"above: {int((cmp['chosen_lr'] > cmp['best_lr']).sum())}",
    ]
    for tokens, g in cmp.groupby("tokens"):
        lines.append(
            f"- at {tokens:.3g} tokens: {int(g['agree'].sum())} of {len(g)} agree, mean loss given "
            f"up {g['excess'].mean():.4f}"
        )
    lines.append(
        f"- the study trained {used['flops']:.3g} FLOPs, {used['share']:.0%} of the "
        f"{used['full_grid_flops']:.3g} its full learning-rate grid would have"
    )
    return "\n".join(lines)


def figure(cmp: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    agree = cmp[cmp["agree"]]
    miss = cmp[~cmp["agree"]]
    lo = min(cmp["best_loss"].min(), cmp["chosen_loss"].min())
    hi = max(cmp["best_loss"].max(), cmp["chosen_loss"].max())
    ax[0].plot([lo, hi], [lo, hi], color="0.7", lw=1)
    ax[0].scatter(agree["best_loss"], agree["chosen_loss"], s=18, label="kept the grid's best")
    ax[0].scatter(miss["best_loss"], miss["chosen_loss"], s=18, marker="x", label="another lr")
    ax[0].set(xlabel="grid's best loss (nats/byte)", ylabel="halving's choice", title="per group")
    ax[0].legend(fontsize=8)
    ratio = (cmp["chosen_lr"] / cmp["best_lr"]).round(3)
    counts = ratio.value_counts().sort_index()
    ax[1].bar([f"{r:g}" for r in counts.index], counts.to_numpy())
    ax[1].set(xlabel="chosen lr / grid's best lr", ylabel="groups", title="which way it missed")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study")
    p.add_argument("grid")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    study = pd.read_csv(args.study, dtype={"trial_id": str})
    grid = pd.read_csv(args.grid, dtype={"trial_id": str})
    cmp = against_grid(study, grid)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cmp.to_csv(out / "halving-vs-grid.csv", index=False)
    figure(cmp, out / "halving-vs-grid.png")
    print(summary(cmp, compute_used(study)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
