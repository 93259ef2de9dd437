"""Ray clusters: connecting (embedded or by address), checking that every trial fits a node and
that a multi-node cluster sees the store, and sweeps sent as Ray Jobs (submit, status, logs).

Ray ≥ 2.59 turns token authentication on (docs/design.md "Execution"): the token is read from
RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token, sent only as an HTTP header, never printed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from depthwidth.clitools import reason
from runstore.store import ResultStore
from sweeps.backends import ray_compat
from sweeps.plans.packing import Node
from sweeps.plans.spec import Resources, SpecError, SweepSpec
from sweeps.plans.trialconfig import TrialConfig

if TYPE_CHECKING:
    from sweeps.plans.plan import PlanRow

TOKEN_HELP = (
    "put the cluster's token in the RAY_AUTH_TOKEN environment variable or in "
    "~/.ray/auth_token (or point RAY_AUTH_TOKEN_PATH at a file holding it); "
    "`ray get-auth-token` on the head node prints it"
)
SHIPPED_PACKAGES = ("runstore", "depthwidth", "sweeps", "analysis")
WORKER_PRELOAD = ("torch", "depthwidth.train", "sweeps.running.trainable")
DRIVER_MODULES = ("ray.tune", "sweeps.running.driver", "sweeps.running.resume", "sweeps.running.trainable")
# The Tune trial only drives the Train run and holds no model: it asks for no CPU, so that N
# workers of one CPU fit a node of N CPUs, only for the memory its process takes (Ray, Train and
# torch imported; a Tune request needs some resource). The workers' own resources are Train's
# placement group.
DRIVER = {"memory": 512 * 2**20}


def _import_driver_modules() -> None:
    import importlib

    for name in DRIVER_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the import is repeated, and fails loudly, where used
            return


class ClusterError(RuntimeError):
    """The cluster cannot be reached or used as asked; the message says what to change."""


def connect(address: str | None, verbose: bool = False) -> bool:
    """Embedded Ray without an address (no dashboard), else the cluster at `address` or
    RAY_ADDRESS. Returns True when this call started or joined Ray (and should shut it down).
    Ray's start-up notices (e.g. that token authentication is on) are shown only if `verbose`."""
    addr = address or os.environ.get("RAY_ADDRESS") or None
    if addr and "RAY_AUTH_MODE" not in os.environ and find_token():
        # A token in RAY_AUTH_TOKEN or ~/.ray/auth_token means the user expects token auth, but
        # Ray's client sends it only in token mode, read when ray is first imported (this is
        # how `ray start` decides for a new head).
        os.environ["RAY_AUTH_MODE"] = "token"
        if "ray" in sys.modules:  # imported already (a caller inside Python): reload the mode
            _guarded(ray_compat.reload_auth_mode)
    elif addr and not find_token():
        ray_compat.short_join_without_token()  # a cluster that needs a token refuses in ~4 s
    if not addr:
        _guarded(ray_compat.loopback_only)
    import ray
    from ray.exceptions import AuthenticationError

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = dict(log_to_driver=False, logging_level=logging.WARNING)
    if not addr:
        # Workers Ray starts import torch and the trainable before they take work (see
        # ray_compat.init_preloaded); meanwhile this process imports Tune
        early = threading.Thread(target=_import_driver_modules, daemon=True)
        early.start()
        started = False
        try:
            with _captured_stderr() as captured:
                ray_compat.init_preloaded(WORKER_PRELOAD, include_dashboard=False, **kwargs)
            started = True
        finally:
            if verbose or not started:  # a failed start shows what Ray said
                sys.stderr.write("".join(captured))
        early.join()
        return True
    with _captured_stderr() as captured:
        try:
            ray.init(address=addr, **kwargs)
            failure = None
        except AuthenticationError:
            failure = "auth"
        except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            failure = reason(exc)
    log = "".join(captured)
    if failure is None:
        if verbose:
            sys.stderr.write(log)  # Ray's own notices, e.g. that token authentication is on
        return True
    if failure == "auth" or "Unauthenticated" in log or "InvalidAuthToken" in log:
        what = "rejected the token it was given" if find_token() else "requires a token and none was found"
        raise ClusterError(f"the Ray cluster at {addr} {what}: {TOKEN_HELP}.")
    raise ClusterError(f"--address = {addr!r} is invalid: no Ray cluster answered there ({failure}).")


def _guarded(patch) -> None:
    try:
        patch()
    except ray_compat.RayCompatError as exc:
        raise ClusterError(f"{exc}.") from exc


def stop(started: bool) -> threading.Thread:
    """Shut down the Ray this process started, in the background: its teardown (~0.4 s,
    see ray_compat.shutdown) runs while the sweep prints its summary and runs the analysis. Join the
    returned thread before the process ends."""
    t = threading.Thread(target=ray_compat.shutdown if started else (lambda: None), name="ray-shutdown")
    t.start()
    return t


@contextlib.contextmanager
def _captured_stderr():
    """Route file descriptor 2 (Ray's C++ core logs there) to a temporary file for a while, so
    a failed connection reads as one sentence and its cause can be told apart."""
    sys.stderr.flush()
    saved = os.dup(2)
    text: list[str] = []
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield text
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text.append(tmp.read())


def alive_nodes() -> list[Node]:
    """The cluster's alive nodes, Ray's description of each read once into a Node."""
    import ray

    return [Node.of(n) for n in ray.nodes() if n.get("Alive")]


def check_resources(resources: Resources, nodes: list[Node]) -> None:
    """Every worker asks for the same CPUs and GPU fraction: some node must hold that much
    (`plan_on` then checks each trial's own GPU share and memory)."""
    cpus = [n.offers("CPU") for n in nodes]
    gpus = [n.offers("GPU") for n in nodes]
    if resources.auto_gpus:
        if max(gpus, default=0) <= 0:
            raise SpecError("resources.gpus = 'auto' is invalid: no node of the cluster has a GPU.")
        resources = Resources(cpus=resources.cpus)
    if any(c >= resources.cpus and g >= resources.gpus for c, g in zip(cpus, gpus)):
        return
    if max(cpus, default=0) < resources.cpus:
        raise SpecError(
            f"resources.cpus = {resources.cpus:g} is invalid: no node of the cluster has "
            f"that many CPUs (the largest has {max(cpus, default=0):g})."
        )
    if max(gpus, default=0) < resources.gpus:
        raise SpecError(
            f"resources.gpus = {resources.gpus:g} is invalid: no node of the cluster has "
            f"that much GPU (the largest has {max(gpus, default=0):g})."
        )
    raise SpecError(
        f"resources = {resources.cpus:g} CPUs + {resources.gpus:g} GPU is invalid: no "
        f"single node of the cluster has both."
    )


def plan_on(
    spec: SweepSpec, trials: list, nodes: list[Node], finished=(), planned: list | None = None
) -> dict[str, PlanRow]:
    """Each trial's PlanRow with the GPU memory the cluster's nodes report (sweeps/plans/packing.py),
    its memory checked against its GPU share, and what one of its workers asks of Ray checked
    against the nodes (`finished`: the trials the store holds, for the branches a sweep takes).
    `planned`: the trials' rows at the spec's GPU memory, kept where the nodes report the same.
    Raises SpecError naming the trial and the resource."""
    from sweeps.plans.packing import node_gpu_memory_gb
    from sweeps.plans.plan import check_memory, plan_rows

    r = spec.resources
    gpu_gb = node_gpu_memory_gb(nodes) if r.uses_gpus else None
    if planned is not None and (gpu_gb is None or gpu_gb == r.gpu_memory_gb):
        plans = {p.trial_id: p for p in planned}
    else:
        plans = {p.trial_id: p for p in plan_rows(spec, gpu_gb, finished, trials)}
    check_memory(spec, plans.values())
    asks: dict[tuple, PlanRow] = {}
    for p in plans.values():
        asks.setdefault(tuple(sorted(p.ray_resources().items())), p)
    for p in asks.values():
        _check_ask(p, r.workers, nodes)
    return plans


def _check_ask(plan: PlanRow, workers: int, nodes: list[Node]) -> None:
    ask = plan.ray_resources()
    fits = [min(int(n.offers(k) / v + 1e-9) for k, v in ask.items() if v > 0) for n in nodes]
    if sum(fits) >= workers:
        return
    at = plan.axes or plan.trial_id
    if plan.memory_bytes and not any(fits):
        largest = max((n.offers("memory") for n in nodes), default=0.0)
        raise SpecError(
            f"the trial at {at} is invalid: it asks Ray for {plan.memory_bytes / 1e9:.3g} GB "
            f"of memory per worker (its estimate x1.25 + 0.5 GB, rounded up), more than "
            f"any node offers (the largest: {largest / 1e9:.3g} GB); give it a smaller "
            f"batch_size or a node with more memory."
        )
    per = " + ".join(f"{v:g} {k}" for k, v in ask.items() if k != "memory")
    raise SpecError(
        f"resources.workers = {workers} is invalid: the cluster holds at most "
        f"{sum(fits)} workers of {per} at once."
    )


def trial_resources(config: dict[str, Any]):
    """Tune's per-trial request: one bundle with the worker's ask, or, for a trial of several
    workers, a sliver for its Ray Train driver (the workers get Train's own placement group)."""
    from ray.tune import PlacementGroupFactory

    tc = TrialConfig.from_dict(config)
    if tc.run.workers > 1:
        return PlacementGroupFactory([dict(DRIVER)])
    return PlacementGroupFactory([tc.resources.to_dict()])


def concurrent_trials(asks: list[dict[str, float]], workers: int, nodes: list[Node]) -> int | None:
    """How many multi-worker trials the cluster holds at once (Ray Train's guide: bound the Tune
    trials that drive Train runs by the limiting resource); None for one-worker trials, which
    Tune packs by their own requests."""
    if workers <= 1:
        return None
    total: dict[str, float] = {}
    for n in nodes:
        for k, v in n.resources.items():
            total[k] = total.get(k, 0.0) + v
    per_trial = {k: max(a.get(k, 0.0) for a in asks) * workers for a in asks for k in a}
    return max(1, min(int(total.get(k, 0.0) / v + 1e-9) for k, v in per_trial.items() if v > 0))


def check_shared_storage(store: ResultStore, nodes: list[Node]) -> None:
    """A local store path on a multi-node cluster must be one folder every node sees (NFS):
    drop a probe file next to it and ask each node, pinned there, whether it is visible."""
    if not store.is_local or len(nodes) < 2:
        return
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    folder = Path(store.root)
    while not folder.exists():
        folder = folder.parent
    probe = folder / f".depthwidth-probe-{uuid.uuid4().hex}"
    probe.write_text("probe")
    try:

        @ray.remote(num_cpus=0)
        def sees(path: str) -> bool:
            return os.path.exists(path)

        refs = {
            n.name: sees.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(n.node_id, soft=False)
            ).remote(str(probe))
            for n in nodes
        }
        blind = [name for name, ref in refs.items() if not ray.get(ref, timeout=120)]
    finally:
        probe.unlink(missing_ok=True)
    if blind:
        raise SpecError(
            f"storage.path = {store.location!r} is invalid: the cluster has {len(nodes)} "
            f"nodes and node {blind[0]} cannot see that folder; use a shared path (NFS) "
            f"or an object-store URI such as s3://bucket/prefix."
        )


# -- Ray Jobs ---------------------------------------------------------------------------------


def find_token() -> str | None:
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token
    for path in (os.environ.get("RAY_AUTH_TOKEN_PATH"), str(Path.home() / ".ray" / "auth_token")):
        if path and os.path.isfile(path):
            text = Path(path).read_text(encoding="utf-8", errors="replace").strip()
            if text:
                return text
    return None


def job_client(address: str | None):
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    addr = address or os.environ.get("RAY_ADDRESS")
    if not addr:
        raise ClusterError(
            "--address is missing: give the cluster's dashboard address, e.g. "
            "--address http://HEAD:8265 (or set RAY_ADDRESS)."
        )
    token = find_token()
    headers = {"Authorization": f"Bearer {token}"} if token else None
    try:
        client = JobSubmissionClient(addr, headers=headers)
        client.list_jobs()  # the first authenticated call: fail here, before anything is sent
    except AuthenticationError:
        what = "rejected the token it was given" if token else "requires a token and none was found"
        raise ClusterError(f"the Ray cluster at {addr} {what}: {TOKEN_HELP}.") from None
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = reason(exc)
        raise ClusterError(
            f"--address = {addr!r} is invalid: no Ray Jobs API answered there ({first})."
        ) from None
    return client


def _stage(spec: SweepSpec) -> str:
    """A folder holding the four packages and the spec: the job's runtime_env working_dir."""
    import importlib

    stage = tempfile.mkdtemp(prefix="depthwidth-job-")
    for name in SHIPPED_PACKAGES:
        src = Path(importlib.import_module(name).__file__).parent
        shutil.copytree(src, Path(stage) / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    Path(stage, "spec.toml").write_text(spec.text, encoding="utf-8")
    return stage


def submit(spec: SweepSpec, address: str | None, storage: str | None, flags: list[str]) -> tuple[str, str]:
    """Send `depthwidth sweep run` to the cluster as a Ray Job. Returns (job id, storage)."""
    import shlex

    client = job_client(address)
    location = storage or spec.storage
    if "://" not in location and not os.path.isabs(location):
        location = os.path.abspath(location)  # the job's own folder is temporary
    stage = _stage(spec)
    try:
        entry = ["python", "-m", "sweeps.cli", "run", "spec.toml", "--storage", location, *flags]
        job_id = client.submit_job(
            entrypoint=" ".join(shlex.quote(a) for a in entry),
            submission_id=f"depthwidth-{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}",
            runtime_env={"working_dir": stage},
            metadata={"sweep": spec.name},
        )
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return job_id, location


def job_status(address: str | None, job_id: str) -> tuple[str, str]:
    client = job_client(address)
    try:
        info = client.get_job_info(job_id)
    except RuntimeError as exc:
        raise ClusterError(f"job = {job_id!r} is invalid: the cluster does not know it ({exc}).") from None
    return str(info.status), info.message or ""


def job_logs(address: str | None, job_id: str, follow: bool = False) -> str | None:
    client = job_client(address)
    try:
        if not follow:
            return client.get_job_logs(job_id)
        import asyncio

        async def tail() -> None:
            async for chunk in client.tail_job_logs(job_id):
                print(chunk, end="", flush=True)

        asyncio.run(tail())
        return None
    except RuntimeError as exc:
        raise ClusterError(f"job = {job_id!r} is invalid: the cluster does not know it ({exc}).") from None
