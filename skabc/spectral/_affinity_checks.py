"""Checks of a dense affinity handed to the spectral functions (the sparse one's are ``eigen._as_csr``), and the
scaling of any affinity to a magnitude float64 degrees hold."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .._user_warnings import warn_user

# A precomputed affinity whose transpose differs from it by more than this (relative to its
# largest entry) is refused; smaller, rounding-level differences are averaged away by
# scikit-learn's spectral embedding, as SpectralClustering does.
SYMMETRY_RTOL = 1e-6
#: scikit-learn's ``check_symmetric`` warning, which the sparse path gives: the dense one says the same.
ASYMMETRY_WARNING = "Array is not symmetric, and will be converted to symmetric by average with its transpose."
# Side of the square tiles compared by the dense symmetry check (2 MiB of float64 each).
_SYMMETRY_BLOCK = 512


def square_size(affinity) -> int:
    """The number of points of a square affinity (dense, sparse or nested lists); anything else refused by shape."""
    shape = affinity.shape if sp.issparse(affinity) else np.shape(affinity)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"affinity must be square, got shape {shape}")
    return shape[0]


def dense_affinity(affinity) -> np.ndarray:
    """``affinity`` as a square, finite, symmetric real float array (boolean and integer matrices as float64; an
    asymmetric one averaged with its transpose, with scikit-learn's warning, as the sparse path does); anything else
    refused."""
    affinity = np.asarray(affinity)
    square_size(affinity)
    if affinity.dtype.kind not in "biuf":
        raise ValueError(f"affinity must hold real numbers, got dtype {affinity.dtype}")
    affinity = affinity if affinity.dtype.kind == "f" else affinity.astype(np.float64)
    if not affinity.size:
        return affinity
    low, high = affinity.min(), affinity.max()  # NaN propagates through both; no n x n mask
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError("affinity contains NaN or infinite values")
    # LAPACK reads one triangle: an asymmetric matrix was solved as another one, with eigenvalues below 0.
    if beyond_rounding(asymmetry(affinity), float(max(abs(low), abs(high))), rounding_rtol(affinity.dtype)):
        warn_user(ASYMMETRY_WARNING)  # a SkabcWarning: a UserWarning, as scikit-learn gives it for sparse input
        affinity = (affinity + affinity.T) / 2
    return affinity


def check_degrees(degree: np.ndarray) -> None:
    """Refuse an affinity some of whose rows sum below zero: its normalised Laplacian is undefined there.

    A signed dense affinity (a kernel such as ``'cosine'``, as scikit-learn takes it) is fine while no row sums
    below zero; past that, the rows were left out as if they had no links (``A - 0.5`` read as ``k = 1``).
    """
    if degree.size and degree.min() < 0:
        row = int(np.argmin(degree))
        raise ValueError(f"the affinity has rows summing below zero (row {row}: {degree[row]:.3g}, its own affinity "
                         "included, as the count of k reads it), where the normalised Laplacian is undefined; spectral "
                         "clustering needs non-negative affinities (a signed kernel such as 'sigmoid' may do with "
                         "n_clusters given: its cut leaves each point's own affinity out).")


def link_sums(affinity: np.ndarray) -> np.ndarray:
    """Each row's sum without its diagonal entry (a point's links to the others), as scikit-learn's Laplacian
    degrees read a dense affinity.  The diagonal is subtracted from the row sums; a row whose self-affinity dwarfs
    the result (1e16 next to links summing to -0.5 gave 0), or is not finite, is summed again without it.
    ``affinity`` is not written to."""
    diagonal = np.diagonal(affinity)
    with np.errstate(invalid="ignore"):  # an infinite self-affinity (1 / distance): summed again below
        sums = affinity.sum(axis=1) - diagonal
    for row in np.flatnonzero((diagonal != 0) & ~(np.abs(sums) > 1e-6 * np.abs(diagonal))):
        links = np.array(affinity[row])
        links[row] = 0
        sums[row] = links.sum()
    return sums


def beyond_rounding(asymmetry_: float, scale: float, rtol: float = SYMMETRY_RTOL) -> bool:
    """Whether an asymmetry of ``asymmetry_`` (:func:`asymmetry`) in a matrix whose largest entry is ``scale`` is
    more than rounding: the one tolerance of an affinity's symmetry, refused or averaged."""
    return asymmetry_ > 1e-10 + rtol * scale


def rounding_rtol(dtype) -> float:
    """The relative asymmetry that is rounding of a computed affinity of ``dtype`` (float32 distances differ from
    their transpose by ~1e-5): :data:`SYMMETRY_RTOL`, or more for a coarser type."""
    return max(SYMMETRY_RTOL, 1000 * float(np.finfo(dtype).eps))


def asymmetry(A) -> float:
    """The largest ``|A[i, j] - A[j, i]|`` of a square matrix, dense or sparse."""
    if sp.issparse(A):
        difference = A.tocsr() - A.T
        largest = float(abs(difference).max()) if difference.nnz else 0.0
    else:
        # Square tiles of the upper triangle against their mirror images: cache-friendly, and no
        # n x n temporary (a plain A - A.T would double the memory of a large affinity).
        largest, n, b = 0.0, A.shape[0], _SYMMETRY_BLOCK
        for i in range(0, n, b):
            for j in range(i, n, b):
                tile = A[i:i + b, j:j + b] - A[j:j + b, i:i + b].T
                largest = max(largest, float(np.abs(tile).max(initial=0.0)))
    return largest


#: Largest entries outside this range are scaled to 1 first: the normalised Laplacian does not depend on the scale,
#: but float64 degrees do (entries near 1e-310 sum below the smallest normal number: k = 1; near 1e307 overflow).
_SAFE_SCALE = (1e-100, 1e100)


def scale_free(affinity, powers: tuple[float, ...] = (1.0,)):
    """``affinity`` (or any matrix: signs allowed) over its largest |entry| where that entry raised to one of
    ``powers`` (the elementwise powers a caller takes next) leaves ``_SAFE_SCALE``, else untouched."""
    if sp.issparse(affinity) and affinity.format not in ("csr", "csc", "coo", "bsr"):
        affinity = affinity.tocsr()  # LIL and DOK hold no array of values
    values = affinity.data if sp.issparse(affinity) else affinity
    if values.dtype.kind == "b":  # largest |entry| 0 or 1: nothing to scale (and numpy negates no booleans)
        return affinity
    # No |values| copy of an n x n matrix; as Python floats (an unsigned minimum negated in its own type wraps).
    top = max(float(values.max()), -float(values.min())) if values.size else 0.0
    if not 0.0 < top < np.inf:  # NaN or inf: for the checks to refuse
        return affinity
    # Compared in logs: top ** power past float's range raises OverflowError on Python floats.
    low, high = math.log10(_SAFE_SCALE[0]), math.log10(_SAFE_SCALE[1])
    if all(low <= power * math.log10(top) <= high for power in powers):
        return affinity
    if not sp.issparse(affinity):
        return affinity / top
    csr = affinity.tocsr()  # scipy's own division multiplies by 1 / top: inf for top = 1e-310
    return sp.csr_matrix((csr.data / top, csr.indices, csr.indptr), shape=csr.shape)
