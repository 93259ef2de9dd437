"""Benchmarks of the recurrence-vs-attention study (Kerg et al. 2020, docs/science.md §6), run by hand:
`cost` (FLOPs, activation bytes, peak memory, seconds of a training step vs T, fitted exponents),
`grad` (‖∂L/∂h_t‖ at T = 200, untrained) and `copy` (RelRNN trained on copy at delay T).
Each prints a markdown table and writes it to --out; results live in docs/bench/relrnn.md.
`--smoke` runs all three at toy sizes in seconds, printing only (a check of the script).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time

import numpy as np
import torch

from analysis.kerg.relrnn import fit_exponent
from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.data import make_data
from depthwidth.gradprobe import grad_norms, saved_bytes_per_step, start_ratio, step_cost
from depthwidth.models.relrnn import build_recurrent
from depthwidth.train import CHECKPOINT_FILE, train


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        cpu = next(line.split(":", 1)[1].strip() for line in out.splitlines() if "Model name" in line)
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    dev = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return (
        f"{cpu}{dev}; torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
        f"{datetime.date.today().isoformat()}; `python {' '.join(sys.argv)}`"
    )


def bench_cost(args) -> str:
    device = torch.device(args.device)
    Ts = [int(t) for t in args.lengths.split(",")]
    lines = [
        f"Machine: {machine()}",
        "",
        f"One training step (forward + backward), batch {args.batch}, width {args.width}, "
        f"ν={args.nu}, ρ={args.rho}; random tokens, vocabulary 10. Activation bytes: storages "
        f"autograd holds for backward (gradprobe.saved_bytes_per_step); seconds: median of "
        f"{args.repeats}.",
        "",
        "| model | T | matmul FLOPs | activation bytes | peak CUDA bytes | seconds |",
        "|---|---|---|---|---|---|",
    ]
    fits = []
    for family in args.families.split(","):
        torch.manual_seed(0)
        model = build_recurrent(
            ModelConfig(family=family, vocab_size=10, width=args.width, depth=1, nu=args.nu, rho=args.rho)
        ).to(device)
        rows = []
        for T in Ts:
            x = torch.randint(0, 10, (args.batch, T), device=device)
            y = torch.randint(0, 10, (args.batch, T), device=device)
            c = step_cost(model, x, y)
            walls = [c["step_wall_s"]] + [
                step_cost(model, x, y)["step_wall_s"] for _ in range(args.repeats - 1)
            ]
            acts = float(saved_bytes_per_step(model, x, y).sum())
            rows.append((T, c["step_flops"], acts, c["step_peak_bytes"], float(np.median(walls))))
            lines.append(
                f"| {family} | {T} | {c['step_flops']:.3e} | {acts:.3e} | "
                f"{c['step_peak_bytes']:.3e} | {np.median(walls):.4f} |"
            )
            print(lines[-1], flush=True)
        r = np.array(rows)
        for j, name in ((1, "FLOPs"), (2, "activation bytes"), (3, "peak CUDA bytes"), (4, "seconds")):
            whole = fit_exponent(r[:, 0], r[:, j])
            top = fit_exponent(r[-2:, 0], r[-2:, j])
            if whole["status"] == "ok":
                fits.append(f"| {family} | {name} | {whole['exponent']:.2f} | {top['exponent']:.2f} |")
    lines += [
        "",
        f"Fitted exponent p of cost ∝ T^p (analysis.kerg.relrnn.fit_exponent): over all T, and "
        f"between the two largest T ({Ts[-2]}→{Ts[-1]}).",
        "",
        "| model | cost | p (all T) | p (largest two T) |",
        "|---|---|---|---|",
        *fits,
    ]
    return "\n".join(lines)


def bench_grad(args) -> str:
    data = make_data(DataConfig(source="copy", task_length=args.T), 0)
    x, y = data.batch("val", 0, args.batch)
    lines = [
        f"Machine: {machine()}",
        "",
        f"‖∂L/∂h_t‖ on copy, T = {args.T} ({data.seq_len} steps), untrained models (fresh "
        f"init), width {args.width}, batch {args.batch}, L = loss of the last 10 outputs. Share "
        f"= mean norm over the first 10 steps (the symbols) / largest norm; decades = "
        f"log10(max/min) over t.",
        "",
        "| model | seed 0 share | seed 1 share | seed 2 share | decades (seed 0) |",
        "|---|---|---|---|---|",
    ]
    for family, nu, rho in [
        ("lstm", 10, 15),
        ("rnn", 10, 15),
        ("memrnn", 10, 15),
        ("relrnn", 10, 3),
        ("relrnn", 10, 15),
        ("relrnn", 10, 30),
        ("rellstm", 10, 15),
    ]:
        shares, decades = [], None
        for seed in range(3):
            torch.manual_seed(seed)
            m = build_recurrent(
                ModelConfig(family=family, vocab_size=10, width=args.width, depth=1, nu=nu, rho=rho)
            )
            g = grad_norms(m, x, y)
            shares.append(start_ratio(g))
            if seed == 0:
                decades = float(np.log10(g.max() / max(g.min(), 1e-300)))
        label = f"{family} ν={nu} ρ={rho}" if family.startswith("rel") else family
        lines.append(f"| {label} | " + " | ".join(f"{s:.2e}" for s in shares) + f" | {decades:.1f} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def bench_copy(args) -> str:
    model = ModelConfig(family=args.family, width=args.width, depth=1, nu=args.nu, rho=args.rho)
    data = DataConfig(source="copy", task_length=args.T, seed=0)
    cfg = TrainConfig(
        steps=args.steps,
        batch_size=args.batch,
        lr=args.lr,
        warmup_steps=0,
        min_lr_ratio=1.0,
        beta2=0.999,
        grad_clip=1.0,
        eval_every=args.eval_every,
        eval_batches=4,
        seed=0,
        threads=args.threads,
    )
    t0 = time.perf_counter()
    resume = None
    if args.checkpoint_dir:  # a long run continues exactly where the last checkpoint left it
        if os.path.isfile(os.path.join(args.checkpoint_dir, CHECKPOINT_FILE)):
            resume = args.checkpoint_dir

    def row(m: dict) -> str:
        return (
            f"| {m['step']} | {m['train_loss']:.4f} | {m['val_loss']:.4f} | "
            f"{m['accuracy']:.4f} | {m['wall_s']:.0f} |"
        )

    result = train(
        model,
        data,
        cfg,
        report=lambda m: print(row(m), flush=True),
        checkpoint_dir=args.checkpoint_dir,
        resume_from=resume,
    )
    lines_curve = [row(m) for m in result.curve]  # with the earlier part of a resumed run
    head = [
        f"Machine: {machine()}",
        "",
        f"{args.family} on copy, T = {args.T} (sequence {args.T + 20}), width {args.width}, "
        f"ν={args.nu}, ρ={args.rho}, batch {args.batch}, AdamW lr {args.lr} constant, "
        f"β2 0.999, clip 1.0, {args.steps} steps budget; validation = 4 batches of {args.batch}. "
        f"Memoryless baseline loss 10·ln 8/{args.T + 20} = {10 * np.log(8) / (args.T + 20):.4f}. "
        f"Status {result.status}; {time.perf_counter() - t0:.0f} s wall.",
        "",
        "| step | train loss | val loss | accuracy (last 10 outputs) | wall s |",
        "|---|---|---|---|---|",
    ]
    return "\n".join(head + lines_curve)


# Toy sizes for --smoke: every code path of each benchmark, in seconds.
SMOKE = {
    "cost": ["--lengths", "8,16", "--width", "4", "--repeats", "1"],
    "grad": ["--T", "5", "--width", "4", "--batch", "2"],
    "copy": ["--T", "10", "--width", "8", "--batch", "4", "--steps", "4", "--eval-every", "2"],
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="run cost, grad and copy at toy sizes")
    sub = p.add_subparsers(dest="what")
    c = sub.add_parser("cost")
    c.add_argument("--families", default="lstm,rnn,memrnn,relrnn")
    c.add_argument("--lengths", default="128,256,512,1024")
    c.add_argument("--width", type=int, default=16)
    c.add_argument("--batch", type=int, default=2)
    c.add_argument("--repeats", type=int, default=3)
    c.add_argument("--device", default="cpu")
    g = sub.add_parser("grad")
    g.add_argument("--T", type=int, default=200)
    g.add_argument("--width", type=int, default=128)
    g.add_argument("--batch", type=int, default=10)
    k = sub.add_parser("copy")
    k.add_argument("--family", default="relrnn")
    k.add_argument("--T", type=int, default=100)
    # Defaults: the run of docs/bench/relrnn.md that passed 99% at step 4000 of T = 100.
    k.add_argument("--width", type=int, default=128)
    k.add_argument("--batch", type=int, default=32)
    k.add_argument("--lr", type=float, default=5e-3)
    k.add_argument("--steps", type=int, default=4000)
    k.add_argument("--eval-every", type=int, default=250)
    k.add_argument("--threads", type=int, default=1)
    k.add_argument("--checkpoint-dir", help="checkpoint every evaluation here, and resume from it")
    for q in (c, g, k):
        q.add_argument("--nu", type=int, default=10)
        q.add_argument("--rho", type=int, default=15)
        q.add_argument("--out", help="write the markdown here (default: print only)")
    args = p.parse_args()
    if args.smoke:
        runs = [p.parse_args([what, *argv]) for what, argv in SMOKE.items()]
    elif args.what is None:
        p.error("choose a benchmark: cost, grad or copy (or --smoke for all three)")
    else:
        runs = [args]
    torch.set_num_threads(1)
    for run in runs:
        text = {"cost": bench_cost, "grad": bench_grad, "copy": bench_copy}[run.what](run)
        if run.out:
            with open(run.out, "w") as fh:
                fh.write(text + "\n")
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
