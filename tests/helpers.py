"""Helpers the tests share: one way to write a spec file (its TOML built from the tiny sweep most
tests run), one way to run the real commands in a subprocess and read a refusal, the test hook's
folder that a sweep's trials obey, free ports, and one way to turn a planted training result into
what the store keeps (the path a sweep's driver takes: TrialConfig and TrialOutcome into
sweeps/running/record.py's `record_of`)."""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from depthwidth.result import RunResult
from sweeps.designing.design_search import to_toml
from sweeps.plans.trialconfig import TrialConfig
from sweeps.plans.trialoutcome import TrialOutcome
from sweeps.running.record import StoredRun, record_of

# The `depthwidth` console script beside this interpreter: the command a user types.
EXE = str(Path(sys.executable).parent / "depthwidth")

# The tiny transformer most test sweeps train: a trial takes seconds on one CPU.
TINY_TABLES: dict[str, dict[str, Any]] = {
    "model": {"heads": 2, "seq_len": 16},
    "data": {"vocab_size": 16},
    "train": {"batch_size": 4, "eval_every": 5, "eval_batches": 1, "warmup_steps": 2},
}


def spec_toml(name: str, *, base: dict[str, Any] = TINY_TABLES, extra: str = "", **tables: Any) -> str:
    """The TOML of a sweep spec named `name`: the tables of `base` (TINY_TABLES), each of `tables` laid
    over the table of its name (a key or a table given as None is left out); a value that is not
    a table is a top-level key (`where`). `extra` is TOML text added at the end as written."""
    doc: dict[str, Any] = {"name": name, **copy.deepcopy(base)}
    for table, keys in tables.items():
        if keys is None:
            doc.pop(table, None)
        elif isinstance(keys, dict):
            merged = {**doc.get(table, {}), **keys}
            doc[table] = {k: v for k, v in merged.items() if v is not None}
        else:
            doc[table] = keys
    return to_toml(doc) + extra


def write_spec(folder: Path, text: str, name: str = "spec.toml") -> Path:
    """`text` as the spec file `name` in `folder` (made if missing); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def ray_sweep(
    name: str, depths, widths, steps: int = 20, extra: str = "", max_failures: int = 2, **tables: Any
) -> str:
    """The sweep the Ray tests run: depths x widths of the tiny model (with `tables` laid over it
    as in spec_toml), one CPU a trial, a failed trial retried `max_failures` times (a killed
    worker is a failure Ray retries)."""
    return spec_toml(
        name,
        grid={"depth": list(depths), "width": list(widths)},
        budget={"steps": steps},
        resources={"cpus": 1, "max_failures": max_failures},
        extra=extra,
        **tables,
    )


def trial_ids(spec: Path) -> list[str]:
    from sweeps.plans.spec import load_spec

    return [t.trial_id for t in load_spec(spec).trials]


def cli(
    *args, cwd=None, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`depthwidth ARGS` run as a user runs it, in `cwd`, in `env` (this environment when None);
    torch on one thread, since two test processes share the machine's cores. A command still
    running after `timeout` seconds fails its test."""
    return subprocess.run(
        [EXE, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**(os.environ if env is None else env), "OMP_NUM_THREADS": "1"},
    )


# the progress lines `data prepare` and `analyze` write on stderr beside a refusal
PROGRESS = ("data: ", "analyze: ")


def sentence(r: subprocess.CompletedProcess) -> str:
    """The one sentence of a refusal (exit code 2, one line on stderr besides progress lines),
    without its prefix."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [x for x in r.stderr.strip().splitlines() if not x.startswith(PROGRESS)]
    assert len(lines) == 1 and lines[0].startswith("depthwidth: error: "), r.stderr
    return lines[0][len("depthwidth: error: ") :]


def sweep_argv(*args: str) -> list[str]:
    """The command line of `sweep ARGS` through this interpreter (`python -m sweeps.cli`)."""
    return [sys.executable, "-m", "sweeps.cli", *args]


def run_sweep(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 240, cwd=None
) -> subprocess.CompletedProcess:
    """`sweep ARGS` run to its end in `env` (this environment when None) and `cwd`."""
    return subprocess.run(
        sweep_argv(*args), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def run_args(spec: Path, store: Path, *more: str, address: str | None = None) -> list[str]:
    """The arguments of `sweep run SPEC --storage STORE` (on the cluster at `address` when given),
    then `more`."""
    return ["run", str(spec), *(["--address", address] if address else []), "--storage", str(store), *more]


@contextlib.contextmanager
def sweep_running(
    args: list[str], env: dict[str, str], new_session: bool = False
) -> Iterator[subprocess.Popen]:
    """`sweep ARGS` started in `env` (in a process group of its own with `new_session`), its
    output read as text once it ends; killed on the way out, with its group, if it still runs."""
    proc = subprocess.Popen(
        sweep_argv(*args),
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=new_session,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None and new_session:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and what it started in its group
        elif proc.poll() is None:
            proc.kill()


def hook_env(base: dict[str, str], hook: Path) -> dict[str, str]:
    """`base` with the test hook's folder (tests/trial_hook.py): the sweep's trials log their starts
    there and hold where a file in it says."""
    hook.mkdir(exist_ok=True)
    return {**base, "DEPTHWIDTH_TEST_HOOK_DIR": str(hook)}


def starts(hook: Path) -> list[tuple[str, int]]:
    """(trial_id, step it started from) for every trial attempt, in order."""
    log = hook / "starts.log"
    if not log.exists():
        return []
    return [(p[1], int(p[2])) for p in (line.split() for line in log.read_text().splitlines())]


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"driver exited ({proc.returncode}) before {what}:\n{out}\n{err}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free on 127.0.0.1 (all held open until each is known, so none repeats)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def ray_start(ports: list[int], *flags: str) -> list[str]:
    """`ray start --block` of a node on 127.0.0.1 without GPUs or usage reports, its six component
    ports from `ports` (node manager, object manager, runtime-env agent, dashboard agent gRPC and
    HTTP, metrics), then `flags`."""
    nm, om, renv, grpc, http, metrics = ports
    return [
        *(sys.executable, "-m", "ray.scripts.scripts", "start", "--block"),
        *("--num-gpus=0", "--node-ip-address=127.0.0.1", "--disable-usage-stats"),
        *(f"--node-manager-port={nm}", f"--object-manager-port={om}", f"--runtime-env-agent-port={renv}"),
        *(f"--dashboard-agent-grpc-port={grpc}", f"--dashboard-agent-listen-port={http}"),
        f"--metrics-export-port={metrics}",
        *flags,
    ]


def exported_row(columns: dict[str, Any], train_loss: float, val_loss: float) -> dict[str, Any]:
    """A finished run's row as `sweep results --csv` exports it: `columns` (what its configuration
    fixes), the planted losses, status ok and the provenance a run records."""
    provenance = {"wall_s": 1.0, "depthwidth_version": "0.1.0", "torch_version": "2", "device": "cpu"}
    return {
        **columns,
        "final_train_loss": train_loss,
        "final_val_loss": val_loss,
        "status": "ok",
        **provenance,
    }


def stored_run(sweep: str, trial, result: dict[str, Any], node_id: str = "", node_ip: str = "") -> StoredRun:
    """What the store keeps of `trial` (a spec's Trial) having returned `result` (a
    RunResult.to_dict() with values chosen by the test)."""
    outcome = TrialOutcome(trial.trial_id, RunResult.from_dict(result), node_id, node_ip)
    return record_of(sweep, TrialConfig.of(trial), outcome)


def row_of(run: StoredRun) -> dict[str, Any]:
    """The runs row the store writes for `run`: the record's columns, then those beside it."""
    return {**run.record.to_dict(), **run.beside}


def add_run(store, run: StoredRun) -> dict[str, Any]:
    store.add_trial(run.record, run.curve, run.beside)
    return row_of(run)
