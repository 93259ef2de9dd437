"""Reading analysis input (analysis.readers.inputs): stores, runs CSVs, long-format curve CSVs, bad input.

Bad input must raise one clear sentence naming the column and the row; runs whose status is not
'ok' are left out of the fits and counted.
"""

import numpy as np
import pandas as pd
import pytest

from analysis.fitting import synthetic
from analysis.readers.inputs import InputError, default_out, load


def small_csv(tmp_path, changes=None):
    df = pd.DataFrame({"depth": [1, 1, 2, 2], "width": [16, 32, 16, 32], "loss": [3.0, 2.8, 2.9, 2.6]})
    for (col, row), value in (changes or {}).items():
        df[col] = df[col].astype(object)
        df.loc[row, col] = value
    path = tmp_path / "runs.csv"
    df.to_csv(path, index=False)
    return path


def test_csv_with_depth_width_loss_defaults_to_kaplan_parameter_count(tmp_path):
    ds = load(small_csv(tmp_path))
    assert ds.kind == "csv" and len(ds.runs) == 4 and ds.curves.empty
    # N = 12 * depth * width^2 (docs/science.md §2), by hand: 12*2*32^2 = 24576.
    assert ds.runs["n_params"].tolist() == [3072.0, 12288.0, 6144.0, 24576.0]
    assert default_out(tmp_path / "runs.csv", "csv").root == str(tmp_path / "runs_analysis")


@pytest.mark.parametrize(
    "col,value,why",
    [
        ("loss", -1.0, "positive"),
        ("width", 0, "whole number from 1"),
        ("loss", "nan", "positive"),
        ("depth", "two", "it must be a number"),
    ],
)
def test_bad_value_names_the_column_and_row(tmp_path, col, value, why):
    path = small_csv(tmp_path, {(col, 2): value})
    with pytest.raises(InputError) as exc:
        load(path)
    msg = str(exc.value)
    assert f"column '{col}' row 3 (line 4 of the file)" in msg and why in msg
    assert msg.count(".") >= 1 and "\n" not in msg


def test_missing_column_is_named(tmp_path):
    path = tmp_path / "runs.csv"
    pd.DataFrame({"depth": [1], "loss": [3.0]}).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"runs.csv: has column 'depth' but no 'width'"):
        load(path)
    pd.DataFrame({"tokens": [1e6], "loss": [3.0]}).to_csv(path, index=False)
    with pytest.raises(
        InputError,
        match=r"missing required column 'n_params' .*columns present: "
        r"tokens, loss\)",
    ):
        load(path)


def test_missing_path_and_non_store_directory(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="has no runs.parquet"):
        load(tmp_path)


def test_store_excludes_runs_that_did_not_finish_ok_and_other_families(tmp_path):
    p = dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0)
    runs = synthetic.make_runs("two_regime", [1, 2, 3], [16, 32, 64], p)
    runs, curves = synthetic.make_curves(runs, 0.6, 50.0, steps=[10, 20, 40, 80])
    runs["status"] = "ok"
    runs.loc[0, "status"] = "diverged"
    runs.loc[0, "final_val_loss"] = np.nan  # a diverged run's loss is NaN: not an input error
    runs.loc[1, "status"] = "failed"
    extra = runs.iloc[:2].assign(trial_id=["r0", "r1"], family="relrnn", status="ok")
    store = synthetic.write_store(tmp_path / "s", pd.concat([runs, extra], ignore_index=True), curves)
    ds = load(store)
    assert len(ds.runs) == 7 and ds.n_excluded == {"diverged": 1, "failed": 1}
    assert ds.families == ("relrnn", "transformer")
    assert set(ds.curves["trial_id"]) == set(ds.runs["trial_id"])
    assert len(ds.curves) == 7 * 4 and (ds.curves["n_params"] > 0).all()


def test_nan_loss_in_an_ok_store_run_is_an_error(tmp_path):
    runs = synthetic.make_runs("kaplan", [1, 2], [16, 32], dict(E=1.0, A_N=10.0, alpha_N=0.2))
    runs["final_val_loss"] = runs["loss"]
    runs.loc[3, ["final_val_loss", "loss"]] = np.nan
    store = synthetic.write_store(tmp_path / "s", runs)
    with pytest.raises(InputError, match=r"runs.parquet: column 'final_val_loss' row 4 is nan"):
        load(store)


def test_unknown_status_is_named(tmp_path):
    path = tmp_path / "r.csv"
    pd.DataFrame({"depth": [1, 2], "width": [8, 8], "loss": [2.0, 1.9], "status": ["ok", "running"]}).to_csv(
        path, index=False
    )
    with pytest.raises(InputError, match=r"column 'status' row 2 .* is 'running'"):
        load(path)


def test_long_format_csv_becomes_runs_and_curves(tmp_path):
    rows = [
        dict(depth=d, width=w, seed=s, step=st, loss=5.0 / (d * w) ** 0.1 + 1.0 / st)
        for d in (1, 2)
        for w in (16, 32)
        for s in (0, 1)
        for st in (10, 100, 1000)
    ]
    path = tmp_path / "curves.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    ds = load(path)
    assert len(ds.runs) == 8 and len(ds.curves) == 24
    # Each run's loss is the last point of its curve.
    r = ds.runs.set_index(["depth", "width", "seed"]).loc[(2, 32, 1)]
    assert r["loss"] == pytest.approx(5.0 / 64**0.1 + 1e-3)


def test_gemstones_lines_are_learning_curves_with_non_embedding_n(tmp_path):
    ds = load(synthetic.write_gemstones_lines(tmp_path / "whatever_name.jsonl"))
    assert ds.layout == "gemstones" and ds.kind == "jsonl" and ds.has_shape
    assert len(ds.runs) == 5 and len(ds.curves) == 15
    r = ds.runs.set_index("trial_id")
    # By hand: N = total - 2001·d = L·(15·d² + 2·d); for (3, 128): 3·(15·16384 + 256) = 738048.
    assert r.loc["Gem-128x3", "n_params"] == 738048.0
    assert r.loc["Gem-128x3", "loss"] == pytest.approx(
        4.0 / 3**0.1 - 0.03 - 0.1 * np.log(2)
    )  # last checkpoint
    assert r.loc["Gem-128x3", "tokens"] == 400 * 4096
    assert ds.n_params_source["used"] == "derived" and "total − 2001·d" in ds.n_params_source["why"]
    assert set(ds.curves["tokens"]) == {409600, 819200, 1638400}


def test_total_counts_that_do_not_decompose_fall_back_to_kaplan(tmp_path):
    import json

    p = synthetic.write_gemstones_lines(tmp_path / "g.jsonl")
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    for x in rows:
        x["params_active_precise"] += x["depth"] ** 3  # not per-layer × depth + per-width
    p.write_text("\n".join(json.dumps(x) for x in rows))
    ds = load(p)
    assert ds.n_params_source["used"] == "kaplan_12Ld2"
    assert ds.runs.set_index("trial_id").loc["Gem-128x3", "n_params"] == 12 * 3 * 128**2


def test_epoch_layout_gives_tokens_from_compute(tmp_path):
    path = tmp_path / "points.csv"
    pd.DataFrame(
        {"x": [1.0, 2.0], "Model Size": [1e8, 4e8], "Training FLOP": [6e18, 4.8e19], "loss": [3.1, 2.9]}
    ).to_csv(path, index=False)
    ds = load(path)
    assert ds.layout == "epoch" and not ds.has_shape and "depth" not in ds.runs
    # D = C / (6 N): 6e18 / 6e8 = 1e10 and 4.8e19 / 2.4e9 = 2e10.
    assert ds.runs["tokens"].tolist() == [1e10, 2e10] and ds.runs["n_params"].tolist() == [1e8, 4e8]
    assert "Model Size" in ds.n_params_source["why"] or "as given" in ds.n_params_source["why"]


def test_malformed_json_lines_name_the_file(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"depth": 1, "width": 8, "loss": 2.0}\n{"depth": 2, "width"\n')
    with pytest.raises(InputError, match=r"bad.jsonl cannot be read as JSON lines") as exc:
        load(p)
    assert "\n" not in str(exc.value)
    p.write_text('{"depth": 1, "width": 8, "loss": 2.0}\n{"depth": 2, "width": 8, "loss": -1}\n')
    with pytest.raises(InputError, match=r"column 'loss' row 2 is -1"):
        load(p)
