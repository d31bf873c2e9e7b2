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


def check_trained_weights(module, X: np.ndarray, transform) -> None:
    """Raise :func:`diverged_error` where the trained ``module``'s affinity of a few of the rows ``X`` is not finite.

    The last steps of a run can overflow the weights with the loss still finite (``lr=1e30``, one step): the fit
    passed and the first ``transform`` failed, blaming a corrupted model file.  ``transform``: the network's set
    transform (canonicalisation), as inference applies it.
    """
    from .._runtime import float32_default
    from .validation import set_affinity

    rows = np.asarray(X[: min(len(X), 32)], dtype=np.float32)
    with float32_default():  # as training and inference run the network, whatever the caller's default dtype
        set_affinity(module, rows if transform is None else transform(rows))
