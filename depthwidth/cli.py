"""The `depthwidth` command: a thin argparse front that parses and calls the three packages.

`train` lives here; the other areas register their own subcommands (`sweep` from sweeps.cli,
`analyze`/`plot`/`kaplan` from analysis.cli, `theory`/`seprank` from depthwidth.theory_cli).
Bad input: one sentence on stderr naming the field and value, exit code 2, nothing written.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import json
import os
import sys
import time

from depthwidth import __version__
from depthwidth.clitools import EXIT_BAD_INPUT, check_output_file, fail
from depthwidth.config import (
    ATTENTIONS,
    DEVICES,
    FAMILIES,
    PARAMETRIZATIONS,
    PRECISIONS,
    ConfigError,
    DataConfig,
    ModelConfig,
    TrainConfig,
    from_name,
)

# The flags of `train` that set a config field, by config; a flag left out leaves the field at its
# default, which `train --help` shows (read from the configs, so the help cannot drift from them).
MODEL_FLAGS = (
    "family",
    "depth",
    "width",
    "heads",
    "ffn_ratio",
    "seq_len",
    "attention",
    "parametrization",
    "base_width",
    "base_depth",
    "depth_alpha",
    "nu",
    "rho",
)
TRAIN_FLAGS = (
    "steps",
    "batch_size",
    "lr",
    "warmup_steps",
    "min_lr_ratio",
    "beta2",
    "grad_clip",
    "eval_batches",
    "eval_every",
    "device",
    "precision",
    "compile",
    "threads",
)
# Defaults that `train` derives from another flag, and what 0 means where it means something else.
DEFAULT_NOTES = {
    "eval_every": "with --steps: a tenth of them",
    "warmup_steps": "with --steps: at most a tenth of them",
    "threads": "torch's own choice",
    "vocab_size": "the data's",
}

SUBCOMMAND_MODULES = (
    "sweeps.cli",
    "sweeps.results.export",
    "sweeps.designing.design",
    "analysis.cli",
    "depthwidth.theory_cli",
    "depthwidth.data_cli",
)


def parse_data(spec: str, seed: int) -> DataConfig:
    """`pcfg`, `text:PATH`, `tokens:PATH`, `copy:T`, `denoise:T`, `digits`, `pdigits` -> DataConfig."""
    kind, _, arg = spec.partition(":")
    if kind in ("pcfg", "digits", "pdigits") and not arg:
        return DataConfig(source=kind, seed=seed)
    if kind in ("text", "tokens") and arg:
        return DataConfig(source=kind, path=arg, seed=seed)
    if kind in ("copy", "denoise"):
        try:
            return DataConfig(source=kind, task_length=int(arg or 100), seed=seed)
        except ValueError:
            raise ConfigError(
                f"--data = {spec!r} is invalid: the delay T after '{kind}:' must be an integer."
            ) from None
    raise ConfigError(
        f"--data = {spec!r} is invalid: expected pcfg, text:PATH, tokens:PATH, "
        f"copy:T, denoise:T, digits or pdigits."
    )


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train one model (no Ray) and print its losses",
        description="Train one model on one data source, without Ray.",
    )
    p.add_argument("--preset", help="named model preset (see depthwidth.config.PRESETS)")
    p.add_argument("--family", choices=FAMILIES)
    p.add_argument("--depth", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--ffn-ratio", type=float)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--attention", choices=ATTENTIONS)
    p.add_argument(
        "--parametrization",
        choices=PARAMETRIZATIONS,
        help="standard: the textbook model, as Kaplan et al. and Levine et al. train it, and what a "
        "config or spec that names none trains | mup: the learning rate transfers across width | "
        "completep: across width and depth, as the bundled threshold specs train (with the "
        "default --base-width and --base-depth, their trials' model)",
    )
    p.add_argument("--base-width", type=int, help="μP/CompleteP base width (multiplier width/base)")
    p.add_argument("--base-depth", type=int, help="CompleteP base depth (branches × (base/depth)^α)")
    p.add_argument("--depth-alpha", type=float, help="CompleteP's α in [0.5, 1]")
    p.add_argument("--nu", type=int)
    p.add_argument("--rho", type=int)
    p.add_argument(
        "--data",
        default="pcfg",
        help="pcfg | text:PATH | tokens:PATH | copy:T | denoise:T | digits | pdigits",
    )
    p.add_argument("--steps", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--warmup-steps", type=int)
    p.add_argument("--min-lr-ratio", type=float, help="cosine floor as a share of --lr (1 = constant)")
    p.add_argument("--beta2", type=float)
    p.add_argument("--grad-clip", type=float)
    p.add_argument("--eval-batches", type=int)
    p.add_argument("--eval-every", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=DEVICES)
    p.add_argument("--precision", choices=PRECISIONS)
    p.add_argument(
        "--compile", action="store_true", default=None, help="compile the model with torch.compile"
    )
    p.add_argument("--threads", type=int)
    p.add_argument("--json", metavar="FILE", help="also write the full result (with the curve) as JSON")
    p.add_argument("--force", action="store_true", help="replace an existing --json file")
    p.set_defaults(func=cmd_train)
    _show_defaults(p)


def _show_defaults(p: argparse.ArgumentParser) -> None:
    """Each option's help ends with its default: a config field's from the configs (a --preset
    sets its own model fields), any other option's from the parser."""
    model, train = ModelConfig(), TrainConfig()
    for action in p._actions:
        name = action.dest
        if name in MODEL_FLAGS:
            value = getattr(model, name)
        elif name in TRAIN_FLAGS:
            value = getattr(train, name)
        elif action.default is not None and action.default is not argparse.SUPPRESS and action.option_strings:
            value = action.default
        else:
            continue
        if isinstance(value, bool) and not value and action.nargs == 0:
            continue  # a switch that is off unless given says so by being a switch
        note = f"default: {value}" + (f"; {DEFAULT_NOTES[name]}" if name in DEFAULT_NOTES else "")
        action.help = f"{action.help} ({note})" if action.help else f"({note})"


def _given(args: argparse.Namespace, names: tuple[str, ...]) -> dict:
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def _parametrization(cfg: ModelConfig) -> str:
    if cfg.parametrization == "standard":
        return "standard"
    text = f"{cfg.parametrization} (base_width={cfg.base_width}"
    if cfg.parametrization == "completep":
        text += f", base_depth={cfg.base_depth}, alpha={cfg.depth_alpha:g}"
    return text + ")"


def cmd_train(args: argparse.Namespace) -> int:
    from depthwidth.data.base import DataError

    try:
        overrides = _given(args, MODEL_FLAGS)
        model_cfg = from_name(args.preset, **overrides) if args.preset else ModelConfig(**overrides)
        tkw = _given(args, TRAIN_FLAGS)
        if "steps" in tkw and "eval_every" not in tkw:
            tkw["eval_every"] = max(1, tkw["steps"] // 10)
        if "steps" in tkw and "warmup_steps" not in tkw:
            tkw["warmup_steps"] = min(TrainConfig().warmup_steps, tkw["steps"] // 10)
        train_cfg = TrainConfig(seed=args.seed, **tkw)
        data_cfg = parse_data(args.data, seed=0)
        from depthwidth.data import resolve

        model_cfg, data = resolve(model_cfg, data_cfg)
        if args.json is not None:  # checked now (an empty one refused), not after the run trained
            check_output_file(args.json, "--json", force=args.force)
    except (ConfigError, DataError, ValueError) as exc:  # OutputError is a ValueError
        return fail(str(exc))

    import torch

    from depthwidth.accounting import count_params
    from depthwidth.train import train

    if train_cfg.device == "cuda" and not torch.cuda.is_available():
        return fail(
            "--device = 'cuda' is invalid: this machine has no CUDA device that torch can "
            "use; give --device cpu (or auto, which picks a GPU when there is one)."
        )
    if (too_big := _memory_check(model_cfg, train_cfg)) is not None:
        return fail(too_big)
    counts = count_params(model_cfg)
    print(
        f"model: {model_cfg.family} depth={model_cfg.depth} width={model_cfg.width} "
        f"heads={model_cfg.heads} N={counts.n_params:,} (total {counts.n_params_total:,}) "
        f"parametrization={_parametrization(model_cfg)}"
    )
    print(f"data:  {data.describe()}  vocab={data.vocab_size}")
    t0 = time.perf_counter()

    def progress(m: dict) -> None:
        done = m["step"] / train_cfg.steps
        eta = (time.perf_counter() - t0) * (1 - done) / max(done, 1e-9)
        extra = "".join(f"  {k}={v:.4f}" for k, v in m.items() if k in ("accuracy", "bits_per_char"))
        print(
            f"step {m['step']:>6}/{train_cfg.steps} ({100 * done:5.1f}%)  train {m['train_loss']:.4f}"
            f"  val {m['val_loss']:.4f}{extra}  lr {m['lr']:.2e}  eta {eta:5.1f}s",
            flush=True,
        )

    result = train(model_cfg, data_cfg, train_cfg, report=progress)
    if args.json:
        from runstore.files import atomic_file

        with atomic_file(args.json, "w") as f:
            f.write(json.dumps(result.to_dict(), indent=1))
    h = result.unigram_entropy
    print(f"status: {result.status}{'  (' + result.error + ')' if result.error else ''}")
    print(
        f"final train loss {result.final_train_loss:.4f}  val loss {result.final_val_loss:.4f}  "
        f"unigram entropy {h:.4f} nats  (val/unigram = {result.final_val_loss / h:.3f})"
    )
    print(
        f"tokens {result.tokens:,}  train FLOPs {result.flops:.3g}  wall {result.wall_s:.1f}s  "
        f"device {result.device}"
    )
    return 0 if result.status == "ok" else 1


def _memory_check(model_cfg: ModelConfig, train_cfg: TrainConfig) -> str | None:
    """The run's estimated memory (depthwidth.accounting.memory_estimate) against the device it
    would train on, before anything is allocated; the reason it cannot fit, or None."""
    import torch

    from depthwidth.accounting import machine_memory_bytes, memory_estimate

    need = memory_estimate(model_cfg, train_cfg.batch_size)
    if train_cfg.device != "cpu" and torch.cuda.is_available():
        have, where = torch.cuda.get_device_properties(0).total_memory, "this GPU has"
    else:
        have, where = machine_memory_bytes(), "this machine has"
    if have is None or need <= have:
        return None
    return (
        f"depth = {model_cfg.depth}, width = {model_cfg.width}, batch_size = "
        f"{train_cfg.batch_size} is invalid: training it needs about {need / 1e9:.3g} GB "
        f"(weights, gradients, AdamW moments and activations), more than the "
        f"{have / 1e9:.3g} GB {where}."
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="depthwidth",
        description="Depth-width expressivity simulator and sweep service: at what depth does "
        "stacking self-attention layers stop paying for a given width?",
    )
    parser.add_argument("--version", action="version", version=f"depthwidth {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_train_parser(sub)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    from runstore.outputs import release_all

    try:
        return int(args.func(args) or 0)
    finally:
        release_all()  # the outputs the command claimed (runstore/outputs.py) are its no longer


def run() -> None:
    """The console script. A finished command exits without the interpreter's teardown of torch,
    Ray and pandas (about 1.5 s on 2 cores, and it does nothing a finished command needs): the
    standard streams are flushed and the atexit handlers run, then the process ends. Every file
    the commands write is closed (and renamed into place) before they return. When the reader
    of stdout goes away (`depthwidth sweep plan SPEC | head`), the command stops without a
    traceback, as Unix tools do, with the shell's code for it (128 + SIGPIPE)."""
    try:
        code = main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush
        code = 128 + 13
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
