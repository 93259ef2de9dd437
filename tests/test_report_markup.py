"""Text from data never becomes markup (docs/rules.md, "Text from data in reports"): every string
a report renderer is given is escaped first (analysis/reporting/markup.py), so for any text in
any field (a table's text columns, column names, the data's path, reasons, slice names, a store's
adaptive log, the recurrent family's names) report.html holds exactly the elements, attributes
and URLs it holds with plain text there. The escaper itself is checked on its own: any text
renders as that very text, mid-line, at a line's start and in a table cell. The reproducer (a
`parametrization` cell holding a remote image and a link) runs through the real CLI.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from analysis.reporting import markup
from analysis.reporting.html import page_data, render_page
from analysis.reporting.markdown import render, render_kaplan

PAYLOAD = "x ![t](https://evil.example/t.png) [phish](https://evil.example/login)"
# Markdown (and HTML) that would be an element, an attribute or a URL if it were read as markup
PIECES = [
    "![t](https://evil.example/t.png)",
    "[phish](https://evil.example/login)",
    "[x]: https://evil.example/def",
    "[x]",
    "[x][y]",
    "<https://evil.example/auto>",
    "<me@evil.example>",
    "<script>alert(1)</script>",
    '<img src="https://evil.example/i.png" onerror="x()">',
    "</script><script>x()</script>",
    "javascript:alert(1)",
    "https://evil.example/bare",
    "www.evil.example",
    "`code`",
    "``",
    "**strong**",
    "*em*",
    "_em_",
    "__x__",
    "~~del~~",
    "&lt;b&gt;",
    "&#x3C;img&#x3E;",
    "&amp;",
    "\\",
    "\\*",
    "|",
    " | a | b |\n|---|---|\n| c | d |",
    "\n# heading\n",
    "\n\n    indented code\n",
    "\n- item",
    "\n1. item",
    "2) ",
    "\n> quote",
    "\n===\n",
    "\n---\n",
    "***",
    "```\nfence\n```",
    "~~~",
    "  \n",
    "\\\n",
    "\r",
    "\t",
    "\u2028",
    "\x00",
    "é",
    " ",
]
hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=5)), min_size=1, max_size=6).map(
    "".join
)
_MD = MarkdownIt("commonmark", {"html": False}).enable("table")  # as analysis/reporting/html.py reads it
URL_ATTRS = {"href", "src", "srcset", "action", "formaction", "poster", "background", "xlink:href", "cite"}


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text, of an HTML page."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple]] = []
        self.text: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, tuple(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)

    def urls(self) -> set[str]:
        return {v for _, attrs in self.tags for k, v in attrs if k in URL_ATTRS and v is not None}


# -- the escaper: any text renders as that text ---------------------------------------------------


def _plain(text: str) -> str:
    """What the reader should see: whitespace runs as one space, no outer space (as in HTML),
    NUL as markdown-it shows it."""
    return re.sub(r"\s+", " ", text).strip().replace("\x00", "\ufffd")


@settings(max_examples=300, deadline=None)
@given(text=hostile)
def test_escaped_text_renders_as_itself_anywhere_in_a_report(text):
    e = markup.escape(text)
    assert "\n" not in e and markup.escape(e) is e  # one line; never escaped twice
    # mid-line, between the report's own words
    page = Elements(_MD.render(f"before {e} after\n"))
    assert page.tags == [("p", ())] and _plain("".join(page.text)) == _plain(f"before {text} after")
    # at the start of a line, after a blank one (where a heading, list, quote or code block starts)
    page = Elements(_MD.render(f"para\n\n{e} after\n"))
    assert page.tags == [("p", ()), ("p", ())], page.tags
    assert _plain("".join(page.text).split("\n", 1)[1]) == _plain(f"{text} after")
    # in a table cell
    page = Elements(_MD.render(f"| a | b |\n|---|---|\n| {e} | x |\n"))
    cells = [t for t, _ in page.tags if t in ("th", "td")]
    assert cells == ["th", "th", "td", "td"], page.tags
    assert {t for t, _ in page.tags} == {"table", "thead", "tr", "th", "tbody", "td"}
    # a code span shows the text as it came, outside tables
    page = Elements(_MD.render(f"see {markup.code(e)} here\n"))
    assert [t for t, _ in page.tags] == (["p", "code"] if _plain(text) else ["p"])
    assert _plain("".join(page.text)) == _plain(f"see {text} here")


# -- every renderer of report.md, with any text in any field --------------------------------------

# values that choose a branch of the writer (a status, a layout); every other string is text
CHOICES = {"status", "kind", "which", "preferred", "criterion", "layout", "convention", "rule", "metric"}
# figure names are the report's own file names (analysis/reporting/plots.py), never data; the
# lists of column names are renamed with the rows they index (_rename_columns)
OWN_NAMES = {"written", "shape_columns", "axes"}


def _inject(obj, text: str, key=None):
    """Every string of the report that is text with `text` appended: values, the keys of the
    tables keyed by data (depths, exclusion reasons), and column names wherever they name a row's
    cells (a tuning row's keys with its list of columns)."""
    if isinstance(obj, str):
        return obj if key in CHOICES else obj + text
    if isinstance(obj, list):
        return obj if key in OWN_NAMES else [_inject(v, text, key) for v in obj]
    if not isinstance(obj, dict):
        return obj
    keyed_by_data = key in ("per_depth", "n_excluded", "skipped")
    return {(k + text if keyed_by_data else k): _inject(v, text, k) for k, v in obj.items()}


def _rename_columns(tuning: dict, text: str) -> None:
    """The tuning section's column names, in its lists and in each row that they index."""
    names = set(tuning["shape_columns"]) | set(tuning["axes"])
    for key in ("shape_columns", "axes"):
        tuning[key] = [n + text for n in tuning[key]]
    for key in ("best", "settings"):
        tuning[key] = [{(k + text if k in names else k): v for k, v in row.items()} for row in tuning[key]]


def _hostile_report(base: dict, text: str) -> dict:
    r = _inject(base, text)
    _rename_columns(r["tuning"], text)
    return r


def _extra_sections(r: dict) -> dict:
    """The sections a CSV's report lacks, as a store would give them: an adaptive sweep's log, a
    stored design's power, the recurrent family's results."""
    r = copy.deepcopy(r)
    r["adaptive"] = {
        "rounds": 2,
        "choices": [
            {"round": 1, "depth": 2, "width": 32, "seed": 0, "trial_ids": ["a"], "reason": "widest gap"}
        ],
        "estimates": [{"round": 1, "base": 3.1, "ci": [2.0, 4.0]}],
        "stop": "budget spent",
    }
    r["design_power"] = {"text": "depthwidth design rated this plan before it ran", "source": "design.json"}
    r["relrnn"] = {
        "status": "ok",
        "reason": "",
        "n_runs": 4,
        "n_ok": 4,
        "families": ["relrnn", "lstm"],
        "tasks": ["copy"],
        "solved": [{"task": "copy", "model": "relrnn", "largest_T_solved": 200, "smallest_T_failed": None}],
        "cost_exponents": [
            {
                "model": "relrnn",
                "metric": "step_flops",
                "exponent": 1.0,
                "r2": 0.99,
                "x_min": 10,
                "x_max": 200,
            }
        ],
        "gradient_stability": [{"task": "copy", "model": "lstm", "T": 200, "grad_start_ratio": 1e-3}],
        "comparison_text": ["relrnn solves copy at T = 200 where lstm does not."],
        "gradient_over_training": [
            {"task": "copy", "model": "lstm", "T": 200, "first": 0.1, "lowest": 0.01, "last": 0.02}
        ],
        "bits_per_char": [{"model": "relrnn", "n_runs": 2, "bits_per_char": 2.1, "unigram_bits": 4.4}],
        "markdown": "| stored | markdown |",
    }
    return r


def _page(r: dict, runs: pd.DataFrame) -> Elements:
    curves = pd.DataFrame({"trial_id": runs["trial_id"], "step": 1, "val_loss": 1.0})
    return Elements(render_page(r, render(r), [], page_data(runs, curves)))


def _runs(text: str) -> pd.DataFrame:
    """The page's runs table (a JSON script in the page) with text in its text columns."""
    return pd.DataFrame(
        {
            "trial_id": ["t1" + text, "t2"],
            "family": ["transformer" + text, "transformer"],
            "parametrization": ["completep" + text, "standard"],
            "depth": [1, 2],
            "width": [16, 16],
            "final_val_loss": [3.0, 2.9],
            "status": ["ok", "ok"],
        }
    )


@pytest.fixture(scope="module")
def xss_report(tmp_path_factory) -> tuple[Path, dict]:
    """F-S3's table analysed through the CLI: a `parametrization` cell holding a remote image
    and a link."""
    folder = tmp_path_factory.mktemp("xss")
    rng = np.random.default_rng(0)
    rows = []
    for d, w, s, lr in itertools.product([1, 2, 3, 4], [16, 32, 64], [0, 1], [1e-3, 3e-3]):
        n = 12 * d * w * w
        loss = 3 + 50 / np.sqrt(n) + 0.01 * rng.standard_normal() + (0.05 if lr == 1e-3 else 0)
        rows.append(
            dict(
                depth=d,
                width=w,
                seed=s,
                lr=lr,
                n_params=n,
                family="transformer",
                parametrization=PAYLOAD,
                loss=loss,
            )
        )
    pd.DataFrame(rows).to_csv(folder / "xss_param.csv", index=False)
    out = subprocess.run(
        [sys.executable, "-m", "depthwidth.cli", "analyze", "xss_param.csv", "--bootstrap", "5"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    report = folder / "xss_param_analysis"
    return report, json.loads((report / "report.json").read_text())


def test_a_table_cell_with_markdown_is_text_in_the_report(xss_report):
    """F-S3: report.html rendered the cell as a remote image and a link."""
    folder, _ = xss_report
    page = Elements((folder / "report.html").read_text())
    own = {f"{p.name}" for p in folder.glob("*.png")}  # each figure's link to its file
    assert all(u.startswith(("#", "data:image/png;base64,")) or u in own for u in page.urls()), page.urls()
    assert "evil.example" not in " ".join(page.urls())
    assert f"parametrization: {PAYLOAD};" in "".join(page.text)  # shown, as text
    md = (folder / "report.md").read_text()
    assert "![t](" not in md and f"parametrization: {markup.escape(PAYLOAD)};" in md


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile)
def test_any_text_in_any_field_adds_no_element_attribute_or_url(xss_report, text):
    _, report = xss_report
    base = _extra_sections(report)
    plain = _page(_hostile_report(base, "zz"), _runs("zz"))
    page = _page(_hostile_report(base, text), _runs(text))
    assert page.tags == plain.tags  # the same elements, in the same order, with the same attributes
    assert page.urls() == plain.urls()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile)
def test_any_text_in_kaplan_md_adds_no_element(xss_report, text):
    _, report = xss_report
    k = {"source": report["source"], **report["kaplan"]}
    plain = Elements(_MD.render(render_kaplan(_inject(k, "zz"))))
    page = Elements(_MD.render(render_kaplan(_inject(k, text))))
    assert page.tags == plain.tags


def test_every_markdown_writer_escapes_its_arguments():
    """Each function of the report's Markdown modules that writes Markdown (by its name: render*,
    markdown, *_md, *_sentence, *_line, *_paragraph, *_section, *_table; returning text) is marked
    `writes_markdown`, so its arguments are escaped whoever calls it. The two exceptions write
    plain text for the terminal, and are called inside a writer only with escaped text."""
    import importlib
    import inspect

    terminal = {"verdict_line", "kaplan_table"}
    writer = re.compile(r"render\w*|\w*markdown|\w+_(md|sentence|line|paragraph|section|table)")
    text = re.compile(r"(str|list\[str\])( \| None)?")
    modules = [
        "analysis.reporting.markdown",
        "analysis.reporting.markdown_sections",
        "analysis.reporting.adaptive_report",
        "analysis.reporting.copying",
        "analysis.kerg.relrnn_compare",
        "analysis.kerg.relrnn",
    ]
    found, unmarked = [], []
    for name in modules:
        mod = importlib.import_module(name)
        for fname, fn in inspect.getmembers(mod, inspect.isfunction):
            private = fname.startswith("_")  # called by the module's writers, with escaped text
            if fn.__module__ != name or private or not writer.fullmatch(fname) or fname in terminal:
                continue
            if not text.fullmatch(str(inspect.signature(fn).return_annotation)):
                continue  # a table of numbers (accuracy_table), not Markdown
            found.append(fname)
            if not getattr(fn, "writes_markdown", False):
                unmarked.append(f"{name}.{fname}")
    assert unmarked == [] and {"render", "render_kaplan", "section_markdown", "sensitivity_md"} <= set(found)


@settings(max_examples=100, deadline=None)
@given(text=hostile)
def test_any_text_in_design_candidates_md_adds_no_element(text):
    """candidates.md (`design --propose`) escapes its table's text the same way."""
    from sweeps.designing.design_search import _markdown

    def table(t: str) -> pd.DataFrame:
        return pd.DataFrame(
            {"id": [1, 2], "changes" + t: ["widths 16, 32" + t, t], "power": [0.5, float("nan")]}
        )

    assert (
        Elements(_MD.render(_markdown(table(text)))).tags == Elements(_MD.render(_markdown(table("zz")))).tags
    )
