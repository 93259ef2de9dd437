"""`depthwidth sweep plan`: the expanded trial table and what the sweep will cost, run nothing.

Per trial: N and its training compute (depthwidth.accounting.train_flops_per_token, the same
count train() records: 3 × Kaplan's forward 2N + 2·n_layer·n_ctx·d_attn), the memory estimate
against the trial's GPU fraction, and totals in FLOPs, PF-days and GPU-hours (or CPU core-hours) at the
throughput the spec assumes (resources.gpu_tflops / cpu_gflops).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from depthwidth.published import PF_DAY
from sweeps.plans.packing import GPU_CONTEXT_GB, PROCESS_GB, SAFETY
from sweeps.plans.spec import SpecError, SweepSpec, Trial, resolve_model

INT64_LIMIT = 2**63  # the store's count columns (N, tokens, steps) are 64-bit integers


@dataclass(frozen=True)
class PlanRow:
    """One trial's size, cost and what it asks of Ray, per worker: computed once per trial by each
    command (`plan_rows`), read by the plan's table and totals, the memory checks, the cluster's
    packing and the service."""

    trial_id: str
    family: str
    depth: int
    width: int
    heads: int
    seed: int
    lr: float
    n_params: int
    n_params_total: int
    steps: int
    tokens: int
    flops: float  # what running it costs: a cooldown branch's cooldown alone
    budget_flops: float  # the training compute of its budget, as the store records it
    branched_from: str  # the run it is a cooldown branch of, where it is one (sweeps/plans/branches.py)
    workers: int
    sharding: str
    cpus: float
    gpus: float | None  # its GPU share per worker (None: more than one GPU's memory)
    gpu_memory_gb: float | None
    mem_gb: float
    mem_budget_gb: float  # its GPU share's memory (NaN on CPU)
    memory_bytes: int  # host memory asked of Ray (CPU trials)
    fits: bool
    fsdp_workers_to_fit: int | None
    axes: str

    def ray_resources(self) -> dict[str, float]:
        """What one worker of this trial asks Ray for: CPUs, a GPU share, host memory (CPU trials)."""
        gpu = {"GPU": float(self.gpus)} if self.gpus else {}
        memory = {"memory": float(self.memory_bytes)} if self.memory_bytes else {}
        return {"CPU": float(self.cpus), **gpu, **memory}

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def trial_plan(
    trial: Trial, spec: SweepSpec, gpu_gb: float | None = None, branch: str | None = None
) -> PlanRow:
    """One trial's PlanRow. `gpu_gb` is the memory of one of the cluster's GPUs
    (sweeps/plans/packing.py), the spec's gpu_memory_gb when not given; `branch`, the run it
    is a cooldown branch of (`branches_taken`; by default the spec's, before anything is stored)."""
    from depthwidth.accounting import count_params, train_flops_per_token
    from sweeps.plans.packing import gpu_share, host_memory, worker_memory, workers_to_fit

    model = resolve_model(trial.model, trial.data)
    counts = count_params(model)
    tokens = trial.train.steps * trial.train.batch_size * model.seq_len
    train_flops = train_flops_per_token(model) * tokens
    r = spec.resources
    gpu_gb = gpu_gb or r.gpu_memory_gb
    need = worker_memory(model, trial.train.batch_size, r.workers, r.sharding)
    branch = spec.branched_from.get(trial.trial_id, "") if branch is None else branch
    spent = train_flops
    if spec.branched_from:
        from sweeps.plans.branches import cost_share

        # a run with cooldown branches holds a second copy of its weights and Adam moments while
        # a branch trains (depthwidth.train: on disk where it would not fit); a branch costs only
        # its cooldown, the run it leaves pays for the steps before
        need += 3 * 4 * counts.n_params_total
        if branch:
            spent = train_flops * cost_share(trial.train)
    mem_gb = need / 1e9
    share, memory, hint = 0.0, 0, None
    if r.auto_gpus:
        share = gpu_share(need, gpu_gb)
        if share is not None and r.workers > 1:
            share = 1.0  # the workers of one trial cannot share a GPU (one NCCL rank per GPU)
        if share is None:
            hint = workers_to_fit(model, trial.train.batch_size, gpu_gb)
        fits = share is not None
    elif r.gpus > 0:
        share = float(r.gpus)
        fits = mem_gb <= share * gpu_gb
    else:
        fits, memory = True, host_memory(need)  # CPU trials ask Ray for their memory
    return PlanRow(
        trial_id=trial.trial_id,
        family=model.family,
        depth=model.depth,
        width=model.width,
        heads=model.heads,
        seed=trial.train.seed,
        lr=trial.train.lr,
        n_params=counts.n_params,
        n_params_total=counts.n_params_total,
        steps=trial.train.steps,
        tokens=tokens,
        flops=spent,
        budget_flops=train_flops,
        branched_from=branch,
        workers=r.workers,
        sharding=r.sharding,
        cpus=r.cpus,
        gpus=share,
        gpu_memory_gb=gpu_gb if r.uses_gpus else None,
        mem_gb=mem_gb,
        mem_budget_gb=(share or 0) * gpu_gb if r.uses_gpus else float("nan"),
        memory_bytes=memory,
        fits=bool(fits),
        fsdp_workers_to_fit=hint,
        axes=", ".join(f"{k}={v}" for k, v in trial.axes),
    )


def plan_rows(
    spec: SweepSpec, gpu_gb: float | None = None, finished: Iterable[str] = (), trials: Iterable | None = None
) -> list[PlanRow]:
    """The PlanRow of each of `trials` (default: the spec's), with the cooldown branches a sweep
    takes given the trials `finished` in its store (sweeps/plans/branches.py `branches_taken`)."""
    from sweeps.plans.branches import branches_taken

    taken = branches_taken(spec, finished)
    chosen = spec.trials if trials is None else trials
    return [trial_plan(t, spec, gpu_gb, taken.get(t.trial_id, "")) for t in chosen]


def _where(spec: SweepSpec, row: PlanRow) -> str:
    return f"{spec.source_path}: the trial at {row.axes or row.trial_id}"


def check_sizes(spec: SweepSpec, rows: Iterable[PlanRow]) -> None:
    """What no cluster can run: counts the store cannot hold, and GPU trials larger than a whole
    GPU (resources.gpu_memory_gb; gpus = "auto" says how many workers would fit). Raises
    SpecError naming the trial."""
    r = spec.resources
    for row in rows:
        for key, what in (("n_params_total", "parameters"), ("tokens", "training tokens")):
            if getattr(row, key) >= INT64_LIMIT:
                raise SpecError(
                    f"{_where(spec, row)} is invalid: it has {getattr(row, key):.3g} {what}, "
                    f"more than the store's 64-bit counts hold (below 2**63)."
                )
        if r.uses_gpus and not r.auto_gpus and row.mem_gb > r.gpu_memory_gb:
            raise SpecError(
                f"{_where(spec, row)} is invalid: it needs about {row.mem_gb:.3g} GB "
                f"to train, more than a whole {r.gpu_memory_gb:g} GB GPU "
                f"(resources.gpu_memory_gb)."
            )


def check_node_memory(spec: SweepSpec, rows: Iterable[PlanRow], node_bytes: float, where: str) -> None:
    """CPU trials: the estimated memory must fit the largest node's memory (`where` names it)."""
    if spec.resources.uses_gpus:
        return
    for row in rows:
        if row.mem_gb * 1e9 > node_bytes:
            raise SpecError(
                f"{_where(spec, row)} is invalid: it needs about {row.mem_gb:.3g} GB "
                f"to train, more than the {node_bytes / 1e9:.3g} GB {where}."
            )


def check_memory(spec: SweepSpec, rows: Iterable[PlanRow] | None = None) -> None:
    """Every check of trial sizes that needs no cluster: check_sizes, then each GPU worker's
    estimated memory against its GPU share."""
    rows = list(rows if rows is not None else plan_rows(spec))
    check_sizes(spec, rows)
    r = spec.resources
    if not r.uses_gpus:
        return
    for row in rows:
        if row.fits:
            continue
        at = row.axes or row.trial_id
        per = " per worker" if r.workers > 1 else ""
        gb = row.gpu_memory_gb
        if not r.auto_gpus:
            raise SpecError(
                f"{spec.source_path}: resources.gpus = {r.gpus!r} is invalid: the trial at {at} "
                f"needs about {row.mem_gb:.3g} GB{per}, more than {row.mem_budget_gb:.3g} GB "
                f"({r.gpus:g} of a {gb:g} GB GPU)."
            )
        n = row.fsdp_workers_to_fit
        fix = (
            f'give it resources.workers = {n} with sharding = "fsdp"'
            if n
            else "no number of FSDP workers that divides its batch brings it under one GPU"
        )
        raise SpecError(
            f"{spec.source_path}: resources.gpus = 'auto' is invalid: the trial at {at} needs about "
            f"{row.mem_gb:.3g} GB{per}, more than one {gb:g} GB GPU holds with "
            f"{round((SAFETY - 1) * 100)}% head-room; {fix}."
        )


def plan_json(spec: SweepSpec, finished: set[str] | None = None) -> str:
    """One JSON object per trial and line, for scripts (`sweep plan --json`)."""
    import json

    lines = []
    rows = plan_rows(spec, finished=finished or ())
    check_sizes(spec, rows)
    for row in rows:
        obj = {k: v for k, v in row.to_dict().items() if k != "fsdp_workers_to_fit"}
        budget = row.mem_budget_gb
        obj.update(
            mem_budget_gb=None if math.isnan(budget) else budget,  # NaN on CPU: JSON has no NaN
            ray_resources_per_worker=row.ray_resources(),
            done=bool(finished and row.trial_id in finished),
        )
        lines.append(json.dumps(obj, sort_keys=True))
    return "\n".join(lines)


@dataclass(frozen=True)
class Totals:
    """What a plan trains in all: FLOPs, PF-days, and the hours at the spec's assumed throughput
    (GPU-hours on GPUs, CPU core-hours on CPUs); against what separate runs would train where its
    budgets are branches of one run, and against the full grid where it halves."""

    trials: int
    flops: float
    pf_days: float
    hours: float
    on_gpus: bool
    separate_runs_flops: float | None = None  # each budget trained on its own
    full_grid_flops: float | None = None  # every trial of a halving to its last step

    @property
    def unit(self) -> str:
        """The name of `hours` in the plan's JSON and CSV files."""
        return "gpu_hours" if self.on_gpus else "cpu_core_hours"

    def hours_text(self, short: bool = False) -> str:
        what = (
            ("GPU-h" if short else "GPU-hours")
            if self.on_gpus
            else ("CPU core-h" if short else "CPU core-hours")
        )
        return f"{self.hours:.3g} {what}"

    def to_dict(self) -> dict[str, float]:
        """As `design --json` writes the cost: every figure a float, the optional ones only where
        the plan has them."""
        extra = {"separate_runs_flops": self.separate_runs_flops, "full_grid_flops": self.full_grid_flops}
        return {
            "trials": float(self.trials),
            "flops": self.flops,
            "pf_days": self.pf_days,
            **{k: v for k, v in extra.items() if v is not None},
            self.unit: self.hours,
        }


def totals(spec: SweepSpec, rows: list[PlanRow]) -> Totals:
    r = spec.resources
    flops = full = float(sum(row.flops for row in rows))
    separate = None
    if spec.branched_from:  # each budget trained on its own, against one run with cooldown branches
        separate = float(sum(row.budget_flops for row in rows))
    if spec.halving:  # what the successive halving trains of the full grid (sweeps/plans/halving.py)
        from sweeps.plans.halving import expected_flops

        flops = expected_flops(rows, spec.halving)
    throughput = r.gpu_tflops * 1e12 if r.uses_gpus else r.cpu_gflops * 1e9
    return Totals(
        trials=len(rows),
        flops=flops,
        pf_days=flops / PF_DAY,
        hours=flops / throughput / 3600.0,
        on_gpus=r.uses_gpus,
        separate_runs_flops=separate,
        full_grid_flops=full if spec.halving else None,
    )


def _share(q: float) -> str:
    return {0.125: "1/8", 0.25: "1/4", 0.5: "1/2", 1.0: "1"}.get(q, f"{q:g}") if q else "-"


def plan_text(spec: SweepSpec, finished: set[str] | None = None, store: str | None = None) -> str:
    """The plan as people read it; `store` says where its store is (sweeps/cli.py store_line)."""
    from depthwidth.accounting import machine_memory_bytes

    rows = plan_rows(spec, finished=finished or ())
    check_sizes(spec, rows)
    r = spec.resources
    here = machine_memory_bytes() if not r.uses_gpus else None
    lines = [f"sweep {spec.name!r}: {len(rows)} trials, storage {spec.storage}"]
    if store is not None:
        lines = [f"sweep {spec.name!r}: {len(rows)} trials", store]
    if spec.description:
        lines.append(spec.description)
    head = (
        f"{'trial_id':16} {'family':11} {'depth':>5} {'width':>6} {'heads':>5} {'seed':>4} {'lr':>8} "
        f"{'N':>12} {'steps':>8} {'tokens':>10} {'FLOPs':>9} {'mem GB':>8} {'GPU':>4} "
        f"{'of GPU':>7}  state"
    )
    lines += [head, "-" * len(head)]
    for row in rows:
        state = "done" if finished and row.trial_id in finished else "to run"
        if not row.fits:
            state += " (too big for its GPU fraction)" if not r.auto_gpus else " (more than one GPU)"
        if here is not None and row.mem_gb * 1e9 > here:
            state += f" (too big for this machine's {here / 1e9:.3g} GB)"
        budget = f"{row.mem_budget_gb:7.1f}" if row.mem_budget_gb == row.mem_budget_gb else "      -"
        lines.append(
            f"{row.trial_id:16} {row.family:11} {row.depth:5d} {row.width:6d} "
            f"{row.heads:5d} {row.seed:4d} {row.lr:8.2g} {row.n_params:12,d} {row.steps:8d} "
            f"{row.tokens:10.3g} {row.flops:9.3g} {row.mem_gb:8.3f} "
            f"{_share(row.gpus):>4} {budget}  {state}"
        )
    t = totals(spec, rows)
    lines.append("-" * len(head))
    per = f"per worker, {r.workers} {r.sharding.upper()} workers per trial; " if r.workers > 1 else ""
    if r.auto_gpus:
        lines.append(
            f'GPU shares ({per}gpus = "auto"): each worker\'s memory estimate x{SAFETY:g} + '
            f"{GPU_CONTEXT_GB:g} GB, rounded up to 1/8, 1/4, 1/2 or 1 of a "
            f"{r.gpu_memory_gb:g} GB GPU (resources.gpu_memory_gb; a sweep uses the GPU "
            f"memory its cluster's nodes report where they do)"
        )
    elif not r.uses_gpus:
        lines.append(
            f"memory asked of Ray per {'worker' if r.workers > 1 else 'trial'}: the estimate "
            f"x{SAFETY:g} + {PROCESS_GB:g} GB for the process"
        )
    elif per:
        lines.append(f"memory and GPU fraction are {per.rstrip('; ')}")
    if t.full_grid_flops is not None:
        h = next(iter(spec.halving.values()))
        lines.append(
            f"successive halving over {h.axis} (eta {h.eta}, rungs at steps "
            f"{', '.join(map(str, h.rungs))} of the first trial): the losers stop at their rung, so "
            f"the sweep trains {t.flops / t.full_grid_flops:.0%} of the full grid's "
            f"{t.full_grid_flops:.3g} FLOPs"
        )
    if t.separate_runs_flops is not None:
        n_branches = sum(1 for row in rows if row.branched_from)
        lines.append(
            f"every budget from one run (budget.from_one_run): {len(rows) - n_branches} WSD runs, each with a "
            f"cooldown branch per shorter budget ({n_branches} branches), train "
            f"{t.flops / t.separate_runs_flops:.0%} of the "
            f"{t.separate_runs_flops:.3g} FLOPs of separate runs; a branch row's FLOPs are its cooldown"
        )
    lines.append(f"total training compute {t.flops:.3g} FLOPs = {t.pf_days:.3g} PF-days")
    if t.on_gpus:
        lines.append(
            f"estimated {t.hours_text()} at an assumed {r.gpu_tflops:g} TFLOP/s "
            f"sustained per GPU (packing changes wall time, not GPU-hours)"
        )
    else:
        lines.append(
            f"estimated {t.hours_text()} at an assumed "
            f"{r.cpu_gflops:g} GFLOP/s per core ({r.cpus * r.workers:g} CPU per trial)"
        )
    if finished is not None:
        todo = sum(1 for row in rows if row.trial_id not in finished)
        lines.append(f"{len(rows) - todo} trials already in the store, {todo} to run")
    for path in spec.missing_data:
        unset = " (an environment variable that is not set)" if "$" in path else ""
        lines.append(
            f"data: {path}{unset} is not here yet; the plan counts it as the spec says (model.vocab_size), "
            f"but the sweep runs only once it exists (depthwidth data prepare CORPUS --out {path}), "
            f"and the trial ids then change to name its content"
        )
    lines.append(
        f"what this plan can detect before it runs: depthwidth design {spec.source_path} "
        f"(docs/design-power.md)"
    )
    return "\n".join(lines)
