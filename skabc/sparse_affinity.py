"""Sparse k-nearest-neighbour affinities for sets too large for a dense ``n x n`` matrix.

The learned kernel gives a same-cluster probability for every pair of points.
For large sets only each point's ``n_neighbors`` most probable partners are
kept, giving a sparse symmetric affinity with ``O(n * n_neighbors)`` entries
that the sparse path of :mod:`skabc.spectral` clusters without ever forming
the dense matrix.

Conventions shared by every function here:

* **Self is excluded.**  The diagonal is never stored and ``n_neighbors``
  counts *other* points.  The diagonal carries no neighbourhood information,
  and scipy's graph Laplacian (used by scikit-learn's spectral embedding)
  ignores self-loops anyway, so leaving them out makes the eigengap and the
  spectral embedding see the same graph.
* **Symmetrisation is a union.**  ``j`` is stored in row ``i`` when ``j`` is
  among the neighbours of ``i`` *or* ``i`` among those of ``j``, with the
  (symmetric) affinity value in both places.  The matrix is exactly
  symmetric, every row holds at least ``n_neighbors`` entries and the whole
  matrix at most ``2 * n * n_neighbors`` (``2 * n_neighbors`` per row on
  average: a "hub" chosen by many points can hold more in its own row).
* Entries whose probability underflows to ``0`` are kept as explicit zeros,
  so the sparsity pattern is always the kNN pattern.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.sparse as sp
import torch

# Logit cells of one row block, as in ContextualKernel's dense inference (2**24 float32 = 64 MiB).
_BLOCK_CELLS = 2**24


def topk_affinity(
    head: torch.nn.Module, z: torch.Tensor, n_neighbors: int, block_rows: int | None = None
) -> sp.csr_matrix:
    """Sparse kNN affinity of one set from its contextual embeddings.

    For every point the ``n_neighbors`` other points with the highest learned
    same-cluster probability ``sigmoid(logit_ij)`` are kept; the two kNN
    patterns are then united into a symmetric matrix (see the module notes).

    The logits are computed block by block with ``head.block_logits`` and
    reduced with :func:`torch.topk` on the embeddings' device, so memory is
    ``O(block_rows * n)`` for one block plus ``O(n * n_neighbors)`` for the
    result, never ``O(n^2)``.  Time is still ``O(n^2 d)``: every row block is
    scored against all ``n`` points, as exact top-k requires.

    Parameters
    ----------
    head : SimilarityHead
        Module with ``block_logits(z, rows) -> (1, |rows|, n)`` symmetric
        logits (e.g. ``ContextualKernel.module_.head``).  It is used as is:
        put it in eval mode first if it has mode-dependent layers.
    z : torch.Tensor of shape (1, n, d)
        Contextual embeddings of the set (``module.encode(X[None])``).
    n_neighbors : int
        Neighbours kept per point, self excluded; capped at ``n - 1``.
    block_rows : int, default=None
        Rows scored at once; ``None`` keeps one block under ``2**24`` logits.

    Returns
    -------
    affinity : scipy.sparse.csr_matrix of shape (n, n), float64
        Symmetric, no stored diagonal, at least ``n_neighbors`` entries per
        row and at most ``2 * n * n_neighbors`` in all.
    """
    if z.dim() != 3 or z.shape[0] != 1:
        raise ValueError(f"z must have shape (1, n, d), got {tuple(z.shape)}")
    k = _check_n_neighbors(n_neighbors, z.shape[1])
    n = int(z.shape[1])
    if k == 0:
        return sp.csr_matrix((n, n), dtype=np.float64)
    if block_rows is None:
        block_rows = max(1, _BLOCK_CELLS // n)
    elif not isinstance(block_rows, Integral) or block_rows < 1:
        raise ValueError(f"block_rows must be a positive integer or None, got {block_rows!r}")

    indices = np.empty((n, k), dtype=np.int64)
    values = np.empty((n, k), dtype=np.float64)
    with torch.inference_mode():
        projected = head.project(z)
        for start in range(0, n, block_rows):
            stop = min(start + block_rows, n)
            logits = head.block_logits(z, slice(start, stop), projected)[0]
            local = torch.arange(stop - start, device=logits.device)
            logits[local, local + start] = -torch.inf  # self is never a neighbour
            top, idx = torch.topk(logits, k, dim=1, sorted=False)
            # Sigmoid in float64, as ContextualKernel.transform does (no underflow to 0).
            values[start:stop] = torch.sigmoid(top.double()).cpu().numpy()
            indices[start:stop] = idx.cpu().numpy()
    return _symmetric_union(indices, values, n)


def dense_to_topk(affinity: np.ndarray, n_neighbors: int) -> sp.csr_matrix:
    """The sparse kNN affinity of a dense one, with the conventions of :func:`topk_affinity`.

    Reference implementation for tests and small sets: keeps, per row, the
    ``n_neighbors`` largest off-diagonal entries, then unites the patterns.
    An asymmetric input is symmetrised by averaging ``A_ij`` and ``A_ji``
    where both are kept.

    Parameters
    ----------
    affinity : ndarray of shape (n, n)
        Dense affinity.
    n_neighbors : int
        Neighbours kept per point, self excluded; capped at ``n - 1``.

    Returns
    -------
    affinity : scipy.sparse.csr_matrix of shape (n, n), float64
    """
    affinity = np.asarray(affinity, dtype=np.float64)
    if affinity.ndim != 2 or affinity.shape[0] != affinity.shape[1]:
        raise ValueError(f"affinity must be a square matrix, got shape {affinity.shape}")
    n = affinity.shape[0]
    k = _check_n_neighbors(n_neighbors, n)
    if k == 0:
        return sp.csr_matrix((n, n), dtype=np.float64)
    scores = affinity.copy()
    np.fill_diagonal(scores, -np.inf)
    indices = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    values = np.take_along_axis(affinity, indices, axis=1)
    return _symmetric_union(indices, values, n)


def _check_n_neighbors(n_neighbors, n: int) -> int:
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, Integral) or n_neighbors < 1:
        raise ValueError(f"n_neighbors must be a positive integer, got {n_neighbors!r}")
    return int(min(n_neighbors, max(n - 1, 0)))


def _symmetric_union(indices: np.ndarray, values: np.ndarray, n: int) -> sp.csr_matrix:
    """CSR matrix on the union of the kNN pattern and its transpose.

    Where ``(i, j)`` and ``(j, i)`` were both selected the two values are
    averaged (they differ only by float rounding of the two blocks), so the
    result is exactly symmetric.  Explicit zeros are kept.
    """
    k = indices.shape[1]
    rows = np.repeat(np.arange(n, dtype=np.int64), k)
    cols = indices.ravel().astype(np.int64, copy=False)
    vals = values.ravel()
    keys = np.concatenate([rows * n + cols, cols * n + rows])
    unique, inverse = np.unique(keys, return_inverse=True)
    # Two terms at most per key, and a + b == b + a exactly, so the mean is symmetric bit for bit.
    data = np.bincount(inverse, weights=np.concatenate([vals, vals])) / np.bincount(inverse)
    out_rows, out_cols = np.divmod(unique, n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(out_rows, minlength=n), out=indptr[1:])
    return sp.csr_matrix((data, out_cols, indptr), shape=(n, n))
