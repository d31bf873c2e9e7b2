"""The small dense steps of the spectral step run on one native thread, whatever the pools hold outside."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_info, threadpool_limits

import skabc.spectral.assign as assign
import skabc.spectral.rotation as rotation
from skabc import ABCClustering
from skabc._threads import single_native_thread


def _most_threads() -> int:
    return max(info["num_threads"] for info in threadpool_info() if info["user_api"] in ("blas", "openmp"))


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
