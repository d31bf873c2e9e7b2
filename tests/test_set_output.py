"""set_output on the kernels: a Pipeline (or ColumnTransformer) of kernels can be switched to DataFrame output.

A probe (/work/probe35c): ``Pipeline.set_output(transform='pandas')`` raised "Unable to configure output for
ContextualKernel() because set_output is not available" for any pipeline with a kernel step, before any fit.
"""

from __future__ import annotations

import copy
import importlib.util

import numpy as np
import pandas as pd
import pytest
from conftest import TINY
from sklearn import config_context
from sklearn.base import clone
from sklearn.cluster import SpectralClustering
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skabc import ABCClustering, ContextualKernel, KernelEnsemble

# The fixtures' kernels were fitted on arrays; the frame's names are what a DataFrame brings, not the point.
pytestmark = pytest.mark.filterwarnings("ignore:X has feature names:UserWarning")


@pytest.fixture(scope="module")
def frame(blob_data):
    X = blob_data[0][:30]
    return pd.DataFrame(X, columns=["u", "v"], index=[f"row{i}" for i in range(len(X))])


@pytest.fixture(scope="module")
def ensemble(tiny_kernel, tiny_kernel_seed_1):
    return KernelEnsemble.from_fitted([tiny_kernel, tiny_kernel_seed_1])


@pytest.mark.parametrize("which", ["contextual", "ensemble"])
def test_pandas_output_is_the_affinity_with_the_points_as_columns(which, tiny_kernel, ensemble, frame):
    kernel = copy.deepcopy(tiny_kernel if which == "contextual" else ensemble)  # fixtures stay as they are
    default = kernel.transform(frame)
    assert isinstance(default, np.ndarray)
    assert kernel.set_output(transform="pandas") is kernel
    out = kernel.transform(frame)
    prefix = type(kernel).__name__.lower()
    assert isinstance(out, pd.DataFrame) and list(out.index) == list(frame.index)
    assert list(out.columns) == [f"{prefix}{i}" for i in range(len(frame))]
    np.testing.assert_array_equal(out.to_numpy(), default)
    assert isinstance(clone(kernel).set_output(transform=None), type(kernel))  # the setting travels with clone
    assert clone(kernel)._sklearn_output_config == {"transform": "pandas"}
    assert isinstance(kernel.set_output(transform="default").transform(frame), np.ndarray)


def test_a_pipeline_with_a_kernel_step_switches_to_pandas(tiny_kernel, frame):
    # FrozenEstimator's clone is itself, so set_output would reach the shared fixture: a copy of it.
    pipe = make_pipeline(StandardScaler(), FrozenEstimator(copy.deepcopy(tiny_kernel)),
                         SpectralClustering(n_clusters=2, affinity="precomputed", random_state=0))
    plain = pipe.fit_predict(frame)
    np.testing.assert_array_equal(clone(pipe).set_output(transform="pandas").fit_predict(frame), plain)
    # Unfitted kernels take the setting too, before any fit, as scikit-learn's own steps do.
    make_pipeline(StandardScaler(), ContextualKernel(**TINY)).set_output(transform="pandas")
    make_pipeline(StandardScaler(), KernelEnsemble(ContextualKernel(**TINY))).set_output(transform="pandas")


def test_global_pandas_output_reaches_transform_but_not_abc_clustering(tiny_kernel, ensemble, frame):
    expected = ABCClustering(kernel=FrozenEstimator(ensemble), random_state=0).fit_predict(frame)
    with config_context(transform_output="pandas"):
        assert isinstance(tiny_kernel.transform(frame), pd.DataFrame)
        assert isinstance(ensemble.transform(frame), pd.DataFrame)
        labels = ABCClustering(kernel=FrozenEstimator(ensemble), random_state=0).fit_predict(frame)
    np.testing.assert_array_equal(labels, expected)


def test_sparse_affinities_and_unknown_containers_are_refused(tiny_kernel, frame):
    sparse = copy.deepcopy(tiny_kernel).set_params(affinity_mode="sparse").set_output(transform="pandas")
    with pytest.raises(ValueError, match="Pandas output does not support sparse data: ContextualKernel returned"):
        sparse.transform(frame)
    with pytest.raises(ValueError, match=r"must be one of \('default', 'pandas', 'polars'\) or None, got 'numpy'"):
        clone(tiny_kernel).set_output(transform="numpy")
    if importlib.util.find_spec("polars") is None:
        with pytest.raises(ImportError, match="needs polars: pip install polars"):
            clone(tiny_kernel).set_output(transform="polars")
    else:  # pragma: no cover - polars is not among the test dependencies
        out = copy.deepcopy(tiny_kernel).set_output(transform="polars").transform(frame)
        assert out.shape == (len(frame), len(frame))


@pytest.mark.parametrize("which", ["contextual", "ensemble"])
def test_save_and_load_keep_the_output_container(which, tiny_kernel, ensemble, frame, tmp_path):
    """A left-alone defect of session 44: set_output was lost by save/load (a pickle keeps it)."""
    kernel = copy.deepcopy(tiny_kernel if which == "contextual" else ensemble).set_output(transform="pandas")
    kernel.save(tmp_path / "k.safetensors")
    loaded = type(kernel).load(tmp_path / "k.safetensors", device="cpu")
    pd.testing.assert_frame_equal(loaded.transform(frame), kernel.transform(frame))
    # An explicit 'default' is kept too (it overrides a global transform_output='pandas').
    kernel.set_output(transform="default").save(tmp_path / "d.safetensors")
    with config_context(transform_output="pandas"):
        assert isinstance(type(kernel).load(tmp_path / "d.safetensors", device="cpu").transform(frame), np.ndarray)
    # A kernel inside a saved ABCClustering keeps its container as well.
    model = ABCClustering(kernel=FrozenEstimator(copy.deepcopy(tiny_kernel).set_output(transform="pandas")),
                          random_state=0).fit(frame)
    model.save(tmp_path / "m.safetensors")
    assert isinstance(ABCClustering.load(tmp_path / "m.safetensors", device="cpu").kernel_.transform(frame),
                      pd.DataFrame)


def test_a_forged_output_container_is_refused(tiny_kernel, frame, tmp_path):
    from conftest import forge, read_meta, read_tensors

    copy.deepcopy(tiny_kernel).set_output(transform="pandas").save(tmp_path / "k.safetensors")
    meta, tensors = read_meta(tmp_path / "k.safetensors"), read_tensors(tmp_path / "k.safetensors")
    forge(tmp_path / "bad.safetensors", {**meta, "output": "excel"}, tensors)
    with pytest.raises(ValueError, match=r"output.*'excel' is not one of \['default', 'pandas', 'polars'\]"):
        ContextualKernel.load(tmp_path / "bad.safetensors")
    ABCClustering(kernel=FrozenEstimator(tiny_kernel), random_state=0).fit(frame).save(tmp_path / "m.safetensors")
    meta, tensors = read_meta(tmp_path / "m.safetensors"), read_tensors(tmp_path / "m.safetensors")
    forge(tmp_path / "bad_model.safetensors", {**meta, "output": "pandas"}, tensors)
    with pytest.raises(ValueError, match=r"output.*has no set_output"):
        ABCClustering.load(tmp_path / "bad_model.safetensors")
