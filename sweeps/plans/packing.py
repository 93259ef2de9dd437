"""What each trial asks of Ray and of its machine: its GPU share sized from its memory estimate,
its host memory as a Ray resource, and its torch thread count (docs/design.md, "Packing").

Ray packs fractional GPUs but cannot know how much memory a trial needs (ray-project/ray #37574,
#26929), so `gpus = "auto"` derives the share from depthwidth.accounting.memory_estimate per
worker, with head-room, rounded up to a share Ray can pack without leaving slivers (1/8, 1/4,
1/2, 1). The GPU memory per node comes from the cluster where it says (our node label, or Ray's
accelerator type), else from the spec's `gpu_memory_gb`. Pure functions; no Ray, no torch.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# The estimate is "accurate to a small factor" (accounting.py), and the allocator fragments:
# ask for 25% more than it says, plus the CUDA context and allocator slack of each process.
SAFETY = 1.25
GPU_CONTEXT_GB = 1.0
SHARES = (0.125, 0.25, 0.5, 1.0)
# A trial process on CPU holds torch, the data and Ray's worker runtime besides the model:
# ~0.35 GB resident for the smallest trial (docs/bench/sweeps.md); 0.5 GB with head-room.
PROCESS_GB = 0.5
# The node label a cluster may set (ray start --labels='{"depthwidth.io/gpu-memory-gb": "80"}').
GPU_MEMORY_LABEL = "depthwidth.io/gpu-memory-gb"
# Memory per GPU of Ray's accelerator types (vendor data sheets), where the type fixes it.
ACCELERATOR_GB = {
    "H100": 80,
    "H200": 141,
    "A100-40G": 40,
    "A100-80G": 80,
    "L4": 24,
    "L40S": 48,
    "A10G": 24,
    "T4": 16,
    "B200": 180,
    "H20": 96,
    "RTX-PRO-6000": 96,
}
# Below this much training work per step a second torch thread does not pay on CPU: the step is
# a few hundred small kernels, and every one waits for the slowest thread (bench/cpu_threads.py;
# docs/bench/train.md). One thread per this much work, up to the CPUs the trial holds.
FLOPS_PER_THREAD = 2e9


def worker_memory(model, batch_size: int, workers: int = 1, sharding: str = "ddp") -> int:
    """Bytes one worker needs for one training step: the weights, gradients and AdamW moments
    (all of them under DDP; a 1/N shard under FSDP, plus one block gathered whole at a time)
    and the activations of its 1/N of the batch (depthwidth.accounting.memory_estimate)."""
    from depthwidth.accounting import BYTES_FP32, count_params, memory_estimate

    state = memory_estimate(model, 0)
    acts = memory_estimate(model, max(1, batch_size // workers)) - state
    if sharding == "fsdp" and workers > 1:
        block = count_params(model).n_params / max(1, model.depth)
        state = math.ceil(state / workers) + int(2 * block * BYTES_FP32)  # gathered weights + grads
    return int(state + acts)


def gpu_share(need_bytes: float, gpu_gb: float) -> float | None:
    """The smallest share in SHARES whose memory holds `need_bytes` with head-room; None when a
    whole GPU is not enough."""
    want_gb = need_bytes * SAFETY / 1e9 + GPU_CONTEXT_GB
    return next((q for q in SHARES if want_gb <= q * gpu_gb), None)


def workers_to_fit(model, batch_size: int, gpu_gb: float, largest: int = 64) -> int | None:
    """The fewest FSDP workers (a power of two dividing the batch) whose shard fits one GPU."""
    n = 1
    while n <= largest and batch_size % n == 0:
        if gpu_share(worker_memory(model, batch_size, n, "fsdp"), gpu_gb) is not None:
            return n
        n *= 2
    return None


def host_memory(need_bytes: float) -> int:
    """Bytes of host memory to ask Ray for a CPU worker: the estimate with head-room plus the
    process itself, rounded up to 2^k × 256 MiB. Coarse steps keep most trials of a sweep at the
    same ask, so Tune can hand a finished trial's warm process to the next (it reuses an actor
    only for an identical request)."""
    need = need_bytes * SAFETY + PROCESS_GB * 1e9
    step = 256 * 2**20
    return int(step * 2 ** max(0, math.ceil(math.log2(need / step))))


def cpu_threads(
    flops_per_step: float, cpus: float, load: float | None = None, cores: int | None = None
) -> int:
    """torch intra-op threads for a CPU trial: one per FLOPS_PER_THREAD of work per step, at
    least one and at most the CPUs the trial holds; one when the machine is already busier than
    its cores (load average ≥ cores), since an extra thread then waits for a core while every
    kernel waits for it — two threads made a tiny model 13× slower than one on a busy machine."""
    held = max(1, int(cpus))
    if load is not None and cores and load >= cores:
        return 1
    return max(1, min(held, int(flops_per_step // FLOPS_PER_THREAD)))


def machine_load() -> tuple[float | None, int | None]:
    try:
        return os.getloadavg()[0], os.cpu_count()
    except (AttributeError, OSError):  # not every platform has a load average
        return None, os.cpu_count()


@dataclass(frozen=True)
class Node:
    """One Ray node as `ray.nodes()` describes it, read once where Ray's answer enters
    (sweeps/backends/cluster.py `alive_nodes`): its id and address, what it offers Ray (by Ray's
    resource names: CPU, GPU, memory, accelerator_type:...), and its labels."""

    node_id: str
    address: str
    resources: Mapping[str, float]
    labels: Mapping[str, str]

    @classmethod
    def of(cls, n: Mapping[str, Any]) -> Node:
        return cls(
            node_id=str(n.get("NodeID", "")),
            address=str(n.get("NodeManagerAddress", "")),
            resources=dict(n.get("Resources") or {}),
            labels=dict(n.get("Labels") or {}),
        )

    def offers(self, resource: str) -> float:
        """How much of a Ray resource it has (0 where it has none)."""
        return float(self.resources.get(resource, 0.0))

    @property
    def name(self) -> str:
        return f"{self.address} ({self.node_id[:8]})"

    def gpu_memory_gb(self) -> float | None:
        """The memory of one of its GPUs: our label, else Ray's accelerator type where the type
        fixes it; None where neither says."""
        if GPU_MEMORY_LABEL in self.labels:
            try:
                return float(self.labels[GPU_MEMORY_LABEL])
            except ValueError:
                pass
        kinds = [k.split(":", 1)[1] for k in self.resources if k.startswith("accelerator_type:")]
        kinds += [self.labels.get("ray.io/accelerator-type", "")]
        return next((float(ACCELERATOR_GB[k]) for k in kinds if k in ACCELERATOR_GB), None)


def node_gpu_memory_gb(nodes: Iterable[Node]) -> float | None:
    """GPU memory per GPU of the cluster, from each GPU node's label or accelerator type; the
    smallest over the nodes, since a trial may land on any of them. None when no GPU node says."""
    sizes = []
    for n in nodes:
        if n.offers("GPU") <= 0:
            continue
        gb = n.gpu_memory_gb()
        if gb is None:
            return None  # one GPU node of unknown size: fall back to the spec for all
        sizes.append(gb)
    return min(sizes) if sizes else None
