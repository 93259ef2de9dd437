"""What every `depthwidth` command does with bad input (docs/design.md, "Errors"): one sentence on
stderr naming the field and the value, exit code 2, nothing written. Outputs are checked before
any work starts, so a run never trains or fits for minutes and then fails to save its result.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2


class OutputError(ValueError):
    """An output location that cannot be written; the message names the flag and the path."""


def fail(message: str) -> int:
    """Print one error sentence and return the bad-input exit code."""
    print(f"depthwidth: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def reason(exc: BaseException) -> str:
    """The first line of an error, for a one-sentence message (pyarrow's run to many lines)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _nearest_existing(p: Path) -> Path:
    probe = p
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def check_output_dir(path: str | os.PathLike, flag: str) -> None:
    """A folder the command will create or write into: it is a folder (or can become one) and
    its nearest existing ancestor is writable."""
    p = Path(path).expanduser().absolute()
    if p.exists() and not p.is_dir():
        raise OutputError(f"{flag} = {str(path)!r} is invalid: it is a file, not a folder.")
    probe = _nearest_existing(p)
    if not probe.is_dir():
        raise OutputError(f"{flag} = {str(path)!r} is invalid: {str(probe)!r} is a file, not a folder.")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutputError(f"{flag} = {str(path)!r} is invalid: {str(probe)!r} is not writable.")


def check_output_file(path: str | os.PathLike, flag: str) -> None:
    """A file the command will write at the end: not a folder, and its folder exists (or can be
    created) and is writable."""
    p = Path(path).expanduser().absolute()
    if p.is_dir():
        raise OutputError(f"{flag} = {str(path)!r} is invalid: it is a folder, not a file.")
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"{flag} = {str(path)!r} is invalid: the file is not writable.")
    parent = p.parent
    if not parent.exists():
        probe = _nearest_existing(parent)
        if not probe.is_dir():
            raise OutputError(f"{flag} = {str(path)!r} is invalid: {str(probe)!r} is a file, "
                              f"not a folder.")
        raise OutputError(f"{flag} = {str(path)!r} is invalid: the folder {str(parent)!r} does "
                          f"not exist.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{flag} = {str(path)!r} is invalid: the folder {str(parent)!r} is not "
                          f"writable.")
