"""`depthwidth design SPEC --propose --budget B`: the most powerful plan found within a budget.

Candidates vary the spec's depth cap (depth ≤ m·log3(width)), token budget rule (as given, one
fixed budget decoupled from N, three budgets a factor 3 apart shared by every shape, or five a
factor 2 apart taken as cooldown branches of one WSD run per shape), seeds and learning-rate
points; each within the budget is costed
by the planner (sweeps/plans/plan.py) and screened on planted replicates, the best are rated in full
(analysis/power/design.py), and the chosen one is written as a spec `sweep plan` accepts.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from depthwidth.clitools import fail
from runstore.files import is_remote
from sweeps.designing.rating import PowerSummary, summarize
from sweeps.designing.variants import candidate_docs, to_toml
from sweeps.plans.budget import missing_data_allowed
from sweeps.plans.spec import SpecError, parse_spec

_BUDGET_RE = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(gpu-h|cpu-h|flops|pf-days)\s*$", re.IGNORECASE
)


PROPOSE_FILES = ("proposed.toml", "candidates.csv", "candidates.md")  # what --propose writes in --out


def default_out(spec) -> str:
    return f"{spec.name}-proposal"


def parse_budget_value(text: str | None, resources) -> float:
    """'1000gpu-h', '4cpu-h', '3e18flops' or '2pf-days' -> FLOPs, at the throughput the spec
    assumes (resources.gpu_tflops per GPU, resources.cpu_gflops per core), as `sweep plan` does."""
    from depthwidth.published import PF_DAY

    m = _BUDGET_RE.match(text or "")
    if not m or float(m.group(1)) <= 0:
        raise SpecError(
            f"--budget = {text!r} is invalid: give a positive number with its unit, "
            f"e.g. 1000gpu-h, 4cpu-h, 3e18flops or 2pf-days."
        )
    v, unit = float(m.group(1)), m.group(2).lower()
    if unit == "gpu-h":
        return v * 3600 * resources.gpu_tflops * 1e12
    if unit == "cpu-h":
        return v * 3600 * resources.cpu_gflops * 1e9
    return v * PF_DAY if unit == "pf-days" else v


@dataclass
class Candidate:
    """One candidate plan: its spec document, what it changes of the plan as written, its cost and
    where the search left it (`stage`: rejected, over budget, duplicate, skipped, screened,
    rated), with its rating once screened or rated."""

    id: int
    doc: dict
    depth_cap: Any
    tokens: str
    seeds: int
    lr_points: int
    wsd: bool = False
    stage: str = "rejected"
    note: str = ""
    spec: Any = None
    trials: Any = None  # the plan's trials as a table (sweeps/designing/design_plan.py)
    totals: Any = None  # what it trains in all (sweeps/plans/plan.py Totals)
    n_trials: int | None = None
    flops: float | None = None
    cost: float | None = None  # in the spec's unit: GPU-hours or CPU core-hours
    within_budget: bool = False
    power: float | None = None
    power_se: float | None = None
    false_claim: float | None = None
    width: float | None = None
    replicates: int | None = None

    def structure(self) -> tuple:
        return (self.depth_cap, self.tokens, self.lr_points)

    def what(self) -> str:
        """What it changes, in words."""
        cap = (
            "depths as written" if self.depth_cap == "as written" else f"depth ≤ {self.depth_cap}·log3(width)"
        )
        if self.tokens == "as written":
            tok = "token budget as written"
        elif str(self.tokens).startswith(("3 budgets", "5 budgets")):
            tok = f"{self.tokens} for every shape"
        else:
            tok = f"{self.tokens} tokens per trial"
        wsd = ", warmup-stable-decay" if self.wsd else ""
        points = f"{self.lr_points} lr point{'s' if self.lr_points != 1 else ''}"
        return f"{cap}, {tok}, {self.seeds} seeds, {points}{wsd}"

    def row(self, unit: str) -> dict[str, Any]:
        """Its row of candidates.csv."""
        return {
            "id": self.id,
            "stage": self.stage,
            "depth_cap": self.depth_cap,
            "tokens": self.tokens,
            "seeds": self.seeds,
            "lr_points": self.lr_points,
            "n_trials": self.n_trials,
            "flops": self.flops,
            unit: self.cost,
            "within_budget": self.within_budget,
            "power": self.power,
            "power_se": self.power_se,
            "false_claim": self.false_claim,
            "width": self.width,
            "replicates": self.replicates,
            "note": self.note,
        }


def _most_seeds(pool: list[Candidate], limit: int) -> list[Candidate]:
    """Per structure (depth cap, token rule, lr points) the variant with the most seeds that fits
    the budget (more seeds never cost power); then at most `limit` of them, costliest first, and
    the plan as written whenever it fits."""
    best: dict[tuple, Candidate] = {}
    for c in pool:
        if c.structure() not in best or c.seeds > best[c.structure()].seeds:
            best[c.structure()] = c
    chosen = {id(c) for c in best.values()}
    for c in pool:
        if id(c) not in chosen and c.id != 0:
            c.stage, c.note = "skipped", "a variant of this structure with more seeds fits"
    keep = sorted(best.values(), key=lambda c: -c.flops)[:limit]
    kept = {id(c) for c in keep}
    base = [c for c in pool if c.id == 0 and id(c) not in kept]
    for c in best.values():
        if id(c) not in kept:
            c.stage, c.note = "skipped", f"beyond the {limit} candidates screened"
    return keep + base


def _rank_key(c: Candidate, objective: str):
    # Powers within a Monte Carlo step of 0.05 tie; a plan that claims under the null ranks last.
    p = round((c.power or 0.0) / 0.05)
    fc = (c.false_claim or 0.0) > 0.1
    w = math.inf if c.width is None else c.width
    return (fc, -p, w, c.flops) if objective == "power" else (fc, w, -p, c.flops)


def _screen(c: Candidate, model, target: float, args) -> None:
    from analysis.power import design as dz

    out = dz.simulate(c.trials, [target], model, args.screen, args.bootstrap, args.seed, args.jobs)
    _rated(c, summarize(out), target, args.screen, "screened")


def _final(c: Candidate, model, target: float, args) -> None:
    from analysis.power import design as dz

    out = dz.power_runs(c.trials, [target], model, args.replicates, args.bootstrap, args.seed, args.jobs)
    s = summarize(out)
    _rated(c, s, target, s.at(target).replicates, "rated")


def _rated(c: Candidate, s: PowerSummary, target: float, replicates: int, stage: str) -> None:
    """A candidate's power, its Monte Carlo error, false claims and interval width at `target`."""
    at = s.at(target)
    c.power, c.power_se = at.power, at.power_mc.se
    c.false_claim, c.width = s.false_claim.rate, at.median_width
    c.replicates, c.stage = replicates, stage


def _table(cands: list[Candidate], unit: str):
    import pandas as pd

    return pd.DataFrame([c.row(unit) for c in cands])


def _parse_candidate(doc: dict, spec, c: Candidate):
    """The candidate's spec; a candidate put on WSD that WSD cannot run (a halving rung whose
    cooldown would start inside the warmup) falls back to the plan's own cosine schedule."""
    parse = lambda d: parse_spec(to_toml(d), spec.source_path, base_dir=_spec_dir(spec))
    with missing_data_allowed() if spec.missing_data else contextlib.nullcontext():
        try:
            return parse(doc)
        except SpecError:
            if not c.wsd:
                raise
            c.wsd = False
            doc["train"].pop("schedule")
            c.note = "kept on cosine: its halving rung falls inside the warmup on WSD"
            return parse(doc)


def propose(args, effects) -> int:
    """Search, rate and write the chosen plan; returns the exit code."""
    import numpy as np

    from sweeps.designing.design_plan import build_model, cost_text, default_model, trials_frame
    from sweeps.plans.spec import load_spec

    try:
        spec = load_spec(args.spec, allow_missing_data=True)
        base_trials, base_totals = trials_frame(spec)
        budget = parse_budget_value(args.budget, spec.resources)
        _, noise = build_model(spec, base_trials, args)
        if args.out is None:  # a given --out was checked with the arguments (sweeps/designing/design.py)
            from depthwidth.clitools import check_output_folder

            check_output_folder(default_out(spec), "--out", PROPOSE_FILES)
    except (SpecError, ValueError) as exc:
        return fail(str(exc))
    unit = base_totals.unit
    tokens = float(np.exp(np.mean(np.log(base_trials["tokens"].to_numpy(float)))))
    cands, seen = [], {}
    for i, (doc, what) in enumerate(candidate_docs(tomllib.loads(spec.text), tokens)):
        c = Candidate(i, doc, **what)
        try:
            c.spec = _parse_candidate(doc, spec, c)
            c.trials, tot = trials_frame(c.spec)
        except SpecError as exc:
            c.note = str(exc)
            cands.append(c)
            continue
        c.totals, c.n_trials, c.flops, c.cost = tot, len(c.trials), tot.flops, tot.hours
        c.within_budget = tot.flops <= budget * (1 + 1e-9)
        key = frozenset(c.trials["trial_id"])
        if key in seen:
            c.stage, c.within_budget, c.note = "duplicate", False, f"the same trials as candidate {seen[key]}"
        elif not c.within_budget:
            c.stage, c.note = "over budget", "over the budget"
        seen.setdefault(key, i)
        cands.append(c)
    pool = _most_seeds([c for c in cands if c.within_budget], args.candidates)
    if not pool:
        return fail(
            f"--budget = {args.budget!r} is invalid: no candidate plan fits it (the "
            f"cheapest costs {min(c.flops for c in cands if c.flops is not None):.3g} FLOPs)."
        )
    models = {
        c.id: build_model(c.spec, c.trials, args)[0]
        if args.pilot
        else default_model(c.spec, c.trials, args.noise)
        for c in pool
    }
    for c in pool:
        _screen(c, models[c.id], args.target, args)
    pool.sort(key=lambda c: _rank_key(c, args.objective))
    finalists = pool[: args.finalists] + [c for c in pool[args.finalists :] if c.id == 0]
    for c in finalists:
        _final(c, models[c.id], args.target, args)
    finalists.sort(key=lambda c: _rank_key(c, args.objective))
    best = finalists[0]
    return _write(args, spec, cands, best, unit, budget, noise, cost_text)


def _spec_dir(spec) -> str | None:
    """The spec file's folder, which its relative data path is read from (None: no file)."""
    p = Path(spec.source_path)
    return str(p.absolute().parent) if p.is_file() else None


def _data_path_from(doc: dict, spec_dir: str | None, out: Path) -> None:
    """A relative data path, rewritten for the proposal's own folder: the same file."""
    data = doc.get("data")
    path = data.get("path") if isinstance(data, dict) else None
    if spec_dir is None or not isinstance(path, str) or not path or is_remote(path) or os.path.isabs(path):
        return
    data["path"] = os.path.relpath(os.path.join(spec_dir, path), out.absolute())


def _write(args, spec, cands, best, unit, budget, noise, cost_text) -> int:
    from runstore.files import atomic_file

    out = Path(args.out or default_out(spec))  # checked before the search
    out.mkdir(parents=True, exist_ok=True)
    doc = copy.deepcopy(best.doc)
    doc["name"] = f"{spec.name}-proposed"
    if doc.get("description"):  # the spec's words describe the plan as written
        doc["description"] = f"{doc['description']}; proposed variant: {best.what()}"
    _data_path_from(doc, _spec_dir(spec), out)
    if isinstance(doc.get("storage"), dict) and "path" in doc["storage"]:
        doc["storage"]["path"] = doc["storage"]["path"].rstrip("/") + "-proposed"
    base = next(c for c in cands if c.id == 0)
    human = (
        unit.replace("_", " ").replace("cpu core hours", "CPU core-hours").replace("gpu hours", "GPU-hours")
    )
    if best.id == 0:
        verdict = (
            f"the plan as written is the best found: no candidate within "
            f"{args.budget} was more powerful at b = {args.target:g}"
            + (" or had a narrower interval" if args.objective == "power" else "")
        )
    else:
        verdict = (
            f"candidate {best.id} ({best.what()}) reaches power {best.power:.2f} at "
            f"b = {args.target:g} for {best.cost:.3g} {human}"
            + (
                f"; the plan as written: {base.power:.2f} for {base.cost:.3g}"
                if base.power is not None
                else f"; the plan as written costs {_or_nan(base.cost):.3g} {human}"
                + (" (over the budget)" if not base.within_budget else "")
            )
        )
    head = (
        f"# Proposed by `depthwidth design --propose` from {toml_comment(spec.source_path)} for a "
        f"budget of {toml_comment(args.budget)}: {toml_comment(best.what())}.\n# Rated on planted "
        f"replicates (docs/design-power.md): power {best.power:.2f} at b = {args.target:g}, "
        f"false claims {best.false_claim:.2f}, median interval width "
        f"{'-' if best.width is None else format(best.width, '.3g')} "
        f"({best.replicates} replicates, seed noise {noise.value:.2%}, "
        f"{toml_comment(noise.source)}).\n"
    )
    toml_path, table = out / "proposed.toml", _table(cands, unit)
    text = head + to_toml(doc)
    parse_spec(text, str(toml_path), base_dir=str(out.absolute()))  # what is written must parse
    with atomic_file(toml_path, "w") as f:
        f.write(text)
    with atomic_file(out / "candidates.csv", "w") as f:
        table.to_csv(f, index=False)
    with atomic_file(out / "candidates.md", "w") as f:
        f.write(_markdown(table.drop(columns=["note"])))
    within = int(sum(c.within_budget for c in cands))
    result = {
        "proposed": str(toml_path),
        "candidates": str(out / "candidates.csv"),
        "chosen": best.id,
        "verdict": verdict,
        "budget": args.budget,
        "budget_flops": budget,
        "target": args.target,
        "objective": args.objective,
        "power": best.power,
        "power_se": best.power_se,
        "false_claim": best.false_claim,
        "median_interval_width": best.width,
        "replicates": best.replicates,
        "cost": {"flops": best.flops, unit: best.cost},
        "noise": noise.to_dict(),
        "n_candidates": len(cands),
        "n_within_budget": within,
    }
    if args.json:
        print(json.dumps(result, default=float))
    else:
        print(
            f"{len(cands)} candidate plans, {within} within {args.budget} "
            f"({budget:.3g} FLOPs); screened on {args.screen} replicates each, the best "
            f"{args.finalists} and the plan as written rated in full"
        )
        print(verdict)
        print(f"proposed spec: {toml_path} (cost: {cost_text(best.totals)})")
        print(f"every candidate: {out / 'candidates.csv'}, {out / 'candidates.md'}")
    return 0


def _or_nan(v: float | None) -> float:
    return math.nan if v is None else v


_NOT_IN_COMMENT = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def toml_comment(value) -> str:
    """`value` as text that stays inside a TOML comment line: a line break would end the comment
    and start TOML of its own (a file name may hold one), and TOML allows no other control
    character there; each is written as its \\x or \\u escape."""
    return _NOT_IN_COMMENT.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
        str(value),
    )


def _markdown(table) -> str:
    """candidates.md: the table's text (changes named from the spec) escaped for Markdown, as
    in a report (analysis/reporting/markup.py), so no cell becomes a link or splits a row."""
    from analysis.reporting.markup import escape

    def cell(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        return f"{v:.3g}" if isinstance(v, float) else escape(v)

    rows = ["| " + " | ".join(map(escape, table.columns)) + " |", "|" + "---|" * len(table.columns)]
    rows += ["| " + " | ".join(cell(v) for v in r) + " |" for r in table.itertuples(index=False)]
    return "\n".join(rows) + "\n"
