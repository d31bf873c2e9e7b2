"""Warnings the package expects and ignores, in blocks safe under threads (the filters are process-global)."""

from __future__ import annotations

import contextlib
import os
import threading
import warnings

#: Held by every ``catch_warnings`` block of the package: the warnings filters are process-global and
#: ``catch_warnings`` is not thread-safe (two blocks overlapping in threads, e.g. under joblib's threading
#: backend, restore each other's saved filters and leave the caller's changed).
_WARNINGS_LOCK = threading.RLock()


def _new_lock_in_child() -> None:
    # A fork while another thread held the lock would leave the child's copy held for good: every clustering in the
    # child would wait on it (as the logging module does, the child starts with a fresh lock).
    global _WARNINGS_LOCK
    _WARNINGS_LOCK = threading.RLock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_new_lock_in_child)


@contextlib.contextmanager
def ignoring_warnings(*filters: dict):
    """Ignore the warnings each ``filters`` entry matches (``warnings.filterwarnings`` keywords) inside the block.

    One such block runs at a time in the process, so threads clustering in parallel leave the caller's warnings
    filters as they were.
    """
    with _WARNINGS_LOCK, warnings.catch_warnings():
        for keywords in filters:
            warnings.filterwarnings("ignore", **keywords)
        yield
