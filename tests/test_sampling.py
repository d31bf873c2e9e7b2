"""Unit tests of the training-set sampler (:mod:`skabc.sampling`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from skabc.sampling import (
    ClusterSetSampler,
    SampledSetsDataset,
    check_clusters_per_set,
    check_set_size,
    collate_sets,
    pad_sets,
)

# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("value", "expected"),
    [(2, (2, 2)), (10, (10, 10)), (np.int64(7), (7, 7)), ((5, 9), (5, 9)), ([3, 3], (3, 3))],
)
def test_check_set_size_accepts(value, expected):
    """An int or a (min, max) pair of ints becomes (min, max)."""
    result = check_set_size(value)
    assert result == expected
    assert all(type(v) is int for v in result)


@pytest.mark.parametrize("value", [1, 0, -3, (5, 3), (1, 4), "x", 2.5, True, (2.0, 5), (2, 5, 7), (True, 5), None])
def test_check_set_size_rejects(value):
    """Sizes below 2, reversed ranges, floats, bools and strings raise ValueError."""
    with pytest.raises(ValueError, match="set_size"):
        check_set_size(value)


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), (1, (1, 1)), (4, (4, 4)), ((1, 3), (1, 3)), ([2, 2], (2, 2))]
)
def test_check_clusters_per_set_accepts(value, expected):
    """None, an int or a (min, max) pair are accepted."""
    assert check_clusters_per_set(value) == expected


@pytest.mark.parametrize("value", [0, -1, (5, 3), (0, 2), "x", 2.5, True, (1, 2, 3), ("a", 3)])
def test_check_clusters_per_set_rejects(value):
    """Zero clusters, reversed ranges, floats, bools and strings raise ValueError."""
    with pytest.raises(ValueError):
        check_clusters_per_set(value)


def test_sampler_validates_arguments():
    """The sampler validates set_size and clusters_per_set at construction."""
    labels = np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match="set_size"):
        ClusterSetSampler(labels, set_size=1)
    with pytest.raises(ValueError, match="clusters_per_set"):
        ClusterSetSampler(labels, set_size=3, clusters_per_set=(3, 1))


# --------------------------------------------------------------------------- draws


def _data(seed: int = 0):
    """Rows with labels in 3 groups: sizes of classes differ; some rows unlabelled (-1)."""
    rng = np.random.default_rng(seed)
    labels, groups = [], []
    # group 0: 4 classes of sizes 6, 3, 1, 10 ; group 1: 2 classes of sizes 2, 5 ; group 2: 3 rows
    for g, class_sizes in enumerate([[6, 3, 1, 10], [2, 5], [1, 1, 1]]):
        for c, size in enumerate(class_sizes):
            labels += [10 * g + c] * size
            groups += [g] * size
    labels += [-1] * 8
    groups += [0, 1, 2, 0, 1, 2, 0, 1]
    labels, groups = np.array(labels), np.array(groups)
    order = rng.permutation(len(labels))
    return labels[order], groups[order]


def _check_draw(rows, drawn, labels, groups):
    """Invariants common to every draw; returns the drawn group."""
    assert rows.ndim == 1 and drawn.shape == rows.shape
    assert len(np.unique(rows)) == len(rows)  # no replacement
    assert np.all(labels[rows] >= 0)
    group_ids = np.unique(groups[rows])
    assert len(group_ids) == 1
    k = len(np.unique(drawn))
    assert set(np.unique(drawn)) == set(range(k))
    # same original class <=> same drawn label
    original = labels[rows]
    assert np.array_equal(original[:, None] == original[None, :], drawn[:, None] == drawn[None, :])
    return int(group_ids[0])


def test_draw_invariants():
    """Sets lie in one group, skip -1 rows, relabel classes 0..k-1 consistently, draw without replacement."""
    labels, groups = _data()
    sampler = ClusterSetSampler(labels, groups, set_size=(2, 30))
    rng = np.random.default_rng(0)
    seen_groups = set()
    for _ in range(200):
        rows, drawn = sampler.draw(rng)
        seen_groups.add(_check_draw(rows, drawn, labels, groups))
    assert seen_groups == {0, 1, 2}


def test_draw_class_counts_within_class_sizes():
    """Every drawn cluster has between 1 and its class's number of labelled rows."""
    labels, groups = _data(1)
    sampler = ClusterSetSampler(labels, groups, set_size=(2, 25))
    rng = np.random.default_rng(1)
    for _ in range(200):
        rows, drawn = sampler.draw(rng)
        for c in np.unique(drawn):
            original = labels[rows[drawn == c]]
            assert len(np.unique(original)) == 1
            count = int((drawn == c).sum())
            assert 1 <= count <= int((labels == original[0]).sum())


@pytest.mark.parametrize("size", [2, 5, 9, 20])
def test_draw_size_when_group_large_enough(size):
    """A single group with >= size labelled rows gives exactly the requested size."""
    labels = np.repeat(np.arange(4), [6, 3, 1, 10])
    sampler = ClusterSetSampler(labels, set_size=(2, 40))
    rng = np.random.default_rng(size)
    for _ in range(30):
        rows, drawn = sampler.draw(rng, set_size=size)
        assert len(rows) == len(drawn) == size
        _check_draw(rows, drawn, labels, np.zeros(len(labels), dtype=int))


def test_draw_size_capped_by_small_group():
    """When the group has fewer labelled rows than asked, the set is the whole labelled group."""
    labels = np.array([0, 0, 1, -1, 2, 2, 2, -1])
    sampler = ClusterSetSampler(labels, set_size=(2, 40))
    rng = np.random.default_rng(2)
    for size in [6, 7, 40, None]:
        rows, drawn = sampler.draw(rng, set_size=size)
        assert len(rows) == 6
        assert set(rows) == set(np.flatnonzero(labels >= 0))
        assert len(np.unique(drawn)) == 3


def test_draw_size_capped_per_group():
    """With groups of different sizes, a set's size is min(requested, its group's labelled rows)."""
    labels, groups = _data(2)
    group_size = {g: int(((groups == g) & (labels >= 0)).sum()) for g in range(3)}
    assert group_size == {0: 20, 1: 7, 2: 3}
    sampler = ClusterSetSampler(labels, groups, set_size=12)
    rng = np.random.default_rng(3)
    for _ in range(100):
        rows, drawn = sampler.draw(rng)
        g = _check_draw(rows, drawn, labels, groups)
        assert len(rows) == min(12, group_size[g])


@pytest.mark.parametrize(("clusters", "size"), [(1, 5), (2, 8), ((2, 3), 10), ((1, 4), 4), (4, 20), ((3, 4), 12)])
def test_draw_clusters_per_set_range(clusters, size):
    """The number of clusters lies in clusters_per_set whenever the group can satisfy it."""
    labels = np.repeat(np.arange(5), [8, 8, 8, 8, 8])
    sampler = ClusterSetSampler(labels, set_size=size, clusters_per_set=clusters)
    low, high = check_clusters_per_set(clusters)
    rng = np.random.default_rng(4)
    seen = set()
    for _ in range(60):
        rows, drawn = sampler.draw(rng)
        assert len(rows) == size
        k = len(np.unique(drawn))
        assert low <= k <= high
        seen.add(k)
    assert seen == set(range(low, high + 1))


def test_draw_clusters_fewer_than_needed_gives_smaller_set():
    """Asking for fewer clusters than can fill the set yields k=max and a smaller set (largest classes)."""
    labels = np.repeat(np.arange(4), [3, 3, 3, 3])
    sampler = ClusterSetSampler(labels, set_size=10, clusters_per_set=2)
    rng = np.random.default_rng(5)
    for _ in range(20):
        rows, drawn = sampler.draw(rng)
        assert len(np.unique(drawn)) == 2
        assert len(rows) == 6


def test_draw_clusters_more_than_group_has():
    """Asking for more clusters than the group has uses every class."""
    labels = np.repeat(np.arange(3), [5, 5, 5])
    sampler = ClusterSetSampler(labels, set_size=9, clusters_per_set=(5, 6))
    rng = np.random.default_rng(6)
    for _ in range(20):
        rows, drawn = sampler.draw(rng)
        assert len(rows) == 9
        assert len(np.unique(drawn)) == 3


def test_default_cluster_range_covers_feasible_values():
    """By default k is drawn over every value that can fill the set (Algorithm 1)."""
    labels = np.repeat(np.arange(6), [10, 2, 2, 2, 2, 2])
    sampler = ClusterSetSampler(labels, set_size=12)
    rng = np.random.default_rng(7)
    ks = {len(np.unique(sampler.draw(rng)[1])) for _ in range(300)}
    # at least 2 classes are needed to fill 12 (10 + 2); at most 6 exist
    assert ks == {2, 3, 4, 5, 6}


def test_default_cluster_count_is_uniform_up_to_the_set_size():
    """Probe 59c: with more classes than rows, k is drawn uniformly over 1..set_size, never up to the number of classes.

    A set of 3 rows from 12 classes holds 1, 2 or 3 clusters, each a third of the time; drawing k up to 12 (and
    capping it at 3) made k = 3 come ~10/12 of the time.
    """
    labels = np.repeat(np.arange(12), 5)
    sampler = ClusterSetSampler(labels, set_size=3)
    rng = np.random.default_rng(0)
    ks = np.array([len(np.unique(sampler.draw(rng)[1])) for _ in range(1200)])
    assert ks.min() >= 1 and ks.max() <= 3
    freq = np.bincount(ks, minlength=4)[1:] / len(ks)
    # Seed 0 gives about (0.33, 0.32, 0.34), a margin of over 4 standard errors; the flawed draw gave ~0.83 for k = 3.
    np.testing.assert_allclose(freq, 1 / 3, atol=0.06)


def test_draw_small_classes_fill_set_with_large_class():
    """Chosen classes are swapped for larger ones so the set can be filled."""
    labels = np.repeat(np.arange(5), [1, 1, 1, 1, 20])
    sampler = ClusterSetSampler(labels, set_size=20, clusters_per_set=1)
    rng = np.random.default_rng(8)
    for _ in range(20):
        rows, drawn = sampler.draw(rng)
        assert len(rows) == 20
        assert np.all(labels[rows] == 4)
        assert np.all(drawn == 0)


def test_draw_reproducible_for_same_seed():
    """The same Generator seed gives the same set."""
    labels, groups = _data(3)
    sampler = ClusterSetSampler(labels, groups, set_size=(2, 20))
    a = [sampler.draw(np.random.default_rng(42)) for _ in range(3)]
    rng = np.random.default_rng(42)
    b = sampler.draw(rng)
    for rows, drawn in a:
        assert np.array_equal(rows, b[0]) and np.array_equal(drawn, b[1])
    c = sampler.draw(rng)
    assert not (len(c[0]) == len(b[0]) and np.array_equal(c[0], b[0]))


@pytest.mark.parametrize(
    ("labels", "groups"),
    [
        (np.full(6, -1), None),
        (np.array([0, -1, 1, -1, 2, -1]), np.array([0, 0, 1, 1, 2, 2])),
        (np.array([0, 1, 2]), np.array([0, 1, 2])),
        (np.array([3]), None),
        (np.array([], dtype=int), None),
    ],
)
def test_sampler_raises_without_two_labelled_rows_in_a_group(labels, groups):
    """No group with >= 2 labelled rows -> ValueError."""
    with pytest.raises(ValueError, match="at least 2 labelled rows"):
        ClusterSetSampler(labels, groups, set_size=2)


def test_sampler_skips_groups_with_single_labelled_row():
    """Groups with one labelled row are never drawn from."""
    labels = np.array([0, 1, 0, 1, 5, -1])
    groups = np.array([0, 0, 0, 0, 1, 1])
    sampler = ClusterSetSampler(labels, groups, set_size=3)
    assert len(sampler.groups) == 1
    rng = np.random.default_rng(9)
    for _ in range(20):
        rows, _ = sampler.draw(rng)
        assert set(rows) <= {0, 1, 2, 3}


def test_group_weights_proportional_to_labelled_rows():
    """Groups are weighted by their labelled row count."""
    labels, groups = _data(4)
    sampler = ClusterSetSampler(labels, groups, set_size=4)
    assert np.allclose(sorted(sampler.group_weights), sorted(np.array([20, 7, 3]) / 30))


def test_draw_set_size_covers_range():
    """draw_set_size is uniform over the whole inclusive (min, max) range."""
    sampler = ClusterSetSampler(np.repeat([0, 1], 20), set_size=(3, 8))
    rng = np.random.default_rng(10)
    sizes = [sampler.draw_set_size(rng) for _ in range(400)]
    assert set(sizes) == set(range(3, 9))
    sizes = {len(sampler.draw(rng)[0]) for _ in range(300)}
    assert sizes == set(range(3, 9))


# --------------------------------------------------------------------------- dataset and collation


def _dataset(seed=0, n_sets=12, batch_size=4):
    labels = np.repeat(np.arange(4), 10)
    X = np.random.default_rng(0).normal(size=(40, 2)).astype(np.float32)
    X[:, 0] = np.arange(40)  # encode the row index to identify drawn rows
    sampler = ClusterSetSampler(labels, set_size=(3, 30))
    return SampledSetsDataset(X, sampler, n_sets=n_sets, batch_size=batch_size, seed=seed), labels


def test_dataset_items_depend_only_on_seed_epoch_index():
    """The same (seed, epoch, i) gives the same item in any order and in a fresh dataset."""
    ds, _ = _dataset()
    assert len(ds) == 12
    first = [ds[i] for i in range(len(ds))]
    again = [ds[i] for i in reversed(range(len(ds)))][::-1]
    fresh, _ = _dataset()
    for (x1, y1), (x2, y2), (x3, y3) in zip(first, again, [fresh[i] for i in range(12)], strict=True):
        assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
        assert np.array_equal(x1, x3) and np.array_equal(y1, y3)


def test_dataset_epoch_and_seed_change_sets():
    """Another epoch, or another seed, redraws the sets."""
    ds, _ = _dataset()
    before = [ds[i][0] for i in range(len(ds))]
    ds.epoch = 1
    after = [ds[i][0] for i in range(len(ds))]
    assert any(a.shape != b.shape or not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    ds.epoch = 0
    assert all(np.array_equal(a, ds[i][0]) for i, a in enumerate(before))
    other, _ = _dataset(seed=1)
    assert any(a.shape != other[i][0].shape or not np.array_equal(a, other[i][0]) for i, a in enumerate(before))


def test_dataset_redraws_every_set_in_the_next_epoch():
    """Probe 59c: "n_sets training sets, redrawn every epoch": set i of epoch e depends on the epoch, so none of an
    epoch's sets comes back in the next one (a draw seeded without the epoch gave every epoch the same sets)."""
    labels = np.repeat(np.arange(6), 40)
    X = np.random.default_rng(0).normal(size=(len(labels), 3)).astype(np.float32)
    ds = SampledSetsDataset(X, ClusterSetSampler(labels, set_size=30), n_sets=8, batch_size=4, seed=0)
    first = [ds[i][0] for i in range(8)]
    assert all(np.array_equal(a, ds[i][0]) for i, a in enumerate(first))  # the same epoch: the same sets
    ds.epoch = 1
    second = [ds[i][0] for i in range(8)]
    assert not any(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_dataset_blocks_share_size():
    """Items in the same block of batch_size share one drawn size; labels match the rows."""
    ds, labels = _dataset(n_sets=40, batch_size=5)
    sizes = [len(ds[i][0]) for i in range(len(ds))]
    blocks = [sizes[b : b + 5] for b in range(0, 40, 5)]
    assert all(len(set(block)) == 1 for block in blocks)
    assert len({block[0] for block in blocks}) > 1
    for i in range(0, 40, 7):
        x, y = ds[i]
        rows = x[:, 0].astype(int)
        original = labels[rows]
        assert np.array_equal(original[:, None] == original[None, :], y[:, None] == y[None, :])


def test_pad_sets():
    """Sets of different sizes are zero-padded to the largest, with a key mask."""
    sets = [np.ones((3, 2)), 2 * np.ones((5, 2)), np.ones((1, 2))]
    X, mask = pad_sets(sets)
    assert X.shape == (3, 5, 2) and X.dtype == torch.float32
    assert mask.shape == (3, 5) and mask.dtype == torch.bool
    assert mask.sum(dim=1).tolist() == [3, 5, 1]
    assert torch.equal(mask[0], torch.tensor([True, True, True, False, False]))
    assert torch.all(X[0, 3:] == 0) and torch.all(X[2, 1:] == 0)
    assert torch.all(X[1] == 2) and torch.all(X[0, :3] == 1)


def test_pad_sets_point_shape():
    """Points with a multi-dimensional shape are padded along the set axis only."""
    X, mask = pad_sets([np.ones((2, 3, 4)), np.ones((4, 3, 4))])
    assert X.shape == (2, 4, 3, 4)
    assert mask.tolist() == [[True, True, False, False], [True] * 4]


def test_collate_sets():
    """Collation gives {'X', 'mask'} and labels padded with -1."""
    items = [(np.zeros((2, 3)), np.array([1, 0])), (np.ones((4, 3)), np.array([0, 1, 1, 2]))]
    features, y = collate_sets(items)
    assert set(features) == {"X", "mask"}
    assert features["X"].shape == (2, 4, 3)
    assert y.dtype == torch.long
    assert y.tolist() == [[1, 0, -1, -1], [0, 1, 1, 2]]
    assert torch.equal(features["mask"], y >= 0)


def test_collate_dataset_batch():
    """A DataLoader over SampledSetsDataset with collate_sets yields consistent batches."""
    ds, _ = _dataset(n_sets=8, batch_size=4)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_sets)
    for features, y in loader:
        assert features["X"].shape[:2] == y.shape == features["mask"].shape
        assert torch.equal(features["mask"], y >= 0)


def test_set_size_and_clusters_per_set_take_the_arrays_their_constraints_accept():
    """Probe 62c: ContextualKernel(clusters_per_set=np.array([1, 2])) passed its parameter constraint ("array-like")
    and then failed in fit, where set_size=np.array([4, 8]) worked."""
    from skabc.sampling import check_clusters_per_set, check_set_size

    assert check_clusters_per_set(np.array([1, 2])) == (1, 2) == check_clusters_per_set((1, 2))
    assert check_clusters_per_set(np.array(3)) == (3, 3) and check_set_size(np.array(40)) == (40, 40)
    assert check_set_size(np.array([4, 8])) == (4, 8)
    with pytest.raises(ValueError, match="clusters_per_set"):
        check_clusters_per_set(np.array([[1, 2]]))


def test_the_sampler_names_labels_and_groups_it_cannot_use():
    """Probe 62c: string labels raised numpy's comparison error, and groups of another length an IndexError."""
    from skabc.sampling import ClusterSetSampler

    with pytest.raises(ValueError, match=r"labels must be a 1-D array of integer class codes .* got dtype <U1"):
        ClusterSetSampler(np.array(list("aabb")), set_size=2)
    with pytest.raises(ValueError, match=r"groups must hold one code per label \(4\), got shape \(3,\)"):
        ClusterSetSampler(np.array([0, 0, 1, 1]), np.array([0, 0, 1]), set_size=2)
    assert len(ClusterSetSampler(np.array([0, 0, 1, 1]), np.array([0, 0, 0, 0]), set_size=2).groups) == 1
