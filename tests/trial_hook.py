"""The trials' test hook (sweeps/running/trainable.py loads this file when DEPTHWIDTH_TRIAL_HOOK names it
and DEPTHWIDTH_TEST_HOOK_DIR names a folder): every trial notes its start in `starts.log`; after
a first-attempt checkpoint it publishes its pid and waits while the file `hold` exists (and lists
this trial, or nothing), so a test can kill this worker or the driver at a known point. `ID@STEP`
in `hold` waits at the checkpoint of that step instead of the first.
"""

from __future__ import annotations

import os
import time


def started(folder: str, tid: str, resumed_step: int, pid: int, world: int | None = None) -> None:
    with open(os.path.join(folder, "starts.log"), "a") as f:
        f.write(f"start {tid} {resumed_step} {pid}" + (f" {world}" if world is not None else "") + "\n")


def checkpointed(folder: str, tid: str, resumed_step: int, step: int) -> None:
    if resumed_step > 0:
        return
    hold = os.path.join(folder, "hold")
    try:
        with open(hold) as f:
            named = dict(n.partition("@")[::2] for n in f.read().split())  # id -> step or ""
    except FileNotFoundError:
        return
    if named and (tid not in named or (named[tid] and int(named[tid]) != step)):
        return
    pid_file = os.path.join(folder, f"{tid}.pid")
    if os.path.exists(pid_file):
        return
    with open(pid_file + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pid_file + ".tmp", pid_file)
    deadline = time.monotonic() + 120
    while os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)
