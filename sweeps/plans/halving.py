"""Successive halving over one axis (the learning rate) within each group of a sweep's trials.

    [halving]
    axis = "lr"     # the swept axis to choose per group (default lr)
    eta = 3         # keep the best ⌈n/eta⌉ at each rung (default 3)
    rungs = 1       # rungs at 1/eta^rungs, ..., 1/eta of each run's steps (default 1)
    at = [0.67]     # or: the rungs at these shares of each run's steps instead (increasing, in (0, 1))

A group is the trials that differ only in `axis` (one shape, one token budget, one seed). At each
rung every survivor's validation loss at that step is compared, the best ⌈n/eta⌉ go on and the
others stop there (a member stops as soon as ⌈n/eta⌉ others have beaten it at the rung), stored with status "stopped" and the losses they reached: the rule is
analysis/readers/halving.py's, which the analysis applies again to the stored rows to know the finals.

This module decides: the `[halving]` table, each trial's group and rung steps, what a halving
costs, and each row's `halving` record. How it runs, the board actor and a trial's side of it,
lives where trials run (sweeps/running/halving_board.py); the groups run side by side, the
service ordering the trials group by group (`grouped`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeps.plans.errors import SpecError, fail, known_table, number, text

KEYS = ("axis", "eta", "rungs", "at")
MAX_RUNGS = 20
BOARD_PREFIX = "depthwidth-halving-"


@dataclass(frozen=True)
class Halving:
    axis: str = "lr"
    eta: int = 3
    rungs: int = 1
    # the rungs' shares of a run's steps, when placed by hand (`at`); empty: at 1/eta^k. A later
    # rung sees complete runs of more of the budget, where the best rate may have moved
    # (docs/bench/wsd.md, section 3), at a higher cost
    at: tuple[float, ...] = ()

    def shares(self) -> list[float]:
        """Each rung's share of a run's steps, first rung first."""
        return list(self.at) if self.at else [1 / self.eta**k for k in range(self.rungs, 0, -1)]


@dataclass(frozen=True)
class HalvingPlan:
    """One trial's part in a successive halving: the axis chosen per group, eta, the rung steps,
    its group, and on WSD each rung's cooldown (the rung is judged on a cooldown branch). Its
    to_dict is the row's `halving` record, less the losses (analysis/readers/halving.py reads it)."""

    axis: str
    eta: int
    rungs: tuple[int, ...]
    group: str
    cooldowns: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "axis": self.axis,
            "eta": self.eta,
            "rungs": list(self.rungs),
            "group": self.group,
        }
        if self.cooldowns is not None:
            out["cooldowns"] = list(self.cooldowns)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HalvingPlan:
        cooldowns = d.get("cooldowns")
        return cls(
            axis=str(d["axis"]),
            eta=int(d["eta"]),
            rungs=tuple(int(r) for r in d["rungs"]),
            group=str(d["group"]),
            cooldowns=None if cooldowns is None else tuple(int(c) for c in cooldowns),
        )


def parse_halving(doc: Mapping[str, Any], path: str) -> Halving | None:
    """The [halving] table of a parsed spec (None when absent)."""
    table = doc.get("halving")
    if table is None:
        return None
    table = known_table(table, path, "halving", KEYS)
    axis = text(path, "halving.axis", table.get("axis", "lr"), "expected the name of a [grid] axis")
    eta = int(number(path, "halving.eta", table.get("eta", 3), integer=True))
    if eta < 2:
        raise fail(path, "halving.eta", eta, "at least 2 (the share of a rung that goes on is 1/eta)")
    rungs = int(number(path, "halving.rungs", table.get("rungs", 1), integer=True))
    if not 1 <= rungs <= MAX_RUNGS:
        raise fail(
            path,
            "halving.rungs",
            rungs,
            f"it must be at most {MAX_RUNGS} (each rung falls at steps/eta^k; with eta >= 2, {MAX_RUNGS} rungs "
            f"already need over a million steps)",
        )
    at = _rung_shares(table, path, rungs)
    grid = doc.get("grid") or {}
    values = grid.get(axis) if isinstance(grid, Mapping) else None
    if not isinstance(values, list) or len(values) < 2:
        raise fail(
            path, "halving.axis", axis, "it must be a [grid] axis with at least 2 values to choose from"
        )
    return Halving(axis, eta, len(at) if at else rungs, at)


def _rung_shares(table: Mapping[str, Any], path: str, rungs: int) -> tuple[float, ...]:
    """`at`: the rungs' shares of a run, increasing and strictly between 0 and 1; it replaces
    `rungs`, which may then be left out or agree with it."""
    if "at" not in table:
        return ()
    at = table["at"]
    if not isinstance(at, list) or not at or len(at) > MAX_RUNGS:
        raise fail(path, "halving.at", at, f"a list of 1 to {MAX_RUNGS} shares of a run's steps, e.g. [0.67]")
    shares = tuple(float(number(path, "halving.at", x)) for x in at)
    if any(not 0 < x < 1 for x in shares) or any(b <= a for a, b in zip(shares, shares[1:])):
        raise fail(path, "halving.at", at, "shares strictly between 0 and 1, each larger than the one before")
    if "rungs" in table and rungs != len(shares):
        raise fail(path, "halving.rungs", rungs, f"halving.at places {len(shares)} rung(s); leave rungs out")
    return shares


def rung_steps(steps: int, eval_every: int, h: Halving, where: str) -> list[int]:
    """The evaluation steps at which the rungs fall: the first evaluation at or after steps/eta^k."""
    out = []
    for share in h.shares():
        target = steps * share
        s = min(steps, int(math.ceil(target / eval_every)) * eval_every)
        if s >= steps or (out and s <= out[-1]):
            field = f"halving.at = {list(h.at)}" if h.at else f"halving.rungs = {h.rungs}"
            raise SpecError(
                f"{where}: {field} is invalid: a run of {steps} steps evaluated "
                f"every {eval_every} has no evaluation for a rung at step {target:.0f}; evaluate "
                f"more often (train.eval_every or budget.evals) or use fewer rungs."
            )
        out.append(s)
    return out


def group_of(config: Mapping[str, Mapping[str, Any]], owner: str, fname: str) -> str:
    """The trial's group: its configs with the halving axis (config `owner`, field `fname`)
    blanked, hashed."""
    blank = {k: dict(v) for k, v in config.items()}
    blank[owner][fname] = None
    return hashlib.sha256(json.dumps(blank, sort_keys=True, default=str).encode()).hexdigest()[:16]


def plan(trials: Sequence, h: Halving, path: str, field: tuple[str, str]) -> dict[str, HalvingPlan]:
    """trial_id -> the trial's HalvingPlan; `field` is (config, field name) of the axis."""
    out = {}
    for t in trials:
        rungs = rung_steps(t.train.steps, t.train.eval_every, h, path)
        group = group_of(t.configs_dict(), *field)
        cooldowns = None
        if t.train.schedule == "wsd":  # each rung judged on a cooldown branch, a complete short run
            try:
                cooldowns = tuple(rung_cooldowns(rungs, t.train))
            except ValueError as exc:  # a rung too early for the warmup to end before its cooldown
                field = f"halving.at = {list(h.at)}" if h.at else f"halving.rungs = {h.rungs}"
                raise SpecError(
                    f'{path}: {field} is invalid with schedule = "wsd": '
                    f"the rung at step {rungs[0]} of a {t.train.steps}-step run is judged on a "
                    f"cooldown branch, and {exc}"
                ) from None
        out[t.trial_id] = HalvingPlan(h.axis, h.eta, tuple(rungs), group, cooldowns)
    return out


def steps_share(
    n: int, rungs: Sequence[int], steps: int, eta: int, cooldowns: Sequence[int] | None = None
) -> float:
    """The share of its full grid's steps a group of n uses when every rung is decided on time:
    all n train to the first rung, ⌈n/eta⌉ of them to the next, and so on to the end. With
    `cooldowns` (a WSD run's rungs, judged on cooldown branches: sweeps/plans/halving.py's docstring),
    each member leaves its run `cooldown` steps before the rung and trains that cooldown on a
    branch; the survivors go on from where they left."""
    alive, done, total = n, 0, 0
    for k, r in enumerate(list(rungs) + [steps]):
        if cooldowns is not None and k < len(rungs):
            start = r - cooldowns[k]
            total += alive * (start - done) + alive * cooldowns[k]
            done = start
        else:
            total += alive * (r - done)
            done = r
        alive = max(1, math.ceil(alive / eta))
    return total / (n * steps)


def rung_cooldowns(rungs: Sequence[int], train) -> list[int]:
    """Each rung's cooldown on a WSD run: the cooldown of a run as long as the rung."""
    return [r - train.replace(steps=r).cooldown_start for r in rungs]


def expected_flops(rows: Sequence, halving: Mapping[str, HalvingPlan]) -> float:
    """The training FLOPs of these plan rows (sweeps/plans/plan.py) under the halving: each row's
    full-length FLOPs times its group's steps_share."""
    size: dict[str, int] = {}
    for row in rows:
        if row.trial_id in halving:
            g = halving[row.trial_id].group
            size[g] = size.get(g, 0) + 1
    total = 0.0
    for row in rows:
        h = halving.get(row.trial_id)
        share = 1.0 if h is None else steps_share(size[h.group], h.rungs, int(row.steps), h.eta, h.cooldowns)
        total += float(row.flops) * share
    return total


def grouped(trials: list, plans: Mapping[str, HalvingPlan]) -> list:
    """The trials ordered group by group (each group where its first member stood), so that a
    group's members run side by side."""
    order: dict[str, int] = {}
    for t in trials:
        order.setdefault(plans[t.trial_id].group, len(order))
    return sorted(trials, key=lambda t: order[plans[t.trial_id].group])


def rung_losses(curve: Sequence[Mapping[str, Any]], rungs: Sequence[int]) -> list[float]:
    """The validation loss at each rung step the curve reached, in order."""
    at = {int(p["step"]): float(p.get("val_loss", math.nan)) for p in curve if "step" in p}
    out = []
    for s in rungs:
        if s not in at:
            break
        out.append(at[s])
    return out


def row_record(
    halving: HalvingPlan, curve: Sequence[Mapping[str, Any]], losses: Sequence[float] | None = None
) -> str:
    """The row's `halving` column (analysis/readers/halving.py reads it): the rung losses read
    off the curve, or those of the rungs' cooldown branches (`losses`) for a WSD run."""
    got = list(losses) if losses is not None else rung_losses(curve, halving.rungs)
    return json.dumps({**halving.to_dict(), "losses": got}, sort_keys=True)
