"""Warnings shown at the user's line, once per call: the first frame outside the package, however deep they arise.

A fixed ``stacklevel`` is right for one path only: the same warning raised through ``fit``, ``fit_predict``,
``ABCClustering(kernel=...)`` or a :class:`~skabc.KernelEnsemble` member sits at another depth each time, and
pointed inside the package from all but one (Python 3.12's ``skip_file_prefixes`` does this; 3.10 is supported).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from contextvars import ContextVar

from .exceptions import SkabcWarning

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

#: The (category, text) pairs raised so far inside :func:`each_warning_once` (``None`` outside it).  A context
#: variable, not a ``catch_warnings`` block: those swap process-global filters, unsafe under threads for the
#: length of a training.
_RAISED: ContextVar[set | None] = ContextVar("skabc_raised_warnings", default=None)


#: Where :func:`recording_warnings` collects the package's warnings instead of raising them (``None``: raise).
_RECORDER: ContextVar[list | None] = ContextVar("skabc_recorded_warnings", default=None)


def warn_user(message: str, category: type[Warning] = SkabcWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the first calling frame outside skabc."""
    recorder = _RECORDER.get()
    if recorder is not None:
        recorder.append((category, message))
        return
    raised = _RAISED.get()
    if raised is not None:
        if (category, message) in raised:
            return
        raised.add((category, message))
    level, frame = 1, sys._getframe(0)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_passed_through()):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


@functools.cache
def _passed_through() -> tuple[str, ...]:
    """The package, the joblib machinery it clusters sets through, and scikit-learn, whose meta-estimators
    (``Pipeline``, ``GridSearchCV``, ``ClusterMixin.fit_predict``) call it for the user: a warning pointed at
    ``sklearn/pipeline.py`` is shown once per process, whichever of the user's lines it came from."""
    import joblib
    import sklearn

    return (_PACKAGE_DIR, os.path.dirname(os.path.abspath(joblib.__file__)) + os.sep,
            os.path.dirname(os.path.abspath(sklearn.__file__)) + os.sep)


@contextlib.contextmanager
def each_warning_once():
    """Inside the block, the package raises each warning text once: e.g. the same remark on the labels from every
    member of an ensemble.  Nested blocks share the outer block's record."""
    token = _RAISED.set(set()) if _RAISED.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _RAISED.reset(token)


@contextlib.contextmanager
def recording_warnings():
    """Inside the block, the package's warnings are collected as ``(category, message)`` pairs, not raised.

    For a worker thread: the caller raises them again on its own thread, where :func:`each_warning_once` and the
    user's line are (a worker thread's stack ends in the thread pool).  A context variable, so threads running
    in parallel neither see nor swap one another's record, as ``catch_warnings`` would.
    """
    caught: list = []
    token = _RECORDER.set(caught)
    try:
        yield caught
    finally:
        _RECORDER.reset(token)
