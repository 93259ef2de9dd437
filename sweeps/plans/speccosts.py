"""The planned cost of each bundled spec, as `depthwidth sweep specs` lists it, kept beside the
specs in sweeps/bundled-costs.json so the list prints in a fraction of a second: planning every
bundled spec expands and hashes about 10,000 trials and imports torch for the recurrent families
(8 CPU s on 2 cores).

An entry is used only while its spec's content (the parsed TOML, so comments do not count) has
the fingerprint it was computed from; any other spec is planned in full, as `sweep plan` does.
tests/test_plan_figures.py holds every entry to the plan's own totals (sweeps/plans/plan.py), so
a change to the accounting that moves a cost fails there until the file is written again:

    python -m sweeps.plans.speccosts
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from sweeps.plans.bundled import bundled_dir, bundled_specs

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

INDEX_NAME = "bundled-costs.json"
COST_KEYS = ("gpu_hours", "cpu_core_hours")  # the unit a spec is costed in (plan.totals)


def _doc(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8-sig"))


def fingerprint(path: Path) -> str:
    """SHA-256 of the spec's parsed content in canonical JSON: what its plan is computed from."""
    text = json.dumps(_doc(path), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def planned(path: Path) -> dict[str, Any]:
    """The spec planned in full: its trial count and cost (plan.totals), silently."""
    from sweeps.plans.expand import quiet
    from sweeps.plans.plan import plan_rows, totals
    from sweeps.plans.spec import load_spec

    with quiet():
        spec = load_spec(path, allow_missing_data=True)
        t = totals(spec, plan_rows(spec))
    return {"trials": t.trials, t.unit: t.hours}


def read_index(folder: Path | None = None) -> dict[str, dict[str, Any]]:
    try:
        return json.loads(((folder or bundled_dir()) / INDEX_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no file, or a damaged one: every spec is planned in full


def cost(name: str, path: Path, index: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The spec's trials and cost: the kept entry while the spec is unchanged, else planned."""
    kept = index.get(name)
    if kept and kept.get("fingerprint") == fingerprint(path):
        return {k: v for k, v in kept.items() if k != "fingerprint"}
    return planned(path)


def data_paths(doc: dict[str, Any]) -> list[str]:
    """The data paths a spec names, as written: `[data] path`, and `data.path` in `[grid]` and
    `[[points]]`."""
    found: list = [doc.get("data", {}).get("path")]
    for table in [doc.get("grid", {}), *doc.get("points", [])]:
        nested = table.get("data")  # `data.path = ...` unquoted is a table of its own in TOML
        for v in (
            table.get("data.path"),
            table.get("path"),
            nested.get("path") if isinstance(nested, dict) else None,
        ):
            found += v if isinstance(v, list) else [v]
    return sorted({p for p in found if isinstance(p, str) and p})


def missing_data(path: Path) -> list[str]:
    """The spec's data paths that are not on this machine (as `sweep plan` names them: as written
    while an environment variable in it is unset, else resolved from the spec's folder)."""
    from runstore.files import is_remote
    from sweeps.plans import datapath

    out = []
    for written in data_paths(_doc(path)):
        if is_remote(written):
            continue
        try:
            resolved = datapath.resolve(written, str(path.absolute().parent))
        except datapath.UnsetVariable:
            out.append(written)
            continue
        if not os.path.exists(resolved):
            out.append(resolved)
    return sorted(out)


def spec_line(name: str, path: Path, index: dict[str, dict[str, Any]]) -> str:
    """One line of `sweep specs`: the name, its trials and planned cost, and what it is for (the
    spec's description); a spec whose data is not here is costed all the same."""
    from sweeps.plans.errors import SpecError

    try:
        c = cost(name, path, index)
        hours = f"{c['gpu_hours']:.3g} GPU-h" if "gpu_hours" in c else f"{c['cpu_core_hours']:.3g} CPU core-h"
        left = f"{c['trials']:>5} trials {hours:>16}"
        what = str(_doc(path).get("description") or "(no description)")
        if missing := missing_data(path):
            what += f" [data not here yet: {', '.join(missing)}]"
    except (SpecError, ValueError, OSError) as exc:
        left, what = f"{'':>5} trials {'?':>16}", f"cannot plan it here: {exc}"
    return f"{name:<24} {left}  {what}"


def write_index(folder: Path | None = None) -> Path:
    """Plan every bundled spec in full and keep its cost (the command in the docstring)."""
    from runstore.files import atomic_file

    entries = {name: {"fingerprint": fingerprint(p), **planned(p)} for name, p in bundled_specs().items()}
    target = (folder or bundled_dir()) / INDEX_NAME
    with atomic_file(target, "w") as f:
        f.write(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    return target


if __name__ == "__main__":
    print(f"wrote {write_index()}", file=sys.stderr)
