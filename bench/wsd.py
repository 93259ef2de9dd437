"""Warmup-stable-decay against cosine (docs/bench/wsd.md): a cooldown branch against the cosine run
trained for its budget alone, the WSD halving rung against the full learning-rate grid, and what
each plan costs.

    depthwidth sweep run bench/wsd/wsd.toml --no-analyze      # one WSD run per shape, lr, seed
    depthwidth sweep run bench/wsd/cosine.toml --no-analyze   # every budget its own cosine run
    python bench/wsd.py --wsd results/bench-wsd-branches --cosine results/bench-wsd-cosine \
        [--study docs/studies/data/threshold-cpu-wsd.csv] --out docs/bench/wsd

Each shape is compared at its best learning rate for each schedule (the rate with the lowest mean
final validation loss over the seeds, per budget): the difference WSD − cosine per shape, budget
and seed, its median with a bootstrap interval over those cells, beside the seed-to-seed SD of the
cosine losses. With --study (the WSD study's table, every rate trained in full), the rung a WSD
halving judges each group on (the complete run of a third of the budget: a cooldown branch at the
rung is that run, tests/test_wsd.py) is set against the grid's best at the full budget.
Writes `branch-vs-cosine.csv`, `branch-vs-cosine.png`, `rung-vs-grid.csv` and a markdown summary
on stdout.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPE = ["depth", "width"]


def finals(location: str) -> pd.DataFrame:
    """The runs of a store (or a runs table) that ended ok, one per shape, budget, lr and seed."""
    if Path(location).is_dir():
        from runstore.store import ResultStore

        runs = ResultStore(location).runs()
    else:
        runs = pd.read_parquet(location) if location.endswith(".parquet") else pd.read_csv(location)
    ok = runs[runs["status"] == "ok"]
    return ok[SHAPE + ["steps", "lr", "seed", "final_val_loss", "flops"] + _optional(ok)].copy()


def _optional(df: pd.DataFrame) -> list[str]:
    return [c for c in ("flops_spent", "branched_from") if c in df.columns]


def best_rate(runs: pd.DataFrame) -> pd.DataFrame:
    """Per shape and budget, the rows at the learning rate with the lowest mean loss over seeds."""
    mean = runs.groupby(SHAPE + ["steps", "lr"])["final_val_loss"].mean().reset_index()
    pick = mean.loc[mean.groupby(SHAPE + ["steps"])["final_val_loss"].idxmin(), SHAPE + ["steps", "lr"]]
    return runs.merge(pick, on=SHAPE + ["steps", "lr"])


def bootstrap_median(values: np.ndarray, n: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(values, size=(n, len(values)), replace=True), axis=1)
    return float(np.median(values)), float(np.quantile(meds, 0.025)), float(np.quantile(meds, 0.975))


def branch_vs_cosine(wsd: pd.DataFrame, cos: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """One row per shape, budget and seed: each schedule's loss at its own best rate."""
    w, c = best_rate(wsd), best_rate(cos)
    keys = SHAPE + ["steps", "seed"]
    cells = w[keys + ["lr", "final_val_loss"]].merge(
        c[keys + ["lr", "final_val_loss"]], on=keys, suffixes=("_wsd", "_cosine")
    )
    cells["diff"] = cells["final_val_loss_wsd"] - cells["final_val_loss_cosine"]
    sd = c.groupby(SHAPE + ["steps"])["final_val_loss"].std(ddof=1)
    med, lo, hi = bootstrap_median(cells["diff"].to_numpy())
    by_shape = {}
    for (d, wd), g in cells.groupby(SHAPE):
        by_shape[f"depth {d} x width {wd}"] = bootstrap_median(g["diff"].to_numpy(), seed=int(d * 1000 + wd))
    summary = {
        "cells": len(cells),
        "median": med,
        "lo": lo,
        "hi": hi,
        "seed_sd": float(sd.median()),
        "by_shape": by_shape,
        "by_budget": {int(s): float(g["diff"].median()) for s, g in cells.groupby("steps")},
        "lr_agree": float((cells["lr_wsd"] == cells["lr_cosine"]).mean()),
        "lr_wsd_lower": float((cells["lr_wsd"] < cells["lr_cosine"]).mean()),
    }
    return cells, summary


def rung_vs_grid(study: pd.DataFrame) -> pd.DataFrame:
    """Per group (shape, budget B in {300, 900}, seed): the rate a WSD halving with one rung at
    B/3 keeps (the lowest loss of the complete B/3 runs) against the grid's best at B."""
    rows = []
    for (d, wd, seed), g in study.groupby(SHAPE + ["seed"]):
        by = {int(s): gg.set_index("lr")["final_val_loss"] for s, gg in g.groupby("steps")}
        for budget, rung in ((300, 100), (900, 300)):
            if (
                budget not in by
                or rung not in by
                or len(by[budget]) < 2
                or set(by[rung].index) != set(by[budget].index)
            ):
                continue
            chosen, best = by[rung].idxmin(), by[budget].idxmin()
            rows.append(
                {
                    "depth": d,
                    "width": wd,
                    "seed": seed,
                    "steps": budget,
                    "chosen_lr": chosen,
                    "best_lr": best,
                    "chosen_loss": by[budget][chosen],
                    "best_loss": by[budget][best],
                }
            )
    out = pd.DataFrame(rows)
    if not out.empty:
        out["agree"] = out["chosen_lr"] == out["best_lr"]
        out["excess"] = out["chosen_loss"] - out["best_loss"]
    return out


def run_for_run(study: pd.DataFrame, cosine_table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The WSD study against the cosine study at the same shape, budget and seed: WSD at the best
    of its complete runs over the rates, cosine at the rate its halving chose (its finals, by
    analysis.readers.halving's rule). Returns the pairs and the median difference with its
    bootstrap interval, by budget, depth and width, beside the WSD seed SD."""
    from analysis.readers.halving import finals as halving_finals

    key = SHAPE + ["seed", "steps"]
    keep, _ = halving_finals(cosine_table)
    chosen = cosine_table[keep]  # one per group after a halving; without one, the best of the rates
    chosen = chosen.loc[chosen.groupby(key)["final_val_loss"].idxmin()]
    cos = chosen.set_index(key)[["final_val_loss", "lr"]].add_suffix("_cosine")
    ok = study[study["status"] == "ok"] if "status" in study.columns else study
    full = ok.groupby(key)["lr"].transform("nunique") == ok["lr"].nunique()  # every rate ran
    best = ok[full].loc[lambda d: d.groupby(key)["final_val_loss"].idxmin()].set_index(key)
    pairs = best[["final_val_loss", "lr"]].join(cos, how="inner")
    pairs["diff"] = pairs["final_val_loss"] - pairs["final_val_loss_cosine"]
    rates = {
        "same_rate": float((pairs["lr"] == pairs["lr_cosine"]).mean()),
        "wsd_higher": float((pairs["lr"] > pairs["lr_cosine"]).mean()),
        "wsd_lower": float((pairs["lr"] < pairs["lr_cosine"]).mean()),
    }
    med, lo, hi = bootstrap_median(pairs["diff"].to_numpy())
    sd = best.groupby(SHAPE + ["steps"])["final_val_loss"].std(ddof=1).median()
    by = {
        name: pairs.groupby(level=name)["diff"].median().round(3).to_dict()
        for name in ("steps", "depth", "width")
    }
    return pairs.reset_index(), {
        "n": len(pairs),
        "median": med,
        "lo": lo,
        "hi": hi,
        "seed_sd": float(sd),
        **by,
        **rates,
    }


def figure(cells: pd.DataFrame, wsd: pd.DataFrame, cos: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = sorted(cells.groupby(SHAPE).groups)
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.0))
    ax = axes[0]
    w, c = best_rate(wsd), best_rate(cos)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (d, wd) in enumerate(shapes):
        for runs, style, name in ((c, "-", "cosine, own run"), (w, "--", "WSD branch")):
            g = runs[(runs["depth"] == d) & (runs["width"] == wd)].groupby("steps")["final_val_loss"]
            ax.errorbar(
                g.mean().index,
                g.mean(),
                yerr=g.std(ddof=1),
                fmt="o" + style,
                color=colours[i % 10],
                ms=3,
                lw=1,
                capsize=2,
                label=f"d{d} w{wd}, {name}",
            )
    ax.set_xscale("log")
    ax.set_xlabel("token budget (steps of 16 x 64 tokens)")
    ax.set_ylabel("final val loss (nats), mean ± SD over seeds")
    ax.set_title("each schedule at its best learning rate", fontsize=9)
    ax.legend(fontsize=6, ncol=2, loc="upper right")
    ax = axes[1]
    for i, (d, wd) in enumerate(shapes):
        g = cells[(cells["depth"] == d) & (cells["width"] == wd)]
        x = i + (np.log(g["steps"]) - np.log(g["steps"]).mean()) * 0.15
        ax.scatter(x, g["diff"], s=14, color=colours[i % 10])
    sd = c.groupby(SHAPE + ["steps"])["final_val_loss"].std(ddof=1).median()  # at the best rate
    ax.axhspan(-sd, sd, color="0.9", label=f"± the cosine losses' seed SD (median {sd:.3f})")
    ax.axhline(0, color="0.4", lw=0.8)
    ax.set_xticks(range(len(shapes)), [f"d{d} w{wd}" for d, wd in shapes])
    ax.set_ylabel("WSD branch − cosine (nats)")
    ax.set_title("per budget (100, 300, 900 left to right) and seed", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def rung_figure(cmp: pd.DataFrame, path: Path, cosine_check: pd.DataFrame | None = None) -> None:
    """The learning rate each rung kept, against the grid's best: the loss given up per group at
    each budget, the WSD rung's beside the cosine halving's (docs/studies/halving_check.py's
    table) where its groups were checked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = sorted(cmp["steps"].unique())
    fig, axes = plt.subplots(1, len(budgets), figsize=(5.2 * len(budgets), 3.8), squeeze=False)
    for ax, steps in zip(axes[0], budgets):
        g = cmp[cmp["steps"] == steps].sort_values(["depth", "width", "seed"])
        x = np.arange(len(g))
        ax.scatter(x, g["excess"], s=16, color="C0", label=f"WSD rung (cooldown branch): {len(g)} groups")
        if cosine_check is not None:
            c = cosine_check[cosine_check["tokens"] // 1024 == steps]
            keyed = (
                g.reset_index(drop=True)
                .reset_index()
                .merge(c, on=["depth", "width", "seed"], suffixes=("", "_cos"))
            )
            if not keyed.empty:
                ax.scatter(
                    keyed["index"],
                    keyed["excess_cos"],
                    s=22,
                    marker="x",
                    color="C3",
                    label=f"cosine rung (mid-schedule): {len(keyed)} groups",
                )
        ax.axhline(0, color="0.4", lw=0.8)
        ax.set_title(
            f"{steps}-step budget, rung at {steps // 3} steps: mean given up {g['excess'].mean():.4f}",
            fontsize=9,
        )
        ax.set_xlabel("group (shape and seed, depth then width)")
        ax.set_ylabel("loss given up: kept rate's final − best rate's (nats)")
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def branch_text(s: dict, wsd: pd.DataFrame, cos: pd.DataFrame) -> str:
    lines = [
        f"- cells (shape x budget x seed): {s['cells']}; WSD branch − cosine at each schedule's best "
        f"rate: median {s['median']:+.4f} nats [95% {s['lo']:+.4f}, {s['hi']:+.4f}]; seed-to-seed "
        f"SD of the cosine losses: median {s['seed_sd']:.4f}",
        f"- the same best rate for both schedules in {s['lr_agree']:.0%} of cells; WSD's lower in "
        f"{s['lr_wsd_lower']:.0%}",
        "- by budget (median): " + ", ".join(f"{k} steps {v:+.4f}" for k, v in s["by_budget"].items()),
    ]
    for name, (m, lo, hi) in s["by_shape"].items():
        lines.append(f"- {name}: median {m:+.4f} [{lo:+.4f}, {hi:+.4f}]")
    if "flops_spent" in wsd.columns:
        lines.append(
            f"- compute trained: WSD {wsd['flops_spent'].sum():.3g} FLOPs against cosine "
            f"{cos['flops'].sum():.3g} ({wsd['flops_spent'].sum() / cos['flops'].sum():.0%})"
        )
    return "\n".join(lines)


def rung_text(cmp: pd.DataFrame) -> str:
    if cmp.empty:
        return "- no group of the study table has both its budget and its rung at every rate yet"
    sub = cmp[cmp["depth"].isin([1, 2]) & cmp["seed"].isin([0, 1])]
    lines = []
    for name, g in (("the cosine check's 32 groups (depth 1-2, seeds 0-1)", sub), ("every group", cmp)):
        if g.empty:
            continue
        lines.append(
            f"- {name}: {len(g)} groups; the rung kept the grid's best rate in {int(g['agree'].sum())} "
            f"({g['agree'].mean():.0%}); loss given up: mean {g['excess'].mean():.4f}, largest "
            f"{g['excess'].max():.4f}; chosen below the best: {int((g['chosen_lr'] < g['best_lr']).sum())}, "
            f"above: {int((g['chosen_lr'] > g['best_lr']).sum())}"
        )
        for steps, gg in g.groupby("steps"):
            lines.append(
                f"  - at {steps} steps: {int(gg['agree'].sum())} of {len(gg)} agree, mean given up "
                f"{gg['excess'].mean():.4f}"
            )
    return "\n".join(lines)


def planted(shift: float, best_lr: float, seed: int, noise: float = 0.002) -> pd.DataFrame:
    """A runs table with a known answer: loss falling with the budget, a parabola in log lr around
    `best_lr`, `shift` added, and `noise` nats of seed noise."""
    import itertools

    rng = np.random.default_rng(seed)
    rows = []
    for (d, w), steps, lr, s in itertools.product(
        [(1, 32), (4, 64)], [100, 300, 900], [1e-3, 3e-3, 1e-2], range(3)
    ):
        loss = 3.0 - 0.3 * np.log10(steps) + 0.05 * np.log(lr / best_lr) ** 2 + shift + noise * rng.normal()
        rows.append(
            dict(depth=d, width=w, steps=steps, lr=lr, seed=s, final_val_loss=loss, flops=steps * 1e9)
        )
    return pd.DataFrame(rows)


def smoke() -> int:
    """Both comparisons on planted tables (WSD 0.02 nats better, at a lower rate), writing nothing."""
    wsd, cos = planted(-0.02, 3e-3, 1), planted(0.0, 1e-2, 0)
    _, summary = branch_vs_cosine(wsd, cos)
    print(branch_text(summary, wsd, cos))
    print(rung_text(rung_vs_grid(cos)))
    print("smoke: planted difference -0.0200, measured", f"{summary['median']:+.4f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wsd", help="store (or runs table) of bench/wsd/wsd.toml")
    p.add_argument("--cosine", help="store (or runs table) of bench/wsd/cosine.toml")
    p.add_argument("--smoke", action="store_true", help="the comparisons on planted tables, writing nothing")
    p.add_argument("--study", help="the WSD study's runs table, every rate in full (rung against grid)")
    p.add_argument(
        "--study-cosine",
        help="with --study: the cosine study's runs table, compared run for run (shape, budget, seed)",
    )
    p.add_argument(
        "--cosine-check",
        default="docs/studies/figures/threshold-cpu/halving-vs-grid.csv",
        help="the cosine halving against its grid (docs/studies/halving_check.py), drawn beside the rung",
    )
    p.add_argument("--out", default="docs/bench/wsd", help="folder for the CSVs and the figures")
    args = p.parse_args(argv)
    if args.smoke:
        return smoke()
    if not (args.wsd and args.cosine):
        p.error("--wsd and --cosine are required (or --smoke)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wsd, cos = finals(args.wsd), finals(args.cosine)
    cells, summary = branch_vs_cosine(wsd, cos)
    cells.to_csv(out / "branch-vs-cosine.csv", index=False)
    figure(cells, wsd, cos, out / "branch-vs-cosine.png")
    print("## Branch against cosine\n")
    print(branch_text(summary, wsd, cos))
    if args.study:
        cmp = rung_vs_grid(finals(args.study))
        cmp.to_csv(out / "rung-vs-grid.csv", index=False)
        if args.study_cosine:
            pairs, r = run_for_run(pd.read_csv(args.study), pd.read_csv(args.study_cosine))
            pairs.to_csv(out / "study-vs-cosine.csv", index=False)
            print(
                f"\n## The WSD study against the cosine study, run for run\n\n- {r['n']} pairs: median "
                f"{r['median']:+.4f} [{r['lo']:+.4f}, {r['hi']:+.4f}], WSD seed SD {r['seed_sd']:.4f}\n"
                f"- by budget {r['steps']}\n- by depth {r['depth']}\n- by width {r['width']}\n"
                f"- the same rate in {r['same_rate']:.0%} of pairs; WSD's higher in {r['wsd_higher']:.0%}, "
                f"lower in {r['wsd_lower']:.0%}"
            )
        check = Path(args.cosine_check)
        rung_figure(cmp, out / "rung-vs-grid.png", pd.read_csv(check) if check.is_file() else None)
        print("\n## Rung against grid\n")
        print(rung_text(cmp))
    ok = math.isfinite(summary["median"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
