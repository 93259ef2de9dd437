"""The code's shape, read from its source with ast: no two files of runstore/, depthwidth/,
sweeps/ and analysis/ import each other through any chain (imports inside functions count), each
package imports only the packages on the floors below it (runstore at the bottom, imported by the
others and importing none of them, nor torch nor Ray), each part of sweeps/ (plans/, running/,
cli.py, ...) imports only itself and the parts on the floors below it, and no function there is
longer than 100 lines, so each package reads from the top down; sweeps/ and runstore/ look up at
most MAX_STRING_KEY_LOOKUPS string keys (what crosses them is typed). And docs/design.md's "Layout and
layering" names every package, module and ready-made spec there is.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("runstore", "depthwidth", "sweeps", "analysis")
# Each package's floor: it may import the packages on lower floors only.
FLOORS = {"runstore": 0, "depthwidth": 1, "analysis": 2, "sweeps": 3}
# Each part of sweeps/ and its floor: it may import itself and the parts on lower floors only (not
# a part on its own floor). What a sweep is at the bottom; where it runs, how it is designed and
# where its results go on it; running it above them; the SLURM commands and the CLI on top.
SWEEPS_FLOORS = {
    "plans": 0,
    "backends": 1,
    "designing": 1,
    "results": 1,
    "running": 2,
    "slurm": 3,
    "cli": 4,
}
MAX_LINES = 100


def _modules(root: Path = REPO) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            name = ".".join(f.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = f
    return out


def _imported_names(name: str, path: Path) -> set[str]:
    """Every module name `name` imports anywhere in its file, relative imports made absolute (a
    `from package import x` adds both `package` and `package.x`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports anywhere in its file (a `from package import module`
    counts as importing the module)."""
    out = set()
    for target in _imported_names(name, path):
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_planted_cycle_through_a_function_level_import(tmp_path):
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "sweeps" / "a.py").write_text("from sweeps import b\n")
    (tmp_path / "sweeps" / "b.py").write_text("def f():\n    from .c import g\n")
    (tmp_path / "sweeps" / "c.py").write_text("import sweeps.a\n")
    (tmp_path / "sweeps" / "d.py").write_text("from sweeps.a import x\n")
    known = _modules(tmp_path)
    graph = {n: _imports(n, p, known) for n, p in known.items()}
    assert _cycles(graph) == [["sweeps.a", "sweeps.b", "sweeps.c"]]


def test_no_two_files_import_each_other_through_any_chain():
    known = _modules()
    graph = {n: _imports(n, p, known) for n, p in known.items()}
    assert len(graph) > 50 and graph["sweeps.running.service"]  # the packages were read
    assert _cycles(graph) == []


def test_no_function_is_longer_than_100_lines():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert long == []


def _layout_entries(design: str) -> dict[str, str]:
    """The layout block of docs/design.md, as the text of each folder's entries: a line at the left
    margin starts a package (`sweeps/`), a line indented by two an entry (a sub-package, `readers/`,
    has its own), and the lines indented deeper continue the entry above them."""
    section = design.split("## Layout and layering", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    text: dict[str, str] = {}
    package = folder = ""
    for line in block.splitlines():
        if not line.strip():
            continue
        indent, first = len(line) - len(line.lstrip()), line.split()[0]
        if indent == 0:
            package = folder = first
        elif indent == 2:
            folder = package + first if first.endswith("/") else package
        text[folder] = text.get(folder, "") + line + "\n"
    return text


def _named(name: str, text: str) -> bool:
    """`name` as a whole word (`cli.py` is not named by `theory_cli.py`)."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


def _undocumented(root: Path, design: str) -> list[str]:
    entries = _layout_entries(design)
    missing = []
    for pkg in PACKAGES:
        files = sorted((root / pkg).rglob("*.py")) + sorted((root / pkg).glob("*.toml"))
        for f in files:
            if "__pycache__" in f.parts:
                continue
            folder = f.parent.relative_to(root).as_posix() + "/"
            if f.name == "__init__.py":
                if folder not in entries:
                    missing.append(folder)
            elif not _named(f.name, entries.get(folder, "")):
                missing.append(f.relative_to(root).as_posix())
    return missing


def test_the_layout_in_design_md_names_every_package_module_and_spec():
    """docs/design.md follows the code: each package, each module under its own folder's entry,
    each sweeps/*.toml (a module added without a line there fails here)."""
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    assert _undocumented(REPO, design) == []


def test_the_layout_check_finds_a_module_missing_from_the_doc(tmp_path):
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "sweeps" / "plans").mkdir()
    (tmp_path / "sweeps" / "plans" / "__init__.py").write_text("")
    (tmp_path / "sweeps" / "plans" / "halving.py").write_text("")  # named in plans/'s entries
    (tmp_path / "analysis" / "readers").mkdir()
    (tmp_path / "analysis" / "readers" / "__init__.py").write_text("")
    (tmp_path / "analysis" / "readers" / "halving.py").write_text("")  # named under readers/
    assert _undocumented(tmp_path, design) == []
    (tmp_path / "sweeps" / "cli_extra.py").write_text("")  # cli.py is named, cli_extra.py is not
    (tmp_path / "analysis" / "readers" / "store.py").write_text("")  # store.py is named in sweeps/
    (tmp_path / "analysis" / "newpart").mkdir()
    (tmp_path / "analysis" / "newpart" / "__init__.py").write_text("")
    (tmp_path / "sweeps" / "new-study.toml").write_text("")
    assert _undocumented(tmp_path, design) == [
        "sweeps/cli_extra.py",
        "sweeps/new-study.toml",
        "analysis/newpart/",
        "analysis/readers/store.py",
    ]


def test_each_package_imports_only_the_floors_below_it():
    known = _modules()
    assert any(n.startswith("runstore.") for n in known)  # the store's package was read
    upward = []
    for name, path in known.items():
        floor = FLOORS[name.split(".")[0]]
        for target in _imports(name, path, known):
            if FLOORS[target.split(".")[0]] > floor:
                upward.append(f"{name} -> {target}")
    assert upward == []


def _sweeps_upward(known: dict[str, Path]) -> list[str]:
    """Each import of one part of sweeps/ by another on the same or a higher floor (a module
    directly in sweeps/, such as cli.py, is a part of its own)."""
    upward = []
    for name, path in known.items():
        parts = name.split(".")
        if parts[0] != "sweeps" or len(parts) < 2:
            continue
        for target in _imports(name, path, known):
            there = target.split(".")
            if there[0] != "sweeps" or len(there) < 2 or there[1] == parts[1]:
                continue
            if SWEEPS_FLOORS[there[1]] >= SWEEPS_FLOORS[parts[1]]:
                upward.append(f"{name} -> {target}")
    return upward


def test_each_part_of_sweeps_has_a_floor_and_imports_only_the_floors_below_it():
    known = _modules()
    parts = {n.split(".")[1] for n in known if n.startswith("sweeps.")}
    assert parts == set(SWEEPS_FLOORS)  # a new part of sweeps/ is given its floor here
    assert _sweeps_upward(known) == []


def test_the_floor_check_finds_an_import_up_or_across_inside_a_function(tmp_path):
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    for part in ("plans", "results", "running"):
        (tmp_path / "sweeps" / part).mkdir()
        (tmp_path / "sweeps" / part / "__init__.py").write_text("")
    (tmp_path / "sweeps" / "plans" / "spec.py").write_text("from sweeps.plans import errors\n")
    (tmp_path / "sweeps" / "plans" / "errors.py").write_text("")
    (tmp_path / "sweeps" / "results" / "export.py").write_text("from sweeps.plans.spec import x\n")
    (tmp_path / "sweeps" / "running" / "service.py").write_text("from ..results import export\n")
    (tmp_path / "sweeps" / "cli.py").write_text("import sweeps.running.service\n")
    known = _modules(tmp_path)
    assert _sweeps_upward(known) == []  # down only: each import is allowed
    (tmp_path / "sweeps" / "plans" / "plan.py").write_text(
        "def f():\n    from sweeps.running import service\n"
    )
    (tmp_path / "sweeps" / "results" / "trackers.py").write_text("import sweeps.backends.cluster\n")
    (tmp_path / "sweeps" / "backends").mkdir()
    (tmp_path / "sweeps" / "backends" / "__init__.py").write_text("")
    (tmp_path / "sweeps" / "backends" / "cluster.py").write_text("")
    known = _modules(tmp_path)
    assert sorted(_sweeps_upward(known)) == [
        "sweeps.plans.plan -> sweeps.running",  # up, from inside a function
        "sweeps.plans.plan -> sweeps.running.service",
        "sweeps.results.trackers -> sweeps.backends.cluster",  # across, to a part on its own floor
    ]


def test_the_store_imports_neither_torch_nor_ray():
    """The analysis reads stores on a laptop without either (docs/design.md, "Layout")."""
    heavy = []
    for name, path in _modules().items():
        if name.split(".")[0] == "runstore":
            heavy += [
                f"{name} -> {m}" for m in _imported_names(name, path) if m.split(".")[0] in ("torch", "ray")
            ]
    assert heavy == []


def test_every_package_is_installed_and_shipped_with_a_ray_job():
    """pyproject.toml installs each package, and `sweep submit` stages each (sweeps/backends/cluster.py)."""
    from sweeps.backends.cluster import SHIPPED_PACKAGES
    from sweeps.plans.spec import tomllib  # tomli before Python 3.11

    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert sorted(include["include"]) == sorted(f"{p}*" for p in PACKAGES)
    assert sorted(SHIPPED_PACKAGES) == sorted(PACKAGES)
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    assert all(f"COPY --chown=1000:100 {p} ./{p}" in dockerfile for p in PACKAGES)


def _plans_running(known: dict[str, Path]) -> list[str]:
    """Each import by sweeps/plans/ of what runs things: Ray, threads, or the analysis."""
    bad = []
    for name, path in known.items():
        if not name.startswith("sweeps.plans"):
            continue
        for m in _imported_names(name, path):
            if m.split(".")[0] in ("ray", "analysis") or m in ("threading", "queue"):
                bad.append(f"{name} -> {m}")
    return sorted(set(bad))


def test_plans_decides_and_runs_nothing():
    """sweeps/plans/ says what a sweep is before anything runs: no Ray, no threads, no analysis
    (the halving's board runs in sweeps/running/halving_board.py, the tracker threads in
    sweeps/results/feed.py)."""
    assert _plans_running(_modules()) == []


def test_the_plans_check_finds_ray_threads_and_the_analysis(tmp_path):
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "sweeps" / "plans").mkdir()
    (tmp_path / "sweeps" / "plans" / "__init__.py").write_text("")
    (tmp_path / "sweeps" / "plans" / "a.py").write_text("def f():\n    import ray\n")
    (tmp_path / "sweeps" / "plans" / "b.py").write_text("import threading\nfrom analysis.readers import x\n")
    assert _plans_running(_modules(tmp_path)) == [
        "sweeps.plans.a -> ray",
        "sweeps.plans.b -> analysis.readers",
        "sweeps.plans.b -> analysis.readers.x",
        "sweeps.plans.b -> threading",
    ]


def string_key_lookups(path: Path) -> int:
    """`x["key"]` subscripts and `x.get("key")` calls with a string constant for the key."""
    n = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            n += isinstance(node.slice.value, str)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            n += (
                bool(node.args)
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            )
    return n


def test_the_way_back_from_a_trial_is_typed():
    """What a trial returns crosses back as a TrialOutcome, not as JSON text: sweeps/running holds
    at most one json.loads (a halved trial reading its own checkpoint's curve; the planted
    trainable's law from the environment aside)."""
    loads = {
        f.name: f.read_text(encoding="utf-8").count("json.loads(")
        for f in (REPO / "sweeps" / "running").glob("*.py")
        if f.name != "planted.py"
    }
    assert sum(loads.values()) <= 1, loads


# What crosses sweeps/ and runstore/ is typed (TrialConfig, TrialOutcome, PlanRow, Totals, Rating,
# Estimate, Node, ...); a string key belongs where a file or a foreign API's answer is parsed.
MAX_STRING_KEY_LOOKUPS = 320


def test_sweeps_and_runstore_look_up_few_string_keys():
    per_file = {
        str(f.relative_to(REPO)): string_key_lookups(f)
        for pkg in ("sweeps", "runstore")
        for f in sorted((REPO / pkg).rglob("*.py"))
    }
    most = sorted(per_file.items(), key=lambda kv: -kv[1])[:8]
    assert sum(per_file.values()) <= MAX_STRING_KEY_LOOKUPS, (sum(per_file.values()), most)


def test_the_lookup_count_counts_both_forms_and_nothing_else(tmp_path):
    f = tmp_path / "a.py"
    f.write_text(
        'row["depth"]\n'  # counted: a subscript with a string key
        'row["n"] = 1\n'  # counted: a store is a lookup too
        'row.get("width")\n'  # counted: .get with a string key
        'row.get("seed", 0)\n'  # counted
        "row[key]\nrow.get(key)\nrow[0]\nrow.get(0)\nrow.get()\nrow.pop('x')\n"  # none of these
    )
    assert string_key_lookups(f) == 4
