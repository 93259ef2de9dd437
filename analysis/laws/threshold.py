"""Model-free estimators of the depth threshold and the headline threshold base b.

Follows docs/science.md §4 (ours, testing Levine et al. 2020's L_th = log_3 d_x): crossover sizes where
depth L' starts to beat depth L at equal N, the optimal depth per size, the transition widths and
the fit log d = a + β·L through them (base e^β; theory ln 3, Levine's empirical 0.0555), and the
knee of loss-vs-depth at fixed width.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from analysis.fitting.fitcore import LOG_BASE_BOUNDS
from analysis.fitting.powerlaw import FitResult
from depthwidth.published import LEVINE_INTERCEPT, LEVINE_SLOPE, THEORY_BASE

LEVINE_EMPIRICAL = {"a": LEVINE_INTERCEPT, "beta": LEVINE_SLOPE}  # d_x*(L), docs/science.md §1
_GRID = 256
# A crossover defines a transition point only when most bootstrap replicates find it too: with
# seed noise of ~1-2%, nearly tied depths otherwise "cross" in about half of the replicates.
MIN_P_CROSSOVER = 0.9


def width_at(runs: pd.DataFrame, depth: int, n_params: np.ndarray) -> np.ndarray:
    """Width of a depth-`depth` model with N parameters, interpolated in log-log from the runs
    (so any parameter count, not only 12·L·d², is inverted consistently)."""
    g = runs[runs["depth"] == depth].groupby("width", as_index=False)["n_params"].mean()
    g = g.sort_values("n_params")
    lw = np.interp(
        np.log(n_params), np.log(g["n_params"].to_numpy(float)), np.log(g["width"].to_numpy(float))
    )
    return np.exp(lw)


def _first_crossing(diff: np.ndarray) -> tuple[int | None, str]:
    """Index i where diff changes from > 0 (deeper worse) to ≤ 0 between grid points i, i+1."""
    pos = diff > 0
    change = np.flatnonzero(pos[:-1] & ~pos[1:])
    if change.size:
        return int(change[0]), "crossover"
    return None, "shallower_better_throughout" if pos.all() else (
        "deeper_better_throughout" if (~pos).all() else "deeper_falls_behind"
    )


def crossover(runs: pd.DataFrame, d1: int, f1: FitResult, d2: int, f2: FitResult) -> dict:
    """Where depth d2 (> d1) starts to beat depth d1 at equal N, within the N range both cover."""
    out = {
        "depths": [d1, d2],
        "status": "insufficient_data",
        "n_params": None,
        "n_params_ci": None,
        "widths": None,
        "p_crossover": None,
    }
    if not (f1.ok and f2.ok):
        missing = [f"depth {d}: {f.reason}" for d, f in ((d1, f1), (d2, f2)) if not f.ok]
        out["reason"] = "no per-depth fit (" + "; ".join(missing) + ")"
        return out
    n1 = runs.loc[runs["depth"] == d1, "n_params"]
    n2 = runs.loc[runs["depth"] == d2, "n_params"]
    lo, hi = max(n1.min(), n2.min()), min(n1.max(), n2.max())
    if not lo < hi:
        out.update(status="no_overlap", reason="the two depths cover disjoint ranges of N")
        return out
    grid = np.logspace(np.log10(lo), np.log10(hi), _GRID)
    diff = np.log(f2.predict(N=grid)) - np.log(f1.predict(N=grid))
    i, kind = _first_crossing(diff)
    out["range"] = [float(lo), float(hi)]
    if i is None:
        out.update(status="no_crossover_in_range", which=kind)
    else:
        g = lambda ln: float(
            np.log(f2.predict(N=np.array([np.exp(ln)]))[0]) - np.log(f1.predict(N=np.array([np.exp(ln)]))[0])
        )
        n_star = float(np.exp(brentq(g, np.log(grid[i]), np.log(grid[i + 1]))))
        out.update(
            status="ok",
            n_params=n_star,
            widths=[
                float(width_at(runs, d1, np.array([n_star]))[0]),
                float(width_at(runs, d2, np.array([n_star]))[0]),
            ],
        )
    draws = boot_crossovers(f1, f2, grid)
    if draws is not None:
        found = np.isfinite(draws)
        out["p_crossover"] = float(found.mean())
        out["n_boot"] = int(len(draws))
        if found.sum() >= 10:
            out["n_params_ci"] = [float(q) for q in np.percentile(draws[found], [2.5, 97.5])]
    return out


def boot_crossovers(f1: FitResult, f2: FitResult, grid: np.ndarray) -> np.ndarray | None:
    """Crossover N for paired bootstrap draws of the two depths' fits (NaN where none in range)."""
    if f1.boot_theta is None or f2.boot_theta is None:
        return None
    B = min(len(f1.boot_theta), len(f2.boot_theta))
    if B < 10:
        return None
    l1 = np.log(f1.predict(theta=f1.boot_theta[:B], N=grid))
    l2 = np.log(f2.predict(theta=f2.boot_theta[:B], N=grid))
    diff = l2 - l1
    pos = diff > 0
    change = pos[:, :-1] & ~pos[:, 1:]
    has = change.any(axis=1)
    i = np.argmax(change, axis=1)
    rows = np.arange(B)
    # Linear interpolation of the sign change in log N between the bracketing grid points.
    a, b = diff[rows, i], diff[rows, np.minimum(i + 1, len(grid) - 1)]
    t = np.where(a != b, a / np.where(a != b, a - b, 1.0), 0.0)
    lg = np.log(grid)
    ln_star = lg[i] + t * (lg[np.minimum(i + 1, len(grid) - 1)] - lg[i])
    return np.exp(np.where(has, ln_star, np.nan))


def all_crossovers(runs: pd.DataFrame, fits: dict[int, FitResult]) -> list[dict]:
    depths = sorted(fits)
    return [
        crossover(runs, d1, fits[d1], d2, fits[d2]) for k, d1 in enumerate(depths) for d2 in depths[k + 1 :]
    ]


def optimal_depth(runs: pd.DataFrame, fits: dict[int, FitResult], n_grid: int = 40) -> dict:
    """L*(N): the depth whose fitted curve is lowest at N, among depths whose runs cover N."""
    ok = {d: f for d, f in fits.items() if f.ok}
    if len(ok) < 2:
        return {
            "status": "insufficient_data",
            "reason": f"needs fitted curves for at least two depths, has {len(ok)}",
            "points": [],
        }
    rng = {
        d: (runs.loc[runs["depth"] == d, "n_params"].min(), runs.loc[runs["depth"] == d, "n_params"].max())
        for d in ok
    }
    grid = np.logspace(
        np.log10(min(r[0] for r in rng.values())), np.log10(max(r[1] for r in rng.values())), n_grid
    )
    points = []
    for N in grid:
        cands = {
            d: float(f.predict(N=np.array([N]))[0])
            for d, f in ok.items()
            if rng[d][0] * (1 - 1e-9) <= N <= rng[d][1] * (1 + 1e-9)
        }
        if len(cands) < 2:
            continue
        best = min(cands, key=cands.get)
        points.append(
            {
                "n_params": float(N),
                "depth": int(best),
                "loss": cands[best],
                "width": float(width_at(runs, best, np.array([N]))[0]),
                "n_compared": len(cands),
            }
        )
    return {
        "status": "ok" if points else "insufficient_data",
        "points": points,
        "reason": "" if points else "no size is covered by two fitted depths",
    }


def line_fit(depth: np.ndarray, log_width: np.ndarray) -> tuple[float, float]:
    """Least-squares log d = a + β·L; returns (a, β)."""
    A = np.c_[np.ones_like(depth), depth]
    (a, beta), *_ = np.linalg.lstsq(A, log_width, rcond=None)
    return float(a), float(beta)


def transition_points(crossovers: list[dict], depths: list[int]) -> list[dict]:
    """Crossovers of consecutive depths → (depth midway, geometric-mean width): at the crossover
    neither depth is optimal, so the optimal depth for that width lies between the two. Only
    crossovers found in at least MIN_P_CROSSOVER of the bootstrap replicates count."""
    cons = {(depths[k], depths[k + 1]) for k in range(len(depths) - 1)}
    pts = []
    for c in crossovers:
        robust = c.get("p_crossover") is None or c["p_crossover"] >= MIN_P_CROSSOVER
        if c["status"] == "ok" and tuple(c["depths"]) in cons and robust:
            d1, d2 = c["depths"]
            pts.append(
                {
                    "depth": (d1 + d2) / 2,
                    "width": float(np.sqrt(c["widths"][0] * c["widths"][1])),
                    "n_params": c["n_params"],
                    "depths": [d1, d2],
                }
            )
    return pts


def fit_transition(points: list[dict], draws: np.ndarray | None = None, source: str = "crossovers") -> dict:
    """log d = a + β·L through transition points; base e^β with intervals (and a band for the
    line) from bootstrap replicates of (a, β) in `draws` (B, 2)."""
    out = {
        "source": source,
        "points": points,
        "theory": {"a": 0.0, "beta": float(np.log(THEORY_BASE))},
        "levine_empirical": dict(LEVINE_EMPIRICAL),
        "a": None,
        "beta": None,
        "base": None,
        "beta_ci": None,
        "base_ci": None,
        "n_boot": 0,
        "band": None,
    }
    if len(points) < 2:
        out.update(
            status="insufficient_data", reason=f"needs at least 2 transition points, has {len(points)}"
        )
        return out
    L = np.array([p["depth"] for p in points], float)
    lw = np.log([p["width"] for p in points])
    if np.ptp(L) == 0:
        out.update(status="insufficient_data", reason="all transition points are at one depth")
        return out
    a, beta = line_fit(L, lw)
    out.update(status="ok", reason="", a=a, beta=beta, base=float(np.exp(beta)))
    if draws is not None and len(draws) >= 10:
        lo, hi = np.percentile(draws[:, 1], [2.5, 97.5])
        lo_b, hi_b = np.exp(LOG_BASE_BOUNDS)
        if np.exp(lo) <= lo_b and np.exp(hi) >= hi_b:
            # The interval covers every base the κ-laws may take: no estimate to report.
            out.update(
                status="not_identified",
                a=None,
                beta=None,
                base=None,
                n_boot=int(len(draws)),
                reason=f"the 95% bootstrap interval of the base, [{np.exp(lo):.3g}, "
                f"{np.exp(hi):.3g}], spans the whole range [{lo_b:.3g}, {hi_b:.3g}]: "
                f"the line through {len(points)} points is not identified",
            )
            return out
        grid = np.linspace(L.min() - 0.5, L.max() + 0.5, 25)
        lines = draws[:, :1] + draws[:, 1:] * grid[None, :]
        out.update(
            beta_ci=[float(lo), float(hi)],
            base_ci=[float(np.exp(lo)), float(np.exp(hi))],
            n_boot=int(len(draws)),
            band={
                "depth": grid.tolist(),
                "width_lo": np.exp(np.percentile(lines, 2.5, axis=0)).tolist(),
                "width_hi": np.exp(np.percentile(lines, 97.5, axis=0)).tolist(),
            },
        )
    return out


def transition_draws(runs, crossovers, points, fits) -> np.ndarray | None:
    """Bootstrap replicates of (a, β): each replicate's crossovers (from the paired per-depth
    draws) give its own transition widths, and the line is refitted through those it has."""
    if len(points) < 2:
        return None
    L = np.array([p["depth"] for p in points], float)
    cols = []
    for p in points:
        d1, d2 = p["depths"]
        c = next(c for c in crossovers if c["depths"] == [d1, d2])
        grid = np.logspace(np.log10(c["range"][0]), np.log10(c["range"][1]), _GRID)
        dr = boot_crossovers(fits[d1], fits[d2], grid)
        if dr is None:
            return None
        w = np.full(len(dr), np.nan)
        m = np.isfinite(dr)
        w[m] = 0.5 * (np.log(width_at(runs, d1, dr[m])) + np.log(width_at(runs, d2, dr[m])))
        cols.append(w)
    B = min(len(c) for c in cols)
    lw = np.stack([c[:B] for c in cols], axis=1)
    lines = [
        line_fit(L[m], row[m]) for row in lw for m in [np.isfinite(row)] if m.sum() >= 2 and np.ptp(L[m]) > 0
    ]
    return np.array(lines).reshape(-1, 2)


def knee(depths: np.ndarray, log_loss: np.ndarray) -> float | None:
    """Breakpoint of a continuous two-segment line through log-loss vs depth, kept only when loss
    falls faster before it than after (the double-exponential regime giving way to saturation)."""
    if len(depths) < 5:  # each segment needs at least two depths beside the breakpoint
        return None
    best = (np.inf, None)
    for c in np.linspace(depths[1], depths[-2], 200):
        A = np.c_[np.ones_like(depths), np.minimum(depths - c, 0), np.maximum(depths - c, 0)]
        coef, *_ = np.linalg.lstsq(A, log_loss, rcond=None)
        rss = float(np.sum((A @ coef - log_loss) ** 2))
        if rss < best[0]:
            best = (rss, (c, coef))
    c, (_, s1, s2) = best[1]
    return float(c) if s1 < 0 and abs(s2) < abs(s1) else None


def knees(runs: pd.DataFrame, n_boot: int = 200, seed: int = 0) -> dict:
    """The knee depth per fixed width (seeds averaged) and the line log d = a + β·knee through
    them; its interval comes from resampling the widths' knee points with replacement."""
    pts = []
    for w, g in runs.groupby("width"):
        m = g.groupby("depth")["loss"].mean().sort_index()
        k = knee(m.index.to_numpy(float), np.log(m.to_numpy(float)))
        if k is not None:
            pts.append({"width": float(w), "depth": k})
    draws = None
    if len(pts) >= 3 and n_boot > 0:
        L = np.array([p["depth"] for p in pts])
        lw = np.log([p["width"] for p in pts])
        idx = np.random.default_rng(seed).integers(0, len(pts), size=(n_boot, len(pts)))
        draws = np.array([line_fit(L[r], lw[r]) for r in idx if np.ptp(L[r]) > 0]).reshape(-1, 2)
    return fit_transition(pts, draws, source="knees")


KAPPA_LAWS = ("two_regime", "combined")


def _hull(*intervals) -> list | None:
    ivs = [iv for iv in intervals if iv and None not in iv]
    return [min(i[0] for i in ivs), max(i[1] for i in ivs)] if ivs else None


def _kappa_estimate(models: dict, name: str | None) -> dict | None:
    """b from a κ-law: its interval is the hull of the bootstrap percentile interval and the
    profile-likelihood interval, so an estimate counts only where both bound it."""
    if name not in KAPPA_LAWS or models[name].get("status") != "ok":
        return None
    m = models[name]
    prof = m.get("profile") or {}
    ci = _hull(m["ci"].get("b"), prof.get("interval"))
    return {
        "law": name,
        "base": m["params"].get("b"),
        "base_ci": ci,
        "bootstrap_ci": m["ci"].get("b"),
        "profile": prof or None,
        "open": bool(prof.get("open_below") or prof.get("open_above")),
        "method": f"the {name} law (docs/science.md §4) with b free, preferred by BIC; 95% "
        f"interval: the hull of {m['n_boot']} bootstrap replicates over runs "
        f"({m.get('bootstrap_method', 'refit').replace('_', '-')}) and the profile "
        f"likelihood of b",
    }


def _transition_estimate(tf: dict) -> dict | None:
    if tf.get("status") != "ok" or not tf.get("base_ci"):
        return None
    return {
        "base": tf["base"],
        "base_ci": tf["base_ci"],
        "method": f"transition widths: log d = a + beta*L through the crossovers of "
        f"{len(tf['points'])} pairs of consecutive depths, base e^beta; 95% interval "
        f"from {tf['n_boot']} bootstrap replicates of the per-depth fits",
    }


def _not_identified_reason(models: dict, transition: dict, design: dict | None) -> str:
    """Why b is not identified, and which design would identify it."""
    kappa = [
        f"{k}: {models[k]['reason']}" for k in KAPPA_LAWS if k in models and models[k].get("status") != "ok"
    ]
    parts = ["b is not identified by this design"]
    if kappa:
        parts.append("the threshold laws give no estimate (" + "; ".join(kappa) + ")")
    if transition.get("status") != "ok":
        parts.append(f"the transition widths give none ({transition.get('reason', '')})")
    if design:
        rich = design.get("depths_with_3_widths") or []
        parts.append(
            f"{len(rich)} of {design.get('n_depths')} depths have the 3 or more widths "
            f"that the per-depth fits and crossovers need"
        )
        parts.append("a design that would identify it: " + design["text"])
    return "; ".join(parts)


def swept_grid(runs: pd.DataFrame) -> dict[float, list[int]]:
    """{width: the depths run at that width}, the design the located rule checks against."""
    return {float(w): sorted(int(d) for d in g["depth"].unique()) for w, g in runs.groupby("width")}


def _span(depths: list[int]) -> str:
    return f"{depths[0]}–{depths[-1]}" if depths[-1] != depths[0] else f"{depths[0]}"


def _side(lth: float, lo: float, hi: float, depths: list[int]) -> str:
    """Where one width's L_th lies against the depths run at it (docs/science.md §4, located):
    'located' (the whole interval inside, runs strictly below and above the estimate), 'beyond'
    (the estimate past the deepest run), 'below' (before the shallowest) or 'wide' (the estimate
    inside but its interval reaching outside the depths run)."""
    if lth > depths[-1]:
        return "beyond"
    if lth < depths[0]:
        return "below"
    both = any(d < lth for d in depths) and any(d > lth for d in depths)
    return "located" if both and depths[0] <= lo and hi <= depths[-1] else "wide"


def locate(base: float, base_ci: list, grid: dict[float, list[int]]) -> dict:
    """The located rule: L_th = log_b d with its interval at each width swept, against the depths
    run at that width. The threshold is located when at one width or more the whole interval lies
    inside the depths run there, with runs on both sides; `text` says what the data show when not."""
    per = []
    for w, depths in sorted(grid.items()):
        lth = float(np.log(w) / np.log(base))
        lo, hi = sorted(float(np.log(w) / np.log(b)) for b in base_ci)
        per.append(
            {
                "width": w,
                "depths": depths,
                "L_th": lth,
                "L_th_ci": [lo, hi],
                "side": _side(lth, lo, hi, depths),
            }
        )
    sides = {p["side"] for p in per}
    all_depths = sorted({d for p in per for d in p["depths"]})
    located = [p["width"] for p in per if p["side"] == "located"]
    if located:
        text = (
            f"the fitted L_th and its interval lie inside the depths swept at width"
            f"{'s' if len(located) > 1 else ''} {', '.join(f'{w:g}' for w in located)}"
        )
    elif sides == {"beyond"}:
        text = (
            f"depth still pays at every depth swept ({_span(all_depths)}); any threshold lies "
            f"beyond depth {all_depths[-1]} at these widths"
        )
    elif sides == {"below"}:
        text = (
            f"every depth swept ({_span(all_depths)}) lies past the fitted threshold; any "
            f"threshold lies below depth {all_depths[0]} at these widths"
        )
    else:
        text = (
            f"at no width swept does the interval of L_th fall inside the depths run there "
            f"({_span(all_depths)}), with runs on both sides"
        )
    return {
        "located": bool(located),
        "located_widths": located,
        "per_width": per,
        "depths": all_depths,
        "text": text,
    }


def _apply_located_rule(out: dict, grid: dict | None) -> None:
    """A κ-law's b is claimed only where the threshold it implies is located in the runs; else
    the estimate stays in the report as an extrapolation resting on the law's form alone."""
    if not grid or out["base"] is None or not out.get("base_ci") or None in out["base_ci"]:
        return
    if (out.get("method") or "").startswith("transition"):
        # Crossovers are found inside the runs' range of N, between consecutive depths swept.
        out["location"] = {
            "located": True,
            "text": "the transition widths are crossovers "
            "found between depths swept, inside the runs' range of N",
        }
        return
    loc = locate(out["base"], out["base_ci"], grid)
    out["location"] = loc
    if not loc["located"] and out["claimed"]:
        out.update(
            claimed=False,
            status="not_claimed",
            extrapolation=True,
            reason=f"the threshold is not located in these runs: {loc['text']}",
        )
    elif not loc["located"] and out["status"] == "not_claimed":
        # not claimed for its interval, and its L_th also falls outside the depths run at every
        # width: what the runs show is that side of the threshold, whatever the interval
        sides = {p["side"] for p in loc["per_width"]}
        out["extrapolation"] = sides in ({"beyond"}, {"below"})


def headline(
    regimes: dict,
    transition: dict,
    knee_fit: dict,
    design: dict | None = None,
    grid: dict[float, list[int]] | None = None,
) -> dict:
    """threshold.base: b in L_th = log_b(d_x), how it was obtained, and whether it is claimed.
    With `grid` ({width: depths run}, `swept_grid`), a b that passes every test below is claimed
    only when the threshold it implies is located inside the depths swept (`locate`)."""
    out = _headline(regimes, transition, knee_fit, design)
    _apply_located_rule(out, grid)
    out["theory_basis"] = theory_basis(grid, out.get("base_ci"))
    if out.get("cross_check"):
        out["cross_check"]["theory_basis"] = theory_basis(grid, out["cross_check"].get("base_ci"))
    return out


FORM_ALONE = (
    "no run lies below L_th = log_3 d (every depth run is at or past log_3 of its width), so the "
    "exclusion of b = 3 rests on the law's form in the saturating regime alone"
)


def theory_basis(grid: dict[float, list[int]] | None, base_ci) -> dict | None:
    """What an interval of b that excludes the theory's b = 3 rests on: runs below L_th = log_3 d
    (where b = 3 says depth pays most) tested against the law, or, with none there, the law's
    form in the saturating regime alone (docs/science.md §4). None without a grid or interval."""
    if not grid or not base_ci or None in base_ci:
        return None
    below = sum(1 for w, depths in grid.items() for d in depths if d < np.log(w) / np.log(THEORY_BASE) - 1e-9)
    excluded = not base_ci[0] <= THEORY_BASE <= base_ci[1]
    alone = bool(excluded and below == 0)
    return {
        "shapes_below": int(below),
        "excluded": bool(excluded),
        "form_alone": alone,
        "text": FORM_ALONE if alone else None,
    }


def _headline(regimes: dict, transition: dict, knee_fit: dict, design: dict | None = None) -> dict:
    """threshold.base: b in L_th = log_b(d_x) and how it was obtained.

    The transition widths come first: where depth L+1 starts to beat depth L at equal N is the
    threshold's own definition and assumes no loss law. When no consecutive depths cross in range
    (as under the §4 law, where deeper always wins at equal N) the preferred κ-law's b is used.
    Nothing is claimed when a law without a threshold is preferred, when b is not identified (on
    its bound, or an interval spanning the range), when its interval reaches a search bound, or
    when the interval spans more than a factor of 4; the other estimate is kept as a cross-check.
    `status` is 'claimed', 'not_claimed', 'not_identified' or 'absent'."""
    out = {
        "status": "not_claimed",
        "base": None,
        "base_ci": None,
        "method": None,
        "claimed": False,
        "consistent_with_theory": None,
        "theory_base": THEORY_BASE,
        "transition_fit": transition,
        "knee_fit": knee_fit,
        "cross_check": None,
    }
    pref = regimes.get("preferred")
    models = regimes.get("models", {})
    kappa = _kappa_estimate(models, pref)
    if kappa is None and pref in KAPPA_LAWS and "b" not in models[pref].get("not_identified", {}):
        # The preferred κ-law left another parameter (e.g. a vanishing term) on its bound; the
        # other κ-law may still bound b.
        alt = next(k for k in KAPPA_LAWS if k != pref)
        kappa = _kappa_estimate(models, alt)
        if kappa is not None:
            kappa["method"] = (
                f"the {alt} law (the preferred {pref} law is not identified: "
                f"{models[pref]['reason']}); " + kappa["method"].split("; ", 1)[1]
            )
    trans = _transition_estimate(transition)
    if pref == "kaplan":
        out.update(
            method="none",
            reason="the shape-agnostic law E + A·N^-alpha is preferred by "
            "BIC: loss depends on N alone in these runs, so no depth threshold is claimed",
        )
        return out
    if pref == "width_depth" and trans is None:
        return _no_threshold_law(out, models, transition, design)
    chosen, other = (trans, kappa) if trans else (kappa, None)
    if chosen is None:
        if pref in KAPPA_LAWS or any(models.get(k, {}).get("status") == "not_identified" for k in KAPPA_LAWS):
            out.update(
                status="not_identified",
                method="none",
                reason=_not_identified_reason(models, transition, design),
            )
        else:
            out.update(
                method="none",
                reason="neither a threshold law nor the transition widths "
                "could be fitted: "
                + "; ".join(
                    filter(None, [models.get("two_regime", {}).get("reason"), transition.get("reason")])
                ),
            )
        return out
    return _judge(out, chosen, kappa, other)


def _no_threshold_law(out: dict, models: dict, transition: dict, design: dict | None) -> dict:
    """The separable width-depth law is preferred: nothing is claimed, and the best threshold
    law's b, where it has one, is quoted beside it (a cross-check with nothing to agree with)."""
    best = min(
        (k for k in KAPPA_LAWS if models.get(k, {}).get("bic") is not None),
        key=lambda k: models[k]["bic"],
        default=None,
    )
    preferred = (
        "the separable width-depth law, which has no threshold, is preferred by BIC over the threshold laws"
    )
    if _kappa_estimate(models, best):
        out["cross_check"] = _kappa_estimate(models, best)
        out.update(
            method="none",
            reason=f"{preferred} (best threshold law: {best}): shape "
            f"matters in these runs, but they show no threshold",
        )
    else:
        out.update(
            status="not_identified",
            method="none",
            reason=(_not_identified_reason(models, transition, design) + f"; {preferred}"),
        )
    return out


def _judge(out: dict, chosen: dict, kappa: dict | None, other: dict | None) -> dict:
    """The chosen estimate with the other as a cross-check; claimed only with a closed interval
    inside the search range that spans at most a factor of 4."""
    out.update(base=chosen["base"], base_ci=chosen["base_ci"], method=chosen["method"], law=chosen.get("law"))
    if chosen is kappa:
        out.update(bootstrap_ci=kappa["bootstrap_ci"], profile=kappa["profile"])
    if other is not None and other.get("base_ci"):
        a, b = chosen["base_ci"], other["base_ci"]
        out["cross_check"] = {**other, "agree": bool(a[0] <= b[1] and b[0] <= a[1])}
    ci = out["base_ci"]
    if ci is None or None in ci:
        out["reason"] = "no bootstrap interval, so the estimate is not claimed"
        return out
    lo_b, hi_b = np.exp(LOG_BASE_BOUNDS)
    if chosen is kappa and kappa["open"]:
        out["reason"] = (
            "the interval of b reaches the edge of its search range "
            f"[{lo_b:.3g}, {hi_b:.3g}]: the data bound b on one side only"
        )
        return out
    out["consistent_with_theory"] = bool(ci[0] <= THEORY_BASE <= ci[1])
    out["claimed"] = bool(ci[1] / ci[0] <= 4.0)
    out["status"] = "claimed" if out["claimed"] else "not_claimed"
    out["reason"] = (
        "" if out["claimed"] else f"the 95% interval [{ci[0]:.3g}, {ci[1]:.3g}] spans more than a factor of 4"
    )
    return out
