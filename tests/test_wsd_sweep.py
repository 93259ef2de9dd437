"""Every budget from one run on a real Ray (a `ray start --head` on 127.0.0.1, the `ray_cluster`
fixture): a sweep with `from_one_run = true` stores one row per budget, each branch naming its
run; the FLOPs it stores equal the plan's; a driver killed between two branches is resumed
without taking a branch twice. The real CLI in a subprocess throughout."""

from __future__ import annotations

import json
import os
import signal

import pandas as pd
import pytest
from helpers import hook_env, run_sweep, spec_toml, starts, sweep_running, trial_ids, wait_for, write_spec

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

# one 40-step WSD run per shape, the 10- and 20-step budgets as its cooldown branches
SPEC = spec_toml(
    "onerun",
    train={"schedule": "wsd"},
    grid={"depth": [1], "width": [8], "steps": [10, 20, 40]},
    budget={"from_one_run": True},
    resources={"cpus": 1, "max_failures": 2},
)


def _stored(store) -> pd.DataFrame:
    from runstore.store import ResultStore

    s = ResultStore(str(store))
    return s.runs() if s.has_runs() else pd.DataFrame(columns=["trial_id"])


def test_one_run_stores_every_budget_and_resumes_between_branches(ray_cluster, tmp_path):
    from sweeps.plans.plan import plan_rows, totals
    from sweeps.plans.spec import load_spec

    spec = write_spec(tmp_path, SPEC, "onerun.toml")
    short, middle, run = trial_ids(spec)  # 10, 20 and 40 steps: the 40-step run branches twice
    store, hook = tmp_path / "store", tmp_path / "hook"
    env = hook_env(ray_cluster.env, hook)
    # the run waits at the checkpoint written with its second branch (the 20-step budget's
    # cooldown starts at step 16): both branches are stored, the run is not
    (hook / "hold").write_text(f"{run}@16")
    args = ["run", str(spec), "--address", ray_cluster.address, "--storage", str(store), "--no-analyze"]
    with sweep_running(args, env, new_session=True) as proc:
        wait_for(lambda: (hook / f"{run}.pid").exists(), 150, "the run's checkpoint at step 16", proc)
        wait_for(lambda: {short, middle} <= set(_stored(store)["trial_id"]), 60, "both branches stored", proc)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, between the last branch and the run's end
        proc.wait(timeout=30)
    (hook / "hold").unlink()
    before = _stored(store).set_index("trial_id")
    assert set(before.index) == {short, middle}

    done = run_sweep(args, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 trials to run (2 already in the store)" in done.stdout
    after = _stored(store).set_index("trial_id")
    assert sorted(after.index) == sorted([short, middle, run])  # one row per budget
    assert (after["status"] == "ok").all() and list(after.loc[[short, middle, run], "steps"]) == [10, 20, 40]
    # each branch names its run, was stored once and never taken again
    assert (
        list(after.loc[[short, middle], "branched_from"]) == [run, run]
        and after.loc[run, "branched_from"] == ""
    )
    for tid in (short, middle):
        assert after.loc[tid, "finished_at"] == before.loc[tid, "finished_at"]
    assert [s for t, s in starts(hook) if t == run] == [0, 16]  # resumed after both branches
    assert after.loc[run, "resumed_from_step"] == 16
    # planned FLOPs: the run's 40 steps and each branch's cooldown (2 and 4 steps)
    plan = totals(load_spec(spec), plan_rows(load_spec(spec)))
    assert after["flops_spent"].sum() == pytest.approx(plan.flops)
    per_step = after.loc[run, "flops"] / 40
    assert after.loc[short, "flops_spent"] == pytest.approx(2 * per_step)
    assert after.loc[middle, "flops_spent"] == pytest.approx(4 * per_step)
    assert after.loc[short, "flops"] == pytest.approx(10 * per_step)  # its budget's own compute
    curves = pd.read_parquet(store / "curves.parquet")
    assert list(curves.loc[curves["trial_id"] == middle, "step"]) == [5, 10, 15, 20]
    assert list(curves.loc[curves["trial_id"] == run, "step"]) == [5, 10, 15, 20, 25, 30, 35, 40]
    # a branch row is carried to another store like any row: nothing left to run there
    table = tmp_path / "runs.csv"
    assert run_sweep(["results", str(store), "--csv", str(table)], env).returncode == 0
    moved = run_sweep(
        ["run", str(spec), "--storage", str(tmp_path / "moved"), "--from", str(table), "--no-analyze"], env
    )
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert "3 finished trial(s) carried" in moved.stdout and "nothing to run" in moved.stdout
    carried = _stored(tmp_path / "moved").set_index("trial_id")
    assert list(carried.loc[[short, middle], "branched_from"]) == [run, run]


def rung_spec(placement: dict) -> str:
    """Three learning rates of one 30-step WSD run, halved at the rung `placement` places."""
    return spec_toml(
        "wsdrung",
        train={"schedule": "wsd"},
        grid={"depth": [1], "width": [8], "lr": [3e-3, 3e-2, 0.3]},
        budget={"steps": 30},
        halving={"axis": "lr", "eta": 3, **placement},
        # the group's three runs side by side on the 2-CPU test cluster
        resources={"cpus": 0.5, "max_concurrent": 3, "max_failures": 2},
    )


@pytest.mark.parametrize(
    "placement, rung, cooldown",
    [({"rungs": 1}, 10, 2), ({"at": [0.66]}, 20, 4)],  # at 1/eta, or placed at two-thirds by hand
    ids=["rungs=1", "at=0.66"],
)
def test_a_wsd_halving_judges_its_rung_on_a_cooldown_branch(ray_cluster, tmp_path, placement, rung, cooldown):
    """The rung at step 10 (or 20) of a 30-step WSD run is judged on the cooldown branch 8 -> 10
    (16 -> 20): each learning rate's rung loss is that of a complete WSD run of the rung's length,
    not the loss the run passes there at its full rate. The losers stop where they branched; the
    plan counts the branches."""
    from analysis.readers.halving import finals
    from depthwidth.train import train
    from sweeps.plans.plan import plan_rows, totals
    from sweeps.plans.spec import load_spec

    spec = write_spec(tmp_path, rung_spec(placement), "wsdrung.toml")
    store = tmp_path / "store"
    args = ["run", str(spec), "--address", ray_cluster.address, "--storage", str(store), "--no-analyze"]
    done = run_sweep(args, ray_cluster.env)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = _stored(store).set_index("trial_id")
    assert len(runs) == 3
    loaded = load_spec(spec)
    rung_loss = {}
    for t in loaded.trials:
        own = t.train.replace(steps=rung, threads=1)  # the rung's own WSD run, trained alone
        rung_loss[t.trial_id] = train(t.model, t.data, own).final_val_loss
        rec = json.loads(runs.loc[t.trial_id, "halving"])
        assert list(rec["rungs"]) == [rung] and list(rec["cooldowns"]) == [cooldown]
        assert rec["losses"][0] == pytest.approx(rung_loss[t.trial_id], abs=1e-6)
    best = min(rung_loss, key=rung_loss.get)
    assert runs.loc[best, "status"] == "ok" and runs.loc[best, "steps"] == 30
    # a loser stops where it branched when the board already has every rung loss, else at its
    # first evaluation after the decision; one that finished before the decision came is set
    # aside by the analysis, which applies the rule again
    for tid in set(rung_loss) - {best}:
        status, steps = runs.loc[tid, "status"], int(runs.loc[tid, "steps"])
        branched = steps == rung - cooldown
        assert (status == "stopped" and (branched or steps % 5 == 0)) or (status, steps) == ("ok", 30)
    keep, _ = finals(runs.reset_index())
    assert list(runs.reset_index().loc[keep, "trial_id"]) == [best]
    t = totals(loaded, plan_rows(loaded))
    # each of 3 runs to its branch plus the cooldown, the winner on from the branch to 30
    assert t.flops / t.full_grid_flops == pytest.approx((3 * rung + 30 - (rung - cooldown)) / 90)
