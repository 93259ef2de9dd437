"""Helpers the tests share: one way to write a spec file, and one way to turn a planted training
result into what the store keeps (the path a sweep's driver takes: TrialConfig and TrialOutcome
into sweeps/running/record.py's `record_of`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from depthwidth.result import RunResult
from sweeps.plans.trialconfig import TrialConfig
from sweeps.plans.trialoutcome import TrialOutcome
from sweeps.running.record import StoredRun, record_of


def stored_run(sweep: str, trial, result: dict[str, Any], node_id: str = "", node_ip: str = "") -> StoredRun:
    """What the store keeps of `trial` (a spec's Trial) having returned `result` (a
    RunResult.to_dict() with values chosen by the test)."""
    outcome = TrialOutcome(trial.trial_id, RunResult.from_dict(result), node_id, node_ip)
    return record_of(sweep, TrialConfig.of(trial), outcome)


def row_of(run: StoredRun) -> dict[str, Any]:
    """The runs row the store writes for `run`: the record's columns, then those beside it."""
    return {**run.record.to_dict(), **run.beside}


def add_run(store, run: StoredRun) -> dict[str, Any]:
    store.add_trial(run.record, run.curve, run.beside)
    return row_of(run)


def write_spec(folder: Path, text: str, name: str = "spec.toml") -> Path:
    """`text` as the spec file `name` in `folder` (made if missing); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path
