"""Finding and clearing trial checkpoints in the store's `tune/` folder (Ray Tune's storage).

Each driver run is one Tune experiment `tune/<sweep>-<time>/`, each trial a folder named by its
trial_id holding `checkpoint_*` folders tagged with the training step (Checkpoint metadata). A
rerun after an interruption resumes every unfinished trial from its furthest checkpoint that
loads, in whichever earlier run it was written (the trainable is given all of them, furthest
first); a finished trial's checkpoints are deleted, also those of trials a killed driver had
already stored.
"""

from __future__ import annotations

from collections.abc import Iterable

from runstore.layout import TUNE_DIR
from runstore.store import ResultStore


def trial_dirs(store: ResultStore, trial_ids: Iterable[str]) -> dict[str, list[str]]:
    """trial_id -> its folders (paths inside store.fs) in every earlier Tune experiment."""
    wanted = set(trial_ids)
    out: dict[str, list[str]] = {}
    loc = store.loc
    for exp in loc.list_dirs(TUNE_DIR):
        for d in loc.list_dirs(f"{TUNE_DIR}/{exp.base_name}"):
            if d.base_name in wanted:
                out.setdefault(d.base_name, []).append(d.path)
    return out


def find_checkpoints(store: ResultStore, trial_ids: Iterable[str]) -> dict[str, list[tuple[str, int]]]:
    """trial_id -> [(URI or local path of a checkpoint, its step)], furthest first."""
    from ray import tune

    found: dict[str, list[tuple[str, int]]] = {}
    for tid, folders in trial_dirs(store, trial_ids).items():
        for folder in folders:
            for c in store.loc.list_dirs(_relative(store, folder)):
                if not c.base_name.startswith("checkpoint_"):
                    continue
                try:
                    meta = tune.Checkpoint(c.path, filesystem=store.fs).get_metadata()
                except (OSError, ValueError):
                    continue  # a checkpoint cut short by a crash: fall back to an older one
                step = meta.get("step")
                if meta.get("trial_id") != tid or not isinstance(step, int):
                    continue
                found.setdefault(tid, []).append((_uri(store, c.path), step))
    return {tid: sorted(cands, key=lambda c: -c[1]) for tid, cands in found.items()}


def clear_checkpoints(store: ResultStore, trial_ids: Iterable[str]) -> int:
    """Delete the Tune folders of these trials (finished, or about to be rerun from scratch)."""
    n = 0
    for folders in trial_dirs(store, trial_ids).values():
        for folder in folders:
            n += store.loc.delete_dir(folder)
    return n


def _relative(store: ResultStore, path: str) -> str:
    return path[len(store.root) :].lstrip("/")


def _uri(store: ResultStore, path: str) -> str:
    """A checkpoint folder as the trainable opens it: a local path, or the store's URI with the
    folder appended (its options, such as an endpoint, kept)."""
    return path if store.is_local else store.display(_relative(store, path))
