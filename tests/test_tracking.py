"""Experiment trackers for real: MLflow on a local SQLite store read back with MlflowClient, W&B in
offline mode read back from its run files, TensorBoard event files read back with tensorboard's
loader. One sweep logs to all three; it is interrupted (the driver killed while a trial holds at
its first checkpoint), resumed, rerun and extended, then exported to fresh trackers, and after each
step every tracker holds exactly one run per stored trial with each evaluation step once."""

from __future__ import annotations

import glob
import logging
import os
import signal
import socket
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from helpers import (
    hook_env,
    ray_sweep,
    run_sweep,
    spec_toml,
    starts,
    sweep_argv,
    trial_ids,
    wait_for,
    write_spec,
)

pytest.importorskip("ray")
mlflow = pytest.importorskip("mlflow")
pytest.importorskip("wandb")
pytest.importorskip("tensorboardX")
pytest.importorskip("tensorboard")

STEPS = [5, 10, 15, 20]  # steps = 20, eval_every = 5
logging.getLogger("mlflow").setLevel(logging.WARNING)  # its database set-up notices


def tracked_spec(folder: Path, name: str, widths, db: Path) -> Path:
    extra = (
        f'[tracking]\nmlflow = "sqlite:///{db}"\nwandb = {{ project = "{name}", mode = "offline" }}\n'
        f"tensorboard = true\n"
    )
    return write_spec(folder, ray_sweep(name, [1], widths, steps=20, extra=extra), "trk.toml")


def mlflow_runs(db: Path, experiment: str) -> dict[str, dict]:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name(experiment)
    out: dict[str, dict] = {}
    for run in client.search_runs([exp.experiment_id]):
        tid = run.data.tags["depthwidth.trial_id"]
        assert tid not in out, f"two MLflow runs for trial {tid}"
        out[tid] = {
            "steps": [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")],
            "status": run.data.tags.get("depthwidth.status"),
            "params": run.data.params,
            "final": [m.step for m in client.get_metric_history(run.info.run_id, "final_val_loss")],
        }
    return out


def wandb_runs(folder: Path) -> dict[str, dict]:
    from sweeps.results.trackers import wandb_offline_runs

    return {
        rid: {"steps": e.steps, "status": e.summary.get("status"), "files": len(e.files)}
        for rid, e in wandb_offline_runs(str(folder)).items()
    }


def tensorboard_runs(logdir: Path) -> dict[str, dict]:
    from sweeps.results.trackers import tensorboard_scalars

    out = {}
    for folder in sorted(glob.glob(str(logdir / "*"))):
        seen = tensorboard_scalars(folder)
        tid = folder.rsplit("-", 1)[1]
        assert tid not in out
        out[tid] = {
            "steps": [s for tag, s in seen if tag == "val_loss"],
            "status": [tag for tag, _ in seen if tag.startswith("status")],
            "files": len(glob.glob(folder + "/events.out.tfevents.*")),
        }
    return out


def sqlite_steps(db: Path, tid: str) -> list[int]:
    """The val_loss steps of a trial's MLflow run, read straight from the SQLite file (read-only:
    a second MlflowClient would race the driver's own set-up of the database)."""
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [
            r[0]
            for r in con.execute(
                "SELECT m.step FROM metrics m JOIN tags t ON m.run_uuid = t.run_uuid WHERE "
                "t.key = 'depthwidth.trial_id' AND t.value = ? AND m.key = 'val_loss' ORDER BY m.step",
                (tid,),
            )
        ]
    finally:
        con.close()


def live_step(db: Path, store: Path, tid: str) -> bool:
    """The trial's first evaluation (step 5) has reached all three trackers."""
    try:
        return (
            sqlite_steps(db, tid) == [5]
            and wandb_runs(store).get(tid, {}).get("steps") == [5]
            and tensorboard_runs(store / "tensorboard").get(tid, {}).get("steps") == [5]
        )
    except Exception:  # a database or file still being created
        return False


def assert_exactly_once(
    ids: set[str], db: Path, experiment: str, wandb_dir: Path, logdir: Path, finished: set[str] | None = None
) -> tuple[dict, dict, dict]:
    """One run per trial in each tracker, each evaluation step once, the status of the finished."""
    finished = ids if finished is None else finished
    ml, wb, tb = mlflow_runs(db, experiment), wandb_runs(wandb_dir), tensorboard_runs(logdir)
    for name, runs in (("mlflow", ml), ("wandb", wb), ("tensorboard", tb)):
        assert set(runs) == ids, (name, set(runs), ids)
        for tid in finished:
            assert runs[tid]["steps"] == STEPS, (name, tid, runs[tid]["steps"])
    for tid in finished:
        assert ml[tid]["status"] == "ok" and ml[tid]["final"] == [20]
        assert ml[tid]["params"]["width"] in ("8", "16", "12") and ml[tid]["params"]["model.depth"] == "1"
        assert wb[tid]["status"] == "ok"
        assert tb[tid]["status"] == ["status/text_summary"]
    return ml, wb, tb


@pytest.mark.slow
def test_sweep_with_three_trackers_interrupted_resumed_rerun_extended(ray_cluster, tmp_path):
    db, store = tmp_path / "mlruns.db", tmp_path / "store"
    spec = tracked_spec(tmp_path, "tracked", [8, 16], db)
    first, held = trial_ids(spec)
    hook = tmp_path / "hook"
    env = {**hook_env(ray_cluster.env, hook), "WANDB_SILENT": "true"}
    env.pop("WANDB_DIR", None)
    (hook / "hold").write_text(held)  # `held` waits after its step-5 checkpoint
    args = ["run", str(spec), "--address", ray_cluster.address, "--storage", str(store), "--no-analyze"]
    log = tmp_path / "driver.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(
            sweep_argv(*args), env=env, text=True, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for(lambda: (hook / f"{held}.pid").exists(), 150, "the held trial's checkpoint", proc)
        wait_for(lambda: (store / "runs.parquet").exists(), 150, "the other trial in the store", proc)
        # both trial processes trained at once, and the progress line said so
        assert "| 2 running |" in log.read_text(), log.read_text()
        try:
            wait_for(lambda: live_step(db, store, held), 90, "the held trial's step 5 in each tracker", proc)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the driver said:\n{log.read_text()}") from None
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, mid-sweep
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    (hook / "hold").unlink()
    wandb_dir, logdir = store, store / "tensorboard"
    ml = mlflow_runs(db, "tracked")  # the driver is gone: MlflowClient can open the database
    assert ml[held]["steps"] == [5] and ml[held]["status"] is None  # live, cut short

    resumed = run_sweep(args, env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "1 trials to run (1 already in the store)" in resumed.stdout
    assert [s for t, s in starts(hook) if t == held] == [0, 5]  # resumed from its checkpoint
    assert "Traceback" not in resumed.stdout + resumed.stderr
    assert "Token authentication" not in resumed.stderr and "INFO" not in resumed.stderr
    ids = {first, held}
    _, wb, tb = assert_exactly_once(ids, db, "tracked", wandb_dir, logdir)
    assert wb[held]["files"] == 2 and tb[held]["files"] == 2  # the resumed attempt continued the run
    before = {
        p: os.path.getmtime(p)
        for p in glob.glob(str(store / "wandb" / "offline-run-*" / "*.wandb"))
        + glob.glob(str(logdir / "*" / "events*"))
    }

    again = run_sweep(args, env)  # a finished sweep: nothing runs, nothing is logged
    assert again.returncode == 0 and "nothing to run" in again.stdout, again.stdout + again.stderr
    assert_exactly_once(ids, db, "tracked", wandb_dir, logdir)
    after = {
        p: os.path.getmtime(p)
        for p in glob.glob(str(store / "wandb" / "offline-run-*" / "*.wandb"))
        + glob.glob(str(logdir / "*" / "events*"))
    }
    assert after == before

    spec = tracked_spec(tmp_path, "tracked", [8, 12, 16], db)  # one more width
    new = set(trial_ids(spec)) - ids
    extended = run_sweep(args, env)
    assert extended.returncode == 0, extended.stdout + extended.stderr
    assert "1 trials to run (2 already in the store)" in extended.stdout
    assert_exactly_once(ids | new, db, "tracked", wandb_dir, logdir)
    assert all(os.path.getmtime(p) == t for p, t in before.items())  # old runs untouched

    # `depthwidth export` to fresh trackers, twice: the second sends nothing
    db2, wandb2, logdir2 = tmp_path / "export.db", tmp_path / "wandb-export", tmp_path / "tb-export"
    exp_env = {**env, "WANDB_DIR": str(wandb2)}
    export = [
        "-m",
        "depthwidth.cli",
        "export",
        str(store),
        "--mlflow",
        f"sqlite:///{db2}",
        "--wandb",
        "tracked",
        "--wandb-mode",
        "offline",
        "--tensorboard",
        str(logdir2),
    ]
    import sys

    for created in (3, 0):
        res = subprocess.run(
            [sys.executable, *export], env=exp_env, capture_output=True, text=True, timeout=300
        )
        assert res.returncode == 0, res.stdout + res.stderr
        for name in ("mlflow", "wandb", "tensorboard"):
            n_steps = 4 * created
            assert f"{name}: done; {created} runs created, {n_steps} steps logged" in res.stdout, res.stdout
        assert_exactly_once(ids | new, db2, "tracked", wandb2, logdir2)
    runs = pd.read_parquet(store / "runs.parquet")
    assert sorted(runs["trial_id"]) == sorted(ids | new)


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.slow
def test_unreachable_trackers_are_one_warning_each(tmp_path):
    """MLflow at a closed port and W&B online against a closed port with no key: the sweep
    finishes, stores every trial, and says so in one warning line per tracker."""
    store = tmp_path / "store"
    spec = write_spec(tmp_path, ray_sweep("down", [1], [8], steps=10), "down.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "WANDB"))}
    env.update(
        WANDB_BASE_URL=f"http://127.0.0.1:{_closed_port()}",
        WANDB_SILENT="true",
        HOME=str(tmp_path / "home"),
        MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
    )
    res = run_sweep(
        [
            "run",
            str(spec),
            "--storage",
            str(store),
            "--no-analyze",
            "--mlflow",
            f"http://127.0.0.1:{_closed_port()}",
            "--wandb",
            "down",
        ],
        env,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    warnings = [line for line in res.stdout.splitlines() if line.startswith("tracking: ")]
    assert len(warnings) == 2, res.stdout
    assert any(w.startswith("tracking: mlflow failed") and "depthwidth export" in w for w in warnings)
    assert any(w.startswith("tracking: wandb failed") for w in warnings)
    assert "Traceback" not in res.stdout + res.stderr
    runs = pd.read_parquet(store / "runs.parquet")
    assert list(runs["status"]) == ["ok"]


def test_tracking_table_is_validated(tmp_path):
    from sweeps.plans.spec import SpecError, parse_spec

    base = spec_toml("t", base={}, grid={"depth": [1]})
    for table, message in [
        ("[tracking]\nmlflow = 3\n", "tracking.mlflow = 3 is invalid: expected a tracking URI"),
        (
            '[tracking]\nwandb = { project = "p", mode = "later" }\n',
            'tracking.wandb.mode = \'later\' is invalid: expected "online" or "offline".',
        ),
        ('[tracking]\nwandb = "p"\n', "tracking.wandb = 'p' is invalid: expected a table"),
        ("[tracking]\ntensorboard = 1\n", "tracking.tensorboard = 1 is invalid"),
        (
            "[tracking]\ncomet = true\n",
            "[tracking] has no key 'comet'; known keys: mlflow, wandb, tensorboard.",
        ),
    ]:
        with pytest.raises(SpecError) as err:
            parse_spec(base + table, "s.toml")
        assert message in str(err.value), str(err.value)
        assert str(err.value).count(". ") == 0 or "known keys" in str(err.value)
    from sweeps.plans.tracking import eval_metrics

    point = {"trial_id": "a", "step": 5, "val_loss": float("nan"), "accuracy": float("nan"), "lr": 1e-3}
    got = eval_metrics(point)  # a diverged loss is logged; another family's empty column is not
    assert set(got) == {"val_loss", "lr"} and got["lr"] == 1e-3
    spec = parse_spec(base + '[tracking]\nmlflow = "sqlite:///x.db"\ntensorboard = true\n', "s.toml")
    assert spec.tracking.enabled == ("mlflow", "tensorboard")
    # a bad value on the command line: exit 2, nothing written
    path = write_spec(tmp_path, ray_sweep("flags", [1], [8]), "s.toml")
    res = run_sweep(
        ["run", str(path), "--storage", str(tmp_path / "store"), "--wandb", "p", "--wandb-mode", "sometimes"],
        dict(os.environ),
    )
    assert res.returncode == 2 and "--wandb-mode" in res.stderr
    assert not (tmp_path / "store").exists()
