"""A trial larger than one device: N data-parallel workers through Ray Train's TorchTrainer,
launched from inside the trial's Tune function (Ray Train V2's integration with Tune: the Tune
trial is the Train driver, and `TuneReportCallback` forwards rank 0's reports to Tune).

Ray Train starts the workers together in one placement group; the workers set up their process
group themselves (`join_process_group`: gloo on CPU, NCCL on GPU), with its store listening on
the node's own address only (127.0.0.1 on an embedded Ray), not on every interface as torch's
store does when Ray Train sets the group up. Each worker calls the same `depthwidth.train.train` with a
`Parallel`, so reports, checkpoints and the final result look exactly like a one-process trial's
and the driver stores them the same way, with `workers` in the row. Checkpoints (rank 0) go to
the trial's own folder in the store's `tune/`, where sweeps/running/resume.py finds them: a worker that
dies restarts all N workers from the last one (Train's FailureConfig), a trial whose driver dies
resumes on the next attempt (same Train run name), and a sweep run again resumes from there.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
from typing import Any

from runstore.layout import TUNE_DIR
from runstore.location import Location
from sweeps.backends import ray_compat
from sweeps.plans.trialconfig import TrialConfig
from sweeps.running.trainable import run_loop, take_environ

GROUP_TIMEOUT = dt.timedelta(minutes=30)  # a collective that waits longer fails (Train's default)


def run_workers(config: dict[str, Any]) -> None:
    """The Tune function's body for a trial of more than one worker (TrialConfig.run.workers)."""
    from ray import train as ray_train
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    tc = TrialConfig.from_dict(config)
    run = tc.run
    ray_compat.fast_train_health_check()
    take_environ(run)
    ask = tc.resources.to_dict()  # per worker
    use_gpu = tc.resources.gpu > 0
    store = Location(run.store)
    trainer = TorchTrainer(
        worker_loop,
        train_loop_config=config,
        scaling_config=ray_train.ScalingConfig(
            num_workers=run.workers, use_gpu=use_gpu, resources_per_worker=ask
        ),
        torch_config=_own_process_group("nccl" if use_gpu else "gloo"),
        run_config=ray_train.RunConfig(
            # the Tune trial's own folder: one Train run per trial and experiment, so a restarted
            # Tune attempt continues the same run (Train restores it by name)
            name=tc.trial_id,
            storage_path=store.path(f"{TUNE_DIR}/{run.experiment}"),
            storage_filesystem=store.fs,
            failure_config=ray_train.FailureConfig(max_failures=run.max_failures),
            checkpoint_config=ray_train.CheckpointConfig(num_to_keep=2),
            callbacks=[TuneReportCallback()],
        ),
    )
    trainer.fit()


def _own_process_group(backend: str):
    """Ray Train's torch setup, less its process group: TorchConfig's worker context (each
    worker's CUDA device) and its sharing of a node's GPUs among the node's workers stay; the
    group is made by `join_process_group` in each worker."""
    from ray.train.backend import Backend
    from ray.train.torch import TorchConfig

    class WorkersJoinThemselves(Backend):
        share_cuda_visible_devices = True

    class OwnGroupConfig(TorchConfig):
        @property
        def backend_cls(self):
            return WorkersJoinThemselves

    return OwnGroupConfig(backend=backend)  # the backend the workers will name


def join_process_group(rank: int, world: int, backend: str, host: str, exchange) -> None:
    """torch.distributed's default group for this worker, its store listening on this node's
    own address alone. torch's TCPStore binds its server to every interface when it opens the
    port itself, which on an embedded Ray would put a port beyond 127.0.0.1 (tests/
    test_sweep_workers.py watches every listener of a local two-worker sweep): rank 0 binds the
    socket to the node's address (127.0.0.1 there) and gives it to the store, and
    `exchange(value)` (rank 0's value, returned on every rank) tells the others where it is. On
    a loopback node gloo and NCCL are kept on the loopback interface too."""
    import torch.distributed as dist

    ip = ipaddress.ip_address(host)
    if ip.is_loopback:
        loopback = next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)
        if loopback is not None:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback)
            os.environ.setdefault("NCCL_SOCKET_IFNAME", loopback)
    if rank == 0:
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, 0))
        listener.listen()
        port = listener.getsockname()[1]
        store = dist.TCPStore(
            host,
            port,
            world,
            is_master=True,
            timeout=GROUP_TIMEOUT,
            wait_for_workers=False,
            master_listen_fd=listener.detach(),  # the store owns the socket from here
        )
        exchange((host, port))
    else:
        host, port = exchange(None)
        store = dist.TCPStore(host, port, world, is_master=False, timeout=GROUP_TIMEOUT)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=GROUP_TIMEOUT)


def worker_loop(config: dict[str, Any]) -> None:
    """One of the trial's N workers (runs in a Ray Train worker process)."""
    import torch.distributed as dist
    from ray import train as ray_train
    from ray.train.collective import broadcast_from_rank_zero
    from ray.util import get_node_ip_address

    from depthwidth.train import Parallel

    tc = TrialConfig.from_dict(config)
    take_environ(tc.run)
    ctx = ray_train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = None
    if tc.resources.gpu > 0:
        from ray.train.torch import get_device

        device = str(get_device())
    host = get_node_ip_address()  # 127.0.0.1 on an embedded Ray
    join_process_group(rank, world, "nccl" if device else "gloo", host, broadcast_from_rank_zero)
    try:  # the trainable's own loop, on this worker's share of each batch
        run_loop(
            tc, ray_train.report, ray_train.get_checkpoint(), Parallel(rank, world, tc.run.sharding, device)
        )
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
