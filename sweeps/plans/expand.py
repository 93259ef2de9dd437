"""Expanding a spec's [grid] into trials, with its `where` filter applied while expanding.

A grid is the product of its axes, so its size is known before any trial is built: above
MAX_TRIALS (after the filter) the spec is refused at once, above WARN_TRIALS a warning and progress
lines go to stderr. When the filter reads only axes and fixed fields (and `aspect`), it is
evaluated once per combination of the axes it reads, and only the trials it keeps are built.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

MAX_TRIALS = 20_000  # a plan validates, hashes and costs each trial: about 0.5 ms each on one core
WARN_TRIALS = 2_000
PROGRESS_EVERY = 20_000
# Off where a command prints only a table of many specs (`sweep specs`): there the lines would
# fall between the table's rows, and each spec is expanded in well under the time they announce.
_LOUD: ContextVar[bool] = ContextVar("expansion_lines", default=True)


def _say(line: str) -> None:
    if _LOUD.get():
        print(f"sweep: {line}", file=sys.stderr, flush=True)


@contextmanager
def quiet() -> Iterator[None]:
    """Within it, expanding a large grid says nothing on stderr."""
    token = _LOUD.set(False)
    try:
        yield
    finally:
        _LOUD.reset(token)


def _cheap_sources(
    names: list[str], used: set[str], base: Mapping[str, Mapping[str, Any]], resolve: Callable
) -> dict[str, tuple[str, Any]] | None:
    """Where each name the filter reads comes from without building a trial: ('axis', index)
    or ('fixed', value); None when one needs the built config (n_params, a default value)."""
    axis_of = {resolve(n): i for i, n in enumerate(names)}
    out: dict[str, tuple[str, Any]] = {}
    wanted = set(used) - {"aspect"}
    if "aspect" in used:
        wanted |= {"model.depth", "model.width"}
    if "aspect" in used:  # width / depth, computed from the two below
        out["aspect"] = ("aspect", None)
    for n in wanted:
        if n == "n_params":
            return None
        key = resolve(n)
        if key in axis_of:
            out[n] = ("axis", axis_of[key])
        elif key[1] in base[key[0]]:
            out[n] = ("fixed", base[key[0]][key[1]])
        else:
            return None
    return out


def _kept_combos(names, axes, sources, compiled, evaluate) -> tuple[list[int], set[tuple]]:
    """The axes the filter reads, and the index combinations of them that it keeps."""
    read = sorted({v for kind, v in sources.values() if kind == "axis"})
    kept = set()
    for idx in itertools.product(*(range(len(axes[names[i]])) for i in read)):
        at = dict(zip(read, idx))
        env = {
            n: (axes[names[v]][at[v]] if kind == "axis" else v)
            for n, (kind, v) in sources.items()
            if kind != "aspect"
        }
        if "aspect" in sources:
            env["aspect"] = env["model.width"] / env["model.depth"]
        if all(evaluate(c, env) for c in compiled):
            kept.add(idx)
    return read, kept


def grid_trials(
    names: list[str],
    axes: Mapping[str, list],
    count_check: Callable[[int], None],
    build: Callable[[dict], Any],
    keep: Callable[[Any], bool],
    sources: dict | None,
    compiled: list,
    evaluate: Callable,
) -> list:
    """The grid's trials in product order, each id once. `build(point)` makes a Trial, `keep`
    applies the filter to a built trial (used when `sources` is None), `count_check(n)` refuses
    a grid of n trials."""
    sizes = [len(axes[n]) for n in names]
    total = 1
    for s in sizes:
        total *= s
    read, kept = ([], None)
    if sources is not None and compiled:
        read, kept = _kept_combos(names, axes, sources, compiled, evaluate)
        others = total // max(1, _product(sizes[i] for i in read))
        count_check(len(kept) * others)
        n_trials = len(kept) * others
    else:
        count_check(total)  # every candidate must be built to be filtered
        n_trials = total
    loud = n_trials > WARN_TRIALS
    if loud:
        _say(f"expanding {n_trials:,} trials (more than {WARN_TRIALS:,}; this takes a while)")
    trials, seen, t0 = [], set(), time.perf_counter()
    for idx in itertools.product(*(range(s) for s in sizes)):
        if kept is not None and tuple(idx[i] for i in read) not in kept:
            continue
        trial = build({n: axes[n][i] for n, i in zip(names, idx)})
        if kept is None and compiled and not keep(trial):
            continue
        if trial.trial_id not in seen:
            seen.add(trial.trial_id)
            trials.append(trial)
            if loud and len(trials) % PROGRESS_EVERY == 0:
                _say(f"{len(trials):,} of {n_trials:,} trials built ({time.perf_counter() - t0:.0f} s)")
    return trials


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out
