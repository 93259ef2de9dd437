"""Experiment trackers fed by the sweep driver: one tracker run per trial, keyed by trial_id, with
every evaluation logged once at its step and the final row's metrics with the status tagged.

The driver already receives every report, so it logs from there (no logging actors in the
trials). Each tracker gets its own thread: a call that blocks or fails never holds up the sweep,
and a tracker that fails is one warning line, after which the sweep goes on without it. Exactly
once: before writing to a trial's run, the thread asks the tracker which steps that run already
holds and skips them, so resumed trials, reruns and `depthwidth export` never duplicate a step.
Plain Python, no Ray; what to log is sweeps/plans/tracking.py's, the tracker libraries are imported
only by sweeps/results/trackers.py.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sweeps.plans.tracking import TrialInfo, eval_metrics, final_metrics

FLUSH_TIMEOUT_S = 60.0  # how long the end of a sweep waits for a tracker still sending


# -- one thread per tracker ---------------------------------------------------------------------

# What a tracker's failure costs: nothing in a sweep (which goes on); an export stops for it.
SWEEP_GOES_ON = "the sweep goes on without it and nothing stored is lost."
EXPORT_STOPS = (
    "nothing was lost: the store is untouched; fix the cause and run the same export "
    "again, which sends only what the tracker lacks."
)


@dataclass(frozen=True)
class Enabled:
    """An enabled tracker: its name, a function building it (called in its own thread), and the
    sentence saying how to send the stored results later should it fail (none in an export)."""

    name: str
    make: Callable[[], Any]
    later: str = ""


@dataclass(frozen=True)
class Sent:
    """What one tracker did: the runs it created and the steps it logged, and whether it failed."""

    name: str
    runs_created: int
    steps_logged: int
    failed: bool


class _Trial:
    __slots__ = ("steps", "finished")

    def __init__(self, steps: set[int], finished: bool):
        self.steps, self.finished = steps, finished


class _Worker(threading.Thread):
    """Runs one tracker's calls in order, off the driver's thread. The first failure disables it
    with one warning; later calls are dropped."""

    def __init__(
        self,
        name: str,
        factory: Callable[[], Any],
        warn: Callable[[str], None],
        later: str,
        after: str = SWEEP_GOES_ON,
    ):
        super().__init__(name=f"depthwidth-{name}", daemon=True)
        self.label, self.factory, self.warn, self.later = name, factory, warn, later
        self.after = after
        self.q: queue.Queue = queue.Queue()
        self.backend: Any = None
        self.dead = False
        self.trials: dict[str, _Trial] = {}
        self.finished_before: set[str] | None = None
        self.logged_steps = 0
        self.created_runs = 0

    def run(self) -> None:
        while True:
            op = self.q.get()
            try:
                if op is None:
                    self._close()
                    return
                if not self.dead:
                    self._do(*op)
            except Exception as exc:  # noqa: BLE001 - any tracker error: warn once, go on
                self.dead = True
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
                self.warn(
                    f"tracking: {self.label} failed ({type(exc).__name__}: {first}); "
                    f"{self.after} {self.later}".rstrip()
                )
            finally:
                self.q.task_done()

    def _close(self) -> None:
        if self.backend is not None:
            try:
                self.backend.close()
            except Exception:  # noqa: BLE001 - closing must not raise at the end of a sweep
                pass

    def _state(self, info: TrialInfo) -> _Trial:
        if self.backend is None:
            self.backend = self.factory()
        st = self.trials.get(info.trial_id)
        if st is not None:
            return st
        if self.finished_before is None:
            self.finished_before = set(self.backend.finished_ids())
        if info.trial_id in self.finished_before:
            st = _Trial(set(), True)
        else:
            found = self.backend.lookup(info.trial_id)
            if found is None:
                self.backend.create(info)
                self.created_runs += 1
                st = _Trial(set(), False)
            else:
                steps, finished = found
                st = _Trial(set(steps), finished)
                if not finished:
                    self.backend.reopen(info)
        self.trials[info.trial_id] = st
        return st

    def _log(self, info: TrialInfo, st: _Trial, step: int, metrics: dict[str, float]) -> None:
        if st.finished or step in st.steps:
            return
        if self.backend.log(info.trial_id, step, metrics) is False:
            return  # the tracker cannot take it (W&B: a step below one it holds)
        st.steps.add(step)
        self.logged_steps += 1

    def _do(self, kind: str, info: TrialInfo, *args: Any) -> None:
        if kind == "eval":
            step, metrics = args
            self._log(info, self._state(info), step, metrics)
        elif kind == "stored":
            curve, final, status, last_step = args
            st = self._state(info)
            if st.finished:
                return
            for step, metrics in curve:
                self._log(info, st, step, metrics)
            self.backend.finish(info.trial_id, last_step, final, status)
            st.finished = True
        elif kind == "release":
            st = self.trials.get(info.trial_id)
            if st is not None and not st.finished and self.backend is not None:
                self.backend.release(info.trial_id)


class Trackers:
    """The enabled trackers of one driver run (or one `depthwidth export`)."""

    def __init__(self, enabled: list[Enabled], after: str = SWEEP_GOES_ON):
        self._warnings: queue.Queue = queue.Queue()
        self.workers = [_Worker(e.name, e.make, self._warnings.put, e.later, after) for e in enabled]
        for w in self.workers:
            w.start()

    def __bool__(self) -> bool:
        return bool(self.workers)

    def _put(self, op: tuple) -> None:
        for w in self.workers:
            if not w.dead:
                w.q.put(op)

    def evaluation(self, info: TrialInfo, step: int, metrics: dict[str, float]) -> None:
        """One evaluation of a running trial (live curves)."""
        self._put(("eval", info, int(step), metrics))

    def stored(self, info: TrialInfo, row: Mapping[str, Any], curve: list[dict[str, Any]]) -> None:
        """A trial as the store holds it: any steps the run lacks, then the final metrics."""
        points = [(int(p["step"]), eval_metrics(p)) for p in curve]
        self._put(
            (
                "stored",
                info,
                points,
                final_metrics(row),
                str(row["status"]),
                int(row.get("steps") or (points[-1][0] if points else 0)),
            )
        )

    def release(self, info: TrialInfo) -> None:
        """The trial did not finish in this driver run: close its run so a later one resumes it."""
        self._put(("release", info))

    def warnings(self) -> list[str]:
        out = []
        while True:
            try:
                out.append(self._warnings.get_nowait())
            except queue.Empty:
                return out

    def close(self, timeout: float | None = FLUSH_TIMEOUT_S) -> list[str]:
        """Let each tracker send what it holds (at most `timeout` seconds in all), then stop.
        Returns the warnings not yet shown, one line for each tracker still sending."""
        for w in self.workers:
            w.q.put(None)
        deadline = None if timeout is None else time.monotonic() + timeout
        for w in self.workers:
            w.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        late = [
            f"tracking: {w.label} was still sending after {timeout:g} s; the sweep's results are "
            f"all in the store. {w.later}"
            for w in self.workers
            if w.is_alive()
        ]
        return self.warnings() + late

    def summary(self) -> list[Sent]:
        return [Sent(w.label, w.created_runs, w.logged_steps, w.dead) for w in self.workers]
