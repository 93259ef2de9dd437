"""Secure defaults: `sweep submit` needs a valid token and never prints it; nothing unpickles files.

Pickle-bearing files carry a payload that would create a marker file if loaded: the store, spec
loading, the data a spec points at and checkpoints must refuse them with one clear sentence.
Submission runs against a real Ray head with token auth and its dashboard on 127.0.0.1.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import pickle
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers import free_ports, ray_start, spec_toml, write_spec

from depthwidth.cli import main as depthwidth


def sec_spec(storage: Path, data: dict | None = None) -> str:
    """One 10-step trial of the tiny model stored in `storage`, reading `data` (the [data] table;
    none, the default data, when None)."""
    return spec_toml(
        "sec",
        data=None if data is None else {"vocab_size": None, **data},
        train=None,
        grid={"depth": [1], "width": [16]},
        budget={"steps": 10},
        storage={"path": str(storage)},
    )


class _Payload:
    """Unpickling this calls open(marker, "w"): the marker's existence proves code ran."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def pickle_bytes(marker: Path, protocol: int = 4, size: int = 0) -> bytes:
    """A pickle whose loading runs code; padded to at least `size` bytes (an even count, so
    that neither a size check nor a too-short corpus can be what refuses it)."""
    pad = ""
    while True:
        data = pickle.dumps({"runs": [_Payload(marker)], "pad": pad}, protocol=protocol)
        if len(data) >= size and (size == 0 or len(data) % 2 == 0):
            return data
        pad += "x" * max(1, size - len(data))


def run_cli(capfd, *argv: str) -> tuple[int, str]:
    code = depthwidth(list(argv))
    out, err = capfd.readouterr()
    return code, out + err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- no unpickling ---------------


@pytest.mark.parametrize("name", ["runs.parquet", "curves.parquet"])
def test_store_refuses_a_pickle_posing_as_parquet(tmp_path, capfd, name):
    from runstore.files import StoreError
    from runstore.store import ResultStore

    marker = tmp_path / "MARKER"
    store = tmp_path / "store"
    store.mkdir()
    (store / name).write_bytes(pickle_bytes(marker))
    before = snapshot(store)

    with pytest.raises(StoreError, match=name):
        ResultStore(str(store)).check()
    code, text = run_cli(capfd, "sweep", "results", str(store))
    if name == "runs.parquet":
        assert code == 2 and name in text and len(text.strip().splitlines()) == 1, text
    spec = write_spec(tmp_path, sec_spec(store), "sec.toml")
    code, text = run_cli(capfd, "sweep", "run", str(spec), "--no-analyze")
    assert code == 2, text
    assert f"{store / name}" in text and "parquet" in text
    assert snapshot(store) == before  # refused before writing anything, never overwritten
    assert not marker.exists()


def test_the_analysis_refuses_a_pickle_posing_as_the_store(tmp_path):
    from analysis.readers.inputs import InputError, load

    marker = tmp_path / "MARKER"
    (tmp_path / "runs.parquet").write_bytes(pickle_bytes(marker))
    with pytest.raises(InputError, match="runs.parquet"):
        load(tmp_path)
    assert not marker.exists()


def _unpickling_calls(tree: ast.AST) -> list[str]:
    """Calls that can run code from a file: pickle-family loads, pandas.read_pickle,
    numpy.load(allow_pickle=True), torch.load without weights_only=True."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        owner = getattr(f.value, "id", "") if isinstance(f, ast.Attribute) else ""
        kw = {k.arg: k.value for k in node.keywords}
        weights_only = kw.get("weights_only")
        if (
            (
                owner in ("pickle", "cPickle", "dill", "joblib", "cloudpickle", "marshal", "shelve")
                and name in ("load", "loads", "open", "Unpickler")
            )
            or name in ("read_pickle", "Unpickler")
            or (owner in ("np", "numpy") and name == "load" and "allow_pickle" in kw)
            or (
                owner == "torch"
                and name == "load"
                and not (isinstance(weights_only, ast.Constant) and weights_only.value is True)
            )
        ):
            found.append(f"line {node.lineno}: {owner + '.' if owner else ''}{name}")
    return found


def test_no_project_module_can_unpickle_a_file():
    root = Path(__file__).resolve().parents[1]
    offenders = {
        str(p.relative_to(root)): calls
        for pkg in ("runstore", "depthwidth", "sweeps", "analysis")
        for p in sorted((root / pkg).rglob("*.py"))
        if (calls := _unpickling_calls(ast.parse(p.read_text(), str(p))))
    }
    assert offenders == {}
    # the scanner itself sees each form
    bad = ast.parse(
        "import pickle, torch, numpy as np, pandas as pd\npickle.loads(b)\n"
        "pd.read_pickle(p)\nnp.load(p, allow_pickle=True)\ntorch.load(p)\n"
        "torch.load(p, weights_only=False)\ntorch.load(p, weights_only=True)\n"
    )
    assert len(_unpickling_calls(bad)) == 5


@pytest.mark.parametrize("protocol", [0, 4])
def test_a_pickle_given_as_the_spec_is_refused(tmp_path, capfd, protocol):
    marker = tmp_path / "MARKER"
    spec = tmp_path / "sweep.pkl"
    spec.write_bytes(pickle_bytes(marker, protocol))
    for command in ("plan", "run"):
        code, text = run_cli(capfd, "sweep", command, str(spec))
        assert code == 2, text
        assert str(spec) in text and len(text.strip().splitlines()) == 1, text
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.pkl"]  # nothing written


@pytest.mark.parametrize("source,protocol", [("tokens", 4), ("text", 0)])
def test_a_spec_pointing_at_a_pickle_is_refused(tmp_path, capfd, source, protocol):
    # 8 KB: long enough for any seq_len here; protocol 4 has an even size (a valid uint16 token
    # file by size), protocol 0 is plain ASCII (valid UTF-8 text). Only its being a pickle is wrong.
    marker = tmp_path / "MARKER"
    data = tmp_path / "corpus.pkl"
    data.write_bytes(pickle_bytes(marker, protocol, size=8192))
    spec = write_spec(
        tmp_path, sec_spec(tmp_path / "store", {"source": source, "path": str(data)}), "sec.toml"
    )
    for command in ("plan", "run"):
        argv = ["sweep", command, str(spec)] + (["--no-analyze"] if command == "run" else [])
        code, text = run_cli(capfd, *argv)
        assert code == 2, text
        assert "DataConfig.path" in text and str(data) in text and "pickle" in text.lower(), text
    assert not marker.exists() and not (tmp_path / "store").exists()


def test_a_checkpoint_carrying_code_is_refused(tmp_path):
    from depthwidth.train import CHECKPOINT_FILE, load_checkpoint

    marker = tmp_path / "MARKER"
    (tmp_path / CHECKPOINT_FILE).write_bytes(pickle_bytes(marker, protocol=2))
    with pytest.raises(pickle.UnpicklingError):
        load_checkpoint(tmp_path)  # torch.load(weights_only=True): tensors and plain values only
    assert not marker.exists()


# ---------------------------------------------------------------- token auth on submit --------


@pytest.fixture(scope="module")
def token_head(tmp_path_factory):
    """A one-node Ray head with token auth and its dashboard (the Jobs API) on 127.0.0.1."""
    if importlib.util.find_spec("aiohttp") is None:  # ray[default]: the dashboard and Jobs SDK
        msg = "`sweep submit` and the Ray dashboard need ray[default], which is not installed"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    root = tmp_path_factory.mktemp("tokenhead")
    ray_tmp = tempfile.mkdtemp(prefix="dwsec-")  # unix socket paths must stay < 108 bytes
    token = secrets.token_hex(24)
    gcs, dash, *p = free_ports(8)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        HOME=str(root),
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=token,
        RAY_USAGE_STATS_ENABLED="0",
        OMP_NUM_THREADS="1",
    )
    cmd = ray_start(
        p,
        "--head",
        "--num-cpus=0",
        f"--port={gcs}",
        "--include-dashboard=true",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dash}",
        "--object-store-memory=100000000",
        f"--temp-dir={ray_tmp}",
    )
    log = open(root / "head.log", "w")
    head = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.time() + 120
        while True:  # up when the Jobs API answers, and with token auth it answers 401
            try:
                urllib.request.urlopen(f"{url}/api/version", timeout=2)
                raise AssertionError("the dashboard answered without a token")
            except urllib.error.HTTPError as exc:
                assert exc.code == 401, exc
                break
            except OSError:
                assert head.poll() is None and time.time() < deadline, (root / "head.log").read_text()[-3000:]
                time.sleep(0.5)
        yield url, token
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            try:
                head.wait(5)
                break
            except subprocess.TimeoutExpired:
                continue
        # Ray starts some workers (the job's driver) in sessions of their own: find them by this
        # fixture's token in their environment, so exactly what was started here is stopped.
        marker = f"RAY_AUTH_TOKEN={token}".encode()
        for d in Path("/proc").iterdir():
            try:
                if d.name.isdigit() and int(d.name) != os.getpid() and marker in (d / "environ").read_bytes():
                    os.kill(int(d.name), signal.SIGKILL)
            except OSError:
                continue
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.fixture
def laptop(tmp_path, monkeypatch):
    """The submitting side: its own HOME (no ~/.ray/auth_token), no Ray variables, a valid spec."""
    for k in [k for k in os.environ if k.startswith("RAY_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return write_spec(tmp_path, sec_spec(tmp_path / "store"), "sec.toml")


def test_submit_without_a_token_is_refused_and_says_where_to_put_it(token_head, laptop, capfd):
    url, token = token_head
    code, text = run_cli(capfd, "sweep", "submit", str(laptop), "--address", url)
    assert code == 2, text
    assert "RAY_AUTH_TOKEN" in text and "~/.ray/auth_token" in text
    assert "submitted" not in text and token not in text


def test_submit_with_a_wrong_token_is_refused_without_echoing_it(token_head, laptop, capfd, monkeypatch):
    url, token = token_head
    wrong = secrets.token_hex(24)
    monkeypatch.setenv("RAY_AUTH_TOKEN", wrong)
    code, text = run_cli(capfd, "sweep", "submit", str(laptop), "--address", url)
    assert code == 2, text
    assert "RAY_AUTH_TOKEN" in text
    assert wrong not in text and token not in text


def test_submit_with_the_token_file_goes_through_and_never_prints_it(token_head, laptop, capfd, tmp_path):
    url, token = token_head
    token_file = tmp_path / "home" / ".ray" / "auth_token"  # the place the refusal points to
    token_file.parent.mkdir()
    token_file.write_text(token)
    code, text = run_cli(capfd, "sweep", "submit", str(laptop), "--address", url, "--no-analyze")
    assert code == 0, text
    assert "submitted sweep 'sec' as job" in text
    assert token not in text


# ---------------------------------------------------------------- the embedded Ray's ports ----


def _listening_sockets() -> dict[str, tuple[str, int]]:
    """socket inode -> (local address, port) of every listening TCP socket, from /proc."""
    out = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":  # TCP_LISTEN
                addr, port = f[1].split(":")
                raw = bytes.fromhex(addr)  # little-endian 32-bit words, as the kernel prints them
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                family = socket.AF_INET if len(words) == 4 else socket.AF_INET6
                out[f[9]] = (socket.inet_ntop(family, words), int(port, 16))
    return out


def _process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            children.setdefault(int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(
                int(d.name)
            )
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [root], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _listeners(pids: list[int]) -> list[tuple[str, str, int]]:
    """(process name, address, port) of every TCP socket these processes listen on."""
    table = _listening_sockets()
    found = []
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in table:
                    found.append((name, *table[target[8:-1]]))
        except OSError:
            continue
    return sorted(set(found))


def _is_loopback(addr: str) -> bool:
    import ipaddress

    ip = ipaddress.ip_address(addr)
    return ip.is_loopback or (ip.version == 6 and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_loopback)


def _own_network_address() -> str | None:
    """This machine's address on its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def assert_listens_on_loopback_only(root: int) -> None:
    """Every TCP port that `root` and its descendants listen on is bound to 127.0.0.1 (or ::1),
    and nothing answers on the machine's own network address. Called by the tests that hold an
    embedded Ray's trial mid-run: tests/test_sweep_workers.py (`sweep run` in a subprocess, a
    trial of two data-parallel workers: the driver, the GCS, the raylet, the agents, the Tune
    and Train actors, the workers and their process group's store and gloo pairs) and
    tests/test_ray_compat.py (a Ray started in the test's own process)."""
    listeners = _listeners(_process_tree(root))
    names = {name for name, _, _ in listeners}
    assert {"gcs_server", "raylet"} <= names, listeners  # the whole embedded cluster is seen
    assert any(name.startswith("ray::") for name in names), listeners  # and its workers
    assert [x for x in listeners if not _is_loopback(x[1])] == []
    outside = _own_network_address()
    if outside is not None:
        for _, _, port in listeners:
            with socket.socket() as s:
                s.settimeout(2)
                assert s.connect_ex((outside, port)) != 0, (outside, port)
