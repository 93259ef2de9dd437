"""The `depthwidth theory` and `depthwidth seprank` commands: parse, validate, call, print.

theory: L_th = log_3(d_x), regimes and optimal shapes (Levine et al. 2020, docs/science.md §1).
seprank: exact separation ranks of small linear-attention networks (docs/science.md §5); the cells
are planned in depthwidth/seprank_plan.py and drawn by depthwidth/seprank_plot.py. Bad input: one
sentence on stderr, exit code 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
from math import exp, isfinite, log
from pathlib import Path

from depthwidth import theory
from depthwidth.clitools import check_output_folder
from depthwidth.clitools import fail as _fail

# Every range is bounded before any value is built: '1..1000000000' would otherwise fill memory
# with a list, and a table of 10^8 rows would print for hours.
MAX_VALUES = 10_000
THEORY_MAX_DEPTH = 10_000  # Levine et al.'s fit covers depths 6..48; beyond this no model exists
THEORY_MAX_WIDTH = 10**12  # N at L_th stays far inside the float range
SEPRANK_MAX_WIDTH = 1_024  # ranks of wider cells need grids no machine can rank


def parse_range(
    name: str, text: str, low: int = 1, high: int | None = None, max_values: int = MAX_VALUES
) -> list[int]:
    """'3', '1..4' or '1,2,4' -> sorted distinct ints in [low, high], at most `max_values` of
    them, checked before the list is built; ValueError names the flag and the limit."""
    try:
        if ".." in text:
            a, b = (int(v) for v in text.split(".."))
            if a > b:
                raise ValueError
            ends = [a, b]
        else:
            ends = sorted({int(v) for v in text.split(",")})
    except ValueError:
        raise ValueError(
            f"--{name} {text!r} is invalid: expected an integer, a range a..b with a <= b, or a comma list."
        ) from None
    for v in ends:
        if v < low or (high is not None and v > high):
            top = f" and <= {high:,}" if high is not None else ""
            raise ValueError(f"--{name} {v} is invalid: must be >= {low}{top}.")
    count = ends[-1] - ends[0] + 1 if ".." in text else len(ends)
    if count > max_values:
        raise ValueError(
            f"--{name} {text!r} is invalid: it names {count:,} values, more than the limit of {max_values:,}."
        )
    return list(range(ends[0], ends[-1] + 1)) if ".." in text else ends


def register(subparsers: argparse._SubParsersAction) -> None:
    t = subparsers.add_parser(
        "theory",
        help="L_th = log_3(width), regimes and optimal shapes (Levine et al. 2020)",
        description="Where a shape sits relative to Levine et al.'s depth threshold L_th = log_3(d_x).",
    )
    t.add_argument("--width", type=int, help="model width d_x")
    t.add_argument("--depth", type=int, help="model depth L: report its regime")
    t.add_argument("--params", type=float, help="non-embedding parameter budget N = 12 L d^2")
    t.add_argument("--widths", default=None, help="widths of the table (default 16,32,...,16384)")
    t.add_argument("--depths", default=None, help="depths of the crossover table (default 1..12,16,24,32,48)")
    t.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    t.set_defaults(func=cmd_theory)

    s = subparsers.add_parser(
        "seprank",
        help="exact separation rank of small linear-attention networks",
        description="Measure the separation rank of bidirectional linear-attention networks "
        "exactly over a prime field (grid matrix rank), next to the monomial bound.",
    )
    s.add_argument("--depth", default="1..4", help="depth, range a..b or list (default 1..4)")
    s.add_argument("--width", default="2..8", help="width, range a..b or list (default 2..8)")
    s.add_argument("--tokens", type=int, default=2, help="sequence length T (default 2)")
    s.add_argument("--heads", type=int, default=1, help="attention heads (default 1)")
    s.add_argument("--residual", action="store_true", help="add the residual x_i to each layer")
    s.add_argument("--partition", default="halves", choices=("halves", "interleaved"))
    s.add_argument("--seed", type=int, default=0)
    s.add_argument(
        "--max-seconds",
        type=float,
        default=300.0,
        help="refuse cells whose estimated cost exceeds this (default 300)",
    )
    s.add_argument(
        "--max-gib",
        type=float,
        default=2.0,
        help="refuse cells whose estimated memory exceeds this (default 2)",
    )
    s.add_argument("--plot", action="store_true", help="also draw seprank.png")
    s.add_argument("--out", default="results/seprank", help="output folder (default results/seprank)")
    s.set_defaults(func=cmd_seprank)


# ------------------------------------------------------------------ theory ------------------


def _g(x: float) -> str:
    return f"{x:.4g}"


def _g10(log10_x: float) -> str:
    """A number given by its log10, written like _g even past the float range (1.2e+477)."""
    if log10_x < 300:
        return _g(10**log10_x)
    e = int(log10_x // 1)
    return f"{10 ** (log10_x - e):.4g}e+{e}"


def _finite(obj):
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return None if isinstance(obj, float) and not isfinite(obj) else obj


def cmd_theory(args: argparse.Namespace) -> int:
    try:
        if args.width is None and args.params is None:
            raise ValueError("--width and --params are both missing: give at least one.")
        for name in ("width", "depth", "params"):
            v = getattr(args, name)
            if v is not None and not (v > 0 and isfinite(v)):
                raise ValueError(f"--{name} {v} is invalid: must be a positive finite number.")
        for name, top in (("width", THEORY_MAX_WIDTH), ("depth", THEORY_MAX_DEPTH)):
            if getattr(args, name) is not None and getattr(args, name) > top:
                raise ValueError(f"--{name} {getattr(args, name)} is invalid: must be <= {top:,}.")
        widths = (
            parse_range("widths", args.widths, 1, THEORY_MAX_WIDTH)
            if args.widths
            else [2**k for k in range(4, 15)]
        )
        depths = (
            parse_range("depths", args.depths, 1, THEORY_MAX_DEPTH)
            if args.depths
            else list(range(1, 13)) + [16, 24, 32, 48]
        )
    except ValueError as exc:
        return _fail(str(exc))
    if args.width is not None:
        widths = sorted(set(widths) | {args.width})
    if args.depth is not None:
        depths = sorted(set(depths) | {args.depth})
    doc: dict = {}
    if args.width is not None:
        doc["width"] = dict(
            width=args.width,
            threshold_depth=theory.threshold_depth(args.width),
            levine_depth=theory.levine_depth_for_width(args.width),
        )
        if args.depth is not None:
            doc["width"].update(
                depth=args.depth,
                regime=theory.regime(args.depth, args.width),
                crossover_width=theory.crossover_width(args.depth),
                log10_crossover_width=theory.log_crossover_width(args.depth) / log(10),
            )
    if args.params is not None:
        doc["budget"] = dict(
            n_params=args.params,
            theory=theory.theory_optimal_shape(args.params).to_dict(),
            levine=theory.levine_optimal_shape(args.params).to_dict(),
        )
    doc["depth_table"] = theory.depth_table(depths)
    doc["width_table"] = theory.width_table(widths, args.depth)
    if args.json:  # numbers past the float range are null; their log10 columns hold them
        print(json.dumps(_finite(doc), indent=1, allow_nan=False))
        return 0
    _print_theory(doc, args)
    return 0


def _print_theory(doc: dict, args: argparse.Namespace) -> None:
    if "width" in doc:
        w = doc["width"]
        print(
            f"width d_x = {w['width']}: L_th = log_3({w['width']}) = {w['threshold_depth']:.3f}  "
            f"(Levine et al. 2020; their empirical fit puts this width at depth {w['levine_depth']:.1f})"
        )
        if "regime" in w:
            rel = {"depth-efficient": "<", "threshold": "=", "width-limited": ">"}[w["regime"]]
            print(
                f"depth {w['depth']}: {w['regime']} (L = {w['depth']} {rel} L_th); depth {w['depth']} "
                f"reaches its threshold at width 3^{w['depth']} = "
                f"{_g10(w['log10_crossover_width'])}"
            )
    if "budget" in doc:
        b, th, lv = doc["budget"], doc["budget"]["theory"], doc["budget"]["levine"]
        print(f"budget N = {_g(b['n_params'])} (N = 12 L d^2):")
        print(f"  theory optimum (L = log_3 d):            depth {th['depth']:.2f}, width {th['width']:.0f}")
        print(
            f"  Levine et al. empirical (d* = e^({theory.LEVINE_INTERCEPT} + {theory.LEVINE_SLOPE} L)): "
            f"depth {lv['depth']:.2f}, "
            f"width {lv['width']:.0f}"
        )
        print(
            f"  (empirical width grows e^{theory.LEVINE_SLOPE} = {exp(theory.LEVINE_SLOPE):.3f}x per layer, "
            f"the theory {theory.THEORY_BASE:g}x: same form, "
            "different constant)"
        )
    print("\ncrossover width per depth: theory d = 3^L vs Levine et al.'s d*(L)")
    print(f"{'depth':>6} {'3^L':>12} {'N at 3^L':>12} {'d*(L)':>10} {'N at d*':>12}  d*(L) from")
    for r in doc["depth_table"]:
        note = "extrapolation" if r["levine_extrapolated"] else "fit range 6..48"
        lev_w = f"{r['levine_width']:.0f}" if r["log10_levine_width"] < 10 else _g10(r["log10_levine_width"])
        print(
            f"{r['depth']:>6} {_g10(r['log10_crossover_width']):>12} "
            f"{_g10(r['log10_n_params_at_crossover']):>12} {lev_w:>10} "
            f"{_g10(r['log10_levine_n_params']):>12}  {note}"
        )
    print("\nper width: L_th = log_3 d, N = 12 L_th d^2 on the threshold, Levine et al.'s depth")
    head = f"{'width':>7} {'L_th':>7} {'N at L_th':>12} {'Levine L':>9}"
    print(head + (f"  regime at depth {args.depth}" if args.depth is not None else ""))
    for r in doc["width_table"]:
        lev = f"{r['levine_depth']:.1f}" if r["levine_depth"] > 0 else "-"
        print(
            f"{r['width']:>7} {r['threshold_depth']:>7.3f} {_g(r['n_params_at_threshold']):>12} "
            f"{lev:>9}" + (f"  {r['regime']}" if "regime" in r else "")
        )


# ------------------------------------------------------------------ seprank -----------------


# What each field of a measured cell's line means, printed once above them.
SEPRANK_LEGEND = """each cell's line:
  rank R (<= bound B, ln R vs ln B)  the separation rank measured, the monomial bound on it, and
                                     the natural logarithms of both
  3^L = D vs d = W: REGIME           the degree 3^depth against the width: depth-efficient below
                                     L_th = log_3 d (3^L < d), threshold at it, width-limited
                                     above it
  K k:r;k:r...                       each grid size K tried and the rank found at it; K grows {growth}x
                                     until the rank falls below K, so the last pair is the
                                     measurement (a WARNING says when it never did)
  then the seconds the cell took"""


def cmd_seprank(args: argparse.Namespace) -> int:
    from depthwidth import seprank
    from depthwidth.config import ConfigError
    from depthwidth.seprank_plan import plan_cells, write_csv

    try:
        depths = parse_range("depth", args.depth, 1, seprank.MAX_DEPTH)
        widths = parse_range("width", args.width, 1, SEPRANK_MAX_WIDTH)
        for name, low in (("tokens", 2), ("heads", 1), ("seed", 0)):
            if getattr(args, name) < low:
                raise ValueError(f"--{name} {getattr(args, name)} is invalid: must be >= {low}.")
        for name in ("max_seconds", "max_gib"):
            if not getattr(args, name) > 0:
                raise ValueError(
                    f"--{name.replace('_', '-')} {getattr(args, name)} is invalid: must be positive."
                )
        check_output_folder(args.out, "--out", ("seprank.csv", "seprank.png"))
    except ValueError as exc:  # OutputError is a ValueError
        return _fail(str(exc))
    try:
        plan = plan_cells(
            depths,
            widths,
            args.heads,
            args.tokens,
            args.residual,
            args.partition,
            args.max_seconds,
            args.max_gib,
            args.seed,
        )
    except ConfigError as exc:
        return _fail(str(exc))
    for line in plan.notes:
        print(line)
    rows = list(plan.refused)
    if not plan.cells:
        return _fail(
            "no cell of --depth/--width can run within the limits (see the notes "
            "above); nothing was run or written."
        )
    print(
        f"measuring {len(plan.cells)} cells (estimated <= {sum(e for _, e in plan.cells):.0f} s), "
        f"primes {seprank.P1} and {seprank.P2}"
    )
    print(SEPRANK_LEGEND.format(growth=seprank.GROWTH))
    for cell, est_s in plan.cells:
        r = seprank.measure(cell, seed=args.seed)
        rows.append({**r.to_dict(), "status": "ok", "est_seconds": est_s})
        warn = "" if r.primes_agree else f"  WARNING: second prime gave {r.rank_confirm}"
        warn += "" if r.saturated else f"  WARNING: rank reached K = {r.k_final} (a lower bound only)"
        print(
            f"depth {r.depth} width {r.width}: rank {r.rank} (<= bound {r.bound}, ln {r.log_rank:.2f} "
            f"vs {r.log_bound:.2f}); 3^L = {r.degree} vs d = {r.width}: {r.regime}; "
            f"K {r.k_trail}; {r.wall_s:.1f} s{warn}",
            flush=True,
        )
    rows.sort(key=lambda r: (r["depth"], r["width"]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "seprank.csv")
    print(f"wrote {out / 'seprank.csv'}")
    if args.plot:
        from depthwidth.seprank_plot import plot_seprank
        from runstore.files import atomic_file

        with atomic_file(out / "seprank.png") as fh:  # a reader never sees half a figure
            plot_seprank(rows).savefig(fh, format="png", dpi=150)
        print(f"wrote {out / 'seprank.png'}")
    return 0
