"""One native thread for the small dense steps of the spectral step.

The rotation search and k-means work on ``n x k`` embeddings with ``k`` of a few
to a few dozen columns: their BLAS and OpenMP calls are too small to split, and
threads of the BLAS and OpenMP pools that torch, NumPy, SciPy and scikit-learn
each load spin between calls and take the cores the main thread needs.  On two
cores, with two threads per pool, ``fit_predict`` on 20,000 points took 2.79 s
without this limit and 1.39 s with it, with the same labels
(``python benchmarks/threads.py``).
"""

from __future__ import annotations

import contextlib
import threading

from threadpoolctl import ThreadpoolController

_CONTROLLER: ThreadpoolController | None = None
_LOCK = threading.Lock()


def _controller() -> ThreadpoolController:
    # Made once, at the first use: inspecting the loaded libraries costs milliseconds, limiting them microseconds.
    global _CONTROLLER
    with _LOCK:
        if _CONTROLLER is None:
            _CONTROLLER = ThreadpoolController()
        return _CONTROLLER


@contextlib.contextmanager
def single_native_thread():
    """Limit every BLAS and OpenMP pool to one thread inside the block, then restore them."""
    with _controller().limit(limits=1):
        yield
