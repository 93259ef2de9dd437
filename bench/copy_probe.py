"""What the copying probe (depthwidth/copyprobe.py) costs a text run, on byte-level tiny
Shakespeare at the CPU study's settings (batch 16 x 64 bytes, an evaluation every 50 steps).

    python bench/copy_probe.py [--repeats 30] [--shapes 1x32,2x64,4x128,8x128]
    python bench/copy_probe.py --smoke      # one tiny shape on generated text, in seconds

The probe is one forward pass over its 8 sequences per evaluation. Timing whole runs with and
without it compares two numbers that differ by less than a loaded machine's noise, so the two
costs are timed side by side instead, interleaved, each the median of `repeats`: one probe
(forward, metrics) and one training step (forward, backward, AdamW). The share of a run is
probe / (eval_every x step + probe). Prints one markdown row per shape.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from depthwidth.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from depthwidth.copyprobe import copy_metrics, probe_batch  # noqa: E402
from depthwidth.data import resolve  # noqa: E402
from depthwidth.models import build_model  # noqa: E402
from depthwidth.train import make_optimizer  # noqa: E402

TEXT = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


def costs(
    model_cfg: ModelConfig, data_cfg: DataConfig, cfg: TrainConfig, repeats: int
) -> tuple[float, float]:
    """(median seconds of one training step, median seconds of one probe)."""
    model_cfg, data = resolve(model_cfg, data_cfg)
    torch.manual_seed(0)
    model = build_model(model_cfg)
    opt = make_optimizer(model, cfg)
    px, py = probe_batch(model_cfg.vocab_size, model_cfg.seq_len)
    steps, probes = [], []
    for i in range(repeats + 3):  # the first three warm up the kernels and allocator
        x, y = data.batch("train", i, cfg.batch_size)
        t0 = time.perf_counter()
        model.train()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        with torch.no_grad():
            model.eval()
            m = copy_metrics(model(px), py)
            float(m["copy_loss"]), float(m["copy_gain"])
        t2 = time.perf_counter()
        if i >= 3:
            steps.append(t1 - t0)
            probes.append(t2 - t1)
    return statistics.median(steps), statistics.median(probes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--shapes", default="1x32,2x64,4x128,8x128")
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--text", default=str(TEXT))
    p.add_argument("--smoke", action="store_true", help="one tiny shape on generated text")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.smoke:
        import tempfile

        args.repeats, args.shapes = 3, "1x16"
        args.text = str(Path(tempfile.mkdtemp(prefix="copyprobe-")) / "text.txt")
        Path(args.text).write_text("to be or not to be, that is the question. " * 400)
    data = DataConfig(source="text", path=args.text)
    cfg = TrainConfig(batch_size=16, threads=1)
    print(
        f"| shape | one training step (ms) | one probe (ms) | share of a run (eval every {args.eval_every}) |"
    )
    print("|---|---|---|---|")
    for shape in args.shapes.split(","):
        depth, width = (int(v) for v in shape.split("x"))
        step, probe = costs(
            ModelConfig(depth=depth, width=width, heads=4, seq_len=64), data, cfg, args.repeats
        )
        share = probe / (args.eval_every * step + probe)
        print(f"| depth {depth} x width {width} | {step * 1e3:.2f} | {probe * 1e3:.2f} | {share:.2%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
