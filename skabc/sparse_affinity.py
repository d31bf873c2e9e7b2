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

SEARCH_METHODS = ("auto", "exact", "ivf")
# search='auto' scores all pairs up to this many points and uses the approximate 'ivf' search beyond.
EXACT_SEARCH_MAX_SAMPLES = 5_000
# 'ivf': points per k-means cell (on average), cells probed per point, and Lloyd iterations.
_IVF_CELL_SIZE = 256
_IVF_N_PROBE = 8
_IVF_KMEANS_ITER = 10
# 'ivf': k-means is fitted on at most this many points per cell, then every point is assigned.
_IVF_KMEANS_SAMPLE = 64


def topk_affinity(
    head: torch.nn.Module,
    z: torch.Tensor,
    n_neighbors: int,
    block_rows: int | None = None,
    search: str = "auto",
    n_probe: int | None = None,
    random_state: int = 0,
) -> sp.csr_matrix:
    """Sparse kNN affinity of one set from its contextual embeddings.

    For every point the ``n_neighbors`` other points with the highest learned
    same-cluster probability ``sigmoid(logit_ij)`` are kept; the two kNN
    patterns are then united into a symmetric matrix (see the module notes).
    Memory is ``O(block_rows * n)`` for one block of scores plus
    ``O(n * n_neighbors)`` for the result, never ``O(n^2)``.

    How the neighbours are found (``search``):

    * ``'exact'``: every point is scored against all ``n`` points, ``O(n^2 d)``
      time.  With the multiplicative head the scores of a row block are one
      matrix product of width ``min(d_model, 2 d_head)``
      (:meth:`~skabc.nn.heads.SimilarityHead.rank_factors`), reduced by
      :func:`torch.topk`; the additive head has no such factorisation and
      evaluates ``w . tanh(q_i + k_j)`` for every pair through a
      ``(rows, n, d_head)`` intermediate (about 100x slower: measured 750 ns
      per pair on one core, some 2 hours at ``n = 100,000``).
    * ``'ivf'`` (multiplicative head only; **approximate**): an inverted-file
      index.  The embeddings are split into about ``n / 256`` cells by
      k-means; each point probes the ``n_probe`` cells whose centroids score
      highest against it, and its neighbours are the best of the points of
      those cells (and of its own cell, and of the cells probed by the other
      points of its cell, which are scored together in one product).  Time
      is about ``O(n d (n / 256 + 256 n_probe))``.  A true neighbour lying in
      a cell that was not probed is missed and replaced by the next best
      candidate.  Measured recall of the exact top-30 is in
      ``docs/scaling_results.md``.
    * ``'auto'``: ``'exact'`` up to :data:`EXACT_SEARCH_MAX_SAMPLES` points or
      for the additive head, ``'ivf'`` beyond.

    The kept values are always the exact learned affinities: the logits of
    the kept pairs, recomputed pair by pair (``head.pair_logits``), and their
    sigmoid in float64, as ``ContextualKernel.transform`` computes them.

    Parameters
    ----------
    head : SimilarityHead
        The similarity head (e.g. ``ContextualKernel.module_.head``), with
        ``project``, ``block_logits`` and ``pair_logits`` (and
        ``rank_factors`` for the fast paths).  It is used as is: put it in
        eval mode first if it has mode-dependent layers.
    z : torch.Tensor of shape (1, n, d)
        Contextual embeddings of the set (``module.encode(X[None])``).
    n_neighbors : int
        Neighbours kept per point, self excluded; capped at ``n - 1``.
    block_rows : int, default=None
        Rows scored at once by the exact search; ``None`` keeps one block
        under ``2**24`` scores.
    search : {'auto', 'exact', 'ivf'}, default='auto'
        Neighbour search, see above.
    n_probe : int, default=None
        ``'ivf'``: cells probed per point (``None``: 8).  More is slower and
        closer to exact.
    random_state : int, default=0
        ``'ivf'``: seed of the k-means, so the result is deterministic.

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
    if search not in SEARCH_METHODS:
        raise ValueError(f"search must be one of {SEARCH_METHODS}, got {search!r}")
    if n_probe is None:
        n_probe = _IVF_N_PROBE
    elif isinstance(n_probe, bool) or not isinstance(n_probe, Integral) or n_probe < 1:
        raise ValueError(f"n_probe must be a positive integer or None, got {n_probe!r}")
    if block_rows is None:
        block_rows = max(1, _BLOCK_CELLS // max(n, 1))
    elif isinstance(block_rows, bool) or not isinstance(block_rows, Integral) or block_rows < 1:
        raise ValueError(f"block_rows must be a positive integer or None, got {block_rows!r}")
    if k == 0:
        return sp.csr_matrix((n, n), dtype=np.float64)

    with torch.inference_mode():
        projected = head.project(z)
        factors = head.rank_factors(z, projected) if hasattr(head, "rank_factors") else None
        if search == "ivf" and factors is None:
            raise ValueError("search='ivf' needs a head with rank_factors (the multiplicative head)")
        if search == "auto":
            search = "ivf" if factors is not None and n > EXACT_SEARCH_MAX_SAMPLES else "exact"
        if factors is None:
            return _exact_by_blocks(head, z, projected, k, block_rows)
        left, right = factors[0][0].contiguous(), factors[1][0].contiguous()
        if search == "exact":
            indices = _exact_topk(left, right, k, block_rows)
        else:
            indices = _ivf_topk(left, right, k, n_probe, random_state)
        values = _pair_affinities(head, projected, indices)
    return _symmetric_union(indices.cpu().numpy(), values, n)


def _exact_by_blocks(head, z, projected, k: int, block_rows: int) -> sp.csr_matrix:
    """Exact top-k from full logit blocks (any head, e.g. the additive one)."""
    n = int(z.shape[1])
    indices = np.empty((n, k), dtype=np.int64)
    values = np.empty((n, k), dtype=np.float64)
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


def _exact_topk(left: torch.Tensor, right: torch.Tensor, k: int, block_rows: int) -> torch.Tensor:
    """``(n, k)`` column indices of the ``k`` largest off-diagonal entries of each row of ``left @ right^T``."""
    n = left.shape[0]
    indices = torch.empty((n, k), dtype=torch.long, device=left.device)
    right_t = right.T
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        scores = left[start:stop] @ right_t
        local = torch.arange(stop - start, device=scores.device)
        scores[local, local + start] = -torch.inf  # self is never a neighbour
        indices[start:stop] = torch.topk(scores, k, dim=1, sorted=False).indices
    return indices


def _pair_affinities(head, projected, indices: torch.Tensor) -> np.ndarray:
    """Affinities ``sigmoid(logit(i, indices[i, m]))`` of the kept pairs, ``(n, k)``, in row chunks.

    The logits are computed pair by pair with ``head.pair_logits`` in the embeddings' precision (as
    the dense affinity's are); the sigmoid in float64, as ``ContextualKernel.transform`` does.
    """
    n, width = indices.shape
    rows_per_chunk = max(1, 2**20 // max(width * projected[0].shape[-1], 1))
    values = np.empty((n, width), dtype=np.float64)
    for start in range(0, n, rows_per_chunk):
        cols = indices[start : start + rows_per_chunk]
        rows = torch.arange(start, start + cols.shape[0], device=cols.device)[:, None]
        logits = head.pair_logits(projected, rows, cols)
        values[start : start + cols.shape[0]] = torch.sigmoid(logits.double()).cpu().numpy()
    return values


def _nearest_centroid(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """Index of the nearest centroid (squared Euclidean) of every row of ``x``, in chunks."""
    half_norms = 0.5 * (centroids * centroids).sum(1)
    step = max(1, _BLOCK_CELLS // max(centroids.shape[0], 1))
    return torch.cat([(x[s : s + step] @ centroids.T - half_norms).argmax(1) for s in range(0, x.shape[0], step)])


def _kmeans(x: torch.Tensor, n_cells: int, generator: torch.Generator) -> torch.Tensor:
    """Cell of every row of ``x``: Lloyd's k-means fitted on a subsample, then every row assigned."""
    n = x.shape[0]
    sample = torch.randperm(n, generator=generator)[: min(n, _IVF_KMEANS_SAMPLE * n_cells)].to(x.device)
    train = x[sample]
    centroids = train[:n_cells].clone()  # the subsample is already in random order
    for _ in range(_IVF_KMEANS_ITER):
        assign = _nearest_centroid(train, centroids)
        counts = torch.bincount(assign, minlength=n_cells)
        sums = torch.zeros_like(centroids).index_add_(0, assign, train)
        filled = counts > 0  # an empty cell keeps its centroid
        centroids[filled] = sums[filled] / counts[filled, None].to(x.dtype)
    return _nearest_centroid(x, centroids)


def _ivf_topk(left: torch.Tensor, right: torch.Tensor, k: int, n_probe: int, seed: int) -> torch.Tensor:
    """Approximate ``_exact_topk`` through an inverted file of k-means cells (see :func:`topk_affinity`).

    The points of one cell are scored together, against the union of the cells they probe and
    their own cell; points are first sorted by cell, so that every cell is a contiguous slice.
    """
    n = left.shape[0]
    device = left.device
    n_cells = max(1, round(n / _IVF_CELL_SIZE))
    cell = _kmeans(right, n_cells, torch.Generator().manual_seed(int(seed)))
    order = torch.argsort(cell, stable=True)
    counts = torch.bincount(cell, minlength=n_cells)
    bounds = [0, *torch.cumsum(counts, 0).tolist()]
    left, right = left[order], right[order]  # cell c holds rows bounds[c]:bounds[c + 1] from here on
    sums = torch.cumsum(right.double(), 0)
    ends = sums[torch.tensor(bounds[1:], device=device) - 1]
    sums = torch.diff(ends, dim=0, prepend=torch.zeros_like(ends[:1]))
    centroids = (sums / counts.clamp(min=1)[:, None]).to(right.dtype)
    n_probe = min(n_probe, n_cells)
    empty = counts == 0
    result = torch.empty((n, k), dtype=torch.long, device=device)
    for c in range(n_cells):
        lo, hi = bounds[c], bounds[c + 1]
        if lo == hi:
            continue
        queries = left[lo:hi]
        # The cells probed by the points of this cell: their n_probe best centroids, and this cell.
        probe_scores = queries @ centroids.T
        probe_scores[:, empty] = -torch.inf
        probed = torch.zeros(n_cells, dtype=torch.bool, device=device)
        probed[torch.topk(probe_scores, n_probe, dim=1, sorted=False).indices.ravel()] = True
        probed[c] = True
        cells = probed.nonzero().ravel().tolist()
        if sum(bounds[b + 1] - bounds[b] for b in cells) <= k:  # too few candidates: score everything
            cells = [b for b in range(n_cells) if bounds[b] < bounds[b + 1]]
        spans = [(bounds[b], bounds[b + 1]) for b in cells]
        candidates = torch.cat([torch.arange(a, b, device=device) for a, b in spans])
        scores = queries @ torch.cat([right[a:b] for a, b in spans]).T
        offset = sum(b - a for a, b in spans[: cells.index(c)])
        local = torch.arange(hi - lo, device=device)
        scores[local, offset + local] = -torch.inf  # self is never a neighbour
        result[lo:hi] = candidates[torch.topk(scores, k, dim=1, sorted=False).indices]
    # Back from cell order to the original point order, rows and columns.
    indices = torch.empty_like(result)
    indices[order] = order[result]
    return indices


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
