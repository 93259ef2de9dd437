"""What one trial runs, as it crosses into Ray Tune and back: a frozen `TrialConfig`.

The spec's trials (sweeps/plans/spec.py `Trial`) become `TrialConfig`s in the service; Tune carries
`TrialConfig.to_dict()` as each trial's config, and the trainable, the distributed workers, the
driver's callbacks, the adaptive searcher and the resource function read it back with
`TrialConfig.from_dict`. Those two methods are the only places that see the layout as strings:
{"trial": what this trial trains and asks for, "run": what every trial of one Tune run shares}.
What a trial produced goes the other way as runstore/record.py's `RunRecord`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from sweeps.plans.fields import from_fields
from sweeps.plans.halving import HalvingPlan


def configs_dict(model: ModelConfig, data: DataConfig, train: TrainConfig) -> dict[str, dict[str, Any]]:
    """The three configs of a run as the store's JSON columns keep them (and its id hashes them)."""
    return {"model": model.to_dict(), "data": data.to_dict(), "train": train.to_dict()}


class WithConfigs:
    """What a spec's trial (sweeps/plans/spec.py `Trial`) and a TrialConfig share: the run's three
    configs, and their dict."""

    model: ModelConfig
    data: DataConfig
    train: TrainConfig

    def configs_dict(self) -> dict[str, dict[str, Any]]:
        return configs_dict(self.model, self.data, self.train)


@dataclass(frozen=True)
class Branch:
    """A shorter token budget taken as a cooldown branch of the trial's run (sweeps/plans/branches.py):
    its own trial_id and its own training config (the budget's WSD run)."""

    trial_id: str
    train: TrainConfig

    def to_dict(self) -> dict[str, Any]:
        return {"trial_id": self.trial_id, "train": self.train.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Branch:
        return from_fields(cls, d, {"train": TrainConfig.from_dict})


@dataclass(frozen=True)
class RayAsk:
    """What one worker of a trial asks Ray for: CPUs, a GPU share, host memory in bytes (CPU trials)."""

    cpu: float = 1.0
    gpu: float = 0.0
    memory: float = 0.0

    def to_dict(self) -> dict[str, float]:
        """Ray's resource dict: CPU always, GPU and memory where asked."""
        asked = {"CPU": self.cpu, "GPU": self.gpu, "memory": self.memory}
        return {k: float(v) for k, v in asked.items() if v or k == "CPU"}

    @classmethod
    def from_dict(cls, d: Mapping[str, float]) -> RayAsk:
        """From Ray's resource dict; what it does not ask for is the default."""
        named = {"CPU": "cpu", "GPU": "gpu", "memory": "memory"}  # Ray's name -> the field's
        return from_fields(
            cls, {named[k]: v for k, v in d.items() if k in named}, dict.fromkeys(named.values(), float)
        )


ENVIRON_PREFIX = "DEPTHWIDTH_"  # the driver's settings of this prefix hold in every trial


def depthwidth_environ() -> tuple[tuple[str, str], ...]:
    """This process's DEPTHWIDTH_* environment, which every trial of its sweep is given."""
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENVIRON_PREFIX)))


@dataclass(frozen=True)
class RunSettings:
    """What every trial of one Tune run shares: the CPUs per worker, the workers per trial and
    how they shard, the failures Ray may retry, the store and the Tune experiment, the folder the
    sweep started from (relative data paths mean it), the halving board's actor name, and the
    driver's DEPTHWIDTH_* environment, which the trial takes on (a cluster's workers did not start
    from the driver's shell)."""

    cpus: float = 1.0
    workers: int = 1
    sharding: str = "ddp"
    max_failures: int = 0
    store: str = ""
    experiment: str = ""
    cwd: str = ""
    halving_board: str | None = None
    environ: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpus": self.cpus,
            "environ": [list(kv) for kv in self.environ],
            "workers": self.workers,
            "sharding": self.sharding,
            "max_failures": self.max_failures,
            "store": self.store,
            "experiment": self.experiment,
            "cwd": self.cwd,
            "halving_board": self.halving_board,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSettings:
        return from_fields(cls, d, {"environ": lambda kvs: tuple((str(k), str(v)) for k, v in kvs or ())})


@dataclass(frozen=True)
class TrialConfig(WithConfigs):
    """One trial: its id and configs; its Ray request per worker, worker count and work per
    step (for its torch threads); the checkpoints of earlier driver runs it may resume from,
    furthest first; its halving record (sweeps/plans/halving.py) and cooldown branches, where it has
    them; the run it is itself a branch of (set only on a branch's row); and its Tune run's
    settings."""

    trial_id: str
    model: ModelConfig
    data: DataConfig
    train: TrainConfig
    resources: RayAsk = RayAsk()
    workers: int = 1
    flops_per_step: float | None = None
    resume_uris: tuple[str, ...] = ()
    halving: HalvingPlan | None = None
    branches: tuple[Branch, ...] = ()
    branched_from: str = ""
    run: RunSettings = RunSettings()

    # -- the only readers and writers of the layout Tune carries ----------------------------
    def to_dict(self) -> dict[str, Any]:
        trial: dict[str, Any] = {
            "trial_id": self.trial_id,
            **self.configs_dict(),
            "resume_uris": list(self.resume_uris),
            "resources": self.resources.to_dict(),
            "workers": self.workers,
            "flops_per_step": self.flops_per_step,
        }
        optional = {
            "halving": self.halving.to_dict() if self.halving else None,
            "branches": [b.to_dict() for b in self.branches],
            "branched_from": self.branched_from,
        }
        trial.update((k, v) for k, v in optional.items() if v)  # only where the trial has them
        return {"trial": trial, "run": self.run.to_dict()}

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> TrialConfig:
        read = {
            "model": ModelConfig.from_dict,
            "data": DataConfig.from_dict,
            "train": TrainConfig.from_dict,
            "resources": lambda d: RayAsk.from_dict(d or {}),
            "resume_uris": tuple,
            "halving": lambda d: HalvingPlan.from_dict(d) if d else None,
            "branches": lambda bs: tuple(Branch.from_dict(b) for b in bs),
            "run": lambda d: RunSettings.from_dict(d or {}),
        }
        return from_fields(cls, {**config["trial"], "run": config.get("run")}, read)

    @classmethod
    def of(cls, trial, **more: Any) -> TrialConfig:
        """The config of a spec's trial (sweeps/plans/spec.py `Trial`), with `more` of the fields above."""
        return cls(trial_id=trial.trial_id, model=trial.model, data=trial.data, train=trial.train, **more)

    @staticmethod
    def id_of(config: Mapping[str, Any]) -> str:
        """The trial_id in a Tune config, without reading the rest (Tune's name for a trial)."""
        return config["trial"]["trial_id"]

    # -- what the rest of the sweep asks of a trial ------------------------------------------
    def branch(self, trial_id: str) -> TrialConfig:
        """The config of this run's cooldown branch `trial_id`, as its row records it."""
        b = next(b for b in self.branches if b.trial_id == trial_id)
        return replace(self, trial_id=b.trial_id, train=b.train, branches=(), branched_from=self.trial_id)

    def branch_ids(self) -> dict[int, str]:
        """Each cooldown branch's trial_id by its budget in steps."""
        return {b.train.steps: b.trial_id for b in self.branches}

    @property
    def wsd(self) -> bool:
        return self.train.schedule == "wsd"

    def data_for_run(self) -> DataConfig:
        """The data config the trial trains on. Tune runs each trial in its own folder, so a
        relative data path in a spec means the folder the sweep started from (the stored config,
        and so the trial id, keep the path as written)."""
        d = self.data
        if d.path and not os.path.isabs(os.path.expanduser(d.path)) and self.run.cwd:
            return d.replace(path=os.path.join(self.run.cwd, d.path))
        return d
