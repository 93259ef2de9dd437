"""The depth-width threshold of Levine et al. 2020 as numbers: L_th, regimes, optimal shapes.

docs/science.md §1: L_th = log_3(d_x); N = 12·L·d_x² (Kaplan et al. 2020, docs/science.md §2); Levine et
al.'s empirical optimum d*(L) = exp(5.039 + 0.0555·L); and the monomial count that bounds the
separation rank (docs/science.md §5). No torch: numpy only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import comb, exp, isfinite, lgamma, log

import numpy as np

from depthwidth.accounting import kaplan_n_params as _kaplan_n
from depthwidth.accounting import width_for_params
from depthwidth.published import LEVINE_FIT_DEPTHS, LEVINE_INTERCEPT, LEVINE_SLOPE, THEORY_BASE


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not isfinite(value) or value <= 0:
        raise ValueError(f"{name} = {value!r} is invalid: must be a positive finite number.")
    return float(value)


def threshold_depth(width: float, base: float = THEORY_BASE) -> float:
    """L_th = log_base(d_x): the depth where 3^L reaches the width (§1)."""
    return log(_positive("width", width)) / log(_positive("base", base))


def regime(depth: float, width: float, base: float = THEORY_BASE, rel_tol: float = 1e-9) -> str:
    """'depth-efficient' below L_th (separation rank double-exponential in depth, polynomial in
    width), 'width-limited' above it (exponential in both: depth no longer pays extra),
    'threshold' at it."""
    l_th = threshold_depth(width, base)
    if abs(_positive("depth", depth) - l_th) <= rel_tol * max(1.0, l_th):
        return "threshold"
    return "depth-efficient" if depth < l_th else "width-limited"


def _exp_or_inf(log_value: float) -> float:
    """e^x as a float, or inf where it exceeds the float range (about 1.8e308): the caller keeps
    the logarithm, which stays exact."""
    return exp(log_value) if log_value < 709.78 else float("inf")


def log_crossover_width(depth: float, base: float = THEORY_BASE) -> float:
    """ln of the crossover width: L·ln(base), finite at every depth."""
    return _positive("depth", depth) * log(_positive("base", base))


def crossover_width(depth: float, base: float = THEORY_BASE) -> float:
    """The width at which `depth` sits exactly at the threshold: d = base^L. Computed as
    e^(L·ln base), so it never raises: past the float range (L >= 647 at base 3) it is inf, and
    log_crossover_width gives the exact value."""
    return _exp_or_inf(log_crossover_width(depth, base))


def kaplan_n_params(depth: float, width: float) -> float:
    """Kaplan's non-embedding N = 12·L·d² (d_attn = d, d_ff = 4d; docs/science.md §2)."""
    return float(_kaplan_n(_positive("depth", depth), _positive("width", width)))


def levine_optimal_width(depth: float) -> float:
    """Levine et al.'s fitted optimal width for depth L: exp(5.039 + 0.0555·L) (inf past the
    float range, L > 12700)."""
    return _exp_or_inf(LEVINE_INTERCEPT + LEVINE_SLOPE * _positive("depth", depth))


def levine_depth_for_width(width: float) -> float:
    """The depth whose fitted optimal width is `width` (inverse of levine_optimal_width);
    negative for widths below exp(5.039) ≈ 154, where the fit says nothing."""
    return (log(_positive("width", width)) - LEVINE_INTERCEPT) / LEVINE_SLOPE


@dataclass(frozen=True)
class Shape:
    """A (depth, width) pair and its N = 12·L·d²; depth may be fractional."""

    depth: float
    width: float
    n_params: float

    def to_dict(self) -> dict:
        return asdict(self)


def _solve_increasing(g, n_params: float) -> float:
    """Root L > 0 of g(L) = ln N for g increasing from -inf (bisection on a doubling bracket)."""
    target = log(n_params)
    lo, hi = 1e-12, 1.0
    while g(hi) < target:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if g(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


def theory_optimal_shape(n_params: float, base: float = THEORY_BASE) -> Shape:
    """The shape on the threshold line with budget N: L = log_base(d) and N = 12·L·d²,
    i.e. ln N = ln 12 + ln L + 2 L ln base (increasing in L, one root)."""
    n = _positive("n_params", n_params)
    lb = log(_positive("base", base))
    depth = _solve_increasing(lambda L: log(12.0) + log(L) + 2.0 * L * lb, n)
    return Shape(depth, base**depth, n)


def levine_optimal_shape(n_params: float) -> Shape:
    """Levine et al.'s empirical optimum for budget N: N = 12·L·d*(L)²."""
    n = _positive("n_params", n_params)
    depth = _solve_increasing(lambda L: log(12.0) + log(L) + 2.0 * (LEVINE_INTERCEPT + LEVINE_SLOPE * L), n)
    return Shape(depth, levine_optimal_width(depth), n)


def width_for_budget(depth: float, n_params: float) -> float:
    """The width that spends budget N at a given depth: d = sqrt(N / (12 L))."""
    return float(width_for_params(_positive("depth", depth), _positive("n_params", n_params)))


def monomial_bound(n_vars: int, degree: int) -> int:
    """Monomials of degree <= D in n variables, C(n + D, D): a bound on the separation rank of a
    degree-D polynomial when n variables sit on one side of the partition (§5)."""
    return comb(n_vars + degree, degree)


def log_monomial_bound(n_vars: int, degree: int) -> float:
    """ln C(n + D, D) without forming the integer."""
    return lgamma(n_vars + degree + 1) - lgamma(n_vars + 1) - lgamma(degree + 1)


def depth_table(depths, base: float = THEORY_BASE) -> list[dict]:
    """Per depth: the predicted crossover width base^L and N there, beside Levine et al.'s
    empirical optimal width for that depth and its N. Each is also given as log10, which stays
    finite where the number itself passes the float range (inf then; N = 12·L·(3^L)² does at
    L >= 323)."""
    rows = []
    for L in depths:
        ln_th = log_crossover_width(L, base)
        ln_lev = LEVINE_INTERCEPT + LEVINE_SLOPE * _positive("depth", L)
        ln_n_th, ln_n_lev = (log(12.0 * L) + 2.0 * x for x in (ln_th, ln_lev))
        rows.append(
            dict(
                depth=L,
                crossover_width=_exp_or_inf(ln_th),
                n_params_at_crossover=_exp_or_inf(ln_n_th),
                levine_width=_exp_or_inf(ln_lev),
                levine_n_params=_exp_or_inf(ln_n_lev),
                log10_crossover_width=ln_th / log(10),
                log10_n_params_at_crossover=ln_n_th / log(10),
                log10_levine_width=ln_lev / log(10),
                log10_levine_n_params=ln_n_lev / log(10),
                levine_extrapolated=not LEVINE_FIT_DEPTHS[0] <= L <= LEVINE_FIT_DEPTHS[1],
            )
        )
    return rows


def width_table(widths, depth: float | None = None, base: float = THEORY_BASE) -> list[dict]:
    """Per width: L_th, N of the threshold shape, Levine et al.'s depth for that width, and
    the regime of `depth` (when given)."""
    rows = []
    for d in widths:
        l_th, l_lev = threshold_depth(d, base), levine_depth_for_width(d)
        row = dict(
            width=d,
            threshold_depth=l_th,
            n_params_at_threshold=kaplan_n_params(l_th, d) if l_th > 0 else 0.0,
            levine_depth=l_lev,
            levine_extrapolated=not LEVINE_FIT_DEPTHS[0] <= l_lev <= LEVINE_FIT_DEPTHS[1],
        )
        if depth is not None:
            row["regime"] = regime(depth, d, base)
        rows.append(row)
    return rows


def _side_counts(width: int, n_even: int, n_odd: int, degree: int) -> list[int]:
    """c[a] = monomials of total degree a <= D in one side's variables whose degree in each
    token has a fixed parity (n_odd tokens odd, n_even tokens even).

    One token's monomials by degree have generating function A = (1 - z)^-d; its even part is
    (A + B)/2 and its odd part (A - B)/2 with B = (1 + z)^-d. The side's series is the product
    over its tokens, expanded binomially into terms A^x B^y, each built exactly in O(d n D)
    by repeated prefix sums ((1 - z)^-1) and alternating prefix sums ((1 + z)^-1).
    """
    n = n_even + n_odd
    sign = np.array([1, -1] * (degree // 2 + 1), dtype=object)[: degree + 1]
    total = np.zeros(degree + 1, dtype=object)
    for i in range(n_even + 1):
        for j in range(n_odd + 1):
            series = np.zeros(degree + 1, dtype=object)
            series[0] = comb(n_even, i) * comb(n_odd, j) * (-1) ** j
            for _ in range(width * (n - i - j)):
                series = np.cumsum(series)  # times (1 - z)^-1
            for _ in range(width * (i + j)):
                series = sign * np.cumsum(sign * series)  # times (1 + z)^-1
            total += series
    return [int(c) // 2**n for c in total]  # exact: the 2^n of the parts' halves


def parity_bound(width: int, depth: int, n_p: int, n_q: int, residual: bool = False) -> int:
    """Separation-rank bound for L linear-attention layers read out at a token of side P (ours).

    Flipping the sign of token j flips only hidden state j in every layer (each term of x'_i
    is odd in x_i and even in x_j, j != i), so the output is odd in the read-out token and even
    in every other token. Without residual it is homogeneous of degree D = 3^L, so the
    coefficient matrix is block diagonal by P-degree a: rank <= sum_a min(cP[a], cQ[D - a]).
    With residual only a + b <= D is known: splitting the rows at P-degree t bounds the rank by
    sum_{a<=t} cP[a] + sum_{b<D-t} cQ[b], minimised over t.
    """
    D = 3**depth
    cp = _side_counts(width, n_p - 1, 1, D)
    cq = _side_counts(width, n_q, 0, D)
    if not residual:
        return sum(min(cp[a], cq[D - a]) for a in range(D + 1))
    pre_p, pre_q = [0], [0]  # pre[t + 1] = sum of counts of degree <= t
    for c in cp:
        pre_p.append(pre_p[-1] + c)
    for c in cq:
        pre_q.append(pre_q[-1] + c)
    return min(pre_p[t + 1] + pre_q[D - t] for t in range(-1, D + 1))
