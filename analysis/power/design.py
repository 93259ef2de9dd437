"""Power of a sweep plan before it runs: plant losses on its trials, analyse each replicate.

Losses: the two-regime law (docs/science.md §4) or a null of N alone, with a data term, an lr
penalty around a drifting optimum and seed noise (docs/design-power.md); each replicate goes
through `analyze`'s estimator path (tuning.apply, analysis.reporting.report.build_report).
"""

from __future__ import annotations

import json
import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis.fitting.fitcore import log_kappa
from analysis.power import events
from analysis.readers.halving import decide

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DEFAULT_NOISE = 0.02  # Kaplan et al. 2020 report a seed-to-seed spread of about 2%
TARGET_POWER = 0.8
NULL = "null"


@dataclass(frozen=True)
class PlantModel:
    """The generative model of one planted sweep (docs/design-power.md, "Generative model").

    loss = [E + A·κ_b(L, d)^−alpha + B_D·D^−alpha_D] · exp(sharpness·(log10 lr − log10 lr*)² + ε),
    ε ~ N(0, noise²) per run; lr* = lr0·(d/base_width)^lr_width_exp·(L/base_depth)^lr_depth_exp.
    The drift of the best learning rate with shape (the two exponents) is known to within its
    standard errors (measured on a pilot, or stated): each replicate draws its own exponents from
    them, so a plan is rated under the drift it may meet, not only the most likely one.
    The null replaces A·κ_b^−alpha by A_N·N^−alpha_N, the law of N alone closest to the b = 3
    law on the plan's own shapes (analysis.power.design.null_law)."""

    E: float = 1.5
    A: float = 20.0
    alpha: float = 0.3
    B_D: float = 410.7  # Hoffmann et al. 2022's fitted data term B/D^beta
    alpha_D: float = 0.28
    noise: float = DEFAULT_NOISE
    sharpness: float = 0.15
    lr0: float | None = None  # None: no learning-rate penalty (no lr in the trials)
    base_width: float = 64.0
    base_depth: float = 2.0
    lr_width_exp: float = 0.0
    lr_depth_exp: float = 0.1
    lr_width_exp_se: float = 0.0
    lr_depth_exp_se: float = 0.0
    A_N: float | None = None
    alpha_N: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def kappa_term(depth, width, b: float, model: PlantModel) -> np.ndarray:
    """A·κ_b(L, d)^−alpha: the shape term of the two-regime law (analysis.fitting.fitcore.log_kappa)."""
    lk, _ = log_kappa(np.asarray(depth, float), np.log(np.asarray(width, float)), np.log(b))
    return model.A * np.exp(-model.alpha * lk)


def null_law(trials: pd.DataFrame, model: PlantModel, b: float = 3.0) -> PlantModel:
    """The model with A_N, alpha_N of the law of N alone (depth and width trade evenly at every
    depth) fitted by least squares in log space to the b = 3 shape term on the trials' shapes, so
    the null has the same losses on average and differs only in ignoring shape."""
    shapes = trials.drop_duplicates(["depth", "width"])
    y = np.log(kappa_term(shapes["depth"], shapes["width"], b, model))
    x = np.log(shapes["n_params"].to_numpy(float))
    if len(shapes) < 2 or np.ptp(x) == 0:
        return replace(model, A_N=float(np.exp(y.mean())), alpha_N=0.0)
    slope, icpt = np.polyfit(x, y, 1)
    return replace(model, A_N=float(np.exp(icpt)), alpha_N=float(max(-slope, 1e-3)))


def drawn_drift(model: PlantModel, rng: np.random.Generator) -> PlantModel:
    """The model with this replicate's drift exponents, drawn from their standard errors (the
    model as it is where both are 0)."""
    if model.lr_width_exp_se <= 0 and model.lr_depth_exp_se <= 0:
        return model
    return replace(
        model,
        lr_width_exp=float(rng.normal(model.lr_width_exp, model.lr_width_exp_se)),
        lr_depth_exp=float(rng.normal(model.lr_depth_exp, model.lr_depth_exp_se)),
    )


def lr_optimum(depth, width, model: PlantModel) -> np.ndarray:
    return (
        model.lr0
        * (np.asarray(width, float) / model.base_width) ** model.lr_width_exp
        * (np.asarray(depth, float) / model.base_depth) ** model.lr_depth_exp
    )


def clean_losses(trials: pd.DataFrame, b: float | None, model: PlantModel) -> np.ndarray:
    """Noise-free planted losses of `trials` (columns depth, width, n_params [, tokens, lr])
    under threshold base `b`, or under the null law of N alone when `b` is None."""
    L, d = trials["depth"].to_numpy(float), trials["width"].to_numpy(float)
    if b is None:
        if model.A_N is None:
            model = null_law(trials, model)
        shape = model.A_N * trials["n_params"].to_numpy(float) ** -model.alpha_N
    else:
        shape = kappa_term(L, d, b, model)
    out = model.E + shape
    if "tokens" in trials and trials["tokens"].notna().all() and model.B_D > 0:
        out = out + model.B_D * trials["tokens"].to_numpy(float) ** -model.alpha_D
    if model.lr0 is not None and "lr" in trials:
        off = np.log10(trials["lr"].to_numpy(float)) - np.log10(lr_optimum(L, d, model))
        out = out * np.exp(model.sharpness * off**2)
    return out


def plant_losses(
    trials: pd.DataFrame, b: float | None, model: PlantModel, rng: np.random.Generator
) -> np.ndarray:
    """One planted sweep: the clean losses times log-normal seed noise, one draw per trial.
    `b` None plants the null. This is the generator `design` and its benchmarks share."""
    clean = clean_losses(trials, b, model)
    return clean * np.exp(rng.normal(0.0, model.noise, len(clean)))


def planted_table(
    trials: pd.DataFrame, b: float | None, model: PlantModel, rng: np.random.Generator
) -> pd.DataFrame:
    """The runs table `analyze` reads (one row per trial) with planted losses; with a `halving`
    column (a successive halving's group and rungs per trial), the halving is played out too."""
    cols = [c for c in ("trial_id", "depth", "width", "n_params", "tokens", "seed", "lr") if c in trials]
    if "halving" not in trials:
        return trials[cols].assign(loss=plant_losses(trials, b, model, rng)).reset_index(drop=True)
    state = rng.bit_generator.state
    table = trials[cols].assign(loss=plant_losses(trials, b, model, rng)).reset_index(drop=True)
    return _halved(table, trials.reset_index(drop=True), b, model, state)


def _halved(table: pd.DataFrame, trials: pd.DataFrame, b, model: PlantModel, state) -> pd.DataFrame:
    """Each trial's loss at each rung: the planted law at the rung's tokens with the trial's own
    noise draw (one run seen early and at the end: the seed's luck carries through, the most the
    choice can flatter a final), then the rule of analysis/halving.py, which `analyze` applies."""
    recs = [json.loads(h) for h in trials["halving"]]
    steps = trials["steps"].to_numpy(float)
    at_rungs = []
    for k in range(max(len(r["rungs"]) for r in recs)):
        frac = np.array([r["rungs"][min(k, len(r["rungs"]) - 1)] for r in recs], float) / steps
        rng = np.random.default_rng()
        rng.bit_generator.state = state  # the same ε per trial as its final loss
        at_rungs.append(plant_losses(trials.assign(tokens=trials["tokens"] * frac), b, model, rng))
    losses = {tid: [float(a[i]) for a in at_rungs] for i, tid in enumerate(table["trial_id"])}
    groups: dict[str, list[str]] = {}
    for tid, r in zip(table["trial_id"], recs):
        groups.setdefault(r["group"], []).append(tid)
    lost_at: dict[str, int] = {}  # trial -> the rung it lost (absent: a final)
    for members in groups.values():
        rec = recs[int(np.flatnonzero(table["trial_id"] == members[0])[0])]
        n = len(rec["rungs"])
        kept, _ = decide(members, {m: losses[m][:n] for m in members}, set(members), rec["eta"], n)
        for m in members:
            k = next((k for k, alive in enumerate(kept) if m not in alive), None)
            if k is not None:
                lost_at[m] = k
    status, out, loss = [], [], table["loss"].to_numpy(float).copy()
    for i, (tid, r) in enumerate(zip(table["trial_id"], recs)):
        k = lost_at.get(tid)
        status.append("ok" if k is None else "stopped")
        out.append(json.dumps({**r, "losses": losses[tid][: len(r["rungs"]) if k is None else k + 1]}))
        if k is not None:
            loss[i] = losses[tid][k]
    return table.assign(loss=loss, status=status, halving=out)


def analyse_table(
    table: pd.DataFrame, bootstrap: int = 200, seed: int = 0, workdir: str | None = None
) -> dict:
    """The threshold section `analyze` writes for this runs table: the table is read back as a
    CSV (analysis.readers.inputs.load), each shape reduced to its best setting (analysis.laws.tuning.apply,
    the default selection rule) and every section built (analysis.reporting.report.build_report)."""
    import tempfile

    from analysis.laws import tuning
    from analysis.readers import inputs
    from analysis.reporting.report import build_report

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = os.path.join(tmp, "planted.csv")
        table.to_csv(path, index=False)
        ds = inputs.load(path)
    ds, _ = tuning.apply(ds)
    return build_report(ds, int(bootstrap), int(seed))["threshold"]


def outcome(threshold: dict, truth: float | None) -> dict:
    """One replicate's outcome: claimed, the interval, and whether it holds the planted b."""
    ci = threshold.get("base_ci") or [None, None]
    lo, hi = (ci + [None, None])[:2] if isinstance(ci, list) else (None, None)
    has = lo is not None and hi is not None
    claimed = bool(threshold.get("claimed"))
    covers = bool(has and truth is not None and lo <= truth <= hi)
    return {
        "status": threshold.get("status"),
        "claimed": claimed,
        "base": threshold.get("base"),
        "lo": lo,
        "hi": hi,
        "covers": covers,
        "detected": claimed and covers,
        "width": (hi - lo) if has else None,
        "reason": threshold.get("reason", ""),
    }


def _replicates(task: tuple) -> list[dict]:
    trials, b, model, reps, seed, bootstrap = task
    rows = []
    for r in reps:
        case = [seed, 0 if b is None else int(round(b * 1000)), r]
        rng = np.random.default_rng(case)
        # the drift from a generator of its own: a plan's noise draws are the same with it or without
        drifted = drawn_drift(model, np.random.default_rng([*case, 1]))
        table = planted_table(trials, b, drifted, rng)
        try:
            thr = analyse_table(table, bootstrap, r)
        # A crash of the analysis is an outcome of the plan, not the end of the simulation.
        except Exception as exc:  # noqa: BLE001
            thr = {"status": "failed", "claimed": False, "reason": f"{type(exc).__name__}: {exc}"}
        rows.append(
            {
                "effect": NULL if b is None else float(b),
                "replicate": r,
                **outcome(thr, b),
                "lr_width_exp": drifted.lr_width_exp,
                "lr_depth_exp": drifted.lr_depth_exp,
            }
        )
    return rows


def simulate(
    trials: pd.DataFrame,
    effects,
    model: PlantModel,
    replicates: int,
    bootstrap: int = 200,
    seed: int = 0,
    jobs: int | None = None,
    null: bool = True,
    start: int = 0,
) -> pd.DataFrame:
    """Replicates `start` … `start + replicates − 1` of planted sweeps per effect (and the null),
    each analysed as `analyze` would; one row per replicate. Replicate r of an effect is the
    same sweep whatever else is simulated. Runs in `jobs` processes (default: this process's CPUs)."""
    if null and model.A_N is None:
        model = null_law(trials, model)
    cases = [float(b) for b in effects] + ([None] if null else [])
    jobs = jobs or len(os.sched_getaffinity(0))
    # chunks of about an eighth of each process's share, so that progress (events.tell) moves
    # in small steps; each replicate is seeded by itself, so the chunking changes no result
    per = max(1, math.ceil(replicates * len(cases) / (8 * jobs)))
    stop = start + replicates
    tasks = [
        (trials, b, model, list(range(s, min(s + per, stop))), seed, bootstrap)
        for b in cases
        for s in range(start, stop, per)
    ]
    events.tell("planned", replicates * len(cases))
    rows: list[dict] = []
    if jobs <= 1 or len(tasks) == 1:
        for out in map(_replicates, tasks):
            rows += out
            events.tell("done", len(out))
    else:
        import multiprocessing as mp

        # fork: the workers inherit the loaded modules (a fresh interpreter would re-import the
        # analysis, seconds each); nothing here runs threads of its own.
        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork")) as ex:
            for out in ex.map(_replicates, tasks):
                rows += out
                events.tell("done", len(out))
    return pd.DataFrame(rows)


def _settled(k: int, n: int, se: float) -> bool:
    """Enough replicates: the Agresti–Coull standard error of k/n is at most `se` (never 0 at a
    rate of 0 or 1, unlike the plain one)."""
    p = (k + 2) / (n + 4)
    return math.sqrt(p * (1 - p) / (n + 4)) <= se


def power_runs(
    trials: pd.DataFrame,
    effects,
    model: PlantModel,
    replicates: int | None = None,
    bootstrap: int = 200,
    seed: int = 0,
    jobs: int | None = None,
    batch: int = 25,
    max_replicates: int = 100,
    se: float = 0.05,
    progress=None,
) -> pd.DataFrame:
    """The outcomes of every replicate. `replicates` given: exactly that many per case. Else
    batches of `batch` per case until each case's rate (power, or false claims under the null)
    has a Monte Carlo standard error ≤ `se`, at most `max_replicates`. `progress` (a callable)
    is told after each batch."""
    if model.A_N is None:
        model = null_law(trials, model)
    if replicates is not None:
        return simulate(trials, effects, model, replicates, bootstrap, seed, jobs)
    open_cases = [float(b) for b in effects] + [None]
    frames, done = [], 0
    while open_cases and done < max_replicates:
        n = min(batch, max_replicates - done)
        effs = [b for b in open_cases if b is not None]
        frames.append(
            simulate(trials, effs, model, n, bootstrap, seed, jobs, null=None in open_cases, start=done)
        )
        done += n
        out = pd.concat(frames, ignore_index=True)
        still = []
        for b in open_cases:
            g = out[out["effect"].astype(str) == (NULL if b is None else str(float(b)))]
            k = int(g["claimed" if b is None else "detected"].sum())
            if not _settled(k, len(g), se):
                still.append(b)
        open_cases = still
        if progress is not None:
            progress(
                f"{done} replicates per case done; "
                + (
                    f"{len(still)} case(s) still short of a Monte Carlo error of {se:g}"
                    if still and done < max_replicates
                    else "every rate settled"
                )
            )
    return pd.concat(frames, ignore_index=True)


def rate(k: int, n: int) -> dict:
    """A Monte Carlo rate: k of n, its standard error and a 95% Wilson interval."""
    if n == 0:
        return {"rate": None, "se": None, "ci": None, "n": 0}
    p = k / n
    z = 1.959964
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return {
        "rate": p,
        "se": math.sqrt(p * (1 - p) / n),
        "ci": [max(0.0, mid - half), min(1.0, mid + half)],
        "n": n,
    }


def min_detectable(power: dict[float, float], target: float = TARGET_POWER) -> dict | None:
    """The range of b over which power reaches `target`, interpolated in ln b between the
    effects simulated; an end that reaches the smallest or largest effect is open (power may
    stay high beyond it). None when no effect reaches the target."""
    bs = sorted(power)
    p = np.array([power[b] for b in bs])
    ok = np.flatnonzero(p >= target)
    if ok.size == 0:
        return None
    i, j = int(ok[0]), int(ok[-1])

    def cross(a: int, c: int) -> float:
        t = (target - p[a]) / (p[c] - p[a]) if p[c] != p[a] else 0.0
        return float(np.exp(np.log(bs[a]) + t * (np.log(bs[c]) - np.log(bs[a]))))

    return {
        "low": bs[i] if i == 0 else cross(i - 1, i),
        "high": bs[j] if j == len(bs) - 1 else cross(j + 1, j),
        "low_open": i == 0,
        "high_open": j == len(bs) - 1,
        "power": target,
    }


def summarize(outcomes: pd.DataFrame) -> dict:
    """Per effect: power (claimed and the interval holds the truth), the claim rate, coverage,
    the median interval width; the false-claim rate under the null; the minimum detectable b."""
    out = {
        "power": {},
        "power_mc": {},
        "claim_rate": {},
        "coverage": {},
        "median_interval_width": {},
        "bias": {},
        "failed": {},
    }
    for eff, g in outcomes.groupby(outcomes["effect"].astype(str), sort=False):
        n = len(g)
        out["failed"][eff] = int((g["status"] == "failed").sum())
        if eff == NULL:
            out["false_claim"] = rate(int(g["claimed"].sum()), n)
            continue
        key = str(float(eff))
        pw = rate(int(g["detected"].sum()), n)
        out["power"][key], out["power_mc"][key] = pw["rate"], pw
        out["claim_rate"][key] = rate(int(g["claimed"].sum()), n)
        claimed = g[g["claimed"]]
        out["coverage"][key] = rate(int(claimed["covers"].sum()), len(claimed))
        widths = g["width"].dropna()
        out["median_interval_width"][key] = float(widths.median()) if len(widths) else None
        out["bias"][key] = bias(claimed, float(eff))
    out.setdefault("false_claim", None)
    out["min_detectable_effect"] = min_detectable({float(k): v for k, v in out["power"].items()})
    return out


def bias(claimed: pd.DataFrame, truth: float) -> dict:
    """Where the claimed estimates of b fall against the planted b: the mean and median error
    (estimate − truth) with the mean's standard error, and of the claimed intervals that miss the
    truth, how many lie below it. A plan can have power and still be biased (a drifting best
    learning rate that a one-rate plan does not follow pulls every estimate one way)."""
    est = pd.to_numeric(claimed["base"], errors="coerce").dropna().to_numpy(float)
    misses = claimed[~claimed["covers"].astype(bool)]
    below = int((pd.to_numeric(misses["hi"], errors="coerce") < truth).sum())
    if len(est) == 0:
        return {
            "n": 0,
            "mean": None,
            "se": None,
            "median": None,
            "misses": len(misses),
            "misses_below": below,
        }
    err = est - truth
    se = float(err.std(ddof=1) / math.sqrt(len(err))) if len(err) > 1 else None
    return {
        "n": int(len(err)),
        "mean": float(err.mean()),
        "se": se,
        "median": float(np.median(err)),
        "misses": int(len(misses)),
        "misses_below": below,
    }


def shape_reasons(trials: pd.DataFrame, b: float) -> list[str]:
    """Why the plan's shapes cannot locate a threshold of base `b`: all of them on one side of
    L_th = log_b(width), too few widths straddling it, too few widths per depth."""
    shapes = trials.drop_duplicates(["depth", "width"])
    L, w = shapes["depth"].to_numpy(float), shapes["width"].to_numpy(float)
    lth = np.log(w) / np.log(b)
    above, below = L > lth, L < lth
    out = []
    if not above.any():
        wmax = w.max()
        out.append(
            f"no shape lies above L_th = log_{b:g}(width): widths ≤ {wmax:g} need depths "
            f"≥ {math.floor(np.log(wmax) / np.log(b)) + 1} to straddle it"
        )
    elif not below.any():
        wmin = w.min()
        need = math.ceil(np.log(wmin) / np.log(b)) - 1
        out.append(
            f"no shape lies below L_th = log_{b:g}(width): widths ≥ {wmin:g} need depths "
            f"≤ {need} to straddle it"
            if need >= 1
            else f"no shape lies below L_th = log_{b:g}(width): even depth 1 is past the "
            f"threshold of width {wmin:g}; widths above {b**2:g} are needed"
        )
    else:
        both = [x for x in np.unique(w) if above[w == x].any() and below[w == x].any()]
        if len(both) < 2:
            out.append(
                f"only {len(both)} width{'s' if len(both) != 1 else ''} "
                f"({', '.join(f'{x:g}' for x in both) or 'none'}) ha{'ve' if len(both) != 1 else 's'} "
                f"depths on both sides of L_th = log_{b:g}(width)"
            )
    per_depth = shapes.groupby("depth")["width"].nunique()
    if (per_depth >= 3).sum() < 3 and shapes["depth"].nunique() >= 3:
        out.append(f"only {(per_depth >= 3).sum()} depths have the 3 widths a per-depth fit needs")
    if shapes["depth"].nunique() < 3 or shapes["width"].nunique() < 2:
        out.append(
            f"{shapes['depth'].nunique()} depths and {shapes['width'].nunique()} widths: "
            f"the threshold laws need at least 3 depths and 2 widths"
        )
    return out


def lr_reasons(trials: pd.DataFrame, model: PlantModel) -> list[str]:
    """Shapes whose planted best learning rate lies outside the swept lr range."""
    if model.lr0 is None or "lr" not in trials:
        return []
    shapes = trials.drop_duplicates(["depth", "width"])
    opt = np.log10(lr_optimum(shapes["depth"], shapes["width"], model))
    lo, hi = np.log10(trials["lr"].min()), np.log10(trials["lr"].max())
    out_of = int(((opt < lo - 0.25) | (opt > hi + 0.25)).sum())
    if out_of == 0:
        return []
    swept = f"the one lr swept ({10**lo:.2g})" if hi == lo else f"the swept lrs [{10**lo:.2g}, {10**hi:.2g}]"
    return [
        f"the assumed best learning rate of {out_of} of {len(shapes)} shapes lies more than a "
        f"quarter decade beyond {swept}, so their losses carry an lr penalty that the "
        f"threshold laws read as shape"
    ]


def seed_counts(trials: pd.DataFrame) -> tuple[int, int]:
    """(seeds per setting, seeds per shape left for the fits after the split selection)."""
    keys = [c for c in ("depth", "width", "lr", "tokens") if c in trials]
    n = int(trials.groupby(keys).size().min()) if len(trials) else 0
    tuned = "lr" in trials and trials.groupby(["depth", "width"])["lr"].nunique().max() > 1
    if "halving" in trials:  # each seed's final is its own choice: every seed is fitted
        return n, n
    return n, (n - n // 2 if tuned and n >= 2 else n)


def noise_check(
    trials: pd.DataFrame,
    b: float,
    model: PlantModel,
    power: float,
    replicates: int = 20,
    bootstrap: int = 200,
    seed: int = 0,
    jobs: int | None = None,
) -> tuple[float, int]:
    """Power at `b` with half the seed noise (replicates not shared with the main run): how much
    of the shortfall the seeds cause. Returns (power at half noise, replicates)."""
    half = replace(model, noise=model.noise / 2)
    out = simulate(trials, [b], half, replicates, bootstrap, seed + 1, jobs, null=False)
    return float(out["detected"].mean()), len(out)


PARAM_WHY = {
    "alpha_D": "the data term's exponent alpha_D is not identified (the token budget moves with N, "
    "so D cannot be told from N): decouple tokens from N, e.g. two token budgets per "
    "shape or one fixed budget",
    "B_D": "the data term is not identified: decouple tokens from N",
    "alpha_N": "the combined law's N term is not identified beside the threshold term",
}


def outcome_reasons(outcomes: pd.DataFrame) -> list[str]:
    """The parameter the analysis most often found not identified in the replicates that
    claimed nothing, when it blocks most of them, as a reason in words."""
    miss = outcomes[(outcomes["effect"].astype(str) != NULL) & ~outcomes["claimed"]]
    if miss.empty:
        return []
    import re

    counts: dict[str, int] = {}
    for text in miss["reason"].fillna(""):
        for name in set(re.findall(r"\b(alpha_D|B_D|alpha_N|alpha_kappa|E|b): (?:its|the)", text)):
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return []
    name, k = max(counts.items(), key=lambda kv: kv[1])
    if k < len(miss) / 2:
        return []
    why = PARAM_WHY.get(name, f"{name} is not identified")
    return [f"in {k} of {len(miss)} replicates without a claim {why}"]


def advice(
    trials: pd.DataFrame,
    summary: dict,
    model: PlantModel,
    noise_power=None,
    outcomes: pd.DataFrame | None = None,
) -> str:
    """One sentence when power is low at some effect (or false claims are frequent), naming the
    reason: the shapes' place against L_th, the lr grid, or the seed noise. Empty otherwise.
    `noise_power` is (b, power at b, power at half the noise, replicates) from noise_check."""
    low = [float(k) for k, v in summary["power"].items() if v is not None and v < TARGET_POWER]
    parts = []
    fc = summary.get("false_claim") or {}
    if fc.get("rate") is not None and fc["ci"][0] > 0.05:
        parts.append(
            f"under the null a threshold is claimed in {fc['rate']:.0%} of replicates "
            f"(more than the 5% a 95% interval allows)"
        )
    if not low:
        return "; ".join(parts) + ("." if parts else "")
    reasons = []
    for b in low:
        for r in shape_reasons(trials, b):
            if r not in reasons:
                reasons.append(r)
    reasons += lr_reasons(trials, model)
    if outcomes is not None:
        reasons += outcome_reasons(outcomes)
    n, used = seed_counts(trials)
    if noise_power is not None:
        b, p, p_half, k = noise_power
        if p_half - p >= 0.2:
            reasons.append(
                f"{n} seed{'s' if n != 1 else ''} per setting ({used} per shape in the "
                f"fits): the interval is dominated by seed noise ({model.noise:.1%}); "
                f"at half that noise power at b = {b:g} rises from {p:.0%} to "
                f"{p_half:.0%} ({k} replicates), and 4x the seeds halve it"
            )
        elif not reasons:
            reasons.append(
                f"halving the seed noise does not help (power at b = {b:g}: {p:.0%} "
                f"-> {p_half:.0%}, {k} replicates): the shapes and budgets, not the "
                f"seeds, limit it; `design --propose` searches other plans"
            )
    effects = ", ".join(f"{b:g}" for b in low)
    head = f"power is below {TARGET_POWER:.0%} at b = {effects}"
    return "; ".join(parts + [head + (": " + "; ".join(reasons) if reasons else "")]) + "."


def model_from_pilot(runs: pd.DataFrame, model: PlantModel) -> tuple[PlantModel, dict]:
    """The seed noise, loss scale and learning-rate curvature measured on a pilot's runs table
    (columns depth, width, n_params, loss, seed [, lr, tokens]); returns the model and what was
    measured. Raises ValueError naming what the pilot lacks."""
    keys = [c for c in ("depth", "width", "lr", "tokens") if c in runs and runs[c].notna().all()]
    logl = np.log(runs["loss"].to_numpy(float))
    g = runs.assign(_l=logl).groupby(keys)["_l"]
    n = g.transform("size")
    if (n >= 2).sum() < 2:
        raise ValueError(
            "the pilot has no setting run with 2 or more seeds, so its seed noise cannot be measured"
        )
    dev = (runs.assign(_l=logl)["_l"] - g.transform("mean"))[n >= 2]
    sizes = g.size()
    dof = int((sizes[sizes >= 2] - 1).sum())  # pooled over the settings run with 2+ seeds
    noise = float(np.sqrt(np.sum(dev**2) / max(dof, 1)))
    found = {"noise": noise, "settings_with_seeds": int((g.size() >= 2).sum())}
    m = replace(model, noise=max(noise, 1e-4))
    clean = clean_losses(runs.drop(columns=[c for c in ("lr",) if c in runs]), 3.0, replace(m, lr0=None))
    scale = float(np.median(runs["loss"]) / np.median(clean))
    m = replace(m, E=m.E * scale, A=m.A * scale, B_D=m.B_D * scale)
    found["loss_scale"] = scale
    if "lr" in runs and runs.groupby(["depth", "width"])["lr"].nunique().max() >= 3:
        m, measured = _lr_from_pilot(runs.assign(_l=logl), m)
        found.update(measured)
    return m, found


def _lr_from_pilot(runs: pd.DataFrame, m: PlantModel) -> tuple[PlantModel, dict]:
    """The lr curvature and each pilot shape's best lr at each of its budgets (the vertex of a
    parabola in log10 lr through its runs, every seed a point, with the vertex's standard error by
    the delta method),
    and the drift of the best lr with width and depth fitted to those vertices, weighted by their
    errors: lr* = lr0·(d/base_width)^a·(L/base_depth)^g. An exponent the pilot cannot see (one
    width, or one depth) keeps the model's own value, with no error claimed for it."""
    curv, vert = [], []
    budget = ["tokens"] if "tokens" in runs and runs["tokens"].notna().all() else []
    for (depth, width, *_), s in runs.groupby(["depth", "width", *budget]):  # each budget its own
        if s["lr"].nunique() < 3:
            continue
        x, y = np.log10(s["lr"].to_numpy(float)), s["_l"].to_numpy(float)
        if len(x) >= 4:
            coef, cov = np.polyfit(x, y, 2, cov="unscaled")
            resid = y - np.polyval(coef, x)
            cov = cov * max(float(resid @ resid) / max(len(x) - 3, 1), 1e-12)
        else:
            coef, cov = np.polyfit(x, y, 2), None
        a2, b1 = float(coef[0]), float(coef[1])
        if a2 <= 0:
            continue  # no minimum inside the rates run
        v = -b1 / (2 * a2)
        if cov is not None:
            grad = np.array([b1 / (2 * a2 * a2), -1 / (2 * a2)])
            var = float(grad @ cov[:2, :2] @ grad)
        else:
            var = math.nan
        curv.append(a2)
        vert.append((float(depth), float(width), v, var))
    if not curv:
        return m, {}
    m = replace(m, sharpness=float(np.median(curv)))
    d = pd.DataFrame(vert, columns=["depth", "width", "v", "var"])
    var = d["var"].to_numpy(float)
    finite = np.isfinite(var) & (var > 0)
    w = np.where(finite, 1 / np.where(finite, var, 1.0), 0.0)
    if not finite.any():
        w = np.ones(len(d))
    cols = [np.ones(len(d))]
    names = ["lr0"]
    if d["width"].nunique() >= 2:
        cols.append(np.log10(d["width"].to_numpy(float) / m.base_width))
        names.append("width")
    if d["depth"].nunique() >= 2:
        cols.append(np.log10(d["depth"].to_numpy(float) / m.base_depth))
        names.append("depth")
    X = np.column_stack(cols)
    coef, cov = _wls(X, d["v"].to_numpy(float), w)
    got = dict(zip(names, coef))
    se = dict(zip(names, np.sqrt(np.clip(np.diag(cov), 0, None)))) if cov is not None else {}
    m = replace(
        m,
        lr0=float(10 ** got["lr0"]),
        lr_width_exp=float(got.get("width", m.lr_width_exp)),
        lr_depth_exp=float(got.get("depth", m.lr_depth_exp)),
        lr_width_exp_se=float(se.get("width", 0.0)),
        lr_depth_exp_se=float(se.get("depth", 0.0)),
    )
    lo, hi = d.loc[d["v"].idxmin()], d.loc[d["v"].idxmax()]
    found = {
        "sharpness": m.sharpness,
        "lr0": m.lr0,
        "shapes_with_lr_curve": len(curv),
        "best_lr": [
            {
                "depth": int(r.depth),
                "width": int(r.width),
                "lr": float(10**r.v),
                "log10_se": _sqrt_or_none(r.var),
            }
            for r in d.itertuples()
        ],
        "lr_drift": {
            "width_exp": m.lr_width_exp,
            "width_se": se.get("width"),
            "depth_exp": m.lr_depth_exp,
            "depth_se": se.get("depth"),
            "measured": [n for n in names if n != "lr0"],
            "spread": float(10 ** (hi["v"] - lo["v"])),  # best lr of the pilot's highest over lowest
        },
    }
    return m, found


def _sqrt_or_none(v: float) -> float | None:
    return float(math.sqrt(v)) if np.isfinite(v) and v > 0 else None


def _wls(X: np.ndarray, y: np.ndarray, w: np.ndarray):
    """Weighted least squares: (coefficients, their covariance, inflated by the residual scatter
    when it exceeds what the weights say; None with no degrees of freedom left)."""
    sw = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)
    dof = len(y) - X.shape[1]
    if dof <= 0:
        return coef, None
    r = (y - X @ coef) * sw
    scale = max(float(r @ r) / dof, 1.0)
    try:
        cov = np.linalg.inv((X * w[:, None]).T @ X) * scale
    except np.linalg.LinAlgError:
        return coef, None
    return coef, cov


def power_figure(summary: dict, title: str = "") -> Figure:
    """Power against b with Monte Carlo 95% intervals and the 80% line, the log b axis ticked in
    plain numbers at the effects simulated; the null's false-claim rate in its own panel beside
    that axis, since the null has no b to stand at."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullLocator

    bs = sorted(float(k) for k in summary["power"])
    fc = summary.get("false_claim")
    has_null = bool(fc and fc["rate"] is not None)
    fig = Figure(figsize=(6.2, 3.9), layout="constrained")
    if has_null:
        null, ax = fig.subplots(1, 2, sharey=True, width_ratios=(1, 6))
        null.errorbar(
            [0.0],
            [fc["rate"]],
            yerr=[[fc["rate"] - fc["ci"][0]], [fc["ci"][1] - fc["rate"]]],
            marker="s",
            color="C3",
            capsize=3,
            label="false claims under the null",
        )
        null.set_xlim(-1, 1)
        null.set_xticks([0.0], ["null\n(no L_th)"])
        null.axhline(TARGET_POWER, color="grey", ls="--", lw=0.8)
        null.set_ylabel("rate over replicates")
        ax.tick_params(labelleft=False)
    else:
        ax = fig.add_subplot()
        ax.set_ylabel("rate over replicates")
    p = [summary["power"][str(b)] for b in bs]
    ci = np.array([summary["power_mc"][str(b)]["ci"] for b in bs])
    ax.errorbar(
        bs,
        p,
        yerr=[np.subtract(p, ci[:, 0]), ci[:, 1] - p],
        marker="o",
        capsize=3,
        label="power (claimed, interval holds b)",
    )
    ax.axhline(TARGET_POWER, color="grey", ls="--", lw=0.8, label=f"{TARGET_POWER:.0%} power")
    ax.set_xscale("log")
    ax.set_xlim(min(bs) / 1.2, max(bs) * 1.2)
    if min(bs) / 1.2 <= 3.0 <= max(bs) * 1.2:
        ax.axvline(3.0, color="grey", ls=":", lw=0.8, label="theory b = 3")
    ax.set_xticks(bs, [f"{b:g}" for b in bs])
    ax.xaxis.set_minor_locator(NullLocator())  # no 2×10^0 between the effects
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("planted threshold base b (L_th = log_b width)")
    fig.suptitle(title, fontsize=9)
    pairs = [hl for a in fig.axes[::-1] for hl in zip(*a.get_legend_handles_labels())]
    pairs.sort(key=lambda hl: isinstance(hl[0], Line2D))  # the rates first, then the reference lines
    handles, labels = [h for h, _ in pairs], [lab for _, lab in pairs]
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncol=2, frameon=False)
    return fig


def plot_power(summary: dict, path: str, title: str = "") -> None:
    """power_figure, written as a PNG."""
    # `path` may be an open file (an atomic write: runstore.files.atomic_file)
    power_figure(summary, title).savefig(path, dpi=120, format="png")
