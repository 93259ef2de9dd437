"""A prepared corpus is trusted for what it is, not for what its meta.json claims
(docs/rules.md, "Prepared data is checked against its files"): each tampered folder below is
refused by `train` and `sweep plan` with one sentence naming the folder
and the file, exit code 2; replacing the token files changes a trial's id or is refused; and for
any tampering of meta.json or the token files, the reader either refuses with one sentence or
reads data whose ids, sizes, hashes and identity are the files' own."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import cli, sentence, spec_toml, write_spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_data_prepare import documents

pytest.importorskip("tokenizers")

from depthwidth.config import DataConfig  # noqa: E402
from depthwidth.data import make_data  # noqa: E402
from depthwidth.data.base import DataError  # noqa: E402
from depthwidth.data.tokenmeta import dtype_for, identity_hash, verify  # noqa: E402

TRAIN = "--depth 1 --width 16 --heads 2 --seq-len 16 --steps 2 --batch-size 4 --eval-every 1 --eval-batches 1"


def tok_spec(path) -> str:
    """One 4-step trial on the prepared folder `path` (relative to the spec's folder, or not)."""
    return spec_toml(
        "tok",
        model={"vocab_size": 300},
        data={"source": "tokens", "path": str(path), "vocab_size": None},
        train={"eval_every": None, "eval_batches": None, "warmup_steps": 1},
        grid={"depth": [1], "width": [16]},
        budget={"steps": 4},
        resources={"cpus": 1},
    )


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A corpus prepared by the real command: vocabulary 300, uint16."""
    folder = tmp_path_factory.mktemp("prepared")
    (folder / "c.txt").write_text("\n\n".join(documents(200)))
    r = cli(
        "data", "prepare", folder / "c.txt", "--out", folder / "ok", "--vocab", 300, "--val-fraction", 0.2
    )
    assert r.returncode == 0, r.stderr
    return folder / "ok"


def _copy(prepared: Path, to: Path) -> Path:
    shutil.copytree(prepared, to)
    return to


def _meta(d: Path) -> dict:
    return json.loads((d / "meta.json").read_text())


def _tampered(prepared: Path, root: Path) -> dict[str, tuple[Path, str]]:
    """Tampered copies of a prepared folder, each with words its refusal holds."""
    made = {}

    def mk(name: str, words: str) -> Path:
        made[name] = (_copy(prepared, root / name), words)
        return made[name][0]

    m0 = _meta(prepared)
    d = mk("bigid", "its train.bin holds token id 65,535, not below the vocab_size = 300")
    a = np.fromfile(d / "train.bin", "<u2")
    a[::97] = 65535
    a.tofile(d / "train.bin")
    d = mk("vocabsmall", "not below the vocab_size = 100 its meta.json names")
    (d / "meta.json").write_text(json.dumps({**m0, "vocab_size": 100}))
    d = mk("dtype32", "its meta.json names dtype = 'uint32' for vocab_size = 300")
    m = json.loads(json.dumps(m0))
    for s in ("train", "val"):
        a = np.fromfile(d / f"{s}.bin", "<u2")
        a[: len(a) // 2 * 2].tofile(d / f"{s}.bin")
        m[s]["tokens"] = len(a) // 2
    m["dtype"] = "uint32"
    (d / "meta.json").write_text(json.dumps(m))
    d = mk("vocabhuge32", "its meta.json names vocab_size = 4000000000, where data prepare makes")
    (d / "meta.json").write_text(json.dumps({**m0, "vocab_size": 4_000_000_000, "dtype": "uint32"}))
    d = mk("deepjson", "cannot read its meta.json (it is nested too deeply)")
    (d / "meta.json").write_text("[" * 100_000 + "]" * 100_000)
    d = mk("valempty", "its val.bin holds no tokens")
    (d / "val.bin").write_bytes(b"")
    m = json.loads(json.dumps(m0))
    m["val"]["tokens"] = 0
    (d / "meta.json").write_text(json.dumps(m))
    d = mk("noval", "its val.bin is missing")
    (d / "val.bin").unlink()
    d = mk("trunc_meta", "its train.bin is not the file its meta.json describes")
    (d / "train.bin").write_bytes((d / "train.bin").read_bytes()[:-2000])
    m = json.loads(json.dumps(m0))
    m["train"]["tokens"] -= 1000
    (d / "meta.json").write_text(json.dumps(m))
    return made


def test_each_tampered_folder_is_refused_by_train_with_one_sentence(prepared, tmp_path):
    """Ids beyond the vocabulary, a vocabulary or dtype that lies, a meta.json nested 100,000 deep,
    an empty or missing val.bin, a file cut short."""
    for name, (d, words) in _tampered(prepared, tmp_path).items():
        before = sorted(p.name for p in tmp_path.iterdir())
        msg = sentence(cli("train", "--data", f"tokens:{d}", *TRAIN.split(), cwd=tmp_path))
        assert msg.startswith(f"DataConfig.path = {str(d)!r} is invalid: ") and words in msg, (name, msg)
        assert sorted(p.name for p in tmp_path.iterdir()) == before


def _plan_ids(spec: Path) -> list[str]:
    r = cli("sweep", "plan", spec, "--json", cwd=spec.parent)
    assert r.returncode == 0, r.stderr
    return [json.loads(line)["trial_id"] for line in r.stdout.splitlines() if line.strip()]


def test_a_trial_id_comes_from_the_files_so_replaced_tokens_are_refused_or_renamed(prepared, tmp_path):
    """The id names the checked content: tokens replaced behind meta.json are refused when the
    spec is read, and a folder whose meta.json is rewritten to match new tokens gets a new id."""
    data = _copy(prepared, tmp_path / "data")
    spec = write_spec(tmp_path, tok_spec("data"), "tok.toml")
    (first,) = _plan_ids(spec)
    for s in ("train", "val"):
        a = np.fromfile(data / f"{s}.bin", "<u2")
        a[:] = 7
        a.tofile(data / f"{s}.bin")
    msg = sentence(cli("sweep", "plan", spec, cwd=tmp_path))
    assert "its train.bin is not the file its meta.json describes" in msg and str(data) in msg
    meta = _meta(data)  # a meta.json made to describe the new tokens: their own identity
    for s in ("train", "val"):
        meta[s]["sha256"] = hashlib.sha256((data / f"{s}.bin").read_bytes()).hexdigest()
    meta["hash"] = identity_hash(meta)
    (data / "meta.json").write_text(json.dumps(meta))
    (second,) = _plan_ids(spec)
    assert second != first
    bigid = write_spec(tmp_path, tok_spec(_tampered(prepared, tmp_path / "t")["bigid"][0]), "bigid.toml")
    assert "holds token id 65,535" in sentence(cli("sweep", "plan", bigid, cwd=tmp_path))


def test_sweep_specs_marks_a_spec_whose_data_is_bad_and_lists_the_rest(prepared, tmp_path, monkeypatch):
    """The listing goes on past a spec whose prepared corpus has a meta.json nested too deep."""
    from sweeps.plans.bundled import bundled_specs
    from sweeps.plans.speccosts import spec_line

    deep = _tampered(prepared, tmp_path)["deepjson"][0]
    monkeypatch.setenv("DEPTHWIDTH_CORPUS", str(deep))
    specs = bundled_specs()
    # planned in full (no kept cost to read): the spec is marked, the others listed
    text = spec_line("threshold-gpu-text-pilot", specs["threshold-gpu-text-pilot"], {})
    assert "cannot plan it here" in text and "cannot read its meta.json (it is nested too deeply)" in text
    assert "CPU core-h" in spec_line("smoke", specs["smoke"], {})


# -- the property: whatever meta.json and the files say, the reader refuses or reads the truth ------
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
FIELDS = ("vocab_size", "dtype", "format", "hash", "train", "val", "eot_id", "tokenizer_sha256")
SPLIT_FIELDS = ("tokens", "sha256", "documents")


@st.composite
def tampering(draw):
    """One to three changes: a meta.json field or a split's field set to any JSON value, bytes of a
    token file overwritten, a file cut short or emptied, or meta.json replaced by deep nesting."""
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["field", "split_field", "bytes", "cut", "deep", "vocab"]))
        if kind == "field":
            changes.append((kind, draw(st.sampled_from(FIELDS)), draw(JSONISH)))
        elif kind == "split_field":
            changes.append(
                (
                    kind,
                    (draw(st.sampled_from(["train", "val"])), draw(st.sampled_from(SPLIT_FIELDS))),
                    draw(JSONISH),
                )
            )
        elif kind == "bytes":
            changes.append(
                (kind, draw(st.sampled_from(["train", "val"])), draw(st.binary(min_size=1, max_size=6)))
            )
        elif kind == "cut":
            changes.append((kind, draw(st.sampled_from(["train", "val"])), draw(st.integers(0, 400))))
        elif kind == "deep":
            changes.append((kind, None, draw(st.integers(1, 120_000))))
        else:  # a vocabulary near the ids the files hold, or past a dtype's range
            changes.append(
                (
                    kind,
                    None,
                    draw(st.sampled_from([1, 2, 100, 299, 300, 301, 65536, 65537, 1 << 22, 1 << 23])),
                )
            )
    return changes


def _apply(d: Path, changes) -> None:
    for kind, what, value in changes:
        meta_text = (d / "meta.json").read_text()
        try:
            meta = json.loads(meta_text)
        except (ValueError, RecursionError):
            meta = None
        if kind == "deep":
            (d / "meta.json").write_text("[" * value + "]" * value)
        elif kind in ("field", "vocab") and isinstance(meta, dict):
            meta["vocab_size" if kind == "vocab" else what] = value
            (d / "meta.json").write_text(json.dumps(meta))
        elif kind == "split_field" and isinstance(meta, dict) and isinstance(meta.get(what[0]), dict):
            meta[what[0]][what[1]] = value
            (d / "meta.json").write_text(json.dumps(meta))
        elif kind == "bytes":
            f = d / f"{what}.bin"
            raw = bytearray(f.read_bytes())
            at = (len(raw) * 7919) % max(1, len(raw) - len(value))
            raw[at : at + len(value)] = value
            f.write_bytes(bytes(raw))
        elif kind == "cut":
            f = d / f"{what}.bin"
            f.write_bytes(f.read_bytes()[: value * 2])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=tampering())
def test_any_tampering_is_refused_or_the_data_read_is_the_files_own(prepared, tmp_path_factory, changes):
    d = _copy(prepared, tmp_path_factory.mktemp("tamper") / "d")
    _apply(d, changes)
    try:
        meta = verify(d / "meta.json")
    except DataError as exc:
        msg = str(exc)
        assert msg.startswith(f"DataConfig.path = {str(d)!r} is invalid: ") and "\n" not in msg
        with pytest.raises(DataError):  # the reader refuses the same folder
            make_data(DataConfig(source="tokens", path=str(d)), 16)
        return
    # accepted: what meta.json says is what the files are
    vocab, dtype = meta["vocab_size"], meta["dtype"]
    assert dtype == dtype_for(vocab) and meta["hash"] == identity_hash(meta)
    for s in ("train", "val"):
        raw = (d / f"{s}.bin").read_bytes()
        ids = np.frombuffer(raw, {"uint16": "<u2", "uint32": "<u4"}[dtype])
        assert meta[s]["sha256"] == hashlib.sha256(raw).hexdigest() and meta[s]["tokens"] == len(ids) > 0
        assert int(ids.max()) < vocab
    src = make_data(DataConfig(source="tokens", path=str(d)), 16)
    assert src.vocab_size == vocab and int(src.token_counts().sum()) == meta["train"]["tokens"]


def test_a_large_files_scan_is_kept_for_later_processes_and_redone_when_it_changes(
    prepared, tmp_path, monkeypatch
):
    """A sweep's trials and the next `sweep plan` do not read a large corpus again: its SHA-256 and
    largest id are kept in the user's cache folder under the file's size, times and inode; a file
    written since is read again."""
    from depthwidth.data import tokenmeta

    monkeypatch.setattr(tokenmeta, "CACHE_BYTES", 1)  # every file counts as large here
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tokenmeta._scan.cache_clear()
    d = _copy(prepared, tmp_path / "d")
    verify(d / "meta.json")
    cache = tmp_path / "cache" / "depthwidth" / "token-scans.json"
    scans = json.loads(cache.read_text())
    assert sorted(json.loads(k)[0] for k in scans) == [str(d / "train.bin"), str(d / "val.bin")]
    # the kept scan is what a later process reads: a different one under the same stamp is believed
    key = next(k for k in scans if k.startswith(json.dumps([str(d / "train.bin")])[:-1]))
    cache.write_text(json.dumps({**scans, key: ["0" * 64, 1]}))
    tokenmeta._scan.cache_clear()
    with pytest.raises(DataError, match="its train.bin is not the file its meta.json describes"):
        verify(d / "meta.json")
    # a file written since has a new stamp, so it is read again (here: the same tokens, accepted)
    (d / "train.bin").write_bytes((d / "train.bin").read_bytes())
    tokenmeta._scan.cache_clear()
    assert verify(d / "meta.json")["hash"] == _meta(prepared)["hash"]
    tokenmeta._scan.cache_clear()
