"""A real two-node Ray cluster on this machine, without Docker: a sweep across nodes and node loss.

`ray start` runs a head and a second node (1 CPU each, token auth, free ports, private temp dir and
HOME). A 4-trial sweep through `--address` must use both nodes, then survive the second node being
stopped mid-trial: the trial resumes on the head from its checkpoint and the store stays complete.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import EXE, free_ports, hook_env, ray_start, spec_toml, write_spec

pytestmark = pytest.mark.slow


def multinode_spec(name: str, storage: Path, steps: int = 20, eval_every: int = 10) -> str:
    """Four trials of 1 CPU each, two at once (one per node), each retried twice."""
    return spec_toml(
        name,
        model={"family": "transformer"},
        data={"source": "pcfg", "vocab_size": 32},
        train={"batch_size": 8, "eval_every": eval_every},
        grid={"depth": [1, 2], "width": [16, 32]},
        budget={"steps": steps},
        resources={"cpus": 1, "max_concurrent": 2, "max_failures": 2},
        storage={"path": str(storage)},
    )


NODES_SCRIPT = """
import sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
deadline = time.time() + 60
while time.time() < deadline:
    alive = [n for n in ray.nodes() if n["Alive"]]
    if len(alive) == 2:
        break
    time.sleep(0.5)
for n in alive:
    print("head" if "node:__internal_head__" in n["Resources"] else "worker", n["NodeID"])
"""


def _pids_with_env(marker: bytes) -> list[int]:
    """Processes whose environment holds this test's own token (hence started by this test)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if marker in (d / "environ").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether `ancestor` is pid's parent, grandparent, ... (via /proc/<pid>/stat)."""
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state is the ppid
    return False


def stop_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM a process group started with start_new_session (a graceful `ray stop` of one
    node: the raylet unregisters from the GCS), then SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                proc.poll()
                return
            proc.poll()
            time.sleep(0.2)


class Cluster:
    def __init__(self, root: Path):
        self.root = root
        self.token = secrets.token_hex(24)
        (root / "home").mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        self.env.update(
            HOME=str(root / "home"),
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN=self.token,
            RAY_USAGE_STATS_ENABLED="0",
            # a dead node is noticed in ~3 s instead of ~30 s, should SIGTERM not reach the GCS
            RAY_health_check_period_ms="1000",
            RAY_health_check_timeout_ms="1000",
            RAY_health_check_failure_threshold="3",
            OMP_NUM_THREADS="1",
        )
        # One batch, every socket held open together, so no two components are given the same
        # port (separate batches can hand a just-closed port out again): GCS, 6 per node and
        # 40 worker ports per node.
        ports = free_ports(1 + 2 * (6 + 40))
        self.gcs = ports.pop()
        self.address = f"127.0.0.1:{self.gcs}"
        self.procs: dict[str, subprocess.Popen] = {}
        self._ports = ports
        # Ray's unix sockets live under --temp-dir and their paths may not exceed 107 bytes,
        # more than pytest's tmp_path leaves room for: a short private folder instead.
        self.ray_tmp = tempfile.mkdtemp(prefix="dwmn-")

    def _node(self, name: str, head: bool) -> subprocess.Popen:
        p = [self._ports.pop() for _ in range(6)]
        cmd = ray_start(
            p,
            "--num-cpus=1",
            "--object-store-memory=100000000",
            "--worker-port-list=" + ",".join(str(self._ports.pop()) for _ in range(40)),
        )
        if head:
            cmd += ["--head", f"--port={self.gcs}", "--include-dashboard=false", f"--temp-dir={self.ray_tmp}"]
        else:
            cmd += [f"--address={self.address}"]
        log = open(self.root / f"{name}.log", "w")
        proc = subprocess.Popen(
            cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def start(self) -> None:
        self._node("head", head=True)
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.gcs), timeout=0.5).close()
                break
            except OSError:
                assert self.procs["head"].poll() is None, self.log("head")
                assert time.time() < deadline, "the Ray head did not open its GCS port in 60 s"
                time.sleep(0.3)
        self._node("node2", head=False)
        r = subprocess.run(
            [sys.executable, "-c", NODES_SCRIPT, self.address],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        ids = dict(line.split() for line in r.stdout.split("\n") if line.strip())
        assert set(ids) == {"head", "worker"}, r.stdout + r.stderr[-3000:] + self.log("node2")
        self.head_id, self.node2_id = ids["head"], ids["worker"]

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text()[-3000:]

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            stop_group(proc, grace=3.0)  # the cluster is thrown away: no need to drain it
        for pid in _pids_with_env(f"RAY_AUTH_TOKEN={self.token}".encode()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.ray_tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("multinode"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_sweep_spreads_over_both_nodes_and_survives_losing_one(cluster, tmp_path):
    from sweeps.plans.spec import load_spec

    storage, hook = tmp_path / "store", tmp_path / "hook"
    spec = write_spec(tmp_path, multinode_spec("multinode", storage), "multinode.toml")
    ids = [t.trial_id for t in load_spec(spec).trials]  # Tune starts them in this order
    assert len(ids) == 4
    first, last = ids[:2], ids[2:]
    env = hook_env(cluster.env, hook)
    # The first two trials (one per node: 1 CPU each) run through; the last two wait after their
    # first checkpoint, again one per node, so the second node can be stopped in mid-trial.
    (hook / "hold").write_text(" ".join(last))
    cmd = [
        EXE,
        "sweep",
        "run",
        str(spec),
        "--address",
        cluster.address,
        "--storage",
        str(storage),
        "--no-analyze",
    ]
    driver = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        deadline = time.time() + 240
        pids: dict[str, int] = {}
        while len(pids) < 2:
            assert driver.poll() is None, driver.stdout.read()[-4000:]
            assert time.time() < deadline, "the last two trials did not reach their first checkpoint"
            for f in hook.glob("*.pid"):
                pids[f.stem] = int(f.read_text())
            time.sleep(0.3)
        assert sorted(pids) == sorted(last)
        runs = pd.read_parquet(storage / "runs.parquet")  # written as each trial finishes
        assert sorted(runs["trial_id"]) == sorted(first)
        assert set(runs["node_id"]) == {cluster.head_id, cluster.node2_id}  # both nodes ran trials

        on_node2 = [tid for tid, pid in pids.items() if descends_from(pid, cluster.procs["node2"].pid)]
        assert len(on_node2) == 1, pids
        lost = on_node2[0]
        stop_group(cluster.procs["node2"])  # the second node goes away mid-sweep
        assert cluster.procs["node2"].poll() is not None
        (hook / "hold").unlink()
        out, _ = driver.communicate(timeout=240)
    finally:
        if driver.poll() is None:
            stop_group(driver)
    assert driver.returncode == 0, out[-4000:]
    assert cluster.token not in out

    runs = pd.read_parquet(storage / "runs.parquet").set_index("trial_id")
    assert sorted(runs.index) == sorted(ids)  # the store is complete: each trial exactly once
    assert set(runs["status"]) == {"ok"} and (runs["steps"] == 20).all()
    assert set(runs.loc[first, "node_id"]) == {cluster.head_id, cluster.node2_id}
    assert set(runs.loc[last, "node_id"]) == {cluster.head_id}  # the lost trial finished on the head
    assert runs["node_ip"].astype(str).str.len().gt(0).all()
    # the lost trial restarted from its step-10 checkpoint, not from scratch
    starts = [line.split() for line in (hook / "starts.log").read_text().splitlines()]
    assert [int(s[2]) for s in starts if s[1] == lost] == [0, 10], starts
    curves = pd.read_parquet(storage / "curves.parquet")
    for tid in ids:  # nothing lost: every evaluation of every trial, once
        assert sorted(curves.loc[curves.trial_id == tid, "step"]) == [10, 20], tid
