"""Successive halving over one training setting (the learning rate), and which runs are its finals.

A sweep with a [halving] table (docs/studies/threshold-cpu.md; sweeps/README.md) trains every
setting of one axis (say lr) for each group of trials that differ only in that axis (one shape, one
token budget, one seed). At each rung (a step count: a fraction 1/eta, 1/eta², ... of the run) the
group's survivors are ranked by validation loss at that step and the best ⌈n/eta⌉ go on; the rest
stop there (Jamieson & Talwalkar 2016; Li et al. 2018's ASHA without the asynchrony: a rung is
decided once every survivor has reached it). A run is a *final* when it finished with status ok and
was promoted at every rung; only finals enter the fits.

The sweep decides live (sweeps/plans/halving.py), and the same rule, applied here to the losses each row
records at its rungs (the `halving` column), decides again after the fact: a run that finished
before its group's rung was decided (a race the sweep allows rather than let a worker wait) is not
a final if the rule says it lost. Pure functions of the runs table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported where a table is read: the rule itself runs in every trial
    import pandas as pd

COLUMN = "halving"  # JSON per row: {"axis", "eta", "rungs": [steps], "losses": [val loss at each], "group"}


def survivors(losses: Mapping[str, float], eta: int) -> set[str]:
    """The ⌈n/eta⌉ lowest losses go on (a missing or non-finite loss ranks last; ties by id)."""
    n_keep = max(1, math.ceil(len(losses) / eta))
    key = {k: (v if v is not None and math.isfinite(v) else math.inf) for k, v in losses.items()}
    return set(sorted(key, key=lambda k: (key[k], k))[:n_keep])


def decide(
    members: Sequence[str], losses: Mapping[str, Sequence[float]], ended: set[str], eta: int, n_rungs: int
) -> tuple[list[set[str]], bool]:
    """(survivors after each decided rung, whether every rung is decided). `losses[m]` holds m's
    loss at rungs 0, 1, ...; a member in `ended` that lacks a rung's loss (it failed or diverged
    before it) ranks last there; one that neither has it nor has ended leaves the rung undecided."""
    alive = set(members)
    out: list[set[str]] = []
    for r in range(n_rungs):
        at: dict[str, float] = {}
        for m in sorted(alive):
            got = losses.get(m, ())
            if len(got) > r:
                at[m] = got[r]
            elif m in ended:
                at[m] = math.inf
            else:
                return out, False
        alive = survivors(at, eta)
        out.append(alive)
    return out, True


def beaten(
    members: Sequence[str], losses: Mapping[str, Sequence[float]], ended: set[str], eta: int, n_rungs: int
) -> set[str]:
    """The members already sure to lose the first rung not yet decided: at least ⌈n/eta⌉ of that
    rung's n contenders have reported a lower loss there, so the rest of the group cannot lift
    them into the best ⌈n/eta⌉. The live sweep stops these at once instead of waiting for the
    group; decide() on the complete losses gives the same survivors."""
    kept, complete = decide(members, losses, ended, eta, n_rungs)
    if complete:
        return set()
    r = len(kept)
    alive = kept[-1] if kept else set(members)
    need = max(1, math.ceil(len(alive) / eta))
    at = {m: losses[m][r] for m in alive if len(losses.get(m, ())) > r and math.isfinite(losses[m][r])}
    order = sorted(at, key=lambda m: (at[m], m))
    return set(order[need:])


def parse(value: Any) -> dict[str, Any] | None:
    """A row's `halving` record, or None for a run outside any halving."""
    if not isinstance(value, str) or not value.strip():
        return None
    rec = json.loads(value)
    return rec if isinstance(rec, dict) and rec.get("rungs") is not None else None


def finals(runs: pd.DataFrame) -> tuple[pd.Series, dict[str, Any]]:
    """(True for each row that is a final, a summary). Rows outside any halving are finals when
    their status is ok; within a group, the rule above on the rows' recorded rung losses."""
    import pandas as pd

    status_ok = runs["status"] == "ok" if "status" in runs.columns else pd.Series(True, index=runs.index)
    if COLUMN not in runs.columns:
        return status_ok, {}
    recs = [parse(v) for v in runs[COLUMN]]
    keep = status_ok.copy()
    groups: dict[str, list[int]] = {}
    for i, rec in zip(runs.index, recs):
        if rec is not None:
            groups.setdefault(str(rec["group"]), []).append(i)
    if not groups:
        return status_ok, {}
    n_undecided = n_lost = 0
    for rows in groups.values():
        rec0 = parse(runs.at[rows[0], COLUMN])
        ids = [str(runs.at[i, "trial_id"]) for i in rows]
        losses = {t: parse(runs.at[i, COLUMN]).get("losses", []) for t, i in zip(ids, rows)}
        kept, complete = decide(ids, losses, set(ids), int(rec0["eta"]), len(rec0["rungs"]))
        last = kept[-1] if kept else set(ids)
        n_undecided += not complete
        for t, i in zip(ids, rows):
            if t not in last:
                n_lost += bool(keep.at[i])
                keep.at[i] = False
    stopped = int((runs["status"] == "stopped").sum()) if "status" in runs.columns else 0
    return keep, {
        "axis": str(parse(runs.at[next(iter(groups.values()))[0], COLUMN])["axis"]),
        "groups": len(groups),
        "finals": int(keep[[i for rows in groups.values() for i in rows]].sum()),
        "stopped": stopped,
        "finished_not_promoted": n_lost,
        "undecided_groups": n_undecided,
    }


def halving_note(info: Mapping[str, Any]) -> str:
    """One line for the report: what the halving chose and what the fits use."""
    extra = (
        f"; {info['finished_not_promoted']} run(s) finished before their rung was decided and lost it"
        if info.get("finished_not_promoted")
        else ""
    )
    open_ = (
        f"; {info['undecided_groups']} group(s) with a rung left undecided"
        if info.get("undecided_groups")
        else ""
    )
    return (
        f"{info['axis']} chosen per group by successive halving: {info['groups']} groups, "
        f"{info['stopped']} run(s) stopped early, {info['finals']} promoted finals used in the fits"
        f"{extra}{open_}; a final's loss is measured on the seed that chose it (biased low by "
        f"the noise among the settings it beat at the rungs)"
    )


def against_grid(halved: pd.DataFrame, grid: pd.DataFrame, axis: str = "lr") -> pd.DataFrame:
    """What the halving's choice cost, group by group, against the same group's full grid (every
    setting trained to the end; `grid` holds them under the same trial_ids). One row per group
    that the grid covers completely: its choice and the grid's best, their losses, and whether
    they agree. `loss` is final_val_loss."""
    import pandas as pd

    keep, _ = finals(halved)
    recs = {str(t): parse(v) for t, v in zip(halved["trial_id"], halved[COLUMN])}
    chosen = set(halved.loc[keep, "trial_id"].astype(str))
    full = grid[grid["status"] == "ok"].copy() if "status" in grid else grid.copy()
    full["trial_id"] = full["trial_id"].astype(str)
    full["group"] = [recs[t]["group"] if recs.get(t) else None for t in full["trial_id"]]
    size = pd.Series([r["group"] for r in recs.values() if r]).value_counts()
    rows = []
    for g, members in full.dropna(subset=["group"]).groupby("group"):
        picked = members[members["trial_id"].isin(chosen)]
        if len(members) < size.get(g, 0) or len(picked) != 1:
            continue  # the grid lacks a member, or the halving has no final here
        best = members.loc[members["final_val_loss"].idxmin()]
        pick = picked.iloc[0]
        rows.append(
            {
                "group": g,
                **{c: pick[c] for c in ("depth", "width", "seed", "tokens") if c in pick},
                f"chosen_{axis}": float(pick[axis]),
                f"best_{axis}": float(best[axis]),
                "chosen_loss": float(pick["final_val_loss"]),
                "best_loss": float(best["final_val_loss"]),
                "agree": bool(pick["trial_id"] == best["trial_id"]),
                "excess": float(pick["final_val_loss"] - best["final_val_loss"]),
            }
        )
    return pd.DataFrame(rows)


def compute_used(runs: pd.DataFrame) -> dict[str, float]:
    """Training FLOPs the runs used against the full grid they stand for (every run to its
    budget: train_config's steps × batch_size × seq_len tokens, at the FLOPs per token the run
    itself trained at, flops / tokens)."""
    used = full = 0.0
    for cfg, seq, flops, tokens in zip(runs["train_config"], runs["seq_len"], runs["flops"], runs["tokens"]):
        t = json.loads(cfg)
        if tokens > 0:
            used += float(flops)
            full += float(flops) / float(tokens) * float(t["steps"]) * float(t["batch_size"]) * float(seq)
    return {"flops": used, "full_grid_flops": full, "share": used / full if full else math.nan}
