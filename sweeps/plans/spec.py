"""Sweep specs: a TOML file, validated once at the edge, expanded to trials with stable ids.

A sweep is a grid of depth x width (x any other config field) in the sense of Levine et al.
2020 and Kaplan et al. 2020 (docs/science.md §1-2). Format reference (sweeps/README.md has more):

    name = "smoke"                  # required: letters, digits, "-", "_", "."
    description = "..."             # optional
    where = "width % heads == 0"    # optional filter on grid points (string or list; all must hold)
    [model]  family = "transformer", heads = 2, ...   # fixed ModelConfig fields
    [data]   source = "pcfg", vocab_size = 64, ...    # fixed DataConfig fields
    [train]  batch_size = 16, lr = 3e-3, ...          # fixed TrainConfig fields
    [grid]   depth = [1, 2], width = [16, 32], seed = [0, 1], "data.seed" = [0]  # cartesian product
    [[points]] depth = 8, width = 16                  # explicit extra points (where not applied)
    [budget] steps = 300 | tokens = 2e6 | compute = 1e15 | tokens_per_param = 20;
             evals = 10, min_steps = 500, warmup_fraction = 0.05   # optional
             from_one_run = true  # with [train] schedule = "wsd": a steps axis from one run
                                  # and its cooldown branches (sweeps/plans/branches.py)
    [resources] cpus = 1, gpus = 0.25 | "auto", workers = 1, sharding = "ddp" | "fsdp",
                max_concurrent = 2, max_failures = 3, gpu_memory_gb = 80, gpu_tflops = 100,
                cpu_gflops = 10               # cpus and gpus are per worker
    [storage] path = "results/smoke"                  # local path or pyarrow URI (s3://, gs://, file://)
    [tracking] mlflow = "sqlite:///mlruns.db", wandb = { project = "p", mode = "offline" },
               tensorboard = true                     # optional experiment trackers
    [adaptive] target_width = 0.5, max_trials = 40, max_compute = 1e15, initial = 12, batch = 2
                                                      # optional: run only the trials that narrow b

Axis names are fields of ModelConfig, DataConfig or TrainConfig. A field in several configs
must be qualified (`model.vocab_size`, `data.vocab_size`), except the rule `seed` = train.seed:
every trial of a sweep then sees the same synthetic language unless `data.seed` is swept.
trial_id = first 16 hex digits of SHA-256 over the canonical JSON of the three configs, leaving
out execution knobs that do not change what is computed (EXECUTION_FIELDS) and fields added since
the first stores were written while they hold their old behaviour (LATER_FIELDS); a data path is
read from the spec file's folder and enters the id as its content's hash (sweeps/plans/datapath.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from depthwidth.config import TUNING_FIELDS, ConfigError, DataConfig, ModelConfig, TrainConfig
from sweeps.plans import datapath
from sweeps.plans.branches import check_one_run
from sweeps.plans.budget import (
    Budget,
    apply_budget,
    missing_data_allowed,
    model_stats,
    parse_budget,
    planning_without_data,
    resolve_model,
)
from sweeps.plans.errors import SpecError, choice, fail, known_table, number, text
from sweeps.plans.expand import MAX_TRIALS, _cheap_sources, grid_trials
from sweeps.plans.halving import HalvingPlan, parse_halving
from sweeps.plans.halving import plan as plan_halving
from sweeps.plans.tracking import Tracking, parse_tracking
from sweeps.plans.trialconfig import WithConfigs, configs_dict
from sweeps.plans.where import WhereError, compile_where, evaluate_where, where_names

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


CONFIGS: dict[str, type] = {"model": ModelConfig, "data": DataConfig, "train": TrainConfig}
FIELDS: dict[str, tuple[str, ...]] = {k: tuple(f.name for f in fields(c)) for k, c in CONFIGS.items()}
# `seed` alone means the training seed (init + batch order); the language stays fixed.
DEFAULT_OWNER = {"seed": "train"}
EXECUTION_FIELDS = {"train": ("device", "threads", "compile", "checkpoint_every")}
# Fields added after stores existed, with the value that reproduces the earlier behaviour: left
# out of the id at that value, so an existing store's trials keep their ids (and are not rerun).
LATER_FIELDS = {
    "model": {"base_depth": 2, "depth_alpha": 1.0},
    "train": {"eps": 1e-8, "schedule": "cosine", "cooldown_fraction": 0.2, "cooldown": "1-sqrt"},
}
TOP_KEYS = (
    "name",
    "description",
    "where",
    "model",
    "data",
    "train",
    "grid",
    "points",
    "budget",
    "resources",
    "storage",
    "tracking",
    "adaptive",
    "halving",
)  # [adaptive]: sweeps/designing/adaptive.py; [halving]: sweeps/plans/halving.py
RESOURCE_KEYS = (
    "cpus",
    "gpus",
    "workers",
    "sharding",
    "max_concurrent",
    "max_failures",
    "gpu_memory_gb",
    "gpu_tflops",
    "cpu_gflops",
)
MIN_THROUGHPUT = 1e-6  # gpu_tflops, cpu_gflops: below it FLOPs / throughput can overflow to inf
SHARDINGS = ("ddp", "fsdp")  # data parallel: replicated weights, or weights sharded over workers
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # whole name: fullmatch


@dataclass(frozen=True)
class Resources:
    """What each trial asks for. With workers > 1 a trial is that many data-parallel workers
    (Ray Train), and cpus and gpus are per worker. gpus = "auto" sizes each trial's GPU share
    from its memory estimate (sweeps/plans/packing.py)."""

    cpus: float = 1.0
    gpus: float | str = 0.0  # a fraction in [0, 1], or "auto"
    workers: int = 1
    sharding: str = "ddp"
    max_concurrent: int = 0  # 0: as many as the cluster's resources allow
    max_failures: int = 3
    gpu_memory_gb: float = 80.0  # per GPU, when the cluster's nodes do not say (sweeps/plans/packing.py)
    gpu_tflops: float = 100.0  # assumed sustained training throughput per GPU (plan only)
    cpu_gflops: float = 10.0  # assumed sustained training throughput per CPU core (plan only)

    @property
    def auto_gpus(self) -> bool:
        return self.gpus == "auto"

    @property
    def uses_gpus(self) -> bool:
        return self.auto_gpus or float(self.gpus) > 0


@dataclass(frozen=True)
class Trial(WithConfigs):
    trial_id: str
    model: ModelConfig
    data: DataConfig
    train: TrainConfig
    axes: tuple[tuple[str, Any], ...]  # the grid coordinates that made this trial, for display
    aliases: tuple[str, ...] = ()  # its ids from before data paths were resolved (sweeps/plans/datapath.py)


@dataclass(frozen=True)
class SweepSpec:
    name: str
    description: str
    source_path: str
    text: str  # the TOML as written, stored verbatim in the store's spec.toml
    trials: tuple[Trial, ...]
    resources: Resources
    storage: str
    budget: Budget | None
    tracking: Tracking = Tracking()  # [tracking]: experiment trackers (sweeps/plans/tracking.py)
    # [halving]: trial_id -> its group and rung steps (sweeps/plans/halving.py); empty without one
    halving: Mapping[str, HalvingPlan] = field(default_factory=dict)
    # budget.from_one_run: trial_id of each cooldown branch -> the run it branches from
    # (sweeps/plans/branches.py); empty without it
    branched_from: Mapping[str, str] = field(default_factory=dict)
    # data paths not on this machine yet, planned without them (load_spec(allow_missing_data=True))
    missing_data: tuple[str, ...] = ()
    adaptive: Any = None  # [adaptive]: its settings (sweeps/designing/adaptive.Adaptive), None without one

    def adopt(self, stored: set[str]) -> SweepSpec:
        """The same sweep with each trial that a store holds under an older id (an alias) known
        by that id, so the store's finished trials are not run again."""
        trials = tuple(
            next((replace(t, trial_id=a) for a in t.aliases if t.trial_id not in stored and a in stored), t)
            for t in self.trials
        )
        return replace(self, trials=trials)


def trial_id_of(model: ModelConfig, data: DataConfig, train: TrainConfig, data_id: str | None = None) -> str:
    """`data_id` stands for the data path (sweeps/plans/datapath.identity: its content's hash)."""
    blob = json.dumps(identity(model, data, train, data_id), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def identity(
    model: ModelConfig, data: DataConfig, train: TrainConfig, data_id: str | None = None
) -> dict[str, dict[str, Any]]:
    """What defines a run, as its trial_id hashes it: the three configs less how the run is
    executed (EXECUTION_FIELDS) and less the fields added since at their earlier value
    (LATER_FIELDS); the data path stands as `data_id` where one is given."""
    parts = configs_dict(model, data, train)
    if data_id is not None and parts["data"].get("path"):
        parts["data"]["path"] = data_id
    for section, names in EXECUTION_FIELDS.items():
        for n in names:
            parts[section].pop(n, None)
    for section, defaults in LATER_FIELDS.items():
        for n, old in defaults.items():
            if parts[section].get(n) == old:
                parts[section].pop(n)
    return parts


def resolve_axis(name: str, where: str, kind: str = "axis") -> tuple[str, str]:
    """'depth' -> ('model', 'depth'); 'data.seed' -> ('data', 'seed'); ambiguity is an error."""
    if "." in name:
        owner, _, fname = name.partition(".")
        if owner not in CONFIGS:
            raise SpecError(
                f"{where}: {kind} {name!r} has an unknown qualifier {owner!r}; use model., data. or train."
            )
        if fname not in FIELDS[owner]:
            raise SpecError(
                f"{where}: {kind} {name!r} is not a field of {CONFIGS[owner].__name__}; "
                f"known fields: {', '.join(FIELDS[owner])}."
            )
        return owner, fname
    owners = [k for k, names in FIELDS.items() if name in names]
    if not owners:
        raise SpecError(f"{where}: {kind} {name!r} is not a field of ModelConfig, DataConfig or TrainConfig.")
    if len(owners) > 1:
        if name in DEFAULT_OWNER:
            return DEFAULT_OWNER[name], name
        raise SpecError(
            f"{where}: {kind} {name!r} is ambiguous (a field of "
            f"{' and '.join(CONFIGS[o].__name__ for o in owners)}); write "
            f"{' or '.join(o + '.' + name for o in owners)}."
        )
    return owners[0], name


def _flatten_axes(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Dotted TOML keys (data.seed = [...]) arrive as nested tables; flatten them back."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        if k in CONFIGS and isinstance(v, Mapping):
            for k2, v2 in v.items():
                out[f"{k}.{k2}"] = v2
        elif isinstance(v, Mapping):
            raise SpecError(f"{where}: axis {k!r} is a table; qualify fields as model.X, data.X or train.X.")
        else:
            out[k] = v
    return out


def _fixed(doc: Mapping[str, Any], section: str, path: str) -> dict[str, Any]:
    table = known_table(doc.get(section, {}), path, section, tuple(FIELDS[section]), noun="field")
    for k, v in table.items():
        if isinstance(v, (list, Mapping)):
            raise fail(path, f"{section}.{k}", v, "fixed fields take one value; sweep lists in [grid]")
    return dict(table)


def _resources(doc: Mapping[str, Any], path: str) -> Resources:
    table = known_table(doc.get("resources", {}), path, "resources", RESOURCE_KEYS)
    r = Resources()
    kw: dict[str, Any] = {}
    for k, v in table.items():
        if k in ("max_concurrent", "max_failures"):
            kw[k] = int(number(path, f"resources.{k}", v, positive=False, integer=True))
        elif k == "workers":
            kw[k] = int(number(path, "resources.workers", v, integer=True))
        elif k == "sharding":
            kw[k] = choice(path, "resources.sharding", v, SHARDINGS)
        elif k == "gpus" and isinstance(v, str):
            kw[k] = choice(path, "resources.gpus", v, ("auto",), 'expected a fraction in [0, 1] or "auto"')
        elif k == "gpus":
            kw[k] = float(number(path, "resources.gpus", v, positive=False))
            if kw[k] > 1:
                raise fail(
                    path,
                    "resources.gpus",
                    v,
                    "each worker trains on one device, so ask "
                    "for a fraction in [0, 1] (more devices: resources.workers)",
                )
        else:
            kw[k] = float(number(path, f"resources.{k}", v))
            if k in ("gpu_tflops", "cpu_gflops") and kw[k] < MIN_THROUGHPUT:
                raise fail(
                    path,
                    f"resources.{k}",
                    v,
                    f"must be at least {MIN_THROUGHPUT:g}; a "
                    f"slower machine makes the plan's time estimates infinite",
                )
    out = Resources(**{**r.__dict__, **kw})
    if out.workers > 1 and not out.auto_gpus and 0 < float(out.gpus) < 1:
        raise fail(
            path,
            "resources.gpus",
            out.gpus,
            "the workers of one trial cannot share a GPU "
            '(NCCL runs one rank per GPU); ask for 1 per worker, or "auto"',
        )
    return out


def _storage(doc: Mapping[str, Any], name: str, path: str) -> str:
    table = known_table(doc.get("storage", {}), path, "storage", ("path",))
    value = table.get("path", f"results/{name}")
    text(path, "storage.path", value, "expected a non-empty path or URI")
    return value


def _make_trial(
    base: dict[str, dict[str, Any]],
    point: Mapping[str, Any],
    budget: Budget | None,
    where: str,
    base_dir: str | None = None,
) -> Trial:
    cfg = {k: dict(v) for k, v in base.items()}
    axes = []
    for name, value in point.items():
        owner, fname = resolve_axis(name, where)
        cfg[owner][fname] = value
        axes.append((name, value))
    written = cfg["data"].get("path")
    if isinstance(written, str):
        try:
            cfg["data"]["path"] = datapath.resolve(written, base_dir)
        except datapath.UnsetVariable as exc:
            if not planning_without_data():  # a plan names the path as written (budget.py)
                raise SpecError(
                    f"{where}: data.path = {written!r} is invalid: the environment variable "
                    f"{exc.name} is not set; set it to the data's folder (docs/data.md)."
                ) from None
    label = ", ".join(f"{k}={v!r}" for k, v in axes) or "the fixed config"
    try:
        model = ModelConfig.from_dict(cfg["model"])
        data = DataConfig.from_dict(cfg["data"])
        train = TrainConfig.from_dict(cfg["train"])
        resolve_model(model, data)  # the data must agree with the model (vocab, task length)
        train = apply_budget(model, data, train, budget, where)
    except (ConfigError, ValueError) as exc:
        if isinstance(exc, SpecError):
            raise
        raise SpecError(f"{where}: the trial at {label} is invalid: {exc}") from None
    if not data.path:
        return Trial(trial_id_of(model, data, train), model, data, train, tuple(axes))
    try:
        tid = trial_id_of(model, data, train, datapath.identity(data.path))
    except ValueError as exc:  # a prepared corpus whose files are not what its meta.json says
        raise SpecError(f"{where}: the trial at {label} is invalid: {exc}") from None
    old = [
        trial_id_of(model, replace(data, path=p), train) for p in datapath.legacy_paths(written, data.path)
    ]
    return Trial(tid, model, data, train, tuple(axes), tuple(dict.fromkeys(a for a in old if a != tid)))


def _where_env(model: ModelConfig, data: DataConfig, train: TrainConfig, used: set[str]) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for section, cfg in (("model", model), ("data", data), ("train", train)):
        for f in FIELDS[section]:
            env[f"{section}.{f}"] = getattr(cfg, f)
            if sum(f in FIELDS[s] for s in FIELDS) == 1 or DEFAULT_OWNER.get(f) == section:
                env[f] = getattr(cfg, f)
    if "n_params" in used:
        env["n_params"] = model_stats(model, data)[0]
    env["aspect"] = model.width / model.depth  # Kaplan Figure 5's d_model / n_layer
    return env


def _value_key(v: Any) -> tuple[str, Any]:
    """What makes two axis values the same trial: 1 and 1.0 are one learning rate (the config
    turns both into 1.0), but True is not the number 1."""
    return ("bool", v) if isinstance(v, bool) else ("value", v)


def _axes(doc: Mapping[str, Any], path: str, base: Mapping[str, Mapping[str, Any]]) -> dict[str, list[Any]]:
    table = doc.get("grid", {})
    if not isinstance(table, Mapping):
        raise fail(path, "grid", table, "expected a table of axes")
    axes = _flatten_axes(table, path + " [grid]")
    seen: dict[tuple[str, str], str] = {}
    for name, values in axes.items():
        key = resolve_axis(name, path)
        if key in seen:
            raise SpecError(f"{path}: axes {seen[key]!r} and {name!r} name the same field.")
        seen[key] = name
        owner, fname = key
        if fname in base[owner]:
            raise fail(
                path,
                f"grid.{name}",
                values,
                f"[{owner}] sets {fname} = {base[owner][fname]!r} too; give it in one place",
            )
        if not isinstance(values, list):
            raise fail(path, f"grid.{name}", values, "an axis is a list of values")
        if not values:
            raise fail(path, f"grid.{name}", values, "an axis needs at least one value")
        if any(isinstance(v, (list, Mapping)) for v in values):
            raise fail(path, f"grid.{name}", values, "axis values must be plain numbers, strings or booleans")
        if len({_value_key(v) for v in values}) != len(values):
            raise fail(path, f"grid.{name}", values, "the axis repeats a value")
    return axes


def parse_spec(text: str, source_path: str = "<spec>", base_dir: str | None = None) -> SweepSpec:
    """Validate a spec's TOML text and expand it into trials. Raises SpecError. Relative data
    paths are taken from `base_dir` (the spec file's folder), or as written when it is None."""
    path = source_path
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path} is not valid TOML: {exc}.") from None
    name, description = _name(doc, path)
    base = {s: _fixed(doc, s, path) for s in CONFIGS}
    budget = parse_budget(doc, path)
    resources = _resources(doc, path)
    storage = _storage(doc, name, path)
    tracking = parse_tracking(doc, path)
    axes = _axes(doc, path, base)
    _check_budget_owns(budget, base, axes, path)
    if budget is not None and budget.from_one_run and budget.warmup_fraction is not None:
        budget = _one_warmup(budget, base, axes, path)
    where = _where(doc, path)
    points = doc.get("points", [])
    if not isinstance(points, list) or not all(isinstance(p, Mapping) for p in points):
        raise fail(path, "points", points, "expected [[points]] tables")
    trials = _grid(base, axes, budget, path, where.compiled, where.used, base_dir)
    if axes and not trials:
        raise fail(path, "where", where.raw, "it leaves no grid point to run")
    trials = _unique(
        trials + [_point_trial(i, p, base, budget, path, base_dir) for i, p in enumerate(points)]
    )
    _check_workers(trials, resources, path)
    halving = parse_halving(doc, path)
    if halving and resources.workers > 1:
        raise fail(path, "resources.workers", resources.workers, "[halving] runs one-process trials only")
    if halving and "adaptive" in doc:
        raise fail(path, "halving", dict(doc["halving"]), "an [adaptive] sweep chooses its own trials")
    halving_plan = plan_halving(trials, halving, path, _halving_axis(halving.axis, path)) if halving else {}
    branched_from = {}
    if budget is not None and budget.from_one_run:
        if halving:
            raise fail(
                path,
                "halving",
                dict(doc["halving"]),
                "a sweep with budget.from_one_run = true takes every budget from one run; "
                "choose its learning rate from the full grid",
            )
        if resources.workers > 1:
            raise fail(
                path,
                "resources.workers",
                resources.workers,
                "budget.from_one_run takes its cooldown branches in one-process trials only",
            )
        axis = "grid.eval_every" if "eval_every" in doc.get("grid", {}) else "train.eval_every"
        branched_from = check_one_run(trials, path, axis)
    adaptive = None
    if "adaptive" in doc:  # every table of the spec is checked here, for every command that reads it
        from sweeps.plans.adaptive_spec import check_adaptive, parse_adaptive

        adaptive = parse_adaptive(doc, path)
        check_adaptive(trials, path)
    return SweepSpec(
        name,
        description,
        source_path,
        text,
        tuple(trials),
        resources,
        storage,
        budget,
        tracking,
        halving_plan,
        branched_from,
        adaptive=adaptive,
    )


def _one_warmup(budget: Budget, base: dict, axes: Mapping[str, Any], path: str) -> Budget:
    """budget.warmup_fraction of a sweep whose budgets share one run: a fraction of the shortest
    budget, the same number of steps for all of them (the run's warmup is every branch's)."""
    lengths = [
        v for name, vals in axes.items() if resolve_axis(name, path) == ("train", "steps") for v in vals
    ]
    if budget.kind == "steps":
        lengths.append(int(budget.value))
    if not lengths:
        lengths.append(int(base["train"].get("steps", TrainConfig().steps)))
    shortest = min(int(v) for v in lengths if isinstance(v, (int, float)))
    base["train"]["warmup_steps"] = int(round(budget.warmup_fraction * shortest))
    return replace(budget, warmup_fraction=None)


def _halving_axis(axis: str, path: str) -> tuple[str, str]:
    """(config, field) of the halving axis: a tuning axis, never a shape or data axis, because
    halving stops the values that lose, and the analysis compares shapes at their best tuning."""
    owner, fname = resolve_axis(axis, path)
    if fname not in TUNING_FIELDS.get(owner, ()):
        names = ", ".join(f for fields_ in TUNING_FIELDS.values() for f in fields_)
        raise fail(
            path,
            "halving.axis",
            axis,
            f"it must be a tuning axis ({names}), never a shape or data axis: halving stops the "
            f"values that lose, and only a setting chosen per shape may lose",
        )
    return owner, fname


def _name(doc: Mapping[str, Any], path: str) -> tuple[str, str]:
    """The spec's top-level keys are known ones; its name and description."""
    for k in doc:
        if k not in TOP_KEYS:
            raise SpecError(f"{path}: unknown key {k!r}; known keys: {', '.join(TOP_KEYS)}.")
    name = doc.get("name")
    if name is None:
        raise SpecError(f'{path}: name is missing; every sweep needs a name (e.g. name = "smoke").')
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise fail(path, "name", name, "use 1-100 letters, digits, '-', '_' or '.'")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise fail(path, "description", description, "expected a string")
    return name, description


def _check_budget_owns(
    budget: Budget | None, base: Mapping[str, Mapping[str, Any]], axes: Mapping[str, Any], path: str
) -> None:
    """A [budget] that sets steps (and warmup) is their only source."""
    for fname, owner_key in (("steps", "kind"), ("warmup_steps", "warmup_fraction")):
        if budget is None or (owner_key == "warmup_fraction" and budget.warmup_fraction is None):
            continue
        if owner_key == "kind" and not budget.kind:  # from_one_run alone: the steps are the grid's
            continue
        if fname in base["train"] or any(resolve_axis(a, path) == ("train", fname) for a in axes):
            raise fail(
                path,
                f"train.{fname}",
                base["train"].get(fname, "[grid]"),
                f"[budget] sets {fname}; give it in one place",
            )


@dataclass(frozen=True)
class _Where:
    raw: Any  # as written, for messages
    compiled: list
    used: set[str]  # the names the expressions read


def _where(doc: Mapping[str, Any], path: str) -> _Where:
    """The `where` filters, compiled, each name they read checked."""
    raw_where = doc.get("where", [])
    exprs = [raw_where] if isinstance(raw_where, str) else raw_where
    if not isinstance(exprs, list) or not all(isinstance(e, str) for e in exprs):
        raise fail(path, "where", raw_where, "expected a string or a list of strings")
    try:
        compiled = [compile_where(e) for e in exprs]
    except WhereError as exc:
        raise SpecError(f"{path}: {exc}") from None
    used: set[str] = set().union(*(where_names(c) for c in compiled)) if compiled else set()
    for n in sorted(used):
        if n not in ("n_params", "aspect"):
            expr = next(c.text for c in compiled if n in where_names(c))
            resolve_axis(n, f"{path}: where = {expr!r} is invalid", kind="the name")
    return _Where(raw_where, compiled, used)


def _point_trial(
    i: int,
    point: Mapping[str, Any],
    base: dict[str, dict[str, Any]],
    budget: Budget | None,
    path: str,
    base_dir: str | None = None,
) -> Trial:
    """One [[points]] table: one value per field."""
    flat = _flatten_axes(point, f"{path} [[points]] #{i + 1}")
    for k, v in flat.items():
        if isinstance(v, (list, Mapping)):
            raise fail(path, f"points[{i + 1}].{k}", v, "a point gives one value per field")
    return _make_trial(base, flat, budget, f"{path} [[points]] #{i + 1}", base_dir)


def _unique(trials: list[Trial]) -> list[Trial]:
    """The first trial of each trial_id, in order."""
    first: dict[str, Trial] = {}
    for t in trials:
        first.setdefault(t.trial_id, t)
    return list(first.values())


def _grid(base, axes, budget, path, compiled, used, base_dir=None) -> list[Trial]:
    """The grid's trials, the where filter applied while expanding (sweeps/plans/expand.py)."""
    names = list(axes)

    def count_check(n: int) -> None:
        if n > MAX_TRIALS:
            size = " x ".join(str(len(axes[a])) for a in names)
            raise SpecError(
                f"{path}: [grid] is invalid: it makes {n:,} trials ({size}"
                f"{' after where' if compiled else ''}), more than the {MAX_TRIALS:,} "
                f"one sweep plans; narrow the grid or split it into several sweeps."
            )

    def keep(trial: Trial) -> bool:
        return all(
            evaluate_where(c, _where_env(trial.model, trial.data, trial.train, used)) for c in compiled
        )

    try:
        sources = _cheap_sources(names, used, base, lambda n: resolve_axis(n, path))
        return grid_trials(
            names,
            axes,
            count_check,
            lambda point: _make_trial(base, point, budget, path, base_dir),
            keep,
            sources,
            compiled,
            evaluate_where,
        )
    except WhereError as exc:
        raise SpecError(f"{path}: {exc}") from None


def _check_workers(trials: list[Trial], resources: Resources, path: str) -> None:
    """N data-parallel workers split each batch (train and validation) into N equal shards."""
    if resources.workers == 1:
        return
    for t in trials:
        if t.train.batch_size % resources.workers:
            axes = ", ".join(f"{k}={v!r}" for k, v in t.axes) or "the fixed config"
            raise fail(
                path,
                "resources.workers",
                resources.workers,
                f"the trial at {axes} has batch_size {t.train.batch_size}, which "
                f"{resources.workers} workers cannot split into equal shards",
            )


def load_spec(path: str | os.PathLike, allow_missing_data: bool = False) -> SweepSpec:
    """The spec file `path` names, or the bundled spec of that name (sweeps/plans/bundled.py), parsed.
    `allow_missing_data`: plan a spec whose data is not prepared yet (`sweep plan`, `design`):
    text is known to have 256 symbols and a token corpus the spec's model.vocab_size; the spec's
    `missing_data` lists those paths, and its trial ids name them by path until they exist."""
    from sweeps.plans.bundled import bundled_specs, resolve_spec_path

    p = resolve_spec_path(path)
    if not p.is_file() and os.sep in str(path):
        raise SpecError(f"spec = {str(path)!r} is invalid: no such file.")
    if not p.is_file():
        names = ", ".join(bundled_specs())
        raise SpecError(
            f"spec = {str(path)!r} is invalid: no such file, and no bundled spec has that name "
            f"(bundled: {names}; `depthwidth sweep specs` lists them)."
        )
    try:
        text = p.read_text(encoding="utf-8-sig")  # editors on Windows may start it with a BOM
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"spec = {str(path)!r} is invalid: cannot read it ({exc}).") from None
    if not allow_missing_data:
        return parse_spec(text, str(p), base_dir=str(p.absolute().parent))
    with missing_data_allowed() as missing:
        spec = parse_spec(text, str(p), base_dir=str(p.absolute().parent))
    return replace(spec, missing_data=tuple(sorted(missing)))
