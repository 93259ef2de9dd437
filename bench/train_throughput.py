"""Benchmark: tokens/s and achieved GFLOP/s (6N·tokens/s) of `train()` against a minimal
plain-PyTorch loop over the identical model and batches, in the same process.

Run by hand:  python bench/train_throughput.py [--steps 10] [--threads 2] [--out docs/bench/train.md]
(--smoke: one 1x16 shape, 2 steps, one pair, a 256² matmul ceiling)
Both loops run `--steps` warm-up steps, then `--steps` timed steps and one validation batch.
Also measures the fp32 matmul ceiling (torch.mm 2048²) so utilisation can be read off.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F

from depthwidth.accounting import count_params
from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.models import build_model
from depthwidth.train import resolve, train

SHAPES = [(2, 64), (4, 128), (4, 256), (8, 256)]
BATCH, SEQ = 32, 128


def matmul_gflops(n: int = 2048, reps: int = 5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    t = time.perf_counter()
    for _ in range(reps):
        torch.mm(a, b)
    return 2 * n**3 * reps / (time.perf_counter() - t) / 1e9


def plain_loop(model_cfg: ModelConfig, data, steps: int) -> float:
    """Seconds per step of the textbook loop: batch, forward, cross-entropy, backward, clipping,
    AdamW step; `steps` warm-up steps, then `steps` timed ones and one validation batch, the
    same work as the window timed in `ours`."""
    torch.manual_seed(0)
    model = build_model(model_cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    t = 0.0
    for i in range(2 * steps):
        if i == steps:
            t = time.perf_counter()
        x, y = data.batch("train", i, BATCH)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.eval()
    with torch.no_grad():
        x, y = data.batch("val", 0, BATCH)
        F.cross_entropy(model(x).reshape(-1, model_cfg.vocab_size), y.reshape(-1)).item()
    return (time.perf_counter() - t) / steps


def ours(model_cfg: ModelConfig, data_cfg: DataConfig, steps: int) -> float:
    """Seconds per step of train() in steady state: a run of 2·steps steps reporting (after a
    one-batch evaluation) at `steps` and at the end; the window between the two reports holds
    `steps` training steps and one evaluation. Set-up (data source, model build, optimizer)
    and the warm-up steps fall outside it, as they do for the plain loop."""
    marks = {}
    cfg = TrainConfig(steps=2 * steps, batch_size=BATCH, eval_every=steps, eval_batches=1, warmup_steps=0)
    r = train(model_cfg, data_cfg, cfg, report=lambda m: marks.setdefault(m["step"], time.perf_counter()))
    assert r.status == "ok", r.error
    return (marks[2 * steps] - marks[steps]) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5, help="alternating runs of each loop per shape")
    ap.add_argument(
        "--out",
        default=None,
        help="write the table here (default docs/bench/train.md; a smoke run only prints it)",
    )
    ap.add_argument(
        "--shapes", default=",".join(f"{d}x{w}" for d, w in SHAPES), help="comma-separated DEPTHxWIDTH list"
    )
    ap.add_argument("--smoke", action="store_true", help="seconds: one tiny shape, 2 steps, one pair")
    a = ap.parse_args()
    if a.smoke:
        a.shapes, a.steps, a.repeats = "1x16", 2, 1
    elif a.out is None:
        a.out = "docs/bench/train.md"
    torch.set_num_threads(a.threads)
    ceiling = matmul_gflops(256 if a.smoke else 2048)
    data_cfg = DataConfig()
    rows = []
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    for depth, width in shapes:
        cfg, data = resolve(ModelConfig(depth=depth, width=width, heads=4, seq_len=SEQ), data_cfg)
        n = count_params(cfg).n_params
        # Alternate the two loops: on a shared VM a run's speed drifts by tens of percent, and
        # the two runs of a pair, adjacent in time, see the most similar machine. The ratio is
        # the median over pairs; each loop's best run gives its throughput.
        plains, mines = [], []
        for _ in range(a.repeats):
            plains.append(plain_loop(cfg, data, a.steps))
            mines.append(ours(cfg, data_cfg, a.steps))
        pairs = sorted(p / m for p, m in zip(plains, mines))
        print(
            f"  s/step plain {[round(v, 4) for v in plains]}  ours {[round(v, 4) for v in mines]}  "
            f"pair ratios {[round(r, 3) for r in pairs]}",
            flush=True,
        )
        plain, mine = min(plains), min(mines)
        tok = BATCH * SEQ
        rows.append(
            (
                depth,
                width,
                n,
                tok / mine,
                tok / plain,
                statistics.median(pairs),
                6 * n * tok / mine / 1e9,
                6 * n * tok / mine / 1e9 / ceiling,
                pairs[0],
                pairs[-1],
            )
        )
        print(rows[-1], flush=True)
    cpu = (
        subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True)
        .stdout.split(":")[-1]
        .strip()
        or platform.processor()
    )
    lines = [
        f"## train() throughput ({datetime.date.today()}, {cpu}, {a.threads} threads, "
        f"torch {torch.__version__})",
        "",
        f"Command: `python bench/train_throughput.py --steps {a.steps} --threads {a.threads} "
        f"--repeats {a.repeats}`; "
        f"batch {BATCH} x {SEQ} tokens; fp32 matmul ceiling (torch.mm 2048²): {ceiling:.1f} GFLOP/s.",
        "",
        "| depth | width | N | ours tok/s | plain tok/s | ours/plain (median of pairs) | "
        "pair range | ours GFLOP/s (6N) | of ceiling |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r[0]} | {r[1]} | {r[2]:,} | {r[3]:,.0f} | {r[4]:,.0f} | {r[5]:.3f} | "
            f"{r[8]:.3f}–{r[9]:.3f} | {r[6]:.1f} | {100 * r[7]:.0f}% |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
