"""How a sweep that ends abnormally is told: one paragraph saying what happened, what is kept, and
the command that continues it, never a traceback (docs/design.md, "Errors").

The causes told apart: the store could not be written (a full disk, a store gone read-only),
Ray's memory monitor killing trials (out of memory), trials failing in Ray after their restarts,
an error inside Ray Tune itself, and an interruption (Ctrl-C, a stop).
"""

from __future__ import annotations

import shlex

from depthwidth.clitools import reason

# Ray's own words when its memory monitor kills a worker. Not a bare "OOM": Ray's message for any
# worker that died (a SIGKILL, a segfault) lists "killed by the OOM killer" among possible causes.
_OOM_MARKS = ("OutOfMemoryError", "running low on memory", "memory monitor", "due to memory pressure")


_FULL_MARKS = ("No space left on device", "Errno 28", "errno 28", "Disk quota exceeded")


def is_oom(message: str) -> bool:
    return any(m in message for m in _OOM_MARKS)


def is_disk_full(message: str) -> bool:
    return any(m in message for m in _FULL_MARKS)


def continue_command(
    spec_path: str,
    storage: str | None = None,
    address: str | None = None,
    max_concurrent: int | None = None,
    extra: tuple[str, ...] = (),
) -> str:
    args = ["depthwidth", "sweep", "run", spec_path]
    if storage:
        args += ["--storage", storage]
    if address:
        args += ["--address", address]
    if max_concurrent:
        args += ["--max-concurrent", str(max_concurrent)]
    return " ".join(shlex.quote(a) for a in [*args, *extra])


def paragraph(
    name: str,
    *,
    n_todo: int,
    n_missing: int,
    n_stored: int,
    store: str,
    command: str,
    store_failure: BaseException | None = None,
    errors: dict[str, str] | None = None,
    max_failures: int = 0,
    crash: BaseException | None = None,
    interrupted: bool = False,
) -> str:
    """The closing paragraph of a sweep that left `n_missing` of its `n_todo` trials unfinished.
    `errors`: trial label -> the last line of its Ray error."""
    errors = errors or {}
    oom = [k for k, v in errors.items() if is_oom(v)]
    full = [k for k, v in errors.items() if is_disk_full(v)]
    if store_failure is None and full:
        what = (
            f"the store's disk is full: {len(full)} trial{'s' if len(full) != 1 else ''} "
            f"({', '.join(sorted(full)[:3])}{', ...' if len(full) > 3 else ''}) could not write "
            f"checkpoints there (No space left on device)"
        )
        fix = "Free space on that disk, then continue with: "
    elif store_failure is not None:
        what = (
            f"the sweep stopped because the store could not be written ({reason(store_failure).rstrip('.')})"
        )
        fix = "Free space on that disk (or make the store writable again), then continue with: "
    elif oom:
        what = (
            f"Ray's memory monitor killed {len(oom)} trial{'s' if len(oom) != 1 else ''} "
            f"({', '.join(sorted(oom)[:3])}{', ...' if len(oom) > 3 else ''}) because the node "
            f"ran out of memory" + (f", after {max_failures} restarts each" if max_failures else "")
        )
        fix = "Run fewer trials at once (--max-concurrent) or on a node with more memory; continue with: "
    elif crash is not None:
        what = f"the sweep stopped on an error in Ray Tune ({type(crash).__name__}: {reason(crash)})"
        fix = "Continue with: "
    elif errors:
        first = next(iter(errors.items()))
        what = (
            f"{len(errors)} trial{'s' if len(errors) != 1 else ''} failed in Ray after "
            f"{max_failures} restarts (trial {first[0]}: {first[1]})"
        )
        fix = "Continue with: "
    elif interrupted:
        what = "the sweep was interrupted"
        fix = "Continue with: "
    else:
        what = "the sweep was stopped"
        fix = "Continue with: "
    kept = (
        f"Kept: {n_stored} finished trial{'s' if n_stored != 1 else ''} in {store}; the "
        f"{n_missing} of {n_todo} trials to run that did not finish resume from their last "
        f"checkpoints (or start over where they wrote none)."
    )
    return f"[{name}] {what[0].upper() + what[1:]}. {kept} {fix}{command}"
