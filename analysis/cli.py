"""The analysis commands of `depthwidth`: analyze, plot, kaplan (docs/design.md, "Commands").

`register(subparsers)` adds them to the main parser; each handler returns the exit code, 2 for
bad input with one sentence on stderr and nothing written. The analysis itself (pandas, scipy,
matplotlib) is imported inside the handlers, so other commands do not pay for it.
"""

from __future__ import annotations

import argparse
import sys

from depthwidth.clitools import fail as _fail


def _check_counts(args) -> str | None:
    for flag in ("bootstrap", "seed"):
        if getattr(args, flag, 0) < 0:
            return f"--{flag} = {getattr(args, flag)} is invalid: it must be a non-negative integer."
    return None


def _progress(line: str) -> None:
    """One line per finished stage of a long analysis, on stderr (stdout holds the results)."""
    print(f"analyze: {line}", file=sys.stderr, flush=True)


def _analyze(args) -> int:
    from analysis.readers.inputs import InputError
    from analysis.reporting.markdown import verdict_line
    from analysis.reporting.output import terminate_cleanly
    from analysis.reporting.report import analyze
    from runstore.location import Location

    terminate_cleanly()
    if bad := _check_counts(args):
        return _fail(bad)
    try:
        no_tune = args.tune == ["none"]
        r = analyze(
            args.source,
            out_dir=args.out,
            bootstrap=args.bootstrap,
            seed=args.seed,
            tune=() if no_tune else tuple(args.tune or ()),
            selection=args.selection,
            no_tune=no_tune,
            progress=_progress,
            n=args.n,
        )
    except InputError as exc:
        return _fail(str(exc))
    print(r["answer"])  # the answer first, before any statistic (analysis/reporting/answer.py)
    if r.get("nothing_to_fit"):
        print(r["nothing_to_fit"][0].upper() + r["nothing_to_fit"][1:] + ".")
    t = r["tuning"]
    print(
        f"tuning axes: {', '.join(t['axes']) or 'none'}; selection: {t['rule']}; "
        f"parametrization: {', '.join(t['parametrization'])}"
    )
    shaped = r["regimes"].get("status") != "absent"
    print(
        f"{r['n_runs']} runs analysed ({r['inputs']['layout']} layout)"
        + (f"; preferred law: {r['regimes']['preferred']}" if shaped else "; no depth and width")
    )
    chin = r.get("chinchilla") or {}
    if chin.get("status") == "ok":
        p, co = chin["params"], chin["compute_optimal"]
        print(
            "L(N, D) = E + A/N^alpha + B/D^beta: "
            + ", ".join(f"{k} = {v:.4g}" for k, v in p.items())
            + f"; compute-optimal N ~ C^{co['a']:.3f}"
        )
    elif chin:
        print(f"L(N, D): {chin['status'].replace('_', ' ')} ({chin.get('reason', '')})")
    print(verdict_line(r))
    print(f"report: {Location(r['report_dir']).display('report.md')}")
    return 0


def _plot(args) -> int:
    from analysis.readers.inputs import InputError
    from analysis.reporting.output import terminate_cleanly
    from analysis.reporting.report import replot

    terminate_cleanly()
    try:
        r = replot(args.dir, force=args.force)
    except InputError as exc:
        return _fail(str(exc))
    print(f"figures redrawn: {', '.join(r['figures']['written']) or 'none'}")
    return 0


def _kaplan(args) -> int:
    from analysis.readers.inputs import InputError
    from analysis.reporting.markdown import kaplan_table
    from analysis.reporting.output import terminate_cleanly
    from analysis.reporting.report import kaplan_report

    terminate_cleanly()
    if args.dir is None:
        return _fail(
            "kaplan needs DIR, the results store, report folder or runs table to compare with "
            "Kaplan et al. 2020 (e.g. depthwidth kaplan results/smoke)."
        )
    if bad := _check_counts(args):
        return _fail(bad)
    try:
        k = kaplan_report(
            args.dir, digitized=args.digitized, bootstrap=args.bootstrap, seed=args.seed, out_dir=args.out
        )
    except InputError as exc:
        return _fail(str(exc))
    print(k["answer"])
    print("\n".join(kaplan_table(k)))
    figures = (k.get("figures") or {}).get("written", [])
    written = ["kaplan.md", "kaplan.json", *(f"{n}.{e}" for n in figures for e in ("png", "pdf"))]
    print(f"compared the report in {k['report']}; wrote {', '.join(written)} into {k['folder']}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "analyze",
        help="fits, figures and report from a results store or CSV",
        description="Fit Kaplan-style laws, crossovers, the two depth regimes and the threshold "
        "base b of L_th = log_b(d_x); write report.json, report.md and figures.",
    )
    p.add_argument(
        "source",
        help="results directory (runs.parquet [+ curves.parquet]), a CSV / "
        "parquet / JSON-lines file with loss and depth,width and/or "
        "n_params [seed, tokens, step], Gemstones' checkpoint lines or "
        "Epoch's Chinchilla CSV (recognised by their columns)",
    )
    p.add_argument("--out", default=None, help="output folder (default: <store>/analysis)")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap refits (default 200)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--tune",
        action="append",
        metavar="COL",
        help="a column that tunes a run (beside lr, beta2, warmup_steps, batch_size, "
        "weight_decay, ... found by themselves): each shape is fitted at its best "
        "setting; repeatable; `--tune none` averages every setting instead",
    )
    p.add_argument(
        "--selection",
        choices=("auto", "split", "same"),
        default="auto",
        help="choose the best setting on half the seeds and fit the other half (split), "
        "on all seeds (same), or split where every setting has 2 seeds (auto)",
    )
    p.add_argument(
        "--n",
        choices=("non-embedding", "total"),
        default="non-embedding",
        help="the parameter count the fits use: non-embedding (Kaplan et al. 2020, "
        "default) or total (Hoffmann et al. 2022; needs n_params_total or "
        "vocab_size); L(N, D) uses total counts wherever the input has them",
    )
    p.set_defaults(func=_analyze)

    p = subparsers.add_parser("plot", help="redraw every figure from a stored report (no refitting)")
    p.add_argument("dir", help="results directory or the folder holding report.json")
    p.add_argument(
        "--force",
        action="store_true",
        help="redraw even when the source data changed since the report was fitted",
    )
    p.set_defaults(func=_plot)

    p = subparsers.add_parser("kaplan", help="our exponents and shapes beside Kaplan et al. 2020")
    p.add_argument(
        "dir",
        nargs="?",
        help="results directory, report folder or input file (analysed first if it has no report)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="folder for kaplan.md, kaplan.json (and the figure), and for the report when the input "
        "has none yet (default: NAME_kaplan beside the input; never inside a results store)",
    )
    p.add_argument(
        "--digitized",
        default=None,
        help="digitized published curves: CSV of N,tokens,loss or a Figure 2 JSON",
    )
    p.add_argument("--bootstrap", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_kaplan)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)
