"""The affinity a fit with groups keeps: its total memory checked, its blocks joined as block_diag would, and none
kept where only labels are returned."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import TINY, make_blob_sets, same_matrix

from skabc import ABCClustering
from skabc._group_affinity import join_blocks
from skabc._sets import map_sets, set_seeds
from skabc.exceptions import AffinityTooLargeError


def _block_diag_in_row_order(rows_of, blocks, n_samples):
    """What fit kept before: block_diag of the groups in group order, its rows and columns permuted back."""
    order = np.concatenate(rows_of)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(n_samples)
    joined = sp.block_diag([sp.csr_matrix(block) for block in blocks], format="csr")
    return joined[inverse][:, inverse]


def test_join_blocks_places_dense_and_sparse_blocks_at_their_groups_rows_as_block_diag_did():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 4, 57)
    rows_of = [np.flatnonzero(codes == g) for g in range(4)]
    dense = rng.random((len(rows_of[0]),) * 2) * (rng.random((len(rows_of[0]),) * 2) > 0.3)  # zeros are dropped
    coo = sp.random(len(rows_of[1]), len(rows_of[1]), density=0.3, random_state=0, format="coo")
    with_duplicates = sp.coo_matrix((np.r_[coo.data, 1.0], (np.r_[coo.row, 0], np.r_[coo.col, 0])), shape=coo.shape)
    explicit_zero = sp.random(len(rows_of[2]), len(rows_of[2]), density=0.4, random_state=1, format="csr")
    explicit_zero.data[::3] = 0.0  # stored entries of a sparse block are kept, zeros included
    float32 = rng.random((len(rows_of[3]),) * 2).astype(np.float32)
    blocks = [dense, with_duplicates, explicit_zero, float32]
    expected = _block_diag_in_row_order(rows_of, [b.copy() for b in blocks], len(codes))
    kept = explicit_zero.copy()

    joined = join_blocks(rows_of, list(blocks), len(codes))

    assert isinstance(joined, sp.csr_matrix) and joined.dtype == np.float64 and joined.has_sorted_indices
    assert joined.nnz == expected.nnz  # the explicit zeros of the sparse block too
    same_matrix(joined, expected, atol=0)
    same_matrix(explicit_zero, kept, atol=0)  # the caller's block is not changed


def test_join_blocks_lets_go_of_each_block_once_copied():
    rows_of = [np.array([0, 2]), np.array([1, 3, 4])]
    blocks = [np.ones((2, 2)), np.ones((3, 3))]
    join_blocks(rows_of, blocks, 5)
    assert blocks == [None, None]


@pytest.fixture(scope="module")
def small_limit_kernel():
    """A tiny fitted kernel whose memory_limit (1 MB) takes one set of 60 rows but not thirty kept together."""
    from skabc import ContextualKernel

    X, y, groups = make_blob_sets(n_sets=30, set_size=60, random_state=3)
    kernel = ContextualKernel(**TINY).fit(X, y, groups=groups)
    return kernel.set_params(memory_limit=1e6), X, groups


def test_a_fit_whose_groups_together_would_pass_the_memory_limit_is_refused_naming_them(small_limit_kernel):
    """Probe 63c: every group passed the kernel's memory check on its own, and fit then kept all their affinities
    (12 groups of 2,000 rows: 2.8 GB at the peak under memory_limit=1e9)."""
    kernel, X, groups = small_limit_kernel
    one_set = ABCClustering(kernel=kernel, random_state=0).fit(X[groups == 0])  # one set alone fits the limit
    assert one_set.affinity_matrix_.shape == (60, 60)
    with pytest.raises(AffinityTooLargeError, match=r"fit with groups keeps every group's affinity in "
                                                    r"affinity_matrix_: 30 groups of up to 60 rows hold 108,000 "
                                                    r"pairs.*predict\(X, groups=groups\) keeps no affinity"):
        ABCClustering(kernel=kernel, random_state=0).fit(X, groups=groups)
    # predict keeps no affinity: the same groups are clustered, as a fit without the limit labels them.
    labels = one_set.predict(X, groups=groups)
    kernel.set_params(memory_limit=None)
    try:
        assert np.array_equal(labels, ABCClustering(kernel=kernel, random_state=0).fit(X, groups=groups).labels_)
    finally:
        kernel.set_params(memory_limit=1e6)


def test_a_fit_with_groups_under_the_limit_keeps_every_groups_affinity(small_limit_kernel):
    kernel, X, groups = small_limit_kernel
    few = np.isin(groups, [0, 1, 2])  # 3 x 60 rows: within the limit
    model = ABCClustering(kernel=kernel, random_state=0).fit(X[few], groups=groups[few])
    assert model.affinity_matrix_.shape == (180, 180)
    for g in (0, 1, 2):
        rows = np.flatnonzero(groups[few] == g)
        alone = ABCClustering(kernel=kernel, random_state=0).fit(X[few][rows]).affinity_matrix_
        assert np.allclose(model.affinity_matrix_[rows][:, rows].toarray(), alone)


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_map_sets_drops_each_affinity_where_only_labels_are_wanted(tiny_kernel, blob_data, n_jobs):
    X, _, groups = blob_data
    model = ABCClustering(kernel=tiny_kernel, random_state=0).fit(X[groups == 0])
    sets = [X[groups == g] for g in range(3)]
    for chosen in (sets[:1], sets):  # one set (in this process) and several (joblib)
        kept = map_sets(model, chosen, set_seeds(model, len(chosen)), n_jobs)
        dropped = map_sets(model, chosen, set_seeds(model, len(chosen)), n_jobs, keep_affinity=False)
        assert all(result[1] is not None for result in kept)
        assert all(result[1] is None for result in dropped)
        for with_affinity, without in zip(kept, dropped, strict=True):
            assert np.array_equal(with_affinity[0], without[0]) and with_affinity[2] == without[2]
            assert np.array_equal(with_affinity[3], without[3]) and with_affinity[4] == without[4]


@pytest.mark.parametrize("params", [dict(), dict(affinity="precomputed", n_clusters=2)])
def test_one_group_keeps_its_affinity_sparse_as_many_groups_do(params):
    """Review 64: with groups of one value, fit kept the kernel's dense affinity (for a precomputed one, the user's
    own X), where every fit with groups had kept a sparse matrix, as the attribute's docstring says."""
    X = make_blob_sets(n_sets=1, set_size=60, random_state=1)[0]
    data = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1)) if params else X
    whole = ABCClustering(random_state=0, **params).fit(data).affinity_matrix_
    grouped = ABCClustering(random_state=0, **params).fit(data, groups=np.zeros(60)).affinity_matrix_
    assert isinstance(grouped, sp.csr_matrix) and grouped is not data
    np.testing.assert_array_equal(grouped.toarray(), whole.toarray() if sp.issparse(whole) else whole)
