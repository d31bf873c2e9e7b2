"""Large sets through a random subsample: the kernel and the spectral step see ``max_samples`` points.

A learned affinity costs ``O(n^2)`` time and memory and its spectral step
more, while a few thousand random points already show every cluster a set
holds.  ``ABCClustering(max_samples=m)`` therefore clusters a set of more
than ``m`` points by clustering ``m`` of them drawn at random (seeded per set)
and giving every other point the label of its nearest drawn neighbours (a
distance-weighted vote among :data:`EXTEND_NEIGHBORS`, in the set's
standardised features): landmark spectral clustering.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_array, check_random_state

#: What ``max_samples='auto'`` means for the learned affinity (the others cluster every point).
MAX_SAMPLES_AUTO = 2000
#: Drawn neighbours whose distance-weighted vote labels each point left out of the subsample.
EXTEND_NEIGHBORS = 10


def resolve_max_samples(max_samples, learned: bool) -> int | None:
    """``max_samples`` with ``'auto'`` resolved: :data:`MAX_SAMPLES_AUTO` for a learned affinity, else ``None``."""
    if max_samples == "auto":
        return MAX_SAMPLES_AUTO if learned else None
    return max_samples


def draw_rows(n_samples: int, max_samples: int | None, seed) -> np.ndarray | None:
    """Sorted indices of the subsample of a set of ``n_samples`` points; ``None`` when it is clustered whole."""
    if max_samples is None or n_samples <= max_samples:
        return None
    # An int seed (ABCClustering's per-set seed) gives its own stream, leaving any shared RandomState alone.
    rng = np.random.default_rng([seed, 5]) if isinstance(seed, Integral) else check_random_state(seed)
    return np.sort(rng.choice(n_samples, max_samples, replace=False))


#: Largest |value| outside which extend_labels first rescales the set by a power of two (exactly).
EXACT_SCALE_RANGE = (1e-100, 1e100)


def extend_labels(X, rows: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Labels of every point of ``X``: ``labels`` at ``rows``, the vote of the nearest of them elsewhere."""
    X = check_array(X, accept_sparse="csr", dtype=np.float64)
    largest = float(abs(X).max()) if X.shape[0] and X.shape[1] else 0.0
    if 0.0 < largest < EXACT_SCALE_RANGE[0] or largest > EXACT_SCALE_RANGE[1]:
        # Variances of values near 1e-200 underflow (and near 1e160 overflow) in the standardisation; a power
        # of two rescales exactly, so the vote is the same as for the set at an ordinary scale.
        factor = float(np.ldexp(1.0, -int(np.frexp(largest)[1])))
        X = X.multiply(factor).tocsr() if sp.issparse(X) else X * factor
    scaled = StandardScaler(with_mean=not sp.issparse(X)).fit_transform(X)
    others = np.setdiff1d(np.arange(X.shape[0]), rows, assume_unique=True)
    vote = KNeighborsClassifier(n_neighbors=min(EXTEND_NEIGHBORS, len(rows)), weights="distance")
    out = np.empty(X.shape[0], dtype=labels.dtype)
    out[rows] = labels
    out[others] = vote.fit(scaled[rows], labels).predict(scaled[others])
    return out


def spread_affinity(affinity, rows: np.ndarray, n_samples: int) -> sp.csr_matrix:
    """The subsample's affinity as a sparse ``n_samples x n_samples`` matrix (zero outside the subsample)."""
    block = sp.coo_matrix(affinity)
    return sp.csr_matrix((block.data, (rows[block.row], rows[block.col])), shape=(n_samples, n_samples))
