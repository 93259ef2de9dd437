"""The `halving` column and the copying probe's columns pass the one schema (runstore/schema.py):
any cell either is refused with one sentence naming the file, the column, the row and the value
(exit code 2, nothing written) or is one the readers and the copying figure take. A generic CSV
(`loss`, with or without `tokens`) with a `copy_gain` column gets its copying section and figure.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_bad_numbers import analyze, one_sentence_error

from analysis.readers.halving import finals
from analysis.reporting import copying
from runstore.schema import TableError, check_table


def grid(**cols) -> pd.DataFrame:
    """24 runs of a generic table: 4 depths x 3 widths x 2 seeds, the loss following N alone."""
    rng = np.random.default_rng(0)
    rows = []
    for i, (d, w, s) in enumerate(itertools.product([1, 2, 3, 4], [16, 32, 64], [0, 1])):
        n = 12 * d * w * w
        loss = 3 + 50 / np.sqrt(n) + 0.01 * rng.standard_normal()
        rows.append(dict(trial_id=f"t{i}", depth=d, width=w, seed=s, n_params=n, loss=loss))
    df = pd.DataFrame(rows)
    for k, v in cols.items():
        df[k] = v
    return df


RECORD = {"axis": "lr", "eta": 3, "rungs": [10, 30], "losses": [2.5, 2.4], "group": "g0"}

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 50) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=5),
    max_leaves=12,
)
# Records near the real one: each key kept, dropped or given any JSON value.
NEAR = st.fixed_dictionaries(
    {},
    optional={k: st.one_of(st.just(v), JSON) for k, v in RECORD.items()},
)


@settings(max_examples=300, deadline=None)
@given(cell=st.one_of(st.text(max_size=40), JSON.map(json.dumps), NEAR.map(json.dumps)))
def test_a_halving_cell_is_refused_or_read(cell):
    """Whatever the cell, the schema refuses it with a sentence naming the column, or the
    halving reader takes the table that holds it without an error."""
    df = grid(halving=cell, status="ok")
    try:
        checked = check_table(df, "t.csv", csv=True)
    except TableError as exc:
        assert str(exc).startswith("t.csv: column 'halving' row 1 (line 2 of the file) is ")
        return
    keep, _ = finals(checked)
    assert keep.dtype == bool and len(keep) == len(df)


@settings(max_examples=200, deadline=None)
@given(
    col=st.sampled_from(["copy_gain", "copy_loss", "copy_control_loss", "copy_gain_vs_control"]),
    value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6)),
)
def test_a_probe_cell_is_refused_unless_a_finite_loss_sized_number(col, value):
    df = grid(copy_gain=0.1, copy_loss=2.0, copy_control_loss=2.1, copy_gain_vs_control=0.1)
    df[col] = df[col].astype(object)
    df.loc[3, col] = value
    low = 0.0 if col in ("copy_loss", "copy_control_loss") else -1e6
    v = float(pd.to_numeric(pd.Series([value], dtype=object), errors="coerce").iloc[0])
    empty = (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and not value.strip())
    good = empty or (math.isfinite(v) and low <= v < 1e6 and v > -1e6)
    try:
        check_table(df, "t.csv", csv=True)
    except TableError as exc:
        assert not good and f"column '{col}' row 4 (line 5 of the file)" in str(exc)
        return
    assert good


@pytest.mark.parametrize(
    "cell, why",
    [
        ("abc", "this is not JSON"),
        (json.dumps({"rungs": [10], "eta": 3, "axis": "lr"}), "this one lacks group"),
        (json.dumps({**RECORD, "eta": "x"}), "eta must be a whole number"),
        (json.dumps({**RECORD, "losses": "abc"}), "losses must be a list"),
        (json.dumps({**RECORD, "rungs": 5}), "rungs must be a list"),
        (
            "[" * 50_000 + "]" * 50_000,
            "this is nested too deeply to read",
        ),  # nested past Python's recursion limit
        ("[" * 60_000 + "]" * 60_000, "at most 100,000 characters"),
    ],
)
def test_analyze_refuses_a_halving_cell_that_is_not_a_record(tmp_path, cell, why):
    """Each of these cells was a traceback from analysis/readers/halving.py."""
    csv = tmp_path / "halving.csv"
    grid(halving=cell, status="ok", lr=1e-3, family="transformer").to_csv(csv, index=False)
    err = one_sentence_error(analyze(csv, tmp_path / "out"))
    assert "halving.csv: column 'halving' row 1 (line 2 of the file) is " in err and why in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "value, why",
    [("abc", "it must be a number"), (1e308, "finite numbers of nats per token from -1e6 to below 1e6")],
)
def test_analyze_refuses_a_probe_cell_that_is_no_gain(tmp_path, value, why):
    """A text or a 1e308 copy_gain was a traceback in the copying figure."""
    df = grid(tokens=1e5, copy_loss=2.0, copy_gain=0.1)
    df["copy_gain"] = df["copy_gain"].astype(object)
    df.loc[5, "copy_gain"] = value
    csv = tmp_path / "probe.csv"
    df.to_csv(csv, index=False)
    err = one_sentence_error(analyze(csv, tmp_path / "out"))
    assert "column 'copy_gain' row 6 (line 7 of the file)" in err and why in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("tokens", [True, False])
def test_a_generic_csv_with_the_probe_gets_its_copying_figure(tmp_path, tokens):
    """A documented generic table has `loss`, not `final_val_loss`, and may lack `tokens`;
    the copying figure is drawn from the loss column the table has."""
    df = grid(copy_loss=2.0).drop(columns="trial_id")
    df["copy_gain"] = 0.1 * df["depth"]
    if tokens:
        df["tokens"] = 1e5
    csv = tmp_path / "probe.csv"
    df.to_csv(csv, index=False)
    res = analyze(csv, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "copying.png").stat().st_size > 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    c = report["copying"]
    assert c["measure"] == "copy_gain" and c["n_runs"] == 24
    assert [round(d["gain"], 6) for d in c["depths"]] == [0.1, 0.2, 0.3, 0.4]
    assert c["tokens"] == ([1e5] if tokens else [])


def test_the_selection_is_each_seeds_best_setting_at_the_largest_budget():
    """One rule for the table and the figure: a seed's run of the lowest loss among its
    settings, at the shape's largest budget; the gain against the control where the runs have it."""
    rows = []
    for d, s, lr, t in itertools.product([1, 2], [0, 1, 2], [1e-3, 3e-3], [1e5, 9e5]):
        best = lr == (1e-3 if s == 0 else 3e-3)
        rows.append(
            dict(
                depth=d,
                width=32.0,
                seed=s,
                lr=lr,
                tokens=t,
                loss=2.0 - 0.1 * best - 0.3 * (t > 5e5),
                copy_gain=0.5 + 0.1 * best,
                copy_gain_vs_control=(0.02 if d == 1 else 1.0) + 0.1 * best + 0.01 * s,
            )
        )
    c = copying.section(pd.DataFrame(rows))
    assert c["measure"] == copying.CONTROL and c["control"] and c["n_runs"] == 6
    picked = pd.DataFrame(c["runs"])
    assert np.allclose(picked["loss"], 1.6)  # each seed's best rate at the largest budget
    d1, d2 = c["depths"]
    assert d1["gain"] == pytest.approx(0.13) and d2["gain"] == pytest.approx(1.11)
    half = 4.302652729911275 * 0.01 / math.sqrt(3)  # t(0.975, 2) · sd / sqrt(3)
    assert d1["gain_ci"] == pytest.approx([0.13 - half, 0.13 + half])
    # without the control the gain against the first half is read, and said so
    c2 = copying.section(pd.DataFrame(rows).drop(columns=copying.CONTROL))
    assert c2["measure"] == "copy_gain" and "no control" in c2["measure_text"]
