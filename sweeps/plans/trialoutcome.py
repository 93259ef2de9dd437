"""What one trial produced, on its way back from Ray Tune: a frozen `TrialOutcome`, the mirror of
sweeps/plans/trialconfig.py's `TrialConfig`.

The trainable builds one for the trial's own run and one for each cooldown branch it takes
(sweeps/plans/branches.py), and reports `outcome.report()` to Tune; the driver reads it back with
`TrialOutcome.from_report` and builds the store's `RunRecord` from the pair (TrialConfig,
TrialOutcome) (sweeps/running/record.py). `to_dict`/`from_dict` are the only places that see the
layout Tune carries as strings: a plain dict of plain values, never JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from depthwidth.result import RunResult
from sweeps.plans.fields import from_fields

OUTCOME_KEY = "outcome"  # the report that carries a finished run: TrialOutcome.to_dict()


@dataclass(frozen=True)
class TrialOutcome:
    """One finished run (the trial's, or one of its cooldown branches: `trial_id` says which):
    what train() returned, where it ran, what it resumed from and why, how many data-parallel
    workers trained it (None for a one-process trial), and for a WSD run under successive
    halving the losses its rungs' cooldown branches reached."""

    trial_id: str
    result: RunResult
    node_id: str = ""
    node_ip: str = ""
    resumed_from_step: int = 0
    resume_note: str = ""
    workers: int | None = None
    rung_losses: tuple[float, ...] | None = None

    # -- the only readers and writers of the layout Tune carries ----------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "trial_id": self.trial_id,
            "result": self.result.to_dict(),
            "node_id": self.node_id,
            "node_ip": self.node_ip,
            "resumed_from_step": self.resumed_from_step,
            "resume_note": self.resume_note,
            "workers": self.workers,
            "rung_losses": None if self.rung_losses is None else list(self.rung_losses),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrialOutcome:
        read = {
            "trial_id": str,
            "result": RunResult.from_dict,
            "node_id": str,
            "node_ip": str,
            "resumed_from_step": int,
            "resume_note": str,
            "workers": lambda v: None if v is None else int(v),
            "rung_losses": lambda v: None if v is None else tuple(float(x) for x in v),
        }
        return from_fields(cls, d, read)

    # -- as a Tune report ---------------------------------------------------------------------
    def report(self, **progress: Any) -> dict[str, Any]:
        """The Tune report that carries this outcome, beside the progress keys every report has."""
        return {**progress, OUTCOME_KEY: self.to_dict()}

    @classmethod
    def from_report(cls, result: Mapping[str, Any]) -> TrialOutcome | None:
        """The outcome a Tune result carries, or None for an evaluation's report (or one whose
        outcome the driver has already stored and dropped)."""
        d = result.get(OUTCOME_KEY)
        return None if d is None else cls.from_dict(d)
