"""The small dense steps of the spectral step run on one native thread, whatever the pools hold outside."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_info, threadpool_limits

import skabc.spectral.assign as assign
import skabc.spectral.rotation as rotation
from skabc import ABCClustering
from skabc._threads import single_native_thread


def _thread_counts(*user_apis: str) -> list[int]:
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] in user_apis]


def _most_threads() -> int:
    return max(_thread_counts("blas", "openmp"))


def test_single_native_thread_limits_inside_and_restores_after():
    with threadpool_limits(2):
        assert _most_threads() == 2
        with single_native_thread():
            assert _most_threads() == 1
        assert _most_threads() == 2


def test_single_native_thread_restores_after_an_error():
    with threadpool_limits(2):
        with pytest.raises(RuntimeError), single_native_thread():
            raise RuntimeError("inside")
        assert _most_threads() == 2


def test_rotation_and_kmeans_run_on_one_thread(monkeypatch):
    seen = {"k_means": [], "rotation": []}
    k_means, best_rotation = assign.k_means, rotation._best_rotation

    def recording_k_means(*args, **kwargs):
        seen["k_means"].append(_most_threads())
        return k_means(*args, **kwargs)

    def recording_rotation(*args, **kwargs):
        seen["rotation"].append(_most_threads())
        return best_rotation(*args, **kwargs)

    monkeypatch.setattr(assign, "k_means", recording_k_means)
    monkeypatch.setattr(rotation, "_best_rotation", recording_rotation)
    X, _ = make_blobs(300, centers=4, random_state=0)
    with threadpool_limits(2):
        labels = ABCClustering(random_state=0).fit_predict(X)
        assert _most_threads() == 2
    assert len(np.unique(labels)) >= 2
    assert seen["k_means"] and seen["rotation"]
    assert set(seen["k_means"]) == {1} and set(seen["rotation"]) == {1}


@pytest.mark.parametrize(("n", "limited"), [(300, True), (1000, True), (1001, False)])
def test_the_whole_spectral_step_of_a_small_set_runs_on_one_thread(monkeypatch, n, limited):
    """Session 67: on sets of up to 1,000 rows the eigensolves, kNN graphs, forest and Gaussian split ran with two
    threads per pool and were 1.4-1.8x slower; past that a second thread pays (2,000-row eigensolves)."""
    import skabc._sets as sets_module

    seen = {"arbiter": [], "split": []}
    float_rows, split_clusters = sets_module._float_rows, sets_module.split_gaussian_clusters

    def recording_rows(X):  # read first by the width check, before the affinity; last by the arbiter, in the step
        seen["arbiter"].append(_most_threads())
        return float_rows(X)

    def recording_split(*args, **kwargs):
        seen["split"].append(_most_threads())
        return split_clusters(*args, **kwargs)

    monkeypatch.setattr(sets_module, "_float_rows", recording_rows)
    monkeypatch.setattr(sets_module, "split_gaussian_clusters", recording_split)
    X, _ = make_blobs(n, centers=3, random_state=0)
    with threadpool_limits(2):
        ABCClustering(random_state=0, max_samples=None).fit_predict(X)
        assert _most_threads() == 2
    expected = 1 if limited else 2
    assert seen["arbiter"][-1] == expected and set(seen["split"]) == {expected}


@pytest.mark.parametrize(("n", "limited"), [(300, True), (1001, False)])
def test_a_small_wide_set_is_clustered_on_one_thread(monkeypatch, n, limited):
    """Review 67c: the kNN graph that clusters a set wider than the arbiters' domain ran with two threads per pool;
    one thread took a 1,000 x 100 set from 3.2 s to 0.52 s (/work/exp67/wide_time.py)."""
    from skabc.spectral.arbiter import Arbiter

    seen = []
    cluster_wide = Arbiter.cluster_wide

    def recording(self, *args, **kwargs):
        seen.append(_most_threads())
        return cluster_wide(self, *args, **kwargs)

    monkeypatch.setattr(Arbiter, "cluster_wide", recording)
    X, _ = make_blobs(n, n_features=70, centers=3, random_state=0)
    with threadpool_limits(2):
        ABCClustering(random_state=0, max_samples=None, n_clusters=3).fit_predict(X)
        assert _most_threads() == 2
    assert seen == [1 if limited else 2]


def test_training_sets_are_transformed_on_one_thread():
    from skabc.sampling import ClusterSetSampler, SampledSetsDataset

    seen = []

    def transform(points):
        seen.append(_most_threads())
        return points * 2.0

    X, y = make_blobs(200, centers=4, random_state=0)
    dataset = SampledSetsDataset(X, ClusterSetSampler(y, set_size=(20, 40)), n_sets=4, batch_size=2, seed=0,
                                 set_transform=transform)
    with threadpool_limits(2):
        points, labels = dataset[0]
        assert _most_threads() == 2
    assert seen == [1] and len(points) == len(labels) and 20 <= len(points) <= 40


def test_validation_sets_are_clustered_on_one_thread(monkeypatch):
    import skabc.training.validation as validation

    seen = []
    spectral_labels = validation.spectral_labels

    def recording(*args, **kwargs):
        seen.append(_most_threads())
        return spectral_labels(*args, **kwargs)

    monkeypatch.setattr(validation, "spectral_labels", recording)
    X, _ = make_blobs(60, centers=3, random_state=0)
    affinity = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    with threadpool_limits(2):
        labels = validation.cluster_affinity(affinity, {"affinity_power": 1.0}, n_clusters=3)
        assert _most_threads() == 2
    assert seen == [1] and len(np.unique(labels)) == 3


@pytest.fixture
def process_blas_at_two():
    """OpenBLAS's process-wide pool at two threads, with no thread holding control of it (threadpoolctl >= 3.8
    gives control to the thread that set it; a block in the main thread would keep the workers' limits from acting)."""
    import threadpoolctl

    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    if not blas or any(info.get("threading_layer") == "openmp" for info in blas):
        pytest.skip("needs a BLAS with a process-wide pool")
    limiter = threadpoolctl.ThreadpoolController().select(user_api="blas").limit(limits=2)
    clear = getattr(getattr(threadpoolctl, "OpenBLASController", None), "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)
    yield
    limiter.restore_original_limits()
    if clear is not None:
        clear(force=True)


def _blas_threads() -> list[int]:
    return _thread_counts("blas")


def test_blocks_overlapping_in_two_threads_leave_the_process_pool_as_it_was(process_blas_at_two):
    """A enters, B enters, A leaves, B leaves: B restored the one thread A had set, for good (ThreadPoolExecutor
    fits, joblib's threading backend, GridSearchCV in threads)."""
    import threading

    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    inside = {}

    def first():
        with single_native_thread():
            inside["first"] = _most_threads_of("openmp")
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def second():
        a_in.wait(10)
        with single_native_thread():
            b_in.set()
            a_out.wait(10)

    assert _blas_threads() and set(_blas_threads()) == {2}
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert set(_blas_threads()) == {2}
    assert inside["first"] in (None, 1)  # a worker still limits its own OpenMP pools


def _most_threads_of(user_api: str):
    return max(_thread_counts(user_api), default=None)


def test_main_thread_limits_the_process_pool_too(process_blas_at_two):
    with single_native_thread():
        assert set(_blas_threads()) == {1}
    assert set(_blas_threads()) == {2}


def test_sets_clustered_in_threads_leave_the_process_pool_as_they_found_it(process_blas_at_two):
    """Probe 64c: under joblib's threading backend, scikit-learn's limits around k-means in two worker threads
    restored each other's values and left OpenBLAS's process-wide pool at one thread for good (1 call in 10-20 of
    predict_many(sets, n_jobs=2)).  Here a kernel's worker leaves it at one thread every time."""
    import threading

    import joblib

    from skabc.kernels import Kernel

    class LeavesBlasAtOne(Kernel):
        def affinity(self, X):
            if threading.current_thread() is not threading.main_thread():
                threadpool_limits(limits=1, user_api="blas")  # applied, never restored
            return np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))

    sets = [make_blobs(30, centers=2, random_state=seed)[0] for seed in range(4)]
    model = ABCClustering(kernel=LeavesBlasAtOne(), n_clusters=2, random_state=0).fit(sets[0])
    with joblib.parallel_config(backend="threading"):
        model.predict_many(sets, n_jobs=2)
    assert set(_blas_threads()) == {2}
