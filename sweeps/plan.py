"""`depthwidth sweep plan`: the expanded trial table and what the sweep will cost, run nothing.

Per trial: N and its training compute (depthwidth.accounting.train_flops_per_token, the same
count train() records: 3 × Kaplan's forward 2N + 2·n_layer·n_ctx·d_attn), the memory estimate
against the trial's GPU fraction, and totals in FLOPs, PF-days and GPU-hours (or CPU core-hours) at the
throughput the spec assumes (resources.gpu_tflops / cpu_gflops).
"""

from __future__ import annotations

from typing import Any, Iterable

from depthwidth.published import PF_DAY
from sweeps.spec import SpecError, SweepSpec, Trial, resolve_model


INT64_LIMIT = 2 ** 63  # the store's count columns (N, tokens, steps) are 64-bit integers


def trial_plan(trial: Trial, spec: SweepSpec) -> dict[str, Any]:
    from depthwidth.accounting import count_params, memory_estimate, train_flops_per_token

    model = resolve_model(trial.model, trial.data)
    counts = count_params(model)
    tokens = trial.train.steps * trial.train.batch_size * model.seq_len
    train_flops = train_flops_per_token(model) * tokens
    mem_gb = memory_estimate(model, trial.train.batch_size) / 1e9
    r = spec.resources
    budget_gb = r.gpus * r.gpu_memory_gb if r.gpus > 0 else float("nan")
    return {
        "trial_id": trial.trial_id, "family": model.family, "depth": model.depth,
        "width": model.width, "heads": model.heads, "seed": trial.train.seed, "lr": trial.train.lr,
        "n_params": counts.n_params, "n_params_total": counts.n_params_total,
        "steps": trial.train.steps, "tokens": tokens, "flops": train_flops,
        "mem_gb": mem_gb, "mem_budget_gb": budget_gb,
        "fits": bool(r.gpus == 0 or mem_gb <= budget_gb),
        "axes": ", ".join(f"{k}={v}" for k, v in trial.axes),
    }


def plan_rows(spec: SweepSpec) -> list[dict[str, Any]]:
    return [trial_plan(t, spec) for t in spec.trials]


def _where(spec: SweepSpec, row: dict[str, Any]) -> str:
    return f"{spec.source_path}: the trial at {row['axes'] or row['trial_id']}"


def check_sizes(spec: SweepSpec, rows: Iterable[dict[str, Any]]) -> None:
    """What no cluster can run: counts the store cannot hold, and GPU trials larger than a whole
    GPU (resources.gpu_memory_gb). Raises SpecError naming the trial."""
    r = spec.resources
    for row in rows:
        for key, what in (("n_params_total", "parameters"), ("tokens", "training tokens")):
            if row[key] >= INT64_LIMIT:
                raise SpecError(f"{_where(spec, row)} is invalid: it has {row[key]:.3g} {what}, "
                                f"more than the store's 64-bit counts hold (below 2**63).")
        if r.gpus > 0 and row["mem_gb"] > r.gpu_memory_gb:
            raise SpecError(f"{_where(spec, row)} is invalid: it needs about {row['mem_gb']:.3g} GB "
                            f"to train, more than a whole {r.gpu_memory_gb:g} GB GPU "
                            f"(resources.gpu_memory_gb).")


def check_node_memory(spec: SweepSpec, rows: Iterable[dict[str, Any]], node_bytes: float,
                      where: str) -> None:
    """CPU trials: the estimated memory must fit the largest node's memory (`where` names it)."""
    if spec.resources.gpus > 0:
        return
    for row in rows:
        if row["mem_gb"] * 1e9 > node_bytes:
            raise SpecError(f"{_where(spec, row)} is invalid: it needs about {row['mem_gb']:.3g} GB "
                            f"to train, more than the {node_bytes / 1e9:.3g} GB {where}.")


def check_memory(spec: SweepSpec, rows: Iterable[dict[str, Any]] | None = None) -> None:
    """Every check of trial sizes that needs no cluster: check_sizes, then GPU trials against
    the GPU fraction they ask for."""
    rows = list(rows if rows is not None else plan_rows(spec))
    check_sizes(spec, rows)
    if spec.resources.gpus <= 0:
        return
    for row in rows:
        if not row["fits"]:
            raise SpecError(
                f"{spec.source_path}: resources.gpus = {spec.resources.gpus!r} is invalid: the trial at "
                f"{row['axes'] or row['trial_id']} needs about {row['mem_gb']:.3g} GB, more than "
                f"{row['mem_budget_gb']:.3g} GB ({spec.resources.gpus:g} of a "
                f"{spec.resources.gpu_memory_gb:g} GB GPU).")


def totals(spec: SweepSpec, rows: list[dict[str, Any]]) -> dict[str, float]:
    r = spec.resources
    flops = float(sum(row["flops"] for row in rows))
    out = {"trials": float(len(rows)), "flops": flops, "pf_days": flops / PF_DAY}
    if r.gpus > 0:
        out["gpu_hours"] = flops / (r.gpu_tflops * 1e12) / 3600.0
    else:
        out["cpu_core_hours"] = flops / (r.cpu_gflops * 1e9) / 3600.0
    return out


def plan_text(spec: SweepSpec, finished: set[str] | None = None) -> str:
    from depthwidth.accounting import machine_memory_bytes

    rows = plan_rows(spec)
    check_sizes(spec, rows)
    here = machine_memory_bytes() if spec.resources.gpus <= 0 else None
    lines = [f"sweep {spec.name!r}: {len(rows)} trials, storage {spec.storage}"]
    if spec.description:
        lines.append(spec.description)
    head = (f"{'trial_id':16} {'family':11} {'depth':>5} {'width':>6} {'heads':>5} {'seed':>4} {'lr':>8} "
            f"{'N':>12} {'steps':>8} {'tokens':>10} {'FLOPs':>9} {'mem GB':>8} {'of GPU':>7}  state")
    lines += [head, "-" * len(head)]
    for row in rows:
        state = "done" if finished and row["trial_id"] in finished else "to run"
        if not row["fits"]:
            state += " (too big for its GPU fraction)"
        if here is not None and row["mem_gb"] * 1e9 > here:
            state += f" (too big for this machine's {here / 1e9:.3g} GB)"
        budget = f"{row['mem_budget_gb']:7.1f}" if row["mem_budget_gb"] == row["mem_budget_gb"] else "      -"
        lines.append(f"{row['trial_id']:16} {row['family']:11} {row['depth']:5d} {row['width']:6d} "
                     f"{row['heads']:5d} {row['seed']:4d} {row['lr']:8.2g} {row['n_params']:12,d} {row['steps']:8d} "
                     f"{row['tokens']:10.3g} {row['flops']:9.3g} {row['mem_gb']:8.3f} {budget}  {state}")
    t = totals(spec, rows)
    r = spec.resources
    lines.append("-" * len(head))
    lines.append(f"total training compute {t['flops']:.3g} FLOPs = {t['pf_days']:.3g} PF-days")
    if "gpu_hours" in t:
        lines.append(f"estimated {t['gpu_hours']:.3g} GPU-hours at an assumed {r.gpu_tflops:g} TFLOP/s "
                     f"sustained per GPU ({r.gpus:g} GPU per trial; packing changes wall time, not GPU-hours)")
    else:
        lines.append(f"estimated {t['cpu_core_hours']:.3g} CPU core-hours at an assumed "
                     f"{r.cpu_gflops:g} GFLOP/s per core ({r.cpus:g} CPU per trial)")
    if finished is not None:
        todo = sum(1 for row in rows if row["trial_id"] not in finished)
        lines.append(f"{len(rows) - todo} trials already in the store, {todo} to run")
    return "\n".join(lines)
