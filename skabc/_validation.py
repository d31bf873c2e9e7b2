"""Input checks shared by the estimators: clear errors before any torch code runs."""

from __future__ import annotations

import numpy as np
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_consistent_length, column_or_1d

UNLABELLED = -1

# Beyond this magnitude float32 activations (squared in layer norms) overflow to inf/NaN.
MAX_ABS_VALUE = 1e15


def check_magnitude(X: np.ndarray) -> np.ndarray:
    """Refuse finite values too large for the network's float32 arithmetic."""
    if X.size:
        largest = float(np.max(np.abs(X)))
        if largest > MAX_ABS_VALUE:
            raise ValueError(
                f"X holds values up to {largest:.3g}, too large for the network's float32 arithmetic "
                f"(limit {MAX_ABS_VALUE:.0e}); rescale it first, e.g. with sklearn's StandardScaler."
            )
    return X


def encode_labels(y, n_samples: int) -> np.ndarray:
    """Cluster labels as codes ``0..C-1``, with ``-1`` (unlabelled) kept as ``-1``."""
    y = column_or_1d(y, warn=True)
    check_consistent_length(np.empty(n_samples), y)
    if y.dtype == object and any(v is None or (isinstance(v, float) and v != v) for v in y):
        raise ValueError("y contains missing labels (NaN or None); use -1 to mark unlabelled rows.")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinity; use -1 to mark unlabelled rows.")
    kind = type_of_target(y, input_name="y", raise_unknown=True)
    if kind not in ("binary", "multiclass"):
        raise ValueError(
            f"y must hold discrete cluster labels (got a {kind!r} target); ABC learns which rows belong together."
        )
    codes = np.full(len(y), UNLABELLED, dtype=np.int64)
    labelled = ~_is_unlabelled(y)
    if labelled.any():
        _, codes[labelled] = np.unique(y[labelled], return_inverse=True)
    return codes


def _is_unlabelled(y: np.ndarray) -> np.ndarray:
    if y.dtype.kind in "iuf":
        return y == UNLABELLED
    return np.zeros(len(y), dtype=bool)


def encode_groups(groups, n_samples: int) -> np.ndarray | None:
    """Group ids as codes ``0..G-1`` (or None)."""
    if groups is None:
        return None
    groups = column_or_1d(groups)
    if len(groups) != n_samples:
        raise ValueError(f"groups has {len(groups)} entries but X has {n_samples} rows.")
    if groups.dtype.kind == "f" and not np.all(np.isfinite(groups)):
        raise ValueError("groups contains NaN or infinity.")
    return np.unique(groups, return_inverse=True)[1].astype(np.int64)
