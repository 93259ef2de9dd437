"""The store's record of a finished trial, built on the sweeps side from what went out and what
came back: `record_of(sweep, TrialConfig, TrialOutcome)` gives the `RunRecord` (runstore/record.py,
the run columns) and the columns beside it (each number the run reported, e.g. the copying
probe's; a halved trial's `halving`); `ResultStore.add_trial` takes the two with the curve.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from typing import Any

from runstore.record import RUN_COLUMNS, RunRecord
from sweeps.plans.branches import cost_share
from sweeps.plans.halving import row_record
from sweeps.plans.trialconfig import TrialConfig
from sweeps.plans.trialoutcome import TrialOutcome

_COLUMN_NAME = re.compile(r"[a-z][a-z0-9_]*")  # a reported number that may become a column


@dataclass(frozen=True)
class StoredRun:
    """What the store keeps of one finished run: its record, the columns beside it, its curve."""

    record: RunRecord
    beside: dict[str, Any]
    curve: list[dict[str, Any]]


def record_of(sweep: str, tc: TrialConfig, outcome: TrialOutcome) -> StoredRun:
    """The stored form of `outcome`, the run `tc` configured (the trial's own, or the cooldown
    branch's config: TrialConfig.branch)."""
    res, m, d, t = outcome.result, tc.model, tc.data, tc.train
    vocab = int(res.vocab_size or m.vocab_size or d.vocab_size)
    numbers = {k: v for k, v in res.metrics.items() if _is_number(v)}
    # lists of numbers (a per-step gradient profile), or of such lists (profiles at several
    # evaluations), go into the metrics JSON only
    profiles = {k: v for k, v in res.metrics.items() if _is_profile(v)}
    if outcome.rung_losses is not None:  # a WSD run's rungs, judged on its cooldown branches
        profiles["rung_losses"] = list(outcome.rung_losses)
    record = RunRecord(
        **config_columns(tc),
        n_params=int(res.n_params),
        n_params_total=int(res.n_params_total),
        flops_per_token=float(res.flops_per_token),
        tokens=int(res.tokens),
        final_train_loss=float(res.final_train_loss),
        final_val_loss=float(res.final_val_loss),
        status=str(res.status),
        wall_s=float(res.wall_s),
        depthwidth_version=str(res.depthwidth_version),
        torch_version=str(res.torch_version),
        device=str(res.device),
        sweep=sweep,
        flops=float(res.flops),
        unigram_entropy=float(res.unigram_entropy),
        vocab_size=vocab,
        embedding_rank=min(vocab, m.width),
        error=str(res.error),
        resumed_from_step=outcome.resumed_from_step,
        resume_note=outcome.resume_note,
        workers=outcome.workers or tc.workers,
        node_id=outcome.node_id,
        node_ip=outcome.node_ip,
        finished_at=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        metrics=json.dumps({**numbers, **profiles}, sort_keys=True),
        # what the run cost: a cooldown branch its cooldown alone (sweeps/plans/branches.py)
        flops_spent=float(res.flops) * (cost_share(t) if tc.branched_from else 1.0),
        last_step=int(res.steps),
    )
    beside: dict[str, Any] = {}
    if tc.halving:  # its rungs and the losses it reached there (sweeps/plans/halving.py)
        beside["halving"] = row_record(tc.halving, res.curve, outcome.rung_losses)
    for k, v in numbers.items():  # e.g. a copy task's `accuracy` as its own column
        if _COLUMN_NAME.fullmatch(k) and k not in RUN_COLUMNS and k not in beside:
            beside[k] = float(v)
    return StoredRun(record, beside, list(res.curve))


def config_columns(tc: TrialConfig) -> dict[str, Any]:
    """Every run column the trial's configuration fixes, as the record holds it (the counts,
    which the model's resolved size fixes, are `planned_columns`')."""
    m, d, t = tc.model, tc.data, tc.train
    return {
        "trial_id": tc.trial_id,
        "family": m.family,
        "depth": m.depth,
        "width": m.width,
        "heads": m.heads,
        "seed": t.seed,
        "steps": t.steps,  # the planned budget: where a stopped run stopped is its last_step
        "attention": m.attention,
        "parametrization": m.parametrization,
        "seq_len": m.seq_len,
        "ffn_ratio": float(m.ffn_ratio),
        "nu": m.nu,
        "rho": m.rho,
        "data_source": d.source,
        "task_length": d.task_length,
        "data_seed": d.seed,
        "lr": float(t.lr),
        "batch_size": t.batch_size,
        "model_config": json.dumps(m.to_dict(), sort_keys=True),
        "data_config": json.dumps(d.to_dict(), sort_keys=True),
        "train_config": json.dumps(t.to_dict(), sort_keys=True),
        "schedule": t.schedule,
        "branched_from": tc.branched_from,
    }


def planned_columns(tc: TrialConfig) -> dict[str, Any]:
    """The counts a run of `tc` records, from its resolved model (depthwidth.accounting: the counts
    train() records): its size, and for a run that ends at its budget, the tokens, FLOPs and
    steps it trains and what it costs (a cooldown branch its cooldown alone)."""
    from depthwidth.accounting import count_params, flops_per_token, train_flops_per_token
    from sweeps.plans.budget import resolve_model

    model = resolve_model(tc.model, tc.data)
    counts = count_params(model)
    tokens = tc.train.steps * tc.train.batch_size * model.seq_len
    flops = float(tokens * train_flops_per_token(model))
    return {
        "n_params": counts.n_params,
        "n_params_total": counts.n_params_total,
        "flops_per_token": float(flops_per_token(model)),
        "vocab_size": model.vocab_size,
        "embedding_rank": min(model.vocab_size, model.width),
        "tokens": tokens,
        "flops": flops,
        "last_step": tc.train.steps,
        "flops_spent": flops * (cost_share(tc.train) if tc.branched_from else 1.0),
    }


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_profile(v: Any) -> bool:
    return (
        isinstance(v, list)
        and bool(v)
        and all(_is_number(x) or (isinstance(x, list) and all(_is_number(e) for e in x)) for x in v)
    )
