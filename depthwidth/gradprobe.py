"""Instrumentation for the recurrence-vs-attention study (Kerg et al. 2020, docs/science.md §6):
‖∂L/∂h_t‖ for every t (the authors' gradient-propagation plot), and the cost of one training
step (FLOPs, autograd-held activation bytes per time step, peak device memory, wall time).
Works on any model whose forward accepts `return_states=True` (depthwidth.models.relrnn).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

N_LAST = 10  # the copy/denoise answer: the authors backpropagate the loss of the last 10 outputs
PROFILE_POINTS = 64  # points kept per stored gradient profile


def grad_norms(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, n_last: int = N_LAST) -> np.ndarray:
    """‖∂L/∂h_t‖ (Frobenius over batch and hidden units) for t = 0..T−1, where L is the mean
    cross-entropy of the last `n_last` outputs and h_t the top layer's state. The derivative is
    the total one: through the recurrence, the attention and the read-out."""
    logits, states = model(x, return_states=True)
    V = logits.size(-1)
    loss = F.cross_entropy(logits[:, -n_last:].reshape(-1, V).float(), y[:, -n_last:].reshape(-1))
    grads = torch.autograd.grad(loss, states, allow_unused=True)
    return np.array([0.0 if g is None else g.double().norm().item() for g in grads])


def start_ratio(norms: np.ndarray, n_first: int = N_LAST) -> float:
    """How much gradient reaches the start of the sequence (where the copy symbols are):
    mean ‖∂L/∂h_t‖ over the first `n_first` steps over the largest ‖∂L/∂h_t‖. Near 1 when
    gradients do not vanish with distance; orders of magnitude below 1 when they do."""
    norms = np.asarray(norms, dtype=float)
    peak = norms.max()
    return float(norms[:n_first].mean() / peak) if peak > 0 else 0.0


def downsample(norms: np.ndarray, n_points: int = PROFILE_POINTS) -> tuple[list[int], list[float]]:
    """Evenly spaced (t, norm) pairs, always keeping the first and last step."""
    T = len(norms)
    idx = np.unique(np.round(np.linspace(0, T - 1, min(n_points, T))).astype(int))
    return idx.tolist(), [float(norms[i]) for i in idx]


class _SavedBytes:
    """Counts the bytes autograd keeps for the backward pass, by time step: a saved tensor is
    attributed to the step in which it was saved, each storage counted once, parameters not at
    all. This is the activation memory of a training step, measured on any device."""

    def __init__(self, model: torch.nn.Module):
        self.skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.seen: set[int] = set()
        self.per_step: list[int] = [0]
        # Hold every counted storage until the count is done: a graph branch that dies during
        # the forward pass (the last step's unused attention) would free its storage, and a
        # later tensor at the same address would then go uncounted.
        self.keep: list[torch.Tensor] = []

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in self.skip and ptr not in self.seen:
            self.seen.add(ptr)
            self.keep.append(t)
            self.per_step[-1] += st.nbytes()
        return t

    def step(self, t: int, n_stored: int) -> None:
        self.per_step.append(0)


def saved_bytes_per_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Autograd-held bytes saved during each time step of the top layer's forward pass
    (length T; lower layers and the read-out land in the first and last entries)."""
    counter = _SavedBytes(model)
    with torch.autograd.graph.saved_tensors_hooks(counter.pack, lambda t: t):
        logits = model(x, hook=counter.step)
        F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
    per = counter.per_step
    tail = per.pop()  # the read-out and the loss, after the last step: counted with it
    per[-1] += tail
    return np.array(per, dtype=np.int64)


def stored_states_per_step(model: torch.nn.Module, x: torch.Tensor) -> np.ndarray:
    """How many past states the top layer's memory holds after each step (0 without attention)."""
    counts: list[int] = []
    with torch.no_grad():
        model(x, hook=lambda t, n: counts.append(n))
    return np.array(counts, dtype=np.int64)


def step_cost(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """The cost of one training step (forward + backward on this batch): matmul FLOPs counted by
    torch's FlopCounterMode (elementwise ops are not counted), autograd-held activation bytes,
    peak CUDA memory (0 on CPU), and wall seconds."""
    model.zero_grad(set_to_none=True)
    with FlopCounterMode(display=False) as fc:
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
    flops = float(fc.get_total_flops())
    acts = float(saved_bytes_per_step(model, x, y).sum())
    model.zero_grad(set_to_none=True)
    cuda = x.is_cuda
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    logits = model(x)
    F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).backward()
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    peak = float(torch.cuda.max_memory_allocated()) if cuda else 0.0
    model.zero_grad(set_to_none=True)
    return {"step_flops": flops, "step_activation_bytes": acts, "step_peak_bytes": peak, "step_wall_s": wall}


def end_of_run_metrics(
    model: torch.nn.Module, data: Any, batch_size: int, device: torch.device | str = "cpu"
) -> dict[str, Any]:
    """What a finished recurrent run adds to RunResult.metrics for the sweep store: the
    gradient profile on validation batch 0 (downsampled `grad_t`, `grad_norms`), its
    `grad_start_ratio`, and the step costs above. Leaves the model's gradients cleared."""
    x, y = (t.to(device) for t in data.batch("val", 0, batch_size))
    was_training = model.training
    model.eval()  # no dropout exists here, but the probe should not depend on it
    norms = grad_norms(model, x, y)
    t, g = downsample(norms)
    out: dict[str, Any] = {"grad_t": t, "grad_norms": g, "grad_start_ratio": start_ratio(norms)}
    out.update(step_cost(model, x, y))
    model.train(was_training)
    return out
