"""report.html: the whole report as one file that travels: the headline verdict, every figure, the
fit tables, a sortable and filterable runs table and each shape's learning curves, all inline
(PNG figures as data URIs, CSS and JS in the page; no network, no CDN). A figure opens at full
size in the page's own viewer, and links to its PNG file beside the page; a wide one spans it.

The text and tables are report.md's own (analysis/reporting/markdown.py), read as CommonMark with
tables by markdown-it-py, so the page and report.md never disagree. Curves are downsampled for
display (at most CURVE_POINTS per run, the first and last kept); the page says so, and
curves.parquet keeps every evaluation.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from markdown_it import MarkdownIt

from analysis.reporting.markup import escape
from runstore.files import atomic_file
from runstore.record import SHOWN_RUN_COLUMNS

CURVE_POINTS = 24
# The runs table: the record's columns marked for it (runstore/record.py), with a plain table's
# `loss` and a copy task's `accuracy` beside the record's losses.
_AT = SHOWN_RUN_COLUMNS.index("final_val_loss") + 1
RUN_COLUMNS = (*SHOWN_RUN_COLUMNS[:_AT], "loss", "accuracy", *SHOWN_RUN_COLUMNS[_AT:])
_ASSETS = Path(__file__).with_name("html_assets")


# -- report.md, as HTML ---------------------------------------------------------------------------


_MD = MarkdownIt("commonmark", {"html": False}).enable("table")  # raw HTML in the text is escaped


def _inline(text: str) -> str:
    return _MD.renderInline(text)


def _blocks(tokens: list) -> list[list]:
    """The top-level blocks of a token stream, each its opening token to its closing one."""
    out, depth = [], 0
    for t in tokens:
        if depth == 0:
            out.append([])
        out[-1].append(t)
        depth += t.nesting if t.level == 0 else 0
    return out


def _only_images(block: list) -> bool:
    """A paragraph of images alone (report.md's figure lines)."""
    if block[0].type != "paragraph_open":
        return False
    kids = block[1].children or []
    images = [c for c in kids if c.type == "image"]
    rest = [c for c in kids if c.type != "image" and (c.type != "text" or c.content.strip())]
    return bool(images) and all(c.type == "softbreak" for c in rest)


def markdown_html(md: str) -> tuple[str, str]:
    """(the verdict paragraph, the rest) of report.md as HTML, read as CommonMark with tables
    (markdown-it-py): headings, paragraphs, lists and tables. Image paragraphs are left out, and
    the report's title, verdict and Figures sections too: the page shows those itself."""
    parts, verdict, heading, in_title = [], "", "", False
    for block in _blocks(_MD.parse(md)):
        first = block[0]
        if first.type == "heading_open":
            depth = int(first.tag[1])
            heading = block[1].content.strip()
            in_title = depth == 1  # the answer under the title: the page shows it above everything
            if depth == 1 or heading.lower() == "figures" or "what the data say" in heading.lower():
                continue  # the page's own title, verdict box and figure gallery stand for these
            tag = f"h{min(depth + 1, 4)}"
            parts.append(f"<{tag}>{_inline(heading)}</{tag}>")
        elif in_title or heading.lower() == "figures" or _only_images(block):
            continue
        elif not verdict and "what the data say" in heading.lower() and first.type == "paragraph_open":
            verdict = _MD.renderer.renderInline(block[1].children, _MD.options, {})
        elif first.type == "table_open":
            first.attrSet("class", "fit")
            parts.append(f'<div class="scroll">{_MD.renderer.render(block, _MD.options, {})}</div>')
        else:
            parts.append(_MD.renderer.render(block, _MD.options, {}).strip())
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


WIDE = 2.0  # a figure at least twice as wide as it is high spans the page (loss_vs_depth, lr_curves)


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's header; (0, 0) for anything else."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        return 0, 0
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _figure(name: str, png: bytes) -> str:
    """One figure of the gallery: the image inline (a data URI, so the page needs nothing beside
    it), linked to its PNG file beside the page. Browsers refuse to open a data URI as a page of
    its own, so a click shows the image at full size in the page's viewer (report.js); the link
    itself opens the file, for a new tab or where scripts are off."""
    w, h = png_size(png)
    wide = " wide" if h and w / h >= WIDE else ""
    n = html.escape(name)
    return (
        f'<figure id="fig-{n}" class="figure{wide}"><a class="full" href="{n}.png" '
        f'title="{n} at full size"><img alt="{n}" width="{w}" height="{h}" '
        f'src="data:image/png;base64,{base64.b64encode(png).decode()}"></a><figcaption>'
        f"{html.escape(name.replace('_', ' '))} · {w}×{h} px</figcaption></figure>"
    )


def render_page(report: dict, md: str, figures: list[tuple[str, bytes]], data: dict) -> str:
    verdict, body = markdown_html(md)
    if not verdict:
        thr = report.get("threshold", {})
        verdict = _inline(escape(thr.get("reason") or "see the tables below"))
    title = f"Depth–width analysis: {report.get('source', '')}"
    figs = "\n".join(_figure(n, png) for n, png in figures)
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
<p class="answer">{html.escape(report.get("answer") or "")}</p>
<p class="meta">{int(report.get("n_runs", 0))} runs fitted of {data["n_runs"]} stored; depthwidth
{html.escape(str(report.get("depthwidth_version") or ""))}; {int(report.get("bootstrap", 0))} bootstrap
refits.</p></header>
<nav><a href="#verdict">verdict</a> <a href="#figures">figures</a> <a href="#fits">fits</a>
<a href="#runs">runs</a> <a href="#curves">learning curves</a></nav>
<section id="verdict"><h2>What the data say about L_th</h2><p class="verdict">{verdict}</p></section>
<section id="figures"><h2>Figures</h2>
<p class="hint">Click a figure to see it at full size here; its PNG file beside this page opens on its own.</p>
<div class="gallery">{figs or "<p>No figures were drawn.</p>"}</div>
<div id="viewer" hidden role="dialog" aria-label="figure at full size"><div class="bar">
<span id="viewer-name"></span> <a id="viewer-file" href="#">PNG file</a>
<button id="viewer-fit" type="button">fit to window</button>
<button id="viewer-close" type="button">close (Esc)</button></div>
<div class="frame"><img id="viewer-img" alt=""></div></div></section>
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
