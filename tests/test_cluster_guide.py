"""The cluster guide (docs/cluster.md) and the manifests in docker/ run the recommended GPU plan
(the one docs/studies/gpu-plans.md says to run, named there once), quote the Ray range the project
pins, and the wheel command the guide gives for the nodes builds a wheel of the whole project, the
way the image builds its own."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml
from packaging.requirements import Requirement

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "cluster.md"
TEXT_ROUTE = {"threshold-gpu-text", "threshold-gpu-text-pilot"}  # its own section, on a corpus
SWEEP_COMMAND = re.compile(r"depthwidth sweep (?:run|submit|slurm|plan)\s+(?:\\\s*)?([^\s`]+)")


def recommended() -> str:
    """The plan docs/studies/gpu-plans.md says to run, in its section "Which plan to run"."""
    text = (ROOT / "docs" / "studies" / "gpu-plans.md").read_text()
    section = text.split("## Which plan to run", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"\*\*Run `([\w.-]+)\.toml`\.\*\*", section)
    assert m, "the section names no plan to run"
    return m.group(1)


def _code_blocks(text: str) -> str:
    return "\n".join(re.findall(r"```\n(.*?)```", text, re.S))


def _spec_name(arg: str) -> str:
    return Path(arg).name.removesuffix(".toml")


def test_every_recipe_and_manifest_runs_the_recommended_plan():
    plan = recommended()
    assert (ROOT / "sweeps" / f"{plan}.toml").is_file()
    named = {_spec_name(a) for a in SWEEP_COMMAND.findall(_code_blocks(GUIDE.read_text()))}
    named.discard("SPEC")
    assert plan in named
    assert named - TEXT_ROUTE == {plan}, f"recipes name {sorted(named - TEXT_ROUTE)}"
    for path in (ROOT / "docker" / "compose.yaml", ROOT / "docker" / "kuberay" / "raycluster.yaml"):
        in_comments = {_spec_name(a) for a in SWEEP_COMMAND.findall(path.read_text())}
        assert in_comments == {plan}, path
    job = next(d for d in yaml.safe_load_all((ROOT / "docker" / "kuberay" / "rayjob.yaml").read_text()) if d)
    assert _spec_name(job["spec"]["entrypoint"].split()[3]) == plan


def test_the_guide_quotes_the_ray_range_the_project_pins():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(d for d in deps if Requirement(d).name == "ray")
    text = " ".join(GUIDE.read_text().split())
    assert f"`{pin}`" in text
    assert not re.search(r"Ray\s*(?:≥|>=)\s*\d", text), "a Ray version stated apart from the pin"


def test_the_documented_wheel_command_builds_the_whole_project(tmp_path):
    """The guide's `pip wheel` line, run in a copy of what the image copies (offline: the build
    backend of this environment), gives the wheel its `pip install` line names, holding every
    module, the bundled specs, their kept costs, the templates and the pinned dependencies."""
    lines = [ln.split("#")[0].strip() for ln in _code_blocks(GUIDE.read_text()).splitlines()]
    build = next(ln for ln in lines if ln.startswith("pip wheel"))
    install = next(ln for ln in lines if ln.startswith("pip install dist/"))
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("runstore", "depthwidth", "sweeps", "analysis"):
        shutil.copytree(ROOT / package, src / package, ignore=ignore)
    argv = [sys.executable, "-m", *shlex.split(build), "--no-build-isolation", "--quiet"]
    r = subprocess.run(argv, cwd=src, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = src / shlex.split(install)[2]
    assert wheel.is_file(), sorted(p.name for p in (src / "dist").iterdir())
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for package in ("runstore", "depthwidth", "sweeps", "analysis"):
        for f in (ROOT / package).rglob("*.py"):
            assert f.relative_to(ROOT).as_posix() in names
    shipped = [p.relative_to(ROOT).as_posix() for p in (ROOT / "sweeps").glob("*.toml")]
    shipped += ["sweeps/bundled-costs.json", "sweeps/templates/slurm.sbatch"]
    assert set(shipped) <= names
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    ray_pin = Requirement(next(d for d in deps if Requirement(d).name == "ray"))
    required = [
        Requirement(line.split(":", 1)[1]) for line in meta.splitlines() if line.startswith("Requires-Dist:")
    ]
    ray = next(q for q in required if q.name == "ray")
    assert ray.specifier == ray_pin.specifier and ray.extras == ray_pin.extras
