"""Large sets through a random subsample (ABCClustering(max_samples=...), skabc._subsample)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler

from skabc import ABCClustering
from skabc._subsample import MAX_SAMPLES_AUTO, draw_rows, extend_labels, spread_affinity


@pytest.fixture(scope="module")
def blobs():
    return make_blobs(n_samples=1200, centers=[[0, 0], [6, 0], [0, 6]], cluster_std=0.7, random_state=0)


def test_a_set_past_max_samples_is_clustered_through_its_subsample(blobs):
    X, y = blobs
    model = ABCClustering(max_samples=300, random_state=0).fit(X)
    assert model.max_samples_ == 300 and model.labels_.shape == (1200,)
    assert model.n_clusters_ == 3 and adjusted_rand_score(y, model.labels_) > 0.98
    # The affinity is the subsample's, spread into the n x n frame: 300 rows and columns hold it all.
    A = model.affinity_matrix_
    assert sp.issparse(A) and A.shape == (1200, 1200)
    assert len(np.unique(A.nonzero()[0])) == 300
    # Seeded: the same random_state draws the same points; predict takes the same path.
    again = ABCClustering(max_samples=300, random_state=0).fit(X)
    np.testing.assert_array_equal(again.labels_, model.labels_)
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    other = ABCClustering(max_samples=300, random_state=1).fit(X)
    assert not np.array_equal(np.unique(other.affinity_matrix_.nonzero()[0]), np.unique(A.nonzero()[0]))


def test_a_set_within_max_samples_is_clustered_whole(blobs):
    X, _ = blobs
    model = ABCClustering(max_samples=None, random_state=0).fit(X[:400])
    assert model.max_samples_ is None and isinstance(model.affinity_matrix_, np.ndarray)
    assert model.affinity_matrix_.shape == (400, 400)
    whole = ABCClustering(max_samples=400, random_state=0).fit(X[:400])
    np.testing.assert_array_equal(whole.labels_, model.labels_)


def test_auto_means_a_subsample_for_the_learned_affinity_only(blobs):
    X, _ = blobs
    assert ABCClustering().fit(X[:50]).max_samples_ == MAX_SAMPLES_AUTO
    assert ABCClustering(affinity="rbf", n_clusters=3).fit(X[:50]).max_samples_ is None
    with pytest.raises(ValueError, match=r"max_samples=100 subsamples sets of points; affinity='precomputed'"):
        ABCClustering(affinity="precomputed", max_samples=100).fit(np.eye(150))


def test_a_feature_affinity_can_be_subsampled_too(blobs):
    X, y = blobs
    model = ABCClustering(affinity="nearest_neighbors", n_clusters=3, max_samples=400, random_state=0).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.98 and model.affinity_matrix_.shape == (1200, 1200)


def test_groups_are_subsampled_each_on_its_own(blobs):
    X, y = blobs
    groups = np.repeat([0, 1], 600)
    model = ABCClustering(max_samples=200, random_state=0).fit(X, groups=groups)
    assert model.affinity_matrix_.shape == (1200, 1200)
    for g in (0, 1):
        rows = groups == g
        assert adjusted_rand_score(y[rows], model.labels_[rows]) > 0.95


def test_extend_labels_votes_among_the_nearest_drawn_points():
    X = np.array([[0.0], [0.1], [0.2], [10.0], [10.1], [10.2], [0.05], [10.15]])
    rows = np.arange(6)
    labels = np.array([0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(extend_labels(X, rows, labels), [0, 0, 0, 1, 1, 1, 0, 1])


def test_draw_rows_and_spread_affinity():
    assert draw_rows(100, None, 0) is None and draw_rows(100, 100, 0) is None
    rows = draw_rows(100, 10, 0)
    assert len(rows) == 10 and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(rows, draw_rows(100, 10, 0))
    block = np.arange(9.0).reshape(3, 3)
    spread = spread_affinity(block, np.array([1, 4, 7]), 8).toarray()
    np.testing.assert_array_equal(spread[np.ix_([1, 4, 7], [1, 4, 7])], block)
    assert spread.sum() == block.sum()


def test_a_saved_model_keeps_its_max_samples(blobs, tmp_path):
    X, _ = blobs
    model = ABCClustering(max_samples=250, random_state=0).fit(X)
    model.save(tmp_path / "model.safetensors")
    loaded = ABCClustering.load(tmp_path / "model.safetensors")
    assert loaded.max_samples_ == 250
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_max_samples_below_a_given_n_clusters_is_refused():
    """A probe: max_samples=3 with n_clusters=4 gave 3 clusters and said every point became its own cluster."""
    X, _ = make_blobs(300, centers=4, random_state=0)
    with pytest.raises(ValueError, match="max_samples=3 is below n_clusters=4"):
        ABCClustering(n_clusters=4, max_samples=3, random_state=0).fit(X)


def test_labels_of_a_subsampled_set_are_numbered_in_order_of_first_appearance():
    """A probe: with max_samples the subsample's ids were kept, e.g. [2 3 1 0] in order of first appearance."""
    X, _ = make_blobs(400, centers=5, random_state=1)
    labels = ABCClustering(max_samples=60, random_state=0).fit(X).labels_
    _, first = np.unique(labels, return_index=True)
    np.testing.assert_array_equal(labels[np.sort(first)], np.arange(len(first)))
    assert len(first) > 1


@pytest.mark.parametrize("scale", [1e-200, 1e160, 1e200, 2.0**-1030])
def test_labels_past_max_samples_do_not_depend_on_the_scale(scale):
    """A probe: the vote that labels the rows outside the subsample standardised values whose variance under- or
    overflowed: ARI 0.63 at 1e-200 (2,500 rows), scikit-learn errors at 1e160 and 1e200.  Probe 63c: below 2**-1022
    (subnormal values) the rescaling factor itself overflowed, and scikit-learn called X infinite."""
    X, _ = make_blobs(800, centers=3, random_state=0)
    expected = ABCClustering(random_state=0, max_samples=400).fit_predict(X)
    np.testing.assert_array_equal(ABCClustering(random_state=0, max_samples=400).fit_predict(X * scale), expected)


def test_a_subsample_over_the_memory_limit_says_max_samples_sets_its_size():
    """A probe: the error named 'a set of 2000 points' for a 3,000-row X, and not max_samples, the direct fix."""
    from skabc.exceptions import AffinityTooLargeError
    from skabc.pretrained import load

    X = np.random.default_rng(0).normal(size=(300, 2))
    kernel = load("generic").set_params(memory_limit=1e4, affinity_mode="dense")
    with pytest.raises(AffinityTooLargeError, match=r"300 rows was clustered on a subsample of max_samples=200 rows"):
        ABCClustering(kernel=kernel, max_samples=200, random_state=0).fit(X)


def _tied_offset_set():
    """Integer-valued features (tied distances) with a column far from zero: what a sparse search breaks."""
    X, _ = make_blobs(800, n_features=6, centers=3, random_state=0)
    X = np.round(X / 2)
    X[X == 0] = 0.0
    X[:, 0] += 1e8
    return X


def test_extend_labels_of_sparse_and_dense_X_agree():
    """A probe: a sparse X was standardised without centring (a column at 1e8 swamped the float64 distances)
    and searched by the sparse brute force (ties broken otherwise): other labels than the same X dense."""
    X = _tied_offset_set()
    rows = np.sort(np.random.default_rng(0).choice(len(X), 150, replace=False))
    labels = (X[rows, 1] > np.median(X[rows, 1])).astype(np.int64)
    dense = extend_labels(X, rows, labels)
    for fmt in ("csr", "csc", "coo"):
        np.testing.assert_array_equal(extend_labels(sp.csr_matrix(X).asformat(fmt), rows, labels), dense)
    tiny = X * 2.0**-1060  # subnormal values (probe 63c): both rescaled exactly, as at scale 1
    np.testing.assert_array_equal(extend_labels(sp.csr_matrix(tiny), rows, labels), extend_labels(tiny, rows, labels))


def test_extend_labels_in_blocks_keeps_dense_and_sparse_equal(monkeypatch):
    import skabc._subsample as subsample

    X = _tied_offset_set()
    rows = np.sort(np.random.default_rng(1).choice(len(X), 120, replace=False))
    labels = np.arange(len(rows)) % 3
    whole = extend_labels(X, rows, labels)
    monkeypatch.setattr(subsample, "DENSE_BLOCK_ENTRIES", 1000)  # 1 column, 166 rows a block
    blocked = extend_labels(X, rows, labels)
    np.testing.assert_array_equal(extend_labels(sp.csr_matrix(X), rows, labels), blocked)
    assert adjusted_rand_score(whole, blocked) > 0.99


def test_a_subsampled_sparse_set_gets_the_labels_of_the_same_set_dense():
    X = _tied_offset_set().astype(np.float32)
    dense = ABCClustering(random_state=0, max_samples=150).fit_predict(X)
    np.testing.assert_array_equal(ABCClustering(random_state=0, max_samples=150).fit_predict(sp.csr_matrix(X)), dense)


def test_extend_labels_votes_in_the_rows_as_given_where_they_show_the_partition_clearly_better():
    """Probe 54d: word counts standardised blow up their rare columns; the 1,000 rows of 3,000 left out of the
    subsample were labelled at ARI 0.10 where the subsample scored 0.98. Now the vote takes the rows as given
    when the subsample's own labels agree with their neighbours there clearly more often."""
    rng = np.random.default_rng(0)
    n, d = 600, 3000
    y = rng.integers(0, 4, n)
    topics = rng.random((4, d)) ** 8
    X = np.array([np.bincount(rng.choice(d, 40, p=topics[c] / topics[c].sum()), minlength=d) for c in y], float)
    rows, others = np.arange(400), np.arange(400, n)
    extended = extend_labels(sp.csr_matrix(X), rows, y[rows])
    np.testing.assert_array_equal(extended, extend_labels(X, rows, y[rows]))  # sparse and dense alike
    assert adjusted_rand_score(y[others], extended[others]) > 0.95
    from skabc._subsample import SPACE_MARGIN, _self_agreement

    standardised = StandardScaler().fit_transform(X)[rows]
    assert _self_agreement(X[rows], y[rows]) > _self_agreement(standardised, y[rows]) + SPACE_MARGIN
    # Where both show it alike (blobs), the standardised features stay: the labels of earlier versions.
    Xb, yb = make_blobs(300, centers=3, random_state=0)
    Xb[:, 1] *= 50
    assert _self_agreement(Xb, yb) <= _self_agreement(StandardScaler().fit_transform(Xb), yb) + SPACE_MARGIN


def test_extend_labels_does_not_depend_on_the_label_ids_or_one_row_of_a_small_subsample():
    """Review 54e: ties of the leave-one-out vote went to the lowest id, so renaming two labels flipped the vote's
    space (39 of 200 small sets); on a subsample of 12 or 30 rows one row's noise outweighed the 0.02 margin."""
    changed = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        y = rng.integers(0, 2, 180)
        X = np.c_[y + rng.normal(0, 0.8, 180), rng.normal(0, 3, 180)]
        rows = np.arange(60)
        np.testing.assert_array_equal(extend_labels(X, rows, y[rows]), 1 - extend_labels(X, rows, 1 - y[rows]))
        for n_sub in (12, 30):  # standardising is right here; the rows as given win only by a row or two
            y = rng.integers(0, 3, 4 * n_sub)
            X = np.c_[y + rng.normal(0, 0.35, 4 * n_sub), rng.normal(0, 4, 4 * n_sub), rng.normal(0, 1, (4 * n_sub, 2))]
            rows = np.sort(rng.choice(4 * n_sub, n_sub, replace=False))
            standardised = StandardScaler().fit_transform(X)
            vote = KNeighborsClassifier(n_neighbors=min(10, n_sub), weights="distance").fit(standardised[rows], y[rows])
            expected = vote.predict(standardised)
            expected[rows] = y[rows]
            changed += not np.array_equal(extend_labels(X, rows, y[rows]), expected)
    assert changed == 0


def test_self_agreement_counts_a_tie_as_the_share_of_the_tied_labels():
    # Probe 59c: four rows, each the others' neighbours; rows 0 and 3 see three labels once each (their own one of
    # three tied: 1/3), rows 1 and 2 see label 0 twice (0): 1/6. Counted fully, a tie gave 1/2.
    from skabc._subsample import _self_agreement

    assert _self_agreement(np.arange(4.0)[:, None], np.array([0, 1, 2, 0])) == pytest.approx(1 / 6)


def test_auto_max_samples_holds_a_given_n_clusters():
    """Probe 69e: 'auto' (2,000) skipped the check an int max_samples gets, so n_clusters=2100 on 2,400 rows gave
    2,000 clusters and a warning that the set had 2,000 points.  'auto' now resolves to n_clusters where that is
    more; an int below it is still refused."""
    from skabc._resolve import resolve_settings

    model = ABCClustering(n_clusters=MAX_SAMPLES_AUTO + 100)
    resolve_settings(model, {})
    assert model.max_samples_ == MAX_SAMPLES_AUTO + 100
    for n_clusters, expected in ((3, MAX_SAMPLES_AUTO), (None, MAX_SAMPLES_AUTO)):
        model = ABCClustering(n_clusters=n_clusters)
        resolve_settings(model, {})
        assert model.max_samples_ == expected
    model = ABCClustering(n_clusters=MAX_SAMPLES_AUTO + 100, affinity="rbf")
    resolve_settings(model, {})
    assert model.max_samples_ is None


def test_the_vote_of_a_subsample_of_many_small_clusters_raises_no_warning_about_y():
    """Probe 69e: scikit-learn's "`y` could represent a regression problem" reached a fit that passed no y (the
    vote's KNeighborsClassifier, with more labels than half the subsample's rows)."""
    X, _ = make_blobs(600, centers=12, cluster_std=0.2, center_box=(-50, 50), random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ABCClustering(n_clusters=25, max_samples=40, random_state=0).fit(X)
    assert model.n_clusters_ == 25
    assert not [w for w in caught if "regression problem" in str(w.message)]
