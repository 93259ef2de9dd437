"""What warmup-stable-decay buys against cosine in the CPU study, by shape and budget, and whether
it changes the answer on b (docs/bench/wsd.md, section 4; docs/studies/threshold-cpu.md §7).

    python bench/wsd_gain.py --study docs/studies/data/threshold-cpu-wsd.csv \
        --study-cosine docs/studies/data/threshold-cpu.csv --out docs/bench/wsd

The gain is cosine − WSD in nats per token at the same shape, budget, seed and learning rate: the
rate the cosine study's successive halving chose for that group (its finals), at which the WSD
study, which trained every rate in full, has a complete run too. One rate on both sides, so the
schedule alone differs. It is given by width, depth and budget with bootstrap 95% intervals over
the pairs, and Spearman's rank correlation of each shape's median gain with width and with depth
at each budget. Then both studies' tables, and the WSD table cut to the cosine study's three
budgets (100, 300, 900 steps), are analysed as `depthwidth analyze` does, and their verdicts set
side by side with b's interval from one method for all (the profile likelihood of the
sensitivity check's reference fit): so the schedule's effect on b is told apart from that of the
two extra budgets. Writes `gain-pairs.csv`, `gain-by.csv`, `gain-by-width.png`,
`schedule-effect.csv` and a markdown summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPE = ["depth", "width"]
KEY = SHAPE + ["steps", "seed"]
COSINE_BUDGETS = (100, 300, 900)


def same_rate_pairs(wsd: pd.DataFrame, cosine: pd.DataFrame) -> pd.DataFrame:
    """Each cosine final (the rate its halving chose per shape, budget and seed) beside the WSD
    run at that shape, budget, seed and rate; `gain` = cosine − WSD (positive: WSD lower)."""
    from analysis.readers.halving import finals

    keep, _ = finals(cosine)
    cos = cosine[keep & (cosine["status"] == "ok")][KEY + ["lr", "final_val_loss"]]
    ok = wsd[wsd["status"] == "ok"][KEY + ["lr", "final_val_loss"]]
    pairs = cos.merge(ok, on=KEY + ["lr"], suffixes=("_cosine", "_wsd"))
    return pairs.assign(gain=pairs["final_val_loss_cosine"] - pairs["final_val_loss_wsd"])


def interval(values: np.ndarray, n: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """The median and its bootstrap 95% interval."""
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(values, size=(n, len(values)), replace=True), axis=1)
    return float(np.median(values)), float(np.quantile(meds, 0.025)), float(np.quantile(meds, 0.975))


def gain_by(pairs: pd.DataFrame) -> pd.DataFrame:
    """The median gain with its interval: overall, by width, depth and budget, and by width at
    each budget."""
    rows = []

    def add(what: str, value, sub: pd.DataFrame, steps=None) -> None:
        med, lo, hi = interval(sub["gain"].to_numpy())
        rows.append(dict(by=what, value=value, steps=steps, n=len(sub), median=med, lo=lo, hi=hi))

    add("all", "", pairs)
    for col in ("width", "depth", "steps"):
        for v, sub in pairs.groupby(col):
            add(col, int(v), sub)
    for (s, w), sub in pairs.groupby(["steps", "width"]):
        add("width", int(w), sub, steps=int(s))
    return pd.DataFrame(rows)


def rank_tests(pairs: pd.DataFrame) -> pd.DataFrame:
    """Spearman's rank correlation of each shape's median gain with width and with depth, at each
    budget (the shapes are the units: a seed's pair is not an independent shape)."""
    from scipy.stats import spearmanr

    rows = []
    for s, sub in pairs.groupby("steps"):
        per = sub.groupby(SHAPE)["gain"].median().reset_index()
        for col in SHAPE:
            rho, p = spearmanr(per[col], per["gain"])
            rows.append(dict(steps=int(s), against=col, shapes=len(per), rho=float(rho), p=float(p)))
    return pd.DataFrame(rows)


def figure(by: pd.DataFrame, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.5, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    cell = by[(by["by"] == "width") & by["steps"].notna()]
    for k, (s, g) in enumerate(cell.groupby("steps")):
        x = np.log2(g["value"].to_numpy(float)) + 0.06 * (k - 1)
        err = [g["median"] - g["lo"], g["hi"] - g["median"]]
        left.errorbar(x, g["median"], yerr=err, marker="o", capsize=3, label=f"{int(s)} steps")
    widths = sorted(cell["value"].unique())
    left.set_xticks(np.log2(np.array(widths, float)), [str(int(w)) for w in widths])
    left.set_xlabel("width")
    left.set_title("by width, at each budget", fontsize=10)
    depth = by[(by["by"] == "depth") & by["steps"].isna()]
    right.errorbar(
        depth["value"],
        depth["median"],
        yerr=[depth["median"] - depth["lo"], depth["hi"] - depth["median"]],
        marker="o",
        capsize=3,
        color="0.3",
    )
    right.set_xticks(depth["value"].to_numpy(int))
    right.set_xlabel("depth (layers)")
    right.set_title("by depth, all budgets", fontsize=10)
    for ax in (left, right):
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_ylabel("cosine − WSD (nats per token)")
    left.legend(fontsize=8)
    fig.suptitle(
        "WSD's gain over cosine at the same rate, shape, budget and seed (median, 95% interval)", fontsize=10
    )
    fig.savefig(path, dpi=120)


def verdict(table: pd.DataFrame, label: str, tmp: Path) -> dict:
    """`depthwidth analyze` on `table`: its answer, and the sensitivity check's reference fit and
    its refit without depth 1 (one interval method, the profile likelihood, for every table)."""
    csv, out = tmp / f"{label}.csv", tmp / f"{label}-report"
    table.to_csv(csv, index=False)
    r = subprocess.run(
        [sys.executable, "-m", "depthwidth.cli", "analyze", str(csv), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise RuntimeError(f"analyze {label}: {r.stderr[-500:]}")
    rep = json.loads((out / "report.json").read_text())
    sens = rep["sensitivity"]
    ref = sens["reference"]
    no_d1 = next((x for x in sens["refits"] if x["left_out"] == "depth 1"), {})
    law = ref.get("threshold_law") or {}
    return {
        "table": label,
        "runs_fitted": ref["n_runs"],
        "preferred": ref["preferred"],
        "bic_margin": ref["bic_margin"],
        "threshold_law": law.get("law"),
        "b": law.get("b"),
        "b_lo": (law.get("interval") or [None, None])[0],
        "b_hi": (law.get("interval") or [None, None])[1],
        "b_status": law.get("status"),
        "excludes_3": law.get("excludes_theory"),
        "without_depth_1": no_d1.get("preferred"),
        "margin_without_depth_1": no_d1.get("bic_margin"),
        "answer": rep["answer"],
    }


def schedule_effect(wsd: pd.DataFrame, cosine: pd.DataFrame) -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as tmp:
        tables = {
            "cosine, 3 budgets": cosine,
            "WSD, 5 budgets": wsd,
            "WSD, the cosine study's 3 budgets": wsd[wsd["steps"].isin(COSINE_BUDGETS)],
        }
        return pd.DataFrame([verdict(t, label, Path(tmp)) for label, t in tables.items()])


def planted(slope: float, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A WSD table (three rates, every run complete) and a cosine table (one rate per group, as a
    halving's finals) whose gain at the same rate is 0.05 + slope·log2(width/16), plus noise."""
    rng = np.random.default_rng(seed)
    rows_w, rows_c = [], []
    for L, w, s, steps in np.ndindex(2, 4, 3, 2):
        depth, width, budget = L + 1, 16 * 2**w, (100, 300)[steps]
        base = 2.0 + 1.0 / (depth * width) ** 0.3
        for lr in (1e-3, 3.2e-3, 1e-2):
            loss = base + 0.05 * np.log10(lr / 3.2e-3) ** 2 + rng.normal(0, 0.002)
            rows_w.append(
                dict(depth=depth, width=width, seed=s, steps=budget, lr=lr, status="ok", final_val_loss=loss)
            )
            if lr == 3.2e-3:
                gain = 0.05 + slope * w + rng.normal(0, 0.002)
                rows_c.append(
                    dict(
                        depth=depth,
                        width=width,
                        seed=s,
                        steps=budget,
                        lr=lr,
                        status="ok",
                        final_val_loss=loss + gain,
                    )
                )
    return pd.DataFrame(rows_w), pd.DataFrame(rows_c)


def smoke() -> int:
    wsd, cosine = planted(0.02)
    by = gain_by(same_rate_pairs(wsd, cosine))
    w = by[(by["by"] == "width") & by["steps"].isna()].set_index("value")["median"]
    print(by.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(
        f"smoke: planted gain 0.050 to 0.110 over widths 16-128, measured {w.iloc[0]:.3f} to {w.iloc[-1]:.3f}"
    )
    return 0 if abs(w.iloc[0] - 0.05) < 0.005 and abs(w.iloc[-1] - 0.11) < 0.005 else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="the gains of planted tables, writing nothing")
    p.add_argument("--study", help="the WSD study's runs table (every rate in full)")
    p.add_argument("--study-cosine", help="the cosine study's runs table (halving)")
    p.add_argument("--out", default="docs/bench/wsd", help="folder for the CSVs and the figure")
    p.add_argument("--no-analyze", action="store_true", help="the gains only, no verdicts")
    args = p.parse_args(argv)
    if args.smoke:
        return smoke()
    if not (args.study and args.study_cosine):
        p.error("--study and --study-cosine are required (or --smoke)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wsd, cosine = pd.read_csv(args.study), pd.read_csv(args.study_cosine)
    pairs = same_rate_pairs(wsd, cosine)
    by, ranks = gain_by(pairs), rank_tests(pairs)
    pairs.to_csv(out / "gain-pairs.csv", index=False, float_format="%.6g")
    by.to_csv(out / "gain-by.csv", index=False, float_format="%.4g")
    figure(by, out / "gain-by-width.png")
    print(f"## WSD's gain at the same rate ({len(pairs)} pairs)\n")
    print(by.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("\n## Rank correlation of each shape's median gain\n")
    print(ranks.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    if not args.no_analyze:
        eff = schedule_effect(wsd, cosine)
        eff.to_csv(out / "schedule-effect.csv", index=False, float_format="%.4g")
        print("\n## The answer on b, by schedule and budgets\n")
        print(eff.drop(columns="answer").to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        for _, row in eff.iterrows():
            print(f"- {row['table']}: {row['answer']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
