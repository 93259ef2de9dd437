"""The one error type of spec validation, and the sentence shape every message takes:
"<where>: <field> = <value> is invalid: <why>." (docs/design.md: bad input names field and value)."""

from __future__ import annotations

import math
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
