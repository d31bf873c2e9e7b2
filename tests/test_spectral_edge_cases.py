"""Edge cases of the spectral step's counts and cuts (review 68: each test failed on the commit before its fix)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import cosine_similarity, rbf_kernel

from skabc import ABCClustering
from skabc.spectral.knn import _content_rank, knn_graph


@pytest.fixture(scope="module")
def four_blob_affinity():
    X, _ = make_blobs(100, centers=4, random_state=1, cluster_std=1.5)
    return rbf_kernel(X, gamma=0.3)


@pytest.mark.parametrize("scale", [1e-200, 1e-300, 1e200, 1e300])
@pytest.mark.parametrize("storage", [np.asarray, sp.csr_matrix])
def test_consensus_does_not_depend_on_the_affinity_s_scale(four_blob_affinity, scale, storage):
    """Powers were taken before any scaling: at 1e-200 the power-2 vote underflowed to k = 1 (k 3, not 4), and at
    1e200 fit raised 'NaN or infinite values' on a finite input."""
    model = ABCClustering(affinity="precomputed", n_clusters_selection="consensus", random_state=0)
    reference = model.fit(storage(four_blob_affinity)).n_clusters_
    assert reference == 4
    assert model.fit(storage(four_blob_affinity * scale)).n_clusters_ == reference


def test_consensus_counts_more_components_than_max_clusters_in_float64():
    """Votes of the other powers, solved in float32, read rounding noise (~1e-7) as the spectrum of 30 separate
    blobs: the consensus said 15-odd where the eigengap and sparse storage said max_clusters."""
    rng = np.random.default_rng(0)
    X = np.repeat(rng.uniform(-1000, 1000, (30, 2)), 4, axis=0) + rng.normal(0, 0.05, (120, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the count reaches max_clusters, which it says
        model = ABCClustering(affinity="rbf", n_clusters_selection="consensus", max_clusters=20,
                              random_state=0).fit(X)
    assert model.n_clusters_ == 20


@pytest.mark.parametrize("outlier_first", [True, False])
def test_a_point_whose_links_sum_to_a_subnormal_number_does_not_unmake_its_component(outlier_first):
    """Sparse path: whether a component counted was read from its first row; an outlier linked by 1e-312 (degree 0
    to the Laplacian) as that row merged both blobs (k = 1)."""
    rng = np.random.default_rng(0)
    blobs = np.r_[rng.normal(0, 0.3, (30, 2)), rng.normal(0, 0.3, (30, 2)) + np.array([60.0, 0.0])]
    outlier = blobs[np.argmin(blobs[:30, 0])] - [np.sqrt(-np.log(1e-312)), 0]
    X = np.r_[[outlier], blobs] if outlier_first else np.r_[blobs, [outlier]]
    A = rbf_kernel(X, gamma=1.0)
    np.fill_diagonal(A, 0.0)
    labels = ABCClustering(affinity="precomputed", random_state=0).fit(sp.csr_matrix(A)).labels_
    blob_labels = labels[1:] if outlier_first else labels[:-1]
    assert len(set(blob_labels[:30])) == len(set(blob_labels[30:])) == 1
    assert blob_labels[0] != blob_labels[30]


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("selection", ["eigengap", "likelihood", "rotation"])
def test_points_nothing_links_are_each_their_own_cluster_under_every_rule(n, selection):
    """'likelihood' took its one candidate as n - 1 (two unlinked points joined), and 'rotation' answered k = 1 for
    two points without reading the spectrum, leaving eigenvalues_ None."""
    model = ABCClustering(affinity="precomputed", n_clusters_selection=selection, random_state=0).fit(np.eye(n))
    assert model.n_clusters_ == n and len(set(model.labels_)) == n
    assert model.eigenvalues_ is not None


def test_two_linked_points_are_one_cluster_by_rotation():
    model = ABCClustering(affinity="precomputed", n_clusters_selection="rotation", random_state=0)
    assert model.fit(np.array([[1.0, 0.9], [0.9, 1.0]])).n_clusters_ == 1


def test_a_signed_affinity_the_cut_cannot_take_is_refused_by_name():
    """A cosine affinity with a point whose similarities to the others sum below zero: the count succeeded, then the
    cut raised 'affinity must be non-negative', though signed affinities are accepted."""
    rng = np.random.default_rng(0)
    X = np.r_[np.c_[np.ones(8), rng.normal(0, .01, 8), rng.normal(0, .01, 8)],
              np.c_[rng.normal(0, .01, 8), np.ones(8), rng.normal(0, .01, 8)],
              [[-0.001, -0.001, 1.0]]]
    assert (cosine_similarity(X).sum(axis=1) > 0).all()  # every whole row is fine
    for n_clusters in (None, 3):  # since review 69 the kernel refuses it first, as scikit-learn's degrees read it
        with pytest.raises(ValueError, match=r"'cosine' .* point 16's affinities to the other points sum to -0.108"):
            ABCClustering(affinity="cosine", n_clusters=n_clusters, arbiter=None, random_state=0).fit(X)


def test_sparse_rows_rank_as_their_dense_copies():
    """Ties of the kNN graph were broken in another order for sparse rows (their stored bytes): binary data got
    another graph, and partition, when stored sparse."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        X = rng.choice([-2.0, -1.0, 0.0, 0.0, 0.0, 1.0, 2.5], size=(int(rng.integers(2, 40)), int(rng.integers(1, 8))))
        dense, sparse = _content_rank(X), _content_rank(sp.csr_matrix(X))
        np.testing.assert_array_equal(X[np.argsort(dense, kind="stable")], X[np.argsort(sparse, kind="stable")])
    P = rng.integers(0, 2, (4, 100))
    X = (P[np.repeat(np.arange(4), 75)] ^ (rng.random((300, 100)) < 0.3)).astype(float)
    assert abs(knn_graph(X) - knn_graph(sp.csr_matrix(X))).nnz == 0


def test_a_loose_lobpcg_tolerance_does_not_accept_its_random_start():
    """eigen_tol=0.5 with 'lobpcg' on a sparse affinity accepted residuals up to 50: the count read the random start
    (k = 1 on a set where every other solve says 6). Such a solve goes to ARPACK now, with a warning."""
    from skabc.exceptions import SkabcWarning

    X, _ = make_blobs(300, centers=4, random_state=1, cluster_std=1.5)
    A = rbf_kernel(X, gamma=0.3)
    A[A < 1e-3] = 0
    A = sp.csr_matrix(A)
    expected = ABCClustering(affinity="precomputed", eigen_solver="lobpcg", random_state=0).fit(A).n_clusters_
    with pytest.warns(SkabcWarning, match="did not converge"):
        loose = ABCClustering(affinity="precomputed", eigen_solver="lobpcg", eigen_tol=0.5, random_state=0).fit(A)
    assert loose.n_clusters_ == expected > 1



def test_a_signed_affinity_with_a_point_linked_by_a_zero_sum_follows_scikit_learn_given_k():
    """Review 68e: cosine with one zero vector (its similarities sum to exactly 0) and k given: SpectralClustering
    takes it as an isolated point; the fix above had refused it."""
    from sklearn.cluster import SpectralClustering

    rng = np.random.default_rng(0)
    X = np.r_[rng.normal([5, 0, 0], 0.3, (10, 3)), rng.normal([0, 5, 0], 0.3, (10, 3)), np.zeros((1, 3))]
    params = {"affinity": "cosine", "n_clusters": 2, "random_state": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's 'Graph is not fully connected', both sides
        expected = SpectralClustering(**params).fit_predict(X)
        np.testing.assert_array_equal(ABCClustering(**params).fit_predict(X), expected)


def test_likelihood_counts_points_linked_to_nothing_as_the_eigengap_does():
    """Review 68e: an all-zero affinity (every eigenvalue 1, every gap tied) gave 'likelihood' min(n - 1, 5)."""
    for n in (3, 6):
        counts = {selection: ABCClustering(affinity="precomputed", n_clusters_selection=selection, random_state=0)
                  .fit(np.zeros((n, n))).n_clusters_ for selection in ("eigengap", "likelihood")}
        assert counts["likelihood"] == counts["eigengap"] == 1


def test_likelihood_keeps_its_candidates_on_a_spectrum_flat_near_zero():
    """Review 68f: the all-ones rule above first caught any flat spectrum: 12 tight groups linked at ~1e-7, more than
    max_clusters=10, got k = 1 from 'likelihood' (7 before, from its candidates)."""
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(12), 5)
    A = np.where(groups[:, None] == groups[None, :], 1.0, 1e-7 * rng.random((60, 60)))
    A = (A + A.T) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the count reaches max_clusters
        model = ABCClustering(affinity="precomputed", n_clusters_selection="likelihood", max_clusters=10,
                              random_state=0).fit(A)
    assert model.n_clusters_ > 1
