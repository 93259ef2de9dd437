"""Shared test fixtures: a real Ray head on 127.0.0.1 (token authentication on, a dashboard for the
Jobs API, every port chosen free) started once per test session and stopped afterwards by
killing exactly the process group it was started in; and the reference-data folder."""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import free_ports, ray_start

REPO = Path(__file__).resolve().parent.parent
# The reference data (docs/data.md): ../shared/data beside the repository, or DEPTHWIDTH_DATA.
SHARED_DATA = Path(os.environ.get("DEPTHWIDTH_DATA") or REPO.parent / "shared" / "data")
# the trials' test hook (tests/trial_hook.py), active in a sweep whose environment also names a
# folder in DEPTHWIDTH_TEST_HOOK_DIR; the sweeps the tests start inherit this environment
os.environ["DEPTHWIDTH_TRIAL_HOOK"] = str(REPO / "tests" / "trial_hook.py")


def pytest_collection_modifyitems(config, items):
    """Files that hold a slow test run first, each file's tests kept together (module fixtures
    start once): the two xdist workers (`-n 2 --dist worksteal`) then begin with the long
    end-to-end tests and finish on short ones, instead of one worker idling while the other runs
    a minute-long test at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: the order within stays


@dataclass
class RayCluster:
    address: str  # GCS address for `--address`
    dashboard: str | None  # http address of the Jobs API (None: no dashboard deps installed)
    token: str
    env: dict[str, str] = field(repr=False)  # environment for clients of this cluster
    temp_dir: str = ""


def _wait_http(url: str, deadline: float, proc: subprocess.Popen, log: Path) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"`ray start` exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status in (200, 401, 403):
                    return
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer")


def _proc_stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a live process, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[19]


def _descendants(root: int) -> list[tuple[int, str]]:
    """Every live descendant of `root` as (pid, start time), so a reused pid is never hit."""
    children: dict[int, list[tuple[int, str]]] = {}
    for d in Path("/proc").glob("[0-9]*"):
        st = _proc_stat(int(d.name))
        if st is not None:
            children.setdefault(st[0], []).append((int(d.name), st[1]))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def _wait_port(port: int, deadline: float, proc: subprocess.Popen, log: Path) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"`ray start` exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                time.sleep(2)  # the GCS listens before the raylet has registered
                return
        time.sleep(0.5)
    raise TimeoutError(f"port {port} did not open")


@pytest.fixture(scope="session")
def ray_cluster() -> RayCluster:
    pytest.importorskip("ray")
    # Ray's unix sockets live under the temp dir and must stay within 107 bytes: keep it short.
    tmp = Path(tempfile.mkdtemp(prefix="dwray-", dir="/tmp"))
    token = secrets.token_hex(32)
    (gcs, dash, nm, om, agent_grpc, agent_http, metrics, renv, *workers) = free_ports(8 + 24)
    bindir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH")}
    env.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=token,
        PATH=bindir + os.pathsep + env.get("PATH", ""),
        RAY_USAGE_STATS_ENABLED="0",
    )
    # The Jobs API lives in the dashboard, which needs ray[default]; without it the head runs
    # dashboard-less and the Jobs test skips.
    jobs = importlib.util.find_spec("aiohttp") is not None
    cmd = ray_start(
        [nm, om, renv, agent_grpc, agent_http, metrics],
        "--head",
        f"--port={gcs}",
        "--num-cpus=2",
        f"--include-dashboard={'true' if jobs else 'false'}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dash}",
        f"--worker-port-list={','.join(map(str, workers))}",
        "--object-store-memory=200000000",
        f"--temp-dir={tmp / 'ray'}",
    )
    log = open(tmp / "ray_start.log", "w")
    # A new session: the head and everything it spawns share one process group, so stopping
    # it below touches only this cluster, never another Ray on the machine.
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if jobs:
            _wait_http(
                f"http://127.0.0.1:{dash}/api/version", time.monotonic() + 180, proc, tmp / "ray_start.log"
            )
        else:
            _wait_port(gcs, time.monotonic() + 180, proc, tmp / "ray_start.log")
        yield RayCluster(
            f"127.0.0.1:{gcs}", f"http://127.0.0.1:{dash}" if jobs else None, token, env, str(tmp / "ray")
        )
    finally:
        # Ray workers put themselves in process groups of their own: note every descendant of
        # the head first, then stop the head's group, then any descendant still alive.
        family = _descendants(proc.pid)
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # stragglers left in the group after the head exited
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid, started in family:
            st = _proc_stat(pid)
            if st is not None and st[1] == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data folder {SHARED_DATA} is absent")
    return SHARED_DATA
