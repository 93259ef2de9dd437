"""The docs read as a reference (docs/README.md): the index lists every page under docs/ and the
READMEs of sweeps/ and docker/; every relative link in the pages resolves, to a file that exists
and, where it names one, to a heading of that page; the README stays short and keeps the two
commands CI runs; docs/benchmarks.md holds one row per figure, whose cells stay short enough to
read (the story goes on the page the row links)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
INDEX = ROOT / "docs" / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
README_MAX_LINES = 150
CELL_MAX_CHARS = 400
BENCH_COLUMNS = ["what", "target", "measured", "date", "page"]
FENCE = re.compile(r"^[ \t]*(```+|~~~+).*?^[ \t]*\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
# A study keeps the figures its page shows, not every figure its report drew: in a report kept
# under docs/studies/figures/ an image may name a figure that was not kept.
KEPT_IN_PART = ROOT / "docs" / "studies" / "figures"


def pages() -> list[Path]:
    """Every Markdown page the project ships as documentation."""
    return sorted(
        [ROOT / "README.md", ROOT / "sweeps" / "README.md", ROOT / "docker" / "README.md"]
        + list((ROOT / "docs").rglob("*.md"))
    )


def prose(text: str) -> str:
    """The text outside fenced blocks and code spans, where a link is a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(text: str, images: bool = True) -> list[str]:
    """The targets of the Markdown links (and images, unless `images` is false) in `text`, outside
    code."""
    return [m.group(1) for m in LINK.finditer(prose(text)) if images or not m.group(0).startswith("!")]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lower case, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor, with GitHub's -1, -2, ... on repeats."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(FENCE.sub("", text)):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of `page` that name no file, or no heading of the page they name (each
    as `page: target (why)`, the page relative to `root`)."""
    out = []
    kept_in_part = page.name == "report.md" and KEPT_IN_PART in page.parents
    for target in links(page.read_text(encoding="utf-8"), images=not kept_in_part):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not a file of ours
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / unquote(path)).resolve() if path else page
        if not dest.exists():
            out.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            out.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return out


def table_rows(text: str) -> list[list[str]]:
    """The cells of each Markdown table row in `text` (a line that starts with `|`), escaped pipes
    (`\\|`) kept inside their cell."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            rows.append([c.strip() for c in cells])
    return rows


def readme_block(text: str, mark: str) -> str:
    """The command of the fenced block after `<!-- mark -->`, as .ci/run extracts it (awk: the
    lines between the first fence after the mark and the next)."""
    after = text.split(f"<!-- {mark} -->\n", 1)[1]
    lines = after.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("```"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
    return "\n".join(lines[start + 1 : end])


# -- the index ----------------------------------------------------------------------------------


def test_the_index_lists_every_page_under_docs_and_the_two_readmes():
    listed = {(INDEX.parent / unquote(t.partition("#")[0])).resolve() for t in links(INDEX.read_text())}
    wanted = [p for p in pages() if p not in (INDEX, ROOT / "README.md")]
    missing = [str(p.relative_to(ROOT)) for p in wanted if p.resolve() not in listed]
    assert not missing, f"docs/README.md does not list: {missing}"


def test_the_readme_links_the_index():
    assert "docs/README.md" in links((ROOT / "README.md").read_text())


def test_every_link_between_the_pages_resolves():
    broken = [b for page in pages() for b in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "b.md").write_text("# Title\n\n## A (b) `c`\n")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md) [ok](b.md#a-b-c) [ok](#here) [web](https://x.org/none)\n"
        "[gone](c.md) [bad](b.md#nothing) `[code](d.md)`\n\n```\n[fenced](e.md)\n```\n\n# Here\n"
    )
    assert broken_links(page, tmp_path) == [
        "a.md: c.md (no such file)",
        "a.md: b.md#nothing (no such heading)",
    ]


# -- the README ---------------------------------------------------------------------------------


def test_the_readme_is_short_and_keeps_the_two_commands_ci_runs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    main, test = readme_block(text, "readme:main"), readme_block(text, "readme:test")
    assert main.startswith("python3 -m venv .venv && ") and main.endswith(
        "depthwidth sweep run sweeps/smoke.toml"
    )
    assert "pip install -e '.[test]'" in test and test.endswith("&& pytest")


# -- the benchmarks table -------------------------------------------------------------------------


def test_benchmarks_hold_one_short_row_per_figure_with_its_date_and_page():
    rows = table_rows(BENCHMARKS.read_text(encoding="utf-8"))
    assert rows and rows[0] == BENCH_COLUMNS
    assert all(set(c) <= set("-: ") for c in rows[1])  # the separator line
    for row in rows[2:]:
        assert len(row) == len(BENCH_COLUMNS), row
        too_long = [c for c in row if len(c) > CELL_MAX_CHARS]
        assert not too_long, f"a cell over {CELL_MAX_CHARS} characters: {too_long[0][:80]}..."
        date, page = row[3], row[4]
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}|—", date), row
        assert links(page), f"the row links no page: {row[0]}"


CELL_TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\\"), max_size=30
)


@settings(max_examples=200, deadline=None)
@given(st.lists(CELL_TEXT.map(str.strip), min_size=1, max_size=6))
def test_a_row_splits_back_into_the_cells_it_was_written_from(cells):
    """The cell check reads each cell as written, whatever its text: a pipe inside a cell, escaped
    as Markdown requires (`\\|`), stays in its cell, so no cell's length hides in another's."""
    written = [c.replace("|", "\\|") for c in cells]
    line = "| " + " | ".join(written) + " |"
    assert table_rows(line) == [written]


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        st.characters(whitelist_categories=("L", "N"), whitelist_characters=" -_"), min_size=1, max_size=20
    ),
    st.from_regex(r"[a-z][a-z0-9_-]{0,12}(/[a-z0-9_-]{1,8}){0,2}\.md", fullmatch=True),
)
def test_a_link_is_found_wherever_it_stands_in_prose_and_never_inside_code(text, target):
    """Every link in prose is checked, and none inside code: for any link text and target."""
    label = text.replace("[", "").replace("]", "") or "x"
    assert links(f"see [{label}]({target}), then") == [target]
    assert links(f"see `[{label}]({target})`") == []
    assert links(f"```\n[{label}]({target})\n```\n") == []
