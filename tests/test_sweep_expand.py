"""Expanding large grids (sweeps/plans/expand.py): the where filter runs while expanding, a grid of more
trials than one sweep plans is refused at once (exit 2 naming the limit), and filtering before
building a trial keeps exactly the trials that filtering the built trials keeps."""

import pytest
from helpers import cli, spec_toml, write_spec

from sweeps.plans.expand import MAX_TRIALS
from sweeps.plans.spec import SpecError, parse_spec

# six axes of ten values: 10^6 candidate trials
AXES = {
    "depth": list(range(1, 11)),
    "width": list(range(4, 41, 4)),
    "seed": list(range(10)),
    "lr": [0.0001, 0.0002, 0.0003, 0.0005, 0.0007, 0.001, 0.0015, 0.002, 0.003, 0.005],
    "train.warmup_steps": list(range(10)),
    "train.weight_decay": [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09],
}


def big_grid(where: str = "", name: str = "big", axes: dict | None = None) -> str:
    """A sweep of a tiny model over AXES, each of `axes` replacing its axis (None: left out),
    filtered by the expression `where`."""
    grid = {k: v for k, v in {**AXES, **(axes or {})}.items() if v is not None}
    return spec_toml(
        name,
        **({"where": where} if where else {}),
        model={"seq_len": 8},
        data={"vocab_size": 8},
        train={"batch_size": 2, "steps": 10, "eval_every": None, "eval_batches": None, "warmup_steps": None},
        grid=grid,
    )


def plan(tmp_path, where):
    return cli("sweep", "plan", write_spec(tmp_path, big_grid(where), "big.toml"), cwd=tmp_path, timeout=600)


def test_a_million_candidates_are_refused_naming_the_limit(tmp_path):
    res = plan(tmp_path, "")
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1
    assert "it makes 1,000,000 trials (10 x 10 x 10 x 10 x 10 x 10)" in res.stderr
    assert f"more than the {MAX_TRIALS:,} one sweep plans" in res.stderr
    assert not (tmp_path / "results").exists()


def test_a_million_candidates_filtered_while_expanding_are_planned(tmp_path):
    # kept: depth <= 2 (2) x width <= 8 (2) x seed 0 (1) x lr <= 1e-3 (6) x 10 x wd 0 (1) = 240
    res = plan(
        tmp_path,
        "depth <= 2 and width <= 8 and seed == 0 and lr <= 0.001 and weight_decay == 0 and aspect >= 2",
    )
    assert res.returncode == 0, res.stderr
    assert "sweep 'big': 240 trials" in res.stdout
    # the filter that keeps too many is refused before a trial is built
    res = plan(tmp_path, "depth <= 5")
    assert res.returncode == 2 and "it makes 500,000 trials" in res.stderr and "after where" in res.stderr


@pytest.mark.parametrize(
    "where",
    [
        "width % 8 == 0 and aspect > 3",
        "model.depth * 2 < train.seed",
        "lr * 1000 >= warmup_steps / 3 and data.vocab_size == 8",
    ],
)
def test_filtering_before_building_keeps_the_same_trials(where):
    small = {
        "seed": [0, 3, 9],
        "lr": [0.001, 0.003],
        "train.warmup_steps": [0, 3, 9],
        "train.weight_decay": None,
    }
    fast = parse_spec(big_grid(where, axes=small))
    # n_params needs the built config, so this filter runs on built trials; it is always true
    slow = parse_spec(big_grid(f"n_params > 0 and ({where})", axes=small))
    assert [t.trial_id for t in fast.trials] == [t.trial_id for t in slow.trials]
    assert 0 < len(fast.trials) < 10 * 10 * 3 * 2 * 3


def test_where_errors_still_name_the_expression():
    with pytest.raises(SpecError, match="cannot be evaluated"):
        parse_spec(big_grid("width // (depth - depth) > 1"))
