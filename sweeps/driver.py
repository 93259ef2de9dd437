"""The sweep driver's Tune callback: it records each trial in the store the moment its final report
arrives, and feeds the progress view (docs/design.md, "Execution").

The driver process is the store's single writer; a trial that restarts and repeats its final
report is written once. Imported only where Ray runs (`depthwidth sweep run`).
"""

from __future__ import annotations

import json

from ray import tune

from sweeps.progress import ProgressView
from sweeps.store import ResultStore, make_curve, make_row
from sweeps.trainable import FINAL_KEY


class StoreWriter(tune.Callback):
    """Writes finished trials to `store` and keeps `view` current. `written` holds the ids
    recorded by this driver run."""

    def __init__(self, sweep: str, store: ResultStore, view: ProgressView, labels: dict[str, str]):
        self.sweep, self.store, self.view, self.labels = sweep, store, view, labels
        self.written: set[str] = set()

    def on_step_end(self, iteration, trials, **info):
        self.view.draw(event=False)  # the clock ticks between events (throttled inside)

    def on_trial_start(self, iteration, trials, trial, **info):
        self.view.started(trial.config["trial"]["trial_id"])

    def on_trial_result(self, iteration, trials, trial, result, **info):
        cfg = trial.config["trial"]
        tid = cfg["trial_id"]
        if FINAL_KEY not in result:
            self.view.progressed(tid, result.get("progress"))
            return
        if tid in self.written:  # a restarted trial repeating its final report
            return
        final = json.loads(result[FINAL_KEY])
        res = final["result"]
        row = make_row(self.sweep, cfg, res, final["node"], final["resumed_from_step"])
        self.store.add_trial(row, make_curve(tid, res["curve"]))
        self.written.add(tid)
        self.view.finished(tid, res["status"], float(res["final_val_loss"]))
        if res["status"] == "failed":
            self.view.note(f"trial {self.labels[tid]} failed: {res['error']}")

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.view.note(f"trial {self.labels[trial.config['trial']['trial_id']]} lost its worker; "
                       f"restarting from its last checkpoint")

    def on_trial_error(self, iteration, trials, trial, **info):
        err = trial.get_error()
        msg = (str(err).strip().splitlines() or ["unknown error"])[-1] if err else "unknown error"
        self.view.errored(trial.config["trial"]["trial_id"], msg[:300])
