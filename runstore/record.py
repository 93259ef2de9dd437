"""What a trial produced, as the store keeps it: one `RunRecord` per finished run and token budget,
one row of the runs table (docs/design.md, "The results store"). Its fields, in their order, are
the run columns, defined here once: the required ones (`REQUIRED_RUN_COLUMNS`), the numbers the
schema checks and their ranges (runstore/schema.py), those every stored row fills, and those the
report's runs table shows all read them from here. `to_dict`/`from_dict` are the only places that
see the columns as strings. Numbers a run reports beyond these (a task's `accuracy`, the copying
probe's `copy_loss` and `copy_gain`, a halved trial's `halving`) are columns beside the record's.
Standard library only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class Column:
    """The kind and range the schema checks a column's cells against."""

    kind: str  # "whole": a whole number; "number": a finite number; "loss": see runstore/schema.py
    low: float = 0.0  # the smallest value allowed
    above: bool = False  # strictly above `low`


WHOLE_1, WHOLE_0 = Column("whole", 1), Column("whole", 0)
NUMBER_0, POSITIVE, LOSS = Column("number", 0), Column("number", 0, above=True), Column("loss")


def _col(
    check: Column | None = None, required: bool = False, filled: bool = False, shown: bool = False, **default
):
    """A run column: `check`, the schema's kind and range for its cells; `required`, every runs
    table has it; `filled`, every row a store holds has a number there (a failed run still has
    its shape and counts); `shown`, the report's runs table shows it."""
    meta = {"check": check, "required": required, "filled": filled, "shown": shown}
    return field(metadata=meta, **default)


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One finished run at one token budget: the grid point, the counts (Kaplan's non-embedding
    N, docs/science.md §2), the losses and status, the provenance, the resolved configs as JSON
    (so the table describes itself) and where and how it ran."""

    # -- required: every runs table has these (docs/design.md, "Required run columns")
    trial_id: str = _col(required=True, shown=True)
    family: str = _col(required=True, shown=True)
    depth: int = _col(WHOLE_1, required=True, filled=True, shown=True)
    width: int = _col(WHOLE_1, required=True, filled=True, shown=True)
    heads: int = _col(WHOLE_1, required=True, filled=True, shown=True)
    seed: int = _col(WHOLE_0, required=True, filled=True, shown=True)
    n_params: int = _col(NUMBER_0, required=True, filled=True, shown=True)
    n_params_total: int = _col(NUMBER_0, required=True, filled=True)
    flops_per_token: float = _col(NUMBER_0, required=True, filled=True)
    tokens: int = _col(NUMBER_0, required=True, filled=True, shown=True)  # trained
    steps: int = _col(WHOLE_0, required=True, filled=True, shown=True)  # the planned budget, in every row
    final_train_loss: float = _col(LOSS, required=True, shown=True)
    final_val_loss: float = _col(LOSS, required=True, shown=True)
    status: str = _col(required=True, shown=True)
    wall_s: float = _col(NUMBER_0, required=True, filled=True, shown=True)
    depthwidth_version: str = _col(required=True)
    torch_version: str = _col(required=True)
    device: str = _col(required=True)
    # -- what the sweep and the configs add (a default: stores written before the column lack it)
    sweep: str = _col(default="")
    flops: float = _col(NUMBER_0)
    unigram_entropy: float = _col(NUMBER_0, default=math.nan)
    # Wies et al. 2021 (docs/science.md §1): the embedding rank caps what width can buy.
    vocab_size: int = _col(WHOLE_1)
    embedding_rank: int = _col(WHOLE_1)
    attention: str = _col()
    parametrization: str = _col()
    seq_len: int = _col(WHOLE_1)
    ffn_ratio: float = _col(POSITIVE)
    nu: int = _col(WHOLE_0)
    rho: int = _col(WHOLE_0)
    data_source: str = _col()
    task_length: int = _col(WHOLE_0)
    data_seed: int = _col(WHOLE_0)
    lr: float = _col(POSITIVE, shown=True)
    batch_size: int = _col(WHOLE_1, shown=True)
    error: str = _col(shown=True, default="")
    resumed_from_step: int = _col(WHOLE_0, default=0)
    resume_note: str = _col(default="")  # e.g. a damaged checkpoint passed over on resume
    workers: int = _col(WHOLE_1, default=1)  # data-parallel workers that trained it
    node_id: str = _col(default="")
    node_ip: str = _col(default="")
    finished_at: str = _col(default="")
    model_config: str = _col()
    data_config: str = _col()
    train_config: str = _col()
    metrics: str = _col(default="{}")  # every number the run reported, and its lists of numbers
    schedule: str = _col(default="cosine")
    # budget.from_one_run (sweeps/plans/branches.py): the trial_id of the run this budget's cooldown
    # branched from ("" for a run of its own), and what it cost: a branch its cooldown alone
    branched_from: str = _col(default="")
    flops_spent: float = _col(NUMBER_0, default=math.nan)
    # the last step the run trained: `steps` for a run that ended, earlier for one a halving
    # rung stopped or that diverged or failed (-1: not given; a row read from a table written
    # before the column existed takes it from `steps`, see upgraded_row)
    last_step: int = _col(WHOLE_0, default=-1)

    def to_dict(self) -> dict[str, Any]:
        """The runs row: each column under its name, in the record's order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> RunRecord:
        """The record of a runs row: its own columns, each as its field's type; other columns
        (metrics beside the record) are left out. A column with a default that the row lacks (a
        store written before the column existed) takes the default; any other is a KeyError."""
        out = {}
        row = upgraded_row(row)
        for f in fields(cls):
            if f.name in row:
                out[f.name] = _TYPES[f.type](row[f.name])
            elif f.default is MISSING:
                raise KeyError(f"a runs row lacks the column {f.name!r}")
        return cls(**out)


_TYPES = {"str": str, "int": int, "float": float}


def config_of(text: str) -> dict[str, Any]:
    """One of a row's config columns (model_config, data_config, train_config) as the dict it
    holds; ValueError when it holds none."""
    try:
        cfg = json.loads(text)
    except (TypeError, RecursionError) as exc:
        raise ValueError(f"not a config ({type(exc).__name__})") from None
    if not isinstance(cfg, dict):
        raise ValueError("not a config (not a JSON object)")
    return cfg


def upgraded_row(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A runs row written before `last_step` existed, in today's meaning: `steps` was then the
    step a stopped, diverged or failed run reached, and is now its planned budget (the one its
    train_config holds), with the step reached in `last_step`. Other rows as they are."""
    last = row.get("last_step")
    if "steps" not in row or (last is not None and not _missing(last)):
        return row
    out = {**row, "last_step": row["steps"]}
    planned = _planned_steps(row.get("train_config"))
    if planned is not None and row.get("status") not in (None, "ok"):
        out["steps"] = planned
    return out


def _missing(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _planned_steps(train_config: Any) -> int | None:
    if not isinstance(train_config, str) or not train_config:
        return None
    try:
        steps = json.loads(train_config).get("steps")
    except (ValueError, AttributeError, RecursionError):
        return None
    return int(steps) if isinstance(steps, int) and not isinstance(steps, bool) else None


def _names(key: str) -> tuple[str, ...]:
    return tuple(f.name for f in fields(RunRecord) if f.metadata[key])


RUN_COLUMNS = tuple(f.name for f in fields(RunRecord))
REQUIRED_RUN_COLUMNS = _names("required")
FILLED_RUN_COLUMNS = _names("filled")  # every row a store holds has these numbers
SHOWN_RUN_COLUMNS = _names("shown")  # the report's runs table (analysis/reporting/html.py)
TEXT_RUN_COLUMNS = tuple(f.name for f in fields(RunRecord) if f.type == "str")  # cells that are text
CHECKED_RUN_COLUMNS = {f.name: f.metadata["check"] for f in fields(RunRecord) if f.metadata["check"]}
