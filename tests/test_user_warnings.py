"""The package's warnings point at the caller's line and are said once per call; n_clusters == n is singletons."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import TINY, make_blob_sets
from sklearn.datasets import make_blobs
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skabc import ABCClustering, ContextualKernel, KernelEnsemble


def caught_warnings(call) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return list(caught)


def ours(caught: list, text: str) -> list:
    return [w for w in caught if text in str(w.message)]


@pytest.mark.parametrize("affinity", ["nearest_neighbors", "rbf", "learned"])
def test_as_many_clusters_as_points_gives_singletons(affinity, tiny_kernel):
    """A probe: n_clusters == n with the kNN graph raised scipy's 'Cannot use scipy.linalg.eigh for sparse A with
    k >= N' (n_clusters > n was handled); a group or a predicted set of k rows hits it."""
    X = np.random.default_rng(0).random((23, 2))
    kernel = tiny_kernel if affinity == "learned" else None
    model = ABCClustering(n_clusters=3, affinity=affinity, n_neighbors=2, kernel=kernel, random_state=0)
    caught = caught_warnings(lambda: model.fit(X[:3]))
    np.testing.assert_array_equal(model.labels_, [0, 1, 2])
    assert not [w for w in caught if "k >= N" in str(w.message)], [str(w.message) for w in caught]
    labels = model.fit(X, groups=np.r_[np.zeros(20), np.ones(3)]).labels_
    assert len(np.unique(labels[20:])) == 3 and not set(labels[20:]) & set(labels[:20])
    np.testing.assert_array_equal(np.sort(model.predict(X[:3])), [0, 1, 2])


def test_more_clusters_than_points_is_said_once_per_call():
    """A probe: six groups of five rows gave six identical warnings, 'of the set', naming no group."""
    X = make_blobs(30, centers=3, random_state=0)[0]
    model = ABCClustering(n_clusters=10, affinity="rbf", random_state=0)
    caught = caught_warnings(lambda: model.fit(X, groups=np.repeat(np.arange(6), 5)))
    said = ours(caught, "n_clusters=10 is more than")
    assert len(said) == 1 and "6 of 6 sets (5 points)" in str(said[0].message)
    caught = caught_warnings(lambda: model.predict_many([X[:5], X[5:30], X[:7]]))
    said = ours(caught, "n_clusters=10 is more than")
    assert len(said) == 1 and "2 of 3 sets (5 to 7 points)" in str(said[0].message)
    # A subsampled group beside a short one: only the short one is named.
    subsampled = ABCClustering(n_clusters=10, affinity="rbf", max_samples=12, random_state=0)
    caught = caught_warnings(lambda: subsampled.fit(X[:29], groups=np.r_[np.zeros(25), np.ones(4)]))
    said = ours(caught, "n_clusters=10 is more than")
    assert len(said) == 1 and "1 of 2 sets (4 points)" in str(said[0].message)


def test_warnings_point_at_the_callers_line_through_every_entry_point():
    """A probe: the same warning pointed at cluster.py through fit_predict, at _fit_inputs.py through
    ABCClustering(kernel=...).fit, at ensemble.py through KernelEnsemble.fit (fixed stack levels)."""
    X = make_blobs(12, centers=2, random_state=0)[0]
    one_class = np.zeros(len(X), dtype=int)
    calls = {
        "fit_predict, n_clusters > n": (lambda: ABCClustering(n_clusters=20, affinity="rbf").fit_predict(X),
                                        "n_clusters=20 is more than"),
        "fit_predict, square X": (lambda: ABCClustering(n_clusters=2, affinity="rbf").fit_predict(X[:2, :2]),
                                  "X is square"),
        "through ABCClustering": (lambda: ABCClustering(kernel=ContextualKernel(**TINY)).fit(X, one_class),
                                  "a single class"),
        "through KernelEnsemble": (lambda: KernelEnsemble(ContextualKernel(**TINY), n_members=2).fit(X, one_class),
                                   "a single class"),
        # Probe 58k: through scikit-learn's meta-estimators they pointed at sklearn/pipeline.py.
        "Pipeline.fit": (lambda: make_pipeline(StandardScaler(), ABCClustering(n_clusters=20, affinity="rbf")).fit(X),
                         "n_clusters=20 is more than"),
        "Pipeline.fit_predict": (lambda: make_pipeline(ABCClustering(n_clusters=20, affinity="rbf")).fit_predict(X),
                                 "n_clusters=20 is more than"),
    }
    for name, (call, text) in calls.items():
        said = ours(caught_warnings(call), text)
        assert said and all(w.filename == __file__ for w in said), (name, [(w.filename, w.lineno) for w in said])


def test_an_ensemble_says_a_remark_on_its_labels_once():
    """A probe: every member repeated 'y holds a single class' (and early stopping's split), n_members times."""
    X = make_blob_sets(n_sets=1, set_size=10, random_state=0)[0]
    one_class = np.zeros(len(X), dtype=int)
    ensemble = KernelEnsemble(ContextualKernel(**{**TINY, "early_stopping": True, "validation_fraction": 0.01}),
                              n_members=3, random_state=0)
    caught = caught_warnings(lambda: ensemble.fit(X, one_class))
    assert len(ours(caught, "a single class")) == 1
    assert len(ours(caught, "validation_fraction=0.01")) == 1
    # The record lasts one call: a second fit says it again.
    assert len(ours(caught_warnings(lambda: ensemble.fit(X, one_class)), "a single class")) == 1


def test_k_unknown_with_a_disconnected_knn_graph_passes_no_spectral_embedding_warning():
    """A probe: with n_clusters=None the 'generic-count' cut of a kNN graph passed on scikit-learn's 'Graph is not
    fully connected' (no SpectralClustering cut was asked for; the other k-unknown paths keep it back)."""
    X = make_blobs(40, centers=[[0, 0], [50, 50]], cluster_std=0.5, random_state=0)[0]
    caught = caught_warnings(
        lambda: ABCClustering(affinity="nearest_neighbors", n_neighbors=3, random_state=0).fit(X))
    assert not ours(caught, "not fully connected"), [str(w.message) for w in caught]
    # With k given, as SpectralClustering does, it is passed on.
    caught = caught_warnings(
        lambda: ABCClustering(n_clusters=2, affinity="nearest_neighbors", n_neighbors=3, random_state=0).fit(X))
    assert ours(caught, "not fully connected")


def test_every_warning_of_the_package_is_a_skabc_warning():
    """Each call of warn_user names a SkabcWarning class: users filter the package's warnings by category (there
    was no class of its own; filtering by module does not work, as the warnings are attributed to the caller)."""
    import ast
    from pathlib import Path

    import skabc.exceptions

    package = Path(skabc.exceptions.__file__).parent
    calls = [(path.name, node) for path in package.rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "warn_user"]
    assert len(calls) >= 10
    for name, call in calls:
        category = call.args[1] if len(call.args) > 1 else None
        if category is None or not isinstance(category, ast.Name) or category.id == "category":
            continue  # the default (SkabcWarning), or a warning raised again with the category it came with
        assert issubclass(getattr(skabc.exceptions, category.id), skabc.exceptions.SkabcWarning), (name, category.id)


def test_the_package_warnings_can_be_silenced_by_their_category_alone():
    from skabc.exceptions import SkabcWarning, TrainingInterruptedWarning

    blocks = np.kron(np.eye(4), np.ones((10, 10)))  # four components, max_clusters=3
    model = ABCClustering(affinity="precomputed", max_clusters=3, random_state=0)
    caught = caught_warnings(lambda: model.fit(blocks))
    assert [type(w.message) for w in ours(caught, "max_clusters=3")] == [SkabcWarning]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=SkabcWarning)
        model.fit(blocks)
    # The interruption warning keeps the RuntimeWarning category it had.
    assert issubclass(TrainingInterruptedWarning, RuntimeWarning) and issubclass(SkabcWarning, UserWarning)


def test_an_rbf_scale_far_too_small_for_x_is_said_once_at_the_callers_line():
    """affinity='rbf' (gamma=1) on X in larger units: every point its own component; scikit-learn's and numpy's
    internal warnings came once per set, pointing into their code, and nothing said why (probe
    /work/probe39b/r09_unscaled_rbf.py)."""
    from skabc.datasets import make_circles_sets
    from skabc.exceptions import SkabcWarning

    X, _, groups = make_circles_sets(n_sets=4, set_size=40, random_state=0)
    caught = caught_warnings(lambda: ABCClustering(affinity="rbf", random_state=0).fit(X * 1000, groups=groups))
    said = ours(caught, "leaves most points of a set with no neighbour")
    assert len(said) == 1 and said[0].category is SkabcWarning and said[0].filename == __file__
    assert "gamma is far too large" in str(said[0].message)
    # At a scale that suits gamma, nothing is said; nor for kernels without a gamma to blame (orthogonal points
    # have cosine 0), where the advice would be wrong (probe /work/probe39d/r14_cosine_msg.py).
    assert not ours(caught_warnings(lambda: ABCClustering(affinity="rbf", random_state=0).fit(X, groups=groups)),
                    "no neighbour")
    # Wide standardised tables at gamma=1 (the bound was 1e-10; digits' nearest affinities are ~5e-6 and the
    # partition scored ARI 0, SpectralClustering's too); the same rows at gamma=1/64 have neighbours.
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    digits = StandardScaler().fit_transform(load_digits().data[:300])
    assert ours(caught_warnings(lambda: ABCClustering(affinity="rbf", n_clusters=10, random_state=0).fit(digits)),
                "no neighbour")
    assert not ours(caught_warnings(lambda: ABCClustering(affinity="rbf", gamma=1 / 64, n_clusters=10,
                                                          random_state=0).fit(digits)), "no neighbour")
    orthogonal = np.kron(np.eye(3), np.ones((10, 1)))  # 3 groups of identical one-hot rows
    assert not ours(caught_warnings(lambda: ABCClustering(affinity="cosine", n_clusters=3, random_state=0).fit(
        orthogonal + 1e-3 * np.random.default_rng(0).random((30, 3)))), "no neighbour")


def test_a_column_vector_y_is_warned_of_once():
    """ABCClustering(kernel=...).fit(X, y[:, None]) gave scikit-learn's column-vector warning twice: its own
    check of y and the kernel's (probe /work/probe39a/p14_dup_warnings.py)."""
    from sklearn.exceptions import DataConversionWarning

    X, y, groups = make_blob_sets(n_sets=8, set_size=30, random_state=0)
    kernel = ContextualKernel(**TINY)
    caught = caught_warnings(lambda: ABCClustering(kernel=kernel, random_state=0).fit(X, y[:, None], groups=groups))
    assert len([w for w in caught if issubclass(w.category, DataConversionWarning)]) == 1


@pytest.mark.parametrize("backend", ["sequential", "threading", "loky"])
def test_a_warning_of_every_set_is_said_once_at_the_callers_line_with_any_backend(backend):
    """With joblib's threading backend each set's warning came once per set, attributed to the thread pool
    (multiprocessing/pool.py): a worker thread's stack does not reach the caller (probe /work/probe39d/r4)."""
    from joblib import parallel_config

    X, _ = make_blobs(200, centers=3, random_state=0)
    groups = np.repeat(np.arange(4), 50)
    model = ABCClustering(affinity="rbf", gamma=1e4, n_clusters=3, arbiter=None, n_jobs=2, random_state=0)
    with parallel_config(backend=backend):
        caught = caught_warnings(lambda: model.fit(X, groups=groups))
    said = ours(caught, "leaves most points of a set with no neighbour")
    assert len(said) == 1 and said[0].filename == __file__


def test_a_set_the_generic_kernel_did_not_count_gets_no_small_set_warning():
    """Probe 58k: sparse rows too wide to count said 'k is not counted by the generic kernel here', then, in the same
    fit, that the generic kernel over-estimates k on sets this small.  Rows spanning more dimensions than the
    arbiter's training sets are counted by their kNN graph, sparse as given: neither warning applies."""
    import scipy.sparse as sp

    S = sp.random(60, 5000, density=0.01, random_state=0, format="csr")  # 60 rows span 59 dimensions at most
    said = [str(w.message) for w in caught_warnings(
        lambda: ABCClustering(affinity="nearest_neighbors", arbiter="generic-count", random_state=0).fit(S))]
    assert any("not counted by the generic kernel" in text for text in said)
    assert not any("shipped generic kernel was trained on sets" in text for text in said)
    spanning = sp.random(75, 5000, density=0.01, random_state=0, format="csr")  # 74 dimensions: beyond 64
    for model, kept in ((ABCClustering(affinity="nearest_neighbors", arbiter="generic-count", random_state=0),
                         "affinity-at-knn-wide-eigengap"), (ABCClustering(random_state=0), "knn-wide-eigengap")):
        said = [str(w.message) for w in caught_warnings(lambda model=model: model.fit(spanning))]
        assert model.candidate_ == kept
        assert not any("not counted by the generic kernel" in text for text in said)
        assert not any("shipped generic kernel was trained on sets" in text for text in said)
    dense = [str(w.message) for w in caught_warnings(
        lambda: ABCClustering(affinity="nearest_neighbors", arbiter="generic-count", random_state=0).fit(
            make_blobs(60, centers=3, random_state=0)[0]))]
    assert any("shipped generic kernel was trained on sets" in text for text in dense)  # counted: still said
    model = ABCClustering(affinity="nearest_neighbors", arbiter="generic-count", random_state=0).fit(S)
    many = [str(w.message) for w in caught_warnings(lambda: model.predict_many([S, S[:50]]))]  # the same, set by set
    assert not any("shipped generic kernel was trained on sets" in text for text in many)
