"""Label assignment in the spectral embedding: scikit-learn's kmeans / discretize / cluster_qr, and NJW."""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import SpectralClustering, k_means
from sklearn.utils import check_random_state

from .._quiet_warnings import ignoring_warnings
from .._threads import single_native_thread
from .._typing import Int
from ._affinity_checks import dense_affinity, link_sums, scale_free
from .eigen import _check_eigen_solver, _smallest_eigenpairs

#: scikit-learn's warning of an affinity in several components (see :func:`spectral_labels`).
NOT_CONNECTED_WARNING = {"message": "Graph is not fully connected", "category": UserWarning}


def spectral_labels(affinity, n_clusters: Int, **spectral_params) -> np.ndarray:
    """Spectral clustering of a precomputed affinity.

    Dense affinities go to scikit-learn's ``SpectralClustering``.  Sparse ones
    use the component-wise eigensolver of this module (scikit-learn's sparse
    ARPACK path factorises the shifted Laplacian, whose fill-in makes it slow
    on kNN graphs of high-dimensional data) and then the same label
    assignment as scikit-learn.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric affinity, non-negative, or (dense) signed with no row summing below zero.
    n_clusters : int
        Number of clusters; ``<= 1`` labels everything 0.
    **spectral_params
        ``SpectralClustering`` parameters.  The sparse path understands
        ``eigen_solver``, ``n_components``, ``random_state``, ``n_init``,
        ``eigen_tol``, ``assign_labels`` and ``verbose``.

    Returns
    -------
    labels : ndarray of shape (n,), int64
    """
    n = affinity.shape[0]
    if n_clusters <= 1 or n < 2:
        return np.zeros(n, dtype=np.int64)
    if n_clusters >= n:
        # Only singletons make n clusters of n points (no eigensolve: scipy warns at k >= n).
        return np.arange(n, dtype=np.int64)
    # A dense one checked, and as float (booleans too); then scaled as the count read it (near 1e-310 or 1e307: to 1).
    affinity = scale_free(affinity if sp.issparse(affinity) else dense_affinity(affinity))
    if spectral_params.get("assign_labels") in ("discretize", "cluster_qr"):
        # One cluster per embedding column (embedding_columns): n_components would override the k found or given.
        spectral_params = {**spectral_params, "n_components": None}
    if sp.issparse(affinity) or spectral_params.get("assign_labels") == "njw":
        return _embedding_labels(affinity, n_clusters, **spectral_params)
    if _has_isolated_rows(affinity):
        _check_unsigned_for_isolated_rows(affinity)
        # scikit-learn's Laplacian drops the diagonal: a point linked to itself alone has degree 0 there, sits at
        # the embedding's origin and k-means splits a component for it, while the count (self-loops kept, as in
        # skabc.spectral.eigen) saw it as a component of its own.  The component-wise sparse path agrees.
        return _embedding_labels(sp.csr_matrix(affinity), n_clusters, **spectral_params)
    model = SpectralClustering(n_clusters=n_clusters, affinity="precomputed", **spectral_params)
    # A learned affinity may split into components (confident "different cluster" pairs);
    # those components are clusters, which the embedding represents correctly.
    with ignoring_warnings(NOT_CONNECTED_WARNING):
        return model.fit(affinity).labels_.astype(np.int64)


def _has_isolated_rows(affinity: np.ndarray) -> bool:
    """Whether some point of a dense affinity has no affinity to any other point."""
    return bool(np.any(link_sums(affinity) <= 0))


def _check_unsigned_for_isolated_rows(affinity: np.ndarray, zero_allowed: bool = False) -> None:
    """Refuse a signed dense affinity with a point whose affinities to the others sum below zero (or to zero, unless
    ``zero_allowed``): the cut's Laplacian (scikit-learn's, without the diagonal) has no degree there, and the
    component-wise path that cuts isolated points takes non-negative affinities only.  scikit-learn's own cut
    (``zero_allowed``) takes a sum of exactly zero as an isolated point."""
    if affinity.min() >= 0:
        return
    off_diagonal = link_sums(affinity)
    row = int(np.argmin(off_diagonal))
    if off_diagonal[row] > 0 or (zero_allowed and off_diagonal[row] == 0):
        return
    raise ValueError(
        f"the affinity is signed and point {row}'s affinities to the other points sum to {off_diagonal[row]:.3g}: "
        "the normalised Laplacian that cuts the set is undefined there; use a non-negative affinity."
    )


def _embedding_labels(
    affinity,
    n_clusters: Int,
    *,
    eigen_solver: str | None = None,
    n_components: int | None = None,
    random_state=None,
    n_init: int = 10,
    eigen_tol: float | Literal["auto"] = "auto",
    assign_labels: str = "kmeans",
    verbose: bool = False,
) -> np.ndarray:
    """Normalised spectral embedding, then :func:`_assign`.

    Sparse affinities use this module's component-wise eigensolver; dense
    ones (reached only for ``assign_labels='njw'``, which scikit-learn lacks)
    use scikit-learn's ``spectral_embedding`` exactly as ``SpectralClustering``
    calls it, so only the assignment differs from the other options.
    """
    _check_assign_labels(assign_labels)
    # One RandomState for the eigensolver then the assignment, as SpectralClustering does.
    random_state = check_random_state(random_state)
    n_components = int(min(n_clusters if n_components is None else n_components, affinity.shape[0]))
    if sp.issparse(affinity):
        solver = _check_eigen_solver(eigen_solver)
        _, vectors = _smallest_eigenpairs(affinity, n_components, solver, random_state, eigen_tol, vectors=True)
    else:
        from sklearn.manifold import spectral_embedding

        with ignoring_warnings(NOT_CONNECTED_WARNING):
            vectors = spectral_embedding(affinity, n_components=n_components, eigen_solver=eigen_solver,
                                         random_state=random_state, eigen_tol=eigen_tol, drop_first=False)
    return _assign(vectors, n_clusters, assign_labels, random_state, n_init, verbose)


#: Label assignments: scikit-learn's three, and ``'njw'`` (Ng, Jordan & Weiss 2001: k-means on the
#: rows of the spectral embedding scaled to unit length).
ASSIGN_LABELS = ("kmeans", "discretize", "cluster_qr", "njw")
#: Those of :class:`~sklearn.cluster.SpectralClustering`, whose labels (ids and dtype) a drop-in keeps as they are.
SKLEARN_ASSIGN_LABELS = ("kmeans", "discretize", "cluster_qr")


def _check_assign_labels(assign_labels: str) -> None:
    if assign_labels not in ASSIGN_LABELS:
        raise ValueError(f"assign_labels must be one of {ASSIGN_LABELS}, got {assign_labels!r}")


def sklearn_spectral_labels(
    affinity,
    n_clusters: Int,
    *,
    eigen_solver: str | None = None,
    n_components: int | None = None,
    random_state: Int | np.random.RandomState | None = None,
    n_init: int = 10,
    eigen_tol: float | Literal["auto"] = "auto",
    assign_labels: str = "kmeans",
    verbose: bool = False,
) -> np.ndarray:
    """Spectral clustering of an affinity step for step as ``SpectralClustering.fit`` does it.

    The non-learned affinities of :class:`~skabc.ABCClustering` go through
    this when ``n_clusters`` is given, so that the same settings give the
    same partition as :class:`~sklearn.cluster.SpectralClustering`, in the
    same time: scikit-learn's :func:`~sklearn.manifold.spectral_embedding`
    (dense or sparse, with its warnings, e.g. for a graph that is not fully
    connected), then its label assignment, one ``RandomState`` for both.
    ``assign_labels='njw'`` adds the row normalisation of :func:`_assign`.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric non-negative affinity.
    n_clusters : int
    eigen_solver, n_components, random_state, n_init, eigen_tol, assign_labels, verbose
        As for :class:`~sklearn.cluster.SpectralClustering`.

    Returns
    -------
    labels : ndarray of shape (n,)
        scikit-learn's labels, with scikit-learn's dtype (int32 from k-means).
    """
    from sklearn.manifold import spectral_embedding

    _check_assign_labels(assign_labels)
    if not sp.issparse(affinity) and _has_isolated_rows(np.asarray(affinity)):  # scikit-learn: 'Input contains NaN.'
        _check_unsigned_for_isolated_rows(np.asarray(affinity), zero_allowed=True)
    random_state = check_random_state(random_state)
    maps = spectral_embedding(
        affinity,
        n_components=n_clusters if n_components is None else n_components,
        eigen_solver=eigen_solver,
        random_state=random_state,
        eigen_tol=eigen_tol,
        drop_first=False,
    )
    return _assign_raw(maps, n_clusters, assign_labels, random_state, n_init, verbose)


def embedding_columns(n_clusters: Int, n_components: Int | None, assign_labels: str) -> int:
    """Embedding columns a cut into ``n_clusters`` reads: ``n_components`` where given, except for ``'discretize'``
    and ``'cluster_qr'``, which make one cluster per column and so read ``n_clusters`` of them (SpectralClustering
    itself would return ``n_components`` clusters there; its own path, :func:`sklearn_spectral_labels`, keeps that)."""
    one_per_column = n_components is None or assign_labels in ("discretize", "cluster_qr")
    return int(n_clusters if one_per_column else n_components)


def embedding_labels(vectors: np.ndarray, n_clusters: Int, *, n_components: Int | None = None, random_state=None,
                     n_init: Int = 10, assign_labels: str = "kmeans", verbose: bool = False) -> np.ndarray:
    """Labels of ``n_clusters`` clusters from a spectral embedding solved beforehand, as :func:`spectral_labels` cuts.

    ``vectors`` holds the embedding's columns in ascending order of eigenvalue (as
    :func:`~skabc.spectral.eigen._smallest_eigenpairs` returns them), at least as many as the cut reads: ``n_clusters``
    (or ``n_components``; ``'discretize'`` and ``'cluster_qr'`` read ``n_clusters`` always).  One solve then serves
    every ``k`` that is cut; ``random_state`` seeds the label assignment alone.

    Parameters
    ----------
    vectors : ndarray of shape (n_samples, n_columns)
    n_clusters : int
        ``<= 1``: every label 0; ``>= n_samples``: singletons.
    n_components, random_state, n_init, assign_labels, verbose
        As for :class:`~sklearn.cluster.SpectralClustering`.

    Returns
    -------
    labels : ndarray of shape (n_samples,), int64

    Raises
    ------
    ValueError
        If ``vectors`` has fewer columns than the cut reads, or ``assign_labels`` is unknown.
    """
    _check_assign_labels(assign_labels)
    n = vectors.shape[0]
    if n_clusters <= 1 or n < 2:
        return np.zeros(n, dtype=np.int64)
    if n_clusters >= n:
        return np.arange(n, dtype=np.int64)
    columns = int(min(embedding_columns(n_clusters, n_components, assign_labels), n))
    if vectors.shape[1] < columns:
        raise ValueError(f"the embedding has {vectors.shape[1]} columns, and this cut reads {columns}")
    return _assign(vectors[:, :columns], n_clusters, assign_labels, check_random_state(random_state), n_init, verbose)


def _assign(vectors: np.ndarray, n_clusters: Int, assign_labels: str, random_state, n_init: Int, verbose) -> np.ndarray:
    """scikit-learn's label assignment in the spectral embedding ``vectors``, as int64.

    A graph with more components than ``n_clusters`` leaves the points of the components no
    eigenvector covers at the origin, which ``'discretize'`` cannot normalise (scikit-learn's SVD
    then fails): they are linked to no cluster, so they join the first eigenvector's.
    """
    if assign_labels == "discretize":
        empty = ~np.any(vectors, axis=1)
        if empty.any():
            vectors = vectors.copy()
            vectors[empty, 0] = 1.0
    return np.asarray(_assign_raw(vectors, n_clusters, assign_labels, random_state, n_init, verbose), dtype=np.int64)


def _assign_raw(vectors: np.ndarray, n_clusters: Int, assign_labels: str, random_state, n_init: Int, verbose):
    """:func:`_assign` with the labels in the dtype scikit-learn's assignment returns them."""
    if verbose:
        print(f"Computing label assignment using {assign_labels}")
    if assign_labels in ("kmeans", "njw"):
        if assign_labels == "njw" and vectors.shape[1] > 1:
            # Unit rows: a point's direction in the embedding says which cluster it leans to, its
            # length mostly how well it is connected; many small clusters separate better this way.
            # One column has two directions only (n_components=1): there k-means reads the values.
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        with single_native_thread():  # an n x k embedding: too small to split across threads
            _, labels, _ = k_means(vectors, n_clusters, random_state=random_state, n_init=n_init, verbose=verbose)
    else:
        # Imported here: public functions of a private scikit-learn module.
        from sklearn.cluster._spectral import cluster_qr, discretize

        if assign_labels == "cluster_qr":
            labels = cluster_qr(vectors)
        else:
            labels = discretize(vectors, random_state=random_state)
    return labels
