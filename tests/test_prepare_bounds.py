"""`depthwidth data prepare` within bounds and with clear messages (docs/rules.md, "Bounds of data
prepare" and "What data prepare refuses"): a document of any length reaches the tokenizer in
pieces of at most MAX_PIECE characters cut at whitespace, a corpus that can never be split is
refused before any training, Ctrl-C and SIGTERM stop training and encoding and leave nothing
(the next run removes what a killed one left), progress shows an ETA, and each malformed input
is one sentence, exit code 2, or the right result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import EXE, cli, sentence
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_data_prepare import documents, read_split

pytest.importorskip("tokenizers")

from depthwidth.data import corpus as corpus_module  # noqa: E402
from depthwidth.data.corpus import Corpus  # noqa: E402
from depthwidth.data.tokenmeta import verify  # noqa: E402

WORDS = np.array("alpha beta gamma delta eps zeta eta theta iota kappa lambda mu".split())


def _line(n_chars: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, n_chars // 5))[:n_chars]


def _words(path: Path, mb: float, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(4000)])
    path.write_text("\n\n".join(" ".join(rng.choice(vocab, 40)) for _ in range(int(mb * 1e6 / 200))))
    return path


# -- class 6: bounds -------------------------------------------------------------------------------
def _reference_docs(text: str, limit: int) -> list[str]:
    """One text file's documents: runs of lines that are not blank (whitespace alone, at most
    `limit` characters with the newline); a byte-order mark at the start is dropped."""
    docs, current = [], []
    parts = text.removeprefix("\ufeff").split("\n")
    for line in [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else []):
        if not line.strip() and len(line) <= limit:
            if current:
                docs.append("".join(current))
            current = []
        else:
            current.append(line)
    if current:
        docs.append("".join(current))
    return docs


TEXT = st.text(alphabet=st.sampled_from(list("ab c\n\n\t é中")), max_size=400) | st.builds(
    lambda n, k: ("x" * n + "\n\n") * k, st.integers(0, 90), st.integers(0, 3)
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT)
def test_every_piece_is_bounded_cut_at_whitespace_and_documents_are_kept_whole(tmp_path, monkeypatch, text):
    """For any text (long lines, no newlines, runs of whitespace, multi-byte characters), read in
    parts of 8 bytes with pieces of at most 32 characters: each document's pieces give back its
    text exactly, no piece is longer than the limit, and a piece is cut before whitespace
    wherever its window holds some."""
    monkeypatch.setattr(corpus_module, "MAX_PIECE", 32)
    monkeypatch.setattr(corpus_module, "READ_BYTES", 8)
    f = tmp_path / "c.txt"
    f.write_bytes(text.encode())
    if not f.stat().st_size:
        return
    pieces = list(Corpus(str(f)).pieces())
    assert all(0 < len(p.text) <= 32 for p in pieces)
    docs: dict[int, list[str]] = {}
    for p in pieces:
        docs.setdefault(p.doc, []).append(p.text)
    assert list(docs) == list(range(len(docs)))  # documents numbered in order, none skipped
    assert ["".join(parts) for parts in docs.values()] == _reference_docs(text, 32)
    for parts in docs.values():
        for head, nxt in zip(parts, parts[1:]):  # cut before whitespace, or hard where there is none
            assert nxt[0] in " \n\t" or (len(head) == 32 and not any(c in " \n\t" for c in head[16:]))


def _peak_rss_mb(*args) -> tuple[subprocess.CompletedProcess, float]:
    """Run the console script in a child of a fresh Python, which reports its child's peak RSS."""
    probe = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr); "
        "print('RSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe, EXE, *map(str, args)], capture_output=True, text=True, timeout=600
    )
    rss = float(r.stdout.rsplit("RSS", 1)[1]) / 1024
    return r, rss


@pytest.mark.slow
def test_one_long_line_is_prepared_in_bounded_memory_with_progress(tmp_path):
    """A 4 MB line (one document) beside 400 short ones: memory does not grow with the line (whole,
    it took about 0.7 GB; in pieces under 0.3 GB), and encoding shows the MB done with an ETA."""
    c = tmp_path / "line.txt"
    c.write_text(_line(4_000_000) + "".join(f"\n\nshort doc {i} alpha beta" for i in range(400)))
    r, rss = _peak_rss_mb(
        "data", "prepare", c, "--out", tmp_path / "p", "--vocab", 300, "--val-fraction", 0.2
    )
    assert r.returncode == 0, r.stderr
    assert rss < 500, rss
    assert "data: encoding: " in r.stderr and " elapsed, ETA " in r.stderr, r.stderr
    meta = verify(tmp_path / "p" / "meta.json")
    assert meta["documents"] == 401


def test_a_corpus_that_can_never_be_split_is_refused_before_any_training(tmp_path):
    """One document (a line without end) is refused on the first pass, without a BPE."""
    c = tmp_path / "one.txt"
    c.write_text(_line(3_000_000))
    t0 = time.monotonic()
    r = cli("data", "prepare", c, "--out", tmp_path / "p", "--vocab", 300)
    assert sentence(r) == (
        f"--val-fraction = 0.005 is invalid for CORPUS = {str(c)!r}: none of its 1 documents went to the "
        f"val split; a split by document needs a larger fraction or more documents."
    )
    assert "training" not in r.stderr and time.monotonic() - t0 < 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.txt"]


def _stop_after(args: list, marker: str, sig: int, cwd: Path) -> tuple[int, str, float]:
    p = subprocess.Popen([EXE, *map(str, args)], stderr=subprocess.PIPE, text=True, cwd=cwd)
    seen = []
    for line in p.stderr:
        seen.append(line)
        if marker in line:
            break
    time.sleep(0.2)  # inside the Rust call that the marker line announces
    t0 = time.monotonic()
    p.send_signal(sig)
    rest = p.communicate(timeout=120)[1]
    return p.returncode, "".join(seen) + rest, time.monotonic() - t0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_bpe_training_at_once_and_leaves_nothing(tmp_path, sig):
    """Ctrl-C and SIGTERM while the BPE trains (Rust code) end the run within seconds,
    with one line and the working folder removed."""
    corpus = _words(tmp_path / "c.txt", 6)
    code, err, took = _stop_after(
        ["data", "prepare", corpus, "--out", tmp_path / "out", "--vocab", 2000], "training", sig, tmp_path
    )
    assert code == 128 + sig and took < 10, (code, took, err)
    assert (
        err.strip().splitlines()[-1]
        == f"depthwidth: data prepare stopped (exit {128 + sig}); nothing was written."
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_ctrl_c_stops_encoding_and_the_next_run_removes_what_a_killed_one_left(tmp_path):
    """Ctrl-C while encoding with a given tokenizer; a `.NAME.prepare-<pid>` folder of a process
    that is gone is removed by the next run into the same folder, one of a live process kept."""
    small = tmp_path / "small.txt"
    small.write_text("\n\n".join(documents(60)))
    assert (
        cli(
            "data", "prepare", small, "--out", tmp_path / "tok", "--vocab", 300, "--val-fraction", 0.2
        ).returncode
        == 0
    )
    corpus = _words(tmp_path / "c.txt", 8)
    code, err, took = _stop_after(
        [
            "data",
            "prepare",
            corpus,
            "--out",
            tmp_path / "out",
            "--tokenizer",
            tmp_path / "tok" / "tokenizer.json",
        ],
        "encoding with",
        signal.SIGINT,
        tmp_path,
    )
    assert code == 130 and took < 10, (code, took, err)
    assert not (tmp_path / "out").exists() and not [p for p in tmp_path.iterdir() if "prepare-" in p.name]
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / f".out.prepare-{gone.pid}" / "x").mkdir(parents=True)
    (tmp_path / f".other.prepare-{os.getpid()}").mkdir()  # this test's own process: alive
    r = cli("data", "prepare", small, "--out", tmp_path / "out", "--vocab", 300, "--val-fraction", 0.2)
    assert r.returncode == 0, r.stderr
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert left == [f".other.prepare-{os.getpid()}"]


def test_a_killed_runs_folder_under_this_very_pid_is_no_obstacle(tmp_path):
    """A pid comes back (a container's first processes): the folder a killed run left under the
    pid of this one is this output's, and the claim's lock says no live run owns it."""
    from depthwidth.data.prepare import Request, prepare

    small = tmp_path / "small.txt"
    small.write_text("\n\n".join(documents(60)))
    (tmp_path / f".out.prepare-{os.getpid()}" / "x").mkdir(parents=True)
    meta = prepare(Request(corpus=str(small), out=str(tmp_path / "out"), vocab=300, val_fraction=0.2))
    assert meta["train"]["tokens"] > 0 and (tmp_path / "out" / "meta.json").is_file()
    assert not [p.name for p in tmp_path.iterdir() if "prepare-" in p.name]


# -- class 7: crashes and messages -----------------------------------------------------------------
def _refused(tmp_path: Path, *args) -> str:
    before = sorted(p.name for p in tmp_path.iterdir())
    msg = sentence(cli("data", "prepare", *args, "--out", tmp_path / "out", cwd=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    return msg


def test_each_malformed_input_is_one_sentence(tmp_path):
    """A lone surrogate, a tokenizer whose regex panics in Rust, all documents to validation, a
    .json array, --sample-mb 0, negative, NaN or infinite."""
    (tmp_path / "surr.jsonl").write_text('{"text":"\\ud800 lone surrogate"}\n{"text":"ok doc"}\n')
    msg = _refused(tmp_path, tmp_path / "surr.jsonl", "--vocab", 300, "--val-fraction", 0.5)
    assert "line 1 of" in msg and "not valid Unicode (the lone surrogate '\\ud800' at character 0)" in msg
    redos = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Split",
            "pattern": {"Regex": "(a+)+$"},
            "behavior": "Isolated",
            "invert": False,
        },
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1}, "unk_token": "[UNK]"},
    }
    (tmp_path / "redos.json").write_text(json.dumps(redos))
    (tmp_path / "redos.txt").write_text(("a" * 30 + "b\n\n") * 4)
    msg = _refused(
        tmp_path, tmp_path / "redos.txt", "--tokenizer", tmp_path / "redos.json", "--val-fraction", 0.5
    )
    assert msg.startswith(
        f"--tokenizer = {str(tmp_path / 'redos.json')!r} is invalid: the tokenizer fails on "
    )
    assert "line 1 (Onig: Regex search error" in msg
    (tmp_path / "c.txt").write_text("\n\n".join(documents(50)))
    msg = _refused(tmp_path, tmp_path / "c.txt", "--vocab", 300, "--val-fraction", 0.9999)
    assert (
        "--val-fraction = 0.9999 is invalid" in msg
        and "none of its 50 documents went to the train split" in msg
    )
    (tmp_path / "array.json").write_text('[\n {"text": "first doc"},\n {"text": "second doc"}\n]\n')
    msg = _refused(tmp_path, tmp_path / "array.json", "--vocab", 300, "--val-fraction", 0.5)
    assert "is read as JSON lines, one record per line, and this one is one JSON document" in msg
    for value in ("0", "-5", "nan", "inf"):
        msg = _refused(tmp_path, tmp_path / "c.txt", "--vocab", 300, f"--sample-mb={value}")
        assert msg == f"--sample-mb = {float(value):g} is invalid: it must be a finite number of MB above 0."


def _tokenizer(tmp_path: Path, name: str, vocab: dict, **extra) -> Path:
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
        **extra,
    }
    (tmp_path / name).write_text(json.dumps(doc))
    return tmp_path / name


def test_what_a_given_tokenizer_makes_is_what_is_stored(tmp_path):
    """Ids of 65,536 and more in a tokenizer of few entries are stored whole (uint32, the
    vocabulary its largest id + 1), never wrapped; its truncation and padding are switched off, so
    every document is encoded whole; a JSONL byte-order mark is skipped."""
    (tmp_path / "tiny3.txt").write_text("the and the cat\n\nand the dog\n\nthe the the\n\n")
    sparse = _tokenizer(tmp_path, "sparse.json", {"[UNK]": 0, "the": 70000, "and": 5000, "</s>": 3})
    r = cli(
        "data",
        "prepare",
        tmp_path / "tiny3.txt",
        "--out",
        tmp_path / "s",
        "--tokenizer",
        sparse,
        "--val-fraction",
        0.5,
    )
    assert r.returncode == 0, r.stderr
    meta = verify(tmp_path / "s" / "meta.json")
    assert (meta["vocab_size"], meta["dtype"]) == (70001, "uint32")
    ids = np.concatenate([read_split(tmp_path / "s", s) for s in ("train", "val")])
    assert sorted(set(ids.tolist())) == [0, 3, 5000, 70000]
    vocab = {
        "[UNK]": 0,
        "</s>": 1,
        **{w: 2 + i for i, w in enumerate(sorted(set(" ".join(documents(40)).split())))},
    }
    plain = _tokenizer(tmp_path, "plain.json", vocab)
    cut = _tokenizer(
        tmp_path,
        "cut.json",
        vocab,
        truncation={"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 0},
        padding={
            "strategy": {"Fixed": 64},
            "direction": "Right",
            "pad_to_multiple_of": None,
            "pad_id": 0,
            "pad_type_id": 0,
            "pad_token": "[UNK]",
        },
    )
    (tmp_path / "c.txt").write_text("\n\n".join(documents(40)))
    for name, tok in (("plain", plain), ("cut", cut)):
        r = cli(
            "data",
            "prepare",
            tmp_path / "c.txt",
            "--out",
            tmp_path / name,
            "--tokenizer",
            tok,
            "--val-fraction",
            0.3,
        )
        assert r.returncode == 0, r.stderr
    assert "the tokenizer's truncation and padding switched off: every document is encoded whole" in r.stderr
    for s in ("train", "val"):
        assert np.array_equal(read_split(tmp_path / "plain", s), read_split(tmp_path / "cut", s))
    (tmp_path / "bom.jsonl").write_bytes(
        b'\xef\xbb\xbf{"text":"first doc"}\n{"text":"second doc"}\n{"text":"third doc"}\n'
    )
    r = cli(
        "data",
        "prepare",
        tmp_path / "bom.jsonl",
        "--out",
        tmp_path / "b",
        "--vocab",
        300,
        "--val-fraction",
        0.5,
    )
    assert r.returncode == 0, r.stderr
    assert verify(tmp_path / "b" / "meta.json")["documents"] == 3


def test_a_small_validation_split_is_warned_about(tmp_path):
    """A validation split too small to measure a loss well is said to be so."""
    (tmp_path / "c.txt").write_text("\n\n".join(documents(200)))
    r = cli(
        "data", "prepare", tmp_path / "c.txt", "--out", tmp_path / "p", "--vocab", 300, "--val-fraction", 0.05
    )
    assert r.returncode == 0, r.stderr
    held = verify(tmp_path / "p" / "meta.json")["val"]["tokens"]
    warning = [x for x in r.stderr.splitlines() if x.startswith("data: warning: ")]
    assert warning == [
        f"data: warning: the val split holds only {held:,} tokens, fewer than 100,000: a validation "
        f"loss measured on so few is noisy (evaluation windows overlap and repeat them); a larger "
        f"--val-fraction, or a corpus of more documents, holds more out."
    ]


# -- the property of class 7: any JSON lines in, one sentence or valid data out --------------------
RECORD = st.one_of(
    st.fixed_dictionaries({"text": st.text(max_size=60)}),
    st.fixed_dictionaries({"text": st.none() | st.integers() | st.lists(st.text(max_size=3), max_size=2)}),
    st.dictionaries(st.text(max_size=4), st.text(max_size=8), max_size=2),
    st.text(max_size=10),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(RECORD, min_size=1, max_size=12),
    raw=st.sampled_from(["", "\ufeff", "{", "[1,", '"\\udc80"', "[" * 5000]),
    where=st.integers(0, 12),
)
def test_any_json_lines_are_refused_with_one_sentence_or_prepared_whole(
    tmp_path_factory, capsys, records, raw, where
):
    from depthwidth.cli import main

    folder = tmp_path_factory.mktemp("jsonl")
    lines = [json.dumps(r) for r in records]
    lines.insert(min(where, len(lines)), raw)  # a broken, odd or empty line somewhere
    (folder / "c.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    code = main(
        [
            "data",
            "prepare",
            str(folder / "c.jsonl"),
            "--out",
            str(folder / "p"),
            "--vocab",
            "260",
            "--val-fraction",
            "0.5",
        ]
    )
    err = capsys.readouterr().err
    if code == 2:
        lines = [x for x in err.splitlines() if not x.startswith("data: ")]
        assert len(lines) == 1 and lines[0].startswith("depthwidth: error: ") and "Traceback" not in err, err
        assert sorted(p.name for p in folder.iterdir()) == ["c.jsonl"]
        return
    assert code == 0, err
    meta = verify(folder / "p" / "meta.json")
    assert meta["train"]["documents"] >= 1 and meta["val"]["documents"] >= 1
