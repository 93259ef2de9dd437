"""The sweep specs that ship with the package (sweeps/*.toml, package data), reachable by name
from any folder, the way litgpt resolves its presets: `depthwidth sweep plan smoke` (or
`smoke.toml`) reads the bundled smoke spec unless a local file of that name exists, and says on
stderr which one it read. `depthwidth sweep specs` (sweeps/cli.py) lists them with their cost.
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path


def bundled_dir() -> Path:
    return Path(str(resources.files("sweeps")))


def bundled_specs() -> dict[str, Path]:
    """name -> file of every bundled spec, by name."""
    return {p.stem: p for p in sorted(bundled_dir().glob("*.toml"))}


def _bare_name(arg: str) -> str | None:
    """The bundled name `arg` could mean: a bare name with or without .toml, no folder in it."""
    if not arg or os.sep in arg or (os.altsep and os.altsep in arg):
        return None
    return arg[: -len(".toml")] if arg.endswith(".toml") else arg


def locate(arg: str | os.PathLike) -> tuple[Path, str | None]:
    """The spec file `arg` names and a line saying which one was read when a bundled spec has
    that name (None otherwise): a local file wins, then NAME.toml here, then the bundled one."""
    given = Path(arg)
    name = _bare_name(str(arg))
    bundled = bundled_specs().get(name) if name else None
    if bundled is None:
        return given, None
    for local in (given, Path(f"{name}.toml")):
        if local.is_file():
            if local.absolute().resolve() == bundled.resolve():
                return local, None
            return local, f"sweep: using the local file {local} (a bundled spec has the same name: {bundled})"
    return bundled, f"sweep: using the bundled spec {name!r} ({bundled})"


def resolve_spec_path(arg: str | os.PathLike) -> Path:
    """`locate`, saying on stderr which file it used where a bundled spec has the name."""
    path, note = locate(arg)
    if note:
        print(note, file=sys.stderr, flush=True)
    return path
