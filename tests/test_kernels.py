"""The kernel protocol (:mod:`skabc.kernels.base`): every kernel answers through it."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.frozen import FrozenEstimator

from skabc import ABCClustering, ContextualKernel, KernelEnsemble
from skabc.exceptions import AffinityTooLargeError
from skabc.inference import WORKING_BYTES_PER_PAIR
from skabc.kernels import Kernel, TransformerKernel, as_kernel


class _GaussianAffinity(TransformerMixin, BaseEstimator):
    """A plain transformer returning an affinity: not a Kernel subclass."""

    def fit(self, X, y=None):
        self.fitted_ = True
        return self

    def transform(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))


def test_learned_kernels_follow_the_protocol(tiny_kernel):
    ensemble = KernelEnsemble.from_fitted([tiny_kernel, tiny_kernel])
    X = np.random.default_rng(0).normal(size=(12, 2))
    for kernel in (tiny_kernel, ensemble):
        assert isinstance(kernel, Kernel) and kernel.outputs_probabilities
        np.testing.assert_array_equal(kernel.affinity(X), kernel.transform(X))
        assert not kernel.returns_sparse(12)
        assert kernel.recommended_clustering() == {}
    sparse = copy.deepcopy(tiny_kernel).set_params(affinity_mode="sparse")
    assert sparse.returns_sparse(12)
    assert KernelEnsemble.from_fitted([tiny_kernel, sparse]).returns_sparse(12)
    # The ensemble holds one more dense copy (the running sum) than its members.
    limited = ContextualKernel(memory_limit=(2 * 8 + WORKING_BYTES_PER_PAIR[False]) * 100**2)  # unfitted
    limited.check_memory(100, n_copies=2)
    with pytest.raises(AffinityTooLargeError):
        limited.check_memory(100, n_copies=3)


def test_as_kernel_unwraps_frozen_kernels_and_adapts_transformers(tiny_kernel):
    assert as_kernel(tiny_kernel) is tiny_kernel
    assert as_kernel(FrozenEstimator(tiny_kernel)) is tiny_kernel
    plain = _GaussianAffinity().fit(np.zeros((3, 2)))
    adapted = as_kernel(plain)
    assert isinstance(adapted, TransformerKernel) and not adapted.outputs_probabilities
    X = np.random.default_rng(1).normal(size=(9, 2))
    np.testing.assert_array_equal(adapted.affinity(X), plain.transform(X))
    assert adapted.recommended_clustering() == {} and not adapted.returns_sparse(9)
    adapted.check_memory(10**9)  # no limit of its own
    # ABCClustering clusters with the adapted transformer as with any kernel.
    blobs = np.concatenate([np.zeros((10, 2)), np.full((10, 2), 10.0)])
    labels = ABCClustering(kernel=FrozenEstimator(plain), random_state=0).fit_predict(blobs)
    assert len(set(labels[:10])) == len(set(labels[10:])) == 1 and labels[0] != labels[10]


def test_the_base_class_requires_an_affinity():
    with pytest.raises(NotImplementedError, match="affinity"):
        Kernel().affinity(np.zeros((2, 2)))


def test_a_loaded_kernel_holds_only_its_module(tiny_kernel, tmp_path):
    path = tmp_path / "k.safetensors"
    tiny_kernel.save(path)
    loaded = ContextualKernel.load(path, device="cpu")
    assert not hasattr(loaded, "net_") and not loaded.module_.training
    X = np.random.default_rng(2).normal(size=(15, 2))
    np.testing.assert_array_equal(loaded.transform(X), tiny_kernel.transform(X))


def test_shipped_kernels_are_read_once_and_handed_out_as_copies():
    from skabc import pretrained

    first = pretrained.load("generic", device="cpu")
    with torch.no_grad():
        next(first.module_.parameters()).add_(1.0)  # e.g. fine-tuning in place
    second = pretrained.load("generic", device="cpu")
    assert second is not first
    assert not torch.equal(next(first.module_.parameters()), next(second.module_.parameters()))
    third = pretrained.load("generic", device="cpu")
    for a, b in zip(second.module_.parameters(), third.module_.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_kernel_with_only_affinity_is_taken_as_is():
    """A probe: the architecture page says ABCClustering(kernel=...) takes a Kernel implementing affinity(X); the
    parameter check asked for fit and transform, refusing it and skabc's own PairwiseKernel."""
    from sklearn.cluster import SpectralClustering
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score
    from sklearn.metrics.pairwise import rbf_kernel

    from skabc.kernels import PairwiseKernel

    class MyRBF(Kernel):
        def __init__(self, gamma=0.5):
            self.gamma = gamma

        def affinity(self, X):
            return rbf_kernel(X, gamma=self.gamma)

    X, _ = make_blobs(60, centers=3, random_state=0)
    reference = SpectralClustering(3, affinity="precomputed", random_state=0).fit_predict(rbf_kernel(X, gamma=0.5))
    for kernel in (MyRBF(), PairwiseKernel("rbf", gamma=0.5)):
        model = ABCClustering(kernel=kernel, n_clusters=3, arbiter=None, random_state=0).fit(X)
        assert model.kernel_ is kernel and adjusted_rand_score(reference, model.labels_) == 1.0
        np.testing.assert_allclose(model.affinity_matrix_, rbf_kernel(X, gamma=0.5))


def test_the_memory_check_counts_the_networks_working_memory():
    """A probe: memory_limit counted the float64 result only; a 2,000-point generic affinity took ten times it."""
    from skabc.pretrained import load

    generic = load("generic")
    generic.set_params(memory_limit=(8 + WORKING_BYTES_PER_PAIR[True]) * 2000**2)
    generic.check_memory(2000)
    with pytest.raises(AffinityTooLargeError, match="and its computation"):
        generic.set_params(memory_limit=(8 + WORKING_BYTES_PER_PAIR[False]) * 2000**2).check_memory(2000)


def test_stateless_kernels_say_they_need_no_fit():
    from sklearn.utils import get_tags

    from skabc.kernels import PairwiseKernel, PrecomputedKernel

    for kernel in (PairwiseKernel("rbf"), PrecomputedKernel()):
        assert get_tags(kernel).requires_fit is False
