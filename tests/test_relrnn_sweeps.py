"""The ready-made sweeps of the recurrence-vs-attention study (Kerg et al. 2020, docs/science.md §6):
relrnn-copy.toml expands to the intended grid (models × T × ν × ρ × seeds, the authors' lr
rule), relrnn-smoke.toml stays CPU-sized, and a ν longer than the delay fails at spec load.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sweeps.plans.plan import plan_rows, totals
from sweeps.plans.spec import SpecError, load_spec, parse_spec

SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"


def test_relrnn_copy_grid():
    spec = load_spec(SWEEPS / "relrnn-copy.toml")
    trials = spec.trials
    by_family = Counter(t.model.family for t in trials)
    # screened: 2 tasks × 4 T × 3 ν × 3 ρ × 3 seeds; the others: 2 tasks × 4 T × 3 seeds
    assert by_family == {"relrnn": 216, "rellstm": 216, "lstm": 24, "rnn": 24, "memrnn": 24}
    for t in trials:
        if t.model.family not in ("relrnn", "rellstm"):
            assert (t.model.nu, t.model.rho) == (10, 15)
        assert (t.train.lr < 5e-4) == (t.data.task_length == 1000)
        assert (t.model.width, t.model.depth, t.train.batch_size) == (128, 1, 10)
        assert t.train.steps == 20000 and t.train.grad_clip == 1.0
    assert {t.data.task_length for t in trials} == {100, 200, 500, 1000}
    assert {t.data.source for t in trials} == {"copy", "denoise"}
    assert {(t.model.nu, t.model.rho) for t in trials if t.model.family == "relrnn"} == {
        (nu, rho) for nu in (5, 10, 15) for rho in (3, 15, 30)
    }
    assert spec.resources.gpus == 0.25


def test_relrnn_smoke_is_cpu_sized():
    """relrnn and lstm on copy at T = 10 and 30 with the same budget, three seeds at T = 30 where
    the claim is decided (reported with their spread, docs/bench/relrnn.md), one memrnn point
    at T = 30; every trial on one fixed thread, so it repeats bit for bit on one machine."""
    spec = load_spec(SWEEPS / "relrnn-smoke.toml")
    assert len(spec.trials) == 9 and spec.resources.gpus == 0
    points = sorted((t.model.family, t.data.task_length, t.train.seed) for t in spec.trials)
    assert points == sorted(
        [("relrnn", 30, s) for s in (0, 1, 2)]
        + [("lstm", 30, s) for s in (0, 1, 2)]
        + [("relrnn", 10, 0), ("lstm", 10, 0), ("memrnn", 30, 0)]
    )
    assert {t.train.threads for t in spec.trials} == {1}
    budgets = {
        (
            t.train.steps,
            t.train.batch_size,
            t.train.lr,
            t.train.warmup_steps,
            t.train.min_lr_ratio,
            t.train.beta2,
            t.model.width,
        )
        for t in spec.trials
    }
    assert budgets == {(2000, 128, 2e-2, 50, 0.1, 0.99, 32)}  # one budget for every model
    # ρ = 30: with 15 the screening evicted symbols before their answer on 2 of 5 seeds
    assert {(t.model.nu, t.model.rho) for t in spec.trials if t.model.family == "relrnn"} == {(10, 30)}
    rows = plan_rows(spec)
    assert totals(spec, rows).hours < 0.1 and not totals(spec, rows).on_gpus


def test_nu_longer_than_the_delay_fails_at_spec_load():
    text = (SWEEPS / "relrnn-smoke.toml").read_text().replace("nu = 10", "nu = 50")
    with pytest.raises(SpecError, match=r"ModelConfig\.nu = 50 is invalid"):
        parse_spec(text, "bad.toml")
