"""Who is told as a design's replicates are planned and finish: one listener at a time, set by the
command that shows progress (sweeps/designing/design_progress.py) around its work. The
simulation (analysis/power/design.py `simulate`) announces each batch before it starts and each
chunk of replicates as it finishes; with no listener, nothing happens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# (event, count): ("planned", n) before n replicates start, ("done", n) as n of them finish
Listener = Callable[[str, int], None]
_LISTENER: ContextVar[Listener | None] = ContextVar("design_listener", default=None)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def tell(event: str, count: int) -> None:
    if (listener := _LISTENER.get()) is not None:
        listener(event, count)
