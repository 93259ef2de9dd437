"""Does depth 2 copy in context where depth 1 cannot, and does the loss step follow it? The
longer-context copying run (sweeps/copying-context.toml: depth 1 and 2 at width 64, a 256-token
context, 2.46e7 tokens, two seeds; docs/studies/threshold-cpu.md §7) read at every evaluation.

    depthwidth sweep run sweeps/copying-context.toml --no-analyze
    python bench/copy_context.py --runs docs/studies/data/copying-context.csv \
        --curves docs/studies/data/copying-context-curves.csv --out docs/studies/figures

The copy gain is measured against the probe's control (depthwidth/copyprobe.py): the loss at the
same positions after fresh tokens less the loss on the repeat, so what position alone is worth
cancels. Each run's last evaluation gives its gain; the mean over the seeds of a depth comes with a
t interval over those seeds (two seeds: a wide one). Beside it, the loss step from depth 1 to 2 at
the same seed, over the run. Writes `copying-context.png` and a markdown summary on stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

GAIN = "copy_gain_vs_control"


def seeds_interval(values: np.ndarray) -> tuple[float, float, float]:
    """The mean and its 95% t interval over the seeds (NaN bounds with one seed)."""
    m = float(np.mean(values))
    if len(values) < 2:
        return m, float("nan"), float("nan")
    half = stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / np.sqrt(len(values))
    return m, m - half, m + half


def summary(runs: pd.DataFrame, curves: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per depth: the final gain against the control, mean and interval over seeds, and the
    final loss; per seed and step: the loss step from depth 1 to depth 2 and each depth's gain)."""
    rows = []
    for d, g in runs.groupby("depth"):
        m, lo, hi = seeds_interval(g[GAIN].to_numpy(float))
        rows.append(
            dict(
                depth=int(d),
                seeds=len(g),
                gain=m,
                lo=lo,
                hi=hi,
                loss=float(g["final_val_loss"].mean()),
                tokens=int(g["tokens"].max()),
            )
        )
    c = curves.merge(runs[["trial_id", "depth", "seed"]], on="trial_id")
    wide = c.pivot_table(index=["seed", "step", "tokens"], columns="depth", values=["val_loss", GAIN])
    step = pd.DataFrame(
        {
            "step_1_to_2": wide[("val_loss", 1)] - wide[("val_loss", 2)],
            "gain_depth_1": wide[(GAIN, 1)],
            "gain_depth_2": wide[(GAIN, 2)],
        }
    ).reset_index()
    return pd.DataFrame(rows), step


def figure(runs: pd.DataFrame, curves: pd.DataFrame, step: pd.DataFrame, path: Path) -> None:
    from matplotlib.figure import Figure

    c = curves.merge(runs[["trial_id", "depth", "seed"]], on="trial_id")
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    colours = {1: "C0", 2: "C3"}
    for (d, s), g in c.groupby(["depth", "seed"]):
        left.plot(
            g["tokens"],
            g[GAIN],
            color=colours[int(d)],
            ls="-" if s == 0 else "--",
            label=f"depth {int(d)}, seed {int(s)}",
        )
    left.axhline(0, color="0.5", lw=0.8)
    left.set_xlabel("tokens trained")
    left.set_ylabel("copy gain against the control\n(nats per token)")
    left.set_title("copying random tokens in context (above 0: copies)", fontsize=10)
    left.legend(fontsize=7)
    for s, g in step.groupby("seed"):
        right.plot(
            g["tokens"], g["step_1_to_2"], color="0.2", ls="-" if s == 0 else "--", label=f"seed {int(s)}"
        )
    right.axhline(0, color="0.5", lw=0.8)
    right.set_xlabel("tokens trained")
    right.set_ylabel("validation loss, depth 1 − depth 2\n(nats per token)")
    right.set_title("the loss step from one layer to two", fontsize=10)
    right.legend(fontsize=7)
    for ax in (left, right):
        ax.set_xscale("log")
    fig.suptitle("Width 64, 256-token context, byte-level tiny Shakespeare", fontsize=10)
    fig.savefig(path, dpi=120)


def text(per: pd.DataFrame, step: pd.DataFrame) -> str:
    last = step[step["step"] == step["step"].max()]
    lines = [
        "| depth | seeds | copy gain against the control (mean, 95% t interval over seeds) | val loss |",
        "|---|---|---|---|",
    ]
    for r in per.itertuples():
        lines.append(f"| {r.depth} | {r.seeds} | {r.gain:+.3f} [{r.lo:+.3f}, {r.hi:+.3f}] | {r.loss:.3f} |")
    lines.append("")
    lines.append(
        f"loss step depth 1 → 2 at {int(per['tokens'].max()):,} tokens: "
        + ", ".join(f"seed {int(r.seed)} {r.step_1_to_2:.3f}" for r in last.itertuples())
        + f"; largest gain against the control of any evaluation: {step[['gain_depth_1', 'gain_depth_2']].max().max():+.3f}"
    )
    return "\n".join(lines)


def planted() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two depths, two seeds: depth 2 copies (its gain rises to 1.0 nats), depth 1 does not."""
    runs, curves = [], []
    for d in (1, 2):
        for s in (0, 1):
            tid = f"d{d}s{s}"
            for k in range(1, 11):
                gain = (1.0 if d == 2 else 0.0) * k / 10 + 0.01 * s
                curves.append(
                    dict(
                        trial_id=tid,
                        step=100 * k,
                        tokens=1000 * k,
                        val_loss=3 - 0.1 * k - 0.05 * d,
                        **{GAIN: gain},
                    )
                )
            runs.append(
                dict(
                    trial_id=tid,
                    depth=d,
                    seed=s,
                    tokens=10000,
                    final_val_loss=3 - 1 - 0.05 * d,
                    **{GAIN: gain},
                )
            )
    return pd.DataFrame(runs), pd.DataFrame(curves)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", help="the run's runs table (sweep results --csv)")
    p.add_argument("--curves", help="its curves: trial_id, step, tokens, val_loss and the probe's columns")
    p.add_argument("--out", default="docs/studies/figures", help="folder for copying-context.png")
    p.add_argument("--smoke", action="store_true", help="a planted run, writing nothing")
    args = p.parse_args(argv)
    if args.smoke:
        per, step = summary(*planted())
        print(text(per, step))
        ok = per.set_index("depth")["gain"].round(3).to_dict() == {1: 0.005, 2: 1.005}
        print(f"smoke: planted final gains 0.005 and 1.005, measured {per['gain'].round(3).tolist()}")
        return 0 if ok else 1
    if not (args.runs and args.curves):
        p.error("--runs and --curves are required (or --smoke)")
    runs, curves = pd.read_csv(args.runs), pd.read_csv(args.curves)
    per, step = summary(runs, curves)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    figure(runs, curves, step, Path(args.out) / "copying-context.png")
    print(text(per, step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
