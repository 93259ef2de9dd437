"""Sweep-service overhead: a 16-trial grid of tiny transformers through `sweep run` (embedded Ray,
2 and 1 concurrent trials, counting Ray's start) against the same trials run back-to-back by
`depthwidth.train.train` in one process; the fixed and per-trial parts of the overhead; and peak
driver memory for a 500-trial spec (plan only) plus a 500-row store. Ray's start and the
4-trial sweep that separates the fixed cost are each the median of three runs.
Run by hand:  python bench/sweep_overhead.py [--steps N] [--out FILE]
`--smoke` runs every step of it on 4 trials of 2 steps and a 4-trial plan, with one service run
standing in for all three (its figures mean nothing; it checks the script in about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRID_SPEC = """name = "overhead"
[model]
heads = 2
seq_len = 32
[data]
vocab_size = 32
[train]
batch_size = 16
eval_every = {eval_every}
warmup_steps = 5
threads = 1
[grid]
depth = [1, 2]
width = [16, 32]
seed = {seeds}
[budget]
steps = {steps}
[resources]
cpus = 1
"""

DEPTHWIDTH = str(Path(sys.executable).with_name("depthwidth"))  # the console script users run

BIG_SPEC = """name = "big"
[model]
heads = 4
seq_len = 64
[grid]
depth = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16]
width = [32, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
seed = [0, 1, 2, 3, 4]
[budget]
tokens_per_param = 20
min_steps = 100
"""


def back_to_back(spec_path: str) -> tuple[float, float]:
    """Wall time of the 16 trials run one after another by train() in this process (after
    imports), and the sum of their own wall_s."""
    import torch

    from depthwidth.train import train
    from sweeps.plans.spec import load_spec

    torch.set_num_threads(1)
    trials = load_spec(spec_path).trials
    t0 = time.perf_counter()
    inner = 0.0
    for t in trials:
        r = train(t.model, t.data, t.train)
        assert r.status == "ok", r.error
        inner += r.wall_s
    return time.perf_counter() - t0, inner


def back_to_back_cold(spec_path: str) -> float:
    """The same loop as a fresh process: Python start and imports counted, as for the service."""
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        f"import sweep_overhead as b; b.back_to_back({spec_path!r})"
    )
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t0


def through_service(spec_path: str, store: str, concurrent: int) -> tuple[float, float]:
    """Wall time of `sweep run` (a fresh process: imports, embedded Ray start, trials, shutdown)
    and the sum of the trials' own train() wall_s."""
    import pandas as pd

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    t0 = time.perf_counter()
    res = subprocess.run(
        [
            DEPTHWIDTH,
            "sweep",
            "run",
            spec_path,
            "--storage",
            store,
            "--max-concurrent",
            str(concurrent),
            "--no-analyze",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"sweep failed:\n{res.stdout}\n{res.stderr}")
    return wall, float(pd.read_parquet(Path(store) / "runs.parquet")["wall_s"].sum())


def ray_start_seconds() -> float:
    code = (
        "import time, ray; t=time.perf_counter(); ray.init(include_dashboard=False, "
        "logging_level='ERROR'); print(time.perf_counter()-t); ray.shutdown()"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def driver_memory(tmp: str, big_spec: str = BIG_SPEC) -> dict:
    """Child process: import the driver's modules (ray included), expand and plan a 500-trial
    spec, build a 500-row store trial by trial; report peak RSS."""
    code = f"""
import json, resource, time, ray, sweeps.running.service
from sweeps.plans.spec import parse_spec
from sweeps.plans.plan import plan_rows
from depthwidth.result import RunResult
from runstore.store import ResultStore
from sweeps.plans.trialconfig import TrialConfig
from sweeps.plans.trialoutcome import TrialOutcome
from sweeps.running.record import record_of
spec = parse_spec({big_spec!r}, "big.toml")
t = time.perf_counter(); rows = plan_rows(spec); plan_s = time.perf_counter() - t
store = ResultStore({tmp!r} + "/big-store")
t = time.perf_counter()
for tr in spec.trials:
    curve = [dict(step=s, tokens=s * 64, flops=s * 1e6, train_loss=3.0, val_loss=3.0, lr=1e-3, wall_s=1.0)
             for s in range(10, 110, 10)]
    res = dict(status="ok", final_train_loss=3.0, final_val_loss=3.0, steps=100, tokens=6400, flops=1e8,
               wall_s=1.0, n_params=1000, n_params_total=2000, flops_per_token=2e3, device="cpu",
               torch_version="x", depthwidth_version="x", unigram_entropy=3.0, vocab_size=64,
               curve=curve, metrics={{}}, error="")
    run = record_of("big", TrialConfig.of(tr), TrialOutcome(tr.trial_id, RunResult.from_dict(res)))
    store.add_trial(run.record, run.curve, run.beside)
write_s = time.perf_counter() - t
t = time.perf_counter(); n = len(ResultStore({tmp!r} + "/big-store").runs()); read_s = time.perf_counter() - t
print(json.dumps(dict(trials=len(spec.trials), rows=n, plan_s=plan_s, store_write_s=write_s,
                      store_read_s=read_s, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=150, help="steps per trial (~2 s each on one core)")
    ap.add_argument("--out", help="also write the figures as JSON")
    ap.add_argument("--smoke", action="store_true", help="the whole flow on 4 trials of 2 steps")
    args = ap.parse_args()
    seeds, big = (
        ([0, 1, 2, 3], BIG_SPEC)
        if not args.smoke
        else (
            [0],
            BIG_SPEC.replace("depth = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16]", "depth = [1, 2]")
            .replace("width = [32, 64, 96, 128, 192, 256, 384, 512, 768, 1024]", "width = [32, 64]")
            .replace("seed = [0, 1, 2, 3, 4]", "seed = [0]"),
        )
    )
    if args.smoke:
        args.steps = 2
    n, n_small = 4 * len(seeds), 4 if len(seeds) > 1 else 1
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "overhead.toml"
        spec.write_text(GRID_SPEC.format(steps=args.steps, eval_every=max(1, args.steps // 5), seeds=seeds))
        b2b, inner = back_to_back(str(spec))
        cold = back_to_back_cold(str(spec))
        # Ray's start and the 4-trial sweep vary by ±1 s from run to run on 2 cores: medians of 3
        ray_s = statistics.median(ray_start_seconds() for _ in range(1 if args.smoke else 3))
        svc2, work2 = through_service(str(spec), str(Path(tmp) / "store2"), 2)
        if args.smoke:  # each service run starts Ray (~15 s on 2 cores): one stands in for three
            (svc1, work1), (svc_small, work_small) = (svc2, work2), (svc2 / n, work2 / n)
        else:
            svc1, work1 = through_service(str(spec), str(Path(tmp) / "store1"), 1)
            small = Path(tmp) / "small.toml"  # the first 4 trials: separates fixed from per-trial cost
            small.write_text(spec.read_text().replace(f"seed = {seeds}", "seed = [0]"))
            smalls = [through_service(str(small), str(Path(tmp) / f"store_small{i}"), 1) for i in range(3)]
            # the median of the three by its overhead (wall time less the trials' own)
            svc_small, work_small = sorted(smalls, key=lambda sw: sw[0] - sw[1])[1]
        mem = driver_memory(tmp, big)
    marginal = ((svc1 - work1) - (svc_small - work_small)) / (n - n_small)
    fixed = (svc_small - work_small) - n_small * marginal
    figures = {
        "trials": n,
        "steps_per_trial": args.steps,
        "back_to_back_s": round(b2b, 2),
        "back_to_back_cold_process_s": round(cold, 2),
        "mean_trial_s": round(inner / n, 3),
        "ray_start_s": round(ray_s, 2),
        "service_2_concurrent_s": round(svc2, 2),
        "service_1_concurrent_s": round(svc1, 2),
        "ratio_2_concurrent_vs_back_to_back": round(svc2 / b2b, 3),
        "ratio_2_concurrent_vs_cold_process": round(svc2 / cold, 3),
        "ratio_1_concurrent_vs_back_to_back": round(svc1 / b2b, 3),
        "mean_trial_in_service_2_concurrent_s": round(work2 / n, 3),
        "mean_trial_in_service_1_concurrent_s": round(work1 / n, 3),
        # one at a time, 16 vs 4 trials: wall = fixed + sum(train wall) + trials x marginal
        "marginal_overhead_per_trial_s": round(marginal, 3),
        "fixed_overhead_per_sweep_s": round(fixed, 2),
        "driver_peak_rss_mb_500_trials": round(mem["peak_rss_mb"], 1),
        "plan_500_s": round(mem["plan_s"], 2),
        "store_500_rows_write_s": round(mem["store_write_s"], 2),
        "store_500_rows_read_s": round(mem["store_read_s"], 3),
    }
    for k, v in figures.items():
        print(f"{k:45s} {v}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
