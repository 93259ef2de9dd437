"""`design` sees a drifting best learning rate (analysis/power/design.py): the drift a pilot
measures is recovered from planted pilot runs with its standard error, a one-rate plan under a
known planted drift gives biased estimates of b while the same plan without drift does not, and
the bias is reported beside power and interval width, through the real CLI."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from helpers import cli, spec_toml, write_spec

from analysis.power import design as dz

DEPTHS, WIDTHS = (1, 2, 3, 4, 6, 8), (16, 32, 64, 128)


def _pilot(width_exp: float, depth_exp: float, noise: float = 0.004) -> pd.DataFrame:
    """Runs of a pilot: 3 depths x 3 widths x 5 rates x 3 seeds, losses from the planted law
    with lr* = 3e-3 (width/64)^width_exp (depth/2)^depth_exp."""
    model = dz.PlantModel(
        lr0=3e-3, base_width=64, base_depth=2, lr_width_exp=width_exp, lr_depth_exp=depth_exp
    )
    rows = [
        dict(depth=L, width=w, lr=lr, seed=s, n_params=12 * L * w * w, tokens=2e5)
        for L, w, lr, s in itertools.product((1, 2, 4), (16, 32, 64), np.geomspace(5e-4, 2e-2, 5), range(3))
    ]
    runs = pd.DataFrame(rows)
    rng = np.random.default_rng(1)
    return runs.assign(loss=dz.clean_losses(runs, 3.0, model) * np.exp(rng.normal(0, noise, len(runs))))


def test_the_pilots_drift_is_recovered_with_its_error():
    model, found = dz.model_from_pilot(_pilot(0.3, -0.2), dz.PlantModel(base_width=64, base_depth=2))
    d = found["lr_drift"]
    assert d["measured"] == ["width", "depth"] and len(found["best_lr"]) == 9
    assert abs(model.lr_width_exp - 0.3) < 3 * model.lr_width_exp_se + 0.02
    assert abs(model.lr_depth_exp + 0.2) < 3 * model.lr_depth_exp_se + 0.02
    assert 0 < model.lr_width_exp_se < 0.1 and 0 < model.lr_depth_exp_se < 0.1
    assert model.lr0 == pytest.approx(3e-3, rel=0.1)
    # no drift planted, none found (the measured exponents straddle 0)
    flat, _ = dz.model_from_pilot(_pilot(0.0, 0.0), dz.PlantModel(base_width=64, base_depth=2))
    assert abs(flat.lr_width_exp) < 3 * flat.lr_width_exp_se + 0.02


def _one_rate_plan() -> pd.DataFrame:
    rows = [
        dict(trial_id=f"t{i}", depth=L, width=w, n_params=12 * L * w * w, tokens=9.2e5, seed=s, lr=3.2e-3)
        for i, (L, w, s) in enumerate(itertools.product(DEPTHS, WIDTHS, range(2)))
    ]
    return pd.DataFrame(rows)


def test_a_one_rate_plan_under_a_known_drift_is_biased_and_without_it_is_not():
    """Noise nearly off: one replicate is the plan's own bias. lr* moves by a factor 2.8 from
    (1, 16) to (8, 128), as measured on the CPU study's one-rate plan; its one rate then costs the
    shapes far from it more, and b moves, while the same plan with the rate at every optimum
    recovers the planted b."""
    trials = _one_rate_plan()
    base = dz.PlantModel(
        noise=1e-4, lr0=3.2e-3, base_width=64, base_depth=2, lr_width_exp=0.0, lr_depth_exp=0.0
    )
    # 2.8 = (128/16)^a (8/1)^g with a = g: a = g = log(2.8) / log(64)
    k = math.log(2.8) / math.log(64)
    drifting = dz.PlantModel(**{**base.to_dict(), "lr_width_exp": k, "lr_depth_exp": k})
    spread = dz.lr_optimum(8, 128, drifting) / dz.lr_optimum(1, 16, drifting)
    assert spread == pytest.approx(2.8)
    plain = dz.simulate(trials, [3.0], base, 1, bootstrap=20, jobs=1, null=False)
    drift = dz.simulate(trials, [3.0], drifting, 1, bootstrap=20, jobs=1, null=False)
    b_plain, b_drift = float(plain["base"].iloc[0]), float(drift["base"].iloc[0])
    assert abs(b_plain - 3.0) < 0.02
    assert abs(b_drift - 3.0) > 3 * abs(b_plain - 3.0) and abs(b_drift - 3.0) > 0.02
    s = dz.summarize(drift)
    assert s["bias"]["3.0"]["n"] == 1 and s["bias"]["3.0"]["mean"] == pytest.approx(b_drift - 3.0)


def test_a_stated_drift_is_drawn_per_replicate_and_the_noise_draws_stay_the_same():
    m = dz.PlantModel(
        noise=0.02, lr0=3.2e-3, base_width=64, base_depth=2, lr_width_exp=0.2, lr_width_exp_se=0.1
    )
    rng = np.random.default_rng(5)
    drawn = [dz.drawn_drift(m, rng).lr_width_exp for _ in range(400)]
    assert np.mean(drawn) == pytest.approx(0.2, abs=0.02) and np.std(drawn) == pytest.approx(0.1, abs=0.015)
    assert dz.drawn_drift(dz.PlantModel(), rng) == dz.PlantModel()  # no error: the model as it is
    # where the rate does not enter the losses, drawing a drift leaves every replicate as it was
    trials = _one_rate_plan().drop(columns="lr")
    still = dz.PlantModel(noise=0.02, lr_width_exp_se=0.3, lr_depth_exp_se=0.3)
    a = dz.simulate(trials, [3.0], dz.PlantModel(noise=0.02), 2, bootstrap=5, jobs=1, null=False)
    b = dz.simulate(trials, [3.0], still, 2, bootstrap=5, jobs=1, null=False)
    assert a["base"].tolist() == b["base"].tolist() and b["lr_width_exp"].nunique() == 2


# a CompleteP grid trained at one learning rate
SPEC = spec_toml(
    "onerate",
    model={"parametrization": "completep", "base_width": 32, "base_depth": 2},
    data={"vocab_size": 32},
    train={"lr": 3e-3, "eval_every": None, "eval_batches": None, "warmup_steps": None},
    grid={"depth": [1, 2, 3, 4], "width": [16, 32, 64], "seed": [0, 1]},
    budget={"steps": 50},
)


def test_design_states_the_drift_it_plants_and_the_bias_of_b(tmp_path):
    spec = write_spec(tmp_path, SPEC, "onerate.toml")
    args = ["--effects", 3, "--replicates", 2, "--bootstrap", 5, "--jobs", 1, "--quiet"]
    r = cli("design", spec, "--lr-drift", "0.3,0.1,0.05", *args)
    assert r.returncode == 0, r.stderr
    assert "lr* ∝ width^0.30 ± 0.05 · depth^0.10 ± 0.05 (stated by --lr-drift)" in r.stdout
    assert "which its one rate does not follow" in r.stdout and "bias of b (claimed)" in r.stdout
    r = cli("design", spec, "--lr-drift", "abc")
    assert r.returncode == 2 and "--lr-drift = 'abc' is invalid" in r.stderr and "Traceback" not in r.stderr
