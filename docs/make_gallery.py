"""Regenerate docs/gallery.md: every figure `depthwidth analyze` writes, for the smoke sweep and one
published suite (Gemstones, read at run time from the reference data; docs/data.md), on one page.

    python docs/make_gallery.py [--smoke-store results/smoke] [--gemstones FILE] [--bootstrap 200]
    python docs/make_gallery.py --smoke      # a tiny planted store, written to a temporary folder

The PNGs go to docs/gallery/<suite>/ with the report's report.md (fits and verdicts, no rows of
the data); report.json, which lists what each run contributed, is kept for our own smoke runs only.
Nothing of the reference data is copied, only the figures and fits drawn from it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analysis.fitting import synthetic  # noqa: E402
from analysis.reporting.markdown import verdict_line  # noqa: E402
from analysis.reporting.report import analyze  # noqa: E402

DATA = Path(os.environ.get("DEPTHWIDTH_DATA", REPO.parent / "shared" / "data"))
CAPTIONS = {
    "loss_vs_n": "Loss (nats per token) against non-embedding N per depth (Kaplan et al. 2020, "
                 "Figure 6) with each depth's power-law fit (points joined where the fit is not "
                 "identified), the deep envelope, and any crossover with its 95% interval; the "
                 "legend sits beside the axes, off the points.",
    "threshold": "Every shape run at (width, depth), filled below the fitted L_th and hollow above "
                 "it, in a view fitted to the depths run, with the fitted L_th = log_b d and its 95% "
                 "band (b and its interval in the title when claimed), the theory's log_3 d, and the "
                 "transition points found, with a line through them only where its base is above 1; "
                 "a line outside the view is named in a note under the axes.",
    "loss_vs_depth": "Loss against depth at each width, the runs coloured by token budget, with the "
                     "threshold law the report's text quotes (one curve per budget, in its colour, "
                     "when the law has a data term); L_th is marked, and the side L < L_th shaded, "
                     "only where it falls inside the depths run.",
    "phase_map": "Each shape's loss over the best loss any depth reaches at its N; the theory's "
                 "L_th (and a claimed one) drawn where it falls inside the depths run.",
    "aspect_ratio": "Loss increase against aspect ratio d/L within fixed-N bands (Kaplan et al. "
                    "2020, Figure 5).",
    "learning_curves": "Every learning curve coloured by N, with the L(N, S) fit dashed where it is "
                       "identified.",
    "lr_curves": "Loss against learning rate for every shape; the chosen setting starred.",
    "chinchilla": "L(N, D) along lines of constant compute, and the compute-optimal N*(C), D*(C) "
                  "(each as a power of C) with 95% bands beside Hoffmann et al. 2022 and Besiroglu "
                  "et al. 2024.",
    "copying": "The copying probe: the copy gain (against the control where the runs record it) "
               "by depth and width with 95% intervals over seeds, and each run's loss against its "
               "gain, one colour per depth; the runs entering are stated in the title.",
}


def planted_store(folder: Path) -> Path:
    """A small tuned grid across L_th (b = 3 planted), for the smoke run of this script."""
    runs = synthetic.make_tuned_runs("two_regime", [1, 2, 3, 4], [16, 32, 64],
                                     dict(E=1.5, A_kappa=20.0, alpha_kappa=0.3, b=3.0),
                                     lrs=[1e-3, 3e-3, 1e-2],
                                     drift=dict(lr0=3e-3, width_exp=0.0, depth_exp=0.0), seed=1)
    runs, curves = synthetic.make_curves(runs, 0.6, 50.0, steps=[25, 50, 100, 200, 400, 800])
    return synthetic.write_store(folder / "planted", runs, curves)


def portable(text: str, work: Path, dest: Path) -> str:
    """A report's text with this machine's paths made relative to the repository: the working
    folder becomes the gallery's, the repository's own prefix goes, its parent is `..`."""
    text = text.replace(str(work), os.path.relpath(dest, REPO))
    return text.replace(f"{REPO}/", "").replace(f"{REPO.parent}/", "../")


def suite_section(name: str, title: str, source: Path, command: str, out: Path, bootstrap: int,
                  work: Path, ours: bool) -> list[str]:
    """Analyse one source, copy its PNGs and report.md (with report.json when the runs are `ours`)
    to out/gallery/<name>/, and return its page section."""
    report = analyze(source, out_dir=work / name, bootstrap=bootstrap, seed=0)
    dest = out / "gallery" / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for kept in ("report.md", "report.json") if ours else ("report.md",):
        (dest / kept).write_text(portable((work / name / kept).read_text(), work / name, dest))
    L = [f"## {title}", "", report["answer"], "", f"`{command}` ({report['n_runs']} runs; "
         f"[report.md](gallery/{name}/report.md)). "
         f"{verdict_line(report).replace('verdict: ', 'Verdict: ', 1)}.", ""]
    for fig in report["figures"]["written"]:
        shutil.copy(work / name / f"{fig}.png", dest / f"{fig}.png")
        L += [f"### {fig}", "", CAPTIONS.get(fig, ""), "", f"![{name} {fig}](gallery/{name}/{fig}.png)", ""]
    for fig, why in report["figures"].get("skipped", {}).items():
        L += [f"Not drawn: {fig} ({why})."]
    return L + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke-store", default=str(REPO / "results" / "smoke"),
                    help="the store of `depthwidth sweep run sweeps/smoke.toml`")
    ap.add_argument("--gemstones", default=str(DATA / "gemstones_curves_100b.jsonl"))
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--out", default=str(REPO / "docs"), help="where gallery.md and gallery/ go")
    ap.add_argument("--smoke", action="store_true",
                    help="a planted store for both suites, 5 bootstraps, into a temporary folder")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gallery-") as tmp:
        work = Path(tmp)
        if a.smoke:
            smoke = gem = planted_store(work)
            out, bootstrap = work / "page", 5
        else:
            smoke, gem, out, bootstrap = Path(a.smoke_store), Path(a.gemstones), Path(a.out), a.bootstrap
        for p, what in ((smoke, "--smoke-store"), (gem, "--gemstones")):
            if not p.exists():
                print(f"{what} {p} does not exist (see docs/data.md and the README).", file=sys.stderr)
                return 2
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        L = ["# Gallery: every figure of the report", "",
             "Every figure `depthwidth analyze` writes, for one run of the smoke sweep (the README's "
             "main job) and for a published suite, Gemstones (McLeish et al. 2025; docs/data.md), "
             "each beside what it shows. Regenerate with `python docs/make_gallery.py "
             "--smoke-store results/smoke` after the main job; the Gemstones curves are read from "
             f"the reference data at run time. Drawn on {when}, {platform.machine()} "
             f"{platform.system()}, Python {platform.python_version()}, {bootstrap} bootstrap "
             "replicates, seed 0.", ""]
        L += suite_section("smoke", "The smoke sweep (sweeps/smoke.toml)", smoke,
                           f"depthwidth analyze {a.smoke_store if not a.smoke else 'planted'}",
                           out, bootstrap, work, ours=True)
        L += suite_section("gemstones", "Gemstones (McLeish et al. 2025)", gem,
                           f"depthwidth analyze {Path(a.gemstones).name}", out, bootstrap, work,
                           ours=a.smoke)
        out.mkdir(parents=True, exist_ok=True)
        page = out / "gallery.md"
        page.write_text("\n".join(L))
        print(f"gallery: {page} ({sum(1 for _ in (out / 'gallery').rglob('*.png'))} figures)")
        if a.smoke:  # the temporary folder goes; say what it held
            print(page.read_text()[:400])
    return 0


if __name__ == "__main__":
    sys.exit(main())
