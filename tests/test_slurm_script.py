"""Every value that reaches the SLURM batch script is refused or quoted for where it lands
(docs/rules.md, "Batch scripts"): a newline in an `#SBATCH` comment line would start a shell
command of its own. Each way in is tried through the real CLI: an option, the spec file, the
environment (the working folder); a refused value exits 2 with one sentence and writes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import run_sweep, spec_toml, write_spec

REPO = Path(__file__).resolve().parent.parent


def script_spec(name: str, storage: str) -> str:
    """One 10-step trial on the copy task, stored in `storage`."""
    return spec_toml(
        name,
        model={"family": "transformer"},
        data={"source": "copy", "task_length": 4, "vocab_size": None},
        train=None,
        grid={"depth": [1], "width": [16]},
        budget={"steps": 10},
        storage={"path": storage},
    )


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_sweep(list(args), {**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, cwd=cwd)


def _spec(folder: Path, name: str = "tiny", storage: str | None = None) -> Path:
    return write_spec(folder, script_spec(name, storage or str(folder / "store")), "tiny.toml")


def _refused(out: subprocess.CompletedProcess, says: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    err = out.stderr.strip()
    assert err.startswith("depthwidth: error: ") and says in err, err
    assert len(err.splitlines()) == 1, err


def _nothing_written(root: Path) -> None:
    written = [p for p in root.rglob("*") if p.is_file() and p.suffix != ".toml"]
    assert written == [], written


@pytest.mark.parametrize(
    "args, says",
    [
        (["--storage", "{tmp}/x/nl\ntouch {tmp}/PWNED\n#"], "--storage = "),
        (["--storage", "{tmp}/x/cr\rtouch"], "--storage = "),
        (["--storage", "{tmp}/tab\there"], "--storage = "),
        (["--storage", '{tmp}/a"b'], "an #SBATCH line cannot hold the character '\"'"),
        (["--storage", "{tmp}/a#b"], "an #SBATCH line cannot hold the character '#'"),
        (["--storage", "{tmp}/a\\b"], "an #SBATCH line cannot hold the character '\\\\'"),
        (["--partition", "debug\n"], "--partition = 'debug\\n' is invalid"),
        (["--account", "acct\ntouch x"], "--account = "),
        (["--mem", "4G\n"], "--mem = '4G\\n' is invalid"),
        (["--time", "1:00:00\n"], "--time = '1:00:00\\n' is invalid"),
        (["--sbatch-arg=--comment=a\ntouch x"], "--sbatch-arg = "),
        (['--sbatch-arg=--comment="x"'], "--sbatch-arg = "),
    ],
)
def test_an_option_that_would_break_the_script_is_refused(tmp_path: Path, args, says):
    spec = _spec(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    _refused(_cli("slurm", str(spec), *args, cwd=tmp_path), says)
    _nothing_written(tmp_path)
    assert not (tmp_path / "PWNED").exists()


def test_a_storage_path_in_the_spec_file_is_checked_too(tmp_path: Path):
    spec = _spec(tmp_path, storage=f"{tmp_path}/x\ntouch {tmp_path}/PWNED\n#")  # written as TOML's \n
    _refused(_cli("slurm", str(spec), cwd=tmp_path), f"{spec}: storage.path = ")
    _nothing_written(tmp_path)


def test_a_spec_name_with_a_trailing_newline_is_refused(tmp_path: Path):
    spec = _spec(tmp_path, name="tiny\n")  # written as TOML's \n
    _refused(_cli("slurm", str(spec), cwd=tmp_path), "name = 'tiny\\n'")
    _nothing_written(tmp_path)


def test_a_working_folder_with_a_newline_is_refused(tmp_path: Path):
    """The environment's way in: sbatch's --chdir is the folder the command runs in."""
    here = tmp_path / "work\ntouch PWNED"
    here.mkdir()
    spec = _spec(tmp_path)
    _refused(_cli("slurm", str(spec), cwd=here), "the working folder = ")
    _nothing_written(tmp_path)


def test_a_path_with_spaces_and_percent_is_quoted_where_it_lands(tmp_path: Path):
    here = tmp_path / "my work"
    here.mkdir()
    store = tmp_path / "runs 100%"
    spec = _spec(tmp_path, storage=str(store))
    out = _cli("slurm", str(spec), cwd=here)
    assert out.returncode == 0, out.stderr
    script = store / "slurm" / "tiny.sbatch"
    lines = script.read_text().splitlines()
    assert f'#SBATCH --output="{tmp_path}/runs 100%%/slurm/slurm-%j.out"' in lines
    assert f'#SBATCH --chdir="{here}"' in lines
    assert f"STORE='{store}'" in lines and f"FOLDER='{store}/slurm'" in lines
    # bash reads the header as comments and the fields as the paths themselves
    probe = subprocess.run(
        [
            "bash",
            "-c",
            'eval "$(sed -n "/^STORE=/p;/^FOLDER=/p" "$1")"; printf "%s|%s" "$STORE" "$FOLDER"',
            "-",
            str(script),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout == f"{store}|{store}/slurm"
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is missing: `apt-get install shellcheck` (.ci/run installs it)")
    lint = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout


def test_the_script_comes_from_the_package_template(tmp_path: Path):
    """The template is package data that shellcheck can read; every @FIELD@ in it is filled."""
    from importlib.resources import files

    template = (files("sweeps") / "templates" / "slurm.sbatch").read_text()
    spec = _spec(tmp_path)
    out = _cli("slurm", str(spec), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "store" / "slurm" / "tiny.sbatch").read_text()
    assert "@SBATCH@" in template and "@" not in "".join(
        ln for ln in text.splitlines() if ln.startswith(("PY=", "SPEC=", "STORE=", "GRACE="))
    )
    assert text.splitlines()[-1] == template.splitlines()[-1]


def test_a_job_id_is_a_number(tmp_path: Path):
    _refused(_cli("slurm-status", str(tmp_path), "--job", "garbage", cwd=tmp_path), "--job = 'garbage'")
