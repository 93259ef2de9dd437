"""Planning a `depthwidth seprank` run: which cells of depth x width can be ranked within the
time and memory limits (each cell's cost estimated before anything runs), the rows kept for the
refused ones, and the CSV every run writes (docs/science.md §5). No torch, no matplotlib."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from depthwidth import seprank, theory
from runstore.files import atomic_file

CSV_COLUMNS = (
    "depth",
    "width",
    "heads",
    "tokens",
    "rank",
    "bound",
    "parity_bound",
    "log_rank",
    "log_bound",
    "degree",
    "threshold_depth",
    "regime",
    "residual",
    "partition",
    "rank_confirm",
    "primes_agree",
    "saturated",
    "k_final",
    "k_trail",
    "status",
    "est_seconds",
    "wall_s",
    "seed",
)


@dataclass
class Plan:
    cells: list = field(default_factory=list)  # (Cell, estimated seconds) to measure
    refused: list = field(default_factory=list)  # rows of the cells over the limits
    notes: list = field(default_factory=list)  # one line per skipped or refused cell


def plan_cells(
    depths: list[int],
    widths: list[int],
    heads: int,
    tokens: int,
    residual: bool,
    partition: str,
    max_seconds: float,
    max_gib: float,
    seed: int,
) -> Plan:
    """Every (depth, width) cell, with its cost estimated from the rank bound it must reach;
    ConfigError propagates for a cell that cannot be built."""
    plan = Plan()
    for L in depths:
        for d in widths:
            if d % heads:
                plan.notes.append(f"skip depth {L} width {d}: width not divisible by --heads {heads}")
                continue
            cell = seprank.Cell(L, d, heads, tokens, residual, partition)
            bound = seprank.degree_parity_bound(cell)
            ks = seprank.k_schedule(bound)
            est_s, est_b = seprank.estimate_cost(cell, ks)
            if est_s > max_seconds or est_b > max_gib * 2**30:
                plan.notes.append(
                    f"skip depth {L} width {d}: rank up to {bound} needs a {ks[-1]} x {ks[-1]} "
                    f"grid, estimated {est_s:.3g} s and {est_b / 2**30:.3g} GiB (limits "
                    f"--max-seconds {max_seconds:g}, --max-gib {max_gib:g})"
                )
                plan.refused.append(refused_row(cell, bound, est_s, seed))
            else:
                plan.cells.append((cell, est_s))
    return plan


def refused_row(cell, parity: int, est_s: float, seed: int) -> dict:
    n = min(map(len, cell.sides)) * cell.width
    return dict(
        depth=cell.depth,
        width=cell.width,
        heads=cell.heads,
        tokens=cell.tokens,
        bound=seprank.cell_monomial_bound(cell),
        parity_bound=parity,
        log_bound=theory.log_monomial_bound(n, cell.degree),
        degree=cell.degree,
        threshold_depth=theory.threshold_depth(cell.width),
        regime=theory.regime(cell.depth, cell.width),
        residual=cell.residual,
        partition=cell.partition,
        status="refused",
        est_seconds=est_s,
        seed=seed,
    )


def write_csv(rows: list[dict], path: Path) -> None:
    """One row per cell; refused cells keep their bounds and estimated cost, rank left empty."""
    with atomic_file(path, "w") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in CSV_COLUMNS})
