"""ABCClustering as a drop-in for SpectralClustering: every affinity, sparse input, y ignored, same attributes."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.cluster import SpectralClustering
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV
from sklearn.neighbors import NearestNeighbors

from skabc import ABCClustering, ContextualKernel, KernelEnsemble
from skabc.kernels import Kernel
from skabc.kernels.pairwise import PairwiseKernel, PrecomputedKernel


@pytest.fixture(scope="module")
def blobs():
    return make_blobs(n_samples=120, centers=3, cluster_std=1.0, random_state=0)


def _distance_graph(X, n_neighbors=10):
    return NearestNeighbors(n_neighbors=n_neighbors).fit(X).kneighbors_graph(X, mode="distance")


def _cases(X):
    """(ABCClustering/SpectralClustering keywords, X given to fit) for every kind of affinity."""
    A = rbf_kernel(X, gamma=0.5)
    return [
        (dict(affinity="rbf", gamma=0.5), X),
        (dict(affinity="laplacian", gamma=0.5), X),
        (dict(affinity="poly", gamma=0.1, degree=2, coef0=1), X),
        (dict(affinity="nearest_neighbors", n_neighbors=8), X),
        (dict(affinity="precomputed"), A),
        (dict(affinity="precomputed"), sp.csr_matrix(np.where(A > 1e-3, A, 0))),
        (dict(affinity="precomputed_nearest_neighbors", n_neighbors=8), _distance_graph(X)),
        (dict(affinity=lambda a, b: np.exp(-np.sum((a - b) ** 2))), X[:40]),
        (dict(affinity="rbf", assign_labels="discretize"), X),
        (dict(affinity="rbf", assign_labels="cluster_qr"), X),
        (dict(affinity="nearest_neighbors", eigen_solver="lobpcg"), X),
    ]


@pytest.mark.parametrize("case", range(11))
def test_same_partition_labels_and_affinity_as_spectral_clustering(blobs, case):
    """With n_clusters given, every non-learned affinity gives SpectralClustering's own result, bit for bit."""
    params, data = _cases(blobs[0])[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # e.g. "Graph is not fully connected", raised by both
        ours = ABCClustering(n_clusters=3, random_state=0, **params).fit(data)
        theirs = SpectralClustering(n_clusters=3, random_state=0, **params).fit(data)
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    assert ours.labels_.dtype == theirs.labels_.dtype
    assert sp.issparse(ours.affinity_matrix_) == sp.issparse(theirs.affinity_matrix_)
    a, b = ours.affinity_matrix_, theirs.affinity_matrix_
    np.testing.assert_array_equal(a.toarray() if sp.issparse(a) else a, b.toarray() if sp.issparse(b) else b)
    assert ours.n_clusters_ == len(np.unique(theirs.labels_))


def test_same_random_state_instance_is_used_as_spectral_clustering_uses_it(blobs):
    X, _ = blobs
    ours = ABCClustering(n_clusters=4, affinity="rbf", random_state=np.random.RandomState(3)).fit(X)
    theirs = SpectralClustering(n_clusters=4, random_state=np.random.RandomState(3)).fit(X)
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)


@pytest.mark.parametrize("params, make", [
    (dict(affinity="rbf", gamma=0.5), lambda X: X),
    (dict(affinity="nearest_neighbors"), lambda X: X),
    (dict(affinity="precomputed"), lambda X: rbf_kernel(X, gamma=0.5)),
    (dict(affinity="precomputed_nearest_neighbors"), _distance_graph),
])
def test_n_clusters_is_estimated_for_every_affinity(params, make):
    X, y = make_blobs(n_samples=150, centers=[[-6, 0], [0, 6], [6, 0]], cluster_std=0.6, random_state=1)
    model = ABCClustering(random_state=0, **params).fit(make(X))
    assert model.n_clusters_ == 3
    assert model.eigenvalues_ is not None
    # At least as good as SpectralClustering given the true k.  The kNN graphs of these blobs have three
    # components, whose null space numpy 1.23 / scipy 1.9 return as a basis that k-means may split wrong
    # (ARI 0.599 for SpectralClustering there), so the truth itself is required of the other affinities.
    theirs = SpectralClustering(n_clusters=3, random_state=0, **params).fit_predict(make(X))
    assert adjusted_rand_score(y, model.labels_) >= adjusted_rand_score(y, theirs)
    if "nearest_neighbors" not in params["affinity"]:
        assert adjusted_rand_score(y, model.labels_) == 1.0


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("affinity", ["rbf", "nearest_neighbors", "cosine"])
def test_sparse_features(blobs, fmt, affinity):
    X = np.abs(blobs[0])
    dense = ABCClustering(n_clusters=3, affinity=affinity, random_state=0).fit(X)
    sparse = ABCClustering(n_clusters=3, affinity=affinity, random_state=0).fit(sp.csr_matrix(X).asformat(fmt))
    np.testing.assert_array_equal(dense.labels_, sparse.labels_)


def test_groups_cluster_each_block_of_a_precomputed_affinity(blobs):
    X, _ = blobs
    A = rbf_kernel(X, gamma=0.5)
    groups = np.repeat([0, 1], 60)
    model = ABCClustering(affinity="precomputed", random_state=0).fit(A, groups=groups)
    for g in (0, 1):
        alone = ABCClustering(affinity="precomputed", random_state=0).fit(A[groups == g][:, groups == g])
        assert adjusted_rand_score(model.labels_[groups == g], alone.labels_) == 1.0
    assert not set(model.labels_[groups == 0]) & set(model.labels_[groups == 1])


def test_fitted_attributes(blobs):
    X, _ = blobs
    frame = pd.DataFrame(X, columns=["a", "b"])
    model = ABCClustering(n_clusters=3, affinity="rbf", random_state=0).fit(frame)
    assert model.n_features_in_ == 2
    assert list(model.feature_names_in_) == ["a", "b"]
    assert model.affinity_matrix_.shape == (120, 120)
    assert isinstance(model.kernel_, PairwiseKernel) and isinstance(model.kernel_, Kernel)
    A = rbf_kernel(X)
    assert ABCClustering(n_clusters=3, affinity="precomputed").fit(A).affinity_matrix_ is A


def test_nearest_neighbors_warns_on_a_disconnected_graph_like_spectral_clustering():
    X, _ = make_blobs(n_samples=20, random_state=0, centers=[[1, 1], [-1, -1]], cluster_std=0.01)
    with pytest.warns(UserWarning, match="not fully connected"):
        ABCClustering(n_clusters=2, affinity="nearest_neighbors", random_state=0).fit(X)


def test_square_features_warn_that_precomputed_exists():
    X = np.random.default_rng(0).normal(size=(6, 6))
    with pytest.warns(UserWarning, match="affinity='precomputed'"):
        ABCClustering(n_clusters=2, affinity="rbf", random_state=0).fit(X)
    # Code that silenced SpectralClustering's warning by its message silences this one too.
    with warnings.catch_warnings():
        warnings.filterwarnings("error")
        warnings.filterwarnings("ignore", message="The spectral clustering API has changed")
        ABCClustering(n_clusters=2, affinity="rbf", random_state=0).fit(X)


def test_kernel_params_reach_a_callable_and_are_not_mutated(blobs):
    X = blobs[0][:30]
    seen = {}

    def similarity(a, b, scale):
        seen["scale"] = scale
        return float(np.exp(-np.sum((a - b) ** 2) / scale))

    params = {"scale": 2.0}
    ABCClustering(n_clusters=2, affinity=similarity, kernel_params=params, random_state=0).fit(X)
    assert seen == {"scale": 2.0} and params == {"scale": 2.0}


# ------------------------------------------------------------------------------------- y only when asked
def test_grid_search_over_n_clusters_with_the_generic_kernel_trains_nothing(blobs, monkeypatch):
    """GridSearchCV passes y to every fit; with kernel=None it must be ignored (no kernel is trained)."""
    def no_training(self, *args, **kwargs):
        raise AssertionError("ABCClustering trained a kernel it was not asked to train")

    monkeypatch.setattr(ContextualKernel, "fit", no_training)
    X, y = blobs
    search = GridSearchCV(ABCClustering(random_state=0), {"n_clusters": [2, 3]}, cv=2, scoring="adjusted_rand_score",
                          error_score="raise")
    search.fit(X, y)
    assert search.best_params_ == {"n_clusters": 3}


@pytest.mark.parametrize("n_clusters", [None, 3])
def test_numeric_strings_are_read_as_spectral_clustering_reads_them(blobs, n_clusters):
    """SpectralClustering converts an array of numeric strings; the learned affinity's arbiter refused it."""
    X = blobs[0][:60]
    as_text = ABCClustering(n_clusters=n_clusters, random_state=0).fit_predict(X.astype(str))
    np.testing.assert_array_equal(as_text, ABCClustering(n_clusters=n_clusters, random_state=0).fit_predict(X))


def test_cross_validating_a_precomputed_affinity_says_why_it_cannot(blobs):
    """scikit-learn's CV hands pairwise estimators the test x train block, which is no set's affinity."""
    from sklearn.model_selection import GridSearchCV

    X, y = blobs
    A = np.exp(-np.sum((X[:40, None] - X[None, :40]) ** 2, axis=-1) / 4)
    search = GridSearchCV(ABCClustering(affinity="precomputed", random_state=0), {"n_clusters": [2, 3]},
                          scoring="adjusted_rand_score", cv=3, error_score="raise")
    with pytest.raises(ValueError, match="test x train block"):
        search.fit(A, y[:40])


@pytest.mark.parametrize("affinity", ["rbf", "nearest_neighbors"])
def test_y_is_ignored_by_every_non_learned_affinity(blobs, affinity):
    X, y = blobs
    with_y = ABCClustering(n_clusters=3, affinity=affinity, random_state=0).fit(X, y[::-1]).labels_
    np.testing.assert_array_equal(with_y, ABCClustering(n_clusters=3, affinity=affinity, random_state=0).fit(X).labels_)


# --------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("params, X, match", [
    (dict(affinity="precomputed"), np.ones((4, 3)), "square"),
    (dict(affinity="precomputed"), np.array([[1.0, -0.5, 0], [-0.5, 1, 0], [0, 0, 1]]), "non-negative"),
    (dict(affinity="precomputed"), np.array([[1.0, np.nan], [np.nan, 1]]), "NaN"),
    (dict(affinity="precomputed_nearest_neighbors"), np.ones((4, 3)), "square"),
    (dict(affinity="precomputed_nearest_neighbors"), -np.ones((4, 4)), "non-negative"),
    (dict(affinity="precomputed_nearest_neighbors", n_neighbors=5), np.ones((4, 4)) - np.eye(4), "n_neighbors=5"),
    (dict(affinity="magic"), np.ones((4, 2)), "affinity"),
    (dict(affinity="rbf", gamma=0.0), np.ones((4, 2)), "gamma"),
    (dict(affinity="rbf", gamma=-1.0), np.ones((4, 2)), "gamma"),
    (dict(affinity="nearest_neighbors", n_neighbors=13), np.arange(24.0).reshape(12, 2), "n_neighbors=13"),
    (dict(affinity="nearest_neighbors", n_neighbors=0), np.ones((4, 2)), "n_neighbors"),
    (dict(affinity="rbf"), np.array([[0.0, np.nan], [1.0, 2.0]]), "NaN"),
])
def test_bad_input_raises_a_clear_error(params, X, match):
    with pytest.raises(ValueError, match=match):
        ABCClustering(n_clusters=2, **params).fit(X)


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("include_self", [True, False])
def test_a_knn_connectivity_graph_is_symmetrised_as_spectral_clustering_does(blobs, sparse, include_self):
    """kneighbors_graph is not symmetric: fit averages it with its transpose under SpectralClustering's warning and
    gives its labels; predict, where such a block is most likely cross-validation's test x train, still refuses."""
    from sklearn.neighbors import kneighbors_graph

    graph = kneighbors_graph(blobs[0], 10, include_self=include_self)
    graph = graph if sparse else graph.toarray()
    expected = SpectralClustering(n_clusters=3, affinity="precomputed", random_state=0).fit(graph)
    with pytest.warns(UserWarning, match="Array is not symmetric, and will be converted to symmetric by average"):
        model = ABCClustering(n_clusters=3, affinity="precomputed", random_state=0).fit(graph)
    np.testing.assert_array_equal(model.labels_, expected.labels_)
    kept = model.affinity_matrix_.toarray() if sparse else model.affinity_matrix_
    dense = graph.toarray() if sparse else graph
    np.testing.assert_allclose(kept, 0.5 * (dense + dense.T))
    with pytest.raises(ValueError, match="symmetric"):
        model.predict(graph)


def test_symmetrising_reads_only_what_is_clustered_and_keeps_the_format(blobs):
    """The final review of session 45: with groups, cross-group entries (never read) made fit warn and average; a
    negative matrix was said to be averaged before it was refused; COO came back as CSR."""
    from sklearn.metrics.pairwise import rbf_kernel

    X = blobs[0][:80]
    A = rbf_kernel(X, gamma=0.5)
    groups = np.repeat([0, 1], 40)
    A[:40, 40:] = np.random.default_rng(0).uniform(size=(40, 40))  # cross-group entries: not symmetric, unread
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = ABCClustering(n_clusters=2, affinity="precomputed", random_state=0).fit(A, groups=groups)
    assert len(np.unique(model.labels_)) == 4
    negative = np.array([[1.0, -0.5, 0.0], [0.2, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with warnings.catch_warnings(), pytest.raises(ValueError, match="Negative values"):
        warnings.simplefilter("error")
        ABCClustering(n_clusters=2, affinity="precomputed").fit(negative)
    from sklearn.neighbors import kneighbors_graph

    graph = kneighbors_graph(blobs[0], 10).tocoo()
    with pytest.warns(UserWarning, match="Array is not symmetric"):
        model = ABCClustering(n_clusters=3, affinity="precomputed", random_state=0).fit(graph)
    assert model.affinity_matrix_.format == "coo"


def test_a_kernel_with_a_non_learned_affinity_is_refused(blobs):
    with pytest.raises(ValueError, match="affinity='learned' only"):
        ABCClustering(kernel=ContextualKernel(), affinity="rbf").fit(blobs[0])


def test_precomputed_kernel_alone():
    A = np.array([[1.0, 0.5], [0.5, 1.0]])
    assert PrecomputedKernel().fit(A).affinity(A) is A
    assert PrecomputedKernel("precomputed_nearest_neighbors").returns_sparse(10)
    assert PairwiseKernel("nearest_neighbors").returns_sparse(10) and not PairwiseKernel().returns_sparse(10)


@pytest.mark.parametrize("params, make", [
    (dict(affinity="rbf"), lambda X: X),
    (dict(affinity="nearest_neighbors"), lambda X: X),
    (dict(affinity="precomputed"), lambda X: rbf_kernel(X, gamma=0.5)),
])
def test_predict_clusters_a_new_set_with_the_same_affinity(blobs, params, make):
    data = make(blobs[0])
    model = ABCClustering(n_clusters=3, random_state=0, **params).fit(data)
    np.testing.assert_array_equal(model.predict(data), model.labels_)


def test_learned_affinity_refuses_a_sparse_X_too_large_to_densify():
    from skabc import pretrained
    from skabc.exceptions import AffinityTooLargeError

    kernel = pretrained.load("generic", device="cpu").set_params(memory_limit=1_000)
    X = sp.random(50, 10, density=0.3, format="csr", random_state=0)
    with pytest.raises(AffinityTooLargeError, match=r"sparse set \(50 x 10\) would take 17.6 KiB dense") as caught:
        ABCClustering(kernel=kernel).fit(X)
    assert "0.0 GiB" not in str(caught.value)  # sets are made dense one at a time now: small sizes are common


def test_the_sparse_memory_check_counts_the_canonicalisation_copies():
    """A probe: the check counted the float32 dense copy only (4 bytes an entry); a canonicalising kernel's float64
    working copies came on top, and a 2,000 x 50,000 sparse X peaked about 10 times the estimate."""
    from skabc import _fit_inputs, pretrained
    from skabc.exceptions import AffinityTooLargeError

    X = sp.random(50, 2000, density=0.01, format="csr", random_state=0)
    entries = X.shape[0] * X.shape[1]
    limit = 10 * entries  # above the float32 copy (4 bytes an entry), below it with the float64 copies (36)
    generic = pretrained.load("generic", device="cpu").set_params(memory_limit=limit)
    with pytest.raises(AffinityTooLargeError, match=r"sparse set \(50 x 2000\) would take .* working copies"):
        _fit_inputs.densify(X, generic)
    width_bound = SimpleNamespace(memory_limit=limit)  # no canonicalisation: the float32 copy alone
    dense = _fit_inputs.densify(X, width_bound)
    assert dense.shape == X.shape and dense.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sparse_rows_reach_a_canonicalising_kernel_in_their_dtype_and_cluster_as_dense(blobs, monkeypatch, dtype):
    """The dense copy of sparse features keeps their dtype for a kernel that canonicalises, as dense features do."""
    from skabc import _fit_inputs, _sets

    seen = []
    real = _fit_inputs.densify
    monkeypatch.setattr(_sets, "densify", lambda X, kernel: seen.append(real(X, kernel)) or seen[-1])
    X = blobs[0].astype(dtype)
    labels = ABCClustering(random_state=0).fit(sp.csr_matrix(X)).labels_
    assert seen and seen[0].dtype == dtype
    np.testing.assert_array_equal(labels, ABCClustering(random_state=0).fit(X).labels_)


def test_sparse_columns_far_from_zero_cluster_as_dense():
    """A probe: sparse X was cast to float32 before the kernel's exact centring, so columns 1.6e9 from zero with a
    spread of about 10 collapsed to a few distinct rows (k = 5, ARI 0.86, where the same dense X gives k = 3)."""
    X, y = make_blobs(400, centers=3, random_state=1)
    X = 1.6e9 + 10 * X
    dense = ABCClustering(random_state=0).fit(X)
    assert dense.n_clusters_ == 3 and adjusted_rand_score(y, dense.labels_) > 0.9
    # Review 59r: integer columns (timestamps) were read as float32 first, sparse or in a DataFrame.
    integers = np.round(X).astype(np.int64)
    for data in (sp.csr_matrix(X), sp.csr_matrix(integers), pd.DataFrame(integers), integers):
        np.testing.assert_array_equal(ABCClustering(random_state=0).fit(data).labels_, dense.labels_)


@pytest.mark.parametrize("kernel", [lambda: ContextualKernel(), lambda: ContextualKernel(init="generic"),
                                    lambda: KernelEnsemble(ContextualKernel(), n_members=2)],
                         ids=["auto-init", "generic-init", "ensemble"])
def test_sparse_rows_a_kernel_will_train_on_from_the_generic_network_reach_it_in_float64(monkeypatch, kernel):
    """Review 59r: an unfitted kernel that will start from the generic network canonicalises too, as its own fit
    decides; its sparse training rows were made dense in float32 (400 distinct rows collapsed to 5)."""
    from skabc import _fit_inputs

    seen = []

    class Seen(Exception):
        pass

    def recording(kernel, X, y, groups=None):
        seen.append(X)
        raise Seen  # the rows are what is checked, not a training run

    monkeypatch.setattr(_fit_inputs, "fit_on_labels", recording)
    X, y = make_blobs(400, centers=3, random_state=1)
    with pytest.raises(Seen):
        ABCClustering(kernel=kernel(), random_state=0).fit(sp.csr_matrix(1.6e9 + 10 * X), y)
    assert seen[0].dtype == np.float64 and len(np.unique(seen[0], axis=0)) == 400


def test_only_the_subsample_of_a_sparse_set_is_made_dense(monkeypatch):
    """A probe: the whole sparse X was made dense before the max_samples subsample was drawn (a 20,000 x 5,000
    X, density 0.01, peaked 3.2 GiB); now each set, or its subsample, is made dense as it is clustered."""
    from sklearn.datasets import make_blobs

    from skabc import _fit_inputs, _sets

    shapes = []
    real = _fit_inputs.densify

    def recording(X, kernel):
        shapes.append(X.shape)
        return real(X, kernel)

    monkeypatch.setattr(_fit_inputs, "densify", recording)
    monkeypatch.setattr(_sets, "densify", recording)
    X, _ = make_blobs(2600, n_features=6, centers=3, random_state=0)
    X[np.abs(X) < 1.0] = 0.0
    model = ABCClustering(random_state=0).fit(sp.csr_matrix(X))
    assert model.max_samples_ == 2000 and shapes == [(2000, 6)]
    np.testing.assert_array_equal(model.labels_, ABCClustering(random_state=0).fit(X.astype(np.float32)).labels_)
    shapes.clear()
    groups = np.repeat([0, 1], 1300)
    ABCClustering(random_state=0).fit(sp.csr_matrix(X), groups=groups)
    assert shapes == [(1300, 6), (1300, 6)]


# ------------------------------------------------------------------ k unknown with a scikit-learn affinity
@pytest.fixture(scope="module")
def moons():
    from sklearn.datasets import make_moons

    return make_moons(n_samples=300, noise=0.05, random_state=0)


def test_k_unknown_is_counted_by_the_generic_kernel_and_the_affinity_cut_as_spectral_clustering_would(moons):
    """A 10-NN graph's own eigengap finds dozens of clusters on two moons; the generic kernel counts two."""
    X, y = moons
    own_eigengap = ABCClustering(affinity="nearest_neighbors", n_clusters_selection="eigengap", random_state=0).fit(X)
    assert own_eigengap.arbiter_ is None and own_eigengap.n_clusters_ > 10  # what 'auto' did before
    model = ABCClustering(affinity="nearest_neighbors", random_state=0).fit(X)
    # The kNN graph's own rule (KNN_GRAPH_CLUSTERING), used only where the count falls back to it.
    assert model.arbiter_ == "generic-count" and model.n_clusters_selection_ == "rotation"
    assert model.n_clusters_ == 2 and model.candidate_.startswith("affinity-at-")
    theirs = SpectralClustering(n_clusters=2, affinity="nearest_neighbors", random_state=0).fit(X)
    assert adjusted_rand_score(theirs.labels_, model.labels_) == 1.0
    assert adjusted_rand_score(y, model.labels_) == 1.0
    assert (model.affinity_matrix_ != theirs.affinity_matrix_).nnz == 0
    assert model.labels_.dtype == np.int64 and model.labels_[0] == 0  # ids in order of first appearance
    assert model.eigenvalues_ is not None


@pytest.mark.parametrize("params", [dict(affinity="rbf"), dict(affinity="rbf", n_components=6),
                                    dict(affinity="nearest_neighbors", assign_labels="discretize")])
def test_the_counted_cut_is_seeded_as_spectral_clustering_given_that_k(moons, params):
    """The cut used seeds drawn from random_state: ARI 0.947 against SpectralClustering(n_clusters=k_hat) (rbf, 3)."""
    X, _ = moons
    counted = ABCClustering(random_state=3, **params).fit(X)
    theirs = SpectralClustering(n_clusters=counted.n_clusters_, random_state=3, **params).fit(X)
    given = ABCClustering(n_clusters=counted.n_clusters_, random_state=3, **params).fit(X)
    assert counted.arbiter_ == "generic-count"
    assert adjusted_rand_score(theirs.labels_, counted.labels_) == 1.0
    assert adjusted_rand_score(given.labels_, counted.labels_) == 1.0


@pytest.mark.parametrize("params", [dict(n_clusters_selection="eigengap"), dict(arbiter=None),
                                    dict(n_clusters_selection="rotation")])
def test_a_chosen_k_rule_or_no_arbiter_keeps_the_affinitys_own_spectrum(moons, params):
    X, _ = moons
    model = ABCClustering(affinity="nearest_neighbors", random_state=0, **params).fit(X)
    assert model.arbiter_ is None and model.candidate_ is None


@pytest.mark.parametrize("affinity", ["precomputed", "precomputed_nearest_neighbors"])
def test_a_precomputed_matrix_has_no_rows_to_count_with(moons, affinity):
    X, _ = moons
    matrix = rbf_kernel(X, gamma=10.0) if affinity == "precomputed" else _distance_graph(X)
    assert ABCClustering(affinity=affinity, random_state=0).fit(matrix).arbiter_ is None


@pytest.mark.parametrize("affinity", ["rbf", "nearest_neighbors"])
def test_sparse_rows_are_counted_as_the_same_rows_stored_dense(moons, affinity):
    """Sparse X read its affinity's own eigengap: the same 300 moons gave 2 clusters dense, 27 as CSR (kNN)."""
    X = moons[0]
    dense = ABCClustering(affinity=affinity, random_state=0).fit(X)
    model = ABCClustering(affinity=affinity, random_state=0).fit(sp.csr_matrix(X))
    assert model.arbiter_ == "generic-count" and model.candidate_ == dense.candidate_
    assert model.n_clusters_ == dense.n_clusters_ == 2
    np.testing.assert_array_equal(model.labels_, dense.labels_)


def test_very_wide_sparse_rows_keep_the_eigengap_and_say_so(blobs, monkeypatch):
    from skabc import _counting

    monkeypatch.setattr(_counting, "MAX_DENSIFIED_FEATURES", 1)  # the blobs' two columns are then too wide
    X = np.abs(blobs[0])
    own = ABCClustering(affinity="rbf", n_clusters_selection="eigengap", random_state=0).fit(X)
    # Probe 57f: said by candidate_ None only; an RBF of 4,097 sparse text columns found one cluster without a word.
    with pytest.warns(UserWarning, match=r"k is not counted by the generic kernel here: X is sparse with 2 columns"):
        model = ABCClustering(affinity="rbf", random_state=0).fit(sp.csr_matrix(X))
    assert model.arbiter_ == "generic-count" and model.candidate_ is None
    np.testing.assert_array_equal(model.labels_, own.labels_)


def test_counted_sets_are_reproducible_and_counted_per_group(moons):
    X, _ = moons
    groups = np.repeat([0, 1], 150)
    first = ABCClustering(affinity="nearest_neighbors", random_state=3).fit(X, groups=groups)
    again = ABCClustering(affinity="nearest_neighbors", random_state=3).fit(X, groups=groups)
    np.testing.assert_array_equal(first.labels_, again.labels_)
    assert len(first.candidate_) == 2 and all(c.startswith("affinity-at-") for c in first.candidate_)
    np.testing.assert_array_equal(first.predict(X, groups=groups), first.labels_)


def test_the_candidates_of_a_counting_model_are_the_generic_kernels(moons):
    from skabc._arbiter_candidates import arbiter_candidates

    X, _ = moons
    model = ABCClustering(affinity="nearest_neighbors", random_state=0).fit(X)
    candidates, _, kept, kept_as = arbiter_candidates(model, X)
    assert kept_as == "k"  # it gave k; the labels are the model's own affinity cut into it
    assert {c.name for c in candidates} >= {"kernel-consensus", "knn-rotation"}
    assert model.candidate_ == f"affinity-at-{candidates[kept].name}"
    assert candidates[kept].n_clusters == model.n_clusters_


def test_njw_labels_of_a_scikit_learn_affinity_are_ours_not_spectral_clusterings(moons):
    """assign_labels='njw' has no SpectralClustering counterpart: its labels were k-means' int32 ids in any order,
    where the documented rule is int64 ids in order of first appearance (as every other non-drop-in case)."""
    X, _ = moons
    njw = ABCClustering(affinity="rbf", n_clusters=3, assign_labels="njw", random_state=0).fit(X).labels_
    _, first = np.unique(njw, return_index=True)
    assert njw.dtype == np.int64 and list(njw[np.sort(first)]) == [0, 1, 2]
    kmeans = ABCClustering(affinity="rbf", n_clusters=3, random_state=0).fit(X).labels_  # the drop-in keeps SC's
    np.testing.assert_array_equal(kmeans, SpectralClustering(n_clusters=3, random_state=0).fit(X).labels_)
    assert kmeans.dtype == SpectralClustering(n_clusters=3, random_state=0).fit(X).labels_.dtype


@pytest.mark.parametrize("affinity", ["additive_chi2", "linear", "cosine"])
def test_negative_row_sums_are_refused_naming_the_affinity(affinity):
    """A probe: scikit-learn's 'Input contains NaN' from deep in spectral_embedding was the message."""
    X = np.random.default_rng(0).normal(size=(60, 3))
    X = np.abs(X) if affinity == "additive_chi2" else X  # chi2 kernels take non-negative rows
    with pytest.raises(ValueError, match=rf"affinity='{affinity}' gives negative affinities"):
        ABCClustering(affinity=affinity, n_clusters=2, random_state=0).fit(X)
    with pytest.raises(ValueError):  # SpectralClustering fails on the same X too
        SpectralClustering(affinity=affinity, n_clusters=2, random_state=0).fit(X)


@pytest.mark.parametrize("scale", [1e155, 1e300])
def test_an_affinity_that_overflows_on_finite_rows_is_refused_by_name(scale):
    """Probe 70b: rbf distances of finite rows near 1e155 overflow to inf - inf; scikit-learn then says "Input
    contains NaN" of an X that holds none.  The refusal names the affinity and the cause."""
    from sklearn.datasets import make_blobs

    X = make_blobs(60, centers=3, random_state=0)[0] * scale
    assert np.isfinite(X).all()
    for n_clusters in (3, None):
        with pytest.raises(ValueError, match=r"affinity='rbf' gives non-finite affinities .* overflow float64"):
            ABCClustering(affinity="rbf", n_clusters=n_clusters, random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"affinity='nan_kernel' .* the callable returned NaN or inf"):
        ABCClustering(affinity=nan_kernel, n_clusters=2, random_state=0).fit(X / scale)


def nan_kernel(a, b):
    return np.nan


def inverse_distance(a, b):
    with np.errstate(divide="ignore"):
        return 1.0 / np.linalg.norm(a - b)


def test_an_affinity_infinite_only_on_the_diagonal_is_clustered_as_spectral_clustering_does():
    """Review 70: 1 / distance is infinite at each point's self-pair only, which the Laplacian's degrees leave out:
    SpectralClustering clusters it, and the non-finite check above refused it."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(60, centers=3, random_state=0)
    expected = SpectralClustering(3, affinity=inverse_distance, random_state=0).fit_predict(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # review 70b: inf - inf in the link sums
        labels = ABCClustering(n_clusters=3, affinity=inverse_distance, random_state=0).fit_predict(X)
        assert len(np.unique(ABCClustering(affinity=inverse_distance, random_state=0).fit_predict(X))) > 1
    np.testing.assert_array_equal(labels, expected)
    # Review 70b: the link sums of an infinite diagonal were NaN, and negative links went by unnamed.
    with pytest.raises(ValueError, match=r"affinity='signed_inverse' gives negative affinities .* point \d+'s"):
        ABCClustering(n_clusters=3, affinity=signed_inverse, random_state=0).fit(X)


def signed_inverse(a, b):
    return inverse_distance(a, b) - 1.0


def test_a_negative_self_affinity_alone_is_clustered_as_spectral_clustering_does():
    """Probe 69a: the refusal summed rows with their diagonal; scikit-learn's degrees leave it out, so a sigmoid
    affinity whose only negative row sum came from a point's own value (tanh(0.01 - 1)) was refused."""
    X = np.array([[0.1, 0.0], [10.5, 0.0], [11.0, 0.0], [11.5, 0.0], [11.0, 1.0], [11.0, -1.0]])
    kw = dict(n_clusters=2, affinity="sigmoid", gamma=1.0, coef0=-1.0, random_state=0)
    np.testing.assert_array_equal(ABCClustering(**kw).fit(X).labels_, SpectralClustering(**kw).fit(X).labels_)
    # With k counted, the package's Laplacian keeps self-loops: the refusal names the row and what to do.
    with pytest.raises(ValueError, match=r"row 0: -0\.26, its own affinity included.*with n_clusters given"):
        ABCClustering(**{**kw, "n_clusters": None}).fit(X)


def test_links_are_summed_without_the_diagonal_not_after_it():
    """Review 69: the links were the row sum minus the diagonal, so a self-affinity of 1e16 swallowed links
    summing to -0.5 and scikit-learn's 'Input contains NaN' came back; a read-only affinity is not written to."""
    from skabc.spectral._affinity_checks import link_sums as _link_sums

    A = np.array([[1e16, -0.25, -0.25], [-0.25, 1.0, 0.5], [-0.25, 0.5, 1.0]])
    A.flags.writeable = False
    np.testing.assert_array_equal(_link_sums(A), [-0.5, 0.25, 0.25])
    assert A[0, 0] == 1e16
    X = np.array([[1e8, 0.0], [-1e-9, 1.0], [-1e-9, 2.0], [0.0, 3.0]])
    with pytest.raises(ValueError, match="affinity='linear' gives negative affinities"):
        ABCClustering(affinity="linear", n_clusters=2, random_state=0).fit(X)


def test_predict_many_of_a_counting_model_equals_predict_set_by_set():
    """The counted cut was seeded with random_state for one set only: predict_many([S0, S1])[0] != predict(S0)."""
    from sklearn.datasets import make_blobs

    sets = [make_blobs(120, centers=4, cluster_std=2.5, random_state=s)[0] for s in range(2)]
    model = ABCClustering(arbiter="generic-count", random_state=0).fit(sets[0])
    for labels, X in zip(model.predict_many(sets), sets, strict=True):
        np.testing.assert_array_equal(labels, model.predict(X))


@pytest.mark.parametrize("affinity", ["nearest_neighbors", "precomputed_nearest_neighbors"])
def test_n_neighbors_up_to_the_number_of_samples_as_spectral_clustering(affinity):
    """A probe (/work/probe35a): SpectralClustering takes n_neighbors == n_samples (the point itself is one of them);
    ABCClustering refused it, and a too-large value named the size of a group or subsample as 'the number of
    samples' without saying so."""
    from sklearn.metrics import pairwise_distances

    X = np.random.RandomState(0).randn(5, 2)
    data = pairwise_distances(X) if affinity == "precomputed_nearest_neighbors" else X
    params = dict(n_clusters=2, affinity=affinity, n_neighbors=5, random_state=0)
    np.testing.assert_array_equal(ABCClustering(**params).fit(data).labels_,
                                  SpectralClustering(**params).fit(data).labels_)
    with pytest.raises(ValueError, match=r"n_neighbors=6 must be at most the number of rows of the set clustered, 5"):
        ABCClustering(**{**params, "n_neighbors": 6}).fit(data)
    rows = np.random.RandomState(1).randn(11, 2)
    with pytest.raises(ValueError, match=r"clustered, 1, .*each group of `groups` is a set of its own"):
        ABCClustering(affinity="nearest_neighbors").fit(rows, groups=np.r_[np.zeros(10), 1].astype(int))


def test_a_set_too_small_for_the_counting_arbiter_keeps_its_affinitys_own_rule():
    """A probe (/work/probe35a): on five rows the counting arbiter chose a kNN candidate whose graph links every row
    to every other; such sets keep the affinity's own eigengap, as sets under three rows did."""
    X = np.array([[0.0, 0.0], [0.2, 0.1], [0.1, 0.3], [8.0, 8.0], [8.2, 8.1]])
    model = ABCClustering(affinity="rbf", random_state=0).fit(X)
    assert model.candidate_ is None
    assert adjusted_rand_score([0, 0, 0, 1, 1], model.labels_) == 1.0
    own = ABCClustering(affinity="rbf", arbiter=None, n_clusters_selection="eigengap", random_state=0).fit(X)
    np.testing.assert_array_equal(model.labels_, own.labels_)


def test_a_scikit_learn_affinity_parameter_the_learned_affinity_does_not_read_warns(moons):
    """A probe (/work/probe42b): SpectralClustering(n_clusters=3, gamma=0.01) means an RBF of that width; with the
    class name swapped, affinity defaults to 'learned' and gamma (n_neighbors, degree, ...) had no effect unsaid."""
    from skabc.exceptions import SkabcWarning

    X, _ = moons
    with pytest.warns(SkabcWarning, match=r"gamma=0\.01, n_neighbors=5 set, but affinity='learned'"):
        ABCClustering(n_clusters=2, gamma=0.01, n_neighbors=5, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ABCClustering(n_clusters=2, affinity="rbf", gamma=0.01, random_state=0).fit(X)
        ABCClustering(n_clusters=2, random_state=0).fit(X)
        ABCClustering(n_clusters=2, kernel_params={}, gamma=np.float64(1.0), random_state=0).fit(X)  # the defaults


@pytest.mark.parametrize("assign_labels, dtype", [("kmeans", np.int32), ("discretize", np.int64),
                                                  ("cluster_qr", np.int64)])
def test_one_cluster_survives_a_failed_eigensolve(monkeypatch, assign_labels, dtype):
    """Probe 64c: k = 1 (given, or counted by 'generic-count') went to scikit-learn's spectral embedding, which on
    scarcely linked points failed in 2 of 40 identical calls with a bare ValueError(). Where it fails for one
    cluster, the labels are SpectralClustering's where it succeeds (and its dtype); review 64: otherwise it still
    runs, so n_components, warnings, verbose output and a RandomState's draws stay SpectralClustering's."""
    import skabc.spectral.step as step_module

    X = np.random.default_rng(0).normal(size=(40, 2))
    params = dict(affinity="rbf", n_clusters=1, assign_labels=assign_labels, random_state=0)
    expected = SpectralClustering(**params).fit(X).labels_
    for n_components in (None, 3):  # with 3, 'discretize' and 'cluster_qr' label as many clusters, as scikit-learn
        np.testing.assert_array_equal(ABCClustering(**params, n_components=n_components).fit(X).labels_,
                                      SpectralClustering(**params, n_components=n_components).fit(X).labels_)

    def failing(*args, **kwargs):
        raise ValueError()

    monkeypatch.setattr(step_module, "sklearn_spectral_labels", failing)
    labels = ABCClustering(**params).fit(X).labels_
    np.testing.assert_array_equal(labels, expected)
    assert labels.dtype == expected.dtype == dtype
    with pytest.raises(ValueError):  # another k is not papered over
        ABCClustering(**{**params, "n_clusters": 2}).fit(X)
