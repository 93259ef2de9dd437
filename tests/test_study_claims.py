"""The study pages' claims on WSD's gain and on copying, recomputed from the committed tables
(docs/studies/data/) by the scripts the pages name: a number quoted on a page is the number its
script gives, and the planted cases show each script recovers what was planted."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "studies" / "data"
sys.path.insert(0, str(REPO / "bench"))

import copy_context  # noqa: E402
import wsd_gain  # noqa: E402


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    wsd = pd.read_csv(DATA / "threshold-cpu-wsd.csv")
    cosine = pd.read_csv(DATA / "threshold-cpu.csv")
    return wsd_gain.same_rate_pairs(wsd, cosine)


def test_the_wsd_gain_at_one_rate_is_what_the_pages_quote(pairs):
    assert len(pairs) == 288  # every cosine final has its WSD run at the same rate
    by = wsd_gain.gain_by(pairs).round(3)
    row = lambda what, value, steps=None: by[
        (by["by"] == what)
        & (by["value"] == value)
        & (by["steps"].isna() if steps is None else by["steps"] == steps)
    ].iloc[0]
    assert tuple(row("all", "")[["median", "lo", "hi"]]) == (0.073, 0.068, 0.077)
    at900 = [row("width", w, 900)["median"] for w in (16, 32, 64, 128)]
    assert at900 == [0.052, 0.089, 0.095, 0.105]
    assert row("depth", 1)["median"] == 0.076
    ranks = wsd_gain.rank_tests(pairs).set_index(["steps", "against"])
    assert ranks.loc[(900, "width"), "rho"] == pytest.approx(0.684, abs=0.001)
    assert ranks.loc[(900, "width"), "p"] < 1e-3
    assert ranks.loc[(100, "width"), "p"] > 0.1 and ranks.loc[(300, "width"), "p"] > 0.1
    assert (ranks.xs("depth", level="against")["p"] > 0.5).all()


def test_a_planted_width_dependent_gain_is_recovered():
    wsd, cosine = wsd_gain.planted(0.02)
    by = wsd_gain.gain_by(wsd_gain.same_rate_pairs(wsd, cosine))
    w = by[(by["by"] == "width") & by["steps"].isna()].set_index("value")["median"]
    assert w.to_numpy() == pytest.approx([0.05, 0.07, 0.09, 0.11], abs=0.004)


def test_the_longer_context_run_shows_no_copying_and_a_loss_step():
    runs = pd.read_csv(DATA / "copying-context.csv")
    curves = pd.read_csv(DATA / "copying-context-curves.csv")
    per, step = copy_context.summary(runs, curves)
    assert len(runs) == 4 and set(runs["depth"]) == {1, 2} and (runs["tokens"] == 24_576_000).all()
    # neither depth copies at any evaluation, and the quoted means are these
    assert step[["gain_depth_1", "gain_depth_2"]].max().max() == pytest.approx(-0.034, abs=0.001)
    assert per.set_index("depth")["gain"].round(3).to_dict() == {1: -0.337, 2: -0.373}
    last = step[step["step"] == step["step"].max()].set_index("seed")["step_1_to_2"].round(3)
    assert last.to_dict() == {0: 0.091, 1: 0.064}


def test_a_planted_copier_is_found():
    per, _ = copy_context.summary(*copy_context.planted())
    assert per.set_index("depth")["gain"].round(3).to_dict() == {1: 0.005, 2: 1.005}
