"""What one training run returns: `RunResult`, the same whether `train()` was called by the CLI, a
test or a Ray trial. Plain values only (no torch), so the sweep driver and the store read it
without importing the simulator's heavy parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class RunResult:
    status: str  # "ok" | "diverged" | "failed" | "stopped"
    final_train_loss: float
    final_val_loss: float
    steps: int
    tokens: int
    flops: float
    wall_s: float
    n_params: int
    n_params_total: int
    flops_per_token: float
    device: str
    torch_version: str
    depthwidth_version: str
    unigram_entropy: float
    vocab_size: int
    curve: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunResult:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})
