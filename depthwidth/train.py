"""One training run: `train(model_cfg, data_cfg, train_cfg) -> RunResult`.

An explicit loop (nanoGPT's shape, importable as a function): AdamW, linear warmup then cosine
decay as a pure `get_lr(step, cfg)`, gradient clipping, periodic evaluation on fixed validation
batches, a `report(metrics, checkpoint=None)` callback (tune.report's shape), exact
checkpoint/resume. Ray, the CLI and the tests all call this same function; nothing here imports
Ray.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from depthwidth import __version__
from depthwidth.accounting import count_params, flops_per_token, train_flops_per_token
from depthwidth.config import RECURRENT_FAMILIES, DataConfig, ModelConfig, TrainConfig
from depthwidth.copyprobe import control_batch, copy_metrics, probe_batch
from depthwidth.data import DataSource, resolve
from depthwidth.models import build_model
from depthwidth.result import RunResult
from runstore.files import atomic_file

CHECKPOINT_FILE = "state.pt"
# A loss this many times the uniform-guess loss ln(V) counts as diverged, as does NaN/inf:
# far past anything a model that is still learning produces, and it stops a blown-up run early.
DIVERGENCE_FACTOR = 10.0
PROFILES_KEPT = 8  # gradient profiles over training kept in a run's metrics
# A file whose existence asks every running trial for a checkpoint at its next evaluation (a
# SLURM job told it will be preempted or reach its time limit, sweeps/slurm.py)
CHECKPOINT_REQUEST_ENV = "DEPTHWIDTH_CHECKPOINT_REQUEST"

BRANCH_RUN_FILE = "branch-stem.pt"  # the run's state while a branch runs, where memory is short
# on_branch(cfg, result, checkpoint): a cooldown branch's budget and result, and the folder of
# the run's checkpoint written right after it (None without a checkpoint folder); answering STOP
# ends the run there with status "stopped"
OnBranch = Callable[[TrainConfig, "RunResult", "str | None"], Any]

# report(metrics) after every evaluation, or report(metrics, checkpoint=folder) when that
# evaluation also wrote a checkpoint: the shape of tune.report.
# A report may answer STOP: the run ends after this evaluation with status "stopped".
Report = Callable[..., Any]
STOP = "stop"


class BranchBehindCheckpoint(ValueError):
    """A cooldown branch still to take starts before the step a checkpoint resumes from: the run
    can only take it by starting over (sweeps/running/trainable.py does)."""


class _FromCaller(Exception):
    """Carries an exception raised by the caller's `report` out of the run unchanged."""

    def __init__(self, exc: BaseException):
        super().__init__(repr(exc))
        self.exc = exc


def get_lr(step: int, cfg: TrainConfig) -> float:
    """Learning rate at `step` (0-based): linear warmup to cfg.lr, then cosine to min_lr_ratio·lr,
    or (WSD, docs/science.md §10) constant until cfg.cooldown_start and a cooldown to
    min_lr_ratio·lr over the rest, shaped 1 − sqrt(progress) (Hägele et al. 2024) or linearly.
    A WSD run and a longer one with the same warmup agree on every step before the shorter one's
    cooldown: that is what lets a cooldown branch of a long run stand for the short run."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    floor = cfg.lr * cfg.min_lr_ratio
    if cfg.schedule == "wsd":
        start = cfg.cooldown_start
        if step < start:
            return cfg.lr
        progress = min(1.0, (step - start + 1) / (cfg.steps - start))
        shape = 1.0 - math.sqrt(progress) if cfg.cooldown == "1-sqrt" else 1.0 - progress
        return floor + (cfg.lr - floor) * shape
    span = max(1, cfg.steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return floor + 0.5 * (cfg.lr - floor) * (1.0 + math.cos(math.pi * progress))


class TrainBatches:
    """Training batches from `start` on, moved to `device`. With `ahead` > 0 a background thread
    draws that many batches in advance (pinned, copied without blocking), so a GPU does not wait
    for the CPU-side data between steps; batch i is the same pure function of (seed, i) either
    way, so prefetching changes neither the losses nor what a checkpoint must hold."""

    def __init__(
        self,
        data: DataSource,
        batch_size: int,
        start: int,
        device: torch.device,
        ahead: int = 0,
        rows: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ):
        self.data, self.batch_size, self.next, self.device = data, batch_size, start, device
        self.ahead, self.rows = ahead, rows  # rows: this worker's shard of each batch
        self._pool = None
        self._pending: dict[int, Any] = {}
        if ahead > 0:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="depthwidth-data")

    def _make(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.data.batch("train", index, self.batch_size)
        if self.rows is not None:
            x, y = self.rows(x), self.rows(y)
        if self.device.type == "cuda":
            return x.pin_memory(), y.pin_memory()
        return x, y

    def get(self) -> tuple[torch.Tensor, torch.Tensor]:
        index = self.next
        self.next += 1
        if self._pool is None:
            x, y = self._make(index)
        else:
            for i in range(index, index + self.ahead + 1):
                if i not in self._pending:
                    self._pending[i] = self._pool.submit(self._make, i)
            x, y = self._pending.pop(index).result()
        nb = self.device.type == "cuda"
        return x.to(self.device, non_blocking=nb), y.to(self.device, non_blocking=nb)

    def close(self) -> None:
        if self._pool is not None:
            for f in self._pending.values():
                f.cancel()
            self._pool.shutdown(wait=True)
            self._pool, self._pending = None, {}


@dataclass(frozen=True)
class Parallel:
    """Data parallelism for `train()` inside an initialised torch.distributed process group (each
    worker of a Ray Train trial joins one: sweeps/running/distributed.py). Every rank draws the
    same global batch of `train_cfg.batch_size` rows (a pure function of the seed and step) and trains on its own
    1/world of the rows; gradients are averaged over the ranks (DDP, or FSDP's sharded
    reduction), so the step is that of one worker on the whole batch: the gradient of a mean
    over equal shards is the mean of the shards' gradients. Losses are averaged the same way,
    so every rank sees one curve and makes one decision; rank 0 alone writes checkpoints."""

    rank: int
    world: int
    sharding: str = "ddp"  # "ddp": weights replicated; "fsdp": sharded (torch FSDP2)
    device: str | None = None  # this worker's device (e.g. cuda:1); None: train_cfg.device

    @classmethod
    def current(cls, sharding: str = "ddp", device: str | None = None) -> Parallel:
        import torch.distributed as dist

        return cls(dist.get_rank(), dist.get_world_size(), sharding, device)

    def shard(self, t: torch.Tensor) -> torch.Tensor:
        n = t.size(0) // self.world
        return t[self.rank * n : (self.rank + 1) * n]

    def mean(self, value: torch.Tensor | float) -> float:
        import torch.distributed as dist

        t = value.detach().clone().float() if isinstance(value, torch.Tensor) else torch.tensor(float(value))
        if dist.get_backend() == "nccl":
            t = t.cuda()
        dist.all_reduce(t)
        return t.item() / self.world

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier()

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        if self.sharding == "fsdp":
            from torch.distributed.fsdp import fully_shard

            for block in getattr(model, "blocks", []):
                fully_shard(block)
            return fully_shard(model)
        from torch.nn.parallel import DistributedDataParallel as DDP

        # gradients live in DDP's buckets (no second copy: accounting.memory_estimate holds)
        return DDP(
            model, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True
        )

    def state(self, model: torch.nn.Module, opt: torch.optim.Optimizer) -> tuple[dict, dict]:
        """Whole (unsharded) model and optimizer state, the same as one worker's: a checkpoint
        does not depend on how many workers wrote it. Collective under FSDP."""
        if self.sharding != "fsdp":
            return _unwrap(model).state_dict(), opt.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        return get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def load(self, model: torch.nn.Module, opt: torch.optim.Optimizer, state: dict) -> None:
        if self.sharding != "fsdp":
            _unwrap(model).load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        set_state_dict(
            model,
            opt,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
            options=StateDictOptions(full_state_dict=True),
        )


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


def pick_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("TrainConfig.device = 'cuda' but no CUDA device is available.")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _param_groups(model: torch.nn.Module, weight_decay: float, eps: float) -> list[dict]:
    if hasattr(model, "param_groups"):
        return model.param_groups(weight_decay, eps)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return [
        g
        for g in (
            dict(params=decay, lr_scale=1.0, weight_decay=weight_decay, eps=eps),
            dict(params=rest, lr_scale=1.0, weight_decay=0.0, eps=eps),
        )
        if g["params"]
    ]


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW over the model's parameter groups; each group carries its own `lr_scale`, weight
    decay and ε (torch reads `eps` per group), as μP and CompleteP prescribe."""
    groups = _param_groups(model, cfg.weight_decay, cfg.eps)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps)


def _save(path: Path, state: dict[str, Any]) -> None:
    """Atomic (runstore.files.atomic_file): a crash leaves the previous checkpoint intact."""
    with atomic_file(path / CHECKPOINT_FILE) as f:
        torch.save(state, f)


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Tensors and plain values only (weights_only=True): a checkpoint never runs code."""
    return torch.load(Path(path) / CHECKPOINT_FILE, map_location="cpu", weights_only=True)


def _grad_profile(
    model: torch.nn.Module, data: DataSource, batch_size: int, device: torch.device
) -> dict[str, Any]:
    """‖∂L/∂h_t‖ on validation batch 0 now (depthwidth.gradprobe): the share reaching the first
    steps as a scalar for the curve, and the downsampled profile."""
    from depthwidth.gradprobe import downsample, grad_norms, start_ratio

    x, y = (t.to(device) for t in data.batch("val", 0, batch_size))
    model.eval()
    try:
        norms = grad_norms(model, x, y)
    finally:
        model.train()
    t, g = downsample(norms)
    return {"grad_start_ratio": start_ratio(norms), "grad_t": t, "grad_norms": g}


def _profiles_over_training(curve: list[dict[str, Any]]) -> dict[str, Any]:
    """At most PROFILES_KEPT gradient profiles from the evaluations, evenly spaced, the first
    and last always kept: `grad_profile_steps` [k], `grad_profile_t` [n], `grad_profile_norms`
    [k][n], for the run's stored metrics."""
    have = [c for c in curve if isinstance(c.get("grad_norms"), list)]
    if not have:
        return {}
    k = min(PROFILES_KEPT, len(have))
    idx = sorted({round(i * (len(have) - 1) / max(1, k - 1)) for i in range(k)})
    return {
        "grad_profile_steps": [int(have[i]["step"]) for i in idx],
        "grad_profile_t": list(have[-1]["grad_t"]),
        "grad_profile_norms": [list(have[i]["grad_norms"]) for i in idx],
    }


def run_copy_fits(cfg: ModelConfig, device: torch.device) -> bool:
    """Whether a second copy of the weights and Adam moments (3 fp32 numbers per parameter) fits
    in what the device has free now, with a quarter to spare."""
    need = 1.25 * 3 * 4 * count_params(cfg).n_params_total
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return need < free
    from depthwidth.accounting import machine_memory_bytes

    free = machine_memory_bytes(available=True)
    return free is None or need < free


COPY_PROBE_SOURCES = ("text", "tokens")  # natural-language data: the probe is on by default


def copy_probe_on(model_cfg: ModelConfig, data_cfg: DataConfig) -> bool:
    return model_cfg.family == "transformer" and data_cfg.source in COPY_PROBE_SOURCES


def checkpoint_requested() -> bool:
    flag = os.environ.get(CHECKPOINT_REQUEST_ENV)
    return bool(flag) and os.path.exists(flag)


def deterministic_kernels(device: torch.device) -> None:
    """On CPU, torch's deterministic kernels (a warning, never a failure, for an op without one):
    with the seed (the only RNG a trial draws from besides the data's own keyed generators) and a
    fixed `threads`, a trial then repeats bit for bit on one machine. Across CPUs the last bits of
    sums still differ (the BLAS kernel chosen for the CPU, its vector width, how a reduction is
    split over threads), and training can amplify them (docs/bench/relrnn.md). Off again for
    another device if this set it (warn-only is its mark), so a later CUDA run is not slowed."""
    if device.type == "cpu":
        if not torch.are_deterministic_algorithms_enabled():
            torch.use_deterministic_algorithms(True, warn_only=True)
    elif torch.is_deterministic_algorithms_warn_only_enabled():
        torch.use_deterministic_algorithms(False)


def train(
    model_cfg: ModelConfig,
    data_cfg: DataConfig,
    train_cfg: TrainConfig,
    report: Report | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    resume_from: str | os.PathLike | None = None,
    parallel: Parallel | None = None,
    branches: Sequence[TrainConfig] = (),
    on_branch: OnBranch | None = None,
) -> RunResult:
    """Train one model. Never raises for divergence or a failure inside the run: the result's
    status says what happened ("ok", "diverged", "failed" with `error`). With `parallel` (world
    > 1) this process is one of several data-parallel workers; a failure then raises, so the
    other workers are not left waiting for it.

    `branches`: shorter WSD budgets of this WSD run (the same run but for `steps` and
    `eval_every`). At each one's cooldown start the run hands a copy of itself to that budget's
    cooldown, evaluates it, calls `on_branch(cfg, result, checkpoint)` and goes on where it left
    off; a checkpoint written then records the branch as done, so a resumed run never takes it
    again (docs/science.md §10)."""
    t0 = time.perf_counter()
    if train_cfg.threads:
        torch.set_num_threads(train_cfg.threads)
    check_branches(train_cfg, branches)
    # A checkpoint that cannot be read raises here (the caller may hold an older one); building
    # the model and everything after it happens inside the run, so a model too large for the
    # device ends as a "failed" result rather than an exception.
    run = _Training(model_cfg, data_cfg, train_cfg, parallel, t0, resume_from, branches)
    try:
        run.build()
        run.loop(report, checkpoint_dir, on_branch)
    except _FromCaller as wrapped:
        # the caller's exception exactly as raised (`from` would replace its own cause)
        raise wrapped.exc  # noqa: B904
    except Exception as exc:  # a failed run is a result, not a crash of the caller
        if run.dp is not None:
            raise
        run.status, run.error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        if run.batches is not None:
            run.batches.close()
    result = run.result()
    if on_branch is not None and run.pending and result.status in ("diverged", "failed"):
        # a standalone run of a budget not yet branched would have followed this run's steps up
        # to its cooldown start, past the point where this one ended: it ends the same way
        for cfg in run.pending:
            on_branch(cfg, result, None)
    return result


def check_branches(run: TrainConfig, branches: Sequence[TrainConfig]) -> None:
    """Each branch is the run but for its length (and evaluation interval): otherwise its
    cooldown, taken from the run, would not be the run its budget asks for."""
    same = {k: v for k, v in run.to_dict().items() if k not in ("steps", "eval_every")}
    for b in branches:
        other = {k: v for k, v in b.to_dict().items() if k not in ("steps", "eval_every")}
        if run.schedule != "wsd" or other != same or not 1 <= b.steps < run.steps:
            diff = sorted(k for k in same if same[k] != other.get(k))
            raise ValueError(
                f"a cooldown branch of {b.steps} steps cannot be taken from this run of "
                f"{run.steps} steps (schedule {run.schedule!r}; differing fields: {diff or 'none'}): "
                f"branches need schedule 'wsd', fewer steps and otherwise the same settings."
            )


class _Training:
    """The state of one training run and its steps, in the order `train` takes them: build the
    model (from a checkpoint when resuming), loop over steps, evaluate, checkpoint and report
    every `eval_every` steps, and sum it all up in a RunResult."""

    def __init__(
        self,
        model_cfg: ModelConfig,
        data_cfg: DataConfig,
        train_cfg: TrainConfig,
        parallel: Parallel | None,
        t0: float,
        resume_from: str | os.PathLike | None,
        branches: Sequence[TrainConfig] = (),
    ):
        self.model_cfg, self.data = resolve(model_cfg, data_cfg)
        self.cfg, self.t0 = train_cfg, t0
        self.dp = parallel if parallel is not None and parallel.world > 1 else None
        self.device = (
            torch.device(parallel.device) if parallel and parallel.device else pick_device(train_cfg.device)
        )
        deterministic_kernels(self.device)
        self.counts = count_params(self.model_cfg)
        self.tokens_per_step = train_cfg.batch_size * self.model_cfg.seq_len
        self.c_per_token = train_flops_per_token(self.model_cfg)
        self.unigram = self.data.unigram_entropy()
        self.diverge_at = DIVERGENCE_FACTOR * math.log(self.model_cfg.vocab_size)
        self.state = load_checkpoint(resume_from) if resume_from is not None else None
        self.step, self.curve, self.wall_offset = 0, [], 0.0
        self.branches_done: list[int] = []  # the steps of the branches this run has taken
        self.branch_losses: list[float] = []  # and each one's final validation loss
        if self.state is not None:
            self.step, self.curve = int(self.state["step"]), json.loads(self.state["curve"])
            self.wall_offset = float(self.state["wall_s"])
            self.branches_done = [int(b) for b in self.state.get("branches_done", [])]
            self.branch_losses = [float(v) for v in self.state.get("branch_losses", [])]
        self.pending = sorted(
            (b for b in branches if b.steps not in self.branches_done), key=lambda b: b.cooldown_start
        )
        if self.pending and self.pending[0].cooldown_start < self.step:
            raise BranchBehindCheckpoint(
                f"the cooldown branch of {self.pending[0].steps} steps starts at step "
                f"{self.pending[0].cooldown_start}, before the checkpoint resumed (step {self.step})."
            )
        self.amp = (
            torch.autocast(self.device.type, dtype=torch.bfloat16)
            if train_cfg.precision == "bf16"
            else nullcontext()
        )
        self.model = self.fwd = self.opt = self.batches = None
        self.rows = self.dp.shard if self.dp is not None else None
        # Kerg et al. 2020's claim that ρ governs gradient stability is about training: the
        # recurrent families measure ‖∂L/∂h_t‖ at every evaluation, not only at the end.
        self.probe_during = self.model_cfg.family in RECURRENT_FAMILIES
        # a transformer on text: the copying probe at every evaluation (depthwidth.copyprobe)
        self.copy_probe = None
        if copy_probe_on(self.model_cfg, data_cfg):
            counts = self.data.token_counts() if hasattr(self.data, "token_counts") else None
            shape = (self.model_cfg.vocab_size, self.model_cfg.seq_len)
            self.copy_probe = (probe_batch(*shape, counts=counts), control_batch(*shape, counts=counts))
        self.status, self.error = "ok", ""
        self.last = self.curve[-1] if self.curve else {}
        self.n_evals = len(self.curve)
        self.acc = (0.0, 0)  # (sum, count) of the train losses since the last evaluation
        # the last steps' train losses, for a branch whose evaluations fall elsewhere than this
        # run's: its first reported train loss averages from its own last evaluation point
        longest = max((b.eval_every for b in self.pending), default=0)
        self.recent: deque[float] = deque(self.state.get("recent", []) if self.state else [], maxlen=longest)

    def scalar(self, t: Any) -> float:
        """A loss as a float; under data parallelism, the mean over every worker's shard."""
        if self.dp is not None:
            return self.dp.mean(t)
        return t.item() if isinstance(t, torch.Tensor) else t

    def build(self) -> None:
        """The model and optimizer, from the seed or from the checkpoint resumed."""
        torch.manual_seed(self.cfg.seed)
        model = build_model(self.model_cfg).to(self.device)
        if self.dp is not None:  # every rank built the same weights from the seed; DDP checks it
            model = self.dp.wrap(model, self.device)
        self.model, self.opt = model, make_optimizer(_unwrap(model), self.cfg)
        if self.state is not None:
            if self.dp is not None:
                self.dp.load(model, self.opt, self.state)
            else:
                model.load_state_dict(self.state["model"])
                self.opt.load_state_dict(self.state["optimizer"])
            torch.set_rng_state(self.state["rng"])
            self.state = None  # the model holds it now
        self.fwd = torch.compile(model) if self.cfg.compile else model
        # On a GPU the next batches are drawn while the current step runs (the PCFG makes 2–3M
        # tokens/s on one core, fewer than a GPU consumes at small widths).
        self.batches = TrainBatches(
            self.data,
            self.cfg.batch_size,
            self.step,
            self.device,
            ahead=2 if self.device.type == "cuda" else 0,
            rows=self.rows,
        )

    def loss_of(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with self.amp:
            logits = self.fwd(x)
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1)), logits

    def loop(
        self,
        report: Report | None,
        checkpoint_dir: str | os.PathLike | None,
        on_branch: OnBranch | None = None,
    ) -> None:
        """Steps until the budget, a divergence, or an error; an evaluation every eval_every,
        and a cooldown branch where each shorter budget's cooldown starts."""
        while self.step < self.cfg.steps and self.status == "ok":
            end = self.pending[0].cooldown_start if self.pending else self.cfg.steps
            if self.step == end:
                self.branch(self.pending.pop(0), checkpoint_dir, on_branch)
                continue
            self.steps_until(end, report, checkpoint_dir)

    def steps_until(self, end: int, report: Report | None, checkpoint_dir: str | os.PathLike | None) -> None:
        """Train up to step `end` (or the end of the run, a divergence, an error)."""
        cfg, model, opt = self.cfg, self.model, self.opt
        model.train()
        while self.step < min(end, cfg.steps):
            lr = get_lr(self.step, cfg)
            for g in opt.param_groups:
                g["lr"] = lr * g["lr_scale"]
            x, y = self.batches.get()
            loss, _ = self.loss_of(x, y)
            value = self.scalar(loss)
            if not math.isfinite(value) or value > self.diverge_at:
                self.status, self.error = "diverged", f"train loss {value:.4g} at step {self.step}"
                return
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            self.step += 1
            self.acc = (self.acc[0] + value, self.acc[1] + 1)  # train loss since the last evaluation
            self.recent.append(value)
            if self.step % cfg.eval_every == 0 or self.step == cfg.steps:
                self.evaluation(self.acc[0] / self.acc[1], lr, report, checkpoint_dir)
                self.acc = (0.0, 0)
                if self.status != "ok":
                    return

    def branch(
        self, cfg: TrainConfig, checkpoint_dir: str | os.PathLike | None, on_branch: OnBranch | None
    ) -> None:
        """The cooldown of the shorter budget `cfg` from here, on a copy of this run: trained and
        evaluated as that budget's own run, then this run's state put back exactly (weights,
        moments, RNG, curve, the data's position), so the run goes on as if nothing happened.
        The copy is held in memory, or on disk where a second copy would not fit."""
        held = self.hold_state(checkpoint_dir)
        kept = (self.cfg, len(self.curve), self.last, self.n_evals, self.acc, self.batches.next)
        self.cfg = cfg
        since = self.step - (self.step // cfg.eval_every) * cfg.eval_every  # steps since its last evaluation
        tail = list(self.recent)[max(0, len(self.recent) - since) :] if since else []
        self.acc = (sum(tail), len(tail))
        try:
            self.steps_until(cfg.steps, None, None)
            result = self.result()
        finally:
            self.cfg, n, self.last, self.n_evals, self.acc, self.batches.next = kept
            del self.curve[n:]
            self.restore_state(held)
            self.step, self.status, self.error = cfg.cooldown_start, "ok", ""
        self.branches_done.append(cfg.steps)
        self.branch_losses.append(result.final_val_loss)
        saved = None
        if checkpoint_dir is not None:  # records the branch as taken: a resume never takes it twice
            saved = self.checkpoint(Path(checkpoint_dir), self.wall_offset + time.perf_counter() - self.t0)
        if on_branch is not None:
            try:
                answer = on_branch(cfg, result, saved)
            except BaseException as exc:  # the caller's own exception: let it through
                raise _FromCaller(exc) from exc
            if answer == STOP:  # e.g. a halving rung judged on this branch (sweeps/plans/halving.py)
                self.status = "stopped"

    def hold_state(self, checkpoint_dir: str | os.PathLike | None) -> dict[str, Any]:
        """Weights, moments and RNG of this moment: a copy in memory, or a file where the copy
        would not fit in what the device has free."""
        weights, moments = (
            self.dp.state(self.model, self.opt)
            if self.dp is not None
            else (self.model.state_dict(), self.opt.state_dict())
        )
        state = {"model": weights, "optimizer": moments, "rng": torch.get_rng_state()}
        if checkpoint_dir is not None and not run_copy_fits(self.model_cfg, self.device):
            path = Path(checkpoint_dir) / BRANCH_RUN_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(path) as f:
                torch.save(state, f)
            return {"file": str(path)}
        import copy

        return copy.deepcopy(state)

    def restore_state(self, held: dict[str, Any]) -> None:
        if "file" in held:
            state = torch.load(held["file"], map_location="cpu", weights_only=True)
            os.unlink(held["file"])
        else:
            state = held
        if self.dp is not None:
            self.dp.load(self.model, self.opt, state)
        else:
            self.model.load_state_dict(state["model"])
            self.opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])

    def evaluation(
        self, train_loss: float, lr: float, report: Report | None, checkpoint_dir: str | os.PathLike | None
    ) -> None:
        """One point of the curve: validation metrics, a checkpoint when due, the report."""
        step = self.step
        ev = self.evaluate()
        metrics = {
            "step": step,
            "tokens": step * self.tokens_per_step,
            "flops": step * self.tokens_per_step * self.c_per_token,
            "train_loss": train_loss,
            "lr": lr,
            "wall_s": self.wall_offset + time.perf_counter() - self.t0,
            **ev,
        }
        self.n_evals += 1
        if not math.isfinite(ev["val_loss"]) or ev["val_loss"] > self.diverge_at:
            self.status, self.error = "diverged", f"val loss {ev['val_loss']:.4g} at step {step}"
        elif self.probe_during:
            metrics.update(_grad_profile(_unwrap(self.model), self.data, self.cfg.batch_size, self.device))
        self.curve.append(metrics)
        saved = None
        if (
            checkpoint_dir is not None
            and self.status == "ok"
            and (
                self.n_evals % self.cfg.checkpoint_every == 0
                or step == self.cfg.steps
                or checkpoint_requested()
            )
        ):
            saved = self.checkpoint(Path(checkpoint_dir), metrics["wall_s"])
        self.last = metrics
        if report is not None:
            try:  # the per-step profile stays in the curve; callers get scalars
                scalars = {k: v for k, v in metrics.items() if not isinstance(v, list)}
                answer = report(scalars) if saved is None else report(scalars, checkpoint=saved)
                # told to stop (e.g. successive halving, sweeps/plans/halving.py); a finished run is
                # not cut short
                if answer == STOP and self.status == "ok" and step < self.cfg.steps:
                    self.status = "stopped"
            except BaseException as exc:  # the caller's own exception: let it through
                raise _FromCaller(exc) from exc

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        self.model.eval()
        losses, extras = [], []
        for i in range(self.cfg.eval_batches):
            x, y = self.data.batch("val", i, self.cfg.batch_size)
            if self.rows is not None:
                x, y = self.rows(x), self.rows(y)
            x, y = x.to(self.device), y.to(self.device)
            loss, logits = self.loss_of(x, y)
            losses.append(self.scalar(loss))
            extra = self.data.extra_metrics(logits.float(), y)
            extras.append({k: self.scalar(v) for k, v in extra.items()} if self.dp is not None else extra)
        out = {"val_loss": sum(losses) / len(losses)}
        for k in extras[0]:
            out[k] = sum(e[k] for e in extras) / len(extras)
        if self.copy_probe is not None:
            scored = []  # (logits, y) on the probe, then on its control
            for batch in self.copy_probe:
                x, y = (t.to(self.device) for t in batch)
                if self.rows is not None:
                    x, y = self.rows(x), self.rows(y)
                with self.amp:
                    scored.append((self.fwd(x), y))
            (logits, y), (ctl_logits, ctl_y) = scored
            metrics = copy_metrics(logits, y, ctl_logits, ctl_y)
            out.update({k: self.scalar(v) for k, v in metrics.items()})
        self.model.train()
        return out

    def checkpoint(self, folder: Path, wall_s: float) -> str | None:
        """Rank 0 (or the only process) saves; the folder, where this process saved."""
        dp, saved = self.dp, None
        weights, moments = (
            dp.state(self.model, self.opt)
            if dp is not None
            else (self.model.state_dict(), self.opt.state_dict())
        )
        if dp is None or dp.rank == 0:
            _save(
                folder,
                {
                    "model": weights,
                    "optimizer": moments,
                    "rng": torch.get_rng_state(),
                    "step": self.step,
                    "curve": json.dumps(self.curve),
                    "wall_s": wall_s,
                    "branches_done": list(self.branches_done),
                    "branch_losses": list(self.branch_losses),
                    "recent": list(self.recent),
                },
            )
            saved = str(folder)
        if dp is not None:  # no rank goes on (or stops) before the checkpoint exists
            dp.barrier()
        return saved

    def result(self) -> RunResult:
        cfg, last, step = self.model_cfg, self.last, self.step
        extra = {
            k: v
            for k, v in last.items()
            if k not in ("step", "tokens", "flops", "train_loss", "val_loss", "lr", "wall_s")
            and not isinstance(v, list)
        }
        extra.update(_profiles_over_training(self.curve))
        if self.status == "ok" and cfg.family in RECURRENT_FAMILIES:
            # Kerg et al. 2020: the per-step gradient profile and step cost, kept with the run
            from depthwidth.gradprobe import end_of_run_metrics

            try:
                extra.update(
                    end_of_run_metrics(_unwrap(self.model), self.data, self.cfg.batch_size, self.device)
                )
            except Exception as exc:  # the probe must not cost a finished run
                extra["probe_error"] = f"{type(exc).__name__}: {exc}"
        counts = self.counts
        return RunResult(
            status=self.status,
            final_train_loss=float(last.get("train_loss", math.nan)),
            final_val_loss=float(last.get("val_loss", math.nan)),
            steps=step,
            tokens=step * self.tokens_per_step,
            flops=step * self.tokens_per_step * self.c_per_token,
            wall_s=self.wall_offset + time.perf_counter() - self.t0,
            n_params=counts.n_params,
            n_params_total=counts.n_params_total,
            flops_per_token=flops_per_token(cfg),
            device=str(self.device),
            torch_version=torch.__version__,
            depthwidth_version=__version__,
            unigram_entropy=self.unigram,
            vocab_size=cfg.vocab_size,
            curve=list(self.curve),
            metrics=extra,
            error=self.error,
        )
