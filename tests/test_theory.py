"""depthwidth.theory and `depthwidth theory` against hand-computed values: L_th = log_3(d),
Levine et al.'s published checks (d*(70) ≈ 7510, ~80 layers at 175e9), planted budgets, and
the monomial / degree-parity counts against brute-force enumeration."""

import itertools
import json
from math import comb, exp, log

import pytest
from helpers import cli

from depthwidth import theory
from depthwidth.cli import main


def test_threshold_depth_hand_values():
    # 3^6 = 729, 3^1 = 3, 3^0 = 1; 768 = 3^6.047 (ln 768 / ln 3 = 6.6438 / 1.0986)
    assert theory.threshold_depth(729) == pytest.approx(6.0, abs=1e-12)
    assert theory.threshold_depth(3) == pytest.approx(1.0, abs=1e-12)
    assert theory.threshold_depth(1) == 0.0
    assert theory.threshold_depth(768) == pytest.approx(6.0474, abs=1e-4)
    assert theory.threshold_depth(64, base=2) == pytest.approx(6.0, abs=1e-12)


def test_regimes_around_729():
    assert theory.regime(6, 729) == "threshold"
    assert theory.regime(5, 729) == "depth-efficient"
    assert theory.regime(7, 729) == "width-limited"
    assert theory.regime(12, 768) == "width-limited"
    assert theory.regime(2, 10) == "depth-efficient"  # 3^2 = 9 < 10


def test_crossover_width_and_kaplan_n():
    assert theory.crossover_width(6) == pytest.approx(729.0)
    assert theory.crossover_width(0.5) == pytest.approx(3**0.5)
    # docs/science.md §1: the 6-layer threshold sits at N = 12 * 6 * 729^2 ≈ 3.8e7
    assert theory.kaplan_n_params(6, 729) == 12 * 6 * 729**2 == 38_263_752


def test_levine_published_checks():
    # d*(70) = exp(5.039 + 3.885) = exp(8.924) = e^9 / e^0.076 = 8103.08 / 1.07896 ≈ 7510
    assert theory.levine_optimal_width(70) == pytest.approx(7510, rel=1e-3)
    # 175e9 parameters: N(80) = 960 e^18.958 ≈ 1.64e11 < 1.75e11 < N(81) ≈ 1.86e11
    shape = theory.levine_optimal_shape(175e9)
    assert 80 < shape.depth < 81
    assert 12 * shape.depth * shape.width**2 == pytest.approx(175e9, rel=1e-9)
    # 1T parameters: width about 30K
    assert theory.levine_optimal_shape(1e12).width == pytest.approx(30_000, rel=0.1)
    assert theory.levine_depth_for_width(theory.levine_optimal_width(33.0)) == pytest.approx(33.0)


def test_theory_optimal_shape_recovers_planted_depth():
    for depth in (1.0, 2.5, 6.0, 9.0):
        n = 12 * depth * 9**depth  # width 3^L on the threshold line
        shape = theory.theory_optimal_shape(n)
        assert shape.depth == pytest.approx(depth, rel=1e-9)
        assert shape.width == pytest.approx(3**depth, rel=1e-8)
    assert theory.width_for_budget(6, 38_263_752) == pytest.approx(729.0)


def test_tables():
    rows = theory.depth_table([1, 6, 70])
    assert [r["crossover_width"] for r in rows] == pytest.approx([3, 729, 3.0**70])
    assert [r["levine_extrapolated"] for r in rows] == [True, False, True]
    w = theory.width_table([27, 729], depth=4)
    assert [r["threshold_depth"] for r in w] == pytest.approx([3.0, 6.0])
    assert [r["regime"] for r in w] == ["width-limited", "depth-efficient"]
    assert w[0]["n_params_at_threshold"] == pytest.approx(12 * 3 * 27**2)


@pytest.mark.parametrize(
    "call",
    [
        lambda: theory.threshold_depth(0),
        lambda: theory.regime(-1, 8),
        lambda: theory.theory_optimal_shape(float("nan")),
        lambda: theory.levine_optimal_shape(-5),
    ],
)
def test_bad_values_raise_one_sentence(call):
    with pytest.raises(ValueError, match=r"is invalid: must be a positive finite number\.$"):
        call()


def test_monomial_bound():
    assert theory.monomial_bound(2, 3) == 10  # 1, x, y, x², xy, y², x³, x²y, xy², y³
    assert theory.monomial_bound(1, 81) == 82
    for n, deg in [(2, 3), (8, 81), (16, 27)]:
        assert theory.log_monomial_bound(n, deg) == pytest.approx(log(comb(n + deg, deg)), rel=1e-12)


def _brute_parity_bound(width, depth, n_p, n_q, residual):
    """Enumerate per-token degrees; the read-out token (first of P) odd, all others even."""
    D = 3**depth

    def counts(n_tokens, first_odd):
        c = [0] * (D + 1)
        for degs in itertools.product(range(D + 1), repeat=n_tokens):
            if sum(degs) > D or any((g % 2 == 1) != (first_odd and i == 0) for i, g in enumerate(degs)):
                continue
            m = 1
            for g in degs:
                m *= comb(width + g - 1, g)
            c[sum(degs)] += m
        return c

    cp, cq = counts(n_p, True), counts(n_q, False)
    if not residual:
        return sum(min(cp[a], cq[D - a]) for a in range(D + 1))
    return min(sum(cp[: t + 1]) + sum(cq[: D - t]) for t in range(-1, D + 1))


@pytest.mark.parametrize(
    "args",
    [
        (1, 1, 1, 1, False),
        (2, 2, 1, 1, False),
        (3, 2, 1, 2, False),
        (2, 2, 2, 2, True),
        (1, 3, 2, 1, False),
        (2, 1, 3, 2, True),
    ],
)
def test_parity_bound_matches_enumeration(args):
    assert theory.parity_bound(*args) == _brute_parity_bound(*args)


def test_parity_bound_hand_values():
    # depth 1, one token per side: y = x1-odd, x2-even of degree 3 -> blocks (3,0) and (1,2):
    # min(C(d+2,3), 1) + min(d, C(d+1,2)) = 1 + d
    for d in range(1, 9):
        assert theory.parity_bound(d, 1, 1, 1) == d + 1
    # width 1: one monomial per even Q-degree b < D, so (3^L + 1) / 2
    assert [theory.parity_bound(1, L, 1, 1) for L in (1, 2, 3, 4)] == [2, 5, 14, 41]
    assert theory.parity_bound(2, 2, 1, 1) <= theory.monomial_bound(2, 9)


def test_cli_theory_text(capsys):
    assert main(["theory", "--width", "729", "--depth", "6", "--params", "38263752"]) == 0
    out = capsys.readouterr().out
    assert "L_th = log_3(729) = 6.000" in out
    assert "depth 6: threshold" in out
    assert "theory optimum (L = log_3 d):            depth 6.00, width 729" in out
    assert "crossover width per depth" in out and "per width" in out


def test_cli_theory_json(capsys):
    assert main(["theory", "--params", "175e9", "--widths", "81,729", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert 80 < doc["budget"]["levine"]["depth"] < 81
    assert [r["threshold_depth"] for r in doc["width_table"]] == pytest.approx([4.0, 6.0])
    assert doc["depth_table"][0]["levine_width"] == pytest.approx(exp(5.039 + 0.0555))


@pytest.mark.parametrize(
    "argv, field",
    [
        (["theory"], "--width and --params"),
        (["theory", "--width", "0"], "--width 0"),
        (["theory", "--params", "-1"], "--params -1.0"),
        (["theory", "--width", "8", "--widths", "8..2"], "--widths"),
    ],
)
def test_cli_theory_bad_input(argv, field, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("depthwidth: error: " + field) and err.count("\n") == 1


def test_crossover_width_past_the_float_range_is_inf_with_an_exact_log():
    # 3^646 ~ 1.6e308 fits a float, 3^647 does not: inf then, and the logarithm stays exact.
    assert theory.crossover_width(646) == pytest.approx(3.0**646, rel=1e-9)
    assert theory.crossover_width(647) == float("inf")
    assert theory.crossover_width(1000) == float("inf")
    assert theory.log_crossover_width(1000) == pytest.approx(1000 * log(3))
    row = theory.depth_table([1000])[0]
    assert row["crossover_width"] == float("inf")
    assert row["log10_crossover_width"] == pytest.approx(477.1212547, abs=1e-6)
    # N = 12 * 1000 * 3^2000: log10 = log10(12000) + 2000 log10(3)
    assert row["log10_n_params_at_crossover"] == pytest.approx(log(12000, 10) + 2000 * log(3, 10))


@pytest.mark.parametrize(
    "argv, words",
    [
        (["theory", "--width", "64", "--depths", "1..1000000000"], ["--depths 1000000000", "10,000"]),
        (["theory", "--width", "64", "--widths", "1..100000000"], ["--widths '1..100000000'", "10,000"]),
        (["theory", "--width", "64", "--depth", "20000"], ["--depth 20000", "10,000"]),
        (["seprank", "--width", "1..100000000"], ["--width 100000000", "1,024"]),
    ],
)
def test_cli_unbounded_ranges_are_refused_before_any_work(argv, words, tmp_path):
    p = cli(*argv, "--out", str(tmp_path / "o")) if argv[0] == "seprank" else cli(*argv)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("depthwidth: error: ") and p.stderr.count("\n") == 1
    assert all(w in p.stderr for w in words), p.stderr
    assert not (tmp_path / "o").exists()


def test_cli_theory_deep_depths_print_without_overflow():
    p = cli("theory", "--width", "64", "--depth", "1000", "--depths", "6,647,1000")
    assert p.returncode == 0, p.stderr
    assert "3^1000 = 1.322e+477" in p.stdout
    p = cli("theory", "--width", "64", "--depth", "1000", "--depths", "647,1000", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # strict JSON: no Infinity
    assert doc["width"]["crossover_width"] is None
    assert doc["width"]["log10_crossover_width"] == pytest.approx(477.1212547, abs=1e-6)
    assert [r["crossover_width"] for r in doc["depth_table"]] == [None, None]
