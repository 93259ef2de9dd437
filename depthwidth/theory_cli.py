"""The `depthwidth theory` and `depthwidth seprank` subcommands, the seprank CSV and figure.

theory: L_th = log_3(d_x), regimes and optimal shapes (Levine et al. 2020, SCIENCE.md §1).
seprank: exact separation ranks of small linear-attention networks (SCIENCE.md §5), with the
monomial bound and the L_th marker. Bad input: one sentence on stderr, exit code 2, nothing written.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from math import log
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

from depthwidth import theory  # noqa: E402

EXIT_BAD_INPUT = 2
CSV_COLUMNS = ("depth", "width", "heads", "tokens", "rank", "bound", "parity_bound", "log_rank",
               "log_bound", "degree", "threshold_depth", "regime", "residual", "partition",
               "rank_confirm", "primes_agree", "saturated", "k_final", "k_trail", "status",
               "est_seconds", "wall_s", "seed")


def _fail(message: str) -> int:
    print(f"depthwidth: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def parse_range(name: str, text: str, low: int = 1, high: int | None = None) -> list[int]:
    """'3', '1..4' or '1,2,4' -> sorted distinct ints in [low, high]; ValueError names the flag."""
    try:
        if ".." in text:
            a, b = (int(v) for v in text.split(".."))
            if a > b:
                raise ValueError
            values = list(range(a, b + 1))
        else:
            values = sorted({int(v) for v in text.split(",")})
    except ValueError:
        raise ValueError(f"--{name} {text!r} is invalid: expected an integer, a range a..b with "
                         f"a <= b, or a comma list.") from None
    for v in values:
        if v < low or (high is not None and v > high):
            top = f" and <= {high}" if high is not None else ""
            raise ValueError(f"--{name} {v} is invalid: must be >= {low}{top}.")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    t = subparsers.add_parser(
        "theory", help="L_th = log_3(width), regimes and optimal shapes (Levine et al. 2020)",
        description="Where a shape sits relative to Levine et al.'s depth threshold L_th = log_3(d_x).")
    t.add_argument("--width", type=int, help="model width d_x")
    t.add_argument("--depth", type=int, help="model depth L: report its regime")
    t.add_argument("--params", type=float, help="non-embedding parameter budget N = 12 L d^2")
    t.add_argument("--widths", default=None, help="widths of the table (default 16,32,...,16384)")
    t.add_argument("--depths", default=None, help="depths of the crossover table (default 1..12,16,24,32,48)")
    t.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    t.set_defaults(func=cmd_theory)

    s = subparsers.add_parser(
        "seprank", help="exact separation rank of small linear-attention networks",
        description="Measure the separation rank of bidirectional linear-attention networks "
                    "exactly over a prime field (grid matrix rank), next to the monomial bound.")
    s.add_argument("--depth", default="1..4", help="depth, range a..b or list (default 1..4)")
    s.add_argument("--width", default="2..8", help="width, range a..b or list (default 2..8)")
    s.add_argument("--tokens", type=int, default=2, help="sequence length T (default 2)")
    s.add_argument("--heads", type=int, default=1, help="attention heads (default 1)")
    s.add_argument("--residual", action="store_true", help="add the residual x_i to each layer")
    s.add_argument("--partition", default="halves", choices=("halves", "interleaved"))
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--max-seconds", type=float, default=300.0,
                   help="refuse cells whose estimated cost exceeds this (default 300)")
    s.add_argument("--max-gib", type=float, default=2.0,
                   help="refuse cells whose estimated memory exceeds this (default 2)")
    s.add_argument("--plot", action="store_true", help="also draw seprank.png")
    s.add_argument("--out", default="results/seprank", help="output folder (default results/seprank)")
    s.set_defaults(func=cmd_seprank)


# ------------------------------------------------------------------ theory ------------------

def _g(x: float) -> str:
    return f"{x:.4g}"


def cmd_theory(args: argparse.Namespace) -> int:
    try:
        if args.width is None and args.params is None:
            raise ValueError("--width and --params are both missing: give at least one.")
        for name in ("width", "depth", "params"):
            v = getattr(args, name)
            if v is not None and not v > 0:
                raise ValueError(f"--{name} {v} is invalid: must be positive.")
        widths = parse_range("widths", args.widths) if args.widths else \
            [2 ** k for k in range(4, 15)]
        depths = parse_range("depths", args.depths) if args.depths else \
            list(range(1, 13)) + [16, 24, 32, 48]
    except ValueError as exc:
        return _fail(str(exc))
    if args.width is not None:
        widths = sorted(set(widths) | {args.width})
    if args.depth is not None:
        depths = sorted(set(depths) | {args.depth})
    doc: dict = {}
    if args.width is not None:
        doc["width"] = dict(width=args.width, threshold_depth=theory.threshold_depth(args.width),
                            levine_depth=theory.levine_depth_for_width(args.width))
        if args.depth is not None:
            doc["width"].update(depth=args.depth, regime=theory.regime(args.depth, args.width),
                                crossover_width=theory.crossover_width(args.depth))
    if args.params is not None:
        doc["budget"] = dict(n_params=args.params,
                             theory=theory.theory_optimal_shape(args.params).to_dict(),
                             levine=theory.levine_optimal_shape(args.params).to_dict())
    doc["depth_table"] = theory.depth_table(depths)
    doc["width_table"] = theory.width_table(widths, args.depth)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    _print_theory(doc, args)
    return 0


def _print_theory(doc: dict, args: argparse.Namespace) -> None:
    if "width" in doc:
        w = doc["width"]
        print(f"width d_x = {w['width']}: L_th = log_3({w['width']}) = {w['threshold_depth']:.3f}  "
              f"(Levine et al. 2020; their empirical fit puts this width at depth {w['levine_depth']:.1f})")
        if "regime" in w:
            rel = {"depth-efficient": "<", "threshold": "=", "width-limited": ">"}[w["regime"]]
            print(f"depth {w['depth']}: {w['regime']} (L = {w['depth']} {rel} L_th); depth {w['depth']} "
                  f"reaches its threshold at width 3^{w['depth']} = {_g(w['crossover_width'])}")
    if "budget" in doc:
        b, th, lv = doc["budget"], doc["budget"]["theory"], doc["budget"]["levine"]
        print(f"budget N = {_g(b['n_params'])} (N = 12 L d^2):")
        print(f"  theory optimum (L = log_3 d):            depth {th['depth']:.2f}, width {th['width']:.0f}")
        print(f"  Levine et al. empirical (d* = e^(5.039 + 0.0555 L)): depth {lv['depth']:.2f}, "
              f"width {lv['width']:.0f}")
        print("  (empirical width grows e^0.0555 = 1.057x per layer, the theory 3x: same form, "
              "different constant)")
    print("\ncrossover width per depth: theory d = 3^L vs Levine et al.'s d*(L)")
    print(f"{'depth':>6} {'3^L':>12} {'N at 3^L':>12} {'d*(L)':>10} {'N at d*':>12}  d*(L) from")
    for r in doc["depth_table"]:
        note = "extrapolation" if r["levine_extrapolated"] else "fit range 6..48"
        print(f"{r['depth']:>6} {_g(r['crossover_width']):>12} {_g(r['n_params_at_crossover']):>12} "
              f"{r['levine_width']:>10.0f} {_g(r['levine_n_params']):>12}  {note}")
    print("\nper width: L_th = log_3 d, N = 12 L_th d^2 on the threshold, Levine et al.'s depth")
    head = f"{'width':>7} {'L_th':>7} {'N at L_th':>12} {'Levine L':>9}"
    print(head + (f"  regime at depth {args.depth}" if args.depth is not None else ""))
    for r in doc["width_table"]:
        lev = f"{r['levine_depth']:.1f}" if r["levine_depth"] > 0 else "-"
        print(f"{r['width']:>7} {r['threshold_depth']:>7.3f} {_g(r['n_params_at_threshold']):>12} "
              f"{lev:>9}" + (f"  {r['regime']}" if "regime" in r else ""))


# ------------------------------------------------------------------ seprank -----------------

def cmd_seprank(args: argparse.Namespace) -> int:
    from depthwidth import seprank
    from depthwidth.config import ConfigError

    try:
        depths = parse_range("depth", args.depth, 1, seprank.MAX_DEPTH)
        widths = parse_range("width", args.width, 1)
        for name, low in (("tokens", 2), ("heads", 1), ("seed", 0)):
            if getattr(args, name) < low:
                raise ValueError(f"--{name} {getattr(args, name)} is invalid: must be >= {low}.")
        for name in ("max_seconds", "max_gib"):
            if not getattr(args, name) > 0:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(args, name)} is invalid: "
                                 f"must be positive.")
        if Path(args.out).exists() and not Path(args.out).is_dir():
            raise ValueError(f"--out {args.out!r} is invalid: it is a file, not a folder.")
    except ValueError as exc:
        return _fail(str(exc))
    plan, rows = [], []
    for L in depths:
        for d in widths:
            if d % args.heads:
                print(f"skip depth {L} width {d}: width not divisible by --heads {args.heads}")
                continue
            try:
                cell = seprank.Cell(L, d, args.heads, args.tokens, args.residual, args.partition)
            except ConfigError as exc:
                return _fail(str(exc))
            bound = seprank.degree_parity_bound(cell)
            ks = seprank.k_schedule(bound)
            est_s, est_b = seprank.estimate_cost(cell, ks)
            if est_s > args.max_seconds or est_b > args.max_gib * 2 ** 30:
                print(f"skip depth {L} width {d}: rank up to {bound} needs a {ks[-1]} x {ks[-1]} grid, "
                      f"estimated {est_s:.3g} s and {est_b / 2 ** 30:.3g} GiB (limits --max-seconds "
                      f"{args.max_seconds:g}, --max-gib {args.max_gib:g})")
                rows.append(_refused_row(cell, bound, est_s, args.seed))
            else:
                plan.append((cell, est_s))
    if not plan:
        return _fail("no cell of --depth/--width can run within the limits (see the notes "
                     "above); nothing was run or written.")
    print(f"measuring {len(plan)} cells (estimated <= {sum(e for _, e in plan):.0f} s), "
          f"primes {seprank.P1} and {seprank.P2}")
    for cell, est_s in plan:
        r = seprank.measure(cell, seed=args.seed)
        rows.append({**r.to_dict(), "status": "ok", "est_seconds": est_s})
        warn = "" if r.primes_agree else f"  WARNING: second prime gave {r.rank_confirm}"
        warn += "" if r.saturated else f"  WARNING: rank reached K = {r.k_final} (a lower bound only)"
        print(f"depth {r.depth} width {r.width}: rank {r.rank} (<= bound {r.bound}, ln {r.log_rank:.2f} "
              f"vs {r.log_bound:.2f}); 3^L = {r.degree} vs d = {r.width}: {r.regime}; "
              f"K {r.k_trail}; {r.wall_s:.1f} s{warn}", flush=True)
    rows.sort(key=lambda r: (r["depth"], r["width"]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "seprank.csv")
    print(f"wrote {out / 'seprank.csv'}")
    if args.plot:
        plot_seprank(rows).savefig(out / "seprank.png", dpi=150)
        print(f"wrote {out / 'seprank.png'}")
    return 0


def _refused_row(cell, parity: int, est_s: float, seed: int) -> dict:
    from depthwidth import seprank

    n = min(map(len, cell.sides)) * cell.width
    return dict(depth=cell.depth, width=cell.width, heads=cell.heads, tokens=cell.tokens,
                bound=seprank.cell_monomial_bound(cell), parity_bound=parity,
                log_bound=theory.log_monomial_bound(n, cell.degree), degree=cell.degree,
                threshold_depth=theory.threshold_depth(cell.width),
                regime=theory.regime(cell.depth, cell.width), residual=cell.residual,
                partition=cell.partition, status="refused", est_seconds=est_s, seed=seed)


def write_csv(rows: list[dict], path: Path) -> None:
    """One row per cell; refused cells keep their bounds and estimated cost, rank left empty."""
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in CSV_COLUMNS})
    tmp.replace(path)


def plot_seprank(rows: list[dict]) -> Figure:
    """Left: measured rank vs depth per width (solid), the monomial bound (dashed), L_th (▲).
    Right: ln rank(L) / ln rank(L-1) against L - L_th: 3 while each layer cubes the rank
    (double-exponential regime), falling towards 1 past the threshold."""
    fig = Figure(figsize=(12, 4.8))
    ax, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    widths = sorted({r["width"] for r in rows})
    cmap = matplotlib.colormaps["viridis"]
    for n, d in enumerate(widths):
        color = cmap(n / max(1, len(widths) - 1) * 0.9)
        mine = sorted((r for r in rows if r["width"] == d), key=lambda r: r["depth"])
        ax.plot([r["depth"] for r in mine], [float(r["bound"]) for r in mine], "--", color=color,
                lw=1, alpha=0.7)
        ok = [r for r in mine if r["status"] == "ok"]
        ax.plot([r["depth"] for r in ok], [r["rank"] for r in ok], "o-", color=color, lw=1.8,
                label=f"d = {d}")
        ax.plot([theory.threshold_depth(d)], [0.0], "^", color=color, ms=9, clip_on=False,
                transform=ax.get_xaxis_transform())  # x in data, y at the bottom of the axes
        steps = [(b["depth"] - theory.threshold_depth(d), log(b["rank"]) / log(a["rank"]))
                 for a, b in zip(ok, ok[1:]) if b["depth"] == a["depth"] + 1 and a["rank"] > 1]
        if steps:
            ax2.plot(*zip(*steps), "o-", color=color, label=f"d = {d}")
    ax.set_yscale("log")
    ax.set_xlabel("depth L")
    ax.set_ylabel("separation rank (exact, over GF(p))")
    ax.set_xticks(sorted({r["depth"] for r in rows}))
    ax.set_xlim(min(0.5, min(theory.threshold_depth(d) for d in widths) - 0.2),
                max(r["depth"] for r in rows) + 0.3)
    r0 = rows[0]
    ax.set_title(f"T = {r0['tokens']} tokens, {r0['heads']} head(s)"
                 f"{', residual' if r0['residual'] else ''}: measured rank (solid) vs "
                 f"C(|P|d + 3^L, 3^L) (dashed)\n▲ marks L_th = log_3 d for each width d", fontsize=9)
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    ax.grid(True, which="major", alpha=0.3)
    ax2.axhline(3.0, color="0.4", ls=":", lw=1)
    ax2.axhline(1.0, color="0.4", ls=":", lw=1)
    ax2.axvline(0.0, color="0.4", lw=0.8)
    ax2.set_xlabel("L - L_th  (depth past the threshold; the step L-1 -> L)")
    ax2.set_ylabel("ln rank(L) / ln rank(L-1)")
    ax2.set_ylim(0.8, 3.3)
    ax2.set_title("growth per added layer: 3 = rank cubed (double-exponential),\n"
                  "towards 1 = saturated (exponential in L and d)", fontsize=9)
    ax2.grid(True, alpha=0.3)
    if ax2.lines[3:]:
        ax2.legend(fontsize=8, ncol=2, loc="lower left")
    fig.tight_layout()
    return fig
