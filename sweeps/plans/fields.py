"""The one reader of a frozen dataclass from the plain dict Tune carries (sweeps/plans/trialconfig.py,
sweeps/plans/trialoutcome.py): each field through its own reader, each default where the dataclass
states it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any


def from_fields(cls, d: Mapping[str, Any], read: Mapping[str, Callable[[Any], Any]] | None = None) -> Any:
    """An instance of the dataclass `cls` from the fields `d` holds, each through its `read`
    function where it has one; a field `d` lacks keeps the default the dataclass states (its one
    place)."""
    read = read or {}
    return cls(**{f.name: read.get(f.name, _same)(d[f.name]) for f in fields(cls) if f.name in d})


def _same(v: Any) -> Any:
    return v
