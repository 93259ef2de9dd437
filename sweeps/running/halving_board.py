"""Successive halving as it runs (the rule and the plan: sweeps/plans/halving.py). A small Ray
actor (the board) holds each group's rung losses; a trial reports its loss at each rung step and,
at every evaluation after one, asks the board whether it goes on. A rung is decided once every
survivor has reached it; a trial never waits (a waiting trial would hold its worker while the
group's last members may still need one): it trains on until the answer comes, and the analysis
corrects a run that finished before its rung was decided. So give the sweep at least as many
concurrent trials as a group has members (resources.max_concurrent). The board judges with the
analysis's own rule (analysis/readers/halving.py), so the sweep and the fits agree on the finals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.readers.halving import beaten, decide
from sweeps.plans.halving import HalvingPlan, rung_losses


class Board:
    """Each group's rung losses, and the verdicts they imply (run as a Ray actor by the driver)."""

    def __init__(self, eta: int, members: Mapping[str, str], n_rungs: Mapping[str, int]):
        self.eta = eta
        self.group = dict(members)  # trial_id -> group
        self.n_rungs = dict(n_rungs)  # group -> rungs
        self.losses: dict[str, list[float]] = {}
        self.ended: set[str] = set()

    def stored(self, tid: str, group: str, losses: list[float], n_rungs: int) -> None:
        """A trial stored by an earlier driver run: its losses are all it will ever report."""
        self.group[tid] = group
        self.n_rungs.setdefault(group, n_rungs)
        self.losses[tid] = list(losses)
        self.ended.add(tid)

    def report(self, tid: str, rung: int, loss: float) -> None:
        got = self.losses.setdefault(tid, [])
        if rung == len(got):  # a restart repeats what it reported: kept once
            got.append(float(loss))

    def end(self, tid: str) -> None:
        self.ended.add(tid)

    def verdict(self, tid: str, rung: int) -> str:
        """ "stop" if `tid` lost at a rung up to `rung`, "go" if it survived all of them, else "wait"."""
        g = self.group[tid]
        members = [m for m, mg in self.group.items() if mg == g]
        n = min(rung + 1, self.n_rungs[g])
        kept, _ = decide(members, self.losses, self.ended, self.eta, n)
        if any(tid not in alive for alive in kept) or tid in beaten(
            members, self.losses, self.ended, self.eta, n
        ):
            return "stop"
        return "go" if len(kept) > rung else "wait"


def start_board(name: str, trials: Sequence, plans: Mapping[str, HalvingPlan], store) -> Any:
    """The board actor for one driver run, knowing the trials to run and those already stored."""
    import ray

    eta = next(iter(plans.values())).eta
    members = {t.trial_id: plans[t.trial_id].group for t in trials}
    n_rungs = {p.group: len(p.rungs) for p in plans.values()}
    board = ray.remote(num_cpus=0)(Board).options(name=name).remote(eta, members, n_rungs)
    runs = store.runs()
    if "halving" in runs.columns:
        from analysis.readers.halving import parse

        for tid, value in zip(runs["trial_id"], runs["halving"]):
            rec = parse(value)
            if rec is not None and tid not in members:
                board.stored.remote(str(tid), str(rec["group"]), rec.get("losses", []), len(rec["rungs"]))
    return board


class Gate:
    """A trial's side of the board: report each rung's loss, and ask after each evaluation. On a
    WSD run (`by_branch`) a rung's loss is that of its cooldown branch (`branch_done`), not the
    loss the run passes at that step mid-schedule."""

    def __init__(
        self,
        tid: str,
        halving: HalvingPlan,
        board_name: str,
        earlier: Sequence = (),
        by_branch: bool = False,
    ):
        import ray

        self.tid, self.rungs = tid, list(halving.rungs)
        self.board = ray.get_actor(board_name)
        self.sent, self.by_branch, self.losses = 0, by_branch, []
        # a resumed trial's rungs behind it: read off its curve, or its branches' losses
        for loss in earlier if by_branch else rung_losses(earlier, self.rungs):
            self.report(loss)

    def report(self, loss: float) -> None:
        self.board.report.remote(self.tid, self.sent, float(loss))
        self.losses.append(float(loss))
        self.sent += 1

    def after_eval(self, step: int, val_loss: float) -> bool:
        """Report a rung reached; True when the board says this trial stops here."""
        if not self.by_branch and self.sent < len(self.rungs) and step == self.rungs[self.sent]:
            self.report(val_loss)
        return self.stopped()

    def rung_branches(self, train) -> list:
        """The cooldown branches that judge the rungs still ahead of this run (WSD)."""
        return [train.replace(steps=r, eval_every=min(train.eval_every, r)) for r in self.rungs[self.sent :]]

    def branch_done(self, val_loss: float) -> bool:
        """A rung's cooldown branch ended with this loss; True when this trial stops here."""
        self.report(val_loss)
        return self.stopped()

    def stopped(self) -> bool:
        import ray

        if self.sent == 0:
            return False
        return ray.get(self.board.verdict.remote(self.tid, self.sent - 1)) == "stop"

    def ended(self) -> None:
        self.board.end.remote(self.tid)
