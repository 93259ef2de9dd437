"""Typed, frozen configuration: ModelConfig, DataConfig, TrainConfig, and named presets.

Config is data: plain values that round-trip through dict, JSON, TOML and Ray.
Each dataclass validates itself on construction and raises ConfigError with one sentence
naming the bad field and its value.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


class ConfigError(ValueError):
    """A bad configuration value; the message names the field and the value."""


TRANSFORMER = "transformer"
RECURRENT_FAMILIES = ("lstm", "rnn", "memrnn", "relrnn", "rellstm")
SCREENED_FAMILIES = ("relrnn", "rellstm")  # relevancy screening: ν and ρ mean something only here
FAMILIES = (TRANSFORMER,) + RECURRENT_FAMILIES
# Fields that tune a run without changing the model's shape or its data (docs/design.md "Tuning
# axes"): the analysis picks each shape's best setting of them (analysis/laws/tuning.py), and a
# successive halving may stop only their losing values (sweeps/plans/halving.py).
TUNING_FIELDS = {
    "train": (
        "lr",
        "beta1",
        "beta2",
        "eps",
        "weight_decay",
        "warmup_steps",
        "batch_size",
        "min_lr_ratio",
        "grad_clip",
    ),
    "model": ("init_std", "depth_alpha"),
}
ATTENTIONS = ("softmax", "linear")
PARAMETRIZATIONS = ("standard", "mup", "completep")
DATA_SOURCES = ("pcfg", "text", "tokens", "copy", "denoise", "digits", "pdigits")
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("fp32", "bf16")
# Learning-rate schedules (docs/science.md §10): cosine to min_lr_ratio over the whole run, or
# warmup-stable-decay (Hägele et al. 2024; Hu et al. 2024): constant, then a cooldown over the
# last cooldown_fraction of the run in one of COOLDOWNS' shapes.
SCHEDULES = ("cosine", "wsd")
COOLDOWNS = ("1-sqrt", "linear")


INT64_LIMIT = 2**63


def _bad(cls_name: str, name: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"{cls_name}.{name} = {value!r} is invalid: {why}.")


def _check_types(obj: Any) -> None:
    """Reject values whose type does not match the declared field type (bool is not an int)."""
    for f in fields(obj):
        v = getattr(obj, f.name)
        t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        ok = {
            "int": isinstance(v, int) and not isinstance(v, bool),
            "float": isinstance(v, (int, float)) and not isinstance(v, bool),
            "bool": isinstance(v, bool),
            "str": isinstance(v, str),
        }.get(t, True)
        if not ok:
            raise _bad(type(obj).__name__, f.name, v, f"expected {t}, got {type(v).__name__}")
        if t == "int" and not -INT64_LIMIT <= v < INT64_LIMIT:  # torch seeds, parquet columns
            raise _bad(type(obj).__name__, f.name, v, "it must fit a 64-bit integer (below 2**63)")
        if t == "float":
            object.__setattr__(obj, f.name, float(v))
            if not math.isfinite(float(v)):
                raise _bad(type(obj).__name__, f.name, v, "must be a finite number")


class _Serializable:
    """dict / JSON / TOML round-trips shared by the three configs."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(
                f"{cls.__name__} has no field {unknown[0]!r}; known fields: {', '.join(sorted(known))}."
            )
        return cls(**dict(d))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, s: str):
        return cls.from_dict(json.loads(s))

    def to_toml(self) -> str:
        return "".join(f"{k} = {toml_value(v)}\n" for k, v in self.to_dict().items())

    @classmethod
    def from_toml(cls, s: str):
        return cls.from_dict(tomllib.loads(s))

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def toml_value(v: Any) -> str:
    """A TOML value: a boolean, a number (nan and inf as TOML writes them), a string through
    `toml_string`, or a list of these."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def toml_string(s: str) -> str:
    """`s` as a TOML basic string: quotes, backslashes and control characters escaped, every other
    character as it is (a JSON string is not always TOML: JSON writes a character beyond the Basic
    Multilingual Plane as a surrogate pair, which TOML refuses). ValueError for a lone surrogate,
    which no TOML text can hold."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\u{o:04x}")
        elif 0xD800 <= o <= 0xDFFF:
            raise ValueError(f"the text {s!r} holds a lone surrogate, which TOML cannot hold")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class ModelConfig(_Serializable):
    """One model. `width` is d_x (d_model); `depth` is the number of layers/blocks.

    Transformer knobs follow Levine et al. 2020 / Kaplan et al. 2020 (docs/science.md §1-2);
    `nu`/`rho` are the relevancy-screening sizes of Kerg et al. 2020 (docs/science.md §6).
    `parametrization`: "standard", "mup" (width transfer, base_width) or "completep" (μP plus
    depth transfer, Dey et al. 2025: residual branches × (base_depth/depth)^depth_alpha;
    docs/science.md §7).
    `vocab_size = 0` means "take it from the data".
    """

    family: str = TRANSFORMER
    depth: int = 2
    width: int = 64
    heads: int = 4
    ffn_ratio: float = 4.0
    vocab_size: int = 0
    seq_len: int = 64
    attention: str = "softmax"
    layernorm: bool = True
    residual: bool = True
    tied_embeddings: bool = True
    bias: bool = False
    parametrization: str = "standard"
    base_width: int = 64
    base_depth: int = 2
    depth_alpha: float = 1.0
    init_std: float = 0.02
    nu: int = 10
    rho: int = 15

    def __post_init__(self) -> None:
        _check_types(self)
        c = "ModelConfig"
        if self.family not in FAMILIES:
            raise _bad(c, "family", self.family, f"expected one of {', '.join(FAMILIES)}")
        if self.depth < 1:
            raise _bad(c, "depth", self.depth, "depth must be at least 1")
        if self.width < 1:
            raise _bad(c, "width", self.width, "width must be at least 1")
        if self.heads < 1:
            raise _bad(c, "heads", self.heads, "heads must be at least 1")
        if self.family == TRANSFORMER and self.width % self.heads != 0:
            raise _bad(c, "width", self.width, f"width must be divisible by heads = {self.heads}")
        if self.ffn_ratio < 0:
            raise _bad(c, "ffn_ratio", self.ffn_ratio, "ffn_ratio must be >= 0 (0 = attention only)")
        if self.vocab_size < 0 or self.vocab_size == 1:
            raise _bad(c, "vocab_size", self.vocab_size, "vocab_size must be 0 (from data) or >= 2")
        if self.seq_len < 2:
            raise _bad(c, "seq_len", self.seq_len, "seq_len must be at least 2")
        if self.attention not in ATTENTIONS:
            raise _bad(c, "attention", self.attention, f"expected one of {', '.join(ATTENTIONS)}")
        if self.parametrization not in PARAMETRIZATIONS:
            raise _bad(
                c, "parametrization", self.parametrization, f"expected one of {', '.join(PARAMETRIZATIONS)}"
            )
        if self.base_width < 1:
            raise _bad(c, "base_width", self.base_width, "base_width must be at least 1")
        if self.base_depth < 1:
            raise _bad(c, "base_depth", self.base_depth, "base_depth must be at least 1")
        if not 0.5 <= self.depth_alpha <= 1.0:
            raise _bad(
                c,
                "depth_alpha",
                self.depth_alpha,
                "depth_alpha must be in [0.5, 1] (Dey et al. 2025; 1 = CompleteP)",
            )
        if self.parametrization == "completep" and not self.residual:
            raise _bad(
                c,
                "residual",
                self.residual,
                "completep scales the residual branches, so it needs residual = true",
            )
        if self.init_std <= 0:
            raise _bad(c, "init_std", self.init_std, "init_std must be positive")
        if self.nu < 0:
            raise _bad(c, "nu", self.nu, "nu (short-term buffer size) must be >= 0")
        if self.rho < 0:
            raise _bad(c, "rho", self.rho, "rho (relevant-set size) must be >= 0")
        if self.family in SCREENED_FAMILIES and self.nu + self.rho == 0:
            raise _bad(c, "rho", self.rho, "nu + rho must be at least 1 for relevancy screening")

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    @property
    def d_ff(self) -> int:
        return int(round(self.ffn_ratio * self.width))

    @property
    def width_mult(self) -> float:
        """μP width multiplier m_N = width / base_width (1 under the standard parametrization)."""
        return self.width / self.base_width if self.parametrization in ("mup", "completep") else 1.0

    @property
    def depth_mult(self) -> float:
        """CompleteP depth multiplier m_L = depth / base_depth (1 unless completep)."""
        return self.depth / self.base_depth if self.parametrization == "completep" else 1.0


@dataclass(frozen=True)
class DataConfig(_Serializable):
    """Where tokens come from.

    pcfg: the embedded default, an infinite seeded random PCFG language (vocab_size,
    pcfg_depth, branching, n_nonterminals). text: a UTF-8 file or folder as bytes. tokens: a
    nanoGPT-style uint16 file, or a folder `depthwidth data prepare` wrote (uint16 or uint32).
    copy/denoise: the Kerg et al. 2020 tasks with delay `task_length` (T).
    digits/pdigits: the UCI digits pixel by pixel (T = 64), split by `seed` and `val_fraction`.
    """

    source: str = "pcfg"
    path: str = ""
    vocab_size: int = 64
    pcfg_depth: int = 6
    branching: int = 3
    n_nonterminals: int = 24
    seed: int = 0
    val_fraction: float = 0.1
    task_length: int = 100

    def __post_init__(self) -> None:
        _check_types(self)
        c = "DataConfig"
        if self.source not in DATA_SOURCES:
            raise _bad(c, "source", self.source, f"expected one of {', '.join(DATA_SOURCES)}")
        if self.source in ("text", "tokens") and not self.path:
            raise _bad(c, "path", self.path, f"source {self.source!r} needs a path")
        if self.vocab_size < 2:
            raise _bad(c, "vocab_size", self.vocab_size, "vocab_size must be at least 2")
        if self.pcfg_depth < 1:
            raise _bad(c, "pcfg_depth", self.pcfg_depth, "pcfg_depth must be at least 1")
        if self.branching < 2:
            raise _bad(c, "branching", self.branching, "branching must be at least 2")
        if self.n_nonterminals < 1:
            raise _bad(c, "n_nonterminals", self.n_nonterminals, "n_nonterminals must be at least 1")
        if self.seed < 0:
            raise _bad(c, "seed", self.seed, "seed must be >= 0")
        if not 0.0 < self.val_fraction < 1.0:
            raise _bad(c, "val_fraction", self.val_fraction, "val_fraction must be in (0, 1)")
        if self.task_length < 1:
            raise _bad(c, "task_length", self.task_length, "task_length (T) must be at least 1")


@dataclass(frozen=True)
class TrainConfig(_Serializable):
    """One training run: AdamW, linear warmup, then cosine decay to min_lr_ratio·lr or
    (schedule = "wsd") a constant rate and a cooldown to it over the run's last
    cooldown_fraction."""

    steps: int = 200
    batch_size: int = 32
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 20
    schedule: str = "cosine"
    cooldown_fraction: float = 0.2
    cooldown: str = "1-sqrt"
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0
    eval_every: int = 50
    eval_batches: int = 4
    checkpoint_every: int = 1
    seed: int = 0
    device: str = "auto"
    precision: str = "fp32"
    compile: bool = False
    threads: int = 0

    def __post_init__(self) -> None:
        _check_types(self)
        c = "TrainConfig"
        for name in ("steps", "batch_size", "eval_every", "eval_batches", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise _bad(c, name, getattr(self, name), f"{name} must be at least 1")
        if self.lr <= 0:
            raise _bad(c, "lr", self.lr, "lr must be positive")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise _bad(c, "min_lr_ratio", self.min_lr_ratio, "min_lr_ratio must be in [0, 1]")
        if self.warmup_steps < 0:
            raise _bad(c, "warmup_steps", self.warmup_steps, "warmup_steps must be >= 0")
        if self.schedule not in SCHEDULES:
            raise _bad(c, "schedule", self.schedule, f"expected one of {', '.join(SCHEDULES)}")
        if self.cooldown not in COOLDOWNS:
            raise _bad(c, "cooldown", self.cooldown, f"expected one of {', '.join(COOLDOWNS)}")
        if not 0.0 < self.cooldown_fraction <= 1.0:
            raise _bad(c, "cooldown_fraction", self.cooldown_fraction, "cooldown_fraction must be in (0, 1]")
        if self.schedule == "wsd" and self.warmup_steps > self.cooldown_start:
            raise _bad(
                c,
                "warmup_steps",
                self.warmup_steps,
                f"the warmup must end before the cooldown starts at step {self.cooldown_start}",
            )
        if self.weight_decay < 0:
            raise _bad(c, "weight_decay", self.weight_decay, "weight_decay must be >= 0")
        for name in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise _bad(c, name, getattr(self, name), f"{name} must be in [0, 1)")
        if self.eps <= 0:
            raise _bad(c, "eps", self.eps, "eps (AdamW's epsilon) must be positive")
        if self.grad_clip < 0:
            raise _bad(c, "grad_clip", self.grad_clip, "grad_clip must be >= 0 (0 = off)")
        if self.seed < 0:
            raise _bad(c, "seed", self.seed, "seed must be >= 0")
        if self.device not in DEVICES:
            raise _bad(c, "device", self.device, f"expected one of {', '.join(DEVICES)}")
        if self.precision not in PRECISIONS:
            raise _bad(c, "precision", self.precision, f"expected one of {', '.join(PRECISIONS)}")
        if self.threads < 0:
            raise _bad(c, "threads", self.threads, "threads must be >= 0 (0 = torch default)")

    @property
    def cooldown_start(self) -> int:
        """The first step of a WSD run's cooldown: its last round(cooldown_fraction·steps) steps
        decay (at least one). A cooldown branch of this budget leaves a longer run here."""
        return self.steps - max(1, round(self.cooldown_fraction * self.steps))


# Named presets: a small ladder of depth x width (model fields only). Sizes chosen so the
# ladder crosses L_th = log_3(d) (docs/science.md §1): log_3(32) = 3.2, log_3(128) = 4.4.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(depth=2, width=32, heads=2),
    "small": dict(depth=4, width=64, heads=4),
    "medium": dict(depth=6, width=128, heads=4),
    "large": dict(depth=8, width=256, heads=8),
    "levine-linear": dict(
        depth=2,
        width=8,
        heads=2,
        attention="linear",
        layernorm=False,
        ffn_ratio=0.0,
        residual=False,
        bias=False,
    ),
    "kaplan-6x4288": dict(depth=6, width=4288, heads=32, seq_len=1024),
    "kaplan-48x1600": dict(depth=48, width=1600, heads=25, seq_len=1024),
}


def from_name(name: str, **overrides: Any) -> ModelConfig:
    """ModelConfig for a named preset, with field overrides (validated like any config)."""
    if name not in PRESETS:
        raise ConfigError(f"preset = {name!r} is unknown; known presets: {', '.join(PRESETS)}.")
    return ModelConfig.from_dict({**PRESETS[name], **overrides})
