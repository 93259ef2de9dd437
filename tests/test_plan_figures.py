"""Planned costs quoted anywhere are the plan's own: every GPU-hour figure in the docs, the study
pages, the READMEs and the specs' comments is the total `depthwidth sweep plan` computes for the
bundled spec named before it (sweeps/plans/plan.py totals), within the figure's rounding; and the
costs `sweep specs` lists at once (sweeps/bundled-costs.json) are those totals too.

A figure is a number followed by "GPU-hours" or "GPU-h", or a number in a table column headed
"GPU-hours"; it belongs to the last bundled spec named before it in its paragraph, code line or
table row (as `name.toml`, `sweeps/name.toml`, or a bare name in code). A budget is written as the
flag's value (`--budget 1000gpu-h`), which is not a figure.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import pytest

from sweeps.plans.bundled import bundled_specs
from sweeps.plans.speccosts import COST_KEYS, fingerprint, planned, read_index

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(
    [ROOT / "README.md", ROOT / "sweeps" / "README.md"]
    + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "docs" / "studies").glob("*.md"))
    + list((ROOT / "docs" / "bench").glob("*.md"))
)
SPEC_FILES = sorted((ROOT / "sweeps").glob("*.toml"))
NUMBER = r"\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?"
FIGURE = re.compile(rf"(?<![\w.])({NUMBER})(?:\*\*)?\s*GPU-h(?:ours)?\b")
# a cost in words ("on the order of a thousand GPU-hours") cannot be held to the plan
WORDED = re.compile(r"\b(hundreds?|thousands?|millions?)\b(\s+\S+){0,2}\s+GPU-h", re.I)


@functools.cache
def plan_of(name: str) -> dict:
    """The bundled spec planned in full, as `sweep plan` plans it (all of them: about 9 CPU s),
    once per test process and only those a test asks for."""
    return planned(bundled_specs()[name])


def _spec_pattern() -> re.Pattern:
    names = sorted(bundled_specs(), key=len, reverse=True)  # threshold-gpu before threshold
    alt = "|".join(map(re.escape, names))
    # not `threshold-cpu.md` (a page), not `threshold` inside a longer word or name
    return re.compile(rf"(?:(?<=/)|(?<![\w/.\-]))({alt})(\.toml)?(?![\w\-]|\.(?!toml)\w)")


def _code_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"`[^`]*`", text)]


def spec_refs(unit: str, code: bool) -> list[tuple[int, str]]:
    """(position, name) of each bundled spec the unit names: `name.toml` anywhere; a bare name
    inside code, not as the last part of a path (`results/threshold` is a store)."""
    spans = [(0, len(unit))] if code else _code_spans(unit)
    out = []
    for m in _spec_pattern().finditer(unit):
        after_slash = m.start() > 0 and unit[m.start() - 1] == "/"
        if m.group(2):
            out.append((m.start(), m.group(1)))
        elif not after_slash and any(a <= m.start() < b for a, b in spans):
            out.append((m.start(), m.group(1)))
    return out


def tolerance(figure: str) -> float:
    """Half a unit in the figure's last significant digit (trailing zeros of a whole number are
    not significant: 2,590 is 2.59e3)."""
    s = figure.replace(",", "")
    mantissa, _, exp = s.partition("e")
    scale = 10.0 ** int(exp or 0)
    if "." in mantissa:
        return 0.5 * 10.0 ** -len(mantissa.split(".")[1]) * scale
    zeros = len(mantissa) - len(mantissa.rstrip("0"))
    return 0.5 * 10.0**zeros * scale


def _units(text: str):
    """(kind, text) per paragraph of prose, line of fenced code, or table row."""
    fenced, para = False, []
    for line in text.splitlines() + [""]:
        if line.strip().startswith("```"):
            if para:
                yield "prose", " ".join(para)
                para = []
            fenced = not fenced
        elif fenced:
            yield "code", line
        elif line.lstrip().startswith("|"):
            if para:
                yield "prose", " ".join(para)
                para = []
            yield "row", line
        elif not line.strip():
            if para:
                yield "prose", " ".join(para)
            para = []
        else:
            para.append(line)


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def figures(text: str) -> list[tuple[str, str | None, str]]:
    """(figure, the spec it belongs to or None, its context) for each GPU-hour figure."""
    out, header = [], None
    for kind, unit in _units(text):
        refs = spec_refs(unit, code=kind == "code")
        if kind == "row":
            cells = _cells(unit)
            if all(set(c) <= set("-: ") for c in cells):
                continue  # the line under a header
            if header is None or len(cells) != len(header):
                header = cells
                continue
            for i, h in enumerate(header):
                if "GPU-hours" in h and re.fullmatch(rf"\**({NUMBER})\**", cells[i]):
                    first = spec_refs(cells[0], code=False)
                    out.append((cells[i].strip("*"), first[0][1] if first else None, unit))
        else:
            header = None
        for m in FIGURE.finditer(unit):
            before = [name for pos, name in refs if pos < m.start()]
            out.append((m.group(1), before[-1] if before else None, unit))
    return out


def _comment_text(path: Path) -> str:
    """A spec's comments as prose: each comment line's text after `#`."""
    return "\n".join(line.split("#", 1)[1] for line in path.read_text().splitlines() if "#" in line)


def test_the_figure_parser_reads_prose_code_and_tables():
    text = (
        "The plan `threshold-gpu` costs 836 GPU-hours; `sweeps/threshold.toml` 2.59e3 GPU-hours.\n\n"
        "```\ndepthwidth sweep run threshold-gpu-text-pilot   # 72 trials, 15 GPU-hours\n"
        "depthwidth analyze results/threshold   # 9 GPU-hours\n```\n\n"
        "| plan | trials | GPU-hours |\n|---|---|---|\n| `threshold-gpu-proposed.toml` | 1680 | **569** |\n\n"
        "A threshold grid is on the order of 2,590 GPU-hours; see `threshold-cpu.md`, 3 GPU-hours.\n"
    )
    assert [f[:2] for f in figures(text)] == [
        ("836", "threshold-gpu"),
        ("2.59e3", "threshold"),
        ("15", "threshold-gpu-text-pilot"),
        ("9", None),  # a store's path names no spec
        ("569", "threshold-gpu-proposed"),
        ("2,590", None),  # "threshold" as a word is not the spec
        ("3", None),  # nor is a page named after one
    ]
    assert WORDED.search("is on the order of a thousand\nGPU-hours".replace("\n", " "))
    assert tolerance("836") == 0.5 and tolerance("2,590") == 5 and tolerance("2.59e3") == 5
    assert tolerance("0.805") == 0.0005


@pytest.mark.parametrize("path", PAGES + SPEC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_gpu_hour_figure_is_its_specs_plan(path):
    text = _comment_text(path) if path.suffix == ".toml" else path.read_text()
    wrong = [f"{m.group(0)!r}: quote the plan's figure" for m in WORDED.finditer(" ".join(text.split()))]
    for figure, name, context in figures(text):
        where = f"{figure} GPU-hours in {context.strip()[:160]!r}"
        if name is None:
            wrong.append(f"{where}: no bundled spec is named before it")
        elif "gpu_hours" not in plan_of(name):
            wrong.append(f"{where}: {name} is planned in CPU core-hours")
        else:
            value = float(figure.replace(",", ""))
            if abs(plan_of(name)["gpu_hours"] - value) > tolerance(figure) + 1e-9:
                wrong.append(f"{where}: `depthwidth sweep plan {name}` says {plan_of(name)['gpu_hours']:.4g}")
    assert not wrong, "\n".join(wrong)


def test_the_listed_costs_are_the_plans():
    index = read_index()
    plans = {name: plan_of(name) for name in bundled_specs()}
    assert sorted(index) == sorted(plans), "python -m sweeps.plans.speccosts writes the list again"
    for name, path in bundled_specs().items():
        kept = index[name]
        assert kept["fingerprint"] == fingerprint(path), f"{name} changed: python -m sweeps.plans.speccosts"
        assert kept["trials"] == plans[name]["trials"], name
        key = next(k for k in COST_KEYS if k in plans[name])
        assert math.isclose(kept[key], plans[name][key], rel_tol=1e-9), (
            f"{name}: kept {kept[key]!r}, planned {plans[name][key]!r}; python -m sweeps.plans.speccosts"
        )
