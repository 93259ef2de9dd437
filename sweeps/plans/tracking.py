"""Experiment trackers, as a spec asks for them: the `[tracking]` table (`Tracking`, checked when
the spec is read), what a tracker is told of a trial (`TrialInfo`) and which numbers of an
evaluation or a stored row it logs. Deciding only: the threads that send them live in
sweeps/results/feed.py, the tracker libraries in sweeps/results/trackers.py.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sweeps.plans.errors import SpecError, choice, fail, known_table, text

TRACKING_KEYS = ("mlflow", "wandb", "tensorboard")
WANDB_KEYS = ("project", "mode", "entity")
WANDB_MODES = ("online", "offline")
# The final row's metrics, logged at the trial's last step (keys as in runs.parquet).
FINAL_METRICS = (
    "final_train_loss",
    "final_val_loss",
    "n_params",
    "n_params_total",
    "tokens",
    "flops",
    "wall_s",
)
STEP_KEY = "val_loss"  # every evaluation has it; the trackers write it last within a step
EXTRAS = {"mlflow": "mlflow", "wandb": "wandb", "tensorboard": "tensorboard"}
_NEEDS = {"mlflow": ("mlflow",), "wandb": ("wandb",), "tensorboard": ("tensorboardX", "tensorboard")}


@dataclass(frozen=True)
class Tracking:
    """Which trackers a sweep logs to (the spec's [tracking] table, then `sweep run` flags)."""

    mlflow: str | None = None  # tracking URI: sqlite:///mlruns.db, http://HOST:5000, a folder
    wandb_project: str | None = None
    wandb_mode: str = "online"
    wandb_entity: str | None = None
    tensorboard: str | bool = False  # True: <store>/tensorboard; a string: that folder

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(
            k
            for k, on in (
                ("mlflow", self.mlflow),
                ("wandb", self.wandb_project),
                ("tensorboard", self.tensorboard),
            )
            if on
        )

    def with_flags(
        self,
        mlflow: str | None = None,
        wandb: str | None = None,
        wandb_mode: str | None = None,
        tensorboard: str | bool | None = None,
        wandb_entity: str | None = None,
    ) -> Tracking:
        t = self
        if mlflow:
            t = replace(t, mlflow=mlflow)
        if wandb:
            t = replace(t, wandb_project=wandb)
        if wandb_mode:
            t = replace(t, wandb_mode=wandb_mode)
        if wandb_entity:
            t = replace(t, wandb_entity=wandb_entity)
        if tensorboard:
            t = replace(t, tensorboard=tensorboard)
        return t


def parse_tracking(doc: Mapping[str, Any], path: str) -> Tracking:
    """The spec's optional [tracking] table; raises SpecError (one sentence) on bad input."""
    table = known_table(doc.get("tracking", {}), path, "tracking", TRACKING_KEYS)
    kw: dict[str, Any] = {}
    if table.get("mlflow") is not None:
        kw["mlflow"] = text(
            path,
            "tracking.mlflow",
            table["mlflow"],
            'expected a tracking URI such as "sqlite:///mlruns.db" or "http://HOST:5000"',
        )
    wb = table.get("wandb")
    if wb is not None:
        wb = known_table(
            wb,
            path,
            "tracking.wandb",
            WANDB_KEYS,
            label="tracking.wandb",
            what='expected a table such as { project = "depthwidth", mode = "offline" }',
        )
        project = text(path, "tracking.wandb.project", wb.get("project"), "expected a project name")
        mode = choice(
            path,
            "tracking.wandb.mode",
            wb.get("mode", "online"),
            WANDB_MODES,
            'expected "online" or "offline"',
        )
        entity = wb.get("entity")
        if entity is not None:
            text(path, "tracking.wandb.entity", entity, "expected a W&B entity (user or team)")
        kw.update(wandb_project=project, wandb_mode=mode, wandb_entity=entity)
    tb = table.get("tensorboard")
    if tb is not None:
        if not isinstance(tb, (bool, str)) or (isinstance(tb, str) and not tb.strip()):
            raise fail(
                path, "tracking.tensorboard", tb, "expected true (event files under the store) or a folder"
            )
        kw["tensorboard"] = tb
    return Tracking(**kw)


def check_available(tracking: Tracking, prefix: str = "tracking.") -> None:
    """Every enabled tracker's library is installed; otherwise one sentence saying what to
    install (raised before anything runs)."""
    for name in tracking.enabled:
        missing = [m for m in _NEEDS[name] if importlib.util.find_spec(m) is None]
        if missing:
            raise SpecError(
                f"{prefix}{name} is invalid here: the {missing[0]} package is not "
                f"installed; pip install 'depthwidth[{EXTRAS[name]}]'."
            )


# -- what a tracker is told ---------------------------------------------------------------------


@dataclass(frozen=True)
class TrialInfo:
    trial_id: str
    name: str  # e.g. "d2 w32 lr=0.001"
    sweep: str
    axes: tuple[tuple[str, Any], ...]
    configs: dict[str, dict[str, Any]] = field(hash=False)  # resolved model/data/train configs

    def params(self) -> dict[str, Any]:
        """Flat params: the axes under their own names, then every resolved config field."""
        out: dict[str, Any] = {k: v for k, v in self.axes}
        for section in ("model", "data", "train"):
            for k, v in sorted(self.configs.get(section, {}).items()):
                out[f"{section}.{k}"] = v
        return out

    def axes_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.axes)


# Every evaluation has these (runstore.layout.CURVE_COLUMNS less trial_id and step); other
# columns of curves.parquet belong to some families only and are NaN for the rest.
_EVAL_KEYS = ("tokens", "flops", "train_loss", "val_loss", "lr", "wall_s")


def eval_metrics(values: Mapping[str, Any], skip: Iterable[str] = ()) -> dict[str, float]:
    """The numeric metrics of one evaluation (a Tune result or a curves.parquet row); a NaN in a
    column other runs' families filled is left out, a NaN loss is kept (a diverged trial)."""
    drop = {"trial_id", "step", "progress", *skip}
    return {
        k: float(v)
        for k, v in values.items()
        if k not in drop
        and isinstance(v, (int, float))
        and not isinstance(v, bool)
        and (k in _EVAL_KEYS or not math.isnan(v))
    }


def final_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    out = {k: float(row[k]) for k in FINAL_METRICS if k in row and _num(row[k])}
    try:
        extra = json.loads(row.get("metrics") or "{}")
    except (TypeError, ValueError):
        extra = {}
    out.update({f"final_{k}": float(v) for k, v in extra.items() if _num(v)})
    return out


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
