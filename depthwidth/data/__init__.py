"""Data sources: the embedded synthetic PCFG language (default), text files as bytes,
nanoGPT-style token files (and the corpora `depthwidth data prepare` writes, prepare.py), the
copy/denoise tasks of Kerg et al. 2020, and the UCI digits read pixel by pixel (digits, pdigits)."""

from __future__ import annotations

from typing import Any

from depthwidth.config import SCREENED_FAMILIES, ConfigError, DataConfig, ModelConfig
from depthwidth.data.base import DataError, DataSource

__all__ = [
    "DataError",
    "DataSource",
    "TASK_SOURCES",
    "CLASSIFICATION_SOURCES",
    "check_task_fits",
    "make_data",
    "resolve",
]

TASK_SOURCES = ("copy", "denoise")
CLASSIFICATION_SOURCES = ("digits", "pdigits")  # one answer at the last of 64 steps


def make_data(cfg: DataConfig, seq_len: int) -> DataSource:
    """The DataSource a DataConfig names, producing sequences of `seq_len` tokens."""
    if cfg.source == "pcfg":
        from depthwidth.data.pcfg import PCFGSource

        return PCFGSource(cfg, seq_len)
    if cfg.source == "text":
        from depthwidth.data.text import TextSource

        return TextSource(cfg, seq_len)
    if cfg.source == "tokens":
        from depthwidth.data.text import TokenFileSource

        return TokenFileSource(cfg, seq_len)
    if cfg.source in ("copy", "denoise"):
        from depthwidth.data.tasks import CopyTask

        return CopyTask(cfg, seq_len)
    if cfg.source in CLASSIFICATION_SOURCES:
        from depthwidth.data.digits import DigitsTask

        return DigitsTask(cfg, seq_len)
    raise DataError(f"DataConfig.source = {cfg.source!r} is unknown.")


def check_task_fits(model_cfg: ModelConfig, data_cfg: DataConfig) -> None:
    """Raise ConfigError when the short-term buffer ν is longer than the sequence it screens.

    Called where model meets data (`resolve`, sweep expansion): on copy/denoise the bound is
    the task delay T; on digits the 64 pixels; on language data the model's sequence length.
    """
    if model_cfg.family not in SCREENED_FAMILIES:
        return
    if data_cfg.source in TASK_SOURCES:
        if model_cfg.nu > data_cfg.task_length:
            raise ConfigError(
                f"ModelConfig.nu = {model_cfg.nu} is invalid: the short-term buffer is longer than "
                f"the task delay DataConfig.task_length = {data_cfg.task_length}."
            )
    elif data_cfg.source in CLASSIFICATION_SOURCES:
        from depthwidth.data.digits import PIXELS

        if model_cfg.nu > PIXELS:
            raise ConfigError(
                f"ModelConfig.nu = {model_cfg.nu} is invalid: the short-term buffer is longer than "
                f"the {PIXELS} pixels of DataConfig.source = {data_cfg.source!r}."
            )
    elif model_cfg.nu > model_cfg.seq_len:
        raise ConfigError(
            f"ModelConfig.nu = {model_cfg.nu} is invalid: the short-term buffer is longer than "
            f"the sequence, ModelConfig.seq_len = {model_cfg.seq_len}."
        )


def resolve(model_cfg: ModelConfig, data_cfg: DataConfig) -> tuple[ModelConfig, DataSource]:
    """Build the data source and fill in what the model takes from it (vocabulary, and the
    sequence length a task dictates). Needs no torch, so a sweep driver can plan with it."""
    data = make_data(data_cfg, model_cfg.seq_len)
    changes: dict[str, Any] = {}
    if model_cfg.vocab_size == 0:
        changes["vocab_size"] = data.vocab_size
    elif model_cfg.vocab_size < data.vocab_size:
        raise ValueError(
            f"ModelConfig.vocab_size = {model_cfg.vocab_size} is smaller than the "
            f"data's vocabulary ({data.vocab_size})."
        )
    if data.seq_len != model_cfg.seq_len:
        changes["seq_len"] = data.seq_len
    check_task_fits(model_cfg, data_cfg)
    return (model_cfg.replace(**changes) if changes else model_cfg), data
