"""SpectralStep: the spectral settings of one fitted ABCClustering, turning an affinity into labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from .._typing import Float, Int
from .._user_warnings import warn_user
from ..exceptions import SkabcWarning
from .assign import SKLEARN_ASSIGN_LABELS, sklearn_spectral_labels, spectral_labels
from .select import N_CLUSTERS_SELECTORS

#: Affinities at least this strong must survive ``affinity_power``: only powers above ~100 can underflow them to 0.
STRONG_AFFINITY = 1e-3


def raise_to_power(affinity, power: Float, check: bool = True):
    """``affinity ** power`` entrywise (a sparse one's stored entries), refused where it destroys the graph.

    Affinities below 1 raised to a huge power underflow to 0, and above 1 overflow: ``affinity_power=1e308`` made
    one cluster, or a given ``k`` of arbitrary groups, or singletons, without a word.  Refused: a power that
    underflows an affinity of at least :data:`STRONG_AFFINITY` between two points, or overflows one.
    ``check=False`` where nothing is cut (``n_clusters >= n``: singletons).
    """
    if power == 1.0:
        return affinity
    stored = affinity.data if sp.issparse(affinity) else affinity
    if check and stored.size and stored.min() < 0:  # a fractional power of it is NaN, an even one flips its sign
        link = _smallest_link(affinity)
        if link < -64 * np.finfo(stored.dtype).eps * float(np.abs(stored).max()):
            raise ValueError(f"affinity_power={power:g} needs a non-negative affinity; this one links points by "
                             f"{link:.3g} (a signed kernel such as 'cosine' or 'linear'): use affinity_power=1.")
        # Rounding below zero, or a negative self-affinity (scikit-learn's cut leaves the diagonal out): read as 0.
        affinity = affinity.maximum(0) if sp.issparse(affinity) else np.maximum(affinity, 0)
    raised = affinity.power(power) if sp.issparse(affinity) else affinity**power
    if not check:
        return raised
    values = raised.data if sp.issparse(raised) else raised
    if values.size and not np.isfinite(values.max()):  # non-negative: an inf (or NaN) is the maximum
        raise ValueError(f"affinity_power={power:g} overflows affinities above 1 to infinity; use a smaller "
                         "affinity_power.")
    # In the affinity's own precision, the power too (numpy 1.x computed a float32 scalar to a float power in float64).
    strong = values.dtype.type(STRONG_AFFINITY)
    if np.power(strong, strong.dtype.type(power)) == 0:  # else none that strong underflowed (this dtype)
        lost = _strongest_underflowed(affinity, raised, power)
        if lost >= STRONG_AFFINITY:
            raise ValueError(f"affinity_power={power:g} underflows affinities between points as strong as "
                             f"{lost:.3g} to 0, cutting the links the clustering reads. Use a smaller affinity_power.")
    return raised


def _smallest_link(affinity) -> float:
    """The smallest entry between two distinct points (the diagonal left out; ``inf`` for a single point)."""
    if sp.issparse(affinity):
        coo = affinity.tocoo()
        links = coo.data[coo.row != coo.col]
        return float(links.min()) if links.size else np.inf  # an unstored link is 0, not below it
    return float(np.where(np.eye(len(affinity), dtype=bool), np.inf, affinity).min())


def _strongest_underflowed(affinity, raised, power: Float) -> float:
    """The largest affinity between two points that ``power`` made 0 (0 if none)."""
    if sp.issparse(affinity):
        coo = affinity.tocoo()
        lost = (coo.data > 0) & (coo.data**power == 0) & (coo.row != coo.col)
        return float(coo.data[lost].max()) if lost.any() else 0.0
    lost = (raised == 0) & (affinity > 0)
    np.fill_diagonal(lost, False)
    return float(affinity[lost].max()) if lost.any() else 0.0


def _warn_unlinked_points(affinity) -> None:
    """Say where rows are all zero (no link to any point, itself included): the estimate of ``k`` reads such a row as
    eigenvalue 1, no cluster of its own, and the embedding puts its point anywhere (an all-zero affinity was one
    cluster without a word; with ``k`` given, SpectralClustering warns that the graph is not connected)."""
    if sp.issparse(affinity):
        csr = sp.csr_matrix(affinity)
        rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
        links = np.bincount(rows[csr.data != 0], minlength=csr.shape[0])
    else:
        links = np.count_nonzero(affinity, axis=1)
    unlinked = int(np.count_nonzero(links == 0))
    if unlinked and len(links) > 1:  # one point is one cluster, linked or not (a sparse affinity stores no self-link)
        warn_user(f"{unlinked} of the {len(links)} points have zero affinity to every point, themselves included: the "
                  "estimate of k counts none of them as a cluster, and each joins one arbitrarily. An affinity that "
                  "links every point (a wider kernel, more neighbours, or 1 on its diagonal) avoids this.",
                  SkabcWarning)


@dataclass(frozen=True)
class SpectralStep:
    """Everything the spectral step needs, resolved once in ``fit`` (no ``'auto'`` left).

    Parameters
    ----------
    n_clusters : int or None
        Given ``k``, or ``None`` to select it by ``selection``.
    max_clusters : int
        Largest ``k`` a selector considers.
    selection : str, default='eigengap'
        A key of :data:`~skabc.spectral.select.N_CLUSTERS_SELECTORS`.
    affinity_power : float, default=1.0
        The kernel's output is raised elementwise to this power first.
    assign_labels : str, default='kmeans'
        One of :data:`~skabc.spectral.assign.ASSIGN_LABELS`.
    eigen_solver, n_components, n_init, eigen_tol, verbose : default=None, None, 10, 'auto', 0
        As for :class:`sklearn.cluster.SpectralClustering`.
    follows_sklearn : bool, default=False
        With ``n_clusters`` given, cluster exactly as SpectralClustering does
        (:func:`~skabc.spectral.assign.sklearn_spectral_labels`: its labels, ids
        and dtype, its warnings), for the non-learned affinities; the learned
        ones keep this package's spectral step (``False``).
    gaussian_split : bool, default=False
        With ``k`` estimated, split each cluster of the set's partition that is two touching Gaussian blobs
        (:func:`~skabc.spectral.split.split_gaussian_clusters`; applied by the caller, which holds the rows).
    """

    n_clusters: Int | None
    max_clusters: Int
    selection: str = "eigengap"
    affinity_power: Float = 1.0
    assign_labels: str = "kmeans"
    eigen_solver: str | None = None
    n_components: Int | None = None
    n_init: Int = 10
    eigen_tol: Float | Literal["auto"] = "auto"
    verbose: Int = 0
    follows_sklearn: bool = False
    gaussian_split: bool = False

    def __post_init__(self) -> None:
        if self.selection not in N_CLUSTERS_SELECTORS:
            raise ValueError(f"n_clusters_selection must be one of {sorted(N_CLUSTERS_SELECTORS)}, "
                             f"got {self.selection!r}")

    def cluster(self, probabilities, eigen_seed, seed: Int):
        """Labels of one set from the kernel's affinity ``probabilities``.

        Parameters
        ----------
        probabilities : ndarray or sparse matrix of shape (n, n)
            The kernel's affinity of the set.
        eigen_seed : int or None
            Seeds the eigensolve of the ``k`` selection (unused when ``n_clusters`` is given).
        seed : int
            Seeds the embedding and the label assignment.

        Returns
        -------
        labels : ndarray of shape (n,)
            Compact ids from 0, in order of first appearance (SpectralClustering's
            own labels with ``follows_sklearn``, ``n_clusters`` given and one of its label assignments).
        affinity : ndarray or sparse matrix
            What was clustered: ``probabilities ** affinity_power``.
        n_clusters : int
            Number of clusters found.
        eigenvalues : ndarray or None
            Smallest Laplacian eigenvalues the selector compared (``None`` with ``n_clusters`` given).
        """
        n = probabilities.shape[0]
        affinity = raise_to_power(probabilities, self.affinity_power,
                                  check=self.n_clusters is None or self.n_clusters < n)
        if self.n_clusters is not None and self.n_clusters >= n:
            # Only singletons make n clusters of n points (no eigensolve: scipy refuses k >= N for a sparse graph and
            # warns for a dense one).  Asking for more is said once per call, by the caller (skabc._sets).
            labels, eigenvalues = np.arange(n), None
        elif self.n_clusters is not None and self.follows_sklearn:
            try:
                labels = sklearn_spectral_labels(affinity, self.n_clusters, random_state=seed,
                                                 **self.embedding_params())
            except ValueError:
                if self.n_clusters != 1:
                    raise
                # One cluster: on a graph of scarcely linked points scikit-learn's eigensolve (of no use for one
                # cluster) failed now and then with a bare ValueError (probe 64c); its labels where it succeeds.
                labels = np.zeros(n, dtype=np.int32 if self.assign_labels == "kmeans" else np.int64)
            if self.assign_labels not in SKLEARN_ASSIGN_LABELS:  # no SpectralClustering labels to match: ours
                labels = compact(labels)
            return labels, affinity, len(np.unique(labels)), None
        elif self.n_clusters is not None:
            labels, eigenvalues = self.labels_for(affinity, self.n_clusters, seed), None
        else:
            _warn_unlinked_points(affinity)
            found = N_CLUSTERS_SELECTORS[self.selection](self, affinity, probabilities, eigen_seed, seed)
            labels = found.labels if found.labels is not None else self.labels_for(affinity, found.n_clusters, seed)
            labels, eigenvalues = compact(labels), found.eigenvalues
        return labels, affinity, len(np.unique(labels)), eigenvalues

    def labels_for(self, affinity, n_clusters: Int, seed: Int) -> np.ndarray:
        """Spectral clustering of ``affinity`` into ``n_clusters`` (compact ids).

        Parameters
        ----------
        affinity : ndarray or scipy.sparse matrix of shape (n_samples, n_samples)
            Symmetric, non-negative.
        n_clusters : int
            Number of clusters to cut it into.
        seed : int
            Seed of the eigensolver's start and the label assignment.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Cluster ids ``0 .. k - 1`` in order of first appearance.
        """
        return compact(spectral_labels(affinity, n_clusters, random_state=seed, **self.embedding_params()))

    def embedding_params(self) -> dict:
        """The settings of the embedding and the assignment, as :func:`spectral_labels` takes them."""
        return dict(eigen_solver=self.eigen_solver, n_components=self.n_components, n_init=self.n_init,
                    eigen_tol=self.eigen_tol, assign_labels=self.assign_labels, verbose=self.verbose)


def compact(labels: np.ndarray) -> np.ndarray:
    """Relabel 0..k'-1 in order of first appearance, so ids are compact within a set.

    Parameters
    ----------
    labels : ndarray of shape (n_samples,)
        Integer labels, any values (negative ones too: each is a cluster).

    Returns
    -------
    compact_labels : ndarray of shape (n_samples,), int64
        The same partition, numbered from 0 in order of first appearance.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or (labels.size and labels.dtype.kind not in "iu"):
        raise ValueError(f"labels must be one integer label per sample, got an array of shape {labels.shape} and "
                         f"dtype {labels.dtype}")
    # Ranks of the distinct values, not a table indexed by them: negative ids wrapped round onto others, and an
    # id of 10**12 asked for a table of terabytes.
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.reshape(-1)]
