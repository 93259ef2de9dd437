"""The function trainable every sweep trial runs: `depthwidth.train.train` inside Ray Tune.

Ray Tune's canonical shape for a function trainable: a function that reports each evaluation with
`tune.report(metrics, checkpoint=...)`; on a restart it resumes from `tune.get_checkpoint()`,
or, when a previous driver was interrupted, from the trial's checkpoints in the store, the
furthest one that loads (a damaged one is passed over, and the run says so in RESUME_NOTE_KEY).
The final report carries the trial's `TrialOutcome` (sweeps/plans/trialoutcome.py), and each cooldown
branch's report the branch's own, which the driver writes to the store.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

import ray
from ray import tune

from depthwidth.clitools import reason
from sweeps.plans.trialconfig import RunSettings, TrialConfig
from sweeps.plans.trialoutcome import TrialOutcome

RESUME_NOTE_KEY = "resume_note"  # why a trial resumed from an older checkpoint than its newest
# A test harness's hook: a Python file (HOOK_FILE_ENV) whose `started` and `checkpointed` every
# trial calls with a folder (HOOK_DIR_ENV), so a test sees trials start and holds one at a known
# checkpoint (tests/trial_hook.py). Unset in normal use; the driver forwards both to the trials.
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
    from depthwidth.train import load_checkpoint, train

    tc = TrialConfig.from_dict(config)
    tid = tc.trial_id
    model, data, train_cfg = train_configs(tc)

    work = tempfile.mkdtemp(prefix=f"depthwidth-{tid}-")
    try:
        candidates = [tune.get_checkpoint()]  # this run's own, after a lost worker
        candidates += [tune.Checkpoint(uri) for uri in tc.resume_uris]  # older runs'
        resume_from, resumed_step, note = first_loadable(
            [c for c in candidates if c is not None], work, load_checkpoint
        )
        hook = trial_hook(tc.run)
        if hook:
            hook.started(tc.run.hook[1], tid, resumed_step, os.getpid())
        gate = halving_gate(tc, resume_from, load_checkpoint)
        branches = [b.train.replace(threads=train_cfg.threads) for b in tc.branches]
        rungs = gate.rung_branches(train_cfg) if gate is not None and gate.by_branch else []
        first = min((b.cooldown_start for b in branches + rungs), default=None)
        if first is not None and resumed_step > first:  # a branch still to take lies behind it
            why = f"its checkpoint at step {resumed_step} is past a cooldown branch still to take, so the run started from step 0"
            note = "; ".join(x for x in (note, why) if x)
            resume_from, resumed_step = None, 0
        out = _Reporter(tc, train_cfg, hook, gate, note, resumed_step, rungs)
        result = train(
            model,
            data,
            train_cfg,
            report=out.report,
            checkpoint_dir=os.path.join(work, "checkpoint"),
            resume_from=resume_from,
            branches=branches + rungs,
            on_branch=out.on_branch,
        )
        rung_losses = None
        if gate is not None:
            gate.ended()
            if gate.by_branch:  # the rung losses its cooldown branches reached, for its row
                rung_losses = tuple(gate.losses)
        tune.report(final_report(outcome_of(tid, result, resumed_step, note, rung_losses=rung_losses)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _Reporter:
    """A trial's reports to Tune: each evaluation (with its checkpoint when one was written), each
    cooldown branch of a one-run sweep (its result, with the checkpoint that records it as
    taken), and each halving rung judged on a branch."""

    def __init__(self, tc: TrialConfig, train_cfg, hook, gate, note: str, resumed_step: int, rungs: list):
        self.tid, self.run, self.steps = tc.trial_id, tc.run, train_cfg.steps
        self.hook, self.gate, self.note, self.resumed_step, self.rungs = hook, gate, note, resumed_step, rungs
        self.ids = tc.branch_ids()

    def send(self, metrics: dict[str, Any], checkpoint: str | None, step: int) -> None:
        metrics = {
            **metrics,
            "trial_id": self.tid,
            "progress": min(1.0, step / self.steps),
            RESUME_NOTE_KEY: self.note,
        }
        if checkpoint is None:
            tune.report(metrics)
            return
        c = tune.Checkpoint.from_directory(checkpoint)
        c.set_metadata({"trial_id": self.tid, "step": int(step)})
        tune.report(metrics, checkpoint=c)  # persisted to the store's tune/ before returning
        if self.hook:
            self.hook.checkpointed(self.run.hook[1], self.tid, self.resumed_step, int(step))

    def report(self, metrics: dict[str, Any], checkpoint: str | None = None):
        from depthwidth.train import STOP

        self.send(metrics, checkpoint, int(metrics["step"]))
        if self.gate is not None and self.gate.after_eval(int(metrics["step"]), float(metrics["val_loss"])):
            return STOP
        return None

    def on_branch(self, cfg, result, checkpoint: str | None):
        from depthwidth.train import STOP

        step = cfg.cooldown_start if result.status == "ok" else result.steps
        if cfg in self.rungs:  # a halving rung judged on its cooldown branch: a complete short run
            self.send({"step": step}, checkpoint, step)
            if result.status != "ok":
                return None  # the run itself ends the same way
            return STOP if self.gate.branch_done(result.final_val_loss) else None
        branch = outcome_of(self.ids[cfg.steps], result, self.resumed_step, self.note)
        self.send(branch.report(step=step), checkpoint, step)  # with the checkpoint recording it
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
        rungs = set(tc.halving["rungs"])
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


def trial_hook(run: RunSettings):
    """The test harness's hook module that `run.hook` ((file, folder)) names, or None."""
    if not run.hook:
        return None
    import importlib.util

    spec = importlib.util.spec_from_file_location("depthwidth_trial_hook", run.hook[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
