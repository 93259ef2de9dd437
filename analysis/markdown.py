"""report.md: the readable summary of an analysis report, with the figures inlined.

One paragraph says what the data say about Levine et al. 2020's L_th = log_b(d_x); tables give the
fits of docs/science.md §2–4 with their 95% bootstrap intervals, and Kaplan et al. 2020's values beside ours.
"""

from __future__ import annotations

import math

from analysis import adaptive_report
from analysis.markdown_sections import (_ci, _g, accounting_md, chinchilla_md, design_md, inputs_md,
                                       is_absent)
from depthwidth.published import LEVINE_INTERCEPT, LEVINE_SLOPE, THEORY_BASE


def lth_paragraph(r: dict) -> str:
    """What the data say about L_th, in words, from the headline and the model comparison."""
    thr, reg = r["threshold"], r["regimes"]
    if is_absent(thr):
        return f"Not analysed: {thr['reason']}."
    tf = thr["transition_fit"]
    pref = reg.get("preferred")
    parts = []
    if thr.get("status") == "not_identified":
        parts.append(f"These runs do not identify the threshold base: {thr['reason']}.")
    elif thr.get("base") is not None and thr.get("claimed"):
        b, ci = thr["base"], thr["base_ci"]
        at768 = math.log(768) / math.log(b)
        parts.append(
            f"These runs locate a depth threshold: L_th = log_b(d_x) with b = {_g(b)} "
            f"(95% interval {_ci(ci)}), from {thr['method']}. The interval "
            f"{'contains' if thr['consistent_with_theory'] else 'excludes'} the theory's b = 3 "
            f"(Levine et al. 2020); at width 768 it puts the threshold at {at768:.2g} layers "
            f"(theory {math.log(768) / math.log(THEORY_BASE):.2g}).")
    elif thr.get("base") is not None:
        parts.append(f"The best estimate is b = {_g(thr['base'])} (interval {_ci(thr['base_ci'])}, "
                     f"from {thr['method']}), but it is not claimed: {thr.get('reason', '')}.")
    else:
        parts.append(f"These runs do not locate a depth threshold: {thr.get('reason', 'no estimate')}.")
    if pref and pref != "kaplan":
        parts.append(f"Of the loss laws, `{pref}` is preferred by BIC.")
    cc = thr.get("cross_check")
    if cc:
        parts.append(f"Cross-check: {cc['method'].split(';')[0]} gives b = {_g(cc['base'])} "
                     f"{_ci(cc['base_ci'])}, which {'agrees' if cc['agree'] else 'disagrees'} with "
                     f"the headline" + ("." if cc["agree"] else
                                        "; one of the two descriptions does not fit these runs."))
    from_transitions = (thr.get("method") or "").startswith("transition")
    if tf.get("status") == "ok" and not from_transitions:
        parts.append(f"Model-free, the transition widths grow by e^beta = {_g(tf['base'])} per layer "
                     f"(interval {_ci(tf['base_ci'])}; theory 3, Levine et al.'s empirical fit "
                     f"e^{LEVINE_SLOPE} = {math.exp(LEVINE_SLOPE):.4g}).")
    elif tf.get("status") != "ok" and thr.get("status") != "not_identified":
        parts.append(f"The transition widths could not be fitted ({tf.get('reason', '')}).")
    return " ".join(parts)


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_g(c) if not isinstance(c, str) else c for c in row) + " |" for row in rows]
    return out + [""]


def tuning_line(t: dict) -> str:
    """One sentence: tuning axes, selection rule and parametrization (docs/science.md §7)."""
    axes = ", ".join(f"`{a}`" for a in t["axes"]) or "none swept"
    return (f"Tuning axes: {axes}; selection rule: **{t['rule']}** ({t['rule_text']}); "
            f"parametrization: {', '.join(t['parametrization'])}; {t['n_runs_used']} of "
            f"{t['n_runs_in']} runs enter the fits.")


def _drift_cell(d: dict) -> str:
    if d.get("status") != "ok":
        return f"not identified ({d.get('reason', '')})"
    promised = d.get("promised")
    note = ("no promise" if promised is None else
            f"promised {_g(promised)}: {'as promised' if d.get('as_promised') else 'not as promised'}")
    return f"{d['exponent']:.3g} {_ci(d['ci'])} ({note})"


def tuning_section(t: dict) -> list[str]:
    """Each shape's best setting, at_edge flags and the drift of the best learning rate."""
    L = ["## Tuning: each shape at its best setting", "", tuning_line(t), ""]
    if not t["axes"]:
        return L
    shape = list(t["shape_columns"])
    head = shape + list(t["axes"]) + ["at_edge", "rule", "select loss", "reported loss",
                                      "runner-up gap"]
    rows = [[r[c] for c in shape] + [r[a] for a in t["axes"]]
            + ["yes" if r["at_edge"] else "no", r["rule"], r["select_loss"], r.get("report_loss"),
               r.get("runner_up_gap")] for r in t["best"]]
    L += _table(head, rows)
    edge = sum(1 for r in t["best"] if r["at_edge"])
    if edge:
        L += [f"{edge} of {len(t['best'])} shapes have their best setting at the edge of the "
              "swept range (`at_edge`): their true optimum may lie outside it.", ""]
    d = t["lr_drift"]
    if d.get("status") == "ok":
        L += [f"Drift of the best learning rate, lr* ∝ width^a · depth^g over {d['n_shapes']} "
              f"shapes, each optimum read from the shape's loss-vs-lr curve averaged over all its "
              f"seeds (the vertex through the best point and its neighbours; {d['n_at_edge']} "
              f"at the grid's edge on that curve left out): a = "
              f"{_drift_cell(d['width'])}; g = {_drift_cell(d['depth'])}."
              + (f" Promises are those of {d['promise_of']}." if d.get("promise_of") else ""), ""]
    else:
        L += [f"Drift of the best learning rate: {d.get('reason', d.get('status'))}.", ""]
    return L


def render(r: dict) -> str:
    L = [f"# Depth–width analysis: `{r['source']}`", ""]
    exc = ", ".join(f"{k}: {v}" for k, v in r["n_excluded"].items() if v) or "none"
    shape = (f"depths {r['depths']}; {len(r['widths'])} widths" if r.get("depths") else
             "no depth and width")
    L += [f"{r['n_runs']} runs fitted (excluded: {exc}); {shape}; {r['bootstrap']} bootstrap "
          f"refits, seed {r['seed']}.", ""]
    if r.get("tuning"):
        L += [tuning_line(r["tuning"]), ""]
    L += inputs_md(r)
    L += ["## What the data say about L_th", "", lth_paragraph(r), ""]
    L += accounting_md(r)
    L += design_md(r)
    L += chinchilla_md(r)
    if is_absent(r["threshold"]):
        return "\n".join(L + _shape_free_tail(r))

    thr = r["threshold"]
    L += ["## Threshold base b in L_th = log_b(d_x)", ""]
    tf, kf = thr["transition_fit"], thr["knee_fit"]
    L += _table(["estimate", "b", "95% interval", "how"], [
        ["headline", thr.get("base"), _ci(thr.get("base_ci")), thr.get("method") or "–"],
        ["transition widths", tf.get("base"), _ci(tf.get("base_ci")),
         tf.get("reason") or "crossovers of consecutive depths"],
        ["knees of loss vs depth", kf.get("base"), _ci(kf.get("base_ci")),
         kf.get("reason") or "two-segment fit per width; under the §4 law the knee sits past L_th"],
        ["theory (Levine et al. 2020)", THEORY_BASE, "–", "separation rank"],
        ["Levine et al. empirical", math.exp(LEVINE_SLOPE), "–",
         f"d* = exp({LEVINE_INTERCEPT} + {LEVINE_SLOPE} L)"],
    ])

    reg = r["regimes"]
    L += ["## Loss laws on all runs (docs/science.md §4, §9)", ""]
    pts = reg.get("points") or {}
    if reg.get("data_terms"):
        L += [f"Every law carries a data term + B_D·D^-alpha_D and is fitted on {pts.get('n_points')} "
              f"points from {pts.get('n_runs')} runs ({pts.get('weighting')}).", ""]
    rows = []
    for name, m in reg["models"].items():
        p = m.get("params", {})
        key = ", ".join(f"{k}={_g(v)}" for k, v in p.items()
                        if k in ("E", "alpha_N", "alpha_kappa", "b", "alpha_width", "alpha_depth", "alpha_D"))
        prof = m.get("profile")
        if prof:
            key += ("; " if key else "") + f"b profile {_ci(prof['interval'])}" + (
                " (open)" if prof["open_below"] or prof["open_above"] else "")
        note = m.get("reason", "") if m["status"] != "ok" else m.get("note", "")
        rows.append([name + (" (preferred)" if name == reg["preferred"] else ""), m["status"],
                     "; ".join(filter(None, [key, note])) or "–", m.get("aic"), m.get("bic"),
                     m.get("cv_error")])
    L += _table(["law", "status", "parameters / why", "AIC", "BIC", "leave-one-depth-out RMS"], rows)

    L += ["## Power laws L(N) = E + A·N^-alpha", ""]
    rows = []
    pls = dict(r["power_laws"]["per_depth"])
    pls["envelope"] = r["power_laws"]["envelope"]
    thin = [k for k, f in pls.items() if f["status"] == "insufficient_data" and k != "envelope"]
    for k, f in pls.items():
        if len(thin) > 6 and k in thin:
            continue
        p, ci = f.get("params", {}), f.get("ci", {})
        rows.append([k, f["status"], p.get("E"), p.get("alpha_N"), _ci(ci.get("alpha_N")),
                     f.get("n_points"), f.get("reason") or f.get("note") or ""])
    L += _table(["depth", "status", "E", "alpha_N", "95% interval", "runs", "note"], rows)
    if len(thin) > 6:
        L += [f"Not fitted, too few widths: depths {', '.join(thin)} (" + "; ".join(
            pls[k]["reason"].split(";")[0] for k in thin[:3]) + "; ...).", ""]

    L += ["## Crossovers: where the deeper model starts to win at equal N", ""]
    cross = r["crossovers"]
    shown = [c for c in cross if c["status"] != "insufficient_data"]
    rows = [[f"{c['depths'][0]} → {c['depths'][1]}", c["status"], c.get("n_params"),
             _ci(c.get("n_params_ci")), ", ".join(_g(w) for w in c["widths"]) if c.get("widths") else "–",
             c.get("p_crossover")] for c in shown]
    if rows:
        L += _table(["depths", "status", "N*", "95% interval", "widths at N*", "P(crossover)"], rows)
    if len(shown) < len(cross):
        L += [f"{len(cross) - len(shown)} of {len(cross)} pairs of depths not compared: a "
              f"per-depth fit is missing (needs 3 or more widths at the depth).", ""]

    opt = r["optimal_depth"]
    if opt.get("points"):
        seq = [f"{_g(p['n_params'])}: {p['depth']}" for p in opt["points"][:: max(1, len(opt['points']) // 8)]]
        L += ["Optimal depth L*(N) (N: depth): " + "; ".join(seq) + ".", ""]

    L += _learning_curves_md(r)
    L += _kaplan_md(r)
    L += adaptive_report.markdown(r.get("adaptive"))
    L += _tail(r)
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
    return _learning_curves_md(r) + [
        f"Not analysed ({r['threshold']['reason']}): the threshold, the loss laws over shapes, "
        f"per-depth power laws, crossovers, regime accounting and Kaplan's shape comparisons.",
        ""] + _tail(r)


def _kaplan_md(r: dict) -> list[str]:
    L = []
    k = r["kaplan"]
    ours = k["ours"]
    kap = k["kaplan2020"]
    L += ["## Beside Kaplan et al. 2020", ""]
    aN, aS = ours.get("alpha_N") or {}, ours.get("alpha_S") or {}
    shape, coll = ours["shape"], ours["depth_collapse"]
    L += _table(["quantity", "ours", "95% interval", "Kaplan et al. 2020"], [
        ["alpha_N, (N_c/N)^alpha_N", aN.get("value"), _ci(aN.get("ci")), kap["alpha_N"]["value"]],
        ["alpha_S, L(N,S)", aS.get("value"), _ci(aS.get("ci")), kap["alpha_S"]["value"]],
        ["max loss increase over shapes", shape.get("max_loss_increase"),
         f"aspect range {_g(shape.get('aspect_ratio_range'))}x", "0.03 over 40x"],
    ])
    if coll.get("depths"):
        L += ["Depth collapse (median deviation above the deep envelope): " + "; ".join(
            f"depth {d['depth']}: {100 * d['median_deviation']:+.1f}%" for d in coll["depths"]) + ".", ""]
    L += ["Levine et al.'s predicted departure points for Kaplan's Figure 6 depths: " + "; ".join(
        f"L={d['depth']}: d=3^L={_g(d['width_theory'])}, N={_g(d['n_params_theory'])}"
        for d in k["levine_departures"]) + ".", "", k["note"] + ".", ""]
    return L


def _tail(r: dict) -> list[str]:
    L = []
    if r.get("tuning"):
        L += tuning_section(r["tuning"])
    if "relrnn" in r:
        L += ["## Recurrent family", "", f"status: {r['relrnn'].get('status', 'see report.json')}"
              + (f" ({r['relrnn']['reason']})" if r["relrnn"].get("reason") else ""), "",
              r["relrnn"].get("markdown", ""), ""]

    figs = r.get("figures", {})
    if figs.get("written"):
        L += ["## Figures", ""]
        L += [f"![{n}]({n}.png)" for n in figs["written"]] + [""]
        L += [f"Not drawn: {n} ({why})." for n, why in figs.get("skipped", {}).items()] + [""]
    if r.get("timings_s"):
        L += ["Stage times (s): " + ", ".join(f"{k} {v:.2f}" for k, v in r["timings_s"].items()), ""]
    return L


def kaplan_table(k: dict) -> list[str]:
    """Ours | Kaplan et al. 2020 | digitized published curves fitted by the same code."""
    ours, kap = k["ours"], k["kaplan2020"]
    dig = k.get("digitized") or {}
    aN, aS = ours.get("alpha_N") or {}, ours.get("alpha_S") or {}
    dlc = (dig.get("learning_curves") or {}).get("params", {})
    dci = (dig.get("learning_curves") or {}).get("ci", {})
    shape = ours["shape"]
    rows = [
        ["alpha_N", f"{_g(aN.get('value'))} {_ci(aN.get('ci'))}", _g(kap["alpha_N"]["value"]),
         f"{_g(dig.get('alpha_N'))} (final losses); {_g(dlc.get('alpha_N'))} in L(N,S)" if dig else "–"],
        ["alpha_S", f"{_g(aS.get('value'))} {_ci(aS.get('ci'))}", _g(kap["alpha_S"]["value"]),
         f"{_g(dlc.get('alpha_S'))} {_ci(dci.get('alpha_S'))}" if dig else "–"],
        ["S_c (steps)", _g(aS.get("S_c")), _g(kap["alpha_S"]["S_c"]),
         f"{_g(dlc.get('S_c'))} {_ci(dci.get('S_c'))}" if dig else "–"],
        ["max loss increase over shapes", f"{_g(shape.get('max_loss_increase'))} over "
         f"{_g(shape.get('aspect_ratio_range'))}x" if shape.get("status") == "ok" else shape.get("reason", "–"),
         "0.03 over 40x", "–"],
    ]
    return _table(["quantity", "ours", "Kaplan et al. 2020", "digitized, same code"], rows)


def render_kaplan(k: dict) -> str:
    L = [f"# Beside Kaplan et al. 2020: `{k['source']}`", ""]
    L += kaplan_table(k)
    coll = k["ours"]["depth_collapse"]
    if coll.get("depths"):
        L += ["Depth collapse (median / max deviation above the deep envelope; Kaplan: depths >= 2 "
              "converge, 1 layer deviates): " + "; ".join(
                  f"depth {d['depth']}: {100 * d['median_deviation']:+.1f}% / {100 * d['max_deviation']:+.1f}%"
                  for d in coll["depths"]) + ".", ""]
    L += ["Levine et al. 2020's departure points for Kaplan's Figure 6 depths:", ""]
    L += _table(["depth", "width 3^L", "N = 12 L d^2", "empirical d*(L)", "N_opt(L)"],
                [[d["depth"], d["width_theory"], d["n_params_theory"], d["width_empirical"],
                  d["n_params_empirical"]] for d in k["levine_departures"]])
    L += [k["note"] + ".", ""]
    if k.get("figures", {}).get("written"):
        L += [f"![{n}]({n}.png)" for n in k["figures"]["written"]] + [""]
    return "\n".join(L)
