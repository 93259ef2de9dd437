"""Benchmark: milliseconds per batch of each data source (PCFG, UTF-8 text, uint16 tokens).

Run by hand:  python bench/data_sources.py [--batches 200] [--out docs/bench/data.md] [--smoke]
One batch is 32 x 129 tokens (seq_len 128 + the shifted target), single-threaded. Reports
CPU time (process_time: what the source itself costs, even on a busy machine) and wall time,
plus the one-off costs (construction, the PCFG's cached unigram-entropy sample).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from depthwidth.config import DataConfig
from depthwidth.data import make_data

BATCH, SEQ = 32, 128
SHAKESPEARE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")


TOKENS = 1 << 25  # uint16 tokens in the memmapped file: 64 MiB


def measure(name: str, cfg: DataConfig, batches: int) -> dict:
    c0, w0 = time.process_time(), time.perf_counter()
    src = make_data(cfg, SEQ)
    build = time.process_time() - c0, time.perf_counter() - w0
    c0 = time.process_time()
    src.unigram_entropy()
    entropy_cpu = time.process_time() - c0
    src.batch("train", 0, BATCH)  # warm caches
    cpu, wall = [], []
    for i in range(1, batches + 1):
        c0, w0 = time.process_time(), time.perf_counter()
        src.batch("train", i, BATCH)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return dict(
        name=name,
        desc=src.describe(),
        build_ms=1e3 * build[0],
        entropy_ms=1e3 * entropy_cpu,
        cpu_ms=1e3 * statistics.median(cpu),
        wall_ms=1e3 * statistics.median(wall),
        tok_s=BATCH * (SEQ + 1) / statistics.median(cpu),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument(
        "--out",
        default=None,
        help="write the table here (default docs/bench/data.md; a smoke run only prints it)",
    )
    ap.add_argument("--smoke", action="store_true", help="seconds: 3 batches, a 128 KiB token file")
    args = ap.parse_args()
    tokens = TOKENS
    if args.smoke:
        args.batches, tokens = 3, 1 << 16
    elif args.out is None:
        args.out = "docs/bench/data.md"
    torch.set_num_threads(1)
    rows = [
        measure("pcfg (default)", DataConfig(), args.batches),
        measure(
            "pcfg V=512 depth 10 b=4",
            DataConfig(vocab_size=512, pcfg_depth=10, branching=4, n_nonterminals=48),
            args.batches,
        ),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        text = SHAKESPEARE if SHAKESPEARE.is_file() else Path(tmp) / "gen.txt"
        if not SHAKESPEARE.is_file():
            text.write_bytes(np.random.default_rng(0).integers(97, 123, 1 << 20, dtype=np.uint8).tobytes())
        label = "text (an English text file, ~1 MB)" if text == SHAKESPEARE else "text (1 MiB generated)"
        rows.append(measure(label, DataConfig(source="text", path=str(text)), args.batches))
        tok = Path(tmp) / "tokens.bin"
        np.random.default_rng(0).integers(0, 50257, tokens, dtype=np.uint16).tofile(tok)
        rows.append(
            measure(
                f"tokens (2^{tokens.bit_length() - 1} uint16, memmap)",
                DataConfig(source="tokens", path=str(tok)),
                args.batches,
            )
        )
    lines = [
        "# Data sources: cost per batch",
        "",
        f"- machine: {cpu_model()}, torch threads 1",
        f"- date: {datetime.date.today().isoformat()}",
        f"- command: `python bench/data_sources.py --batches {args.batches}`",
        f"- batch: {BATCH} x {SEQ + 1} tokens; median over {args.batches} batches; CPU = process time",
        "",
        "| source | CPU ms/batch | wall ms/batch | tokens/s (CPU) | construct ms | unigram entropy ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['cpu_ms']:.2f} | {r['wall_ms']:.2f} | {r['tok_s']:,.0f} | "
            f"{r['build_ms']:.0f} | {r['entropy_ms']:.0f} |"
        )
    grammars = [f"- {r['name']}: {r['desc']}" for r in rows if r["name"].startswith("pcfg")]
    lines += ["", "Grammars:", ""] + grammars
    out = "\n".join(lines) + "\n"
    print(out)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(out)


if __name__ == "__main__":
    main()
