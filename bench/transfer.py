"""Benchmark: does the best learning rate transfer across depth? Standard, μP and CompleteP.

Run by hand:  nice python bench/transfer.py [--workers 2] [--steps 300] [--seeds 2]
              python bench/transfer.py --smoke        (seconds: the whole flow on tiny runs, writes nothing)
Width 64 on the embedded synthetic language (DataConfig()), depths {2, 4, 8, 16}, a 5-point
learning-rate grid half a decade apart, each (parametrization, depth, lr) at several seeds. The
check of Dey et al. 2025 (docs/science.md §7): under CompleteP the seed-mean optimum moves by at
most one grid step across depths; how far it moves under the other two is reported. Writes a CSV
of every run (re-running skips the rows it holds), the figure and docs/bench/transfer.md.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd

PARAMETRIZATIONS = ("standard", "mup", "completep")
DEPTHS = (2, 4, 8, 16)
LRS = tuple(10.0**e for e in (-3.5, -3.0, -2.5, -2.0, -1.5))  # half a decade apart
WIDTH, HEADS, BASE_WIDTH, BASE_DEPTH = 64, 4, 64, 2
KEY = ["parametrization", "depth", "lr", "seed"]


def one_run(par: str, depth: int, lr: float, seed: int, steps: int, batch: int, seq_len: int) -> dict:
    import torch

    from depthwidth.config import DataConfig, ModelConfig, TrainConfig
    from depthwidth.train import train

    torch.set_num_threads(1)
    model = ModelConfig(
        depth=depth,
        width=WIDTH,
        heads=HEADS,
        seq_len=seq_len,
        parametrization=par,
        base_width=BASE_WIDTH,
        base_depth=BASE_DEPTH,
    )
    cfg = TrainConfig(
        steps=steps,
        batch_size=batch,
        lr=lr,
        warmup_steps=max(1, steps // 10),
        eval_every=steps,
        eval_batches=8,
        seed=seed,
        threads=1,
    )
    r = train(model, DataConfig(), cfg)
    loss = r.final_val_loss if r.status == "ok" else math.nan
    return dict(
        parametrization=par,
        depth=depth,
        lr=lr,
        seed=seed,
        status=r.status,
        val_loss=loss,
        n_params=r.n_params,
        wall_s=r.wall_s,
        steps=steps,
        batch=batch,
        seq_len=seq_len,
    )


def run_all(
    csv: Path, seeds: int, steps: int, batch: int, seq_len: int, workers: int, depths=DEPTHS, lrs=LRS
) -> pd.DataFrame:
    done = pd.read_csv(csv) if csv.is_file() else pd.DataFrame(columns=KEY)
    have = {tuple(r) for r in done[KEY].itertuples(index=False)}
    todo = [
        (p, d, lr, s)
        for d in sorted(depths, reverse=True)  # deepest (slowest) first
        for p in PARAMETRIZATIONS
        for lr in lrs
        for s in range(seeds)
        if (p, d, lr, s) not in have
    ]
    print(f"{len(have)} runs stored, {len(todo)} to run on {workers} workers", flush=True)
    t0 = time.perf_counter()
    rows = [] if done.empty else done.to_dict("records")
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futs = [pool.submit(one_run, *t, steps, batch, seq_len) for t in todo]
        for i, f in enumerate(as_completed(futs), 1):
            r = f.result()
            rows.append(r)
            pd.DataFrame(rows).to_csv(csv, index=False)  # each finished run is kept
            el = time.perf_counter() - t0
            print(
                f"[{i}/{len(todo)}] {r['parametrization']:>9} depth {r['depth']:>2} "
                f"lr {r['lr']:.2e} seed {r['seed']}: {r['status']} {r['val_loss']:.4f} "
                f"({r['wall_s']:.0f}s; elapsed {el / 60:.1f} min, eta "
                f"{el / i * (len(todo) - i) / 60:.1f} min)",
                flush=True,
            )
    df = pd.DataFrame(rows)
    return df[df["depth"].isin(depths) & df["lr"].isin(lrs) & (df["seed"] < seeds) & (df["steps"] == steps)]


def optima(df: pd.DataFrame) -> pd.DataFrame:
    """Per (parametrization, depth): the grid lr of the lowest seed-mean loss (a diverged seed
    makes its lr lose), its index, whether it sits at the grid's edge, and a parabola in log10 lr
    through the best point and its neighbours (the sub-grid optimum, where both neighbours exist)."""
    lrs = sorted(df["lr"].unique())
    out = []
    for (par, depth), g in df.groupby(["parametrization", "depth"]):
        m = g.groupby("lr")["val_loss"].apply(lambda v: v.mean() if v.notna().all() else math.inf)
        m = m.reindex(lrs)
        i = int(np.nanargmin(m.to_numpy()))
        refined = math.log10(lrs[i])
        if 0 < i < len(lrs) - 1 and np.isfinite(m.iloc[i - 1 : i + 2]).all():
            x, y = np.log10(lrs[i - 1 : i + 2]), m.iloc[i - 1 : i + 2].to_numpy()
            a, b, _ = np.polyfit(x, y, 2)
            if a > 0:
                refined = float(-b / (2 * a))
        out.append(
            dict(
                parametrization=par,
                depth=int(depth),
                best_lr=lrs[i],
                index=i,
                at_edge=i in (0, len(lrs) - 1),
                best_loss=float(m.iloc[i]),
                refined_log10_lr=refined,
            )
        )
    return pd.DataFrame(out)


def shifts(opt: pd.DataFrame) -> dict[str, int]:
    """Grid steps between the smallest and largest optimum index across depths."""
    return {p: int(g["index"].max() - g["index"].min()) for p, g in opt.groupby("parametrization")}


def figure(df: pd.DataFrame, opt: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pars = [p for p in PARAMETRIZATIONS if p in set(df["parametrization"])]
    fig, axes = plt.subplots(1, len(pars), figsize=(4.6 * len(pars), 3.8), sharey=True, squeeze=False)
    colors = plt.cm.viridis(np.linspace(0, 0.85, df["depth"].nunique()))
    finite = df["val_loss"][np.isfinite(df["val_loss"])]
    for ax, par in zip(axes[0], pars):
        for c, (depth, g) in zip(colors, df[df["parametrization"] == par].groupby("depth")):
            m = g.groupby("lr")["val_loss"].agg(["mean", "min", "max"])
            ax.plot(m.index, m["mean"], marker="o", color=c, label=f"depth {depth}")
            ax.fill_between(m.index, m["min"], m["max"], color=c, alpha=0.15)
            o = opt[(opt["parametrization"] == par) & (opt["depth"] == depth)].iloc[0]
            ax.plot([o["best_lr"]], [o["best_loss"]], marker="*", ms=14, color=c, mec="k")
        ax.set(xscale="log", xlabel="learning rate", title=par)
        ax.grid(alpha=0.3)
    lo, hi = float(finite.min()), float(np.quantile(finite, 0.9))
    axes[0][0].set(ylabel="final validation loss (nats/token)", ylim=(lo - 0.02, hi + 0.05))
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(
        f"Width {WIDTH}: loss vs learning rate per depth (★ = seed-mean optimum; band = seed range)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def page(df: pd.DataFrame, opt: pd.DataFrame, args, fig_name: str, wall_min: float, load: str) -> str:
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("Model name")), "?")
    sh = shifts(opt)
    lines = [
        "# Learning-rate transfer across depth: standard, μP, CompleteP",
        "",
        f"- machine: {cpu}, {os.cpu_count()} cores shared with other jobs ({load}); "
        f"{args.workers} worker processes of 1 torch thread",
        f"- date: {datetime.date.today().isoformat()}; wall {wall_min:.0f} min for the runs "
        "this invocation trained",
        f"- command: `nice python bench/transfer.py --workers {args.workers} --steps {args.steps} "
        f"--seeds {args.seeds}`",
        f"- model: width {WIDTH}, {HEADS} heads, seq_len {args.seq_len}; μP/CompleteP base width "
        f"{BASE_WIDTH} (so μP differs from standard only in the 1/d_head attention scale), "
        f"CompleteP base depth {BASE_DEPTH}, α = 1",
        f"- training: {args.steps} steps × batch {args.batch} (AdamW, 10% warmup, cosine), "
        f"{args.seeds} seeds, synthetic PCFG default data; loss = final validation loss",
        f"- grid: lr ∈ {{{', '.join(f'{lr:.2g}' for lr in sorted(df['lr'].unique()))}}} "
        "(half a decade apart)",
        "",
        f"![loss vs learning rate per depth]({fig_name})",
        "",
        "Optimum per depth (seed mean; ★ in the figure; `edge` = at the end of the grid, so the "
        "true optimum may lie outside it; refined = vertex of a parabola in log10 lr through "
        "the best point and its neighbours):",
        "",
        "| parametrization | "
        + " | ".join(f"depth {d}" for d in sorted(opt["depth"].unique()))
        + " | shift (grid steps) |",
        "|---|" + "---:|" * (opt["depth"].nunique() + 1),
    ]
    for par in PARAMETRIZATIONS:
        o = opt[opt["parametrization"] == par].sort_values("depth")
        if o.empty:
            continue
        cells = [
            f"{r.best_lr:.2g}{' (edge)' if r.at_edge else ''} · {r.best_loss:.3f} · "
            f"10^{r.refined_log10_lr:.2f}"
            for r in o.itertuples()
        ]
        lines.append(f"| {par} | " + " | ".join(cells) + f" | {sh[par]} |")
    cp = sh.get("completep")
    verdict = "met" if cp is not None and cp <= 1 else "not met"
    lines += [
        "",
        f"Target: the CompleteP optimum moves by at most one grid step across depths 2–16: "
        f"**{verdict}** (shift {cp}). Standard: {sh.get('standard')} steps; μP: {sh.get('mup')} steps.",
        "",
        "Diverged runs: "
        + (
            ", ".join(
                f"{r.parametrization} depth {r.depth} lr {r.lr:.2g} seed {r.seed}"
                for r in df[df["status"] != "ok"].itertuples()
            )
            or "none"
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="seconds: tiny runs; prints, writes nothing")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", default=None, help="folder for transfer.md/.png/.csv (default docs/bench)")
    args = ap.parse_args()
    depths, lrs = DEPTHS, LRS
    if args.smoke:  # the whole flow on tiny runs, in a folder that is removed: writes nothing
        args.steps, args.seeds, args.seq_len, args.batch = 4, 1, 16, 4
        depths, lrs = (2, 4), LRS[1:4]
        scratch = tempfile.TemporaryDirectory(prefix="depthwidth-transfer-smoke-")
        out = Path(scratch.name)
    else:
        out = Path(args.out or "docs/bench")
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "transfer.csv"
    t0 = time.perf_counter()
    df = run_all(csv, args.seeds, args.steps, args.batch, args.seq_len, args.workers, depths, lrs)
    wall = (time.perf_counter() - t0) / 60
    load = "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg()) + " at the end"
    opt = optima(df)
    figure(df, opt, out / "transfer.png")
    text = page(df, opt, args, "transfer.png", wall, load)
    (out / "transfer.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
