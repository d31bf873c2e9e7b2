"""ABCClustering: spectral clustering on a kernel learned from context."""

from __future__ import annotations

from itertools import pairwise
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, ClusterMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples, check_is_fitted, validate_data

from . import persistence
from ._clustering_io import describe_clustering, restore_clustering
from ._validation import encode_groups, encode_labels
from .kernels import ContextualKernel, as_kernel
from .kernels.base import check_recommended_clustering
from .spectral import ASSIGN_LABELS, N_CLUSTERS_SELECTORS, SpectralStep


@persistence.persistent
class ABCClustering(ClusterMixin, BaseEstimator):
    """Attention-Based Clustering: a drop-in for :class:`~sklearn.cluster.SpectralClustering`.

    A :class:`ContextualKernel` turns the set ``X`` into a learned affinity;
    the number of clusters is given or estimated by the eigengap of the
    normalised Laplacian; scikit-learn's spectral clustering on the
    precomputed affinity gives the labels.

    Parameters
    ----------
    n_clusters : int, default=None
        Number of clusters.  ``None`` estimates it per set from the
        eigengaps of ``L = I - D^-1/2 A D^-1/2`` (at most ``max_clusters``),
        as ``n_clusters_selection`` says.
    kernel : ContextualKernel, default=None
        The learned kernel.  ``None`` uses the shipped generic kernel
        (``skabc.pretrained.load('generic')``, trained on synthetic clustering
        problems; any number of features): without labels it clusters ``X``
        zero-shot, with labels ``fit`` first fine-tunes it on them
        (``ContextualKernel(init='generic')``, :data:`FINE_TUNE`: automatic
        schedule, early stopping on held-out classes or groups).  A kernel you give is
        trained (a clone of it) when ``fit`` gets labels; without labels it
        must already be fitted (wrap it in
        :class:`sklearn.frozen.FrozenEstimator` to keep it fitted through
        ``clone``).
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
        :data:`~skabc.spectral.select.LIKELIHOOD_CANDIDATES` largest eigengaps each propose a ``k``,
        the set is clustered for each, and the partition that best explains
        the kernel's same-cluster probabilities wins (highest
        :func:`~skabc.spectral.pair_log_likelihood` of the affinity before
        ``affinity_power``; the kernel must output probabilities in
        ``[0, 1]``, as a :class:`ContextualKernel` does).  It costs one
        spectral clustering per candidate.  ``'auto'``: the kernel's recommendation
        (:meth:`~skabc.kernels.Kernel.recommended_clustering`, stored with
        every shipped kernel, e.g. ``'consensus'`` for the generic kernel),
        else ``'eigengap'``; resolved in ``fit`` into
        ``n_clusters_selection_``.
    affinity_power : float or 'auto', default='auto'
        The learned affinity is raised elementwise to this power before the
        spectral step (eigengap and embedding).  Powers above 1 sharpen it:
        probabilities near 1 stay, moderate cross-cluster probabilities
        fade, which helps the eigengap find the number of clusters of a soft
        kernel.  ``'auto'``: the kernel's recommendation (stored with
        every shipped kernel), else 1; resolved in ``fit`` into
        ``affinity_power_``.
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
        the kernel's recommendation (stored with every shipped kernel), else
        ``'kmeans'``, the default of
        :class:`~sklearn.cluster.SpectralClustering`; resolved in ``fit``
        into ``assign_labels_``.
    n_jobs : int, default=None
        Number of sets clustered in parallel by ``fit`` and ``predict`` when
        ``groups`` is given, through :class:`joblib.Parallel` (``None``: 1,
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
        Cluster labels; with ``groups``, ids are unique across groups.
    affinity_matrix_ : ndarray of shape (n_samples, n_samples) or sparse matrix
        Affinity given to the spectral step: the learned one raised to
        ``affinity_power`` (block-diagonal sparse when ``groups`` is given).
    n_clusters_ : int
        Number of clusters found (summed over groups).
    eigenvalues_ : ndarray or list of ndarray
        Smallest Laplacian eigenvalues used by the eigengap (per group);
        ``None`` when ``n_clusters`` is given.
    kernel_ : ContextualKernel
        The fitted kernel.
    affinity_power_ : float
        What ``affinity_power`` resolved to.
    assign_labels_ : str
        What ``assign_labels`` resolved to.
    n_clusters_selection_ : str
        What ``n_clusters_selection`` resolved to.
    n_features_in_ : int
        Number of features seen during fit.

    Examples
    --------
    >>> from skabc import ABCClustering, ContextualKernel
    >>> from skabc.datasets import make_circles_sets
    >>> X, y, groups = make_circles_sets(n_sets=64, set_size=60, random_state=0)
    >>> kernel = ContextualKernel(d_model=32, n_blocks=1, max_epochs=1, set_size=60, random_state=0)
    >>> model = ABCClustering(kernel=kernel, random_state=0).fit(X, y, groups=groups)
    >>> model.labels_.shape
    (3840,)
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [HasMethods(["fit", "transform"]), None],
        "max_clusters": [Interval(Integral, 1, None, closed="left")],
        "n_clusters_selection": [StrOptions(set(N_CLUSTERS_SELECTORS) | {"auto"})],
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
        """Learn the kernel (when labels are given) and cluster ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to cluster (one set, or one set per group).
        y : array-like of shape (n_samples,), default=None
            Cluster labels to train the kernel on; ``-1`` marks unlabelled
            rows (still clustered).  Without labels, ``kernel`` must be fitted.
        groups : array-like of shape (n_samples,), default=None
            Each group is drawn from for training and clustered as its own set.

        Returns
        -------
        self : ABCClustering
        """
        self._validate_params()
        X_in = X
        X = validate_data(self, X, dtype=np.float32, ensure_min_samples=2)
        group_codes = encode_groups(groups, X.shape[0])
        has_labels = y is not None and np.any(encode_labels(y, X.shape[0]) >= 0)
        if has_labels:
            kernel = self._fine_tuning_kernel() if self.kernel is None else clone(self.kernel)
            self.kernel_ = kernel.fit(X_in, y, groups=groups)
        else:
            self.kernel_ = self._fitted_kernel()
        self._resolve_auto(as_kernel(self.kernel_).recommended_clustering())
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
        X = validate_data(self, X, dtype=np.float32, reset=False, ensure_min_samples=1)
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

        The write is atomic.  The fitted kernel (a :class:`ContextualKernel`
        or a :class:`KernelEnsemble`, frozen or not) and the settings every
        ``'auto'`` resolved to are stored, so the loaded model predicts
        exactly as this one.  ``affinity_matrix_`` and ``eigenvalues_`` are
        not stored (``predict`` recomputes what it needs).
        """
        check_is_fitted(self, "kernel_")
        persistence.save(self, path)

    @classmethod
    def load(cls, path, device="auto") -> ABCClustering:
        """Load a model written by :meth:`save`, without unpickling anything."""
        return persistence.load(path, device=device, expected=cls)

    @classmethod
    def from_pretrained(cls, name: str, *, device: str = "auto", **params) -> ABCClustering:
        """A ready model around the shipped kernel ``name`` (see :func:`skabc.pretrained.load`).

        The kernel is wrapped in :class:`sklearn.frozen.FrozenEstimator`, so
        ``fit`` / ``fit_predict`` cluster new sets without training (even when
        given labels) and ``clone`` keeps it fitted.  Every ``'auto'`` setting
        resolves to the values stored with the kernel (chosen on its
        validation data); ``params`` override them.

        Examples
        --------
        >>> from skabc import ABCClustering
        >>> model = ABCClustering.from_pretrained("circles", random_state=0)
        >>> type(model.kernel).__name__
        'FrozenEstimator'
        """
        from .pretrained import load

        return cls(kernel=FrozenEstimator(load(name, device=device)), **params)

    def _resolve_auto(self, recommended: dict) -> None:
        """Resolve every ``'auto'`` once, from the kernel's recommendation; build the spectral step from them."""
        recommended = {**_GENERIC_DEFAULTS, **check_recommended_clustering(recommended)}
        self.affinity_power_ = float(recommended["affinity_power"] if self.affinity_power == "auto"
                                     else self.affinity_power)
        self.assign_labels_ = recommended["assign_labels"] if self.assign_labels == "auto" else self.assign_labels
        self.n_clusters_selection_ = (recommended["n_clusters_selection"] if self.n_clusters_selection == "auto"
                                      else self.n_clusters_selection)
        self.spectral_step_ = SpectralStep(
            n_clusters=self.n_clusters, max_clusters=self.max_clusters, selection=self.n_clusters_selection_,
            affinity_power=self.affinity_power_, assign_labels=self.assign_labels_, eigen_solver=self.eigen_solver,
            n_components=self.n_components, n_init=self.n_init, eigen_tol=self.eigen_tol, verbose=self.verbose,
        )

    def _describe(self) -> tuple[dict, dict]:
        """JSON description and tensors for :mod:`skabc.persistence`."""
        return describe_clustering(self)

    @classmethod
    def _restore(cls, meta: dict, tensors: dict, device) -> ABCClustering:
        """Rebuild a fitted model from :meth:`_describe`'s output (or a version-1 file's)."""
        return restore_clustering(cls, meta, tensors, device)

    def _fine_tuning_kernel(self) -> ContextualKernel:
        """The kernel ``fit`` trains when ``kernel=None`` gets labels: the generic one, fine-tuned."""
        return ContextualKernel(**{"random_state": self.random_state, **FINE_TUNE})

    def _fitted_kernel(self):
        if self.kernel is None:
            return _generic_kernel()
        try:
            check_is_fitted(self.kernel)
        except NotFittedError as exc:
            raise ValueError(
                "ABCClustering was given no labels and its `kernel` is not fitted: pass y to train "
                "the kernel, or a fitted kernel."
            ) from exc
        return self.kernel

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
        for s in sets:  # validate here so bad input fails before anything is dispatched
            validate_data(self, s, dtype=np.float32, reset=False, ensure_min_samples=1)
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
        rows_of = [np.flatnonzero(group_codes == g) for g in groups]
        results = self._map_sets([_safe_indexing(X, rows) for rows in rows_of], seeds, self.n_jobs)
        labels = np.empty(n_samples, dtype=np.int64)
        affinities, n_found, spectra = [], [], []
        offset = 0
        for rows, (set_labels, affinity, found, eigenvalues) in zip(rows_of, results, strict=True):
            labels[rows] = offset + set_labels
            offset += found
            affinities.append(affinity)
            n_found.append(found)
            spectra.append(eigenvalues)
        return labels, affinities, n_found, spectra

    def _draw_seeds(self, rng, n_sets: int) -> list:
        """Per-set ``(eigengap seed or None, spectral seed)``, drawn in the order of the serial loop."""
        seeds = []
        for _ in range(n_sets):
            eig_seed = None if self.n_clusters is not None else int(rng.randint(2**31 - 1))
            seeds.append((eig_seed, int(rng.randint(np.iinfo(np.int32).max))))
        return seeds

    def _map_sets(self, sets: list, seeds: list, n_jobs) -> list:
        """Cluster each set, in order: in this process for one set, else with joblib."""
        kernel, step = self.kernel_, self.spectral_step_
        if len(sets) == 1:
            return [_cluster_one(kernel, step, sets[0], *seeds[0])]
        # Only the fitted kernel and the spectral settings travel, not labels_ or affinity_matrix_.
        # A few contiguous chunks per worker: the kernel is pickled once per chunk, not once per set.
        n_chunks = min(len(sets), 4 * effective_n_jobs(n_jobs))
        bounds = np.linspace(0, len(sets), n_chunks + 1).astype(int)
        tasks = (delayed(_cluster_chunk)(kernel, step, sets[a:b], seeds[a:b]) for a, b in pairwise(bounds))
        return [result for chunk in Parallel(n_jobs=n_jobs)(tasks) for result in chunk]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


#: ``ContextualKernel`` parameters of the kernel ``ABCClustering(kernel=None)`` trains when it gets labels:
#: the generic kernel fine-tuned on sets drawn from the user's labelled rows, with the automatic schedule
#: and early stopping on held-out classes or groups (``ContextualKernel``'s defaults).
FINE_TUNE = dict(init="generic")


#: What each 'auto' setting resolves to when the kernel recommends nothing (SpectralClustering's choices).
_GENERIC_DEFAULTS = {"affinity_power": 1.0, "assign_labels": "kmeans", "n_clusters_selection": "eigengap"}

def _generic_kernel() -> ContextualKernel:
    from .pretrained import load

    return load("generic")


def _cluster_one(kernel, step: SpectralStep, X, eig_seed, seed: int):
    """Cluster one set: the kernel's affinity, then the spectral step.

    Returns (labels from 0, affinity, k found, eigenvalues).  A module-level
    function so joblib can ship it, with the fitted kernel, to worker processes
    or Dask workers.
    """
    kernel = as_kernel(kernel)
    n = _num_samples(X)
    if not kernel.returns_sparse(n):
        # The affinity plus the spectral step's Laplacian and working copies.
        kernel.check_memory(n, n_copies=4)
    return step.cluster(kernel.affinity(X), eig_seed, seed)


def _cluster_chunk(kernel, step: SpectralStep, sets: list, seeds: list) -> list:
    """``_cluster_one`` over a chunk of sets, in order (one joblib task)."""
    return [_cluster_one(kernel, step, X, *seed) for X, seed in zip(sets, seeds, strict=True)]
