"""sweeps/backends/ray_compat.py: each use of a private Ray name finds its target with the expected shape in
the installed Ray, and when the target moves the loopback guard and the auth reload raise while
the speed-only patches warn and leave Ray alone; and an embedded Ray started in this very process
listens on loopback only.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("ray")

import ray  # noqa: E402
from ray._private import ray_constants, services, worker  # noqa: E402

from sweeps.backends import ray_compat  # noqa: E402
from sweeps.running.driver import StoreWriter, TrackerFeed  # noqa: E402


@pytest.fixture
def ray_state(monkeypatch):
    """Whatever a patch changes in this process is put back after the test."""
    from ray.air._internal import usage
    from ray.tune.execution import class_cache

    monkeypatch.setenv(ray_compat.LOOPBACK_ENV, os.environ.get(ray_compat.LOOPBACK_ENV, "1"))
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", ray_constants.ENABLE_RAY_CLUSTER)
    monkeypatch.setattr(class_cache, "DEFAULT_ENV_VARS", dict(class_cache.DEFAULT_ENV_VARS))
    monkeypatch.setattr(usage, "_count_callbacks", usage._count_callbacks)
    monkeypatch.setenv(ray_compat.HEALTH_CHECK_ENV, "")  # so that the original is restored
    monkeypatch.delenv(ray_compat.HEALTH_CHECK_ENV)
    return usage, class_cache


# ------------------------------------------------------------------------ the loopback guard ----


def test_loopback_guard_makes_a_new_node_take_the_loopback_address(ray_state):
    assert ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR == ray_compat.LOOPBACK_ENV
    ray_compat.loopback_only()
    assert ray_constants.ENABLE_RAY_CLUSTER is False
    assert os.environ[ray_compat.LOOPBACK_ENV] == "0"
    assert services.get_node_ip_address() == "127.0.0.1"


@pytest.mark.parametrize("move", ["constant", "variable", "address"])
def test_loopback_guard_raises_when_its_target_moves(ray_state, monkeypatch, move):
    if move == "constant":
        monkeypatch.delattr(ray_constants, "ENABLE_RAY_CLUSTER")
    elif move == "variable":  # Ray reads another variable: ours would change nothing
        monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTERS_ENV_VAR", "RAY_SOMETHING_ELSE")
    else:  # the constant is there but no longer decides the node's address
        monkeypatch.setattr(services, "get_node_ip_address", lambda address=None: "10.1.2.3")
    with pytest.raises(ray_compat.RayCompatError, match="depthwidth relies on"):
        ray_compat.loopback_only()


def test_a_moved_loopback_target_stops_a_local_sweep_with_one_sentence(ray_state, monkeypatch):
    from sweeps.backends import cluster

    monkeypatch.delattr(ray_constants, "ENABLE_RAY_CLUSTER")
    with pytest.raises(cluster.ClusterError, match=r"^Ray \S+ has no .*ENABLE_RAY_CLUSTER.*\.$"):
        cluster.connect(None)
    assert not ray.is_initialized()


# ---------------------------------------------------------------------- the auth-mode reload ----


def test_auth_mode_reload_finds_its_target():
    from ray import _raylet

    assert callable(_raylet.Config.initialize)


def test_auth_mode_reload_raises_when_its_target_moves(monkeypatch):
    from ray import _raylet

    monkeypatch.delattr(_raylet, "Config")
    with pytest.raises(ray_compat.RayCompatError, match="Config.initialize"):
        ray_compat.reload_auth_mode()


# ------------------------------------------------------------------ speed only: warn, fall back --


def test_worker_preload_finds_its_target_and_warns_when_it_moves(monkeypatch):
    assert ray_compat.worker_preload(("torch",)) == {"preload_python_modules": ["torch"]}
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.endswith("default_worker") else real(name, *a),
    )
    with pytest.warns(RuntimeWarning, match="worker preload"):
        assert ray_compat.worker_preload(("torch",)) == {}


def test_init_preloaded_finds_its_target_and_warns_when_it_moves(monkeypatch):
    calls = []
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    ray_compat.init_preloaded(("torch",), include_dashboard=False)
    assert calls.pop() == {
        "include_dashboard": False,
        "_system_config": {"preload_python_modules": ["torch"]},
    }
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ray._private.worker" else real(name, *a),
    )
    with pytest.warns(RuntimeWarning, match="_system_config"):
        ray_compat.init_preloaded(("torch",), include_dashboard=False)
    assert calls.pop() == {"include_dashboard": False}  # Ray still starts, without the preload


def test_shutdown_finds_its_target_and_warns_when_it_moves(monkeypatch):
    assert hasattr(worker, "_global_node")  # the live node's all_processes: test_sweep_startup
    assert not ray.is_initialized()
    monkeypatch.delattr(worker, "_global_node")
    calls = []
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append(1))  # Ray's own needs the name too
    with pytest.warns(RuntimeWarning, match="all_processes"):
        ray_compat.shutdown()
    assert calls == [1]  # Ray still shut down, its own way


def test_lighter_tune_finds_its_targets(ray_state):
    usage, class_cache = ray_state
    assert class_cache.DEFAULT_ENV_VARS.get("PL_DISABLE_FORK") == "1"
    ray_compat.lighter_tune((StoreWriter, TrackerFeed))
    assert "PL_DISABLE_FORK" not in class_cache.DEFAULT_ENV_VARS
    assert getattr(usage._count_callbacks, "_depthwidth", False)


@pytest.mark.parametrize("target", ["DEFAULT_ENV_VARS", "_count_callbacks"])
def test_lighter_tune_warns_when_a_target_moves(ray_state, monkeypatch, target):
    usage, class_cache = ray_state
    monkeypatch.delattr(class_cache if target == "DEFAULT_ENV_VARS" else usage, target)
    with pytest.warns(RuntimeWarning, match=target):
        ray_compat.lighter_tune((StoreWriter, TrackerFeed))


def _move_train_health_check(monkeypatch) -> str:
    from ray.train.v2._internal import constants

    monkeypatch.setattr(constants, "HEALTH_CHECK_INTERVAL_S_ENV_VAR", "RAY_TRAIN_OTHER")
    return ray_compat.HEALTH_CHECK_ENV  # the setting left unset, named in the warning


def _move_gcs_wait(monkeypatch) -> str:
    monkeypatch.setattr(ray_compat, "GCS_WAIT_ENV", "RAY_gcs_some_other_setting")
    return "RAY_gcs_some_other_setting"


@pytest.mark.parametrize(
    "patch, env, value, move",
    [
        (
            "fast_train_health_check",
            ray_compat.HEALTH_CHECK_ENV,
            ray_compat.HEALTH_CHECK_S,
            _move_train_health_check,
        ),
        ("short_join_without_token", ray_compat.GCS_WAIT_ENV, ray_compat.GCS_WAIT_TRIES, _move_gcs_wait),
    ],
)
def test_a_setting_patch_finds_its_target_keeps_the_users_value_and_warns_when_it_moves(
    ray_state, monkeypatch, patch, env, value, move
):
    apply = getattr(ray_compat, patch)
    monkeypatch.delenv(env, raising=False)
    apply()
    assert os.environ[env] == value
    monkeypatch.setenv(env, "30")
    apply()  # a value the user set is kept
    assert os.environ[env] == "30"
    monkeypatch.delenv(env)
    moved = move(monkeypatch)
    with pytest.warns(RuntimeWarning, match=moved):
        apply()
    assert moved not in os.environ


# ------------------------------------------------------------- a local Ray, in this process ----


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads listening sockets from Linux's /proc")
def test_a_local_sweeps_ray_started_in_this_process_listens_on_loopback_only(ray_state):
    from test_security import _is_loopback, _listeners, _process_tree

    from sweeps.backends import cluster

    assert not ray.is_initialized()
    assert cluster.connect(None) is True  # what `sweep run` without --address does
    try:
        assert (
            ray.get(ray.remote(lambda: __import__("os").getpid()).remote()) != os.getpid()
        )  # a worker is up
        loaded = ray.remote(lambda names: [n for n in names if n in __import__("sys").modules])
        preload = list(cluster.WORKER_PRELOAD)  # the worker imported them before it took work:
        assert ray.get(loaded.remote(preload)) == preload  # Ray took init_preloaded's _system_config
        ray_pids = [p.process.pid for ps in worker._global_node.all_processes.values() for p in ps]
        pids = {os.getpid()} | {q for p in ray_pids for q in _process_tree(p)}
        listeners = _listeners(sorted(pids))
    finally:
        cluster.stop(True).join()
    names = {name for name, _, _ in listeners}
    assert {"gcs_server", "raylet"} <= names, listeners
    assert any(name.startswith("ray::") for name in names), listeners
    assert [x for x in listeners if not _is_loopback(x[1])] == []
