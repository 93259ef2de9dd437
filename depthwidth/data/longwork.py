"""The long work of `depthwidth data prepare`, kept stoppable and visible: calls into Rust (the
tokenizers library) made in a worker thread, so Ctrl-C and SIGTERM stop a run at once, and
progress lines on stderr with the share done, the time spent and an ETA.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from depthwidth.clitools import duration as fmt_duration

SAY_EVERY_S = 2.0
STOP_WAIT_S = 2.0  # how long a stopped command waits for a Rust call to notice before it leaves


class Progress:
    """Lines on stderr, at most one every SAY_EVERY_S seconds, for work that takes a while."""

    def __init__(self, total_bytes: int, stream=None):
        self.total, self.stream, self.t0 = total_bytes, stream or sys.stderr, time.monotonic()
        self.phase = self.last = self.t0  # the first line after SAY_EVERY_S, unless forced

    def say(self, line: str, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= SAY_EVERY_S:
            self.last = now
            print(f"data: {line} ({now - self.t0:.0f} s)", file=self.stream, flush=True)

    def start(self) -> None:
        """A new pass over the corpus begins: its ETA counts from now."""
        self.phase = time.monotonic()

    def share(self, done: int) -> str:
        return f"{done / 1e6:,.1f} of {self.total / 1e6:,.1f} MB ({100 * done / max(1, self.total):.0f}%)"

    def eta(self, done: int) -> str:
        spent = time.monotonic() - self.phase
        left = spent * (self.total - done) / done if done > 0 else float("nan")
        return f"{fmt_duration(spent)} elapsed, ETA {fmt_duration(left)}"


# -- calls into Rust, stoppable -----------------------------------------------------------------
# Python runs a signal handler only in the main thread, between its own bytecodes: never inside a
# long Rust call. So each such call runs in a worker thread while the main thread waits, and takes
# Ctrl-C or SIGTERM at once; the BPE trainer's input stops at its next piece.
STOP = threading.Event()


def in_worker(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` in a worker thread; its result, or its error raised here."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # a Rust panic is a BaseException; handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=run, name="depthwidth-tokenizers", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except BaseException:
        STOP.set()
        # A call that does not end in time (the BPE's merges take no input) is left to its daemon
        # thread: the console script ends with os._exit, which does not wait for it.
        worker.join(STOP_WAIT_S)
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def stopping(exc: BaseException) -> bool:
    """The error is the command being stopped, not a failure to report."""
    return isinstance(exc, (KeyboardInterrupt, SystemExit)) or STOP.is_set()


@contextlib.contextmanager
def rust_stderr() -> Iterator[None]:
    """A panic in Rust (a tokenizer's regex engine giving up, say) prints its report and a stack
    trace straight to file descriptor 2, whatever Python does with the error. While a call that
    may panic runs, that descriptor goes to a temporary file, written out only if the call
    succeeds: a failure is then the one sentence the caller makes of it."""
    sys.stderr.flush()
    saved = os.dup(2)
    ok = False
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
            ok = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if ok and held.tell():
                held.seek(0)
                sys.stderr.buffer.write(held.read())
                sys.stderr.flush()
