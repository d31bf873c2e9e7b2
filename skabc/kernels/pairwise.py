"""Kernels over scikit-learn's own affinities: every non-learned ``ABCClustering(affinity=...)``.

:class:`PairwiseKernel` builds an affinity from features (a kernel of
:mod:`sklearn.metrics.pairwise`, a callable, or a k-nearest-neighbour graph);
:class:`PrecomputedKernel` takes the user's affinity or distance matrix.  Both
call scikit-learn's functions exactly as
:class:`~sklearn.cluster.SpectralClustering` calls them, so the same settings
give the same matrix, bit for bit.  They hold no learned state: they are ready
without ``fit``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from numbers import Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import KERNEL_PARAMS, pairwise_kernels
from sklearn.neighbors import NearestNeighbors, kneighbors_graph
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, validate_data

from .._constraints import SPECTRAL_N_JOBS, IntRange
from .._typing import Float, Int
from .._user_warnings import warn_user
from ..exceptions import AffinityTooLargeError
from ..spectral._affinity_checks import asymmetry, beyond_rounding, link_sums
from .base import Kernel, check_named_columns

#: The kernel names of :func:`sklearn.metrics.pairwise.pairwise_kernels`.
KERNEL_NAMES = frozenset(KERNEL_PARAMS)
#: Affinities built from features, as SpectralClustering names them.
FEATURE_AFFINITIES = KERNEL_NAMES | {"nearest_neighbors"}
#: Affinities the user computed: an affinity matrix, or distances to turn into a kNN graph.
PRECOMPUTED_AFFINITIES = frozenset({"precomputed", "precomputed_nearest_neighbors"})
#: The clustering settings a kNN graph recommends: ``k`` read off its own spectrum (``arbiter=None``, or a
#: precomputed graph with no rows to count on) by the eigenvector rotation rule, not its largest eigengap, which
#: lies far beyond the true ``k`` because a kNN graph's Laplacian eigenvalues grow smoothly (mean abs(k_hat - k)
#: 33.4 against 5.4, mean ARI 0.125 against 0.634, over 162 validation sets:
#: ``python benchmarks/count_k.py --select-rotation``).
KNN_GRAPH_CLUSTERING = {"n_clusters_selection": "rotation"}
#: Sparse formats accepted as scikit-learn's SpectralClustering accepts them.
SPARSE_FORMATS = ["csr", "csc", "coo"]



def _physical_memory_bytes() -> float | None:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # not POSIX: no reliable figure
        return None


#: A point whose affinity to every other point is below this fraction of the largest affinity has no neighbour:
#: the spectral step sees it as a component of its own.  At 1e-10 the warning missed StandardScaler-ed digits under
#: affinity='rbf' (gamma=1), whose median point's nearest affinity is 5e-6 and whose partition scored ARI 0.000,
#: SpectralClustering's given k as well.
NO_NEIGHBOUR = 1e-4
#: Kernels ``exp(-gamma * distance)``: 1 on the diagonal, and 0 between every pair where ``gamma`` is far too large.
DECAYING_KERNELS = ("rbf", "laplacian", "chi2")


def _warn_if_points_have_no_neighbour(affinity: np.ndarray, metric) -> None:
    """Say so where most points have no neighbour: ``gamma`` is far too large for the distances in ``X``.

    The spectral step then sees as many components as points: scikit-learn only notes that the graph is not
    fully connected, k-means is handed embeddings of 1e150 and finds fewer distinct clusters than it was asked
    for, and the labels mean nothing.
    """
    n = affinity.shape[0]
    if n < 3 or metric not in DECAYING_KERNELS:  # the others have no gamma to blame (cosine, linear, ...)
        return
    largest = max(float(affinity.max()), np.finfo(float).tiny)
    affinity = affinity if affinity.flags.writeable else affinity.copy()  # a callable may return a read-only one
    diagonal = affinity.diagonal().copy()
    np.fill_diagonal(affinity, 0.0)  # in place and restored: no second n x n matrix
    isolated = int(np.sum(affinity.max(axis=1) <= NO_NEIGHBOUR * largest))
    np.fill_diagonal(affinity, diagonal)
    if isolated > n // 2:
        warn_user(f"affinity={metric!r} leaves most points of a set with no neighbour (every affinity to another point "
                  f"is below {NO_NEIGHBOUR:g} of the largest): gamma is far too large for the distances in X, and the "
                  "clusters mean nothing. Standardise X (e.g. StandardScaler), lower gamma, or use "
                  "affinity='nearest_neighbors'.")


def _check_n_neighbors(n_neighbors: Int, n_samples: int, affinity: str) -> None:
    # The point itself is one of its neighbours, so n_neighbors == n_samples works, as in SpectralClustering.
    if n_neighbors > n_samples:
        raise ValueError(
            f"n_neighbors={n_neighbors} must be at most the number of rows of the set clustered, {n_samples}, "
            f"for affinity={affinity!r} (each group of `groups` is a set of its own, and a set past max_samples is "
            f"clustered on a subsample of that many rows); lower n_neighbors."
        )


class _GraphSettings:
    """What a scikit-learn affinity recommends: :data:`KNN_GRAPH_CLUSTERING` where it is a kNN graph (its
    :meth:`returns_sparse`), else the generic defaults."""

    #: scikit-learn's affinities as scikit-learn computes them, signed kernels (``'cosine'``) included.
    _checks_its_affinity = True

    def recommended_clustering(self) -> dict:
        """:data:`KNN_GRAPH_CLUSTERING` for a kNN graph, else the generic defaults (``{}``).

        Returns
        -------
        settings : dict
        """
        settings = super().recommended_clustering()
        return {**KNN_GRAPH_CLUSTERING, **settings} if self.returns_sparse(0) else settings


class PairwiseKernel(_GraphSettings, Kernel):
    """Affinity of a set from its features, by scikit-learn's own functions.

    ``metric='nearest_neighbors'`` gives the symmetrised k-nearest-neighbour
    connectivity ``0.5 * (C + C.T)`` of
    :func:`sklearn.neighbors.kneighbors_graph` (``include_self=True``), a
    sparse matrix; any other value goes to
    :func:`sklearn.metrics.pairwise.pairwise_kernels`.  This is exactly what
    :class:`~sklearn.cluster.SpectralClustering` computes for the same
    ``affinity``.  Nothing is learned: the kernel is ready without ``fit``.

    Parameters
    ----------
    metric : str or callable, default='rbf'
        ``'nearest_neighbors'``, a kernel name of
        :func:`sklearn.metrics.pairwise.kernel_metrics` (``'rbf'``,
        ``'laplacian'``, ``'poly'``, ...), or a callable taking two rows and
        returning their similarity.
    gamma : float, default=1.0
        Kernel coefficient of the rbf, poly, sigmoid, laplacian and chi2
        kernels; must be positive.
    n_neighbors : int, default=10
        Neighbours per point of the kNN graph (the point itself included);
        at most the number of samples.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Zero coefficient of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Keyword arguments of a callable ``metric`` (for a named kernel they
        complement ``gamma``, ``degree`` and ``coef0``).
    n_jobs : int, default=None
        Parallel jobs of the neighbour search.

    Attributes
    ----------
    outputs_probabilities : bool
        Always False: these affinities are not same-cluster probabilities.
    n_features_in_ : int
        Number of features seen during ``fit`` (``affinity`` itself reads a set of any width).
    feature_names_in_ : ndarray of str
        Feature names seen during ``fit``, when X has them.

    Examples
    --------
    >>> import numpy as np
    >>> from skabc.kernels.pairwise import PairwiseKernel
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    >>> PairwiseKernel("rbf", gamma=0.5).affinity(X).round(3)
    array([[1.   , 0.607, 0.   ],
           [0.607, 1.   , 0.   ],
           [0.   , 0.   , 1.   ]])
    """

    # Set by ``fit`` (scikit-learn's ``validate_data``), declared for type checkers.
    n_features_in_: int
    feature_names_in_: np.ndarray

    _parameter_constraints: dict = {
        "metric": [callable, StrOptions(set(FEATURE_AFFINITIES))],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "n_neighbors": [IntRange(1, None, closed="left")],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "n_jobs": SPECTRAL_N_JOBS,
    }

    def __init__(self, metric: str | Callable[..., Any] = "rbf", *, gamma: Float = 1.0, n_neighbors: Int = 10,
                 degree: Float = 3, coef0: Float = 1, kernel_params: dict[str, Any] | None = None,
                 n_jobs: Int | None = None):
        self.metric = metric
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_jobs = n_jobs

    def fit(self, X, y=None):
        """Check the parameters and record the number of features; nothing is learned.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored, default=None

        Returns
        -------
        self : PairwiseKernel
        """
        self._validate_params()
        validate_data(self, X, accept_sparse=SPARSE_FORMATS, dtype=np.float64)
        return self

    def affinity(self, X) -> np.ndarray | sp.csr_matrix | sp.csr_array:
        """The affinity of the set ``X``, as SpectralClustering builds it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        affinity : ndarray or sparse matrix of shape (n_samples, n_samples)
            A csr_matrix for the kNN graph (a csr_array under scikit-learn's ``sparse_interface='sparray'``).
        """
        self._validate_params()
        check_named_columns(self, X)  # any width, as SpectralClustering's affinity of a new set
        X = check_array(X, accept_sparse=SPARSE_FORMATS, dtype=np.float64, estimator=self, input_name="X")
        if self.metric == "nearest_neighbors":
            _check_n_neighbors(self.n_neighbors, X.shape[0], "nearest_neighbors")
            connectivity = kneighbors_graph(X, n_neighbors=self.n_neighbors, include_self=True, n_jobs=self.n_jobs)
            return 0.5 * (connectivity + connectivity.T)
        # A copy: SpectralClustering writes gamma, degree and coef0 into the user's dict; we do not.
        params = dict(self.kernel_params or {})
        if not callable(self.metric):
            params.update(gamma=self.gamma, degree=self.degree, coef0=self.coef0)
        affinity = pairwise_kernels(X, metric=self.metric, filter_params=True, **params)
        name = self.metric if isinstance(self.metric, str) else getattr(self.metric, "__name__", "callable")
        # Where a row's links sum below zero the normalised Laplacian takes a square root of a negative degree:
        # scikit-learn fails there with "Input contains NaN", naming neither the metric nor the cause.  Its degrees
        # leave the diagonal out, so a negative (or infinite: 1 / distance) self-affinity alone does not stop its cut.
        links = link_sums(affinity)
        if not np.isfinite(links).all():  # a NaN or infinite link; scikit-learn would say "Input contains NaN"
            largest = np.abs(X.data if sp.issparse(X) else X).max(initial=0.0)
            cause = ("its distances or products overflow float64. Scale X first (e.g. "
                     "sklearn.preprocessing.StandardScaler)." if isinstance(self.metric, str)
                     else "the callable returned NaN or inf.")
            raise ValueError(f"affinity={name!r} gives non-finite affinities (NaN or inf) on this finite X (largest "
                             f"|value| {largest:.3g}): {cause}")
        if (links < 0).any():
            point = int(np.argmin(links))
            raise ValueError(f"affinity={name!r} gives negative affinities on this X (down to {affinity.min():.3g}): "
                             f"point {point}'s affinities to the other points sum to {links[point]:.3g}, where the "
                             "normalised Laplacian is undefined; spectral clustering needs non-negative affinities "
                             "(e.g. 'rbf' or 'nearest_neighbors').")
        _warn_if_points_have_no_neighbour(affinity, self.metric)
        return affinity

    def returns_sparse(self, n_samples: int) -> bool:
        """Whether :meth:`affinity` returns a sparse matrix for a set of ``n_samples`` points.

        Parameters
        ----------
        n_samples : int
            Size of the set.

        Returns
        -------
        sparse : bool
            ``True`` for the kNN graph, ``False`` for the dense pairwise kernels.
        """
        return self.metric == "nearest_neighbors"

    def check_memory(self, n_samples: int, n_copies: float = 1.0) -> None:
        """Refuse a dense kernel matrix that could not fit in the machine's physical memory.

        A clear error instead of an allocation failure deep in NumPy; the
        kNN graph is sparse and always passes.

        Parameters
        ----------
        n_samples : int
            Size of the set.
        n_copies : float, default=1.0
            How many dense ``n x n`` float64 matrices the caller will hold at once.

        Raises
        ------
        AffinityTooLargeError
            A ``MemoryError`` (and ``ValueError``) naming the size needed and the memory available.
        """
        if self.returns_sparse(n_samples):
            return
        available = _physical_memory_bytes()
        needed = n_copies * 8.0 * float(n_samples) ** 2
        if available is not None and needed > available:
            raise AffinityTooLargeError(
                f"affinity={self.metric!r} on {n_samples} points needs about {needed / 2**30:.1f} GiB for its "
                f"dense {n_samples} x {n_samples} matrix and the spectral step's copies, more than this "
                f"machine's {available / 2**30:.1f} GiB; use affinity='nearest_neighbors' (a sparse graph)."
            )

    def __sklearn_is_fitted__(self) -> bool:
        return True  # stateless: ready without fit

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False  # ready without fit, as __sklearn_is_fitted__ says
        tags.input_tags.sparse = True
        return tags


class PrecomputedKernel(_GraphSettings, Kernel):
    """The user's own affinity matrix, or a kNN graph of the user's distances.

    ``kind='precomputed'``: ``X`` is the affinity, checked (square,
    symmetric, non-negative, finite) and returned as given, dense or sparse.
    ``kind='precomputed_nearest_neighbors'``: ``X`` holds distances (dense,
    or a sparse graph of each point's nearest neighbours); the affinity is the
    symmetrised connectivity of its ``n_neighbors`` nearest neighbours, built
    by :class:`sklearn.neighbors.NearestNeighbors` with
    ``metric='precomputed'``, exactly as
    :class:`~sklearn.cluster.SpectralClustering` builds it.

    Parameters
    ----------
    kind : {'precomputed', 'precomputed_nearest_neighbors'}, default='precomputed'
    n_neighbors : int, default=10
        Neighbours per point (``'precomputed_nearest_neighbors'`` only).
    n_jobs : int, default=None
        Parallel jobs of the neighbour search.

    Attributes
    ----------
    n_features_in_ : int
        Width of the matrix seen during ``fit`` (``affinity`` itself reads a set of any size).

    Examples
    --------
    >>> import numpy as np
    >>> from skabc.kernels.pairwise import PrecomputedKernel
    >>> A = np.array([[1.0, 0.9], [0.9, 1.0]])
    >>> PrecomputedKernel().affinity(A) is A
    True
    """

    # Set by ``fit`` (scikit-learn's ``validate_data``), declared for type checkers.
    n_features_in_: int

    _parameter_constraints: dict = {
        "kind": [StrOptions(set(PRECOMPUTED_AFFINITIES))],
        "n_neighbors": [IntRange(1, None, closed="left")],
        "n_jobs": SPECTRAL_N_JOBS,
    }

    def __init__(self, kind: str = "precomputed", *, n_neighbors: Int = 10, n_jobs: Int | None = None):
        self.kind = kind
        self.n_neighbors = n_neighbors
        self.n_jobs = n_jobs

    def fit(self, X, y=None):
        """Check the parameters and the matrix; nothing is learned.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_samples)
        y : Ignored, default=None

        Returns
        -------
        self : PrecomputedKernel
        """
        self._validate_params()
        self.affinity(validate_data(self, X, accept_sparse=SPARSE_FORMATS, dtype=np.float64))
        return self

    def affinity(
        self, X
    ) -> np.ndarray | sp.csr_matrix | sp.csc_matrix | sp.coo_matrix | sp.csr_array | sp.csc_array | sp.coo_array:
        """The affinity the square matrix ``X`` stands for.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_samples)
            Affinities (``kind='precomputed'``) or distances.

        Returns
        -------
        affinity : ndarray, scipy sparse matrix or sparse array of shape (n_samples, n_samples)
            ``kind='precomputed'``: ``X`` as validated (CSR, CSC and COO kept, other sparse formats made CSR; a sparse
            array stays an array).

        Raises
        ------
        ValueError
            If ``X`` is not square, has negative or non-finite entries, or
            (an affinity) is not symmetric; or ``n_neighbors`` exceeds the
            number of samples.
        """
        self._validate_params()
        X = check_array(X, accept_sparse=SPARSE_FORMATS, dtype=np.float64, estimator=self, input_name="X")
        what = "affinity" if self.kind == "precomputed" else "distance"
        if X.ndim != 2 or X.shape[0] != X.shape[1]:
            raise ValueError(
                f"affinity={self.kind!r} needs a square n x n {what} matrix of one set, got shape {X.shape}. "
                "A rectangular block (such as the test x train block scikit-learn's cross-validation passes to "
                "estimators of precomputed matrices) cannot be clustered; to cluster or cross-validate feature "
                "rows use another affinity (e.g. 'rbf', 'nearest_neighbors' or a callable)."
            )
        values = X.data if sp.issparse(X) else X
        lowest = float(values.min()) if values.size else 0.0
        if lowest < 0:
            raise ValueError(
                f"Negative values in data passed to affinity={self.kind!r}: it needs a non-negative {what} "
                f"matrix, and this one has entries down to {lowest:.3g}."
            )
        if self.kind == "precomputed":
            _check_symmetric(X, float(values.max()) if values.size else 0.0)
            return X
        _check_n_neighbors(self.n_neighbors, X.shape[0], self.kind)
        neighbors = NearestNeighbors(n_neighbors=self.n_neighbors, n_jobs=self.n_jobs, metric="precomputed").fit(X)
        connectivity = neighbors.kneighbors_graph(X=X, mode="connectivity")
        return 0.5 * (connectivity + connectivity.T)

    def returns_sparse(self, n_samples: int) -> bool:
        """Whether :meth:`affinity` returns a sparse matrix for a set of ``n_samples`` points.

        Parameters
        ----------
        n_samples : int
            Size of the set.

        Returns
        -------
        sparse : bool
            ``True`` for the kNN graph; a precomputed affinity is returned as given (dense or sparse).
        """
        return self.kind == "precomputed_nearest_neighbors"

    def __sklearn_is_fitted__(self) -> bool:
        return True  # stateless: ready without fit

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False  # ready without fit, as __sklearn_is_fitted__ says
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = True
        return tags


def _check_symmetric(A, scale: float) -> None:
    """Refuse an affinity that differs from its transpose beyond rounding (``scale``: its largest entry)."""
    largest = asymmetry(A)
    if beyond_rounding(largest, scale):
        raise ValueError(
            f"affinity='precomputed' needs a symmetric affinity matrix, but X[i, j] and X[j, i] differ by up to "
            f"{largest:.3g} (largest entry {scale:.3g}); symmetrise it first, e.g. 0.5 * (X + X.T). (Under "
            "cross-validation, X is the test x train block of folds of equal size, which no affinity can be: "
            "cross-validate feature rows with another affinity.)"
        )
