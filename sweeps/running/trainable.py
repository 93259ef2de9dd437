"""The function trainable every sweep trial runs: `depthwidth.train.train` inside Ray Tune.

Ray Tune's canonical shape for a function trainable: a function that reports each evaluation with
`tune.report(metrics, checkpoint=...)`; on a restart it resumes from `tune.get_checkpoint()`,
or, when a previous driver was interrupted, from the trial's checkpoints in the store, the
furthest one that loads (a damaged one is passed over, and the run says so in RESUME_NOTE_KEY).
The final report carries the trial's `TrialOutcome` (sweeps/plans/trialoutcome.py), and each cooldown
branch's report the branch's own, which the driver writes to the store. `run_loop` is the one
loop of every trial: a one-process trial's (`run_trial`) and each data-parallel worker's
(sweeps/running/distributed.py).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import ray
from ray import tune

from depthwidth.clitools import reason
from sweeps.plans.trialconfig import Branch, RunSettings, TrialConfig
from sweeps.plans.trialoutcome import TrialOutcome

RESUME_NOTE_KEY = "resume_note"  # why a trial resumed from an older checkpoint than its newest
# A plugin every trial calls: a Python file (HOOK_FILE_ENV) whose `started` and `checkpointed`
# each trial calls with a folder (HOOK_DIR_ENV), e.g. so a test sees trials start and holds one at
# a known checkpoint (tests/trial_hook.py). Unset in normal use; like every DEPTHWIDTH_* setting of
# the driver, both reach the trials through RunSettings.environ.
HOOK_FILE_ENV, HOOK_DIR_ENV = "DEPTHWIDTH_TRIAL_HOOK", "DEPTHWIDTH_TEST_HOOK_DIR"


def train_configs(tc: TrialConfig):
    """The trial's three configs; threads = 0 becomes sweeps/plans/packing.py's rule for its size and
    CPUs (threads are not part of trial_id)."""
    from sweeps.plans.packing import cpu_threads, machine_load

    train_cfg = tc.train
    if train_cfg.threads == 0:
        flops, cpus = tc.flops_per_step, tc.run.cpus
        threads = cpu_threads(flops, cpus, *machine_load()) if flops is not None else max(1, int(cpus))
        train_cfg = train_cfg.replace(threads=threads)
    return tc.model, tc.data_for_run(), train_cfg


def run_trial(config: dict[str, Any]) -> None:
    """The Tune function of a one-process trial (sweeps/running/distributed.py runs a trial of several)."""
    run_loop(TrialConfig.from_dict(config), tune.report, tune.get_checkpoint())


def run_loop(tc: TrialConfig, send: Callable, own_checkpoint, parallel=None) -> None:
    """One trial, start to end: resume from the furthest checkpoint that loads (`own_checkpoint`,
    this attempt's, then the store's), train with each evaluation and cooldown branch passed to
    `send` (tune.report, or ray.train.report on each data-parallel worker with `parallel`), then
    send its outcome."""
    from depthwidth.train import BranchBehindCheckpoint, load_checkpoint, train

    take_environ(tc.run)
    tid = tc.trial_id
    model, data, train_cfg = train_configs(tc)
    lead = parallel is None or parallel.rank == 0  # the one worker that notes and checkpoints
    work = tempfile.mkdtemp(prefix=f"depthwidth-{tid}-{'' if parallel is None else parallel.rank}")
    try:
        candidates = [own_checkpoint] + [tune.Checkpoint(uri) for uri in tc.resume_uris]  # furthest first
        resume_from, resumed_step, note = first_loadable(
            [c for c in candidates if c is not None], work, load_checkpoint
        )
        hook = trial_hook() if lead else None
        if hook:
            hook.started(tid, resumed_step, os.getpid(), *([] if parallel is None else [parallel.world]))
        gate = halving_gate(tc, resume_from, load_checkpoint)
        out = _Reporter(tc, train_cfg, send, hook, gate, note, resumed_step)

        def attempt(start: str | None):
            return train(
                model,
                data,
                train_cfg,
                report=out.report,
                checkpoint_dir=os.path.join(work, "checkpoint"),
                resume_from=start,
                parallel=parallel,
                branches=list(out.branches),
                on_branch=out.on_branch,
            )

        try:
            result = attempt(resume_from)
        except BranchBehindCheckpoint:  # a branch still to take lies behind the checkpoint
            out.started_over()
            result = attempt(None)
        rung_losses = None
        if gate is not None:
            gate.ended()
            if gate.by_branch:  # the rung losses its cooldown branches reached, for its row
                rung_losses = tuple(gate.losses)
        workers = None if parallel is None else parallel.world
        outcome = outcome_of(
            tid, result, out.resumed_step, out.note, workers=workers, rung_losses=rung_losses
        )
        send(final_report(outcome))
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _Reporter:
    """A trial's reports: each evaluation (with its checkpoint when one was written), and each
    cooldown branch (sweeps/plans/branches.py) it takes: a budget's, whose result is the budget's
    own row, sent with the checkpoint that records it as taken, or a halving rung's, judged on its
    result. What to branch is asked once, here (`branches`: each branch's training config to
    the Branch it is; a rung's has no trial_id, it is judged, not stored)."""

    def __init__(self, tc: TrialConfig, train_cfg, send: Callable, hook, gate, note: str, resumed_step: int):
        self.tid, self.steps, self.send_to = tc.trial_id, train_cfg.steps, send
        self.hook, self.gate, self.note, self.resumed_step = hook, gate, note, resumed_step
        budgets = [Branch(b.trial_id, b.train.replace(threads=train_cfg.threads)) for b in tc.branches]
        rungs = [Branch("", cfg) for cfg in gate.rung_branches(train_cfg)] if gate and gate.by_branch else []
        self.branches = {b.train: b for b in budgets + rungs}

    def started_over(self) -> None:
        why = (
            f"its checkpoint at step {self.resumed_step} is past a cooldown branch still to take, "
            f"so the run started from step 0"
        )
        self.note = "; ".join(x for x in (self.note, why) if x)
        self.resumed_step = 0

    def send(self, metrics: dict[str, Any], checkpoint: str | None, step: int) -> None:
        metrics = {
            **metrics,
            "trial_id": self.tid,
            "progress": min(1.0, step / self.steps),
            RESUME_NOTE_KEY: self.note,
        }
        if checkpoint is None:  # (on a data-parallel trial, every rank but 0)
            self.send_to(metrics)
            return
        c = tune.Checkpoint.from_directory(checkpoint)
        c.set_metadata({"trial_id": self.tid, "step": int(step)})
        self.send_to(metrics, checkpoint=c)  # persisted to the store's tune/ before returning
        if self.hook:
            self.hook.checkpointed(self.tid, self.resumed_step, int(step))

    def report(self, metrics: dict[str, Any], checkpoint: str | None = None):
        from depthwidth.train import STOP

        self.send(metrics, checkpoint, int(metrics["step"]))
        if self.gate is not None and self.gate.after_eval(int(metrics["step"]), float(metrics["val_loss"])):
            return STOP
        return None

    def on_branch(self, cfg, result, checkpoint: str | None):
        from depthwidth.train import STOP

        step = cfg.cooldown_start if result.status == "ok" else result.steps
        branch = self.branches[cfg]
        if not branch.trial_id:  # a halving rung judged on its cooldown branch: a complete short run
            self.send({"step": step}, checkpoint, step)
            if result.status != "ok":
                return None  # the run itself ends the same way
            return STOP if self.gate.branch_done(result.final_val_loss) else None
        outcome = outcome_of(branch.trial_id, result, self.resumed_step, self.note)
        self.send(outcome.report(step=step), checkpoint, step)  # with the checkpoint recording it
        return None


def outcome_of(tid: str, result, resumed_step: int, note: str, **more) -> TrialOutcome:
    """The outcome of run `tid` (the trial's, or a branch's) on this node; `more`: TrialOutcome's
    `workers` for a data-parallel trial, `rung_losses` for a WSD run's halving."""
    node_id, node_ip = ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()
    return TrialOutcome(tid, result, node_id, node_ip, resumed_step, note, **more)


def final_report(outcome: TrialOutcome) -> dict:
    """A trial's last report: its outcome, as the driver's StoreWriter reads it
    (sweeps/running/driver.py)."""
    return outcome.report(
        trial_id=outcome.trial_id,
        step=outcome.result.steps,
        progress=1.0,
        **{RESUME_NOTE_KEY: outcome.resume_note},
    )


def halving_gate(tc: TrialConfig, resume_from: str | None, load):
    """The trial's side of a successive halving (sweeps/plans/halving.py), or None outside one. A WSD
    run's rungs are judged on cooldown branches, whose losses a resumed run's checkpoint keeps."""
    if not tc.halving or not tc.run.halving_board:
        return None
    from sweeps.running.halving_board import Gate

    state = load(resume_from) if resume_from else {}
    if tc.wsd:
        rungs = set(tc.halving.rungs)
        done = zip(state.get("branches_done", []), state.get("branch_losses", []))
        earlier = [float(loss) for steps, loss in done if int(steps) in rungs]
    else:
        earlier = json.loads(state["curve"]) if state else []
    return Gate(tc.trial_id, tc.halving, tc.run.halving_board, earlier, by_branch=tc.wsd)


def first_loadable(candidates: list, work: str, load) -> tuple[str | None, int, str]:
    """(local folder, step, note) of the first checkpoint that downloads and loads, furthest
    first; the note names each one passed over and why ("" when the first one loads)."""
    skipped = []
    for i, ckpt in enumerate(candidates):
        step: Any = "?"
        try:
            step = ckpt.get_metadata().get("step", "?")  # set at every report
            path = ckpt.to_directory(os.path.join(work, f"resume{i}"))
            # the whole state, read once more by train(): a truncated file fails here
            loaded = int(load(path)["step"])
        except Exception as exc:  # unreadable in any way: the next older one may be intact
            skipped.append(f"its checkpoint at step {step} could not be read ({reason(exc)})")
            continue
        if skipped:
            skipped.append(f"resumed from step {loaded} instead")
        return path, loaded, "; ".join(skipped)
    if skipped:
        skipped.append("started from step 0")
    return None, 0, "; ".join(skipped)


def take_environ(run: RunSettings) -> None:
    """The driver's DEPTHWIDTH_* settings, and no others, in this trial's process (a worker of a
    cluster did not start from the driver's shell, and may have run another sweep's trials)."""
    from sweeps.plans.trialconfig import ENVIRON_PREFIX

    given = dict(run.environ)
    for k in [k for k in os.environ if k.startswith(ENVIRON_PREFIX) and k not in given]:
        del os.environ[k]
    os.environ.update(given)


class _Hook:
    """The plugin file HOOK_FILE_ENV names, with the folder HOOK_DIR_ENV names."""

    def __init__(self, module, folder: str):
        self.module, self.folder = module, folder

    def started(self, *args) -> None:
        self.module.started(self.folder, *args)

    def checkpointed(self, *args) -> None:
        self.module.checkpointed(self.folder, *args)


def trial_hook() -> _Hook | None:
    """The plugin this process's environment names, or None (the normal case)."""
    path, folder = os.environ.get(HOOK_FILE_ENV), os.environ.get(HOOK_DIR_ENV)
    if not path or not folder:
        return None
    import importlib.util

    spec = importlib.util.spec_from_file_location("depthwidth_trial_hook", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return _Hook(module, folder)
