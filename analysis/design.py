"""Power of a sweep plan before it runs: plant losses on its trials, analyse each replicate.

Losses follow the two-regime law of docs/science.md §4 (threshold base b) or, as the null, a law
of N alone, with a data term, a learning-rate penalty around a drifting optimum and seed noise
(docs/design-power.md). Every replicate goes through the estimator path of `analyze`
(tuning.apply, then analysis.report.build_report), and the outcomes are counted.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from analysis.fitcore import log_kappa

DEFAULT_EFFECTS = (2.2, 3.0, 4.5)
DEFAULT_NOISE = 0.02      # Kaplan et al. 2020 report a seed-to-seed spread of about 2%
TARGET_POWER = 0.8
NULL = "null"


@dataclass(frozen=True)
class PlantModel:
    """The generative model of one planted sweep (docs/design-power.md, "Generative model").

    loss = [E + A·κ_b(L, d)^−alpha + B_D·D^−alpha_D] · exp(sharpness·(log10 lr − log10 lr*)² + ε),
    ε ~ N(0, noise²) per run; lr* = lr0·(d/base_width)^lr_width_exp·(L/base_depth)^lr_depth_exp.
    The null replaces A·κ_b^−alpha by A_N·N^−alpha_N, the law of N alone closest to the b = 3
    law on the plan's own shapes (analysis.design.null_law)."""

    E: float = 1.5
    A: float = 20.0
    alpha: float = 0.3
    B_D: float = 60.0
    alpha_D: float = 0.4
    noise: float = DEFAULT_NOISE
    sharpness: float = 0.15
    lr0: float | None = None          # None: no learning-rate penalty (no lr in the trials)
    base_width: float = 64.0
    base_depth: float = 2.0
    lr_width_exp: float = 0.0
    lr_depth_exp: float = 0.1
    A_N: float | None = None
    alpha_N: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def kappa_term(depth, width, b: float, model: PlantModel) -> np.ndarray:
    """A·κ_b(L, d)^−alpha: the shape term of the two-regime law (analysis.fitcore.log_kappa)."""
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


def lr_optimum(depth, width, model: PlantModel) -> np.ndarray:
    return (model.lr0 * (np.asarray(width, float) / model.base_width) ** model.lr_width_exp
            * (np.asarray(depth, float) / model.base_depth) ** model.lr_depth_exp)


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
        out = out * np.exp(model.sharpness * off ** 2)
    return out


def plant_losses(trials: pd.DataFrame, b: float | None, model: PlantModel,
                 rng: np.random.Generator) -> np.ndarray:
    """One planted sweep: the clean losses times log-normal seed noise, one draw per trial.
    `b` None plants the null. This is the generator `design` and its benchmarks share."""
    clean = clean_losses(trials, b, model)
    return clean * np.exp(rng.normal(0.0, model.noise, len(clean)))


def planted_table(trials: pd.DataFrame, b: float | None, model: PlantModel,
                  rng: np.random.Generator) -> pd.DataFrame:
    """The runs table `analyze` reads (one row per trial) with planted losses."""
    cols = [c for c in ("trial_id", "depth", "width", "n_params", "tokens", "seed", "lr")
            if c in trials]
    return trials[cols].assign(loss=plant_losses(trials, b, model, rng)).reset_index(drop=True)


def analyse_table(table: pd.DataFrame, bootstrap: int = 200, seed: int = 0,
                  workdir: str | None = None) -> dict:
    """The threshold section `analyze` writes for this runs table: the table is read back as a
    CSV (analysis.inputs.load), each shape reduced to its best setting (analysis.tuning.apply,
    the default selection rule) and every section built (analysis.report.build_report)."""
    import tempfile

    from analysis import inputs, tuning
    from analysis.report import build_report

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
    return {"status": threshold.get("status"), "claimed": claimed, "base": threshold.get("base"),
            "lo": lo, "hi": hi, "covers": covers, "detected": claimed and covers,
            "width": (hi - lo) if has else None, "reason": threshold.get("reason", "")}


def _replicates(task: tuple) -> list[dict]:
    trials, b, model, reps, seed, bootstrap = task
    rows = []
    for r in reps:
        rng = np.random.default_rng([seed, 0 if b is None else int(round(b * 1000)), r])
        table = planted_table(trials, b, model, rng)
        try:
            thr = analyse_table(table, bootstrap, r)
        except Exception as exc:  # a crash of the analysis is an outcome, not the end of the run
            thr = {"status": "failed", "claimed": False, "reason": f"{type(exc).__name__}: {exc}"}
        rows.append({"effect": NULL if b is None else float(b), "replicate": r,
                     **outcome(thr, b)})
    return rows


def simulate(trials: pd.DataFrame, effects, model: PlantModel, replicates: int,
             bootstrap: int = 200, seed: int = 0, jobs: int | None = None,
             null: bool = True) -> pd.DataFrame:
    """`replicates` planted sweeps per effect (and the null), each analysed as `analyze` would;
    one row per replicate. Runs in `jobs` processes (default: the CPUs this process may use)."""
    if null and model.A_N is None:
        model = null_law(trials, model)
    cases = [float(b) for b in effects] + ([None] if null else [])
    jobs = jobs or len(os.sched_getaffinity(0))
    per = max(1, math.ceil(replicates / max(1, 2 * jobs // max(1, len(cases)))))
    tasks = [(trials, b, model, list(range(s, min(s + per, replicates))), seed, bootstrap)
             for b in cases for s in range(0, replicates, per)]
    if jobs <= 1 or len(tasks) == 1:
        rows = [r for t in tasks for r in _replicates(t)]
    else:
        import multiprocessing as mp
        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
            rows = [r for out in ex.map(_replicates, tasks) for r in out]
    return pd.DataFrame(rows)


def rate(k: int, n: int) -> dict:
    """A Monte Carlo rate: k of n, its standard error and a 95% Wilson interval."""
    if n == 0:
        return {"rate": None, "se": None, "ci": None, "n": 0}
    p = k / n
    z = 1.959964
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return {"rate": p, "se": math.sqrt(p * (1 - p) / n), "ci": [max(0.0, mid - half),
                                                                  min(1.0, mid + half)], "n": n}


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

    return {"low": bs[i] if i == 0 else cross(i - 1, i), "high": bs[j] if j == len(bs) - 1
            else cross(j + 1, j), "low_open": i == 0, "high_open": j == len(bs) - 1,
            "power": target}


def summarize(outcomes: pd.DataFrame) -> dict:
    """Per effect: power (claimed and the interval holds the truth), the claim rate, coverage,
    the median interval width; the false-claim rate under the null; the minimum detectable b."""
    out = {"power": {}, "power_mc": {}, "claim_rate": {}, "coverage": {},
           "median_interval_width": {}, "failed": {}}
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
    out.setdefault("false_claim", None)
    out["min_detectable_effect"] = min_detectable({float(k): v for k, v in out["power"].items()})
    return out
