"""`depthwidth sweep slurm` on a real SLURM: a single-node slurmctld + slurmd on 127.0.0.1 with
its own munge daemon, key and socket, every port free and every folder under a temp dir. A tiny
sweep is submitted, cancelled and resubmitted, requeued by `scontrol requeue` and by its own
time-limit signal; the store ends complete and no finished trial runs twice. The multi-node path
of the script runs with stand-ins for srun, scontrol and ray that record what each node starts.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import free_ports, hook_env, run_sweep, spec_toml, write_spec
from helpers import starts as trial_starts

REPO = Path(__file__).resolve().parent.parent
SLURM_BINARIES = ("slurmctld", "slurmd", "munged", "sbatch", "scontrol", "squeue", "scancel")


def slurm_spec(name: str, storage: Path) -> str:
    """Four trials of 1 CPU, a checkpoint at every evaluation, stored in `storage`."""
    return spec_toml(
        name,
        model={"family": "transformer"},
        # the copy task is built in a moment (a PCFG takes seconds per process)
        data={"source": "copy", "task_length": 4, "vocab_size": None},
        train={"batch_size": 8, "eval_every": 10, "checkpoint_every": 1},
        grid={"depth": [1, 2], "width": [16], "lr": [1e-2, 3e-3]},
        budget={"steps": 40},
        resources={"cpus": 1, "max_failures": 1},
        storage={"path": str(storage)},
    )


def _bin(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.path.exists(p)), None
    )


@dataclass
class Slurm:
    root: Path
    env: dict[str, str]

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(cmd), env=self.env, capture_output=True, text=True, check=check, timeout=60
        )

    def state(self, job: str) -> str:
        """PENDING, RUNNING, COMPLETED, ... ('' once SLURM has forgotten the job)."""
        out = self.run("scontrol", "-o", "show", "job", job, check=False).stdout
        fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
        return fields.get("JobState", "")

    def restarts(self, job: str) -> int:
        out = self.run("scontrol", "-o", "show", "job", job).stdout
        return int(dict(kv.split("=", 1) for kv in out.split() if "=" in kv).get("Restarts", 0))


def _conf(root: Path, host: str, ctld: int, slurmd: int) -> str:
    return f"""\
ClusterName=dwtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start again after cred_expire + 1 s (default 120 s)
AuthInfo=socket={root}/munge/sock,cred_expire=5
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=10
MinJobAge=600
NodeName={host} NodeAddr=127.0.0.1 CPUs=2 RealMemory=16000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _stop(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@pytest.fixture(scope="session")
def slurm():
    missing = [b for b in SLURM_BINARIES if _bin(b) is None]
    if missing:
        pytest.skip(
            f"SLURM is not installed here ({', '.join(missing)} missing; on Debian "
            f"`apt-get install slurm-wlm munge`, which .ci/run does as root)"
        )
    if os.geteuid() != 0:
        pytest.skip("slurmd must run as root to start jobs; these tests run as root in .ci/run")
    root = Path(tempfile.mkdtemp(prefix="dwslurm-", dir="/tmp"))
    for d in ("munge", "state", "spool", "log"):
        (root / d).mkdir(mode=0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    host = socket.gethostname().split(".")[0]
    ctld, slurmd = free_ports(2)
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, host, ctld, slurmd))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAY_"))}
    env.update(
        SLURM_CONF=str(conf),
        PYTHONPATH=str(REPO),
        RAY_USAGE_STATS_ENABLED="0",
        PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
    )
    m = root / "munge"
    started = []
    try:
        subprocess.run(
            [
                _bin("munged"),
                "--force",
                f"--socket={m}/sock",
                f"--key-file={key}",
                f"--pid-file={m}/pid",
                f"--log-file={m}/log",
                f"--seed-file={m}/seed",
            ],
            check=True,
            env=env,
            capture_output=True,
            timeout=30,
        )
        started.append(m / "pid")
        subprocess.run([_bin("slurmctld"), "-f", str(conf)], check=True, env=env, timeout=30)
        started.append(root / "slurmctld.pid")
        subprocess.run([_bin("slurmd"), "-f", str(conf)], check=True, env=env, timeout=30)
        started.append(root / "slurmd.pid")
        cluster = Slurm(root, env)
        deadline = time.monotonic() + 60
        while cluster.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip() != "idle":
            if time.monotonic() > deadline:
                raise RuntimeError(
                    "the test SLURM node did not become idle:\n"
                    + (root / "log" / "slurmd.log").read_text()[-2000:]
                )
            time.sleep(0.5)
        yield cluster
        cluster.run("scancel", "--full", "--partition=debug", check=False)
        deadline = time.monotonic() + 30
        while cluster.run("squeue", "-h", check=False).stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        for pid_file in reversed(started):  # the daemons this fixture started, by their pids
            _stop(pid_file)
        shutil.rmtree(root, ignore_errors=True)


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return run_sweep(list(args), env, timeout=120, cwd=cwd)


def _submit(slurm: Slurm, spec: Path, store: Path, hook: Path, tmp: Path) -> str:
    env = hook_env(slurm.env, hook)
    out = _cli(
        "slurm",
        str(spec),
        "--submit",
        "--cpus-per-task",
        "2",
        "--max-concurrent",
        "1",
        "--no-analyze",
        "--grace",
        "10",
        env=env,
        cwd=tmp,
    )
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("submitted job "))
    return line.split()[2].rstrip(";")


def _wait(what: str, cond, slurm: Slurm, store: Path, timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            logs = "".join(p.read_text()[-3000:] for p in sorted((store / "slurm").glob("*.out")))
            raise AssertionError(f"timed out waiting for {what}; job output:\n{logs}")
        time.sleep(0.3)


def _stored(store: Path) -> set[str]:
    from runstore.store import ResultStore

    s = ResultStore(str(store))
    return set(s.runs()["trial_id"]) if s.has_runs() else set()


def _setup(tmp_path: Path, name: str, hold: list[str]) -> tuple[Path, Path, Path, list[str]]:
    from sweeps.plans.spec import load_spec

    # a space in the store's path: sbatch must read the quoted #SBATCH --output line whole, or
    # the job's output file is not where the waits and assertions below read it
    store, hook = tmp_path / "the store", tmp_path / "hook"
    hook.mkdir()
    spec = write_spec(tmp_path, slurm_spec(name, store), f"{name}.toml")
    ids = [t.trial_id for t in load_spec(spec).trials]  # one at a time, in this order
    (hook / "hold").write_text(" ".join(ids[i] for i in range(len(ids)) if str(i) in hold))
    return spec, store, hook, ids


def _submitted_and_held(slurm: Slurm, tmp_path: Path, name: str):
    """A submitted job whose first trial is stored and whose second holds at its first
    checkpoint: (spec, store, hook, trial ids, job id)."""
    spec, store, hook, ids = _setup(tmp_path, name, hold=["1"])
    job = _submit(slurm, spec, store, hook, tmp_path)
    _wait(
        "a trial stored and the next one checkpointed",
        lambda: ids[0] in _stored(store) and (hook / f"{ids[1]}.pid").exists(),
        slurm,
        store,
    )
    return spec, store, hook, ids, job


@pytest.mark.slow
def test_cancel_then_resubmit_finishes_without_rerunning(slurm: Slurm, tmp_path: Path):
    spec, store, hook, ids, job = _submitted_and_held(slurm, tmp_path, "cancel")  # cancelled there
    status = _cli("slurm-status", str(store), env=slurm.env, cwd=tmp_path)
    assert f"SLURM job {job}: RUNNING" in status.stdout and "[squeue]" in status.stdout, status
    assert "trials: 1 done, 1 started" in status.stdout and "2 not started" in status.stdout
    slurm.run("scancel", job)
    _wait("the cancelled job to end", lambda: slurm.state(job) in ("CANCELLED", ""), slurm, store)
    assert _stored(store) == {ids[0]}

    again = _submit(slurm, spec, store, hook, tmp_path)
    assert again != job
    _wait(
        "the resubmitted job to finish",
        lambda: slurm.state(again) in ("COMPLETED", "FAILED", ""),
        slurm,
        store,
    )
    assert slurm.state(again) == "COMPLETED", (store / "slurm" / f"slurm-{again}.out").read_text()
    assert _stored(store) == set(ids)
    starts = trial_starts(hook)
    assert [t for t, _ in starts].count(ids[0]) == 1  # finished before the cancel: not rerun
    first, second = (s for t, s in starts if t == ids[1])
    assert first == 0 and second > 0  # interrupted: resumed from its checkpoint
    status = _cli("slurm-status", str(store), env=slurm.env, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert f"SLURM job {again} (earlier: {job})" in status.stdout and "COMPLETED" in status.stdout
    assert "trials: 4 done" in status.stdout and "(100%)" in status.stdout


@pytest.mark.slow
def test_scontrol_requeue_resumes_from_the_store(slurm: Slurm, tmp_path: Path):
    _, store, hook, ids, job = _submitted_and_held(slurm, tmp_path, "requeue")
    slurm.run("scontrol", "requeue", job)  # what a preempting scheduler does
    # back in the queue, the same job starts again by itself and finishes the sweep
    _wait(
        "the requeued job to finish",
        lambda: slurm.restarts(job) == 1 and slurm.state(job) in ("COMPLETED", "FAILED", ""),
        slurm,
        store,
    )
    text = (store / "slurm" / f"slurm-{job}.out").read_text()
    assert slurm.state(job) == "COMPLETED", text
    assert "(restart 1)" in text
    assert _stored(store) == set(ids)
    starts = trial_starts(hook)
    assert [t for t, _ in starts].count(ids[0]) == 1  # finished before the requeue: not rerun
    first, second = (s for t, s in starts if t == ids[1])
    assert first == 0 and second > 0  # interrupted: resumed from its checkpoint
    assert [t for t, _ in starts] == [ids[0], ids[1], ids[1], ids[2], ids[3]]


def test_bad_options_exit_2_and_write_nothing(tmp_path: Path, capsys, monkeypatch):
    from sweeps.cli import main

    spec = write_spec(tmp_path, slurm_spec("bad", tmp_path / "store"), "bad.toml")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = _cli("slurm", str(spec), "--nodes", "0", env=env, cwd=tmp_path)  # the real command once
    assert out.returncode == 2 and out.stderr.strip() == (
        "depthwidth: error: --nodes = 0 is invalid: a job needs at least one node."
    )
    monkeypatch.chdir(tmp_path)
    for args, field in (
        (["--time=-5"], "--time = '-5'"),
        (["--time", "0"], "--time = '0'"),
        (["--time", "1:2:3:4"], "--time = '1:2:3:4'"),
        (["--gpus-per-node", "1"], "--gpus-per-node = 1"),
        (["--nodes", "2"], "node-local storage"),
        (["--cpus-per-task", "0"], "--cpus-per-task = 0"),
        (["--mem", "lots"], "--mem = 'lots'"),
        (["--partition", "a b"], "--partition = 'a b'"),
        (["--sbatch-arg", "exclusive"], "--sbatch-arg = 'exclusive'"),
        (["--time", "0:30", "--grace", "60"], "--grace = 60"),
    ):
        assert main(["slurm", str(spec), *args]) == 2, args
        err = capsys.readouterr().err
        assert field in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "store").exists(), args
    assert main(["slurm-status", str(tmp_path / "nowhere")]) == 2
    assert "store" in capsys.readouterr().err


def test_smoke_script_is_valid_and_starts_ray(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = _cli(
        "slurm",
        str(REPO / "sweeps" / "smoke.toml"),
        "--nodes",
        "1",
        "--storage",
        str(tmp_path / "smoke"),
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    script = tmp_path / "smoke" / "slurm" / "smoke.sbatch"
    assert f"wrote {script}" in out.stdout
    for option in ("--cpus-per-task", "--mem", "--time"):  # the plan's defaults, printed
        assert any(ln.startswith(f"  {option} ") and "(default: " in ln for ln in out.stdout.splitlines())
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is missing: `apt-get install shellcheck` (.ci/run installs it)")
    lint = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout  # every level, info included
    text = script.read_text()
    assert '"$RAY" start --head' in text and "#SBATCH --requeue" in text
    assert "#SBATCH --signal=B:USR1@120" in text and "RAY_AUTH_MODE=token" in text
    assert '-m sweeps.cli run "$SPEC" --storage "$STORE" --address "$ADDRESS"' in text


def test_shared_filesystem_check_reads_the_mounts():
    from sweeps.plans.spec import SpecError
    from sweeps.slurm import check_shared

    mounts = "/dev/sda1 / ext4 rw 0 0\nserver:/export /shared nfs4 rw 0 0\ntmpfs /shared/tmp tmpfs rw 0 0\n"
    assert "nfs4" in check_shared("/shared/results/x", 2, mounts)
    assert check_shared("/home/me/results", 1, mounts) == ""
    for local in ("/home/me/results", "/shared/tmp/results"):
        with pytest.raises(SpecError, match="node-local storage"):
            check_shared(local, 2, mounts)


def test_a_checkpoint_request_checkpoints_at_the_next_evaluation(tmp_path: Path, monkeypatch):
    from depthwidth.config import DataConfig, ModelConfig, TrainConfig
    from depthwidth.train import CHECKPOINT_REQUEST_ENV, train

    flag = tmp_path / "checkpoint-now"
    monkeypatch.setenv(CHECKPOINT_REQUEST_ENV, str(flag))
    saved = []

    def report(metrics, checkpoint=None):
        if metrics["step"] == 20:
            flag.touch()  # asked between the second and the third evaluation
        saved.append((metrics["step"], checkpoint is not None))

    train(
        ModelConfig(family="transformer", depth=1, width=16, heads=2, seq_len=16, vocab_size=32),
        DataConfig(source="copy", task_length=4),
        TrainConfig(
            batch_size=4,
            steps=50,
            eval_every=10,
            eval_batches=1,
            warmup_steps=2,
            checkpoint_every=100,
            threads=1,
        ),
        report=report,
        checkpoint_dir=tmp_path / "ckpt",
    )
    assert saved == [(10, False), (20, False), (30, True), (40, True), (50, True)]


# Stand-ins for the commands the batch script calls; each records its call in $CALLS.
STUBS = {
    "scontrol": 'if [ "$1 $2" = "show hostnames" ]; then printf "%s\\n" $STUB_NODES; '
    'else echo "scontrol $*" >> "$CALLS"; fi',
    # one `bash -c ray_worker` per node, each in its own session, stopped as srun stops its tasks
    "srun": 'echo "srun $*" >> "$CALLS"\npids=()\nfor a in "$@"; do case "$a" in --nodelist=*) '
    "nodes=${a#--nodelist=};; esac; done\n"
    "for n in ${nodes//,/ }; do NODE=$n setsid bash -c ray_worker & pids+=($!); done\n"
    'trap \'for p in "${pids[@]}"; do kill -TERM -- "-$p"; done; wait; exit 0\' TERM\nwait',
    "ray": 'echo "ray[${NODE:-head}] $*" >> "$CALLS"\n'
    'trap \'echo "ray[${NODE:-head}] stopped" >> "$CALLS"; exit 0\' TERM\nsleep 30 & wait',
    # wait-nodes returns once every node's ray has started, as the real one does; the sweep
    # returns at once, or (STUB_RUN_WAITS) runs until Tune's stop signal, SIGUSR1
    "py": 'echo "py $*" >> "$CALLS"\ncase "$1 $2" in "-c import"*) echo token;; '
    '"-m sweeps.slurm") for _ in $(seq 200); do [ "$(grep -c "^ray.* start" "$CALLS")" -ge '
    '"$(echo $STUB_NODES | wc -w)" ] && echo joined >> "$CALLS" && break; sleep 0.05; done;; '
    '"-m sweeps.cli") [ -n "${STUB_RUN_WAITS:-}" ] || exit 0; trap \'[ -e '
    '"$DEPTHWIDTH_CHECKPOINT_REQUEST" ] && echo checkpoint-requested >> "$CALLS"; '
    'echo "driver stopped" >> "$CALLS"; exit 1\' USR1; echo "driver running" >> "$CALLS"; '
    "for _ in $(seq 300); do sleep 0.1; done;; esac\nexit 0",
}


def _stub_job(tmp_path: Path, nodes: list[str], grace: int = 120, **env: str):
    """The batch script for len(nodes) nodes with the stand-ins on PATH: (script, env, calls)."""
    from sweeps.plans.spec import parse_spec
    from sweeps.slurm import JobOptions, render

    spec = parse_spec(slurm_spec("stub", tmp_path / "store"))
    opts = JobOptions(
        nodes=len(nodes), gpus_per_node=0, cpus_per_task=4, mem="8G", time="01:00:00", grace_s=grace
    )
    folder = tmp_path / "store" / "slurm"
    folder.mkdir(parents=True)
    text = render(spec, opts, "/specs/stub.toml", str(tmp_path / "store"), str(folder))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in STUBS.items():
        (bindir / name).write_text("#!/bin/bash\n" + body + "\n")
        (bindir / name).chmod(0o755)
    text = "\n".join(
        f"PY={bindir / 'py'}"
        if ln.startswith("PY=")
        else f"RAY={bindir / 'ray'}"
        if ln.startswith("RAY=")
        else ln
        for ln in text.splitlines()
    )
    script = tmp_path / "job.sh"
    script.write_text(text)
    calls = tmp_path / "calls.log"
    calls.touch()
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "CALLS": str(calls),
        "SLURM_JOB_ID": "123",
        "SLURM_JOB_NODELIST": "n[1-3]",
        "SLURM_CPUS_PER_TASK": "4",
        "STUB_NODES": " ".join(nodes),
        "DEPTHWIDTH_HEAD_IP": "10.0.0.1",
        "HOME": str(tmp_path),
        **env,
    }
    return script, env, calls


def test_multinode_script_starts_the_head_on_the_first_node_and_workers_on_the_rest(tmp_path: Path):
    """The script run with stand-ins for scontrol, srun, ray and python on a 3-node allocation
    (the real multi-node path cannot run here): which node starts what, in which order, and
    that every node's Ray is stopped at the end."""
    script, env, calls = _stub_job(tmp_path, ["n1", "n2", "n3"])
    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    log = calls.read_text().splitlines()
    port = 20000 + (123 % 225) * 200
    head = [ln for ln in log if ln.startswith("ray[head] start")]
    assert len(head) == 1 and "--head" in head[0] and f"--port={port}" in head[0]
    assert "--node-ip-address=10.0.0.1" in head[0] and "--temp-dir=/tmp/dw-123" in head[0]
    workers = [ln for ln in log if ln.startswith("ray[n")]
    # the first node runs the head and no worker; every other node one worker
    assert sorted(ln.split("]")[0] for ln in workers if " start " in ln) == ["ray[n2", "ray[n3"]
    for ln in workers:
        if " start " in ln:
            assert f"--address=10.0.0.1:{port}" in ln and "--head" not in ln
            assert "--num-cpus=4" in ln and "--temp-dir=/tmp/dw-123" in ln
    srun = next(ln for ln in log if ln.startswith("srun"))
    assert "--nodes=2" in srun and "--nodelist=n2,n3" in srun and "--ntasks-per-node=1" in srun
    wait = next(ln for ln in log if ln.startswith("py -m sweeps.slurm wait-nodes"))
    assert f"--address 10.0.0.1:{port}" in wait and "--nodes 3" in wait
    run = next(i for i, ln in enumerate(log) if ln.startswith("py -m sweeps.cli run"))
    assert log.index("joined") < run  # the sweep starts once every node has joined
    assert f"--address 10.0.0.1:{port}" in log[run] and "/specs/stub.toml" in log[run]
    assert {"ray[head] stopped", "ray[n2] stopped", "ray[n3] stopped"} <= set(log[run:])
    assert not any(ln.startswith("scontrol requeue") for ln in log)  # finished: no requeue


def test_time_limit_signal_checkpoints_stops_and_requeues(tmp_path: Path):
    """SIGUSR1 to the batch shell (SLURM's warning, --signal=B:USR1@GRACE): the checkpoint
    request appears, the driver gets Tune's stop signal GRACE/2 s later, Ray stops and the job
    puts itself back in the queue."""
    script, env, calls = _stub_job(tmp_path, ["n1"], grace=4, STUB_RUN_WAITS="1")
    job = subprocess.Popen(
        ["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 30
    while "driver running" not in calls.read_text():
        assert time.monotonic() < deadline and job.poll() is None, calls.read_text()
        time.sleep(0.05)
    job.send_signal(signal.SIGUSR1)
    out, _ = job.communicate(timeout=30)
    log = calls.read_text().splitlines()
    assert job.returncode == 1, out
    assert "SIGUSR1: asking running trials for a checkpoint" in out
    stop = log.index("driver stopped")
    assert log[stop - 1] == "checkpoint-requested"  # the request came before the stop
    assert "ray[head] stopped" in log[stop:] and log[-1] == "scontrol requeue 123"
    assert not list((tmp_path / "store" / "slurm").glob("checkpoint-now-*"))  # cleared again


def test_a_request_larger_than_every_node_is_refused_before_submitting(slurm: Slurm, tmp_path: Path):
    """The test node has 2 CPUs and 16000 MB: a job asking more would pend for ever
    (PartitionConfig), so `--submit` refuses it, names the numbers and submits nothing. The
    plan's own default (four trials at once x 1 CPU) is checked the same way."""
    spec, store, _, _ = _setup(tmp_path, "big", hold=[])
    queued = slurm.run("squeue", "-h", "-o", "%i").stdout.split()
    for args, says in (
        (
            ["--cpus-per-task", "4"],
            "--cpus-per-task = 4 is invalid: the largest node of the default partition has 2 CPUs",
        ),
        ([], "--cpus-per-task = 4 is invalid: the largest node of the default partition has 2 CPUs"),
        (
            ["--cpus-per-task", "2", "--mem", "64G"],
            "--mem = 64G is invalid: the largest node of the default partition has 16000 MB",
        ),
    ):
        out = _cli("slurm", str(spec), "--submit", *args, env=slurm.env, cwd=tmp_path)
        assert out.returncode == 2, out.stdout + out.stderr
        assert says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert not (store / "slurm").exists()
    assert slurm.run("squeue", "-h", "-o", "%i").stdout.split() == queued
