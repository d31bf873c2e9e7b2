"""The arbiter: candidate partitions, its forest file (read, validated, evaluated) and ABCClustering's use of it."""

import json
import warnings
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skabc import ABCClustering
from skabc._arbiter_candidates import arbiter_candidates
from skabc.spectral import SpectralStep
from skabc.spectral.arbiter import (
    ARBITERS,
    GIVEN_K_ARBITERS,
    KNN_CANDIDATE_VARIANTS,
    KNN_PARTITION_VARIANTS,
    WIDE_SET_CANDIDATES,
    Arbiter,
    TreeEnsemble,
    arbiter_for,
    load_arbiter,
    write_arbiter,
)
from skabc.spectral.candidates import CANDIDATES, candidate_partitions, default_candidates
from skabc.spectral.evidence import candidate_features, n_feature_columns
from skabc.spectral.knn import knn_graph

#: The spectral candidates for k unknown (the shipped file's four and ``knn-at-kernel-consensus``); ``gmm-bic`` has
#: tests of its own below.
UNKNOWN_K = tuple(name for name in default_candidates(False) if CANDIDATES[name][0] != "gmm")
GIVEN_K = default_candidates(True)
STEP = SpectralStep(n_clusters=None, max_clusters=20, selection="consensus", affinity_power=4.0, assign_labels="njw")


def _blobs(n=120, seed=0):
    X, _ = make_blobs(n_samples=n, centers=3, cluster_std=0.4, random_state=seed)
    return X


def _toy_probabilities(X):
    """A same-cluster probability from distances (a stand-in for a kernel's output)."""
    d = np.linalg.norm(X[:, None] - X[None], axis=-1)
    return np.exp(-d)


def _forest_file(tmp_path, trees, candidates=UNKNOWN_K, **changes):
    data = {"format": "skabc-arbiter", "version": 1, "candidates": list(candidates),
            "n_columns": n_feature_columns(len(candidates)), "baseline": 0.0, "trees": trees, **changes}
    path = tmp_path / "arbiter.json"
    path.write_text(json.dumps(data))
    return path


def _stump(feature, threshold, left_value, right_value):
    return {"feature": [feature, 0, 0], "threshold": [threshold, 0.0, 0.0], "left": [1, 0, 0], "right": [2, 0, 0],
            "value": [0.0, left_value, right_value], "is_leaf": [0, 1, 1], "missing_left": [1, 1, 1]}


def test_candidates_cover_every_entry_and_read_the_right_affinity():
    X = _blobs()
    candidates = candidate_partitions(STEP, _toy_probabilities(X), X, 0, 0, UNKNOWN_K)
    assert [c.name for c in candidates] == list(UNKNOWN_K)
    graph = knn_graph(X).toarray()
    for c in candidates:
        assert c.labels.shape == (len(X),) and c.n_clusters == len(np.unique(c.labels))
        if CANDIDATES[c.name][0] == "knn":
            np.testing.assert_array_equal(np.asarray(c.affinity.todense()), graph)
        else:  # the kernel's affinity at the step's power
            np.testing.assert_allclose(c.affinity, _toy_probabilities(X) ** 4.0)
    # A 10-NN graph of three far blobs has three components: three zero eigenvalues.
    knn = next(c for c in candidates if c.name == "knn-rotation")
    assert np.sum(knn.spectrum < 1e-8) == 3
    F = candidate_features(candidates, X.shape[1])
    assert F.shape == (len(UNKNOWN_K), n_feature_columns(len(UNKNOWN_K))) and np.isfinite(F).all()
    # The agreement columns: each candidate's ARI with every other one, in candidate order.
    from sklearn.metrics import adjusted_rand_score

    for i, c in enumerate(candidates):
        others = [adjusted_rand_score(c.labels, o.labels) for j, o in enumerate(candidates) if j != i]
        np.testing.assert_allclose(F[i, 7 : 7 + len(others)], others)
    # The kernel's own rule and the kNN graph's rotation both find the three blobs.
    assert [c.n_clusters for c in candidates[:3]] == [3, 3, 3]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_candidate_is_the_partition_its_own_spectral_step_finds(seed):
    """Sharing the eigensolves changes nothing: every candidate equals its rule run alone on its affinity."""
    from dataclasses import replace

    X, _ = make_blobs(n_samples=150, centers=4, cluster_std=1.5, random_state=seed)
    P = _toy_probabilities(X)
    found = {}
    for c in candidate_partitions(STEP, P, X, 0, 0, UNKNOWN_K):
        source, rule = CANDIDATES[c.name]
        given = {"selection": "eigengap", "n_clusters": found[rule]} if rule in CANDIDATES else {"selection": rule}
        step = replace(STEP, **given, affinity_power=1.0 if source == "knn" else STEP.affinity_power)
        labels, _, k, _ = step.cluster(knn_graph(X) if source == "knn" else P, 0, 0)
        np.testing.assert_array_equal(c.labels, labels)
        assert c.n_clusters == k
        found[c.name] = k


def test_a_candidate_may_cut_its_affinity_into_another_candidates_k():
    """Four long crossing rays: the kNN graph follows each ray but finds no gap in its spectrum at four, a
    kernel that counts four rays hands its k over, and the graph cut there separates them."""
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.RandomState(0)
    t = rng.uniform(0.05, 1.05, size=(4, 150))
    angles = np.array([0.3, 1.9, 3.4, 4.9])[:, None]
    X = np.column_stack([(t * np.cos(angles)).ravel(), (t * np.sin(angles)).ravel()])
    X += rng.normal(scale=0.01, size=X.shape)
    y = np.repeat(np.arange(4), 150)
    same = (y[:, None] == y[None]).astype(float)  # a kernel that knows the rays: it counts four
    probabilities = 0.05 + 0.9 * same
    names = ("knn-at-kernel-consensus", "knn-rotation", "knn-eigengap")  # the lender need not be a candidate
    borrowed, *own = candidate_partitions(STEP, probabilities, X, 0, 0, names)
    assert borrowed.n_clusters == 4 and all(c.n_clusters != 4 for c in own)
    assert adjusted_rand_score(y, borrowed.labels) > 0.95 > max(adjusted_rand_score(y, c.labels) for c in own)
    np.testing.assert_array_equal(borrowed.affinity.toarray(), knn_graph(X).toarray())
    # Its features read the kNN graph's spectrum at the borrowed k.
    assert len(borrowed.spectrum) >= 5 and np.isfinite(candidate_features([borrowed, *own], 2)).all()


def test_forest_matches_scikit_learn_gradient_boosting(tmp_path):
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(0)
    width = n_feature_columns(len(UNKNOWN_K))
    F, y = rng.normal(size=(300, width)), rng.uniform(size=300)
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, learning_rate=0.1, random_state=0).fit(F, y)
    path = tmp_path / "arbiter.json"
    write_arbiter(path, model, UNKNOWN_K, {"recipe": "test"})
    probe = rng.normal(size=(50, width))
    np.testing.assert_allclose(Arbiter.from_file(path).forest.predict(probe), model.predict(probe), atol=1e-10)
    # Several forests (other seeds) are written as one that predicts their mean.
    models = [GradientBoostingRegressor(n_estimators=20, max_depth=3, learning_rate=0.1, subsample=0.8,
                                        random_state=seed).fit(F, y) for seed in range(3)]
    write_arbiter(path, models, UNKNOWN_K, {"recipe": "test"})
    mean = np.mean([m.predict(probe) for m in models], axis=0)
    assert not np.allclose(mean, models[0].predict(probe))
    np.testing.assert_allclose(Arbiter.from_file(path).forest.predict(probe), mean, atol=1e-10)


@pytest.mark.parametrize("integer_features", [True, False], ids=["exact-threshold", "float32-threshold"])
def test_forest_sends_rows_on_a_threshold_as_scikit_learn_does(tmp_path, integer_features):
    """Probe 59a: rows lying exactly on a split threshold were never probed (random rows miss them). scikit-learn
    sends ``x <= threshold`` left, and reads X as float32, so a float64 row on a threshold between two float32 values
    went the other way here (8 of 20 rows, by up to 0.135)."""
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(0)
    width = n_feature_columns(len(UNKNOWN_K))
    F = rng.integers(0, 4, size=(300, width)).astype(float) if integer_features else rng.normal(size=(300, width))
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, learning_rate=0.1, random_state=0).fit(
        F, rng.uniform(size=300))
    path = tmp_path / "arbiter.json"
    write_arbiter(path, model, UNKNOWN_K, {"recipe": "test"})
    probe = F[:20].copy()
    for row, (tree,) in enumerate(model.estimators_[:20]):  # each row on its tree's root threshold
        probe[row, tree.tree_.feature[0]] = tree.tree_.threshold[0]
    np.testing.assert_allclose(Arbiter.from_file(path).forest.predict(probe), model.predict(probe), atol=1e-10)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "9" * 5000], ids=["deep", "huge-int"])
def test_unparsable_arbiter_files_are_value_errors_naming_the_file(tmp_path, text):
    """Probe 41a: deep nesting raised a RecursionError, a 5,000-digit number a ValueError not naming the file."""
    path = tmp_path / "forged.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"forged\.json is not a readable arbiter file"):
        Arbiter.from_file(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "other"}, "not an arbiter file"),
        ({"candidates": ["kernel-consensus", "nope"]}, "candidates must be"),
        ({"n_columns": 5}, "n_columns must be"),
        ({"trees": []}, "non-empty"),
        ({"baseline": float("nan")}, "baseline"),
        ({"trees": [dict(_stump(0, 0.0, 1.0, 2.0), left=[0, 0, 0])]}, "later node"),  # a cycle
        ({"trees": [_stump(999, 0.0, 1.0, 2.0)]}, "features must index"),
        # Probe 59a: the bounds themselves (a child one past the last node, a feature one past the last column).
        ({"trees": [dict(_stump(0, 0.0, 1.0, 2.0), right=[3, 0, 0])]}, "later node"),
        ({"trees": [_stump(n_feature_columns(len(UNKNOWN_K)), 0.0, 1.0, 2.0)]}, "features must index"),
        ({"candidates": [UNKNOWN_K[0], UNKNOWN_K[0], UNKNOWN_K[1]]}, "candidates must be"),
        # Review 66: kept beyond the domain, never weighed; a forest naming it escaped the width rule.
        ({"candidates": ["kernel-consensus", "knn-wide-eigengap"]}, "candidates must be"),
        ({"baseline": True}, "baseline"),
        ({"trees": [dict(_stump(0, 0.0, 1.0, 2.0), value=[0.0, 1.0])]}, "one length"),
        ({"trees": [dict(_stump(0, 0.0, 1.0, 2.0), value=["a", 1, 2])]}, "numbers"),
        ({"spectrum_size": 52}, "spectrum_size"),
        ({"spectrum_size": 2}, "spectrum_size"),
        ({"spectrum_size": "21"}, "spectrum_size"),
        ({"spectrum_size": True}, "spectrum_size"),
        # Probe 54b: numpy read these as numbers, a float or boolean version as 1, any nonzero flag as true.
        ({"trees": [dict(_stump(0, 0.0, 1.0, 2.0), threshold=["0.3", 0, 0])]}, "lists of numbers"),
        ({"trees": [dict(_stump(0, 0.0, 1.0, 2.0), value=[0.0, True, 2.0])]}, "lists of numbers"),
        ({"version": True}, "not an arbiter file"),
        ({"version": 1.0}, "not an arbiter file"),
        ({"trees": [dict(_stump(0, 0.0, 1.0, 2.0), is_leaf=[0, 2, 1])]}, "0 or 1"),
        ({"trees": [dict(_stump(0, 0.0, 1.0, 2.0), missing_left=[0.5, 1, 1])]}, "0 or 1"),
        ({"provenance": ["a list"]}, "provenance"),
        # Leaf values whose sum overflows: inf (or NaN) scores, and argmax would keep the first candidate.
        ({"trees": [_stump(0, 0.0, 1e308, 1e308)] * 2}, "can sum to"),
        # Review 54c: integers beyond float64 raised OverflowError (node arrays) and TypeError (baseline).
        ({"trees": [dict(_stump(0, 0.0, 1.0, 2.0), value=[0, 10**400, 1])]}, "must be finite"),
        ({"baseline": 10**400}, "baseline must be a finite number"),
        ({"max_features": 0}, "max_features must be a positive integer"),
        ({"max_features": True}, "max_features must be a positive integer"),
        ({"max_features": 64.0}, "max_features must be a positive integer"),
        ({"max_features": "64"}, "max_features must be a positive integer"),
        ({"max_features": -1}, "max_features must be a positive integer"),
        ({"max_features": None}, "max_features must be a positive integer"),
    ],
)
def test_forged_arbiter_files_are_refused(tmp_path, change, message):
    trees = change.pop("trees", [_stump(0, 0.0, 1.0, 2.0)])
    path = _forest_file(tmp_path, trees, **change)
    with pytest.raises(ValueError, match=message):
        Arbiter.from_file(path)


def _many_blobs(k=30, seed=0):
    """``k`` tight, far-apart blobs on a grid: a 10-NN graph of them has exactly ``k`` components."""
    rng = np.random.default_rng(seed)
    centres = np.array([(i % 6, i // 6) for i in range(k)], dtype=float) * 10.0
    X = np.repeat(centres, 15, axis=0) + rng.normal(scale=0.3, size=(15 * k, 2))
    return X, np.repeat(np.arange(k), 15)


def test_features_read_eigenvalues_below_the_solvers_accuracy_as_zero():
    """Which solver ran (ARPACK ~1e-16, float32 LAPACK refined ~1e-13) must not move a feature: the shipped forests
    split log10(lambda + 1e-12) down to lambda ~ 3e-16."""
    from skabc.spectral.evidence import EIGENVALUE_RESOLUTION, candidate_evidence, evidence_features

    X = _blobs()
    evidence = candidate_evidence(candidate_partitions(STEP, _toy_probabilities(X), X, 0, 0, UNKNOWN_K), 2)
    assert all(s[0] < 1e-12 for s in evidence["spectra"])  # every affinity here has its trivial zero

    def features_with_zeros_at(value):
        spectra = [[value if x < 1e-12 else x for x in s] for s in evidence["spectra"]]
        return evidence_features({**evidence, "spectra": spectra}, 51)

    exact = features_with_zeros_at(0.0)
    for rounding in (-3e-16, 3e-16, 5e-14, 2e-12, 0.5 * EIGENVALUE_RESOLUTION):
        np.testing.assert_array_equal(features_with_zeros_at(rounding), exact)
    assert not np.array_equal(features_with_zeros_at(10 * EIGENVALUE_RESOLUTION), exact)


def test_features_read_as_many_eigenvalues_as_the_file_says():
    """Past 20 clusters, a 21-eigenvalue view saturates; a 51-eigenvalue one still counts every component."""
    X, _ = _many_blobs(30)
    step = SpectralStep(n_clusters=None, max_clusters=50, selection="consensus", affinity_power=4.0,
                        assign_labels="njw")
    candidates = candidate_partitions(step, _toy_probabilities(X), X, 0, 0)
    knn = candidates[UNKNOWN_K.index("knn-eigengap")]
    # The rotation rule (first of the kNN candidates) solves for 21 eigenvalues; both kNN candidates read the
    # eigengap's longer spectrum of the same graph.
    assert knn.n_clusters == 30 and len(knn.spectrum) == 51 and np.sum(knn.spectrum < 1e-8) == 30
    np.testing.assert_array_equal(candidates[UNKNOWN_K.index("knn-rotation")].spectrum, knn.spectrum)
    zeros = 6  # column of the number of zero eigenvalues among a candidate's own features
    narrow, wide = (candidate_features(candidates, 2, size) for size in (21, 51))
    assert narrow.shape == wide.shape
    assert narrow[UNKNOWN_K.index("knn-eigengap"), zeros] == 21
    assert wide[UNKNOWN_K.index("knn-eigengap"), zeros] == 30
    # Around k = 30 the wide view reads the 30th and 31st eigenvalues: zero, then a gap.
    low, high = wide[UNKNOWN_K.index("knn-eigengap"), 1:3]
    assert low < 1e-8 < high


def test_spectrum_size_travels_with_the_file(tmp_path):
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(0)
    width = n_feature_columns(len(UNKNOWN_K))
    model = GradientBoostingRegressor(n_estimators=5, random_state=0).fit(rng.normal(size=(50, width)),
                                                                           rng.uniform(size=50))
    path = tmp_path / "arbiter.json"
    write_arbiter(path, model, UNKNOWN_K, {"recipe": "test"}, spectrum_size=51)
    assert Arbiter.from_file(path).spectrum_size == 51
    # A file that names none reads the 21 eigenvalues the first arbiters were trained on.
    assert Arbiter.from_file(_forest_file(tmp_path, [_stump(0, 0.0, 1.0, 2.0)])).spectrum_size == 21


def test_given_k_candidates_compute_the_arbiters_spectrum():
    X, _ = _many_blobs(30)
    step = SpectralStep(n_clusters=30, max_clusters=50, selection="consensus", affinity_power=4.0,
                        assign_labels="njw")
    for size in (21, 40):
        candidates = candidate_partitions(step, _toy_probabilities(X), X, 0, 0, GIVEN_K, size)
        assert all(len(c.spectrum) == size for c in candidates)


def test_not_json_is_refused(tmp_path):
    path = tmp_path / "arbiter.json"
    path.write_bytes(b"\x00\x01 not json")
    with pytest.raises(ValueError, match="not a readable arbiter file"):
        Arbiter.from_file(path)


def test_tree_rows_of_wrong_width_are_refused():
    forest = TreeEnsemble([_stump(0, 0.0, 1.0, 2.0)], 0.0, 4)
    with pytest.raises(ValueError, match="4 columns"):
        forest.predict(np.zeros((2, 3)))
    np.testing.assert_array_equal(forest.predict([[-1, 0, 0, 0], [1, 0, 0, 0], [np.nan, 0, 0, 0]]), [1, 2, 1])


def test_shipped_arbiter_loads_and_scores_every_candidate():
    shipped = load_arbiter("generic")
    assert shipped.candidates == ("kernel-consensus", "kernel-eigengap", "knn-rotation", "knn-eigengap")
    assert shipped.provenance["recipe"] == "benchmarks/train_arbiter.py"
    X = _blobs()
    candidates = candidate_partitions(STEP, _toy_probabilities(X), X, 0, 0, shipped.candidates)
    best, scores = shipped.choose(candidates, X.shape[1])
    assert scores.shape == (4,) and np.isfinite(scores).all() and best == int(np.argmax(scores))
    with pytest.raises(ValueError, match="unknown arbiter"):
        load_arbiter("nope")


@pytest.fixture
def fresh_arbiters():
    """The shipped arbiters re-read after the test, whatever it patched."""
    load_arbiter.cache_clear()
    yield
    load_arbiter.cache_clear()


def test_abc_clustering_keeps_the_candidate_the_forest_prefers(tmp_path, monkeypatch, fresh_arbiters):
    # A one-split forest that scores knn-rotation (its one-hot column) above every other candidate.
    onehot = n_feature_columns(len(UNKNOWN_K)) - len(UNKNOWN_K) + UNKNOWN_K.index("knn-rotation")
    path = _forest_file(tmp_path, [_stump(onehot, 0.5, 0.0, 1.0)])
    monkeypatch.setitem(ARBITERS, "generic", str(path))  # the shipped name, read from this file instead
    X = _blobs(150)
    model = ABCClustering(arbiter="generic", random_state=0).fit(X)
    assert model.arbiter_ == "generic" and model.candidate_ == "knn-rotation"
    np.testing.assert_array_equal(model.affinity_matrix_.toarray(), knn_graph(X).toarray())
    assert model.n_clusters_ == 3


@pytest.mark.parametrize(("preferred", "name"), [("kernel-consensus", "knn-at-kernel-consensus"),
                                                 ("knn-rotation", "knn-rotation")])
def test_the_knn_partition_variant_cuts_the_knn_graph_at_the_chosen_k(tmp_path, monkeypatch, fresh_arbiters,
                                                                      preferred, name):
    from dataclasses import replace

    onehot = n_feature_columns(len(UNKNOWN_K)) - len(UNKNOWN_K) + UNKNOWN_K.index(preferred)
    path = _forest_file(tmp_path, [_stump(onehot, 0.5, 0.0, 1.0)])
    for arbiter in ("generic", "generic-knn"):
        monkeypatch.setitem(ARBITERS, arbiter, str(path))
    X = np.vstack([_blobs(150), [[0.0, 0.0]]])  # one point between the blobs: the two affinities may disagree
    P = _toy_probabilities(X)
    own = load_arbiter("generic").cluster(STEP, P, X, 0, 0)
    labels, affinity, k, eigenvalues, chosen = load_arbiter("generic-knn").cluster(STEP, P, X, 0, 0)
    assert own[4] == preferred and chosen == name and k == own[2]
    np.testing.assert_array_equal(eigenvalues, own[3])  # the k came from the chosen candidate's rule
    graph = knn_graph(X)
    np.testing.assert_array_equal(affinity.toarray(), graph.toarray())
    np.testing.assert_array_equal(labels, replace(STEP, affinity_power=1.0).labels_for(graph, k, 0))


def test_the_knn_candidates_variant_keeps_the_best_predicted_knn_candidate(tmp_path, monkeypatch, fresh_arbiters):
    """The forest prefers a kernel candidate; the kNN-candidates variant keeps the best predicted kNN one instead,
    its own partition and k, and with k given cuts the kNN graph into it."""
    from dataclasses import replace

    kernel_first = n_feature_columns(len(UNKNOWN_K)) - len(UNKNOWN_K) + UNKNOWN_K.index("kernel-consensus")
    eigengap = n_feature_columns(len(UNKNOWN_K)) - len(UNKNOWN_K) + UNKNOWN_K.index("knn-eigengap")
    path = _forest_file(tmp_path, [_stump(kernel_first, 0.5, 0.0, 1.0), _stump(eigengap, 0.5, 0.0, 0.5)])
    for arbiter in ("generic", "generic-knn-only"):
        monkeypatch.setitem(ARBITERS, arbiter, str(path))
    X = np.vstack([_blobs(150), [[0.0, 0.0]]])
    P = _toy_probabilities(X)
    own = load_arbiter("generic").cluster(STEP, P, X, 0, 0)
    only = load_arbiter("generic-knn-only")
    assert only.sources == ("knn",) and only.partition == "knn"
    labels, _, k, _, chosen = only.cluster(STEP, P, X, 0, 0)
    assert own[4] == "kernel-consensus" and chosen == "knn-eigengap"
    candidates = only.candidates_of(STEP, P, X, 0, 0)
    kept = candidates[UNKNOWN_K.index("knn-eigengap")]
    np.testing.assert_array_equal(labels, kept.labels)
    assert k == kept.n_clusters
    given = replace(STEP, n_clusters=3)
    assert load_arbiter("generic-knn-only", given_k=True).cluster(given, P, X, 0, 0)[4] == "knn-given"


@pytest.mark.parametrize("candidates", [UNKNOWN_K, ("kernel-consensus", "knn-rotation", "knn-eigengap"), GIVEN_K])
def test_the_knn_graph_is_solved_once_for_every_rule_and_cut(tmp_path, monkeypatch, fresh_arbiters, candidates):
    """One eigensolve of the set's kNN graph serves its rotation and eigengap rules, the spectrum its features read,
    every cut of it (at its own rules' k, at the kernel's) and the kNN-partition arbiter's final cut; each cut
    is still, but for k-means' seeding, the partition that the graph's own spectral step finds."""
    from dataclasses import replace

    from scipy.sparse.csgraph import connected_components

    from skabc.spectral import eigen

    X, _ = make_blobs(n_samples=400, centers=3, cluster_std=2.0, random_state=0)
    graph = knn_graph(X)
    assert connected_components(graph)[0] == 1  # one component: one call per solve
    kernel_first = candidates.index(next(name for name in candidates if CANDIDATES[name][0] == "kernel"))
    onehot = n_feature_columns(len(candidates)) - len(candidates) + kernel_first
    path = _forest_file(tmp_path, [_stump(onehot, 0.5, 0.0, 1.0)], candidates=candidates)
    monkeypatch.setitem(GIVEN_K_ARBITERS if candidates == GIVEN_K else ARBITERS, "generic-knn", str(path))
    solved = []
    real = eigen._component_eigenpairs
    monkeypatch.setattr(eigen, "_component_eigenpairs", lambda a, *args, **kw: solved.append(a.shape) or real(
        a, *args, **kw))
    step = replace(STEP, n_clusters=4) if candidates == GIVEN_K else STEP
    labels, affinity, k, _, chosen = load_arbiter("generic-knn", given_k=candidates == GIVEN_K).cluster(
        step, _toy_probabilities(X), X, 0, 0)
    assert solved == [(len(X), len(X))]  # the kernel's dense affinity has solvers of its own
    assert chosen.startswith("knn-at-kernel") and affinity is not None and k >= 2
    expected = replace(step, affinity_power=1.0, n_clusters=None).labels_for(graph, k, 0)
    assert adjusted_rand_score(expected, labels) > 0.98  # k = 7 here: a few boundary rows may settle elsewhere


@pytest.mark.parametrize("assign_labels, n_components, k", [("njw", None, 5), ("kmeans", None, 5),
                                                           ("kmeans", 8, 7), ("kmeans", 8, 9), ("njw", None, 8)])
def test_cuts_reading_no_more_columns_than_components_are_the_exact_ones(assign_labels, n_components, k):
    """Eight far groups (60 down to 12 rows: eight components of the kNN graph) cut at a given k, reading no more
    embedding columns than there are components: the cut is the one solved on its own, from the exact indicator
    vectors of the largest components.  Read from the shared solve, whose zero eigenvalues differ by rounding
    alone, rounding chose the components (njw, k = 5: the 40 rows merged, the 20 kept whole) and split one
    (k-means, n_components = 8, k = 9: 19 + 1 of the 20 rows)."""
    from dataclasses import replace

    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(0)
    sizes = [60, 50, 40, 30, 25, 20, 15, 12]
    X = np.vstack([rng.normal(size=(s, 2)) * 0.1 + [i * 100.0, (i % 3) * 7.0] for i, s in enumerate(sizes)])
    graph = knn_graph(X)
    n_found, component = connected_components(graph, directed=False)
    assert n_found == len(sizes)
    step = replace(STEP, n_clusters=k, assign_labels=assign_labels, n_components=n_components, max_clusters=50)
    knn_given = candidate_partitions(step, _toy_probabilities(X), X, 0, 0, GIVEN_K)[1]
    assert knn_given.name == "knn-given"
    alone = replace(step, affinity_power=1.0).labels_for(graph, k, 0)
    assert adjusted_rand_score(alone, knn_given.labels) == 1.0
    if k < len(sizes):  # no component is split
        assert all(len(np.unique(knn_given.labels[component == c])) == 1 for c in range(n_found))


def test_a_knn_partition_arbiter_without_knn_candidates_builds_the_graph(tmp_path):
    from dataclasses import replace

    kernel_only = ("kernel-consensus", "kernel-eigengap")
    path = _forest_file(tmp_path, [_stump(0, 0.5, 0.0, 1.0)], candidates=kernel_only)
    arbiter = replace(Arbiter.from_file(path), partition="knn")
    X = _blobs(150)
    labels, affinity, k, _, chosen = arbiter.cluster(STEP, _toy_probabilities(X), X, 0, 0)
    assert chosen.startswith("knn-at-kernel-")
    np.testing.assert_array_equal(affinity.toarray(), knn_graph(X).toarray())
    np.testing.assert_array_equal(labels, replace(STEP, affinity_power=1.0).labels_for(knn_graph(X), k, 0))


def test_every_knn_partition_variant_is_an_arbiter_in_both_modes(fresh_arbiters):
    assert load_arbiter("generic").partition == "kernel"
    for base, variant in [*KNN_PARTITION_VARIANTS.items(), *KNN_CANDIDATE_VARIANTS.items()]:
        assert ARBITERS[variant] == ARBITERS[base] and GIVEN_K_ARBITERS[variant] == GIVEN_K_ARBITERS[base]
        assert load_arbiter(variant).partition == load_arbiter(variant, given_k=True).partition == "knn"
    X = _blobs(150)
    model = ABCClustering(n_clusters=3, arbiter="generic-knn", random_state=0).fit(X)
    assert model.candidate_ in ("knn-given", "knn-at-kernel-given")
    np.testing.assert_array_equal(model.affinity_matrix_.toarray(), knn_graph(X).toarray())


def test_arbiter_resolution():
    X = _blobs()
    default = ABCClustering(random_state=0).fit(X)
    assert default.arbiter_ == "generic" and default.candidate_ in UNKNOWN_K
    # Given k: the arbiter's file for a given k; an explicit k rule or arbiter=None: the kernel's own partition.
    given = ABCClustering(n_clusters=3, random_state=0).fit(X)
    assert given.arbiter_ == "generic" and given.candidate_ in GIVEN_K and given.n_clusters_ == 3
    assert given.eigenvalues_ is None  # as with k given and no arbiter
    assert ABCClustering(n_clusters=3, arbiter=None, random_state=0).fit(X).candidate_ is None
    plain = ABCClustering(arbiter=None, random_state=0).fit(X)
    rule = ABCClustering(n_clusters_selection="consensus", random_state=0).fit(X)
    assert plain.arbiter_ is None and rule.arbiter_ is None and plain.candidate_ is None
    np.testing.assert_array_equal(plain.labels_, rule.labels_)
    # scikit-learn's affinities recommend none: k unknown, the generic kernel counts (tests/test_drop_in.py);
    # given k, SpectralClustering's own step; naming an arbiter for a matrix is refused.
    assert ABCClustering(affinity="nearest_neighbors", random_state=0).fit(X).arbiter_ == "generic-count"
    assert ABCClustering(n_clusters=3, affinity="nearest_neighbors", random_state=0).fit(X).arbiter_ is None
    with pytest.raises(ValueError, match="no file for a given n_clusters"):
        ABCClustering(n_clusters=3, affinity="nearest_neighbors", arbiter="generic-count").fit(X)
    with pytest.raises(ValueError, match=r"arbiter='generic'.*not rows"):
        ABCClustering(affinity="precomputed", arbiter="generic").fit(_toy_probabilities(X))


@pytest.mark.parametrize("seed", [0, 1])
def test_given_k_candidates_are_the_partitions_at_that_k(seed):
    from dataclasses import replace

    X, _ = make_blobs(n_samples=150, centers=4, cluster_std=1.5, random_state=seed)
    P = _toy_probabilities(X)
    step = replace(STEP, n_clusters=3)
    candidates = candidate_partitions(step, P, X, 0, 0)
    assert [c.name for c in candidates] == list(GIVEN_K)
    for c in candidates:
        source = CANDIDATES[c.name][0]
        alone = replace(step, affinity_power=1.0) if source == "knn" else step
        labels, _, k, eigenvalues = alone.cluster(knn_graph(X) if source == "knn" else P, 0, 0)
        np.testing.assert_array_equal(c.labels, labels)
        assert c.n_clusters == k == 3 and c.eigenvalues is None and eigenvalues is None
        assert c.spectrum.shape == (21,) and c.spectrum[0] < 1e-6  # the features read the spectrum anyway
    with pytest.raises(ValueError, match="need a given n_clusters"):
        candidate_partitions(STEP, P, X, 0, 0, GIVEN_K)


def test_given_k_forest_can_prefer_the_knn_graph(tmp_path, monkeypatch, fresh_arbiters):
    onehot = n_feature_columns(len(GIVEN_K)) - len(GIVEN_K) + GIVEN_K.index("knn-given")
    path = _forest_file(tmp_path, [_stump(onehot, 0.5, 0.0, 1.0)], candidates=GIVEN_K)
    monkeypatch.setitem(GIVEN_K_ARBITERS, "generic", str(path))
    X = _blobs(150)
    model = ABCClustering(n_clusters=2, random_state=0).fit(X)
    assert model.candidate_ == "knn-given" and model.n_clusters_ == 2
    np.testing.assert_array_equal(model.affinity_matrix_.toarray(), knn_graph(X).toarray())
    # Each mode reads its own file: k unknown is untouched by this one.
    assert ABCClustering(random_state=0).fit(X).candidate_ in UNKNOWN_K


def test_a_knn_graph_of_exactly_k_components_wins_at_a_given_k(tmp_path, monkeypatch, fresh_arbiters):
    # A forest that always prefers the kernel's cut keeps it, except where the kNN graph has k components.
    onehot = n_feature_columns(len(GIVEN_K)) - len(GIVEN_K) + GIVEN_K.index("kernel-given")
    path = _forest_file(tmp_path, [_stump(onehot, 0.5, 0.0, 1.0)], candidates=GIVEN_K)
    monkeypatch.setitem(GIVEN_K_ARBITERS, "generic", str(path))
    X = _blobs(150)  # three far blobs: a kNN graph of three components
    assert ABCClustering(n_clusters=3, random_state=0).fit(X).candidate_ == "knn-given"
    assert ABCClustering(n_clusters=2, random_state=0).fit(X).candidate_ == "kernel-given"
    assert ABCClustering(n_clusters=4, random_state=0).fit(X).candidate_ == "kernel-given"


def test_a_small_far_cluster_is_kept_at_a_given_k():
    # The kernel cut 980 rows of one blob in two and lumped 20 far rows with one side (ARI 0.08).
    X, y = make_blobs([980, 20], centers=[[0, 0], [20, 20]], random_state=0)
    model = ABCClustering(n_clusters=2, random_state=0).fit(X)
    assert adjusted_rand_score(y, model.labels_) == 1.0 and model.candidate_ == "knn-given"


def test_arbiter_modes_are_not_mixed(tmp_path, fresh_arbiters):
    from dataclasses import replace

    path = _forest_file(tmp_path, [_stump(0, 0.0, 1.0, 2.0)], candidates=("kernel-consensus", "knn-given"))
    with pytest.raises(ValueError, match="all take a given k"):
        Arbiter.from_file(path)
    X = _blobs()
    with pytest.raises(ValueError, match="for an unknown k"):
        load_arbiter("generic").cluster(replace(STEP, n_clusters=3), _toy_probabilities(X), X, 0, 0)
    with pytest.raises(ValueError, match="for a given k"):
        load_arbiter("generic", given_k=True).cluster(STEP, _toy_probabilities(X), X, 0, 0)
    with pytest.raises(ValueError, match="unknown arbiter 'nope' for a given k"):
        load_arbiter("nope", given_k=True)


def test_more_clusters_than_points_with_the_given_k_arbiter_warns_and_gives_singletons():
    X = _blobs(12)
    with pytest.warns(UserWarning, match="every point becomes its own cluster"):
        model = ABCClustering(n_clusters=20, random_state=0).fit(X)
    assert model.n_clusters_ == 12 and model.candidate_ is None


def test_arbiter_survives_save_and_load(tmp_path):
    X = _blobs()
    model = ABCClustering(random_state=0).fit(X)
    model.save(tmp_path / "model.safetensors")
    loaded = ABCClustering.load(tmp_path / "model.safetensors", device="cpu")
    assert loaded.arbiter_ == "generic"
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_grouped_fit_reports_one_candidate_per_group():
    X = np.vstack([_blobs(90, 0), _blobs(90, 1)])
    groups = np.repeat([0, 1], 90)
    model = ABCClustering(random_state=0).fit(X, groups=groups)
    assert len(model.candidate_) == 2 and all(c in UNKNOWN_K for c in model.candidate_)



def test_validation_clusters_with_the_arbiter_only_when_the_rows_are_there():
    from skabc.training.validation import cluster_affinity

    X = _blobs()
    P = _toy_probabilities(X)
    settings = {"affinity_power": 4.0, "assign_labels": "njw", "n_clusters_selection": "consensus"}
    with_arbiter = cluster_affinity(P, {**settings, "arbiter": "generic"}, rows=X)
    step = SpectralStep(n_clusters=None, max_clusters=50, selection="consensus", affinity_power=4.0,
                        assign_labels="njw")
    np.testing.assert_array_equal(with_arbiter, load_arbiter("generic").cluster(step, P, X, 0, 0)[0])
    # Without the rows (no kNN graph to build) the kernel's own rule clusters, as without an arbiter.
    np.testing.assert_array_equal(cluster_affinity(P, {**settings, "arbiter": "generic"}),
                                  cluster_affinity(P, settings))


def test_a_fine_tune_without_held_out_sets_drops_the_arbiter():
    from skabc import ContextualKernel

    X, y = make_blobs(n_samples=30, centers=2, random_state=0)
    kernel = ContextualKernel(max_epochs=1, sets_per_epoch=4, batch_size=4, set_size=(10, 30),
                              random_state=0).fit(X, y)
    assert kernel.init_ == "generic" and kernel.validation_score_ is None
    assert "arbiter" not in kernel.recommended_clustering()
    assert kernel.recommended_clustering()["n_clusters_selection"] == "consensus"


def test_arbiter_on_a_subsample_and_in_worker_processes():
    X = _blobs(300)
    model = ABCClustering(max_samples=120, random_state=0).fit(X)
    assert model.labels_.shape == (300,) and model.candidate_ in CANDIDATES
    sets = [_blobs(80, seed) for seed in range(3)]
    serial = model.predict_many(sets, n_jobs=1)
    parallel = model.predict_many(sets, n_jobs=2)  # joblib workers read the arbiter by its name
    for a, b in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n_clusters", [None, 1, 2])
def test_sets_too_small_for_a_knn_graph_get_the_kernels_own_partition(n_clusters):
    X = _blobs(120)
    model = ABCClustering(n_clusters=n_clusters, random_state=0).fit(X)
    assert model.arbiter_ == "generic"
    for rows in ([0], [0, 1]):
        labels = model.predict(X[rows])
        assert labels.shape == (len(rows),)


@pytest.mark.parametrize("arbiter", ["generic", "generic-knn"])
@pytest.mark.parametrize("n_clusters", [None, 2])
def test_a_knn_graph_linking_every_row_is_no_candidate(arbiter, n_clusters):
    """A probe (/work/probe35a): with at most 11 distinct rows the 10-NN graph links every row to every other, and
    the kNN partition of ``arbiter='generic-knn'`` was an arbitrary cut: two blobs of five rows 8 apart scored ARI 0,
    copies of one row landed in different clusters (also in a set of 600 rows of two values)."""
    rng = np.random.RandomState(0)
    y = np.arange(10) % 2
    blobs = rng.randn(10, 2) * 0.3 + 8 * y[:, None]
    model = ABCClustering(n_clusters=n_clusters, arbiter=arbiter, random_state=0).fit(blobs)
    assert adjusted_rand_score(y, model.labels_) == 1.0 and model.candidate_ is None
    two_values = np.array([[0.0, 0.0], [1.0, 1.0]])[np.arange(600) % 2]
    labels = ABCClustering(n_clusters=n_clusters, arbiter=arbiter, random_state=0).fit_predict(two_values)
    assert adjusted_rand_score(np.arange(600) % 2, labels) == 1.0
    with pytest.raises(ValueError, match=r"more than 11 distinct rows \(its 10-NN graph links every row"):
        arbiter_candidates(model, two_values)


def test_shipped_given_k_arbiter_loads_and_scores_both_partitions():
    shipped = load_arbiter("generic", given_k=True)
    assert shipped.given_k and not load_arbiter("generic").given_k
    assert shipped.candidates == GIVEN_K and "true k" in shipped.provenance["spectral_step"]
    X = _blobs()
    from dataclasses import replace

    candidates = candidate_partitions(replace(STEP, n_clusters=3), _toy_probabilities(X), X, 0, 0)
    best, scores = shipped.choose(candidates, X.shape[1])
    assert scores.shape == (2,) and np.isfinite(scores).all() and best == int(np.argmax(scores))


def test_gaussian_mixture_finds_touching_sheared_blobs_that_bic_prefers():
    from sklearn.metrics import adjusted_rand_score

    from skabc.spectral.mixture import bic_mixture_partition

    X, y = make_blobs(n_samples=300, centers=[[0, 0], [3, 0], [0, 3]], cluster_std=0.6, random_state=0)
    X = X @ np.array([[0.6, -0.6], [-0.4, 0.8]])  # sheared, as scikit-learn's gallery 'aniso'
    labels = bic_mixture_partition(X * 1e3 + 5.0, max_clusters=50, random_state=0)  # any units
    assert labels.dtype == np.int64 and set(labels) == {0, 1, 2}
    assert adjusted_rand_score(y, labels) > 0.9
    # One Gaussian: one cluster.
    one = bic_mixture_partition(np.random.default_rng(0).normal(size=(200, 2)), max_clusters=50, random_state=0)
    assert set(one) == {0}


def test_gaussian_mixture_takes_wide_sparse_and_constant_columns():
    import scipy.sparse as sp

    from skabc.spectral.mixture import MAX_MIXTURE_FEATURES, bic_mixture_partition, mixture_features

    X, _ = make_blobs(n_samples=150, n_features=40, centers=3, random_state=1)
    X[:, 5] = 7.0  # a constant column is dropped, not divided by zero
    Z = mixture_features(X, 0)
    assert Z.shape == (150, MAX_MIXTURE_FEATURES) and np.isfinite(Z).all()
    for data in (X, sp.csr_matrix(np.abs(X))):
        labels = bic_mixture_partition(data, max_clusters=10, random_state=0)
        assert labels.shape == (150,) and np.array_equal(np.unique(labels), np.arange(labels.max() + 1))
    assert mixture_features(np.ones((5, 3)), 0).shape == (5, 1)  # nothing varies: one column of zeros


@pytest.mark.parametrize("names", [("knn-eigengap", "gmm-bic"), ("kernel-consensus", "gmm-bic")])
def test_the_mixture_candidate_reads_the_knn_graphs_spectrum(names):
    """With or without a kNN candidate, the mixture's row reads the 10-NN graph's spectrum and partition source."""
    from skabc.spectral.mixture import bic_mixture_partition

    X = _blobs(seed=3)
    candidates = candidate_partitions(STEP, _toy_probabilities(X), X, 0, 0, names)
    gmm = candidates[-1]
    np.testing.assert_array_equal(gmm.labels, bic_mixture_partition(X, STEP.max_clusters, 0))
    assert gmm.n_clusters == 3
    np.testing.assert_array_equal(np.asarray(gmm.affinity.todense()), knn_graph(X).toarray())
    assert np.sum(gmm.spectrum < 1e-8) == 3  # three far blobs: three components of the graph
    if names[0] == "knn-eigengap":
        assert gmm.affinity is candidates[0].affinity  # one graph per set, not two
        np.testing.assert_array_equal(gmm.spectrum, candidates[0].spectrum)
    F = candidate_features(candidates, X.shape[1])
    assert F.shape == (2, n_feature_columns(2)) and np.isfinite(F).all()


def test_an_arbiter_file_may_name_the_mixture_candidate(tmp_path):
    names = (*UNKNOWN_K, "gmm-bic")
    onehot = n_feature_columns(len(names)) - 1  # the mixture's one-hot column: predicted best
    path = _forest_file(tmp_path, [_stump(onehot, 0.5, 0.0, 1.0)], candidates=names)
    arbiter = Arbiter.from_file(path)
    X = _blobs(seed=4)
    labels, affinity, k, _, name = arbiter.cluster(STEP, _toy_probabilities(X), X, 0, 0)
    assert affinity.shape == (len(X), len(X))  # the kNN graph it was read through
    assert name == "gmm-bic" and k == 3 and len(np.unique(labels)) == 3
    with pytest.raises(ValueError, match="rule 'bic'"):
        from skabc.spectral.mixture import MixtureSource

        MixtureSource(None, X).k_by("eigengap", 0, 0)


# ------------------------------------------------------------------------- repeated rows
def test_knn_graph_of_distinct_rows_is_the_plain_knn_graph():
    import scipy.sparse as sp
    from sklearn.neighbors import kneighbors_graph

    from skabc.spectral.knn import knn_graph

    X = np.random.default_rng(0).normal(size=(80, 3))
    plain = kneighbors_graph(X / np.abs(X).max(), n_neighbors=10)
    assert (knn_graph(X) != 0.5 * (plain + plain.T)).nnz == 0
    assert (knn_graph(sp.csr_matrix(X)) != knn_graph(X)).nnz == 0


def test_repeated_rows_share_their_links_and_link_to_each_other():
    """Rows repeated more than n_neighbors times made the kNN graph one clique per distinct row."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    from skabc.spectral.knn import knn_graph

    distinct = np.random.default_rng(1).normal(size=(15, 2))
    X = np.repeat(distinct, 12, axis=0)[np.random.default_rng(2).permutation(180)]
    graph = knn_graph(X)
    assert abs(graph - graph.T).max() == 0 and graph.diagonal().max() == 0
    assert connected_components(graph)[0] == connected_components(knn_graph(distinct))[0] == 1
    same = (X[:, None, :] == X[None, :, :]).all(axis=2) & ~np.eye(180, dtype=bool)
    assert np.all(graph.toarray()[same] == 1.0)  # copies linked to each other
    # Each row's distinct neighbours are its distinct row's n_neighbors nearest others (or those that chose it).
    first = {tuple(row): i for i, row in enumerate(distinct)}
    location = np.array([first[tuple(row)] for row in X])
    other = location[:, None] != location[None, :]
    expected = knn_graph(distinct).toarray()[location[:, None], location[None, :]]
    np.testing.assert_array_equal(graph.toarray()[other], expected[other])
    assert (knn_graph(sp.csr_matrix(X)) != graph).nnz == 0
    np.testing.assert_array_equal(knn_graph(np.ones((5, 2))).toarray(), 1 - np.eye(5))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, bool])
def test_distinct_rows_are_numpy_s_unique_rows_in_order_of_appearance(dtype):
    """Rows grouped by their bytes (fast on wide sets), as np.unique(axis=0) groups them: -0.0 is 0.0."""
    from skabc.spectral.knn import _distinct_rows

    rng = np.random.default_rng(7)
    X = rng.integers(-1, 2, size=(300, 4)).astype(dtype)
    if X.dtype.kind == "f":
        X[rng.random(X.shape) < 0.2] = -0.0
    if dtype is np.int64:  # integers past 2**53: float64 would make them equal (review 58r)
        X[:3] = 2**53 + np.arange(3)[:, None]
    first, inverse = _distinct_rows(X)
    _, numpy_first, numpy_inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    assert np.all(np.diff(first) > 0) and np.array_equal(X[first][inverse], X)  # in order; every row its own
    assert len(first) == len(numpy_first)
    np.testing.assert_array_equal(numpy_inverse.ravel()[first][inverse], numpy_inverse.ravel())


def test_a_table_of_discretised_columns_is_not_cut_into_its_distinct_rows():
    """Blobs whose columns are cut into three levels: 37 distinct rows for 800; the plain kNN graph's
    candidates won with 20 clusters (ARI 0.35)."""
    from sklearn.metrics import adjusted_rand_score

    X, y = make_blobs(800, centers=3, n_features=4, cluster_std=1.5, random_state=1)
    X = np.column_stack([np.digitize(c, np.quantile(c, [1 / 3, 2 / 3])) for c in X.T]).astype(float)
    model = ABCClustering(random_state=0).fit(X)
    assert model.n_clusters_ == 3 and adjusted_rand_score(y, model.labels_) > 0.95


def test_a_spread_graph_past_its_size_limit_is_the_plain_knn_graph(monkeypatch):
    from sklearn.neighbors import kneighbors_graph

    from skabc.spectral import knn

    X = np.repeat(np.random.default_rng(3).normal(size=(6, 2)), 20, axis=0)
    spread = knn.knn_graph(X)
    assert spread.nnz > 6 * 19 * 20  # the copies' cliques and the inherited links
    monkeypatch.setattr(knn, "MAX_SPREAD_ENTRIES", spread.nnz // 2)
    plain = kneighbors_graph(X / np.abs(X).max(), n_neighbors=10)
    assert (knn.knn_graph(X) != 0.5 * (plain + plain.T)).nnz == 0


def test_verbose_names_each_candidates_log_and_the_partition_kept(capsys):
    """verbose=1 printed the label-assignment logs of every candidate, those discarded too, with nothing saying
    whose they were or which partition was kept."""
    X, _ = make_blobs(200, centers=3, random_state=0)
    model = ABCClustering(random_state=0, verbose=1).fit(X)
    out = capsys.readouterr().out
    kept = [line for line in out.splitlines() if line.startswith("arbiter 'generic': kept ")]
    assert len(kept) == 1 and f"(k={model.n_clusters_})" in kept[0] and out.rstrip().endswith(kept[0])
    headers = [line for line in out.splitlines() if line.startswith("candidate ")]
    assert [h.split()[1] for h in headers] == list(load_arbiter("generic").candidates)
    # Probe 53b: at verbose=1 the cuts' own logs (k-means's, four or five times SpectralClustering's) buried the
    # line above; they come from verbose=2, each under its candidate's name.
    assert len(out.splitlines()) == len(headers) + 1 and "Computing label assignment" not in out
    ABCClustering(random_state=0, verbose=2).fit(X)
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("candidate ")]
    assert out.index(headers[0]) < out.index("Computing label assignment using") and "Initialization complete" in out
    ABCClustering(n_clusters=3, random_state=0, verbose=1).fit(X)  # given k: SpectralClustering's verbose=1 logs
    out = capsys.readouterr().out
    assert "Computing label assignment using" in out
    # ... each under its candidate's header, which says so (review 53d: the colon went with the logs' level).
    assert all(line.endswith(":") for line in out.splitlines() if line.startswith("candidate "))
    ABCClustering(random_state=0).fit(X)
    assert capsys.readouterr().out == ""


def test_verbose_says_what_each_arbiter_kind_kept_and_survives_a_mixture_candidate(capsys):
    """The line named the kernel candidate where the kNN-partition variant kept the kNN graph cut at its k, and
    where a counting arbiter cut scikit-learn's affinity; a mixture candidate's header crashed (MixtureSource has
    no partitions; probe /work/probe39d/r1_gmm_verbose.py, r3_verbose_kept.py)."""
    X, _ = make_blobs(200, centers=3, random_state=0)
    model = ABCClustering(arbiter="generic-knn", random_state=0, verbose=1).fit(X)
    out = capsys.readouterr().out
    if model.candidate_.startswith("knn-at-"):
        assert "kept the kNN graph cut at " in out
    else:
        assert f"kept {model.candidate_} (k=" in out
    ABCClustering(affinity="nearest_neighbors", random_state=0, verbose=1).fit(X)
    assert "arbiter 'generic-count': counted k=" in capsys.readouterr().out
    step = SpectralStep(n_clusters=None, max_clusters=10, selection="eigengap", verbose=1)
    names = ("knn-eigengap", "gmm-bic")
    found = candidate_partitions(step, np.ones((200, 200)), X, 0, 0, names)
    assert [c.name for c in found] == list(names)
    assert "candidate gmm-bic (k=" in capsys.readouterr().out


@pytest.mark.parametrize("sparse", [False, True])
def test_identical_rows_get_mixture_features_without_a_numpy_warning(sparse):
    """Probe 57f: a set of identical rows wider than the mixture's columns got the right answer (one cluster) with
    numpy's 'invalid value encountered in divide' from the projection of no spread."""
    from skabc.spectral.mixture import MAX_MIXTURE_FEATURES, mixture_features

    X = np.ones((50, 5 * MAX_MIXTURE_FEATURES))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Z = mixture_features(sp.csr_matrix(X) if sparse else X, random_state=0)
    assert Z.shape == (50, 1) and not Z.any()


def test_as_many_clusters_as_rows_are_singletons_with_no_candidate_reported():
    """Probe 57f: n_clusters == n gave singletons reported as the kNN graph's cut (candidate_ 'knn-given', the 10-NN
    graph as affinity_matrix_); n + 1, the same partition, reported none, as no cut was made."""
    X = np.random.default_rng(0).normal(size=(30, 2))
    for k in (30, 31):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model = ABCClustering(n_clusters=k, random_state=0).fit(X)
        assert model.candidate_ is None and model.n_clusters_ == 30 and isinstance(model.affinity_matrix_, np.ndarray)


def test_shipped_arbiters_know_the_widest_set_they_were_trained_on(fresh_arbiters):
    """Each shipped file's ``max_features`` is the widest set of the pools its provenance names."""
    for arbiter in (load_arbiter("generic"), load_arbiter("generic", given_k=True)):
        widest = max(pool["n_features"][1] for pool in arbiter.provenance["training_sets"].values())
        assert arbiter.max_features == widest == 64


def test_a_sets_dimensions_are_the_rank_of_its_scaled_centred_rows(fresh_arbiters):
    """Constant, dependent or empty columns add no dimension; a column's scale or offset does not hide one."""
    arbiter = load_arbiter("generic")
    X = np.random.default_rng(0).normal(size=(200, 65))
    assert arbiter.beyond_domain(X) and not arbiter.beyond_domain(X[:, :64])
    assert not arbiter.beyond_domain(np.hstack([X[:, :64], np.full((200, 1), 3.0)]))  # one constant column more
    assert not arbiter.beyond_domain(np.hstack([X[:, :64], X[:, :1] + 2 * X[:, 1:2]]))  # one dependent column
    assert not arbiter.beyond_domain(X[:60])  # 60 rows span 59 dimensions at most
    far = X.copy()
    far[:, 64] = 1e9 + 1e-3 * X[:, 64]  # far from zero, a small spread: still a dimension
    assert arbiter.beyond_domain(far)
    far[:, 64] = 1e13 + 1e-3 * X[:, 64]  # a spread within 2**-44 of its magnitude: constant, as canonicalised
    assert not arbiter.beyond_domain(far)
    text = sp.random(300, 5000, density=0.01, random_state=0, format="csr")
    assert arbiter.beyond_domain(text) and arbiter.beyond_domain(text.tocoo())
    assert not arbiter.beyond_domain(sp.hstack([text[:, :64], sp.csr_matrix((300, 4000))]).tocsr())
    assert not replace(arbiter, max_features=None).beyond_domain(X)


@pytest.mark.parametrize("given_k", [False, True])
def test_a_set_wider_than_the_arbiters_training_keeps_the_knn_graph(tmp_path, monkeypatch, fresh_arbiters, capsys,
                                                                     given_k):
    """The forest prefers the kernel's partition; past ``max_features`` columns the kNN graph's eigengap partition
    (with k given: the kNN graph cut into it) is kept instead, whatever the forest predicts."""
    from dataclasses import replace

    names = GIVEN_K if given_k else UNKNOWN_K
    onehot = n_feature_columns(len(names)) - len(names) + names.index(names[0])
    path = _forest_file(tmp_path, [_stump(onehot, 0.5, 0.0, 1.0)], candidates=names, max_features=2)
    monkeypatch.setitem(GIVEN_K_ARBITERS if given_k else ARBITERS, "generic", str(path))
    arbiter = load_arbiter("generic", given_k=given_k)
    assert arbiter.max_features == 2
    X = np.vstack([_blobs(150), [[0.0, 0.0]]])
    # k = 2: the kNN graph's 3 components are no exact answer that would win at any width.
    step = replace(STEP, n_clusters=2, verbose=True) if given_k else replace(STEP, verbose=True)
    P = _toy_probabilities(X)
    assert arbiter.cluster(step, P, X, 0, 0)[4] == names[0]  # as wide as its training sets: the forest decides
    capsys.readouterr()
    wide = np.hstack([X, 1e-3 * np.random.default_rng(0).normal(size=(len(X), 1))])  # one more dimension, a faint one
    labels, affinity, k, _, chosen = arbiter.cluster(step, P, wide, 0, 0)
    assert chosen == ("knn-given" if given_k else "knn-wide-eigengap")
    said = capsys.readouterr().out
    assert "as for every set spanning more than the 2 dimensions of its forest's training sets" in said
    candidates = arbiter.candidates_of(step, P, wide, 0, 0)  # the held kNN eigengap candidate replaced by the kept
    assert [c.name for c in candidates] == [WIDE_SET_CANDIDATES.get(name, name) for name in names]
    assert arbiter.choose(candidates, wide.shape[1], wide)[0] == [c.name for c in candidates].index(chosen)
    assert arbiter.choose(candidates, wide.shape[1])[0] == 0  # without the rows, the forest's choice
    kept = candidates[[c.name for c in candidates].index(chosen)]
    np.testing.assert_array_equal(labels, kept.labels)
    assert k == kept.n_clusters and sp.issparse(affinity)


def test_write_arbiter_records_max_features(tmp_path):
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(0)
    F = rng.normal(size=(60, n_feature_columns(len(UNKNOWN_K))))
    model = GradientBoostingRegressor(n_estimators=3, max_depth=2, random_state=0).fit(F, rng.normal(size=60))
    write_arbiter(tmp_path / "a.json", model, UNKNOWN_K, {"recipe": "test"}, max_features=64)
    write_arbiter(tmp_path / "b.json", model, UNKNOWN_K, {"recipe": "test"})
    assert Arbiter.from_file(tmp_path / "a.json").max_features == 64
    assert Arbiter.from_file(tmp_path / "b.json").max_features is None
    for bad in (True, 64.9, 0):
        with pytest.raises(ValueError, match="max_features must be a positive integer or None"):
            write_arbiter(tmp_path / "c.json", model, UNKNOWN_K, {"recipe": "test"}, max_features=bad)


def _topic_corpus(seed, n=600, vocabulary=12_000, k=4):
    """TF-IDF rows of ``k`` topics: half of each document's 20-80 words from its topic's own block of the
    vocabulary, half from a shared one."""
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    block = vocabulary // (2 * k)
    rows, words = [], []
    for i in range(n):
        length = int(rng.integers(20, 80))
        words.extend(np.r_[rng.integers(y[i] * block, (y[i] + 1) * block, length // 2),
                           rng.integers(vocabulary // 2, vocabulary, length - length // 2)])
        rows.extend([i] * length)
    counts = sp.csr_matrix((np.ones(len(rows)), (rows, words)), shape=(n, vocabulary))
    return TfidfTransformer().fit_transform(counts), y


@pytest.mark.parametrize("seed", [0, 1])
def test_abc_clustering_counts_the_topics_of_tf_idf_rows(seed):
    """Before the arbiter's width limit it kept the kernel's cut of a few outlying documents of these corpora:
    2 clusters (ARI 0.00) for 4 topics.  The kNN graph of the rows finds them."""
    X, y = _topic_corpus(seed)
    model = ABCClustering(random_state=0).fit(X)
    assert model.candidate_ == "knn-wide-eigengap"
    assert model.n_clusters_ == 4 and adjusted_rand_score(y, model.labels_) > 0.95


def _short_documents(seed, k=4, n=600, vocabulary=8000, topic_words=60):
    """TF-IDF rows of documents of 5-14 words, about 30 % of them from their topic's 60 words, the rest Zipf."""
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    topics = [rng.choice(vocabulary, topic_words, replace=False) for _ in range(k)]
    weights = [rng.dirichlet(np.ones(topic_words)) for _ in range(k)]
    y = np.arange(n) % k
    rows, words = [], []
    for i in range(n):
        length = int(rng.integers(5, 15))
        own = rng.binomial(length, 0.3)
        words.extend(np.r_[rng.choice(topics[y[i]], own, p=weights[y[i]]),
                           rng.choice(vocabulary, length - own, p=zipf / zipf.sum())])
        rows.extend([i] * length)
    counts = sp.csr_matrix((np.ones(len(rows)), (rows, words)), shape=(n, vocabulary))
    return TfidfTransformer().fit_transform(counts), y


@pytest.mark.parametrize("seed", [0, 1])
def test_short_documents_are_not_called_one_cluster(seed):
    """Probe 65a: the kNN graph of short documents has a large first eigengap however many topics they hold, and
    the plain eigengap called these corpora one cluster (ARI 0.00).  Beyond the domain one cluster must beat the
    later gaps by more; a corpus of one topic stays one cluster."""
    X, y = _short_documents(seed)
    model = ABCClustering(random_state=0).fit(X)
    gaps = np.diff(model.eigenvalues_)
    assert np.argmax(gaps) == 0  # the plain eigengap's k = 1
    assert model.candidate_ == "knn-wide-eigengap"
    assert model.n_clusters_ == 4 and adjusted_rand_score(y, model.labels_) > 0.7
    assert ABCClustering(random_state=0).fit(_short_documents(seed, k=1)[0]).n_clusters_ == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_anisotropic_gaussian_beyond_the_domain_stays_one_cluster(seed):
    """Review 66: a single Gaussian whose standard deviations fall from 1 to 1e-3 over 100 columns spreads its kNN
    graph's spectrum in gaps of one size, the largest later one over 0.3 of the first: the share alone split it
    (k 3-6)."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(100, 100)) * np.geomspace(1, 1e-3, 100)
    X = rng.normal(size=(300, 100)) @ A.T
    model = ABCClustering(random_state=0).fit(X)
    gaps = np.diff(model.eigenvalues_)
    assert model.candidate_ == "knn-wide-eigengap" and gaps[1:].max() >= 0.3 * gaps[0]
    assert model.n_clusters_ == 1


def test_the_wide_eigengap_rule_only_overrules_one_cluster():
    from skabc.spectral.wide import WIDE_DISTINCT_GAP_FACTOR, WIDE_SINGLE_CLUSTER_GAP_SHARE, wide_eigengap_k

    first = 0.4
    later = [0.0, first, first + 0.002, first + 0.004]
    just = WIDE_SINGLE_CLUSTER_GAP_SHARE * first
    for factor, k in ((1.01, 4), (0.99, 1)):  # a fifth eigenvalue that leaves a gap of just above or below the share
        top = later[-1] + factor * just
        assert wide_eigengap_k([*later, top, top + 0.002], 50, 5) == k
    # Review 66: a gap at the share that does not stand out of gaps of one size (an anisotropic Gaussian's spectrum).
    assert wide_eigengap_k(np.r_[0.0, first + np.arange(8) * just], 50, 8) == 1
    typical = 0.015
    for factor, k in ((1.01, 3), (0.99, 1)):  # over the share, standing out of the typical gap or just not
        gap = WIDE_DISTINCT_GAP_FACTOR * typical * factor
        top = first + typical + gap
        spectrum = np.r_[0.0, first, first + typical, top + np.arange(6) * typical]
        assert gap >= just and wide_eigengap_k(spectrum, 50, 8) == k
    assert wide_eigengap_k([1e-7, 1e-7, 1e-7], 50, 5) == 1  # tied nonzero eigenvalues: no first gap to overrule
    # Review 66b: with max_clusters 2, one later gap is nothing to compare with; a longer spectrum gives the typical.
    short = [0.0, first, first + just * 1.5]
    assert wide_eigengap_k(short, 50, 2) == 1
    assert wide_eigengap_k(short, 50, 2, spectrum=np.r_[short, short[-1] + 0.01 * np.arange(1, 19)]) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a shorter spectrum is ignored, not the median of no gaps
        assert wide_eigengap_k([*later, later[-1] + 2 * just], 50, 4, spectrum=later[:2]) == 4
    assert wide_eigengap_k([0.0, 0.01, 0.02, 0.5, 0.51], 50, 4) == 3  # the plain eigengap's k > 1 stands
    assert wide_eigengap_k([0.0, 0.7], 50, 1) == 1  # nothing later to weigh
    assert wide_eigengap_k(np.zeros(4), 4, 5) == 4  # no links at all: every point its own cluster, as before


@pytest.mark.parametrize("k", [2, 3])
def test_a_small_max_clusters_keeps_the_wide_one_cluster_rule(k):
    """Review 66b: the typical gap came from the max_clusters + 1 eigenvalues the rule compares, so at max_clusters=3
    no later gap could stand out of it, and these corpora were one cluster again."""
    X, y = _short_documents(0, k=k)
    model = ABCClustering(max_clusters=3, random_state=0).fit(X)
    assert model.n_clusters_ == k and adjusted_rand_score(y, model.labels_) > 0.6


def test_a_set_wider_than_the_arbiters_training_is_clustered_without_the_kernel(monkeypatch):
    """The kNN graph alone decides a set wider than 64 columns: the kernel's affinity is not computed (nor a sparse
    set made dense for it); at 64 columns it still is."""
    from skabc import _sets

    def no_kernel(*args, **kwargs):
        raise AssertionError("the kernel's affinity was computed")

    monkeypatch.setattr(_sets, "kernel_affinity", no_kernel)
    X, y = make_blobs(n_samples=150, centers=3, n_features=65, random_state=0)
    model = ABCClustering(random_state=0).fit(X)
    assert model.candidate_ == "knn-wide-eigengap" and adjusted_rand_score(y, model.labels_) == 1.0
    assert ABCClustering(n_clusters=3, random_state=0).fit(sp.csr_matrix(X)).candidate_ == "knn-given"
    with pytest.raises(AssertionError, match="the kernel's affinity was computed"):
        ABCClustering(random_state=0).fit(X[:, :64])


def test_candidates_reading_the_kernel_need_its_affinity():
    X = _blobs(60)
    only_knn = candidate_partitions(STEP, None, X, 0, 0, names=("knn-eigengap", "knn-rotation"))
    assert [c.name for c in only_knn] == ["knn-eigengap", "knn-rotation"]
    for names in (("kernel-consensus",), ("knn-at-kernel-consensus",)):
        with pytest.raises(ValueError, match=r"read the kernel's affinity, and probabilities is None"):
            candidate_partitions(STEP, None, X, 0, 0, names=names)


@pytest.mark.parametrize("affinity", ["rbf", "nearest_neighbors"])
def test_scikit_learn_affinities_of_very_wide_sparse_rows_are_counted_by_their_knn_graph(affinity):
    """Before, sparse rows of more than 4,096 columns were not counted (a warning, the affinity's own eigengap);
    wider than the arbiter's training sets, the kNN graph of the sparse rows counts them, never made dense."""
    X, y = _topic_corpus(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = ABCClustering(affinity=affinity, random_state=0).fit(X)
    assert model.candidate_ == "affinity-at-knn-wide-eigengap" and model.n_clusters_ == 4
    assert adjusted_rand_score(y, model.labels_) > 0.95


def test_only_the_kept_candidate_is_computed_for_a_set_beyond_the_domain(monkeypatch):
    from skabc.spectral import arbiter as arbiter_module

    asked = []
    real = arbiter_module.candidate_partitions
    monkeypatch.setattr(arbiter_module, "candidate_partitions",
                        lambda *args, **kwargs: asked.append(args[5]) or real(*args, **kwargs))
    X, _ = make_blobs(n_samples=150, centers=3, n_features=65, random_state=0)
    ABCClustering(random_state=0).fit(X)
    assert asked == [("knn-wide-eigengap",)]
    ABCClustering(random_state=0).fit(X[:, :64])
    assert len(asked) == 2 and len(asked[1]) > 1


@pytest.mark.parametrize("arbiter", ["generic-knn", "generic-knn-only"])
def test_every_variant_keeps_the_knn_graph_beyond_the_domain(arbiter):
    X, _ = make_blobs(n_samples=150, centers=3, n_features=65, random_state=0)
    assert ABCClustering(arbiter=arbiter, random_state=0).fit(X).candidate_ == "knn-wide-eigengap"
    assert ABCClustering(arbiter=arbiter, n_clusters=3, random_state=0).fit(X).candidate_ == "knn-given"


def test_the_width_limit_holds_for_the_kernel_its_forest_learned_only():
    """Review 65: an arbiter asked to weigh another kernel (your own, a fine-tuned one) lets its forest choose at
    every width; the shipped generic kernel's set beyond the domain keeps the kNN graph, and says so."""
    from skabc.training.validation import cluster_affinity

    X, _ = make_blobs(n_samples=150, centers=3, n_features=65, random_state=0)
    own = ABCClustering(affinity="rbf", gamma=0.01, arbiter="generic", random_state=0).fit(X)
    candidates, scores, kept, kept_as = arbiter_candidates(own, X)
    assert kept == int(np.argmax(scores)) and kept_as != "wide"
    assert own.candidate_ == candidates[kept].name
    generic = ABCClustering(random_state=0).fit(X)
    candidates, scores, kept, kept_as = arbiter_candidates(generic, X)
    assert candidates[kept].name == generic.candidate_ == "knn-wide-eigengap" and kept_as == "wide"
    assert kept != int(np.argmax(scores))  # the forest would have kept a kernel candidate here
    # A network being fine-tuned is scored on its held-out sets with the forest's choice too.
    P = _toy_probabilities(X)
    settings = {"affinity_power": 4.0, "n_clusters_selection": "consensus", "assign_labels": "njw",
                "arbiter": "generic"}
    step = SpectralStep(n_clusters=None, max_clusters=50, affinity_power=4.0, selection="consensus",
                        assign_labels="njw")  # as cluster_affinity builds it from these settings
    lifted = arbiter_for("generic", step, own_kernel=False)
    assert lifted.max_features is None and arbiter_for("generic", step).max_features == 64
    labels, _, _, _, chosen = lifted.cluster(step, P, X, 0, 0)
    assert chosen not in WIDE_SET_CANDIDATES.values()  # the forest's choice (the toy affinity's partition)
    np.testing.assert_array_equal(cluster_affinity(P, settings, rows=X), labels)


def test_a_small_set_beyond_the_domain_gets_no_small_set_warning():
    """Its k is the kNN graph's, not the generic kernel's; a set of fewer rows spans fewer dimensions: warned."""
    X, _ = make_blobs(n_samples=75, centers=3, n_features=100, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ABCClustering(random_state=0).fit(X)
    assert model.candidate_ == "knn-wide-eigengap"
    assert not any("trained on sets of 150 to 500 rows" in str(w.message) for w in caught)
    with pytest.warns(UserWarning, match="trained on sets of 150 to 500 rows"):
        ABCClustering(random_state=0).fit(X[:60])


def test_a_sets_dimensions_ignore_the_rounding_of_its_precision_and_extreme_magnitudes(fresh_arbiters):
    """Review 65b: float32 rounding spanned every direction; columns the canonicalisation calls constant (0.3
    against 0.1 + 0.2) counted; a subnormal or near-overflow peak raised."""
    from skabc.spectral.evidence import spans_more_than

    rng = np.random.default_rng(0)
    low_rank = rng.normal(size=(300, 5)) @ rng.normal(size=(5, 200))
    assert not spans_more_than(low_rank, 64) and not spans_more_than(low_rank.astype(np.float32), 64)
    last_bit = np.where(rng.random((300, 70)) < 0.5, 0.3, 0.1 + 0.2)
    assert not spans_more_than(np.hstack([low_rank[:, :40], last_bit]), 64)
    full = rng.normal(size=(300, 80))
    for scaled in (full * 1e-310, full / np.abs(full).max() * 1.5e308):
        assert spans_more_than(scaled, 64) and spans_more_than(sp.csr_matrix(scaled), 64)
    constant_sparse = sp.csr_matrix(np.hstack([full[:, :60], np.ones((300, 10))]))
    assert not spans_more_than(constant_sparse, 64)


def test_the_knn_graph_of_rows_far_from_zero_is_theirs_at_zero():
    """Review 65b: blobs shifted by 1e9 lost their spread to rounding in the neighbour search (k = 1, ARI 0)."""
    X, y = make_blobs(n_samples=300, centers=4, n_features=100, random_state=0)
    np.testing.assert_array_equal(knn_graph(X + 1e9).toarray(), knn_graph(X).toarray())
    model = ABCClustering(random_state=0).fit(X + 1e9)
    assert model.candidate_ == "knn-wide-eigengap" and adjusted_rand_score(y, model.labels_) == 1.0


@pytest.mark.parametrize("affinity", ["learned", "rbf"])
def test_fit_leaves_a_non_canonical_csr_as_given(affinity):
    """Review 65b: scipy sums a CSR's duplicate entries in place; the kNN graph of wide sparse rows did so to X."""
    X, _ = _topic_corpus(0, n=300, vocabulary=6000)
    indices, data = [], []
    for start, stop in zip(X.indptr[:-1], X.indptr[1:], strict=True):  # each entry as two halves, out of order
        indices.append(np.r_[X.indices[start:stop][::-1], X.indices[start:stop]])
        data.append(np.r_[X.data[start:stop][::-1], X.data[start:stop]] / 2)
    S = sp.csr_matrix((np.concatenate(data), np.concatenate(indices), 2 * X.indptr), shape=X.shape)
    assert not S.has_canonical_format
    before = (S.data.copy(), S.indices.copy(), S.indptr.copy())
    model = ABCClustering(affinity=affinity, random_state=0).fit(S)
    assert model.candidate_ in ("knn-wide-eigengap", "affinity-at-knn-wide-eigengap")
    for saved, now in zip(before, (S.data, S.indices, S.indptr), strict=True):
        np.testing.assert_array_equal(saved, now)


def test_wide_sparse_rows_past_max_samples_are_labelled_without_a_dense_copy(monkeypatch):
    """Review 65b: the vote that labels the rows left out of the subsample made it dense (2,000 x 2**20: 16 GiB)."""
    from skabc import _subsample

    monkeypatch.setattr(_subsample, "DENSE_BLOCK_ENTRIES", 1000)  # this corpus's subsample is then too wide

    def no_dense_block(*args, **kwargs):
        raise AssertionError("a dense block was made")

    monkeypatch.setattr(_subsample, "_block", no_dense_block)
    X, y = _topic_corpus(1, n=600)
    model = ABCClustering(max_samples=400, random_state=0).fit(X)
    assert model.candidate_ == "knn-wide-eigengap" and adjusted_rand_score(y, model.labels_) > 0.95


def test_a_set_of_few_rows_keeps_its_small_set_warning_whatever_the_forest_kept():
    """Review 65b: 60 rows span 59 dimensions at most, so the forest chose; its kNN pick silenced the warning."""
    Z, _ = make_blobs(60, 2, centers=3, random_state=3)
    X = (Z @ np.array([[0.6, -0.6], [-0.4, 0.8]])) @ np.random.default_rng(3).standard_normal((2, 100))
    for kwargs in ({}, {"affinity": "rbf", "gamma": 0.1}):
        with pytest.warns(UserWarning, match="trained on sets of 150 to 500 rows"):
            model = ABCClustering(random_state=0, **kwargs).fit(X)
        assert model.candidate_ in ("knn-eigengap", "affinity-at-knn-eigengap")


def test_the_wide_rule_holds_in_groups_worker_processes_and_after_a_round_trip(tmp_path):
    """Every path that clusters a set decides alike: groups, predict_many, n_jobs=2 (processes), save and load."""
    from skabc.persistence import load

    X, _ = make_blobs(n_samples=300, centers=3, n_features=80, random_state=0)
    groups = np.repeat([0, 1], 150)
    model = ABCClustering(random_state=0, n_jobs=2).fit(X, groups=groups)
    assert model.candidate_ == ["knn-wide-eigengap", "knn-wide-eigengap"]
    alone = ABCClustering(random_state=0).fit(X, groups=groups)
    np.testing.assert_array_equal(model.labels_, alone.labels_)
    single = ABCClustering(random_state=0).fit(X[:150])
    np.testing.assert_array_equal(single.predict_many([X[:150], X[150:]])[0], single.predict(X[:150]))
    single.save(tmp_path / "wide")
    np.testing.assert_array_equal(load(tmp_path / "wide").predict(X[150:]), single.predict(X[150:]))


def test_a_preferred_candidate_is_kept_unless_another_is_predicted_higher_by_more_than_the_margin(tmp_path):
    """The given-k file keeps the kNN graph's cut (SpectralClustering's) unless its forest predicts the learned cut
    more than its typical error higher (benchmarks/train_arbiter.py --prefer)."""
    X = _blobs(150)
    candidates = candidate_partitions(replace(STEP, n_clusters=2), _toy_probabilities(X), X, 0, 0, GIVEN_K)
    onehot = n_feature_columns(len(GIVEN_K)) - len(GIVEN_K) + GIVEN_K.index("kernel-given")
    for lead, margin, kept in ((0.04, 0.05, "knn-given"), (0.06, 0.05, "kernel-given"), (0.04, 0.0, "kernel-given")):
        path = _forest_file(tmp_path, [_stump(onehot, 0.5, 0.5, 0.5 + lead)], candidates=GIVEN_K,
                            preferred="knn-given", margin=margin)
        arbiter = Arbiter.from_file(path)
        best, scores = arbiter.choose(candidates, X.shape[1])
        assert scores[GIVEN_K.index("kernel-given")] - scores[GIVEN_K.index("knn-given")] == pytest.approx(lead)
        assert candidates[best].name == kept
    for bad, match in (({"preferred": "kernel-eigengap"}, "preferred must be one of its candidates"),
                       ({"margin": 0.3}, "preferred must be one of its candidates"),  # review 69c: ignored before
                       ({"preferred": None, "margin": 0.1}, "preferred must be one of its candidates"),
                       ({"preferred": "knn-given", "margin": -0.1}, "margin must be a finite number >= 0"),
                       ({"preferred": "knn-given", "margin": True}, "margin must be a finite number >= 0"),
                       ({"preferred": "knn-given", "margin": "0.1"}, "margin must be a finite number >= 0")):
        with pytest.raises(ValueError, match=match):
            Arbiter.from_file(_forest_file(tmp_path, [_stump(0, 0.0, 1.0, 0.0)], candidates=GIVEN_K, **bad))


def test_the_shipped_given_k_arbiter_prefers_the_knn_graphs_cut():
    """Record of 2026-12-07: on 287 validation sets +0.020 +- 0.005 over the forest's plain choice; iris, breast
    cancer and digits (StandardScaler) get the kNN graph's cut, 0.612/0.743/0.705 against 0.457/0.683/0.459."""
    arbiter = load_arbiter("generic", given_k=True)
    assert arbiter.preferred == "knn-given" and 0.0 < arbiter.margin < 0.2
    assert load_arbiter("generic").preferred is None  # k unknown: the forest's choice as before


def test_write_arbiter_records_a_preference(tmp_path):
    from sklearn.ensemble import GradientBoostingRegressor

    width = n_feature_columns(len(GIVEN_K))
    rng = np.random.default_rng(0)
    model = GradientBoostingRegressor(n_estimators=3, max_depth=2)
    model.fit(rng.normal(size=(40, width)), rng.normal(size=40))
    write_arbiter(tmp_path / "a.json", model, GIVEN_K, {"recipe": "test"}, preferred="knn-given", margin=0.05)
    arbiter = Arbiter.from_file(tmp_path / "a.json")
    assert (arbiter.preferred, arbiter.margin) == ("knn-given", 0.05)
    write_arbiter(tmp_path / "g.json", model, iter(GIVEN_K), {"recipe": "test"}, preferred="knn-given", margin=0.05)
    assert Arbiter.from_file(tmp_path / "g.json").preferred == "knn-given"  # candidates read once
    write_arbiter(tmp_path / "b.json", model, GIVEN_K, {"recipe": "test"})
    assert "preferred" not in json.loads((tmp_path / "b.json").read_text())
    for preferred, margin in (("kernel-eigengap", 0.05), ("knn-given", float("nan")), ("knn-given", -1.0), (None, 0.2),
                              ("knn-given", None), ("knn-given", "0.1"), ("knn-given", 10**400), ("knn-given", True)):
        with pytest.raises(ValueError, match="preferred must be one of"):  # review 69c: written, then refused on load
            write_arbiter(tmp_path / "c.json", model, GIVEN_K, {"recipe": "test"}, preferred=preferred, margin=margin)


def test_verbose_says_when_the_preference_kept_a_lower_prediction(capsys):
    """Probe 69f: verbose=1 printed the kNN cut kept beside a higher prediction for the kernel's, with no reason."""
    from sklearn.datasets import make_moons

    X, _ = make_moons(200, noise=0.08, random_state=0)
    model = ABCClustering(n_clusters=2, verbose=1, random_state=0).fit(X)
    out = capsys.readouterr().out
    assert model.candidate_ == "knn-given"
    assert "kept knn-given (k=2), preferred within 0.0494 of the highest prediction" in out
