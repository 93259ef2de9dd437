"""`depthwidth data prepare` through the real console script in a subprocess: text files, a folder,
JSONL and a given tokenizer.json in; train.bin, val.bin (uint16, or uint32 for a vocabulary above
65,536) and meta.json out, split by document and read back by the token-file reader; the
identity a trial_id hashes; and each bad input refused with one sentence, exit 2, nothing written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import cli, run_sweep, sentence, spec_toml, write_spec

pytest.importorskip("tokenizers")

from depthwidth.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from depthwidth.data import make_data  # noqa: E402

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards box and quietly hum".split()


def documents(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(20, 60)))) + f" doc{i}." for i in range(n)]


def read_split(folder: Path, name: str) -> np.ndarray:
    meta = json.loads((folder / "meta.json").read_text())
    return np.fromfile(folder / f"{name}.bin", dtype={"uint16": "<u2", "uint32": "<u4"}[meta["dtype"]])


def test_a_folder_of_text_files_splits_by_document_and_reads_back(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    docs = documents(60)
    for i, d in enumerate(docs):
        (corpus / f"{i:03d}.txt").write_text(d)
    out = tmp_path / "prepared"
    r = cli("data", "prepare", corpus, "--out", out, "--vocab", 300, "--val-fraction", 0.2)
    assert r.returncode == 0, r.stderr
    assert "data: encoding" in r.stderr  # progress goes to stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["vocab_size"] == 300 and meta["dtype"] == "uint16" and meta["eot_id"] == 0
    assert meta["documents"] == 60 == meta["train"]["documents"] + meta["val"]["documents"]
    assert 0 < meta["val"]["documents"] < 30
    train, val = read_split(out, "train"), read_split(out, "val")
    assert (meta["train"]["tokens"], meta["val"]["tokens"]) == (len(train), len(val))
    # each document starts with the end-of-text token: the split is by document, never inside one
    assert (train == 0).sum() == meta["train"]["documents"] and (val == 0).sum() == meta["val"]["documents"]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    held = {
        d.split()[-1] for d in tok.decode(val.tolist(), skip_special_tokens=False).split("<|endoftext|>") if d
    }
    kept = {
        d.split()[-1]
        for d in tok.decode(train.tolist(), skip_special_tokens=False).split("<|endoftext|>")
        if d
    }
    assert not held & kept and len(held | kept) == 60
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left
    src = make_data(DataConfig(source="tokens", path=str(out)), 16)
    assert src.vocab_size == 300 and len(src.splits["val"]) == len(val)
    x, y = src.batch("val", 0, 4)
    assert x.shape == (4, 16) and int(x.max()) < 300
    # the same corpus prepared again is the same data: same tokens, same identity
    again = tmp_path / "again"
    assert (
        cli("data", "prepare", corpus, "--out", again, "--vocab", 300, "--val-fraction", 0.2).returncode == 0
    )
    assert json.loads((again / "meta.json").read_text())["hash"] == meta["hash"]


def test_jsonl_with_a_given_tokenizer_and_uint32_for_a_large_vocabulary(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "<|endoftext|>": 1, **{w: 70_000 + i for i, w in enumerate(WORDS)}}
    vocab.update({f"filler{i}": 2 + i for i in range(69_990)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(tmp_path / "words.json"))
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "body": d}) + "\n" for i, d in enumerate(documents(40))))
    out = tmp_path / "wide"
    r = cli(
        "data",
        "prepare",
        jsonl,
        "--field",
        "body",
        "--tokenizer",
        tmp_path / "words.json",
        "--out",
        out,
        "--val-fraction",
        0.2,
    )
    assert r.returncode == 0, r.stderr
    meta = json.loads((out / "meta.json").read_text())
    # the vocabulary is its largest id + 1 (the ids skip 69,992 .. 69,999, so more than its size)
    assert meta["vocab_size"] == max(vocab.values()) + 1 > len(vocab) > 65536
    assert meta["dtype"] == "uint32" and meta["eot_id"] == 1
    assert (
        meta["tokenizer_sha256"]
        == __import__("hashlib").sha256((tmp_path / "words.json").read_bytes()).hexdigest()
    )
    train = read_split(out, "train")
    assert train.max() >= 70_000 and (out / "train.bin").stat().st_size == 4 * len(train)
    src = make_data(DataConfig(source="tokens", path=str(out)), 8)
    assert src.vocab_size == meta["vocab_size"] and int(src.batch("train", 0, 8)[0].max()) >= 70_000
    # one token file alone, beside its meta.json: the dtype and vocabulary still come from it
    one = make_data(DataConfig(source="tokens", path=str(out / "train.bin")), 8)
    assert one.vocab_size == meta["vocab_size"] and len(one.splits["train"]) + len(one.splits["val"]) == len(
        train
    )


def test_a_trial_id_hashes_the_prepared_data_identity(tmp_path):
    from sweeps.plans import datapath
    from sweeps.plans.spec import trial_id_of

    for name, seed in (("a", 0), ("b", 1)):
        (tmp_path / f"{name}.txt").write_text("\n\n".join(documents(30, seed)))
        r = cli(
            "data",
            "prepare",
            tmp_path / f"{name}.txt",
            "--out",
            tmp_path / name,
            "--vocab",
            280,
            "--val-fraction",
            0.3,
        )
        assert r.returncode == 0, r.stderr
    ids = {}
    for name in ("a", "b"):
        meta = json.loads((tmp_path / name / "meta.json").read_text())
        assert datapath.identity(str(tmp_path / name)) == f"prepared:{meta['hash']}"
        assert datapath.identity(str(tmp_path / name / "train.bin")) == f"prepared:{meta['hash']}:train.bin"
        data = DataConfig(source="tokens", path=str(tmp_path / name))
        ids[name] = trial_id_of(ModelConfig(), data, TrainConfig(), datapath.identity(data.path))
    assert ids["a"] != ids["b"]
    # a bare token file (no meta.json) keeps the content hash its stores' ids were made from
    bare = tmp_path / "bare"
    bare.mkdir()
    np.arange(100, dtype=np.uint16).tofile(bare / "t.bin")
    digest = __import__("hashlib").sha256((bare / "t.bin").read_bytes()).hexdigest()
    assert datapath.identity(str(bare / "t.bin")) == f"sha256:{digest}"


def _refused(tmp_path: Path, *args, out: Path | None = None) -> str:
    out = out or tmp_path / "new" / "out"
    before = sorted(p.name for p in tmp_path.iterdir())
    msg = sentence(cli("data", "prepare", *args, "--out", out))
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no temp folder
    return msg


def test_bad_input_is_refused_with_one_sentence_and_nothing_written(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("\n\n".join(documents(20)))
    (tmp_path / "empty.txt").write_text("")
    assert "empty file" in _refused(tmp_path, tmp_path / "empty.txt")
    (tmp_path / "blank.txt").write_text("\n\n  \n")
    assert "holds no text" in _refused(tmp_path, tmp_path / "blank.txt", "--vocab", 260)
    (tmp_path / "c.jsonl").write_text('{"body": "hello"}\n')
    msg = _refused(tmp_path, tmp_path / "c.jsonl")
    assert "--field = 'text'" in msg and "line 1" in msg and "body" in msg
    (tmp_path / "bad.txt").write_bytes(b"good line\nsecond caf\xe9 line\n")
    msg = _refused(tmp_path, tmp_path / "bad.txt", "--vocab", 260)
    assert "not UTF-8" in msg and "offset 20" in msg and "line 2" in msg and "bad.txt" in msg
    assert "--vocab = 100" in _refused(tmp_path, good, "--vocab", 100)
    assert "--vocab = 4294967297" in _refused(tmp_path, good, "--vocab", 2**32 + 1)
    (tmp_path / "tok.json").write_text("{not a tokenizer")
    assert "--tokenizer = " in _refused(tmp_path, good, "--tokenizer", tmp_path / "tok.json")
    assert "--tokenizer = " in _refused(tmp_path, good, "--tokenizer", tmp_path / "missing.json")
    assert "--val-fraction" in _refused(tmp_path, good, "--vocab", 260, "--val-fraction", 0.0001)
    store = tmp_path / "store"
    store.mkdir()
    (store / "runs.parquet").write_bytes(b"")
    msg = _refused(tmp_path, good, out=store / "data")
    assert "results store" in msg and str(store) in msg and not (store / "data").exists()
    done = tmp_path / "done"
    assert cli("data", "prepare", good, "--out", done, "--vocab", 260, "--val-fraction", 0.3).returncode == 0
    meta = (done / "meta.json").read_text()
    assert "--force" in _refused(tmp_path, good, "--vocab", 270, out=done)
    assert (done / "meta.json").read_text() == meta
    r = cli("data", "prepare", good, "--out", done, "--vocab", 270, "--val-fraction", 0.3, "--force")
    assert r.returncode == 0 and json.loads((done / "meta.json").read_text())["vocab_size"] == 270


# a sweep over the prepared folder, read from the spec's folder
SWEEP = spec_toml(
    "shakespeare-bpe",
    model={"seq_len": 32, "parametrization": "completep", "base_width": 16, "base_depth": 1},
    data={"source": "tokens", "path": "prepared", "vocab_size": None},
    train={"batch_size": 8, "eval_every": 10},
    grid={"depth": [1, 2], "width": [16]},
    budget={"steps": 20},
    resources={"cpus": 1},
)


@pytest.mark.slow
def test_tiny_shakespeare_with_a_1024_symbol_bpe_trains_in_a_sweep_on_embedded_ray(shared_data, tmp_path):
    import pandas as pd

    text = shared_data / "tinyshakespeare.txt"
    if not text.is_file():
        pytest.skip(f"{text} is absent (docs/data.md)")
    r = cli("data", "prepare", text, "--out", tmp_path / "prepared", "--vocab", 1024, "--val-fraction", 0.1)
    assert r.returncode == 0, r.stderr
    meta = json.loads((tmp_path / "prepared" / "meta.json").read_text())
    assert meta["vocab_size"] == 1024 and meta["documents"] > 5000 and meta["val"]["tokens"] > 10_000
    # about 2.5 bytes per token: the BPE merges well beyond single bytes
    assert 2.0 < text.stat().st_size / meta["tokens"] < 3.5
    spec = write_spec(tmp_path, SWEEP, "bpe.toml")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # the embedded Ray
    store = tmp_path / "store"
    r = run_sweep(["run", str(spec), "--storage", str(store), "--no-analyze"], env, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = pd.read_parquet(store / "runs.parquet")
    assert sorted(runs["status"]) == ["ok", "ok"], runs.get("error")
    assert all(json.loads(c)["path"] == str(tmp_path / "prepared") for c in runs["data_config"])
    assert (runs["final_val_loss"] < np.log(1024)).all()  # below a uniform guess over the vocabulary
    from sweeps.plans.spec import load_spec

    ids = {t.trial_id for t in load_spec(spec).trials}
    assert ids == set(runs["trial_id"])  # the ids name the prepared corpus by its meta.json hash
