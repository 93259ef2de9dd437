"""The sweep's compact progress view: trials done / running / pending / failed, the best loss so
far, elapsed time and an ETA, on one refreshing line (a terminal) or a line per change (a log).

Plain Python, no Ray: the service feeds it from a Tune callback. Progress is weighted by each
trial's expected cost, steps x (1 + FLOPs per step / STEP_OVERHEAD_FLOPS): big models cost their
training compute (C ≈ 6·N·D, Kaplan et al. 2020; docs/science.md §2), tiny ones their step count, so
neither a sweep whose big models run last nor a grid of tiny CPU models gets a wild ETA.
"""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from depthwidth.clitools import duration as fmt_duration

# A training step's fixed cost (Python, kernel launches, the optimizer) in FLOP-equivalents:
# ~25 ms at ~20 GFLOP/s on a laptop core. Below it a step costs about the same whatever the size.
STEP_OVERHEAD_FLOPS = 5e8


def trial_cost(steps: int, flops: float) -> float:
    return steps * (1.0 + flops / max(steps, 1) / STEP_OVERHEAD_FLOPS)


class ProgressView:
    def __init__(
        self,
        name: str,
        work: dict[str, float],
        labels: dict[str, str],  # work: trial_cost
        stream: TextIO | None = None,
        tty: bool | None = None,
        refresh_s: float = 0.5,
        log_every_s: float = 30.0,
        clock=time.monotonic,
    ):
        self.name, self.labels = name, labels
        self.work = {k: max(float(v), 1.0) for k, v in work.items()}
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.refresh_s, self.log_every_s, self.clock = refresh_s, log_every_s, clock
        self.t0 = clock()
        self.t_first: float | None = None
        self.running: dict[str, float] = {}  # trial_id -> fraction of its steps done
        self.status: dict[str, str] = {}  # trial_id -> ok | diverged | failed | error
        self.errors: dict[str, str] = {}  # trial_id -> the last line of its Ray error
        self.best: tuple[float, str] | None = None
        self._last_draw, self._last_line, self._drawn = -math.inf, "", False
        self._dirty = False  # an event since the last drawn line

    # -- events ------------------------------------------------------------------------------
    def started(self, tid: str) -> None:
        if self.t_first is None:
            self.t_first = self.clock()
        self.running.setdefault(tid, 0.0)
        # A change of the running count is a line of its own, in a log too: drawn only at the
        # next throttle tick, a log kept showing "1 running" for 30 s while two trials trained.
        self.draw(force=True)

    def progressed(self, tid: str, fraction: float | None) -> None:
        if tid not in self.status and fraction is not None and math.isfinite(fraction):
            self.running[tid] = min(1.0, max(0.0, float(fraction)))
        self.draw()

    def finished(self, tid: str, status: str, val_loss: float) -> None:
        self.running.pop(tid, None)
        self.status[tid] = status
        if status == "ok" and math.isfinite(val_loss) and (self.best is None or val_loss < self.best[0]):
            self.best = (val_loss, self.labels.get(tid, tid))
        self.draw(force=True)

    def errored(self, tid: str, message: str) -> None:
        self.running.pop(tid, None)
        self.status[tid] = "error"
        self.errors[tid] = message
        self.note(f"trial {self.labels.get(tid, tid)} failed in Ray: {message}")

    def note(self, message: str) -> None:
        """A message on its own line, keeping the progress line below it."""
        if self.tty and self._drawn:
            self.stream.write("\r\033[K")
        self.stream.write(message + "\n")
        self._drawn = False
        self.draw(force=True)

    # -- the view ----------------------------------------------------------------------------
    def fraction(self) -> float:
        total = sum(self.work.values())
        done = sum(self.work.get(t, 0.0) for t in self.status)
        done += sum(self.work.get(t, 0.0) * f for t, f in self.running.items())
        return done / total if total else 1.0

    def line(self) -> str:
        ok, diverged, failed, error = (
            sum(1 for v in self.status.values() if v == s) for s in ("ok", "diverged", "failed", "error")
        )
        n_done, n_failed = ok + diverged, failed + error
        pending = len(self.work) - len(self.status) - len(self.running)
        elapsed = self.clock() - self.t0
        f = self.fraction()
        # The rate so far, measured from the first trial's start (Ray's own start is not work).
        busy = self.clock() - self.t_first if self.t_first is not None else 0.0
        eta = busy * (1 - f) / f if f > 0.005 else math.nan
        if len(self.status) >= len(self.work):
            eta = 0.0
        best = f"best val {self.best[0]:.4f} ({self.best[1]})" if self.best else "best val -"
        div = f", {diverged} diverged" if diverged else ""
        return (
            f"[{self.name}] {n_done}/{len(self.work)} done{div} | {len(self.running)} running | "
            f"{max(pending, 0)} pending | {n_failed} failed | {best} | "
            f"{fmt_duration(elapsed)} elapsed, ETA {fmt_duration(eta)}"
        )

    def draw(self, force: bool = False, event: bool = True) -> None:
        self._dirty = self._dirty or event
        now = self.clock()
        interval = self.refresh_s if self.tty else self.log_every_s
        if not force and now - self._last_draw < interval:
            return
        line = self.line()
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self._drawn = True
        elif force or line != self._last_line:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._last_draw, self._last_line, self._dirty = now, line, False

    def close(self) -> None:
        if self.tty or self._dirty:
            self.draw(force=True)
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
