"""One native thread for the small dense steps.

The rotation search and k-means of the spectral step work on ``n x k``
embeddings with ``k`` of a few to a few dozen columns, the canonicalisation of a
training set and the clustering of a validation set on a few hundred rows: their
BLAS and OpenMP calls are too small to split, and threads of the BLAS and OpenMP
pools that torch, NumPy, SciPy and scikit-learn each load spin between calls and
take the cores the main thread needs.  On two cores, with two threads per pool,
``fit_predict`` on 20,000 points took 2.78 s without this limit and 1.48 s with
it, and the default fine-tune on digits 0-4 82.3 s against 48.6 s, with the same
results (``python benchmarks/threads.py``).

Blocks may overlap in several Python threads (fits in a thread pool): from
threadpoolctl 3.8 on, one thread at a time controls OpenBLAS's process-wide
pool, so the last block to end leaves it as it was (3.7 could leave it at one
thread).
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
