"""Training budgets of a sweep: steps, tokens, compute or tokens per parameter, turned into
steps per trial. Compute is the training FLOPs the store records for the trial
(depthwidth.accounting.train_flops_per_token: 3 × Kaplan's forward count, ≈ 6·N per token plus the
attention-context term; docs/science.md §2), with D = steps x batch_size x seq_len tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from sweeps.errors import SpecError, fail, known_table, number

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
    # every budget of a shape from one WSD run and its cooldown branches (sweeps/branches.py);
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
    if key not in _STATS_CACHE:
        resolved = resolve_model(model, data)
        _STATS_CACHE[key] = (
            count_params(resolved).n_params,
            resolved.seq_len,
            train_flops_per_token(resolved),
        )
    return _STATS_CACHE[key]


_RESOLVE_CACHE: dict[tuple, tuple[int, int]] = {}


def resolve_model(model: ModelConfig, data: DataConfig) -> ModelConfig:
    """The model as train() will build it: vocabulary and task length filled in from the data.
    Cached on everything data.resolve reads, so a 500-point grid builds its data source once."""
    key = (data.to_json(), model.seq_len, model.vocab_size, model.family, model.nu)
    if key not in _RESOLVE_CACHE:
        from depthwidth.data import resolve

        resolved = resolve(model, data)[0]
        _RESOLVE_CACHE[key] = (resolved.vocab_size, resolved.seq_len)
    vocab_size, seq_len = _RESOLVE_CACHE[key]
    if (vocab_size, seq_len) == (model.vocab_size, model.seq_len):
        return model
    return model.replace(vocab_size=vocab_size, seq_len=seq_len)
