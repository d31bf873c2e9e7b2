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
* Entries whose probability underflows to ``0`` are kept as explicit zeros.

Why random partners (``n_random``): a trained kernel gives nearly the same
high probability to every pair of one cluster, so which ``n_neighbors`` of
them win the top-k is decided by small differences that mostly follow
distance in the input.  The kNN graph of a big cluster is then a thin local
mesh (a ring of points on a circle becomes a long chain), whose Laplacian
has many small eigenvalues: the eigengap sees many clusters where the dense
affinity shows one (shipped 300-epoch ISAB circles kernel, 10,000 points:
22 clusters found for 4, ARI 0.41).  A few partners per point drawn at
random, kept with their exact learned affinity, add long-range edges: high
within a cluster (tying it together as a random graph does), near zero
across.  With 10 of them the same set gives 4 clusters, ARI 0.96.
"""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np
import scipy.sparse as sp
import torch

from ._typing import Int

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
    n_neighbors: Int,
    block_rows: Int | None = None,
    search: str = "auto",
    n_probe: Int | None = None,
    random_state: Int = 0,
    n_random: Int = 0,
    point_keys: np.ndarray | None = None,
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
        Seed of the ``'ivf'`` k-means and of the random partners, so the
        result is deterministic (on the CPU; CUDA's atomic additions may
        change the last bits of the k-means centres, and so a few neighbours).
    n_random : int, default=0
        Random partners added per point, with their exact affinities (see
        the module notes and :func:`random_partners`).
    point_keys : ndarray of shape (n,), default=None
        Keys ordering the points for :func:`random_partners` (e.g.
        :func:`row_keys` of the input rows, so that the partners follow the
        points when the rows are permuted); ``None``: row order.

    Returns
    -------
    affinity : scipy.sparse.csr_matrix of shape (n, n), float64
        Symmetric, no stored diagonal, at least ``n_neighbors`` entries per
        row and at most ``2 * n * (n_neighbors + n_random)`` in all.
    """
    if z.dim() != 3 or z.shape[0] != 1:
        raise ValueError(f"z must have shape (1, n, d), got {tuple(z.shape)}")
    z = z.to(next(head.parameters()).dtype)  # the head's own precision: matmul refuses a float64 z on float32 weights
    if not torch.isfinite(z).all():  # after the cast: 1e39 in float64 is inf in float32
        raise ValueError("z contains NaN or infinite values (in the head's precision)")
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
    n_random = _check_n_random(n_random, n)
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
            indices, values = _exact_by_blocks(head, z, projected, k, block_rows)
        else:
            left, right = factors[0][0].contiguous(), factors[1][0].contiguous()
            if search == "exact":
                found = _exact_topk(left, right, k, block_rows)
            else:
                found = _ivf_topk(left, right, k, n_probe, random_state)
            indices, values = found.cpu().numpy(), _pair_affinities(head, projected, found)
        if n_random:
            partners = random_partners(n, n_random, point_keys, random_state)
            extra = _pair_affinities(head, projected, torch.as_tensor(partners, device=z.device))
            indices, values = np.hstack([indices, partners]), np.hstack([values, extra])
    return _symmetric_union(indices, values, n)


def row_keys(X: np.ndarray) -> np.ndarray:
    """A pseudo-random ``uint64`` key for every row, computed from the row's values alone.

    Equal rows get equal keys and the key of a row does not depend on where
    it stands, so ordering points by these keys gives the same order whatever
    the row order of ``X`` (used to draw :func:`random_partners`).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Rows to key (as float32, the precision the kernels see).

    Returns
    -------
    keys : ndarray of shape (n_samples,), uint64
    """
    words = np.ascontiguousarray(X, dtype=np.float32) + np.float32(0.0)  # -0.0 + 0.0 is 0.0: equal rows, equal bits
    words = words.reshape(len(words), math.prod(words.shape[1:])).view(np.uint32).astype(np.uint64)  # 0 rows too
    keys = np.full(len(words), _GOLDEN, dtype=np.uint64)
    for column in words.T:
        keys = _mix64(keys ^ column)
    return keys


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(h: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, element-wise (uint64 arithmetic wraps around)."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def random_partners(n: Int, n_random: Int, keys: np.ndarray | None = None, random_state: Int = 0) -> np.ndarray:
    """``(n, m)`` indices of random partners: a random circulant graph over an ordering of the points.

    The points are ordered by ``keys`` (ties, and ``keys=None``, by row
    index), and the point at position ``r`` is paired with those at
    positions ``r + s_1, ..., r + s_m`` (mod ``n``) for ``m = min(n_random,
    n - 1)`` distinct shifts drawn from ``random_state`` in ``[1, n)``.  So
    no point is its own partner, every point has exactly ``m`` partners and
    is the partner of exactly ``m`` others (no hubs, none left out), and
    with keys that depend on the points' values only (:func:`row_keys`)
    permuting distinct rows permutes the pairs with them (equal rows tie, and take their order).

    Parameters
    ----------
    n : int
        Number of points.
    n_random : int
        Partners per point (capped at ``n - 1``).
    keys : ndarray of shape (n,), optional
        Sort keys of the points.
    random_state : int
        Seed of the shifts.

    Returns
    -------
    partners : ndarray of shape (n, m), int64
    """
    m = _check_n_random(n_random, n)
    if keys is not None and len(keys) != n:
        raise ValueError(f"keys must have one entry per point ({n}), got {len(keys)}")
    order = np.arange(n) if keys is None else np.argsort(keys, kind="stable")
    shifts = np.random.default_rng(random_state).choice(np.arange(1, max(n, 2)), size=m, replace=False)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    return order[(position[:, None] + shifts[None, :]) % n].astype(np.int64)


def _check_n_random(n_random, n: int) -> int:
    if isinstance(n_random, bool) or not isinstance(n_random, Integral) or n_random < 0:
        raise ValueError(f"n_random must be a non-negative integer, got {n_random!r}")
    return int(min(n_random, max(n - 1, 0)))


def _exact_by_blocks(head, z, projected, k: int, block_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k (indices and affinities, ``(n, k)`` each) from full logit blocks (any head, e.g. additive)."""
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
    return indices, values


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
    # The first n_cells distinct rows of the (random-order) subsample: identical starting centroids would stay
    # identical, their cells but the first empty, and a set of many equal rows would crowd into few cells.
    _, first = np.unique(train.cpu().numpy(), axis=0, return_index=True)
    repeated = np.ones(len(train), dtype=bool)
    repeated[first] = False
    starts = np.concatenate([np.sort(first), np.flatnonzero(repeated)])[:n_cells]  # all distinct: 0..n_cells-1
    centroids = train[torch.as_tensor(starts, device=x.device)].clone()
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
        pool = torch.cat([right[a:b] for a, b in spans])
        offset = sum(b - a for a, b in spans[: cells.index(c)])
        # Rows scored at once: a cell of many equal rows (they all share one) would otherwise make a block
        # quadratic in its size; an ordinary cell is one block, as its scores always were.
        step = max(1, _BLOCK_CELLS // max(len(candidates), 1))
        for start in range(lo, hi, step):
            stop = min(start + step, hi)
            scores = left[start:stop] @ pool.T
            local = torch.arange(stop - start, device=device)
            scores[local, offset + (start - lo) + local] = -torch.inf  # self is never a neighbour
            result[start:stop] = candidates[torch.topk(scores, k, dim=1, sorted=False).indices]
    # Back from cell order to the original point order, rows and columns.
    indices = torch.empty_like(result)
    indices[order] = order[result]
    return indices


def dense_to_topk(
    affinity: np.ndarray,
    n_neighbors: Int,
    n_random: Int = 0,
    point_keys: np.ndarray | None = None,
    random_state: Int = 0,
) -> sp.csr_matrix:
    """The sparse kNN affinity of a dense one, with the conventions of :func:`topk_affinity`.

    Reference implementation for tests and small sets: keeps, per row, the ``n_neighbors`` largest
    off-diagonal entries, then unites the patterns (averaging ``A_ij`` and ``A_ji`` where both are kept).

    Parameters
    ----------
    affinity : array-like or sparse matrix of shape (n, n)
        Affinity (a sparse one is read as dense, absent entries 0).
    n_neighbors : int
        Neighbours kept per point, self excluded; capped at ``n - 1``.
    n_random, point_keys, random_state
        Random partners added per point, as in :func:`topk_affinity`.

    Returns
    -------
    affinity : scipy.sparse.csr_matrix of shape (n, n), float64
    """
    affinity = np.asarray(affinity.toarray() if sp.issparse(affinity) else affinity, dtype=np.float64)
    if affinity.ndim != 2 or affinity.shape[0] != affinity.shape[1]:
        raise ValueError(f"affinity must be a square matrix, got shape {affinity.shape}")
    if not np.all(np.isfinite(affinity)):  # NaN ranks above every entry: the diagonal was stored, NaN in it
        raise ValueError("affinity contains NaN or infinite values")
    n = affinity.shape[0]
    k = _check_n_neighbors(n_neighbors, n)
    if k == 0:
        return sp.csr_matrix((n, n), dtype=np.float64)
    scores = affinity.copy()
    np.fill_diagonal(scores, -np.inf)
    indices = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    if _check_n_random(n_random, n):
        indices = np.hstack([indices, random_partners(n, n_random, point_keys, random_state)])
    values = np.take_along_axis(affinity, indices, axis=1)
    return _symmetric_union(indices, values, n, distinct_entries=True)


def _check_n_neighbors(n_neighbors, n: int) -> int:
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, Integral) or n_neighbors < 1:
        raise ValueError(f"n_neighbors must be a positive integer, got {n_neighbors!r}")
    return int(min(n_neighbors, max(n - 1, 0)))


def _symmetric_union(indices: np.ndarray, values: np.ndarray, n: int, distinct_entries: bool = False) -> sp.csr_matrix:
    """CSR matrix on the union of the kNN pattern and its transpose.

    Where a pair was selected more than once (``(i, j)`` and ``(j, i)``, or
    as a neighbour and as a random partner) its values are averaged (they
    differ only by float rounding), once per unordered pair, so the result
    is exactly symmetric.  Explicit zeros are kept.  ``distinct_entries``: an ``(i, j)`` selected twice in row ``i``
    counts once (an asymmetric dense input: its ``A_ij`` twice outweighed ``A_ji`` in the mean).
    """
    rows = np.repeat(np.arange(n, dtype=np.int64), indices.shape[1])
    cols, values = indices.ravel().astype(np.int64, copy=False), values.ravel()
    if distinct_entries:
        first = np.unique(rows * n + cols, return_index=True)[1]
        rows, cols, values = rows[first], cols[first], values[first]
    low, high = np.minimum(rows, cols), np.maximum(rows, cols)
    pairs, inverse = np.unique(low * n + high, return_inverse=True)
    mean = np.bincount(inverse, weights=values) / np.bincount(inverse)
    low, high = np.divmod(pairs, n)
    keys = np.concatenate([low * n + high, high * n + low])
    order = np.argsort(keys, kind="stable")
    unique, data = keys[order], np.concatenate([mean, mean])[order]
    out_rows, out_cols = np.divmod(unique, n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(out_rows, minlength=n), out=indptr[1:])
    return sp.csr_matrix((data, out_cols, indptr), shape=(n, n))
