"""The three trackers behind sweeps/plans/tracking.py, each through its own well-kept library: MLflow
(MlflowClient), Weights & Biases (wandb, online or offline) and TensorBoard (tensorboardX writes
the event files, tensorboard's loader reads them back).

Every backend answers the same questions, so the exactly-once rule lives in one place: which
trials are finished (`finished_ids`), which steps a trial's run holds (`lookup`), and it creates,
reopens, logs to, finishes and releases a trial's run. Params are written once, when a run is
created, never on reopening, so a resumed trial is never refused for changed params.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sweeps.plans.tracking import STEP_KEY, Tracking, TrialInfo
from sweeps.results.feed import Enabled

TRIAL_TAG = "depthwidth.trial_id"
STATUS_TAG = "depthwidth.status"


def _ordered(metrics: dict[str, float]) -> list[tuple[str, float]]:
    """STEP_KEY last: a step counts as logged once its STEP_KEY is there."""
    return sorted(metrics.items(), key=lambda kv: (kv[0] == STEP_KEY, kv[0]))


def _scalar(v: Any) -> Any:
    return v if isinstance(v, (bool, int, float, str)) else json.dumps(v)


# -- MLflow -------------------------------------------------------------------------------------


class MlflowTracker:
    """One experiment named after the sweep; one run per trial, tagged with its trial_id."""

    def __init__(self, uri: str, experiment: str):
        # A tracker that does not answer should fail in seconds, not retry for minutes (the
        # default backs off up to 7 times); an explicit setting in the environment wins.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
        for name in ("mlflow", "alembic"):  # database set-up notices are not the user's business
            logging.getLogger(name).setLevel(logging.WARNING)
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        exp = self.client.get_experiment_by_name(experiment)
        if exp is not None and exp.lifecycle_stage == "deleted":
            raise RuntimeError(
                f"the experiment {experiment!r} is deleted in {uri}; restore it or "
                f"remove it for good (mlflow gc)"
            )
        self.exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(experiment)
        self.runs: dict[str, Any] = {}  # trial_id -> mlflow Run (first one found)
        token = None
        while True:
            page = self.client.search_runs([self.exp_id], max_results=1000, page_token=token)
            for run in page:
                tid = run.data.tags.get(TRIAL_TAG)
                if tid and tid not in self.runs:
                    self.runs[tid] = run
            token = page.token
            if not token:
                break

    def finished_ids(self) -> set[str]:
        return {tid for tid, r in self.runs.items() if STATUS_TAG in r.data.tags}

    def lookup(self, tid: str):
        run = self.runs.get(tid)
        if run is None:
            return None
        steps = {m.step for m in self.client.get_metric_history(run.info.run_id, STEP_KEY)}
        return steps, STATUS_TAG in run.data.tags

    def create(self, info: TrialInfo) -> None:
        from mlflow.entities import Param

        run = self.client.create_run(
            self.exp_id,
            run_name=info.name,
            tags={
                TRIAL_TAG: info.trial_id,
                "depthwidth.sweep": info.sweep,
                "depthwidth.axes": info.axes_text(),
            },
        )
        params = [Param(k, str(v)) for k, v in info.params().items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(run.info.run_id, params=params[i : i + 100])
        self.runs[info.trial_id] = run

    def reopen(self, info: TrialInfo) -> None:
        self.client.update_run(self.runs[info.trial_id].info.run_id, status="RUNNING")

    def log(self, tid: str, step: int, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(
            self.runs[tid].info.run_id, metrics=[Metric(k, v, now, step) for k, v in _ordered(metrics)]
        )

    def finish(self, tid: str, step: int, final: dict[str, float], status: str) -> None:
        from mlflow.entities import Metric, RunTag

        run_id = self.runs[tid].info.run_id
        now = int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            metrics=[Metric(k, v, now, step) for k, v in final.items()],
            tags=[RunTag(STATUS_TAG, status)],
        )
        self.client.set_terminated(run_id, "FAILED" if status == "failed" else "FINISHED")

    def release(self, tid: str) -> None:
        self.client.set_terminated(self.runs[tid].info.run_id, "KILLED")

    def close(self) -> None:
        pass


# -- Weights & Biases ---------------------------------------------------------------------------

_BLOCK = 32768  # the .wandb transaction log: LevelDB's log format, 32 KiB blocks


def wandb_records(path: str) -> Iterator[Any]:
    """The records of one offline run file (`run-ID.wandb`), as wandb's own protobuf messages.
    A record cut short by a crash ends the file."""
    from wandb.proto import wandb_internal_pb2 as pb

    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b":W&B":
        return
    pos, pending = 7, b""  # after the 7-byte header: ':W&B', magic, version
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # a block's tail too short for a record header is padding
            pos += left
            continue
        n, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        if pos + 7 + n > len(data):
            return
        chunk, pos = data[pos + 7 : pos + 7 + n], pos + 7 + n
        if kind in (1, 4):  # FULL, or LAST of a record split across blocks
            rec = pb.Record()
            rec.ParseFromString(pending + chunk if kind == 4 else chunk)
            pending = b""
            yield rec
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk


@dataclass
class OfflineRun:
    """What a W&B offline run's files hold: its history steps in file order, its summary, and
    the files (a resumed run has one folder per attempt)."""

    steps: list[int] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return "status" in self.summary  # a trial's run gets its status when it finishes


def wandb_offline_runs(folder: str) -> dict[str, OfflineRun]:
    """run id -> its OfflineRun, over every offline run folder under `folder`/wandb."""
    out: dict[str, OfflineRun] = {}
    for path in sorted(glob.glob(os.path.join(folder, "wandb", "offline-run-*", "run-*.wandb"))):
        rid = re.sub(r"^run-|\.wandb$", "", os.path.basename(path))
        entry = out.setdefault(rid, OfflineRun())
        entry.files.append(path)
        for rec in wandb_records(path):
            kind = rec.WhichOneof("record_type")
            if kind == "history":
                entry.steps.append(int(rec.history.step.num))
            elif kind == "summary":
                for item in rec.summary.update:
                    if item.key and not item.key.startswith("_"):
                        entry.summary[item.key] = json.loads(item.value_json)
    return out


class WandbTracker:
    """One W&B run per trial, its run id the trial_id, resumed with resume="allow"."""

    def __init__(self, project: str, mode: str, entity: str | None, folder: str):
        import wandb

        self.wandb, self.project, self.mode, self.entity, self.folder = wandb, project, mode, entity, folder
        os.makedirs(folder, exist_ok=True)
        self.open: dict[str, Any] = {}
        self.last: dict[str, int] = {}  # the highest step each open run holds
        self.known: dict[str, tuple[set[int], bool]] = {}
        if mode == "offline":
            for rid, e in wandb_offline_runs(folder).items():
                self.known[rid] = (set(e.steps), e.finished)
        else:
            api = wandb.Api(timeout=20)
            path = f"{entity or api.default_entity}/{project}"
            try:
                runs = list(api.runs(path, per_page=1000))
            except Exception as exc:  # noqa: BLE001 - a new project has no runs yet
                if "could not find project" not in str(exc).lower():
                    raise
                runs = []
            self.api, self.path = api, path
            self.remote = {r.id: r for r in runs}

    def finished_ids(self) -> set[str]:
        if self.mode == "offline":
            return {rid for rid, (_, done) in self.known.items() if done}
        return {rid for rid, r in self.remote.items() if "status" in r.summary}

    def lookup(self, tid: str):
        if self.mode == "offline":
            return self.known.get(tid)
        run = self.remote.get(tid)
        if run is None:
            return None
        steps = {int(h["_step"]) for h in run.scan_history(keys=["_step", STEP_KEY])}
        self.known[tid] = (steps, "status" in run.summary)
        return self.known[tid]

    def _init(self, info: TrialInfo, config: dict[str, Any] | None):
        settings: dict[str, Any] = dict(silent=True, console="off", x_disable_stats=True, save_code=False)
        if "x_transaction_log_flush_interval" in getattr(self.wandb.Settings, "model_fields", {}):
            # the run file gets each step within a second (default 15 s), so a driver killed
            # mid-sweep leaves the steps it logged in the file, where a resumed run finds them
            settings["x_transaction_log_flush_interval"] = 1.0
        run = self.wandb.init(
            project=self.project,
            entity=self.entity,
            id=info.trial_id,
            name=info.name,
            group=info.sweep,
            config=config,
            mode=self.mode,
            dir=self.folder,
            resume="allow",
            reinit="create_new",
            tags=[info.sweep],
            settings=self.wandb.Settings(**settings),
        )
        steps = (self.known.get(info.trial_id) or (set(), False))[0]
        self.last[info.trial_id] = max(steps, default=-1)
        return run

    def create(self, info: TrialInfo) -> None:
        config = {k: _scalar(v) for k, v in info.params().items()}
        self.open[info.trial_id] = self._init(info, config)

    def reopen(self, info: TrialInfo) -> None:
        self.open[info.trial_id] = self._init(info, None)  # params stay as first written

    def log(self, tid: str, step: int, metrics: dict[str, float]) -> bool:
        if step <= self.last.get(tid, -1):
            return False  # W&B takes steps in increasing order only; this one cannot be added
        self.open[tid].log(dict(_ordered(metrics)), step=step, commit=True)
        self.last[tid] = step
        return True

    def finish(self, tid: str, step: int, final: dict[str, float], status: str) -> None:
        run = self.open.pop(tid)
        run.summary.update({**final, "status": status})
        run.tags = tuple(run.tags or ()) + (status,)
        run.finish(exit_code=1 if status == "failed" else 0)

    def release(self, tid: str) -> None:
        run = self.open.pop(tid, None)
        if run is not None:
            run.mark_preempting()
            run.finish(exit_code=1)

    def close(self) -> None:
        for tid in list(self.open):
            self.release(tid)
        self.wandb.teardown()


# -- TensorBoard --------------------------------------------------------------------------------


def tensorboard_scalars(folder: str) -> list[tuple[str, int]]:
    """(tag, step) of every scalar and text value in a run folder's event files, in file order."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    out = []
    for path in sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*"))):
        for event in EventFileLoader(path).Load():
            for v in event.summary.value:
                out.append((v.tag, int(event.step)))
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9=._-]+", "_", text).strip("_")[:60]


class TensorBoardTracker:
    """One run folder per trial, `<logdir>/<label>-<trial_id>`: `tensorboard --logdir` shows
    each trial as a run, its axes in the HParams tab."""

    STATUS = "status"

    def __init__(self, logdir: str):
        self.logdir = logdir
        os.makedirs(logdir, exist_ok=True)
        self.folders: dict[str, str] = {}
        for name in sorted(os.listdir(logdir)):
            m = re.search(r"([0-9a-f]{16})$", name)
            if m and os.path.isdir(os.path.join(logdir, name)):
                self.folders.setdefault(m.group(1), os.path.join(logdir, name))
        self.writers: dict[str, Any] = {}

    def finished_ids(self) -> set[str]:
        return {
            tid
            for tid, f in self.folders.items()
            if any(tag.startswith(self.STATUS) for tag, _ in tensorboard_scalars(f))
        }

    def lookup(self, tid: str):
        folder = self.folders.get(tid)
        if folder is None:
            return None
        seen = tensorboard_scalars(folder)
        return (
            {s for tag, s in seen if tag == STEP_KEY},
            any(tag.startswith(self.STATUS) for tag, _ in seen),
        )

    def _writer(self, tid: str):
        from tensorboardX import SummaryWriter

        w = SummaryWriter(self.folders[tid], flush_secs=5)
        self.writers[tid] = w
        return w

    def create(self, info: TrialInfo) -> None:
        from tensorboardX.summary import hparams

        name = f"{_slug(info.name)}-{info.trial_id}" if info.name else info.trial_id
        self.folders[info.trial_id] = os.path.join(self.logdir, name)
        w = self._writer(info.trial_id)
        hp = {k: _scalar(v) for k, v in info.params().items()}
        exp, ssi, _ = hparams(hp, {STEP_KEY: 0.0, "final_val_loss": 0.0})
        fw = w._get_file_writer()
        fw.add_summary(exp)
        fw.add_summary(ssi)
        w.add_text("config", "```\n" + json.dumps(info.configs, indent=1, sort_keys=True) + "\n```", 0)
        w.flush()

    def reopen(self, info: TrialInfo) -> None:
        self._writer(info.trial_id)

    def log(self, tid: str, step: int, metrics: dict[str, float]) -> None:
        w = self.writers[tid]
        for k, v in _ordered(metrics):
            w.add_scalar(k, v, step)
        w.flush()

    def finish(self, tid: str, step: int, final: dict[str, float], status: str) -> None:
        w = self.writers.pop(tid)
        for k, v in final.items():
            w.add_scalar(f"final/{k}", v, step)
        w.add_text(self.STATUS, status, step)
        w.close()

    def release(self, tid: str) -> None:
        w = self.writers.pop(tid, None)
        if w is not None:
            w.close()

    def close(self) -> None:
        for tid in list(self.writers):
            self.release(tid)


# -- from a Tracking config to the trackers -----------------------------------------------------


def factories(tracking: Tracking, sweep: str, store_root: str | None, store_display: str) -> list[Enabled]:
    """Each tracker the config enables: a function building it (called in its own thread), and
    the sentence saying how to send the stored results later."""
    out = []
    if tracking.mlflow:
        uri = tracking.mlflow
        later = f"`depthwidth export {store_display} --mlflow {uri}` sends what it lacks."
        out.append(Enabled("mlflow", lambda: MlflowTracker(uri, sweep), later))
    if tracking.wandb_project:
        folder = os.environ.get("WANDB_DIR") or store_root or os.getcwd()
        t = tracking
        later = (
            f"`depthwidth export {store_display} --wandb {t.wandb_project}"
            f"{' --wandb-mode offline' if t.wandb_mode == 'offline' else ''}` sends "
            f"what it lacks."
        )
        out.append(
            Enabled(
                "wandb", lambda: WandbTracker(t.wandb_project, t.wandb_mode, t.wandb_entity, folder), later
            )
        )
    if tracking.tensorboard:
        logdir = tensorboard_dir(tracking, store_root)
        later = f"`depthwidth export {store_display} --tensorboard {logdir}` writes what it lacks."
        out.append(Enabled("tensorboard", lambda: TensorBoardTracker(logdir), later))
    return out


def tensorboard_dir(tracking: Tracking, store_root: str | None) -> str:
    """Where the TensorBoard tracker writes: the folder named, else `<store>/tensorboard`."""
    if isinstance(tracking.tensorboard, str):
        return tracking.tensorboard
    return os.path.join(store_root or os.getcwd(), "tensorboard")
