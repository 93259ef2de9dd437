"""Data sources: the seeded PCFG language, UTF-8 text as bytes, uint16 token files.

Determinism is checked across fresh processes (not against a stored checksum); structure is
checked against what the grammar construction guarantees (depth bound, matched brackets,
the dynamic-programming mean length); the text and token sources against the files' bytes.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from depthwidth.config import DataConfig
from depthwidth.data import DataError, make_data
from depthwidth.data.base import entropy_of_counts

torch.set_num_threads(1)
PCFG = DataConfig()  # the embedded default


def _sentences(tokens: np.ndarray) -> list[np.ndarray]:
    """Complete sentences (EOS = 0 removed) of a flat stream that starts at a sentence start."""
    ends = np.flatnonzero(tokens == 0)
    return [tokens[a + 1 : b] for a, b in zip(np.concatenate([[-1], ends[:-1]]), ends)]


# ---------------------------------------------------------------- PCFG: the batch contract


def test_pcfg_batch_shapes_dtypes_shift_and_range():
    src = make_data(PCFG, 48)
    x, y = src.batch("train", 0, 8)
    assert x.shape == y.shape == (8, 48)
    assert x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])  # y is the next token of x
    assert int(x.min()) >= 0 and int(torch.cat([x, y]).max()) < src.vocab_size == PCFG.vocab_size
    assert (x == 0).any(), "sentences end with EOS (token 0) inside a 48-token window"
    assert "\n" not in src.describe() and "PCFG" in src.describe()


def test_pcfg_same_seed_same_batch_and_every_input_matters():
    a, b = make_data(PCFG, 32), make_data(PCFG, 32)
    xa, ya = a.batch("train", 7, 4)
    xb, yb = b.batch("train", 7, 4)
    assert torch.equal(xa, xb) and torch.equal(ya, yb)
    b.batch("train", 3, 4)  # history must not matter: a batch is a function of its index
    assert torch.equal(b.batch("train", 7, 4)[0], xa)
    assert not torch.equal(a.batch("train", 8, 4)[0], xa)
    assert not torch.equal(a.batch("val", 7, 4)[0], xa)
    assert not torch.equal(make_data(PCFG.replace(seed=1), 32).batch("train", 7, 4)[0], xa)


_HASH_SNIPPET = """
import hashlib, sys
from depthwidth.config import DataConfig
from depthwidth.data import make_data
h = hashlib.sha256()
for cfg in (DataConfig(), DataConfig(seed=3, vocab_size=300, pcfg_depth=8, branching=4)):
    src = make_data(cfg, 40)
    for split in ("train", "val"):
        for i in (0, 1, 12345):
            x, y = src.batch(split, i, 5)
            h.update(x.numpy().tobytes()); h.update(y.numpy().tobytes())
h.update(repr(make_data(DataConfig(), 40).unigram_entropy()).encode())
print(h.hexdigest())
"""


def test_pcfg_stream_identical_in_fresh_processes():
    # Two interpreters with different string-hash seeds: nothing may depend on hash() or on
    # anything a process picks for itself.
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _HASH_SNIPPET],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONHASHSEED=hash_seed),
        )
        for hash_seed in ("1", "2")
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out.strip())
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):  # and this long-lived process, with its own history
        exec(_HASH_SNIPPET, {})
    assert outs[0] == outs[1] == buf.getvalue().strip() and len(outs[0]) == 64


# ---------------------------------------------------------------- PCFG: the language itself


def test_pcfg_unigram_entropy_below_log_vocab_and_matches_batches():
    src = make_data(PCFG, 128)
    h = src.unigram_entropy()
    assert 0.0 < h < math.log(PCFG.vocab_size) - 0.5  # Zipf-skewed words, well below uniform
    assert src.unigram_entropy() == h  # cached, not resampled
    y = torch.cat([src.batch("train", i, 32)[1] for i in range(50)]).numpy().ravel()
    assert abs(entropy_of_counts(np.bincount(y, minlength=src.vocab_size)) - h) < 0.03
    # The derivation entropy per token bounds the best achievable loss: far below unigram.
    assert src.grammar.entropy_bound < h - 1.0


def test_pcfg_context_predicts_held_out_tokens():
    """A bigram model fitted on train batches beats the unigram model on val batches."""
    src = make_data(PCFG, 128)
    V = src.vocab_size
    counts = np.ones((V, V))  # add-one smoothing
    for i in range(60):
        x, y = src.batch("train", i, 32)
        np.add.at(counts, (x.numpy().ravel(), y.numpy().ravel()), 1)
    cond = counts / counts.sum(1, keepdims=True)
    uni = counts.sum(0) / counts.sum()
    x, y = (t.numpy().ravel() for t in src.batch("val", 0, 64))
    bigram_loss = -np.log(cond[x, y]).mean()
    unigram_loss = -np.log(uni[y]).mean()
    assert bigram_loss < unigram_loss - 0.3


def test_pcfg_depth_bound_by_hand():
    # pcfg_depth = 1: S sits at the bound and emits one word.  pcfg_depth = 2: S takes one of
    # its rules (2..branching nonterminals), each of which is at the bound and emits one word.
    for depth, lo, hi in ((1, 1, 1), (2, 2, 3)):
        src = make_data(PCFG.replace(pcfg_depth=depth, branching=3), 64)
        g = src.grammar
        sents = _sentences(g.sentences(np.random.default_rng(0), 500))
        lens = np.array([len(s) for s in sents])
        assert len(sents) == 500 and lens.min() == lo and lens.max() == hi
        words = np.concatenate(sents)
        assert words.min() >= g.first_word  # only words: brackets need deeper trees
        for row in src.batch("train", 0, 4)[0].numpy():
            gaps = np.diff(np.flatnonzero(row == 0)) - 1  # whole sentences inside the row
            assert gaps.min() >= lo and gaps.max() <= hi


def test_pcfg_brackets_are_matched_and_long_range():
    src = make_data(PCFG, 64)
    g = src.grammar
    assert g.n_brackets == 4
    spans = []
    for sent in _sentences(g.sentences(np.random.default_rng(1), 3000)):
        stack = []
        for pos, t in enumerate(sent):
            if 1 <= t <= g.n_brackets:
                stack.append((t, pos))
            elif g.n_brackets < t <= 2 * g.n_brackets:
                assert stack, "a closing bracket with nothing open"
                opened, start = stack.pop()
                assert t == opened + g.n_brackets, "closing bracket of the wrong kind"
                spans.append(pos - start)
        assert not stack, "a sentence ended with an open bracket"
    assert len(spans) > 300 and max(spans) >= 20  # matched pairs that span many tokens


def test_pcfg_sampled_length_matches_dynamic_programming():
    for cfg in (PCFG, PCFG.replace(seed=5, pcfg_depth=4, branching=4, n_nonterminals=10)):
        g = make_data(cfg, 64).grammar
        s = g.sentences(np.random.default_rng(2), 20000)
        assert len(s) / 20000 == pytest.approx(g.mean_len, rel=0.03)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(vocab_size=2, n_nonterminals=1, pcfg_depth=1),
        dict(vocab_size=8, n_nonterminals=3),
        dict(vocab_size=1000, n_nonterminals=40, branching=2),
        dict(n_nonterminals=1, pcfg_depth=9),
    ],
)
def test_pcfg_edge_configs_give_valid_batches(overrides):
    src = make_data(PCFG.replace(**overrides), 33)
    x, y = src.batch("val", 2, 3)
    assert x.shape == (3, 33) and 0 <= int(x.min()) and int(y.max()) < src.vocab_size
    assert 0.0 <= src.unigram_entropy() <= math.log(src.vocab_size) + 1e-9


# ---------------------------------------------------------------- text and token files


def _random_text(n: int, seed: int = 0) -> bytes:
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz  \n", dtype=np.uint8)
    return letters[np.random.default_rng(seed).integers(0, len(letters), n)].tobytes()


def test_text_file_windows_come_from_their_split(tmp_path):
    text = _random_text(4000)
    (tmp_path / "t.txt").write_bytes(text)
    src = make_data(DataConfig(source="text", path=str(tmp_path / "t.txt"), val_fraction=0.25), 24)
    n_train = 3000
    assert src.vocab_size == 256 and "\n" not in src.describe()
    for split in ("train", "val"):
        x, y = src.batch(split, 0, 16)
        assert x.shape == y.shape == (16, 24) and x.dtype == torch.int64
        assert torch.equal(x[:, 1:], y[:, :-1])
        for row_x, row_y in zip(x, y):
            window = bytes(row_x.tolist() + [int(row_y[-1])])
            at = text.find(window)  # 25 random letters: a unique place in the text
            assert at >= 0
            assert (at >= n_train) if split == "val" else (at + 25 <= n_train)
    assert not torch.equal(src.batch("train", 1, 16)[0], src.batch("train", 0, 16)[0])
    assert torch.equal(src.batch("val", 4, 16)[0], src.batch("val", 4, 16)[0])


def test_text_unigram_entropy_by_hand(tmp_path):
    (tmp_path / "ab.txt").write_text("ab" * 500 + "c" * 100)  # val = the last 110 bytes
    src = make_data(DataConfig(source="text", path=str(tmp_path / "ab.txt")), 8)
    assert src.unigram_entropy() == pytest.approx(math.log(2), abs=1e-12)  # 495 a, 495 b


def test_text_folder_sorted_concatenation(tmp_path):
    for name, ch in (("b.txt", "B"), ("a.txt", "A"), (".hidden", "H"), ("sub/c.txt", "C")):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(ch * 600)
    src = make_data(DataConfig(source="text", path=str(tmp_path), val_fraction=0.25), 32)
    # 1800 bytes: train = A*600 B*600 C*150, val = C*450; the hidden file is skipped.
    val = bytes(src.batch("val", 0, 8)[0].flatten().tolist())
    assert set(val) == {ord("C")}
    seen = set()
    for i in range(20):
        rows = src.batch("train", i, 16)[0].tolist()
        for row in rows:
            s = bytes(row).decode()
            assert "H" not in s and "BA" not in s and "CB" not in s and "AC" not in s
            seen.update(s)
    assert seen == {"A", "B", "C"}
    p = np.array([600, 600, 150]) / 1350
    assert src.unigram_entropy() == pytest.approx(-(p * np.log(p)).sum(), abs=1e-12)


def test_real_english_text(shared_data):
    path = shared_data / "tinyshakespeare.txt"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    raw = path.read_bytes()
    src = make_data(DataConfig(source="text", path=str(path)), 64)
    x, y = src.batch("train", 0, 8)
    for row_x, row_y in zip(x, y):
        assert raw.find(bytes(row_x.tolist() + [int(row_y[-1])])) >= 0
    n_train = len(raw) - int(round(len(raw) * 0.1))
    counts = np.bincount(np.frombuffer(raw[:n_train], dtype=np.uint8), minlength=256)
    p = counts[counts > 0] / n_train
    assert src.unigram_entropy() == pytest.approx(float(-(p * np.log(p)).sum()), rel=1e-12)
    assert src.unigram_entropy() < math.log(256) - 1.0  # English letters are far from uniform


def test_token_file_windows_and_vocab(tmp_path):
    n = 20000
    np.arange(n, dtype=np.uint16).tofile(tmp_path / "train.bin")  # token value = its position
    src = make_data(DataConfig(source="tokens", path=str(tmp_path / "train.bin")), 50)
    assert src.vocab_size == n  # max token + 1
    n_train = n - 2000
    for split in ("train", "val"):
        x, y = src.batch(split, 3, 32)
        assert x.shape == (32, 50) and x.dtype == torch.int64
        assert torch.equal(y, x + 1)  # consecutive tokens: the target is the next position
        start = x[:, 0]
        if split == "train":
            assert int((start + 51).max()) <= n_train
        else:
            assert int(start.min()) >= n_train
    assert src.unigram_entropy() == pytest.approx(math.log(n_train), rel=1e-12)


def test_token_file_large_values(tmp_path):
    toks = np.full(300, 7, dtype=np.uint16)
    toks[5] = 65535
    toks.tofile(tmp_path / "t.bin")
    src = make_data(DataConfig(source="tokens", path=str(tmp_path / "t.bin")), 10)
    assert src.vocab_size == 65536
    assert int(src.batch("train", 0, 64)[0].max()) <= 65535


# ---------------------------------------------------------------- errors: one sentence each


def _expect(cfg: DataConfig, seq_len: int, *parts: str) -> None:
    with pytest.raises(DataError) as info:
        make_data(cfg, seq_len)
    msg = str(info.value)
    assert msg.endswith(".") and "\n" not in msg  # one sentence
    for part in parts:
        assert part in msg, (part, msg)


def test_data_errors_name_the_field_and_value(tmp_path):
    missing = str(tmp_path / "nope.txt")
    _expect(DataConfig(source="text", path=missing), 8, "DataConfig.path", repr(missing), "does not exist")
    _expect(DataConfig(source="tokens", path=missing), 8, "DataConfig.path", repr(missing), "does not exist")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    _expect(DataConfig(source="text", path=str(empty)), 8, repr(str(empty)), "empty file")
    _expect(DataConfig(source="tokens", path=str(empty)), 8, repr(str(empty)), "empty file")
    (tmp_path / "nofiles").mkdir()
    _expect(DataConfig(source="text", path=str(tmp_path / "nofiles")), 8, "folder with no files")
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "a.txt").write_bytes(b"")
    _expect(DataConfig(source="text", path=str(tmp_path / "blank")), 8, "folder of empty files")
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café au lait".encode("latin-1"))
    _expect(DataConfig(source="text", path=str(latin)), 4, repr(str(latin)), "not UTF-8", "offset 3")
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x01\x00\x02")
    _expect(DataConfig(source="tokens", path=str(odd)), 1, repr(str(odd)), "3 bytes", "multiple of 2")
    _expect(DataConfig(source="tokens", path=str(tmp_path)), 8, repr(str(tmp_path)), "is a folder")
    short = tmp_path / "short.txt"
    short.write_text("x" * 1000)  # val split: 100 bytes
    _expect(
        DataConfig(source="text", path=str(short)),
        100,
        "seq_len = 100",
        "longer than the data",
        "val split",
        "100 bytes",
    )
    np.arange(50, dtype=np.uint16).tofile(tmp_path / "short.bin")
    _expect(
        DataConfig(source="tokens", path=str(tmp_path / "short.bin"), val_fraction=0.5),
        30,
        "seq_len = 30",
        "longer than the data",
        "25 tokens",
    )


def test_bad_batch_requests_are_named():
    src = make_data(PCFG, 16)
    for args, part in (
        (("test", 0, 2), "split = 'test'"),
        (("train", -1, 2), "index = -1"),
        (("train", 0, 0), "batch_size = 0"),
        (("val", 1.5, 2), "index = 1.5"),
    ):
        with pytest.raises(DataError, match="=") as info:
            src.batch(*args)
        assert part in str(info.value)
