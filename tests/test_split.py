"""The split of clusters that are two touching Gaussian blobs (skabc.spectral.split) and ABCClustering's use of it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import forge, read_meta, read_tensors
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

import skabc.spectral.mixture as mixture
from skabc import ABCClustering
from skabc.spectral.mixture import BIC_PATIENCE, bic_mixture_partition, fit_mixture, mixture_features
from skabc.spectral.split import MAX_VALLEY_DENSITY, SPLIT_SUFFIX, split_gaussian_clusters, valley_density


def _touching(seed: int = 0, gap: float = 4.0, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0, 1, (n, 2)), rng.normal([gap, 0], 1, (n, 2))])
    return X, np.repeat([0, 1], n)


def _arc(n: int = 400, seed: int = 0, span: float = 1.6 * np.pi) -> np.ndarray:
    """One evenly dense arc: two arms that a mixture sees as two lobes, with no density valley between them."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, span, n)
    return np.column_stack([np.cos(angle), np.sin(angle)]) * 3 + rng.normal(0, 0.15, (n, 2))


def test_two_touching_blobs_labelled_one_cluster_are_split():
    X, y = _touching()
    labels = split_gaussian_clusters(X, np.zeros(len(X), dtype=int), max_clusters=10)
    assert adjusted_rand_score(y, labels) > 0.9
    assert labels[0] == 0 and set(np.unique(labels)) == {0, 1}  # compact ids, in order of first appearance


@pytest.mark.parametrize("make", [
    lambda: np.random.default_rng(0).normal(size=(400, 2)),          # one Gaussian
    lambda: _arc(),                                                  # one curved cluster of two arms
    lambda: np.random.default_rng(0).uniform(-1, 1, (400, 2)),       # one uniform square
])
def test_one_cluster_that_is_not_two_blobs_is_kept_whole(make):
    X = make()
    labels = np.zeros(len(X), dtype=int)
    assert split_gaussian_clusters(X, labels, max_clusters=10) is labels


@pytest.mark.parametrize("seed", range(5))
def test_one_heavy_tailed_blob_is_not_cut_into_a_core_and_a_shell(seed):
    """A review (/work/probe42r): with the valley measured against the whole cluster's median, 7 of 10 Student-t
    clusters (df 3) were split into a dense core and the sparse shell around it, which meet where the density only
    falls off; the valley is now measured against each half."""
    X = np.random.default_rng(seed).standard_t(3, (600, 2))
    labels = np.zeros(600, dtype=int)
    assert split_gaussian_clusters(X, labels, max_clusters=10) is labels


def test_split_gaussian_clusters_checks_its_inputs():
    X, _ = _touching()
    assert split_gaussian_clusters(X.tolist(), [0] * len(X), max_clusters=10).max() == 1  # array-likes
    with pytest.raises(ValueError, match="labels must be 400 non-negative integer ids"):
        split_gaussian_clusters(X, np.zeros(300, dtype=int), max_clusters=10)
    with pytest.raises(ValueError, match="labels must be"):
        split_gaussian_clusters(X, np.zeros(400), max_clusters=10)
    # Too few rows for two halves of 10: the labels come back as given (one row has no spread to fit).
    for rows in (X[:1], X[:19]):
        labels = np.zeros(len(rows), dtype=int)
        assert split_gaussian_clusters(rows, labels, max_clusters=10) is labels


def test_split_gaussian_clusters_refuses_negative_labels():
    """Probe 59c: labels must be non-negative integer ids; a -1 (noise) label was silently split as a cluster."""
    X, _ = _touching(n=60)
    labels = np.zeros(len(X), dtype=int)
    labels[:5] = -1
    with pytest.raises(ValueError, match="non-negative integer ids"):
        split_gaussian_clusters(X, labels, max_clusters=10)


# ------------------------------------------------------------------ the BIC mixture partition (probe 59c)
def _five_blobs() -> np.ndarray:
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0], [20, 0], [0, 20], [20, 20], [40, 40]])
    return np.vstack([c + rng.normal(size=(40, 2)) for c in centers])


def test_mixture_partition_tries_no_k_above_max_clusters():
    """max_clusters is the "Largest k tried": 5 well-separated blobs capped at 2 or 3 give at most that many."""
    X = _five_blobs()
    assert len(np.unique(bic_mixture_partition(X, 10, 0))) == 5  # uncapped, BIC finds the 5 blobs
    for cap in (2, 3):
        assert len(np.unique(bic_mixture_partition(X, cap, 0))) <= cap


def test_mixture_partition_ids_are_compact_where_a_component_predicts_no_row(monkeypatch):
    """The labels are ids 0 to k - 1 even where the best mixture leaves a component empty (stubbed here: component 1
    predicts no row); predict's labels were returned as they were."""
    real = mixture.fit_mixture

    class SkipsComponentOne:
        def __init__(self, fitted, k):
            self.fitted, self.k = fitted, k

        def bic(self, Z):
            return self.fitted.bic(Z)

        def predict(self, Z):
            labels = self.fitted.predict(Z)
            return np.where(labels >= 1, labels + 1, labels) if self.k >= 2 else labels

    monkeypatch.setattr(mixture, "fit_mixture", lambda Z, k, cov, seed: SkipsComponentOne(real(Z, k, cov, seed), k))
    rng = np.random.default_rng(0)
    labels = mixture.bic_mixture_partition(np.vstack([rng.normal(size=(50, 2)), rng.normal(size=(50, 2)) + 30]), 5, 0)
    k = len(np.unique(labels))
    assert k >= 2 and set(labels.tolist()) == set(range(k))


@pytest.mark.parametrize("seed", [0, 4])
def test_mixture_partition_waits_bic_patience_values_for_a_better_bic(seed):
    """k grows from 1 until BIC has not improved for BIC_PATIENCE values in a row: the k returned is the documented
    search's (on these sets, stopping at the first worse BIC gives another k)."""
    rng = np.random.default_rng(seed)
    k = rng.integers(3, 9)
    centers, sizes = rng.uniform(-10, 10, (k, 2)), rng.integers(20, 60, k)
    X = np.vstack([c + rng.normal(size=(m, 2)) * rng.uniform(0.3, 2) for c, m in zip(centers, sizes, strict=True)])
    Z = mixture_features(X, 0)
    bic = {j: fit_mixture(Z, j, "full", 0).bic(Z) for j in range(1, 13)}

    def search(patience):
        best = 1
        for j in range(2, 13):
            if bic[j] < bic[best]:
                best = j
            elif j - best >= patience:
                break
        return best

    assert search(1) != search(BIC_PATIENCE)  # the data are such that the patience matters
    assert len(np.unique(bic_mixture_partition(X, 20, 0))) == search(BIC_PATIENCE)


@pytest.mark.parametrize("scale", [1e-160, 1e-13, 1e160])
def test_the_split_does_not_depend_on_the_units(scale):
    """Spreads of 1e160-scale values overflowed (a RuntimeWarning, then no split); tiny units lost every column."""
    X, _ = _touching()
    expected = split_gaussian_clusters(X, np.zeros(len(X), dtype=int), max_clusters=10)
    assert expected.max() == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = split_gaussian_clusters(X * scale, np.zeros(len(X), dtype=int), max_clusters=10)
    np.testing.assert_array_equal(got, expected)


def test_an_arc_has_no_density_valley_where_touching_blobs_have_one():
    """What tells one curved cluster (two lobes to a mixture) from two blobs: the split was designed on it."""
    X, y = _touching(gap=5.0)
    assert valley_density(X, y.astype(bool)) < MAX_VALLEY_DENSITY - 0.2  # 0.40
    arc = _arc()
    arms = np.arctan2(arc[:, 1], arc[:, 0]) % (2 * np.pi) > 0.8 * np.pi  # the two halves of the arc
    assert valley_density(arc, arms) > MAX_VALLEY_DENSITY + 0.05  # 0.80
    apart = np.vstack([X[:200], X[200:] + np.array([50.0, 0.0])])
    assert valley_density(apart, y.astype(bool)) == 0.0  # no point has neighbours in both: no interface


def test_wide_sets_small_clusters_and_max_clusters_are_left_alone():
    X, _ = _touching()
    wide = np.hstack([X, np.random.default_rng(1).normal(size=(len(X), 10))])
    labels = np.zeros(len(X), dtype=int)
    assert split_gaussian_clusters(wide, labels, max_clusters=10) is labels  # 12 columns: not tested
    few, _ = _touching(n=20)
    assert split_gaussian_clusters(few, np.zeros(40, dtype=int), max_clusters=10).max() == 0  # 40 points: too few
    assert split_gaussian_clusters(X, labels, max_clusters=1) is labels  # one cluster at most: none split
    assert split_gaussian_clusters(X, labels, max_clusters=2).max() == 1


def _gallery_blobs():
    """Three blobs of scikit-learn's gallery generator (a seed no benchmark uses) where two touch: every arbiter
    candidate counts two."""
    X, y = make_blobs(n_samples=500, random_state=211)
    return StandardScaler().fit_transform(X), y


def test_abc_splits_touching_blobs_after_its_arbiter_and_says_so():
    X, y = _gallery_blobs()
    model = ABCClustering(random_state=0).fit(X)  # the default: 'auto', on with k estimated and a learned affinity
    assert model.gaussian_split == "auto" and model.gaussian_split_
    assert model.n_clusters_ == 3 and model.candidate_.endswith(SPLIT_SUFFIX)
    assert adjusted_rand_score(y, model.labels_) > 0.95
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    np.testing.assert_array_equal(ABCClustering(random_state=0, gaussian_split=True).fit_predict(X), model.labels_)
    off = ABCClustering(random_state=0, gaussian_split=False).fit(X)
    assert not off.gaussian_split_ and off.n_clusters_ == 2 and not off.candidate_.endswith(SPLIT_SUFFIX)
    # The split labels are the unsplit partition with one cluster cut in two.
    assert adjusted_rand_score(off.labels_, model.labels_) < 1
    assert all(len(np.unique(off.labels_[model.labels_ == c])) == 1 for c in range(3))


def test_gaussian_split_applies_wherever_k_is_estimated_from_rows_and_is_refused_elsewhere():
    X, _ = _gallery_blobs()
    assert not ABCClustering(n_clusters=3, random_state=0).fit(X).gaussian_split_
    rbf = ABCClustering(affinity="rbf", gaussian_split=True, random_state=0).fit(X)  # a counting arbiter's k
    assert rbf.gaussian_split_ and rbf.n_clusters_ == 3
    assert ABCClustering(arbiter=None, gaussian_split=True, random_state=0).fit(X).gaussian_split_
    # 'auto' splits after the generic arbiter only (measured there), and leaves another arbiter's or none,
    # a scikit-learn affinity's count, a given k and a matrix alone.
    assert not ABCClustering(arbiter=None, random_state=0).fit(X).gaussian_split_
    assert not ABCClustering(arbiter="generic-knn", random_state=0).fit(X).gaussian_split_
    assert ABCClustering(arbiter="generic", random_state=0).fit(X).gaussian_split_
    assert not ABCClustering(affinity="rbf", arbiter="generic", random_state=0).fit(X).gaussian_split_
    assert not ABCClustering(affinity="rbf", random_state=0).fit(X).gaussian_split_
    assert not ABCClustering(affinity="precomputed", n_clusters=2).fit(np.eye(30)).gaussian_split_
    assert not ABCClustering(affinity="precomputed", random_state=0).fit(np.eye(30)).gaussian_split_
    with pytest.raises(ValueError, match="gaussian_split=True splits clusters of a partition whose k was estimated"):
        ABCClustering(n_clusters=3, gaussian_split=True).fit(X)
    with pytest.raises(ValueError, match="gaussian_split=True splits"):
        ABCClustering(affinity="precomputed", gaussian_split=True).fit(np.eye(30))
    with pytest.raises(ValueError, match="gaussian_split"):
        ABCClustering(gaussian_split="yes").fit(X)


def test_a_split_model_saves_and_loads_as_it_clusters(tmp_path):
    X, _ = _gallery_blobs()
    model = ABCClustering(random_state=0, gaussian_split=True).fit(X)
    model.save(tmp_path / "model.safetensors")
    loaded = ABCClustering.load(tmp_path / "model.safetensors")
    assert loaded.candidate_ == model.candidate_ and loaded.gaussian_split_
    np.testing.assert_array_equal(loaded.predict(X), model.labels_)


def test_a_file_saved_before_the_split_existed_loads_without_it(tmp_path):
    X, _ = _gallery_blobs()
    path = tmp_path / "model.safetensors"
    unsplit = ABCClustering(random_state=0, gaussian_split=False).fit(X)
    unsplit.save(path)
    _resave(path, lambda meta: (meta["params"].pop("gaussian_split"), meta.pop("gaussian_split")))  # as before it
    loaded = ABCClustering.load(path)
    assert loaded.gaussian_split is False and not loaded.gaussian_split_
    np.testing.assert_array_equal(loaded.predict(X), unsplit.labels_)
    assert unsplit.n_clusters_ == 2  # so the default's split would have shown


def _resave(path, edit):
    """Rewrite a saved model's description with ``edit(meta)``, its tensors kept."""
    meta = read_meta(path)
    edit(meta)
    forge(path, meta, read_tensors(path))


def test_a_file_keeps_what_auto_resolved_to_and_refuses_a_contradiction(tmp_path):
    X, _ = _gallery_blobs()
    path = tmp_path / "model.safetensors"
    model = ABCClustering(random_state=0).fit(X)
    model.save(path)
    # A later rule for 'auto' must not change how a saved model predicts: the file's resolution wins.
    _resave(path, lambda meta: meta.update(candidate=None, gaussian_split=False))
    loaded = ABCClustering.load(path)
    assert loaded.gaussian_split == "auto" and not loaded.gaussian_split_
    assert loaded.predict(X).max() + 1 == 2
    for edit, match in [(lambda m: m.update(gaussian_split="yes"), "gaussian_split: expected true or false"),
                        (lambda m: m.update(gaussian_split=False), "false, but candidate names a partition split"),
                        (lambda m: m["params"].update(n_clusters=3), "true, but params.n_clusters is given"),
                        (lambda m: m["params"].update(gaussian_split=False), "contradicts params.gaussian_split"),
                        (lambda m: m.update(candidate=None, gaussian_split=False) or m["params"].update(
                            gaussian_split=True), "contradicts params.gaussian_split")]:
        model.save(path)
        _resave(path, edit)
        with pytest.raises(ValueError, match=match):
            ABCClustering.load(path)


def test_plot_candidates_marks_a_split_partition():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skabc.plotting import plot_candidates

    X, _ = _gallery_blobs()
    titles = [ax.get_title() for ax in plot_candidates(ABCClustering(random_state=0, gaussian_split=True).fit(X), X)]
    assert sum(t.endswith("(kept, split)") for t in titles) == 1
    plt.close("all")


def test_wide_sets_are_judged_before_their_projection_and_low_rank_ones_still_split():
    from skabc.spectral.split import _certainly_wider_than

    rng = np.random.default_rng(0)
    wide = rng.normal(size=(3000, 64))
    labels = np.zeros(len(wide), dtype=int)
    assert _certainly_wider_than(wide, 8) and split_gaussian_clusters(wide, labels, max_clusters=10) is labels
    # The shortcut answers True only where the mixture features are wider too: a huge constant column (the
    # features keep spreads relative to the largest value), or an outlier the row draw misses, leave them narrow.
    from skabc.spectral.mixture import mixture_features

    blobs, _ = _touching()
    constant = np.column_stack([blobs * 10, rng.normal(size=(400, 8)), np.full(400, 1.7e12)])
    outlier = rng.normal(size=(2001, 20))
    outlier[1] = 1e13
    for X in (constant, outlier, rng.normal(size=(2001, 20))):
        if _certainly_wider_than(X, 8):
            assert mixture_features(X, 0).shape[1] > 8
    assert not _certainly_wider_than(constant, 8) and not _certainly_wider_than(outlier, 8)
    np.testing.assert_array_equal(np.bincount(split_gaussian_clusters(constant, np.zeros(400, dtype=int), 10)),
                                  np.bincount(split_gaussian_clusters(blobs, np.zeros(400, dtype=int), 10)))
    # Two touching blobs seen through 30 linear columns span 2 directions: not "wide", and still split.
    X, _ = _touching()
    embedded = X @ rng.normal(size=(2, 30))
    assert not _certainly_wider_than(embedded, 8)
    np.testing.assert_array_equal(split_gaussian_clusters(embedded, np.zeros(len(X), dtype=int), max_clusters=10),
                                  split_gaussian_clusters(X, np.zeros(len(X), dtype=int), max_clusters=10))


def test_a_large_cluster_is_tested_on_a_draw_and_every_row_takes_its_half(monkeypatch):
    import skabc.spectral.split as split_module

    X, y = _touching(n=400)
    whole = split_gaussian_clusters(X, np.zeros(len(X), dtype=int), max_clusters=10)
    monkeypatch.setattr(split_module, "MAX_TESTED_ROWS", 300)  # the cluster's 800 rows: tested on 300
    drawn = split_gaussian_clusters(X, np.zeros(len(X), dtype=int), max_clusters=10)
    assert drawn.max() == 1 and adjusted_rand_score(y, drawn) > 0.9
    assert adjusted_rand_score(whole, drawn) > 0.95


def test_valley_density_takes_a_boolean_half_only():
    """Probe 62c: 0/1 integers indexed rows instead of masking them (0.81 for the mask's 0.68), without a word."""
    Z = np.random.default_rng(0).normal(size=(80, 2))
    half = Z[:, 0] > 0
    assert 0 < valley_density(Z, half) < np.inf
    for bad in (half.astype(int), half[:-1], list(half.astype(int))):
        with pytest.raises(ValueError, match=r"half must be a boolean array of one entry per row of Z \(80\)"):
            valley_density(Z, bad)
