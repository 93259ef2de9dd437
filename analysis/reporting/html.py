"""report.html: the whole report as one file that travels: the headline verdict, every figure, the
fit tables, a sortable and filterable runs table and each shape's learning curves, all inline
(PNG figures as data URIs, CSS and JS in the page; no network, no CDN).

The text and tables are report.md's own (analysis/reporting/markdown.py), converted here, so the page and
report.md never disagree. Curves are downsampled for display (at most CURVE_POINTS per run, the
first and last kept); the page says so, and curves.parquet keeps every evaluation.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from depthwidth.results import atomic_file

CURVE_POINTS = 24
RUN_COLUMNS = (
    "trial_id",
    "family",
    "depth",
    "width",
    "heads",
    "seed",
    "n_params",
    "loss",
    "final_val_loss",
    "final_train_loss",
    "accuracy",
    "status",
    "lr",
    "batch_size",
    "steps",
    "tokens",
    "wall_s",
    "error",
)
_ASSETS = Path(__file__).with_name("html_assets")


# -- report.md, as HTML ---------------------------------------------------------------------------


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def markdown_html(md: str) -> tuple[str, str]:
    """(the verdict paragraph, the rest) of report.md as HTML: headings, paragraphs and tables.
    Image lines are left out: the page shows the figures itself."""
    blocks: list[list[str]] = []
    for line in md.splitlines():
        if not line.strip():
            blocks.append([])
        elif (
            blocks
            and blocks[-1]
            and (line.startswith("|") == blocks[-1][0].startswith("|"))
            and not line.startswith("#")
        ):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    parts, verdict, heading = [], "", ""
    for b in (b for b in blocks if b):
        first = b[0]
        if first.startswith("!["):
            continue
        if first.startswith("#"):
            depth = len(first) - len(first.lstrip("#"))
            heading = first.lstrip("#").strip()
            if depth == 1 or heading.lower() == "figures" or "what the data say" in heading.lower():
                continue  # the page's own title, verdict box and figure gallery stand for these
            parts.append(f"<h{min(depth + 1, 4)}>{_inline(heading)}</h{min(depth + 1, 4)}>")
        elif first.startswith("|") and len(b) >= 2:
            rows = [[c.strip() for c in r.strip().strip("|").split("|")] for r in b]
            head = "".join(f"<th>{_inline(c)}</th>" for c in rows[0])
            body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rows[2:])
            parts.append(
                f'<div class="scroll"><table class="fit"><thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table></div>"
            )
        else:
            text = " ".join(b)
            if not verdict and "what the data say" in heading.lower():
                verdict = _inline(text)
                continue
            if heading.lower() != "figures":
                parts.append(f"<p>{_inline(text)}</p>")
    return verdict, "\n".join(parts)


# -- the data the page's script reads -------------------------------------------------------------


def _round(values, digits: int = 4) -> list:
    out = []
    for v in values:
        v = float(v)
        out.append(None if not math.isfinite(v) else float(f"{v:.{digits}g}"))
    return out


def downsample(n: int, k: int = CURVE_POINTS) -> np.ndarray:
    """Indices of at most k of n points, evenly spread in log position (learning curves are read
    on a log step axis), always the first and the last."""
    if n <= k:
        return np.arange(n)
    idx = np.unique(np.round(np.geomspace(1, n, k)).astype(int) - 1)
    return np.unique(np.concatenate([[0], idx, [n - 1]]))


def page_data(runs: pd.DataFrame, curves: pd.DataFrame, k: int = CURVE_POINTS) -> dict:
    """Runs as columns (only those present), and each run's curve, downsampled to k points."""
    runs = runs.reset_index(drop=True)
    key = "trial_id" if "trial_id" in runs.columns else "run_id" if "run_id" in runs.columns else None
    cols = [c for c in RUN_COLUMNS if c in runs.columns]
    if key and key not in cols:
        cols.insert(0, key)
    table = {}
    for c in cols:
        s = runs[c]
        if pd.api.types.is_bool_dtype(s) or not pd.api.types.is_numeric_dtype(s):
            table[c] = [None if pd.isna(v) else str(v) for v in s]
        else:
            table[c] = _round(s.to_numpy(float), 6 if c in ("lr",) else 5)
    out_curves: dict[str, list] = {}
    max_evals = 0
    if key and key in curves.columns and "step" in curves.columns:
        loss = "val_loss" if "val_loss" in curves.columns else "loss" if "loss" in curves.columns else None
        wanted = set(runs[key].astype(str))
        for tid, g in curves[curves[key].astype(str).isin(wanted)].groupby(curves[key].astype(str)):
            g = g.sort_values("step")
            max_evals = max(max_evals, len(g))
            sel = downsample(len(g), k)
            entry = [_round(g["step"].to_numpy(float)[sel], 6)]
            entry.append(_round(g[loss].to_numpy(float)[sel]) if loss else [])
            tr = "train_loss"
            entry.append(_round(g[tr].to_numpy(float)[sel]) if tr in g.columns else [])
            out_curves[tid] = entry
    return {
        "key": key,
        "columns": cols,
        "runs": table,
        "curves": out_curves,
        "n_runs": int(len(runs)),
        "curve_points": k,
        "max_evals": int(max_evals),
    }


def _json_for_script(obj) -> str:
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


# -- the page ---------------------------------------------------------------------------------------


def render_page(report: dict, md: str, figures: list[tuple[str, bytes]], data: dict) -> str:
    verdict, body = markdown_html(md)
    if not verdict:
        thr = report.get("threshold", {})
        verdict = _inline(thr.get("reason") or "see the tables below")
    title = f"Depth–width analysis: {report.get('source', '')}"
    figs = "\n".join(
        f'<figure id="fig-{html.escape(n)}"><img alt="{html.escape(n)}" '
        f'src="data:image/png;base64,{base64.b64encode(png).decode()}"><figcaption>'
        f"{html.escape(n.replace('_', ' '))}</figcaption></figure>"
        for n, png in figures
    )
    k, m = data["curve_points"], data["max_evals"]
    note = (
        f"Curves are drawn from at most {k} points per run (first and last kept, spread on a "
        f"log step axis) of up to {m} evaluations; curves.parquet holds every evaluation."
        if m > k
        else f"Every evaluation is drawn (at most {m} per run)."
    )
    css = (_ASSETS / "report.css").read_text(encoding="utf-8")
    js = (_ASSETS / "report.js").read_text(encoding="utf-8")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{css}</style></head>
<body>
<header><h1>{html.escape(title)}</h1>
<p class="meta">{int(report.get("n_runs", 0))} runs fitted of {data["n_runs"]} stored; depthwidth
{html.escape(str(report.get("depthwidth_version") or ""))}; {int(report.get("bootstrap", 0))} bootstrap
refits.</p></header>
<nav><a href="#verdict">verdict</a> <a href="#figures">figures</a> <a href="#fits">fits</a>
<a href="#runs">runs</a> <a href="#curves">learning curves</a></nav>
<section id="verdict"><h2>What the data say about L_th</h2><p class="verdict">{verdict}</p></section>
<section id="figures"><h2>Figures</h2><div class="gallery">{figs or "<p>No figures were drawn.</p>"}</div></section>
<section id="fits"><h2>Fits</h2>{body}</section>
<section id="runs"><h2>Runs</h2>
<div class="controls"><label>filter <input id="filter" type="search" size="32"
placeholder="text, or column:value, e.g. depth:4 status:ok"></label>
<span id="count"></span> <button id="prev" type="button">&larr;</button><span id="page"></span>
<button id="next" type="button">&rarr;</button></div>
<p class="hint">Click a column to sort it (again to reverse); click a run to see its shape's
learning curves.</p>
<div class="scroll"><table id="runs-table"><thead></thead><tbody></tbody></table></div></section>
<section id="curves"><h2>Learning curves</h2>
<div class="controls"><label>shape <select id="shape"></select></label></div>
<div id="chart"></div><p class="hint">{html.escape(note)}</p></section>
<script type="application/json" id="data">{_json_for_script(data)}</script>
<script>{js}</script>
</body></html>
"""


def write_html(report: dict, md: str, runs: pd.DataFrame, curves: pd.DataFrame, out: Path) -> Path:
    """Write out/report.html beside report.md and the figures already in `out`."""
    written = list((report.get("figures") or {}).get("written") or [])
    names = written + sorted(p.stem for p in out.glob("*.png") if p.stem not in written)
    figures = [(n, (out / f"{n}.png").read_bytes()) for n in names if (out / f"{n}.png").is_file()]
    page = render_page(report, md, figures, page_data(runs, curves))
    path = out / "report.html"
    with atomic_file(path, "w") as f:
        f.write(page)
    return path
