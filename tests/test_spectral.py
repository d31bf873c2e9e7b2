"""Unit tests of the spectral step (:mod:`skabc.spectral`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

import skabc.spectral as spectral
from skabc.spectral import (
    CONSENSUS_POWERS,
    consensus_n_clusters,
    estimate_n_clusters,
    laplacian_eigenvalues,
    normalized_adjacency,
    spectral_labels,
)


def _block_affinity(sizes, noise=0.01, seed=0):
    """Block-diagonal affinity (1 inside blocks) with small symmetric off-block noise, and its block labels."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    same = labels[:, None] == labels[None, :]
    off = noise * rng.random((len(labels), len(labels)))
    off = 0.5 * (off + off.T)
    affinity = np.where(same, 1.0, off)
    # shuffle the points so blocks are not contiguous
    order = rng.permutation(len(labels))
    return affinity[np.ix_(order, order)], labels[order]


def _random_affinity(n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.random((n, n)) + 0.05
    return 0.5 * (a + a.T)


def _dense_laplacian_eigenvalues(affinity):
    d = affinity.sum(axis=1)
    inv = 1.0 / np.sqrt(d)
    lap = np.eye(len(d)) - inv[:, None] * affinity * inv[None, :]
    return np.linalg.eigvalsh(lap)


# --------------------------------------------------------------------------- estimate_n_clusters


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_estimate_n_clusters_block_diagonal(k):
    """The eigengap of a k-block affinity gives k."""
    affinity, _ = _block_affinity([6] * k, seed=k)
    n_clusters, eigenvalues = estimate_n_clusters(affinity, max_clusters=10)
    assert n_clusters == k
    assert np.all(np.diff(eigenvalues) >= -1e-12)
    assert len(eigenvalues) == min(10, 6 * k - 1) + 1


def test_estimate_n_clusters_unequal_blocks():
    """Blocks of different sizes are counted too."""
    affinity, _ = _block_affinity([3, 9, 5, 12], seed=7)
    assert estimate_n_clusters(affinity, max_clusters=8)[0] == 4


@pytest.mark.parametrize("max_clusters", [1, 2, 3, 4])
def test_estimate_n_clusters_capped(max_clusters):
    """With max_clusters below the true k, the estimate never exceeds max_clusters."""
    affinity, _ = _block_affinity([5] * 5, seed=3)
    n_clusters, eigenvalues = estimate_n_clusters(affinity, max_clusters=max_clusters)
    assert 1 <= n_clusters <= max_clusters
    assert len(eigenvalues) == max_clusters + 1


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("max_clusters", [2, 4, 7])
def test_more_components_than_max_clusters_give_max_clusters(sparse, max_clusters):
    """Eight disconnected blocks: every eigenvalue compared is zero, so k is the cap (equal gaps used to say 1)."""
    affinity, _ = _block_affinity([6] * 8, noise=0.0, seed=5)
    affinity = sp.csr_matrix(affinity) if sparse else affinity
    n_clusters, eigenvalues = estimate_n_clusters(affinity, max_clusters=max_clusters)
    assert np.all(eigenvalues < spectral.select.ZERO_EIGENVALUE)
    assert n_clusters == max_clusters
    assert spectral.eigengap_candidates(eigenvalues, 3) == [max_clusters]
    # With room for all of them the blocks are counted exactly.
    assert estimate_n_clusters(affinity, max_clusters=12)[0] == 8


def test_estimate_n_clusters_cap_by_n():
    """max_clusters larger than n - 1 is capped at n - 1 and still finds the blocks."""
    affinity, _ = _block_affinity([2, 2, 2], seed=4)
    n_clusters, eigenvalues = estimate_n_clusters(affinity, max_clusters=50)
    assert n_clusters == 3
    assert len(eigenvalues) == 6


def test_estimate_n_clusters_single_point():
    """A single point is one cluster."""
    n_clusters, eigenvalues = estimate_n_clusters(np.ones((1, 1)), max_clusters=5)
    assert n_clusters == 1
    assert eigenvalues.shape == (1,)


@pytest.mark.parametrize("n", [2, 3, 10])
def test_estimate_n_clusters_identical_points(n):
    """All-identical points (all-ones affinity) are one cluster."""
    n_clusters, eigenvalues = estimate_n_clusters(np.ones((n, n)), max_clusters=5)
    assert n_clusters == 1
    assert eigenvalues[0] == pytest.approx(0.0, abs=1e-10)


# --------------------------------------------------------------------------- normalized_adjacency


def test_normalized_adjacency_zero_degree_row():
    """A zero-degree row stays zero instead of producing NaN or inf."""
    affinity = _random_affinity(5)
    affinity[2, :] = 0.0
    affinity[:, 2] = 0.0
    adjacency = normalized_adjacency(affinity)
    assert np.all(np.isfinite(adjacency))
    assert np.all(adjacency[2] == 0) and np.all(adjacency[:, 2] == 0)
    eigenvalues = laplacian_eigenvalues(affinity, 5)
    assert np.all(np.isfinite(eigenvalues))


def test_normalized_adjacency_formula():
    """D^-1/2 A D^-1/2 on a positive matrix."""
    affinity = _random_affinity(6, seed=1)
    inv = 1.0 / np.sqrt(affinity.sum(axis=1))
    assert np.allclose(normalized_adjacency(affinity), np.diag(inv) @ affinity @ np.diag(inv))


# --------------------------------------------------------------------------- laplacian_eigenvalues


def test_laplacian_eigenvalues_properties():
    """Eigenvalues are ascending, in [0, 2], and the first is ~0 for a connected graph."""
    affinity = _random_affinity(15, seed=2)
    eigenvalues = laplacian_eigenvalues(affinity, 8)
    assert eigenvalues.shape == (8,)
    assert np.all(np.diff(eigenvalues) >= 0)
    assert np.all(eigenvalues >= -1e-10) and np.all(eigenvalues <= 2 + 1e-10)
    assert eigenvalues[0] == pytest.approx(0.0, abs=1e-10)
    assert eigenvalues[1] > 1e-3


@pytest.mark.parametrize("m", [1, 4, 14, 15, 40])
def test_laplacian_eigenvalues_match_numpy(m):
    """The smallest eigenvalues match numpy.linalg.eigvalsh of I - D^-1/2 A D^-1/2 (m capped at n)."""
    affinity = _random_affinity(15, seed=3)
    expected = _dense_laplacian_eigenvalues(affinity)[: min(m, 15)]
    assert np.allclose(laplacian_eigenvalues(affinity, m), expected, atol=1e-10)


@pytest.mark.parametrize("kind", ["random", "blocks"])
def test_laplacian_eigenvalues_arpack_matches_dense(monkeypatch, kind):
    """Above DENSE_EIGEN_LIMIT the ARPACK path matches the dense path."""
    if kind == "random":
        affinity = _random_affinity(60, seed=4)
    else:
        affinity, _ = _block_affinity([20, 15, 25], seed=5)
    dense = laplacian_eigenvalues(affinity, 6)
    monkeypatch.setattr(spectral.eigen, "DENSE_EIGEN_LIMIT", 20)
    sparse = laplacian_eigenvalues(affinity, 6, random_state=0)
    assert sparse.shape == dense.shape == (6,)
    assert np.all(np.diff(sparse) >= 0)
    assert np.allclose(sparse, dense, atol=1e-6)
    assert np.allclose(laplacian_eigenvalues(affinity, 6, random_state=1), dense, atol=1e-6)
    if kind == "blocks":
        assert estimate_n_clusters(affinity, max_clusters=5, random_state=0)[0] == 3


# --------------------------------------------------------------------------- spectral_labels


@pytest.mark.parametrize("sizes", [[8, 8], [5, 10, 7], [4, 4, 4, 4, 4]])
def test_spectral_labels_recover_blocks(sizes):
    """Spectral clustering of a block-diagonal affinity recovers the blocks."""
    affinity, labels = _block_affinity(sizes, seed=len(sizes))
    predicted = spectral_labels(affinity, len(sizes), random_state=0)
    assert predicted.dtype == np.int64
    assert predicted.shape == labels.shape
    assert adjusted_rand_score(labels, predicted) == 1.0


@pytest.mark.parametrize("sizes", [[20, 30, 25], [4, 6, 5, 7, 3, 5, 6, 4, 5, 5]])
def test_njw_assignment_recovers_blocks(sizes):
    """assign_labels='njw' recovers the blocks too, many small ones included."""
    affinity, labels = _block_affinity(sizes, noise=0.05, seed=len(sizes))
    predicted = spectral_labels(affinity, len(sizes), random_state=0, assign_labels="njw")
    assert predicted.dtype == np.int64
    assert adjusted_rand_score(labels, predicted) == 1.0


def test_njw_is_kmeans_on_unit_rows_of_the_sklearn_embedding():
    """'njw' differs from 'kmeans' only by scaling the embedding rows to unit length."""
    from sklearn.cluster import k_means
    from sklearn.manifold import spectral_embedding
    from sklearn.utils import check_random_state

    affinity = _random_affinity(40, seed=3) ** 4
    rng = check_random_state(5)
    maps = spectral_embedding(affinity, n_components=4, random_state=rng, drop_first=False)
    maps /= np.linalg.norm(maps, axis=1, keepdims=True)
    _, expected, _ = k_means(maps, 4, random_state=rng, n_init=10)
    predicted = spectral_labels(affinity, 4, random_state=5, assign_labels="njw")
    assert np.array_equal(predicted, expected)
    assert not np.array_equal(predicted, spectral_labels(affinity, 4, random_state=5))


def test_unknown_assign_labels_is_refused():
    affinity, _ = _block_affinity([5, 5])
    with pytest.raises(ValueError, match="assign_labels"):
        spectral_labels(affinity, 2, assign_labels="magic")


@pytest.mark.parametrize("n_clusters", [0, 1])
def test_spectral_labels_single_cluster(n_clusters):
    """n_clusters <= 1 gives all zeros without running spectral clustering."""
    affinity, _ = _block_affinity([5, 5])
    predicted = spectral_labels(affinity, n_clusters)
    assert predicted.dtype == np.int64
    assert np.array_equal(predicted, np.zeros(10, dtype=np.int64))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("extra", [0, 3])
def test_spectral_labels_as_many_clusters_as_points_are_singletons_without_a_scipy_warning(sparse, extra):
    """k >= n: the only partition is one point per cluster (scipy's eigensolver used to warn, k >= N)."""
    affinity, _ = _block_affinity([4, 4])
    affinity = sp.csr_matrix(affinity) if sparse else affinity
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        predicted = spectral_labels(affinity, 8 + extra)
    assert predicted.dtype == np.int64 and np.array_equal(np.sort(predicted), np.arange(8))


def test_spectral_labels_single_point():
    """A single point is labelled 0."""
    assert spectral_labels(np.ones((1, 1)), 3).tolist() == [0]


def _broad_and_tight_affinity(between_halves=0.8):
    """Three clusters of 40, 20, 20 points; the first is two halves of 20 with ``between_halves`` across them.

    Within a half or a tight cluster 0.95, across clusters 0.05: a soft affinity whose eigengap
    sees 3 clusters at low powers and, once sharpened, the two halves as 4.
    """
    blocks = np.repeat(np.arange(4), 20)
    clusters = np.maximum(blocks - 1, 0)
    affinity = np.where(clusters[:, None] == clusters[None, :], 0.95, 0.05)
    halves = (blocks[:, None] != blocks[None, :]) & (clusters[:, None] == clusters[None, :])
    return np.where(halves, between_halves, affinity), clusters


def test_consensus_n_clusters_is_the_median_of_the_estimates_over_powers():
    affinity, clusters = _broad_and_tight_affinity()
    sharp = affinity**8
    estimates = [estimate_n_clusters(sharp**r, 10)[0] for r in CONSENSUS_POWERS]
    assert estimates == [3, 3, 4, 4]  # A**2 and A**4 keep the broad cluster whole; A**8 and A**16 split it
    k, eigenvalues = consensus_n_clusters(sharp, 10)
    assert k == 3  # the median 3.5, rounded down; the plain eigengap of the same affinity says 4
    assert estimate_n_clusters(sharp, 10)[0] == 4
    assert adjusted_rand_score(clusters, spectral_labels(sharp, k, random_state=0)) == 1.0
    np.testing.assert_allclose(eigenvalues, estimate_n_clusters(sharp, 10)[1])
    # The estimates all agree on a clean block-diagonal affinity.
    blocks, _ = _block_affinity([15, 25, 10, 30])
    assert consensus_n_clusters(blocks, 10)[0] == 4


def test_consensus_n_clusters_sparse_matches_dense():
    import scipy.sparse as sp

    affinity, _ = _broad_and_tight_affinity()
    sharp = affinity**8
    k, eigenvalues = consensus_n_clusters(sp.csr_matrix(sharp), 10, random_state=0)
    assert k == consensus_n_clusters(sharp, 10)[0] == 3
    np.testing.assert_allclose(eigenvalues, consensus_n_clusters(sharp, 10)[1], atol=1e-8)


@pytest.mark.parametrize("powers", [(), (1.0, 0.0), (1.0, -2.0), (1.0, np.nan)])
def test_consensus_n_clusters_refuses_bad_powers(powers):
    affinity, _ = _broad_and_tight_affinity()
    with pytest.raises(ValueError, match="powers"):
        consensus_n_clusters(affinity, 10, powers=powers)


def test_consensus_n_clusters_refuses_negative_affinities():
    import scipy.sparse as sp

    affinity, _ = _broad_and_tight_affinity()
    affinity[0, 1] = affinity[1, 0] = -0.2
    for given in (affinity, sp.csr_matrix(affinity)):
        with pytest.raises(ValueError, match="non-negative"):
            consensus_n_clusters(given, 10)


def test_eigengap_candidates_order_and_first_is_the_estimate():
    affinity, _ = _block_affinity([6, 7, 5, 8], noise=0.05, seed=2)
    k, eigenvalues = estimate_n_clusters(affinity, 10)
    candidates = spectral.eigengap_candidates(eigenvalues, 3)
    assert candidates[0] == k == 4 and len(candidates) == 3 and len(set(candidates)) == 3
    gaps = np.diff(eigenvalues)
    assert [gaps[c - 1] for c in candidates] == sorted(gaps, reverse=True)[:3]
    assert spectral.eigengap_candidates(np.zeros(1), 5) == [1]


def test_pair_log_likelihood_prefers_the_true_partition_and_counts_stored_pairs_when_sparse():
    import scipy.sparse as sp

    probabilities, labels = _block_affinity([5, 6, 4], noise=0.1, seed=1)
    probabilities = np.clip(probabilities, 0, 0.95)
    truth = spectral.pair_log_likelihood(probabilities, labels)
    merged = spectral.pair_log_likelihood(probabilities, np.minimum(labels, 1))
    split = spectral.pair_log_likelihood(probabilities, np.where(np.arange(15) % 2 == 0, labels, labels + 3))
    assert truth > merged and truth > split
    # Sparse: only the stored pairs (here the upper triangle of the same-cluster blocks) count.
    stored = sp.csr_matrix(np.where(labels[:, None] == labels[None, :], probabilities, 0.0))
    expected = np.log(0.95) * sum(s * (s - 1) / 2 for s in (5, 6, 4))
    assert np.isclose(spectral.pair_log_likelihood(stored, labels), expected)


def test_pair_log_likelihood_row_blocks_match_the_direct_sum():
    """Large dense sets are summed in row blocks (2,100 points: two blocks); the sum is unchanged."""
    rng = np.random.default_rng(0)
    n = 2100
    probabilities = rng.random((n, n))
    probabilities = 0.5 * (probabilities + probabilities.T)
    labels = rng.integers(0, 6, n)
    rows, cols = np.triu_indices(n, 1)
    p = np.clip(probabilities[rows, cols], 1e-6, 1 - 1e-6)
    expected = np.where(labels[rows] == labels[cols], np.log(p), np.log1p(-p)).sum()
    assert np.isclose(spectral.pair_log_likelihood(probabilities, labels), expected, rtol=1e-10)


def test_likelihood_selection_keeps_the_eigengap_estimate_on_a_tie_and_counts_its_own_labels():
    """Probe 59a: neither was pinned. Where every partition is as likely (every pair 0.5), the candidate first in
    eigengap order (k = 1 here) is kept, not the last tied one (k = 5); and the Selection's ``n_clusters`` is the
    number of clusters in its labels (a count of rows passed every other test, ``SpectralStep`` recounting them)."""
    from sklearn.datasets import make_blobs
    from sklearn.metrics.pairwise import rbf_kernel

    from skabc.spectral import N_CLUSTERS_SELECTORS, SpectralStep

    step = SpectralStep(n_clusters=None, max_clusters=10, selection="likelihood")
    flat = np.full((40, 40), 0.5)
    np.fill_diagonal(flat, 1.0)
    assert N_CLUSTERS_SELECTORS["likelihood"](step, flat, flat, 0, 0).n_clusters == 1
    X, _ = make_blobs(60, centers=3, cluster_std=0.4, random_state=0)
    blobs = rbf_kernel(X, gamma=0.5)
    chosen = N_CLUSTERS_SELECTORS["likelihood"](step, blobs, blobs, 0, 0)
    assert chosen.n_clusters == len(np.unique(chosen.labels)) == 3


def test_dense_sets_of_hundreds_of_points_are_solved_in_float32_and_refined(monkeypatch):
    """From DENSE_REFINED_MIN points up to DENSE_EIGEN_LIMIT a dense affinity is solved by float32 LAPACK and one
    float64 Rayleigh-Ritz step, never by ARPACK (which often ran out of its budget on learned affinities and then
    paid for LAPACK too): eigenvalues as float64 LAPACK's to 1e-10, the zero eigenvalues of separate blocks
    included (float32 alone leaves them at ~1e-7), and the same eigenvectors."""
    from scipy.linalg import eigh as lapack_eigh

    from skabc.spectral import eigen

    rng = np.random.default_rng(0)
    n = eigen.DENSE_REFINED_MIN + 50
    labels = rng.integers(0, 4, n)
    affinity = np.where(labels[:, None] == labels[None, :], 0.9, 0.05) * rng.uniform(0.5, 1.0, (n, n))
    affinity = (affinity + affinity.T) / 2
    adjacency = eigen.normalized_adjacency(affinity)
    expected, expected_vectors = lapack_eigh(adjacency, subset_by_index=[n - 6, n - 1])

    def no_arpack(*args, **kwargs):
        raise AssertionError("ARPACK was called")

    monkeypatch.setattr(eigen, "eigsh", no_arpack)
    values, vectors = eigen.top_eigenvectors(affinity, 6, random_state=0)
    np.testing.assert_allclose(values, np.sort(1.0 - expected), atol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(expected_vectors[:, ::-1] * vectors, axis=0)), 1.0, atol=1e-6)
    np.testing.assert_allclose(eigen.laplacian_eigenvalues(affinity, 6, random_state=0), np.sort(1.0 - expected),
                               atol=1e-10)
    blocks = affinity * (labels[:, None] == labels[None, :])  # four components: four zero eigenvalues
    found = eigen.laplacian_eigenvalues(blocks, 6)
    assert np.all(np.abs(found[:4]) < 1e-10) and found[4] > 0.1
    unrefined = eigen.laplacian_eigenvalues(blocks, 6, single_precision=True)
    assert np.max(np.abs(unrefined[:4])) > 1e-9  # what the refinement is for
    assert spectral.estimate_n_clusters(affinity[:300, :300], 10)[0] == 4  # below the band: float64 LAPACK


def test_the_float32_band_hands_sets_it_would_refine_inaccurately_to_float64(monkeypatch):
    """Sixty loosely linked groups of ten points: sixty Laplacian eigenvalues near zero, more than the float32 basis
    (51 + REFINED_EXTRA columns) holds, where float32 vectors mix the groups and the refined near-zero eigenvalues
    came out up to 1e-10 off; such sets, and those whose near-zero eigenvalues' residual bound is too loose, go to
    float64 LAPACK, exact to rounding."""
    from scipy.linalg import eigvalsh

    from skabc.spectral import eigen

    rng = np.random.default_rng(0)
    n = eigen.DENSE_REFINED_MIN
    labels = np.arange(n) % 60
    X = rng.normal(size=(n, 3))
    affinity = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 2)
    affinity = np.where(labels[:, None] == labels[None, :], affinity, 1e-7 * affinity)
    expected = np.sort(1.0 - eigvalsh(eigen.normalized_adjacency(affinity)))[:51]
    np.testing.assert_allclose(eigen.laplacian_eigenvalues(affinity, 51), expected, atol=1e-13)
    # Forty groups fit the basis: the refinement keeps their near-zero eigenvalues at 1e-12 and below.
    labels = np.arange(n) % 40
    affinity = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 2)
    affinity = np.where(labels[:, None] == labels[None, :], affinity, 1e-7 * affinity)
    expected = np.sort(1.0 - eigvalsh(eigen.normalized_adjacency(affinity)))[:51]
    np.testing.assert_allclose(eigen.laplacian_eigenvalues(affinity, 51), expected, atol=1e-11)
    # Fifty dense blocks of 20 linked at 1e-6 (review 50a): the basis holds the fifty smallest eigenvalues, yet the
    # refined zero errs by 7e-13 to 7e-12 (with the BLAS threads; residual ~3e-6; 6e-11 at 2,500 points). Its bound
    # residual^2 / gap stays within REFINED_ZERO_ERROR here; where it does not, float64 LAPACK solves (shown with a
    # limit below that error).
    n = 1000
    labels = rng.permutation(np.arange(n) % 50)
    affinity = np.where(labels[:, None] == labels[None, :], 1.0, 1e-6) * rng.uniform(0.5, 1.0, (n, n))
    affinity = (affinity + affinity.T) / 2
    expected = np.sort(1.0 - eigvalsh(eigen.normalized_adjacency(affinity)))[:51]
    found = eigen.laplacian_eigenvalues(affinity, 51)
    near_zero = expected < 1e-6
    assert near_zero.sum() == 1 and 1e-13 < np.abs(found - expected)[near_zero].max() <= eigen.REFINED_ZERO_ERROR
    monkeypatch.setattr(eigen, "REFINED_ZERO_ERROR", 1e-13)
    np.testing.assert_allclose(eigen.laplacian_eigenvalues(affinity, 51), expected, atol=1e-13)


def test_a_float32_affinity_has_the_spectrum_of_its_float64_copy():
    """Degrees summed in float32 left the trivial eigenvalue at ~1e-8 (either sign: counted as a zero or not) and the
    next ones 8% off where they are ~1e-6 (review 50a)."""
    from skabc.spectral.eigen import laplacian_eigenvalues

    X = np.random.default_rng(0).normal(size=(300, 2))
    for bandwidth in (1.0, 0.1):
        single = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / bandwidth).astype(np.float32)
        np.testing.assert_allclose(laplacian_eigenvalues(single, 3),
                                   laplacian_eigenvalues(single.astype(np.float64), 3), rtol=1e-9, atol=1e-13)


def test_exactly_known_zero_eigenvectors_are_exactly_constant():
    """Where a cut reads no more columns than the graph has components, each column is a component's zero
    eigenvector, known exactly: its embedding ``D^-1/2 x`` is constant on the component to the last bit (division
    left it to rounding, and k-means split on that: ``ABCClustering(n_clusters=2, n_components=1).predict`` of 20
    random rows (scikit-learn's sample-order check) depended on their order, e.g. for permutation seed 20)."""
    from skabc import ABCClustering
    from skabc.spectral import eigen
    from skabc.spectral.knn import knn_graph

    rng = np.random.RandomState(0)
    X = 3 * rng.uniform(size=(20, 3))
    graph = knn_graph(X)
    _, embedding = eigen._smallest_eigenpairs(graph, 1, "arpack", np.random.RandomState(0), "auto", vectors=True)
    assert np.ptp(embedding[:, 0]) == 0.0
    blocks = sp.block_diag([knn_graph(X), knn_graph(X[:15] * 2.0), knn_graph(X[5:] + 1.0)], format="csr")
    _, embedding = eigen._smallest_eigenpairs(blocks, 3, "arpack", np.random.RandomState(0), "auto", vectors=True)
    for rows in (slice(0, 20), slice(20, 35), slice(35, 50)):
        assert np.all(np.ptp(embedding[rows], axis=0) == 0.0)
    model = ABCClustering(n_clusters=2, n_components=1, random_state=1).fit(X)
    order = np.random.RandomState(20).permutation(len(X))
    np.testing.assert_array_equal(model.predict(X)[order], model.predict(X[order]))


@pytest.mark.parametrize("assign_labels", ["discretize", "kmeans", "cluster_qr", "njw"])
def test_more_components_than_clusters_in_a_sparse_affinity(assign_labels):
    """Three disconnected blocks cut into two: the component-wise eigenvectors cover two of them, the third's
    rows stay at the origin (which 'discretize' alone cannot normalise); every block still stays whole."""
    blocks = sp.block_diag([np.ones((8, 8)) - np.eye(8)] * 3, format="csr")
    labels = spectral_labels(blocks, 2, random_state=0, assign_labels=assign_labels)
    assert len(np.unique(labels)) <= 2
    for block in range(3):
        assert len(np.unique(labels[block * 8 : (block + 1) * 8])) == 1


def test_single_precision_eigenvalues_match_double_to_float32_rounding(monkeypatch):
    """``single_precision=True`` solves a dense affinity in float32 (half the time of a float64 solve) and
    returns float64 eigenvalues within float32 rounding of the double-precision ones; sparse input ignores it."""
    affinity, _ = _block_affinity([40, 25, 35], noise=0.2, seed=7)
    double = laplacian_eigenvalues(affinity, 12)
    solved = _record_eigvalsh_dtypes(monkeypatch)
    single = laplacian_eigenvalues(affinity, 12, single_precision=True)
    assert solved == [np.float32]
    assert single.dtype == np.float64 and single.shape == (12,)
    assert np.all(np.diff(single) >= 0)
    np.testing.assert_allclose(single, double, atol=1e-5)
    assert estimate_n_clusters(affinity, 10, single_precision=True)[0] == estimate_n_clusters(affinity, 10)[0] == 3
    solved.clear()
    sparse = laplacian_eigenvalues(sp.csr_matrix(affinity), 12, random_state=0, single_precision=True)
    assert np.float32 not in solved
    np.testing.assert_allclose(sparse, double, atol=1e-8)


def test_consensus_reports_the_double_precision_spectrum_and_solves_the_other_powers_in_float32(monkeypatch):
    """Only the reported power's spectrum is read beyond its largest gap (the arbiter reads eigenvalues down to
    1e-12), so it stays float64; the three other powers only vote on k and are solved in float32."""
    affinity, _ = _broad_and_tight_affinity()
    sharp = affinity**8
    solved = _record_eigvalsh_dtypes(monkeypatch)
    k, eigenvalues = consensus_n_clusters(sharp, 10)
    assert k == 3
    assert sorted(map(str, solved)) == ["float32", "float32", "float32", "float64"]
    np.testing.assert_array_equal(eigenvalues, laplacian_eigenvalues(sharp, 11))


def _record_eigvalsh_dtypes(monkeypatch) -> list:
    """Make the eigen module's LAPACK ``eigvalsh`` record the dtype of every matrix it solves."""
    from skabc.spectral import eigen

    solved, original = [], eigen.eigvalsh
    monkeypatch.setattr(eigen, "eigvalsh", lambda a, **kw: solved.append(a.dtype) or original(a, **kw))
    return solved


# ------------------------------------------------------------- LAPACK's subset driver failing
def test_rows_repeated_many_times_are_clustered_not_a_lapack_error():
    """Every point ten times: the kNN graph holds cliques of identical rows, whose degenerate spectrum made
    LAPACK's subset eigensolver stop with 'Internal Error' (a LinAlgError from fit)."""
    from sklearn.datasets import make_blobs

    from skabc import ABCClustering

    X, y = make_blobs(600, centers=4, n_features=5, random_state=1)
    X, y = np.repeat(X[:60], 10, axis=0), np.repeat(y[:60], 10)
    model = ABCClustering(random_state=0).fit(X)
    assert model.n_clusters_ == len(np.unique(y)) and adjusted_rand_score(y, model.labels_) == 1.0


@pytest.mark.parametrize("vectors", [True, False])
def test_a_failing_subset_eigensolve_falls_back_to_the_full_one(monkeypatch, vectors):
    import scipy.linalg

    from skabc.spectral import eigen

    rng = np.random.default_rng(0)
    M = rng.normal(size=(30, 30))
    M = M + M.T
    expected_values, expected_vectors = scipy.linalg.eigh(M)

    def failing(function):
        def solve(matrix, *args, **kwargs):
            if "subset_by_index" in kwargs:
                raise scipy.linalg.LinAlgError("Internal Error.")
            return function(matrix, *args, **kwargs)
        return solve

    monkeypatch.setattr(eigen, "eigh", failing(scipy.linalg.eigh))
    monkeypatch.setattr(eigen, "eigvalsh", failing(scipy.linalg.eigvalsh))
    values, found = eigen._largest_dense_eigenpairs(M, 4, vectors)
    np.testing.assert_allclose(values, expected_values[-4:], atol=1e-10)
    if vectors:
        np.testing.assert_allclose(np.abs(found.T @ expected_vectors[:, -4:]), np.eye(4), atol=1e-8)
    else:
        assert found is None


def test_knn_graph_keeps_every_tie_so_row_order_does_not_matter():
    from sklearn.neighbors import kneighbors_graph

    from skabc.spectral.knn import knn_graph

    grid = np.stack(np.meshgrid(np.arange(9), np.arange(7)), -1).reshape(-1, 2).astype(float)
    perm = np.random.default_rng(0).permutation(len(grid))
    G = knn_graph(grid).toarray()
    np.testing.assert_array_equal(knn_graph(grid[perm]).toarray(), G[np.ix_(perm, perm)])
    # Ten links of each row (the grid's ties chosen by content), and symmetric.
    assert (np.count_nonzero(G, axis=1) >= 10).all() and np.array_equal(G, G.T)
    assert set(np.unique(G)) <= {0.0, 0.5, 1.0}
    # Without ties, scikit-learn's kNN connectivity, symmetrised.
    X = np.random.default_rng(1).normal(size=(300, 4))
    C = kneighbors_graph(X, 10, include_self=False)
    np.testing.assert_array_equal(knn_graph(X).toarray(), (0.5 * (C + C.T)).toarray())


def test_abc_clustering_of_rounded_data_does_not_depend_on_row_order():
    """A probe: rounded blobs (ties, repeated rows) were partitioned differently after a row permutation."""
    from sklearn.datasets import make_blobs

    from skabc import ABCClustering

    X = np.round(make_blobs(300, centers=4, random_state=0, cluster_std=1.5)[0])
    perm = np.random.default_rng(0).permutation(len(X))
    for params in ({}, {"n_clusters": 4}):
        labels = ABCClustering(random_state=0, **params).fit(X).labels_
        permuted = ABCClustering(random_state=0, **params).fit(X[perm]).labels_
        assert adjusted_rand_score(labels[perm], permuted) == 1.0


def test_njw_reads_the_values_of_a_one_column_embedding():
    """A probe: n_components=1 with 'njw' made every row +1 or -1, so k = 3 gave two clusters."""
    from sklearn.datasets import make_blobs

    from skabc import ABCClustering

    X, _ = make_blobs(60, centers=[[0, 0], [6, 0], [12, 0]], cluster_std=0.5, random_state=0)
    params = dict(n_clusters=3, n_components=1, arbiter=None, random_state=0)
    njw = ABCClustering(assign_labels="njw", **params).fit(X).labels_
    assert len(np.unique(njw)) == 3  # as k-means on the one column
    np.testing.assert_array_equal(njw, ABCClustering(assign_labels="kmeans", **params).fit(X).labels_)


@pytest.mark.parametrize("n_clusters_selection", ["eigengap", "rotation", "consensus"])
def test_a_point_linked_to_itself_alone_is_its_own_cluster_in_a_dense_affinity(n_clusters_selection):
    """A probe: the count saw 3 components (self-loops kept), but scikit-learn's embedding drops the diagonal, put
    the far point at the origin and k-means split a blob for it (sizes 48/101/52); the sparse copy was right."""
    from sklearn.datasets import make_blobs
    from sklearn.metrics.pairwise import rbf_kernel

    from skabc import ABCClustering

    X, _ = make_blobs(200, centers=[[0, 0], [10, 0]], cluster_std=0.5, random_state=0)
    affinity = rbf_kernel(np.vstack([X, [[100, 100]]]), gamma=1.0)
    model = ABCClustering(affinity="precomputed", n_clusters_selection=n_clusters_selection, random_state=0)
    dense = model.fit(affinity).labels_
    assert sorted(np.bincount(dense)) == [1, 100, 100]
    np.testing.assert_array_equal(dense, model.fit(sp.csr_matrix(affinity)).labels_)


@pytest.mark.parametrize("assign_labels", ["cluster_qr", "discretize"])
@pytest.mark.parametrize("sparse", [False, True])
def test_n_components_does_not_override_the_number_of_clusters(assign_labels, sparse):
    """A probe: these assignments make one cluster per embedding column, so n_components=10 gave 10 clusters of
    3 disconnected blocks (SpectralClustering's own path, with k given, keeps its behaviour)."""
    from skabc import ABCClustering

    blocks = sp.block_diag([np.ones((100, 100))] * 3)
    affinity = blocks.tocsr() if sparse else blocks.toarray()
    model = ABCClustering(affinity="precomputed", n_components=10, assign_labels=assign_labels, random_state=0)
    assert model.fit(affinity).n_clusters_ == 3


@pytest.mark.parametrize("scale", [1e-310, 1e307])
@pytest.mark.parametrize("sparse", [False, True])
def test_the_count_does_not_depend_on_the_affinity_s_scale(scale, sparse):
    """A probe: three blocks of 1e-310 gave k = 1 (degrees below float64's smallest normal number read as
    isolated points) and 1e307 overflowed; the normalised Laplacian does not depend on the scale."""
    from skabc import ABCClustering

    blocks = sp.block_diag([np.ones((30, 30))] * 3) * scale
    affinity = blocks.tocsr() if sparse else blocks.toarray()
    model = ABCClustering(affinity="precomputed", random_state=0).fit(affinity)
    assert model.n_clusters_ == 3 and sorted(np.bincount(model.labels_)) == [30, 30, 30]


def test_single_precision_solve_never_sees_subnormal_numbers(monkeypatch):
    """A sharp power of a learned affinity holds entries below float32's smallest normal number; LAPACK slows
    down several times on such subnormals (a 1,000-point solve took 240 ms instead of 35), so the float32
    solve gets them as zeros, with the same eigengap k and eigenvalues to float32 rounding."""
    from skabc.spectral import eigen

    affinity, labels = _block_affinity([40, 25, 35], noise=0.2, seed=7)
    between = labels[:, None] != labels[None, :]
    affinity = np.where(between, affinity * 1e-39, affinity)  # subnormal in float32 once normalised, not in float64
    tiny = np.finfo(np.float32).tiny
    seen, original = [], eigen.eigvalsh
    monkeypatch.setattr(eigen, "eigvalsh", lambda a, **kw: seen.append(a.copy()) or original(a, **kw))
    single = laplacian_eigenvalues(affinity, 12, single_precision=True)
    assert len(seen) == 1 and seen[0].dtype == np.float32
    assert not np.any((seen[0] != 0) & (np.abs(seen[0]) < tiny))
    assert np.count_nonzero(seen[0][between]) == 0
    np.testing.assert_allclose(single, laplacian_eigenvalues(affinity, 12), atol=1e-5)
    assert estimate_n_clusters(affinity, 10, single_precision=True)[0] == estimate_n_clusters(affinity, 10)[0]


def test_consensus_skips_the_last_power_once_the_others_agree(monkeypatch):
    """Where every power solved so far gives the same k, the last vote cannot move the median of four: it is not
    solved (a dense eigensolve less), and k is the median of all four estimates."""
    affinity, _ = _block_affinity([40, 25, 35], noise=1e-4, seed=3)
    every = [estimate_n_clusters(affinity**r, 10)[0] for r in (0.25, 0.5, 1.0, 2.0)]
    assert len(set(every)) == 1
    solved = _record_eigvalsh_dtypes(monkeypatch)
    k, eigenvalues = consensus_n_clusters(affinity, 10)
    assert k == every[0] == 3
    assert sorted(map(str, solved)) == ["float32", "float32", "float64"]
    np.testing.assert_array_equal(eigenvalues, laplacian_eigenvalues(affinity, 11))
    solved.clear()
    assert consensus_n_clusters(affinity, 10, powers=(0.5, 1.0))[0] == 3 and len(solved) == 2  # a median of two


def test_consensus_keeps_drawing_every_solve_from_a_caller_s_random_stream():
    """Review 47c: skipping the last solve drew less from a RandomState the caller passed (sparse input and
    large dense sets draw ARPACK's start from it), so what the caller drew next changed; only int or None
    seeds skip."""
    labels = np.repeat([0, 1, 2], 300)  # large enough for ARPACK, which draws its start from the stream
    affinity = np.where(labels[:, None] == labels[None, :], 1.0, 0.0)
    affinity[0, 300] = affinity[300, 0] = affinity[300, 600] = affinity[600, 300] = 1e-3
    graph = sp.csr_matrix(affinity)
    ours = np.random.RandomState(0)
    consensus_n_clusters(graph, 8, random_state=ours)
    every = np.random.RandomState(0)
    assert len({estimate_n_clusters(graph.power(r), 8, random_state=every)[0] for r in (0.25, 0.5, 1.0, 2.0)}) == 1
    assert ours.randint(1 << 30) == every.randint(1 << 30)


# ---------------------------------------------------------------------------------- public helpers misused (probe 55e)
def _three_blob_affinity(n_per=10):
    from sklearn.metrics.pairwise import rbf_kernel

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 0.3, (n_per, 2)) for c in ((0, 0), (3, 0), (0, 3))])
    return X, rbf_kernel(X, gamma=1.0)


def test_a_dense_affinity_whose_rows_sum_below_zero_is_refused_as_a_sparse_negative_one_is():
    _, A = _three_blob_affinity()
    for solve in (lambda M: spectral.laplacian_eigenvalues(M, 4), lambda M: spectral.estimate_n_clusters(M, 10),
                  lambda M: spectral.top_eigenvectors(M, 3)):
        with pytest.raises(ValueError, match="rows summing below zero"):  # A - 0.5 was read as k = 1, silently
            solve(A - 0.5)
        with pytest.raises(ValueError, match="non-negative"):
            solve(sp.csr_matrix(A - 0.5))
    # A signed kernel whose rows sum to at least zero is taken, as scikit-learn takes it.
    assert len(spectral.laplacian_eigenvalues(A - 0.001, 4)) == 4
    # The bound itself (probe 59a: a check of "below -1" passed the case above): one row sum at -0.5.
    shifted = A - (A.sum(axis=1).min() + 0.5) / len(A)
    assert np.isclose(shifted.sum(axis=1).min(), -0.5)
    with pytest.raises(ValueError, match="rows summing below zero"):
        spectral.laplacian_eigenvalues(shifted, 4)


def test_dense_affinities_of_zero_eigenvalues_bool_entries_or_no_square_shape():
    _, A = _three_blob_affinity()
    assert spectral.laplacian_eigenvalues(A, 0).shape == (0,)  # scipy's "eigenvalue indices are not valid"
    values, vectors = spectral.top_eigenvectors(A, 0)
    assert values.shape == (0,) and vectors.shape == (30, 0)
    with pytest.raises(ValueError, match=r"affinity must be square, got shape \(30, 20\)"):  # a broadcast error
        spectral.laplacian_eigenvalues(A[:, :20], 3)
    for count in (0, 3):  # at every count: zero eigenvalues of a non-square matrix were [] (sparse too)
        for wrong in (A[:, :20], sp.csr_matrix(A[:, :20]), A[0]):
            for solve in (spectral.laplacian_eigenvalues, spectral.top_eigenvectors):
                with pytest.raises(ValueError, match="affinity must be square"):
                    solve(wrong, count)
    assert np.allclose(spectral.laplacian_eigenvalues(A.tolist(), 3), spectral.laplacian_eigenvalues(A, 3))  # lists
    linked = A > 0.5  # numpy's "boolean negative is not supported"
    assert spectral.estimate_n_clusters(linked, 10)[0] == spectral.estimate_n_clusters(sp.csr_matrix(linked), 10)[0]


def test_mixture_partition_refuses_non_finite_rows():
    from skabc.spectral.mixture import bic_mixture_partition

    X, _ = _three_blob_affinity()
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):  # the column was dropped: one cluster
        bic_mixture_partition(X, 10, 0)


def test_candidates_refuse_rows_and_an_affinity_of_two_sets():
    from skabc.spectral.candidates import candidate_partitions

    X, A = _three_blob_affinity()
    with pytest.raises(ValueError, match="X holds 15 rows and probabilities 30"):  # candidates of 30 and 15 labels
        candidate_partitions(spectral.SpectralStep(None, 10), A, X[:15], 0, 0)


def test_rotation_count_below_two_clusters_is_one_and_nan_is_refused():
    from skabc.spectral.rotation import rotation_n_clusters

    vectors = np.linalg.qr(np.random.default_rng(0).normal(size=(30, 4)))[0]
    assert rotation_n_clusters(vectors, 1) == 1 and rotation_n_clusters(vectors, 0) == 1  # a numpy reduction error
    vectors[0, 0] = np.nan
    with pytest.raises(ValueError, match="vectors must be a finite 2-D array"):
        rotation_n_clusters(vectors, 3)


@pytest.mark.parametrize("labels", [[[0, 1], [1, 0]], [0.5, 1.5, 0.5]], ids=["2-d", "float"])
def test_compact_refuses_what_is_not_one_integer_label_per_sample(labels):
    with pytest.raises(ValueError, match="one integer label per sample"):  # flattened, or floats ranked (review 55f)
        spectral.compact(np.asarray(labels))


def test_a_complex_dense_affinity_is_refused():
    _, A = _three_blob_affinity()
    with pytest.raises(ValueError, match="affinity must hold real numbers"):  # the imaginary part was dropped
        spectral.laplacian_eigenvalues(A + 0j, 3)


@pytest.mark.parametrize(("labels", "expected"), [([-1, 0, -1, 3], [0, 1, 0, 2]), ([0, 10**12, 0], [0, 1, 0]),
                                                  ([], []), ([5, 5, 2, 7, 2], [0, 0, 1, 2, 1])])
def test_compact_keeps_every_partition(labels, expected):
    # Negative ids wrapped round onto others (-1 and 3 merged); 10**12 asked for a table of terabytes.
    out = spectral.compact(np.asarray(labels, dtype=np.int64))
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.int64


def test_evidence_features_have_one_width_for_every_spectrum_size():
    from skabc.spectral.evidence import evidence_features, n_feature_columns

    evidence = {"n": 30, "n_features_in": 2, "names": ["kernel-consensus", "knn-rotation"], "k": [3, 2],
                "sizes": [[10, 10, 10], [20, 10]], "spectra": [[0.0, 0.0, 0.0, 0.4, 0.5], [0.0, 0.0, 0.3]],
                "agreement": [[1.0, 0.6], [0.6, 1.0]]}
    for size in (2, 4, 8, 21):
        assert evidence_features(evidence, size).shape == (2, n_feature_columns(2))  # 4 gave 28 of 36 columns
        one_source = {**evidence, "names": ["kernel-consensus", "kernel-eigengap"]}  # review 55f: the other's ones
        assert evidence_features(one_source, size).shape == (2, n_feature_columns(2))
    with pytest.raises(ValueError, match="spectrum_size must be at least 2"):
        evidence_features(evidence, 1)


def test_small_misuses_of_helpers_name_the_problem():
    from skabc.spectral.knn import knn_graph
    from skabc.spectral.select import pair_log_likelihood
    from skabc.training.validation import validation_split

    X, A = _three_blob_affinity()
    with pytest.raises(ValueError, match="at least 2 rows, got 1"):
        knn_graph(X[:1])
    with pytest.raises(ValueError, match=r"one label per row of probabilities \(30\)"):  # sparse summed it anyway
        pair_log_likelihood(sp.csr_matrix(A), np.zeros(25, dtype=int))
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\)"):
        validation_split(np.repeat(np.arange(3), 10), None, 1.5, np.random.default_rng(0))


def test_row_keys_of_equal_rows_are_equal_with_signed_zeros():
    from skabc.sparse_affinity import row_keys

    keys = row_keys(np.array([[0.0, 1.0], [-0.0, 1.0]]))
    assert keys[0] == keys[1]


def test_dense_to_topk_refuses_non_finite_affinities():
    from skabc.sparse_affinity import dense_to_topk

    with pytest.raises(ValueError, match="NaN or infinite"):  # NaN ranked first: the diagonal was stored (probe 55e)
        dense_to_topk(np.full((4, 4), np.nan), 2)


# ------------------------------------------------------------ probe 59c: behaviour its surviving mutants changed unseen
def test_knn_graph_does_not_depend_on_the_global_scale_even_near_underflow():
    from skabc.spectral.knn import knn_graph

    X = np.random.default_rng(0).normal(size=(40, 3))
    for scale in (1e-200, 1e-170):  # squared distances of such values underflow without the global rescaling
        assert (knn_graph(X) != knn_graph(X * scale)).nnz == 0


def test_links_every_row_is_true_up_to_eleven_distinct_rows():
    from skabc.spectral.knn import knn_graph, links_every_row

    X = np.random.default_rng(0).normal(size=(11, 2))
    assert np.all(knn_graph(X).toarray() + np.eye(11) > 0)  # 10 neighbours each: every pair linked
    assert links_every_row(X) and links_every_row(np.repeat(X, 3, axis=0))
    assert not links_every_row(np.random.default_rng(1).normal(size=(12, 2)))


def test_knn_graph_of_sparse_rows_ignores_explicitly_stored_zeros():
    from skabc.spectral.knn import knn_graph

    base = np.random.default_rng(0).integers(0, 3, size=(6, 4)).astype(float)
    base[:, 0] = 0.0
    X = np.repeat(base, 15, axis=0)  # each distinct row 15 times: copies must be grouped however they are stored
    coo = sp.csr_matrix(X).tocoo()
    extra = np.arange(0, len(X), 2)
    stored = sp.csr_matrix((np.concatenate([coo.data, np.zeros(len(extra))]),
                            (np.concatenate([coo.row, extra]), np.concatenate([coo.col, np.zeros(len(extra), int)]))),
                           shape=X.shape)
    assert stored.nnz > coo.nnz and np.array_equal(stored.toarray(), X)
    assert (knn_graph(stored) != knn_graph(X)).nnz == 0


def test_knn_graph_keeps_ties_beyond_twice_the_neighbours_whatever_the_row_order():
    from skabc.spectral.knn import knn_graph

    E = np.eye(15)
    X = np.vstack([np.zeros(15), E, -E, 3 * E, -3 * E])  # the origin has 30 rows tied at distance 1 (> 2 x 10)
    graph = knn_graph(X).toarray()
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(len(X))
        back = np.argsort(order)
        np.testing.assert_array_equal(knn_graph(X[order]).toarray()[np.ix_(back, back)], graph)


def test_a_sparse_row_of_stored_zeros_is_named_as_linked_to_nothing():
    from skabc.spectral import SpectralStep

    A = np.kron(np.eye(2), np.ones((10, 10))) * 0.9 + 0.01
    A[3, :] = A[:, 3] = 0.0
    coo = sp.csr_matrix(A).tocoo()
    stored = sp.csr_matrix((np.concatenate([coo.data, np.zeros(4)]),
                            (np.concatenate([coo.row, [3, 3, 0, 5]]), np.concatenate([coo.col, [0, 5, 3, 3]]))),
                           shape=A.shape)
    assert np.array_equal(stored.toarray(), A)
    with pytest.warns(UserWarning, match="1 of the 20 points have zero affinity to every point"):
        SpectralStep(n_clusters=None, max_clusters=5).cluster(stored, 0, 0)
    # Probe 63c: a set of one point (predict of one row, a one-row group) is one cluster, linked or not; the sparse
    # affinity, which stores no self-link, warned that it 'joins one arbitrarily'.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(SpectralStep(n_clusters=None, max_clusters=5).cluster(sp.csr_matrix((1, 1)), 0, 0)[0]) == [0]


def test_embedding_labels_refuse_an_embedding_of_too_few_columns():
    from skabc.spectral.assign import embedding_labels

    V = np.random.default_rng(0).normal(size=(50, 2))
    for options in ({}, {"assign_labels": "discretize"}, {"n_components": 3}):
        with pytest.raises(ValueError, match="columns"):
            embedding_labels(V, 4, random_state=0, **options)


# ------------------------------------------------------------------ public functions called directly (probe 62c)
@pytest.mark.parametrize("convert", [lambda A: A > 0.5, lambda A: sp.csr_matrix(A > 0.5), sp.lil_matrix,
                                     sp.dok_matrix], ids=["bool", "csr-bool", "lil", "dok"])
def test_label_functions_take_every_affinity_the_count_takes(convert):
    """spectral_labels raised numpy's 'boolean negative is not supported', 'bad operand type for unary -: list'
    (LIL) or "'dok_matrix' object has no attribute 'data'" where estimate_n_clusters found k."""
    A, labels = _block_affinity([5, 5])
    affinity = convert(A)
    assert estimate_n_clusters(affinity, 5, random_state=0)[0] == 2
    assert adjusted_rand_score(labels, spectral_labels(affinity, 2, random_state=0)) == 1.0
    found, k, _ = spectral.eigengap_spectral_labels(affinity, 5, 0, random_state=0)
    assert k == 2 and adjusted_rand_score(labels, found) == 1.0


def test_an_asymmetric_dense_affinity_is_averaged_with_its_transpose_as_a_sparse_one():
    """LAPACK read one triangle: triu(ones) gave the Laplacian eigenvalue -1.45 (a normalised Laplacian's lie in
    [0, 2]) and its transpose other eigenvalues than itself; the sparse path averaged it, with scikit-learn's
    warning."""
    U = np.triu(np.ones((6, 6)))
    expected = laplacian_eigenvalues((U + U.T) / 2, 6)
    from skabc.exceptions import SkabcWarning

    for matrix in (U, U.T.copy(), sp.csr_matrix(U)):
        with pytest.warns(UserWarning, match="Array is not symmetric, and will be converted to symmetric by average"
                          ) as said:
            values = laplacian_eigenvalues(matrix, 6)
        np.testing.assert_allclose(values, expected, atol=1e-10)
        # One warning, a SkabcWarning at the caller's line, dense or sparse (sparse: scikit-learn's, at eigen.py).
        assert len(said) == 1 and said[0].category is SkabcWarning and said[0].filename == __file__
    with pytest.warns(UserWarning, match="Array is not symmetric"):
        np.testing.assert_allclose(normalized_adjacency(U), normalized_adjacency((U + U.T) / 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        laplacian_eigenvalues(U + U.T + 1e-13 * np.eye(6)[::-1] * np.arange(6), 6)  # rounding-level: said nothing
        # Review 62: float32 rounding (~1e-5 relative) is no asymmetry here either, as for a kernel's output.
        laplacian_eigenvalues((U + U.T + 2e-5 * np.eye(6)[::-1] * np.arange(6)).astype(np.float32), 6)
    with pytest.warns(UserWarning, match="Array is not symmetric"):
        laplacian_eigenvalues(U + U.T + 2e-5 * np.eye(6)[::-1] * np.arange(6), 6)  # in float64 it is


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_a_dense_affinity_that_is_not_finite_is_refused_as_a_sparse_one(value):
    """estimate_n_clusters raised scipy's 'array must not contain infs or NaNs' after a divide warning, and
    normalized_adjacency returned NaN without a word."""
    A, _ = _block_affinity([4, 4])
    A[0, 1] = A[1, 0] = value
    for function in (lambda M: laplacian_eigenvalues(M, 3), lambda M: estimate_n_clusters(M, 3),
                     normalized_adjacency, lambda M: spectral_labels(M, 2, random_state=0)):
        for matrix in (A, sp.csr_matrix(A)):
            with pytest.raises(ValueError, match=r"^affinity contains NaN or infinite values$"):
                function(matrix)


def test_a_complex_sparse_affinity_is_refused_as_a_dense_one():
    """Probe 62c: a complex sparse affinity was cast to real with only scipy's warning; a dense one was refused."""
    A, _ = _block_affinity([4, 4])
    for matrix in (A + 0j, sp.csr_matrix(A + 1j * A)):
        with pytest.raises(ValueError, match="affinity must hold real numbers, got dtype complex128"):
            laplacian_eigenvalues(matrix, 3)


def test_pair_log_likelihood_refuses_what_is_no_probability():
    """Entries of 5 and -3 were clipped and scored better than any valid matrix; eps=0.7 crossed the clip bounds."""
    P, labels = _block_affinity([3, 3])
    for bad in (P * 5, P - 3, np.where(np.eye(6, dtype=bool)[::-1], np.nan, P)):  # NaN off the diagonal: scored
        for matrix in (bad, sp.csr_matrix(bad)):
            with pytest.raises(ValueError, match=r"probabilities must lie in \[0, 1\], got values from"):
                spectral.pair_log_likelihood(matrix, labels)
    for eps in (0.7, 0.0, 0.5, True):
        with pytest.raises(ValueError, match=r"eps must be a number in \(0, 0\.5\)"):
            spectral.pair_log_likelihood(P, labels, eps=eps)
    with pytest.raises(ValueError, match=r"affinity must be square, got shape \(6, 5\)"):
        spectral.pair_log_likelihood(P[:, :5], labels)
    assert spectral.pair_log_likelihood(P.tolist(), labels) == spectral.pair_log_likelihood(P, labels)  # review 62
    assert spectral.pair_log_likelihood(P, labels) > spectral.pair_log_likelihood(P, np.zeros(6, dtype=int))


def test_rotation_functions_refuse_what_no_eigenvector_is_and_a_negative_tolerance():
    """Probe 62c: NaN vectors gave qualities NaN (documented in [0, 1]) and tolerance=-1 numpy's 'index -1 is out of
    bounds'."""
    V = np.linalg.qr(np.random.default_rng(0).normal(size=(20, 3)))[0]
    assert np.all((0 <= spectral.alignment_qualities(V)) & (spectral.alignment_qualities(V) <= 1))
    with pytest.raises(ValueError, match=r"vectors must be a finite 2-D array \(eigenvectors\), got shape \(20, 3\) "
                                         r"with NaN or infinite entries"):
        spectral.alignment_qualities(np.where(V > 0.3, np.nan, V))
    with pytest.raises(ValueError, match=r"vectors must be a finite 2-D array \(eigenvectors\), got shape \(20,\)$"):
        spectral.alignment_qualities(V[:, 0])
    for tolerance in (-1, np.nan, True):
        with pytest.raises(ValueError, match="tolerance must be a non-negative number"):
            spectral.rotation_n_clusters(V, tolerance=tolerance)
    assert spectral.rotation_n_clusters(V, tolerance=0) in (2, 3)


def test_unlinked_points_are_as_many_clusters_as_the_documentation_says():
    """estimate_n_clusters(np.eye(5), 10) is 5, one more than the n - 1 its docstring promised: now documented."""
    assert estimate_n_clusters(np.eye(5), 10)[0] == 5
    assert estimate_n_clusters(np.eye(5), 4)[0] <= 4


def test_mixture_features_of_sparse_rows_ignore_empty_columns():
    """Probe 65a: the Gaussian split projected every column of hashed text (2**20, almost all empty), 1.8 s a set;
    empty columns add nothing, so the features are those of the stored columns alone."""
    import scipy.sparse as sp

    from skabc.spectral.mixture import mixture_features

    narrow = sp.random(120, 300, density=0.05, random_state=0, format="csr")
    narrow = narrow[:, np.flatnonzero(narrow.getnnz(axis=0))]
    wide = sp.hstack([narrow, sp.csr_matrix((120, 5000))]).tocsr()[:, np.random.default_rng(0).permutation(
        narrow.shape[1] + 5000)]
    stored = np.flatnonzero(wide.getnnz(axis=0))
    np.testing.assert_array_equal(mixture_features(wide, 0), mixture_features(wide[:, stored], 0))
