"""Benchmark: `depthwidth data prepare`'s encoding throughput against `tokenizers`' own batch
encoding, and its peak memory on a corpus of generated text larger than 200 MB.

Run by hand:  python bench/data_prepare.py [--mb 200] [--sample-mb 20] [--out docs/bench/data-prepare.md] [--smoke]
The corpus (Zipf-distributed words in sentences and paragraphs, one document per paragraph) is
generated into a temporary folder under /tmp and removed afterwards. Throughput: tokens per second
of the whole command with a given tokenizer.json (reading, splitting, encoding, writing) on the
sample, against `Tokenizer.encode_batch` and `encode_batch_fast` on the same documents already in
memory (the reference: Rust threads on every core, nothing read or written). Memory: the peak RSS
of each command (os.wait4's rusage of that child alone): preparing the whole corpus with BPE
training, and encoding the sample and the whole corpus with the same tokenizer.json, whose peaks
match when memory does not grow with the corpus.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

EXE = [sys.executable, "-m", "depthwidth.cli"]


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")


def generate(path: Path, megabytes: float, seed: int = 0) -> int:
    """A text file of about `megabytes` MB: 50,000 made-up words drawn by Zipf's law, sentences of
    5-25 words, paragraphs of 1-6 sentences separated by blank lines. The words are the same for
    every seed (one language); the seed draws the text. Returns the bytes written."""
    lexicon = np.random.default_rng(12345)
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    lengths = lexicon.integers(2, 10, size=50_000)
    words = np.array(["".join(lexicon.choice(letters, size=n)) for n in lengths])
    rng = np.random.default_rng(seed)
    target, written = int(megabytes * 1e6), 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            ranks = np.minimum(rng.zipf(1.2, size=200_000), len(words)) - 1
            chunk, i = [], 0
            while i < len(ranks):
                para = []
                for _ in range(int(rng.integers(1, 7))):
                    n = int(rng.integers(5, 26))
                    para.append(" ".join(words[ranks[i : i + n]]).capitalize() + ".")
                    i += n
                chunk.append(" ".join(para) + "\n\n")
            text = "".join(chunk)
            f.write(text)
            written += len(text.encode())
    return written


def run_prepare(args: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB of this child alone, stdout) of one `data prepare` command."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([*EXE, "data", "prepare", *args], stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"data prepare failed: {err.read()}")
        return wall, usage.ru_maxrss / 1024, out.read()  # ru_maxrss in KiB


def reference(sample: Path, tokenizer: Path) -> dict[str, float]:
    """Tokens per second of tokenizers' own batch encoding on the sample's paragraphs."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    docs = [d for d in sample.read_text(encoding="utf-8").split("\n\n") if d.strip()]
    out = {}
    for name in ("encode_batch", "encode_batch_fast"):
        batches = [docs[i : i + 20_000] for i in range(0, len(docs), 20_000)]
        t0 = time.perf_counter()
        n = sum(len(e.ids) for b in batches for e in getattr(tok, name)(b, add_special_tokens=False))
        out[name] = n / (time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="size of the generated corpus (MB)")
    ap.add_argument("--sample-mb", type=float, default=20.0, help="size of the throughput sample (MB)")
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--out", help="write the results page here (markdown)")
    ap.add_argument("--smoke", action="store_true", help="a seconds-long run; writes nothing")
    args = ap.parse_args()
    if args.smoke:
        args.mb, args.sample_mb, args.vocab, args.out = 2.0, 1.0, 512, None
    tmp = Path(tempfile.mkdtemp(prefix="dw-bench-prepare-", dir="/tmp"))
    try:
        rows, numbers = measure(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [
        f"machine: {cpu_model()}, {len(os.sched_getaffinity(0))} cores; {datetime.date.today()}; "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "",
        "| measurement | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in rows.items()),
    ]
    print("\n".join(lines))
    if args.out:
        out = Path(args.out)
        out.write_text("\n".join(lines) + "\n")
        out.with_suffix(".json").write_text(json.dumps(numbers, indent=1) + "\n")
        figure(numbers, out.with_suffix(".png"))


def figure(n: dict[str, float], path: Path) -> None:
    """Throughput of each way of encoding, and each command's peak memory beside the corpus size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6), constrained_layout=True)
    names = [
        f"data prepare\n{n['sample_mb']:.0f} MB sample",
        f"data prepare\n{n['corpus_mb']:.0f} MB corpus",
        "encode_batch\n(in memory)",
        "encode_batch_fast\n(in memory)",
    ]
    rates = [
        n["prepare_sample_tps"],
        n["prepare_corpus_tps"],
        n["encode_batch_tps"],
        n["encode_batch_fast_tps"],
    ]
    a.barh(names, [r / 1e6 for r in rates], color=["C0", "C0", "C7", "C7"])
    a.invert_yaxis()
    a.set_xlabel("million tokens per second")
    a.set_title("Encoding throughput, given tokenizer.json")
    cmds = [
        f"BPE training + encode\n{n['corpus_mb']:.0f} MB",
        f"encode {n['sample_mb']:.0f} MB",
        f"encode {n['corpus_mb']:.0f} MB",
    ]
    peaks = [n["train_peak_mb"], n["sample_peak_mb"], n["corpus_peak_mb"]]
    b.barh(cmds, peaks, color="C1")
    b.axvline(n["corpus_mb"], color="k", ls="--", lw=1, label=f"corpus size ({n['corpus_mb']:.0f} MB)")
    b.invert_yaxis()
    b.set_xlabel("peak resident memory of the command (MB)")
    b.set_title("Memory")
    b.legend(loc="lower right", fontsize=8)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def measure(args: argparse.Namespace, tmp: Path) -> tuple[dict[str, str], dict[str, float]]:
    sample, big = tmp / "sample.txt", tmp / "big.txt"
    generate(sample, args.sample_mb, seed=1)
    t0 = time.perf_counter()
    size = generate(big, args.mb)
    gen_s = time.perf_counter() - t0
    wall, peak, _ = run_prepare(
        [str(big), "--out", str(tmp / "big"), "--vocab", str(args.vocab), "--val-fraction", "0.01"]
    )
    meta = json.loads((tmp / "big" / "meta.json").read_text())
    tokenizer = tmp / "big" / "tokenizer.json"
    s_wall, s_peak, _ = run_prepare(
        [str(sample), "--out", str(tmp / "s"), "--tokenizer", str(tokenizer), "--val-fraction", "0.01"]
    )
    s_tokens = json.loads((tmp / "s" / "meta.json").read_text())["tokens"]
    # the same command on the whole corpus: memory that does not grow with the corpus is bounded
    b_wall, b_peak, _ = run_prepare(
        [str(big), "--out", str(tmp / "b"), "--tokenizer", str(tokenizer), "--val-fraction", "0.01"]
    )
    b_tokens = json.loads((tmp / "b" / "meta.json").read_text())["tokens"]
    ref = reference(sample, tokenizer)
    numbers = {
        "corpus_mb": size / 1e6,
        "sample_mb": args.sample_mb,
        "documents": meta["documents"],
        "train_wall_s": wall,
        "train_peak_mb": peak,
        "tokens": meta["tokens"],
        "prepare_sample_tps": s_tokens / s_wall,
        "sample_peak_mb": s_peak,
        "prepare_corpus_tps": b_tokens / b_wall,
        "corpus_peak_mb": b_peak,
        "encode_batch_tps": ref["encode_batch"],
        "encode_batch_fast_tps": ref["encode_batch_fast"],
    }
    rows = {
        "generated corpus": f"{size / 1e6:,.0f} MB, {meta['documents']:,} documents (generated in {gen_s:.0f} s)",
        f"prepare, {args.vocab:,}-symbol BPE trained on it": f"{wall:.0f} s wall, {meta['tokens']:,} tokens",
        "prepare, peak RSS (whole corpus, BPE training included)": f"{peak:,.0f} MB",
        f"throughput sample ({args.sample_mb:g} MB, given tokenizer.json)": f"{s_tokens:,} tokens",
        "`data prepare`, whole command (read, split, encode, write)": f"{s_tokens / s_wall:,.0f} tokens/s ({s_wall:.1f} s, peak RSS {s_peak:,.0f} MB)",
        f"`data prepare`, given tokenizer.json, whole corpus ({size / 1e6:,.0f} MB)": f"{b_tokens / b_wall:,.0f} tokens/s ({b_wall:.0f} s, peak RSS {b_peak:,.0f} MB)",
        "reference: `Tokenizer.encode_batch`, in memory": f"{ref['encode_batch']:,.0f} tokens/s",
        "reference: `Tokenizer.encode_batch_fast`, in memory": f"{ref['encode_batch_fast']:,.0f} tokens/s",
        "`data prepare` / encode_batch_fast": f"{s_tokens / s_wall / ref['encode_batch_fast']:.2f}",
    }
    return rows, numbers


if __name__ == "__main__":
    main()
