"""The plan `depthwidth design` rates: a spec's trials as `sweep plan` expands them (no Ray), the
planted model for them (its noise assumed, given, or estimated from a pilot), and the plan's cost
in words. Shared by the rating (sweeps/designing/design.py) and the search
(sweeps/designing/design_search.py)."""

from __future__ import annotations

import json
import math

from sweeps.designing.rating import Noise
from sweeps.plans.adaptive_spec import too_few_shapes
from sweeps.plans.spec import SpecError, SweepSpec


def trials_frame(spec: SweepSpec):
    """The plan's trials as a table (depth, width, n_params, tokens, seed, lr, flops) and its
    totals from the planner (sweeps/plans/plan.py). Raises SpecError when the plan cannot be analysed
    for a threshold."""
    import pandas as pd

    from sweeps.plans.plan import check_sizes, plan_rows, totals

    rows = plan_rows(spec)
    check_sizes(spec, rows)
    df = pd.DataFrame([row.to_dict() for row in rows])
    fams = sorted(set(df["family"]))
    if fams != ["transformer"]:
        raise SpecError(
            f"{spec.source_path}: family = {', '.join(fams)!r} is invalid for design: "
            f"the threshold analysis rates transformer depth-width plans only."
        )
    if why := too_few_shapes(df["depth"].nunique(), df["width"].nunique()):
        raise SpecError(f"{spec.source_path}: {why}, so there is nothing to rate.")
    cols = ["trial_id", "depth", "width", "n_params", "tokens", "seed", "lr", "flops"]
    out = df[cols].copy()
    out["flops"] = df["budget_flops"].to_numpy()  # each budget's training compute, branch or not
    if spec.halving:  # design plays the successive halving out (analysis.power.design.planted_table)
        out["steps"] = df["steps"].to_numpy()
        out["halving"] = [json.dumps(spec.halving[t].to_dict(), sort_keys=True) for t in df["trial_id"]]
    return out, totals(spec, rows)


def parse_drift(text: str | None) -> tuple[float, float, float] | None:
    """`--lr-drift A,G[,SE]`: the exponents of lr* ∝ width^A · depth^G and their standard error."""
    if text is None:
        return None
    try:
        vals = [float(x) for x in text.split(",")]
    except ValueError:
        vals = []
    ok = len(vals) in (2, 3) and all(math.isfinite(v) for v in vals) and all(abs(v) <= 3 for v in vals)
    if not ok or (len(vals) == 3 and vals[2] < 0):
        raise SpecError(
            f"--lr-drift = {text!r} is invalid: give the exponents of the best learning rate in "
            f"width and depth, and optionally their standard error, each between -3 and 3 "
            f"(e.g. 0,0.1 or 0.3,0.1,0.05)."
        )
    return vals[0], vals[1], vals[2] if len(vals) == 3 else 0.0


def default_model(spec: SweepSpec, trials, noise: float | None, drift: tuple | None = None):
    """The planted model for this plan: the learning-rate optimum at the base shape in the
    middle of the swept lrs (or at the one lr given), drifting as the parametrization allows, or
    as `drift` (width exponent, depth exponent, their standard error) states."""
    import numpy as np

    from analysis.power.design import DEFAULT_NOISE, PlantModel

    m = spec.trials[0].model
    lrs = np.unique(trials["lr"].to_numpy(float))
    lr0 = float(np.median(lrs)) if len(lrs) % 2 else float(np.exp(np.mean(np.log(lrs))))
    base_w = float(m.base_width) if m.parametrization != "standard" else float(trials["width"].min())
    base_d = float(m.base_depth) if m.parametrization == "completep" else float(trials["depth"].min())
    # lr* ∝ width^a · depth^g: completep promises a = g = 0 (a small residual depth drift, as
    # bench/transfer.md measured); mup a = 0; standard neither (Adam's 1/width).
    prior = {"completep": (0.0, 0.1), "mup": (0.0, -0.3)}.get(m.parametrization, (-1.0, -0.3))
    a, g, se = drift if drift is not None else (*prior, 0.0)
    return PlantModel(
        noise=DEFAULT_NOISE if noise is None else noise,
        lr0=lr0,
        base_width=base_w,
        base_depth=base_d,
        lr_width_exp=a,
        lr_depth_exp=g,
        lr_width_exp_se=se,
        lr_depth_exp_se=se,
    )


def build_model(spec, trials, args):
    """The planted model and where its noise comes from (a Noise, sweeps/designing/rating.py)."""
    from analysis.power.design import model_from_pilot

    drift = parse_drift(getattr(args, "lr_drift", None))
    model = default_model(spec, trials, args.noise, drift)
    stated = "stated by --lr-drift" if drift is not None else None
    if args.pilot:
        from analysis.readers.inputs import InputError, load

        try:
            ds = load(args.pilot)
            if not ds.has_shape:
                missing = "depth" if "depth" not in ds.all_runs.columns else "width"
                raise ValueError(f"it has no {missing!r} column; a pilot's runs need depth and width.")
            model, found = model_from_pilot(ds.runs, model)
        except (InputError, ValueError, KeyError) as exc:
            raise SpecError(f"--pilot = {args.pilot!r} is invalid: {exc}") from None
        if "lr_drift" in found:
            seen = " and ".join(found["lr_drift"]["measured"]) or "neither width nor depth"
            stated = f"measured on the pilot's best rates in {seen}"
        return model, Noise(model.noise, "pilot", pilot=args.pilot, found=found, lr_drift_source=stated)
    if args.noise is not None:
        return model, Noise(model.noise, "--noise", lr_drift_source=stated)
    return model, Noise(
        model.noise,
        "assumed",
        note="no --pilot or --noise given: a 2% seed-to-seed spread is assumed",
        lr_drift_source=stated,
    )


def cost_text(cost) -> str:
    """A plan's Totals (sweeps/plans/plan.py) in words."""
    return (
        f"{cost.flops:.3g} FLOPs = {cost.pf_days:.3g} PF-days, {cost.hours_text()} "
        f"(as `sweep plan` estimates)"
    )
