"""GPU check in one call: bf16 model-FLOPs utilisation (MFU) of `train()` at depth 12, seq 1024,
widths 512/1024/2048, against the card's measured bf16 matmul rate. Finishes in ~5 minutes.

Run by hand on a CUDA machine:  python bench/gpu.py [--steps 30] [--compile] [--out docs/bench/gpu.md]
Exits with status 3 and one sentence on a machine without CUDA. `--smoke` (also `--cpu-smoke`)
runs the same script end to end on the CPU with one tiny shape (a check of the script, not of
any GPU), printing the table unless --out is given.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time

import torch

from depthwidth.accounting import count_params
from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.train import train

WIDTHS = {512: 16, 1024: 16, 2048: 8}  # width -> batch size (sequences of 1024 tokens)
DEPTH, SEQ = 12, 1024


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def bf16_matmul_tflops(device: str = "cuda", n: int = 8192, reps: int = 20) -> float:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    sync(device)
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - t) / 1e12


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=None, help="default 30 (20 for --smoke)")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument(
        "--out",
        default=None,
        help="write the table here (default docs/bench/gpu.md; a smoke run only prints it)",
    )
    ap.add_argument(
        "--smoke",
        "--cpu-smoke",
        dest="smoke",
        action="store_true",
        help="tiny shape on the CPU: checks the script",
    )
    a = ap.parse_args()
    depth, seq, widths, device = DEPTH, SEQ, WIDTHS, "cuda"
    if a.out is None and not a.smoke:
        a.out = "docs/bench/gpu.md"
    if a.steps is None:
        a.steps = 20 if a.smoke else 30
    if a.smoke:
        depth, seq, widths, device = 2, 64, {128: 4}, "cpu"
        peak, name = bf16_matmul_tflops("cpu", n=512, reps=3), "CPU (smoke run)"
    elif not torch.cuda.is_available():
        print(
            "bench/gpu.py: no CUDA device is available on this machine; run it on a GPU host.",
            file=sys.stderr,
        )
        return 3
    else:
        peak, name = bf16_matmul_tflops(), torch.cuda.get_device_name()
    if a.steps < 20 or a.steps % 10:
        print(
            f"bench/gpu.py: --steps = {a.steps} is invalid: use a multiple of 10, at least 20.",
            file=sys.stderr,
        )
        return 2
    rows = []
    for width, batch in widths.items():
        cfg = ModelConfig(depth=depth, width=width, heads=width // 64, seq_len=seq, vocab_size=256)
        marks = {}
        run = TrainConfig(
            steps=a.steps,
            batch_size=batch,
            eval_every=10,
            eval_batches=1,
            warmup_steps=0,
            device=device,
            precision="bf16",
            compile=a.compile,
        )
        r = train(
            cfg,
            DataConfig(vocab_size=256),
            run,
            report=lambda m, marks=marks: (sync(device), marks.__setitem__(m["step"], time.perf_counter())),
        )
        if r.status != "ok":
            print(f"width {width}: {r.status} {r.error}")
            continue
        # steady state: from the report at step 10 to the last, excluding compile/warm-up
        steps = a.steps - 10
        dt = marks[a.steps] - marks[10]
        n = count_params(cfg).n_params
        tok_s = steps * batch * seq / dt
        model_flops = (6 * n + 6 * depth * seq * width) * tok_s  # Kaplan C incl. attention term
        rows.append((width, n, tok_s, model_flops / 1e12, model_flops / 1e12 / peak))
        print(rows[-1], flush=True)
    lines = [
        f"## GPU MFU ({datetime.date.today()}, {name}, torch {torch.__version__}, compile={a.compile})",
        "",
        f"bf16 matmul: {peak:.3g} TFLOP/s. depth {depth}, seq {seq}, {a.steps} steps "
        "(timed from the report at step 10 to the last; one eval batch per 10 steps included).",
        "",
        "| width | N | tokens/s | model TFLOP/s | MFU vs matmul |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {w} | {n:,} | {t:,.0f} | {f:.1f} | {100 * u:.0f}% |" for w, n, t, f, u in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
