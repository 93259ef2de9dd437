"""A planted trainable: a Tune function trial whose final loss is drawn from the two-regime law of
docs/science.md §4 (analysis.fitting.synthetic) instead of trained, so a sweep's machinery (the adaptive
searcher, resume, budgets) can be exercised on real Ray in seconds with a known b. It reports
exactly what sweeps/running/trainable.py's run_trial reports. Set PLANTED_ENV to a JSON object of law
parameters (E, A_kappa, alpha_kappa, b, noise) to change the defaults.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

import numpy as np

from depthwidth.result import RunResult
from sweeps.plans.trialconfig import TrialConfig
from sweeps.plans.trialoutcome import TrialOutcome
from sweeps.running.record import planned_columns

PLANTED_ENV = "DEPTHWIDTH_PLANTED_LAW"
DEFAULT_LAW = {"E": 1.5, "A_kappa": 20.0, "alpha_kappa": 0.3, "b": 3.0, "noise": 0.02}


def planted_result(tc: TrialConfig, law: dict | None = None) -> RunResult:
    """The RunResult of a trial under the planted law."""
    from analysis.fitting.synthetic import planted_loss
    from sweeps.plans.budget import resolve_model

    p = {**DEFAULT_LAW, **(law or {})}
    model, train = resolve_model(tc.model, tc.data), tc.train
    planned = planned_columns(tc)  # the counts train() records for this trial
    # seeded by the trial id: a rerun of the same trial draws the same loss
    rng = np.random.default_rng(int(hashlib.sha256(tc.trial_id.encode()).hexdigest()[:8], 16))
    clean = float(planted_loss("two_regime", [model.depth], [model.width], p)[0])
    loss = clean * float(np.exp(rng.normal(0.0, p["noise"])))
    tokens = planned["tokens"]
    curve = [{"step": train.steps, "tokens": tokens, "train_loss": loss, "val_loss": loss, "lr": train.lr}]
    return RunResult(
        status="ok",
        final_train_loss=loss,
        final_val_loss=loss,
        steps=train.steps,
        tokens=tokens,
        flops=planned["flops"],
        wall_s=0.0,
        n_params=planned["n_params"],
        n_params_total=planned["n_params_total"],
        flops_per_token=planned["flops_per_token"],
        device="planted",
        torch_version="",
        depthwidth_version="planted",
        unigram_entropy=float("nan"),
        vocab_size=planned["vocab_size"],
        curve=curve,
    )


def planted_trial(config: dict) -> None:
    """Drop-in for sweeps.running.trainable.run_trial."""
    from ray import tune

    from sweeps.running.trainable import final_report, take_environ, trial_hook

    tc = TrialConfig.from_dict(config)
    law = json.loads(os.environ.get(PLANTED_ENV) or "{}")
    take_environ(tc.run)
    hook = trial_hook()
    if hook:  # a test notes the start and may hold the trial here
        hook.started(tc.trial_id, 0, os.getpid())
        hook.checkpointed(tc.trial_id, 0, 0)
    time.sleep(float(law.pop("sleep_s", 0.0)))
    tune.report(final_report(TrialOutcome(tc.trial_id, planted_result(tc, law))))
