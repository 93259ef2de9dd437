"""The adaptive sweep's Ray Tune Searcher: hands Tune the trials sweeps.designing.adaptive.Policy chooses,
one round at a time, refitting b on the store after each round (sweeps/README.md, "Adaptive sweeps").

The store is its state: on a rerun it is rebuilt from the stored runs and <store>/adaptive.jsonl,
finishes the trials chosen before an interruption, then continues choosing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ray.tune.search import Searcher

from sweeps.designing.adaptive import (
    LOG,
    Adaptive,
    Cell,
    Policy,
    log_record,
    read_log,
    spec_cells,
)
from sweeps.plans.trialconfig import TrialConfig


class AdaptiveSearch(Searcher):
    """`configs`: Tune's config per runnable trial of the spec (what the store lacks). `chosen`
    holds the trial ids this driver run handed out; `stop_reason` why it stopped choosing."""

    def __init__(self, configs: list[dict], spec, store, cfg: Adaptive, note=print):
        super().__init__()
        self.configs = {TrialConfig.id_of(c): c for c in configs}
        self.spec_ids = {t.trial_id for t in spec.trials}
        self.store, self.note = store, note
        self.cells = spec_cells(spec)
        self.policy = Policy(self.cells, cfg)
        self.queue: list[dict] = []
        self.running: set[str] = set()  # Tune's ids handed out and not complete
        self.chosen: set[str] = set()
        self.stop_reason: str | None = None
        log = read_log(store.loc.read_text(LOG)) if store.exists(LOG) else []
        self.round = sum(1 for r in log if r.get("kind") == "estimate")
        self.logged = {tid for r in log if r.get("kind") == "choice" for tid in r.get("trial_ids", [])}

    # -- Tune's side -------------------------------------------------------------------------
    def suggest(self, trial_id: str):
        if not self.queue and self.stop_reason is None:
            if self.running:
                return None  # a round is still training: refit once it is done
            self._next_round()
        if not self.queue:
            return Searcher.FINISHED
        cfg = self.queue.pop(0)
        self.running.add(trial_id)
        self.chosen.add(TrialConfig.id_of(cfg))
        return cfg

    def on_trial_complete(self, trial_id: str, result=None, error: bool = False) -> None:
        self.running.discard(trial_id)

    def save(self, checkpoint_path: str) -> None:
        pass  # the store and adaptive.jsonl are the state; a rerun rebuilds from them

    def restore(self, checkpoint_path: str) -> None:
        pass

    # -- choosing ----------------------------------------------------------------------------
    def _stored(self) -> set[str]:
        return set(self.store.runs()["trial_id"]) & self.spec_ids if self.store.has_runs() else set()

    def _next_round(self) -> None:
        stored = self._stored()
        # chosen before an interruption (or this run) and not stored: run those first, once
        pending = [t for t in sorted(self.logged - stored) if t in self.configs and t not in self.chosen]
        if pending:
            self.note(f"adaptive: {len(pending)} trials chosen before the interruption run first")
            self.queue = [self.configs[t] for t in pending]
            return
        done = {c.key for c in self.cells if any(t in stored or t in self.chosen for t in c.trial_ids)}
        decision = self.policy.decide(self._fit_runs(stored), done)
        self.round += 1
        records = [decision.estimate.record(self.round)]
        for cell, why in decision.picks:
            ids = [t for t in cell.trial_ids if t in self.configs and t not in stored]
            self.queue += [self.configs[t] for t in ids]
            self.logged |= set(ids)
            records.append(_choice(cell, ids, why, self.round))
        if decision.stop:
            self.stop_reason = decision.stop
            records.append(log_record("stop", round=self.round, reason=decision.stop))
            self.note(f"adaptive: stopped, {decision.stop}")
        else:
            self.note(
                f"adaptive: round {self.round}, {len(decision.picks)} cells chosen "
                f"({decision.estimate.state_text()})"
            )
        self._append(records)

    def _fit_runs(self, stored: set[str]):
        """The stored runs as the report fits them: each shape at its best tuning setting."""
        import pandas as pd

        from analysis.laws import tuning
        from analysis.readers.inputs import load

        if not stored:
            return pd.DataFrame(columns=["depth", "width", "n_params", "loss"])
        ds = load(self.store.location)
        ds, _ = tuning.apply(replace(ds, runs=ds.runs[ds.runs["trial_id"].isin(stored)]))
        return ds.runs

    def _append(self, records: list[dict[str, Any]]) -> None:
        import json

        old = self.store.loc.read_text(LOG) if self.store.exists(LOG) else ""
        if old and not old.endswith("\n"):
            old = old[: old.rfind("\n") + 1]  # a line cut short by a killed driver
        self.store.loc.write_text(LOG, old + "".join(json.dumps(r) + "\n" for r in records))


def _choice(cell: Cell, ids: list[str], why: str, round_no: int) -> dict[str, Any]:
    d, w, s = cell.key
    return log_record(
        "choice", round=round_no, depth=d, width=w, seed=s, trial_ids=ids, flops=cell.cost, reason=why
    )
