"""Extending skabc as docs/architecture.md ("How to add") says: kernels, backends, k rules, saveable classes.

Probe 58d followed those recipes and found where they failed; each test here failed on 52f5b60.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import rbf_kernel

from skabc import ABCClustering, KernelEnsemble, persistence
from skabc.exceptions import SkabcWarning
from skabc.kernels import Kernel
from skabc.kernels.base import AffinityTransformerMixin

X, _ = make_blobs(90, centers=3, n_features=2, random_state=0)


def _bad(A, mode):
    A = A.copy()
    if mode == "smaller":
        return A[:-1, :-1]
    if mode == "negative":
        A[0, 1] = A[1, 0] = -0.5
        return A
    if mode == "nan":
        A[0, 1] = A[1, 0] = np.nan
        return A
    if mode == "column":  # a reduction that kept its axis: broadcast by a symmetrisation, it would be n x n
        return A.sum(axis=1, keepdims=True)
    raise AssertionError(mode)


class _RBF(Kernel):
    """A minimal kernel: ``affinity`` only, with an optional way to spoil it."""

    def __init__(self, mode=None):
        self.mode = mode

    def affinity(self, X):
        A = rbf_kernel(X)
        if self.mode == "upper":
            return np.triu(A)
        if self.mode == "bool":
            return A > 0.5
        if self.mode == "list":
            return A.tolist()
        return A if self.mode is None else _bad(A, self.mode)


class _RBFTransformer(TransformerMixin, BaseEstimator):
    def __init__(self, mode=None):
        self.mode = mode

    def fit(self, X, y=None):
        self.fitted_ = True
        return self

    def transform(self, X):
        return _RBF(self.mode).affinity(X)


@pytest.mark.parametrize("mode, match", [
    ("smaller", r"_RBF\.affinity\(X\) must return the \(90, 90\) affinity of the 90 rows of X, got shape \(89, 89\)"),
    ("negative", r"_RBF\.affinity\(X\) returned has negative entries"),
    ("nan", r"_RBF\.affinity\(X\) returned holds NaN"),
    ("column", r"_RBF\.affinity\(X\) must return the \(90, 90\) affinity of the 90 rows of X, got shape \(90, 1\)"),
], ids=["smaller", "negative", "nan", "column"])
def test_a_kernel_subclass_output_is_checked_as_a_transformer_s(mode, match):
    """The probe: an (n-1) x (n-1) affinity from a Kernel subclass gave 89 labels for 90 rows; a negative pair was
    clustered; a NaN failed inside numpy.  Only a transformer's output was checked."""
    with pytest.raises(ValueError, match=match):
        ABCClustering(kernel=_RBF(mode), random_state=0).fit(X)
    with pytest.raises(ValueError, match=match.replace("_RBF", "_RBFTransformer").replace("affinity", "transform", 1)):
        ABCClustering(kernel=_RBFTransformer(mode).fit(X), random_state=0).fit(X)


@pytest.mark.parametrize("kernel", [_RBF("upper"), _RBFTransformer("upper").fit(X)], ids=["Kernel", "transformer"])
def test_a_kernel_affinity_that_is_not_symmetric_is_averaged_with_a_warning(kernel):
    """As scikit-learn's spectral embedding averages any affinity (np.triu(A) gave k = 5 on three blobs)."""
    with pytest.warns(SkabcWarning, match="Array is not symmetric, and will be converted to symmetric by average"):
        model = ABCClustering(kernel=kernel, arbiter=None, random_state=0).fit(X)
    upper = np.triu(rbf_kernel(X))
    mean = ABCClustering(affinity="precomputed", arbiter=None, random_state=0).fit(0.5 * (upper + upper.T))
    np.testing.assert_array_equal(model.labels_, mean.labels_)


@pytest.mark.parametrize("kernel", [_RBF("bool"), _RBFTransformer("bool").fit(X), _RBF("list")],
                         ids=["Kernel bool", "transformer bool", "Kernel list"])
def test_a_0_1_adjacency_or_nested_lists_are_clustered_as_floats(kernel):
    """A boolean adjacency failed with numpy's 'boolean negative' error (with and without n_clusters)."""
    A = rbf_kernel(X)
    floats = _Fixed((A > 0.5).astype(float) if "bool" in str(kernel.get_params()) else A)
    for n_clusters in (None, 3):
        model = ABCClustering(kernel=kernel, n_clusters=n_clusters, random_state=0).fit(X)
        as_floats = ABCClustering(kernel=floats, n_clusters=n_clusters, random_state=0).fit(X)
        np.testing.assert_array_equal(model.labels_, as_floats.labels_)


class _Fixed(Kernel):
    def __init__(self, matrix=None):
        self.matrix = matrix

    def affinity(self, X):
        return self.matrix


def test_a_subclass_of_a_skabc_kernel_that_overrides_affinity_is_checked():
    """Review 58r: the flag of skabc's own kernels was inherited, so a subclass's own affinity went unchecked."""
    from skabc.kernels.pairwise import PairwiseKernel

    class Smaller(PairwiseKernel):
        def affinity(self, X):
            return super().affinity(X)[:-1, :-1]

    with pytest.raises(ValueError, match=r"Smaller\.affinity\(X\) must return the \(90, 90\) affinity"):
        ABCClustering(kernel=Smaller("rbf"), random_state=0).fit(X)


def test_rounding_of_a_float32_affinity_is_no_asymmetry():
    """Review 58r: float32 distances differ from their transpose by ~1e-5, past the float64 tolerance: every set
    warned, each with its own number."""
    class Float32(Kernel):
        def affinity(self, X):
            A = rbf_kernel(X).astype(np.float32)
            return A + np.triu(np.full_like(A, 2e-5), 1)  # rounding-sized differences above the diagonal only

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ABCClustering(kernel=Float32(), n_clusters=3, random_state=0).fit(X)
    with pytest.warns(SkabcWarning, match="not symmetric") as caught:
        ABCClustering(kernel=_RBF("upper"), n_clusters=3, random_state=0).fit(X, groups=np.arange(90) % 3)
    assert len({str(w.message) for w in caught if "not symmetric" in str(w.message)}) == 1  # one text per fit


def test_a_float64_asymmetry_ten_times_the_tolerance_is_reported():
    # The tolerance itself (probe 59a: one 100 times looser passed every other test): a float64 affinity one pair
    # of which differs from its transpose by 1e-5 of the largest entry (SYMMETRY_RTOL is 1e-6) is reported.
    A = rbf_kernel(X)
    A[0, 1] += 1e-5
    with pytest.warns(SkabcWarning, match=r"differ by up to 1e-05"):
        ABCClustering(affinity="precomputed", n_clusters=3, random_state=0).fit(A)
    with pytest.warns(SkabcWarning, match=r"not symmetric"):
        ABCClustering(kernel=_Fixed(A), n_clusters=3, random_state=0).fit(X)


def test_a_frozen_kernel_without_fit_is_ready():
    """Review 58r: FrozenEstimator has a fit, so scikit-learn was asked whether the kernel inside was fitted, and
    raised 'is not an estimator instance'."""
    from sklearn.frozen import FrozenEstimator

    model = ABCClustering(kernel=FrozenEstimator(_RBF()), n_clusters=3, random_state=0).fit(X)
    np.testing.assert_array_equal(model.labels_, ABCClustering(kernel=_RBF(), n_clusters=3, random_state=0)
                                  .fit(X).labels_)


class _StatelessFit(_RBF):
    """A kernel with a ``fit`` that stores nothing (``return self``), as a user's stateless one may."""

    def fit(self, X, y=None):
        return self


def test_a_kernel_whose_fit_stores_nothing_recommends_the_defaults():
    """Review 70b: recommended_clustering() raised NotFittedError for every kernel with a fit and no ``*_``
    attribute, so ABCClustering could not fit such a kernel on y; only skabc's trainable kernels refuse it."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(60, centers=3, random_state=0)
    assert _StatelessFit().fit(X).recommended_clustering() == {}
    labels = ABCClustering(kernel=_StatelessFit(), n_clusters=3, random_state=0).fit(X, y).labels_
    np.testing.assert_array_equal(labels, ABCClustering(kernel=_RBF(), n_clusters=3, random_state=0).fit(X).labels_)


def test_a_kernel_ensemble_checks_a_kernel_member_s_output():
    class Member(AffinityTransformerMixin, _RBF):
        pass

    ensemble = KernelEnsemble.from_fitted([Member(), Member("smaller")])
    with pytest.raises(ValueError, match=r"KernelEnsemble member 1 \(Member\): .*must return the \(90, 90\)"):
        ensemble.transform(X)


def test_an_object_with_affinity_that_is_no_kernel_is_refused_by_name():
    """Passed the parameter check (HasMethods(['affinity'])), then failed on .transform or get_params."""
    class Duck:
        def affinity(self, X):
            return rbf_kernel(X)

    with pytest.raises(TypeError, match=r"kernel=Duck\(\.\.\.\) .* derive it from skabc\.kernels\.Kernel"):
        ABCClustering(kernel=Duck()).fit(X)


def test_a_backend_registered_without_options_trains_records_and_rebuilds(monkeypatch):
    """The docs: a BACKEND_OPTIONS line only where the backend exposes options.  Without one, the end of fit
    (record_architecture) raised a bare KeyError after the whole training run."""
    from sklearn.utils._param_validation import StrOptions

    from skabc.kernels import ContextualKernel
    from skabc.kernels import _contextual_constraints as constraints
    from skabc.nn import backends
    from skabc.nn.blocks import SetAttentionBlock

    monkeypatch.setitem(backends.ATTENTION_BACKENDS, "sab-copy", SetAttentionBlock)
    monkeypatch.setitem(constraints.CONTEXTUAL_KERNEL_CONSTRAINTS, "attention",
                        [StrOptions(set(backends.ATTENTION_BACKENDS)), callable])
    Xf, y = make_blobs(120, centers=3, n_features=2, random_state=0)
    kernel = ContextualKernel(attention="sab-copy", n_blocks=1, d_model=16, max_epochs=1, sets_per_epoch=4,
                              set_size=(20, 40), batch_size=4, early_stopping=False, random_state=0, device="cpu")
    kernel.fit(Xf.astype(np.float32), y)
    assert kernel.transform(Xf[:30]).shape == (30, 30)


def test_the_cli_offers_every_registered_backend(monkeypatch):
    from skabc.cli import build_parser
    from skabc.nn import backends
    from skabc.nn.blocks import SetAttentionBlock

    monkeypatch.setitem(backends.ATTENTION_BACKENDS, "sab-copy", SetAttentionBlock)
    args = build_parser().parse_args(["train", "X.npy", "y.npy", "-o", "k.safetensors", "--attention", "sab-copy"])
    assert args.attention == "sab-copy"


def test_validation_sets_are_clustered_with_any_registered_k_rule(monkeypatch):
    """A fine-tuned kernel's settings were scored with 'eigengap' for every rule but 'consensus'."""
    from skabc.spectral import select
    from skabc.spectral.select import Selection
    from skabc.training.validation import cluster_affinity

    monkeypatch.setitem(select.N_CLUSTERS_SELECTORS, "two", lambda step, a, p, e, s: Selection(2, None))
    A = rbf_kernel(X)
    assert len(np.unique(cluster_affinity(A, {}))) == 3
    assert len(np.unique(cluster_affinity(A, {"n_clusters_selection": "two"}))) == 2


class _Described:
    def _describe(self):
        return {}, {}

    @classmethod
    def _restore(cls, meta, tensors, device):
        return cls()


def test_persistent_refuses_a_class_without_the_methods_a_file_needs():
    """The documented recipe left out _check_description: load then failed with an AttributeError."""
    with pytest.raises(TypeError, match="must implement _check_description"):
        persistence.persistent(type("NoCheck", (_Described,), {}))


def test_persistent_refuses_a_second_class_under_a_registered_name():
    """A user class named ContextualKernel replaced skabc's in the registry: its files then loaded as the user's."""
    fake = type("ContextualKernel", (_Described,), {"_check_description": classmethod(lambda cls, m, h, w="": None)})
    with pytest.raises(TypeError, match=r"already skabc\.kernels\.contextual\.ContextualKernel.s name"):
        persistence.persistent(fake)
    assert persistence._REGISTRY["ContextualKernel"].__module__ == "skabc.kernels.contextual"


def test_persistent_takes_a_script_s_class_imported_by_its_module_name_too():
    """Review 58r: a script run as __main__ that also imports itself by name defines its class twice."""
    as_script = type("TwiceDefined", (_Described,), {"_check_description": classmethod(lambda cls, m, h, w="": None),
                                                     "__module__": "__main__"})
    as_module = type("TwiceDefined", (_Described,), {"_check_description": classmethod(lambda cls, m, h, w="": None),
                                                     "__module__": "user_script"})
    try:
        persistence.persistent(as_script)
        assert persistence.persistent(as_module) is as_module
    finally:
        persistence._REGISTRY.pop("TwiceDefined", None)


def test_a_registered_kernel_without_fit_is_saved_inside_abcclustering(tmp_path):
    """check_is_fitted on a Kernel without fit raised scikit-learn's 'is not an estimator instance'."""
    @persistence.persistent
    class SavedRBF(Kernel):
        def __init__(self, gamma=1.0):
            self.gamma = gamma

        def affinity(self, X):
            return rbf_kernel(X, gamma=self.gamma)

        def _describe(self):
            return {"gamma": self.gamma}, {}

        @classmethod
        def _check_description(cls, meta, header, where=""):
            if set(meta) != {"gamma"} or not isinstance(meta["gamma"], float):
                raise ValueError(f"{where or 'description'}: expected a float gamma")

        @classmethod
        def _restore(cls, meta, tensors, device):
            return cls(gamma=meta["gamma"])

    try:
        model = ABCClustering(kernel=SavedRBF(0.5), random_state=0).fit(X)
        model.save(tmp_path / "model.safetensors")
        loaded = ABCClustering.load(tmp_path / "model.safetensors")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(loaded.predict(X[:40]), model.predict(X[:40]))
        assert loaded.kernel.gamma == 0.5
    finally:
        persistence._REGISTRY.pop("SavedRBF", None)
