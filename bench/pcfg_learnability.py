"""Benchmark: how much of the default PCFG language small transformers learn, by depth x width.

Run by hand:  python bench/pcfg_learnability.py [--out docs/bench/data-learnability.md] [--smoke]
Trains `train()` on the embedded default data (DataConfig()) for a small ladder of shapes and
step counts and tabulates the final validation loss beside three references: the unigram
entropy (a model that ignores context), a held-out add-one bigram model, and the grammar's
derivation entropy per token (an upper bound on the entropy rate, the best loss given the
whole past). Takes minutes.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
from pathlib import Path

import numpy as np
import torch

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.data import make_data
from depthwidth.train import train

LADDER = [(1, 32, 200), (2, 32, 200), (4, 32, 200), (2, 64, 200), (4, 64, 200), (2, 32, 800), (4, 64, 800)]


def bigram_loss(data_cfg: DataConfig, seq_len: int, batches: int = 200) -> float:
    """Held-out loss of an add-one bigram model fitted on train batches."""
    src = make_data(data_cfg, seq_len)
    V = src.vocab_size
    counts = np.ones((V, V))
    for i in range(batches):
        x, y = src.batch("train", i, 32)
        np.add.at(counts, (x.numpy().ravel(), y.numpy().ravel()), 1)
    p = counts / counts.sum(1, keepdims=True)
    losses = []
    for i in range(8):
        x, y = src.batch("val", i, 32)
        losses.append(-np.log(p[x.numpy().ravel(), y.numpy().ravel()]).mean())
    return float(np.mean(losses))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        default=None,
        help="write the table here (default docs/bench/data-learnability.md; a smoke run only prints it)",
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="seconds: one 5-step shape, 5 bigram batches")
    args = ap.parse_args()
    ladder, bigram_batches = ([(1, 32, 5)], 5) if args.smoke else (LADDER, 200)
    if args.out is None and not args.smoke:
        args.out = "docs/bench/data-learnability.md"
    torch.set_num_threads(args.threads)
    data_cfg, seq_len = DataConfig(), ModelConfig().seq_len
    src = make_data(data_cfg, seq_len)
    unigram, bound = src.unigram_entropy(), src.grammar.entropy_bound
    bigram = bigram_loss(data_cfg, seq_len, bigram_batches)
    rows = []
    for depth, width, steps in ladder:
        heads = 2 if width <= 32 else 4
        r = train(
            ModelConfig(depth=depth, width=width, heads=heads),
            data_cfg,
            TrainConfig(steps=steps, eval_every=steps, eval_batches=8, threads=args.threads),
        )
        rows.append((depth, width, steps, r.n_params, r.final_val_loss, r.wall_s))
        print(depth, width, steps, r.status, f"{r.final_val_loss:.3f}", f"{r.wall_s:.0f}s", flush=True)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("Model name")), "?")
    lines = [
        "# Default PCFG data: what small transformers learn",
        "",
        f"- machine: {cpu}, torch threads {args.threads}",
        f"- date: {datetime.date.today().isoformat()}",
        "- command: `python bench/pcfg_learnability.py`",
        f"- data: {src.describe()}",
        f"- training: TrainConfig defaults (batch 32, lr 3e-3, warmup 20, cosine), seq_len {seq_len}",
        "",
        f"References (nats/token): unigram entropy {unigram:.3f}; held-out add-one bigram "
        f"{bigram:.3f}; derivation entropy per token (upper bound on the entropy rate) {bound:.3f}.",
        "",
        "| depth | width | steps | N (non-embedding) | val loss | val − unigram | wall s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for depth, width, steps, n, val, wall in rows:
        lines.append(
            f"| {depth} | {width} | {steps} | {n:,} | {val:.3f} | {val - unigram:+.3f} | {wall:.0f} |"
        )
    out = "\n".join(lines) + "\n"
    print(out)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(out)


if __name__ == "__main__":
    main()
