"""The exact separation-rank simulator: GF(p) arithmetic against Python big integers, the
evaluator against the transformer's own linear-attention module, exact ranks against float64
SVD, hand-derived ranks, the bounds, two primes, monotonicity in K, and the real CLI."""

import csv
import subprocess
import sys

import numpy as np
import pytest
import torch

from depthwidth import seprank
from depthwidth.cli import main
from depthwidth.config import ConfigError, ModelConfig
from depthwidth.models.transformer import Transformer
from depthwidth.seprank import P1, P2, Cell, Weights

torch.set_num_threads(1)


def _rank_reference(m, p):
    """Textbook Gaussian elimination with Python integers, one entry at a time."""
    a = [[int(v) % p for v in row] for row in m]
    rank, n_cols = 0, len(a[0])
    for c in range(n_cols):
        piv = next((i for i in range(rank, len(a)) if a[i][c]), None)
        if piv is None:
            continue
        a[rank], a[piv] = a[piv], a[rank]
        inv = pow(a[rank][c], p - 2, p)
        for i in range(rank + 1, len(a)):
            f = a[i][c] * inv % p
            a[i] = [(x - f * y) % p for x, y in zip(a[i], a[rank])]
        rank += 1
    return rank


def test_primes_are_prime_and_fit():
    for p in (P1, P2):  # trial division up to sqrt(2^31) < 46341
        assert p < 2**31 and all(p % q for q in range(2, 46341))


def test_matmul_mod_matches_big_integers():
    rng = np.random.default_rng(0)
    for p in (P1, P2):
        a = rng.integers(p - 1000, p, size=(7, 150))  # near p: the largest products; k > 64 chunks
        b = rng.integers(p - 1000, p, size=(150, 5))
        exact = (a.astype(object) @ b.astype(object)) % p
        assert np.array_equal(seprank._matmul_mod(a, b, p), exact.astype(np.int64))


@pytest.mark.parametrize("shape, k", [((40, 40), 13), ((150, 90), 70), ((90, 150), 90), ((200, 200), 200)])
def test_rank_mod_p_planted(shape, k):
    rng = np.random.default_rng(k)
    g = rng.integers(0, P1, size=(shape[0], k))
    h = rng.integers(0, P1, size=(k, shape[1]))
    f = seprank._matmul_mod(g, h, P1)
    assert seprank.rank_mod_p(f, P1) == min(k, *shape)
    f[:, 3] = 0  # a zero column and a duplicated row cost one rank each when k is full
    f[7] = f[11]
    f[:2, :10] = 0  # leading zeros force row swaps inside the first panel
    expected = _rank_reference(f, P1) if f.size <= 20000 else None
    got = seprank.rank_mod_p(f, P1)
    assert got == seprank.rank_mod_p(f.T, P1)
    if expected is not None:
        assert got == expected


def test_rank_is_over_the_prime_field_not_the_integers():
    # det [[2, 1], [1, (p+1)/2]] = p: rank 2 over Q, rank 1 over GF(p)
    m = np.array([[2, 1], [1, (P1 + 1) // 2]])
    assert seprank.rank_mod_p(m, P1) == 1
    assert seprank.rank_mod_p(m, P2) == 2


def _small_int_weights(cell, rng, lo=-2, hi=3):
    d = cell.width
    return Weights(
        tuple(rng.integers(lo, hi, size=(3 * d, d)) for _ in range(cell.depth)),
        tuple(rng.integers(lo, hi, size=(d, d)) for _ in range(cell.depth)),
        rng.integers(lo, hi, size=d),
    )


def _exact(cell, seed):
    """Small-integer network and inputs, and its output in exact Python integers."""
    rng = np.random.default_rng(seed)
    w = _small_int_weights(cell, rng)
    x = rng.integers(-3, 4, size=(cell.tokens, cell.width, 5))  # (T, d, batch)
    w_obj = Weights(
        tuple(a.astype(object) for a in w.qkv),
        tuple(a.astype(object) for a in w.proj),
        w.readout.astype(object),
    )
    return w, x, seprank.forward(w_obj, x.astype(object), cell.heads, cell.residual)


TORCH_CELLS = [
    Cell(2, 4, heads=2, tokens=3),
    Cell(2, 3, tokens=2, residual=True),
    Cell(1, 6, heads=3, tokens=4),
]


@pytest.mark.parametrize(
    "cell", TORCH_CELLS + [Cell(3, 2), Cell(3, 3, heads=3, residual=True), Cell(2, 6, tokens=3)]
)
def test_mod_p_forward_equals_big_integers(cell):
    """Our GF(p) path against exact Python integers (object arrays, no overflow possible),
    including depth 3, whose values (~1e30) are far beyond int64 and float64, and a head of
    size 6, where unreduced sums of products would overflow int64."""
    w, x, exact = _exact(cell, cell.depth * 10 + cell.width)
    for p in (P1, P2):
        got = seprank.forward(w, x, cell.heads, cell.residual, p)
        assert np.array_equal(got, (exact % p).astype(np.int64))
        y = seprank.readout(w, got, p)
        assert np.array_equal(y, ((w.readout.astype(object) @ exact[0]) % p).astype(np.int64))
    if cell.depth == 3:
        assert np.abs(exact).max() > 2**63


@pytest.mark.parametrize("cell", TORCH_CELLS)
def test_forward_equals_the_transformer_linear_attention(cell):
    """The transformer's own linear attention (scale 1, bidirectional) in float64 gives the same
    integers, exact while every value stays below 2^53; and its weights, read back, too."""
    w, x, exact = _exact(cell, cell.depth * 10 + cell.width)
    assert np.abs(exact).max() < 2**53
    cfg = ModelConfig(
        depth=cell.depth,
        width=cell.width,
        heads=cell.heads,
        attention="linear",
        layernorm=False,
        ffn_ratio=0.0,
        residual=cell.residual,
        bias=False,
        vocab_size=2,
        seq_len=cell.tokens,
    )
    model = Transformer(cfg).double()
    with torch.no_grad():
        for block, q, o in zip(model.blocks, w.qkv, w.proj):
            block.attn.qkv.weight.copy_(torch.from_numpy(q))
            block.attn.proj.weight.copy_(torch.from_numpy(o))
            block.attn.scale = 1.0
        h = torch.from_numpy(x.transpose(2, 0, 1).astype(np.float64))  # (B, T, d)
        out = model.forward_hidden(h, causal=False).numpy().transpose(1, 2, 0)  # (T, d, B)
    assert np.array_equal(out, exact.astype(np.float64))
    back = seprank.weights_from_module(model, w.readout)
    assert np.array_equal(seprank.forward(back, x, cell.heads, cell.residual, P1), exact % P1)


def test_weights_from_module_refuses_other_networks():
    cfg = ModelConfig(
        depth=1,
        width=4,
        heads=1,
        attention="linear",
        layernorm=False,
        ffn_ratio=0.0,
        bias=False,
        vocab_size=2,
        seq_len=2,
    )
    model = Transformer(cfg)
    with pytest.raises(ValueError, match="scale = 1.0"):
        seprank.weights_from_module(model, np.ones(4))
    model.blocks[0].attn.scale = 1.0
    with pytest.raises(ValueError, match="integer-valued"):
        seprank.weights_from_module(model, np.ones(4))
    with pytest.raises(ValueError, match="attention='linear'"):
        seprank.weights_from_module(Transformer(ModelConfig(vocab_size=2)), np.ones(64))


def test_hand_derived_depth_one_ranks():
    """Depth 1, two tokens x1 (P) and x2 (Q), one head, read out at token 1 with r:
    y = sum_j (x1ᵀ A xj)(bᵀ xj) with A = W_Qᵀ W_K and b = W_Vᵀ W_Oᵀ r, so
    y = (x1ᵀ A x1)(bᵀ x1) · 1 + sum_i x1_i · [(A x2)_i (bᵀ x2)].
    Width 1: y = c (x1³ + x1 x2²): the functions x1³, x1 and 1, x2² are independent -> rank 2.
    Width 2: the first term is one P-function; the second gives x1_1, x1_2 against the two
    quadratics (bᵀx2)(A x2)_i, independent for invertible A and independent of 1 -> rank 3.
    In general 1 + d."""
    assert seprank.measure(Cell(1, 1)).rank == 2
    assert seprank.measure(Cell(1, 2)).rank == 3
    assert seprank.measure(Cell(1, 5)).rank == 6


def _float_weights(cell, rng):
    d = cell.width
    return Weights(
        tuple(rng.normal(size=(3 * d, d)) / np.sqrt(d) for _ in range(cell.depth)),
        tuple(rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(cell.depth)),
        rng.normal(size=d),
    )


@pytest.mark.parametrize(
    "cell",
    [
        Cell(1, 3),
        Cell(2, 1),
        Cell(2, 2),
        Cell(2, 3),
        Cell(2, 2, tokens=3),
        Cell(2, 2, residual=True),
        Cell(2, 4, heads=2),
    ],
)
def test_exact_rank_equals_float64_svd_rank(cell):
    """Degree 3^2 = 9 at most: float64 still separates the rank clearly (a gap of many decades)."""
    exact = seprank.measure(cell).rank
    rng = np.random.default_rng(1)
    side_p, side_q = cell.sides
    k = exact + 15
    f = seprank.grid_matrix(
        _float_weights(cell, rng),
        cell,
        rng.normal(size=(k, len(side_p), cell.width)),
        rng.normal(size=(k, len(side_q), cell.width)),
    )
    s = np.linalg.svd(f, compute_uv=False)
    assert np.linalg.matrix_rank(f) == exact
    assert s[exact - 1] / s[exact] > 1e4


CELLS = [
    Cell(1, 3),
    Cell(2, 2),
    Cell(3, 1),
    Cell(2, 2, residual=True),
    Cell(2, 4, heads=2),
    Cell(1, 2, tokens=4),
    Cell(1, 2, tokens=4, partition="interleaved"),
    Cell(2, 1, tokens=3),
    Cell(1, 2, tokens=3, residual=True),
    Cell(2, 2, tokens=3, partition="interleaved"),
]


@pytest.mark.parametrize("cell", CELLS)
def test_rank_within_bounds_and_primes_agree(cell):
    r = seprank.measure(cell)
    assert r.saturated and r.primes_agree and r.rank == r.rank_confirm
    assert 1 <= r.rank <= r.parity_bound <= r.bound
    assert r.bound == seprank.cell_monomial_bound(cell)
    assert r.k_trail.endswith(f"{r.k_final}:{r.rank}")


def test_rank_monotone_in_k_and_saturates():
    """Leading K x K blocks of one grid: rank(F_K) never decreases and equals min(K, R)
    (generic points), so it rises with K and then stops at the separation rank R = 15."""
    cell = Cell(2, 2)
    rng = np.random.default_rng(3)
    w = seprank.random_weights(cell, P1, rng)
    a, b = seprank._side_points(cell, 30, P1, rng)
    f = seprank.grid_matrix(w, cell, a, b, P1)
    ranks = [seprank.rank_mod_p(f[:k, :k], P1) for k in range(1, 31)]
    assert all(x <= y for x, y in zip(ranks, ranks[1:]))
    assert ranks == [min(k, 15) for k in range(1, 31)]
    # the incremental growth used by measure() gives the same ranks on the nested grids
    grown = seprank._grown_ranks(cell, [4, 8, 16, 30], P1, np.random.default_rng(3))
    assert grown == [4, 8, 15]  # stops once rank < K


def test_k_schedule_and_cost():
    assert seprank.k_schedule(2) == [3]
    assert seprank.k_schedule(495) == [16, 64, 256, 496]
    assert seprank.k_schedule(495, max_k=100) == [16, 64, 100]
    cell = Cell(2, 4)
    s1, b1 = seprank.estimate_cost(cell, [100])
    s2, b2 = seprank.estimate_cost(cell, [200])
    assert s2 > 4 * s1 and b2 > b1  # at least quadratic (grid) and up to cubic (rank) in K


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(depth=0, width=2), "depth = 0"),
        (dict(depth=9, width=1), "depth = 9"),
        (dict(depth=1, width=3, heads=2), "width = 3"),
        (dict(depth=1, width=2, tokens=1), "tokens = 1"),
        (dict(depth=1, width=2, partition="odd"), "partition = 'odd'"),
    ],
)
def test_cell_validation(kwargs, field):
    with pytest.raises(ConfigError, match="^" + field):
        Cell(**kwargs)


def _read(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_cli_seprank_writes_csv_and_plot(tmp_path, capsys):
    out = tmp_path / "sr"
    rc = main(
        ["seprank", "--depth", "1..4", "--width", "1,2", "--max-seconds", "1", "--plot", "--out", str(out)]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert f"wrote {out / 'seprank.csv'}" in text and "skip depth 4 width 2" in text
    rows = _read(out / "seprank.csv")
    assert list(rows[0])[:6] == ["depth", "width", "heads", "tokens", "rank", "bound"]
    got = {(int(r["depth"]), int(r["width"])): r for r in rows}
    # width 1: (3^L + 1) / 2; width 2 at depth 1: 1 + d (hand-derived above)
    assert [int(got[(L, 1)]["rank"]) for L in (1, 2, 3, 4)] == [2, 5, 14, 41]
    assert int(got[(1, 2)]["rank"]) == 3
    assert got[(4, 2)]["status"] == "refused" and got[(4, 2)]["rank"] == ""
    png = (out / "seprank.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000  # the figure, written whole
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary left
    assert int(got[(4, 2)]["bound"]) == 3403  # C(2 + 81, 81)
    assert (out / "seprank.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--depth", "0"], "--depth 0 is invalid"),
        (["--depth", "4..1"], "--depth '4..1' is invalid"),
        (["--width", "x"], "--width 'x' is invalid"),
        (["--tokens", "1"], "--tokens 1 is invalid"),
        (["--depth", "9"], "--depth 9 is invalid"),
        (["--max-seconds", "0"], "--max-seconds 0.0 is invalid"),
        (["--depth", "4", "--width", "8"], "no cell of --depth/--width can run"),
        (["--width", "3", "--heads", "2"], "no cell of --depth/--width can run"),
    ],
)
def test_cli_seprank_bad_input_writes_nothing(argv, message, tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["seprank", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("depthwidth: error: " + message) and err.count("\n") == 1
    assert not out.exists()


def test_cli_seprank_out_must_be_a_folder(tmp_path, capsys):
    target = tmp_path / "a_file"
    target.write_text("keep")
    assert main(["seprank", "--depth", "1", "--width", "1", "--out", str(target)]) == 2
    assert "--out" in capsys.readouterr().err and target.read_text() == "keep"


def test_console_entry_point(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "depthwidth.cli",
            "seprank",
            "--depth",
            "2",
            "--width",
            "2",
            "--residual",
            "--heads",
            "2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    row = _read(tmp_path / "seprank.csv")[0]
    assert (row["rank"], row["heads"], row["residual"], row["primes_agree"]) == ("15", "2", "True", "True")


def test_plot_seprank_returns_figure_with_ranks_bounds_and_thresholds():
    from matplotlib.figure import Figure

    from depthwidth.seprank_plot import plot_seprank

    rows = [{**seprank.measure(Cell(L, d)).to_dict(), "status": "ok"} for L in (1, 2) for d in (1, 2)]
    fig = plot_seprank(rows)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left, right = fig.axes
    assert left.get_yscale() == "log"
    measured = [ln for ln in left.lines if ln.get_marker() == "o"]
    assert [list(ln.get_ydata()) for ln in measured] == [[2, 5], [3, 15]]
    markers = [ln for ln in left.lines if ln.get_marker() == "^"]
    assert [ln.get_xdata()[0] for ln in markers] == pytest.approx([0.0, np.log(2) / np.log(3)])
    # right panel: ln rank(2) / ln rank(1) per width, e.g. ln 5 / ln 2 for width 1
    ratios = [ln.get_ydata()[0] for ln in right.lines if ln.get_marker() == "o"]
    assert ratios == pytest.approx([np.log(5) / np.log(2), np.log(15) / np.log(3)])
