"""report.md: the readable summary of an analysis report, with the figures inlined.

One paragraph says what the data say about Levine et al. 2020's L_th = log_b(d_x); tables give the
fits of docs/science.md §2–4 with their 95% bootstrap intervals, and Kaplan et al. 2020's values beside ours.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.reporting import adaptive_report, copying
from analysis.reporting.answer import answer, kaplan_answer
from analysis.reporting.markdown_sections import (
    _ci,
    _g,
    accounting_md,
    chinchilla_md,
    design_md,
    inputs_md,
    is_absent,
    sensitivity_md,
    sensitivity_sentence,
)
from analysis.reporting.markup import Md, code, writes_markdown
from depthwidth.published import LEVINE_INTERCEPT, LEVINE_SLOPE, THEORY_BASE


def _law_name(method: str | None) -> str:
    """'the two_regime law' from a headline's method text."""
    return (method or "the fit").split(" (")[0].split(";")[0]


def _lth_at_widths(loc: dict, most: int = 8) -> str:
    """L_th with its 95% interval at each width swept, beside the depths run there."""
    per = loc.get("per_width") or []
    if len(per) > most:  # the narrowest, the widest and evenly spread ones between
        per = [per[i] for i in np.unique(np.linspace(0, len(per) - 1, most).round().astype(int))]
    cells = [
        f"width {p['width']:g}: {p['L_th']:.3g} {_ci(p['L_th_ci'])} (depths {_span(p['depths'])})"
        for p in per
    ]
    return "L_th = log_b(d_x) at the widths swept, with its 95% interval: " + "; ".join(cells) + "."


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _span(depths: list) -> str:
    return f"{depths[0]}–{depths[-1]}" if len(depths) > 1 else f"{depths[0]}"


def _claimed_sentence(thr: dict) -> str:
    b, ci = thr["base"], thr["base_ci"]
    where = (thr.get("location") or {}).get("text")
    return (
        f"These runs locate a depth threshold: L_th = log_b(d_x) with b = {_g(b)} "
        f"(95% interval {_ci(ci)}), from {thr['method']}. The interval "
        f"{'contains' if thr['consistent_with_theory'] else 'excludes'} the theory's b = 3 "
        f"(Levine et al. 2020)" + _basis(thr) + (f"; {where}." if where else ".")
    )


def _basis(thr: dict | None) -> str:
    """', but ...' when an interval excludes b = 3 on the law's form alone (no run below log_3 d)."""
    basis = (thr or {}).get("theory_basis") or {}
    return f", but {basis['text']}" if basis.get("form_alone") else ""


def _extrapolation_sentence(thr: dict) -> str:
    return (
        f"These runs do not locate a depth threshold: {thr['location']['text']}. "
        f"{_upper_first(_law_name(thr['method']))}'s b = {_g(thr['base'])} (95% interval "
        f"{_ci(thr['base_ci'])}) is an extrapolation: it rests on the law's form alone, not on "
        f"runs on both sides of the threshold, so it is not claimed."
    )


def _headline_sentence(thr: dict) -> str:
    """The first sentence: what the headline found, in the case it is in."""
    if thr.get("status") == "not_identified":
        return f"These runs do not identify the threshold base: {thr['reason']}."
    if thr.get("base") is not None and thr.get("claimed"):
        return _claimed_sentence(thr)
    if thr.get("base") is not None and thr.get("extrapolation"):
        return _extrapolation_sentence(thr)
    if thr.get("base") is not None:
        return (
            f"The best estimate is b = {_g(thr['base'])} (interval {_ci(thr['base_ci'])}, "
            f"from {thr['method']}), but it is not claimed: {thr.get('reason') or 'see below'}."
        )
    return f"These runs do not locate a depth threshold: {thr.get('reason') or 'no estimate'}."


def _cross_check_sentence(cc: dict | None) -> str | None:
    """The second estimate of b: compared with the headline when both have one, else quoted."""
    if not cc:
        return None
    if "agree" not in cc:  # nothing to compare with: the headline has no estimate of its own
        return (
            f"For comparison, {_law_name(cc['method'])} gives b = {_g(cc['base'])} "
            f"{_ci(cc['base_ci'])}{_basis(cc)}; it is not the headline, which claims no threshold."
        )
    head = f"{cc['method'].split(';')[0]} gives b = {_g(cc['base'])} {_ci(cc['base_ci'])}{_basis(cc)}"
    if cc["agree"]:
        return f"Cross-check: {head}, which agrees with the headline."
    return (
        f"Cross-check: {head}, which disagrees with the headline; one of the two descriptions "
        f"does not fit these runs."
    )


def _transition_sentence(thr: dict) -> str | None:
    tf = thr.get("transition_fit") or {}
    from_transitions = (thr.get("method") or "").startswith("transition")
    if tf.get("status") == "ok" and not from_transitions:
        return (
            f"Model-free, the transition widths grow by e^beta = {_g(tf['base'])} per layer "
            f"(interval {_ci(tf['base_ci'])}; theory 3, Levine et al.'s empirical fit "
            f"e^{LEVINE_SLOPE} = {math.exp(LEVINE_SLOPE):.4g})."
        )
    if tf.get("status") != "ok" and thr.get("status") != "not_identified":
        return f"The transition widths could not be fitted ({tf.get('reason') or tf.get('status')})."
    return None


@writes_markdown
def lth_paragraph(r: dict) -> str:
    """What the data say about L_th, in words: the headline in the case it is in, whether one
    slice left out changes it, where the threshold lies against the depths swept, the preferred
    law, the cross-check and the model-free transition widths."""
    thr, reg = r["threshold"], r["regimes"]
    if is_absent(thr):
        return f"Not analysed: {thr['reason']}."
    pref = reg.get("preferred")
    loc = thr.get("location") or {}
    parts = [
        _headline_sentence(thr),
        sensitivity_sentence(r),
        _lth_at_widths(loc) if loc.get("per_width") else None,
        f"Of the loss laws, {code(pref)} is preferred by BIC." if pref and pref != "kaplan" else None,
        _cross_check_sentence(thr.get("cross_check")),
        _transition_sentence(thr),
    ]
    return " ".join(p for p in parts if p)


def verdict_line(r: dict) -> str:
    """The one-line verdict `analyze` and a finished sweep print: words, not field values."""
    thr = r.get("threshold") or {}
    if is_absent(thr) or not thr:
        return "verdict: no depth and width in the input, so no threshold is analysed"
    ci = " to ".join(f"{v:.3g}" for v in thr["base_ci"]) if thr.get("base_ci") else None
    b = f"b = {thr['base']:.3g}" + (f" (95% interval {ci})" if ci else "") if thr.get("base") else ""
    if thr.get("claimed"):
        theory = "contains" if thr.get("consistent_with_theory") else "excludes"
        return (
            f"verdict: a depth threshold is located, {b}; the interval {theory} the theory's b = 3"
            + _basis(thr)
            + _rests_on(r)
        )
    if thr.get("extrapolation"):
        return (
            f"verdict: no threshold located: {thr['location']['text']} (the law's {b} is an "
            f"extrapolation, not claimed)" + _rests_on(r)
        )
    return _verdict_words(thr, b) + _rests_on(r)


def _verdict_words(thr: dict, b: str) -> str:
    why = (thr.get("reason") or "no estimate").split("; ")[0]
    if thr.get("status") == "not_identified":
        return f"verdict: the threshold base is not identified: {why}"
    return f"verdict: no threshold claimed: {why}" + (f" (best estimate {b})" if b else "")


def _rests_on(r: dict) -> str:
    """'; <which slice the verdict rests on>' when one slice left out changes it, else ''."""
    s = r.get("sensitivity") or {}
    return f"; {s['headline']}" if s.get("status") == "ok" and s.get("changed") else ""


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_g(c) if not isinstance(c, str) else c for c in row) + " |" for row in rows]
    return out + [""]


@writes_markdown
def tuning_line(t: dict) -> str:
    """One sentence: tuning axes, selection rule and parametrization (docs/science.md §7)."""
    axes = ", ".join(code(a) for a in t["axes"]) or "none swept"
    return (
        f"Tuning axes: {axes}; selection rule: **{t['rule']}** ({t['rule_text']}); "
        f"parametrization: {', '.join(t['parametrization'])}; {t['n_runs_used']} of "
        f"{t['n_runs_in']} runs enter the fits."
    )


def _drift_cell(d: dict) -> str:
    if d.get("status") != "ok":
        return f"not identified ({d.get('reason', '')})"
    promised = d.get("promised")
    note = (
        "no promise"
        if promised is None
        else f"promised {_g(promised)}: {'as promised' if d.get('as_promised') else 'not as promised'}"
    )
    return f"{d['exponent']:.3g} {_ci(d['ci'])} ({note})"


@writes_markdown
def tuning_section(t: dict) -> list[str]:
    """Each shape's best setting, at_edge flags and the drift of the best learning rate."""
    L = ["## Tuning: each shape at its best setting", "", tuning_line(t), ""]
    if not t["axes"]:
        return L
    shape = list(t["shape_columns"])
    head = shape + list(t["axes"]) + ["at_edge", "rule", "select loss", "reported loss", "runner-up gap"]
    rows = [
        [r[c] for c in shape]
        + [r[a] for a in t["axes"]]
        + [
            "yes" if r["at_edge"] else "no",
            r["rule"],
            r["select_loss"],
            r.get("report_loss"),
            r.get("runner_up_gap"),
        ]
        for r in t["best"]
    ]
    L += _table(head, rows)
    edge = sum(1 for r in t["best"] if r["at_edge"])
    if edge:
        L += [
            f"{edge} of {len(t['best'])} shapes have their best setting at the edge of the "
            "swept range (`at_edge`): their true optimum may lie outside it.",
            "",
        ]
    d = t["lr_drift"]
    if d.get("status") == "ok":
        kept = d["n_shapes"] - d["n_at_edge"]
        left = (
            f" ({d['n_at_edge']} with their optimum at the grid's edge on that curve left out)"
            if d["n_at_edge"]
            else ""
        )
        L += [
            f"Drift of the best learning rate, lr* ∝ width^a · depth^g, fitted over {kept} of "
            f"{d['n_shapes']} shapes{left}; each optimum is read from the shape's loss-vs-lr "
            f"curve averaged over all its seeds (the vertex through the best point and its "
            f"neighbours): a = {_drift_cell(d['width'])}; g = {_drift_cell(d['depth'])}."
            + (f" Promises are those of {d['promise_of']}." if d.get("promise_of") else ""),
            "",
        ]
    else:
        L += [f"Drift of the best learning rate: {d.get('reason', d.get('status'))}.", ""]
    return L


def _runs_line(r: dict) -> str:
    """How many runs the fits saw, of how many ran, and why the others were left out."""
    exc = ", ".join(f"{k}: {v}" for k, v in r["n_excluded"].items() if v) or "none"
    shape = f"depths {r['depths']}; {len(r['widths'])} widths" if r.get("depths") else "no depth and width"
    t = r.get("tuning") or {}
    if t.get("axes"):
        fitted = (
            f"{r['n_runs']} of {t['n_runs_in']} runs fitted, each shape at its best "
            f"{', '.join(t['axes'])} (see Tuning)"
        )
    else:
        fitted = f"{r['n_runs']} runs fitted"
    return f"{fitted}; excluded: {exc}; {shape}; {r['bootstrap']} bootstrap refits, seed {r['seed']}."


def _lth_md(r: dict) -> list[str]:
    return ["## What the data say about L_th", "", lth_paragraph(r), ""]


def _threshold_table_md(r: dict) -> list[str]:
    """The headline b beside the model-free estimators, the theory and Levine's empirical fit."""
    thr = r["threshold"]
    tf, kf = thr["transition_fit"], thr["knee_fit"]
    how = thr.get("method") or "–"
    if thr.get("extrapolation"):
        how += " (an extrapolation: the threshold is not located in the runs)"
    return ["## Threshold base b in L_th = log_b(d_x)", ""] + _table(
        ["estimate", "b", "95% interval", "how"],
        [
            ["headline", thr.get("base"), _ci(thr.get("base_ci")), how],
            [
                "transition widths",
                tf.get("base"),
                _ci(tf.get("base_ci")),
                tf.get("reason") or "crossovers of consecutive depths",
            ],
            [
                "knees of loss vs depth",
                kf.get("base"),
                _ci(kf.get("base_ci")),
                kf.get("reason") or "two-segment fit per width; under the §4 law the knee sits past L_th",
            ],
            ["theory (Levine et al. 2020)", THEORY_BASE, "–", "separation rank"],
            [
                "Levine et al. empirical",
                math.exp(LEVINE_SLOPE),
                "–",
                f"d* = exp({LEVINE_INTERCEPT} + {LEVINE_SLOPE} L)",
            ],
        ],
    )


def _law_row(name: str, m: dict, preferred: str | None) -> list:
    p = m.get("params", {})
    key = ", ".join(
        f"{k}={_g(v)}"
        for k, v in p.items()
        if k in ("E", "alpha_N", "alpha_kappa", "b", "alpha_width", "alpha_depth", "alpha_D")
    )
    prof = m.get("profile")
    if prof:
        key += (
            ("; " if key else "")
            + f"b profile {_ci(prof['interval'])}"
            + (" (open)" if prof["open_below"] or prof["open_above"] else "")
        )
    note = m.get("reason", "") if m["status"] != "ok" else m.get("note", "")
    return [
        name + (" (preferred)" if name == preferred else ""),
        m["status"],
        "; ".join(filter(None, [key, note])) or "–",
        m.get("aic"),
        m.get("bic"),
        m.get("cv_error"),
    ]


def _laws_md(r: dict) -> list[str]:
    """Every candidate loss law with its status, parameters, AIC, BIC and cross-validation."""
    reg = r["regimes"]
    L = ["## Loss laws on all runs (docs/science.md §4, §9)", ""]
    pts = reg.get("points") or {}
    if reg.get("data_terms"):
        L += [
            f"Every law carries a data term + B_D·D^-alpha_D and is fitted on {pts.get('n_points')} "
            f"points from {pts.get('n_runs')} runs ({pts.get('weighting')}).",
            "",
        ]
    rows = [_law_row(name, m, reg.get("preferred")) for name, m in reg["models"].items()]
    return L + _table(["law", "status", "parameters / why", "AIC", "BIC", "leave-one-depth-out RMS"], rows)


def _power_laws_md(r: dict) -> list[str]:
    """L(N) per depth and on the envelope; depths with too few widths summed up in one line."""
    L = ["## Power laws L(N) = E + A·N^-alpha", ""]
    pls = dict(r["power_laws"]["per_depth"])
    pls["envelope"] = r["power_laws"]["envelope"]
    thin = [k for k, f in pls.items() if f["status"] == "insufficient_data" and k != "envelope"]
    rows = []
    for k, f in pls.items():
        if len(thin) > 6 and k in thin:
            continue
        p, ci = f.get("params", {}), f.get("ci", {})
        rows.append(
            [
                k,
                f["status"],
                p.get("E"),
                p.get("alpha_N"),
                _ci(ci.get("alpha_N")),
                f.get("n_points"),
                f.get("reason") or f.get("note") or "",
            ]
        )
    L += _table(["depth", "status", "E", "alpha_N", "95% interval", "runs", "note"], rows)
    if len(thin) > 6:
        L += [
            f"Not fitted, too few widths: depths {', '.join(thin)} ("
            + "; ".join(pls[k]["reason"].split(";")[0] for k in thin[:3])
            + "; ...).",
            "",
        ]
    return L


def _crossovers_md(r: dict) -> list[str]:
    """Where the deeper model starts to win at equal N, then the optimal depth per N."""
    L = ["## Crossovers: where the deeper model starts to win at equal N", ""]
    cross = r["crossovers"]
    shown = [c for c in cross if c["status"] != "insufficient_data"]
    rows = [
        [
            f"{c['depths'][0]} → {c['depths'][1]}",
            c["status"],
            c.get("n_params"),
            _ci(c.get("n_params_ci")),
            ", ".join(_g(w) for w in c["widths"]) if c.get("widths") else "–",
            c.get("p_crossover"),
        ]
        for c in shown
    ]
    if rows:
        L += _table(["depths", "status", "N*", "95% interval", "widths at N*", "P(crossover)"], rows)
    if len(shown) < len(cross):
        L += [
            f"{len(cross) - len(shown)} of {len(cross)} pairs of depths not compared: a "
            f"per-depth fit is missing (needs 3 or more widths at the depth).",
            "",
        ]
    opt = r["optimal_depth"]
    if opt.get("points"):
        pts = opt["points"][:: max(1, len(opt["points"]) // 8)]
        L += [
            "Optimal depth L*(N) (N: depth): "
            + "; ".join(f"{_g(p['n_params'])}: {p['depth']}" for p in pts)
            + ".",
            "",
        ]
    return L


def _adaptive_md(r: dict) -> list[str]:
    """The runs an adaptive sweep chose, and why (absent for a grid)."""
    return adaptive_report.markdown(r.get("adaptive"))


@writes_markdown
def render(r: dict, design_power: dict | None = None) -> str:
    """report.md from a report dict, one section after another. `design_power` (or the report's
    own "design_power" entry) is the power summary of the plan the sweep ran, quoted in the
    Design section (markdown_sections.design_md). Every string in both is escaped before any
    section sees it (analysis/reporting/markup.py): text from data is never markup."""
    power = design_power if design_power is not None else r.get("design_power")
    L = [f"# Depth–width analysis: {code(r['source'])}", "", r.get("answer") or answer(r), ""]
    L += (
        _lth_md(r)
        + inputs_md(r, Md(_runs_line(r)))
        + accounting_md(r)
        + design_md(r, power)
        + chinchilla_md(r)
    )
    L += copying.markdown(r.get("copying"))
    if is_absent(r["threshold"]):
        return "\n".join(L + _shape_free_tail(r))
    for section in (
        _threshold_table_md,
        sensitivity_md,
        _laws_md,
        _power_laws_md,
        _crossovers_md,
        _learning_curves_md,
        _kaplan_md,
        _adaptive_md,
        _tail,
    ):
        L += section(r)
    return "\n".join(L)


def _learning_curves_md(r: dict) -> list[str]:
    lc = r["learning_curves"]["fit"]
    L = ["## Learning curves L(N,S) (Kaplan eq. 1.6 with a floor E)", ""]
    if lc["status"] == "ok":
        L += [", ".join(f"{k} = {_g(v)} {_ci(lc['ci'].get(k))}" for k, v in lc["params"].items()), ""]
    else:
        L += [f"{lc['status']}: {lc['reason']}", ""]
    return L


def _shape_free_tail(r: dict) -> list[str]:
    return (
        _learning_curves_md(r)
        + [
            f"Not analysed ({r['threshold']['reason']}): the threshold, the loss laws over shapes, "
            f"per-depth power laws, crossovers, regime accounting and Kaplan's shape comparisons.",
            "",
        ]
        + _tail(r)
    )


def _kaplan_md(r: dict) -> list[str]:
    L = []
    k = r["kaplan"]
    ours = k["ours"]
    kap = k["kaplan2020"]
    L += ["## Beside Kaplan et al. 2020", ""]
    aN, aS = ours.get("alpha_N") or {}, ours.get("alpha_S") or {}
    shape, coll = ours["shape"], ours["depth_collapse"]
    L += _table(
        ["quantity", "ours", "95% interval", "Kaplan et al. 2020"],
        [
            ["alpha_N, (N_c/N)^alpha_N", aN.get("value"), _ci(aN.get("ci")), kap["alpha_N"]["value"]],
            ["alpha_S, L(N,S)", aS.get("value"), _ci(aS.get("ci")), kap["alpha_S"]["value"]],
            [
                "max loss increase over shapes",
                shape.get("max_loss_increase"),
                f"aspect range {_g(shape.get('aspect_ratio_range'))}x",
                "0.03 over 40x",
            ],
        ],
    )
    if coll.get("depths"):
        L += [
            "Depth collapse (median deviation above the deep envelope): "
            + "; ".join(f"depth {d['depth']}: {100 * d['median_deviation']:+.1f}%" for d in coll["depths"])
            + ".",
            "",
        ]
    L += [
        "Levine et al.'s predicted departure points for Kaplan's Figure 6 depths: "
        + "; ".join(
            f"L={d['depth']}: d=3^L={_g(d['width_theory'])}, N={_g(d['n_params_theory'])}"
            for d in k["levine_departures"]
        )
        + ".",
        "",
        k["note"] + ".",
        "",
    ]
    return L


def _tail(r: dict) -> list[str]:
    L = []
    if r.get("tuning"):
        L += tuning_section(r["tuning"])
    if "relrnn" in r:
        rel = r["relrnn"]
        status = f"status: {rel.get('status', 'see report.json')}" + (
            f" ({rel['reason']})" if rel.get("reason") else ""
        )
        # the section opens with its answer (the first line of its markdown) where it has one
        L += ["## Recurrent family", ""] + ([] if rel.get("answer") else [status, ""])
        L += [_relrnn_md(rel), ""]

    figs = r.get("figures", {})
    if figs.get("written"):
        L += ["## Figures", ""]
        L += [f"![{n}]({n}.png)" for n in figs["written"]] + [""]
        L += [f"Not drawn: {n} ({why})." for n, why in figs.get("skipped", {}).items()] + [""]
    if r.get("timings_s"):
        L += ["Stage times (s): " + ", ".join(f"{k} {v:.2f}" for k, v in r["timings_s"].items()), ""]
    return L


def _relrnn_md(section: dict) -> str:
    """The recurrent family's section, drawn again from its fields (escaped as the rest), never
    from a stored Markdown string, which would be text here."""
    from analysis.kerg.relrnn import section_markdown  # matplotlib's import, only where needed

    return section_markdown(section)


def kaplan_table(k: dict) -> list[str]:
    """Ours | Kaplan et al. 2020 | digitized published curves fitted by the same code."""
    ours, kap = k["ours"], k["kaplan2020"]
    dig = k.get("digitized") or {}
    aN, aS = ours.get("alpha_N") or {}, ours.get("alpha_S") or {}
    dlc = (dig.get("learning_curves") or {}).get("params", {})
    dci = (dig.get("learning_curves") or {}).get("ci", {})
    shape = ours["shape"]
    rows = [
        [
            "alpha_N",
            f"{_g(aN.get('value'))} {_ci(aN.get('ci'))}",
            _g(kap["alpha_N"]["value"]),
            f"{_g(dig.get('alpha_N'))} (final losses); {_g(dlc.get('alpha_N'))} in L(N,S)" if dig else "–",
        ],
        [
            "alpha_S",
            # an exponent that was not fitted says why, rather than showing empty cells
            f"{_g(aS.get('value'))} {_ci(aS.get('ci'))}" if aS else ours.get("alpha_S_reason", "not fitted"),
            _g(kap["alpha_S"]["value"]),
            f"{_g(dlc.get('alpha_S'))} {_ci(dci.get('alpha_S'))}" if dig else "–",
        ],
        [
            "S_c (steps)",
            _g(aS.get("S_c")) if aS else "not fitted (see alpha_S)",
            _g(kap["alpha_S"]["S_c"]),
            f"{_g(dlc.get('S_c'))} {_ci(dci.get('S_c'))}" if dig else "–",
        ],
        [
            "max loss increase over shapes",
            f"{_g(shape.get('max_loss_increase'))} over {_g(shape.get('aspect_ratio_range'))}x"
            if shape.get("status") == "ok"
            else shape.get("reason", "–"),
            "0.03 over 40x",
            "–",
        ],
    ]
    return _table(["quantity", "ours", "Kaplan et al. 2020", "digitized, same code"], rows)


@writes_markdown
def render_kaplan(k: dict) -> str:
    """kaplan.md from `kaplan_report`'s result, every string in it escaped first."""
    L = [f"# Beside Kaplan et al. 2020: {code(k['source'])}", "", k.get("answer") or kaplan_answer(k), ""]
    L += kaplan_table(k)
    coll = k["ours"]["depth_collapse"]
    if coll.get("depths"):
        L += [
            "Depth collapse (median / max deviation above the deep envelope; Kaplan: depths >= 2 "
            "converge, 1 layer deviates): "
            + "; ".join(
                f"depth {d['depth']}: {100 * d['median_deviation']:+.1f}% / {100 * d['max_deviation']:+.1f}%"
                for d in coll["depths"]
            )
            + ".",
            "",
        ]
    L += ["Levine et al. 2020's departure points for Kaplan's Figure 6 depths:", ""]
    L += _table(
        ["depth", "width 3^L", "N = 12 L d^2", "empirical d*(L)", "N_opt(L)"],
        [
            [
                d["depth"],
                d["width_theory"],
                d["n_params_theory"],
                d["width_empirical"],
                d["n_params_empirical"],
            ]
            for d in k["levine_departures"]
        ],
    )
    L += [k["note"] + ".", ""]
    if k.get("figures", {}).get("written"):
        L += [f"![{n}]({n}.png)" for n in k["figures"]["written"]] + [""]
    return "\n".join(L)
