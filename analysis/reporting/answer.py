"""The answer first: one plain sentence, at most 250 characters, that answers the report's question
for these runs (at what depth does adding layers stop paying, at these widths?), before any
statistic. It goes in report.json as `answer` and opens report.md, report.html and the terminal.

The sentence is built from the verdict's case and the design's own depths and widths; a depth or
width it names is one swept or, where a threshold is located, an L_th inside the depths swept at
the widths that locate it. Optional clauses (what the verdict rests on, the basis of an
exclusion of b = 3) are added only while the sentence stays within MAX_CHARS.
"""

from __future__ import annotations

from analysis.reporting.markdown_sections import _g

MAX_CHARS = 250


def _range(values, fmt: str = "g") -> str:
    """'1–4', '16–64' or '32': the smallest and largest of the values, in `fmt`."""
    vals = sorted(float(v) for v in values)
    lo, hi = format(vals[0], fmt), format(vals[-1], fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def _design(r: dict) -> str:
    return f"depths {_range(r['depths'])}, widths {_range(r['widths'])}"


def _fit(core: str, *optional: str) -> str:
    """`core`, with each optional clause that still fits in MAX_CHARS, ended by a full stop."""
    text = core
    for clause in optional:
        if clause and len(text) + len(clause) + 1 <= MAX_CHARS:
            text += clause
    return text + "."


def _rests_on(r: dict) -> str:
    """'; without depth 1, another law is preferred (see Sensitivity)' when one or two slices
    left out change the verdict, each with the first change it makes (analysis/laws/sensitivity.py
    `_changes`); with more, that single slices do."""
    s = r.get("sensitivity") or {}
    changed = list(s.get("changed") or [])
    if s.get("status") != "ok" or not changed:
        return ""
    if len(changed) > 2:
        return "; it changes with single slices of the design left out (see Sensitivity)"
    ref_law = (s.get("reference") or {}).get("threshold_law") or {}
    identified = ref_law.get("status") == "ok"  # b on all runs (sensitivity.py `_identified`)
    words = {
        "preferred": "another law is preferred",
        "status": "the claim changes",
        "near_tie": "the preferred law leads by under 2 units of BIC",
        "identified": "b is not identified" if identified else "b is identified",
        "theory": "b = 3 moves across b's interval",
    }
    kinds = {row["left_out"]: row["changes"][0] for row in s.get("refits") or [] if row.get("changes")}
    parts = [f"without {label}, {words.get(kinds.get(label), 'the verdict changes')}" for label in changed]
    return f"; {' and '.join(parts)} (see Sensitivity)"


def _theory(thr: dict) -> str:
    inside = thr.get("consistent_with_theory")
    words = "which holds the theory's b = 3" if inside else "which excludes the theory's b = 3"
    return words


def _basis(thr: dict) -> str:
    basis = thr.get("theory_basis") or {}
    return ", on the law's form alone (no run below log_3 d)" if basis.get("form_alone") else ""


def _claimed(r: dict, thr: dict) -> str:
    b, (lo, hi) = thr["base"], thr["base_ci"]
    loc = thr.get("location") or {}
    where = [p for p in loc.get("per_width") or [] if p.get("side") == "located"]
    law = f"b = {_g(b)} [{_g(lo)}, {_g(hi)}], {_theory(thr)}"
    if where:
        lths = [p["L_th"] for p in where]
        depths = _range(lths, ".2g" if max(lths) < 10 else ".0f")
        widths = _range([p["width"] for p in where])
        head = f"At widths {widths} adding layers stops paying near depth {depths}"
        cores = [f"{head} (L_th = log_b d, {law}{_basis(thr)})", f"{head} (L_th = log_b d, {law})"]
    else:
        head = (
            f"In these runs ({_design(r)}) depth L+1 starts to beat depth L at equal N along L_th = log_b d"
        )
        cores = [f"{head}, {law}{_basis(thr)}", f"{head}, {law}"]
    core = next((c for c in cores if len(c) < MAX_CHARS), cores[-1])
    return _fit(core, _rests_on(r))


def _not_located(r: dict, thr: dict) -> str:
    """The threshold law's b is an extrapolation: where does its L_th fall against the design?"""
    loc = thr.get("location") or {}
    sides = {p["side"] for p in loc.get("per_width") or []}
    ws, ds = _range(r["widths"]), _range(r["depths"])
    if sides == {"beyond"}:
        core = f"These runs do not locate a threshold: depth still lowers the loss at every depth swept ({ds}) at widths {ws}, and this design cannot place L_th (see Design)"
    elif sides == {"below"}:
        core = f"These runs do not locate a threshold: at widths {ws} every depth swept ({ds}) lies past the fitted one, so this design cannot place L_th (see Design)"
    else:
        core = f"These runs do not locate a threshold: at no width swept ({ws}) does the interval of L_th fall inside the depths run ({ds}) (see Design)"
    return _fit(core, _rests_on(r))


def _unclaimed(r: dict, thr: dict) -> str:
    """Not claimed for a reason other than location: the law preferred, or b's interval."""
    pref = (r.get("regimes") or {}).get("preferred")
    if pref == "kaplan":
        core = f"In these runs ({_design(r)}) the loss depends on the parameter count alone, not on how it is split between depth and width, so they show no depth threshold"
    elif pref == "width_depth" and not (thr.get("method") or "").startswith("transition"):
        core = f"Shape matters in these runs ({_design(r)}), but the law that fits them best, the separable width-depth law, has no threshold: they place no L_th = log_b d (see the loss laws)"
    elif thr.get("base") is not None and thr.get("base_ci"):
        lo, hi = thr["base_ci"]
        core = f"These runs do not pin down a threshold: b's interval [{_g(lo)}, {_g(hi)}] is too wide to claim at {_design(r)} (see Design)"
    else:
        core = f"These runs ({_design(r)}) fit neither a threshold law nor crossovers of consecutive depths, so they give no answer on the threshold"
    return _fit(core, _rests_on(r))


def answer(r: dict) -> str:
    """The report's answer for these runs, in one sentence of at most MAX_CHARS characters."""
    thr = r.get("threshold") or {}
    if thr.get("status") == "absent" or not r.get("depths") or not r.get("widths"):
        rel = (r.get("relrnn") or {}).get("answer")
        if rel:
            return rel
        return _fit(
            "These runs have no depth and width, so they cannot say at what depth adding layers stops "
            "paying; only the shape-free fits (learning curves, L(N, D)) are reported"
        )
    if thr.get("claimed"):
        return _claimed(r, thr)
    if thr.get("extrapolation"):
        return _not_located(r, thr)
    if thr.get("status") == "not_identified":
        return _fit(
            f"These runs cannot place a threshold: b is not identified at {_design(r)}, and the Design "
            "section names a design that would identify it",
            _rests_on(r),
        )
    return _unclaimed(r, thr)


def kaplan_answer(k: dict) -> str:
    """The answer of a comparison with Kaplan et al. 2020: do these runs' exponents hold theirs?"""
    ours, kap = k["ours"], k["kaplan2020"]
    parts = []
    for name, mine in (("alpha_N", ours.get("alpha_N") or {}), ("alpha_S", ours.get("alpha_S") or {})):
        theirs = kap[name]["value"]
        ci = mine.get("ci")
        if mine.get("value") is None:
            parts.append(f"{name} is not fitted")
        elif ci and None not in ci:
            verb = "holds" if ci[0] <= theirs <= ci[1] else "excludes"
            parts.append(f"{name} = {_g(mine['value'])} [{_g(ci[0])}, {_g(ci[1])}] {verb} their {_g(theirs)}")
        else:
            parts.append(f"{name} = {_g(mine['value'])} (no interval) beside their {_g(theirs)}")
    return _fit("Beside Kaplan et al. 2020, in these runs " + "; ".join(parts))
