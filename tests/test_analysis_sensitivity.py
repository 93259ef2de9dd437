"""The sensitivity check (analysis.laws.sensitivity): the loss laws refitted with each depth,
width, token budget and (with 3 seeds or more) seed left out. A planted law that no slice moves
says so; a planted depth-1 step, on losses that otherwise depend on N alone, is named as the
slice the preference for shape rests on; the report's table and sentence show both."""

import numpy as np
import pandas as pd

from analysis.fitting import synthetic
from analysis.fitting._blas import single_threaded
from analysis.laws import regimes, sensitivity
from analysis.reporting.markdown_sections import sensitivity_md, sensitivity_sentence

P3 = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)
KAPLAN = dict(E=1.2, A_N=30.0, alpha_N=0.3)


@single_threaded
def sensitivity_of(runs: pd.DataFrame) -> dict:
    """The sensitivity check of `runs` against the regime fits of all of them."""
    runs = runs.assign(run_id=runs["trial_id"])
    fits = regimes.fit_regimes(runs, n_boot=0)["fits"]
    return sensitivity.sensitivity(runs, runs, fits)


def test_a_verdict_no_slice_moves_says_so():
    # at 3% noise b = 3 sits well inside every profile interval (at 0.5% the intervals are so
    # narrow that b = 3 crosses their edge with one slice or another: a knife-edge the check names)
    s = sensitivity_of(
        synthetic.make_runs("two_regime", range(1, 7), [16, 32, 64, 128, 256], P3, noise=0.03, seed=1)
    )
    assert s["status"] == "ok" and s["changed"] == []
    assert s["left_out"] == ["depth", "width"]  # one seed: none is left out
    assert len(s["refits"]) == 6 + 5
    assert s["headline"] == "no single depth or width left out changes the verdict (11 refits)"
    for row in [s["reference"]] + s["refits"]:
        assert row["preferred"] == "two_regime" and row["status"] == "claimed"
        lo, hi = row["threshold_law"]["interval"]  # profile intervals: within 20% at 3% noise
        assert 2.5 < lo < row["threshold_law"]["b"] < hi < 3.6 and lo < 3 < hi
    md = "\n".join(sensitivity_md({"sensitivity": s}))
    assert "No single depth or width left out changes the verdict (11 refits)." in md
    assert md.count("| two_regime (") == 12 and "| depth 1 | 25 |" in md


def test_the_one_slice_a_verdict_rests_on_is_named():
    runs = synthetic.make_runs(
        "kaplan", [1, 2, 3, 4, 6], [16, 32, 64, 128], KAPLAN, seeds=(0, 1), noise=0.01, seed=2
    )
    runs.loc[runs["depth"] == 1, "loss"] *= 1.08  # a one-layer step on losses that follow N alone
    s = sensitivity_of(runs)
    assert s["reference"]["preferred"] != "kaplan"  # shape matters, on all runs
    # depth 1 holds the preference; depth 2 moves b = 3 into the interval (a knife-edge of its own)
    assert s["changed"] == ["depth 1", "depth 2"]
    row = next(r for r in s["refits"] if r["left_out"] == "depth 1")
    assert row["preferred"] == "kaplan" and row["changes"][0] == "preferred" and row["n_runs"] == 32
    assert s["headline"].startswith(
        "the preference for shape rests on depth 1: without it, N alone is preferred; "
    )
    assert sensitivity_sentence({"sensitivity": s}).startswith(
        "Left out one at a time, the preference for shape rests on depth 1: without it, N alone is preferred; "
    )


def test_slices_by_hand():
    runs = pd.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(12)],
            "depth": [1, 2] * 6,
            "width": [16] * 6 + [32] * 6,
            "seed": [0, 1, 2] * 4,
            "tokens": [102400.0] * 12,
        }
    )
    cuts = sensitivity.slices(runs, runs)
    assert [c["label"] for c in cuts] == [
        "depth 1",
        "depth 2",
        "width 16",
        "width 32",
        "seed 0",
        "seed 1",
        "seed 2",
    ]
    assert all(c["keep"].sum() in (6, 8) for c in cuts)  # one budget: nothing to leave out
    two_seeds = sensitivity.slices(runs.assign(seed=[0, 1] * 6, tokens=[102400.0, 921600.0] * 6), runs)
    assert [c["label"] for c in two_seeds][-2:] == ["token budget 1.02e5", "token budget 9.22e5"]
    assert not any(c["kind"] == "seed" for c in two_seeds)
    assert np.array_equal(two_seeds[0]["keep"], runs["depth"].to_numpy() != 1)


def test_a_verdict_on_b_changes_only_when_a_claim_is_gained_or_lost():
    """'not claimed' and 'not identified' both claim nothing: a refit moving between them is no
    change of verdict; one that claims b where all runs do not (or the reverse) is."""
    from analysis.laws.sensitivity import _changes

    ref = {"preferred": "width_depth", "status": "not_identified", "bic_margin": 10.0, "threshold_law": None}
    same = {"bic_margin": 10.0, "threshold_law": None}
    assert _changes(ref, {"preferred": "width_depth", "status": "not_claimed", **same}) == []
    assert _changes(ref, {"preferred": "width_depth", "status": "claimed", **same}) == ["status"]
    assert _changes(
        {**ref, "status": "claimed"}, {"preferred": "kaplan", "status": "not_claimed", **same}
    ) == [
        "preferred",
        "status",
    ]
