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

The rotation is ``R = expm(S)`` of a skew-symmetric ``S``, minimised by L-BFGS
with exact gradients from autograd: every ``c`` costs a few dozen ``n x c x c``
products, far less than a search over Givens angles one at a time.
"""

from __future__ import annotations

import numpy as np
import torch

#: Iterations of L-BFGS per number of clusters.
MAX_ITER = 60


def alignment_qualities(vectors: np.ndarray, max_clusters: int | None = None) -> np.ndarray:
    """Alignment quality ``q_c`` of every number of clusters ``c`` from 2 to ``max_clusters``.

    Parameters
    ----------
    vectors : ndarray of shape (n, m)
        Leading eigenvectors of the normalised adjacency, by decreasing
        eigenvalue (column 0 belongs to the largest).
    max_clusters : int, optional
        Largest ``c`` scored; default ``m``.

    Returns
    -------
    qualities : ndarray of shape (max_clusters - 1,)
        ``qualities[c - 2]`` is ``q_c``, in ``[0, 1]``.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float64)
    n, m = vectors.shape
    top = m if max_clusters is None else min(int(max_clusters), m)
    qualities = []
    current = torch.as_tensor(vectors[:, :1])
    for c in range(2, top + 1):
        current = torch.cat([current, torch.as_tensor(vectors[:, c - 1 : c])], dim=1)
        cost, current = _best_rotation(current)
        qualities.append(1.0 - (cost / n - 1.0) / c)
    return np.clip(np.asarray(qualities), 0.0, 1.0)


def rotation_n_clusters(vectors: np.ndarray, max_clusters: int | None = None, tolerance: float = 1e-3) -> int:
    """The largest ``c >= 2`` whose alignment quality is within ``tolerance`` of the best.

    Parameters
    ----------
    vectors : ndarray of shape (n, m)
        Leading eigenvectors of the normalised adjacency, by decreasing eigenvalue.
    max_clusters : int, optional
        Largest ``c`` considered; default ``m``.
    tolerance : float, default=1e-3
        Qualities this close to the best count as tied, and the paper picks
        the largest of tied ``c``: well-separated clusters align perfectly at
        every ``c`` up to their number, so exact ties are common.

    Returns
    -------
    n_clusters : int
        ``1`` when fewer than two eigenvectors are given.
    """
    if vectors.shape[1] < 2 or vectors.shape[0] < 2:
        return 1
    qualities = alignment_qualities(vectors, max_clusters)
    good = np.flatnonzero(qualities >= qualities.max() - tolerance)
    return int(good[-1] + 2)


def _best_rotation(X: torch.Tensor) -> tuple[float, torch.Tensor]:
    """Minimal alignment cost of ``X`` over rotations, and the rotated ``X``."""
    c = X.shape[1]
    rows, cols = torch.triu_indices(c, c, offset=1)
    angles = torch.zeros(rows.numel(), dtype=X.dtype, requires_grad=True)
    optimiser = torch.optim.LBFGS([angles], lr=1.0, max_iter=MAX_ITER, line_search_fn="strong_wolfe")

    def rotated() -> torch.Tensor:
        skew = torch.zeros(c, c, dtype=X.dtype)
        skew = skew.index_put((rows, cols), angles).index_put((cols, rows), -angles)
        return X @ torch.linalg.matrix_exp(skew)

    def cost_of(Z: torch.Tensor) -> torch.Tensor:
        squares = Z.square()
        return (squares / squares.max(dim=1).values.clamp(min=1e-300)[:, None]).sum()

    def closure():
        optimiser.zero_grad()
        cost = cost_of(rotated())
        cost.backward()
        return cost

    optimiser.step(closure)
    with torch.no_grad():
        Z = rotated()
        return float(cost_of(Z)), Z
