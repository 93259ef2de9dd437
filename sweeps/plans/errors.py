"""The one error type of spec validation, the sentence shape every message takes:
"<where>: <field> = <value> is invalid: <why>." (docs/design.md: bad input names field and value),
and the checks every spec table shares: known keys, numbers, names, choices."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class SpecError(ValueError):
    """A bad sweep spec; the message is one sentence naming the field and its value."""


def fail(where: str, field: str, value: Any, why: str) -> SpecError:
    return SpecError(f"{where}: {field} = {value!r} is invalid: {why}.")


def number(path: str, key: str, v: Any, *, positive: bool = True, integer: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise fail(path, key, v, f"expected {'an integer' if integer else 'a number'}")
    if not math.isfinite(v) or (positive and v <= 0) or (not positive and v < 0):
        raise fail(path, key, v, f"must be {'positive' if positive else '>= 0'}")
    return v


def known_table(
    value: Any,
    path: str,
    name: str,
    known: tuple[str, ...],
    *,
    label: str | None = None,
    noun: str = "key",
    what: str = "expected a table",
) -> Mapping[str, Any]:
    """`value` (the spec's `name`) as a table whose keys are all `known`; `label` is how the
    message shows the table ("[budget]", "tracking.wandb"; default "[name]")."""
    if not isinstance(value, Mapping):
        raise fail(path, name, value, what)
    for k in value:
        if k not in known:
            allowed = (
                f"the only {noun} is {known[0]!r}"
                if len(known) == 1
                else f"known {noun}s: {', '.join(known)}"
            )
            raise SpecError(f"{path}: {label or f'[{name}]'} has no {noun} {k!r}; {allowed}.")
    return value


def text(path: str, key: str, v: Any, why: str) -> str:
    """A non-empty string, stripped."""
    if not isinstance(v, str) or not v.strip():
        raise fail(path, key, v, why)
    return v.strip()


def choice(path: str, key: str, v: Any, options: tuple[str, ...], why: str | None = None) -> str:
    if v not in options:
        raise fail(path, key, v, why or f"expected one of {', '.join(options)}")
    return v
