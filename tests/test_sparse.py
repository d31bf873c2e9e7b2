"""Tests of the large-n path: sparse kNN affinities (:mod:`skabc.sparse_affinity`) and sparse spectral step."""

from __future__ import annotations

import sys
import time
from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import same_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.cluster import SpectralClustering
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import NearestNeighbors

import skabc.spectral.eigen as spectral
from skabc.nn.heads import SimilarityHead
from skabc.sparse_affinity import dense_to_topk, random_partners, row_keys, topk_affinity
from skabc.spectral import estimate_n_clusters, laplacian_eigenvalues, normalized_adjacency, spectral_labels

# --------------------------------------------------------------------------- helpers


def _head_and_embeddings(n=40, d=8, compat="multiplicative", seed=0):
    """A randomly initialised head and random embeddings of shape (1, n, d)."""
    torch.manual_seed(seed)
    return SimilarityHead(d, compat=compat).eval(), torch.randn(1, n, d)


def _dense_affinity(head, z):
    """The dense learned affinity, built as ContextualKernel.transform does."""
    with torch.inference_mode():
        affinity = torch.sigmoid(head(z)[0]).double().numpy()
    return 0.5 * (affinity + affinity.T)


def _blobs(sizes, dim=2, separation=20.0, seed=0):
    """Unit Gaussian blobs of the given sizes, centres ``separation`` apart on a line; returns X, y."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(len(sizes)), sizes)
    centers = np.zeros((len(sizes), dim))
    centers[:, 0] = separation * np.arange(len(sizes))
    return centers[y] + rng.standard_normal((len(y), dim)), y


def _knn_affinity(X, n_neighbors, sigma=3.0):
    """Symmetric Gaussian-kernel kNN affinity (a stand-in for the learned one)."""
    n = len(X)
    distances, indices = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(X).kneighbors(X)
    weights = np.exp(-0.5 * (distances[:, 1:] / sigma) ** 2)
    indptr = np.arange(0, n * n_neighbors + 1, n_neighbors)
    affinity = sp.csr_matrix((weights.ravel(), indices[:, 1:].ravel(), indptr), shape=(n, n))
    return affinity.maximum(affinity.T).tocsr()


def _bridged(affinity, y, weight=1e-3):
    """Connect consecutive clusters by one weak edge each, so the graph is connected."""
    affinity = affinity.tolil()
    firsts = [np.flatnonzero(y == c)[0] for c in np.unique(y)]
    for a, b in pairwise(firsts):
        affinity[a, b] = affinity[b, a] = weight
    return affinity.tocsr()


@pytest.fixture
def no_densify(monkeypatch):
    """Make any sparse toarray/todense raise."""

    def refuse(*args, **kwargs):
        raise AssertionError("a sparse matrix was densified")

    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.lil_matrix, sp.dok_matrix, sp.dia_matrix,
                sp.bsr_matrix, sp.csr_array, sp.csc_array, sp.coo_array):
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)


# --------------------------------------------------------------------------- topk_affinity


@pytest.mark.parametrize("compat", ["multiplicative", "additive"])
@pytest.mark.parametrize("k", [1, 3, 7])
def test_topk_matches_dense_reference(compat, k):
    """Blockwise top-k of the head equals dense_to_topk of the dense affinity: same pattern, same values."""
    head, z = _head_and_embeddings(compat=compat)
    sparse = topk_affinity(head, z, k)
    assert sp.isspmatrix_csr(sparse) and sparse.dtype == np.float64
    same_matrix(sparse, dense_to_topk(_dense_affinity(head, z), k))
    # Random partners carry their exact learned affinity, for every head and search.
    keys = row_keys(np.random.default_rng(k).normal(size=(z.shape[1], 2)))
    for search in ["exact", "ivf"] if compat == "multiplicative" else ["exact"]:
        with_random = topk_affinity(head, z, k, search=search, n_random=4, point_keys=keys, random_state=5)
        reference = dense_to_topk(_dense_affinity(head, z), k, n_random=4, point_keys=keys, random_state=5)
        if search == "exact":
            same_matrix(with_random, reference)
        else:  # approximate neighbours, but every random pair is there with its exact value
            partners = random_partners(z.shape[1], 4, keys, random_state=5)
            rows = np.repeat(np.arange(z.shape[1]), 4)
            np.testing.assert_allclose(np.asarray(with_random[rows, partners.ravel()]).ravel(),
                                       _dense_affinity(head, z)[rows, partners.ravel()], rtol=1e-6)


@pytest.mark.parametrize("k", [1, 4, 10])
def test_topk_structure(k):
    """Exactly symmetric, no diagonal, each row's k best kept: >= k entries per row, <= 2k on average.

    A single row can hold more than 2k entries (a point chosen by many others), so the bound is on the total.
    """
    head, z = _head_and_embeddings(n=50, seed=1)
    sparse = topk_affinity(head, z, k)
    assert (sparse != sparse.T).nnz == 0
    assert np.all(sparse.diagonal() == 0)
    assert not np.any(sparse.tocoo().row == sparse.tocoo().col)
    counts = np.diff(sparse.indptr)
    assert counts.min() >= k
    assert sparse.nnz <= 2 * k * 50
    dense = _dense_affinity(head, z)
    np.fill_diagonal(dense, -np.inf)
    for i in range(0, 50, 7):
        best = np.argsort(-dense[i])[:k]
        assert set(best) <= set(sparse.indices[sparse.indptr[i] : sparse.indptr[i + 1]])


def test_topk_block_rows_do_not_matter():
    """Tiny, odd and large row blocks give the same matrix."""
    head, z = _head_and_embeddings(n=37, seed=2)
    reference = topk_affinity(head, z, 5, block_rows=1000)
    for block_rows in (1, 3, 36, None):
        same_matrix(topk_affinity(head, z, 5, block_rows=block_rows), reference, atol=1e-7)


def test_topk_all_neighbours_is_dense_affinity():
    """n_neighbors >= n - 1 keeps every pair: the dense affinity without its diagonal."""
    head, z = _head_and_embeddings(n=12, seed=3)
    dense = _dense_affinity(head, z)
    np.fill_diagonal(dense, 0.0)
    for k in (11, 50):
        assert np.allclose(topk_affinity(head, z, k).toarray(), dense, atol=1e-6)
        assert np.allclose(dense_to_topk(dense, k).toarray(), dense)


def test_topk_bad_input():
    head, z = _head_and_embeddings(n=5)
    with pytest.raises(ValueError, match="shape"):
        topk_affinity(head, z[0], 2)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n_neighbors"):
            topk_affinity(head, z, bad)
    with pytest.raises(ValueError, match="block_rows"):
        topk_affinity(head, z, 2, block_rows=0)
    single = topk_affinity(head, z[:, :1], 3)
    assert single.shape == (1, 1) and single.nnz == 0


def test_sparse_mode_transform_matches_dense_on_the_knn_pattern(tiny_kernel, blob_data):
    """affinity_mode='sparse' gives transform(X) (dense mode) restricted to the kNN pattern."""
    import pickle

    X = blob_data[0][:60]
    sparse_kernel = pickle.loads(pickle.dumps(tiny_kernel)).set_params(affinity_mode="sparse", n_neighbors=6)
    sparse = sparse_kernel.transform(X)
    assert sp.issparse(sparse)
    # The kNN pattern plus the estimator's random partners (drawn from the rows' values).
    dense = tiny_kernel.transform(X)
    random = sparse_kernel.n_random_neighbors
    same_matrix(sparse, dense_to_topk(dense, 6, n_random=random, point_keys=row_keys(X)))
    same_matrix(sparse_kernel.set_params(n_random_neighbors=0).transform(X), dense_to_topk(dense, 6))


def test_sparse_mode_keeps_to_memory_limit(tiny_kernel, blob_data, monkeypatch):
    """Probe 46a: memory_limit refused a dense affinity but let the sparse mode build every pair in sparse form (3 GB
    for 5,000 points with n_neighbors=10**6 and memory_limit=1e8): it is refused before anything is built."""
    import pickle

    import skabc.inference
    from skabc import ABCClustering
    from skabc.exceptions import AffinityTooLargeError

    X = blob_data[0][:60]
    kernel = pickle.loads(pickle.dumps(tiny_kernel)).set_params(affinity_mode="sparse", memory_limit=6e5)
    assert sp.issparse(kernel.set_params(n_neighbors=6).transform(X))  # 60 points x 26 pairs: about 445 KB, within
    kernel.set_params(n_neighbors=10**6)  # every other point (59) and 20 random partners: about 850 KB
    monkeypatch.setattr(skabc.inference, "topk_affinity", lambda *args, **kwargs: pytest.fail("built"))
    said = r"sparse affinity of 79 pairs per point \(n_neighbors=1000000, n_random_neighbors=20\), over memory_limit"
    with pytest.raises(AffinityTooLargeError, match=said):
        kernel.transform(X)
    with pytest.raises(AffinityTooLargeError, match=said):
        ABCClustering(kernel=kernel, n_clusters=2, max_samples=None).fit(X)


# --------------------------------------------------------------------------- random partners


def test_random_partners_form_a_regular_graph_without_self_pairs():
    n, m = 50, 7
    partners = random_partners(n, m, row_keys(np.random.default_rng(0).normal(size=(n, 3))), random_state=3)
    assert partners.shape == (n, m) and partners.dtype == np.int64
    assert not (partners == np.arange(n)[:, None]).any()
    assert all(len(set(row)) == m for row in partners)  # distinct partners per point
    np.testing.assert_array_equal(np.bincount(partners.ravel(), minlength=n), np.full(n, m))  # no hubs
    assert random_partners(4, 10).shape == (4, 3)  # capped at n - 1
    assert not np.array_equal(random_partners(n, m, random_state=0), random_partners(n, m, random_state=1))
    with pytest.raises(ValueError, match="n_random"):
        random_partners(n, -1)
    with pytest.raises(ValueError, match="keys"):
        random_partners(n, 2, np.zeros(n - 1))


def test_random_partners_follow_the_points_when_rows_are_permuted():
    X = np.random.default_rng(1).normal(size=(40, 5)).astype(np.float32)
    keys = row_keys(X)
    assert keys.dtype == np.uint64 and len(np.unique(keys)) == len(X)
    perm = np.random.default_rng(2).permutation(len(X))
    np.testing.assert_array_equal(row_keys(X[perm]), keys[perm])
    np.testing.assert_array_equal(row_keys(np.vstack([X[:1], X[:1]])), keys[[0, 0]])  # equal rows, equal keys
    A = np.random.default_rng(3).uniform(size=(40, 40))
    A = 0.5 * (A + A.T)
    sparse = dense_to_topk(A, 2, n_random=5, point_keys=keys).toarray()
    permuted = dense_to_topk(A[np.ix_(perm, perm)], 2, n_random=5, point_keys=row_keys(X[perm])).toarray()
    np.testing.assert_array_equal(permuted, sparse[np.ix_(perm, perm)])


def test_random_partners_keep_the_eigengap_of_large_clusters_whose_knn_graph_is_a_chain():
    """Two rings whose affinity is high everywhere within a ring and slightly higher nearby.

    The top-k of every point are its ring neighbours, so the kNN graph is two long chains whose
    Laplacian has many small eigenvalues; random partners (with their true, high affinity) tie
    each ring together and the eigengap finds the two clusters.
    """
    n = 300
    angle = np.linspace(0, 2 * np.pi, n, endpoint=False)
    within = 0.9 + 0.09 * np.cos(angle[:, None] - angle[None, :])
    A = np.block([[within, np.full((n, n), 0.01)], [np.full((n, n), 0.01), within]])
    plain = estimate_n_clusters(dense_to_topk(A, 6), 20, random_state=0)[0]
    with_random = estimate_n_clusters(dense_to_topk(A, 6, n_random=5), 20, random_state=0)[0]
    assert plain > 2
    assert with_random == 2


def test_auto_mode_switches_to_sparse_above_the_threshold(tiny_kernel, monkeypatch):
    import pickle

    from skabc.kernels import contextual as kernel_module

    kernel = pickle.loads(pickle.dumps(tiny_kernel)).set_params(n_neighbors=5)
    X = np.random.default_rng(0).normal(size=(40, 2))
    assert not sp.issparse(kernel.transform(X))
    monkeypatch.setattr(kernel_module, "SPARSE_AUTO_MIN_SAMPLES", 30)
    assert sp.issparse(kernel.transform(X))
    assert not sp.issparse(kernel.set_params(affinity_mode="dense").transform(X))


def test_abc_clustering_on_sparse_affinity():
    """The eigengap and spectral step run on the sparse kNN affinity end to end and find the three blobs."""
    from skabc import ABCClustering
    from skabc.pretrained import load

    kernel = load("generic", device="cpu").set_params(affinity_mode="sparse", n_neighbors=8)
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.05, size=(40, 2)) for c in ((-2, -2), (2, 2), (2, -2))])
    truth = np.repeat([0, 1, 2], 40)
    model = ABCClustering(kernel=kernel, random_state=0).fit(X)
    assert sp.issparse(model.affinity_matrix_)
    assert model.affinity_matrix_.nnz <= 2 * 120 * (8 + 20)  # 8 neighbours and 20 random partners a row, symmetrised
    assert model.n_clusters_ == 3
    assert adjusted_rand_score(truth, model.labels_) == 1.0
    dense = ABCClustering(kernel=kernel.set_params(affinity_mode="dense"), random_state=0).fit(X)
    assert not sp.issparse(dense.affinity_matrix_)
    assert adjusted_rand_score(dense.labels_, model.labels_) == 1.0


# --------------------------------------------------------------------------- sparse eigenvalues


def test_sparse_normalized_adjacency_matches_dense():
    """Same values as the dense formula, sparse output, zero-degree row left at zero."""
    affinity = sp.random(30, 30, density=0.2, random_state=0, format="csr")
    affinity = (affinity + affinity.T).tolil()
    affinity[4] = 0.0
    affinity[:, 4] = 0.0
    affinity = affinity.tocsr()
    result = normalized_adjacency(affinity)
    assert sp.issparse(result)
    assert np.all(np.isfinite(result.data))
    assert np.allclose(result.toarray(), normalized_adjacency(affinity.toarray()))


@pytest.mark.parametrize("dense_limit", [spectral.SPARSE_DENSE_LIMIT, 10])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_sparse_eigengap_on_knn_blobs(monkeypatch, k, dense_limit):
    """The sparse eigengap finds k separated blobs and matches the dense path on the densified matrix.

    8-D blobs: the kNN graph of a single 2-D blob has a grid-like spectrum whose eigengap is not at 1.
    """
    X, _ = _blobs([80] * k, dim=8, seed=k)
    affinity = _knn_affinity(X, n_neighbors=15)
    monkeypatch.setattr(spectral, "SPARSE_DENSE_LIMIT", dense_limit)
    n_clusters, eigenvalues = estimate_n_clusters(affinity, max_clusters=7, random_state=0)
    dense_k, dense_eigenvalues = estimate_n_clusters(affinity.toarray(), max_clusters=7)
    assert n_clusters == dense_k == k
    assert eigenvalues.shape == dense_eigenvalues.shape == (8,)
    assert np.allclose(eigenvalues, dense_eigenvalues, atol=1e-6)
    assert np.all(np.diff(eigenvalues) >= -1e-12)


@pytest.mark.parametrize("solver", ["arpack", "lobpcg"])
def test_sparse_eigenvalues_connected_graph(solver):
    """On a connected graph (weakly bridged blobs) the iterative solvers match the dense path."""
    X, y = _blobs([150, 170, 160], seed=4)
    affinity = _bridged(_knn_affinity(X, n_neighbors=10), y)
    expected = laplacian_eigenvalues(affinity.toarray(), 6)
    result = laplacian_eigenvalues(affinity, 6, random_state=0, eigen_solver=solver)
    assert np.allclose(result, expected, atol=1e-6)
    assert estimate_n_clusters(affinity, 6, random_state=0, eigen_solver=solver)[0] == 3


def test_sparse_lobpcg_agrees_with_arpack(monkeypatch):
    """LOBPCG and ARPACK give the same eigenvalues on a disconnected graph solved iteratively."""
    monkeypatch.setattr(spectral, "SPARSE_DENSE_LIMIT", 10)
    X, _ = _blobs([120, 140], seed=5)
    affinity = _knn_affinity(X, n_neighbors=10)
    arpack = laplacian_eigenvalues(affinity, 9, random_state=0, eigen_solver="arpack")
    lobpcg = laplacian_eigenvalues(affinity, 9, random_state=1, eigen_solver="lobpcg")
    assert np.allclose(arpack, lobpcg, atol=1e-6)
    assert np.allclose(arpack, laplacian_eigenvalues(affinity, 9, random_state=3), atol=1e-8)


@pytest.mark.parametrize("dense_limit", [spectral.SPARSE_DENSE_LIMIT, 10])
def test_sparse_zero_degree_rows(monkeypatch, dense_limit):
    """Points without any edge give eigenvalue 1 (as in the dense path), never NaN."""
    monkeypatch.setattr(spectral, "SPARSE_DENSE_LIMIT", dense_limit)
    X, y = _blobs([40, 40], seed=6)
    affinity = _knn_affinity(X, n_neighbors=8).tolil()
    for i in (3, 50):
        affinity[i, :] = 0.0
        affinity[:, i] = 0.0
    affinity = affinity.tocsr()  # rows 3 and 50 hold explicit zeros
    eigenvalues = laplacian_eigenvalues(affinity, 80)
    assert np.all(np.isfinite(eigenvalues))
    assert np.allclose(eigenvalues, laplacian_eigenvalues(affinity.toarray(), 80), atol=1e-8)
    affinity.eliminate_zeros()
    labels = spectral_labels(affinity, 2, random_state=0)
    keep = np.setdiff1d(np.arange(80), [3, 50])
    assert adjusted_rand_score(y[keep], labels[keep]) == 1.0


def test_sparse_many_components():
    """More components than eigenvalues: all zeros, found without solving anything; k is the cap, not 1."""
    blocks = sp.block_diag([np.ones((3, 3)) - np.eye(3)] * 10, format="csr")
    assert np.allclose(laplacian_eigenvalues(blocks, 4), 0.0)
    assert estimate_n_clusters(blocks, 3)[0] == 3


def test_sparse_amg_agrees_with_arpack():
    pytest.importorskip("pyamg")
    X, y = _blobs([150, 170, 160], seed=7)
    affinity = _bridged(_knn_affinity(X, n_neighbors=10), y)
    arpack = laplacian_eigenvalues(affinity, 6, random_state=0)
    assert np.allclose(laplacian_eigenvalues(affinity, 6, random_state=0, eigen_solver="amg"), arpack, atol=1e-6)
    labels = spectral_labels(affinity, 3, random_state=0, eigen_solver="amg")
    assert adjusted_rand_score(y, labels) == 1.0


def test_sparse_amg_without_pyamg(monkeypatch):
    """Without pyamg, eigen_solver='amg' fails clearly, naming the package."""
    monkeypatch.setitem(sys.modules, "pyamg", None)  # makes `import pyamg` raise ImportError
    affinity = _knn_affinity(_blobs([30, 30])[0], n_neighbors=5)
    with pytest.raises(ValueError, match="pyamg"):
        laplacian_eigenvalues(affinity, 3, eigen_solver="amg")
    with pytest.raises(ValueError, match="pyamg"):
        spectral_labels(affinity, 2, eigen_solver="amg")


def test_sparse_bad_solver_and_input():
    affinity = _knn_affinity(_blobs([30, 30])[0], n_neighbors=5)
    with pytest.raises(ValueError, match="eigen_solver"):
        laplacian_eigenvalues(affinity, 3, eigen_solver="magic")
    with pytest.raises(ValueError, match="eigen_solver"):
        spectral_labels(affinity, 2, eigen_solver="magic")
    with pytest.raises(ValueError, match="assign_labels"):
        spectral_labels(affinity, 2, assign_labels="magic")
    negative = affinity.copy()
    negative.data[0] = -1.0
    with pytest.raises(ValueError, match="non-negative"):
        laplacian_eigenvalues(negative, 3)
    with pytest.warns(UserWarning, match="symmetric"):
        laplacian_eigenvalues(sp.triu(affinity, format="csr"), 3)


# --------------------------------------------------------------------------- sparse spectral_labels


@pytest.mark.parametrize("connected", [False, True])
@pytest.mark.parametrize("assign_labels", ["kmeans", "cluster_qr", "discretize", "njw"])
def test_sparse_spectral_labels_recover_blobs(no_densify, connected, assign_labels):
    """Three separated blobs are recovered from a sparse kNN affinity without densifying it.

    Disconnected: the embedding is the exact per-component null vectors; connected (weak bridges): one
    component above SPARSE_DENSE_LIMIT, so the iterative solver runs.
    """
    X, y = _blobs([300, 280, 320], seed=8)
    affinity = _knn_affinity(X, n_neighbors=10)
    if connected:
        affinity = _bridged(affinity, y)
    assert connected_components(affinity)[0] == (1 if connected else 3)
    with pytest.raises(AssertionError, match="densified"):
        affinity.toarray()
    labels = spectral_labels(affinity, 3, random_state=0, assign_labels=assign_labels, n_init=4)
    assert labels.dtype == np.int64 and labels.shape == y.shape
    assert adjusted_rand_score(y, labels) == 1.0


def test_sparse_spectral_labels_parameters_like_abc():
    """The parameters ABCClustering passes are accepted; results are reproducible and match sklearn."""
    X, y = _blobs([150, 170, 160], seed=9)
    affinity = _bridged(_knn_affinity(X, n_neighbors=10), y)
    params = dict(eigen_solver="lobpcg", n_components=4, random_state=3, n_init=5, eigen_tol="auto",
                  assign_labels="kmeans", verbose=False)
    first = spectral_labels(affinity, 3, **params)
    assert np.array_equal(first, spectral_labels(affinity, 3, **params))
    reference = SpectralClustering(3, affinity="precomputed", random_state=0).fit(affinity).labels_
    assert adjusted_rand_score(reference, first) == 1.0
    assert spectral_labels(affinity, 1).tolist() == [0] * len(y)


# --------------------------------------------------------------------------- scaling smoke test


def test_sparse_scaling_smoke():
    """20,000 points in 5 blobs: eigengap and labels through the sparse path in seconds."""
    X, y = _blobs([4000] * 5, seed=10)
    affinity = _knn_affinity(X, n_neighbors=10)
    start = time.perf_counter()
    n_clusters, _ = estimate_n_clusters(affinity, max_clusters=10, random_state=0)
    labels = spectral_labels(affinity, n_clusters, random_state=0, n_init=2)
    elapsed = time.perf_counter() - start
    assert n_clusters == 5
    assert adjusted_rand_score(y, labels) == 1.0
    assert elapsed < 60  # seconds on a loaded 2-core box; typically about one


# ------------------------------------------------------------ probe 59c: behaviour its surviving mutants changed unseen
def _blocks(sizes, seed=0):
    rng = np.random.default_rng(seed)
    blocks = [rng.uniform(0.5, 1, (m, m)) for m in sizes]
    return sp.block_diag([(B + B.T) / 2 for B in blocks]).tocsr()


def test_stored_zeros_link_no_components():
    from skabc.spectral.eigen import top_eigenvectors

    A = _blocks((10, 10, 30))
    coo = A.tocoo()
    stored = sp.csr_matrix((np.concatenate([coo.data, [0.0, 0.0]]),
                            (np.concatenate([coo.row, [0, 10]]), np.concatenate([coo.col, [10, 0]]))), shape=A.shape)
    assert stored.nnz == A.nnz + 2 and (stored != A).nnz == 0
    for k in (2, 3):
        np.testing.assert_allclose(top_eigenvectors(stored, k, random_state=0)[1],
                                   top_eigenvectors(A, k, random_state=0)[1])
        np.testing.assert_array_equal(spectral_labels(stored, k, random_state=0), spectral_labels(A, k, random_state=0))


def test_sparse_embedding_is_sign_fixed_whatever_the_start_vector():
    from sklearn.datasets import make_blobs
    from sklearn.neighbors import kneighbors_graph

    from skabc.spectral.eigen import top_eigenvectors

    X, _ = make_blobs(600, centers=3, cluster_std=3.0, random_state=0)
    graph = kneighbors_graph(X, 10)
    A = sp.csr_matrix(0.5 * (graph + graph.T))
    _, first = top_eigenvectors(A, 4, random_state=0)
    for seed in (1, 2, 3):
        np.testing.assert_allclose(top_eigenvectors(A, 4, random_state=seed)[1], first, atol=1e-6)
    peaks = np.argmax(np.abs(first), axis=0)
    assert np.all(first[peaks, np.arange(first.shape[1])] > 0)  # each column's largest entry is positive


def test_more_components_than_eigenpairs_keep_the_largest_components():
    from skabc.spectral.eigen import top_eigenvectors

    sizes = [5, 50, 20, 8]
    values, V = top_eigenvectors(_blocks(sizes), 2, random_state=0)
    assert np.allclose(values, 0, atol=1e-10)
    starts = np.cumsum([0, *sizes])
    covered = [int(np.argmax([np.abs(V[a:b, j]).sum() for a, b in pairwise(starts)])) for j in range(2)]
    assert sorted(sizes[c] for c in covered) == [20, 50]


def test_dense_to_topk_averages_an_asymmetric_pair_once_each_way():
    """Probe 62c: a partner that was both a neighbour and a random partner was counted twice: S[0, 1] was
    (2 A01 + A10) / 3, where the documentation averages A01 and A10."""
    n = 6
    A = np.full((n, n), 0.01)
    np.fill_diagonal(A, 0)
    A[0, 1], A[1, 0] = 1.0, 0.5  # each other's strongest neighbour
    seed = next(s for s in range(100) if random_partners(n, 1, None, s)[0, 0] == 1)  # and 1 is 0's random partner
    for S in (dense_to_topk(A, 1), dense_to_topk(A, 1, n_random=1, random_state=seed)):
        assert S[0, 1] == S[1, 0] == 0.75


def test_row_keys_of_no_rows_are_no_keys():
    """Probe 62c: numpy's 'cannot reshape array of size 0 into shape (0,newaxis)'."""
    assert row_keys(np.zeros((0, 3))).shape == (0,) and row_keys(np.zeros((0, 3))).dtype == np.uint64
    np.testing.assert_array_equal(row_keys(np.ones((2, 3)))[0], row_keys(np.ones((1, 3)))[0])


def test_topk_takes_float64_embeddings_and_refuses_non_finite_ones():
    """Session 63: a float64 z raised torch's 'mat1 and mat2 must have the same dtype'; a NaN or inf one gave a
    matrix of NaN entries without a word."""
    head, z = _head_and_embeddings(n=30)
    expected = topk_affinity(head, z, 4)
    in_float64 = topk_affinity(head, z.double(), 4)
    assert (in_float64 != expected).nnz == 0
    for value in (float("nan"), float("inf"), 1e39):  # review 63: 1e39 is finite in float64, inf in float32
        bad = z.double()
        bad[0, 3, 2] = value
        with pytest.raises(ValueError, match="NaN or infinite"):
            topk_affinity(head, bad, 4)


def test_dense_to_topk_reads_a_sparse_affinity_as_dense():
    """Session 63: a sparse matrix raised numpy's 'setting an array element with a sequence'."""
    sparse = _knn_affinity(_blobs([10, 12], seed=1)[0], 5)
    A = sparse.toarray()
    for S in (sparse, sp.coo_matrix(A), sp.lil_matrix(A)):
        assert (dense_to_topk(S, 3, n_random=1) != dense_to_topk(A, 3, n_random=1)).nnz == 0
