"""What `depthwidth design` shows while it simulates: replicates done of those planned so far,
the time elapsed and an ETA, on stderr, as the sweep shows its trials (sweeps/running/progress.py):
one line redrawn in place on a terminal (at most every REFRESH_S), a line at most every LOG_EVERY_S
in a log, and a line kept whenever every planned replicate is done. `--quiet` shows none of it.

The simulation tells it as replicates are planned and finish (analysis/power/events.py). A plan
rated until its rates settle (no `--replicates`) plans one batch at a time, so the count of all
grows batch by batch; the ETA is for the replicates planned so far.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from analysis.power import events
from depthwidth.clitools import duration

REFRESH_S = 0.5
LOG_EVERY_S = 30.0


class ReplicateProgress:
    def __init__(self, stream: TextIO | None = None, tty: bool | None = None, clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.t0 = clock()
        self.planned = self.done = 0
        self._last_draw = -math.inf
        self._drawn = False  # a terminal line is on screen, to be cleared before a note

    def __call__(self, event: str, count: int) -> None:
        if event == "planned":
            self.planned += count
        elif event == "done":
            self.done += count
            if self.done < self.planned:
                self.draw()
            else:  # a batch is through: its line stays, and whatever is printed next starts below it
                self.draw(force=True)
                self.close()

    def line(self) -> str:
        elapsed = self.clock() - self.t0
        eta = elapsed * (self.planned - self.done) / self.done if self.done else math.nan
        return (
            f"design: {self.done:,}/{self.planned:,} replicates simulated | "
            f"{duration(elapsed)} elapsed, ETA {duration(eta)}"
        )

    def draw(self, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._last_draw < (REFRESH_S if self.tty else LOG_EVERY_S):
            return
        if self.tty:
            self.stream.write("\r\033[K" + self.line())
            self._drawn = True
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()
        self._last_draw = now

    def note(self, message: str) -> None:
        """A line of its own (a batch's summary), keeping the progress line below it."""
        self._clear()
        self.stream.write(message + "\n")
        self.stream.flush()

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\033[K")
            self._drawn = False

    def close(self) -> None:
        """End the terminal's line, so what follows starts on a line of its own."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


@contextmanager
def shown(quiet: bool = False, stream: TextIO | None = None) -> Iterator[ReplicateProgress | None]:
    """Progress on stderr for the work inside (none when `quiet`); yields the view, for notes."""
    if quiet:
        yield None
        return
    view = ReplicateProgress(stream)
    try:
        with events.listening(view):
            yield view
    finally:
        view.close()
