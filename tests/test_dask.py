"""Scale-out: predict_many and n_jobs over groups, serially, with loky and on a Dask cluster."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY, make_blob_sets
from joblib import parallel_config
from sklearn import config_context
from sklearn.model_selection import GridSearchCV, GroupKFold

from skabc import ABCClustering, ContextualKernel

distributed = pytest.importorskip("distributed")


def _sets(n_sets, set_size=25, random_state=1):
    X, _, groups = make_blob_sets(n_sets=n_sets, set_size=set_size, random_state=random_state)
    return [X[groups == g] for g in range(n_sets)]


@pytest.fixture(scope="module")
def fitted(tiny_kernel):
    X, _, _ = make_blob_sets(n_sets=1, set_size=30)
    return ABCClustering(kernel=tiny_kernel, random_state=0).fit(X)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_predict_many_matches_predict_for_any_n_jobs(fitted):
    sets = _sets(5)
    expected = [fitted.predict(s) for s in sets]
    serial = fitted.predict_many(sets, n_jobs=1)
    _assert_same(serial, expected)
    assert all(labels.min() == 0 for labels in serial)
    _assert_same(fitted.predict_many(sets, n_jobs=2), serial)
    _assert_same(fitted.predict_many([s.tolist() for s in sets]), serial)  # lists of rows work too


def test_predict_many_random_state_instance_matches_sequential_predicts(tiny_kernel):
    sets = _sets(4)
    model = ABCClustering(kernel=tiny_kernel, random_state=np.random.RandomState(3)).fit(sets[0])
    model.random_state = np.random.RandomState(7)
    expected = [model.predict(s) for s in sets]
    model.random_state = np.random.RandomState(7)
    _assert_same(model.predict_many(sets, n_jobs=2), expected)


def test_fit_groups_same_labels_for_any_n_jobs(blob_data):
    X, y, groups = blob_data
    kernel = ContextualKernel(**TINY)
    serial = ABCClustering(kernel=kernel, random_state=0, n_jobs=1).fit(X, y, groups=groups)
    parallel = ABCClustering(kernel=kernel, random_state=0, n_jobs=2).fit(X, y, groups=groups)
    np.testing.assert_array_equal(parallel.labels_, serial.labels_)
    assert parallel.n_clusters_ == serial.n_clusters_
    assert (parallel.affinity_matrix_ != serial.affinity_matrix_).nnz == 0
    np.testing.assert_array_equal(parallel.predict(X, groups=groups), serial.predict(X, groups=groups))


def test_predict_many_on_dask(fitted, client):
    sets = _sets(8)
    serial = fitted.predict_many(sets, n_jobs=1)
    with parallel_config(backend="dask"):
        on_dask = fitted.predict_many(sets)
    _assert_same(on_dask, serial)
    assert len(client.scheduler_info()["workers"]) == 2


def test_grid_search_with_groups_on_dask(client):
    X, y, groups = make_blob_sets(n_sets=12, set_size=20, random_state=2)

    def search(n_jobs):
        model = ABCClustering(kernel=ContextualKernel(**TINY), random_state=0).set_fit_request(groups=True)
        grid = GridSearchCV(model, {"kernel__compat": ["multiplicative", "additive"]}, cv=GroupKFold(2),
                            scoring="adjusted_rand_score", n_jobs=n_jobs)
        return grid.fit(X, y, groups=groups)

    with config_context(enable_metadata_routing=True):
        serial = search(None)
        with parallel_config(backend="dask"):
            on_dask = search(2)
    assert on_dask.best_params_ == serial.best_params_
    np.testing.assert_allclose(on_dask.cv_results_["mean_test_score"], serial.cv_results_["mean_test_score"],
                               rtol=1e-6)
