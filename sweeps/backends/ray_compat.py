"""Every use of a name Ray keeps private, in one place. Each checks that its target is there with
the shape it expects: the loopback guard and the auth-mode reload raise when it is not (a local
sweep must never listen beyond 127.0.0.1); the patches that only save time warn and leave Ray as
it is. Tested with the Ray versions pyproject.toml allows (docs/design.md, "Ray's internals").
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import os
import warnings
from typing import Any

LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
HEALTH_CHECK_ENV, HEALTH_CHECK_S = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2"
GCS_WAIT_ENV, GCS_WAIT_TRIES = "RAY_gcs_server_port_wait_time_s", "4"


class RayCompatError(RuntimeError):
    """This Ray lacks an internal name a safety property relies on; the message says which."""


def _moved(what: str) -> str:
    import ray

    return (
        f"Ray {ray.__version__} has no {what}, which depthwidth relies on; install a Ray "
        f"version pyproject.toml allows, or give a cluster's --address"
    )


def _slower(what: str, fallback: str) -> None:
    warnings.warn(f"{_moved(what)}: {fallback} (only slower).", RuntimeWarning, stacklevel=3)


# -- raise when the target moved ----------------------------------------------------------------


def loopback_only() -> None:
    """Keep an embedded Ray on the loopback interface. Ray takes a single machine's node IP to be
    the loopback address when ENABLE_RAY_CLUSTER is false (its default on macOS and Windows); its
    GCS, raylet, workers and agents then listen on 127.0.0.1 only. On Linux the default is the
    machine's network address, with the gRPC servers on every interface, and
    ray.init(_node_ip_address="127.0.0.1") does not help (Ray replaces a loopback address with the
    network one). The variable is read when ray is first imported and by every Ray process this
    one starts; the module attribute is what an already imported ray reads. docs/cluster.md lists
    what listens."""
    os.environ[LOOPBACK_ENV] = "0"
    from ray._private import ray_constants, services, worker

    if getattr(ray_constants, "ENABLE_RAY_CLUSTERS_ENV_VAR", None) != LOOPBACK_ENV or not isinstance(
        getattr(ray_constants, "ENABLE_RAY_CLUSTER", None), bool
    ):
        raise RayCompatError(
            _moved(
                f"ray._private.ray_constants.ENABLE_RAY_CLUSTER read from "
                f"{LOOPBACK_ENV}, which keeps a local sweep on 127.0.0.1"
            )
        )
    ray_constants.ENABLE_RAY_CLUSTER = False
    if getattr(worker, "_global_node", None) is not None:
        return  # Ray runs already in this process: the caller joins it, nothing starts here
    address = services.get_node_ip_address()  # the address a node started now would take
    if not ipaddress.ip_address(address).is_loopback:
        raise RayCompatError(f"{_moved('loopback-only mode')} (a node would listen on {address})")


def reload_auth_mode() -> None:
    """Make an already imported ray read RAY_AUTH_MODE again (Ray reads it once, at import)."""
    raylet = importlib.import_module("ray._raylet")
    config = getattr(raylet, "Config", None)
    if not callable(getattr(config, "initialize", None)):
        raise RayCompatError(
            _moved(
                "ray._raylet.Config.initialize, which reloads RAY_AUTH_MODE "
                "for a ray imported before the token was found"
            )
        )
    config.initialize("")


# -- speed only: warn and fall back --------------------------------------------------------------


def _source_has(module: str, name: str) -> bool:
    """Whether the source of Ray's `module` names `name` (a setting it reads)."""
    spec = importlib.util.find_spec(module)
    try:
        return bool(spec and spec.origin) and name in open(spec.origin, encoding="utf-8").read()
    except OSError:
        return False


def worker_preload(modules: tuple[str, ...]) -> dict[str, Any]:
    """ray.init's _system_config that makes the workers Ray starts import `modules` before they
    take work, so the first trials start in a warm process (~3 s less per worker on 2 cores,
    docs/bench/sweeps.md, "fixed cost"); {} when this Ray's workers take no such list."""
    if not _source_has("ray._private.workers.default_worker", "worker_preload_modules"):
        _slower("worker preload (--worker-preload-modules)", "workers import torch on their first trial")
        return {}
    return {"preload_python_modules": list(modules)}


def init_preloaded(modules: tuple[str, ...], **kwargs: Any) -> None:
    """ray.init(**kwargs) for a Ray started here, its workers importing `modules` before they take
    work (worker_preload). Ray takes that list in ray.init's _system_config, an argument it keeps
    for testing and reads from **kwargs; when this Ray's ray.init no longer reads it, Ray starts
    without it."""
    import ray

    if not _source_has("ray._private.worker", '"_system_config"'):
        _slower("ray.init(_system_config=...)", "workers import torch on their first trial")
    else:
        system_config = worker_preload(modules)
        if system_config:
            kwargs["_system_config"] = system_config
    ray.init(**kwargs)


def short_join_without_token() -> None:
    """A driver joining a cluster tries its first call to the GCS once a second for 20 s, and
    goes on trying when the GCS answers at once that the call carries no token (Ray 2.60 turns
    token authentication on by default): `sweep run --address` without a token waited 20 s for
    its refusal. Called only when no token is found: either the cluster takes calls without one
    (the first try answers) or it refuses every try. Ray reads RAY_gcs_server_port_wait_time_s
    as the number of tries (ray._private.node); 4 here, so the refusal takes about 4 s. A value
    the user set is kept."""
    if not _source_has("ray._private.node", GCS_WAIT_ENV):
        _slower(f"the Ray setting {GCS_WAIT_ENV}", "a join without a token is refused after 20 s")
        return
    os.environ.setdefault(GCS_WAIT_ENV, GCS_WAIT_TRIES)


def shutdown() -> None:
    """ray.shutdown(), less its slowest second: Ray stops its processes one by one, giving each
    a second to exit on SIGTERM, and the autoscaler monitor of a Ray started by ray.init sleeps
    through that second and is then killed anyway. It is killed first here (0.4 s in all instead
    of 1.4 s, docs/bench/sweeps.md). A Ray this process only joined has no such process."""
    import ray
    from ray._private import worker

    node = getattr(worker, "_global_node", None)
    processes = {} if node is None else getattr(node, "all_processes", None)
    if not hasattr(worker, "_global_node") or not isinstance(processes, dict):
        _slower("ray._private.worker._global_node.all_processes", "Ray stops its processes itself")
        processes = {}
    for info in processes.get("monitor", []):
        with contextlib.suppress(Exception):
            info.process.kill()
            info.process.wait(timeout=1)
    ray.shutdown()


def lighter_tune(own_callbacks: tuple[type, ...]) -> None:
    """Two costs Tune adds to every sweep that depthwidth does not need (docs/bench/sweeps.md,
    "fixed cost"):

    - Tune gives every trainable a runtime_env holding PL_DISABLE_FORK=1, for PyTorch Lightning,
      which depthwidth does not use. An actor with any runtime_env gets a new worker process, not
      one of the idle workers Ray started with torch and the trainable preloaded: ~3 s before the
      first trial runs, on 2 cores. The variables Tune forwards on purpose (cloud credentials,
      Ray Train's settings) still make a runtime_env when they are set.
    - Tune's usage tag counts the run's callbacks by class name, and imports its MLflow, W&B,
      Comet and Aim integrations to learn their names: with mlflow and wandb installed that is
      ~3 s of imports on every sweep, trackers on or off. When every callback is one of
      `own_callbacks`, they are counted as Tune counts any other callback, without the imports."""
    from ray.air._internal import usage
    from ray.tune.execution import class_cache

    defaults = getattr(class_cache, "DEFAULT_ENV_VARS", None)
    if isinstance(defaults, dict):
        defaults.pop("PL_DISABLE_FORK", None)
    else:
        _slower("ray.tune.execution.class_cache.DEFAULT_ENV_VARS", "trials start in new workers")
    count = getattr(usage, "_count_callbacks", None)
    if not callable(count):
        _slower("ray.air._internal.usage._count_callbacks", "Tune imports its tracker integrations")
        return
    if getattr(count, "_depthwidth", False):
        return

    def count_callbacks(given):
        given = list(given or [])
        if given and all(isinstance(c, own_callbacks) for c in given):
            return {"CustomCallback": len(given)}
        return count(given)

    count_callbacks._depthwidth = True
    usage._count_callbacks = count_callbacks


def fast_train_health_check() -> None:
    """Ray Train's controller polls its workers every RAY_TRAIN_HEALTH_CHECK_INTERVAL_S (2 s by
    default) and takes their reports at each poll, so every evaluation of a multi-worker trial
    waited up to 2 s (docs/bench/scale.md, "two data-parallel workers"): poll every 0.2 s. A
    value the user set is kept."""
    try:
        from ray.train.v2._internal import constants
    except ImportError:
        constants = None
    if getattr(constants, "HEALTH_CHECK_INTERVAL_S_ENV_VAR", None) != HEALTH_CHECK_ENV:
        _slower(f"Ray Train setting {HEALTH_CHECK_ENV}", "evaluations wait for Train's default poll")
        return
    os.environ.setdefault(HEALTH_CHECK_ENV, HEALTH_CHECK_S)
