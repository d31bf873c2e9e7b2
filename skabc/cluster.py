"""ABCClustering: spectral clustering on a kernel learned from context."""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import _num_samples, check_is_fitted

from . import _fit_inputs, persistence
from ._clustering_io import ClusteringPersistenceMixin, keeps_last_fit, remember_fitted_params
from ._constraints import SPECTRAL_N_JOBS, IntRange, RealRange
from ._fit_inputs import (
    is_learned,
    is_pairwise,
    kernel_input,
    resolve_kernel,
    symmetrised_for_fit,
    validate_set,
    warn_if_square,
    without_unseen_names,
)
from ._resolve import check_setting_combinations, resolve_settings, warn_unread_affinity_parameters
from ._sets import check_n_jobs, check_sets, cluster_groups, map_sets, set_seeds, validate_each, warn_about_estimates
from ._typing import Float, Int
from ._validation import KernelParamsMixin, check_not_masked_or_missing, encode_groups
from .kernels import as_kernel
from .kernels.base import kernel_is_fitted
from .kernels.pairwise import FEATURE_AFFINITIES, PRECOMPUTED_AFFINITIES
from .spectral import ASSIGN_LABELS, N_CLUSTERS_SELECTORS
from .spectral.arbiter import ARBITERS

FINE_TUNE = _fit_inputs.FINE_TUNE  # documented as skabc.cluster.FINE_TUNE
#: Every value of ``affinity`` given by name: the learned kernel, and all that SpectralClustering accepts.
AFFINITIES = frozenset({"learned"}) | FEATURE_AFFINITIES | PRECOMPUTED_AFFINITIES


@persistence.persistent
class ABCClustering(ClusteringPersistenceMixin, KernelParamsMixin, ClusterMixin, BaseEstimator):
    """Attention-Based Clustering: a drop-in for :class:`~sklearn.cluster.SpectralClustering`.

    A kernel turns the set ``X`` into an affinity: by default a :class:`ContextualKernel` learned from
    context, or any affinity :class:`~sklearn.cluster.SpectralClustering` builds (``affinity='rbf'``,
    ``'nearest_neighbors'``, ``'precomputed'``, ...).  The number of clusters is given or estimated (from
    Laplacian spectra, by ``n_clusters_selection`` and ``arbiter``), for every affinity; spectral
    clustering of the affinity gives the labels.  Unlike SpectralClustering, ``n_clusters`` defaults to
    ``None`` (estimated); see "Coming from SpectralClustering" in the documentation for every other difference.

    Parameters
    ----------
    n_clusters : int, default=None
        Number of clusters.  ``None`` estimates it per set (at most ``max_clusters``), as
        ``n_clusters_selection`` and ``arbiter`` say, from spectra of ``L = I - D^-1/2 A D^-1/2``.
    kernel : ContextualKernel, Kernel or transformer, default=None
        The learned kernel (``affinity='learned'`` only): a
        :class:`~skabc.kernels.ContextualKernel`, any :class:`~skabc.kernels.Kernel`, or a transformer whose
        ``transform`` returns the set's affinity.  ``None`` uses the
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
        :class:`~sklearn.cluster.SpectralClustering` (``'rbf'``,
        ``'nearest_neighbors'``, ``'precomputed'``,
        ``'precomputed_nearest_neighbors'``, a kernel name of
        :func:`sklearn.metrics.pairwise.kernel_metrics`, a callable) and is
        computed by scikit-learn's own functions
        (:class:`~skabc.kernels.PairwiseKernel`,
        :class:`~skabc.kernels.PrecomputedKernel`, which check a precomputed
        matrix is square, symmetric, non-negative and finite; ``fit``, as
        SpectralClustering's, averages a non-symmetric affinity with its
        transpose, with a warning).  With
        ``n_clusters`` given, SpectralClustering's own spectral step follows,
        seeded by ``random_state`` as there: the same partition.
    gamma, n_neighbors, degree, coef0, kernel_params : default=1.0, 10, 3, 1, None
        As in SpectralClustering, for the non-learned affinities;
        ``gamma`` must be positive and ``n_neighbors`` at most the number of
        samples.
    max_clusters : int, default=50
        Upper bound of the estimate of ``k``; reaching it warns (the set may hold more clusters).
    n_clusters_selection : {'eigengap', 'consensus', 'likelihood', 'rotation'} or 'auto', default='auto'
        How ``k`` is estimated when ``n_clusters`` is None.  ``'eigengap'``: the largest eigengap.
        ``'consensus'``: the median, rounded down, of the largest-eigengap estimates on the affinity
        raised to 1/4, 1/2, 1 and 2 times ``affinity_power`` (:func:`~skabc.spectral.consensus_n_clusters`),
        which hedges between the too many clusters a sharp affinity gives a broad cluster and the too few
        a soft one gives close clusters; it costs four eigengap estimates instead of one, which shows
        beyond a few thousand points (pass ``'eigengap'`` there if time matters more).  ``'likelihood'``:
        the :data:`~skabc.spectral.select.LIKELIHOOD_CANDIDATES` largest eigengaps each propose a ``k``,
        the set is clustered for each, and the partition that best explains the kernel's same-cluster
        probabilities wins (highest :func:`~skabc.spectral.pair_log_likelihood` of the affinity before
        ``affinity_power``; the kernel must output probabilities in ``[0, 1]``, as a
        :class:`ContextualKernel` does); one spectral clustering per candidate.  ``'rotation'``: the
        ``k`` whose leading eigenvectors a rotation best aligns with the axes (Zelnik-Manor & Perona
        2004, :func:`~skabc.spectral.rotation.rotation_n_clusters`; at most
        :data:`~skabc.spectral.select.ROTATION_MAX_CLUSTERS` clusters), or one cluster when the largest
        eigengap says so.  ``'auto'``: the kernel's :meth:`~skabc.kernels.Kernel.recommended_clustering`
        (``'consensus'`` for the generic kernel, stored with it; ``'rotation'`` for a kNN graph,
        ``'nearest_neighbors'`` or ``'precomputed_nearest_neighbors'``, whose largest eigengap overcounts), else
        ``'eigengap'``; resolved in ``fit`` into ``n_clusters_selection_``.
    arbiter : 'auto', None or str, default='auto'
        A name of :data:`~skabc.spectral.arbiter.ARBITERS` clusters the set every way it knows and keeps the partition
        its trained forest predicts to score best (given ``k``, the 10-NN graph's unless the kernel's is predicted more
        than a margin higher), from unlabelled evidence (:mod:`skabc.spectral.arbiter`).  With ``n_clusters=None``: the
        kernel's affinity and the set's 10-NN graph, two ``k`` rules each (about three more spectral steps); with
        ``n_clusters`` given: both cut into ``n_clusters`` (one more); the shipped generic kernel's set spanning more
        dimensions than its forest's training sets (64) keeps the 10-NN graph's partition, without the kernel.
        ``'generic-knn'``: the same choice of ``k``, the 10-NN graph cut into it; ``'generic-knn-only'``: the 10-NN
        graph's own candidates only.  ``'generic-count'``: ``k`` as the generic kernel and its arbiter count it
        (``ABCClustering()``'s count before its ``gaussian_split``; on at most 2,000 of the rows), this model's
        affinity cut into it.  ``None``: the kernel's affinity only.  ``'auto'``: the kernel's recommendation
        (``'generic'`` for the generic kernel, or ``'generic-knn'`` / ``'generic-knn-only'`` for one
        fine-tuned on held-out classes, :func:`~skabc.training.validation.choose_partition`), with ``k``
        unknown only when ``n_clusters_selection`` is ``'auto'`` too; with ``k`` and its rule unset, a
        scikit-learn affinity of the rows gets ``'generic-count'`` (its own eigengap overcounts); resolved
        in ``fit`` into ``arbiter_``.
    gaussian_split : bool or 'auto', default='auto'
        With ``k`` estimated, split each cluster that is two touching Gaussian blobs, which every partition
        an arbiter weighs tends to merge: two Gaussians explain it better than one, each half is one
        Gaussian, and the density dips where they meet (:mod:`skabc.spectral.split`; sets of at most 8
        mixture columns; chosen after the generic kernel's arbiter, ``benchmarks/gaussian_split.py``).
        ``'auto'``: on where ``k`` is estimated with the learned affinity and ``arbiter_`` is ``'generic'``
        (what it was chosen after; ``ABCClustering()``'s), off otherwise; resolved in ``fit`` into
        ``gaussian_split_`` (and saved with the model).
        ``True`` splits after any estimate of ``k`` (another arbiter's, none, a scikit-learn affinity's);
        with ``n_clusters`` given or a precomputed affinity it is refused.
    affinity_power : float or 'auto', default='auto'
        The learned affinity is raised elementwise to this power before the
        spectral step (eigengap and embedding).  Powers above 1 sharpen it:
        moderate cross-cluster probabilities fade, which helps the eigengap
        find the number of clusters of a soft kernel; one that underflows affinities of 0.001 or more
        to 0, or overflows any, or meets a negative one (a signed kernel), is refused.  ``'auto'``:
        the kernel's recommendation (stored with every shipped kernel), else 1;
        resolved in ``fit`` into ``affinity_power_``.
    eigen_solver : {'arpack', 'lobpcg', 'amg'}, default=None
        Passed to :class:`~sklearn.cluster.SpectralClustering`.
    n_components : int, default=None
        Spectral embedding width (default: the number of clusters).  With ``k`` counted and
        ``assign_labels`` ``'discretize'`` or ``'cluster_qr'``, which make one cluster per embedding
        column, the embedding has ``k`` columns and this is not used.
    random_state : int, RandomState instance or None, default=None
        Seeds the eigensolvers and the label assignment.
    n_init : int, default=10
        k-means restarts of the label assignment.
    eigen_tol : float or 'auto', default='auto'
        Eigensolver tolerance, as in SpectralClustering; with ``n_clusters``
        unknown also that of the sparse solves that count ``k`` (a loose one,
        e.g. ``1e-2``, can change the count; dense affinities are counted to
        machine precision).  LOBPCG solves left with residuals above 0.01 are
        solved again by ARPACK, with a warning.
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
        As in SpectralClustering, parallel jobs of the neighbour search of
        the ``'nearest_neighbors'`` affinities; also the number of sets
        clustered in parallel by ``fit`` and ``predict`` when ``groups`` is
        given, through :class:`joblib.Parallel` (``None``: 1,
        unless a :func:`joblib.parallel_config` context says otherwise, e.g.
        ``backend='dask'`` to spread the sets over Dask workers).  A single
        set is always clustered in the calling process.  Results do not
        depend on it: every set's seeds are drawn from ``random_state``
        before any work is dispatched (with an int ``random_state``, a
        group's are those of the group clustered alone).
    max_samples : int, None or 'auto', default='auto'
        Largest set clustered whole: a larger set is clustered on this many of its points drawn at random
        (seeded by ``random_state``), every other point taking the label of its nearest drawn neighbours (a
        distance-weighted vote on standardised features, or on the rows as given where the drawn points' own
        labels agree clearly better with their neighbours there).  ``'auto'``: 2,000 (or ``n_clusters`` if more)
        for the learned affinity, ``None`` (every point, as SpectralClustering) for the
        others; resolved in ``fit`` into ``max_samples_``.
    verbose : int, default=0
        Verbosity of the spectral step, as SpectralClustering's with ``n_clusters`` given.  With ``k`` estimated by
        an arbiter, ``1`` prints each candidate's ``k`` and the partition kept (only that, beyond the arbiter's
        domain); ``2`` adds the candidates' cut logs.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster labels; with ``groups``, ids are unique across groups (the groups' in the order of their
        sorted group ids, each numbered as below).  With a non-learned affinity, ``n_clusters`` given and one of
        SpectralClustering's ``assign_labels``, exactly its labels (its ids and dtype: int32 from k-means) for fewer
        clusters than points; otherwise int64, in order of first appearance (``n_clusters`` >= points: ``0..n-1``).
    affinity_matrix_ : ndarray of shape (n_samples, n_samples) or sparse matrix
        Affinity given to the spectral step: the kernel's, raised to ``affinity_power``, or the
        kNN graph when the arbiter kept one of its partitions (block-diagonal sparse with ``groups``, all of
        them checked against the kernel's memory limit as a total;
        sparse and zero outside the subsample of a set past ``max_samples_``);
        for ``affinity='precomputed'`` the validated ``X``, as in
        SpectralClustering.
    n_clusters_ : int
        Number of clusters found (summed over groups).
    eigenvalues_ : ndarray or list of ndarray
        Smallest Laplacian eigenvalues used by the eigengap (per group; the counting candidate's
        where the arbiter only counted); ``None`` when ``n_clusters`` is given.
    kernel_ : Kernel
        The fitted kernel that gave the affinity: the learned one, or a
        :class:`~skabc.kernels.pairwise.PairwiseKernel` /
        :class:`~skabc.kernels.pairwise.PrecomputedKernel` built from
        ``affinity`` and its parameters.
    affinity_power_ : float
        What ``affinity_power`` resolved to.
    assign_labels_ : str
        What ``assign_labels`` resolved to.
    n_clusters_selection_ : str
        What ``n_clusters_selection`` resolved to.
    arbiter_ : str or None
        What ``arbiter`` resolved to.
    gaussian_split_ : bool
        Whether the split applies (what ``gaussian_split`` resolved to).
    candidate_ : str, list of str, or None
        The candidate partition the arbiter kept (one per group; ``'affinity-at-<candidate>'`` where it
        only counted; ending ``'+gaussian-split'`` where ``gaussian_split_`` split some of its clusters);
        ``None`` without an arbiter, and for a set of at most 11 distinct rows, whose kNN
        graph links every row to every other (the kernel's own partition, or the affinity's own count).
    max_samples_ : int or None
        What ``max_samples`` resolved to.
    spectral_step_ : SpectralStep
        The frozen spectral settings every set is clustered with (:class:`~skabc.spectral.SpectralStep`).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
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
        "n_clusters": [IntRange(1, None, closed="left"), None],
        "kernel": [HasMethods(["fit", "transform"]), HasMethods(["affinity"]), None],
        "affinity": [callable, StrOptions(set(AFFINITIES))],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "n_neighbors": [IntRange(1, None, closed="left")],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "max_clusters": [IntRange(1, None, closed="left")],
        "n_clusters_selection": [StrOptions(set(N_CLUSTERS_SELECTORS) | {"auto"})],
        "arbiter": [StrOptions(set(ARBITERS) | {"auto"}), None],
        "gaussian_split": ["boolean", StrOptions({"auto"})],
        "affinity_power": [RealRange(0, None, closed="neither"), StrOptions({"auto"})],
        "eigen_solver": [StrOptions({"arpack", "lobpcg", "amg"}), None],
        "n_components": [IntRange(1, None, closed="left"), None],
        "random_state": ["random_state"],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "eigen_tol": [Interval(Real, 0.0, None, closed="left"), StrOptions({"auto"})],
        "assign_labels": [StrOptions(set(ASSIGN_LABELS) | {"auto"})],
        "n_jobs": SPECTRAL_N_JOBS,
        "max_samples": [IntRange(2, None, closed="left"), StrOptions({"auto"}), None],
        "verbose": ["verbose"],
    }
    # Not requested by default: with metadata routing on, a group-aware CV's ``groups`` go to its splitter only, as
    # they do for SpectralClustering (whose fit takes none); ``set_fit_request(groups=True)`` sends them to fit.
    __metadata_request__fit = {"groups": False}
    __metadata_request__predict = {"groups": False}
    __metadata_request__fit_predict = {"groups": False}

    def __init__(
        self,
        n_clusters: Int | None = None,
        *,
        kernel: Any = None,
        affinity: str | Callable[..., Any] = "learned",
        gamma: Float = 1.0, n_neighbors: Int = 10, degree: Float = 3, coef0: Float = 1,
        kernel_params: dict[str, Any] | None = None,
        max_clusters: Int = 50,
        n_clusters_selection: str = "auto",
        arbiter: str | None = "auto",
        gaussian_split: bool | Literal["auto"] = "auto",
        affinity_power: Float | Literal["auto"] = "auto",
        eigen_solver: str | None = None,
        n_components: Int | None = None,
        random_state: Int | np.random.RandomState | None = None,
        n_init: Int = 10,
        eigen_tol: Float | Literal["auto"] = "auto",
        assign_labels: str = "auto",
        n_jobs: Int | None = None,
        max_samples: Int | Literal["auto"] | None = "auto",
        verbose: Int = 0,
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
        self.arbiter = arbiter
        self.gaussian_split = gaussian_split
        self.affinity_power = affinity_power
        self.eigen_solver = eigen_solver
        self.n_components = n_components
        self.random_state = random_state
        self.n_init = n_init
        self.eigen_tol = eigen_tol
        self.assign_labels = assign_labels
        self.n_jobs = n_jobs
        self.max_samples = max_samples
        self.verbose = verbose

    @keeps_last_fit
    def fit(self, X, y=None, groups=None):
        """Cluster ``X``, first training the kernel on ``y`` when ``kernel`` asks for it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or (n_samples, n_samples)
            Points to cluster (one set, or one set per group); the affinity (``affinity='precomputed'``) or distance
            (``'precomputed_nearest_neighbors'``) matrix.  The learned affinity densifies sparse ``X`` set by set
            (only the subsample of a set past ``max_samples_``; refused when that dense copy would not fit in memory).
        y : array-like of shape (n_samples,), default=None
            Ignored, as by every scikit-learn clusterer, unless ``kernel`` is an unfitted kernel (trained on these
            labels) or a fitted one with ``warm_start=True`` (fine-tuned on them); ``-1``: unlabelled (clustered).
        groups : array-like of shape (n_samples,), default=None
            Each group is clustered as its own set (and drawn from when the kernel is trained).

        Returns
        -------
        self : ABCClustering
            A fit that raises leaves the last fit's attributes as they were (a kernel trained on the way stays so).
        """
        self._validate_params()
        check_setting_combinations(self)  # before any fitted attribute changes: a refused refit keeps the last fit
        warn_unread_affinity_parameters(self)
        check_not_masked_or_missing(X)
        checked = validate_set(self, X, reset=True, ensure_min_samples=2)
        group_codes = encode_groups(groups, checked.shape[0])
        checked = symmetrised_for_fit(self, checked, group_codes)
        X_in = kernel_input(self, X, checked)
        self.kernel_ = resolve_kernel(self, X_in, y, groups)
        if self.kernel is None or self.kernel_ is self.kernel:  # rows that trained a kernel on y are points
            warn_if_square(self, checked, group_codes)
        X_in = without_unseen_names(X_in, X, checked, self.kernel_)
        self._resolve_auto(as_kernel(self.kernel_).recommended_clustering())
        labels, affinity, n_found, eigenvalues, chosen = cluster_groups(self, X_in, checked.shape[0], group_codes)
        self.labels_, self.n_clusters_, self.affinity_matrix_ = labels, int(sum(n_found)), affinity
        if group_codes is None:
            self.eigenvalues_ = eigenvalues[0]
            self.candidate_ = chosen[0]
        else:
            self.eigenvalues_ = None if self.n_clusters is not None else eigenvalues  # as for one set
            self.candidate_ = chosen
        remember_fitted_params(self)
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
            The partition of ``X`` found anew, ids from 0 (its ``k`` estimated unless ``n_clusters`` is given): not
            the nearest of the fitted ``labels_``' clusters, as KMeans's ``predict``.  ``predict`` of ``fit``'s ``X``
            gives ``labels_`` with an int ``random_state`` (``None`` or a ``RandomState``: each call draws anew).
        """
        check_is_fitted(self, "kernel_")
        n_samples = _num_samples(X_in := self._predict_input(X))
        return cluster_groups(self, X_in, n_samples, encode_groups(groups, n_samples), keep_affinity=False)[0]

    def _predict_input(self, X):
        """``X`` validated against what ``fit`` saw (width, feature names), as the kernel takes it."""
        check_not_masked_or_missing(X)
        checked = validate_set(self, X, reset=False, ensure_min_samples=1)
        return without_unseen_names(kernel_input(self, X, checked), X, checked, self.kernel_)

    def fit_predict(self, X, y=None, groups=None):
        """Fit (training the kernel on ``y`` only when ``kernel`` asks for it) and return the labels of ``X``.

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

    def _resolve_auto(self, recommended: dict, gaussian_split: bool | None = None) -> None:
        """Resolve every ``'auto'`` once, from the kernel's recommendation (:func:`skabc._resolve.resolve_settings`)."""
        resolve_settings(self, recommended, gaussian_split)

    def _follows_sklearn(self) -> bool:
        """Whether the spectral step is SpectralClustering's own: a non-learned affinity with ``n_clusters`` given."""
        return not is_learned(self.affinity) and self.n_clusters is not None

    def predict_many(self, sets, n_jobs=None):
        """Cluster many independent sets with the fitted kernel, in parallel.

        Each set is validated and clustered exactly as ``predict(set)`` would
        (labels from 0 in every set): the result equals ``[self.predict(s) for s in sets]``, but for a
        ``RandomState`` on SpectralClustering's own path, where ``predict`` hands it to scikit-learn whole and
        this draws each set's seed from it.  The sets are dispatched with :class:`joblib.Parallel`; inside
        ``joblib.parallel_config(backend='dask')`` they spread over the workers of
        a :class:`dask.distributed.Client` (the fitted kernel is pickled to them).

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
        sets = validate_each(self._predict_input, check_sets(sets))
        seeds = set_seeds(self, len(sets))  # those predict(s) would draw, set after set
        results = map_sets(self, sets, seeds, check_n_jobs(n_jobs), keep_affinity=False)
        warn_about_estimates(self, [found for _, _, found, *_ in results], [values for _, _, _, values, _ in results],
                             [_num_samples(s) for s in sets], [chosen for *_, chosen in results])
        return [labels for labels, *_ in results]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = tags.input_tags.positive_only = is_pairwise(self.affinity)  # non-negative
        # An unfitted kernel is trained on y: fit cannot run without labels.
        tags.target_tags.required = self.kernel is not None and not kernel_is_fitted(self.kernel)
        return tags
