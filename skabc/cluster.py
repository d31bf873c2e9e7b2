"""ABCClustering: spectral clustering on a kernel learned from context."""

from __future__ import annotations

import copy
import warnings
from itertools import pairwise
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from sklearn import config_context
from sklearn.base import BaseEstimator, ClusterMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples, check_array, check_is_fitted, validate_data

from ._persistence import load_clustering, save_clustering
from ._runtime import memory_limit_bytes
from ._validation import encode_groups, encode_labels
from .exceptions import AffinityTooLargeError
from .kernels import ContextualKernel, as_kernel
from .kernels.pairwise import (
    FEATURE_AFFINITIES,
    PRECOMPUTED_AFFINITIES,
    SPARSE_FORMATS,
    PairwiseKernel,
    PrecomputedKernel,
)
from .spectral import (
    ASSIGN_LABELS,
    consensus_n_clusters,
    eigengap_candidates,
    eigengap_spectral_labels,
    estimate_n_clusters,
    pair_log_likelihood,
    sklearn_spectral_labels,
    spectral_labels,
)

#: How many eigengap candidates ``n_clusters_selection='likelihood'`` compares.
LIKELIHOOD_CANDIDATES = 5

#: Every value of ``affinity`` given by name: the learned kernel, and all that SpectralClustering accepts.
AFFINITIES = frozenset({"learned"}) | FEATURE_AFFINITIES | PRECOMPUTED_AFFINITIES


class ABCClustering(ClusterMixin, BaseEstimator):
    """Attention-Based Clustering: a drop-in for :class:`~sklearn.cluster.SpectralClustering`.

    A kernel turns the set ``X`` into an affinity: by default a
    :class:`ContextualKernel` learned from context, or any affinity
    :class:`~sklearn.cluster.SpectralClustering` builds (``affinity='rbf'``,
    ``'nearest_neighbors'``, ``'precomputed'``, ...).  The number of clusters
    is given or estimated by the eigengap of the normalised Laplacian, for
    every affinity; spectral clustering of the affinity gives the labels.
    Unlike SpectralClustering, ``n_clusters`` defaults to ``None``
    (estimated); see "Coming from SpectralClustering" in the documentation
    for every other difference.

    Parameters
    ----------
    n_clusters : int, default=None
        Number of clusters.  ``None`` estimates it per set from the
        eigengaps of ``L = I - D^-1/2 A D^-1/2`` (at most ``max_clusters``),
        as ``n_clusters_selection`` says.
    kernel : ContextualKernel, default=None
        The learned kernel (``affinity='learned'`` only).  ``None`` uses the
        shipped generic kernel (``skabc.pretrained.load('generic')``, trained
        on synthetic clustering problems; any number of features), which
        clusters ``X`` zero-shot.  ``y`` trains a kernel only when you ask
        for it: a kernel you give that is not fitted is trained (a clone of
        it) on the labels of ``fit``, and a fitted one with
        ``warm_start=True`` is fine-tuned (a copy of it; e.g.
        ``skabc.pretrained.load('generic').set_params(**FINE_TUNE)``).  With
        ``kernel=None`` or any other fitted kernel, ``fit`` ignores ``y``,
        as every scikit-learn clusterer does (wrap a kernel in
        :class:`sklearn.frozen.FrozenEstimator` to keep it fitted through
        ``clone``).
    affinity : str or callable, default='learned'
        Where the affinity comes from.  ``'learned'``: ``kernel``.  Every
        other value means what it means for
        :class:`~sklearn.cluster.SpectralClustering`, and is computed by
        scikit-learn's own functions
        (:class:`~skabc.kernels.pairwise.PairwiseKernel`,
        :class:`~skabc.kernels.pairwise.PrecomputedKernel`):
        ``'nearest_neighbors'``, the symmetrised kNN connectivity graph
        (sparse); ``'precomputed'``, ``X`` is the ``n x n`` affinity itself
        (dense or sparse; symmetric, non-negative, finite);
        ``'precomputed_nearest_neighbors'``, ``X`` holds distances (dense,
        or a sparse graph of nearest neighbours) turned into the kNN graph;
        a kernel name of :func:`sklearn.metrics.pairwise.kernel_metrics`
        (``'rbf'``, ``'laplacian'``, ``'poly'``, ...), or a callable taking
        two rows, through :func:`~sklearn.metrics.pairwise.pairwise_kernels`.
        With ``n_clusters`` given, these affinities go through
        SpectralClustering's own spectral step (seeded by ``random_state``
        exactly as there, so the same settings give the same partition);
        with ``n_clusters=None`` the number of clusters is estimated, as
        for the learned affinity.
    gamma : float, default=1.0
        Kernel coefficient of the rbf, poly, sigmoid, laplacian and chi2
        affinities; must be positive.
    n_neighbors : int, default=10
        Neighbours per point of the ``'nearest_neighbors'`` and
        ``'precomputed_nearest_neighbors'`` graphs; must be smaller than the
        number of samples.
    degree : float, default=3
        Degree of the polynomial affinity.
    coef0 : float, default=1
        Zero coefficient of the polynomial and sigmoid affinities.
    kernel_params : dict, default=None
        Keyword arguments of a callable ``affinity``.
    max_clusters : int, default=50
        Upper bound of the eigengap estimate.
    n_clusters_selection : {'eigengap', 'consensus', 'likelihood'} or 'auto', default='auto'
        How ``k`` is estimated when ``n_clusters`` is None.  ``'eigengap'``:
        the largest eigengap.  ``'consensus'``: the median, rounded down, of
        the largest-eigengap estimates on the affinity raised to 1/4, 1/2, 1
        and 2 times ``affinity_power``
        (:func:`~skabc.spectral.consensus_n_clusters`), which hedges between
        the too many clusters a sharp affinity gives a broad cluster and the
        too few a soft one gives close clusters.  It costs four eigengap
        estimates instead of one, which shows beyond a few thousand points
        (iterative eigensolvers): pass ``'eigengap'`` there if time matters
        more.  ``'likelihood'``: the
        :data:`LIKELIHOOD_CANDIDATES` largest eigengaps each propose a ``k``,
        the set is clustered for each, and the partition that best explains
        the kernel's same-cluster probabilities wins (highest
        :func:`~skabc.spectral.pair_log_likelihood` of the affinity before
        ``affinity_power``; the kernel must output probabilities in
        ``[0, 1]``, as a :class:`ContextualKernel` does).  It costs one
        spectral clustering per candidate.  ``'auto'``: the value chosen on
        validation data for the shipped generic kernel when ``kernel=None``
        (:data:`skabc.pretrained.RECOMMENDED_CLUSTERING`), else
        ``'eigengap'``.
    affinity_power : float or 'auto', default='auto'
        The learned affinity is raised elementwise to this power before the
        spectral step (eigengap and embedding).  Powers above 1 sharpen it:
        probabilities near 1 stay, moderate cross-cluster probabilities
        fade, which helps the eigengap find the number of clusters of a soft
        kernel.  ``'auto'``: the value chosen on validation data for the
        shipped generic kernel when ``kernel=None``
        (:data:`skabc.pretrained.RECOMMENDED_CLUSTERING`), else 1.
    eigen_solver : {'arpack', 'lobpcg', 'amg'}, default=None
        Passed to :class:`~sklearn.cluster.SpectralClustering`.
    n_components : int, default=None
        Spectral embedding width (default: the number of clusters).
    random_state : int, RandomState instance or None, default=None
        Seeds the eigensolvers and the label assignment.
    n_init : int, default=10
        k-means restarts of the label assignment.
    eigen_tol : float or 'auto', default='auto'
        Eigensolver tolerance.
    assign_labels : {'kmeans', 'discretize', 'cluster_qr', 'njw'} or 'auto', default='auto'
        Label assignment in the embedding space: scikit-learn's three, or
        ``'njw'`` (Ng, Jordan & Weiss 2001), k-means on the rows of the
        spectral embedding scaled to unit length, which separates many small
        clusters better (the shipped Omniglot model uses it).  ``'auto'``:
        the value chosen on validation data for the shipped generic kernel
        when ``kernel=None``
        (:data:`skabc.pretrained.RECOMMENDED_CLUSTERING`), else
        ``'kmeans'``, the default of
        :class:`~sklearn.cluster.SpectralClustering`.
    n_jobs : int, default=None
        As in SpectralClustering, parallel jobs of the neighbour search of
        the ``'nearest_neighbors'`` affinities; also the number of sets
        clustered in parallel by ``fit`` and ``predict`` when ``groups`` is
        given, through :class:`joblib.Parallel` (``None``: 1,
        unless a :func:`joblib.parallel_config` context says otherwise, e.g.
        ``backend='dask'`` to spread the sets over Dask workers).  A single
        set is always clustered in the calling process.  Results do not
        depend on it: every set's seeds are drawn from ``random_state``
        before any work is dispatched.
    verbose : int, default=0
        Verbosity of the spectral step.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster labels; with ``groups``, ids are unique across groups.  With
        a non-learned affinity and ``n_clusters`` given, exactly
        SpectralClustering's labels (its ids and dtype: int32 from k-means);
        otherwise int64, numbered in order of first appearance.
    affinity_matrix_ : ndarray of shape (n_samples, n_samples) or sparse matrix
        Affinity given to the spectral step: the kernel's, raised to
        ``affinity_power`` (block-diagonal sparse when ``groups`` is given);
        for ``affinity='precomputed'`` the validated ``X``, as in
        SpectralClustering.
    n_clusters_ : int
        Number of clusters found (summed over groups).
    eigenvalues_ : ndarray or list of ndarray
        Smallest Laplacian eigenvalues used by the eigengap (per group);
        ``None`` when ``n_clusters`` is given.
    kernel_ : Kernel
        The fitted kernel that gave the affinity: the learned one, or a
        :class:`~skabc.kernels.pairwise.PairwiseKernel` /
        :class:`~skabc.kernels.pairwise.PrecomputedKernel` built from
        ``affinity`` and its parameters.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when ``X`` has string column
        names.

    Examples
    --------
    >>> from skabc import ABCClustering, ContextualKernel
    >>> from skabc.datasets import make_circles_sets
    >>> X, y, groups = make_circles_sets(n_sets=64, set_size=60, random_state=0)
    >>> kernel = ContextualKernel(d_model=32, n_blocks=1, max_epochs=1, set_size=60, random_state=0)
    >>> model = ABCClustering(kernel=kernel, random_state=0).fit(X, y, groups=groups)
    >>> model.labels_.shape
    (3840,)

    Any affinity of SpectralClustering, with ``k`` estimated:

    >>> from sklearn.datasets import make_blobs
    >>> X, _ = make_blobs(n_samples=200, centers=3, random_state=0)
    >>> ABCClustering(affinity="nearest_neighbors", random_state=0).fit(X).n_clusters_
    3
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [HasMethods(["fit", "transform"]), None],
        "affinity": [callable, StrOptions(set(AFFINITIES))],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "max_clusters": [Interval(Integral, 1, None, closed="left")],
        "n_clusters_selection": [StrOptions({"eigengap", "consensus", "likelihood", "auto"})],
        "affinity_power": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "eigen_solver": [StrOptions({"arpack", "lobpcg", "amg"}), None],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "eigen_tol": [Interval(Real, 0.0, None, closed="left"), StrOptions({"auto"})],
        "assign_labels": [StrOptions(set(ASSIGN_LABELS) | {"auto"})],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_clusters=None,
        *,
        kernel=None,
        affinity="learned",
        gamma=1.0,
        n_neighbors=10,
        degree=3,
        coef0=1,
        kernel_params=None,
        max_clusters=50,
        n_clusters_selection="auto",
        affinity_power="auto",
        eigen_solver=None,
        n_components=None,
        random_state=None,
        n_init=10,
        eigen_tol="auto",
        assign_labels="auto",
        n_jobs=None,
        verbose=0,
    ):
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.affinity = affinity
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.max_clusters = max_clusters
        self.n_clusters_selection = n_clusters_selection
        self.affinity_power = affinity_power
        self.eigen_solver = eigen_solver
        self.n_components = n_components
        self.random_state = random_state
        self.n_init = n_init
        self.eigen_tol = eigen_tol
        self.assign_labels = assign_labels
        self.n_jobs = n_jobs
        self.verbose = verbose

    def fit(self, X, y=None, groups=None):
        """Cluster ``X``, first training the kernel on ``y`` when ``kernel`` asks for it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or (n_samples, n_samples)
            Points to cluster (one set, or one set per group); the affinity
            (``affinity='precomputed'``) or distance
            (``'precomputed_nearest_neighbors'``) matrix.  The learned
            affinity densifies sparse ``X`` (refused when the dense copy
            would not fit in memory).
        y : array-like of shape (n_samples,), default=None
            Ignored, as by every scikit-learn clusterer, unless ``kernel`` is
            an unfitted kernel (trained on these labels) or a fitted one with
            ``warm_start=True`` (fine-tuned on them); ``-1`` marks unlabelled
            rows (still clustered).
        groups : array-like of shape (n_samples,), default=None
            Each group is clustered as its own set (and drawn from when the
            kernel is trained).

        Returns
        -------
        self : ABCClustering
        """
        self._validate_params()
        learned = self._learned()
        if not learned and self.kernel is not None:
            raise ValueError(
                f"kernel is used with affinity='learned' only, but affinity={self.affinity!r} was given "
                "with a kernel; pass one or the other."
            )
        X_in = X
        X = self._validate_X(X, reset=True, ensure_min_samples=2)
        group_codes = encode_groups(groups, X.shape[0])
        if group_codes is None and X.shape[0] == X.shape[1] and not self._pairwise():
            warnings.warn(
                f"X is square ({X.shape[0]} x {X.shape[1]}) and affinity={self.affinity!r} reads its rows as "
                "points with features; to cluster an affinity matrix you computed, set affinity='precomputed'.",
                UserWarning,
                stacklevel=2,
            )
        if learned:
            X_in = self._densify(X) if sp.issparse(X) else X_in
            self.kernel_ = self._learned_kernel(X_in, y, groups)
        else:
            X_in = X  # validated as SpectralClustering validates it (float64, sparse formats kept)
            self.kernel_ = self._sklearn_kernel()
        labels, affinities, n_found, eigenvalues = self._cluster(X_in, X.shape[0], group_codes)
        self.labels_ = labels
        self.n_clusters_ = int(sum(n_found))
        if group_codes is None:
            self.affinity_matrix_ = affinities[0]
            self.eigenvalues_ = eigenvalues[0]
        else:
            order = np.argsort(group_codes, kind="stable")
            inverse = np.empty_like(order)
            inverse[order] = np.arange(len(order))
            blocks = sp.block_diag([sp.csr_matrix(a) for a in affinities], format="csr")
            self.affinity_matrix_ = blocks[inverse][:, inverse]
            self.eigenvalues_ = eigenvalues
        return self

    def predict(self, X, groups=None):
        """Cluster a new set (or one set per group) with the fitted kernel.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        groups : array-like of shape (n_samples,), default=None

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "kernel_")
        X_in = X
        X = self._validate_X(X, reset=False, ensure_min_samples=1)
        if sp.issparse(X) and self._learned():
            X_in = self._densify(X)
        elif not self._learned():
            X_in = X
        return self._cluster(X_in, X.shape[0], encode_groups(groups, X.shape[0]))[0]

    def fit_predict(self, X, y=None, groups=None):
        """Fit (training the kernel when ``y`` has labels) and return the cluster labels of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
        groups : array-like of shape (n_samples,), default=None

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.fit(X, y, groups=groups).labels_

    def save(self, path) -> None:
        """Write the fitted model to one safetensors file (kernel weights, labels, JSON parameters).

        The write is atomic.  ``affinity_matrix_`` and ``eigenvalues_`` are not
        stored (``predict`` recomputes what it needs).
        """
        check_is_fitted(self, "kernel_")
        save_clustering(self, path)

    @classmethod
    def load(cls, path, device="auto") -> ABCClustering:
        """Load a model written by :meth:`save`, without unpickling anything."""
        return load_clustering(cls, ContextualKernel, path, device=device)

    def _learned(self) -> bool:
        return isinstance(self.affinity, str) and self.affinity == "learned"

    def _pairwise(self) -> bool:
        """Whether ``X`` is a square matrix over the samples (an affinity or distances), not features."""
        return isinstance(self.affinity, str) and self.affinity in PRECOMPUTED_AFFINITIES

    def _follows_sklearn(self) -> bool:
        """Whether the spectral step is SpectralClustering's own: a non-learned affinity with ``n_clusters`` given."""
        return not self._learned() and self.n_clusters is not None

    def _validate_X(self, X, *, reset: bool, ensure_min_samples: int):
        """``X`` validated as its affinity needs: float32 for the network, float64 as SpectralClustering."""
        dtype = np.float32 if self._learned() else np.float64
        if self._pairwise() and not reset:
            # A new set's affinity is m x m: its width is its size, not the fitted n_features_in_.
            return check_array(X, accept_sparse=SPARSE_FORMATS, dtype=dtype, ensure_min_samples=ensure_min_samples)
        return validate_data(self, X, reset=reset, accept_sparse=SPARSE_FORMATS, dtype=dtype,
                             ensure_min_samples=ensure_min_samples)

    def _densify(self, X) -> np.ndarray:
        """Sparse features as the dense array the network needs, if that copy fits the kernel's memory limit."""
        inner = self.kernel.estimator if isinstance(self.kernel, FrozenEstimator) else self.kernel
        limit = memory_limit_bytes(getattr(inner, "memory_limit", "auto"))
        needed = 4.0 * X.shape[0] * X.shape[1]
        if limit is not None and needed > limit:
            raise AffinityTooLargeError(
                f"affinity='learned' needs dense features, and this sparse X ({X.shape[0]} x {X.shape[1]}) would "
                f"take {needed / 2**30:.1f} GiB dense, over the memory limit of {limit / 2**30:.1f} GiB; reduce its "
                "width first (e.g. sklearn's TruncatedSVD), or use affinity='nearest_neighbors' or 'rbf', which "
                "take sparse X."
            )
        return X.toarray()

    def _learned_kernel(self, X, y, groups):
        """The kernel of ``affinity='learned'``, trained on ``y`` only when ``kernel`` asks for it."""
        if self.kernel is None:
            return _generic_kernel()  # zero-shot: y is ignored, as by any clusterer
        try:
            check_is_fitted(self.kernel)
            fitted = True
        except NotFittedError:
            fitted = False
        fine_tune = fitted and bool(self.kernel.get_params(deep=False).get("warm_start", False))
        if y is not None and (not fitted or fine_tune) and np.any(encode_labels(y, _num_samples(X)) >= 0):
            # A copy keeps the user's kernel as given: clone for a fresh one, deepcopy to keep the weights.
            kernel = copy.deepcopy(self.kernel) if fine_tune else clone(self.kernel)
            return kernel.fit(X, y, groups=groups)
        if not fitted:
            raise ValueError(
                "ABCClustering was given no labels and its `kernel` is not fitted: pass y to train "
                "the kernel, or a fitted kernel."
            )
        return self.kernel

    def _sklearn_kernel(self):
        """The kernel of a non-learned ``affinity``: scikit-learn's own functions, SpectralClustering's settings."""
        if self._pairwise():
            return PrecomputedKernel(self.affinity, n_neighbors=self.n_neighbors, n_jobs=self.n_jobs)
        return PairwiseKernel(self.affinity, gamma=self.gamma, n_neighbors=self.n_neighbors, degree=self.degree,
                              coef0=self.coef0, kernel_params=self.kernel_params, n_jobs=self.n_jobs)

    def predict_many(self, sets, n_jobs=None):
        """Cluster many independent sets with the fitted kernel, in parallel.

        Each set is clustered exactly as ``predict(set)`` would cluster it
        alone (labels start at 0 in every set), so the result equals
        ``[self.predict(s) for s in sets]``.  The sets are dispatched with
        :class:`joblib.Parallel`; run the call inside
        ``joblib.parallel_config(backend='dask')`` to spread them over the
        workers of a :class:`dask.distributed.Client` (the fitted kernel is
        pickled to the workers).

        Parameters
        ----------
        sets : iterable of array-like of shape (n_samples_i, n_features)
            The sets to cluster, each with at least one row.
        n_jobs : int, default=None
            Number of sets clustered at once (``None``: 1, unless a
            :func:`joblib.parallel_config` context sets it; ``-1``: all
            workers).  The labels do not depend on it.

        Returns
        -------
        labels : list of ndarray of shape (n_samples_i,)
            Cluster labels of each set, in the order of ``sets``.
        """
        check_is_fitted(self, "kernel_")
        sets = list(sets)
        # Validate here so bad input fails before anything is dispatched.
        checked = [self._validate_X(s, reset=False, ensure_min_samples=1) for s in sets]
        if not self._learned():
            sets = checked
        else:
            sets = [self._densify(c) if sp.issparse(c) else s for s, c in zip(sets, checked, strict=True)]
        # The seeds predict(s) would draw, set after set: fixed before dispatch, so
        # scheduling cannot change them (an int random_state gives every set the same seeds).
        seeds = [self._draw_seeds(check_random_state(self.random_state), 1)[0] for _ in sets]
        results = self._map_sets(sets, seeds, n_jobs)
        return [labels for labels, *_ in results]

    def _cluster(self, X, n_samples: int, group_codes):
        """Cluster each group as one set; returns labels, affinities, k and eigenvalues per set.

        ``X`` is passed on as the caller gave it (e.g. a DataFrame), so the kernel
        validates it against the feature names it was fitted with.  The groups are
        clustered in parallel over ``n_jobs``; ids are then offset group after group
        so they are unique across groups.
        """
        if group_codes is None:
            group_codes = np.zeros(n_samples, dtype=np.int64)
        groups = np.unique(group_codes)
        seeds = self._draw_seeds(check_random_state(self.random_state), len(groups))
        if len(groups) == 1:
            # One set: X itself, not a copy (a precomputed affinity stays the user's matrix), and its
            # labels as the spectral step returned them (SpectralClustering's own, for its affinities).
            set_labels, affinity, found, eigenvalues = self._map_sets([X], seeds, self.n_jobs)[0]
            return set_labels, [affinity], [found], [eigenvalues]
        rows_of = [np.flatnonzero(group_codes == g) for g in groups]
        if sp.issparse(X):
            X = X.tocsr()  # row-indexable
        if self._pairwise():
            subsets = [_safe_indexing(_safe_indexing(X, rows), rows, axis=1) for rows in rows_of]
        else:
            subsets = [_safe_indexing(X, rows) for rows in rows_of]
        results = self._map_sets(subsets, seeds, self.n_jobs)
        labels = np.empty(n_samples, dtype=np.int64)
        affinities, n_found, spectra = [], [], []
        offset = 0
        for rows, (set_labels, affinity, found, eigenvalues) in zip(rows_of, results, strict=True):
            # Ids 0..found-1 in every set (already so but for SpectralClustering's), so offsets never collide.
            labels[rows] = offset + _compact(set_labels)
            offset += found
            affinities.append(affinity)
            n_found.append(found)
            spectra.append(eigenvalues)
        return labels, affinities, n_found, spectra

    def _draw_seeds(self, rng, n_sets: int) -> list:
        """Per-set ``(eigengap seed or None, spectral seed)``, drawn in the order of the serial loop."""
        if n_sets == 1 and self._follows_sklearn():
            # Seeded as SpectralClustering seeds itself: random_state untouched, for one RandomState
            # shared by the eigensolver and the assignment.
            return [(None, self.random_state)]
        seeds = []
        for _ in range(n_sets):
            eig_seed = None if self.n_clusters is not None else int(rng.randint(2**31 - 1))
            seeds.append((eig_seed, int(rng.randint(np.iinfo(np.int32).max))))
        return seeds

    def _map_sets(self, sets: list, seeds: list, n_jobs) -> list:
        """``_cluster_one`` over the sets, in order: in this process for one set, else with joblib."""
        if len(sets) == 1:
            return [_cluster_one(self, sets[0], *seeds[0])]
        # Ship the parameters and the fitted kernel only, not labels_ or affinity_matrix_ of an earlier fit.
        # The 'auto' settings are resolved here: they depend on `kernel`, which the copy drops.
        light = type(self)(**{**self.get_params(deep=False), "kernel": None,
                              "affinity_power": self._affinity_power(), "assign_labels": self._assign_labels(),
                              "n_clusters_selection": self._n_clusters_selection()})
        light.kernel_ = self.kernel_
        # A few contiguous chunks per worker: the kernel is pickled once per chunk, not once per set.
        n_chunks = min(len(sets), 4 * effective_n_jobs(n_jobs))
        bounds = np.linspace(0, len(sets), n_chunks + 1).astype(int)
        tasks = (delayed(_cluster_chunk)(light, sets[a:b], seeds[a:b]) for a, b in pairwise(bounds))
        return [result for chunk in Parallel(n_jobs=n_jobs)(tasks) for result in chunk]

    def _affinity_power(self) -> float:
        if self.affinity_power != "auto":
            return float(self.affinity_power)
        return float(self._generic_setting("affinity_power", 1.0))

    def _assign_labels(self) -> str:
        if self.assign_labels != "auto":
            return self.assign_labels
        return self._generic_setting("assign_labels", "kmeans")

    def _n_clusters_selection(self) -> str:
        if self.n_clusters_selection != "auto":
            return self.n_clusters_selection
        return self._generic_setting("n_clusters_selection", "eigengap")

    def _generic_setting(self, name: str, default):
        """An 'auto' setting: the one chosen for the shipped generic kernel when it is used, else ``default``."""
        if self.kernel is None and self._learned():
            from .pretrained import RECOMMENDED_CLUSTERING

            return RECOMMENDED_CLUSTERING.get("generic", {}).get(name, default)
        return default

    def _n_clusters_for(self, affinity: np.ndarray, seed):
        n = affinity.shape[0]
        if self.n_clusters is not None:
            return min(self.n_clusters, n), None
        estimate = consensus_n_clusters if self._n_clusters_selection() == "consensus" else estimate_n_clusters
        return estimate(
            affinity,
            self.max_clusters,
            random_state=seed,
            eigen_solver=self.eigen_solver,
            eigen_tol=self.eigen_tol,
        )

    def _spectral(self, affinity: np.ndarray, k: int, seed: int) -> np.ndarray:
        labels = spectral_labels(
            affinity,
            k,
            eigen_solver=self.eigen_solver,
            n_components=self.n_components,
            random_state=seed,
            n_init=self.n_init,
            eigen_tol=self.eigen_tol,
            assign_labels=self._assign_labels(),
            verbose=self.verbose,
        )
        return _compact(labels)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = self._pairwise()
        tags.input_tags.positive_only = self._pairwise()  # affinities and distances are non-negative
        return tags


#: ``ContextualKernel`` settings for a short fine-tuning of the generic kernel on sets drawn from the
#: user's labelled rows: ``ABCClustering(kernel=skabc.pretrained.load('generic').set_params(**FINE_TUNE))``.
FINE_TUNE = dict(warm_start=True, set_size=(50, 200), clusters_per_set=None, sets_per_epoch=None,
                 batch_size=32, max_epochs=10, lr=3e-4)


def _generic_kernel() -> ContextualKernel:
    from .pretrained import load

    return load("generic")


def _cluster_one(model: ABCClustering, X, eig_seed, seed: int):
    """Cluster one set with ``model.kernel_``; returns (labels from 0, affinity, k found, eigenvalues).

    A module-level function so joblib can ship it, with the fitted model, to
    worker processes or Dask workers.
    """
    if not model._learned():
        # ABCClustering validated every parameter scikit-learn's functions get here; skip their own
        # validation, as SpectralClustering.fit does (_fit_context), so the drop-in costs no more.
        with config_context(skip_parameter_validation=True):
            return _cluster_one_set(model, X, eig_seed, seed)
    return _cluster_one_set(model, X, eig_seed, seed)


def _cluster_one_set(model: ABCClustering, X, eig_seed, seed):
    kernel = as_kernel(model.kernel_)
    n = _num_samples(X)
    if not kernel.returns_sparse(n):
        # The affinity plus the spectral step's Laplacian and working copies.
        kernel.check_memory(n, n_copies=4)
    probabilities = kernel.affinity(X)
    affinity = probabilities
    power = model._affinity_power()
    if power != 1.0:
        affinity = affinity.power(power) if sp.issparse(affinity) else affinity**power
    selection = model._n_clusters_selection()
    if model.n_clusters is None and selection == "likelihood":
        labels, eigenvalues = _likelihood_labels(model, probabilities, affinity, eig_seed, seed)
    elif model.n_clusters is None and selection == "eigengap" and sp.issparse(affinity):
        # Large sparse sets: one eigensolve serves the eigengap and the embedding.
        labels, _, eigenvalues = eigengap_spectral_labels(
            affinity, model.max_clusters, eig_seed, eigen_solver=model.eigen_solver,
            n_components=model.n_components, random_state=seed, n_init=model.n_init,
            eigen_tol=model.eigen_tol, assign_labels=model._assign_labels(), verbose=model.verbose,
        )
        labels = _compact(labels)
    elif model._follows_sklearn():
        # SpectralClustering's spectral step, as it runs it: same partition, labels, dtype and warnings.
        k, eigenvalues = model._n_clusters_for(affinity, eig_seed)
        labels = sklearn_spectral_labels(
            affinity, k, eigen_solver=model.eigen_solver, n_components=model.n_components, random_state=seed,
            n_init=model.n_init, eigen_tol=model.eigen_tol, assign_labels=model._assign_labels(),
            verbose=model.verbose,
        )
    else:
        k, eigenvalues = model._n_clusters_for(affinity, eig_seed)
        labels = model._spectral(affinity, k, seed)
    return labels, affinity, len(np.unique(labels)), eigenvalues


def _likelihood_labels(model: ABCClustering, probabilities, affinity, eig_seed, seed: int):
    """Cluster for each eigengap candidate ``k``; keep the partition most likely under the kernel."""
    values = probabilities.data if sp.issparse(probabilities) else probabilities
    if values.size and (np.min(values) < 0 or np.max(values) > 1):
        raise ValueError(
            "n_clusters_selection='likelihood' needs a kernel whose affinity holds same-cluster probabilities "
            f"in [0, 1]; this one gave values in [{np.min(values):.3g}, {np.max(values):.3g}]. "
            "Use n_clusters_selection='eigengap'."
        )
    _, eigenvalues = model._n_clusters_for(affinity, eig_seed)
    best_labels, best_score = None, -np.inf
    for k in eigengap_candidates(eigenvalues, LIKELIHOOD_CANDIDATES):
        labels = model._spectral(affinity, k, seed)
        score = pair_log_likelihood(probabilities, labels)
        if score > best_score:
            best_labels, best_score = labels, score
    return best_labels, eigenvalues


def _compact(labels: np.ndarray) -> np.ndarray:
    """Relabel 0..k'-1 in order of first appearance, so ids are compact within a set."""
    _, first = np.unique(labels, return_index=True)
    remap = np.empty(labels.max() + 1, dtype=np.int64)
    remap[labels[np.sort(first)]] = np.arange(len(first))
    return remap[labels]


def _cluster_chunk(model: ABCClustering, sets: list, seeds: list) -> list:
    """``_cluster_one`` over a chunk of sets, in order (one joblib task)."""
    return [_cluster_one(model, X, *seed) for X, seed in zip(sets, seeds, strict=True)]
