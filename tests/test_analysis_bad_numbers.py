"""`depthwidth analyze` on tables whose numbers are wrong or empty, through the CLI in a subprocess.

Shape columns must be whole numbers, `--tune` must name a tuning axis, duplicate runs are dropped
(or refused when they disagree), and a table with nothing to fit says why; each bad input exits 2
with one sentence naming the column, the row and the value, and writes nothing.
"""

import json

import pandas as pd
import pytest
from helpers import cli

from analysis.fitting import synthetic


def analyze(csv, out, *extra):
    return cli("analyze", csv, "--out", out, "--bootstrap", 0, *extra)


def planted(seeds=(0,), **cols) -> pd.DataFrame:
    runs = synthetic.make_runs(
        "two_regime",
        [1, 2, 3, 4],
        [16, 32, 64],
        dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0),
        noise=0.01,
        seeds=list(seeds),
    )
    df = runs[["depth", "width", "seed", "loss"]].copy()
    for k, v in cols.items():
        df[k] = v
    return df


def one_sentence_error(res) -> str:
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.startswith("depthwidth: error: ") and res.stderr.count("\n") == 1, res.stderr
    return res.stderr


@pytest.mark.parametrize(
    "col, value, shown",
    [
        ("depth", 1e30, "1e+30"),
        ("depth", 0.4, "0.4"),
        ("depth", 2.5, "2.5"),
        ("width", 31.5, "31.5"),
        ("heads", 0, "0"),
        ("heads", 1.5, "1.5"),
    ],
)
def test_shape_columns_must_be_whole_numbers(tmp_path, col, value, shown):
    df = planted(heads=2)
    df[col] = df[col].astype(object)
    df.loc[5, col] = value
    df.to_csv(tmp_path / "runs.csv", index=False)
    err = one_sentence_error(analyze(tmp_path / "runs.csv", tmp_path / "out"))
    assert f"column '{col}' row 6 (line 7 of the file) is {shown}" in err
    assert "whole number" in err
    assert not (tmp_path / "out").exists()


def test_long_format_curves_may_start_at_step_0(tmp_path):
    final = planted()
    rows = [
        {"trial_id": f"t{i}", "depth": r.depth, "width": r.width, "step": s, "loss": r.loss + 1.0 / (1 + s)}
        for i, r in enumerate(final.itertuples())
        for s in (0, 10, 100)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "curves.csv", index=False)
    res = analyze(tmp_path / "curves.csv", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["n_runs"] == 12 and report["learning_curves"]["n_runs_with_curves"] == 12
    bad = pd.DataFrame(rows)
    bad.loc[4, "step"] = -1
    bad.to_csv(tmp_path / "bad.csv", index=False)
    err = one_sentence_error(analyze(tmp_path / "bad.csv", tmp_path / "out2"))
    assert "column 'step' row 5 (line 6 of the file) is -1" in err


@pytest.mark.parametrize("step", [False, True])
def test_a_table_without_loss_names_loss(tmp_path, step):
    df = planted().drop(columns=["loss"]).assign(val=1.0)
    if step:
        df["step"] = 10
    df.to_csv(tmp_path / "runs.csv", index=False)
    err = one_sentence_error(analyze(tmp_path / "runs.csv", tmp_path / "out"))
    assert "missing required column 'loss'" in err and "final_val_loss" not in err


@pytest.mark.parametrize(
    "col, why",
    [
        ("depth", "defines the model"),
        ("width", "defines the model"),
        ("trial_id", "winner's curse"),
        ("seed", "winner's curse"),
        ("loss", "outcome"),
        ("status", "outcome"),
        ("final_val_loss", "outcome"),
    ],
)
def test_tune_must_name_a_tuning_axis(tmp_path, col, why):
    df = planted(seeds=(0, 1), lr=1e-3, status="ok")
    df["trial_id"] = [f"t{i}" for i in range(len(df))]
    df.to_csv(tmp_path / "runs.csv", index=False)
    err = one_sentence_error(analyze(tmp_path / "runs.csv", tmp_path / "out", "--tune", col))
    assert f"--tune '{col}' is invalid" in err and why in err
    assert not (tmp_path / "out").exists()


def test_tune_accepts_a_setting_column(tmp_path):
    df = pd.concat(
        [
            planted(seeds=(0, 1), dropout=0.0),
            planted(seeds=(0, 1), dropout=0.1).assign(loss=lambda d: d["loss"] * 1.05),
        ]
    )
    df.to_csv(tmp_path / "runs.csv", index=False)
    res = analyze(tmp_path / "runs.csv", tmp_path / "out", "--tune", "dropout")
    assert res.returncode == 0, res.stderr
    tuning = json.loads((tmp_path / "out" / "report.json").read_text())["tuning"]
    assert tuning["axes"] == ["dropout"]
    assert {b["dropout"] for b in tuning["best"]} == {0.0}  # the planted 5% worse setting loses


def test_duplicate_runs_count_once_with_a_note(tmp_path):
    df = planted(seeds=(0, 1))
    df["trial_id"] = [f"t{i}" for i in range(len(df))]
    once = analyze(_csv(tmp_path / "once.csv", df), tmp_path / "once")
    twice = analyze(_csv(tmp_path / "twice.csv", pd.concat([df, df])), tmp_path / "twice")
    assert once.returncode == 0 and twice.returncode == 0, twice.stderr
    r1, r2 = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("once", "twice"))
    assert r2["n_runs"] == r1["n_runs"] == 24
    assert r2["inputs"]["n_duplicates_dropped"] == 24 and r1["inputs"]["n_duplicates_dropped"] == 0
    assert r2["regimes"]["models"] == r1["regimes"]["models"]  # the same fits, not narrower ones
    assert any("24 duplicate runs dropped" in n for n in r2["inputs"]["notes"])
    assert "24 duplicate runs dropped" in (tmp_path / "twice" / "report.md").read_text()


def test_duplicate_runs_that_disagree_are_refused(tmp_path):
    df = planted()
    df["trial_id"] = [f"t{i}" for i in range(len(df))]
    twin = df.iloc[[3]].assign(loss=9.0)
    err = one_sentence_error(analyze(_csv(tmp_path / "runs.csv", pd.concat([df, twin])), tmp_path / "o"))
    assert "trial_id 't3' appears in rows 4 and 13 (lines 5 and 14 of the file)" in err
    assert "column 'loss'" in err and "9.0" in err
    assert not (tmp_path / "o").exists()


def _csv(path, df):
    df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "text, words",
    [
        ("depth,width,loss\n", "has no runs (only a header), so there is nothing to fit"),
        (
            "depth,width,loss,status\n1,16,3.0,diverged\n2,16,2.9,failed\n",
            "nothing to fit: none of its 2 transformer runs has status ok (diverged 1, failed 1)",
        ),
        ("depth,width,loss,family\n1,16,3.0,mlp\n", "nothing to fit: no run is a transformer"),
    ],
)
def test_a_table_with_nothing_to_fit_says_why(tmp_path, text, words):
    (tmp_path / "runs.csv").write_text(text)
    err = one_sentence_error(analyze(tmp_path / "runs.csv", tmp_path / "out"))
    assert words in err
    assert not (tmp_path / "out").exists()


def test_a_table_of_recurrent_runs_only_says_the_depth_width_sections_are_empty(tmp_path):
    (tmp_path / "runs.csv").write_text("depth,width,loss,family\n1,16,3.0,lstm\n2,16,2.9,lstm\n")
    res = analyze(tmp_path / "runs.csv", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    sentence = "all 2 runs are lstm, not transformer"
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    # the answer first: the recurrent study's own (no task has both models at one delay here)
    answer = "These runs cannot compare relevancy screening with the LSTM: no task has both at one delay."
    assert report["answer"] == answer and res.stdout.splitlines()[0] == answer
    assert res.stdout.splitlines()[1].startswith("Nothing to fit in the depth-width sections: " + sentence)
    assert sentence in report["nothing_to_fit"]
    assert sentence in (tmp_path / "out" / "report.md").read_text()


def test_rows_repeating_a_configuration_are_fitted_once_at_their_geometric_mean(tmp_path):
    import numpy as np

    df = planted(seeds=(0, 1))
    rng = np.random.default_rng(0)
    rep = df.loc[df.index.repeat(5)].reset_index(drop=True)
    rep["loss"] = rep["loss"] * np.exp(rng.normal(0, 0.01, len(rep)))
    gm = (
        rep.groupby(["depth", "width", "seed"], sort=False)["loss"]
        .apply(lambda x: float(np.exp(np.log(x).mean())))
        .reset_index()
    )
    r_rep = analyze(_csv(tmp_path / "rep.csv", rep), tmp_path / "rep")
    r_gm = analyze(_csv(tmp_path / "gm.csv", gm), tmp_path / "gm")
    assert r_rep.returncode == 0 and r_gm.returncode == 0, r_rep.stderr
    assert "analyze: regimes done" in r_rep.stderr  # progress, one line per stage
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("rep", "gm"))
    assert a["n_runs"] == b["n_runs"] == 24
    assert a["regimes"]["models"]["two_regime"]["params"] == pytest.approx(
        b["regimes"]["models"]["two_regime"]["params"], rel=1e-6
    )  # CSV round trip
    note = "120 rows are 24 configurations"
    assert any(note in n for n in a["inputs"]["notes"])
    assert note in (tmp_path / "rep" / "report.md").read_text()
    # without a seed column, rows of one shape may be different seeds: none is merged
    r_ns = analyze(_csv(tmp_path / "ns.csv", rep.drop(columns=["seed"])), tmp_path / "ns")
    assert r_ns.returncode == 0, r_ns.stderr
    assert json.loads((tmp_path / "ns" / "report.json").read_text())["n_runs"] == 120


def test_long_format_repeats_of_a_trial_and_step_count_once(tmp_path):
    final = planted()
    rows = pd.DataFrame(
        [
            {
                "trial_id": f"t{i}",
                "depth": r.depth,
                "width": r.width,
                "step": s,
                "loss": r.loss + 1.0 / (1 + s),
            }
            for i, r in enumerate(final.itertuples())
            for s in (0, 10, 100)
        ]
    )
    res = analyze(_csv(tmp_path / "c.csv", pd.concat([rows, rows.iloc[:6]])), tmp_path / "out")
    assert res.returncode == 0, res.stderr
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    assert r["inputs"]["n_duplicates_dropped"] == 6 and r["n_runs"] == 12
    assert any("6 duplicate rows dropped" in n for n in r["inputs"]["notes"])
    clash = pd.concat([rows, rows.iloc[[4]].assign(loss=7.5)])
    err = one_sentence_error(analyze(_csv(tmp_path / "d.csv", clash), tmp_path / "o2"))
    assert "trial_id 't1' and step 10 appears in rows 5 and 37" in err and "column 'loss'" in err
