"""The one typed config a trial crosses into Ray Tune with (sweeps/plans/trialconfig.py)."""

from __future__ import annotations

import ast
import pathlib
from dataclasses import fields

import hypothesis
import pytest
from hypothesis import settings
from hypothesis import strategies as st

from depthwidth.config import DataConfig, ModelConfig, TrainConfig
from sweeps.plans.halving import HalvingPlan
from sweeps.plans.spec import load_spec
from sweeps.plans.trialconfig import Branch, RayAsk, RunSettings, TrialConfig

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _config(**more) -> TrialConfig:
    model = ModelConfig(depth=2, width=32, heads=2, seq_len=16)
    train = TrainConfig(steps=90, lr=3e-3, schedule="wsd", seed=4)
    return TrialConfig(
        trial_id="abc",
        model=model,
        data=DataConfig(source="digits", path="data/x"),
        train=train,
        resources=RayAsk(cpu=1.0, memory=2.0**30),
        workers=2,
        flops_per_step=1.5e9,
        resume_uris=("file:///s/tune/a/checkpoint_000001",),
        branches=(Branch("def", train.replace(steps=30)),),
        run=RunSettings(
            cpus=2,
            workers=2,
            store="/s",
            experiment="e-1",
            cwd="/home/u",
            environ=(("DEPTHWIDTH_DATA", "/d"),),
        ),
        **more,
    )


def test_round_trip_is_exact_and_the_layout_is_the_one_tune_carried():
    tc = _config(halving=HalvingPlan("lr", 3, (10, 30), "g0"))
    d = tc.to_dict()
    assert TrialConfig.from_dict(d) == tc
    # the layout every stored Tune experiment holds (a resumed driver reads older ones)
    assert set(d) == {"trial", "run"}
    assert set(d["trial"]) == {
        "trial_id",
        "model",
        "data",
        "train",
        "resume_uris",
        "resources",
        "workers",
        "flops_per_step",
        "halving",
        "branches",
    }
    assert d["trial"]["branches"] == [{"trial_id": "def", "train": tc.branches[0].train.to_dict()}]
    assert d["trial"]["resources"] == {"CPU": 1.0, "memory": 2.0**30}
    assert d["trial"]["halving"] == {"axis": "lr", "eta": 3, "rungs": [10, 30], "group": "g0"}
    assert d["run"]["environ"] == [["DEPTHWIDTH_DATA", "/d"]]
    assert set(d["run"]) == {
        "cpus",
        "environ",
        "workers",
        "sharding",
        "max_failures",
        "store",
        "experiment",
        "cwd",
        "halving_board",
    }
    assert TrialConfig.id_of(d) == "abc"


def test_a_branch_row_is_its_budget_with_the_run_it_came_from():
    tc = _config()
    b = tc.branch("def")
    assert (b.trial_id, b.train.steps, b.branched_from, b.branches) == ("def", 30, "abc", ())
    assert b.model == tc.model and b.workers == 2
    import json

    from sweeps.running.record import config_columns

    row = config_columns(b)  # the columns its row records
    assert row["branched_from"] == "abc" and json.loads(row["train_config"])["steps"] == 30
    assert tc.branch_ids() == {30: "def"}
    with pytest.raises(StopIteration):
        tc.branch("nope")


def test_a_relative_data_path_means_the_folder_the_sweep_started_from():
    tc = _config()
    assert tc.data_for_run().path == "/home/u/data/x"
    assert tc.data.path == "data/x"  # the stored config (and so the id) keeps it as written


def test_a_spec_trial_keeps_its_id_and_configs():
    spec = load_spec(str(ROOT / "sweeps" / "smoke.toml"))
    t = spec.trials[0]
    tc = TrialConfig.of(t)
    assert tc.trial_id == t.trial_id and tc.configs_dict() == t.configs_dict()


def test_no_module_reads_the_tune_config_by_key_but_its_own():
    """Only sweeps/plans/trialconfig.py subscripts a Tune config's "trial" or "run" part."""
    offenders = []
    for path in sorted((ROOT / "sweeps").rglob("*.py")):
        if path.name == "trialconfig.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and node.slice.value in ("trial", "run")
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


def test_a_trial_outcome_round_trips_as_a_plain_dict_through_a_tune_report():
    """What a trial returns crosses back as TrialOutcome.to_dict(): plain values, no JSON text."""
    import json as _json

    from depthwidth.result import RunResult
    from sweeps.plans.trialoutcome import OUTCOME_KEY, TrialOutcome

    res = RunResult(
        status="stopped",
        final_train_loss=2.0,
        final_val_loss=2.1,
        steps=30,
        tokens=960,
        flops=1e6,
        wall_s=1.5,
        n_params=100,
        n_params_total=150,
        flops_per_token=1e3,
        device="cpu",
        torch_version="2",
        depthwidth_version="0.1.0",
        unigram_entropy=3.0,
        vocab_size=32,
        curve=[{"step": 30, "val_loss": 2.1}],
        metrics={"copy_gain": 0.1, "grad_norms": [1.0, 0.5]},
    )
    out = TrialOutcome("abc", res, "node", "127.0.0.1", 10, "a note", workers=2, rung_losses=(2.5, 2.2))
    report = out.report(step=30, progress=1.0)
    assert report["step"] == 30 and isinstance(report[OUTCOME_KEY], dict)
    assert not any(isinstance(v, str) and v.startswith("{") for v in report[OUTCOME_KEY].values())
    assert TrialOutcome.from_report(report) == out
    assert TrialOutcome.from_report(_json.loads(_json.dumps(report))) == out  # plain values only
    assert TrialOutcome.from_report({"step": 10, "val_loss": 2.0}) is None  # an evaluation


RUN_SETTINGS = st.builds(
    RunSettings,
    cpus=st.floats(0.0, 64.0),
    workers=st.integers(1, 64),
    sharding=st.sampled_from(["ddp", "fsdp"]),
    max_failures=st.integers(0, 10),
    store=st.text(max_size=20),
    experiment=st.text(max_size=20),
    cwd=st.text(max_size=20),
    halving_board=st.none() | st.text(max_size=20),
    environ=st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=3).map(tuple),
)


@hypothesis.given(RUN_SETTINGS, st.sets(st.sampled_from([f.name for f in fields(RunSettings)])))
@settings(max_examples=200, deadline=None)
def test_a_field_the_config_lacks_takes_the_one_default_the_dataclass_states(run, dropped):
    """A stored Tune config from before a field existed lacks it: the reader gives what the
    dataclass states, the one place each default is written."""
    d = {k: v for k, v in run.to_dict().items() if k not in dropped}
    back = RunSettings.from_dict(d)
    for f in fields(RunSettings):
        assert getattr(back, f.name) == getattr(RunSettings() if f.name in dropped else run, f.name), f.name


@hypothesis.given(st.floats(0.0, 1e12), st.floats(0.0, 8.0), st.floats(0.0, 1e15))
@settings(max_examples=200, deadline=None)
def test_what_a_worker_asks_of_ray_round_trips_through_rays_names(cpu, gpu, memory):
    ask = RayAsk(cpu, gpu, memory)
    d = ask.to_dict()
    assert RayAsk.from_dict(d) == ask
    assert set(d) == {"CPU"} | ({"GPU"} if gpu else set()) | ({"memory"} if memory else set())
