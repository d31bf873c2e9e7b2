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
                      f"same affinity ({value:.3g}), so it tells nothing apart (a loss that blew up, weights decayed "
                      "to nothing, or values of X too small for a network reading raw coordinates to tell rows "
                      "apart); lower lr or weight_decay, or rescale X (e.g. with sklearn's StandardScaler).")


#: Rows of each of two classes whose affinities :func:`check_trained_weights` computes.
CHECKED_ROWS_PER_CLASS = 16


def check_trained_weights(module, X: np.ndarray, transform, labels: np.ndarray | None = None) -> None:
    """Raise where the trained ``module``'s affinity of a few rows of ``X`` is not finite, or is one value.

    The last steps of a run can overflow the weights with the loss still finite (``lr=1e30``, one step): the fit
    passed and the first ``transform`` failed, blaming a corrupted model file (:func:`diverged_error`).  A run
    whose loss blew up to 1e8 and stayed finite (``lr=10``) ended with every affinity exactly 1, or exactly 0,
    diagonal included, and clustering returned one cluster without a word (:func:`collapsed_error`): with
    ``labels``, the rows checked are :data:`CHECKED_ROWS_PER_CLASS` of each of two classes, and one value for
    every pair of distinct rows among them is refused (any network that learned something, or none yet, gives
    different pairs different values; a saturated or decayed one does not).  ``transform``: the network's set
    transform (canonicalisation), as inference applies it.
    """
    from .._runtime import float32_default
    from .validation import set_affinity

    chosen = np.arange(min(len(X), 2 * CHECKED_ROWS_PER_CLASS))
    if labels is not None:
        classes = np.unique(labels[labels >= 0])
        if len(classes) >= 2:
            chosen = np.concatenate([np.flatnonzero(labels == c)[:CHECKED_ROWS_PER_CLASS] for c in classes[:2]])
    rows = np.asarray(X[chosen], dtype=np.float32)
    with float32_default():  # as training and inference run the network, whatever the caller's default dtype
        affinity = set_affinity(module, rows if transform is None else transform(rows))
    if labels is not None and len(np.unique(labels[chosen])) >= 2 and len(np.unique(rows, axis=0)) >= 2:
        if np.ptp(affinity) == 0:
            raise collapsed_error(float(affinity.flat[0]))
