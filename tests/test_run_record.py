"""One record of what a trial produced (runstore/record.py): its fields are the run columns,
read by the store's required columns, the schema, the writer's rows and the report's table; it
round-trips through `to_dict`/`from_dict`, and a stored row reads back as the record written."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
from helpers import add_run, row_of, spec_toml, stored_run

from analysis.reporting.html import RUN_COLUMNS as REPORT_COLUMNS
from runstore.record import (
    CHECKED_RUN_COLUMNS,
    FILLED_RUN_COLUMNS,
    REQUIRED_RUN_COLUMNS,
    RUN_COLUMNS,
    RunRecord,
)
from runstore.schema import COLUMNS, STORE_FILLED
from runstore.store import ResultStore
from sweeps.plans.spec import parse_spec

SPEC = spec_toml("st", train=None, grid={"depth": [2], "width": [8]}, budget={"steps": 10})


def planted_result(metrics: dict | None = None) -> dict:
    """A RunResult.to_dict() as train() returns it, with values chosen by the test."""
    curve = [
        {"step": s, "tokens": s * 64, "flops": s * 4e5, "train_loss": 1.6, "val_loss": 1.5, "lr": 1e-3}
        for s in (5, 10)
    ]
    return {
        **dict(status="ok", final_train_loss=1.6, final_val_loss=1.5, steps=10, tokens=640),
        **dict(flops=640 * 6e3, wall_s=1.0, n_params=1536, n_params_total=1800, flops_per_token=4e3),
        **dict(device="cpu", torch_version="2.x", depthwidth_version="0.1.0", unigram_entropy=2.5),
        **dict(vocab_size=16, curve=curve, metrics=metrics or {}, error=""),
    }


def _run(metrics: dict | None = None):
    trial = parse_spec(SPEC, "s.toml").trials[0]
    res = planted_result(metrics)
    return stored_run("st", trial, res, "n1", "127.0.0.1"), res


def _row(metrics: dict | None = None) -> tuple[dict, dict]:
    run, res = _run(metrics)
    return row_of(run), res


def test_the_columns_are_the_records_fields_in_their_order():
    assert RUN_COLUMNS == tuple(f.name for f in dataclasses.fields(RunRecord))
    # the required columns lead every row, as docs/design.md lists them
    assert RUN_COLUMNS[: len(REQUIRED_RUN_COLUMNS)] == REQUIRED_RUN_COLUMNS
    assert REQUIRED_RUN_COLUMNS[-3:] == ("depthwidth_version", "torch_version", "device")
    assert len(REQUIRED_RUN_COLUMNS) == 18
    # the schema checks each numeric run column as the record says, and the store fills its counts
    assert all(COLUMNS[name] == col for name, col in CHECKED_RUN_COLUMNS.items())
    assert STORE_FILLED == FILLED_RUN_COLUMNS and set(FILLED_RUN_COLUMNS) <= set(CHECKED_RUN_COLUMNS)
    # the report's runs table shows record columns, plus a plain table's loss and a task's accuracy
    assert set(REPORT_COLUMNS) - set(RUN_COLUMNS) == {"loss", "accuracy"}


def test_a_row_is_the_record_then_the_metrics_beside_it():
    row, res = _row(metrics={"accuracy": 0.75})
    assert tuple(row)[: len(RUN_COLUMNS)] == RUN_COLUMNS
    assert tuple(row)[len(RUN_COLUMNS) :] == ("accuracy",)
    rec = RunRecord.from_dict(row)
    assert rec.to_dict() == {k: row[k] for k in RUN_COLUMNS}
    assert rec.final_val_loss == 1.5 and rec.flops_spent == res["flops"] and rec.embedding_rank == 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.depth = 3  # type: ignore[misc]


def test_a_stored_row_reads_back_as_the_record_written(tmp_path):
    run, _ = _run()
    row = add_run(ResultStore(str(tmp_path / "st")), run)
    stored = ResultStore(str(tmp_path / "st")).runs().iloc[0].to_dict()
    assert RunRecord.from_dict(stored) == RunRecord.from_dict(row)


def test_a_row_from_before_a_column_existed_takes_its_default_and_one_without_a_required_fails():
    row, _ = _row()
    old = {k: v for k, v in row.items() if k not in ("schedule", "branched_from", "flops_spent")}
    rec = RunRecord.from_dict(old)
    assert (rec.schedule, rec.branched_from) == ("cosine", "") and math.isnan(rec.flops_spent)
    with pytest.raises(KeyError, match="'final_val_loss'"):
        RunRecord.from_dict({k: v for k, v in row.items() if k != "final_val_loss"})
    # a pandas row (numpy scalars) reads as plain values
    rec = RunRecord.from_dict(pd.DataFrame([row]).iloc[0].to_dict())
    assert type(rec.depth) is int and type(rec.lr) is float and rec == RunRecord.from_dict(row)
