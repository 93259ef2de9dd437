"""A plan's rating as typed records: the analysis's power summary
(analysis.power.design.summarize) read once into one record per planted b, where the seed noise
came from, the planted drift of the best learning rate, and the `Rating` that `design` prints and
writes as design.json (docs/design-power.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

NULL = "null"  # the replicates planted with no threshold (analysis.power.design.NULL)


@dataclass(frozen=True)
class Rate:
    """A Monte Carlo rate (analysis.power.design.rate): k of n, its standard error and 95% interval."""

    rate: float | None
    se: float | None
    ci: list[float] | None
    n: int

    @classmethod
    def of(cls, d: dict | None) -> Rate | None:
        return None if d is None else cls(**d)


@dataclass(frozen=True)
class Bias:
    """Where the claimed estimates of b fall against the planted b (analysis.power.design.bias)."""

    n: int
    mean: float | None
    se: float | None
    median: float | None
    misses: int
    misses_below: int

    def text(self) -> str:
        if self.mean is None:
            return "-"
        se = "" if self.se is None else f" ± {self.se:.2f}"
        below = f", {self.misses_below}/{self.misses} misses below" if self.misses else ""
        return f"{self.mean:+.3f}{se}{below}"


@dataclass(frozen=True)
class Detectable:
    """The range of b over which power reaches its target (analysis.power.design.min_detectable)."""

    low: float
    high: float
    low_open: bool
    high_open: bool
    power: float


@dataclass(frozen=True)
class EffectPower:
    """One planted b: power, its Monte Carlo error, the claim rate, the coverage of the claimed
    intervals, their median width and the bias of the claimed b."""

    key: str  # the effect as the summary names it: str(float(b))
    power: float | None
    power_mc: Rate
    claim_rate: Rate
    coverage: Rate
    median_width: float | None
    bias: Bias | None
    replicates: int

    @property
    def b(self) -> float:
        return float(self.key)


@dataclass(frozen=True)
class PowerSummary:
    """The analysis's summary of a plan's replicates, read once; `raw` is that summary as it
    comes, which design.json holds and the power figure draws."""

    effects: tuple[EffectPower, ...]
    false_claim: Rate | None
    detectable: Detectable | None
    replicates: dict[str, int]  # per effect, keyed as the summary keys them ("null" for the null)
    raw: dict[str, Any]

    @classmethod
    def read(cls, s: dict[str, Any], replicates: dict[str, int]) -> PowerSummary:
        """`s` from analysis.power.design.summarize; `replicates`: the count per effect, keyed as
        `s` keys them ("null" for the null)."""
        mc, claims, cover, widths, bias = (
            s["power_mc"],
            s["claim_rate"],
            s["coverage"],
            s["median_interval_width"],
            s["bias"],
        )
        effects = tuple(
            EffectPower(
                k,
                p,
                Rate(**mc[k]),
                Rate(**claims[k]),
                Rate(**cover[k]),
                widths[k],
                _bias(bias, k),
                replicates[k],
            )
            for k, p in s["power"].items()
        )
        mde = s["min_detectable_effect"]
        return cls(
            effects,
            Rate.of(s["false_claim"]),
            None if mde is None else Detectable(**mde),
            replicates,
            s,
        )

    @property
    def null_replicates(self) -> int:
        return self.replicates.get(NULL, 0)

    def at(self, b: float) -> EffectPower:
        return next(e for e in self.effects if e.key == str(float(b)))

    def below(self, target: float) -> list[EffectPower]:
        """The effects whose power is below `target`."""
        return [e for e in self.effects if e.power is not None and e.power < target]


def summarize(outcomes) -> PowerSummary:
    """analysis.power.design.summarize of a plan's replicates (one row each), read once, with the
    count of replicates of each effect."""
    from analysis.power import design as dz

    reps = outcomes.groupby(outcomes["effect"].astype(str)).size()
    counts = {(NULL if k == dz.NULL else str(float(k))): int(v) for k, v in reps.items()}
    return PowerSummary.read(dz.summarize(outcomes), counts)


def _bias(bias: dict, key: str) -> Bias | None:
    found = bias.get(key)
    return None if found is None else Bias(**found)


@dataclass(frozen=True)
class Noise:
    """Where the planted seed noise comes from: a pilot's runs (with what was measured on them),
    --noise, or the 2% assumed; and where the drift of the best learning rate comes from."""

    value: float
    source: str  # "pilot", "--noise" or "assumed"
    note: str = ""
    pilot: str | None = None
    found: dict[str, Any] = field(default_factory=dict)  # what analysis.power.design measured on the pilot
    lr_drift_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        pilot = {} if self.pilot is None else {"pilot": self.pilot}
        note = {"note": self.note} if self.note else {}
        drift = {} if self.lr_drift_source is None else {"lr_drift_source": self.lr_drift_source}
        return {"value": self.value, "source": self.source, **pilot, **note, **self.found, **drift}


@dataclass(frozen=True)
class Drift:
    """The planted drift of the best learning rate with shape (lr* ∝ width^A · depth^G), and
    the factor it spans across the plan's shapes."""

    width_exp: float
    width_se: float
    depth_exp: float
    depth_se: float
    spread: float
    rates: list[float]  # the plan's learning rates

    def line(self, where: str) -> str:
        se = lambda v: f" ± {v:.2f}" if v else ""  # noqa: E731
        one = len(self.rates) == 1
        return (
            f"best learning rate planted to drift with shape as lr* ∝ width^{self.width_exp:.2f}"
            f"{se(self.width_se)} · depth^{self.depth_exp:.2f}{se(self.depth_se)} ({where}): a factor "
            f"{self.spread:.2f} across this plan's shapes"
            + (", which its one rate does not follow" if one else "")
        )


@dataclass(frozen=True)
class Rating:
    """What `design` finds for a plan: the plan, its power summary, its cost and model, and the
    advice; `outcomes` holds one row per replicate (outcomes.csv), outside design.json."""

    spec: str
    name: str
    trials: int
    fingerprint: str  # of the plan's trial ids: analyze quotes a rating only for these very trials
    shapes: int
    seeds: int
    seeds_in_fits: int
    summary: PowerSummary
    bootstrap: int
    seed: int
    cost: Any  # the plan's Totals (sweeps/plans/plan.py)
    model: Any  # the planted model (analysis.power.design.PlantModel)
    lr_drift: Drift | None
    advice: str
    outcomes: Any  # a pandas DataFrame
    noise: Noise

    def to_dict(self) -> dict[str, Any]:
        """design.json and `design --json`: every figure but the per-replicate outcomes."""
        return {
            "spec": self.spec,
            "name": self.name,
            "trials": self.trials,
            "plan": {"trials": self.trials, "fingerprint": self.fingerprint},
            "shapes": self.shapes,
            "seeds": self.seeds,
            "seeds_in_fits": self.seeds_in_fits,
            **self.summary.raw,
            "replicates": self.summary.replicates,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "cost": self.cost.to_dict(),
            "model": self.model.to_dict(),
            "lr_drift": None if self.lr_drift is None else asdict(self.lr_drift),
            "advice": self.advice,
            "noise": self.noise.to_dict(),
        }
