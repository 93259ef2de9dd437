"""Data-parallel `train()` (depthwidth.train.Parallel) on CPU with the gloo backend: two workers
with half the batch each follow one worker's loss curve, under DDP and FSDP, and a checkpoint
written by two workers resumes, with two workers or one, onto the same curve. Real
torch.distributed process groups in spawned processes, joined by sweeps/running/distributed.py's
`join_process_group` as a Ray Train worker joins one (the address passed through a file instead of
Train's broadcast): on 127.0.0.1 for DDP, on this machine's network address for FSDP (as on a
cluster node), and every port rank 0 listens on is bound to that address alone. No Ray
(tests/test_sweep_workers.py runs the same through Ray Train)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.train import Parallel, train

MODEL = ModelConfig(depth=2, width=32, heads=2, seq_len=16, vocab_size=32)
DATA = DataConfig(vocab_size=32)
TRAIN = TrainConfig(steps=24, batch_size=8, eval_every=6, eval_batches=2, warmup_steps=3, lr=3e-3, threads=1)
# Averaging gradients over two shards instead of one batch sums the same numbers in another
# order (float32); measured: at most 4e-8 relative over this curve, under DDP and FSDP alike.
# 1e-6 leaves 25x room and still fails for any real difference (one worker on half the batch
# moves the loss by ~1e-2).
RTOL = 1e-6

pytestmark = pytest.mark.slow  # two spawned process groups: ~15 s idle, a minute on a busy machine


def group_host(sharding: str) -> str:
    """The node address the group's store binds: loopback (an embedded Ray) for DDP, the
    machine's network address (a cluster node) for FSDP where it has one."""
    from test_security import _own_network_address

    return (_own_network_address() if sharding == "fsdp" else None) or "127.0.0.1"


def file_exchange(folder: str, rank: int):
    """`exchange` for join_process_group through a file: rank 0's value, returned on every rank."""
    path = Path(folder) / "address.json"

    def exchange(value):
        if rank == 0:
            path.with_suffix(".tmp").write_text(json.dumps(value))
            path.with_suffix(".tmp").rename(path)
            return value
        deadline = time.monotonic() + 60
        while not path.exists():
            assert time.monotonic() < deadline, "rank 0 never wrote the store's address"
            time.sleep(0.05)
        return tuple(json.loads(path.read_text()))

    return exchange


class _Stop(Exception):
    pass


def _worker(rank: int, world: int, host: str, sharding: str, folder: str) -> None:
    """In one process group: a whole run, a run stopped after its step-12 checkpoint, and that
    run resumed; rank 0 writes the two results and the addresses it listens on."""
    import torch.distributed as dist
    from test_security import _listeners

    from sweeps.running.distributed import join_process_group

    def stop_at_12(metrics, checkpoint=None):
        if metrics["step"] == 12:  # a crash right after this evaluation's checkpoint
            raise _Stop

    torch.set_num_threads(1)
    join_process_group(rank, world, "gloo", host, file_exchange(folder, rank))
    try:
        if rank == 0:  # the store's port and gloo's
            with open(f"{folder}/listening.json", "w") as f:
                json.dump([addr for _, addr, _ in _listeners([os.getpid()])], f)
        par = Parallel.current(sharding)
        whole = train(MODEL, DATA, TRAIN, parallel=par)
        try:
            train(MODEL, DATA, TRAIN, report=stop_at_12, checkpoint_dir=f"{folder}/ckpt", parallel=par)
        except _Stop:
            pass
        resumed = train(MODEL, DATA, TRAIN, resume_from=f"{folder}/ckpt", parallel=par)
        if rank == 0:
            for name, res in (("whole", whole), ("resumed", resumed)):
                with open(f"{folder}/{name}.json", "w") as f:
                    json.dump(res.to_dict(), f)
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module", params=["ddp", "fsdp"])
def two_workers(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    host = group_host(request.param)
    mp.spawn(_worker, args=(2, host, request.param, str(folder)), nprocs=2, join=True)
    return {name: json.loads((folder / f"{name}.json").read_text()) for name in ("whole", "resumed")} | {
        "ckpt": folder / "ckpt",
        "sharding": request.param,
        "host": host,
        "listening": json.loads((folder / "listening.json").read_text()),
    }


def losses(result: dict, key: str) -> list[float]:
    return [p[key] for p in result["curve"]]


@pytest.fixture(scope="module")
def one_worker():
    return train(MODEL, DATA, TRAIN).to_dict()


def test_two_workers_with_half_the_batch_follow_one_worker(two_workers, one_worker):
    two = two_workers["whole"]
    assert two["status"] == one_worker["status"] == "ok"
    for key in ("train_loss", "val_loss"):
        assert losses(two, key) == pytest.approx(losses(one_worker, key), rel=RTOL), key
    assert [p["step"] for p in two["curve"]] == [6, 12, 18, 24]
    assert two["tokens"] == one_worker["tokens"] == 24 * 8 * 16  # the global batch counts
    # the test can fail: one worker on half the batch alone lands elsewhere
    alone = train(MODEL, DATA, TRAIN.replace(batch_size=4)).to_dict()
    assert losses(alone, "val_loss") != pytest.approx(losses(one_worker, "val_loss"), rel=RTOL)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads listening sockets from Linux's /proc")
def test_the_process_group_listens_on_the_node_address_alone(two_workers):
    """join_process_group binds the store's port (and gloo's, on loopback) to the node's address;
    torch's own store would listen on every interface ('::')."""
    import ipaddress

    def as_v4(addr: str) -> str:
        ip = ipaddress.ip_address(addr)
        return str(ip.ipv4_mapped) if ip.version == 6 and ip.ipv4_mapped else str(ip)

    listening = [as_v4(a) for a in two_workers["listening"]]
    assert listening, "rank 0 listens on no port: the store is not rank 0's"
    if two_workers["host"] == "127.0.0.1":
        assert set(listening) == {"127.0.0.1"}, listening
    else:  # a cluster node's address: the store's port there, gloo's where the hostname resolves
        assert two_workers["host"] in listening, listening
        assert all(not ipaddress.ip_address(a).is_unspecified for a in listening), listening


def test_a_two_worker_checkpoint_resumes_onto_the_same_curve(two_workers, one_worker):
    """Stopped after the step-12 checkpoint, then resumed by two workers and by one: both end on
    the uninterrupted curve, and the checkpoint holds the plain (unwrapped) model."""
    from depthwidth.models import build_model
    from depthwidth.train import resolve

    state = torch.load(two_workers["ckpt"] / "state.pt", weights_only=True)
    assert state["step"] == 12
    assert set(state["model"]) == set(build_model(resolve(MODEL, DATA)[0]).state_dict())
    resumed_one = train(MODEL, DATA, TRAIN, resume_from=two_workers["ckpt"]).to_dict()
    for res in (two_workers["resumed"], resumed_one):
        assert res["steps"] == 24 and [p["step"] for p in res["curve"]] == [6, 12, 18, 24]
        assert losses(res, "val_loss") == pytest.approx(losses(one_worker, "val_loss"), rel=RTOL)
