"""KernelEnsemble: the mean affinity of kernels trained from different seeds."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY, make_blob_sets
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.frozen import FrozenEstimator

from skabc import ABCClustering, ContextualKernel, KernelEnsemble


@pytest.fixture(scope="module")
def blob_sets():
    return make_blob_sets(n_sets=12, set_size=30, random_state=0)


@pytest.fixture(scope="module")
def ensemble(blob_sets):
    X, y, groups = blob_sets
    return KernelEnsemble(ContextualKernel(**TINY), n_members=2, random_state=0).fit(X, y, groups=groups)


def test_members_differ_and_the_affinity_is_their_mean(ensemble, blob_sets):
    X = blob_sets[0][:30]
    first, second = (k.transform(X) for k in ensemble.kernels_)
    assert ensemble.kernels_[0].random_state != ensemble.kernels_[1].random_state
    assert not np.allclose(first, second)
    A = ensemble.transform(X)
    np.testing.assert_allclose(A, (first + second) / 2)
    np.testing.assert_array_equal(A, A.T)
    assert A.min() >= 0 and A.max() <= 1
    order = np.random.default_rng(0).permutation(len(X))
    np.testing.assert_allclose(ensemble.transform(X[order]), A[order][:, order], atol=1e-5)


def test_same_seed_same_members(blob_sets, ensemble):
    X, y, groups = blob_sets
    again = KernelEnsemble(ContextualKernel(**TINY), n_members=2, random_state=0).fit(X, y, groups=groups)
    np.testing.assert_array_equal(again.transform(X[:30]), ensemble.transform(X[:30]))


def test_save_load_round_trip(ensemble, blob_sets, tmp_path):
    path = tmp_path / "ensemble.safetensors"
    ensemble.save(path)
    loaded = KernelEnsemble.load(path, device="cpu")
    assert loaded.n_members == 2 and loaded.random_state == 0 and len(loaded.kernels_) == 2
    np.testing.assert_array_equal(loaded.transform(blob_sets[0][:30]), ensemble.transform(blob_sets[0][:30]))
    with pytest.raises(ValueError, match="holds a KernelEnsemble"):
        ContextualKernel.load(path)


def test_from_fitted_and_clustering_with_an_ensemble(ensemble, blob_sets):
    X = blob_sets[0]
    rebuilt = KernelEnsemble.from_fitted(ensemble.kernels_)
    np.testing.assert_array_equal(rebuilt.transform(X[:30]), ensemble.transform(X[:30]))
    model = ABCClustering(kernel=FrozenEstimator(rebuilt), n_clusters_selection="likelihood", random_state=0)
    labels = model.fit_predict(X[:30])
    assert labels.shape == (30,) and model.n_clusters_ >= 1
    with pytest.raises(TypeError, match="own save"):
        ABCClustering(kernel=FrozenEstimator(_NotSaveable(ensemble)), random_state=0).fit(X[:30]).save(
            "/nonexistent/model.safetensors")


class _NotSaveable(TransformerMixin, BaseEstimator):
    """A fitted kernel of a class the safe format does not know."""

    def __init__(self, inner=None):
        self.inner = inner

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return self.inner.transform(X)

    def __sklearn_is_fitted__(self):
        return True


def test_bad_input(ensemble, blob_sets):
    X, y, groups = blob_sets
    with pytest.raises(ValueError, match="at least one"):
        KernelEnsemble.from_fitted([])
    with pytest.raises(ValueError, match="n_members"):
        KernelEnsemble(ContextualKernel(**TINY), n_members=0).fit(X, y, groups=groups)
    with pytest.raises(ValueError, match="features"):
        ensemble.transform(np.zeros((5, 7)))
    wide = ContextualKernel(**TINY).fit(np.hstack([X, X]), y, groups=groups)
    with pytest.raises(ValueError, match="different numbers of features"):
        KernelEnsemble.from_fitted([ensemble.kernels_[0], wide])


def test_cli_clusters_with_a_saved_ensemble(ensemble, blob_sets, tmp_path):
    """`skabc cluster --kernel ensemble.safetensors` gives the labels of the ensemble clustered in process."""
    from skabc.cli import main

    X = blob_sets[0][:30]
    np.save(tmp_path / "X.npy", X)
    ensemble.save(tmp_path / "ensemble.safetensors")
    for n_clusters in (None, 3):
        out = tmp_path / f"labels_{n_clusters}.npy"
        extra = [] if n_clusters is None else ["--n-clusters", str(n_clusters)]
        assert main(["cluster", str(tmp_path / "X.npy"), "--kernel", str(tmp_path / "ensemble.safetensors"),
                     "-o", str(out), "-q", *extra]) == 0
        expected = ABCClustering(n_clusters=n_clusters, kernel=FrozenEstimator(ensemble),
                                 random_state=0).fit_predict(X)
        np.testing.assert_array_equal(np.load(out), expected)
    # Given k = 3 the partition is not a trivial one (this 1-epoch ensemble puts all 30 rows in one cluster
    # when it estimates k itself).
    assert len(np.unique(np.load(tmp_path / "labels_3.npy"))) == 3
