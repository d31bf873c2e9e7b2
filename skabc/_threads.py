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

Only the main thread limits every pool.  OpenMP's limits (and those of a BLAS
threaded by OpenMP) hold for the calling thread alone, but OpenBLAS's own pool
serves the whole process: blocks overlapping in several threads (fits in a
thread pool) each restored the value they had found, so the last to end could
leave it at one thread for good.  Other threads limit their per-thread pools.
"""

from __future__ import annotations

import contextlib
import os
import threading

from threadpoolctl import ThreadpoolController

_CONTROLLERS: tuple[ThreadpoolController, ThreadpoolController] | None = None
_LOCK = threading.Lock()


def _new_lock_in_child() -> None:
    # A lock held by another thread at a fork stays held in the child for good (as in skabc._runtime).
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_new_lock_in_child)


def _controller() -> tuple[ThreadpoolController, ThreadpoolController]:
    """Every pool, and the pools whose limits hold per thread."""
    # Made once, at the first use: inspecting the loaded libraries costs milliseconds, limiting them microseconds.
    global _CONTROLLERS
    with _LOCK:
        if _CONTROLLERS is None:
            every = ThreadpoolController()
            _CONTROLLERS = every, every.select(user_api="openmp", threading_layer="openmp")
        return _CONTROLLERS


@contextlib.contextmanager
def single_native_thread():
    """Limit the native thread pools to one thread inside the block, then restore them.

    Every BLAS and OpenMP pool in the main thread; in any other thread, only the pools whose limits hold
    for that thread alone (OpenMP, and a BLAS threaded by OpenMP).
    """
    every, per_thread = _controller()
    with (every if threading.current_thread() is threading.main_thread() else per_thread).limit(limits=1):
        yield


@contextlib.contextmanager
def process_pools_restored():
    """Put the process-wide pools (OpenBLAS's own) back as they were once the block ends, where the caller is the
    main thread.

    Around sets clustered in worker threads (joblib's threading backend): scikit-learn limits those pools around
    its k-means and neighbour searches in each thread, and two such limits overlapping in two threads each restore
    the value the other had set, which could leave the whole process at one BLAS thread for good (now and then, in
    ``predict_many(sets, n_jobs=2)`` under that backend).  Elsewhere a no-op: the pools are another thread's to set.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    every, per_thread = _controller()
    process_wide = [lib for lib in every.lib_controllers if lib not in per_thread.lib_controllers]
    before = [lib.num_threads for lib in process_wide]
    try:
        yield
    finally:
        for lib, threads in zip(process_wide, before, strict=True):
            if lib.num_threads != threads:
                lib.set_num_threads(threads)
