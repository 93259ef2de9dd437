"""Run the analysis with single-threaded BLAS.

The fits solve thousands of tiny systems (3–6 parameters); BLAS threads only spin and contend
for them, which on a busy 2-core machine made one L-BFGS-B step ~20× slower. threadpoolctl
limits whichever BLAS numpy and scipy loaded, for the duration of a call.
"""

from __future__ import annotations

import functools

from threadpoolctl import threadpool_limits


def single_threaded(fn):
    """Run `fn` with every loaded BLAS limited to one thread, restoring the limits afterwards."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import numpy  # noqa: F401  (load the libraries whose threads are limited)
        import scipy.linalg  # noqa: F401

        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapper
