"""One training run: learning, determinism, exact resume, divergence handling, schedule."""

import math

import pytest

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.train import get_lr, load_checkpoint, train

MODEL = ModelConfig(depth=2, width=32, heads=2, seq_len=32)
DATA = DataConfig()
RUN = TrainConfig(steps=100, batch_size=16, eval_every=25, eval_batches=2, warmup_steps=10, threads=1)


@pytest.fixture(scope="module")
def baseline():
    return train(MODEL, DATA, RUN)


def test_learns_below_unigram_entropy(baseline):
    assert baseline.status == "ok", baseline.error
    assert baseline.steps == 100 and baseline.tokens == 100 * 16 * 32
    assert len(baseline.curve) == 4
    first, last = baseline.curve[0]["val_loss"], baseline.final_val_loss
    assert last < first
    assert last < baseline.unigram_entropy, (last, baseline.unigram_entropy)
    # training FLOPs = 3 x forward (6N + 6·L·T·d per token), the count `sweep plan` uses too
    assert baseline.flops == pytest.approx(3 * baseline.flops_per_token * baseline.tokens)


def test_same_seed_gives_identical_losses(baseline):
    again = train(MODEL, DATA, RUN)
    assert [c["val_loss"] for c in again.curve] == [c["val_loss"] for c in baseline.curve]
    assert [c["train_loss"] for c in again.curve] == [c["train_loss"] for c in baseline.curve]
    other = train(MODEL, DATA, RUN.replace(seed=1))
    assert other.final_val_loss != baseline.final_val_loss


class _Interrupt(Exception):
    pass


def test_resume_from_checkpoint_continues_exactly(baseline, tmp_path):
    """100 steps straight vs 50 steps, a crash, and a resume for the last 50: same loss to 1e-6."""

    def crash_at_50(m, checkpoint=None):
        if m["step"] == 50:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        train(MODEL, DATA, RUN, report=crash_at_50, checkpoint_dir=tmp_path)
    assert load_checkpoint(tmp_path)["step"] == 50
    seen = []
    resumed = train(MODEL, DATA, RUN, resume_from=tmp_path, report=lambda m: seen.append(m["step"]))
    assert seen == [75, 100]
    assert resumed.steps == 100 and len(resumed.curve) == 4
    assert abs(resumed.final_val_loss - baseline.final_val_loss) < 1e-6
    assert abs(resumed.final_train_loss - baseline.final_train_loss) < 1e-6


def test_huge_learning_rate_diverges_without_raising():
    result = train(MODEL, DATA, RUN.replace(lr=1e4, grad_clip=0.0))
    assert result.status == "diverged"
    assert "loss" in result.error and result.steps < RUN.steps


def test_a_failure_inside_the_run_is_a_result(monkeypatch):
    import depthwidth.train as t

    def broken(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(t.torch.optim.AdamW, "step", broken)
    result = train(MODEL, DATA, RUN)
    assert result.status == "failed" and "disk on fire" in result.error


def _meminfo(key: str) -> int:
    from pathlib import Path

    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


@pytest.mark.skipif(
    not __import__("os").path.exists("/proc/sys/vm/overcommit_memory")
    or open("/proc/sys/vm/overcommit_memory").read().strip() != "0",
    reason="needs Linux's heuristic overcommit, which refuses an allocation larger "
    "than memory + swap at once instead of touching it page by page",
)
def test_a_model_too_large_to_allocate_is_a_failed_result():
    """Building the model is part of the run: an embedding larger than this machine's memory and
    swap is refused by the allocator at once, and the run reports it instead of raising."""
    vocab = 16
    width = 2 * (4 * (_meminfo("MemTotal") + _meminfo("SwapTotal")) // (4 * vocab) // 2 + 1)
    result = train(
        ModelConfig(depth=1, width=width, heads=2, seq_len=8),
        DataConfig(vocab_size=vocab),
        TrainConfig(steps=1, batch_size=2, threads=1),
    )
    assert result.status == "failed" and result.steps == 0
    assert "allocate" in result.error, result.error
    assert math.isnan(result.final_val_loss) and result.n_params == 12 * width**2


def test_report_callback_gets_the_documented_keys():
    got = []
    train(MODEL, DATA, RUN.replace(steps=20, eval_every=10), report=got.append)
    assert [m["step"] for m in got] == [10, 20]
    for key in ("step", "tokens", "flops", "train_loss", "val_loss", "lr", "wall_s"):
        assert key in got[-1]
    assert got[-1]["tokens"] == 20 * 16 * 32


def test_lr_schedule_is_warmup_then_cosine():
    cfg = TrainConfig(steps=110, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    assert get_lr(0, cfg) == pytest.approx(0.1)
    assert get_lr(9, cfg) == pytest.approx(1.0)
    assert get_lr(10, cfg) == pytest.approx(1.0)
    assert get_lr(60, cfg) == pytest.approx(0.1 + 0.9 * 0.5)
    assert get_lr(110, cfg) == pytest.approx(0.1)
    lrs = [get_lr(s, cfg) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))


def test_mup_and_linear_attention_train():
    for model in (MODEL.replace(parametrization="mup", base_width=16), MODEL.replace(attention="linear")):
        r = train(model, DATA, RUN.replace(steps=30, eval_every=30))
        assert r.status == "ok" and math.isfinite(r.final_val_loss)


def test_model_vocab_smaller_than_data_is_refused():
    with pytest.raises(ValueError, match="ModelConfig.vocab_size = 4"):
        train(MODEL.replace(vocab_size=4), DATA, RUN)


def test_prefetched_batches_are_the_same_batches_in_order():
    """The GPU path draws batches ahead in a thread: same tensors, same order, from any start."""
    import threading

    import torch

    from depthwidth.data import make_data
    from depthwidth.train import TrainBatches

    data = make_data(DATA, 32)
    ahead = TrainBatches(data, 4, start=7, device=torch.device("cpu"), ahead=2)
    try:
        for i in range(7, 13):
            x, y = ahead.get()
            ex, ey = data.batch("train", i, 4)
            assert torch.equal(x, ex) and torch.equal(y, ey)
        assert sorted(ahead._pending) == [13, 14]  # two batches already on their way
        assert any(t.name.startswith("depthwidth-data") for t in threading.enumerate())
    finally:
        ahead.close()
    assert ahead._pool is None and not any(
        t.name.startswith("depthwidth-data") for t in threading.enumerate()
    )


def test_a_data_error_in_the_prefetch_thread_reaches_the_run():
    import torch

    from depthwidth.train import TrainBatches

    class Broken:
        def batch(self, split, index, batch_size):
            raise ValueError(f"no batch {index}")

    ahead = TrainBatches(Broken(), 4, start=3, device=torch.device("cpu"), ahead=1)
    with pytest.raises(ValueError, match="no batch 3"):
        ahead.get()
    ahead.close()
