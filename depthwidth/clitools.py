"""What every `depthwidth` command does with bad input (docs/design.md, "Errors"): one sentence on
stderr naming the field and the value, exit code 2, nothing written. Outputs are checked before
any work starts, so a run never trains or fits for minutes and then fails to save its result.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from runstore.files import reason as reason  # one definition, with the store's own errors
from runstore.layout import STORE_MARKS as _STORE_MARKS
from runstore.layout import STORE_OWN as _STORE_OWN

EXIT_BAD_INPUT = 2


class OutputError(ValueError):
    """An output location that cannot be written; the message names the flag and the path."""


def fail(message: str) -> int:
    """Print one error sentence and return the bad-input exit code."""
    print(f"depthwidth: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


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


# A results store's own names (runstore/layout.py): a user-named output may never replace one of
# them, --force or not, since every later command reads them.


def store_owning(path: str | os.PathLike) -> Path | None:
    """The results store whose own file (or folder of parts, or Tune's folder) `path` would
    replace, or None. Links are followed, so another name for a store file is caught too."""
    p = Path(path).expanduser().absolute()
    p = p.parent.resolve() / p.name if not p.is_symlink() else p.resolve()
    for folder in p.parents:
        first = p.relative_to(folder).parts[0]
        if first in _STORE_OWN and any((folder / m).exists() for m in _STORE_MARKS):
            return folder
    return None


def check_output_file(path: str | os.PathLike, flag: str, force: bool = False) -> None:
    """A file the command will write at the end (atomically, runstore.files.atomic_file):
    not one of a results store's own files, not an existing file unless `force`, not a folder,
    and its folder exists and is writable."""
    p = Path(path).expanduser().absolute()
    if p.is_dir():
        raise OutputError(f"{flag} = {str(path)!r} is invalid: it is a folder, not a file.")
    if (store := store_owning(p)) is not None:
        raise OutputError(
            f"{flag} = {str(path)!r} is invalid: it is one of the results store "
            f"{str(store)!r}'s own files; write to a path outside them."
        )
    if p.exists() and not force:
        raise OutputError(
            f"{flag} = {str(path)!r} is invalid: the file already exists; give --force to replace it."
        )
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"{flag} = {str(path)!r} is invalid: the file is not writable.")
    parent = p.parent
    if not parent.exists():
        probe = _nearest_existing(parent)
        if not probe.is_dir():
            raise OutputError(f"{flag} = {str(path)!r} is invalid: {str(probe)!r} is a file, not a folder.")
        raise OutputError(f"{flag} = {str(path)!r} is invalid: the folder {str(parent)!r} does not exist.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{flag} = {str(path)!r} is invalid: the folder {str(parent)!r} is not writable.")


def store_containing(path: str | os.PathLike) -> Path | None:
    """The results store that `path` is, or lies inside, or None: a folder that will hold
    something other than a store's own files (prepared data, say) may not sit in one."""
    p = Path(path).expanduser().absolute()
    p = p.parent.resolve() / p.name if not p.is_symlink() else p.resolve()
    for folder in (p, *p.parents):
        if folder.is_dir() and any((folder / m).exists() for m in _STORE_MARKS):
            return folder
    return None


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


def is_store_folder(path: str | os.PathLike) -> bool:
    """A folder that holds a results store (its runs, spec or parts)."""
    p = Path(path)
    return any((p / m).exists() for m in _STORE_MARKS)


def check_output_folder(path: str | os.PathLike, flag: str, names: tuple[str, ...]) -> None:
    """A folder a command writes its own files `names` into, each replaced whole and atomically
    (runstore.files.atomic_file, which replaces a link rather than writing through it): it
    is a folder or can become one, it is neither a results store's folder nor inside the store's
    own files (parts/, tune/), also when reached through a link, and no name in it is a folder.
    Called before any work, so nothing is computed for an output that cannot be written."""
    check_output_dir(path, flag)
    p = Path(path).expanduser().absolute()
    real = p.resolve()
    if is_store_folder(real):
        raise OutputError(
            f"{flag} = {str(path)!r} is invalid: it is the folder of the results store "
            f"{str(real)!r}; write into a folder of its own (such as {str(Path(path) / 'design')!r})."
        )
    for name in names:
        if (store := store_owning(p / name)) is not None:
            raise OutputError(
                f"{flag} = {str(path)!r} is invalid: its {name} would be one of the own files of "
                f"the results store {str(store)!r}; write to a folder outside them."
            )
        if p.is_dir():
            check_output_file(p / name, f"{flag} file", force=True)
