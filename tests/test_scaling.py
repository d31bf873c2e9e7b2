"""Tests of the fast large-n path: factorised top-k search, the approximate 'ivf' search, one-solve spectral step.

(The basic sparse kNN affinity and sparse eigensolver tests are in ``test_sparse.py``.)
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import same_matrix
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import NearestNeighbors

import skabc.sparse_affinity as sparse_affinity
from skabc.inference import encode
from skabc.nn.heads import SimilarityHead
from skabc.sparse_affinity import dense_to_topk, topk_affinity
from skabc.spectral import eigengap_spectral_labels, estimate_n_clusters, spectral_labels

# --------------------------------------------------------------------------- helpers


def _random_head(d_model, compat="multiplicative", d_head=None, seed=0, dtype=torch.float32):
    """A randomly initialised head with non-zero biases everywhere (they must cancel or be accounted for)."""
    torch.manual_seed(seed)
    head = SimilarityHead(d_model, compat=compat, d_head=d_head).eval()
    with torch.no_grad():
        head.query.bias.normal_()
        head.key.bias.normal_()
        if compat == "multiplicative":
            head.bias.fill_(0.3)
    return head.to(dtype)


def _dense_affinity(head, z):
    """The dense learned affinity, built as ContextualKernel.transform does."""
    with torch.inference_mode():
        affinity = torch.sigmoid(head(z)[0].double()).numpy()
    return 0.5 * (affinity + affinity.T)


def _clustered(n, d=16, n_clusters=6, spread=0.3, seed=0):
    """Embeddings of ``n`` points in ``n_clusters`` Gaussian clusters, shape (1, n, d), and their labels."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, n_clusters, (n,), generator=gen)
    centres = torch.randn(n_clusters, d, generator=gen)
    z = centres[labels] + spread * torch.randn(n, d, generator=gen)
    return z[None], labels.numpy()


def _similarity_head(d, seed=0):
    """A head whose logits grow with embedding similarity (query and key share weights), like a trained one."""
    head = _random_head(d, seed=seed)
    with torch.no_grad():
        head.key.weight.copy_(head.query.weight)
        head.key.bias.copy_(head.query.bias)
    return head


def _pattern_recall(approx: sp.csr_matrix, exact: sp.csr_matrix) -> float:
    approx, exact = approx.tocsr(), exact.tocsr()
    hits = 0
    for i in range(exact.shape[0]):
        row_exact = exact.indices[exact.indptr[i] : exact.indptr[i + 1]]
        row_approx = approx.indices[approx.indptr[i] : approx.indptr[i + 1]]
        hits += len(np.intersect1d(row_exact, row_approx))
    return hits / exact.nnz


def _row_topk_recall(head, z, k, **ivf_options) -> float:
    """Recall of each point's exact top-k (before symmetrisation) by the 'ivf' search."""
    with torch.inference_mode():
        left, right = (t[0].contiguous() for t in head.rank_factors(z))
        exact = sparse_affinity._exact_topk(left, right, k, block_rows=256).numpy()
        approx = sparse_affinity._ivf_topk(left, right, k, **ivf_options).numpy()
    return float(np.mean([len(np.intersect1d(a, b)) for a, b in zip(exact, approx, strict=True)]) / k)


# --------------------------------------------------------------------------- SimilarityHead.rank_factors / pair_logits


@pytest.mark.parametrize(("d_model", "d_head", "width"), [(8, None, 8), (16, 4, 8), (8, 3, 6)])
def test_rank_factors_rank_rows_like_the_logits(d_model, d_head, width):
    """left @ right^T equals the logits up to one constant per row, in both factorisations."""
    head = _random_head(d_model, d_head=d_head, dtype=torch.float64)
    z = torch.randn(2, 25, d_model, dtype=torch.float64)
    with torch.no_grad():
        logits = head(z)
        left, right = head.rank_factors(z)
        projected = head.project(z)
        assert torch.equal(head.rank_factors(z, projected)[0], left)
    assert left.shape == right.shape == (2, 25, width)
    difference = logits - left @ right.transpose(1, 2)
    assert torch.allclose(difference, difference[:, :, :1].expand_as(difference), atol=1e-10)


def test_rank_factors_none_for_the_additive_head():
    head = _random_head(8, compat="additive")
    assert head.rank_factors(torch.randn(1, 5, 8)) is None


@pytest.mark.parametrize("compat", ["multiplicative", "additive"])
def test_pair_logits_are_forward_entries(compat):
    """pair_logits gives forward(z)[0, i, j] for any index pairs, broadcasting rows against columns."""
    head = _random_head(8, compat=compat, seed=1, dtype=torch.float64)
    z = torch.randn(1, 30, 8, dtype=torch.float64)
    with torch.no_grad():
        logits = head(z)[0]
        projected = head.project(z)
        rows = torch.tensor([0, 3, 3, 29, 7])
        cols = torch.tensor([5, 3, 29, 3, 0])
        assert torch.allclose(head.pair_logits(projected, rows, cols), logits[rows, cols], atol=1e-12)
        cols2d = torch.randint(0, 30, (4, 6))
        block = head.pair_logits((projected[0][0], projected[1][0]), torch.arange(4)[:, None], cols2d)
    assert block.shape == (4, 6)
    assert torch.allclose(block, logits[torch.arange(4)[:, None], cols2d], atol=1e-12)


# --------------------------------------------------------------------------- exact search


@pytest.mark.parametrize(("d_model", "d_head"), [(8, None), (16, 4)])
@pytest.mark.parametrize("block_rows", [1, 7, None])
def test_exact_search_equals_the_dense_reference(d_model, d_head, block_rows):
    """The factorised exact search keeps each row's exact top-k of the dense affinity, with its exact values."""
    head = _random_head(d_model, d_head=d_head, seed=2)
    z = torch.randn(1, 45, d_model)
    sparse = topk_affinity(head, z, 6, block_rows=block_rows, search="exact")
    same_matrix(sparse, dense_to_topk(_dense_affinity(head, z), 6))


def test_exact_search_of_the_additive_head():
    """The additive head has no factorisation; its exact search still matches the dense reference."""
    head = _random_head(8, compat="additive", seed=3)
    z = torch.randn(1, 30, 8)
    for search in ("auto", "exact"):
        same_matrix(topk_affinity(head, z, 4, search=search), dense_to_topk(_dense_affinity(head, z), 4))


def test_search_arguments_are_checked():
    head, z = _random_head(8), torch.randn(1, 20, 8)
    with pytest.raises(ValueError, match="search"):
        topk_affinity(head, z, 3, search="magic")
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="n_probe"):
            topk_affinity(head, z, 3, search="ivf", n_probe=bad)
    with pytest.raises(ValueError, match="multiplicative"):
        topk_affinity(_random_head(8, compat="additive"), z, 3, search="ivf")


# --------------------------------------------------------------------------- approximate 'ivf' search


def test_ivf_with_one_cell_is_exact():
    """Fewer points than one cell: a single cell holds every candidate, so 'ivf' is the exact search."""
    head, z = _random_head(8, seed=4), torch.randn(1, 120, 8)
    same_matrix(topk_affinity(head, z, 7, search="ivf"), topk_affinity(head, z, 7, search="exact"))


def test_ivf_structure_values_and_determinism(monkeypatch):
    """'ivf' keeps the module's conventions, stores the exact affinity values and is reproducible."""
    monkeypatch.setattr(sparse_affinity, "_IVF_CELL_SIZE", 16)
    head = _similarity_head(16, seed=5)
    z, _ = _clustered(600, seed=5)
    k = 8
    sparse = topk_affinity(head, z, k, search="ivf", n_probe=3)
    assert sp.isspmatrix_csr(sparse) and sparse.dtype == np.float64
    assert (sparse != sparse.T).nnz == 0
    assert np.all(sparse.diagonal() == 0) and not np.any(sparse.tocoo().row == sparse.tocoo().col)
    assert np.diff(sparse.indptr).min() >= k and sparse.nnz <= 2 * k * 600
    dense = _dense_affinity(head, z)
    coo = sparse.tocoo()
    assert np.allclose(coo.data, dense[coo.row, coo.col], rtol=0, atol=1e-6)
    same_matrix(topk_affinity(head, z, k, search="ivf", n_probe=3), sparse, atol=0)
    same_matrix(topk_affinity(head, z, k, search="ivf", n_probe=3, random_state=0), sparse, atol=0)


def test_ivf_recall_on_clustered_embeddings(monkeypatch):
    """On a similarity-like head over clustered embeddings, 'ivf' finds nearly all exact neighbours.

    Small cells (16 points, about 190 of them) so that 8 probes score only a few percent of the set: the
    recall is then a property of the index, not of scoring almost everything.  More probes find more.
    (Measured on this seed: 0.98 with 8 probes, 0.998 with 16.)
    """
    monkeypatch.setattr(sparse_affinity, "_IVF_CELL_SIZE", 16)
    head = _similarity_head(16, seed=6)
    z, _ = _clustered(3000, n_clusters=12, spread=0.5, seed=6)
    recall_8 = _row_topk_recall(head, z, 10, n_probe=8, seed=0)
    recall_16 = _row_topk_recall(head, z, 10, n_probe=16, seed=0)
    assert recall_8 >= 0.95
    assert recall_16 >= max(recall_8, 0.99)
    # the symmetrised matrices agree just as well
    approx = topk_affinity(head, z, 10, search="ivf", n_probe=8)
    assert _pattern_recall(approx, topk_affinity(head, z, 10, search="exact")) >= 0.95


def test_ivf_is_not_exhaustive(monkeypatch):
    """With small cells and one probe, 'ivf' does miss neighbours on structureless data: it is an approximation."""
    monkeypatch.setattr(sparse_affinity, "_IVF_CELL_SIZE", 16)
    head, z = _random_head(8, seed=7), torch.randn(1, 2000, 8)
    assert _row_topk_recall(head, z, 10, n_probe=1, seed=0) < 0.99


def test_ivf_recall_of_a_trained_kernel(tiny_kernel):
    """The kernel trained in conftest (blob sets): 'ivf' at default settings recovers its exact neighbours."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.05, size=(700, 2)) for c in ((-0.5, -0.5), (0.5, 0.5), (0.5, -0.5))])
    z = encode(tiny_kernel.module_, X.astype(np.float32))
    head = tiny_kernel.module_.head
    # 2,100 points: about 8 cells of 256, so probe 2 of them for the index to matter.
    assert _row_topk_recall(head, z, 15, n_probe=2, seed=0) >= 0.9


def test_auto_search_switches_to_ivf_above_the_threshold(monkeypatch):
    calls = []
    real = sparse_affinity._ivf_topk

    def spy(*args, **kwargs):
        calls.append(args[0].shape[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(sparse_affinity, "_ivf_topk", spy)
    head, z = _random_head(8), torch.randn(1, 60, 8)
    topk_affinity(head, z, 3)
    assert calls == []
    monkeypatch.setattr(sparse_affinity, "EXACT_SEARCH_MAX_SAMPLES", 50)
    topk_affinity(head, z, 3)
    assert calls == [60]
    topk_affinity(head, z, 3, search="exact")
    assert calls == [60]
    # the additive head always searches exactly
    topk_affinity(_random_head(8, compat="additive"), z, 3)
    assert calls == [60]


# --------------------------------------------------------------------------- eigengap_spectral_labels


def _knn_graph(X, n_neighbors):
    n = len(X)
    distances, indices = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(X).kneighbors(X)
    weights = np.exp(-0.5 * (distances[:, 1:] / 3.0) ** 2)
    indptr = np.arange(0, n * n_neighbors + 1, n_neighbors)
    affinity = sp.csr_matrix((weights.ravel(), indices[:, 1:].ravel(), indptr), shape=(n, n))
    return affinity.maximum(affinity.T).tocsr()


def _bridged_blobs(sizes, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(len(sizes)), sizes)
    centres = np.zeros((len(sizes), dim))
    centres[:, 0] = 20.0 * np.arange(len(sizes))
    X = centres[y] + rng.standard_normal((len(y), dim))
    affinity = _knn_graph(X, 10).tolil()
    firsts = [np.flatnonzero(y == c)[0] for c in range(len(sizes))]
    for a, b in pairwise(firsts):
        affinity[a, b] = affinity[b, a] = 1e-3
    return affinity.tocsr(), y


@pytest.mark.parametrize("solver", ["arpack", "lobpcg"])
def test_eigengap_spectral_labels_sparse_matches_two_steps(solver):
    """One shared eigensolve gives the k, eigenvalues and clustering of estimate_n_clusters + spectral_labels."""
    affinity, y = _bridged_blobs([300, 280, 320, 260])
    labels, k, eigenvalues = eigengap_spectral_labels(affinity, 8, 0, eigen_solver=solver, random_state=1)
    expected_k, expected_values = estimate_n_clusters(affinity, 8, random_state=0, eigen_solver=solver)
    assert k == expected_k == 4
    assert np.allclose(eigenvalues, expected_values, atol=1e-6)
    assert labels.dtype == np.int64
    assert adjusted_rand_score(y, labels) == 1.0
    assert adjusted_rand_score(spectral_labels(affinity, 4, random_state=1, eigen_solver=solver), labels) == 1.0


def test_eigengap_spectral_labels_sparse_options(monkeypatch):
    """n_components (even beyond max_clusters + 1) sets the embedding width; other assignments; k = 1."""
    import skabc.spectral.assign as assign

    affinity, y = _bridged_blobs([200, 220, 240], seed=1)
    widths = []
    real_assign = assign._assign

    def spy(vectors, *args):
        widths.append(vectors.shape[1])
        return real_assign(vectors, *args)

    monkeypatch.setattr(assign, "_assign", spy)
    for params, width in ((dict(), 3), (dict(n_components=2), 2), (dict(n_components=12), 12),
                          (dict(assign_labels="cluster_qr"), 3), (dict(assign_labels="discretize"), 3),
                          (dict(assign_labels="njw"), 3)):
        labels, k, eigenvalues = eigengap_spectral_labels(affinity, 5, 0, random_state=0, **params)
        assert k == 3 and eigenvalues.shape == (6,)
        assert widths[-1] == width
        if width == 3:
            assert adjusted_rand_score(y, labels) == 1.0
    labels, k, _ = eigengap_spectral_labels(affinity, 1, 0)
    assert k == 1 and labels.tolist() == [0] * len(y)
    with pytest.raises(ValueError, match="assign_labels"):
        eigengap_spectral_labels(affinity, 5, assign_labels="magic")


def test_eigengap_spectral_labels_dense_is_the_two_step_path():
    """Dense input: exactly estimate_n_clusters then spectral_labels."""
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(3), 30)
    affinity = np.where(y[:, None] == y[None, :], 0.9, 0.02) + 0.01 * rng.random((90, 90))
    affinity = 0.5 * (affinity + affinity.T)
    labels, k, eigenvalues = eigengap_spectral_labels(affinity, 6, 0, random_state=3)
    expected_k, expected_values = estimate_n_clusters(affinity, 6, random_state=0)
    assert k == expected_k == 3
    assert np.array_equal(eigenvalues, expected_values)
    assert np.array_equal(labels, spectral_labels(affinity, 3, random_state=3))


# --------------------------------------------------------------------------- the path the scaling benchmark times


@pytest.mark.parametrize("seed", [2024, 1])
def test_dense_and_sparse_modes_find_the_circles(seed):
    """What benchmarks/scaling.py times, at n = 300: the shipped circles kernel finds the 4 overlapping circles
    with the dense and with the sparse affinity alike, where kNN spectral clustering given k does not."""
    from sklearn.cluster import SpectralClustering

    from skabc import ABCClustering
    from skabc.datasets import make_circles_sets
    from skabc.pretrained import load

    X, y, _ = make_circles_sets(n_sets=1, set_size=300, random_state=seed)
    labels = {}
    for mode in ("dense", "sparse"):
        model = ABCClustering(kernel=load("circles", device="cpu").set_params(affinity_mode=mode), random_state=0)
        labels[mode] = model.fit_predict(X)
        assert sp.issparse(model.affinity_matrix_) == (mode == "sparse")
        assert model.n_clusters_ == 4
        # Measured: 0.976 / 0.975 (seed 2024), 0.965 / 0.965 (seed 1), dense / sparse.
        assert adjusted_rand_score(y, labels[mode]) > 0.9, mode
    assert adjusted_rand_score(labels["dense"], labels["sparse"]) > 0.95
    knn = SpectralClustering(4, affinity="nearest_neighbors", random_state=0).fit_predict(X)
    assert adjusted_rand_score(y, knn) < 0.5  # measured 0.329 and 0.188


def test_a_dense_affinity_too_large_for_memory_is_refused_before_it_is_built():
    from skabc import ABCClustering
    from skabc.exceptions import AffinityTooLargeError
    from skabc.pretrained import load

    X = np.random.default_rng(0).uniform(size=(10**6, 2)).astype(np.float32)
    model = ABCClustering(kernel=load("circles", device="cpu").set_params(affinity_mode="dense"), random_state=0,
                          max_samples=None)
    with pytest.raises(AffinityTooLargeError, match=r"1000000 points.*affinity_mode='sparse'") as refused:
        model.fit(X)
    assert isinstance(refused.value, MemoryError) and isinstance(refused.value, ValueError)


@pytest.mark.parametrize("dense_fallback_limit", [10**6, 10])
def test_arpack_failure_falls_back_to_another_solver(monkeypatch, dense_fallback_limit):
    """If ARPACK fails on a component (it can on nearly regular graphs), the dense solver or LOBPCG takes over."""
    from scipy.sparse.linalg import ArpackError

    import skabc.spectral.eigen as spectral

    affinity, y = _bridged_blobs([150, 170, 160], seed=3)  # one component, above SPARSE_DENSE_LIMIT
    expected = estimate_n_clusters(affinity.toarray(), 6)[1]

    def failing_eigsh(*args, **kwargs):
        raise ArpackError(3)

    monkeypatch.setattr(spectral, "eigsh", failing_eigsh)
    monkeypatch.setattr(spectral, "ARPACK_FALLBACK_DENSE_LIMIT", dense_fallback_limit)
    k, values = estimate_n_clusters(affinity, 6, random_state=0)
    assert k == 3
    assert np.allclose(values, expected, atol=1e-6)
    labels, k, _ = eigengap_spectral_labels(affinity, 6, 0, random_state=0)
    assert k == 3 and adjusted_rand_score(y, labels) == 1.0


def test_arpack_that_needs_too_many_restarts_hands_a_small_component_to_the_dense_solver(monkeypatch):
    """Probe 52d: on a degenerate spectrum (2,000 points, 50 distinct ones) ARPACK took 196 restarts, 10 s of a
    13 s fit, where the dense solve of the component costs about one; it is now stopped after
    ARPACK_FALLBACK_MAXITER restarts (the digest sets need at most 17) and the component solved densely."""
    import skabc.spectral.eigen as spectral

    affinity, _ = _bridged_blobs([150, 170, 160], seed=3)  # one component, above SPARSE_DENSE_LIMIT
    expected = estimate_n_clusters(affinity.toarray(), 6)[1]
    dense, restarts = [], []
    real_dense, real_eigsh = spectral._dense_eigenpairs, spectral.eigsh
    monkeypatch.setattr(spectral, "_dense_eigenpairs", lambda *a, **kw: dense.append(1) or real_dense(*a, **kw))
    monkeypatch.setattr(spectral, "eigsh", lambda *a, **kw: restarts.append(kw.get("maxiter")) or real_eigsh(*a, **kw))
    monkeypatch.setattr(spectral, "ARPACK_FALLBACK_MAXITER", 1)  # every solve of this graph needs more
    k, values = estimate_n_clusters(affinity, 6, random_state=0)
    assert k == 3 and np.allclose(values, expected, atol=1e-6)
    assert restarts == [1] and dense == [1]
    monkeypatch.setattr(spectral, "ARPACK_FALLBACK_DENSE_LIMIT", 100)  # larger components keep ARPACK's own limit
    dense.clear(), restarts.clear()
    estimate_n_clusters(affinity, 6, random_state=0)
    assert restarts == [None] and dense == []


def test_unconverged_lobpcg_falls_back_to_arpack(monkeypatch):
    """LOBPCG that returns unconverged pairs (e.g. its starting guess) is caught by the residual check."""
    import skabc.spectral.eigen as spectral

    affinity, y = _bridged_blobs([150, 170, 160], seed=4)
    expected = estimate_n_clusters(affinity.toarray(), 6)[1]

    def unconverged_lobpcg(matrix, start, **kwargs):
        values = np.einsum("ij,ij->j", start, matrix @ start) / np.einsum("ij,ij->j", start, start)
        return values, start

    monkeypatch.setattr(spectral, "lobpcg", unconverged_lobpcg)
    with pytest.warns(UserWarning, match="did not converge.*ARPACK"):
        k, values = estimate_n_clusters(affinity, 6, random_state=0, eigen_solver="lobpcg")
    assert k == 3
    assert np.allclose(values, expected, atol=1e-6)
    with pytest.warns(UserWarning, match="did not converge"):
        labels = spectral_labels(affinity, 3, random_state=0, eigen_solver="lobpcg")
    assert adjusted_rand_score(y, labels) == 1.0


def test_converged_lobpcg_is_kept_without_warning():
    import warnings

    affinity, _ = _bridged_blobs([150, 170, 160], seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = estimate_n_clusters(affinity, 6, random_state=0, eigen_solver="lobpcg")[1]
    assert np.allclose(values, estimate_n_clusters(affinity.toarray(), 6)[1], atol=1e-6)


def test_large_component_path_gives_the_same_eigenpairs(monkeypatch):
    """Large components: reordered (reverse Cuthill-McKee), float32 ARPACK, float64 Rayleigh-Ritz.

    The eigenvalues match the float64 path to 1e-10, the embedding (in point order) to float32 accuracy.
    """
    import skabc.spectral.eigen as spectral

    affinity, y = _bridged_blobs([150, 170, 160], seed=6)
    monkeypatch.setattr(spectral, "ARPACK_LARGE_COMPONENT", 10**9)
    values, vectors = spectral._smallest_eigenpairs(affinity, 5, "arpack", np.random.RandomState(0), "auto", True)
    reorders, precisions = [], []
    real_rcm, real_eigsh = spectral.reverse_cuthill_mckee, spectral.eigsh

    def spy_rcm(*args, **kwargs):
        reorders.append(1)
        return real_rcm(*args, **kwargs)

    def spy_eigsh(matrix, **kwargs):
        precisions.append(matrix.dtype)
        return real_eigsh(matrix, **kwargs)

    monkeypatch.setattr(spectral, "reverse_cuthill_mckee", spy_rcm)
    monkeypatch.setattr(spectral, "eigsh", spy_eigsh)
    monkeypatch.setattr(spectral, "ARPACK_LARGE_COMPONENT", 100)
    large_values, large = spectral._smallest_eigenpairs(affinity, 5, "arpack", np.random.RandomState(0), "auto", True)
    assert reorders and precisions == [np.float32]
    assert np.allclose(large_values, values, atol=1e-10)
    # The same embedding, point for point (column signs are fixed by the same rule; entries are ~1e-2).
    assert np.abs(large - vectors).max() < 1e-5
    assert np.allclose(estimate_n_clusters(affinity, 6, random_state=0)[1],
                       estimate_n_clusters(affinity.toarray(), 6)[1], atol=1e-10)
    labels, k, _ = eigengap_spectral_labels(affinity, 6, 0, random_state=0)
    assert k == 3 and adjusted_rand_score(y, labels) == 1.0


def test_ivf_scores_a_cell_of_many_equal_rows_in_row_blocks(monkeypatch):
    """A probe: every equal row lands in one cell, scored as one (cell x candidates) block: peak memory grew with
    the square of the number of duplicates (24,000 rows, half equal: 1.16 GB against 0.73 GB without; now
    0.65 GB).  Row blocks give the same neighbours as one block."""
    generator = torch.Generator().manual_seed(0)
    left = torch.randn(600, 4, generator=generator)
    left[:400] = 0.5  # two thirds of the rows are one point
    whole = sparse_affinity._ivf_topk(left, left.clone(), 5, n_probe=2, seed=0)
    blocks, topk = [], torch.topk

    def recording_topk(scores, k, *args, **kwargs):
        if k == 5:  # the candidates' scores (the probe's own call asks for n_probe = 2)
            blocks.append(scores.numel())
        return topk(scores, k, *args, **kwargs)

    monkeypatch.setattr(sparse_affinity, "_BLOCK_CELLS", 1000)
    monkeypatch.setattr(torch, "topk", recording_topk)
    np.testing.assert_array_equal(sparse_affinity._ivf_topk(left, left.clone(), 5, n_probe=2, seed=0).numpy(),
                                  whole.numpy())
    assert max(blocks) <= 1000  # one row of about 600 candidates at a time, not 400 x 600


@pytest.mark.parametrize("seed", range(5))
def test_ivf_cells_start_from_distinct_rows(seed):
    """Equal starting centroids stay equal and all but one keep no point: with 95 % equal rows, seeds 1 and 4
    left one of 6 cells empty."""
    left = torch.randn(600, 4, generator=torch.Generator().manual_seed(0))
    left[:570] = 0.5
    cells = sparse_affinity._kmeans(left, 6, torch.Generator().manual_seed(seed))
    assert len(torch.unique(cells)) == 6
