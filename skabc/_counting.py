"""``k`` for scikit-learn's affinities as ``ABCClustering()`` estimates it, the model's own affinity cut into it.

The largest eigengap of a kNN graph or an RBF affinity of manifold-like or
touching clusters lies far beyond the true ``k``, because their Laplacian
eigenvalues grow smoothly: read that way, ``ABCClustering(affinity='nearest_neighbors')``
found 12 to 50 clusters on scikit-learn's gallery toys of 1 to 3
(``benchmarks/count_k.py``).  The shipped generic kernel and its arbiter count
those clusters well.  A counting arbiter
(:data:`COUNTING_ARBITERS`) therefore runs ``ABCClustering()``'s own
estimate on the rows (at most :data:`~skabc._subsample.MAX_SAMPLES_AUTO` of
them, drawn as ``ABCClustering()`` draws them) and cuts the model's affinity
into that many clusters, as :class:`~sklearn.cluster.SpectralClustering`
would with that ``n_clusters``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import scipy.sparse as sp
from sklearn.utils import _safe_indexing, check_array
from sklearn.utils.validation import _num_samples

from ._quiet_warnings import ignoring_warnings
from ._subsample import MAX_SAMPLES_AUTO, draw_rows
from ._user_warnings import warn_user
from .pretrained import load
from .spectral import SpectralStep, compact
from .spectral.arbiter import Arbiter, arbiter_for
from .spectral.assign import NOT_CONNECTED_WARNING
from .spectral.knn import links_every_row

#: Counting arbiter name -> the shipped kernel whose recommended settings (and arbiter) count the clusters.
COUNTING_ARBITERS = {"generic-count": "generic"}
#: Widest sparse rows counted through a dense copy of the counted subsample (at most 2,000 x 4,096 float64, 66 MB;
#: the kernel's principal axes of a wider one would cost more than the clustering); wider ones keep the step's rule.
MAX_DENSIFIED_FEATURES = 4096


@cache
def _counting_kernel(name: str):
    # Loaded once per process and only read (eval mode): every counting fit shares it.
    return load(COUNTING_ARBITERS[name])


def counting_setup(name: str, step: SpectralStep) -> tuple[object, SpectralStep, Arbiter]:
    """The kernel that counts, the spectral step it counts with (``step``'s ``max_clusters``), and its arbiter."""
    kernel = _counting_kernel(name)
    settings = kernel.recommended_clustering()
    counting_step = replace(step, n_clusters=None, follows_sklearn=False,
                            selection=settings.get("n_clusters_selection", step.selection),
                            affinity_power=float(settings.get("affinity_power", 1.0)),
                            assign_labels=settings.get("assign_labels", step.assign_labels))
    return kernel, counting_step, arbiter_for(settings["arbiter"], counting_step)


def count_then_cut(name: str, step: SpectralStep, affinity, X, eig_seed, seed, cut_random_state: int | None = None):
    """One set: ``k`` counted by :func:`counting_setup`'s kernel and arbiter on the rows ``X``, ``affinity`` cut.

    Returns what :meth:`~skabc.spectral.arbiter.Arbiter.cluster` returns: labels (compact ids), the affinity
    clustered, ``k``, the eigenvalues the counting candidate read, and ``'affinity-at-<candidate>'``.  Rows wider
    than the arbiter's forest's training sets are counted by their kNN graph alone (the arbiter's rule), sparse
    ones as given; other sparse rows through a dense copy of the counted subsample (the same ``k`` as the same
    rows stored dense), unless wider than :data:`MAX_DENSIFIED_FEATURES`.  Those, and sets too small for an
    arbiter (whose kNN graph links every row to every other), keep ``step``'s own rule (candidate ``None``).
    """
    n = _num_samples(X)
    kernel, counting_step, arbiter = counting_setup(name, step)
    rows = draw_rows(n, MAX_SAMPLES_AUTO, seed)
    # A copy of sparse rows: scipy sums a CSR's duplicates in place (the caller's X when every row is counted).
    counted = check_array(X if rows is None else _safe_indexing(X, rows), accept_sparse="csr", copy=sp.issparse(X))
    wide = arbiter.kernel_free_candidate(counting_step, counted)  # rows wider than its forest's: the kNN graph
    reads_kernel = wide is None
    if sp.issparse(counted) and (reads_kernel or counted.shape[1] <= MAX_DENSIFIED_FEATURES):
        if counted.shape[1] > MAX_DENSIFIED_FEATURES:  # probe 57f: an RBF of 4,097 sparse text columns found one
            warn_user(f"k is not counted by the generic kernel here: X is sparse with {X.shape[1]} columns, more "
                      f"than the {MAX_DENSIFIED_FEATURES} it copies dense to count; this affinity's own spectrum "
                      f"counts k instead ({step.selection}), which can be far off (e.g. one cluster for an RBF of "
                      "text rows). Pass n_clusters, or reduce the columns first (e.g. sklearn's TruncatedSVD).")
            return (*step.cluster(affinity, eig_seed, seed), None)
        counted = counted.toarray()  # the same k as the same rows stored dense
    if links_every_row(counted):
        return (*step.cluster(affinity, eig_seed, seed), None)
    _, _, k, eigenvalues, chosen = (arbiter.cluster(counting_step, kernel.affinity(counted), counted, eig_seed, seed)
                                    if reads_kernel else arbiter.cluster_wide(counting_step, counted, wide, eig_seed,
                                                                             seed))
    if step.verbose:  # the arbiter above only counted: the partition is this affinity's, cut at its k
        source = "the generic kernel's candidates" if reads_kernel else "the rows' kNN graph (wider than its forest's)"
        print(f"arbiter {name!r}: counted k={k} ({chosen}, of {source}); this affinity is cut into {k}")
    # Exactly SpectralClustering(n_clusters=k) on the model's affinity, ids renumbered as every k-unknown fit's;
    # given cut_random_state, seeded as SpectralClustering(random_state=cut_random_state) is.
    cut_seeds = (eig_seed, seed) if cut_random_state is None else (None, cut_random_state)
    # With k unknown no path passes scikit-learn's warning of a graph in several components on: none was asked for.
    with ignoring_warnings(NOT_CONNECTED_WARNING):
        labels, affinity, _, _ = replace(step, n_clusters=k, follows_sklearn=True).cluster(affinity, *cut_seeds)
    labels = compact(np.asarray(labels))
    return labels, affinity, len(np.unique(labels)), eigenvalues, f"affinity-at-{chosen}"
