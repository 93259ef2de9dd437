"""The sweep driver's Tune callbacks: one records each trial in the store the moment its final
report arrives and feeds the progress view (docs/design.md, "Execution"); the other passes every
evaluation and every stored trial on to the experiment trackers (sweeps/results/feed.py).

The driver process is the store's single writer; a trial that restarts and repeats its final
report is written once. A store that cannot be written stops the sweep (`StopOnStoreFailure`)
with what is already stored kept. Imported only where Ray runs (`depthwidth sweep run`).
"""

from __future__ import annotations

import os

from ray import tune
from ray.tune.search import Searcher

from runstore.files import StoreError
from runstore.store import ResultStore, make_curve
from sweeps.plans.tracking import TrialInfo, eval_metrics
from sweeps.plans.trialconfig import TrialConfig
from sweeps.plans.trialoutcome import OUTCOME_KEY, TrialOutcome
from sweeps.results.feed import Trackers
from sweeps.running.outcome import is_oom
from sweeps.running.progress import ProgressView
from sweeps.running.record import StoredRun, record_of
from sweeps.running.trainable import RESUME_NOTE_KEY

_TUNE_KEYS = (
    "done",
    "training_iteration",
    "time_total_s",
    "time_this_iter_s",
    "timestamp",
    "time_since_restore",
    "iterations_since_restore",
    "timesteps_total",
    "timesteps_since_restore",
    "episodes_total",
    "pid",
    "node_ip",
    "hostname",
    "date",
    "config",
    "checkpoint_dir_name",
    "should_checkpoint",
    "experiment_tag",
)


class TrialFeed(Searcher):
    """Hands Tune the sweep's trials one at a time, in order. (A grid_search over the trial
    configs deep-copies the whole list for every trial it makes: O(n²), minutes of driver time
    before the first of 5,000 trials starts.) Nothing to save: every driver run is a new Tune
    experiment, and the store is the sweep's state."""

    def __init__(self, configs: list[dict]):
        super().__init__()
        self._configs = iter(configs)

    def suggest(self, trial_id: str):
        return next(self._configs, Searcher.FINISHED)

    def on_trial_complete(self, trial_id: str, result=None, error: bool = False) -> None:
        pass

    def save(self, checkpoint_path: str) -> None:
        pass

    def restore(self, checkpoint_path: str) -> None:
        pass


class StoreWriter(tune.Callback):
    """Writes finished trials to `store` and keeps `view` current. `written` holds the ids
    recorded by this driver run."""

    def __init__(self, sweep: str, store: ResultStore, view: ProgressView, labels: dict[str, str]):
        self.sweep, self.store, self.view, self.labels = sweep, store, view, labels
        self.written: set[str] = set()
        self.failure: StoreError | None = None  # the store could not be written: stop the sweep
        self.stored: list[StoredRun] | None = None  # for the trackers
        self.noted: set[str] = set()  # trials whose resume note was shown

    def on_step_end(self, iteration, trials, **info):
        self.view.draw(event=False)  # the clock ticks between events (throttled inside)

    def on_trial_start(self, iteration, trials, trial, **info):
        self.view.started(TrialConfig.id_of(trial.config))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        tc = TrialConfig.from_dict(trial.config)
        if result.get(RESUME_NOTE_KEY) and tc.trial_id not in self.noted:  # a damaged checkpoint passed over
            self.noted.add(tc.trial_id)
            self.view.note(f"trial {self.labels[tc.trial_id]}: {result[RESUME_NOTE_KEY]}")
        if self.store_report(tc, result):
            result[OUTCOME_KEY] = None  # stored: Tune keeps the last result of every trial, not the curve

    def store_report(self, tc: TrialConfig, result: dict) -> bool:
        """Record the finished run that the report `result` of trial `tc` carries: the trial's own,
        or one of its cooldown branches' (sweeps/plans/branches.py). False for an evaluation's
        report, for a run stored already (a restart repeating its report), or when the store failed."""
        outcome = TrialOutcome.from_report(result)
        if outcome is None:  # an evaluation
            self.view.progressed(tc.trial_id, result.get("progress"))
            return False
        tid = outcome.trial_id
        if tid in self.written or self.failure is not None:
            return False
        if tid != tc.trial_id:  # one of the run's cooldown branches
            tc = tc.branch(tid)
        run = record_of(self.sweep, tc, outcome)
        try:
            self.store.add_trial(run.record, run.curve, run.beside)
        except StoreError as exc:  # e.g. a full disk: keep what is stored, stop the sweep
            self.failure = exc
            return False
        self.written.add(tid)
        if self.stored is not None:
            self.stored.append(run)
        self.view.finished(tid, run.record.status, run.record.final_val_loss)
        if run.record.status == "failed":
            self.view.note(f"trial {self.labels[tid]} failed: {run.record.error}")
        return True

    def on_trial_recover(self, iteration, trials, trial, **info):
        tid = TrialConfig.id_of(trial.config)
        why = (
            "was killed by Ray's memory monitor"
            if error_line(trial).startswith("killed by Ray's")
            else "lost its worker"
        )
        self.view.note(f"trial {self.labels[tid]} {why}; restarting from its last checkpoint")

    def on_trial_error(self, iteration, trials, trial, **info):
        self.view.errored(TrialConfig.id_of(trial.config), error_line(trial))


def error_line(trial) -> str:
    """One line for a trial's Ray error. Tune writes the error next to the driver first (the
    store's copy follows later), so that file is read when it is there."""
    text = ""
    try:
        if trial.error_file and os.path.exists(trial.error_file):
            with open(trial.error_file, encoding="utf-8", errors="replace") as f:
                text = f.read()
        else:
            text = str(trial.get_error() or "")
    except (OSError, ValueError):
        pass
    if is_oom(text):
        return "killed by Ray's memory monitor: the node ran out of memory (OutOfMemoryError)"
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("Failure #")]
    return (lines[-1] if lines else "unknown error")[:300]


class StopOnStoreFailure(tune.Stopper):
    """Stops every trial once the store cannot be written: they keep their checkpoints, and
    nothing more could be recorded."""

    def __init__(self, writer: StoreWriter):
        self.writer = writer

    def __call__(self, trial_id, result) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.writer.failure is not None


class TrackerFeed(tune.Callback):
    """Passes each evaluation to the trackers while a trial trains, and each trial the store
    has just recorded (its final metrics and status). Placed after StoreWriter, so a trial
    reaches the trackers only once it is safe in the store; warnings go through the view."""

    def __init__(self, trackers: Trackers, infos: dict[str, TrialInfo], writer: StoreWriter):
        self.trackers, self.infos, self.writer = trackers, infos, writer
        writer.stored = []

    def __getstate__(self):  # Tune pickles its callbacks with the experiment; threads stay here
        return {**self.__dict__, "trackers": None}

    def on_step_end(self, iteration, trials, **info):
        for message in self.trackers.warnings():
            self.writer.view.note(message)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        tid = TrialConfig.id_of(trial.config)
        if OUTCOME_KEY not in result and "step" in result and tid in self.infos:
            self.trackers.evaluation(
                self.infos[tid], int(result["step"]), eval_metrics(result, skip=_TUNE_KEYS)
            )
        while self.writer.stored:
            run = self.writer.stored.pop(0)
            tid = run.record.trial_id
            if tid in self.infos:
                row = {**run.record.to_dict(), **run.beside}
                self.trackers.stored(self.infos[tid], row, make_curve(tid, run.curve))
