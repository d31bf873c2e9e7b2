"""KernelEnsemble: the mean affinity of kernels trained from different seeds."""

from __future__ import annotations

import copy
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import TINY, make_blob_sets
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.frozen import FrozenEstimator

from skabc import ABCClustering, ContextualKernel, KernelEnsemble
from skabc.kernels import PairwiseKernel, as_kernel
from skabc.pretrained import load


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


def test_ensemble_of_frozen_members_saves_and_loads(ensemble, blob_sets, tmp_path):
    """from_fitted takes FrozenEstimator members; saving them raised 'only ensembles of ContextualKernel'."""
    X = blob_sets[0][:30]
    frozen = KernelEnsemble.from_fitted([FrozenEstimator(ensemble.kernels_[0]), ensemble.kernels_[1]])
    frozen.save(tmp_path / "frozen.safetensors")
    loaded = KernelEnsemble.load(tmp_path / "frozen.safetensors", device="cpu")
    assert all(isinstance(k, ContextualKernel) for k in loaded.kernels_)
    np.testing.assert_array_equal(loaded.transform(X), frozen.transform(X))
    with pytest.raises(TypeError, match="got a KernelEnsemble"):  # nested ensembles are not a saved format
        KernelEnsemble.from_fitted([ensemble, ensemble.kernels_[0]]).save(tmp_path / "nested.safetensors")


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


def test_dense_and_sparse_members_give_a_sparse_mean_that_clusters(tiny_kernel, blob_data):
    """Mixing a dense and a sparse member once returned a numpy.matrix that crashed ABCClustering."""
    X = blob_data[0][:40]
    sparse_member = copy.deepcopy(tiny_kernel).set_params(affinity_mode="sparse", n_neighbors=5, n_random_neighbors=2)
    dense, stored = tiny_kernel.transform(X), sparse_member.transform(X).tocsr()
    assert type(KernelEnsemble.from_fitted([tiny_kernel, tiny_kernel]).transform(X)) is np.ndarray
    ensemble = KernelEnsemble.from_fitted([tiny_kernel, sparse_member])
    A = ensemble.transform(X)
    assert isinstance(A, sp.csr_matrix) and ensemble.returns_sparse(len(X))
    # The mean at the pairs the sparse member stores; the dense member adds no pair of its own.
    rows, cols = stored.nonzero()
    assert A.nnz == stored.nnz < len(X) ** 2
    np.testing.assert_allclose(A[rows, cols].A1, (dense[rows, cols] + stored[rows, cols].A1) / 2)
    assert abs(A - A.T).max() < 1e-12
    labels = ABCClustering(kernel=ensemble, random_state=0).fit_predict(X)
    assert labels.shape == (40,)


def test_canonicalising_members_take_any_width(tiny_kernel, blob_data):
    """The generic kernel (and kernels fine-tuned from it) are not compared by width."""
    X = blob_data[0]
    rng = np.random.default_rng(0)
    tuned = ContextualKernel(max_epochs=1, sets_per_epoch=2, batch_size=2, set_size=(10, 20), device="cpu",
                             random_state=0).fit(rng.normal(size=(40, 4)), rng.integers(0, 3, 40))
    generic = load("generic", device="cpu")
    free = KernelEnsemble.from_fitted([generic, tuned])
    assert not hasattr(free, "n_features_in_")
    assert free.transform(rng.normal(size=(12, 7))).shape == (12, 12)
    # The width-bound member sets the ensemble's width, and still refuses another one.
    bound = KernelEnsemble.from_fitted([generic, tiny_kernel, FrozenEstimator(free)])
    assert bound.n_features_in_ == 2
    assert bound.transform(X[:12]).shape == (12, 12)
    with pytest.raises(ValueError, match=r"^KernelEnsemble member 1 \(ContextualKernel\): X has 7 features") as info:
        bound.transform(rng.normal(size=(12, 7)))  # probe 53g: the message did not say which member refused
    assert isinstance(info.value.__cause__, ValueError)  # the member's own error and frames stay (review 54f)
    assert KernelEnsemble.from_fitted([load("circles", device="cpu"), generic]).n_features_in_ == 2


def test_members_without_transform_are_refused(tiny_kernel, blob_data):
    X, y, groups = blob_data
    knn = PairwiseKernel("nearest_neighbors").fit(X)
    with pytest.raises(TypeError, match=r"member 1 is a PairwiseKernel, which has no transform method"):
        KernelEnsemble.from_fitted([tiny_kernel, knn])
    with pytest.raises(ValueError, match="'kernel' parameter"):
        KernelEnsemble(knn, n_members=2).fit(X, y, groups=groups)
    flat = KernelEnsemble.from_fitted([tiny_kernel, FrozenEstimator(_NotSaveable(_Rows()))])
    with pytest.raises(ValueError, match=r"member 1 \(FrozenEstimator\): .*must return the \(30, 30\) affinity "
                                         r"of the 30 rows of X, got shape \(30, 2\)"):
        flat.transform(X[:30])


@pytest.mark.parametrize("wrong", ["negative", "nan"])
def test_transformer_members_are_checked_as_kernels_are(tiny_kernel, blob_data, wrong):
    """Probe 46c: a plain transformer member's negative or NaN affinity passed the ensemble unchecked (transform
    returned it; ABCClustering failed inside scikit-learn), where the same transformer as ABCClustering's kernel
    is refused by name."""
    from skabc import ABCClustering

    X = blob_data[0][:30]
    member = FrozenEstimator(_Affinity(-1.0 if wrong == "negative" else np.nan))
    ensemble = KernelEnsemble.from_fitted([tiny_kernel, member])
    said = "negative entries" if wrong == "negative" else "NaN, infinite"
    with pytest.raises(ValueError, match=rf"member 1 \(FrozenEstimator\): the affinity the kernel .* {said}"):
        ensemble.transform(X)
    with pytest.raises(ValueError, match=rf"member 1 \(FrozenEstimator\): the affinity the kernel .* {said}"):
        ABCClustering(kernel=ensemble, n_clusters=2, random_state=0).fit(X)


def test_a_transformer_members_own_errors_keep_their_type(tiny_kernel, blob_data):
    """Review 46d: the check's prefix wrapped every ValueError of a plain transformer member, so a member's
    AffinityTooLargeError (a MemoryError too) came out as a plain ValueError that `except MemoryError` missed."""
    from skabc.exceptions import AffinityTooLargeError

    member = FrozenEstimator(_Affinity(AffinityTooLargeError("a set of 30 points needs about 6 MiB")))
    with pytest.raises(MemoryError) as caught:
        KernelEnsemble.from_fitted([tiny_kernel, member]).transform(blob_data[0][:30])
    assert isinstance(caught.value, AffinityTooLargeError)
    assert str(caught.value) == "a set of 30 points needs about 6 MiB"
    if sys.version_info >= (3, 11):  # exception notes: the traceback names the member
        assert caught.value.__notes__ == ["raised by KernelEnsemble member 1 (FrozenEstimator)"]


def test_a_member_returning_a_data_frame_gives_the_documented_array(tiny_kernel, blob_data):
    """Probe 46c: a member whose transform returned a DataFrame made the ensemble's result a DataFrame when it came
    second (the in-place sum took its type) and an ndarray when it came first."""
    pd = pytest.importorskip("pandas")
    X = blob_data[0][:30]
    member = FrozenEstimator(_Affinity(0.5, frame=pd.DataFrame))
    for members in ([tiny_kernel, member], [member, tiny_kernel]):
        out = KernelEnsemble.from_fitted(members).affinity(X)
        assert type(out) is np.ndarray
        np.testing.assert_allclose(out, (tiny_kernel.transform(X) + 0.5) / 2)


class _Rows:
    """Not an affinity: transform returns the rows themselves."""

    def transform(self, X):
        return np.asarray(X)


class _Affinity(TransformerMixin, BaseEstimator):
    """A fitted transformer whose affinity is ``value`` everywhere, as an array or as ``frame`` builds it (an
    exception ``value`` is raised)."""

    def __init__(self, value=0.5, frame=None):
        self.value = value
        self.frame = frame

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        if isinstance(self.value, Exception):
            raise self.value
        n = len(X)
        affinity = np.full((n, n), self.value)
        return affinity if self.frame is None else self.frame(affinity)

    def __sklearn_is_fitted__(self):
        return True


def test_an_ensemble_outputs_probabilities_only_when_every_member_does():
    """Probe 59c: outputs_probabilities is "true when every member outputs them" (a mean of probabilities is one);
    one member that outputs plain affinities makes the ensemble's mean no probability (any() passed as all())."""
    plain = _Affinity(2.0)
    assert not as_kernel(plain).outputs_probabilities
    assert KernelEnsemble.from_fitted([load("generic"), load("generic")]).outputs_probabilities
    assert not KernelEnsemble.from_fitted([load("generic"), plain]).outputs_probabilities
    assert not KernelEnsemble.from_fitted([plain, load("generic")]).outputs_probabilities


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


def test_members_checkpoint_into_folders_of_their_own(blob_sets, tmp_path):
    """The members shared the kernel's checkpoint_dir: the second found the first's checkpoint (another seed) and
    refused the fresh folder as 'a checkpoint of a different configuration'."""
    X, y, groups = blob_sets
    kernel = ContextualKernel(**TINY, checkpoint_dir=str(tmp_path))
    ensemble = KernelEnsemble(kernel, n_members=2, random_state=0).fit(X, y, groups=groups)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["member_0", "member_1"]
    again = KernelEnsemble(kernel, n_members=2, random_state=0).fit(X, y, groups=groups)  # resumes each member
    np.testing.assert_array_equal(again.transform(X[:30]), ensemble.transform(X[:30]))


def test_transform_counts_the_running_sum_against_memory_limit():
    """A probe: check_memory refused the size, transform (two dense copies) went over memory_limit anyway."""
    from skabc.exceptions import AffinityTooLargeError
    from skabc.inference import working_bytes
    from skabc.pretrained import load

    generic = load("generic")
    limit = (1.5 * 8 + working_bytes(generic, 100)) * 100**2  # one dense 100 x 100 copy fits, two do not
    members = [load("generic").set_params(memory_limit=limit, device="cpu") for _ in range(2)]
    ensemble = KernelEnsemble.from_fitted(members)
    X = np.random.default_rng(0).normal(size=(100, 2))
    with pytest.raises(AffinityTooLargeError):
        ensemble.check_memory(100)
    with pytest.raises(AffinityTooLargeError):
        ensemble.transform(X)
    assert members[0].transform(X).shape == (100, 100)


def test_an_ensemble_recommends_the_settings_its_members_agree_on():
    """A probe: an ensemble of generic members recommended {} and clustered with the generic defaults (ARI 0)."""
    from skabc.pretrained import load

    generic = load("generic")
    assert KernelEnsemble.from_fitted([generic, load("generic")]).recommended_clustering() == \
        generic.recommended_clustering()
    tiny = ContextualKernel(**TINY).fit(*make_blob_sets(n_sets=4, set_size=20, random_state=0)[:2])
    assert KernelEnsemble.from_fitted([generic, tiny]).recommended_clustering() == {}  # they disagree


# ------------------------------------------------------------------ refits, templates and saves (probe 36b)
def test_a_refit_ensemble_drops_the_settings_of_its_former_members(tmp_path, blob_sets):
    """A probe: a loaded ensemble (or one saved with settings) refitted on a scratch kernel kept recommending the
    generic kernel's clustering, and ABCClustering clustered with it."""
    X, y, groups = blob_sets
    ensemble = KernelEnsemble.from_fitted([load("generic"), load("generic")])
    path = tmp_path / "e.safetensors"
    ensemble.save(path, recommended_clustering={"affinity_power": 4.0})
    loaded = KernelEnsemble.load(path, device="cpu")
    assert loaded.recommended_clustering() == {"affinity_power": 4.0}
    loaded.set_params(kernel=ContextualKernel(**TINY)).fit(X, y, groups=groups)
    assert loaded.recommended_clustering() == {}
    assert ABCClustering(kernel=loaded, random_state=0).fit(X[:30]).affinity_power_ == 1.0


def test_a_frozen_kernel_is_no_template_for_training(tiny_kernel, tiny_kernel_seed_1, blob_sets):
    """A probe: from_fitted with a frozen first member made that fitted member the `kernel` parameter, so a refit
    copied it n_members times and dropped the others; KernelEnsemble(FrozenEstimator(k)).fit did the same."""
    X, y, groups = blob_sets
    ensemble = KernelEnsemble.from_fitted([FrozenEstimator(tiny_kernel), tiny_kernel_seed_1])
    assert isinstance(ensemble.kernel, ContextualKernel) and not hasattr(ensemble.kernel, "module_")
    refit = copy.deepcopy(ensemble).fit(X, y, groups=groups)
    assert all(member is not tiny_kernel for member in refit.kernels_)
    with pytest.raises(ValueError, match="kernel is a FrozenEstimator: fit would copy"):
        KernelEnsemble(FrozenEstimator(tiny_kernel), n_members=2).fit(X, y, groups=groups)


def test_members_of_other_feature_names_are_refused(blob_sets):
    """A probe: from_fitted accepted them, and the ensemble then refused every DataFrame it was given."""
    pd = pytest.importorskip("pandas")
    X, y, groups = blob_sets
    first = ContextualKernel(**TINY).fit(pd.DataFrame(X, columns=["a", "b"]), y, groups=groups)
    other = ContextualKernel(**TINY).fit(pd.DataFrame(X, columns=["c", "d"]), y, groups=groups)
    with pytest.raises(ValueError, match="fitted on different feature names"):
        KernelEnsemble.from_fitted([first, other])


@pytest.mark.parametrize("named_first", [True, False])
def test_members_fitted_with_and_without_feature_names_are_refused(blob_sets, named_first):
    """A probe: from_fitted accepted a member fitted on a DataFrame beside one fitted on an array; whether the
    ensemble had feature names then depended on the members' order, and every set it clustered warned."""
    pd = pytest.importorskip("pandas")
    X, y, groups = blob_sets
    named = ContextualKernel(**TINY).fit(pd.DataFrame(X, columns=["a", "b"]), y, groups=groups)
    unnamed = ContextualKernel(**TINY).fit(X, y, groups=groups)
    members = [named, unnamed] if named_first else [unnamed, named]
    with pytest.raises(ValueError, match="some kernels were fitted on named columns"):
        KernelEnsemble.from_fitted(members)


def test_the_column_names_of_a_canonicalising_member_are_not_compared(blob_sets):
    """Review 67: a generic member fitted on a DataFrame beside a width-bound one fitted on an array was refused,
    the mirror pair accepted; the generic kernel takes any columns, so neither decides the ensemble's names."""
    X, y, groups = blob_sets
    named_generic = copy.deepcopy(load("generic"))
    named_generic.feature_names_in_ = np.array(["a", "b"], dtype=object)  # as a fit on a DataFrame leaves it
    unnamed = ContextualKernel(**TINY).fit(X, y, groups=groups)
    ensemble = KernelEnsemble.from_fitted([named_generic, unnamed])
    assert not hasattr(ensemble, "feature_names_in_") and ensemble.n_features_in_ == X.shape[1]


def test_checkpoints_need_a_seeded_ensemble(tmp_path, blob_sets):
    """A probe: with random_state=None each fit drew new member seeds, and the second fit refused member_0's
    checkpoint as 'a different configuration'."""
    X, y, groups = blob_sets
    kernel = ContextualKernel(**TINY, checkpoint_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"random_state=None draws new member seeds.*set KernelEnsemble\(random_state"):
        KernelEnsemble(kernel, n_members=2).fit(X, y, groups=groups)
    assert not any(tmp_path.iterdir())  # refused before anything was trained


@pytest.mark.parametrize("make", ["kernel", "ensemble"])
def test_a_failed_save_leaves_the_settings_as_they_were(make, tiny_kernel, tmp_path):
    """A probe: save(directory, recommended_clustering=...) raised, yet the kernel recommended the new settings."""
    kernel = copy.deepcopy(tiny_kernel) if make == "kernel" else KernelEnsemble.from_fitted([tiny_kernel])
    before = kernel.recommended_clustering()
    with pytest.raises(ValueError, match="it is a directory"):
        kernel.save(tmp_path, recommended_clustering={"affinity_power": 2.0})
    assert kernel.recommended_clustering() == before
    kernel.save(tmp_path / "k.safetensors", recommended_clustering={"affinity_power": 2.0})
    assert kernel.recommended_clustering() == {"affinity_power": 2.0}


def test_a_random_state_stream_is_named_when_saving(tiny_kernel, tmp_path):
    """A probe: the refusal blamed 'custom modules or callables'."""
    kernel = copy.deepcopy(tiny_kernel).set_params(random_state=np.random.RandomState(0))
    for obj in (kernel, KernelEnsemble.from_fitted([tiny_kernel]).set_params(random_state=np.random.RandomState(0))):
        with pytest.raises(TypeError, match=r"random_state=RandomState\(\.\.\.\): a model file holds an int or None"):
            obj.save(tmp_path / "k.safetensors")


def test_fit_without_labels_names_the_ensemble(tiny_kernel):
    """A probe: KernelEnsemble().fit(X) said 'ContextualKernel requires y' (its first member's refusal)."""
    with pytest.raises(ValueError, match="KernelEnsemble requires y to be passed"):
        KernelEnsemble(ContextualKernel(**TINY), n_members=2).fit(np.zeros((10, 2)))


@pytest.mark.parametrize("in_a_pipeline", [False, True])
def test_ctrl_c_stops_the_whole_ensemble_fit(blob_sets, monkeypatch, in_a_pipeline):
    """One Ctrl-C stopped only the member training then: the next members trained in full (probe
    /work/probe39b/r07_ctrl_c_ensemble.py); review 48b: so it did still where the members are Pipelines (the
    training net is their step's)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skabc.training.callbacks import RedrawEachEpoch

    X, y, groups = blob_sets
    original, epochs = RedrawEachEpoch.on_epoch_begin, []

    def interrupted_in_the_second_member(self, net, **kwargs):
        epochs.append(1)
        if len(epochs) == 3:  # the second member's first epoch (members train 2 each): the user presses Ctrl-C
            raise KeyboardInterrupt
        return original(self, net, **kwargs)

    monkeypatch.setattr(RedrawEachEpoch, "on_epoch_begin", interrupted_in_the_second_member)
    kernel = ContextualKernel(**{**TINY, "max_epochs": 2})
    if in_a_pipeline:
        kernel, groups = make_pipeline(StandardScaler(), kernel), None  # a Pipeline takes no groups (routing off)
    ensemble = KernelEnsemble(kernel, n_members=4, random_state=0)
    with pytest.warns(RuntimeWarning) as caught:
        ensemble.fit(X, y, groups=groups)
    messages = [str(w.message) for w in caught]
    assert any("interrupted during member 2 of 4: the ensemble keeps the 2 members" in m for m in messages)
    assert len(epochs) == 3 and len(ensemble.kernels_) == 2
    assert ensemble.transform(X[:30]).shape == (30, 30)


def test_verbose_members_say_whose_log_follows(blob_sets, capsys):
    """Members trained with verbose=1 printed identical epoch tables with nothing to tell them apart."""
    X, y, groups = blob_sets
    KernelEnsemble(ContextualKernel(**{**TINY, "verbose": 1}), n_members=2, random_state=0).fit(X, y, groups=groups)
    out = capsys.readouterr().out
    assert out.index("KernelEnsemble member 1 of 2") < out.index("KernelEnsemble member 2 of 2")
    KernelEnsemble(ContextualKernel(**TINY), n_members=2, random_state=0).fit(X, y, groups=groups)
    assert capsys.readouterr().out == ""


def test_members_that_take_no_groups_are_refused_in_skabcs_words(blob_sets):
    """Session 48: ABCClustering refused groups for a kernel that takes none in skabc's words (af09c7e), while
    KernelEnsemble, which had a groups rule of its own, passed scikit-learn's error through (pass step parameters
    to a Pipeline.fit the user never called).  One rule for both now (skabc.kernels.base.fit_on_labels)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, groups = blob_sets
    pipeline = make_pipeline(StandardScaler(), ContextualKernel(**TINY))
    with pytest.raises(ValueError, match=r"groups were given, but the kernel's fit \(Pipeline\.fit\) takes no groups"):
        KernelEnsemble(pipeline, n_members=2, random_state=0).fit(X, y, groups=groups)
    fitted = KernelEnsemble(pipeline, n_members=2, random_state=0).fit(X, y)  # without groups it trains
    assert fitted.transform(X[:30]).shape == (30, 30)


def test_pipeline_members_get_seeds_and_folders_of_their_own(blob_sets, tmp_path):
    """Review 48b: the seeds and checkpoint folders were set only where the member itself had the parameter, so
    a Pipeline's members all kept its step's random_state (identical members) and shared one checkpoint_dir
    (the second member restored the first one's kernel)."""
    import warnings

    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, _ = blob_sets
    pipeline = make_pipeline(StandardScaler(), ContextualKernel(**{**TINY, "checkpoint_dir": str(tmp_path)}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no member restores another's run
        fitted = KernelEnsemble(pipeline, n_members=2, random_state=0).fit(X, y)
    first, second = (member[-1] for member in fitted.kernels_)
    assert first.random_state != second.random_state
    assert not np.allclose(first.transform(X[:30]), second.transform(X[:30]))
    assert {first.checkpoint_dir, second.checkpoint_dir} == {str(tmp_path / "member_0"), str(tmp_path / "member_1")}


def test_a_member_stopped_while_its_settings_are_chosen_is_not_promised_a_resume(blob_sets, tmp_path, monkeypatch):
    """Review 48c: Ctrl-C while a member's clustering settings were chosen (after its epochs) stopped the ensemble
    with 'Call fit again to resume from checkpoint_dir', but a refit re-derives that member, it does not resume."""
    from skabc.training import early_stopping

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(early_stopping, "choose_settings", interrupted)
    X, y, groups = blob_sets
    kernel = ContextualKernel(**{**TINY, "early_stopping": True, "validation_fraction": 0.3,
                                 "checkpoint_dir": str(tmp_path)})
    with pytest.warns(RuntimeWarning) as caught:
        KernelEnsemble(kernel, n_members=2, random_state=0).fit(X, y, groups=groups)
    stopped = [str(w.message) for w in caught if "KernelEnsemble training was interrupted" in str(w.message)]
    assert len(stopped) == 1 and "resume" not in stopped[0]
