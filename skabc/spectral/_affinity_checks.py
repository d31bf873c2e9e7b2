"""Checks of a dense affinity handed to the spectral functions (the sparse one's are ``eigen._as_csr``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def square_size(affinity) -> int:
    """The number of points of a square affinity (dense, sparse or nested lists); anything else refused by shape."""
    shape = affinity.shape if sp.issparse(affinity) else np.shape(affinity)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"affinity must be square, got shape {shape}")
    return shape[0]


def dense_affinity(affinity) -> np.ndarray:
    """``affinity`` as a square real float array (boolean and integer matrices as float64); anything else refused."""
    affinity = np.asarray(affinity)
    square_size(affinity)
    if affinity.dtype.kind not in "biuf":
        raise ValueError(f"affinity must hold real numbers, got dtype {affinity.dtype}")
    return affinity if affinity.dtype.kind == "f" else affinity.astype(np.float64)


def check_degrees(degree: np.ndarray) -> None:
    """Refuse an affinity some of whose rows sum below zero: its normalised Laplacian is undefined there.

    A signed dense affinity (a kernel such as ``'cosine'``, as scikit-learn takes it) is fine while no row sums
    below zero; past that, the rows were left out as if they had no links (``A - 0.5`` read as ``k = 1``).
    """
    if degree.size and degree.min() < 0:
        raise ValueError(f"the affinity has rows summing below zero (down to {degree.min():.3g}), where the normalised "
                         "Laplacian is undefined; spectral clustering needs non-negative affinities.")
