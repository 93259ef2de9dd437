"""Where a command may write what its user names (docs/rules.md, "Files a command writes"): the one
guard that every writer of a user-named file or folder goes through. A claim checks the target
whole before any work (never a results store's own files, never a store's folder where the writer
may not be, no folder where a file goes, a place that can be written), then holds a lock beside the
target from that check to the writer's last move, so two commands never write one output at once.
Standard library only, so every command can afford it.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
from collections.abc import Callable
from pathlib import Path

from runstore.layout import STORE_MARKS, STORE_OWN


class OutputError(ValueError):
    """An output location that cannot be written; the message names the flag and the path."""


LOCK_SUFFIX = ".depthwidth-lock"  # `.NAME.depthwidth-lock` beside the output NAME, while it is written

# Where a folder writer may sit relative to a results store (`claim_folder`'s `in_store`); a store's
# own files (runs.parquet, curves.parquet, spec.toml, .lock, parts/, tune/) are refused to all.
ANYWHERE = "anywhere"  # a report: a store's folder or a folder in it (analyze --out STORE)
NOT_STORE_ROOT = "not-root"  # files of its own in a folder of its own, which may lie in a store
NOT_IN_STORE = "nowhere"  # what a store never holds (prepared corpora)


# -- what a path is ------------------------------------------------------------------------------
def nearest_existing(p: Path) -> Path:
    probe = p
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _real(path: str | os.PathLike) -> Path:
    """The path with every link resolved (a missing tail is kept as written), so a link to a
    store's file is caught as that file."""
    return Path(os.path.realpath(Path(path).expanduser().absolute()))


def is_store_folder(path: str | os.PathLike) -> bool:
    """A folder that holds a results store (its runs, spec or parts)."""
    p = Path(path)
    return any((p / m).exists() for m in STORE_MARKS)


def store_owning(path: str | os.PathLike) -> Path | None:
    """The results store whose own file (or folder of parts, or Tune's folder) `path` would
    replace or lie in, or None. Links are followed, so another name for a store file is caught."""
    p = _real(path)
    for folder in p.parents:
        first = p.relative_to(folder).parts[0]
        if first in STORE_OWN and is_store_folder(folder):
            return folder
    return None


def store_containing(path: str | os.PathLike) -> Path | None:
    """The results store that `path` is, or lies inside, or None."""
    p = _real(path)
    for folder in (p, *p.parents):
        if folder.is_dir() and is_store_folder(folder):
            return folder
    return None


# -- the checks ------------------------------------------------------------------------------------
def _bad(flag: str, given: str, why: str) -> OutputError:
    return OutputError(f"{flag} = {given!r} is invalid: {why}.")


def _given(path: str | os.PathLike | None, flag: str, what: str) -> str:
    given = "" if path is None else str(path)
    if not given.strip():
        raise _bad(flag, given, f"it names no {what}; give a path")
    if "\0" in given:
        raise _bad(flag, given, "a path cannot hold a NUL character")
    return given


def _writable_folder(folder: Path, flag: str, given: str) -> None:
    probe = nearest_existing(folder)
    if not probe.is_dir():
        raise _bad(flag, given, f"{str(probe)!r} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise _bad(flag, given, f"{str(probe)!r} is not writable")


def _file_checks(p: Path, flag: str, given: str, force: bool) -> None:
    """A file written atomically at the end (runstore.files.atomic_file, which replaces a link
    rather than writing through it)."""
    if p.is_dir():
        raise _bad(flag, given, "it is a folder, not a file")
    if (store := store_owning(p)) is not None:
        raise _bad(
            flag,
            given,
            f"it is one of the results store {str(store)!r}'s own files; write to a path outside them",
        )
    if p.exists() and not force:
        raise _bad(flag, given, "the file already exists; give --force to replace it")
    if p.exists() and not os.access(p, os.W_OK):
        raise _bad(flag, given, "the file is not writable")
    if not p.parent.exists():
        probe = nearest_existing(p.parent)
        if not probe.is_dir():
            raise _bad(flag, given, f"{str(probe)!r} is a file, not a folder")
        raise _bad(flag, given, f"the folder {str(p.parent)!r} does not exist")
    if not p.parent.is_dir():
        raise _bad(flag, given, f"{str(p.parent)!r} is a file, not a folder")
    if not os.access(p.parent, os.W_OK | os.X_OK):
        raise _bad(flag, given, f"the folder {str(p.parent)!r} is not writable")


def _folder_checks(p: Path, flag: str, given: str, names: tuple[str, ...], in_store: str) -> None:
    if p.exists() and not p.is_dir():
        raise _bad(flag, given, "it is a file, not a folder")
    _writable_folder(p, flag, given)
    real = _real(p)
    if in_store == NOT_IN_STORE and (store := store_containing(real)) is not None:
        raise _bad(
            flag, given, f"it lies inside the results store {str(store)!r}; write it in a folder of its own"
        )
    if in_store != ANYWHERE and is_store_folder(real):
        raise _bad(
            flag,
            given,
            f"it is the folder of the results store {str(real)!r}; write into a folder of its own, "
            f"beside the store or in it",
        )
    for name in names or ("",):
        if (store := store_owning(p / name)) is not None:
            what = f"its {name} would be one of" if name else "it lies in"
            raise _bad(
                flag,
                given,
                f"{what} the own files of the results store {str(store)!r}; write to a folder outside them",
            )
        if name and p.is_dir():
            _file_checks(p / name, f"{flag} file", str(Path(given) / name), True)


# -- claims: the check, then a lock held until the command ends -------------------------------------
_HELD: list[Claim] = []


class Claim:
    """A checked output, locked from its check to the writer's last move. `recheck()` runs the
    checks again (under the lock) just before that move; the lock goes when the command ends
    (`release_all`, also at exit) or at `release()`. Folders it made for the lock and that are
    still empty then are removed, so a refused or failed command leaves nothing."""

    def __init__(self, target: Path, flag: str, given: str, checks: Callable[[], None], folder: bool):
        self.target, self.flag, self.given, self._checks = target, flag, given, checks
        self._made = self._make_parents() if folder else []
        # A folder is locked where it really is (two names of one folder share its lock); a file
        # by its own name, since it is replaced (a link in its place too), never written through.
        self.real = _real(target) if folder else _real(target.parent) / target.name
        try:
            self._fd, self._lock = self._take_lock()
            checks()  # again, now that no other command can change the answer
        except BaseException:
            self.release()
            raise
        if not _HELD:
            atexit.register(release_all)
        _HELD.append(self)

    def _make_parents(self) -> list[Path]:
        missing = []
        probe = self.target.parent
        while not probe.exists():
            missing.append(probe)
            probe = probe.parent
        made = []
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except OSError as exc:
                self._made = made
                self.release()
                why = f"the folder {str(folder)!r} cannot be made: {exc.strerror or exc}"
                raise _bad(self.flag, self.given, f"it cannot be written ({why})") from None
            made.append(folder)
        return made

    def _take_lock(self) -> tuple[int, Path]:
        lock = self.real.parent / f".{self.real.name}{LOCK_SUFFIX}"
        while True:
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                why = f"no file can be made in {str(lock.parent)!r}: {exc.strerror or exc}"
                raise _bad(self.flag, self.given, f"it cannot be written ({why})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                os.close(fd)
                who = f" (pid {holder})" if holder.isdigit() else ""
                raise _bad(
                    self.flag,
                    self.given,
                    f"another depthwidth command{who} is writing it now; wait for it to end, or write elsewhere",
                ) from None
            # a holder that released between our open and our lock has unlinked this file: retry
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_ino == os.stat(lock, follow_symlinks=False).st_ino:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                    return fd, lock
            os.close(fd)

    def recheck(self) -> None:
        self._checks()

    def release(self) -> None:
        if getattr(self, "_fd", None) is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._lock)  # before the unlock: a waiter then retries on a new file
            os.close(self._fd)
            self._fd = None
        for folder in reversed(self._made):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only while empty: what the command wrote stays
        self._made = []
        if self in _HELD:
            _HELD.remove(self)


def release_all() -> None:
    """Release every claim this process holds (a command has ended)."""
    for claim in list(_HELD):
        claim.release()


def claim_file(path: str | os.PathLike | None, flag: str, force: bool = False) -> Claim:
    """A file the command writes at the end, atomically: not a folder, not one of a results
    store's own files (also through a link), not an existing file unless `force`, in a folder
    that exists and can be written."""
    given = _given(path, flag, "file")
    p = Path(given).expanduser().absolute()

    def checks() -> None:
        _file_checks(p, flag, given, force)

    checks()
    return Claim(p, flag, given, checks, folder=False)


def claim_folder(
    path: str | os.PathLike | None,
    flag: str,
    names: tuple[str, ...] = (),
    in_store: str = NOT_STORE_ROOT,
    check: Callable[[Path], None] | None = None,
) -> Claim:
    """A folder the command writes its own files `names` into (each replaced whole, atomically):
    a folder or a path that can become one, never in a store's own files, where `in_store` allows
    it relative to a store, no name in it a folder; `check(folder)` adds the writer's own test,
    run with the others before any work and again by `recheck()`. Missing parents are made now,
    for the lock beside the folder, and removed again if the command writes nothing."""
    given = _given(path, flag, "folder")
    p = Path(given).expanduser().absolute()

    def checks() -> None:
        _folder_checks(p, flag, given, tuple(names), in_store)
        if check is not None:
            check(p)

    checks()
    return Claim(p, flag, given, checks, folder=True)
