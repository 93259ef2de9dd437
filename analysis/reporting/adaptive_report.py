"""The report's "Adaptive sweep" section: which runs an adaptive sweep chose, in which round and
why, how b's interval narrowed, and why it stopped, read from the store's adaptive.jsonl (written
by the sweep's searcher, one JSON object per line: kind = estimate, choice or stop).
"""

from __future__ import annotations

import json

from analysis.reporting.markup import writes_markdown

LOG = "adaptive.jsonl"
MAX_ROWS = 40  # choices listed in report.md; report.json keeps them all


def section(source) -> dict | None:
    """The adaptive log of a store folder (None for another input or a sweep that was not adaptive)."""
    from runstore.location import Location

    try:
        loc = Location(str(source))
        if not loc.exists(LOG):
            return None
        text = loc.read_text(LOG)
    except Exception:  # not a store, or one that cannot be reached: no section
        return None
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    choices = [r for r in records if r.get("kind") == "choice"]
    estimates = [r for r in records if r.get("kind") == "estimate"]
    stops = [r for r in records if r.get("kind") == "stop"]
    out = {
        "rounds": len(estimates),
        "choices": choices,
        "estimates": estimates,
        "stop": stops[-1]["reason"] if stops else None,
    }
    return {"answer": answer(out), **out}


def answer(a: dict) -> str:
    """The adaptive sweep's answer in one sentence: how far its choices narrowed b's interval."""
    est = [e for e in a["estimates"] if e.get("ci") and None not in e["ci"]]
    cells = f"{len(a['choices'])} cells in {a['rounds']} rounds"
    if not est:
        return f"The adaptive sweep chose {cells}, and no round's fit has bounded b yet."
    first, last = est[0], est[-1]
    ratio = lambda e: e["ci"][1] / e["ci"][0]  # noqa: E731 - the interval's width as a factor
    now = f"[{last['ci'][0]:.3g}, {last['ci'][1]:.3g}]"
    if len(est) == 1:
        return f"The adaptive sweep chose {cells}; b's interval after its one fitted round is {now}."
    verb = "narrowed" if ratio(last) < ratio(first) else "did not narrow"
    return (
        f"The adaptive sweep chose {cells} and {verb} b's interval from "
        f"[{first['ci'][0]:.3g}, {first['ci'][1]:.3g}] to {now}."
    )


def entry(source) -> dict:
    """{"adaptive": section} for report.json, or nothing when the sweep was not adaptive."""
    a = section(source)
    return {"adaptive": a} if a else {}


@writes_markdown
def markdown(a: dict | None) -> list[str]:
    if not a:
        return []
    L = [
        "## Adaptive sweep",
        "",
        a.get("answer") or answer(a),
        "",
        f"The sweep chose its runs in {a['rounds']} rounds, refitting b after each "
        f"({len(a['choices'])} cells of depth × width × seed). "
        + (
            f"It stopped because the {a['stop']}."
            if a.get("stop") and a["stop"].startswith("budget")
            else f"It stopped: {a['stop']}."
            if a.get("stop")
            else "It has not stopped yet: `sweep run` again continues it."
        ),
        "",
    ]
    est = [e for e in a["estimates"] if e.get("ci")]
    if est:
        steps = [f"round {e['round']}: {e['base']:.3g} [{e['ci'][0]:.3g}, {e['ci'][1]:.3g}]" for e in est]
        L += ["b after each round: " + "; ".join(steps) + ".", ""]
    L += ["| round | depth | width | seed | trials | why |", "|---|---|---|---|---|---|"]
    for c in a["choices"][:MAX_ROWS]:
        L.append(
            f"| {c['round']} | {c['depth']} | {c['width']} | {c['seed']} | {len(c['trial_ids'])} "
            f"| {c['reason']} |"
        )
    if len(a["choices"]) > MAX_ROWS:
        L.append(f"| … | | | | | {len(a['choices']) - MAX_ROWS} more in report.json |")
    return L + [""]
