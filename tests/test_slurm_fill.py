"""The batch script is filled in one pass (docs/rules.md, "Batch scripts"): for any text in any
value (spec path, store, script folder, working folder, interpreter, spec name, every option),
`sweeps.slurm.render` either refuses it with a SpecError naming the field, or writes a script that
`bash -n` accepts, whose assignment lines give back exactly the values given and whose #SBATCH
lines, read as sbatch reads them, give back the options. The reproducers run through the CLI: a
spec path holding `@STORE@`, a bundled spec by name, and a store whose `slurm` is a file. The
comment lines `design --propose` writes at the head of proposed.toml stay comments for any text.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

import pytest
import tomllib
from helpers import write_spec
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_slurm_script import _cli, _nothing_written, _refused, _spec, script_spec

from sweeps.plans.errors import SpecError
from sweeps.plans.spec import parse_spec
from sweeps.slurm import JobOptions, fill, render, sbatch_lines

# the names the template assigns, in the order the probe prints them
ASSIGNED = ("PY", "RAY", "SPEC", "STORE", "FOLDER", "GRACE", "NUM_GPUS", "CPUS")
# pieces that broke or could break a script: fields, quotes, expansions, separators, line breaks
PIECES = [
    "@STORE@",
    "@SPEC@",
    "@FOLDER@",
    "@SBATCH@",
    "@PY@",
    "@",
    "'",
    '"',
    "\\",
    "$(touch PWNED)",
    "`touch PWNED`",
    "${HOME}",
    ";",
    "&&",
    "|",
    " ",
    "%",
    "%j",
    "#",
    "!",
    "*",
    "~",
    "-",
    "=",
    "\n",
    "\r",
    "\t",
    "\x85",
    "\u2028",
    "é",
    "日本",
]
hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=6).map("".join)
# text every field accepts (no control character; none of the four an #SBATCH line cannot hold),
# still full of what a shell would read as code
_SBATCH_SAFE = st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\"'\\#")
awkward = st.lists(
    st.one_of(
        st.sampled_from([p for p in PIECES if all(c not in p for c in "\"'\\#\n\r\t\x85")]),
        st.text(_SBATCH_SAFE, max_size=4),
    ),
    max_size=6,
).map("".join)
# text bash alone must carry: quotes, backslashes and `#` too
shell_text = st.lists(
    st.one_of(
        st.sampled_from([p for p in PIECES if all(c not in p for c in "\n\r\t\x85")]),
        st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=4),
    ),
    max_size=6,
).map("".join)
SHELL_VALUES = ("spec_path", "store", "python", "ray")  # assigned in bash only
SBATCH_VALUES = ("folder", "cwd", "name")  # also on #SBATCH lines (the name in a comment too)


SAFE_OPTIONS = {
    "partition": ["debug", "gpu-a100"],
    "account": ["proj_1"],
    "qos": ["normal"],
    "constraint": ["a100", "skylake"],
    "mem": ["8G", "0", "4000M"],
    "time": ["01:00:00", "2-00", "90"],
}


@st.composite
def options(draw) -> dict:
    """sbatch options: each unset or a value that is fine, one of them (or an extra
    --sbatch-arg) any text at all."""
    out = {
        k: draw(st.sampled_from(v) if k in ("mem", "time") else st.none() | st.sampled_from(v))
        for k, v in SAFE_OPTIONS.items()
    }
    out["sbatch_args"] = draw(st.lists(st.sampled_from(["--exclusive", "--mail-type=END"]), max_size=2))
    wild = draw(st.sampled_from([*SAFE_OPTIONS, "sbatch_args"]))
    if wild == "sbatch_args":
        out["sbatch_args"].append(draw(st.one_of(awkward, hostile).map(lambda t: "--" + t)))
    else:
        # anything, or anything of the characters the option allows (sweeps.slurm._WORD)
        word = st.from_regex(r"[A-Za-z0-9_.,:=@+/%-]+", fullmatch=True)
        out[wild] = draw(st.one_of(awkward, hostile, word))
    return out


PLAIN_OPTIONS = {"mem": "8G", "time": "01:00:00", "partition": "debug"}


def _run_assignments(script: str, where: Path) -> bytes:
    """The script's assignment lines alone, run by bash in `where`; each value NUL-terminated."""
    lines = [ln for ln in script.split("\n") if ln.split("=", 1)[0] in (*ASSIGNED, "SWEEP_FLAGS")]
    probe = where / "assignments.sh"
    probe.write_bytes("\n".join(lines).encode())
    show = " ".join(f'"${name}"' for name in ASSIGNED)
    out = subprocess.run(
        ["bash", "-c", f'set -u; . "$1"; printf "%s\\0" {show} "${{SWEEP_FLAGS[@]}}"', "-", str(probe)],
        cwd=where,
        env={k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
        capture_output=True,
        check=True,
    )
    return out.stdout


def sbatch_words(line: str) -> list[str]:
    """An #SBATCH line's options as sbatch's own parser splits them: whitespace separates, a `"`
    opens or closes quoting (values holding `"`, `'`, `\\` or `#` are refused before this)."""
    words, word, quoted, started = [], "", False, False
    for c in line[len("#SBATCH ") :]:
        if c == '"':
            quoted, started = not quoted, True
        elif c.isspace() and not quoted:
            if started:
                words.append(word)
            word, started = "", False
        else:
            word, started = word + c, True
    assert not quoted, line
    return words + ([word] if started else [])


TEMPLATE_LINES = (files("sweeps") / "templates" / "slurm.sbatch").read_text().split("\n")


def _spec_named(name: str):
    spec = parse_spec(script_spec("tiny", "/store"), "/specs/tiny.toml")
    return dataclasses.replace(spec, name=name)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shell=st.fixed_dictionaries({k: st.one_of(shell_text, hostile) for k in SHELL_VALUES}),
    sbatch=st.fixed_dictionaries({k: awkward for k in SBATCH_VALUES}),
)
def test_any_shell_value_is_refused_or_given_back_exactly(tmp_path_factory, shell, sbatch):
    """Any text in the values bash reads (a control character is the only refusal)."""
    _check(tmp_path_factory.mktemp("fill"), {**shell, **sbatch}, PLAIN_OPTIONS)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shell=st.fixed_dictionaries({k: awkward for k in SHELL_VALUES}),
    sbatch=st.fixed_dictionaries({k: st.one_of(awkward, hostile) for k in SBATCH_VALUES}),
    options=options(),
)
def test_any_sbatch_value_is_refused_or_given_back_exactly(tmp_path_factory, shell, sbatch, options):
    """Any text in the values sbatch reads too: the working folder, the store's folder, the
    spec's name and every option."""
    _check(tmp_path_factory.mktemp("fill"), {**shell, **sbatch}, options)


def _check(where: Path, paths: dict, options: dict) -> None:
    """render refuses the values with one sentence, or its script passes `bash -n` and gives
    every value back: bash's assignments byte for byte, sbatch's options word for word."""
    spec = _spec_named(paths["name"])
    opts = JobOptions(cpus_per_task=2, gpus_per_node=0, grace_s=60, **options)
    values = {k: paths[k] for k in ("spec_path", "store", "folder", "cwd", "python", "ray")}
    try:
        script = render(spec, opts, **values)
    except SpecError as exc:  # refused: one sentence naming what was refused
        assert "\n" not in str(exc) and " is invalid" in str(exc), str(exc)
        event("refused")
        return
    event("written")
    syntax = subprocess.run(["bash", "-n"], input=script.encode(), capture_output=True, check=False)
    assert syntax.returncode == 0, syntax.stderr
    # each assignment gives back its value, byte for byte, and no expansion ran
    given_back = _run_assignments(script, where)
    expected = [paths["python"], paths["ray"], paths["spec_path"], paths["store"], paths["folder"]]
    expected += ["60", "0", "2"]
    assert given_back == b"".join(v.encode() + b"\0" for v in expected)
    assert not (where / "PWNED").exists()
    # the header: one #SBATCH comment line per option, together, each read as sbatch reads it
    lines = script.split("\n")
    header = [ln for ln in lines if ln.startswith("#SBATCH")]
    assert len(header) == len(sbatch_lines(spec, opts, paths["folder"], paths["cwd"]))
    at = [i for i, ln in enumerate(lines) if ln.startswith("#SBATCH")]
    assert at == list(range(at[0], at[0] + len(at)))
    assert len(lines) == len(TEMPLATE_LINES) + len(header) - 1  # no value made a line of its own
    read = [w for ln in header for w in sbatch_words(ln)]
    assert len(read) == len(header)  # no value split into two options
    assert f"--chdir={paths['cwd']}" in read
    assert f"--output={paths['folder'].replace('%', '%%')}/slurm-%j.out" in read
    assert f"--job-name={'dw-' + paths['name']}"[: len("--job-name=") + 80] in read
    for name in ("partition", "account", "qos", "constraint", "mem", "time"):
        if options.get(name):
            assert f"--{name}={options[name]}" in read
    assert all(arg in read for arg in options.get("sbatch_args", ()))


def test_the_fill_never_reads_an_inserted_value_again():
    assert fill("A=@A@ B=@B@", {"A": "@B@", "B": "x"}) == "A=@B@ B=x"
    with pytest.raises(RuntimeError, match="not filled"):
        fill("@A@ @B@", {"A": "1"})
    with pytest.raises(RuntimeError, match="not in the template"):
        fill("@A@", {"A": "1", "C": "2"})


def _assignments(script: Path, where: Path) -> list[str]:
    raw = _run_assignments(script.read_text(), where)
    return [v.decode() for v in raw.split(b"\0")[:-1]]


def _lint(script: Path) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is missing: `apt-get install shellcheck` (.ci/run installs it)")
    lint = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout


def test_a_spec_path_holding_a_field_name_stays_that_path(tmp_path: Path):
    """F-S1: a spec file named `run @STORE@.toml` whose store path holds `;touch ...;`. Filled
    key after key, the quoted store path landed inside SPEC's quotes and ran as a command."""
    folder = tmp_path / "shared spec"
    folder.mkdir()
    spec = write_spec(folder, script_spec("tiny", f"st;touch {tmp_path}/PWNED;x"), "run @STORE@.toml")
    out = _cli("slurm", "shared spec/run @STORE@.toml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    store = tmp_path / f"st;touch {tmp_path}/PWNED;x"
    script = store / "slurm" / "tiny.sbatch"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    values = dict(zip(ASSIGNED, _assignments(script, tmp_path)))
    assert values["SPEC"] == str(spec) and values["STORE"] == str(store)
    # the script itself, run outside SLURM, stops at its first use of the job id: by then every
    # assignment has run, and none of them ran the store path
    run = subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert run.returncode != 0 and "this script runs under sbatch" in run.stderr
    assert not (tmp_path / "PWNED").exists()
    _lint(script)


def test_a_bundled_spec_by_name_puts_its_own_file_in_the_script(tmp_path: Path):
    """F-W13: `sweep slurm smoke` from another folder named `$PWD/smoke`, a file that does not exist."""
    from sweeps.plans.bundled import bundled_specs

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = _cli("slurm", "smoke", "--storage", str(tmp_path / "smk"), cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    values = dict(zip(ASSIGNED, _assignments(tmp_path / "smk" / "slurm" / "smoke.sbatch", tmp_path)))
    assert values["SPEC"] == str(bundled_specs()["smoke"].absolute()) and os.path.isfile(values["SPEC"])
    # a local smoke.toml wins over the bundled one, and the script names that file, .toml and all
    write_spec(elsewhere, script_spec("smoke", str(tmp_path / "local")), "smoke.toml")
    out = _cli("slurm", "smoke", cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    values = dict(zip(ASSIGNED, _assignments(tmp_path / "local" / "slurm" / "smoke.sbatch", tmp_path)))
    assert values["SPEC"] == str(elsewhere / "smoke.toml")


@pytest.mark.parametrize("kind", ["file", "link to a file", "dangling link"])
def test_a_store_whose_slurm_is_not_a_folder_is_refused_before_writing(tmp_path: Path, kind: str):
    """F-M9: the script's folder is a file or a link to one (a store's runs.parquet): a bare
    errno before; one sentence naming --storage now, and nothing written."""
    store = tmp_path / "ls2"
    store.mkdir()
    target = tmp_path / "runs.parquet"
    target.write_bytes(b"PAR1 not to be touched")
    if kind == "file":
        (store / "slurm").write_bytes(b"x")
    else:
        (store / "slurm").symlink_to(target if kind == "link to a file" else tmp_path / "nowhere")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    spec = _spec(tmp_path)
    out = _cli("slurm", str(spec), "--storage", "ls2", cwd=tmp_path)
    what = {"file": "a file", "link to a file": "a link to a file", "dangling link": "a link to nothing"}
    _refused(out, f"--storage = 'ls2' is invalid: its slurm is {what[kind]}, where the script's folder goes")
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".toml"}
    assert after == before


def test_a_remote_stores_script_place_is_named_as_the_working_folder(tmp_path: Path):
    """A remote store's script goes in the working folder: a file in its way is that folder's,
    and another storage would not help."""
    (tmp_path / "tiny-slurm").write_bytes(b"x")
    spec = _spec(tmp_path)
    out = _cli("slurm", str(spec), "--storage", "s3://bucket/store", cwd=tmp_path)
    _refused(out, f"the working folder {str(tmp_path)!r} is invalid: its tiny-slurm is a file")
    assert "run it elsewhere" in out.stderr and "another storage" not in out.stderr


def test_a_folder_where_the_script_goes_is_refused(tmp_path: Path):
    (tmp_path / "store" / "slurm" / "tiny.sbatch").mkdir(parents=True)
    spec = _spec(tmp_path)
    _refused(_cli("slurm", str(spec), cwd=tmp_path), "tiny.sbatch is a folder, where the batch script goes")
    _nothing_written(tmp_path)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(hostile, st.text()))
def test_any_text_in_a_proposed_specs_comment_stays_a_comment(text):
    """proposed.toml's head names the spec file, the budget and the noise's source in comment
    lines: a line break in a file name would end the comment and start TOML of its own."""
    from sweeps.designing.design_search import toml_comment

    line = "# from " + toml_comment(text) + "."
    assert "\n" not in line and "\r" not in line
    assert tomllib.loads(line + '\nname = "x"\n') == {"name": "x"}
