"""The plan's power as `depthwidth design` rated it before the sweep ran, read back from a store
for the report's Design section (docs/design-power.md): `depthwidth design SPEC --out STORE/design`
leaves design.json there, and `analyze STORE` quotes it, but only when the plan it rated is the
plan the store ran: design.json keeps a fingerprint of its trial ids, and the store's must match."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from runstore.location import Location

STORED = "design/design.json"  # `depthwidth design SPEC --out STORE/design` puts its result here


def plan_fingerprint(trial_ids: Iterable) -> str:
    """A plan's trials, by their ids, whatever their order or repeats."""
    return hashlib.sha256("\n".join(sorted({str(t) for t in trial_ids})).encode()).hexdigest()


def stored_power(source, trial_ids: Iterable = ()) -> dict | None:
    """The power summary of the plan a store ran, for the report's Design section: the result of
    `depthwidth design SPEC --out STORE/design`, if the store holds one whose plan has the
    store's trial ids (None otherwise: another spec's design is not this store's)."""
    try:
        loc = Location(str(source))
        if not loc.exists(STORED):
            return None
        d = json.loads(loc.read_text(STORED))
        plan = d.get("plan") or {}
    except Exception:  # not a store, or an unreadable file: the report goes on without it
        return None
    power = d.get("power") or {}
    if not power or plan.get("fingerprint") != plan_fingerprint(trial_ids):
        return None
    parts = []
    for k, v in power.items():
        if v is None:
            continue
        mc = (d.get("power_mc") or {}).get(k) or {}
        se = f" ± {mc['se']:.2f}" if mc.get("se") is not None else ""
        parts.append(f"{v:.2f}{se} at b = {float(k):g}")
    fc = d.get("false_claim") or {}
    null = (
        f"; false claims under the null {fc['rate']:.2f} "
        f"({round(fc['rate'] * fc['n'])} of {fc['n']} replicates)"
        if fc.get("rate") is not None
        else ""
    )
    noise = d.get("noise") or {}
    noise_txt = (
        f", seed noise {100 * float(noise['value']):.3g}% ({noise.get('source', '?')})"
        if noise.get("value") is not None
        else ""
    )
    return {
        "text": f"depthwidth design rated this plan before it ran{noise_txt}: power "
        + ", ".join(parts)
        + null
        + f" ({STORED})",
        "source": STORED,
        "power_by_effect": power,
    }


def entry(source, trial_ids: Iterable = ()) -> dict:
    """{"design_power": summary} for report.json, or nothing when the store holds no design of
    the plan it ran (`trial_ids`: the store's)."""
    power = stored_power(source, trial_ids)
    return {"design_power": power} if power else {}
