"""Separation rank of linear-attention networks, measured exactly over a prime field.

Implements docs/science.md §5 (ours, after Cohen & Shashua's grid tensors) for the network Levine
et al. 2020 analyse (docs/science.md §1): bidirectional un-normalised multi-head attention, no softmax,
LayerNorm or FFN, read out linearly at one position. Weights use the layout of
depthwidth.models.transformer (qkv: [W_Q; W_K; W_V] rows, proj: W_O) with scale 1.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from math import log

import numpy as np

from depthwidth.config import ConfigError
from depthwidth.theory import log_monomial_bound, monomial_bound, parity_bound, regime, threshold_depth

# Two primes below 2^31 (2^31 - 1 and 2^31 - 19). Overflow bound used everywhere below: values
# are kept in [0, p), so one product is <= (p-1)^2 < 2^62 < 2^63 - 1 = int64 max; each product is
# reduced before summing, and a sum of n reduced terms is < n*p < 2^63 for n < 2^32 (we sum at
# most max(width, tokens) terms at once).
P1, P2 = 2_147_483_647, 2_147_483_629
PARTITIONS = ("halves", "interleaved")
MAX_DEPTH = 8  # degree 3^8 = 6561; deeper cells exceed any grid this package can rank
_LIMB = 16  # float64 BLAS path: operands split into 16-bit limbs (see _matmul_mod)
_BLAS_K = 64  # contraction chunk for the BLAS path: 64 * 2^31 * 2^16 = 2^53, exact in float64
CHUNK = 1 << 13  # network evaluations per vectorised batch


# ------------------------------------------------------------------ arithmetic mod p -------


def _matmul_mod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """Exact (a @ b) mod p for int64 entries in [0, p), p < 2^31, through float64 BLAS.

    b is split into limbs b = hi*2^16 + lo (lo < 2^16, hi < 2^15). One limb product is
    < 2^31 * 2^16 = 2^47 and a sum of at most 64 of them is < 2^53, so every partial sum the BLAS
    forms is an integer float64 represents exactly; each chunk is reduced mod p before the next.
    """
    b_lo = (b & 0xFFFF).astype(np.float64)
    b_hi = (b >> _LIMB).astype(np.float64)
    out = np.zeros((a.shape[0], b.shape[1]), dtype=np.int64)
    for s in range(0, a.shape[1], _BLAS_K):
        af = a[:, s : s + _BLAS_K].astype(np.float64)
        part = (af @ b_hi[s : s + _BLAS_K]).astype(np.int64) % p  # < 2^31
        part <<= _LIMB  # < 2^47
        part += (af @ b_lo[s : s + _BLAS_K]).astype(np.int64)  # < 2^47 + 2^53
        out += part % p  # < 2p
        out %= p
    return out


def _inv_unit_lower(low: np.ndarray, p: int) -> np.ndarray:
    """Inverse mod p of the unit lower-triangular matrix with strict lower part low (s x s)."""
    s = low.shape[0]
    x = np.eye(s, dtype=np.int64)
    for t in range(1, s):  # row t of L^-1 is -sum_{u<t} low[t,u] * (row u of L^-1)
        x[t, :t] = (-(((low[t, :t, None] * x[:t, :t]) % p).sum(axis=0))) % p
    return x


def rank_mod_p(m: np.ndarray, p: int, block: int = 64) -> int:
    """Rank over GF(p) by blocked right-looking Gaussian elimination (LAPACK getrf's shape).

    Each panel of `block` columns is eliminated row by row on a contiguous copy; the trailing
    matrix then takes one exact BLAS update A22 -= L21 (L11^-1 A12). Cost ~ K^3 / 3 per K x K.
    """
    a = np.array(m, dtype=np.int64) % p
    n_rows, n_cols = a.shape
    r = 0
    for j0 in range(0, n_cols, block):
        if r == n_rows:
            break
        j1 = min(j0 + block, n_cols)
        panel = a[r:, j0:j1].copy()  # (rows left, panel width)
        n = panel.shape[0]
        perm = np.arange(n)
        mults = np.zeros((n, j1 - j0), dtype=np.int64)
        s = 0  # pivots found in this panel
        for c in range(j1 - j0):
            if s == n:
                break
            nz = np.flatnonzero(panel[s:, c])
            if nz.size == 0:
                continue  # column dependent on earlier ones
            piv = s + int(nz[0])
            if piv != s:
                for arr in (panel, mults, perm):
                    arr[[s, piv]] = arr[[piv, s]]
            inv = pow(int(panel[s, c]), p - 2, p)  # Fermat inverse
            mult = (panel[s + 1 :, c] * inv) % p
            mults[s + 1 :, s] = mult
            rows = panel[s + 1 :, c:]
            rows -= mult[:, None] * panel[s, c:]  # each product < 2^62: stays > -2^63
            rows %= p
            s += 1
        if s and j1 < n_cols:
            rest = a[r:, j1:] if np.array_equal(perm, np.arange(n)) else a[r:, j1:][perm]
            u12 = _matmul_mod(_inv_unit_lower(mults[:s, :s], p), rest[:s], p)
            a[r + s :, j1:] = (rest[s:] - _matmul_mod(mults[s:, :s], u12, p)) % p
        r += s
    return r


# ------------------------------------------------------------------ the network -------------


@dataclass(frozen=True)
class Cell:
    """One simulated network shape and the partition (P, Q) of its token positions."""

    depth: int
    width: int
    heads: int = 1
    tokens: int = 2
    residual: bool = False
    partition: str = "halves"

    def __post_init__(self) -> None:
        for name, low in (("depth", 1), ("width", 1), ("heads", 1), ("tokens", 2)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ConfigError(f"{name} = {v!r} is invalid: must be an integer >= {low}.")
        if self.depth > MAX_DEPTH:
            raise ConfigError(
                f"depth = {self.depth} is invalid: degree 3^{self.depth} is beyond "
                f"what can be ranked; use depth <= {MAX_DEPTH}."
            )
        if self.width % self.heads:
            raise ConfigError(f"width = {self.width} is invalid: not divisible by heads = {self.heads}.")
        if self.partition not in PARTITIONS:
            raise ConfigError(
                f"partition = {self.partition!r} is invalid: expected one of {', '.join(PARTITIONS)}."
            )

    @property
    def degree(self) -> int:
        return 3**self.depth  # each layer is cubic in its input (docs/science.md §1)

    @property
    def sides(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(P, Q). The read-out position 0 is always in P."""
        t = range(self.tokens)
        if self.partition == "halves":
            return tuple(t[: self.tokens // 2]), tuple(t[self.tokens // 2 :])
        return tuple(t[0::2]), tuple(t[1::2])


@dataclass(frozen=True)
class Weights:
    """Per layer qkv (3d, d) and proj (d, d) as in nn.Linear.weight, plus a read-out r (d,)."""

    qkv: tuple[np.ndarray, ...]
    proj: tuple[np.ndarray, ...]
    readout: np.ndarray


def random_weights(cell: Cell, p: int, rng: np.random.Generator) -> Weights:
    d = cell.width
    draw = lambda *shape: rng.integers(0, p, size=shape, dtype=np.int64)  # noqa: E731
    return Weights(
        tuple(draw(3 * d, d) for _ in range(cell.depth)),
        tuple(draw(d, d) for _ in range(cell.depth)),
        draw(d),
    )


def weights_from_module(model, readout: np.ndarray) -> Weights:
    """Integer-valued weights of a Transformer built as the analysed network (attention="linear",
    layernorm=False, ffn_ratio=0, bias=False, attn.scale = 1), for exact re-evaluation."""
    cfg = model.cfg
    if cfg.attention != "linear" or cfg.layernorm or cfg.d_ff or cfg.bias:
        raise ValueError(
            "weights_from_module needs attention='linear', layernorm=False, ffn_ratio=0 and bias=False."
        )
    if any(b.attn.scale != 1.0 for b in model.blocks):
        raise ValueError("weights_from_module needs attn.scale = 1.0 in every block.")
    mats = [
        t.detach().cpu().double().numpy()
        for b in model.blocks
        for t in (b.attn.qkv.weight, b.attn.proj.weight)
    ]
    if any(not np.array_equal(m, np.round(m)) for m in mats):
        raise ValueError("weights_from_module needs integer-valued weights.")
    mats = [np.round(m).astype(np.int64) for m in mats]
    return Weights(tuple(mats[0::2]), tuple(mats[1::2]), np.asarray(readout, dtype=np.int64))


def _limbs(w: np.ndarray, p: int) -> np.ndarray:
    """[w_hi; w_lo] (2m, n): the 16-bit limbs of w mod p, stacked, for _mm."""
    w = w % p
    return np.concatenate([w >> _LIMB, w & 0xFFFF])


def _mm(w: np.ndarray, x: np.ndarray, p: int | None) -> np.ndarray:
    """w @ x with x (n, N) batch last: plain float64 when p is None, else exactly mod p with w
    given as _limbs(w). One int64 matmul (no BLAS, so no thread contention on tiny shapes):
    a limb product is < 2^16 * 2^31 = 2^47, so n < 2^16 summed terms stay < 2^63."""
    if p is None:
        return w @ x
    if x.shape[0] >= 1 << 16:
        raise ValueError(f"width {x.shape[0]} is too large for exact int64 evaluation.")
    m = w.shape[0] // 2
    both = w @ x  # (2m, N)
    out = both[:m] % p
    out <<= _LIMB  # < 2^47
    out += both[m:]  # < 2^47 + n 2^47 < 2^63
    out %= p
    return out


def _prepare(weights: Weights, p: int | None) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(q, o) if p is None else (_limbs(q, p), _limbs(o, p)) for q, o in zip(weights.qkv, weights.proj)]


def forward(weights: Weights, x: np.ndarray, heads: int, residual: bool, p: int | None = None) -> np.ndarray:
    """Final hidden vectors (T, d, N) of inputs x (T, d, N), batch last; mod p or in float64.

    Layer: x'_i = W_O concat_h( sum_j <q_i^h, k_j^h> v_j^h ) (+ x_i), every position attends
    to every position (bidirectional, as in Levine et al.'s BERT-like analysis).
    """
    return _forward(_prepare(weights, p), x if p is None else x % p, heads, residual, p)


def _forward(
    layers, x: np.ndarray, heads: int, residual: bool, p: int | None, qkv_first: np.ndarray | None = None
) -> np.ndarray:
    T, d, N = x.shape
    dh = d // heads
    for n_layer, (w_qkv, w_o) in enumerate(layers):
        if n_layer == 0 and qkv_first is not None:
            qkv = qkv_first  # layer 1 projects each token alone: computed once per side point
        else:
            qkv = _mm(w_qkv, x.transpose(1, 0, 2).reshape(d, T * N), p)
        qkv = qkv.reshape(3, heads, dh, T, N)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (H, dh, T, N)
        out = np.zeros((heads, dh, T, N), dtype=x.dtype)
        for i in range(T):
            for j in range(T):
                if p is None:
                    s = (q[:, :, i] * k[:, :, j]).sum(axis=1)  # (H, N)
                    out[:, :, i] += s[:, None] * v[:, :, j]
                else:  # products reduced one by one (bound in the header)
                    s = ((q[:, :, i] * k[:, :, j]) % p).sum(axis=1) % p
                    out[:, :, i] += (s[:, None] * v[:, :, j]) % p
        if p is not None:
            out %= p
        y = _mm(w_o, out.reshape(d, T * N), p).reshape(d, T, N).transpose(1, 0, 2)
        x = (y + x) % p if (residual and p is not None) else (y + x if residual else y)
    return x


def readout(weights: Weights, h: np.ndarray, p: int | None = None) -> np.ndarray:
    """y = <r, h_0>: the random linear read-out of position 0's final vector; (N,)."""
    if p is None:
        return weights.readout @ h[0]
    return ((weights.readout[:, None] % p * h[0]) % p).sum(axis=0) % p


def grid_matrix(
    weights: Weights, cell: Cell, a: np.ndarray, b: np.ndarray, p: int | None = None, chunk: int = CHUNK
) -> np.ndarray:
    """F[k, m] = y(a_k, b_m) for side inputs a (Ka, |P|, d) and b (Kb, |Q|, d)."""
    (side_p, side_q), d = cell.sides, cell.width
    ka, kb = len(a), len(b)
    layers = _prepare(weights, p)
    if p is not None:
        a, b = a % p, b % p
    # first-layer q, k, v of every side point: (3d, |side|, K)
    qkv_a, qkv_b = (
        _mm(layers[0][0], pts.transpose(2, 1, 0).reshape(d, -1), p).reshape(3 * d, pts.shape[1], len(pts))
        for pts in (a, b)
    )
    flat = np.empty(ka * kb, dtype=np.float64 if p is None else np.int64)
    for s in range(0, ka * kb, chunk):
        idx = np.arange(s, min(s + chunk, ka * kb))
        ia, ib = idx // kb, idx % kb
        x = np.empty((cell.tokens, d, len(idx)), dtype=flat.dtype)  # (T, d, N)
        x[list(side_p)] = a[ia].transpose(1, 2, 0)
        x[list(side_q)] = b[ib].transpose(1, 2, 0)
        qkv = np.empty((3 * d, cell.tokens, len(idx)), dtype=flat.dtype)
        qkv[:, list(side_p)] = qkv_a[:, :, ia]
        qkv[:, list(side_q)] = qkv_b[:, :, ib]
        h = _forward(layers, x, cell.heads, cell.residual, p, qkv.reshape(3 * d, -1))
        flat[idx] = readout(weights, h, p)
    return flat.reshape(ka, kb)


# ------------------------------------------------------------------ bounds and cost ---------


def degree_parity_bound(cell: Cell) -> int:
    """theory.parity_bound for this cell (read-out token 0 lies in P)."""
    side_p, side_q = cell.sides
    return parity_bound(cell.width, cell.depth, len(side_p), len(side_q), cell.residual)


def cell_monomial_bound(cell: Cell) -> int:
    """docs/science.md §5: C(|P| d + 3^L, 3^L); either side bounds the rank, we take the smaller."""
    n = min(map(len, cell.sides)) * cell.width
    return monomial_bound(n, cell.degree)


# Cost model, calibrated on a 2-core AMD EPYC shared with other jobs (load ~8; see
# docs/bench/seprank.md): seconds per evaluation_ops() in the grid and per K^3 in the rank.
# Pessimistic on purpose: an idle machine runs 2-4x faster.
EVAL_S_PER_OP = 2e-8
RANK_S_PER_K3 = 1.5e-9
GROWTH, K_START = 4, 16


def k_schedule(bound: int, k_start: int = K_START, max_k: int | None = None) -> list[int]:
    """Grid sizes tried, x4 each step, ending at bound + 1 (where rank < K is certain)."""
    top = bound + 1 if max_k is None else min(bound + 1, max_k)
    ks, k = [], min(k_start, top)
    while k < top:
        ks.append(k)
        k *= GROWTH
    return ks + [top]


def evaluation_ops(cell: Cell) -> int:
    """Operations per network evaluation: per layer and token 4 d^2 multiply-adds (W_QKV, W_O),
    2 T d for attention, and ~16 d passes of modular reduction over the projections' outputs."""
    T, d = cell.tokens, cell.width
    return cell.depth * (4 * T * d * d + 2 * T * T * d + 16 * T * d)


def estimate_cost(cell: Cell, ks: list[int]) -> tuple[float, int]:
    """(seconds, bytes) for a grid run over sizes ks plus the second-prime confirmation."""
    T, d, k = cell.tokens, cell.width, ks[-1]
    seconds = EVAL_S_PER_OP * evaluation_ops(cell) * 2 * k * k
    seconds += RANK_S_PER_K3 * (sum(x**3 for x in ks) + k**3)
    n_bytes = 6 * 8 * k * k + CHUNK * T * d * 8 * 16  # F, its copy, BLAS limbs; one eval batch
    return seconds, n_bytes


# ------------------------------------------------------------------ measurement -------------


@dataclass(frozen=True)
class SeprankResult:
    depth: int
    width: int
    heads: int
    tokens: int
    residual: bool
    partition: str
    rank: int
    rank_confirm: int  # the same measurement with the second prime
    primes_agree: bool
    saturated: bool  # rank < K at the last grid: the rank stopped rising
    k_final: int
    k_trail: str  # "K:rank;..." for every grid size tried
    bound: int  # monomial bound C(|P| d + 3^L, 3^L)
    parity_bound: int
    log_rank: float
    log_bound: float
    degree: int
    threshold_depth: float
    regime: str
    wall_s: float
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


def _side_points(cell: Cell, k: int, p: int, rng: np.random.Generator):
    """K random inputs for each side: (K, |P|, d) and (K, |Q|, d), uniform mod p."""
    return tuple(rng.integers(0, p, size=(k, len(side), cell.width), dtype=np.int64) for side in cell.sides)


def _grown_ranks(cell: Cell, ks: list[int], p: int, rng: np.random.Generator) -> list[int]:
    """Ranks of the nested grids F_K (K in ks) for one random network and point set over GF(p);
    stops early once rank < K. The grid is extended, never recomputed."""
    weights = random_weights(cell, p, rng)
    a, b = _side_points(cell, ks[-1], p, rng)
    f = np.zeros((0, 0), dtype=np.int64)
    ranks = []
    for k in ks:
        old = f.shape[0]
        grown = np.empty((k, k), dtype=np.int64)
        grown[:old, :old] = f
        grown[old:, :] = grid_matrix(weights, cell, a[old:k], b[:k], p)
        grown[:old, old:] = grid_matrix(weights, cell, a[:old], b[old:k], p)
        f = grown
        ranks.append(rank_mod_p(f, p))
        if ranks[-1] < k:
            break
    return ranks


def measure(
    cell: Cell,
    seed: int = 0,
    primes: tuple[int, int] = (P1, P2),
    max_k: int | None = None,
    k_start: int = K_START,
) -> SeprankResult:
    """Grow K until the grid rank stops rising, then confirm at that K with the second prime
    (fresh weights and points). A random evaluation can only lose rank, so the larger is kept."""
    t0 = time.perf_counter()
    parity = degree_parity_bound(cell)
    ks = k_schedule(parity, k_start, max_k)
    key = [
        seed,
        cell.depth,
        cell.width,
        cell.heads,
        cell.tokens,
        int(cell.residual),
        PARTITIONS.index(cell.partition),
    ]
    ranks = _grown_ranks(cell, ks, primes[0], np.random.default_rng(key + [0]))
    k_final = ks[len(ranks) - 1]
    confirm = _grown_ranks(cell, [k_final], primes[1], np.random.default_rng(key + [1]))[0]
    rank = max(ranks[-1], confirm)
    bound = cell_monomial_bound(cell)
    return SeprankResult(
        depth=cell.depth,
        width=cell.width,
        heads=cell.heads,
        tokens=cell.tokens,
        residual=cell.residual,
        partition=cell.partition,
        rank=rank,
        rank_confirm=confirm,
        primes_agree=confirm == ranks[-1],
        saturated=rank < k_final,
        k_final=k_final,
        k_trail=";".join(f"{k}:{r}" for k, r in zip(ks, ranks)),
        bound=bound,
        parity_bound=parity,
        log_rank=log(rank) if rank else float("-inf"),
        log_bound=log_monomial_bound(min(map(len, cell.sides)) * cell.width, cell.degree),
        degree=cell.degree,
        threshold_depth=threshold_depth(cell.width),
        regime=regime(cell.depth, cell.width),
        wall_s=time.perf_counter() - t0,
        seed=seed,
    )
