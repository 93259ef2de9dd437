"""Successive halving over the learning rate (sweeps/plans/halving.py,
analysis/readers/halving.py): the rule on planted losses, bad [halving] input through the real CLI, and a real sweep on a local Ray whose
stored rows, live verdicts and analysis agree with the rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from helpers import cli, run_sweep, spec_toml, write_spec

from analysis.readers.halving import beaten, decide, finals, survivors
from sweeps.plans.errors import SpecError
from sweeps.plans.halving import Halving, rung_steps
from sweeps.running.halving_board import Board


def test_survivors_keep_the_best_third_rounded_up():
    assert survivors({"a": 3.0, "b": 1.0, "c": 2.0}, 3) == {"b"}
    assert survivors({"a": 3.0, "b": 1.0, "c": 2.0, "d": 0.5}, 3) == {"d", "b"}
    assert survivors({"a": float("nan"), "b": 9.0}, 2) == {"b"}  # a non-finite loss ranks last


def test_decide_waits_for_every_survivor_and_ranks_an_ended_run_last():
    losses = {"a": [2.0, 1.5], "b": [1.0]}
    kept, complete = decide(["a", "b", "c"], losses, set(), 3, 2)
    assert (kept, complete) == ([], False)  # c has neither reported nor ended
    kept, complete = decide(["a", "b", "c"], losses, {"c"}, 3, 2)
    assert kept[0] == {"b"} and not complete  # b survived rung 0; rung 1 waits for b
    kept, complete = decide(["a", "b", "c"], {**losses, "b": [1.0, 0.9]}, {"c"}, 3, 2)
    assert kept == [{"b"}, {"b"}] and complete


def test_beaten_never_stops_a_run_the_complete_rule_keeps():
    import itertools
    import random

    rng = random.Random(0)
    for n, eta in itertools.product((2, 3, 4, 5, 9), (2, 3)):
        for _ in range(30):
            ids = [f"m{i}" for i in range(n)]
            full = {m: [rng.random(), rng.random()] for m in ids}
            final, _ = decide(ids, full, set(), eta, 2)
            for k in range(n):  # any prefix of the group has reported rung 0
                seen = {m: full[m][:1] for m in ids[:k]}
                out = beaten(ids, seen, set(), eta, 2)
                assert not out & final[0], (n, eta, k)
                assert len(out) == max(0, k - math.ceil(n / eta))


def _row(tid, group, lr, status, losses, loss, rungs=(20,)):
    rec = {"axis": "lr", "eta": 3, "rungs": list(rungs), "group": group, "losses": losses}
    return {
        "trial_id": tid,
        "lr": lr,
        "status": status,
        "final_val_loss": loss,
        "halving": json.dumps(rec),
    }


def test_finals_apply_the_rule_to_the_stored_rows():
    rows = pd.DataFrame(
        [
            _row("a", "g1", 1e-3, "stopped", [2.5], 2.4),
            _row("b", "g1", 3e-3, "ok", [2.1], 1.8),
            # c finished before its rung was decided, and lost it: not a final
            _row("c", "g1", 1e-2, "ok", [2.3], 1.9),
            _row("d", "g2", 1e-3, "failed", [], float("nan")),
            _row("e", "g2", 3e-3, "ok", [2.0], 1.7),
            {"trial_id": "x", "lr": 1e-3, "status": "ok", "final_val_loss": 2.0, "halving": ""},
        ]
    )
    keep, info = finals(rows)
    assert list(rows["trial_id"][keep]) == ["b", "e", "x"]
    assert info["groups"] == 2 and info["finals"] == 2 and info["stopped"] == 1
    assert info["finished_not_promoted"] == 1 and info["undecided_groups"] == 0


def test_against_grid_counts_agreement_and_excess_loss():
    from analysis.readers.halving import against_grid

    halved = pd.DataFrame(
        [
            _row("a", "g1", 1e-3, "stopped", [2.5], 2.5),
            _row("b", "g1", 3e-3, "ok", [2.1], 1.8),
            _row("c", "g1", 1e-2, "stopped", [2.3], 2.3),
            _row("d", "g2", 1e-3, "ok", [2.0], 1.9),
            _row("e", "g2", 3e-3, "stopped", [2.2], 2.2),
            _row("f", "g3", 1e-3, "ok", [2.0], 1.9),  # the grid lacks g3's other member
            _row("g", "g3", 3e-3, "stopped", [2.2], 2.2),
        ]
    )
    grid = pd.DataFrame(
        {
            "trial_id": list("abcdef"),
            "lr": [1e-3, 3e-3, 1e-2, 1e-3, 3e-3, 1e-3],
            "status": ["ok"] * 6,
            "final_val_loss": [1.95, 1.8, 1.85, 1.9, 1.7, 1.9],
        }
    )
    out = against_grid(halved, grid).set_index("group")
    assert list(out.index) == ["g1", "g2"]
    assert bool(out.loc["g1", "agree"]) and out.loc["g1", "excess"] == 0
    assert not out.loc["g2", "agree"] and out.loc["g2", "excess"] == pytest.approx(0.2)
    assert out.loc["g2", "chosen_lr"] == 1e-3 and out.loc["g2", "best_lr"] == 3e-3


def test_compute_used_against_the_full_grid():
    from analysis.readers.halving import compute_used

    cfg = json.dumps({"steps": 300, "batch_size": 2})
    runs = pd.DataFrame(
        {
            "train_config": [cfg] * 3,
            "seq_len": [4] * 3,
            "tokens": [300 * 8, 100 * 8, 150 * 8],  # one final, two stopped
            "flops": [300 * 8 * 30.0, 100 * 8 * 30.0, 150 * 8 * 30.0],
        }
    )
    got = compute_used(runs)
    assert got["full_grid_flops"] == pytest.approx(3 * 300 * 8 * 30.0)
    assert got["share"] == pytest.approx(550 / 900)


def test_board_verdicts():
    b = Board(3, {"a": "g", "b": "g", "c": "g"}, {"g": 1})
    b.report("a", 0, 2.0)
    assert b.verdict("a", 0) == "wait"
    b.report("b", 0, 1.0)
    # b already beats a, and only one of three goes on: a stops without waiting for c
    assert b.verdict("a", 0) == "stop" and b.verdict("b", 0) == "wait"
    b.report("c", 0, 3.0)
    b.report("c", 0, 0.1)  # a restart repeating its report: the first one counts
    assert [b.verdict(t, 0) for t in "abc"] == ["stop", "go", "stop"]


def test_rung_steps_fall_on_evaluations():
    assert rung_steps(90, 10, Halving(eta=3, rungs=2), "s") == [10, 30]
    assert rung_steps(100, 25, Halving(eta=3, rungs=1), "s") == [50]
    with pytest.raises(SpecError, match="halving.rungs = 2 is invalid"):
        rung_steps(90, 30, Halving(eta=3, rungs=2), "s")


def test_rungs_placed_by_share_of_the_run():
    """`at` puts the rungs where asked (the first evaluation at or after each share), not at 1/eta^k."""
    assert rung_steps(900, 50, Halving(eta=3, rungs=1, at=(2 / 3,)), "s") == [600]
    assert rung_steps(300, 50, Halving(eta=3, rungs=1, at=(0.6,)), "s") == [200]
    assert rung_steps(900, 100, Halving(eta=3, rungs=2, at=(0.25, 0.5)), "s") == [300, 500]
    with pytest.raises(SpecError, match=r"halving.at = \[0.98\] is invalid"):
        rung_steps(100, 50, Halving(eta=3, rungs=1, at=(0.98,)), "s")


def halving_spec(halving: str, store: Path, depths=(1,)) -> str:
    """Three learning rates for each width and seed of the tiny model, 200 steps, halved as the
    [halving] lines `halving` say, stored in `store`."""
    return spec_toml(
        "halving",
        train={"eval_every": 10, "steps": 200},
        grid={"depth": list(depths), "width": [8, 16], "lr": [1e-4, 3e-3, 3e-2], "seed": [0, 1]},
        resources={"cpus": 0.5, "max_concurrent": 3, "max_failures": 1},
        storage={"path": str(store)},
        extra=f"[halving]\n{halving}\n",
    )


@pytest.mark.parametrize(
    "halving, message",
    [
        ("eta = 1", "halving.eta = 1 is invalid"),
        ('axis = "beta2"', "halving.axis = 'beta2' is invalid: it must be a [grid] axis"),
        ("rungs = 5", "halving.rungs = 5 is invalid"),
        ("at = [1.0]", "halving.at = [1.0] is invalid: shares strictly between 0 and 1"),
        ("at = [0.6, 0.5]", "halving.at = [0.6, 0.5] is invalid"),
        ("at = []", "halving.at = [] is invalid"),
        ('at = ["half"]', "halving.at = 'half' is invalid"),
        ("at = [0.5]\nrungs = 2", "halving.rungs = 2 is invalid: halving.at places 1 rung(s)"),
        ("speed = 2", "speed"),
        ("eta = 3\n[adaptive]\nmax_trials = 4", "an [adaptive] sweep chooses its own trials"),
    ],
)
def test_bad_halving_is_refused(tmp_path, halving, message):
    spec = write_spec(tmp_path, halving_spec(halving, tmp_path / "store"), "s.toml")
    p = run_sweep(["plan", str(spec)])
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.slow
def test_a_real_sweep_stops_the_losers_at_the_rung(tmp_path):
    store = tmp_path / "store"
    spec = write_spec(tmp_path, halving_spec("eta = 3\nrungs = 1", store), "s.toml")
    p = run_sweep(["run", str(spec), "--no-analyze"], timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    runs = pd.read_parquet(store / "runs.parquet")
    assert len(runs) == 12
    recs = [json.loads(v) for v in runs["halving"]]
    assert all(r["rungs"] == [70] and r["eta"] == 3 for r in recs)
    runs["group"] = [r["group"] for r in recs]
    runs["rung_loss"] = [r["losses"][0] for r in recs]
    assert runs["group"].nunique() == 4  # 2 widths x 2 seeds, each over 3 learning rates
    for _, g in runs.groupby("group"):
        best = g.loc[g["rung_loss"].idxmin()]
        assert best["status"] == "ok" and best["steps"] == 200  # the rung's winner trains on
        losers = g.drop(index=best.name)
        # a loser stops at the first evaluation after its group's rung was decided, or, if it
        # finished first, is stored as finished and left out by the rule
        assert set(losers["status"]) <= {"stopped", "ok"}
        stopped = losers[losers["status"] == "stopped"]
        # `steps` is the planned budget in every row; where a loser stopped is its last_step
        assert (stopped["steps"] == 200).all() and (stopped["last_step"] < 200).all()
        assert (losers.loc[losers["status"] == "ok", "steps"] == 200).all()
        assert (losers["steps"] >= 70).all()
    assert (runs["status"] == "stopped").sum() >= 6  # most losers stopped before the end
    # the analysis fits exactly the rule's finals: one per group
    keep, info = finals(runs.drop(columns=["group", "rung_loss"]))
    assert keep.sum() == 4 and info["groups"] == 4
    out = tmp_path / "report"
    a = cli("analyze", store, "--out", out, "--bootstrap", 20, timeout=600)
    assert a.returncode == 0, a.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["tuning"]["halving"]["finals"] == 4
    text = (out / "report.md").read_text()
    assert "successive halving" in text


def test_plan_cost_counts_what_the_halving_trains(tmp_path):
    from sweeps.plans.halving import steps_share
    from sweeps.plans.plan import plan_rows, totals
    from sweeps.plans.spec import parse_spec

    assert steps_share(3, [100], 300, 3) == pytest.approx((3 * 100 + 1 * 200) / 900)
    assert steps_share(9, [10, 30], 90, 3) == pytest.approx((9 * 10 + 3 * 20 + 1 * 60) / 810)
    spec = parse_spec(halving_spec("eta = 3", tmp_path / "s"))
    t = totals(spec, plan_rows(spec))
    # every group has 3 learning rates and its rung at step 70 of 200
    assert t.flops == pytest.approx(t.full_grid_flops * (3 * 70 + 130) / 600)
    # a rung at two-thirds: all three to step 140, the one kept to 200
    late = parse_spec(halving_spec("eta = 3\nat = [0.667]", tmp_path / "s"))
    rows = plan_rows(late)
    assert {late.halving[t.trial_id].rungs[0] for t in late.trials} == {140}
    assert totals(late, rows).flops == pytest.approx(t.full_grid_flops * (3 * 140 + 60) / 600)


def test_design_plays_the_halving_out_on_planted_losses(tmp_path):
    import numpy as np

    from analysis.power.design import PlantModel, planted_table
    from sweeps.designing.design_plan import trials_frame
    from sweeps.plans.spec import parse_spec

    text = halving_spec("eta = 3", tmp_path / "s", depths=[1, 2, 3])
    trials, _ = trials_frame(parse_spec(text))
    table = planted_table(trials, 3.0, PlantModel(lr0=3e-3, noise=0.02), np.random.default_rng(0))
    recs = [json.loads(h) for h in table["halving"]]
    table["group"] = [r["group"] for r in recs]
    table["rung"] = [r["losses"][0] for r in recs]
    assert table["group"].nunique() == 12
    for _, g in table.groupby("group"):
        final = g[g["status"] == "ok"]
        assert len(final) == 1 and final.index[0] == g["rung"].idxmin()
        stopped = g[g["status"] == "stopped"]
        assert (stopped["loss"] == stopped["rung"]).all()  # a loser's loss is where it stopped
        assert (final["loss"] < final["rung"]).all()  # more tokens, lower loss, same seed luck
    keep, info = finals(table)
    assert list(keep) == list(table["status"] == "ok") and info["finals"] == 12
