"""Data-parallel `train()` (depthwidth.train.Parallel) on CPU with the gloo backend: two workers
with half the batch each follow one worker's loss curve, under DDP and FSDP, and a checkpoint
written by two workers resumes, with two workers or one, onto the same curve. Real
torch.distributed process groups in spawned processes; no Ray (tests/test_sweep_workers.py runs
the same through Ray Train)."""

from __future__ import annotations

import json
import socket

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Stop(Exception):
    pass


def _worker(rank: int, world: int, port: int, sharding: str, folder: str) -> None:
    """In one process group: a whole run, a run stopped after its step-12 checkpoint, and that
    run resumed; rank 0 writes the two results."""
    import torch.distributed as dist

    def stop_at_12(metrics, checkpoint=None):
        if metrics["step"] == 12:  # a crash right after this evaluation's checkpoint
            raise _Stop

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
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
    mp.spawn(_worker, args=(2, free_port(), request.param, str(folder)), nprocs=2, join=True)
    return {name: json.loads((folder / f"{name}.json").read_text()) for name in ("whole", "resumed")} | {
        "ckpt": folder / "ckpt",
        "sharding": request.param,
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
