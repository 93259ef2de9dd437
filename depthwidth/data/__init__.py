"""Data sources: the embedded synthetic PCFG language (default), text files as bytes,
nanoGPT-style uint16 token files, and the copy/denoise tasks of Kerg et al. 2020."""

from __future__ import annotations

from depthwidth.config import DataConfig
from depthwidth.data.base import DataError, DataSource

__all__ = ["DataError", "DataSource", "make_data"]


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
    raise DataError(f"DataConfig.source = {cfg.source!r} is unknown.")
