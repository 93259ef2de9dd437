"""The [adaptive] table of a sweep spec (sweeps/designing/adaptive.py runs it): its settings, checked when
the spec is read (sweeps/plans/spec.py), and the rule an adaptive sweep and `design` share: b needs at
least 3 depths and 2 widths. No numpy or pandas, so reading a spec stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sweeps.plans.errors import SpecError, fail, number

MIN_DEPTHS, MIN_WIDTHS = 3, 2  # the fewest the threshold analysis can fit b with (`design` too)
KEYS = ("target_width", "max_trials", "max_compute", "initial", "batch", "bootstrap", "seed")


@dataclass(frozen=True)
class Adaptive:
    """The spec's [adaptive] table. A cell is one (depth, width, seed) of the grid with every
    setting of its other axes (e.g. each lr), so the analysis can still choose per shape."""

    target_width: float = 0.5  # stop once b's 95% interval is this narrow (hi - lo)
    max_trials: int = 0  # stop before the stored trials would exceed this many (0: no cap)
    max_compute: float = 0.0  # ... or this many training FLOPs, as `sweep plan` counts them (0: no cap)
    initial: int = 0  # cells in the first batch (0: 2 x the larger of #depths and #widths)
    batch: int = 2  # cells chosen per refit of b
    bootstrap: int = 100  # bootstrap replicates per refit
    seed: int = 0


def parse_adaptive(text_or_doc: str | Mapping[str, Any], path: str, enable: bool = False) -> Adaptive | None:
    """The [adaptive] table of a spec (None when absent and not `enable`d by --adaptive)."""
    if isinstance(text_or_doc, str):
        from depthwidth.config import tomllib

        try:
            doc = tomllib.loads(text_or_doc)
        except tomllib.TOMLDecodeError as exc:
            raise SpecError(f"{path} is not valid TOML: {exc}.") from None
    else:
        doc = text_or_doc
    table = doc.get("adaptive")
    if table is None:
        return Adaptive() if enable else None
    if not isinstance(table, Mapping):
        raise fail(path, "adaptive", table, "expected a table")
    kw: dict[str, Any] = {}
    for k, v in table.items():
        if k not in KEYS:
            raise SpecError(f"{path}: [adaptive] has no key {k!r}; known keys: {', '.join(KEYS)}.")
        integer = k in ("max_trials", "initial", "batch", "bootstrap", "seed")
        positive = k in ("target_width", "batch", "bootstrap")
        kw[k] = number(path, f"adaptive.{k}", v, positive=positive, integer=integer)
    out = Adaptive(**kw)
    if out.bootstrap < 20:
        raise fail(path, "adaptive.bootstrap", out.bootstrap, "an interval needs at least 20 replicates")
    return out


def too_few_shapes(depths: int, widths: int) -> str | None:
    """Why a plan of this many depths and widths can never give b (None when it can): the rule
    `design` rates plans by and an adaptive sweep is refused by."""
    if depths >= MIN_DEPTHS and widths >= MIN_WIDTHS:
        return None
    return (
        f"the plan has {depths} depth{'s' if depths != 1 else ''} and {widths} "
        f"width{'s' if widths != 1 else ''}; the threshold analysis needs at least "
        f"{MIN_DEPTHS} depths and {MIN_WIDTHS} widths"
    )


def check_adaptive(trials, path: str) -> None:
    """An adaptive sweep narrows b's interval: refused when its trials can never give one."""
    why = too_few_shapes(len({t.model.depth for t in trials}), len({t.model.width for t in trials}))
    if why:
        raise SpecError(f"{path}: an adaptive sweep is invalid here: {why}, so b can never be fitted.")
