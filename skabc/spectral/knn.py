"""The k-nearest-neighbour graph of a set's rows that the arbiter's kNN candidates cut, repeated rows included."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.neighbors import NearestNeighbors, kneighbors_graph

#: Neighbours of the kNN-graph candidates (SpectralClustering's default ``n_neighbors``).
KNN_NEIGHBORS = 10
#: Most stored entries of a graph of distinct rows spread to their copies (about 300 MB): every pair of linked
#: rows repeated ``a`` and ``b`` times gives ``a * b`` entries, so a huge set dominated by a few rows keeps the
#: plain kNN graph instead.  Sets of ``ABCClustering``'s default ``max_samples`` (2,000 rows) stay far below.
MAX_SPREAD_ENTRIES = 25_000_000
#: Dense rows whose mean lies farther from zero than this many times their spread, in some column, are centred
#: before the neighbour search: ordinary data is searched as given.
FAR_OFFSET = 1e3
#: Distances within this relative gap of a row's k-th are ties (rounding separates equal distances by a few ulps).
TIE_TOLERANCE = 1e-9
#: Most neighbours fetched per row to find the end of its ties (rows of coded columns can have thousands).
MAX_TIE_CANDIDATES = 256


def knn_graph(X, n_neighbors: int = KNN_NEIGHBORS, distinct_rows: bool = True) -> sp.csr_matrix:
    """``(C + C^T) / 2`` of the directed kNN connectivity ``C`` of the distinct rows (self excluded).

    Copies of a row share its links and are linked to each other (weight 1).  Without that, a row repeated
    more than ``n_neighbors`` times (common in tables of discretised or coded columns) has only its own
    copies as neighbours, and the graph falls apart into one clique per distinct row.  A set without
    repeated rows gets the plain kNN graph of its rows, and so does one whose spread graph would hold more
    than :data:`MAX_SPREAD_ENTRIES` entries, or any set with ``distinct_rows=False``.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        One set.
    n_neighbors : int, default=KNN_NEIGHBORS
        Neighbours of each row (self excluded).
    distinct_rows : bool, default=True
        Build the graph of the distinct rows and link the copies, as above.

    Returns
    -------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Symmetric, with entries 1 (mutual neighbours or copies) and 0.5 (one-way neighbours).
    """
    if X.shape[0] < 2:
        raise ValueError(f"a kNN graph needs at least 2 rows, got {X.shape[0]}")
    # Neighbours do not change with the global scale, but squared distances of tiny (subnormal) values underflow
    # (a division: the reciprocal of a subnormal scale overflows).
    scale = abs(X).max()
    if np.isfinite(scale) and scale > 0:
        if sp.issparse(X):  # on its values: scipy divides a sparse matrix by multiplying by the reciprocal
            X = sp.csr_matrix(X, copy=True)
            X.data = X.data / scale
        else:
            X = X / scale
    if not sp.issparse(X):
        # Nor with a shift; but distances of rows far from zero lose their spread to rounding (blobs at 1e9: k = 1).
        centre, spread = X.mean(axis=0), np.ptp(X, axis=0)  # a constant column's differences are exact zeros
        if np.any((np.abs(centre) > FAR_OFFSET * spread) & (spread > 0)):
            X = X - centre
    if not distinct_rows:
        return _symmetric_knn(X, n_neighbors)
    first, inverse = _distinct_rows(X)
    if len(first) == X.shape[0]:
        return _symmetric_knn(X, n_neighbors, content_ties=True)
    n, m = X.shape[0], len(first)
    links = (_symmetric_knn(X[first], n_neighbors, content_ties=True) if m > 1 else sp.csr_matrix((1, 1))).tocoo()
    copies = np.bincount(inverse, minlength=m).astype(np.float64)
    if (copies[links.row] * copies[links.col]).sum() + (copies**2).sum() > MAX_SPREAD_ENTRIES:
        return _symmetric_knn(X, n_neighbors)
    spread = sp.csr_matrix((np.ones(n), (np.arange(n), inverse)), shape=(n, m))
    graph = (spread @ (links + sp.identity(m, format="csr")) @ spread.T).tocsr()
    graph = (graph - sp.diags(graph.diagonal())).tocsr()
    graph.eliminate_zeros()
    return graph


def links_every_row(X, n_neighbors: int = KNN_NEIGHBORS) -> bool:
    """Whether :func:`knn_graph` of ``X`` links every row to every other (at most ``n_neighbors + 1`` distinct rows).

    Such a graph shows no clusters: any cut of it is arbitrary, and copies of one row landed in different ones.
    """
    return X.shape[0] <= n_neighbors + 1 or len(_distinct_rows(X)[0]) <= n_neighbors + 1


def _symmetric_knn(X, n_neighbors: int, content_ties: bool = False) -> sp.csr_matrix:
    """``(C + C^T) / 2`` of the directed kNN connectivity ``C`` (self excluded).

    With ``content_ties`` (rows all distinct), a row's neighbours equally near as its k-th are chosen by their
    content, not their index: scikit-learn takes them in row order, so an integer grid or rounded data got
    another graph, and partition, for every permutation of its rows.  Without ties it is the same graph.
    """
    k = min(n_neighbors, X.shape[0] - 1)
    if not content_ties:
        connectivity = kneighbors_graph(X, n_neighbors=k, include_self=False)
        return (0.5 * (connectivity + connectivity.T)).tocsr()
    n = X.shape[0]
    fetched = min(2 * k, n - 1)
    search = NearestNeighbors(n_neighbors=fetched).fit(X)
    while True:
        distance, index = search.kneighbors()  # the row itself excluded, ascending
        kth = distance[:, k - 1:k]
        high = kth * (1.0 + TIE_TOLERANCE)
        if fetched >= min(n - 1, MAX_TIE_CANDIDATES) or not (distance[:, -1:] <= high).any():
            break  # every tie fetched (or as many as a set may cost)
        fetched = min(2 * fetched, n - 1, MAX_TIE_CANDIDATES)
        search.set_params(n_neighbors=fetched)
    # Nearer than the k-th's ties: always in; the ties: by content rank until k are linked.
    tied = (distance >= kth * (1.0 - TIE_TOLERANCE)) & (distance <= high)
    if (tied.sum(axis=1) <= k - (distance < kth * (1.0 - TIE_TOLERANCE)).sum(axis=1)).all():
        order = np.broadcast_to(np.arange(k), (n, k))  # no row has more ties than places: nothing to choose
    else:
        key = np.where(tied, _content_rank(X)[index], -1)  # -1: nearer than the ties, first
        key[distance > high] = n  # beyond them: never
        order = np.argsort(key, axis=1, kind="stable")[:, :k]
    rows = np.repeat(np.arange(n), k)
    connectivity = sp.csr_matrix((np.ones(n * k), (rows, np.take_along_axis(index, order, 1).ravel())),
                                 shape=(n, n))
    return (0.5 * (connectivity + connectivity.T)).tocsr()


def _content_rank(X) -> np.ndarray:
    """Each (distinct) row's place in an order of the rows fixed by their values alone."""
    if sp.issparse(X):  # the dense rows' order (a sparse matrix holds the same rows: the same graph)
        keys = _sparse_lexicographic_keys(X)
        order = np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)
    else:
        order = np.lexsort(np.asarray(X).T[::-1])
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


def _sparse_lexicographic_keys(X) -> list[tuple]:
    """Keys that order the rows of a sparse matrix as ``np.lexsort`` orders them dense (column 0 first), without
    densifying.  Two rows first differ at the first column where either stores an entry the other lacks or
    holds at another value; there a negative entry is the smaller row and a positive one the larger.  So an
    entry ``(column c, value v)`` is ``(0, c, v)`` if ``v < 0`` (at an earlier column: smaller) and ``(2, -c, v)``
    if ``v > 0`` (at an earlier column: larger), and a row ends with ``(1,)``: the zeros after its last entry.
    """
    X = _canonical_csr(X)
    columns, values = X.indices.tolist(), X.data.tolist()
    end = ((1,),)
    return [tuple((0, c, v) if v < 0 else (2, -c, v) for c, v in zip(columns[a:b], values[a:b], strict=True)) + end
            for a, b in zip(X.indptr[:-1].tolist(), X.indptr[1:].tolist(), strict=True)]


def _distinct_rows(X) -> tuple[np.ndarray, np.ndarray]:
    """Index of the first copy of each distinct row (in order of appearance), and each row's distinct row."""
    if sp.issparse(X):
        keys = _sparse_row_keys(X)
    else:
        # Each row's bytes as its key (-0.0 made 0.0 first: equal rows, equal bytes; integers as they are, which
        # float64 would merge past 2**53): hashing n keys, where np.unique(axis=0) sorts the rows column by column
        # (9.4 s of a 31 s fit on 2,000 x 20,000 TF-IDF rows, run twice).
        rows = np.asarray(X)
        keys = [(row + 0.0).tobytes() for row in rows] if rows.dtype.kind == "f" else [row.tobytes() for row in rows]
    seen: dict[bytes, int] = {}
    inverse = np.array([seen.setdefault(key, len(seen)) for key in keys], dtype=np.int64)
    first = np.unique(inverse, return_index=True)[1]  # ids numbered in order of appearance: first copies in order
    return first, inverse


def _sparse_row_keys(X) -> list[bytes]:
    """One bytes key per row of a sparse matrix, equal exactly for equal rows (its stored entries, canonical)."""
    X = _canonical_csr(X)
    bounds = zip(X.indptr[:-1], X.indptr[1:], strict=True)
    return [X.indices[a:b].tobytes() + X.data[a:b].tobytes() for a, b in bounds]


def _canonical_csr(X) -> sp.csr_matrix:
    """A CSR copy whose rows store each non-zero entry once, in column order: equal rows store equal entries."""
    X = sp.csr_matrix(X, copy=True)
    X.sum_duplicates()  # sorted column indices, no explicit duplicates
    X.eliminate_zeros()
    return X
