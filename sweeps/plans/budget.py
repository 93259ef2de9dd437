"""Training budgets of a sweep: steps, tokens, compute or tokens per parameter, turned into
steps per trial. Compute is the training FLOPs the store records for the trial
(depthwidth.accounting.train_flops_per_token: 3 × Kaplan's forward count, ≈ 6·N per token plus the
attention-context term; docs/science.md §2), with D = steps x batch_size x seq_len tokens.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from sweeps.plans.errors import SpecError, fail, known_table, number

BUDGET_KINDS = ("steps", "tokens", "compute", "tokens_per_param")
BUDGET_OPTIONS = ("evals", "min_steps", "warmup_fraction", "from_one_run")


@dataclass(frozen=True)
class Budget:
    """How long each trial trains. `kind` in BUDGET_KINDS; the options shape every trial alike."""

    kind: str
    value: float
    evals: int | None = None  # evaluations per trial: eval_every = steps // evals
    min_steps: int = 0  # floor for steps derived from tokens / compute / tokens_per_param
    warmup_fraction: float | None = None  # warmup_steps = fraction x steps
    # every budget of a shape from one WSD run and its cooldown branches (sweeps/plans/branches.py);
    # kind "" then: the steps come from [train] or the grid's steps axis
    from_one_run: bool = False


def parse_budget(doc: Mapping[str, Any], path: str) -> Budget | None:
    table = doc.get("budget")
    if table is None:
        return None
    table = known_table(table, path, "budget", BUDGET_KINDS + BUDGET_OPTIONS)
    kw: dict[str, Any] = {}
    if "from_one_run" in table:
        if not isinstance(table["from_one_run"], bool):
            raise fail(path, "budget.from_one_run", table["from_one_run"], "expected true or false")
        kw["from_one_run"] = table["from_one_run"]
    kinds = [k for k in BUDGET_KINDS if k in table]
    if len(kinds) > 1 or (not kinds and not kw.get("from_one_run")):
        raise fail(path, "budget", dict(table), f"give exactly one of {', '.join(BUDGET_KINDS)}")
    kind = kinds[0] if kinds else ""
    value = number(path, f"budget.{kind}", table[kind], integer=(kind == "steps")) if kind else 0.0
    for k in ("evals", "min_steps"):  # at least one evaluation; no floor (0) is the default
        if k in table:
            kw[k] = int(number(path, f"budget.{k}", table[k], positive=(k == "evals"), integer=True))
    if "warmup_fraction" in table:
        frac = number(path, "budget.warmup_fraction", table["warmup_fraction"], positive=False)
        if frac >= 1:
            raise fail(path, "budget.warmup_fraction", frac, "the warmup must be shorter than the run")
        kw["warmup_fraction"] = float(frac)
    return Budget(kind, float(value), **kw)


def apply_budget(
    model: ModelConfig, data: DataConfig, train: TrainConfig, budget: Budget | None, where: str
) -> TrainConfig:
    """Steps from the budget (Kaplan: C ≈ 6·N·D, docs/science.md §2), tokens per step = B·T."""
    if budget is None or not budget.kind:
        steps = train.steps
    elif budget.kind == "steps":
        steps = int(budget.value)
    else:
        n, seq_len, c_per_token = model_stats(model, data)
        if budget.kind == "tokens":
            tokens = budget.value
        elif budget.kind == "tokens_per_param":
            tokens = budget.value * n
        else:  # compute
            tokens = budget.value / c_per_token if c_per_token > 0 else 0.0
        steps = max(int(round(tokens / (train.batch_size * seq_len))), budget.min_steps)
        if steps < 1:
            raise SpecError(
                f"{where}: budget.{budget.kind} = {budget.value:g} is invalid: it buys less "
                f"than one step of {train.batch_size}x{seq_len} tokens."
            )
    changes: dict[str, Any] = {"steps": steps}
    if budget is not None and budget.evals is not None:
        changes["eval_every"] = max(1, steps // budget.evals)
    if budget is not None and budget.warmup_fraction is not None:
        changes["warmup_steps"] = int(round(budget.warmup_fraction * steps))
    elif train.warmup_steps >= steps:  # a warmup as long as the run never reaches the peak lr
        changes["warmup_steps"] = steps // 10
    return train.replace(**changes)


_STATS_CACHE: dict[str, tuple[int, int, float]] = {}


def model_stats(model: ModelConfig, data: DataConfig) -> tuple[int, int, float]:
    """(Kaplan's N, the sequence length the data dictates, training FLOPs per token) for a
    spec-level config."""
    from depthwidth.accounting import count_params, train_flops_per_token

    key = model.to_json() + data.to_json()
    if key in _STATS_CACHE:
        return _STATS_CACHE[key]
    resolved = resolve_model(model, data)
    stats = (count_params(resolved).n_params, resolved.seq_len, train_flops_per_token(resolved))
    if not (data.path and not os.path.exists(data.path)):
        _STATS_CACHE[key] = stats  # planned without its data: not kept for when the data is here
    return stats


_RESOLVE_CACHE: dict[tuple, tuple[int, int]] = {}


_MISSING: ContextVar[set[str] | None] = ContextVar("missing_data", default=None)


_PLANNED_WITHOUT: set[str] = set()  # paths a spec loaded with missing data allowed named: its
# plan rows (sweeps/plans/plan.py) are then sized the same way after the load


@contextmanager
def missing_data_allowed() -> Iterator[set[str]]:
    """Within it, a data path that does not exist yet is planned without its data (as
    `_without_data` says) and collected in the set it yields, instead of refused."""
    missing: set[str] = set()
    token = _MISSING.set(missing)
    try:
        yield missing
    finally:
        _MISSING.reset(token)
        _PLANNED_WITHOUT.update(missing)


def planning_without_data() -> bool:
    """Whether missing data is being planned without (within `missing_data_allowed`)."""
    return _MISSING.get() is not None


def _without_data(model: ModelConfig, data: DataConfig) -> ModelConfig | None:
    """The model planned for data not on this machine yet: bytes of text have 256 symbols, and a
    token corpus as many as the spec's model.vocab_size says; None where that is not enough."""
    missing = _MISSING.get()
    if missing is None and data.path in _PLANNED_WITHOUT:
        missing = set()
    if missing is None or not data.path or os.path.exists(data.path):
        return None
    if data.source == "text":
        out = model if model.vocab_size else model.replace(vocab_size=256)
    elif data.source == "tokens" and model.vocab_size:
        out = model
    else:
        return None
    missing.add(data.path)
    return out


def resolve_model(model: ModelConfig, data: DataConfig) -> ModelConfig:
    """The model as train() will build it: vocabulary and task length filled in from the data.
    Cached on everything data.resolve reads, so a 500-point grid builds its data source once."""
    key = (data.to_json(), model.seq_len, model.vocab_size, model.family, model.nu)
    if key not in _RESOLVE_CACHE:
        from depthwidth.data import DataError, resolve

        try:
            resolved = resolve(model, data)[0]
        except DataError:
            if (planned := _without_data(model, data)) is None:
                raise
            return planned
        _RESOLVE_CACHE[key] = (resolved.vocab_size, resolved.seq_len)
    vocab_size, seq_len = _RESOLVE_CACHE[key]
    if (vocab_size, seq_len) == (model.vocab_size, model.seq_len):
        return model
    return model.replace(vocab_size=vocab_size, seq_len=seq_len)
