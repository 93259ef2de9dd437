"""What a results store holds (docs/design.md, "The results store"): its files' names, the
columns every curve has, and the statuses a run ends with (the run columns are the fields of
`RunRecord`, runstore/record.py). Standard library only: the command-line checks that keep a
user's output off a store's own files read these too.
"""

from __future__ import annotations

RUNS = "runs.parquet"
CURVES = "curves.parquet"
SPEC = "spec.toml"
TUNE_DIR = "tune"  # Ray Tune's storage (trial checkpoints) lives inside the store
ANALYSIS_DIR = "analysis"  # report.json, report.md and the figures
PARTS_DIR = "parts"  # the append-only parts (runstore/tables.py)
LOCK = ".lock"  # the one writer's lock (runstore/store.py)
# What marks a folder as a store, and the names in it that only the store writes.
STORE_MARKS = (RUNS, SPEC, PARTS_DIR)
STORE_OWN = (RUNS, CURVES, SPEC, LOCK, PARTS_DIR, TUNE_DIR)

# "stopped": ended early on purpose by successive halving (sweeps/plans/halving.py), not a failure
STATUSES = ("ok", "diverged", "failed", "stopped")
OK, DIVERGED, FAILED, STOPPED = STATUSES

CURVE_COLUMNS = ("trial_id", "step", "tokens", "flops", "train_loss", "val_loss", "lr", "wall_s")
