"""One run, every token budget (docs/science.md §10): with `[budget] from_one_run = true`, the
trials of a sweep that differ only in their length (steps, and the evaluation interval that
follows it) are one warmup-stable-decay run. The longest is trained, and each shorter one is a
cooldown branch taken from it where that budget's cooldown starts (depthwidth.train).

Each budget keeps its own trial and trial_id (its config is that of the WSD run it stands for);
this module only says which trials share a run, and what each one costs: the run its whole
length, a branch its cooldown alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sweeps.plans.errors import SpecError

_LENGTH_FIELDS = ("steps", "eval_every")  # what may differ between the budgets of one run


def _key(trial, drop: Sequence[str] = _LENGTH_FIELDS) -> str:
    train = {k: v for k, v in trial.train.to_dict().items() if k not in drop}
    return json.dumps({**trial.configs_dict(), "train": train}, sort_keys=True, default=str)


def groups(trials: Iterable) -> list[tuple[Any, list]]:
    """(run, branches) for each run: the longest trial of each set that differs only in length,
    and the shorter ones, shortest first; in the order the runs first appear."""
    by_key: dict[str, list] = {}
    for t in trials:
        by_key.setdefault(_key(t), []).append(t)
    out = []
    for members in by_key.values():
        members = sorted(members, key=lambda t: t.train.steps)
        out.append((members[-1], members[:-1]))
    return out


def branched_from(trials: Iterable) -> dict[str, str]:
    """trial_id -> the trial_id of the run it branches from, for each branch among `trials`
    (the stored column of the same name)."""
    return {b.trial_id: run.trial_id for run, branches in groups(trials) for b in branches}


def branches_taken(spec, finished: Iterable[str] = ()) -> dict[str, str]:
    """trial_id -> the run it branches from, as a sweep of `spec` takes its budgets with the
    trials `finished` already in its store: the budgets still to do of one run share the longest
    of them (sweeps/running/service.py groups them the same way), so a budget added after its run
    was stored is a run of its own, costed and trained in full; the stored ones as they were."""
    if not spec.branched_from:
        return {}
    done = set(finished)
    todo = [t for t in spec.trials if t.trial_id not in done]
    return {**{k: v for k, v in spec.branched_from.items() if k in done}, **branched_from(todo)}


def cost_share(train) -> float:
    """The share of a budget's own training compute that a cooldown branch of it costs: its
    cooldown steps over its steps."""
    return (train.steps - train.cooldown_start) / train.steps


def check_one_run(trials: Sequence, path: str, eval_field: str = "train.eval_every") -> dict[str, str]:
    """The spec's runs, checked: every trial on the WSD schedule, and the budgets of one run
    alike but for their length (a warmup that differs between them would make each its own
    run, silently). `eval_field`: where the spec sets eval_every. Returns `branched_from(trials)`."""
    for t in trials:
        if t.train.schedule != "wsd":
            raise SpecError(
                f"{path}: budget.from_one_run = true is invalid with train.schedule = "
                f'{t.train.schedule!r}: cooldown branches need schedule = "wsd" (a cosine run '
                f"must know its length from the start)."
            )
    for run, branches in groups(trials):
        twin = next((b for b in branches if b.train.steps == run.train.steps), None)
        if twin is not None:  # same length, differing only in how often it is evaluated
            raise SpecError(
                f"{path}: {eval_field} = {twin.train.eval_every} is invalid with "
                f"budget.from_one_run = true: it and eval_every = {run.train.eval_every} make two "
                f"budgets of {run.train.steps} steps of one run, and a cooldown branch must be "
                f"shorter than the run it leaves; give each budget its own length, or one eval_every."
            )
    loose: dict[str, set[int]] = {}
    for t in trials:
        loose.setdefault(_key(t, _LENGTH_FIELDS + ("warmup_steps",)), set()).add(t.train.warmup_steps)
    for warmups in loose.values():
        if len(warmups) > 1:
            raise SpecError(
                f"{path}: budget.from_one_run = true is invalid here: the budgets of one run "
                f"would warm up over different numbers of steps ({sorted(warmups)}); give "
                f"train.warmup_steps (or budget.warmup_fraction, taken of the shortest budget) "
                f"shorter than the shortest budget's cooldown start."
            )
    return branched_from(trials)
