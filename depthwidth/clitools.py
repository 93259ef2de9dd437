"""What every `depthwidth` command does with bad input (docs/design.md, "Errors"): one sentence on
stderr naming the field and the value, exit code 2, nothing written. Outputs are checked before
any work starts, so a run never trains or fits for minutes and then fails to save its result.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import sys
from pathlib import Path

from runstore.files import reason as reason  # one definition, with the store's own errors
from runstore.outputs import NOT_STORE_ROOT, Claim, OutputError, claim_file, claim_folder
from runstore.outputs import is_store_folder as is_store_folder
from runstore.outputs import store_containing as store_containing
from runstore.outputs import store_owning as store_owning

__all__ = ["OutputError", "is_store_folder", "store_containing", "store_owning"]

EXIT_BAD_INPUT = 2


def fail(message: str) -> int:
    """Print one error sentence and return the bad-input exit code."""
    print(f"depthwidth: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def terminate_cleanly() -> None:
    """SIGTERM (a scheduler's or `kill`'s) unwinds like Ctrl-C, so a working folder is removed."""

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    with contextlib.suppress(ValueError):  # only the main thread may set handlers
        signal.signal(signal.SIGTERM, stop)


# Every user-named output goes through runstore.outputs (docs/rules.md, "Files a command writes"):
# these are its checks under the names the commands use. Each returns the claim, whose lock is
# held until the command ends (depthwidth.cli.main releases it).


def check_output_file(path: str | os.PathLike, flag: str, force: bool = False) -> Claim:
    """A file the command will write at the end (atomically, runstore.files.atomic_file)."""
    return claim_file(path, flag, force=force)


def check_output_dir(path: str | os.PathLike, flag: str, in_store: str = NOT_STORE_ROOT) -> Claim:
    """A folder the command will create or write files of its own into (their names not known
    in advance: a tracker's run folders)."""
    return claim_folder(path, flag, (), in_store)


def check_output_folder(path: str | os.PathLike, flag: str, names: tuple[str, ...]) -> Claim:
    """A folder a command writes its own files `names` into, each replaced whole and atomically
    (which replaces a link rather than writing through it): checked whole before any work."""
    return claim_folder(path, flag, names, NOT_STORE_ROOT)


# What marks a project's own folder: its store and report would land in its source tree.
PROJECT_MARKS = ("pyproject.toml", ".git")


def project_folder(location: str | os.PathLike) -> str | None:
    """The mark (pyproject.toml or .git) of a local folder that is a project's own folder, or
    None: a results store there would write its files and report into the project's source."""
    s = str(location)
    if "://" in s and not s.startswith("file://"):
        return None
    p = Path(s.removeprefix("file://")).expanduser().absolute()
    return next((m for m in PROJECT_MARKS if (p / m).exists()), None)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def remove_orphaned(parent: Path, pattern: re.Pattern[str]) -> None:
    """Remove the working folders in `parent` of commands that were killed before they could:
    a folder (not a link) whose name `pattern` matches, its first group the pid of a process that
    is gone."""
    with contextlib.suppress(OSError):
        for p in parent.iterdir():
            m = pattern.match(p.name)
            if m and p.is_dir() and not p.is_symlink() and int(m.group(1)) != os.getpid():
                if not _alive(int(m.group(1))):
                    shutil.rmtree(p, ignore_errors=True)


def duration(seconds: float) -> str:
    """Elapsed or remaining time as a progress line shows it: 1:05, 1:02:03, or ? when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
