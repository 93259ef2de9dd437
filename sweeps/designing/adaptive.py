"""Adaptive sequential sweeps: after a first batch, run the spec's trials that most narrow the
interval of the threshold base b (docs/science.md §4), until it is narrow enough or the budget is
spent. The choice rule (`Policy`) needs no Ray, so benchmarks can replay it;
sweeps/designing/adaptive_search.py hands its choices to Ray Tune as a Searcher. Each choice and its reason go to <store>/adaptive.jsonl.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sweeps.plans.adaptive_spec import (  # noqa: F401 (the table's home; imported from here too)
    KEYS,
    MIN_DEPTHS,
    MIN_WIDTHS,
    Adaptive,
    check_adaptive,
    parse_adaptive,
    too_few_shapes,
)

LOG = "adaptive.jsonl"  # in the store: one JSON object per chosen trial, per estimate and per stop
KAPPA_LAWS = ("two_regime", "combined")


@dataclass
class Cell:
    key: tuple[int, int, int]  # (depth, width, seed)
    trial_ids: tuple[str, ...]
    cost: float  # training FLOPs of its trials
    n_params: float  # Kaplan's N of its shape

    @property
    def label(self) -> str:
        d, w, s = self.key
        return f"d{d} w{w} seed {s}"


def spec_cells(spec) -> list[Cell]:
    """The spec's trials grouped into cells, with the planner's FLOPs as their cost."""
    from depthwidth.accounting import count_params
    from sweeps.plans.budget import resolve_model
    from sweeps.plans.plan import plan_rows

    cost = {p.trial_id: p.flops for p in plan_rows(spec)}
    groups: dict[tuple, list] = {}
    for t in spec.trials:
        groups.setdefault((int(t.model.depth), int(t.model.width), int(t.train.seed)), []).append(t)
    return [
        Cell(
            k,
            tuple(t.trial_id for t in ts),
            float(sum(cost[t.trial_id] for t in ts)),
            float(count_params(resolve_model(ts[0].model, ts[0].data)).n_params),
        )
        for k, ts in groups.items()
    ]


@dataclass(frozen=True)
class Estimate:
    """b after a round, as the report states it: its status, value and claimed 95% interval, and
    the κ-law fit with its bootstrap draws that the next round's choice is scored by (None before
    a fit)."""

    status: str = "not_identified"
    base: float | None = None
    ci: list[float] | None = None
    width: float = math.inf  # of the interval; infinite while none is claimed (no answer yet)
    claimed: bool = False
    n_runs: int | None = None
    reason: str = ""
    draws: np.ndarray | None = None  # b of each bootstrap refit of the fit
    b_fit: float | None = None
    fit: Any = None
    sigma2: float = 0.0  # the fit's mean squared residual

    def interval_text(self) -> str:
        return f"[{self.ci[0]:.3g}, {self.ci[1]:.3g}]" if self.ci else "(no interval)"

    def state_text(self) -> str:
        if self.status == "initial":
            return "first batch"
        if self.ci:
            return f"b = {self.base:.3g} {self.interval_text()}, {self.status}"
        return f"b {self.status.replace('_', ' ')}"

    def record(self, round_no: int) -> dict[str, Any]:
        """Its line of adaptive.jsonl."""
        width = self.width if math.isfinite(self.width) else None
        return log_record(
            "estimate",
            round=round_no,
            status=self.status,
            base=self.base,
            ci=self.ci,
            width=width,
            n_runs=self.n_runs,
        )


def estimate(runs: pd.DataFrame, n_boot: int = 100, seed: int = 0) -> Estimate:
    """b as the report states it (the κ-laws of analysis.laws.regimes and threshold.headline's rules
    for a claim) with its bootstrap draws. `runs`: depth, width, n_params, loss (one row per run,
    after the report's tuning selection)."""
    from analysis.laws import regimes, threshold

    n = int(len(runs))
    if n < 6 or runs["depth"].nunique() < 2 or runs["width"].nunique() < 2:
        return Estimate(n_runs=n, reason="too few runs to fit b")
    runs = runs.reset_index(drop=True).assign(run_id=lambda d: np.arange(len(d)))
    reg = regimes.fit_regimes(runs, n_boot=n_boot, seed=seed)
    none = threshold.fit_transition([])
    head = threshold.headline(reg, none, none)  # the analysis's answer, read here once
    claimed, interval = bool(head["claimed"]), head.get("base_ci")
    base, ci, width = None, None, math.inf
    if interval and None not in interval:
        lo, hi = interval
        base, ci, width = float(head["base"]), [float(lo), float(hi)], float(hi - lo)
    fitted: dict[str, Any] = {}
    for name in [reg.get("preferred")] + list(KAPPA_LAWS):
        fit = reg["fits"].get(name)
        if name in KAPPA_LAWS and fit is not None and fit.ok and fit.boot_theta is not None:
            r = np.asarray(fit.residuals, float)
            fitted = dict(
                draws=np.exp(np.asarray(fit.boot_theta)[:, -1]),
                b_fit=float(np.exp(fit.theta[-1])),
                fit=fit,
                sigma2=float(np.mean(r * r)) if len(r) else 0.0,
            )
            break
    return Estimate(
        status=head["status"],
        base=base,
        ci=ci,
        width=width if claimed else math.inf,  # an interval that is not claimed is no answer yet
        claimed=claimed,
        n_runs=n,
        reason=head.get("reason", ""),
        **fitted,
    )


@dataclass
class Decision:
    picks: list[tuple[Cell, str]] = field(default_factory=list)
    stop: str | None = None  # why the sweep stops; None: it goes on with `picks`
    estimate: Estimate = field(default_factory=Estimate)


class Policy:
    """Chooses cells in rounds. `decide(runs, done)` refits b on the runs so far and returns the
    next batch, each with its reason, or why to stop."""

    def __init__(self, cells: list[Cell], cfg: Adaptive):
        self.cells = {c.key: c for c in cells}
        self.cfg = cfg
        depths = sorted({k[0] for k in self.cells})
        widths = sorted({k[1] for k in self.cells})
        self.initial_n = cfg.initial or 2 * max(len(depths), len(widths))

    def spent(self, done: Iterable[tuple]) -> tuple[int, float]:
        cells = [self.cells[k] for k in done if k in self.cells]
        return sum(len(c.trial_ids) for c in cells), sum(c.cost for c in cells)

    def _fits_budget(self, cell: Cell, n: int, flops: float) -> bool:
        c = self.cfg
        return (not c.max_trials or n + len(cell.trial_ids) <= c.max_trials) and (
            not c.max_compute or flops + cell.cost <= c.max_compute * (1 + 1e-9)
        )

    def decide(self, runs: pd.DataFrame, done: set[tuple]) -> Decision:
        n, flops = self.spent(done)
        left = [c for k, c in self.cells.items() if k not in done]
        affordable = [c for c in left if self._fits_budget(c, n, flops)]
        if len(done) < self.initial_n:
            est = Estimate(status="initial")
            picks = self._initial(affordable, done)[: self.initial_n - len(done)]
            return self._finish(Decision(picks, estimate=est), left, n, flops)
        est = estimate(runs, self.cfg.bootstrap, self.cfg.seed)
        if est.width <= self.cfg.target_width:
            return Decision(
                stop=f"target reached: b's 95% interval is {est.interval_text()}, width "
                f"{est.width:.3g} <= {self.cfg.target_width:g}",
                estimate=est,
            )
        if est.draws is not None:
            picks = self._near_threshold(affordable, done, est)
        else:
            picks = self._fill(affordable, done, "b is not fitted yet")
        return self._finish(Decision(picks[: self.cfg.batch], estimate=est), left, n, flops)

    def _finish(self, d: Decision, left: list[Cell], n: int, flops: float) -> Decision:
        kept = []
        for cell, why in d.picks:  # the round as a whole stays within the budget
            if self._fits_budget(cell, n, flops):
                kept.append((cell, why))
                n, flops = n + len(cell.trial_ids), flops + cell.cost
        d.picks = kept
        if not d.picks:
            d.stop = (
                "every trial of the grid has run"
                if not left
                else f"budget spent: none of the {len(left)} cells left fits in {_budget_text(self.cfg)}"
            )
        return d

    def _initial(self, cells: list[Cell], done: set[tuple]) -> list[tuple[Cell, str]]:
        """An X across the grid (each depth with a narrow and a wide width, both diagonals), so
        the first fit sees both sides of any threshold; then the farthest shapes."""
        depths = sorted({k[0] for k in self.cells})
        widths = sorted({k[1] for k in self.cells})
        seed0 = min(k[2] for k in self.cells)
        want: list[tuple[int, int]] = []
        for i, d in enumerate(depths):
            j = round(i * (len(widths) - 1) / max(1, len(depths) - 1))
            want += [(d, widths[j]), (d, widths[len(widths) - 1 - j])]
        by_key = {c.key: c for c in cells}
        picks, seen = [], set()
        for d, w in want:
            key = (d, w, seed0)
            if key in by_key and key not in seen:
                seen.add(key)
                picks.append((by_key[key], "first batch: the grid's diagonals (both sides of any threshold)"))
        rest = [c for c in cells if c.key not in seen]
        taken = set(done) | seen
        return picks + self._fill(rest, taken, "first batch")

    def _fill(self, cells: list[Cell], done: set[tuple], why: str) -> list[tuple[Cell, str]]:
        """Farthest-first over (log depth, log width) from the shapes already chosen."""
        have = {(k[0], k[1]) for k in done}
        out, pool = [], list(cells)
        while pool:

            def gap(c):
                pts = [(math.log2(d), math.log2(w)) for d, w in have]
                x = (math.log2(c.key[0]), math.log2(c.key[1]))
                far = min((math.dist(x, p) for p in pts), default=math.inf)
                return (-far, c.cost)

            best = min(pool, key=gap)
            pool.remove(best)
            have.add(best.key[:2])
            out.append((best, f"{why}: the shape farthest from those run"))
        return out

    def _near_threshold(self, cells: list[Cell], done: set[tuple], est: Estimate) -> list[tuple[Cell, str]]:
        """Greedy, per unit of compute: the cells whose loss the bootstrap draws predict most in
        step with ln b, i.e. whose result would most shrink the bootstrap variance of ln b
        (a Gaussian update of the draws' covariance), alternately below and above the fitted L_th."""
        if not cells:
            return []
        fit, draws = est.fit, est.draws
        b_hat = est.base or est.b_fit
        n_params = np.array([c.n_params for c in cells])
        depth = np.array([c.key[0] for c in cells], float)
        width = np.array([c.key[1] for c in cells], float)
        with np.errstate(all="ignore"):
            pred = np.log(fit.predict(theta=np.asarray(fit.boot_theta), N=n_params, depth=depth, width=width))
        ok = np.all(np.isfinite(pred), axis=1)  # pred: (bootstrap draws, cells)
        C = np.cov(np.column_stack([np.log(draws[ok]), pred[ok]]), rowvar=False)
        noise = max(est.sigma2, 1e-8)
        cost = np.array([c.cost for c in cells])
        lth = np.log(width) / math.log(b_hat)
        above = depth > lth
        out, taken, side = [], np.zeros(len(cells), bool), None
        for _ in range(min(len(cells), max(self.cfg.batch, 1) * 4)):
            gain = C[0, 1:] ** 2 / (np.diag(C)[1:] + noise)
            score = np.where(taken, -np.inf, gain / cost)
            if side is not None and np.isfinite(score[above != side]).any():
                score = np.where(above != side, score, -np.inf)  # the other side of L_th next
            i = int(np.argmax(score))
            if not np.isfinite(score[i]):
                break
            c = cells[i]
            out.append(
                (
                    c,
                    f"b = {b_hat:.3g} {est.interval_text()} puts L_th({c.key[1]}) at {lth[i]:.2f}, depth "
                    f"{c.key[0]} {'above' if above[i] else 'below'} it; its loss is expected to cut "
                    f"the bootstrap variance of ln b by {100 * gain[i] / max(C[0, 0], 1e-300):.0f}%"
                    f", the most per FLOP on that side",
                )
            )
            taken[i], side = True, bool(above[i])
            k = i + 1  # condition the draws' covariance on this cell's result
            C = C - np.outer(C[:, k], C[k, :]) / (C[k, k] + noise)
        return out


def _budget_text(cfg: Adaptive) -> str:
    parts = ([f"{cfg.max_trials} trials"] if cfg.max_trials else []) + (
        [f"{cfg.max_compute:.3g} FLOPs"] if cfg.max_compute else []
    )
    return " and ".join(parts) or "the grid"


def log_record(kind: str, **fields_: Any) -> dict[str, Any]:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"kind": kind, "at": now, **fields_}


def read_log(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a killed driver
            continue
    return out
