"""Every writer of a user-named output goes through the one guard (runstore/outputs.py; docs/rules.md,
"Where a command writes"): never into a results store's own files, parts/ or tune/, never through
a link to them, every target checked before any work, and a lock from the check to the last
move, so two commands never write one output at once. Each case runs the real console script;
the property runs writers in this process on arbitrary paths, for speed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import EXE, cli, sentence
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_data_prepare import documents
from test_output_guards import snapshot, tiny  # noqa: F401  (tiny: a store carried from a runs table)

from runstore.layout import STORE_OWN
from runstore.outputs import LOCK_SUFFIX, OutputError, claim_file, release_all

pytest.importorskip("tokenizers")


def _words(path: Path, mb: float, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(3000)])
    docs = (" ".join(rng.choice(words, 40)) for _ in range(int(mb * 1e6 / 200)))
    path.write_text("\n\n".join(docs))
    return path


@pytest.mark.slow
def test_two_prepares_into_one_out_the_later_is_refused_and_the_first_wins(tmp_path):
    """The first holds the lock from its check to its move; the second stops at once."""
    big, small = _words(tmp_path / "a.txt", 4), _words(tmp_path / "b.txt", 0.05, seed=1)
    out = tmp_path / "out"
    first = subprocess.Popen(
        [EXE, "data", "prepare", str(big), "--out", str(out), "--vocab", "600"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in first.stderr:  # its claim is held once it trains
            if "training" in line:
                break
        msg = sentence(cli("data", "prepare", small, "--out", out, "--vocab", 300, "--val-fraction", 0.1))
        assert msg == (
            f"--out = {str(out)!r} is invalid: another depthwidth command (pid {first.pid}) is "
            f"writing it now; wait for it to end, or write elsewhere."
        )
    finally:
        first.communicate(timeout=300)
    assert first.returncode == 0
    assert '"vocab_size": 600' in (out / "meta.json").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no lock, no working folder
    r = cli("data", "prepare", small, "--out", out, "--vocab", 300, "--val-fraction", 0.1, "--force")
    assert r.returncode == 0, r.stderr


def test_export_tensorboard_never_writes_into_a_stores_own_folders(tiny, tmp_path):  # noqa: F811
    """parts/ and tune/ (which a sweep folds and deletes), and links to them, are refused."""
    store = tiny / "stores" / "tiny"
    (tmp_path / "to_parts").symlink_to(store / "parts", target_is_directory=True)
    before = snapshot(tiny)
    for target in (store / "parts", store / "tune", store / "tune" / "tb", tmp_path / "to_parts", store):
        msg = sentence(cli("export", store, "--tensorboard", target))
        assert msg.startswith(f"--tensorboard = {str(target)!r} is invalid: ") and "results store" in msg
        assert snapshot(tiny) == before
    assert sentence(cli("export", store, "--mlflow", f"sqlite:///{store / 'runs.parquet'}")).startswith(
        "--mlflow = "
    )
    # a sweep's own TensorBoard folder too, before anything runs
    msg = sentence(
        cli("sweep", "run", "tiny.toml", "--tensorboard", store / "parts", "--no-analyze", cwd=tiny)
    )
    assert msg.startswith(f"tracking.tensorboard = {str(store / 'parts')!r} is invalid: ")
    assert snapshot(tiny) == before


def test_force_replaces_only_data_that_data_prepare_wrote(tmp_path):
    """A nanoGPT folder's train.bin and val.bin are not prepared data: kept, --force or not."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n".join(documents(40)))
    nano = tmp_path / "nanogpt"
    nano.mkdir()
    for name, size in (("train.bin", 1000), ("val.bin", 100)):
        (nano / name).write_bytes(os.urandom(size))
    before = snapshot(tmp_path)
    for force in ((), ("--force",)):
        msg = sentence(cli("data", "prepare", corpus, "--out", nano, "--vocab", 260, *force))
        assert "its train.bin, val.bin are not data that `depthwidth data prepare` wrote" in msg
        assert "never replaced, --force or not" in msg and snapshot(tmp_path) == before


def test_every_target_is_checked_before_any_work(tmp_path):
    """A folder where meta.json goes, places that cannot be written, and '': one sentence each,
    before the BPE trains, and nothing left behind."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n".join(documents(40)))
    (tmp_path / "forcedir" / "meta.json").mkdir(parents=True)
    (tmp_path / "forcedir" / "meta.json" / "inner.txt").write_text("keep")
    before = snapshot(tmp_path)
    cases = [
        (
            tmp_path / "forcedir",
            f"--out file = {str(tmp_path / 'forcedir' / 'meta.json')!r} is invalid: it is a folder",
        ),
        ("", "--out = '' is invalid: it names no folder"),
    ]
    if os.path.isdir("/proc/self"):
        cases += [("/proc/dwtest", "cannot be written"), ("/sys/dwtest/x", "cannot be written")]
    for out, words in cases:
        r = cli("data", "prepare", corpus, "--out", out, "--vocab", 260, "--force", cwd=tmp_path)
        assert words in sentence(r) and "training" not in r.stderr, r.stderr
        assert snapshot(tmp_path) == before
    assert not os.path.exists("/proc/dwtest") and not os.path.exists("/sys/dwtest")


def test_a_lock_is_released_when_the_command_ends_and_a_killed_ones_lock_stops_nobody(tmp_path):
    out = tmp_path / "report.json"
    claim = claim_file(out, "--json")
    lock = tmp_path / f".report.json{LOCK_SUFFIX}"
    assert lock.is_file()
    with pytest.raises(OutputError, match="another depthwidth command"):
        claim_file(out, "--json")
    release_all()
    assert not lock.exists()
    claim_file(out, "--json").release()
    # a lock file left by a killed command holds no lock: the next claim takes it and removes it
    killed = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from runstore.outputs import claim_file; claim_file({str(out)!r}, '--json'); "
            "import time; time.sleep(60)",
        ]
    )
    while not lock.exists():
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert lock.exists()
    claim_file(out, "--json").release()
    assert not lock.exists() and claim.real == out


# -- the property: any output path, any writer ------------------------------------------------------
@pytest.fixture(scope="module")
def sandbox(tiny, tmp_path_factory) -> Path:  # noqa: F811
    """A store with its own folders, links to it and into it, a file and a folder; a corpus."""
    import shutil

    root = tmp_path_factory.mktemp("sandbox")
    store = root / "store"
    shutil.copytree(tiny / "stores" / "tiny", store, symlinks=True)
    (store / "parts").mkdir(exist_ok=True)
    (store / "tune").mkdir(exist_ok=True)
    (root / "to_store").symlink_to(store, target_is_directory=True)
    (root / "to_parts").symlink_to(store / "parts", target_is_directory=True)
    (root / "to_runs").symlink_to(store / "runs.parquet")
    (root / "afile").write_text("f")
    (root / "adir").mkdir()
    (root / "corpus.txt").write_text("\n\n".join(documents(30)))
    return root


BASES = ("", "store", "store/parts", "store/tune", "to_store", "to_parts", "to_runs", "afile", "adir", "new")
TAILS = ("", "x", "runs.parquet", "parts", "tune/y", "..", "new/deeper", "meta.json", ".")


def _writer(kind: str, target: str, sandbox: Path) -> list[str]:
    if kind == "prepare":
        return ["data", "prepare", str(sandbox / "corpus.txt"), "--out", target, "--vocab", "260", "--force"]
    if kind == "seprank":
        return ["seprank", "--depth", "1", "--width", "2", "--out", target]
    if kind == "json":
        tiny_run = (
            "--depth 1 --width 8 --heads 2 --seq-len 8 --steps 2 --batch-size 2 --eval-batches 1 --threads 1"
        )
        return ["train", *tiny_run.split(), "--json", target, "--force"]
    if kind == "tensorboard":
        return ["export", str(sandbox / "store"), "--tensorboard", target]
    return ["sweep", "results", str(sandbox / "store"), "--csv", target, "--force"]


def _inside(path: str, target: Path) -> bool:
    p = Path(os.path.realpath(path))
    return p == target or target in p.parents


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["prepare", "seprank", "csv", "json", "tensorboard"]),
    base=st.sampled_from(BASES),
    tail=st.sampled_from(TAILS),
    empty=st.booleans(),
)
def test_any_output_path_is_refused_whole_or_written_only_inside_itself(
    sandbox, capsys, kind, base, tail, empty
):
    """For any path (a store's folders, links to them, a file where a folder goes, '', ...), each
    writer refuses with exit code 2, one sentence and nothing changed, or writes only inside it."""
    from depthwidth.cli import main

    target = "" if empty else str(sandbox / base / tail if tail else sandbox / base)
    assume(empty or _inside(target, Path(os.path.realpath(sandbox))))  # ".." from the top leaves it
    before = snapshot(sandbox)
    code = main(_writer(kind, target, sandbox))
    err = capsys.readouterr().err
    after = snapshot(sandbox)
    if code == 2:
        lines = [x for x in err.splitlines() if not x.startswith("data: ")]
        assert len(lines) == 1 and lines[0].startswith("depthwidth: error: "), err
        assert after == before
        return
    assert code == 0, err
    real = Path(os.path.realpath(Path(target).absolute()))
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed and all(_inside(str(sandbox / k), real) for k in changed), changed
    own = [
        k for k in changed if k.startswith("to_") or (k.startswith("store/") and k.split("/")[1] in STORE_OWN)
    ]
    assert not own, own  # a store's own files (and the links to them) are never written
    # the next example starts from the sandbox as it was
    for k in sorted(changed - set(before), key=len, reverse=True):
        (sandbox / k).unlink()
    for k in changed & set(before):
        (sandbox / k).write_bytes(before[k])
    for d in sorted((p for p in sandbox.rglob("*") if p.is_dir() and not p.is_symlink()), reverse=True):
        if not any(d.iterdir()) and d.name not in ("adir", "parts", "tune"):
            d.rmdir()


@pytest.mark.slow
def test_kaplan_writes_nothing_into_a_store_and_says_where_it_wrote(tiny, tmp_path):  # noqa: F811
    """`kaplan STORE` leaves the store as it was (a sweep's analysis would delete files there), says
    where it wrote, gives a reason for an exponent it could not fit, and without DIR says what it
    needs in one sentence."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(tiny / "stores" / "tiny", store, symlinks=True)
    before = snapshot(store)
    r = cli("kaplan", store, "--bootstrap", "5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "store_kaplan"
    assert r.stdout.strip().splitlines()[-1] == (
        f"compared the report in {folder}; wrote kaplan.md, kaplan.json into {folder}"
    )
    assert snapshot(store) == before and not (store / "analysis").exists()
    row = next(x for x in (folder / "kaplan.md").read_text().splitlines() if x.startswith("| alpha_S |"))
    assert "– –" not in row and ("[" in row or "not fitted: " in row), row
    assert "inside the results store" in sentence(cli("kaplan", store, "--out", store / "k", cwd=tmp_path))
    for args in (["kaplan"], ["kaplan", store, "--out", ""], ["analyze", store, "--out", ""]):
        msg = sentence(cli(*args, cwd=tmp_path))
        assert (
            msg.startswith("kaplan needs DIR")
            or msg == "--out = '' is invalid: it names no folder; give a path."
        )
    assert snapshot(store) == before


def test_a_file_where_the_outputs_folder_goes_is_named_a_file(tmp_path):
    (tmp_path / "afile").write_text("f")
    target = tmp_path / "afile" / "out.csv"
    r = cli("seprank", "--depth", "1", "--width", "2", "--out", target)
    assert (
        sentence(r)
        == f"--out = {str(target)!r} is invalid: {str(tmp_path / 'afile')!r} is a file, not a folder."
    )
