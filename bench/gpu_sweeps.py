"""GPU sweep figures in one call: 16 small trials packed with `gpus = "auto"` against the same
trials at one GPU each (trials per hour), and one trial as 1 and as 2 DDP workers (the two loss
curves must agree). Each sweep is the real `depthwidth sweep run` on the embedded Ray.

Run by hand on a machine with GPUs:  python bench/gpu_sweeps.py [--steps 300] [--out FILE.json]
`--smoke` runs the same flow on the CPU (gloo, no packing: the shares are planned, not run; the
one-worker curve comes from `train()` in this process, so only the two-worker sweep starts Ray), a
check of the script, not of any GPU. Without CUDA and without --smoke it says so and exits 3.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEPTHWIDTH = str(Path(sys.executable).with_name("depthwidth"))
SPEC = """name = "{name}"
[model]
heads = 4
seq_len = {seq}
[data]
vocab_size = 256
[train]
batch_size = 16
eval_every = {eval_every}
warmup_steps = 10
{train_extra}
[grid]
depth = [2, 4]
width = {widths}
seed = {seeds}
[budget]
steps = {steps}
[resources]
cpus = 1
{resources}
"""


def spec_text(
    name: str, steps: int, resources: str, smoke: bool, widths=None, seeds=None, train_extra: str = ""
) -> str:
    return SPEC.format(
        name=name,
        seq=32 if smoke else 256,
        steps=steps,
        eval_every=max(1, steps // 5),
        resources=resources,
        train_extra=train_extra,
        widths=widths or ([16, 32] if smoke else [128, 256]),
        seeds=seeds or ([0] if smoke else [0, 1, 2, 3]),
    )


def run(spec: Path, store: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    t0 = time.perf_counter()
    r = subprocess.run(
        [DEPTHWIDTH, "sweep", "run", str(spec), "--storage", str(store), "--no-analyze"],
        env=env,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise SystemExit(f"sweep failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return time.perf_counter() - t0, r.stdout


def curve(store: Path) -> list[float]:
    from runstore.location import Location
    from runstore.tables import read_tables

    _, curves, _ = read_tables(Location(str(store)))
    return list(curves.sort_values("step")["val_loss"])


def curve_in_process(spec: Path) -> list[float]:
    """The spec's one trial trained by one process, as `train()` runs it inside a trial."""
    from depthwidth.train import train
    from sweeps.plans.spec import load_spec

    (trial,) = load_spec(spec).trials
    res = train(trial.model, trial.data, trial.train.replace(threads=1))
    return [p["val_loss"] for p in res.curve]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--smoke", action="store_true", help="the whole flow on the CPU, tiny trials")
    ap.add_argument("--out", help="write the figures as JSON")
    a = ap.parse_args()
    import torch

    gpus = torch.cuda.device_count()
    if not a.smoke and gpus == 0:
        print(
            "bench/gpu_sweeps.py: no CUDA device is available on this machine; run it on a GPU "
            "host (or pass --smoke).",
            file=sys.stderr,
        )
        return 3
    steps = 20 if a.smoke else a.steps
    fig: dict = {
        "gpus": gpus,
        "steps": steps,
        "load_before": round(os.getloadavg()[0], 2),
        "device": torch.cuda.get_device_name(0) if gpus else "cpu (smoke)",
    }
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        # 1. packed against one GPU per trial
        packed = t / "packed.toml"
        packed.write_text(spec_text("packed", steps, 'gpus = "auto"', a.smoke))
        plan = subprocess.run(
            [DEPTHWIDTH, "sweep", "plan", str(packed), "--json"], capture_output=True, text=True, check=True
        )
        shares = [json.loads(line)["gpus"] for line in plan.stdout.splitlines()]
        fig["planned_shares"] = shares
        if gpus:
            whole = t / "whole.toml"
            whole.write_text(spec_text("whole", steps, "gpus = 1", a.smoke))
            wall_p, _ = run(packed, t / "packed-store")
            wall_w, _ = run(whole, t / "whole-store")
            n = len(shares)
            fig["packed_trials_per_hour"] = round(n / wall_p * 3600, 1)
            fig["one_per_gpu_trials_per_hour"] = round(n / wall_w * 3600, 1)
            fig["packed_wall_s"], fig["one_per_gpu_wall_s"] = round(wall_p, 1), round(wall_w, 1)
        # 2. the same trial as one and as two data-parallel workers
        # (two NCCL ranks need two GPUs; with fewer, both run on the CPU with gloo)
        per_worker, device = ("gpus = 1", "") if gpus >= 2 else ("", 'device = "cpu"')
        curves = {}
        # a smoke run takes the one-worker curve from train() in this process (the function a
        # one-worker trial runs), so it starts Ray once, for the two-worker sweep
        for workers in (2,) if a.smoke else (1, 2):
            s = t / f"w{workers}.toml"
            s.write_text(
                spec_text(
                    f"w{workers}",
                    steps,
                    f"workers = {workers}\n{per_worker}",
                    a.smoke,
                    widths=[32 if a.smoke else 256],
                    seeds=[0],
                    train_extra=device,
                ).replace("depth = [2, 4]", "depth = [2]")
            )
            wall, _ = run(s, t / f"w{workers}-store")
            curves[workers] = curve(t / f"w{workers}-store")
            fig[f"workers_{workers}_wall_s"] = round(wall, 1)
        if a.smoke:
            curves[1] = curve_in_process(t / "w2.toml")
        diff = max(abs(x - y) / y for x, y in zip(curves[1], curves[2]))
        fig["ddp_max_relative_difference"] = diff
        fig["ddp_curves"] = curves
    fig["load_after"] = round(os.getloadavg()[0], 2)
    for k, v in fig.items():
        print(f"{k:30s} {v}")
    if a.out:
        Path(a.out).write_text(json.dumps(fig, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
