"""report.md sections on what was read and fitted beyond the shape fits: the input (its layout,
the N used and why, the points of the data-aware laws and their weights), Chinchilla's L(N, D)
beside Hoffmann et al. 2022 and Besiroglu et al. 2024 (docs/science.md §8), and the regime
accounting against Levine et al. 2020 (§1).
"""

from __future__ import annotations

import math

from analysis.reporting.markup import writes_markdown


def _g(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, (int, float)):
        return f"{v:.{digits}g}"
    return str(v)


def _ci(ci) -> str:
    return f"[{_g(ci[0])}, {_g(ci[1])}]" if ci and None not in ci else "–"


def is_absent(section) -> bool:
    return isinstance(section, dict) and section.get("status") == "absent"


@writes_markdown
def inputs_md(r: dict, runs_line: str | None = None) -> list[str]:
    """The Input section: the runs fitted (`runs_line`, Markdown the report wrote), how the input
    was read, the N used."""
    inp = r.get("inputs") or {}
    if not inp:
        return ["## Input", "", runs_line, ""] if runs_line else []
    L = ["## Input", ""] + ([runs_line, ""] if runs_line else [])
    L += [
        f"Read as the {inp.get('layout')} layout ({inp.get('kind')})"
        + ("" if inp.get("has_shape") else ", without depth and width")
        + "."
    ]
    L += [f"- {n}." for n in inp.get("notes", [])]
    n = inp.get("n_params") or {}
    if n.get("why"):
        L += [f"- N used in every fit: {n['why']}."]
    pts = (r.get("chinchilla") or {}).get("points") or {}
    if pts.get("kind"):
        L += [
            f"- Points of the laws with a data term: {pts['n_points']} from {pts['n_runs']} runs "
            f"({pts['why']}). Weights: {pts['weighting']}."
        ]
    elif pts:
        L += [f"- No law with a data term: {pts.get('why')}."]
    return L + [""]


LOOSE_DECADES = 2.0  # a positive scale whose 95% interval spans more than this many decades


def _decades(cis: dict) -> dict[str, float]:
    """The positive scales among `cis` (name: [lo, hi]) whose interval spans more than
    LOOSE_DECADES decades, with how many it spans."""
    out = {}
    for k, ci in cis.items():
        if ci and None not in ci and ci[0] > 0 and ci[1] > 0:
            d = math.log10(ci[1] / ci[0])
            if d > LOOSE_DECADES:
                out[k] = d
    return out


@writes_markdown
def chinchilla_md(r: dict) -> list[str]:
    c = r.get("chinchilla")
    if not c:
        return []
    L = ["## L(N, D) = E + A/N^alpha + B/D^beta (Hoffmann et al. 2022, Approach 3)", ""]
    if c["status"] != "ok":
        return L + [f"{c['status']}: {c['reason']}.", ""]
    pub = c["published"]
    b24, h22 = pub["besiroglu2024"], pub["hoffmann2022"]
    rows = []
    for k in ("E", "A", "B", "alpha", "beta"):
        rows.append(
            [
                k,
                f"{_g(c['params'][k], 4)} {_ci(c['ci'].get(k))}",
                _g(c["se"].get(k)),
                f"{_g(b24['params'][k], 4)} ({_g(b24['se'][k])})",
                _g(h22["params"][k], 4),
            ]
        )
    co = c["compute_optimal"]
    rows.append(
        [
            "a = beta/(alpha+beta)",
            f"{_g(co['a'])} {_ci(co['ci'].get('a'))}",
            "–",
            _g(b24["compute_optimal"]["a"]),
            _g(h22["compute_optimal"]["a"]),
        ]
    )
    rows.append(
        [
            f"D*/N* at C = {_g(co['C_ref'])} FLOP",
            f"{_g(co['tokens_per_param'])} {_ci(co['ci'].get('tokens_per_param'))}",
            "–",
            _g(co["besiroglu2024"]["tokens_per_param"]),
            _g(co["hoffmann2022"]["tokens_per_param"]),
        ]
    )
    L += [
        "| parameter | ours, 95% interval | ours, bootstrap SE | Besiroglu et al. 2024 (SE) | "
        "Hoffmann et al. 2022 |",
        "|---|---|---|---|---|",
    ]
    L += ["| " + " | ".join(row) + " |" for row in rows] + [""]
    loose = _decades({**{k: c["ci"].get(k) for k in ("A", "B")}, "G": co["ci"].get("G")})
    if loose:
        L += [
            "Loosely fixed by these data: "
            + ", ".join(f"{k} (its 95% interval spans {d:.1f} decades)" for k, d in loose.items())
            + ". A scale trades off against its exponent: such a point is one fit among many nearly "
            "as good.",
            "",
        ]
    dist = c.get("besiroglu_se_distance") or {}
    if dist:
        L += [
            "Ours minus Besiroglu et al.'s, in their standard errors: "
            + ", ".join(f"{k} {v:+.2f}" for k, v in dist.items())
            + "."
            + (
                f" Their fit: {b24['method']}; a fit of other points need not match it."
                if b24.get("method")
                else ""
            )
        ]
    L += [
        f"{c['n_points']} points from {c['n_runs']} runs; {c['n_boot']} bootstrap replicates "
        f"({c['bootstrap_method'].replace('_', '-')}) over runs. Compute-optimal allocation "
        f"N*(C) = G·(C/6)^a with G = {_g(co['G'])} {_ci(co['ci'].get('G'))}, C = 6·N·D; "
        f"beyond C = {_g(co['allocation']['data_C_range'][1])} FLOP it is an extrapolation.",
        "",
    ]
    return L


@writes_markdown
def accounting_md(r: dict) -> list[str]:
    a = r.get("regime_accounting")
    if not a:
        return []
    L = ["## Regime accounting (Levine et al. 2020)", ""]
    if is_absent(a) or a.get("status") != "ok":
        return L + [f"{a.get('status')}: {a.get('reason')}.", ""]
    t3, fit = a["theory_b3"], a["fitted"]
    rows = [
        [
            "b = 3 (theory)",
            t3["below"],
            t3["at"],
            t3["above"],
            f"{t3['shapes']['below']} / {t3['shapes']['above']}",
        ]
    ]
    if fit.get("b") is not None:
        rows.append(
            [
                f"b = {_g(fit['b'])} (fitted)",
                fit["below"],
                fit["at"],
                fit["above"],
                f"{fit['shapes']['below']} / {fit['shapes']['above']}",
            ]
        )
    L += ["| threshold | runs below L_th | at | above | shapes below / above |", "|---|---|---|---|---|"]
    L += ["| " + " | ".join(_g(x) if not isinstance(x, str) else x for x in row) + " |" for row in rows]
    L += [""]
    if fit.get("b") is None:
        L += ["No fitted b to count under: the headline claims none (see below).", ""]
    L += [a["prediction"] + ".", ""]
    for regime in ("below", "above"):
        L += [f"- {a['tests'][regime]['verdict']}."]
    ss = a["tests"]["above"].get("shape_sensitivity") or {}
    if ss.get("status") == "ok":
        L += [
            f"- Shape sensitivity above the threshold (Kaplan Figure 5 bands): at most "
            f"{100 * ss['max_loss_increase']:.1f}% over a {_g(ss['aspect_ratio_range'])}x range "
            f"of aspect ratios ({ss['n_bands']} bands)."
        ]
    L += [
        "",
        f"(Pairs: shapes of different depth whose N differ by at most 10^{a['pair_decades']}, "
        f"seeds averaged, each loss divided by a shape-agnostic L(N) trend; descriptive, without "
        f"an interval.)",
        "",
    ]
    return L


@writes_markdown
def design_power_md(power: dict | None) -> str | None:
    """The plan's power in one sentence, from a power summary: its own "text", or "power" (0–1)
    to detect "effect", with the optional "alpha", "n_trials" and "source" it was computed for."""
    if not power:
        return None
    if power.get("text"):
        return f"Power of the plan: {str(power['text']).rstrip('.')}."
    if power.get("power") is None:
        return None
    bits = [f"{100 * float(power['power']):.0f}% power"]
    if power.get("effect"):
        bits.append(f"to detect {power['effect']}")
    if power.get("alpha") is not None:
        bits.append(f"at a {100 * float(power['alpha']):.3g}% false-positive rate")
    if power.get("n_trials") is not None:
        bits.append(f"with {power['n_trials']} trials")
    src = f" ({power['source']})" if power.get("source") else ""
    return "Power of the plan" + src + ": " + " ".join(bits) + "."


@writes_markdown
def design_md(r: dict, power: dict | None = None) -> list[str]:
    """The Design section: how many widths each depth has, the design that would identify b, and,
    given a power summary of the plan (`power`, see design_power_md), what the sweep could see."""
    d = r.get("design")
    plan = design_power_md(power)
    if not d or is_absent(d):
        return ["## Design", "", plan, ""] if plan else []
    per = d["widths_per_depth"]
    counts = {}
    for ws in per.values():
        counts[len(ws)] = counts.get(len(ws), 0) + 1
    summary = ", ".join(
        f"{n} depth{'s' if n > 1 else ''} with {k} width{'s' if k > 1 else ''}"
        for k, n in sorted(counts.items())
    )
    text = (
        f"{summary}. The per-depth fits, crossovers and transition widths need 3 or more "
        f"widths at a depth; the threshold laws carry the test of b otherwise. A design that "
        f"identifies b: {d['text']}."
    )
    return ["## Design", "", text + (f" {plan}" if plan else ""), ""]


@writes_markdown
def sensitivity_sentence(r: dict) -> str | None:
    """The sensitivity check in one sentence: which single slice changes the verdict, or none."""
    s = r.get("sensitivity") or {}
    if s.get("status") != "ok" or not s.get("headline"):
        return None
    text = s["headline"]
    return "Left out one at a time, " + text + "."


def _b_cell(tl: dict | None) -> str:
    """The best threshold law's b and its profile interval; a b that is not identified (on its
    bound, or a profile open across the range) has no point, only its profile."""
    if not tl:
        return "–"
    lo, hi = tl["interval"]
    b = _g(tl["b"]) if tl["status"] == "ok" else "not identified"
    return f"{tl['law']}: {b} [{_g(lo)}, {_g(hi)}]" + (" (open)" if tl["open"] else "")


def _b3_cell(tl: dict | None) -> str:
    """b = 3 against b's interval, judged only where b is identified."""
    if not tl or tl["status"] != "ok":
        return "–"
    b3 = "excluded" if tl["excludes_theory"] else "inside"
    if tl.get("theory_form_alone"):
        b3 += " (the law's form alone: no run below log_3 d)"
    return b3


@writes_markdown
def sensitivity_md(r: dict) -> list[str]:
    """Each slice left out in turn: the refit's preferred law, verdict on b and the best
    threshold law's b with its profile interval, beside the same on all runs."""
    s = r.get("sensitivity")
    if not s:
        return []
    L = ["## Sensitivity: each slice of the design left out", ""]
    if s.get("status") != "ok":
        return L + [f"Not run: {s.get('reason')}.", ""]
    L += [_upper(s["headline"]) + ".", "", f"How: {s['method']}.", ""]
    L += [f"- {_upper(n)}." for n in s.get("notes") or []] + ([""] if s.get("notes") else [])
    L += [
        "Where the best threshold law's b is not identified (on its bound, or its profile open "
        "across the range), the row gives its profile interval without a point, and b = 3 is not "
        "judged against it (–).",
        "",
    ]
    L += [
        "| left out | runs | preferred law (BIC margin) | b: verdict | best threshold law: b [profile 95%] "
        "| b = 3 | changes |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in [s["reference"]] + s["refits"]:
        tl = row.get("threshold_law")
        margin = f" ({_g(row['bic_margin'])})" if row.get("bic_margin") is not None else ""
        L.append(
            f"| {row['left_out']} | {row['n_runs']} | {row['preferred']}{margin} | "
            f"{row['status'].replace('_', ' ')} | {_b_cell(tl)} | {_b3_cell(tl)} | "
            f"{', '.join(row.get('changes') or []) or '–'} |"
        )
    return L + [""]


def _upper(text: str) -> str:
    """The sentence with its first letter capitalized, unless that letter is a symbol on its own
    (b, the threshold base, is not B, the data term's scale)."""
    if len(text) > 1 and not text[1].isalpha():
        return text
    return text[:1].upper() + text[1:]
