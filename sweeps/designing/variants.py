"""The plans `design --propose` tries, as spec documents (sweeps/designing/design_search.py).

What the search needs of the spec as written is read from its TOML document once (`Written`);
each candidate is a `Variant` of it (depth cap, token budget rule, seeds, learning-rate points),
written into a copy of the document by `Variant.apply`, the one place a candidate's document is
written; `to_toml` writes a document as TOML for the planner to parse.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, replace
from typing import Any

from depthwidth.config import toml_value


@dataclass(frozen=True)
class Written:
    """What the search reads of a spec document: its lr and seed axes, its steps axis, its
    [budget] table, the [train] settings a new budget rule recomputes, and the tokens per step
    where no axis changes them."""

    lrs: list  # the lr axis; [None] without one
    seeds: list
    steps: list[int]  # the steps axis, sorted, each once
    budget: dict[str, Any] | None  # the [budget] table as written
    has_budget: bool
    where: list[str]
    eval_every: int
    warmup_steps: int | None
    cooldown_fraction: float
    tokens_per_step: int | None  # None where batch size or sequence length is an axis

    @classmethod
    def of(cls, doc: dict[str, Any]) -> Written:
        from depthwidth.config import ModelConfig, TrainConfig

        grid, train, budget = doc.get("grid", {}), doc.get("train", {}), doc.get("budget")
        per_step = None
        if not any(k in grid for k in ("batch_size", "train.batch_size", "seq_len", "model.seq_len")):
            batch = int(train.get("batch_size", TrainConfig().batch_size))
            per_step = batch * int(doc.get("model", {}).get("seq_len", ModelConfig().seq_len))
        where = doc.get("where", [])
        return cls(
            lrs=list(grid.get("lr", [])) or [None],
            seeds=list(grid.get("seed", [0])),
            steps=sorted({int(s) for s in grid.get("steps", [])}),
            budget=budget,
            has_budget="budget" in doc,
            where=[where] if isinstance(where, str) else list(where),
            eval_every=int(train.get("eval_every", 10**9)),
            warmup_steps=train.get("warmup_steps"),
            cooldown_fraction=float(train.get("cooldown_fraction", 0.2)),
            tokens_per_step=per_step,
        )

    @property
    def from_one_run(self) -> bool:
        return bool((self.budget or {}).get("from_one_run"))

    @property
    def evals(self) -> int:
        """Evaluations per trial its budget asks for (5 without)."""
        return int((self.budget or {}).get("evals") or 5)

    @property
    def warmup_fraction(self) -> float | None:
        return (self.budget or {}).get("warmup_fraction")


@dataclass(frozen=True)
class Budgets:
    """Token budgets shared by every shape, as a `steps` axis, with their label in the table."""

    steps: list[int]
    label: str


@dataclass(frozen=True)
class Variant:
    """What a candidate changes of the plan as written: its seeds, its lr points (None: as
    written), a depth cap, and its budget rule, as the [budget] table it sets and the steps axis
    and [train] settings (in the order they are set) that rule needs."""

    seeds: int
    lrs: list | None = None
    cap: Any = None  # depth <= cap * log3(width); None: the depths as written
    budget: dict[str, Any] | None = None  # the [budget] table in place of the one written
    steps: list[int] | None = None  # a steps axis in place of the [budget] table
    train: tuple[tuple[str, Any], ...] = ()  # [train] settings, set in this order
    one_run_budget: bool = False  # budgets from one run: [budget] from_one_run = true, no halving

    def apply(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A copy of the spec document with these changes, each key where the document has it
        and new ones after (the proposal reads as the spec it came from). A proposal trains on
        warmup-stable-decay, which beat cosine at every shape by about four seed SDs
        (docs/bench/wsd.md), unless the plan names its schedule."""
        d = copy.deepcopy(doc)
        grid = d.setdefault("grid", {})
        grid["seed"] = list(range(self.seeds))
        if self.lrs is not None:
            grid["lr"] = self.lrs
            if len(self.lrs) == 1:
                d.pop("halving", None)  # one learning rate leaves nothing to halve
        if self.cap is not None:
            d["where"] = Written.of(doc).where + [f"depth <= {self.cap} * log3(width)"]
        if self.budget is not None:
            d["budget"] = dict(self.budget)  # a table of its own in each document
        if self.steps is not None:
            d.pop("budget", None)
            grid["steps"] = self.steps
            train = d.setdefault("train", {})
            train.pop("steps", None)  # the axis sets it
        if self.one_run_budget:
            d["budget"] = {"from_one_run": True}
            d.pop("halving", None)  # a one-run plan trains its learning rates in full
        train = d.setdefault("train", {})
        for k, v in self.train:
            train[k] = v
        train.setdefault("schedule", "wsd")
        return d


def candidate_docs(doc: dict, tokens: float) -> list[tuple[dict, dict]]:
    """(spec document, what changed) for every combination of depth cap, token rule, seeds and
    lr points, the spec as written first."""
    w = Written.of(doc)
    as_written = {
        "depth_cap": "as written",
        "tokens": "as written",
        "seeds": len(w.seeds),
        "lr_points": len(w.lrs) if w.lrs != [None] else 1,
    }
    out = [(doc, as_written)]
    rules = {"as written": Variant(0)}  # each token rule by its label; seeds and the rest to come
    if w.budget:
        keep = {k: v for k, v in w.budget.items() if k in ("evals", "warmup_fraction")}
        rules[f"{tokens:.3g} fixed"] = Variant(0, budget={"tokens": float(f"{tokens:.3g}"), **keep})
    if three := three_budgets(doc, tokens):
        rules[three.label] = _steps_axis(three.steps, w)
    if five := five_from_one_run(doc, tokens):
        rules[five.label] = _one_run(five.steps, w)
    lr_sets = [w.lrs] + ([[w.lrs[len(w.lrs) // 2]]] if len(w.lrs) >= 3 else [])
    for cap, rule, n_seeds, lr_set in itertools.product(["as written", 3, 2], rules, (2, 3, 4, 6), lr_sets):
        what = {"depth_cap": cap, "tokens": rule, "seeds": n_seeds, "lr_points": len(lr_set)}
        if what == as_written:
            continue
        v = replace(
            rules[rule],
            seeds=n_seeds,
            lrs=None if lr_set == [None] else lr_set,
            cap=None if cap == "as written" else cap,
        )
        d = v.apply(doc)
        out.append((d, {**what, "wsd": d["train"]["schedule"] == "wsd"}))
    return out


def _steps_axis(steps: list[int], w: Written) -> Variant:
    """The plan's budgets as a `steps` axis shared by every shape, in place of its [budget]:
    two evaluations at least in the shortest, and the budget's warmup fraction of the shortest
    for every run."""
    train = []
    if w.eval_every > min(steps) // 2:
        train.append(("eval_every", max(1, min(steps) // w.evals)))
    if w.warmup_fraction is not None:
        train.append(("warmup_steps", int(round(float(w.warmup_fraction) * min(steps)))))
    return Variant(0, steps=steps, train=tuple(train))


def _one_run(steps: list[int], w: Written) -> Variant:
    """The budgets as cooldown branches of one WSD run per shape (sweeps/plans/branches.py): the
    schedule, from_one_run, no halving, and a warmup that ends before the shortest budget's
    cooldown starts."""
    axis = _steps_axis(steps, w)
    warmup = w.warmup_steps if w.warmup_fraction is None else axis.train[-1][1]  # the fraction's, where given
    room = min(steps) - max(1, round(w.cooldown_fraction * min(steps)))
    too_long = int(20 if warmup is None else warmup) > room
    later = [("warmup_steps", max(0, min(steps) // 10))] if too_long else []
    return replace(axis, train=(*axis.train, ("schedule", "wsd"), *later), one_run_budget=True)


def five_from_one_run(doc: dict, tokens: float) -> Budgets | None:
    """Five token budgets a factor 2 apart up to the plan's longest (the top of three_budgets),
    each a cooldown branch of one run per shape: more values of D for L(N, D) at about the cost
    of the longest run alone (docs/science.md §10). None where three_budgets finds no top, or
    the plan already takes its budgets from one run."""
    w = Written.of(doc)
    if w.from_one_run:
        return None
    three = three_budgets(doc, tokens) if len(w.steps) < 3 else Budgets(w.steps, "")
    if not three:
        return None
    top = max(three.steps)
    five = sorted({max(1, round(top / 2**k)) for k in range(5)})
    if len(five) < 5 or five[0] < 10:
        return None
    return Budgets(five, "5 budgets from one run: " + "/".join(map(str, five)) + " steps")


def three_budgets(doc: dict, tokens: float) -> Budgets | None:
    """Three token budgets a factor 3 apart, the same for every shape, as a `steps` axis: the
    data term of L(N, D) needs at least three values of D to be told from the floor E, and D
    must not ride on N. The plan's own steps axis is extended downwards (300, 900 -> 100, 300,
    900); otherwise the budgets end at the plan's mean tokens per trial. None when the plan
    already has three shared budgets, or its tokens per step are not fixed."""
    w = Written.of(doc)
    if w.tokens_per_step is None:
        return None
    steps = list(w.steps)
    if steps and not w.has_budget:
        if len(steps) >= 3:
            return None
        while len(steps) < 3:
            steps.insert(0, max(1, round(steps[0] / 3)))
    else:
        top = max(1, round(tokens / w.tokens_per_step))
        steps = [max(1, round(top / 9)), max(1, round(top / 3)), top]
    if len(set(steps)) < 3:
        return None
    return Budgets(steps, "3 budgets: " + "/".join(map(str, steps)) + " steps")


def to_toml(doc: dict, prefix: str = "") -> str:
    """A spec document as TOML: plain keys first, then one [table] per mapping, [[points]]."""
    lines, tables = [], []
    for k, v in doc.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append((k, v))
        else:
            lines.append(f"{k} = {toml_value(v)}")
    out = "\n".join(lines)
    for k, v in tables:
        name = f"{prefix}{k}"
        if isinstance(v, list):
            for item in v:
                out += f"\n\n[[{name}]]\n" + to_toml(item, f"{name}.").strip()
        else:
            body = to_toml(v, f"{name}.")
            out += f"\n\n[{name}]\n" + body.strip() if body.strip() else ""
    return out.strip() + "\n"
