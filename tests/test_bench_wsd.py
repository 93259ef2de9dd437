"""bench/wsd.py's comparisons on planted tables: each schedule at its own best rate, the median
difference and its interval, and the WSD rung's choice against the full grid."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "wsd.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_wsd", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_schedule_is_compared_at_its_own_best_rate():
    b = _bench()
    cos = b.planted(0.0, best_lr=1e-2, seed=0)
    wsd = b.planted(-0.02, best_lr=3e-3, seed=1)  # better by 0.02 nats, at a lower rate
    cells, s = b.branch_vs_cosine(wsd, cos)
    assert len(cells) == 2 * 3 * 3
    assert set(cells["lr_wsd"]) == {3e-3} and set(cells["lr_cosine"]) == {1e-2}
    assert s["lr_agree"] == 0.0 and s["lr_wsd_lower"] == 1.0
    assert s["median"] == pytest.approx(-0.02, abs=0.004) and s["lo"] < -0.02 < s["hi"] + 0.004
    assert s["seed_sd"] == pytest.approx(0.002, rel=0.6)


def test_the_rung_is_read_off_the_complete_short_runs():
    b = _bench()
    study = b.planted(0.0, best_lr=3e-3, seed=0, noise=0.0)
    # at 100 steps the best rate is 1e-2, at 300 and 900 it is 3e-3: the rung for 300 (read at
    # 100) misses, the rung for 900 (read at 300) keeps the best
    study.loc[(study["steps"] == 100) & (study["lr"] == 1e-2), "final_val_loss"] -= 0.5
    cmp = b.rung_vs_grid(study)
    assert len(cmp) == 2 * 3 * 2  # shapes x seeds x the budgets 300 and 900
    assert not cmp.loc[cmp["steps"] == 300, "agree"].any() and cmp.loc[cmp["steps"] == 900, "agree"].all()
    miss = cmp[cmp["steps"] == 300]
    assert (miss["chosen_lr"] == 1e-2).all() and miss["excess"].to_numpy() == pytest.approx(
        0.05 * np.log(1e-2 / 3e-3) ** 2
    )


def test_the_study_is_paired_with_cosine_run_for_run():
    """Each (shape, seed, budget) pairs WSD's best complete run with cosine's chosen one: a planted
    shift of -0.02 nats comes back, and the rates each schedule chose are counted."""
    b = _bench()
    wsd, cos = b.planted(-0.02, best_lr=3e-3, seed=1), b.planted(0.0, best_lr=1e-2, seed=0)
    pairs, s = b.run_for_run(wsd, cos)
    assert s["n"] == len(pairs) == 2 * 3 * 3  # 2 shapes x 3 seeds x 3 budgets
    assert s["median"] == pytest.approx(-0.02, abs=0.004) and s["lo"] <= s["median"] <= s["hi"]
    assert (pairs["lr"] == 3e-3).all() and (pairs["lr_cosine"] == 1e-2).all()
    assert s["same_rate"] == 0.0 and s["wsd_lower"] == 1.0
