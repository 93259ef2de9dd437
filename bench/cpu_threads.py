"""Benchmark: seconds per training step of `train()` on CPU at 1, 2, ... torch threads, over model
sizes from a tiny to a mid-sized transformer, to place the size at which a second thread starts to
pay (the rule in sweeps/plans/packing.py:cpu_threads). Each (size, threads) cell runs in a fresh process
so thread pools do not carry over; the load average is recorded with every cell.

Run by hand:  python bench/cpu_threads.py [--smoke] [--threads 1,2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SHAPES = [(1, 16), (2, 32), (2, 64), (4, 128), (4, 256), (6, 384), (8, 512)]
BATCH, SEQ = 16, 64

CELL = """
import json, time, torch
from depthwidth.accounting import train_flops_per_token
from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.train import train
m = ModelConfig(depth={depth}, width={width}, heads=max(1, {width} // 64) if {width} >= 64 else 2,
                seq_len={seq}, vocab_size=64)
d = DataConfig(vocab_size=64)
t = TrainConfig(steps={steps}, batch_size={batch}, eval_every={steps}, eval_batches=1,
                warmup_steps=1, threads={threads})
train(m, d, t.replace(steps=2, eval_every=2))  # warm-up: allocator, kernels
r = train(m, d, t)
print(json.dumps(dict(step_s=r.wall_s / {steps},
                      flops_per_step=train_flops_per_token(m) * {batch} * {seq})))
"""


def cell(depth: int, width: int, threads: int, steps: int) -> dict:
    code = CELL.format(depth=depth, width=width, seq=SEQ, batch=BATCH, steps=steps, threads=threads)
    load = os.getloadavg()[0]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return {"depth": depth, "width": width, "threads": threads, "load_before": round(load, 2), **res}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the tiniest shape, few steps")
    ap.add_argument("--threads", default="1,2", help="thread counts to compare")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--out", help="write the cells as JSON")
    args = ap.parse_args()
    shapes = SHAPES[:1] if args.smoke else SHAPES
    steps = 3 if args.smoke else args.steps
    counts = [int(t) for t in args.threads.split(",")]
    rows = []
    t0 = time.perf_counter()
    for depth, width in shapes:
        base = None
        for n in counts:
            r = cell(depth, width, n, steps)
            base = base or r["step_s"]
            r["speedup_vs_1"] = round(base / r["step_s"], 3)
            rows.append(r)
            print(
                f"depth {depth:2d} width {width:4d} threads {n}: {r['step_s'] * 1e3:8.2f} ms/step "
                f"({r['flops_per_step']:.3g} FLOP/step, x{r['speedup_vs_1']:.2f} vs 1 thread, "
                f"load {r['load_before']})",
                flush=True,
            )
    print(f"{len(rows)} cells in {time.perf_counter() - t0:.0f} s; cores: {os.cpu_count()}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
