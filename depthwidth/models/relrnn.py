"""Recurrent models of Kerg et al. 2020, "Untangling tradeoffs between recurrence and
self-attention" (docs/science.md §6): `rnn` (orthogonal init), `lstm`, `memrnn` (attention over every
past state) and `relrnn` / `rellstm` (attention over the ν latest states plus ≤ ρ screened ones).
Tokens (B, T) -> logits (B, T, V); `forward(x, return_states=True)` also returns the top layer's
h_t for the gradient probe."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from depthwidth.config import RECURRENT_FAMILIES, ConfigError, ModelConfig

LSTM_CELLS = ("lstm", "rellstm")
StepHook = Callable[[int, int], None]  # (t, number of states the memory holds after step t)


class _Memory:
    """What one attentive layer remembers for a batch: a buffer of the ν latest states and a
    relevant set of at most ρ screened states (docs/science.md §6); `nu=None` keeps every state
    (MemRNN). A state is stored as its key and value side by side, [U_a h_i, h_i] (B, 2H), so
    one stack/cat serves both. Filling depends only on t, so every sequence of the batch has
    the same number of filled slots: no padding or masking is needed."""

    def __init__(self, nu: int | None, rho: int):
        self.nu, self.rho = nu, rho
        self.buf: list[torch.Tensor] = []  # [U_a h_i, h_i], each (B, 2H), oldest first
        self.buf_score: torch.Tensor | None = None  # (B, n_buf) accumulated attention, no grad
        self.rel: torch.Tensor | None = None  # (B, n_rel, 2H)
        self.rel_score: torch.Tensor | None = None  # (B, n_rel), no grad
        self.rel_ids: torch.Tensor | None = None  # (B, n_rel) time step of each relevant state
        self.t = -1  # time step of the latest state pushed

    def __len__(self) -> int:
        return len(self.buf) + (0 if self.rel is None else self.rel.size(1))

    def push(self, kv: torch.Tensor) -> None:
        self.buf.append(kv)
        self.t += 1
        if self.nu is None:  # MemRNN keeps everything and never screens: no relevance needed
            return
        zero = kv.new_zeros(kv.size(0), 1)
        self.buf_score = zero if self.buf_score is None else torch.cat([self.buf_score, zero], 1)
        if len(self.buf) > self.nu:
            score, self.buf_score = self.buf_score[:, 0], self.buf_score[:, 1:]
            self._screen(self.buf.pop(0), score)

    def _screen(self, kv: torch.Tensor, score: torch.Tensor) -> None:
        """A state leaving the buffer joins the relevant set while there is room, else replaces
        the member with the lowest relevance if its own relevance is strictly higher."""
        if self.rho == 0:
            return
        ids = torch.full_like(score, self.t - self.nu, dtype=torch.long)[:, None]  # (B, 1)
        if self.rel is None:
            self.rel, self.rel_score, self.rel_ids = kv[:, None], score[:, None], ids
        elif self.rel.size(1) < self.rho:
            self.rel = torch.cat([self.rel, kv[:, None]], 1)
            self.rel_score = torch.cat([self.rel_score, score[:, None]], 1)
            self.rel_ids = torch.cat([self.rel_ids, ids], 1)
        else:
            lowest, slot = self.rel_score.min(dim=1)  # (B,), first index on ties
            # Per sequence: the one slot to overwrite, or none. torch.where keeps the stored
            # states in the graph (not detached): the gradient reaches them through attention.
            take = F.one_hot(slot, self.rho).bool() & (score > lowest)[:, None]  # (B, ρ)
            self.rel = torch.where(take[..., None], kv[:, None], self.rel)
            self.rel_score = torch.where(take, score[:, None], self.rel_score)
            self.rel_ids = torch.where(take, ids, self.rel_ids)

    def read(self) -> torch.Tensor:
        """Everything attendable, buffer first: (B, n, 2H)."""
        if not self.buf:
            return self.rel
        buf = torch.stack(self.buf, 1)
        return buf if self.rel is None else torch.cat([buf, self.rel], 1)

    def credit(self, alpha: torch.Tensor) -> None:
        """Relevance = attention a state received while in the buffer (no gradient)."""
        if self.buf_score is not None:
            self.buf_score = self.buf_score + alpha.detach()[:, : self.buf_score.size(1)]


class RecurrentLayer(nn.Module):
    """One recurrent layer over a whole sequence, looping over time (never over the batch).

    Cell (docs/science.md §6): h_t = φ(W x_t + b + V s_{t−1}) for the RNN (V orthogonal, φ = tanh),
    or an LSTM whose recurrent input is s_{t−1}. Without attention s_t = h_t. With attention
    e_i = vᵀ tanh(W_a s_{t−1} + U_a h_i) over the memory, c_t = Σ softmax(e)_i h_i,
    s_t = (h_t + c_t)/2. The input projection W x_t is computed by the caller for all t at once.
    """

    def __init__(self, width: int, lstm: bool, memory: str, nu: int, rho: int):
        super().__init__()
        self.width, self.lstm, self.memory, self.nu, self.rho = width, lstm, memory, nu, rho
        self.rec = nn.Linear(width, (4 if lstm else 1) * width, bias=False)  # V, or 4 LSTM gates
        if memory != "none":
            self.w_a = nn.Linear(width, width, bias=False)  # query W_a s_{t−1}
            self.u_a = nn.Linear(width, width, bias=False)  # key U_a h_i
            self.v_a = nn.Parameter(torch.empty(width))
        self.relevant_steps: torch.Tensor | None = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.rec.weight.is_meta:  # counting parameters on the meta device: nothing to draw
            return
        if self.lstm:  # torch.nn.LSTM's default U(−1/√H, 1/√H)
            nn.init.uniform_(self.rec.weight, -(self.width**-0.5), self.width**-0.5)
        else:
            nn.init.orthogonal_(self.rec.weight)
        if self.memory != "none":
            nn.init.normal_(self.v_a, std=(2.0 / (1 + self.width)) ** 0.5)  # xavier for a 1×H row

    def forward(self, xw: torch.Tensor, hook: StepHook | None = None) -> list[torch.Tensor]:
        """xw: (B, T, G·H) projected inputs W x_t + b. Returns [h_0 .. h_{T−1}], each (B, H)."""
        B = xw.size(0)
        s = xw.new_zeros(B, self.width)  # s_{−1}
        cell = xw.new_zeros(B, self.width) if self.lstm else None
        mem = None
        if self.memory != "none":
            mem = _Memory(None if self.memory == "full" else self.nu, self.rho)
        hs: list[torch.Tensor] = []
        # unbind, not xw[:, t]: the backward of T selects would zero-fill a (B, T, G·H) tensor
        # each, O(T²) work; unbind's backward is one stack.
        for t, xw_t in enumerate(xw.unbind(1)):
            pre = xw_t + self.rec(s)  # (B, G·H)
            if self.lstm:
                i, f, g, o = pre.chunk(4, dim=1)  # torch.nn.LSTM gate order
                cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(cell)
            else:
                h = torch.tanh(pre)
            if mem is None:
                s = h
            else:
                query = self.w_a(s)  # (B, H), from s_{t−1}
                mem.push(torch.cat([self.u_a(h), h], 1))
                kv = mem.read()  # (B, n, 2H)
                keys, values = kv[..., : self.width], kv[..., self.width :]
                e = (torch.tanh(query[:, None] + keys) @ self.v_a[:, None])[..., 0]  # (B, n)
                alpha = torch.softmax(e, dim=1)
                context = torch.bmm(alpha[:, None], values)[:, 0]  # (B, H)
                mem.credit(alpha)
                s = 0.5 * (h + context)
            hs.append(h)
            if hook is not None:
                hook(t, 0 if mem is None else len(mem))
        # Diagnostics, as the authors' code returns them: which time steps ended in the
        # relevant set (B, n_rel), or None.
        self.relevant_steps = None if mem is None or mem.rel_ids is None else mem.rel_ids.detach()
        return hs


class RecurrentLM(nn.Module):
    """Embedding (= the first layer's input weights on one-hot tokens, as the authors feed
    one-hot vectors), `depth` stacked recurrent layers of the family's cell and memory, and a
    linear read-out of the top layer's h_t (the authors read out h_t, not s_t)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.family not in RECURRENT_FAMILIES:
            raise ConfigError(
                f"ModelConfig.family = {cfg.family!r} is not a recurrent family; "
                f"expected one of {', '.join(RECURRENT_FAMILIES)}."
            )
        if cfg.vocab_size < 2:
            raise ConfigError(
                f"ModelConfig.vocab_size = {cfg.vocab_size} is invalid: resolve it "
                f"from the data before building the model."
            )
        self.cfg = cfg
        memory = {"memrnn": "full", "relrnn": "screened", "rellstm": "screened"}.get(cfg.family, "none")
        lstm = cfg.family in LSTM_CELLS
        V, H, G = cfg.vocab_size, cfg.width, 4 if lstm else 1
        # Names matter to accounting: `emb` and `head` are the embedding parameters.
        self.emb = nn.Embedding(V, G * H)  # W x_t of layer 1 for one-hot x_t
        self.layers = nn.ModuleList(
            RecurrentLayer(H, lstm, memory, cfg.nu, cfg.rho) for _ in range(cfg.depth)
        )
        self.inp = nn.ModuleList(nn.Linear(H, G * H, bias=False) for _ in range(cfg.depth - 1))
        self.bias = nn.ParameterList(nn.Parameter(torch.zeros(G * H)) for _ in range(cfg.depth))
        self.head = nn.Linear(H, V)
        if not self.head.weight.is_meta:
            if lstm:  # torch.nn.LSTM's default U(−1/√H, 1/√H)
                for p in [self.emb.weight, *(m.weight for m in self.inp)]:
                    nn.init.uniform_(p, -(H**-0.5), H**-0.5)
            else:  # Kaiming normal on the input weights, fan-in = V for one-hot tokens
                nn.init.normal_(self.emb.weight, std=(2.0 / V) ** 0.5)
                for m in self.inp:
                    nn.init.kaiming_normal_(m.weight)
            nn.init.xavier_normal_(self.head.weight)
            nn.init.zeros_(self.head.bias)

    def forward(self, x: torch.Tensor, return_states: bool = False, hook: StepHook | None = None):
        """x: (B, T) tokens -> logits (B, T, V) [, the top layer's states h_t, each (B, H)].
        `hook(t, n_stored)` is called after each step of the top layer."""
        xw, hs = self.emb(x), []  # (B, T, G·H); hs: the states of the layer below
        for i, layer in enumerate(self.layers):
            if i > 0:
                xw = self.inp[i - 1](torch.stack(hs, 1))  # (B, T, H) -> (B, T, G·H)
            hs = layer(xw + self.bias[i], hook if i == len(self.layers) - 1 else None)
        logits = self.head(torch.stack(hs, 1))  # (B, T, V)
        return (logits, hs) if return_states else logits


def build_recurrent(cfg: ModelConfig) -> nn.Module:
    """The model for a recurrent family: lstm, rnn, memrnn, relrnn or rellstm."""
    return RecurrentLM(cfg)
