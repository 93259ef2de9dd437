"""`depthwidth design`: the planted generator, the power analysis through analyze's own path, the
reasons it gives for low power, bad input, and `--propose` writing a spec that `sweep plan`
accepts and `design` rates as claimed. Small specs and few replicates keep it cheap."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import cli, spec_toml, write_spec

from analysis.power import design as dz

# the tiny CompleteP plan `design` rates: every shape below 3 log_3 d, three learning rates, two
# seeds, 20 tokens per parameter
DESIGN = {
    "where": "depth <= 3 * log3(width)",
    "model": {
        "family": "transformer",
        "heads": 2,
        "seq_len": 32,
        "parametrization": "completep",
        "base_width": 16,
        "base_depth": 2,
    },
    "data": {"source": "pcfg"},
    "train": {"batch_size": 8},
    "budget": {"tokens_per_param": 20, "min_steps": 50},
    "storage": {"path": "results/tiny"},
}


def design_spec(depths=(1, 2, 3, 4, 6), widths=(16, 32, 64), **tables) -> str:
    """DESIGN's plan over `depths` x `widths`, `tables` laid over it as in spec_toml."""
    grid = {"depth": list(depths), "width": list(widths), "lr": [1e-3, 3e-3, 1e-2], "seed": [0, 1]}
    return spec_toml("tiny", base=DESIGN, grid=grid, **tables)


def _spec(tmp_path: Path, depths=(1, 2, 3, 4, 6), widths=(16, 32, 64), name="tiny.toml") -> Path:
    return write_spec(tmp_path, design_spec(depths, widths), name)


def _trials(depths, widths, seeds=(0, 1)):
    rows = [(L, w, s) for L in depths for w in widths for s in seeds]
    t = pd.DataFrame(rows, columns=["depth", "width", "seed"])
    return t.assign(
        n_params=12.0 * t["depth"] * t["width"] ** 2,
        tokens=20 * 12.0 * t["depth"] * t["width"] ** 2,
        trial_id=[f"t{i}" for i in range(len(t))],
    )


def test_planted_losses_follow_the_law_and_the_noise():
    """Clean losses: the two-regime law plus the data term; the null depends on N alone; the
    seed noise has the requested relative spread; the lr penalty is zero at the optimum."""
    t = _trials([1, 2, 3, 4, 6, 8], [16, 32, 64, 128])
    m = dz.PlantModel(noise=0.03)
    clean = dz.clean_losses(t, 3.0, m)
    want = m.E + dz.kappa_term(t["depth"], t["width"], 3.0, m) + m.B_D * t["tokens"] ** -m.alpha_D
    assert np.allclose(clean, want)
    null = dz.null_law(t, m)
    flat = dz.clean_losses(t.assign(tokens=np.nan), None, null)
    n = t["n_params"].to_numpy()
    assert np.allclose(flat, null.E + null.A_N * n**-null.alpha_N) and null.alpha_N > 0
    big = pd.concat([t] * 200, ignore_index=True)
    noisy = dz.plant_losses(big, 3.0, m, np.random.default_rng(0))
    sd = np.std(np.log(noisy / dz.clean_losses(big, 3.0, m)))
    assert abs(sd - 0.03) < 0.002
    lr = dz.replace(m, lr0=1e-3, lr_depth_exp=0.0, lr_width_exp=0.0)
    at = dz.clean_losses(t.assign(lr=1e-3), 3.0, lr)
    off = dz.clean_losses(t.assign(lr=1e-2), 3.0, lr)
    assert np.allclose(at, clean) and np.allclose(off / at, np.exp(lr.sharpness))


def test_a_pilot_gives_back_the_noise_scale_and_lr_curvature_planted_in_it():
    rows = [
        (L, w, lr, s)
        for L in [1, 2, 3, 4, 6]
        for w in [16, 32, 64]
        for lr in [1e-3, 3e-3, 1e-2]
        for s in range(4)
    ]
    t = pd.DataFrame(rows, columns=["depth", "width", "lr", "seed"])
    t = t.assign(n_params=12.0 * t["depth"] * t["width"] ** 2, tokens=1e6)
    truth = dz.PlantModel(E=3.0, A=40.0, B_D=821.4, noise=0.03, lr0=3e-3, lr_depth_exp=0.0, sharpness=0.3)
    pilot = dz.planted_table(t, 3.0, truth, np.random.default_rng(1))
    m, found = dz.model_from_pilot(pilot, dz.PlantModel())
    assert abs(m.noise / 0.03 - 1) < 0.15 and abs(m.sharpness / 0.3 - 1) < 0.15
    assert abs(m.lr0 / 3e-3 - 1) < 0.1 and abs(found["loss_scale"] / 2 - 1) < 0.15
    with pytest.raises(ValueError, match="2 or more seeds"):
        dz.model_from_pilot(pilot[pilot["seed"] == 0], dz.PlantModel())


def test_shapes_on_one_side_of_the_threshold_are_named():
    above = dz.shape_reasons(_trials([8, 10, 12], [16, 32, 64]), 3.0)
    assert "no shape lies below L_th" in above[0]
    below = dz.shape_reasons(_trials([1, 2, 3], [256, 512, 1024]), 3.0)
    assert below[0].startswith("no shape lies above L_th") and "depths ≥ 7" in below[0]
    assert dz.shape_reasons(_trials([1, 2, 3, 4, 6], [16, 32, 64]), 3.0) == []


def test_rates_and_the_minimum_detectable_effect():
    r = dz.rate(50, 100)
    assert r["rate"] == 0.5 and abs(r["se"] - 0.05) < 1e-12 and r["ci"][0] < 0.5 < r["ci"][1]
    mde = dz.min_detectable({2.2: 0.4, 3.0: 1.0, 4.5: 0.6})
    assert 2.2 < mde["low"] < 3.0 < mde["high"] < 4.5 and not mde["low_open"]
    assert dz.min_detectable({2.2: 0.1, 3.0: 0.5}) is None


@pytest.mark.slow
def test_design_json_agrees_with_analyze_on_the_same_planted_sweeps(tmp_path):
    """Each replicate of `design` is the sweep the generator plants; `analyze` on that table (as a
    CSV, in a subprocess) reaches the same claim and interval, so design's power is analyze's."""
    spec = _spec(tmp_path)
    out = tmp_path / "out"
    args = ["--effects", 3, "--replicates", 2, "--bootstrap", 20, "--jobs", 1, "--out", out]
    res = cli("design", spec, "--json", *args)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    for key in (
        "power",
        "false_claim",
        "median_interval_width",
        "min_detectable_effect",
        "replicates",
        "noise",
        "cost",
    ):
        assert key in r
    assert set(r["power"]) == {"3.0"} and r["replicates"] == {"3.0": 2, "null": 2}
    assert r["noise"]["source"] == "assumed" and r["cost"]["flops"] > 0
    assert (out / "power.png").stat().st_size > 0
    outcomes = pd.read_csv(out / "outcomes.csv", keep_default_na=False)
    from sweeps.designing.design_plan import default_model, trials_frame
    from sweeps.plans.spec import load_spec

    s = load_spec(spec)
    trials, _ = trials_frame(s)
    model = dz.null_law(trials, default_model(s, trials, None))
    for rep in (0, 1):
        table = dz.planted_table(trials, 3.0, model, np.random.default_rng([0, 3000, rep]))
        csv = tmp_path / f"rep{rep}.csv"
        table.to_csv(csv, index=False)
        a = cli("analyze", csv, "--bootstrap", "20", "--seed", rep, "--out", tmp_path / f"a{rep}")
        assert a.returncode == 0, a.stderr
        thr = json.loads((tmp_path / f"a{rep}" / "report.json").read_text())["threshold"]
        row = outcomes[(outcomes["effect"] == "3.0") & (outcomes["replicate"] == rep)].iloc[0]
        assert str(row["claimed"]) == str(bool(thr["claimed"]))
        if thr.get("base_ci"):
            assert float(row["lo"]) == pytest.approx(thr["base_ci"][0], rel=1e-9)
            assert float(row["hi"]) == pytest.approx(thr["base_ci"][1], rel=1e-9)

    # a store that holds the design's result gets the plan's power quoted in its report
    store = tmp_path / "store"
    (store / "design").mkdir(parents=True)
    table.to_parquet(store / "runs.parquet", index=False)
    (store / "design" / "design.json").write_text((out / "design.json").read_text())
    a = cli("analyze", store, "--bootstrap", "20", "--out", tmp_path / "quoted")
    assert a.returncode == 0, a.stderr
    quoted = json.loads((tmp_path / "quoted" / "report.json").read_text())["design_power"]
    assert quoted["power_by_effect"] == r["power"]
    md = (tmp_path / "quoted" / "report.md").read_text()
    assert f"{r['power']['3.0']:.2f}" in md and "at b = 3" in md and "rated this plan before it ran" in md


def test_plan_on_one_side_of_the_threshold_reports_low_power_with_the_reason(tmp_path):
    spec = _spec(tmp_path, depths=[1, 2, 3], widths=[256, 512, 1024])
    spec.write_text(spec.read_text().replace('where = "depth <= 3 * log3(width)"\n', ""))
    res = cli("design", spec, "--effects", "3", "--replicates", "2", "--bootstrap", "10", "--jobs", "1")
    assert res.returncode == 0, res.stderr
    assert "power is below 80% at b = 3" in res.stdout
    assert "no shape lies above L_th = log_3(width): widths ≤ 1024 need depths ≥ 7" in res.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["--noise", "2"], "--noise = 2.0 is invalid"),
        (["--effects", "1.0,3"], "--effects = '1.0,3' is invalid"),
        (["--budget", "10gpu-h"], "--budget is invalid without --propose"),
        (["--propose", "--budget", "ten"], "--budget = 'ten' is invalid"),
    ],
)
def test_bad_arguments_exit_2_with_one_sentence(tmp_path, args, words):
    res = cli("design", _spec(tmp_path), *args)
    assert res.returncode == 2 and words in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_a_plan_that_cannot_be_analysed_exits_2(tmp_path):
    res = cli("design", _spec(tmp_path, depths=[2]))
    assert res.returncode == 2
    assert "needs at least 3 depths and 2 widths" in res.stderr
    assert cli("design", tmp_path / "missing.toml").returncode == 2


@pytest.mark.slow
def test_propose_writes_a_spec_that_plan_accepts_and_design_rates_as_claimed(tmp_path):
    spec = _spec(tmp_path)
    out = tmp_path / "prop"
    args = ["--propose", "--budget", "2cpu-h", "--json", "--screen", 1, "--replicates", 2, "--bootstrap", 10]
    res = cli("design", spec, *args, "--candidates", 2, "--finalists", 1, "--jobs", 1, "--out", out)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    table = pd.read_csv(out / "candidates.csv")
    assert len(table) == r["n_candidates"] > 10
    assert {"flops", "power", "width", "within_budget"} <= set(table.columns)
    assert r["budget_flops"] >= r["cost"]["flops"]
    proposed = Path(r["proposed"])
    plan = cli("sweep", "plan", proposed)
    assert plan.returncode == 0, plan.stderr
    assert (
        plan.stdout.strip()
        .splitlines()[-1]
        .startswith(f"what this plan can detect before it runs: depthwidth design {proposed}")
    )
    again = cli(
        "design",
        proposed,
        "--json",
        "--effects",
        "3",
        "--replicates",
        "2",
        "--bootstrap",
        "10",
        "--jobs",
        "1",
    )
    assert again.returncode == 0, again.stderr
    a = json.loads(again.stdout)
    assert a["power"]["3.0"] == r["power"]
    assert a["false_claim"]["rate"] == r["false_claim"]


@pytest.mark.slow
def test_propose_keeps_a_relative_data_path_and_a_halving_valid(tmp_path):
    """A spec naming its text by a path relative to its own folder, with a successive halving:
    every candidate reads the same file, the one-lr candidates drop the halving, and the
    proposal written elsewhere names the file relative to its own folder."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "text.txt").write_text("to be or not to be, that is the question. " * 400)
    text = design_spec(
        data={"source": "text", "path": "../data/text.txt"},
        train={"steps": 60, "eval_every": 10},
        budget=None,
        halving={"axis": "lr", "eta": 3},
    )
    spec = write_spec(tmp_path / "specs", text, "text.toml")
    out = tmp_path / "elsewhere" / "prop"
    args = ["--propose", "--budget", "0.015cpu-h", "--json", "--screen", "1", "--replicates", "2"]
    args += ["--bootstrap", "10", "--candidates", "2", "--finalists", "1", "--jobs", "1", "--out", out]
    res = cli("design", spec, *args)
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(out / "candidates.csv")
    assert not table["stage"].eq("rejected").any(), table.loc[table["stage"].eq("rejected"), "note"].tolist()
    proposed = Path(json.loads(res.stdout)["proposed"])
    import tomllib

    doc = tomllib.loads(proposed.read_text())
    assert (proposed.parent / doc["data"]["path"]).resolve() == (tmp_path / "data" / "text.txt").resolve()
    plan = cli("sweep", "plan", proposed, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr


def test_propose_tries_three_shared_token_budgets():
    """The search's third token rule: three budgets a factor 3 apart, the same for every shape, so
    the data term can be told from the floor and D does not ride on N. A spec with a budget tied
    to N gets budgets ending at its mean tokens per trial; a steps axis of two values is extended
    downwards, as the CPU study's plan was by hand; a plan with three already gets no such rule."""
    import tomllib

    from sweeps.designing.design_search import candidate_docs, to_toml
    from sweeps.plans.plan import plan_rows
    from sweeps.plans.spec import parse_spec

    doc = tomllib.loads(design_spec([1, 2, 4], [16, 32]))
    mean_tokens = 8 * 32 * 600.0  # batch 8 x seq 32 tokens per step
    three = [(d, w) for d, w in candidate_docs(doc, mean_tokens) if str(w["tokens"]).startswith("3 budgets")]
    assert three and {w["tokens"] for _, w in three} == {"3 budgets: 67/200/600 steps"}
    d, _ = three[0]
    assert "budget" not in d and d["grid"]["steps"] == [67, 200, 600]
    spec = parse_spec(to_toml(d), "three.toml")
    rows = pd.DataFrame(plan_rows(spec))
    # every shape trains at the same three token budgets: D does not move with N
    per_shape = rows.groupby(["depth", "width"])["tokens"].apply(lambda t: tuple(sorted(set(t))))
    assert per_shape.nunique() == 1 and per_shape.iloc[0] == (67 * 256, 200 * 256, 600 * 256)
    assert min(t.train.steps // t.train.eval_every for t in spec.trials) >= 2  # evaluations to fit

    warm = dict(doc, budget=dict(doc["budget"], warmup_fraction=0.1))  # kept, of the shortest run
    (d_warm,) = [d for d, w in candidate_docs(warm, mean_tokens)[1:] if str(w["tokens"]).startswith("3")][:1]
    assert d_warm["train"]["warmup_steps"] == 7

    two = dict(doc, grid=dict(doc["grid"], steps=[300, 900]))
    two.pop("budget")
    labels = {w["tokens"] for _, w in candidate_docs(two, 1e5)}
    assert "3 budgets: 100/300/900 steps" in labels
    done = dict(two, grid=dict(two["grid"], steps=[100, 300, 900]))
    assert all(not str(w["tokens"]).startswith("3 budgets") for _, w in candidate_docs(done, 1e5))


def test_propose_tries_five_budgets_from_one_run():
    """The search's fourth token rule: five budgets a factor 2 apart up to the plan's longest,
    each a cooldown branch of one WSD run per shape (sweeps/plans/branches.py). It is costed as it runs:
    the run once and each branch by its cooldown, less than the three separate budgets."""
    import tomllib

    from sweeps.designing.design_search import candidate_docs, to_toml
    from sweeps.plans.plan import plan_rows, totals
    from sweeps.plans.spec import parse_spec

    doc = tomllib.loads(design_spec([1, 2, 4], [16, 32]))
    two = dict(doc, grid=dict(doc["grid"], steps=[300, 900]))
    two.pop("budget")
    found = {w["tokens"]: d for d, w in candidate_docs(two, 1e5)}
    d = found["5 budgets from one run: 56/112/225/450/900 steps"]
    assert d["budget"] == {"from_one_run": True} and d["train"]["schedule"] == "wsd" and "halving" not in d
    one = parse_spec(to_toml(d), "one.toml")
    three = parse_spec(to_toml(found["3 budgets: 100/300/900 steps"]), "three.toml")
    assert len(one.branched_from) == 4 * len(one.trials) // 5  # four branches of each run
    t1, t3 = totals(one, plan_rows(one)), totals(three, plan_rows(three))
    # per shape and seed: 900 + 0.2 x (56 + 112 + 225 + 450) = 1068.6 steps against 1300
    steps_one = 900 + sum(round(0.2 * s) for s in (56, 112, 225, 450))
    assert t1.flops / t3.flops == pytest.approx(steps_one / 1300, rel=1e-6)
    already = dict(d)
    assert all(not str(w["tokens"]).startswith("5 budgets") for _, w in candidate_docs(already, 1e5))
    # every candidate but the plan as written trains on WSD (docs/bench/wsd.md), unless the plan
    # names its schedule
    cands = candidate_docs(two, 1e5)
    assert "schedule" not in cands[0][0].get("train", {})
    assert all(d["train"]["schedule"] == "wsd" and w["wsd"] for d, w in cands[1:])
    named = dict(two, train=dict(two["train"], schedule="cosine"))
    assert all(
        d["train"]["schedule"] == "cosine" for d, _ in candidate_docs(named, 1e5)[1:] if "budget" not in d
    )
