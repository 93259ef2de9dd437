"""What each trial asks of Ray (sweeps/plans/packing.py, sweeps/plans/plan.py): GPU shares from the memory
estimate with head-room, quantised so Ray can pack them, shown by `sweep plan --json` and checked
against depthwidth.accounting.memory_estimate recomputed here; memory per worker under DDP and
FSDP; host memory asks for CPU trials; the GPU memory a cluster's nodes report; and the rule for
torch's thread count. No Ray is started."""

from __future__ import annotations

import json
import math

import pytest
from helpers import spec_toml, write_spec

from depthwidth.accounting import count_params, memory_estimate
from depthwidth.config import DataConfig, ModelConfig
from sweeps import cli
from sweeps.plans.packing import (
    GPU_CONTEXT_GB,
    SAFETY,
    SHARES,
    Node,
    cpu_threads,
    gpu_share,
    host_memory,
    node_gpu_memory_gb,
    worker_memory,
    workers_to_fit,
)
from sweeps.plans.spec import load_spec, resolve_model


def pack_spec(depths=(2, 8), widths=(128, 512, 1024, 2048)) -> str:
    """Shapes from a few MB to GBs of GPU memory, each trial's GPU share from its estimate."""
    return spec_toml(
        "pack",
        model={"heads": 4, "seq_len": 256},
        data={"vocab_size": 256},
        train={"batch_size": 32, "eval_every": None, "eval_batches": None, "warmup_steps": None},
        grid={"depth": list(depths), "width": list(widths)},
        budget={"steps": 10},
        resources={"gpus": "auto", "gpu_memory_gb": 16},
    )


def test_gpu_shares_round_up_to_packable_sizes():
    gb = 1e9
    assert gpu_share(0, 80) == 0.125  # the CUDA context alone still takes a slot
    # on an 80 GB GPU the shares hold 10, 20, 40 and 80 GB: a need of x asks 1.25x + 1 GB
    assert gpu_share((10 - GPU_CONTEXT_GB) / SAFETY * gb, 80) == 0.125
    assert gpu_share((10 - GPU_CONTEXT_GB) / SAFETY * gb * 1.01, 80) == 0.25
    assert gpu_share(30 * gb, 80) == 0.5
    assert gpu_share(63 * gb, 80) == 1.0
    assert gpu_share(64 * gb, 80) is None  # 81 GB with head-room: more than one GPU


def test_sweep_plan_json_gives_each_trial_its_share_from_the_memory_estimate(tmp_path, capsys):
    spec = write_spec(tmp_path, pack_spec(), "pack.toml")
    assert cli.main(["plan", str(spec), "--json", "--storage", str(tmp_path / "none")]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    trials = {t.trial_id: t for t in load_spec(spec).trials}
    assert len(objs) == len(trials) == 8
    shares = set()
    for obj in objs:
        t = trials[obj["trial_id"]]
        need = memory_estimate(resolve_model(t.model, t.data), 32)  # one worker, whole batch
        assert obj["mem_gb"] == pytest.approx(need / 1e9)
        want = need * SAFETY / 1e9 + GPU_CONTEXT_GB
        fitting = [q for q in SHARES if want <= q * 16]
        expected = min(fitting) if fitting else None
        assert obj["gpus"] == expected, (obj["depth"], obj["width"])
        assert obj["fits"] == (expected is not None)
        if expected:
            assert obj["ray_resources_per_worker"] == {"CPU": 1.0, "GPU": expected}
            assert obj["mem_budget_gb"] == pytest.approx(expected * 16)
        shares.add(expected)
    assert {0.125, 1.0, None} <= shares  # small trials pack eight to a GPU, large ones do not fit
    text = cli.main(["plan", str(spec), "--storage", str(tmp_path / "none")])
    out = capsys.readouterr().out
    assert text == 0 and "1/8" in out and "(more than one GPU)" in out and 'gpus = "auto"' in out


def test_a_sweep_refuses_a_trial_no_gpu_holds_and_names_the_workers_that_would(tmp_path, capsys):
    spec = write_spec(tmp_path, pack_spec([8], [2048]), "pack.toml")
    assert cli.main(["run", str(spec), "--storage", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    model = resolve_model(load_spec(spec).trials[0].model, load_spec(spec).trials[0].data)
    n = workers_to_fit(model, 32, 16)
    assert n and n > 1 and gpu_share(worker_memory(model, 32, n, "fsdp"), 16) is not None
    assert f'give it resources.workers = {n} with sharding = "fsdp"' in err
    assert not (tmp_path / "store").exists()


def test_memory_per_worker_under_ddp_and_fsdp():
    model = resolve_model(ModelConfig(depth=4, width=256, heads=4, seq_len=128), DataConfig(vocab_size=256))
    state = memory_estimate(model, 0)  # weights, gradients and two AdamW moments
    acts = lambda b: memory_estimate(model, b) - state  # noqa: E731
    assert worker_memory(model, 32) == memory_estimate(model, 32)
    assert worker_memory(model, 32, 4, "ddp") == state + acts(8)  # replicated state, 1/4 batch
    block = count_params(model).n_params / 4
    assert worker_memory(model, 32, 4, "fsdp") == math.ceil(state / 4) + int(2 * block * 4) + acts(8)
    assert worker_memory(model, 32, 4, "fsdp") < worker_memory(model, 32, 4, "ddp")


def test_cpu_trials_ask_for_memory_in_coarse_steps():
    mib = 2**20
    assert host_memory(0) == 512 * mib  # the process alone (0.5 GB) rounds up to 512 MiB
    assert host_memory(1e6) == host_memory(20e6) == 512 * mib  # tiny models share one ask
    assert host_memory(40e6) == host_memory(400e6) == 1024 * mib
    big = host_memory(3e9)
    assert big >= 3e9 * SAFETY + 0.5e9 and big == 256 * mib * 2 ** round(math.log2(big / (256 * mib)))


def test_gpu_memory_of_the_nodes():
    gpu = {"Resources": {"CPU": 8, "GPU": 4, "accelerator_type:H100": 1}, "Labels": {}}
    cpu = {"Resources": {"CPU": 8}, "Labels": {}}
    labelled = {"Resources": {"CPU": 8, "GPU": 1}, "Labels": {"depthwidth.io/gpu-memory-gb": "24"}}
    odd = {"Resources": {"CPU": 8, "GPU": 1, "accelerator_type:V100": 1}, "Labels": {}}
    gpu, cpu, labelled, odd = map(Node.of, (gpu, cpu, labelled, odd))  # as ray.nodes() gives them
    assert node_gpu_memory_gb([gpu, cpu]) == 80
    assert node_gpu_memory_gb([gpu, labelled]) == 24  # the smallest: a trial may land anywhere
    assert node_gpu_memory_gb([cpu]) is None
    assert node_gpu_memory_gb([gpu, odd]) is None  # V100 comes in 16 and 32 GB: the spec decides


def test_thread_rule():
    assert cpu_threads(2.5e7, 2) == 1  # a tiny model: one thread, whatever it holds
    assert cpu_threads(5e9, 4) == 2
    assert cpu_threads(1e12, 4) == 4  # never more than the CPUs it holds
    assert cpu_threads(1e12, 0.5) == 1
    assert cpu_threads(1e12, 4, load=2.0, cores=2) == 1  # a busy machine: one thread
    assert cpu_threads(1e12, 4, load=1.0, cores=2) == 4
