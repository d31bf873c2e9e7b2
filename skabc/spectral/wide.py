"""The ``k`` rule of a wide set's kNN graph: the eigengap, where one cluster must beat a later gap that stands out.

Sets spanning more dimensions than the generic arbiter learned from keep the 10-NN graph's partition
(:data:`~skabc.spectral.arbiter.WIDE_SET_CANDIDATES`); this module owns how that partition's ``k`` is read from the
graph's Laplacian spectrum (candidate ``'knn-wide-eigengap'`` of :data:`~skabc.spectral.candidates.CANDIDATES`).
"""

from __future__ import annotations

import numpy as np

from .._typing import Int
from .select import _eigengap_k

#: ``k = 1`` on a set beyond the generic arbiter's domain yields to the largest later eigengap only where that gap
#: is at least this share of the first and :data:`WIDE_DISTINCT_GAP_FACTOR` times the typical later gap
#: (:func:`wide_eigengap_k`).  High-dimensional rows make kNN graphs with hubs, whose ``lambda_2`` is large
#: however clustered the rows.  Of 19 clustered wide sets that the plain eigengap called one cluster, the later gap
#: reached 0.33 to 0.82 of the first on 12 (cut there: ARI 0.69 to 0.91) and 0.03 to 0.23 on 7; on 54 sets of one
#: cluster (Gaussian, t and Poisson noise, one-topic corpora, one-group expression tables: the families of
#: ``benchmarks/wide_sets.py`` at other seeds) at most 0.25, but up to 0.75 on raw Poisson counts of one rate
#: per column (review 66b), so the share alone does not tell one cluster.
WIDE_SINGLE_CLUSTER_GAP_SHARE = 0.3
#: ... and how far that gap must stand out of the median of the gaps after the first (up to the 20th): a cluster
#: boundary is one gap, where a single anisotropic Gaussian or a curved manifold spreads its spectrum in gaps of
#: one size.  Clustered sets rescued: 18 to 62 times (the 12 above; 19 to 61 on 13 fresh ones, review 66b); single
#: anisotropic Gaussians of 80 to 500 columns whose later gap reached 0.3 of the first: 2.9 to 8.4 times (review 66,
#: 66b).  12 lies between the two ranges (their geometric midpoint).
WIDE_DISTINCT_GAP_FACTOR = 12.0
#: Gaps after the first whose median is the typical gap :data:`WIDE_DISTINCT_GAP_FACTOR` compares with.
WIDE_TYPICAL_GAPS = 19


def wide_eigengap_k(
    eigenvalues: np.ndarray, n_points: int, max_clusters: Int, spectrum: np.ndarray | None = None
) -> int:
    """:func:`_eigengap_k`, except that ``k = 1`` yields to the largest later gap where that gap reaches
    :data:`WIDE_SINGLE_CLUSTER_GAP_SHARE` of the first and :data:`WIDE_DISTINCT_GAP_FACTOR` times the median of
    the :data:`WIDE_TYPICAL_GAPS` gaps after the first: the ``k`` rule of a kNN graph of wide rows.

    Parameters
    ----------
    eigenvalues : ndarray
        Smallest Laplacian eigenvalues, ascending (the first ``max_clusters + 1`` at most).
    n_points : int
        Rows of the set.
    max_clusters : int
        Largest ``k`` considered.
    spectrum : ndarray, default=None
        A longer run of the same smallest eigenvalues, whose gaps give the typical gap (``None``, or a shorter
        one: ``eigenvalues``'), so that a small ``max_clusters`` leaves enough gaps to compare with.

    Returns
    -------
    n_clusters : int

    Examples
    --------
    >>> from skabc.spectral.wide import wide_eigengap_k
    >>> wide_eigengap_k([0.0, 0.25, 0.26, 0.27, 0.4, 0.41], 100, 5)  # gaps 0.25, 0.01, 0.01, 0.13, 0.01
    4
    >>> wide_eigengap_k([0.0, 0.5, 0.52, 0.55, 0.58, 0.6], 100, 5)  # no later gap reaches 30 % of the first
    1
    >>> wide_eigengap_k([0.0, 0.2, 0.26, 0.32, 0.38, 0.44], 100, 5)  # 0.06 each: no gap stands out
    1
    >>> wide_eigengap_k([0.0, 0.25, 0.26, 0.4], 100, 3)  # two later gaps: too few to tell a typical one
    1
    >>> wide_eigengap_k([0.0, 0.25, 0.26, 0.4], 100, 3, spectrum=[0.0, 0.25, 0.26, 0.4, 0.41, 0.42, 0.43])
    3
    """
    values = np.asarray(eigenvalues, dtype=np.float64)
    k = _eigengap_k(values, n_points, max_clusters)
    if k != 1 or len(values) < 3:
        return k
    gaps = np.diff(values)
    later = int(np.argmax(gaps[1:])) + 1
    longer = values if spectrum is None or len(spectrum) < len(values) else spectrum
    typical_gaps = np.diff(np.asarray(longer, dtype=np.float64))
    typical = np.median(typical_gaps[1 : WIDE_TYPICAL_GAPS + 1])
    stands_out = gaps[later] >= WIDE_DISTINCT_GAP_FACTOR * typical
    return later + 1 if gaps[0] > 0 and gaps[later] >= WIDE_SINGLE_CLUSTER_GAP_SHARE * gaps[0] and stands_out else 1
