"""A training run that diverged: one error, however the divergence shows (a loss, a held-out set, the weights)."""

from __future__ import annotations

import numpy as np


def diverged_error() -> ValueError:
    """The error a fit raises when its training diverged."""
    return ValueError("training diverged (the loss, or the affinities of the trained weights, became NaN or "
                      "infinite); lower lr or weight_decay, or rescale X (e.g. with sklearn's StandardScaler); a "
                      "user-supplied embedder or attention module that returns NaN or infinite values ends a fit "
                      "the same way.")


def check_finite_affinity(affinity: np.ndarray) -> np.ndarray:
    """``affinity`` itself where every entry is finite; else :func:`diverged_error`."""
    if not np.isfinite(affinity.sum()):  # one reduction, no n x n mask
        raise diverged_error()
    return affinity


def collapsed_error(value: float) -> ValueError:
    """The error a fit raises when its trained kernel gives rows of different classes one and the same affinity."""
    return ValueError(f"training collapsed: the trained kernel gives every pair of rows of two different classes the "
                      f"same affinity ({value:.3g}, to within {COLLAPSED_SPREAD:g}), so it tells nothing apart (a "
                      "loss that blew up, weights decayed to nothing, or values of X too small for a network reading "
                      "raw coordinates to tell rows apart); lower lr or weight_decay, or rescale X (e.g. with "
                      "sklearn's StandardScaler).")


#: Distinct rows of each of two classes whose affinities :func:`check_trained_weights` computes.
CHECKED_ROWS_PER_CLASS = 16
#: Rows of a class searched for distinct ones (a mean-imputed block of equal rows must not hide the others).
SEARCHED_ROWS_PER_CLASS = 1000
#: Largest spread of the checked affinities that counts as one value: a kernel that learned anything, or nothing
#: yet, spreads its affinities far wider; a collapsed one gave all 1, all 0, or all below 1e-235.
COLLAPSED_SPREAD = 1e-6


def check_trained_weights(module, X: np.ndarray, transform, labels: np.ndarray | None = None) -> None:
    """Raise where the trained ``module``'s affinity of a few rows of ``X`` is not finite, or is one value.

    The last steps of a run can overflow the weights with the loss still finite (``lr=1e30``, one step): the fit
    passed and the first ``transform`` failed, blaming a corrupted model file (:func:`diverged_error`).  A run
    whose loss blew up to 1e8 and stayed finite (``lr=10``) ended with every affinity exactly 1, or exactly 0,
    diagonal included, and clustering returned one cluster without a word (:func:`collapsed_error`): with
    ``labels`` (``-1``: unlabelled), the rows checked are up to :data:`CHECKED_ROWS_PER_CLASS` distinct rows of
    each of the first two classes that have two, and affinities within :data:`COLLAPSED_SPREAD` of one value
    are refused.  ``transform``: the network's set transform (canonicalisation), as inference applies it.
    """
    from .._runtime import float32_default
    from .validation import set_affinity

    chosen = _rows_of_two_classes(X, labels) if labels is not None else None
    rows = np.asarray(X[: min(len(X), 2 * CHECKED_ROWS_PER_CLASS)] if chosen is None else X[chosen], np.float32)
    with float32_default():  # as training and inference run the network, whatever the caller's default dtype
        affinity = set_affinity(module, rows if transform is None else transform(rows))
    if chosen is not None and np.ptp(affinity) <= COLLAPSED_SPREAD:
        raise collapsed_error(float(np.median(affinity)))


#: Classes of two or more rows searched for two holding distinct rows (the search costs time per class).
SEARCHED_CLASSES = 100


def _rows_of_two_classes(X: np.ndarray, labels: np.ndarray) -> np.ndarray | None:
    """Up to :data:`CHECKED_ROWS_PER_CLASS` distinct rows of each of the first two classes holding two distinct
    rows; ``None`` where none of the first :data:`SEARCHED_CLASSES` classes of two or more rows pair up so.

    The rows are grouped by class once: a scan per class cost seconds behind 100,000 one-row classes."""
    labelled = np.flatnonzero(labels >= 0)
    by_class = labelled[np.argsort(labels[labelled], kind="stable")]
    _, starts, counts = np.unique(labels[by_class], return_index=True, return_counts=True)
    chosen = []
    for start, count in list(zip(starts[counts >= 2], counts[counts >= 2], strict=True))[:SEARCHED_CLASSES]:
        rows = by_class[start:start + min(count, SEARCHED_ROWS_PER_CLASS)]
        first = np.sort(np.unique(np.asarray(X[rows]), axis=0, return_index=True)[1])
        if len(first) >= 2:
            chosen.append(rows[first[:CHECKED_ROWS_PER_CLASS]])
        if len(chosen) == 2:
            return np.concatenate(chosen)
    return None
