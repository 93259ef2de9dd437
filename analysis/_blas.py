"""Run the analysis with single-threaded OpenBLAS.

The fits solve thousands of tiny systems (3–6 parameters); OpenBLAS threads only spin and contend
for them, which on a busy 2-core machine made one L-BFGS-B step ~20× slower. This finds the OpenBLAS
copies numpy and scipy loaded (Linux /proc/self/maps) and limits them for the duration of a block;
elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
from contextlib import contextmanager

_PAIRS = [("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
          ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
          ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
          ("openblas_get_num_threads", "openblas_set_num_threads")]


@functools.lru_cache(maxsize=1)
def _controls() -> tuple:
    try:
        with open("/proc/self/maps") as fh:
            paths = {ln.split()[-1] for ln in fh if "openblas" in ln.lower() and ".so" in ln}
    except OSError:
        return ()
    out = []
    for p in sorted(paths):
        try:
            lib = ctypes.CDLL(p)
        except OSError:
            continue
        for get, set_ in _PAIRS:
            if hasattr(lib, get) and hasattr(lib, set_):
                out.append((getattr(lib, get), getattr(lib, set_)))
                break
    return tuple(out)


@contextmanager
def single_threaded_blas():
    import numpy  # noqa: F401  (load the libraries whose threads are limited)
    import scipy.linalg  # noqa: F401
    ctl = _controls()
    before = [get() for get, _ in ctl]
    for _, set_ in ctl:
        set_(1)
    try:
        yield
    finally:
        for (_, set_), n in zip(ctl, before):
            set_(n)


def single_threaded(fn):
    """Decorator form of single_threaded_blas()."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_threaded_blas():
            return fn(*args, **kwargs)
    return wrapper
