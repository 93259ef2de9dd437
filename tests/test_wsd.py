"""Warmup-stable-decay and cooldown branches (docs/science.md §10), without Ray: the schedule
against hand-computed rates, a branch against the WSD run of its budget trained alone (equal to
the last bit on CPU), the run itself untouched by its branches, a resume that takes no branch
twice, and the spec's one-run plan against hand-counted FLOPs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import spec_toml, write_spec

from depthwidth.config import ConfigError, DataConfig, ModelConfig, TrainConfig
from depthwidth.train import get_lr, load_checkpoint, train

MODEL = ModelConfig(depth=2, width=16, heads=2, seq_len=16)
DATA = DataConfig(source="pcfg", vocab_size=32)
WSD = TrainConfig(
    steps=60, lr=1e-2, warmup_steps=5, schedule="wsd", eval_every=10, batch_size=8, seed=0, threads=1
)


def test_the_wsd_schedule_by_hand():
    cfg = WSD  # cooldown: the last round(0.2 x 60) = 12 steps, 48..59
    assert cfg.cooldown_start == 48
    assert get_lr(0, cfg) == pytest.approx(1e-2 / 5) and get_lr(4, cfg) == pytest.approx(1e-2)
    assert get_lr(5, cfg) == get_lr(47, cfg) == 1e-2  # stable
    floor = 1e-3  # min_lr_ratio 0.1
    for step in (48, 53, 59):
        progress = (step - 48 + 1) / 12
        assert get_lr(step, cfg) == pytest.approx(floor + (1e-2 - floor) * (1 - math.sqrt(progress)))
    assert get_lr(59, cfg) == pytest.approx(floor)  # the last step reaches the floor
    lin = cfg.replace(cooldown="linear")
    assert get_lr(53, lin) == pytest.approx(floor + (1e-2 - floor) * (1 - 6 / 12))
    # a shorter WSD run with the same warmup agrees with it on every step before its cooldown
    short = cfg.replace(steps=30)
    assert all(get_lr(s, short) == get_lr(s, cfg) for s in range(short.cooldown_start))
    assert get_lr(short.cooldown_start, short) < get_lr(short.cooldown_start, cfg)


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(schedule="step"), "schedule"),
        (dict(cooldown="cosine"), "cooldown"),
        (dict(cooldown_fraction=0.0), "cooldown_fraction"),
        (dict(cooldown_fraction=1.5), "cooldown_fraction"),
        (dict(warmup_steps=50), "warmup_steps"),  # past the cooldown start (48)
    ],
)
def test_bad_schedules_are_refused(change, field):
    with pytest.raises(ConfigError, match=f"TrainConfig.{field} = "):
        WSD.replace(**change)


def test_a_branch_is_the_run_of_its_budget_and_leaves_the_run_untouched():
    budgets = [WSD.replace(steps=20), WSD.replace(steps=40, eval_every=20)]
    got = []
    full = train(MODEL, DATA, WSD, branches=budgets, on_branch=lambda c, r, ck: got.append((c, r, ck)))
    alone = train(MODEL, DATA, WSD)
    assert full.final_val_loss == alone.final_val_loss and full.final_train_loss == alone.final_train_loss
    assert [e["val_loss"] for e in full.curve] == [e["val_loss"] for e in alone.curve]
    assert [c.steps for c, _, _ in got] == [20, 40]  # in order of their cooldown starts: 16, 32
    for cfg, branch, checkpoint in got:
        own = train(MODEL, DATA, cfg)
        assert checkpoint is None  # no checkpoint folder given
        assert branch.status == "ok" and branch.steps == cfg.steps and branch.tokens == own.tokens
        assert branch.final_val_loss == own.final_val_loss
        assert branch.final_train_loss == own.final_train_loss
        assert branch.flops == own.flops
    # a branch's curve: the run's evaluations before its cooldown start, then its own
    assert [e["step"] for e in got[0][1].curve] == [10, 20]
    assert [e["step"] for e in got[1][1].curve] == [10, 20, 30, 40]


def test_a_branch_held_on_disk_equals_one_held_in_memory(tmp_path: Path, monkeypatch):
    import depthwidth.train as t

    budgets = [WSD.replace(steps=20)]
    mem = []
    train(
        MODEL,
        DATA,
        WSD,
        branches=budgets,
        on_branch=lambda c, r, ck: mem.append(r),
        checkpoint_dir=tmp_path / "a",
    )
    monkeypatch.setattr(t, "run_copy_fits", lambda cfg, device: False)
    disk = []
    full = train(
        MODEL,
        DATA,
        WSD,
        branches=budgets,
        on_branch=lambda c, r, ck: disk.append(r),
        checkpoint_dir=tmp_path / "b",
    )
    assert disk[0].final_val_loss == mem[0].final_val_loss
    assert full.final_val_loss == train(MODEL, DATA, WSD).final_val_loss
    assert not (tmp_path / "b" / t.BRANCH_RUN_FILE).exists()  # the held copy is gone again


class _Killed(Exception):
    pass


def test_a_resumed_run_takes_no_branch_twice(tmp_path: Path):
    """Killed after its first branch (the checkpoint at that branch's start records it), the run
    resumes there, takes only the second branch, and ends as the uninterrupted run does."""
    budgets = [WSD.replace(steps=20), WSD.replace(steps=40)]
    ckpt = tmp_path / "ckpt"
    taken = []

    def kill_after_first(cfg, result, checkpoint):
        taken.append(cfg.steps)
        raise _Killed

    with pytest.raises(_Killed):
        train(MODEL, DATA, WSD, branches=budgets, on_branch=kill_after_first, checkpoint_dir=ckpt)
    state = load_checkpoint(ckpt)
    assert state["step"] == 16 and state["branches_done"] == [20]
    again = []
    full = train(
        MODEL,
        DATA,
        WSD,
        branches=budgets,
        on_branch=lambda c, r, ck: again.append((c.steps, r)),
        checkpoint_dir=ckpt,
        resume_from=ckpt,
    )
    assert taken == [20] and [s for s, _ in again] == [40]
    assert again[0][1].final_val_loss == train(MODEL, DATA, budgets[1]).final_val_loss
    assert full.final_val_loss == train(MODEL, DATA, WSD).final_val_loss


def test_branches_must_be_shorter_runs_of_the_same_wsd_run():
    for run, branch in (
        (WSD.replace(schedule="cosine"), WSD.replace(steps=20, schedule="cosine")),
        (WSD, WSD.replace(steps=20, lr=3e-3)),
        (WSD, WSD.replace(steps=80)),
    ):
        with pytest.raises(ValueError, match="cannot be taken from this run"):
            train(MODEL, DATA, run, branches=[branch])


def test_a_diverged_run_ends_its_branches_still_to_take_the_same_way():
    hot = WSD.replace(lr=50.0, grad_clip=0.0)
    got = []
    out = train(MODEL, DATA, hot, branches=[hot.replace(steps=40)], on_branch=lambda c, r, ck: got.append(r))
    assert out.status == "diverged"
    assert [r.status for r in got] == ["diverged"]


def one_run_spec(
    train: dict | None = None, budget: dict | None = None, grid: dict | None = None, **tables
) -> str:
    """Depths 1 and 2 of the tiny model, each one WSD run of 40 steps whose 10- and 20-step budgets
    are its cooldown branches; `train` (a warmup of 2 steps when None), `budget` and `grid` add to
    their tables, `tables` as in spec_toml."""
    return spec_toml(
        "onerun",
        train={
            "eval_batches": None,
            "warmup_steps": None,
            "schedule": "wsd",
            **({"warmup_steps": 2} if train is None else train),
        },
        grid={"depth": [1, 2], "width": [8], "steps": [10, 20, 40], **(grid or {})},
        budget={"from_one_run": True, **(budget or {})},
        resources={"cpus": 1},
        **tables,
    )


def _spec(tmp_path: Path, train: dict | None = None, budget: dict | None = None):
    from sweeps.plans.spec import load_spec

    return load_spec(write_spec(tmp_path, one_run_spec(train, budget), "onerun.toml"))


def test_a_one_run_plan_counts_each_run_once_and_each_branch_by_its_cooldown(tmp_path: Path):
    from depthwidth.accounting import train_flops_per_token
    from sweeps.plans.budget import resolve_model
    from sweeps.plans.plan import plan_rows, totals

    spec = _spec(tmp_path)
    rows = {r.trial_id: r for r in plan_rows(spec)}
    assert len(rows) == 6 and len(spec.branched_from) == 4  # two runs of 40 steps, four branches
    total = 0.0
    for t in spec.trials:
        per_step = train_flops_per_token(resolve_model(t.model, t.data)) * 4 * 16
        # cooldowns: round(0.2 x 10) = 2 steps, round(0.2 x 20) = 4 steps; the run: all 40
        steps = {10: 2, 20: 4, 40: 40}[t.train.steps]
        assert rows[t.trial_id].flops == pytest.approx(per_step * steps)
        assert rows[t.trial_id].budget_flops == pytest.approx(per_step * t.train.steps)
        branched_from = spec.branched_from.get(t.trial_id)
        if branched_from:
            assert rows[branched_from].steps == 40 and rows[branched_from].depth == t.model.depth
        total += per_step * steps
    t = totals(spec, list(rows.values()))
    assert t.flops == pytest.approx(total)
    assert t.separate_runs_flops == pytest.approx(sum(r.budget_flops for r in rows.values()))
    assert t.flops / t.separate_runs_flops == pytest.approx(46 / 70)


def test_a_warmup_fraction_is_taken_of_the_shortest_budget(tmp_path: Path):
    spec = _spec(tmp_path, train={}, budget={"warmup_fraction": 0.2})
    assert {t.train.warmup_steps for t in spec.trials} == {2}


@pytest.mark.parametrize(
    "train, says",
    [
        ({"warmup_steps": 2, "cooldown": "linear"}, None),
        ({"warmup_steps": 9}, "the warmup must end before the cooldown starts"),
    ],
)
def test_one_run_specs_checked_when_read(tmp_path: Path, train, says):
    from sweeps.plans.errors import SpecError

    if says is None:
        assert len(_spec(tmp_path, train).branched_from) == 4
        return
    with pytest.raises(SpecError, match=says):
        _spec(tmp_path, train)


def test_one_run_needs_the_wsd_schedule(tmp_path: Path):
    from sweeps.plans.errors import SpecError

    path = write_spec(tmp_path, one_run_spec(train={"warmup_steps": 2, "schedule": None}), "cos.toml")
    from sweeps.plans.spec import load_spec

    with pytest.raises(SpecError, match='cooldown branches need schedule = "wsd"'):
        load_spec(path)


def test_one_run_takes_no_halving(tmp_path: Path):
    from sweeps.plans.errors import SpecError
    from sweeps.plans.spec import load_spec

    text = one_run_spec(grid={"lr": [1e-3, 1e-2]}, halving={"axis": "lr"})
    path = write_spec(tmp_path, text, "halving.toml")
    with pytest.raises(SpecError, match="choose its learning rate from the full grid"):
        load_spec(path)


def test_the_schedule_is_part_of_a_trials_id():
    """A WSD run is another run than the cosine one; the new fields at their defaults leave a
    cosine trial's id as it was: the CPU study's spec still names every trial of its table."""
    import pandas as pd

    from sweeps.plans.spec import load_spec, trial_id_of

    cfg = TrainConfig(steps=100)
    assert trial_id_of(MODEL, DATA, cfg) != trial_id_of(MODEL, DATA, cfg.replace(schedule="wsd"))
    repo = Path(__file__).resolve().parent.parent
    if not (repo.parent / "shared" / "data" / "tinyshakespeare.txt").exists():
        pytest.skip("the study's data (../shared/data/tinyshakespeare.txt) is not here: docs/data.md")
    ids = {t.trial_id for t in load_spec(repo / "sweeps" / "threshold-cpu.toml").trials}
    table = pd.read_csv(repo / "docs" / "studies" / "data" / "threshold-cpu.csv", dtype={"trial_id": str})
    assert len(ids) == 864 and ids == set(table["trial_id"])
