"""How the headline depends on each slice of the design: every depth, width, budget and (with 3
seeds or more) seed left out in turn (ours; the loss laws of docs/science.md §4 and §9).

Each refit gives a verdict: the law BIC prefers and by how much, the status of the threshold base,
and b of the best threshold law with its profile interval. A slice is named in the headline when
its refit is a knife-edge (`_changes`): the preferred law or the claim changes, the lead falls to
a near-tie, b becomes identified or not, or b = 3 moves into or out of b's interval. Budgets
follow the design (token budgets, or FLOP budgets on an isoFLOP suite); past MAX_SEEDS_LEFT_OUT
seeds a sample is left out, and the report says which. The refits are light: a left-out slice
weighs zero, every refit of one law is solved in one batch from the full fit's θ̂ and its
profile's solutions (analysis/fitting/profile.py), each is polished by L-BFGS-B, and b's interval
is the profile's alone (no bootstrap, no crossovers). The verdict on all runs is recomputed the
same way, so each refit is compared with its like.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.fitting import fitcore, identify
from analysis.fitting._blas import single_threaded
from analysis.fitting.powerlaw import INSUFFICIENT, FitResult
from analysis.fitting.profile import deviance
from analysis.laws import regimes, threshold
from depthwidth.published import THEORY_BASE

KINDS = (
    ("depth", "depth"),
    ("width", "width"),
    ("tokens", "token budget"),
    ("flops", "FLOP budget"),
    ("seed", "seed"),
)
SLICE_POINTS = 12  # values of b in a slice's profile: 0.41 apart in ln b over [1.1, 100]
DEV_NEAR = 40.0  # a slice's profile is first refitted where the full one is this close to its minimum
MIN_SEEDS = 3  # leaving out one of two seeds leaves one: a refit on half the data, not a check
# Seeds left out one at a time, at most: past this a sample spread evenly over the seeds is, and
# the report says which. Each refit costs a fit of every law, and a seed is one draw of noise
# among many (12 shapes x 2,000 seeds would otherwise be 2,000 refits).
MAX_SEEDS_LEFT_OUT = 8
# FLOP budgets of an isoFLOP suite differ by factors of 2 or more; runs of one budget agree to a
# few percent (whole steps, rounded token counts), so a gap of 25% separates two budgets.
FLOP_GAP = np.log(1.25)
_NOT_REFIT = {"status": "insufficient_data", "reason": "not refitted for the sensitivity check", "points": []}
METHOD = (
    "each slice left out in turn (its points weigh zero); the four loss laws refitted from the full "
    "fit's solutions and polished, b's 95% interval from its profile likelihood alone (no "
    "bootstrap), the headline's rules applied without the transition widths; the row 'none' is "
    "all runs fitted the same way"
)


def _value(v) -> str:
    """A slice's value as its label shows it: 16, 2, or a token count as 1.02e5."""
    if isinstance(v, float) and v >= 1e4:
        mantissa, exponent = f"{v:.3g}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{v:g}"


def _shape(runs: pd.DataFrame) -> pd.Series:
    cols = [c for c in ("depth", "width") if c in runs] or ["n_params"]
    return runs[cols].astype(str).agg("x".join, axis=1)


def _shared(values: pd.Series, shape: pd.Series) -> bool:
    """Whether a budget is a slice of the design: most of its values are held by two shapes or more."""
    held = shape.groupby(values.to_numpy()).nunique()
    return bool(len(held) and (held >= 2).mean() >= 0.5)


def flop_budgets(runs: pd.DataFrame) -> pd.Series | None:
    """Each run's FLOP budget (the runs' `flops` where known, else 6·N·D), runs within FLOP_GAP
    of the next smaller one grouped with it, each group at its geometric mean; None without
    token counts."""
    if "tokens" not in runs or runs["tokens"].isna().any():
        return None
    flops = 6.0 * runs["n_params"].astype(float) * runs["tokens"].astype(float)
    if "flops" in runs:
        known = pd.to_numeric(runs["flops"], errors="coerce")
        flops = known.where(known > 0, flops)
    logc = np.log(flops.to_numpy(float))
    order = np.argsort(logc, kind="stable")
    group = np.empty(len(logc), int)
    group[order] = np.cumsum(np.r_[0, np.diff(logc[order]) > FLOP_GAP])
    mean = pd.Series(logc).groupby(group).transform("mean").to_numpy()
    return pd.Series(np.exp(mean), index=runs.index).map(lambda c: float(f"{c:.3g}"))


def budget_slices(runs: pd.DataFrame) -> tuple[str | None, pd.Series | None, str | None]:
    """The budget slices of the design: (kind, each run's value, a note). A token budget is a
    slice when its token count holds several shapes; on an isoFLOP suite, where every run has
    its own token count, the slice is the FLOP budget; where neither repeats across shapes,
    no budget is left out (it would remove a single run)."""
    if "tokens" not in runs or runs["tokens"].isna().any() or runs["tokens"].nunique() < 2:
        return None, None, None
    shape = _shape(runs)
    if _shared(runs["tokens"], shape):
        return "tokens", runs["tokens"].astype(float), None
    flops = flop_budgets(runs)
    if flops is not None and flops.nunique() >= 2 and _shared(flops, shape):
        return "flops", flops, "every run has its own token count, so each FLOP budget is left out in turn"
    return (
        None,
        None,
        "every run has its own token count and FLOP budget: no budget is a slice of this design",
    )


def _seed_sample(values: list) -> list:
    """At most MAX_SEEDS_LEFT_OUT seeds, spread evenly over the sorted seed values."""
    if len(values) <= MAX_SEEDS_LEFT_OUT:
        return values
    return [
        values[i] for i in np.unique(np.linspace(0, len(values) - 1, MAX_SEEDS_LEFT_OUT).round().astype(int))
    ]


def slices(runs: pd.DataFrame, table: pd.DataFrame) -> list[dict]:
    """The slices to leave out: {kind, value, label, keep (bool per row of `table`)}; a kind with
    one value (nothing would remain), or seeds fewer than MIN_SEEDS, has none. Budgets follow
    the design (budget_slices); past MAX_SEEDS_LEFT_OUT seeds a sample of them is left out."""
    by_run = runs.drop_duplicates("run_id").set_index("run_id")
    kind, budget, _ = budget_slices(by_run)
    columns = {"depth": by_run.get("depth"), "width": by_run.get("width"), "seed": by_run.get("seed")}
    if kind:
        columns[kind] = budget
    out = []
    for col, word in KINDS:
        series = columns.get(col)
        if series is None or series.isna().any():
            continue
        values = sorted(series.unique())
        if len(values) < 2 or (col == "seed" and len(values) < MIN_SEEDS):
            continue
        if col == "seed":
            values = _seed_sample(values)
        of_row = table["run_id"].map(series).to_numpy()
        for v in values:
            v = float(v) if col in ("width", "tokens", "flops") else int(v)
            out.append({"kind": col, "value": v, "label": f"{word} {_value(v)}", "keep": of_row != v})
    return out


def design_notes(runs: pd.DataFrame) -> list[str]:
    """What the slices leave out beyond one value of each kind at a time, in words."""
    by_run = runs.drop_duplicates("run_id")
    notes = []
    _, _, note = budget_slices(by_run)
    if note:
        notes.append(note)
    if "seed" in by_run:
        seeds = sorted(by_run["seed"].dropna().unique())
        if len(seeds) > MAX_SEEDS_LEFT_OUT:
            shown = ", ".join(f"{s:g}" for s in _seed_sample(seeds))
            notes.append(
                f"{len(seeds):,} seeds: {MAX_SEEDS_LEFT_OUT} of them, spread evenly over their values "
                f"({shown}), are each left out in turn (at most {MAX_SEEDS_LEFT_OUT} refits for seeds)"
            )
    return notes


def _bic(r: np.ndarray, w: np.ndarray, k: int) -> float:
    n = float(np.sum(w))
    return n * np.log(max(float(np.sum(w * r * r)), 1e-300) / n) + k * np.log(n)


def _profiles(res: FitResult, X: dict, logy: np.ndarray, W: np.ndarray, sel: np.ndarray):
    """The profile of b for every slice at once at the grid values `sel` of the full profile, each
    started from the full profile's fit there: (θ (S, len(sel), p), loss (S, len(sel)))."""
    law, (grid, rows) = res.law, res.profile_theta
    S, G = len(W), len(sel)
    lo, hi = law.bounds(np.exp(logy))
    rlo, rhi = np.tile(lo, (S * G, 1)), np.tile(hi, (S * G, 1))
    rlo[:, -1] = rhi[:, -1] = np.tile(grid[sel], S)
    th, obj = fitcore.batched_lm(
        law,
        np.tile(rows[sel], (S, 1)),
        X,
        logy,
        np.repeat(W, G, axis=0),
        iters=30,
        tol=1e-6,
        bounds=(rlo, rhi),
    )
    return th.reshape(S, G, -1), np.where(np.isfinite(obj), obj, np.inf).reshape(S, G)


def _thin(idx: np.ndarray, grid: np.ndarray, most: int) -> np.ndarray:
    """At most `most` of the grid values `idx`, spread evenly in ln b."""
    if len(idx) <= most:
        return idx
    c = grid[idx]
    return idx[np.unique(np.abs(c[:, None] - np.linspace(c[0], c[-1], most)[None, :]).argmin(axis=0))]


def _near(res: FitResult) -> tuple[np.ndarray, np.ndarray]:
    """The grid values of the full profile a slice's profile is refitted at: at most SLICE_POINTS
    of those where the full profile's deviance is at most DEV_NEAR, and the next value either
    side; and, for a slice whose interval reaches past them, SLICE_POINTS over the whole range."""
    grid = res.profile_theta[0]
    dev = np.asarray(res.profile["deviance"], float)
    near = np.flatnonzero(dev <= DEV_NEAR)
    sel = _thin(near, grid, SLICE_POINTS)
    sel = np.unique(np.r_[max(near.min() - 1, 0), sel, min(near.max() + 1, len(grid) - 1)])
    return sel, np.union1d(_thin(np.arange(len(grid)), grid, SLICE_POINTS), sel)


def _interval(law, X, logy, w, grid, pth, pobj, t, o) -> tuple[dict, np.ndarray, float]:
    """A slice's profile interval and its point fit: (interval, θ, loss). The slice's point fit
    (t, o) is counted as one of the profile's values.

    The values are batched Gauss–Newton solves, which can stall on the Huber surface with a loss
    too high and a Gaussian deviance either side of the truth; those that could lie inside the
    interval (deviance under twice the 95% point), and the first value outside on either side,
    are polished by L-BFGS-B before the interval is read. When a polished value's loss is below
    the point fit's, b is freed again from there and the interval read anew (as
    analysis/fitting/profile.py `profile_and_refit` does for the fit on all runs), so the point
    and its interval are those of one fit."""
    pth, pobj = pth.copy(), pobj.copy()
    for _ in range(3):
        iv, g = _read_interval(law, X, logy, w, grid, pth, pobj, t, o)
        if not pobj[g] < o * (1 - 1e-9):
            break
        t2, o2, _ = fitcore.polish(law, pth[g], X, logy, w, ftol=1e-10, maxiter=300)
        t, o = (t2, float(o2)) if o2 < pobj[g] else (pth[g].copy(), float(pobj[g]))
    else:
        iv, _ = _read_interval(law, X, logy, w, grid, pth, pobj, t, o)
    return iv, t, o


def _read_interval(law, X, logy, w, grid, pth, pobj, t, o) -> tuple[dict, int]:
    """The interval with (t, o) as the point fit, polishing the grid's values (pth, pobj) in place
    where they could lie inside it; and the grid value of the lowest loss."""
    c = np.r_[grid, t[-1]]
    order = np.argsort(c, kind="stable")
    lp, _ = law.evaluate(t[None, :], X, jac=False)
    rss = float(np.sum(w * (logy - lp[0]) ** 2))
    # n_eff: the runs left (each run weighs one in total, as in the full profile)
    dev = deviance(law, X, logy, w, np.vstack([pth, t[None, :]]), np.r_[pobj, o], rss, float(np.sum(w)))
    inside = np.flatnonzero(dev[order] <= 2 * identify.CHI2_95)
    todo = set(inside) | {inside.min() - 1, inside.max() + 1} if inside.size else set()
    lo, hi = law.bounds(np.exp(logy))
    for j in sorted(j for j in todo if 0 <= j < len(c) and order[j] != len(grid)):
        g = order[j]
        lo_g, hi_g = lo.copy(), hi.copy()
        lo_g[-1] = hi_g[-1] = c[g]
        t2, o2, _ = fitcore.polish(law, pth[g], X, logy, w, (lo_g, hi_g), ftol=1e-10, maxiter=150)
        if o2 < pobj[g]:
            pth[g], pobj[g] = t2, o2
    dev = deviance(law, X, logy, w, np.vstack([pth, t[None, :]]), np.r_[pobj, o], rss, float(np.sum(w)))
    iv = identify._profile_interval(np.exp(c[order]), dev[order], float(np.exp(t[-1])))
    return iv, int(np.argmin(pobj))


def _polished(law, X, logy, w, cands: list) -> tuple[np.ndarray | None, float]:
    """The lowest of the candidate fits after an L-BFGS-B polish; two candidates in the same
    basin of b (within a factor 1.5) are one, and only the lower is polished."""
    cands = sorted(cands, key=lambda c: c[1])
    if law.has_kappa and len(cands) > 1 and abs(cands[0][0][-1] - cands[1][0][-1]) < np.log(1.5):
        cands = cands[:1]
    best = (None, np.inf)
    for t, o in cands:
        if not np.isfinite(o):
            continue
        t2, o2, _ = fitcore.polish(law, t, X, logy, w, ftol=1e-10, maxiter=300)
        t2, o2 = (t2, float(o2)) if o2 < o else (t, float(o))
        if o2 < best[1]:
            best = (t2, o2)
    return best


def _refit_law(res: FitResult, X: dict, logy: np.ndarray, W: np.ndarray) -> list[tuple]:
    """Every slice's fit of one law: from the full fit's θ̂ (all slices in one batch) and, for a
    κ-law, from the lowest value of the slice's own profile. The profile is refitted first where
    the full one is within DEV_NEAR of its minimum, and over the whole grid for a slice whose
    interval reaches past those values. Returns per slice (θ, loss, profile or None)."""
    law, S = res.law, len(W)
    th, obj = fitcore.batched_lm(law, np.tile(np.asarray(res.theta, float), (S, 1)), X, logy, W, iters=100)
    if res.profile_theta is None:
        return [(*_polished(law, X, logy, W[s], [(th[s], obj[s])]), None) for s in range(S)]
    grid, (sel, every) = res.profile_theta[0], _near(res)
    pth, pobj = _profiles(res, X, logy, W, sel)
    out = []
    for s in range(S):
        g = int(np.argmin(pobj[s]))
        t, o = _polished(law, X, logy, W[s], [(th[s], obj[s]), (pth[s, g], pobj[s, g])])
        if t is None:  # no start reached a finite loss
            out.append((None, np.inf, None))
            continue
        iv, t, o = _interval(law, X, logy, W[s], grid[sel], pth[s], pobj[s], t, o)
        if (iv["open_below"] and sel[0] > every[0]) or (iv["open_above"] and sel[-1] < every[-1]):
            fth, fobj = _profiles(res, X, logy, W[[s]], every)
            g = int(np.argmin(fobj[0]))
            t, o = _polished(law, X, logy, W[s], [(t, o), (fth[0, g], fobj[0, g])])
            iv, t, o = _interval(law, X, logy, W[s], grid[every], fth[0], fobj[0], t, o)
        out.append((t, o, iv))
    return out


def _entry(res: FitResult, theta, obj, prof, X, logy, w) -> dict:
    """One refitted law as the headline reads a model: status, b, BIC and its profile."""
    law = res.law
    hits = identify.bound_hits(law, theta, logy)
    if prof is not None and prof["spans_range"]:
        hits.setdefault("b", identify.describe_profile(prof))
    lp, _ = law.evaluate(theta[None, :], X, jac=False)
    keep = w > 0
    entry = {
        "status": "not_identified" if hits else "ok",
        "reason": "; ".join(f"{k}: {v}" for k, v in hits.items()),
        "not_identified": hits,
        "params": {} if hits or not law.has_kappa else {"b": float(np.exp(theta[-1]))},
        "b": float(np.exp(theta[-1])) if law.has_kappa else None,
        "ci": {},
        "n_boot": 0,
        "profile": prof,
        "objective": float(obj),
        "bic": _bic((logy - lp[0])[keep], w[keep], law.n_params) if np.isfinite(obj) else None,
    }
    return entry


def _verdict(label: str, kind: str | None, value, models: dict, runs: pd.DataFrame) -> dict:
    """A refit's verdict: the preferred law, the headline's status and b, and the best threshold
    law's b with its profile interval."""
    ranked = {k: m for k, m in models.items() if m.get("bic") is not None}
    pref = min(ranked, key=lambda k: ranked[k]["bic"]) if ranked else None
    grid = threshold.swept_grid(runs)
    head = threshold.headline({"preferred": pref, "models": models}, _NOT_REFIT, _NOT_REFIT, grid=grid)
    kappa = [k for k in threshold.KAPPA_LAWS if (ranked.get(k) or {}).get("profile")]
    # A law whose threshold term vanished (an exponent on its bound) says nothing about b.
    alive = [k for k in kappa if set(ranked[k]["not_identified"]) <= {"b"}] or kappa
    best = min(alive, key=lambda k: ranked[k]["bic"], default=None)
    law_b = None
    if best is not None:
        p = ranked[best]["profile"]
        lo, hi = p["interval"]
        law_b = {
            "law": best,
            "status": ranked[best]["status"],
            "b": ranked[best]["b"],
            "interval": [lo, hi],
            "open": bool(p["open_below"] or p["open_above"]),
            "excludes_theory": not lo <= THEORY_BASE <= hi,
            # no run of this refit below log_3 d: an exclusion of b = 3 rests on the form alone
            "theory_form_alone": bool((threshold.theory_basis(grid, [lo, hi]) or {}).get("form_alone")),
        }
    others = sorted(m["bic"] for k, m in ranked.items() if k != pref)
    return {
        "left_out": label,
        "kind": kind,
        "value": value,
        "n_runs": int(runs["run_id"].nunique()),
        "preferred": pref,
        "bic_margin": float(others[0] - ranked[pref]["bic"]) if pref and others else None,
        "status": head["status"],
        "claimed": bool(head.get("claimed")),
        "base": head.get("base"),
        "base_ci": head.get("base_ci"),
        "consistent_with_theory": head.get("consistent_with_theory"),
        "threshold_law": law_b,
        "models": {
            k: {"status": m["status"], "bic": m.get("bic"), "b": m.get("b")} for k, m in models.items()
        },
    }


NEAR_TIE = 2.0  # BIC units: a lead below this does not tell two laws apart (Kass & Raftery 1995)
CHANGES = ("preferred", "status", "near_tie", "identified", "theory")


def _identified(row: dict) -> bool:
    """b has an estimate in this verdict: its best threshold law is fitted with b off its bounds
    and an interval that does not span the whole range."""
    tl = row.get("threshold_law")
    return bool(tl and tl["status"] == "ok")


def _theory_inside(row: dict) -> bool:
    """b = 3 lies inside b's interval (nothing excludes it where there is no interval)."""
    tl = row.get("threshold_law")
    return not (tl and tl["excludes_theory"])


def _changes(ref: dict, row: dict) -> list[str]:
    """What of the verdict on all runs a refit changes, each a knife-edge the headline names:
    the preferred law ("preferred"); whether b is claimed ("status"; "not claimed" and "not
    identified" both claim nothing); the same law preferred by less than NEAR_TIE units of BIC
    where all runs prefer it by more ("near_tie"); b identified where it is not, or the reverse
    ("identified"); b = 3 moved into or out of b's interval, b identified in both ("theory").
    Intervals are compared
    with the row 'none', refitted the same way (profile only), not with the headline's."""
    out = []
    if row["preferred"] != ref["preferred"]:
        out.append("preferred")
    if (row["status"] == "claimed") != (ref["status"] == "claimed"):
        out.append("status")
    was, now = ref.get("bic_margin"), row.get("bic_margin")
    if (
        row["preferred"] == ref["preferred"]
        and now is not None
        and now < NEAR_TIE <= (np.inf if was is None else was)
    ):
        out.append("near_tie")
    if _identified(row) != _identified(ref):
        out.append("identified")
    # b = 3 against an interval counts only where b is identified on both sides of the
    # comparison: the interval of a b on its bound says nothing (and "identified" names that move)
    if _identified(row) and _identified(ref) and _theory_inside(row) != _theory_inside(ref):
        out.append("theory")
    return out


_LAW_WORDS = {
    "kaplan": "N alone",
    "width_depth": "the separable width-depth law",
    "two_regime": "the two-regime threshold law",
    "combined": "the combined threshold law",
    None: "no law",
}
_STATUS_WORDS = {"claimed": "claimed", "not_claimed": "not claimed", "not_identified": "not identified"}


def _names(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def _grouped(refits: list[dict], what: str, key) -> dict:
    groups: dict = {}
    for r in refits:
        if what in r["changes"]:
            groups.setdefault(key(r) if callable(key) else r[key], []).append(r["left_out"])
    return groups


def _interval_text(row: dict) -> str:
    lo, hi = row["threshold_law"]["interval"]
    return f"[{lo:.3g}, {hi:.3g}]"


def _it(labels: list) -> str:
    return "it" if len(labels) == 1 else "any one of them"


def _by(margin) -> str:
    return "" if margin is None else f" by {margin:.3g} units of BIC"


def _law_parts(ref: dict, refits: list[dict]) -> list[str]:
    """The headline's parts on the preferred law: a change of law, or a lead that falls to a tie."""
    parts = []
    was = ref["preferred"]
    for new, labels in _grouped(refits, "preferred", "preferred").items():
        what = "N alone" if was == "kaplan" else "shape" if new == "kaplan" else _LAW_WORDS.get(was, was)
        parts.append(
            f"the preference for {what} rests on {_names(labels)}: without {_it(labels)}, "
            f"{_LAW_WORDS.get(new, new)} is preferred"
        )
    ties = [r for r in refits if "near_tie" in r["changes"]]
    if ties:
        each = "; ".join(f"without {r['left_out']}, {r['bic_margin']:.2g}" for r in ties)
        parts.append(
            f"{_LAW_WORDS.get(was, was)} leads{_by(ref['bic_margin'])} on all runs "
            f"but by less than {NEAR_TIE:g}, a near-tie, without {_names([r['left_out'] for r in ties])} ({each})"
        )
    return parts


def _b_parts(ref: dict, refits: list[dict]) -> list[str]:
    """The headline's parts on b: its claim, whether it is identified, and whether its interval
    holds the theory's b = 3."""
    parts = []
    for new, labels in _grouped(refits, "status", "status").items():
        parts.append(
            f"the verdict on b ({_STATUS_WORDS.get(ref['status'], ref['status'])}) rests on "
            f"{_names(labels)}: without {_it(labels)}, b is {_STATUS_WORDS.get(new, new)}"
        )
    moved = [r for r in refits if "identified" in r["changes"]]
    if moved and _identified(ref):
        parts.append(
            f"b is identified on all runs ({_interval_text(ref)}) but not without "
            f"{_names([r['left_out'] for r in moved])}"
        )
    elif moved:
        each = "; ".join(f"without {r['left_out']}, {_interval_text(r)}" for r in moved)
        parts.append(
            f"b is not identified on all runs but is without {_names([r['left_out'] for r in moved])} ({each})"
        )
    crossed = [r for r in refits if "theory" in r["changes"]]
    if crossed:
        side, other = ("inside", "outside") if _theory_inside(ref) else ("outside", "inside")
        each = "; ".join(
            f"without {r['left_out']}, {_interval_text(r)}" for r in crossed if r["threshold_law"]
        )
        parts.append(
            f"b = 3 lies {side} b's interval on all runs but {other} it without "
            f"{_names([r['left_out'] for r in crossed])}" + (f" ({each})" if each else "")
        )
    return parts


def headline_sentence(ref: dict, refits: list[dict], kinds: list[str]) -> str:
    """One clause per knife-edge (`_changes`), naming the slices it rests on; a near-tie on all
    runs said first; or that no slice moves the verdict."""
    parts = []
    margin = ref.get("bic_margin")
    if margin is not None and margin < NEAR_TIE:
        parts.append(
            f"on all runs {_LAW_WORDS.get(ref['preferred'], ref['preferred'])} leads by only "
            f"{margin:.2g} units of BIC, a near-tie"
        )
    parts += _law_parts(ref, refits) + _b_parts(ref, refits)
    if not parts:
        return (
            f"no single {_names(kinds).replace(' and ', ' or ')} left out changes the verdict "
            f"({len(refits)} refits)"
        )
    return "; ".join(parts)


def _absent(reason: str) -> dict:
    return {
        "status": "absent",
        "reason": reason,
        "reference": None,
        "refits": [],
        "changed": [],
        "headline": None,
    }


@single_threaded
def sensitivity(runs: pd.DataFrame, table: pd.DataFrame, fits: dict, weights=None) -> dict:
    """The loss laws of `fits` ({name: FitResult}, fitted on `table`, the runs or their weighted
    points) refitted with each slice of `runs` left out, and their verdicts beside the one on
    all runs. Returns the report's `sensitivity` section."""
    cuts = slices(runs, table)
    if not cuts:
        return _absent("no depth, width, token budget or seed has a second value to leave one out")
    keeps = [np.ones(len(table), bool)] + [c["keep"] for c in cuts]
    w = np.ones(len(table)) if weights is None else np.asarray(weights, float)
    W = np.stack(keeps) * w[None, :]
    logy = np.log(table["loss"].to_numpy(float))
    models: list[dict] = [{} for _ in keeps]
    for name, res in fits.items():
        fittable = res.status in ("ok", "not_identified") and len(res.theta)
        why = [None if fittable else res.reason or res.status] * len(keeps)
        if fittable:
            why = [regimes.unfit_reason(res.law, table[k]) for k in keeps]
            rows = [s for s, y in enumerate(why) if y is None]
            X = fitcore.make_X(res.law, **regimes._cols(table))
            X.update(res.centres)
            for s, (t, o, prof) in zip(rows, _refit_law(res, X, logy, W[rows])):
                if t is None:
                    why[s] = "the refit reached no finite loss"
                    continue
                models[s][name] = _entry(res, t, o, prof, X, logy, W[s])
        for s, y in enumerate(why):
            if y is not None:
                models[s][name] = {"status": INSUFFICIENT, "reason": y, "bic": None, "b": None}
    labels = [("none", None, None)] + [(c["label"], c["kind"], c["value"]) for c in cuts]
    kept_runs = [runs[runs["run_id"].isin(table.loc[k, "run_id"])] for k in keeps]
    rows = [_verdict(*lab, m, r) for lab, m, r in zip(labels, models, kept_runs)]
    ref, refits = rows[0], rows[1:]
    for r in refits:
        r["changes"] = _changes(ref, r)
    kinds = [word for col, word in KINDS if any(c["kind"] == col for c in cuts)]
    return {
        "status": "ok",
        "method": METHOD,
        "notes": design_notes(runs),
        "left_out": kinds,
        "reference": ref,
        "refits": refits,
        "changed": [r["left_out"] for r in refits if r["changes"]],
        "headline": headline_sentence(ref, refits, kinds),
    }
