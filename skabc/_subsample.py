"""Large sets through a random subsample: the kernel and the spectral step see ``max_samples`` points.

A learned affinity costs ``O(n^2)`` time and memory and its spectral step
more, while a few thousand random points already show every cluster a set
holds.  ``ABCClustering(max_samples=m)`` therefore clusters a set of more
than ``m`` points by clustering ``m`` of them drawn at random (seeded per set)
and giving every other point the label of its nearest drawn neighbours (a
distance-weighted vote among :data:`EXTEND_NEIGHBORS`, in the set's
standardised features or, where the drawn points' own labels agree with their neighbours clearly more often
there, in its rows as given): landmark spectral clustering.
"""

from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors
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


def clustered_size(n_samples: int, max_samples: int | None) -> int:
    """How many rows of a set of ``n_samples`` the kernel and the spectral step see."""
    return n_samples if max_samples is None else min(n_samples, max_samples)


def draw_rows(n_samples: int, max_samples: int | None, seed) -> np.ndarray | None:
    """Sorted indices of the subsample of a set of ``n_samples`` points; ``None`` when it is clustered whole."""
    if clustered_size(n_samples, max_samples) == n_samples:
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
        # The values shifted, not multiplied by 2**-e: below 2**-1022 that factor itself overflows (probe 63c).
        shift = -int(np.frexp(largest)[1])
        if sp.issparse(X):
            X = X.copy()
            X.data = np.ldexp(X.data, shift)
        else:
            X = np.ldexp(X, shift)
    others = np.setdiff1d(np.arange(X.shape[0]), rows, assume_unique=True)
    vote = KNeighborsClassifier(n_neighbors=min(EXTEND_NEIGHBORS, len(rows)), weights="distance")
    out = np.empty(X.shape[0], dtype=labels.dtype)
    out[rows] = labels
    if sp.issparse(X) and len(rows) * X.shape[1] > DENSE_BLOCK_ENTRIES:
        # Too wide for a dense block of the subsample (hashed text: 2,000 x 2**20 would take 16 GiB): the sparse rows
        # as given, as the kNN graph that partitioned such a subsample read them.
        _fit_vote(vote, X[rows], labels)
        out[others] = vote.predict(X[others]) if len(others) else out[others]
        return out
    # Centred, scaled and searched a block of rows at a time, sparse X made dense block by block, never whole; the
    # same blocks for dense and sparse X, so both get the same labels (a sparse X left uncentred had a large offset
    # column swamp the float64 distances, and the sparse neighbour search broke ties otherwise).
    mean, scale = _column_statistics(X)
    # The standardised features, unless the rows as given show the subsample's own partition clearly more locally
    # (a kNN candidate's partition is of the rows as given: standardising word counts blew up their rare columns,
    # and the 1,000 rows left out of 3,000 were labelled at ARI 0.10 where their subsample scored 0.98).
    as_given = (np.zeros_like(mean), np.ones_like(scale))
    margin = max(SPACE_MARGIN, MARGIN_ROWS / len(rows))  # a few rows' worth on a small subsample: not one row's noise
    local = _self_agreement(_block(X, rows, *as_given), labels)  # one dense block at a time; the usual one is kept
    drawn = _block(X, rows, mean, scale)
    if local > _self_agreement(drawn, labels) + margin:
        (mean, scale), drawn = as_given, None  # the standardised block freed before the other is made
        drawn = _block(X, rows, mean, scale)
    _fit_vote(vote, drawn, labels)
    step = max(1, DENSE_BLOCK_ENTRIES // max(X.shape[1], 1))
    for start in range(0, len(others), step):
        chunk = others[start : start + step]
        out[chunk] = vote.predict(_block(X, chunk, mean, scale))
    return out


#: How much more of the subsample the rows as given must label as their neighbours do (leave-one-out) before the
#: vote leaves the standardised features for them (within it, both show the partition alike).
SPACE_MARGIN = 0.02
#: ... and at least this many rows of it.
MARGIN_ROWS = 3


def _fit_vote(vote: KNeighborsClassifier, rows, labels: np.ndarray) -> None:
    """Fit the vote, without scikit-learn's "`y` could represent a regression problem" warning: a subsample of many
    small clusters holds more labels than half its rows, and the user passed no ``y`` it could be about."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The number of unique classes is greater than 50%",
                                category=UserWarning)
        vote.fit(rows, labels)


def _block(X, indices: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    block = X[indices].toarray() if sp.issparse(X) else X[indices]
    return (block - mean) / scale


def _self_agreement(Z: np.ndarray, labels: np.ndarray) -> float:
    """Share of the rows of ``Z`` whose :data:`EXTEND_NEIGHBORS` nearest others hold their label most often (a row
    whose label ties with others for the most counts as the share of those tied, so that ids do not matter)."""
    n_neighbors = min(EXTEND_NEIGHBORS, len(Z) - 1)
    if n_neighbors < 1:
        return 1.0
    _, nearest = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(Z).kneighbors(Z)
    # Each row's own index among its neighbours is dropped (with copies it may not come first), else the farthest.
    own = nearest == np.arange(len(Z))[:, None]
    drop = own & (np.cumsum(own, axis=1) == 1)
    drop[~own.any(axis=1), -1] = True
    others = labels[nearest[~drop].reshape(len(Z), n_neighbors)]
    classes, own_class = np.unique(labels, return_inverse=True)
    counts = np.stack([(others == c).sum(axis=1) for c in classes], axis=1)
    top = counts == counts.max(axis=1, keepdims=True)
    return float(np.mean(top[np.arange(len(Z)), own_class] / top.sum(axis=1)))


#: Entries of the dense blocks :func:`extend_labels` makes of a sparse X (64 MiB of float64).
DENSE_BLOCK_ENTRIES = 1 << 23


def _column_statistics(X) -> tuple[np.ndarray, np.ndarray]:
    """StandardScaler's ``mean_`` and ``scale_`` of X, computed on dense blocks of its columns (the same blocks,
    and so the same bits, whether X is sparse or dense)."""
    columns = X.tocsc() if sp.issparse(X) else X

    def block(start: int, stop: int) -> np.ndarray:
        # C order either way: a column's variance sums in another order over a Fortran-ordered block.
        return np.ascontiguousarray(columns[:, start:stop].toarray() if sp.issparse(X) else columns[:, start:stop])

    step = max(1, DENSE_BLOCK_ENTRIES // max(X.shape[0], 1))
    fitted = [StandardScaler().fit(block(start, start + step)) for start in range(0, X.shape[1], step)]
    return np.concatenate([f.mean_ for f in fitted]), np.concatenate([f.scale_ for f in fitted])


def spread_affinity(affinity, rows: np.ndarray, n_samples: int) -> sp.csr_matrix:
    """The subsample's affinity as a sparse ``n_samples x n_samples`` matrix (zero outside the subsample)."""
    block = sp.coo_matrix(affinity)
    return sp.csr_matrix((block.data, (rows[block.row], rows[block.col])), shape=(n_samples, n_samples))
