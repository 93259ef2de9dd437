"""What the tests share lives in tests/helpers.py, once. The one way to write a spec: `spec_toml`
lays each table it is given over the tiny model's table of that name, leaves out a key or a table
given as None, and writes TOML that reads back as exactly that document, for any tables of bare
keys and plain values; `write_spec` puts the text in its file as given. No other test file
defines a helper of the same name, nor holds a spec's text of its own (test_sweep_spec.py aside,
whose exact messages are about the text the reader is given)."""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path

import tomllib
from helpers import TINY_TABLES, spec_toml, write_spec
from hypothesis import given, settings
from hypothesis import strategies as st

# Any text but a lone surrogate, which no TOML text can hold (depthwidth/config.py toml_string)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), TEXT
)
VALUES = st.one_of(
    SCALARS, st.lists(st.integers(-1000, 1000), max_size=4), st.lists(TEXT, max_size=3), st.none()
)
KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda k: k != "name")
TABLES = st.dictionaries(
    st.sampled_from(["model", "data", "train", "grid", "budget", "resources", "storage"]),
    st.one_of(st.none(), st.dictionaries(KEYS, VALUES, max_size=5)),
    max_size=5,
)


def expected(name: str, tables: dict) -> dict:
    doc = {"name": name, **copy.deepcopy(TINY_TABLES)}
    for table, keys in tables.items():
        if keys is None:
            doc.pop(table, None)
            continue
        doc[table] = {k: v for k, v in {**doc.get(table, {}), **keys}.items() if v is not None}
        if not doc[table]:
            del doc[table]  # a table left without keys is not written
    return doc


@settings(max_examples=200, deadline=None)
@given(name=TEXT, tables=TABLES)
def test_any_tables_read_back_as_the_document_asked_for(name, tables):
    assert tomllib.loads(spec_toml(name, **tables)) == expected(name, tables)


@settings(max_examples=50, deadline=None)
@given(text=TEXT)
def test_a_top_level_value_and_extra_text_are_written_as_given(text):
    doc = tomllib.loads(spec_toml("s", where=text, extra='[halving]\naxis = "lr"\n'))
    assert doc["where"] == text and doc["halving"] == {"axis": "lr"} and doc["model"] == TINY_TABLES["model"]


def test_the_tiny_tables_are_not_changed_by_a_spec_laid_over_them(tmp_path):
    before = copy.deepcopy(TINY_TABLES)
    text = spec_toml("s", model={"heads": None, "depth": 3}, train=None)
    assert TINY_TABLES == before
    path = write_spec(tmp_path / "made", text, "s.toml")
    assert path == tmp_path / "made" / "s.toml" and path.read_text() == text
    assert tomllib.loads(text)["model"] == {"seq_len": 16, "depth": 3} and "train" not in tomllib.loads(text)


TESTS = Path(__file__).resolve().parent
# a spec's own table headers; a test may still append a table it checks ([halving], [adaptive])
SPEC_BODY = re.compile(r"^\[(model|grid)\]$", re.M)


def _module_names(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level: functions, classes and assigned names."""
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_no_test_file_keeps_a_helper_or_a_spec_text_of_its_own():
    shared = _module_names(ast.parse((TESTS / "helpers.py").read_text()))
    assert {"cli", "sentence", "spec_toml", "write_spec", "hook_env", "EXE"} <= shared
    own, texts = [], []
    for path in sorted(TESTS.glob("*.py")):
        if path.name == "helpers.py":
            continue
        tree = ast.parse(path.read_text())
        own += [f"{path.name}: {name}" for name in sorted(_module_names(tree) & shared)]
        if path.name != "test_sweep_spec.py":
            strings = (
                n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            )
            texts += [f"{path.name}: {s[:40]!r}" for s in strings if SPEC_BODY.search(s)]
    assert own == [], "define these once, in tests/helpers.py"
    assert texts == [], "build a spec's text with helpers.spec_toml"
