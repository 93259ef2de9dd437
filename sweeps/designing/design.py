"""`depthwidth design SPEC`: what a sweep plan can detect before it runs (docs/design-power.md).

The spec is expanded as `sweep plan` expands it (no Ray is started), losses are planted on its
trials by analysis.power.design and analysed as `analyze` would; `--propose --budget B` searches other
plans within a budget (sweeps/designing/design_search.py). Bad input: one sentence, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from depthwidth.clitools import fail
from sweeps.designing.design_plan import build_model, cost_text, parse_drift, trials_frame
from sweeps.designing.design_search import PROPOSE_FILES
from sweeps.designing.rating import Drift, Noise, Rating, summarize
from sweeps.plans.spec import SpecError, SweepSpec, load_spec

# Replicates and bootstrap refits per replicate: a rating holds every replicate's outcome, so
# the count is bounded (the default stops at 100 replicates; 10,000 gives a Monte Carlo error of
# 0.005 on any rate).
MAX_REPLICATES = 10_000
OUT_FILES = ("power.png", "outcomes.csv", "design.json")


def _in_base_range(v: float) -> bool:
    from analysis.fitting.fitcore import BASE_BOUNDS

    return math.isfinite(v) and BASE_BOUNDS[0] < v < BASE_BOUNDS[1]


def _base_range() -> str:
    from analysis.fitting.fitcore import BASE_BOUNDS

    return f"strictly between {BASE_BOUNDS[0]:g} and {BASE_BOUNDS[1]:g} (the analysis's search range)"


def parse_effects(text: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SpecError(
            f"--effects = {text!r} is invalid: expected numbers separated by commas (e.g. 2.5,3,4)."
        ) from None
    if not vals or not all(_in_base_range(v) for v in vals):
        raise SpecError(f"--effects = {text!r} is invalid: each threshold base b must lie {_base_range()}.")
    return sorted(set(vals))


def check_propose(args) -> None:
    """--propose's own options, before anything is read or searched."""
    if args.budget is None:
        raise SpecError("--propose needs --budget, e.g. --budget 4cpu-h.")
    if not _in_base_range(args.target):
        raise SpecError(
            f"--target = {args.target!r} is invalid: the threshold base b must lie {_base_range()}."
        )
    for flag, low in (("screen", 1), ("candidates", 1), ("finalists", 0)):
        v = getattr(args, flag)
        if v < low or (flag == "screen" and v > MAX_REPLICATES):
            most = f" and at most {MAX_REPLICATES:,}" if flag == "screen" else ""
            raise SpecError(f"--{flag} = {v} is invalid: it must be at least {low}{most}.")


def check_args(args) -> None:
    if args.noise is not None and not 0 < args.noise < 1:
        raise SpecError(
            f"--noise = {args.noise!r} is invalid: the seed-to-seed standard deviation "
            f"of the loss, relative to it, lies strictly between 0 and 1 (e.g. 0.02)."
        )
    parse_drift(getattr(args, "lr_drift", None))  # sweeps/designing/design_plan.py
    if args.noise is not None and args.pilot:
        raise SpecError(
            "--noise and --pilot are both given; the pilot measures the noise, so give one of them."
        )
    for flag in ("replicates", "bootstrap", "jobs"):
        v = getattr(args, flag)
        if v is not None and v < (0 if flag == "bootstrap" else 1):
            raise SpecError(f"--{flag} = {v} is invalid: it must be a positive integer.")
        if v is not None and flag != "jobs" and v > MAX_REPLICATES:
            raise SpecError(f"--{flag} = {v} is invalid: it must be at most {MAX_REPLICATES:,}.")
    if args.propose:
        check_propose(args)
    if args.out is not None:  # every output, before any work (--propose's default: design_search.py)
        from depthwidth.clitools import check_output_folder

        check_output_folder(args.out, "--out", PROPOSE_FILES if args.propose else OUT_FILES)


def rate_plan(
    spec: SweepSpec,
    trials,
    totals,
    model,
    noise: Noise,
    effects,
    replicates,
    bootstrap: int,
    seed: int,
    jobs: int | None,
    note=None,
) -> Rating:
    """The plan's rating. `note(text)` is told how each batch of replicates ended
    (sweeps/designing/design_progress.py)."""
    from analysis.power import design as dz
    from analysis.reporting.design_note import plan_fingerprint

    outcomes = dz.power_runs(
        trials,
        effects,
        model,
        replicates,
        bootstrap,
        seed,
        jobs,
        progress=None if note is None else (lambda m: note(f"design: {m}")),
    )
    summary = summarize(outcomes)
    low = summary.below(dz.TARGET_POWER)
    check = None
    if low and not any(dz.shape_reasons(trials, e.b) for e in low):
        worst = min(low, key=lambda e: e.power)
        p_half, k = dz.noise_check(
            trials, worst.b, model, worst.power, min(20, replicates or 20), bootstrap, seed, jobs
        )
        check = (worst.b, worst.power, p_half, k)
    n_seeds, used = dz.seed_counts(trials)
    return Rating(
        spec=spec.source_path,
        name=spec.name,
        trials=int(len(trials)),
        fingerprint=plan_fingerprint(trials["trial_id"]),
        shapes=int(trials.drop_duplicates(["depth", "width"]).shape[0]),
        seeds=n_seeds,
        seeds_in_fits=used,
        summary=summary,
        bootstrap=bootstrap,
        seed=seed,
        cost=totals,
        model=model,
        lr_drift=drift_of(model, trials),
        advice=dz.advice(trials, summary.raw, model, check, outcomes),
        outcomes=outcomes,
        noise=noise,
    )


def drift_of(model, trials) -> Drift | None:
    """The planted drift of the best learning rate with shape, and what it spans on this plan's
    shapes (None where the plan has one rate per shape chosen by nothing: no lr in its trials)."""
    import numpy as np

    from analysis.power.design import lr_optimum

    if model.lr0 is None or "lr" not in trials:
        return None
    shapes = trials.drop_duplicates(["depth", "width"])
    best = lr_optimum(shapes["depth"], shapes["width"], model)
    return Drift(
        width_exp=model.lr_width_exp,
        width_se=model.lr_width_exp_se,
        depth_exp=model.lr_depth_exp,
        depth_se=model.lr_depth_exp_se,
        spread=float(np.max(best) / np.min(best)),
        rates=sorted(float(x) for x in np.unique(trials["lr"])),
    )


def report_text(r: Rating) -> str:
    n, s = r.noise, r.summary
    drift = (
        []
        if r.lr_drift is None
        else [r.lr_drift.line(n.lr_drift_source or "assumed from the parametrization")]
    )
    lines = [
        f"design of sweep {r.name!r} ({r.spec}): {r.trials} trials, {r.shapes} "
        f"shapes, {r.seeds} seeds per setting ({r.seeds_in_fits} per shape in the fits)",
        f"cost: {cost_text(r.cost)}",
        f"seed noise: {n.value:.2%} of the loss ({n.source}" + (f": {n.note}" if n.note else "") + ")",
        f"each replicate plants losses from the two-regime law (docs/design-power.md) and is "
        f"analysed as `analyze` does ({r.bootstrap} bootstrap refits)",
        *drift,
        "",
        f"{'b':>6}  {'replicates':>10}  {'power':>14}  {'claimed':>8}  {'covers b':>8}  "
        f"{'median interval width':>21}  {'bias of b (claimed)':>22}",
    ]
    for e in s.effects:
        cov_s = "-" if e.coverage.rate is None else f"{e.coverage.rate:.2f}"
        w_s = "-" if e.median_width is None else f"{e.median_width:.3g}"
        bias = "-" if e.bias is None else e.bias.text()
        lines.append(
            f"{e.b:>6g}  {e.replicates:>10}  {e.power:>6.2f} ± {e.power_mc.se:.2f}  "
            f"{e.claim_rate.rate:>8.2f}  {cov_s:>8}  {w_s:>21}  {bias:>22}"
        )
    fc = s.false_claim
    lines.append(
        f"{'null':>6}  {s.null_replicates:>10}  false claims {fc.rate:.2f} "
        f"± {fc.se:.2f} (95% interval {fc.ci[0]:.2f}-{fc.ci[1]:.2f})"
    )
    mde = s.detectable
    if mde is None:
        lines.append("minimum detectable b at 80% power: none of the effects simulated")
    else:
        lo = ("≤ " if mde.low_open else "") + f"{mde.low:.3g}"
        hi = ("≥ " if mde.high_open else "") + f"{mde.high:.3g}"
        lines.append(
            f"power ≥ 80% for b from {lo} to {hi} (interpolated between the effects "
            f"simulated; Monte Carlo error as above)"
        )
    if r.advice:
        lines.append(f"advice: {r.advice}")
    return "\n".join(lines)


def write_out(r: Rating, out: str) -> list[str]:
    """power.png, outcomes.csv (one row per replicate) and design.json in `out`."""
    from analysis.power.design import plot_power
    from runstore.files import atomic_file

    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    # each file atomically (a link in its place is replaced, never written through)
    with atomic_file(d / "power.png") as f:
        plot_power(r.summary.raw, f, f"{r.name}: {r.trials} trials, noise {r.noise.value:.1%}")
    with atomic_file(d / "outcomes.csv", "w") as f:
        r.outcomes.to_csv(f, index=False)
    with atomic_file(d / "design.json", "w") as f:
        f.write(json.dumps(r.to_dict(), indent=1, default=float))
    return [str(d / n) for n in OUT_FILES]


def cmd_design(args: argparse.Namespace) -> int:
    from sweeps.designing.design_progress import shown

    try:
        effects = parse_effects(args.effects)
        check_args(args)
        if args.propose:
            from sweeps.designing.design_search import propose

            with shown(args.quiet):
                return propose(args, effects)
        if args.budget is not None:
            raise SpecError(
                "--budget is invalid without --propose: it bounds the plans that --propose searches."
            )
        spec = load_spec(args.spec, allow_missing_data=True)
        trials, totals = trials_frame(spec)
        model, noise = build_model(spec, trials, args)
    except (SpecError, ValueError) as exc:
        return fail(str(exc))
    with shown(args.quiet) as view:
        r = rate_plan(
            spec,
            trials,
            totals,
            model,
            noise,
            effects,
            args.replicates,
            args.bootstrap,
            args.seed,
            args.jobs,
            note=view.note if view else None,
        )
    files = write_out(r, args.out) if args.out else []
    if args.json:
        print(json.dumps(r.to_dict(), default=float))
    else:
        print(report_text(r))
        print("figure: " + files[0] if files else "figure and per-replicate table: add --out DIR")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "design",
        help="power of a sweep plan before it runs (planted losses "
        "through the analysis); --propose searches plans within a "
        "budget",
        description="Simulation power analysis of a sweep spec: losses planted "
        "from the two-regime law on the plan's trials, each replicate "
        "analysed as `analyze` does (docs/design-power.md).",
    )
    p.add_argument("spec", help="sweep spec (TOML), as `sweep plan` takes it")
    p.add_argument(
        "--effects",
        default="2.2,3,4.5",
        help="threshold bases b to plant, comma-separated (default 2.2,3,4.5); a "
        "null (depth and width trade evenly) is always added",
    )
    _model_args(p)
    p.add_argument(
        "--replicates",
        type=int,
        default=None,
        help="replicates per effect (default: batches of 25 until every rate's Monte "
        "Carlo error is at most 0.05, at most 100)",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=200,
        help="bootstrap refits per replicate's analysis (default 200, as analyze)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the planted noise (default 0)")
    p.add_argument("--jobs", type=int, default=None, help="processes (default: the CPUs available)")
    p.add_argument("--out", default=None, help="folder for power.png, outcomes.csv, design.json")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (by default: replicates simulated of those planned, elapsed "
        "time and an ETA, redrawn in place on a terminal, a line at most every 30 s in a log)",
    )
    p.add_argument(
        "--propose",
        action="store_true",
        help="search candidate plans within --budget and write the most powerful",
    )
    p.add_argument(
        "--budget",
        default=None,
        help="with --propose: the budget with its unit, e.g. 1000gpu-h, 4cpu-h, 3e18flops",
    )
    p.add_argument(
        "--target",
        type=float,
        default=3.0,
        help="with --propose: the effect b to be most powerful at (default 3)",
    )
    p.add_argument(
        "--objective",
        choices=("power", "width"),
        default="power",
        help="with --propose: most powerful at --target (ties: narrowest interval), "
        "or narrowest median interval",
    )
    p.add_argument(
        "--screen",
        type=int,
        default=20,
        help="with --propose: replicates per candidate in the first pass (default 20)",
    )
    p.add_argument(
        "--candidates",
        type=int,
        default=12,
        help="with --propose: at most this many plans screened (default 12)",
    )
    p.add_argument(
        "--finalists",
        type=int,
        default=2,
        help="with --propose: candidates rated in full after the screen (default 2; "
        "the plan as written is always rated)",
    )
    p.set_defaults(func=cmd_design)


def _model_args(p) -> None:
    """The options that set the planted model: its noise, a pilot, the drift of the best rate."""
    p.add_argument(
        "--noise",
        type=float,
        default=None,
        help="seed-to-seed sd of the final loss, relative to it (default 0.02, assumed)",
    )
    p.add_argument(
        "--pilot",
        default=None,
        help="runs of a pilot sweep (store or CSV): seed noise, loss scale and lr "
        "curvature are measured on it",
    )
    p.add_argument(
        "--lr-drift",
        default=None,
        metavar="A,G[,SE]",
        help="the drift of the best learning rate with shape to plant where no pilot measures it: "
        "lr* ∝ width^A · depth^G, with SE the exponents' standard error (default: from the "
        "parametrization, 0,0.1 for completep); a --pilot with learning-rate curves measures it",
    )
