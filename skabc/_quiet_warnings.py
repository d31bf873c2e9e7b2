"""Warnings the package expects and ignores, in blocks safe under threads (the filters are process-global)."""

from __future__ import annotations

import contextlib
import threading
import warnings

#: Held by every ``catch_warnings`` block of the package: the warnings filters are process-global and
#: ``catch_warnings`` is not thread-safe (two blocks overlapping in threads, e.g. under joblib's threading
#: backend, restore each other's saved filters and leave the caller's changed).
_WARNINGS_LOCK = threading.RLock()


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
