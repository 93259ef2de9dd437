"""Adaptive sweeps against the full grid, on planted losses: for each effect (b = 2.2, 3, 4.5 under
the two-regime law of docs/science.md §4, and a null where loss depends on N alone) and each
replicate, the grid's b interval and the adaptive searcher's (sweeps/designing/adaptive.Policy, driven
directly without Ray on the same planted losses; its Ray path is tested in tests/test_adaptive.py).
Run by hand:  python bench/design.py [--replicates 20] [--out docs/bench/design.md], or one process
per effect (--effects 3.0 --out part.md) and then --merge part_*.csv.
`--smoke` runs the whole flow on 2 replicates of one effect and a small grid, writing nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.fitting import synthetic  # noqa: E402
from sweeps.designing.adaptive import Adaptive, Policy, estimate, spec_cells  # noqa: E402
from sweeps.plans.spec import parse_spec  # noqa: E402

SPEC = """name = "design-bench"
[model]
heads = 2
seq_len = 64
[data]
vocab_size = 64
[train]
batch_size = 16
[grid]
depth = {depths}
width = {widths}
seed = [0, 1]
[budget]
steps = 1000
"""
FULL = ([1, 2, 3, 4, 5, 6, 8, 10], [16, 32, 64, 128, 256, 512])
SMALL = ([1, 2, 3, 4, 6], [16, 64, 256])
LAW = {"E": 1.5, "A_kappa": 20.0, "alpha_kappa": 0.3}
NULL = {"E": 1.5, "A_N": 30.0, "alpha_N": 0.3}  # Kaplan's shape-agnostic law: depth and width trade evenly
NOISE = 0.02  # seed-to-seed spread of the final loss, relative
CAP = 0.6  # the adaptive budget, as a fraction of the full grid's compute


def planted(effect: str, depths, widths, rep: int) -> pd.DataFrame:
    if effect == "null":
        return synthetic.make_runs("kaplan", depths, widths, NULL, seeds=(0, 1), noise=NOISE, seed=rep)
    return synthetic.make_runs(
        "two_regime",
        depths,
        widths,
        {**LAW, "b": float(effect)},
        seeds=(0, 1),
        noise=NOISE,
        seed=1000 * rep + int(10 * float(effect)),
    )


def covers(est, b: float) -> bool | None:
    return None if not est.claimed else bool(est.ci[0] <= b <= est.ci[1])


def adaptive_run(cells, runs: pd.DataFrame, cfg: Adaptive) -> dict:
    """The policy's rounds on one replicate's planted losses: the losses of a cell are revealed
    when it is chosen."""
    policy, done, rounds = Policy(cells, cfg), set(), 0
    key = list(zip(runs["depth"], runs["width"], runs["seed"]))
    while True:
        seen = runs[[k in done for k in key]]
        d = policy.decide(seen, done)
        rounds += 1
        if d.stop:
            break
        done |= {c.key for c, _ in d.picks}
    est = d.estimate if d.estimate.status != "initial" else estimate(seen, cfg.bootstrap, cfg.seed)
    n, flops = policy.spent(done)
    return {"est": est, "flops": flops, "trials": n, "rounds": rounds, "stop": d.stop}


def run(
    effects, depths, widths, reps: int, n_boot: int, batch: int, start: int = 0, target: float | None = None
) -> pd.DataFrame:
    """`start`: the first replicate's number (replicates are numbered, so runs split over
    processes draw what one run would); `target`: the adaptive target, instead of the grid's."""
    spec = parse_spec(SPEC.format(depths=depths, widths=widths), "design-bench")
    cells = spec_cells(spec)
    grid_flops = sum(c.cost for c in cells)
    rows, grid = [], {}
    # the grid first: its median width is the adaptive target (the null is held to b = 3's)
    extra = ["3.0"] if "null" in effects and "3.0" not in effects and target is None else []
    for effect in effects + extra:
        for r in range(start, start + reps):
            runs = planted(effect, depths, widths, r)
            est = estimate(runs, n_boot, r)
            grid[(effect, r)] = runs
            rows.append(_row(effect, r, "grid", est, grid_flops, grid_flops, len(runs), 1, "all"))
    df = pd.DataFrame(rows)
    rows = [row for row in rows if row["effect"] in effects]
    widths_ok = df[(df["design"] == "grid") & df["claimed"]]
    for effect in effects:
        ref = "3.0" if effect == "null" else effect  # the null is held to b = 3's target
        w = widths_ok.loc[widths_ok["effect"] == ref, "width"]
        goal = target if target is not None else float(w.median()) if len(w) else 0.5
        # a replicate still short of the target at CAP of the grid's compute counts as a miss; the
        # null has no width to reach and runs until half the grid's compute is spent
        budget = grid_flops * (0.5 if effect == "null" else CAP)
        cfg = Adaptive(target_width=goal, max_compute=budget, batch=batch, bootstrap=n_boot)
        for r in range(start, start + reps):
            t0 = time.perf_counter()
            out = adaptive_run(cells, grid[(effect, r)], cfg)
            rows.append(
                _row(
                    effect,
                    r,
                    "adaptive",
                    out["est"],
                    out["flops"],
                    grid_flops,
                    out["trials"],
                    out["rounds"],
                    out["stop"],
                    goal,
                    time.perf_counter() - t0,
                )
            )
            print(
                f"{effect} rep {r}: {rows[-1]['compute_fraction']:.2f} of the grid, "
                f"width {rows[-1]['width']:.3g} (target {goal:.3g}), {out['stop'][:40]}",
                flush=True,
            )
    return pd.DataFrame(rows)


def merge(parts: list[str]) -> pd.DataFrame:
    """The rows of several runs over disjoint effects (e.g. one process per effect)."""
    df = pd.concat([pd.read_csv(p, dtype={"effect": str}) for p in parts], ignore_index=True)
    df["effect"] = df["effect"].fillna("null")  # pandas reads the word null as missing
    df["effect"] = [e if e == "null" else f"{float(e):.1f}" for e in df["effect"]]
    return df.replace({"covers": {"True": True, "False": False}})


def _row(effect, r, design, est, flops, grid_flops, trials, rounds, stop, target=math.nan, secs=0.0):
    truth = math.nan if effect == "null" else float(effect)
    return {
        "effect": effect,
        "replicate": r,
        "design": design,
        "claimed": bool(est.claimed),
        "base": est.base,
        "lo": (est.ci or [None, None])[0],
        "hi": (est.ci or [None, None])[1],
        "width": est.width if est.claimed else math.inf,
        "covers": covers(est, truth) if effect != "null" else None,
        "compute_fraction": flops / grid_flops,
        "trials": trials,
        "rounds": rounds,
        "stop": stop.split(":")[0],
        "target": target,
        "seconds": secs,
    }


def summary(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (effect, design), g in df.groupby(["effect", "design"], sort=False):
        claimed = g[g["claimed"]]
        cov = claimed["covers"].dropna()
        reached = g["width"] <= g["target"] if design == "adaptive" else pd.Series(dtype=bool)
        out.append(
            {
                "effect": effect,
                "design": design,
                "replicates": len(g),
                "claims": f"{len(claimed)}/{len(g)}",
                "coverage": f"{cov.mean():.2f} ({int(cov.sum())}/{len(cov)})" if len(cov) else "—",
                "median width": f"{np.median(g['width']):.3g}",
                "median compute": f"{np.median(g['compute_fraction']):.2f}",
                "reached target": (f"{int(reached.sum())}/{len(g)}" if design == "adaptive" else "—"),
                "reached within 50%": (
                    f"{int((reached & (g['compute_fraction'] <= 0.5)).sum())}/{len(g)}"
                    if design == "adaptive"
                    else "—"
                ),
                "median compute to reach target": _reach(g, reached) if design == "adaptive" else "—",
                "median trials": f"{np.median(g['trials']):.0f}",
            }
        )
    return pd.DataFrame(out)


def markdown(table: pd.DataFrame) -> str:
    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return "\n".join(lines + ["| " + " | ".join(str(v) for v in row) + " |" for row in table.values])


def _reach(g: pd.DataFrame, reached: pd.Series) -> str:
    """Median over replicates of the compute at which the target was reached, a miss counting as
    more than the budget."""
    m = float(np.median(np.where(reached, g["compute_fraction"], np.inf)))
    return f"{m:.2f}" if math.isfinite(m) else f"> {g['compute_fraction'].max():.2f} (not reached)"


def figure(df: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    effects = [e for e in df["effect"].unique() if e != "null"]
    fig, axes = plt.subplots(1, len(effects), figsize=(4 * len(effects), 3.4), squeeze=False)
    for ax, effect in zip(axes[0], effects):
        g = df[df["effect"] == effect]
        grid = g[g["design"] == "grid"]
        ada = g[g["design"] == "adaptive"]
        finite = lambda s: s.replace(np.inf, np.nan)
        ax.scatter(ada["compute_fraction"], finite(ada["width"]), s=14, label="adaptive (each replicate)")
        ax.scatter(np.ones(len(grid)), finite(grid["width"]), s=14, marker="x", label="full grid")
        ax.axhline(ada["target"].iloc[0], color="grey", lw=0.8, ls="--", label="grid median width")
        ax.axvline(0.5, color="red", lw=0.8, ls=":", label="50% of the grid's compute")
        ax.set(
            title=f"planted b = {effect}",
            xlabel="compute / full grid",
            xlim=(0, 1.05),
            ylabel="width of b's 95% interval",
        )
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--bootstrap", type=int, default=60)
    ap.add_argument("--batch", type=int, default=8, help="cells chosen per refit")
    ap.add_argument("--effects", default="2.2,3.0,4.5,null")
    ap.add_argument("--replicate-start", type=int, default=0)
    ap.add_argument("--target", type=float, help="the adaptive target width (default: the grid's median)")
    ap.add_argument("--out", default="docs/bench/design.md")
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="CSV",
        help="summarise the CSVs of earlier runs (one per effect) instead of running",
    )
    ap.add_argument(
        "--smoke", action="store_true", help="2 replicates of b = 3 on a 5 x 3 grid; writes nothing"
    )
    args = ap.parse_args(argv)
    t0 = time.time()
    if args.smoke:
        df = run(["3.0"], *SMALL, reps=2, n_boot=30, batch=args.batch)
    elif args.merge:
        df = merge(args.merge)
    else:
        df = run(
            args.effects.split(","),
            *FULL,
            reps=args.replicates,
            n_boot=args.bootstrap,
            batch=args.batch,
            start=args.replicate_start,
            target=args.target,
        )
    table = summary(df)
    print(markdown(table))
    print(f"adaptive vs grid done in {time.time() - t0:.0f} s")
    if args.smoke:
        return 0
    out = Path(args.out)
    df.to_csv(out.with_suffix(".csv"), index=False)
    if len([e for e in df["effect"].unique() if e != "null"]):
        figure(df, out.with_suffix(".png"))
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "seconds": round(time.time() - t0),
        "load": os.getloadavg(),
    }
    if args.merge:  # the time is that of the runs merged, not of this step
        meta = {**meta, "seconds": None, "merged": [Path(p).name for p in args.merge]}
    record = {"meta": meta, "summary": table.to_dict("records")}
    out.with_suffix(".json").write_text(json.dumps(record, indent=1))
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
