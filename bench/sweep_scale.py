"""Sweep service at scale: a 5,000-trial spec of fast trials planned, run on the embedded Ray and
analysed. Records the driver's peak memory (sampled from /proc while it runs), the overhead per
trial beyond its training time, the cost of recording the n-th trial in the store (early against
late trials, compactions included), the time to read the store and to `depthwidth analyze` it.

Overhead per trial comes from two sweeps of the same shape, a small and the large one, at the
same concurrency C: wall = fixed + Σ train() time / C + trials × overhead.
Run by hand:  python bench/sweep_scale.py [--smoke] [--trials 5000] [--concurrent 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

DEPTHWIDTH = str(Path(sys.executable).with_name("depthwidth"))
WIDTHS = [4, 8, 12, 16, 20, 24, 28, 32, 36, 40]
DEPTHS = [1, 2, 3, 4, 5]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers import spec_toml, write_spec  # noqa: E402


def scale_spec(folder: Path, name: str, trials: int, steps: int) -> Path:
    """The first `trials` points of depths x widths x seeds (the where filter keeps them), each a
    one-head model of `steps` steps evaluated once at its end, as the spec file `name`."""
    per_seed = len(DEPTHS) * len(WIDTHS)
    seeds = list(range(-(-trials // per_seed)))
    text = spec_toml(
        "scale",
        where=f"seed * 50 + (depth - 1) * 10 + width // 4 - 1 < {trials}",
        model={"heads": 1, "seq_len": 8},
        data={"vocab_size": 8},
        train={"batch_size": 2, "eval_every": steps, "warmup_steps": 1},
        grid={"depth": DEPTHS, "width": WIDTHS, "seed": seeds},
        budget={"steps": steps},
        resources={"cpus": 1},
    )
    return write_spec(folder, text, name)


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def timed(cmd: list[str], sample_rss: bool = False) -> dict:
    """Wall time of a command (and the peak RSS of its own process, sampled every 0.2 s)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], rss_mb(proc.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    if sample_rss:
        sampler.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-4000:]}")
    if sample_rss:
        sampler.join()
    return {"wall_s": wall, "peak_rss_mb": peak[0], "output": out}


def sweep(spec: Path, store: Path, concurrent: int) -> dict:
    from runstore.location import Location
    from runstore.tables import read_tables

    cmd = [DEPTHWIDTH, "sweep", "run", str(spec), "--storage", str(store), "--no-analyze"]
    res = timed([*cmd, "--max-concurrent", str(concurrent)], sample_rss=True)
    runs, curves, _ = read_tables(Location(str(store)))
    assert (runs["status"] == "ok").all(), runs["status"].value_counts()
    return {
        "trials": len(runs),
        "curve_rows": len(curves),
        "wall_s": res["wall_s"],
        "train_s": float(runs["wall_s"].sum()),
        "driver_peak_rss_mb": res["peak_rss_mb"],
    }


def record_cost(tmp: str, trials: int) -> dict:
    """Child process: record `trials` synthetic trials one by one through the store's writer;
    seconds per trial over the first and the last 10%, the slowest single trial (a compaction),
    and reading the store back."""
    code = f"""
import json, time
from dataclasses import replace
from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from depthwidth.result import RunResult
from runstore.store import ResultStore
from runstore.location import Location
from runstore.tables import read_tables
from sweeps.plans.trialconfig import TrialConfig
from sweeps.plans.trialoutcome import TrialOutcome
from sweeps.running.record import record_of
trial = TrialConfig("t", ModelConfig(depth=2, width=16, heads=1, vocab_size=8, seq_len=8),
                    DataConfig(source="pcfg", vocab_size=8), TrainConfig(lr=1e-3, batch_size=2, steps=2))
store = ResultStore({tmp!r} + "/records")
times = []
for i in range({trials}):
    tid = f"{{i:016x}}"
    curve = [dict(step=s, tokens=s * 16, flops=s * 1e5, train_loss=2.0, val_loss=2.0, lr=1e-3,
                  wall_s=0.1) for s in (1, 2)]
    res = dict(status="ok", final_train_loss=2.0, final_val_loss=2.0, steps=2, tokens=32,
               flops=2e5, wall_s=0.1, n_params=100, n_params_total=200, flops_per_token=1e4,
               device="cpu", torch_version="x", depthwidth_version="x", unigram_entropy=2.0,
               vocab_size=8, curve=curve, metrics={{}}, error="")
    t = time.perf_counter()
    run = record_of("scale", replace(trial, trial_id=tid), TrialOutcome(tid, RunResult.from_dict(res)))
    store.add_trial(run.record, run.curve, run.beside)
    times.append(time.perf_counter() - t)
t = time.perf_counter(); store.close(); close_s = time.perf_counter() - t
t = time.perf_counter(); runs, curves, _ = read_tables(Location({tmp!r} + "/records")); read_s = time.perf_counter() - t
k = max(1, len(times) // 10)
print(json.dumps(dict(trials=len(runs), first_s=sum(times[:k]) / k, last_s=sum(times[-k:]) / k,
                      slowest_s=max(times), total_s=sum(times), final_compaction_s=close_s,
                      read_s=read_s)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def plan_cost(spec: Path) -> dict:
    code = f"""
import json, resource, time
t = time.perf_counter()
from sweeps.plans.spec import load_spec
from sweeps.plans.plan import plan_rows
spec = load_spec({str(spec)!r}); rows = plan_rows(spec)
print(json.dumps(dict(trials=len(rows), plan_s=time.perf_counter() - t,
                      peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="4 trials against 2, no analysis")
    ap.add_argument("--trials", type=int, default=5000)
    ap.add_argument("--small", type=int, default=100, help="trials of the small sweep")
    ap.add_argument("--steps", type=int, default=2, help="steps per trial")
    ap.add_argument("--concurrent", type=int, default=2)
    ap.add_argument("--keep", help="keep the large store in this folder")
    ap.add_argument("--out", help="also write the figures as JSON")
    args = ap.parse_args()
    if args.smoke:
        args.trials, args.small = 4, 2
    load = os.getloadavg()[0]
    figures: dict = {"load_before": round(load, 2), "cores": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        big = scale_spec(Path(tmp), "big.toml", args.trials, args.steps)
        small = scale_spec(Path(tmp), "small.toml", args.small, args.steps)
        figures["plan"] = plan_cost(big)
        print("plan:", figures["plan"], flush=True)
        figures["record"] = record_cost(tmp, args.trials)
        print("record:", figures["record"], flush=True)
        figures["small"] = sweep(small, Path(tmp) / "small-store", args.concurrent)
        print("small sweep:", figures["small"], flush=True)
        store = Path(args.keep) if args.keep else Path(tmp) / "big-store"
        figures["large"] = sweep(big, store, args.concurrent)
        print("large sweep:", figures["large"], flush=True)
        s, b, c = figures["small"], figures["large"], args.concurrent
        overhead = ((b["wall_s"] - b["train_s"] / c) - (s["wall_s"] - s["train_s"] / c)) / (
            b["trials"] - s["trials"]
        )
        figures["overhead_per_trial_s"] = overhead
        figures["fixed_s"] = (s["wall_s"] - s["train_s"] / c) - s["trials"] * overhead
        if not args.smoke:
            res = timed(
                [DEPTHWIDTH, "analyze", str(store), "--out", str(Path(tmp) / "report")], sample_rss=True
            )
            figures["analyze"] = {"wall_s": res["wall_s"], "peak_rss_mb": res["peak_rss_mb"]}
            print("analyze:", figures["analyze"], flush=True)
    figures["load_after"] = round(os.getloadavg()[0], 2)
    for k, v in figures.items():
        print(f"{k:24s} {v}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
