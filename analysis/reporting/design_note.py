"""The plan's power as `depthwidth design` rated it before the sweep ran, read back from a store
for the report's Design section (docs/design-power.md): `depthwidth design SPEC --out STORE/design`
leaves design.json there, and `analyze STORE` quotes it."""

from __future__ import annotations

import json

from depthwidth.results import Location

STORED = "design/design.json"  # `depthwidth design SPEC --out STORE/design` puts its result here


def stored_power(source) -> dict | None:
    """The power summary of the plan a store ran, for the report's Design section: the result of
    `depthwidth design SPEC --out STORE/design`, if the store holds one (None otherwise)."""
    try:
        loc = Location(str(source))
        if not loc.exists(STORED):
            return None
        d = json.loads(loc.read_text(STORED))
    except Exception:  # not a store, or an unreadable file: the report goes on without it
        return None
    power = d.get("power") or {}
    if not power:
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
        "text": f"`depthwidth design` rated this plan before it ran{noise_txt}: power "
        + ", ".join(parts)
        + null
        + f" ({STORED})",
        "source": STORED,
        "power_by_effect": power,
    }


def entry(source) -> dict:
    """{"design_power": summary} for report.json, or nothing when the store holds no design."""
    power = stored_power(source)
    return {"design_power": power} if power else {}
