"""Adaptive sweeps (sweeps/designing/adaptive.py, sweeps/designing/adaptive_search.py): bad
[adaptive] input, the choice rule on planted losses, and on real Ray a target stop, a budget stop, a resume after the
driver is killed, and `--adaptive` with the real trainable. The Ray runs other than the last use
sweeps/running/planted.py's trainable (losses from the two-regime law with b = 3) through the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import cli, hook_env, run_args, run_sweep, spec_toml, write_spec

from sweeps.designing.adaptive import LOG, Policy, parse_adaptive, read_log, spec_cells
from sweeps.plans.errors import SpecError

DEPTHS, WIDTHS = [1, 2, 3, 4, 6, 8], [16, 32, 64, 128]
# the trainable replaced by the planted one in the driver; Tune ships it to the workers by name
PLANTED_DRIVER = (
    "import sys, sweeps.running.trainable as t, sweeps.running.planted as p; t.run_trial = p.planted_trial; "
    "from sweeps.cli import main; sys.exit(main(sys.argv[1:]))"
)


def spec_text(name: str, adaptive: str = "", depths=DEPTHS, widths=WIDTHS, seeds=(0, 1)) -> str:
    """The tiny model's grid of depths x widths x seeds, 10 steps a trial, with the [adaptive]
    table's lines `adaptive`."""
    return spec_toml(
        name,
        grid={"depth": depths, "width": widths, "seed": list(seeds)},
        budget={"steps": 10},
        resources={"cpus": 1, "max_failures": 1},
        extra=f"[adaptive]\n{adaptive}\n" if adaptive else "",
    )


def planted_runs(spec) -> pd.DataFrame:
    from sweeps.plans.trialconfig import TrialConfig
    from sweeps.running.planted import planted_result

    rows = []
    for t in spec.trials:
        r = planted_result(TrialConfig.of(t))
        rows.append(
            {
                "trial_id": t.trial_id,
                "depth": t.model.depth,
                "width": t.model.width,
                "seed": t.train.seed,
                "n_params": r.n_params,
                "loss": r.final_val_loss,
            }
        )
    return pd.DataFrame(rows)


def replay(spec, cfg):
    """The policy's rounds without Ray, each chosen cell's planted loss revealed once chosen."""
    runs, policy, done, picks = planted_runs(spec), Policy(spec_cells(spec), cfg), set(), []
    key = list(zip(runs["depth"], runs["width"], runs["seed"]))
    while True:
        d = policy.decide(runs[[k in done for k in key]], done)
        if d.stop:
            return d, done, picks
        picks += d.picks
        done |= {c.key for c, _ in d.picks}


@pytest.mark.parametrize(
    "table, field",
    [
        ("target_width = -1", "adaptive.target_width = -1"),
        ("batch = 1.5", "adaptive.batch = 1.5"),
        ("max_trial = 3", "'max_trial'"),
        ("bootstrap = 5", "adaptive.bootstrap = 5"),
    ],
)
def test_bad_adaptive_table_exits_2_and_writes_nothing(tmp_path, table, field):
    spec = write_spec(tmp_path, spec_text("bad", table), "bad.toml")
    store = tmp_path / "store"
    p = run_sweep(["run", str(spec), "--storage", str(store)], timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert field in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not store.exists()


def test_policy_on_planted_losses_narrows_b_and_keeps_its_budget():
    from sweeps.plans.spec import parse_spec

    spec = parse_spec(spec_text("policy"))
    target = parse_adaptive(
        spec_text("policy", "target_width = 1.0\ninitial = 8\nbatch = 4\nbootstrap = 50"), "p"
    )
    d, done, picks = replay(spec, target)
    assert d.stop.startswith("target reached") and len(done) < len(spec.trials)
    lo, hi = d.estimate.ci
    assert hi - lo <= 1.0 and lo <= 3.0 <= hi  # planted b = 3
    chosen = [why for _, why in picks[8:]]
    assert chosen and all("bootstrap variance of ln b" in why for why in chosen)
    assert any("above it" in why for why in chosen) and any("below it" in why for why in chosen)

    budget = parse_adaptive(
        spec_text("policy", "target_width = 0.001\nmax_trials = 11\ninitial = 8\nbatch = 2\nbootstrap = 30"),
        "p",
    )
    d, done, _ = replay(spec, budget)
    assert d.stop.startswith("budget spent") and len(done) == 11


def run_planted(args: list[str], env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PLANTED_DRIVER, *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def stored(store: Path) -> pd.DataFrame:
    from runstore.store import ResultStore

    s = ResultStore(str(store))
    return s.runs() if s.has_runs() else pd.DataFrame(columns=["trial_id"])


def log_of(store: Path) -> list[dict]:
    return read_log((store / LOG).read_text())


@pytest.mark.slow
def test_adaptive_sweep_on_ray_stops_at_its_target(ray_cluster, tmp_path):
    target = spec_text("target", "target_width = 1.0\ninitial = 8\nbatch = 4\nbootstrap = 50")
    spec = write_spec(tmp_path, target, "target.toml")
    store = tmp_path / "store"
    proc = run_planted(
        ["run", str(spec), "--address", ray_cluster.address, "--storage", str(store), "--no-analyze"],
        ray_cluster.env,
    )
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, out + err
    runs, log = stored(store), log_of(store)
    chosen = {t for r in log if r["kind"] == "choice" for t in r["trial_ids"]}
    assert set(runs["trial_id"]) == chosen and 8 <= len(runs) < 48
    assert log[-1]["kind"] == "stop" and log[-1]["reason"].startswith("target reached")
    est = [r for r in log if r["kind"] == "estimate" and r["ci"]][-1]
    assert est["width"] <= 1.0 and est["ci"][0] <= 3.0 <= est["ci"][1]
    assert "adaptive: stopped, target reached" in out
    # the report names the runs the sweep chose and why
    p = cli("analyze", store, "--bootstrap", 20, timeout=400)
    assert p.returncode == 0, p.stdout + p.stderr
    md = (store / "analysis" / "report.md").read_text()
    section = md[md.index("## Adaptive sweep") :]
    assert "It stopped: target reached" in section
    assert "first batch: the grid's diagonals" in section and "bootstrap variance of ln b" in section
    report = json.loads((store / "analysis" / "report.json").read_text())
    assert len(report["adaptive"]["choices"]) == len([r for r in log if r["kind"] == "choice"])


@pytest.mark.slow
def test_killed_adaptive_sweep_resumes_and_stops_on_its_budget(ray_cluster, tmp_path):
    """Killed mid-way through its adaptive rounds, the rerun starts no stored trial again,
    finishes the choices of the killed run, continues the rounds and stops on max_trials."""
    budget = spec_text(
        "resume", "target_width = 0.001\nmax_trials = 14\ninitial = 8\nbatch = 2\nbootstrap = 30"
    )
    spec = write_spec(tmp_path, budget, "resume.toml")
    store, hook = tmp_path / "store", tmp_path / "hook"
    env = hook_env(ray_cluster.env, hook)
    args = ["run", str(spec), "--address", ray_cluster.address, "--storage", str(store)]
    args += ["--max-concurrent", "1", "--no-analyze"]
    proc = run_planted(
        args, {**env, "DEPTHWIDTH_PLANTED_LAW": json.dumps({"sleep_s": 1.0})}, start_new_session=True
    )
    try:
        import time

        deadline = time.monotonic() + 300
        while len(stored(store)) < 10 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, in its adaptive rounds
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    before = set(stored(store)["trial_id"])
    rounds_before = [r["round"] for r in log_of(store) if r["kind"] == "estimate"]
    assert 10 <= len(before) < 14 and len(rounds_before) >= 2

    again = run_planted(args, env)
    out, err = again.communicate(timeout=400)
    assert again.returncode == 0, out + err
    runs, log = stored(store), log_of(store)
    assert len(runs) == 14 and before <= set(runs["trial_id"])
    starts = [line.split()[1] for line in (hook / "starts.log").read_text().splitlines()]
    assert all(starts.count(t) == 1 for t in before)  # no stored trial ran again
    rounds = [r["round"] for r in log if r["kind"] == "estimate"]
    assert rounds == list(range(1, len(rounds) + 1)) and len(rounds) > len(rounds_before)
    assert log[-1]["kind"] == "stop" and log[-1]["reason"].startswith("budget spent")
    chosen = {t for r in log if r["kind"] == "choice" for t in r["trial_ids"]}
    assert set(runs["trial_id"]) <= chosen


@pytest.mark.slow
def test_adaptive_flag_runs_real_trials(ray_cluster, tmp_path):
    """`--adaptive` without an [adaptive] table: the defaults, on the real trainable; a
    3 x 2 grid of one seed (the fewest shapes b can be fitted from) is all first batch, after which
    the searcher says why it stops."""
    spec = write_spec(tmp_path, spec_text("flag", depths=[1, 2, 3], widths=[8, 16], seeds=[0]), "flag.toml")
    store = tmp_path / "store"
    args = run_args(spec, store, "--adaptive", "--no-analyze", address=ray_cluster.address)
    p = run_sweep(args, ray_cluster.env, timeout=400)
    assert p.returncode == 0, p.stdout + p.stderr
    runs, log = stored(store), log_of(store)
    assert "6 trials to choose from, adaptively, (0 already in the store)" in p.stdout
    assert len(runs) == 6 and (runs["status"] == "ok").all()
    assert log[-1] == {**log[-1], "kind": "stop", "reason": "every trial of the grid has run"}


def test_parse_adaptive_defaults_and_flag():
    assert parse_adaptive("name = 'x'\n", "s") is None
    assert parse_adaptive("name = 'x'\n", "s", enable=True).target_width == 0.5
    with pytest.raises(SpecError, match="adaptive.max_compute = 'lots'"):
        parse_adaptive("[adaptive]\nmax_compute = 'lots'\n", "s")
