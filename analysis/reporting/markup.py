"""Text from data never becomes markup in report.md, nor in report.html, which is read from it.

`Md` is Markdown the report's own code wrote (or text already escaped); any other text is escaped
by `escape` so that CommonMark with tables (markdown-it-py, as analysis/reporting/html.py reads
report.md) shows exactly that text: no link, image, emphasis, code span, autolink, table cell or
block of its own. `writes_markdown` applies `escape` to every string a renderer is given, keys and
values of a report dict alike, before the renderer runs, so a renderer formats only escaped text
into its Markdown whatever it picks out, the way Jinja2's autoescape treats every value put into
a template. Every writer of report.md and kaplan.md is such a renderer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# Characters that open Markdown syntax anywhere in a line: escapes, code spans, emphasis, links
# and images, autolinks, entities, table cells, strikethrough. `_` is left alone between two
# letters or digits (`[^\W_]`: what str.isalnum() accepts), where CommonMark never reads it as
# emphasis, so snake_case names stay readable.
_SPECIAL = re.compile(r"[\\`*\[\]<>&|~]|(?<![^\W_])_|_(?![^\W_])")
# ... and those that open a block at the start of a line: a quote, a heading (`#` to `######`
# then a space), a list item (`-` or `+` then a space), a thematic break or setext underline
# (`--`, `==`), an ordered list's `1.` / `1)` then a space; `-0.5` or `#5` are left as they are
_LINE_START = re.compile(r">|#{1,6}(?=\s|$)|([-+=])(?=\s|$|\1)|\d{1,9}(?=[.)](?:\s|$))")
_SPACE = re.compile(r"\s+")  # a line break would end a table row or start a block


class Md(str):
    """Markdown written by the report's code, or text `escape` made safe: never escaped again."""

    __slots__ = ()


class Escaped(Md):
    """Text from data, escaped; `raw` is the text as it came (for `code`)."""

    raw: str


def escape(text: Any) -> Md:
    """`text` (str() of it) as Markdown that renders as that very text on one line: each run of
    whitespace (line breaks included) becomes one space, and every character that could open
    Markdown syntax is backslash-escaped. An `Md` is returned as it is."""
    if isinstance(text, Md):
        return text
    raw = str(text)
    s = _SPECIAL.sub(lambda m: "\\" + m.group(), _SPACE.sub(" ", raw).strip())
    start = _LINE_START.match(s)
    if start:  # the value may begin a line: its first marker is escaped too
        at = start.end() if start.group()[0].isdigit() else 0
        s = s[:at] + "\\" + s[at:]
    out = Escaped(s)
    out.raw = raw
    return out


def code(text: Any) -> Md:
    """`text` as a code span, shown exactly as it came (escaped text by its `raw`), on one line.
    Not for a table cell, where a `|` would still split the cell."""
    raw = _SPACE.sub(" ", text.raw if isinstance(text, Escaped) else str(text)).strip()
    if not raw:
        return Md("")
    fence = "`" * (max((len(run) for run in re.findall("`+", raw)), default=0) + 1)
    pad = " " if raw[0] == "`" or raw[-1] == "`" else ""  # CommonMark strips one space each side
    return Md(f"{fence}{pad}{raw}{pad}{fence}")


class _EscapedDict(dict):
    """A dict `escaped` made: its keys and values are escaped already."""


class _EscapedList(list):
    """A list `escaped` made: its items are escaped already."""


def escaped(obj: Any) -> Any:
    """`obj` with every string in it escaped (dict keys too, so lookups by an escaped name
    still find their row); numbers, None and `Md` as they are. A new object: `obj` is unchanged.
    What `escaped` made is returned as it is, so a writer calling another costs nothing."""
    if isinstance(obj, (Md, _EscapedDict, _EscapedList)):
        return obj
    if isinstance(obj, str):
        return escape(obj)
    if isinstance(obj, dict):
        return _EscapedDict((escaped(k), escaped(v)) for k, v in obj.items())
    if isinstance(obj, list):
        return _EscapedList(escaped(v) for v in obj)
    if isinstance(obj, tuple):
        return tuple(escaped(v) for v in obj)
    return obj


def writes_markdown(render: F) -> F:
    """Mark `render` as a writer of Markdown: every argument it is called with is `escaped`
    first, so nothing it formats from its arguments can be markup."""

    @functools.wraps(render)
    def wrapper(*args, **kwargs):
        return render(*map(escaped, args), **{k: escaped(v) for k, v in kwargs.items()})

    wrapper.writes_markdown = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
