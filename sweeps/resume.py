"""Finding and clearing trial checkpoints in the store's `tune/` folder (Ray Tune's storage).

Each driver run is one Tune experiment `tune/<sweep>-<time>/`, each trial a folder named by its
trial_id holding `checkpoint_*` folders tagged with the training step (Checkpoint metadata). A
rerun after an interruption resumes every unfinished trial from its furthest checkpoint, in
whichever earlier run it was written; a finished trial's checkpoints are deleted.
"""

from __future__ import annotations

from typing import Iterable

import pyarrow.fs as pafs

from depthwidth.uri import uri_join
from sweeps.store import TUNE_DIR, ResultStore


def _dirs(fs: pafs.FileSystem, path: str) -> list[pafs.FileInfo]:
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except (OSError, FileNotFoundError):
        return []
    return [i for i in infos if i.type == pafs.FileType.Directory]


def trial_dirs(store: ResultStore, trial_ids: Iterable[str]) -> dict[str, list[str]]:
    """trial_id -> its folders (paths inside store.fs) in every earlier Tune experiment."""
    wanted = set(trial_ids)
    out: dict[str, list[str]] = {}
    for exp in _dirs(store.fs, store.path(TUNE_DIR)):
        for d in _dirs(store.fs, exp.path):
            if d.base_name in wanted:
                out.setdefault(d.base_name, []).append(d.path)
    return out


def find_checkpoints(store: ResultStore, trial_ids: Iterable[str]) -> dict[str, tuple[str, int]]:
    """trial_id -> (URI or local path of its furthest checkpoint, its step)."""
    from ray import tune

    best: dict[str, tuple[str, int]] = {}
    for tid, folders in trial_dirs(store, trial_ids).items():
        for folder in folders:
            for c in _dirs(store.fs, folder):
                if not c.base_name.startswith("checkpoint_"):
                    continue
                try:
                    meta = tune.Checkpoint(c.path, filesystem=store.fs).get_metadata()
                except (OSError, ValueError):
                    continue  # a checkpoint cut short by a crash: fall back to an older one
                step = meta.get("step")
                if meta.get("trial_id") != tid or not isinstance(step, int):
                    continue
                if tid not in best or step > best[tid][1]:
                    best[tid] = (_uri(store, c.path), step)
    return best


def clear_checkpoints(store: ResultStore, trial_ids: Iterable[str]) -> int:
    """Delete the Tune folders of these trials (finished, or about to be rerun from scratch)."""
    n = 0
    for folders in trial_dirs(store, trial_ids).values():
        for folder in folders:
            try:
                store.fs.delete_dir(folder)
                n += 1
            except (OSError, FileNotFoundError):
                pass
    return n


def _uri(store: ResultStore, path: str) -> str:
    if store.is_local:
        return path
    rel = path[len(store.root):].lstrip("/")
    return uri_join(store.location, rel)
