"""Number of clusters by eigenvector alignment (Zelnik-Manor & Perona, 2004).

With ``k`` well-separated clusters, the top ``k`` eigenvectors of the normalised
adjacency ``D^-1/2 A D^-1/2`` span the cluster indicators: some rotation ``R``
turns the ``n x k`` eigenvector matrix ``X`` into ``Z = X R`` with a single
non-zero entry per row.  The alignment cost

    J(R) = sum_i sum_j Z_ij^2 / max_j Z_ij^2

is ``n`` for a perfect alignment and up to ``n k`` for none; the quality
``q_k = 1 - (J_min / n - 1) / k`` is in ``[0, 1]``.  Every ``c`` from 2 up to
``max_clusters`` is scored, each rotation started from the previous one with the
next eigenvector appended (as in the paper), and the largest ``c`` whose quality
is within ``tolerance`` of the best wins.

The rotation is the Cayley transform ``R = (I - S)^-1 (I + S)`` of a
skew-symmetric ``S`` (every rotation without the eigenvalue -1; each search starts
at ``S = 0``, the previous ``c``'s rotation), minimised by L-BFGS with the exact
gradient ``(I - S)^-T X^T G (R + I)^T``, ``G = dJ/dZ``: an evaluation costs two
``c x c`` solves and two ``n x c x c`` products.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
from scipy.optimize import minimize

from .._threads import single_native_thread
from .._typing import Float, Int

#: Iterations of L-BFGS per number of clusters.
MAX_ITER = 60


def alignment_qualities(vectors: np.ndarray, max_clusters: Int | None = None) -> np.ndarray:
    """Alignment quality ``q_c`` of every number of clusters ``c`` from 2 to ``max_clusters``.

    Parameters
    ----------
    vectors : ndarray of shape (n, m)
        Leading eigenvectors of the normalised adjacency, by decreasing
        eigenvalue (column 0 belongs to the largest).
    max_clusters : int, default=None
        Largest ``c`` scored; default ``m``.

    Returns
    -------
    qualities : ndarray of shape (max_clusters - 1,)
        ``qualities[c - 2]`` is ``q_c``, in ``[0, 1]``.
    """
    vectors = _finite_vectors(vectors)
    n, m = vectors.shape
    top = m if max_clusters is None else min(int(max_clusters), m)
    qualities = []
    current = vectors[:, :1]
    with single_native_thread():
        for c in range(2, top + 1):
            current = np.hstack([current, vectors[:, c - 1 : c]])
            cost, current = _best_rotation(current)
            qualities.append(1.0 - (cost / n - 1.0) / c)
    return np.clip(np.asarray(qualities), 0.0, 1.0)


def rotation_n_clusters(vectors: np.ndarray, max_clusters: Int | None = None, tolerance: Float = 1e-3,
                        allowed: np.ndarray | None = None) -> int:
    """The largest ``c >= 2`` whose alignment quality is within ``tolerance`` of the best.

    Parameters
    ----------
    vectors : ndarray of shape (n, m)
        Leading eigenvectors of the normalised adjacency, by decreasing eigenvalue.
    max_clusters : int, default=None
        Largest ``c`` considered; default ``m``.
    tolerance : float, default=1e-3
        Qualities this close to the best count as tied, and the paper picks
        the largest of tied ``c``: well-separated clusters align perfectly at
        every ``c`` up to their number, so exact ties are common.
    allowed : ndarray of bool, default=None
        ``allowed[c - 2]``: whether ``c`` may be chosen (default: every ``c``
        scored).  The first ``c`` eigenvectors of a repeated eigenvalue are
        an arbitrary basis of its eigenspace, and so is their alignment:
        such a ``c`` is still rotated (the next one starts from it), not chosen.

    Returns
    -------
    n_clusters : int
        ``1`` when fewer than two eigenvectors are given, or ``max_clusters < 2``.
    """
    vectors = _finite_vectors(vectors)
    if isinstance(tolerance, bool) or not isinstance(tolerance, Real) or not 0 <= tolerance < np.inf:
        raise ValueError(f"tolerance must be a non-negative number, got {tolerance!r}")
    if vectors.shape[1] < 2 or vectors.shape[0] < 2 or (max_clusters is not None and max_clusters < 2):
        return 1
    qualities = alignment_qualities(vectors, max_clusters)
    if allowed is not None:
        allowed = np.asarray(allowed, dtype=bool)[: len(qualities)]
        if allowed.any():
            qualities = np.where(allowed, qualities, -np.inf)
    good = np.flatnonzero(qualities >= qualities.max() - tolerance)
    return int(good[-1] + 2)


def _finite_vectors(vectors) -> np.ndarray:
    """``vectors`` as a float64 matrix; NaN would come back as a quality NaN, outside its ``[0, 1]``."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float64)
    if vectors.ndim != 2 or not np.all(np.isfinite(vectors)):
        raise ValueError(f"vectors must be a finite 2-D array (eigenvectors), got shape {vectors.shape}"
                         + ("" if vectors.ndim != 2 else " with NaN or infinite entries"))
    return vectors


def _best_rotation(X: np.ndarray) -> tuple[float, np.ndarray]:
    """Minimal alignment cost of ``X`` over rotations, and the rotated ``X``."""
    c = X.shape[1]
    upper = np.triu_indices(c, 1)
    identity = np.eye(c)
    result = minimize(_alignment_cost, np.zeros(len(upper[0])), args=(X, upper, identity), jac=True,
                      method="L-BFGS-B", options={"maxiter": MAX_ITER})
    Z = X @ _cayley(_skew(result.x, upper, c), identity)
    squares = Z * Z
    return float((squares.sum(axis=1) / np.maximum(squares.max(axis=1), 1e-300)).sum()), Z


def _skew(angles: np.ndarray, upper: tuple[np.ndarray, np.ndarray], c: int) -> np.ndarray:
    """The ``c x c`` skew-symmetric matrix with ``angles`` at the ``upper`` triangle's indices (row by row)."""
    rows, cols = upper
    skew = np.zeros((c, c))
    skew[rows, cols], skew[cols, rows] = angles, -angles
    return skew


def _cayley(skew: np.ndarray, identity: np.ndarray) -> np.ndarray:
    return np.linalg.solve(identity - skew, identity + skew)


def _alignment_cost(angles: np.ndarray, X: np.ndarray, upper: tuple[np.ndarray, np.ndarray],
                    identity: np.ndarray) -> tuple[float, np.ndarray]:
    """``J`` of the rotation whose Cayley parameters are ``angles``, and its gradient in ``angles``.

    Called a few hundred times per set by L-BFGS, so the fixed ``upper`` indices and ``identity`` come from the
    caller, and each row's largest entry is read and written by plain indexing (``take_along_axis`` and
    ``put_along_axis`` cost more in their checks than in their work at these sizes).
    """
    rows, cols = upper
    skew = _skew(angles, upper, X.shape[1])
    rotation = _cayley(skew, identity)
    Z = X @ rotation
    squares = Z * Z
    every = np.arange(Z.shape[0])
    largest = squares.argmax(axis=1)
    # The gradient divides by peak**2: a floor of 1e-300 would underflow to 0 there (a zero row: NaN).
    peak = np.maximum(squares[every, largest], 1e-150)[:, None]
    total = squares.sum(axis=1, keepdims=True)
    # d/dZ of sum_i total_i / peak_i: a row's largest entry also moves its denominator.
    grad_Z = 2.0 * Z / peak
    top = Z[every, largest][:, None]
    grad_Z[every, largest] = (grad_Z[every, largest][:, None] - 2.0 * top * total / peak**2)[:, 0]
    # dR = (I - S)^-1 dS (R + I), so dJ/dS = (I - S)^-T (X^T G) (R + I)^T.
    grad_skew = np.linalg.solve((identity - skew).T, (X.T @ grad_Z) @ (rotation + identity).T)
    return float((total / peak).ravel().sum()), grad_skew[rows, cols] - grad_skew[cols, rows]
