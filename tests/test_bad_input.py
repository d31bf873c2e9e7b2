"""Bad-input battery: every odd input either works (finite, well-shaped output) or fails with a clear error.

For each input and each entry point ("route") the outcome must be EITHER correct behaviour -- an affinity of
shape (n, n), finite, symmetric and in [0, 1], or n non-negative integer labels -- OR a ``ValueError`` /
``TypeError`` whose message names the problem.  An exception from inside torch/scipy internals, or NaN in an
output, is a defect.

Models are tiny and fitted once per module/session; the file runs in well under a minute on 2 CPU cores.
"""

from __future__ import annotations

import copy
import os
import re
import sys
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import FUZZ_DERANDOMIZE, TINY, make_blob_sets
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.exceptions import DataConversionWarning
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import adjusted_rand_score

from skabc import ABCClustering, ContextualKernel, KernelEnsemble, pretrained
from skabc.exceptions import AffinityTooLargeError, SkabcWarning
from skabc.kernels import PairwiseKernel, PrecomputedKernel
from skabc.preprocessing import SetCanonicalizer

# Entry points.  "kernel.fit" trains a tiny kernel on (X, y) and transforms X; "kernel.transform" uses the
# session-scoped fitted kernel; "abc.fit" trains ABCClustering's kernel on (X, y); "abc.fit_unlabelled"
# clusters X with an already fitted kernel; "abc.predict" clusters X with a fitted ABCClustering.
KERNEL_ROUTES = ("kernel.fit", "kernel.transform")
CLUSTER_ROUTES = ("abc.fit", "abc.fit_unlabelled", "abc.predict")
ROUTES = KERNEL_ROUTES + CLUSTER_ROUTES
FIT_ROUTES = ("kernel.fit", "abc.fit", "abc.fit_unlabelled")
INFERENCE_ROUTES = ("kernel.transform", "abc.predict")

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    database=None,  # write no .hypothesis/ folder into the repository
    derandomize=FUZZ_DERANDOMIZE,
)


# ----------------------------------------------------------------------------- helpers and fixtures
@pytest.fixture(scope="module")
def X30():
    """One ordinary set of 30 points in 2-D (float64)."""
    return make_blob_sets(n_sets=1, set_size=30, random_state=7)[0]


@pytest.fixture(scope="module")
def ctx(tiny_kernel, X30):
    """The fitted models the inference routes use."""
    fitted_abc = ABCClustering(kernel=tiny_kernel, random_state=0).fit(X30)
    return SimpleNamespace(kernel=tiny_kernel, abc=fitted_abc)


def n_rows(X) -> int:
    return X.shape[0] if hasattr(X, "shape") else len(X)


def some_labels(n: int) -> np.ndarray:
    """Two classes (or one when n == 1), every class with at least one row."""
    return np.arange(n) % 2


def run_route(route: str, X, ctx, y=None):
    """Call one entry point on X; returns an affinity (kernel routes) or labels (cluster routes)."""
    if y is None:
        y = some_labels(n_rows(X))
    if route == "kernel.fit":
        return ContextualKernel(**TINY).fit(X, y).transform(X)
    if route == "kernel.transform":
        return ctx.kernel.transform(X)
    if route == "abc.fit":
        return ABCClustering(kernel=ContextualKernel(**TINY), random_state=0).fit(X, y).labels_
    if route == "abc.fit_unlabelled":
        return ABCClustering(kernel=ctx.kernel, random_state=0).fit(X).labels_
    if route == "abc.predict":
        return ctx.abc.predict(X)
    raise AssertionError(route)


def assert_affinity(A, n: int) -> None:
    assert isinstance(A, np.ndarray), type(A)
    assert A.shape == (n, n)
    assert np.all(np.isfinite(A)), f"affinity holds NaN/inf: {A.ravel()[:5]}"
    assert A.min() >= 0.0 and A.max() <= 1.0, (A.min(), A.max())
    np.testing.assert_array_equal(A, A.T)


def assert_labels(labels, n: int) -> None:
    labels = np.asarray(labels)
    assert labels.shape == (n,)
    assert labels.dtype.kind in "iu", f"labels must be integers, got {labels.dtype}"
    assert np.all(labels >= 0), labels


def assert_output(route: str, out, n: int) -> None:
    if route in KERNEL_ROUTES:
        assert_affinity(out, n)
    else:
        assert_labels(out, n)


def works(route: str, X, ctx, y=None) -> None:
    """The route must succeed with a correct output."""
    assert_output(route, run_route(route, X, ctx, y), n_rows(X))


def works_or_raises_clearly(route: str, X, ctx, match: str, y=None) -> None:
    """Correct output, or ValueError/TypeError naming the problem; anything else (torch errors, NaN) fails."""
    try:
        out = run_route(route, X, ctx, y)
    except (ValueError, TypeError) as exc:
        assert re.search(match, str(exc)), f"unclear {type(exc).__name__}: {exc}"
        return
    assert_output(route, out, n_rows(X))


def with_value(X, value, row=3, col=1):
    X = np.array(X, dtype=np.float64)
    X[row, col] = value
    return X


# --------------------------------------------------------------------------------------- values in X
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_X_raises(route, value, X30, ctx):
    with pytest.raises(ValueError, match=r"NaN|infinity"):
        run_route(route, with_value(X30, value), ctx)


@pytest.mark.parametrize("route", ROUTES)
def test_value_beyond_float32_raises(route, X30, ctx):
    with pytest.raises(ValueError, match=r"too large|infinity"):
        run_route(route, with_value(X30, 1e300), ctx)


@pytest.mark.parametrize("route", ROUTES)
def test_huge_finite_value_works_or_raises_clearly(route, X30, ctx):
    works_or_raises_clearly(route, with_value(X30, 1e30), ctx, match=r"(?i)too large|overflow|magnitude|exceed")


def test_fit_on_huge_value_does_not_silently_train_nan_weights(X30):
    """After a fit that saw one 1e30 value, ordinary data must still get a finite affinity (or fit raises)."""
    X = with_value(X30, 1e30)
    try:
        kernel = ContextualKernel(**TINY).fit(X, some_labels(len(X)))
    except ValueError as exc:
        assert re.search(r"(?i)too large|overflow|magnitude|exceed|non-finite|nan", str(exc)), str(exc)
        return
    assert_affinity(kernel.transform(X30), len(X30))


@pytest.mark.parametrize("route", ROUTES)
def test_large_but_moderate_value_works_or_raises_clearly(route, X30, ctx):
    works_or_raises_clearly(route, with_value(X30, 1e15), ctx, match=r"(?i)too large|overflow|magnitude")


@pytest.mark.parametrize("route", ["kernel.transform", "abc.fit_unlabelled", "abc.predict"])
def test_tiny_values_work(route, X30, ctx):
    works(route, X30 * 1e-30, ctx)


@pytest.mark.parametrize("route", ["kernel.fit", "abc.fit"])
def test_training_on_values_too_small_to_tell_apart_is_refused(route, X30, ctx):
    """Probe 67a's collapse check: a network reading raw coordinates trained on values of 1e-30 gave every pair the
    same affinity, and clustering with it returned one cluster (only a warning about the columns' scale said so)."""
    with pytest.raises(ValueError, match=r"training collapsed: .* rescale X"):
        run_route(route, X30 * 1e-30, ctx, y=some_labels(30))


@pytest.mark.parametrize("route", ["kernel.transform", "kernel.fit", "abc.fit", "abc.fit_unlabelled", "abc.predict"])
def test_set_below_float32_range_raises(route, X30, ctx):
    """Every value rounds to zero in float32: the network saw zeros and gave a constant affinity, one cluster."""
    from skabc.training.plan import network_of

    # Not the generic kernel: it rescales every set first, at any magnitude (tests/test_pretrained.py).
    assert network_of(ctx.kernel).canonical_features is None
    with pytest.raises(ValueError, match="below float32's smallest normal number"):
        run_route(route, X30 * 1e-300, ctx, y=some_labels(30))


# ------------------------------------------------------------------------------------- types of X
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "convert",
    [
        lambda X: X.astype(object),
        lambda X: X.tolist(),
        lambda X: X.astype(np.float32),
        lambda X: (X * 100).astype(np.int64),
        lambda X: (X * 100).astype(np.int32),
    ],
    ids=["object", "list", "float32", "int64", "int32"],
)
def test_numeric_containers_and_dtypes_work(route, convert, X30, ctx):
    works(route, convert(X30), ctx)


@pytest.mark.parametrize("route", ROUTES)
def test_non_numeric_strings_raise(route, X30, ctx):
    X = np.array([["a", "b"]] * 30)
    with pytest.raises(ValueError, match="X holds values other than numbers"):
        run_route(route, X, ctx)


@pytest.mark.parametrize("route", ROUTES)
def test_numeric_strings_work_or_raise_clearly(route, X30, ctx):
    """scikit-learn converts numeric strings when an explicit float dtype is asked for; either outcome is fine."""
    works_or_raises_clearly(route, X30.astype(str), ctx, match=r"(?i)string|bytes|numeric")


@pytest.mark.parametrize("route", KERNEL_ROUTES)
@pytest.mark.parametrize("fmt", ["csr", "coo"])
def test_sparse_X_raises(route, fmt, X30, ctx):
    with pytest.raises((TypeError, ValueError), match=r"(?i)sparse.*dense"):
        run_route(route, sp.csr_matrix(X30).asformat(fmt), ctx)


@pytest.mark.parametrize("route", CLUSTER_ROUTES)
@pytest.mark.parametrize("fmt", ["csr", "coo"])
def test_sparse_X_is_densified_for_the_learned_affinity(route, fmt, X30, ctx):
    """ABCClustering takes sparse X wherever SpectralClustering does; the network gets the dense copy."""
    labels = run_route(route, sp.csr_matrix(X30).asformat(fmt), ctx)
    np.testing.assert_array_equal(labels, run_route(route, X30, ctx))


# ----------------------------------------------------------------------------------------- DataFrames
@pytest.fixture(scope="module")
def df30(X30):
    return pd.DataFrame(X30, columns=["a", "b"])


@pytest.fixture(scope="module")
def df_kernel(df30):
    return ContextualKernel(**TINY).fit(df30, some_labels(len(df30)))


def test_dataframe_kernel_keeps_feature_names(df30, df_kernel, X30):
    np.testing.assert_array_equal(df_kernel.feature_names_in_, ["a", "b"])
    assert df_kernel.n_features_in_ == 2
    assert_affinity(df_kernel.transform(df30), 30)
    with pytest.raises(ValueError, match="feature names should match"):
        df_kernel.transform(df30.rename(columns={"a": "x", "b": "y"}))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        df_kernel.transform(X30)


def test_dataframe_clustering_keeps_feature_names(df30):
    model = ABCClustering(kernel=ContextualKernel(**TINY), random_state=0).fit(df30, some_labels(30))
    np.testing.assert_array_equal(model.feature_names_in_, ["a", "b"])
    assert_labels(model.labels_, 30)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert_labels(model.predict(df30), 30)
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(df30.rename(columns={"a": "x", "b": "y"}))


def test_dataframe_with_frozen_dataframe_kernel_gives_no_feature_name_warning(df30, df_kernel):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ABCClustering(kernel=FrozenEstimator(df_kernel), random_state=0).fit(df30)
        assert_labels(model.predict(df30), 30)
    np.testing.assert_array_equal(model.feature_names_in_, ["a", "b"])
    messages = [str(w.message) for w in caught if "feature names" in str(w.message)]
    assert not messages, messages


def test_a_kernel_fitted_without_names_hears_nothing_of_the_dataframes_names():
    """A probe (/work/probe35c): the shipped circles kernel (saved without feature names) warned 'X has feature
    names, but ContextualKernel was fitted without feature names' on every fit and predict of a DataFrame, which
    ABCClustering had checked already; the user could change nothing."""
    from sklearn.datasets import make_circles

    X, _ = make_circles(60, factor=0.5, noise=0.05, random_state=0)
    frame = pd.DataFrame(X, columns=["u", "v"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = ABCClustering.from_pretrained("circles", random_state=0).fit(frame)
        predicted = model.predict(frame)
    np.testing.assert_array_equal(model.feature_names_in_, ["u", "v"])
    plain = ABCClustering.from_pretrained("circles", random_state=0).fit(X)
    np.testing.assert_array_equal(model.labels_, plain.labels_)
    np.testing.assert_array_equal(predicted, plain.predict(X))
    with pytest.raises(ValueError, match="feature names should match"):  # ABCClustering's own check still holds
        model.predict(frame.rename(columns={"u": "x"}))


# ---------------------------------------------------------------------------------------- shape of X
@pytest.mark.parametrize("route", ROUTES)
def test_zero_rows_raise(route, ctx):
    with pytest.raises(ValueError, match=r"0 sample\(s\)"):
        run_route(route, np.empty((0, 2)), ctx, y=np.empty(0, dtype=int))


@pytest.mark.parametrize("make_kernel", [lambda: pretrained.load("generic"), lambda: PairwiseKernel("rbf"),
                                         lambda: PrecomputedKernel()], ids=["canonical", "pairwise", "precomputed"])
@pytest.mark.parametrize(("bad", "message"), [
    (np.empty((0, 3)), r"0 sample\(s\) \(shape=\(0, 3\)\) while a minimum of 1 is required by \w+Kernel"),
    (np.full((3, 3), np.nan), r"Input X contains NaN"),
    # scikit-learn's words differ by version: "... while dim <= 2 is required by X" from 1.7, "X expected <= 2" before.
    (np.ones((3, 3, 1)), r"dim 3(, while dim <= 2 is required by|\.) \w+Kernel( expected <= 2)?"),
], ids=["no-rows", "nan", "3-d"])
def test_every_kernels_errors_name_the_kernel_and_X(make_kernel, bad, message):
    # The canonical kernel checked rows with a bare check_array: its errors named neither (probe 55b).
    with pytest.raises(ValueError, match=message):
        make_kernel().affinity(bad)


@pytest.mark.parametrize("route", FIT_ROUTES)
def test_fit_on_one_row_raises(route, X30, ctx):
    with pytest.raises(ValueError, match=r"1 sample\(s\).*minimum of 2"):
        run_route(route, X30[:1], ctx)


@pytest.mark.parametrize("route", INFERENCE_ROUTES)
def test_inference_on_one_row_works(route, X30, ctx):
    works(route, X30[:1], ctx)


@pytest.mark.parametrize("route", ROUTES)
def test_two_rows_work(route, X30, ctx):
    works(route, X30[:2], ctx)


@pytest.mark.parametrize("route", ROUTES)
def test_zero_features_raise(route, ctx):
    with pytest.raises(ValueError, match=r"0 feature\(s\)"):
        run_route(route, np.empty((5, 0)), ctx)


@pytest.mark.parametrize("route", ROUTES)
def test_constant_column_works(route, X30, ctx):
    works(route, np.column_stack([X30[:, 0], np.full(30, 3.0)]), ctx)


@pytest.mark.parametrize("route", ROUTES)
def test_all_points_duplicated_work(route, X30, ctx):
    works(route, np.tile(X30[:1], (30, 1)), ctx)


@pytest.mark.parametrize("route", INFERENCE_ROUTES)
def test_wrong_number_of_features_raises(route, ctx):
    with pytest.raises(ValueError, match=r"X has 3 features, but .* is expecting 2 features"):
        run_route(route, np.zeros((5, 3)), ctx)


# --------------------------------------------------------------------------------------------------- y
def fit_with_y(estimator: str, X, y, groups=None, kernel=None):
    if estimator == "kernel":
        return ContextualKernel(**TINY).fit(X, y, groups=groups).transform(X)
    kernel = ContextualKernel(**TINY) if kernel is None else kernel
    return ABCClustering(kernel=kernel, random_state=0).fit(X, y, groups=groups).labels_


def assert_fit_output(estimator, out, n):
    assert_output("kernel.fit" if estimator == "kernel" else "abc.fit", out, n)


@pytest.mark.parametrize("estimator", ["kernel", "abc"])
def test_single_class_y_works(estimator, X30):
    assert_fit_output(estimator, fit_with_y(estimator, X30, np.zeros(30, dtype=int)), 30)


def test_only_unlabelled_y(X30, tiny_kernel):
    y = np.full(30, -1)
    with pytest.raises(ValueError, match=r"y has no labelled rows \(every label is -1\)"):
        ContextualKernel(**TINY).fit(X30, y)
    with pytest.raises(ValueError, match="not fitted"):
        ABCClustering(kernel=ContextualKernel(**TINY)).fit(X30, y)
    # The default (generic pretrained) kernel clusters them zero-shot.
    assert_labels(ABCClustering(random_state=0).fit(X30, y).labels_, 30)
    # With a fitted kernel, unlabelled rows are simply clustered.
    assert_labels(ABCClustering(kernel=tiny_kernel, random_state=0).fit(X30, y).labels_, 30)


def test_a_warm_start_kernel_given_no_labels_is_not_silently_kept(X30, tiny_kernel):
    """Probe 54a: a fitted kernel with warm_start=True fine-tunes on y; y of no labels kept it without a word."""
    kernel = copy.deepcopy(tiny_kernel).set_params(warm_start=True)
    with pytest.raises(ValueError, match=r"no labels .* warm_start=True, which fine-tunes on the labels in y"):
        ABCClustering(kernel=kernel, random_state=0).fit(X30, np.full(30, -1))
    assert_labels(ABCClustering(kernel=kernel, random_state=0).fit(X30).labels_, 30)  # no y: used as it is


@pytest.mark.parametrize("estimator", ["kernel", "abc"])
def test_y_of_wrong_length_raises(estimator, X30):
    with pytest.raises(ValueError, match=r"^y has 20 entries but X has 30 rows"):
        fit_with_y(estimator, X30, some_labels(20))


def test_y_is_ignored_with_a_fitted_kernel(X30, tiny_kernel):
    """Like SpectralClustering: a y that trains nothing is not read (so not checked) at all."""
    assert_labels(fit_with_y("abc", X30, some_labels(20), kernel=tiny_kernel), 30)


@pytest.mark.parametrize("estimator", ["kernel", "abc"])
def test_y_column_vector_is_raveled_with_a_warning(estimator, X30):
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        out = fit_with_y(estimator, X30, some_labels(30)[:, None])
    assert_fit_output(estimator, out, 30)


@pytest.mark.parametrize("estimator", ["kernel", "abc"])
def test_y_with_two_columns_raises(estimator, X30):
    with pytest.raises(ValueError, match=r"y should be a 1d array, got an array of shape \(30, 2\)"):
        fit_with_y(estimator, X30, np.column_stack([some_labels(30)] * 2))


@pytest.mark.parametrize("estimator", ["kernel", "abc"])
@pytest.mark.parametrize(
    "make_y",
    [
        lambda y: np.where(np.arange(len(y)) == 2, np.nan, y),
        lambda y: np.where(np.arange(len(y)) == 2, np.inf, y),
        lambda y: pd.Series(y, dtype="Int64").mask(np.arange(len(y)) == 2),
        lambda y: pd.Series(y, dtype="float64").mask(np.arange(len(y)) == 2),
    ],
    ids=["float-nan", "float-inf", "Int64-NA", "series-nan"],
)
def test_y_with_nan_raises(estimator, make_y, X30):
    with pytest.raises(ValueError, match="NaN"):
        fit_with_y(estimator, X30, make_y(some_labels(30)))


@pytest.mark.parametrize("estimator", ["kernel", "abc"])
@pytest.mark.parametrize("missing", [np.nan, None], ids=["nan", "None"])
def test_string_y_with_missing_label_raises_clearly(estimator, missing, X30):
    y = np.array(["a", "b", missing] * 10, dtype=object)
    with pytest.raises(ValueError, match=r"(?i)nan|missing|none"):
        fit_with_y(estimator, X30, y)


def test_fit_predict_uses_y(X30):
    labels = ABCClustering(kernel=ContextualKernel(**TINY), random_state=0).fit_predict(X30, some_labels(30))
    assert_labels(labels, 30)


def test_fit_predict_rejects_y_of_wrong_length(X30):
    with pytest.raises(ValueError, match="y has 20 entries but X has 30 rows"):
        ABCClustering(kernel=ContextualKernel(**TINY), random_state=0).fit_predict(X30, some_labels(20))


# ---------------------------------------------------------------------------------------------- groups
@pytest.mark.parametrize("estimator", ["kernel", "abc"])
def test_groups_of_single_members_raise(estimator, X30):
    with pytest.raises(ValueError, match="no group holds at least 2 labelled rows"):
        fit_with_y(estimator, X30, some_labels(30), groups=np.arange(30))


def test_groups_of_single_members_cluster_with_a_fitted_kernel(X30, tiny_kernel):
    model = ABCClustering(kernel=tiny_kernel, random_state=0).fit(X30, groups=np.arange(30))
    assert_labels(model.labels_, 30)
    assert len(np.unique(model.labels_)) == 30  # every singleton group is its own cluster


@pytest.mark.parametrize("route", ["kernel.fit", "abc.fit", "abc.fit_unlabelled", "abc.predict"])
def test_groups_of_wrong_length_raise(route, X30, ctx):
    groups = np.repeat([0, 1], 10)
    with pytest.raises(ValueError, match="groups has 20 entries but X has 30 rows"):
        if route == "kernel.fit":
            ContextualKernel(**TINY).fit(X30, some_labels(30), groups=groups)
        elif route == "abc.fit":
            ABCClustering(kernel=ContextualKernel(**TINY)).fit(X30, some_labels(30), groups=groups)
        elif route == "abc.fit_unlabelled":
            ABCClustering(kernel=ctx.kernel).fit(X30, groups=groups)
        else:
            ctx.abc.predict(X30, groups=groups)


# ------------------------------------------------------------------- inference set 100x the training sets
def test_set_100x_larger_than_training_sets():
    X, y, groups = make_blob_sets(n_sets=20, set_size=20, random_state=1)
    kernel = ContextualKernel(**{**TINY, "set_size": (5, 20)})
    model = ABCClustering(kernel=kernel, max_clusters=5, random_state=0).fit(X, y, groups=groups)
    assert model.kernel_.set_size == (5, 20)
    X_big = np.random.default_rng(0).normal(size=(2000, 2))
    assert_affinity(model.kernel_.transform(X_big), 2000)
    assert_labels(model.predict(X_big), 2000)


# --------------------------------------------------------------------------------------------- hypothesis
finite_sets = hnp.arrays(
    np.float64,
    st.tuples(st.integers(2, 30), st.just(2)),
    elements=st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
)


@st.composite
def sets_with_non_finite_values(draw):
    X = draw(
        hnp.arrays(
            np.float64,
            st.tuples(st.integers(2, 30), st.just(2)),
            elements=st.one_of(st.floats(-1e6, 1e6), st.sampled_from([np.nan, np.inf, -np.inf])),
        )
    )
    row = draw(st.integers(0, X.shape[0] - 1))
    col = draw(st.integers(0, 1))
    X[row, col] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    return X


@SETTINGS
@given(X=finite_sets)
@example(X=np.array([[999809.5, 999809.0], [999809.0, 999809.0]]))
def test_property_finite_sets_give_valid_affinity_and_labels(tiny_kernel, X):
    """Valid results, or a documented refusal: a column whose values float32 would merge (hypothesis drew
    [[999809.5, 999809], [999809, 999809]] on 2026-12-04: a spread of 0.5 a million from zero), or a set whose
    values all round to zero in float32 (it drew a set of 3.4e-54s)."""
    refusals = r"holds fewer than 16 distinct values across it, so its rows would look alike; centre X first|" \
               r"below float32's smallest normal number"
    try:
        affinity = tiny_kernel.transform(X)
    except ValueError as error:
        assert re.search(refusals, str(error)), str(error)
        with pytest.raises(ValueError, match=refusals):
            ABCClustering(kernel=tiny_kernel, random_state=0).fit_predict(X)
        return
    assert_affinity(affinity, len(X))
    assert_labels(ABCClustering(kernel=tiny_kernel, random_state=0).fit_predict(X), len(X))


@SETTINGS
@given(X=sets_with_non_finite_values())
def test_property_non_finite_sets_raise(tiny_kernel, X):
    with pytest.raises(ValueError, match=r"NaN|infinity"):
        tiny_kernel.transform(X)
    with pytest.raises(ValueError, match=r"NaN|infinity"):
        ABCClustering(kernel=tiny_kernel, random_state=0).fit_predict(X)
    with pytest.raises(ValueError, match=r"NaN|infinity"):
        ContextualKernel(**TINY).fit(X, some_labels(len(X)))


# ------------------------------------------------- cases of the hostile-input probe (issue 21): validation
@pytest.mark.parametrize("route", ROUTES)
def test_masked_array_with_masked_entries_raises(route, X30, ctx):
    X = np.ma.masked_array(X30, mask=np.zeros_like(X30, dtype=bool))
    X.mask[3, 1] = True
    with pytest.raises(ValueError, match="X is a masked array with masked entries"):
        run_route(route, X, ctx)


@pytest.mark.parametrize("route", INFERENCE_ROUTES)
def test_masked_array_without_masked_entries_is_its_data(route, X30, ctx):
    np.testing.assert_array_equal(run_route(route, np.ma.masked_array(X30), ctx), run_route(route, X30, ctx))


@pytest.mark.parametrize("what", ["y", "groups"])
def test_masked_labels_or_groups_raise(what, X30):
    masked = np.ma.masked_array(some_labels(30), mask=np.arange(30) == 4)
    kwargs = {"y": masked} if what == "y" else {"y": some_labels(30), "groups": masked}
    with pytest.raises(ValueError, match=f"{what} is a masked array with masked entries"):
        ContextualKernel(**TINY).fit(X30, **kwargs)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("container", ["dataframe", "object-array"])
def test_pandas_NA_in_an_object_column_raises_clearly(route, container, X30, ctx):
    df = pd.DataFrame({"a": pd.Series(X30[:, 0], dtype=object), "b": X30[:, 1]})
    df.iloc[3, 0] = pd.NA
    X = df if container == "dataframe" else df.to_numpy()
    if route in INFERENCE_ROUTES and container == "dataframe":
        X = X.to_numpy()  # the fitted models saw no feature names
    with pytest.raises(ValueError, match=r"contains NaN \(missing values such as pd.NA"):
        run_route(route, X, ctx)


@pytest.mark.parametrize("route", FIT_ROUTES)
@pytest.mark.parametrize("kind", ["text", "category", "date"])
def test_a_dataframe_column_of_no_numbers_is_named(route, kind, X30, ctx):
    """Probe 44b: pandas' own error quoted a value ('could not convert string to float: ...'), not its column; a
    date column gave numpy's 'DType ... could not be promoted'."""
    other = {"text": pd.Series(["a", "b", "c"] * 10), "category": pd.Categorical(["x", "y"] * 15),
             "date": pd.date_range("2026-01-01", periods=30)}[kind]
    df = pd.DataFrame({"a": X30[:, 0], "species": other})
    with pytest.raises(ValueError, match=r"columns that hold values other than numbers \('species'; e.g. "):
        run_route(route, df, ctx)
    df["species"] = df["a"].astype(str)  # numbers written as text convert, as scikit-learn converts them
    run_route(route, df, ctx)


@pytest.mark.parametrize("route", FIT_ROUTES + INFERENCE_ROUTES)
@pytest.mark.parametrize("dtype", [str, object])
def test_an_array_column_of_no_numbers_is_named(route, dtype, X30, ctx):
    """Probe 47a: a numpy array of text got numpy's 'could not convert string to float: np.str_(...)' where a
    DataFrame of the same values got the column named and a way to turn it into numbers."""
    X = np.column_stack([X30[:, 0].astype(str), np.array(["a", "b", "c"] * 10)]).astype(dtype)
    with pytest.raises(ValueError, match=r"X holds values other than numbers \(e.g. 'a' in column 1\): turn them"):
        run_route(route, X, ctx)
    run_route(route, X30.astype(str).astype(dtype)[:, :2], ctx)  # numbers written as text convert, as in sklearn


@pytest.mark.parametrize("estimator", ["kernel", "abc"])
def test_y_mixing_strings_and_numbers_raises(estimator, X30):
    y = np.array(["a", 1, "b"] * 10, dtype=object)
    with pytest.raises(TypeError, match="y mixes strings with int values"):
        fit_with_y(estimator, X30, y)


@pytest.mark.parametrize("estimator", ["kernel", "abc"])
def test_y_mixing_booleans_and_numbers_raises(estimator, X30):
    """Probe 54a: True and 1 (False and 0) were merged into one class without a word."""
    with pytest.raises(TypeError, match="y mixes booleans with int values"):
        fit_with_y(estimator, X30, np.array([True, 0, 2] * 10, dtype=object))


def test_y_of_integers_and_whole_floats_in_an_object_column_is_read_as_numbers(X30):
    """Probe 54a: scikit-learn's 'Unknown label type' (and a dump of y) where the float column is taken."""
    from skabc._validation import encode_labels

    mixed = np.array([1, 2.0, 3] * 10, dtype=object)
    np.testing.assert_array_equal(encode_labels(mixed, 30), encode_labels(mixed.astype(float), 30))
    assert_fit_output("kernel", fit_with_y("kernel", X30, mixed), 30)
    # Review 54c: exactly, not through float64 (2**53 and 2**53 + 1 were merged into one class).
    big = np.array([2**53, 2**53 + 1, 3.0, -1.0], dtype=object)
    np.testing.assert_array_equal(encode_labels(big, 4), [1, 2, 0, -1])


def test_only_minus_one_is_unlabelled_and_fractions_are_no_classes():
    """Probe 59a: no test pinned these. -2 is a class like any other; "-1.0" (a CSV column of floats read as text)
    is the unlabelled marker as "-1" is; fractional labels in an object column are a continuous target, not
    truncated into classes (0.2 and 0.7 merged)."""
    from skabc._validation import encode_labels

    np.testing.assert_array_equal(encode_labels(np.array([-2, -2, 0, 0, 1, 1, -1]), 7), [0, 0, 1, 1, 2, 2, -1])
    np.testing.assert_array_equal(encode_labels(np.array(["1.0", "1.0", "2.0", "-1.0"]), 4), [0, 0, 1, -1])
    with pytest.raises(ValueError, match="continuous"):
        encode_labels(np.array([0.2, 0.7, 0.2, 0.7], dtype=object), 4)


def test_object_labels_beyond_float64_and_numpy_nan_groups_are_value_errors(X30, tiny_kernel):
    """Review 54e: a whole Fraction beyond float64 raised a raw OverflowError while the labels were read, and a
    numpy float32 NaN passed as a group id."""
    from fractions import Fraction

    from skabc._validation import encode_labels

    with pytest.raises(ValueError, match="labels beyond the int64 range"):  # probe 67a: was sklearn's array dump
        encode_labels(np.array([Fraction(10**400), 1], dtype=object), 2)
    groups = np.array([np.float32("nan"), np.float32(1.0)] * 15, dtype=object)
    with pytest.raises(ValueError, match="groups contains missing values"):
        ABCClustering(kernel=tiny_kernel).fit(X30, groups=groups)


def test_booleans_beside_the_unlabelled_marker_are_labels(X30):
    """Review 54c: the booleans check refused True/False with -1 (nothing merges there), and object columns of
    numpy booleans got scikit-learn's 'Unknown label type'."""
    from skabc._validation import encode_labels

    np.testing.assert_array_equal(encode_labels(np.array([True, False, -1], dtype=object), 3), [1, 0, -1])
    np.testing.assert_array_equal(encode_labels(np.array([np.True_, np.False_, -1], dtype=object), 3), [1, 0, -1])
    np.testing.assert_array_equal(encode_labels(np.array([np.True_, np.False_], dtype=object), 2), [1, 0])
    assert_fit_output("kernel", fit_with_y("kernel", X30, np.array([True, False, -1] * 10, dtype=object)), 30)


@pytest.mark.parametrize("missing", [None, np.nan, pd.NA], ids=["None", "nan", "NA"])
def test_groups_with_missing_ids_among_strings_raise(missing, X30, tiny_kernel):
    groups = np.array(["a", "b", missing] * 10, dtype=object)
    with pytest.raises(ValueError, match="groups contains missing values"):
        ContextualKernel(**TINY).fit(X30, some_labels(30), groups=groups)
    with pytest.raises(ValueError, match="groups contains missing values"):
        ABCClustering(kernel=tiny_kernel).fit(X30, groups=groups)


def test_groups_mixing_strings_and_numbers_raise(X30, tiny_kernel):
    with pytest.raises(TypeError, match="groups mixes strings with int values"):
        ABCClustering(kernel=tiny_kernel).fit(X30, groups=np.array(["a", 2] * 15, dtype=object))


def test_string_labels_and_groups_still_work(X30):
    y = np.array(["a", "b", "c"] * 10, dtype=object)
    groups = np.array(["g1", "g2"] * 15)
    assert_labels(fit_with_y("abc", X30, y, groups=groups), 30)


@pytest.fixture(scope="module")
def canonical_kernel(blob_data):
    X, y, groups = blob_data
    return ContextualKernel(**{**TINY, "canonical_features": 4}).fit(X, y, groups=groups)


@pytest.mark.parametrize("scale", [1e-310, 1e-40, 1e-25])
def test_scale_free_kernel_is_scale_free_down_to_subnormal_values(scale, X30, canonical_kernel):
    """The float32 cast comes after the (exact, power-of-two) rescaling, not before the canonicalisation."""
    np.testing.assert_allclose(canonical_kernel.transform(X30 * scale), canonical_kernel.transform(X30), atol=1e-5)


def test_generic_kernel_finds_the_same_clusters_in_a_subnormal_copy():
    """The probe's case: X * 1e-310 gave 1 cluster where X gave 5."""
    X, _, _ = make_blob_sets(n_sets=1, set_size=60, max_clusters=5, spread=0.02, random_state=3)
    labels = ABCClustering(random_state=0).fit_predict(X)
    assert len(np.unique(labels)) == 5
    np.testing.assert_array_equal(ABCClustering(random_state=0).fit_predict(X * 1e-310), labels)


@pytest.mark.parametrize("scales", [(1e-25, 1e25), (1.0, 1e45)])
def test_scale_free_kernel_keeps_columns_of_far_apart_units(scales, X30, canonical_kernel):
    """Probe 64d: one power of two for the whole set (from its largest value) sent the column of small units below
    float32's range, where it became 0: per-column scaling invariance broke beyond about 1e45 between columns."""
    np.testing.assert_allclose(canonical_kernel.transform(X30 * np.array(scales)), canonical_kernel.transform(X30),
                               atol=1e-5)


def test_one_huge_value_does_not_erase_the_other_rows():
    """Probe 64d: a 1e99 sentinel in one cell set the scale of the float32 cast, every other value became 0, and
    ABCClustering() found 2 clusters of 499 and 1 rows (ARI 0.000 on the others). Its tails are now pulled in
    first, in float64: 1e99 and 1e300 cluster as 1e40 did."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(500, centers=3, random_state=1)
    labels = []
    for value in (1e40, 1e99, 1e300):
        Z = X.copy()
        Z[7, 0] = value
        labels.append(ABCClustering(random_state=0).fit_predict(Z))
    np.testing.assert_array_equal(labels[1], labels[0])
    np.testing.assert_array_equal(labels[2], labels[0])
    assert len(np.unique(labels[0])) >= 3


def test_far_values_are_moved_only_where_float32_would_lose_the_rest():
    """Review 64b: pulling every rescaled set's tails in before the cast compressed them twice (X * 1e20 moved the
    canonical coordinates by 7.5e-2 where they had moved by 1e-7), and a training group of large units beside
    ordinary ones kept 2 distinct values of its 40. Only a column whose range float32 cannot hold is touched."""
    from skabc._validation import to_network_float32
    from skabc.preprocessing import canonicalize_set

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    X[:6] *= 40.0  # values beyond the far fences
    reference = canonicalize_set(X.astype(np.float32))
    for scale in (1e20, 1e-30):
        np.testing.assert_allclose(canonicalize_set(to_network_float32(X * scale, scale_free=True)), reference,
                                   atol=1e-5)
    for value in (1e16, 1e30, 1e99):  # one far cell: the same coordinates as at 1e14, which needs no rescale
        Z, far = X.copy(), X.copy()
        Z[7, 0], far[7, 0] = 1e14, value
        np.testing.assert_allclose(canonicalize_set(to_network_float32(far, scale_free=True)),
                                   canonicalize_set(to_network_float32(Z, scale_free=True)), atol=1e-5)
    group = rng.normal(size=(40, 2)) * 1e20  # a group in large units beside ordinary rows
    cast = to_network_float32(np.vstack([rng.normal(size=(200, 2)), group]), scale_free=True)[200:]
    np.testing.assert_allclose(canonicalize_set(cast), canonicalize_set(group.astype(np.float32)), atol=1e-5)


def test_a_spread_far_from_zero_is_not_taken_for_a_constant():
    """Probe 64d: blobs 8.6 wide shifted by 1e13 (every row distinct in float64) were constant to a tolerance of
    1e-12 of the magnitude, and clustered as one; so were nanosecond timestamps of bursts 0.5 ms apart."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(400, centers=3, random_state=0)
    labels = ABCClustering(random_state=0).fit_predict(X)
    np.testing.assert_array_equal(ABCClustering(random_state=0).fit_predict(X + 1e13), labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # probe 64d: numpy's overflow warning at the float64 limit
        big = np.array([[np.finfo(np.float64).max, 1.0], [-np.finfo(np.float64).max, 2.0], [0.0, 3.0]])
        ABCClustering(n_clusters=2, random_state=0).fit(big)


def test_a_spread_within_round_off_of_a_far_offset_is_dropped_with_a_warning():
    """Probe 70b: blobs shifted to 1e9 and shrunk to 1e-6 (191 distinct rows, a spread of about 170 float64 steps)
    are constant to the 2**-44 tolerance: one cluster, without a word.  The drop stays (round-off of 0.1 + 0.2 is
    no spread), but it is said, naming the columns; a centred copy clusters as the blobs."""
    from sklearn.datasets import make_blobs

    from skabc.preprocessing import SetCanonicalizer

    X, y = make_blobs(200, centers=3, random_state=0)
    with pytest.warns(SkabcWarning, match=r"column\(s\) 0, 1 of X vary by at most 2\*\*-44 .*StandardScaler"):
        ABCClustering(random_state=0).fit(1e9 + X * 1e-6)
    with pytest.warns(SkabcWarning, match=r"column\(s\) 0, 1 of X vary by at most 2\*\*-44"):
        SetCanonicalizer(n_components=2).fit_transform(X + 1e15)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SetCanonicalizer(n_components=2).fit_transform(np.c_[X, np.full(200, 1e9)])  # exactly constant: silent
        labels = ABCClustering(random_state=0).fit_predict(X)
    assert not [w for w in caught if "2**-44" in str(w.message)]
    assert adjusted_rand_score(y, labels) > 0.8


def test_scale_free_fit_on_subnormal_values_learns_from_them(X30):
    """Training sets are canonicalised too: a subnormal copy of X trains the same kernel (not one on zeros)."""
    params = {**TINY, "canonical_features": 2, "set_size": 30}
    on_x = ContextualKernel(**params).fit(X30, some_labels(30)).transform(X30)
    on_tiny = ContextualKernel(**params).fit(X30 * 1e-310, some_labels(30)).transform(X30)
    np.testing.assert_allclose(on_tiny, on_x, atol=1e-5)


@pytest.mark.parametrize(
    "limit, n, message",
    [(1000, 30, r"needs about 15.8 KiB for its dense 30 x 30 affinity and its computation, over "
                r"memory_limit=1000 bytes"),
     (3 * 2**20, 800, r"needs about 11.0 MiB for its dense 800 x 800 affinity and its computation, over "
                      r"memory_limit=3.0 MiB"),
     (2**30, 20_000, r"needs about 6.7 GiB for its dense 20000 x 20000 affinity and its computation, over "
                     r"memory_limit=1.0 GiB")],
)
def test_memory_limit_messages_use_a_readable_unit(limit, n, message, tiny_kernel):
    """Never 'needs 0.0 GiB, over 0.0 GiB': small sizes are given in MiB, KiB or bytes."""
    import copy

    small = copy.deepcopy(tiny_kernel).set_params(memory_limit=limit, affinity_mode="dense")
    with pytest.raises(MemoryError, match=message):
        small.check_memory(n)


@pytest.mark.skipif(not hasattr(os, "sysconf") or "SC_PHYS_PAGES" not in getattr(os, "sysconf_names", {}),
                    reason="physical memory known through POSIX sysconf")
def test_memory_limit_auto_is_half_the_physical_memory(tiny_kernel):
    """The documented default: 'auto' is half of the machine's physical memory, as the refusal says."""
    import copy

    from skabc._validation import format_bytes

    half = 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    dense = copy.deepcopy(tiny_kernel).set_params(memory_limit="auto", affinity_mode="dense")
    with pytest.raises(MemoryError, match=rf"over memory_limit={re.escape(format_bytes(half))}\."):
        dense.check_memory(10**6)


def test_training_memory_message_uses_a_readable_unit(X30):
    # Sets of at most the 30 labelled rows (probe 56a: the check sized them by set_size, up to 40).
    with pytest.raises(MemoryError, match=r"needs about 196.9 KiB per step, over memory_limit=1000 bytes"):
        ContextualKernel(**{**TINY, "memory_limit": 1000}).fit(X30, some_labels(30))


def test_training_on_a_gpu_is_sized_against_the_gpu_s_memory(monkeypatch):
    """Probe 45e: memory_limit='auto' measured training's per-step tensors against half the host's memory even on
    a GPU, where they live (a small GPU in a large host ran out of memory mid-training instead)."""
    from types import SimpleNamespace

    import torch

    from skabc.training import net

    monkeypatch.setattr(net, "resolve_device", lambda device: torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=2**28))
    kernel = ContextualKernel(batch_size=16)  # 500 points per set: about 366 MiB per step, over 128 MiB
    with pytest.raises(MemoryError, match=r"over memory_limit=128.0 MiB \(half of the GPU's memory\)"):
        net.check_training_memory(kernel, 500)
    net.check_training_memory(kernel.set_params(memory_limit=2**30), 500)  # a number given is the limit
    net.check_training_memory(kernel.set_params(memory_limit="auto"), 200)


def test_more_clusters_than_points_warns_and_gives_singletons(X30, tiny_kernel):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ABCClustering(n_clusters=100, kernel=tiny_kernel, random_state=0).fit(X30)
    ours = [w for w in caught if "n_clusters=100 is more than the 30 points" in str(w.message)]
    assert len(ours) == 1 and issubclass(ours[0].category, UserWarning)  # a SkabcWarning
    assert not [w for w in caught if w is not ours[0]], [str(w.message) for w in caught]  # no scipy warning
    assert model.n_clusters_ == 30
    np.testing.assert_array_equal(np.sort(model.labels_), np.arange(30))


@pytest.mark.parametrize("device", ["mps", "xpu"])
def test_unavailable_accelerator_device_raises_clearly(device, X30):
    import torch

    available = getattr(getattr(torch.backends, device, None), "is_available", lambda: False)()
    if device == "xpu":
        available = hasattr(torch, "xpu") and torch.xpu.is_available()
    if available:
        pytest.skip(f"{device} is available here")
    with pytest.raises(ValueError, match=f"device='{device}' is not available on this machine"):
        ContextualKernel(**{**TINY, "device": device}).fit(X30, some_labels(30))


def test_device_hpu_without_its_torch_module_raises_clearly(X30):
    import importlib.util

    if importlib.util.find_spec("torch.hpu") is not None:
        pytest.skip("this torch build has an hpu module")
    with pytest.raises(ValueError, match="device='hpu' is not available on this machine"):
        ContextualKernel(**{**TINY, "device": "hpu"}).fit(X30, some_labels(30))


def test_cuda_index_beyond_the_devices_raises_clearly(monkeypatch):
    import torch

    from skabc._runtime import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ValueError, match=r"device='cuda:1' was requested but this machine has 1 CUDA device"):
        resolve_device("cuda:1")


def test_device_none_resolves_as_auto():
    import torch

    from skabc._runtime import resolve_device

    expected = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device(None) == resolve_device("auto") == expected


@pytest.mark.parametrize("device", [["cpu"], {"type": "cpu"}])
def test_pretrained_load_refuses_an_unhashable_device_clearly(device):
    from skabc import pretrained

    with pytest.raises(ValueError, match="device must be 'auto' or a torch device"):
        pretrained.load("generic", device=device)


def test_a_fine_tunes_architecture_refusal_says_what_its_network_has():
    """Probe 69d: after a fine-tune (init 'auto' -> the generic network, canonical_features 64), set_params said
    "the fitted weights were built with canonical_features=None": the parameter's value, not the network's."""
    from skabc.datasets import make_circles_sets

    X, y, groups = make_circles_sets(n_sets=8, set_size=40, random_state=0)
    kernel = ContextualKernel(max_epochs=1, sets_per_epoch=4, set_size=30, batch_size=4, random_state=0,
                              device="cpu", verbose=0).fit(X, y, groups=groups)
    assert kernel.init_ == "generic" and kernel.network_params_["canonical_features"] == 64
    with pytest.raises(ValueError, match=r"canonical_features=8 was set after fit, but the kernel was fitted with "
                                         r"canonical_features=None \(its network has canonical_features=64\)"):
        kernel.set_params(canonical_features=8).transform(X[:40])


@pytest.mark.parametrize(
    "change", [{"canonical_features": 4}, {"d_model": 32}, {"n_blocks": 3}, {"embedder": "fourier"}],
    ids=lambda c: next(iter(c)),
)
def test_architecture_changed_after_fit_is_refused_by_transform_and_save(change, X30, tiny_kernel, tmp_path):
    import copy

    kernel = copy.deepcopy(tiny_kernel).set_params(**change)
    name = next(iter(change))
    with pytest.raises(ValueError, match=f"{name}=.* was set after fit, .* transform needs"):
        kernel.transform(X30)
    with pytest.raises(ValueError, match=f"{name}=.* was set after fit, .* save needs"):
        kernel.save(tmp_path / "k.safetensors")
    assert not (tmp_path / "k.safetensors").exists()
    # Setting it back, or changing an inference-only setting, keeps the kernel usable.
    kernel.set_params(**{name: tiny_kernel.get_params()[name]}, affinity_mode="dense", memory_limit=None)
    np.testing.assert_array_equal(kernel.transform(X30), tiny_kernel.transform(X30))


def test_a_parameter_the_fitted_backend_does_not_use_may_change_after_fit(X30, tiny_kernel, tmp_path):
    """A probe: n_inducing set on a fitted 'sab' kernel (whose weights do not depend on it) blocked transform."""
    import copy

    assert tiny_kernel.attention == "sab"
    kernel = copy.deepcopy(tiny_kernel).set_params(n_inducing=3, window_size=7, window_attention="dense")
    np.testing.assert_array_equal(kernel.transform(X30), tiny_kernel.transform(X30))
    kernel.save(tmp_path / "k.safetensors")
    # No options either way (probe 53e: {} after None was refused as another architecture); real ones are refused.
    assert tiny_kernel.attention_options is None
    np.testing.assert_array_equal(kernel.set_params(attention_options={}).transform(X30), tiny_kernel.transform(X30))
    with pytest.raises(ValueError, match=r"attention_options=\{'chunk_size': 8\} was set after fit"):
        kernel.set_params(attention_options={"chunk_size": 8}).transform(X30)
    with pytest.raises(ValueError, match=r"attention=.* was set after fit"):
        kernel.set_params(attention="isab", attention_options=None).transform(X30)


@pytest.mark.parametrize("estimator", [ABCClustering(), KernelEnsemble()], ids=lambda e: type(e).__name__)
def test_nested_kernel_params_with_no_kernel_name_the_problem(estimator):
    """kernel=None is a default built in fit: set_params(kernel__x=...) raised 'NoneType' has no set_params."""
    with pytest.raises(ValueError, match=r"cannot set kernel__d_model: its kernel is None"):
        estimator.set_params(kernel__d_model=32)
    assert estimator.kernel is None
    tuned = estimator.set_params(kernel=ContextualKernel(), kernel__d_model=32)  # the way that works
    assert tuned.kernel.d_model == 32


@pytest.mark.parametrize("limit", [-5, 0, "2GB", float("nan"), True])
def test_memory_limit_set_after_fit_is_checked_where_it_is_used(tiny_kernel, limit):
    """set_params on a fitted kernel skips fit's validation: -5 ran into 'over memory_limit=-5 bytes', '2GB' into
    float()'s own message."""
    kernel = copy.deepcopy(tiny_kernel).set_params(memory_limit=limit)
    X = np.random.default_rng(0).normal(size=(30, 2))
    # transform validates the parameters first (scikit-learn's message), then where memory_limit is used (ours).
    with pytest.raises(ValueError, match=r"memory_limit('? parameter of ContextualKernel)? must be"):
        kernel.transform(X)


def test_a_boolean_memory_limit_is_refused_even_where_validation_is_skipped(tiny_kernel):
    """True is an int to Python: with scikit-learn's validation skipped it became a limit of 1 byte."""
    from sklearn import config_context

    kernel = copy.deepcopy(tiny_kernel).set_params(memory_limit=True)
    with config_context(skip_parameter_validation=True), pytest.raises(
            ValueError, match=r"memory_limit.* must be a (positive number of bytes|float in the range).*[Gg]ot True"):
        kernel.transform(np.random.default_rng(0).normal(size=(30, 2)))


def test_minus_one_given_as_text_marks_unlabelled_rows():
    """'-1' among string labels (a text file, an object column) was trained on as a class of its own."""
    from skabc._validation import encode_labels

    codes = encode_labels(np.array(["b", "a", "-1", "b", " -1"]), 5)
    assert list(codes[[2, 4]]) == [-1, -1] and len(set(codes[[0, 1, 3]])) == 2 and codes[0] == codes[3] >= 0


@pytest.mark.parametrize("early_stopping", [True, np.True_])  # probe 63a: numpy's True was let pass in silence
def test_explicit_early_stopping_that_cannot_run_says_so(blob_data, early_stopping):
    X, y, _ = blob_data
    params = {**TINY, "early_stopping": early_stopping, "validation_fraction": 0.01}
    with pytest.warns(UserWarning, match=r"early_stopping=True, but validation_fraction=0.01 .* without validation"):
        kernel = ContextualKernel(**params).fit(X[:40], y[:40])
    assert kernel.validation_score_ is None


@pytest.mark.parametrize(("make", "name"), [
    (lambda: ABCClustering(affinity="rbf", n_clusters=True), "n_clusters"),
    (lambda: ABCClustering(affinity="rbf", n_clusters=2, n_components=True), "n_components"),
    (lambda: ABCClustering(affinity="nearest_neighbors", n_clusters=2, n_neighbors=True), "n_neighbors"),
    (lambda: ABCClustering(max_clusters=True), "max_clusters"),
    (lambda: SetCanonicalizer(n_components=True), "n_components"),
    (lambda: ContextualKernel(**{**TINY, "d_model": True}), "d_model"),
    # Note 63 left max_time=True as one second; these amounts took True as 1 too.
    (lambda: ContextualKernel(**{**TINY, "max_time": True}), "max_time"),
    (lambda: ContextualKernel(**{**TINY, "memory_limit": True}), "memory_limit"),
    (lambda: ContextualKernel(**{**TINY, "lr": True}), "lr"),
    (lambda: ContextualKernel(**{**TINY, "fine_tune_alpha": True}), "fine_tune_alpha"),
    (lambda: ABCClustering(affinity_power=True), "affinity_power"),
])
def test_a_flag_is_not_a_count(make, name):
    """bool is an Integral: True was taken as 1 or failed in scipy / numpy without naming the parameter."""
    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(ValueError, match=f"'{name}' parameter .* Got True"):
        make().fit(X, np.repeat([0, 1, 2], 10))


def test_counts_scikit_learn_takes_as_flags_still_run():
    """SpectralClustering(n_init=True, n_jobs=True) runs (scikit-learn's plain Interval): so does the drop-in."""
    from sklearn.cluster import SpectralClustering

    X = np.random.default_rng(0).normal(size=(30, 2))
    params = dict(affinity="rbf", n_clusters=2, n_init=True, n_jobs=True, gamma=True, random_state=0)
    np.testing.assert_array_equal(ABCClustering(**params).fit_predict(X), SpectralClustering(**params).fit_predict(X))


@pytest.mark.parametrize(("params", "error", "match"), [
    ({"lr": 1e300}, ValueError, "'lr' parameter"),
    ({"weight_decay": 1e300}, ValueError, "'weight_decay' parameter"),
    ({"canonical_features": 10**12}, ValueError, r"'canonical_features' parameter .* range \[1, 65536\]"),
    ({"d_model": 2**16}, AffinityTooLargeError, "d_model"),  # the widest a file holds: its weights are refused
    # Probe 56a: past ~2**30 torch's size arithmetic overflowed ('Storage size calculation overflowed') first.
    ({"d_model": 2**31}, ValueError, r"'d_model' parameter .* range \[1, 65536\]"),
    # Review 68d: wider networks than a saved kernel holds trained, then failed at the save.
    ({"canonical_features": 65537}, ValueError, r"'canonical_features' parameter .* range \[1, 65536\]"),
    ({"n_heads": 2**17}, ValueError, r"'n_heads' parameter .* range \[1, 65536\]"),
    # A probe (/work/probe42c): the message blamed d_model or canonical_features only.
    ({"attention": "isab", "d_model": 2**16}, AffinityTooLargeError, "or n_inducing"),
    # Review 67b: under 'sab' no memory check reads n_inducing: 2**40 trained, then the save refused it.
    ({"n_inducing": 2**40}, ValueError, r"'n_inducing' parameter .* range \[1, 65536\]"),
])
def test_an_impossible_network_is_refused_before_torch_meets_it(params, error, match):
    """float32 overflow in the optimizer, or weights allocated by torch until it fails: named first."""
    X, y, _ = make_blob_sets(n_sets=4)
    with pytest.raises(error, match=match):
        ContextualKernel(**{**TINY, "init": "scratch", **params}).fit(X, y)


def test_predict_many_names_what_it_takes(tiny_kernel):
    model = ABCClustering(kernel=tiny_kernel, random_state=0).fit(np.random.default_rng(0).normal(size=(20, 2)))
    with pytest.raises(TypeError, match="predict_many takes an iterable of sets"):
        model.predict_many(None)


@pytest.fixture(scope="module")
def named_kernels(blob_data):
    """A canonicalising kernel (any width) and a pairwise one, both fitted on a frame of columns u, v."""
    from skabc.kernels.pairwise import PairwiseKernel

    X, y, groups = blob_data
    frame = pd.DataFrame(X, columns=["u", "v"])
    canonical = ContextualKernel(**{**TINY, "canonical_features": 4}).fit(frame, y, groups=groups)
    return frame, [canonical, PairwiseKernel().fit(frame)]


@pytest.mark.parametrize("which", [0, 1], ids=["canonical", "pairwise"])
@pytest.mark.parametrize("columns", [["p", "v"], ["v", "u"], ["u", "v", "w"]], ids=["renamed", "reordered", "extra"])
def test_a_kernel_of_any_width_checks_a_frames_column_names(named_kernels, which, columns):
    """A probe (53a): a kernel that takes sets of any width exposed feature_names_in_ and took a frame of other
    columns without a word, where scikit-learn's transformers refuse it; an array of any width still goes."""
    frame, kernels = named_kernels
    kernel, rows = kernels[which], frame.iloc[:30]
    other = pd.DataFrame(np.c_[rows.to_numpy(), rows.to_numpy()[:, :1]][:, : len(columns)], columns=columns)
    with pytest.raises(ValueError, match=r"feature names should match.*pass them as an array"):
        kernel.affinity(other)
    np.testing.assert_array_equal(kernel.affinity(rows), kernel.affinity(rows.to_numpy()))
    assert kernel.affinity(np.c_[rows.to_numpy(), rows.to_numpy()]).shape == (30, 30)
    # Column names scikit-learn does not count as names (none a string) are not checked either; mixed ones are
    # refused as scikit-learn refuses them (review 53d).
    assert kernel.affinity(pd.DataFrame(rows.to_numpy(), columns=[0, 1])).shape == (30, 30)
    with pytest.raises(TypeError, match="only supported if all input features have string names"):
        kernel.affinity(pd.DataFrame(rows.to_numpy(), columns=["u", 1]))


def test_other_feature_names_are_named_before_the_nan_they_bring(tiny_kernel):
    """A probe (43q): a frame reindexed to other names (all NaN) got 'contains NaN', where scikit-learn's
    estimators name the mismatch (its check_dataframe_column_names_consistency expects that)."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n_samples=120, centers=3, n_features=2, random_state=0)
    named = pd.DataFrame(X, columns=["a", "b"])
    renamed = pd.DataFrame(named, columns=["c", "d"])  # pandas reindexes: every value NaN
    model = ABCClustering(n_clusters=3, random_state=0).fit(named)
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(renamed)
    with pytest.raises(ValueError, match="feature names should match"):
        ABCClustering(kernel=FrozenEstimator(tiny_kernel), n_clusters=3).fit(named).predict(renamed)


def test_predict_many_names_the_set_it_refuses(tiny_kernel):
    """Probe 56e: among hundreds of sets, 'Input X contains NaN' did not say which; a None set read as 'scalar NaN'."""
    rng = np.random.default_rng(0)
    model = ABCClustering(kernel=tiny_kernel, random_state=0).fit(rng.normal(size=(20, 2)))
    good, bad = rng.normal(size=(10, 2)), np.full((10, 2), np.nan)
    with pytest.raises(ValueError, match=r"^set 1: Input X contains NaN"):
        model.predict_many([good, bad, good])
    with pytest.raises(ValueError, match=r"^set 2: X has 3 features"):
        model.predict_many([good, good, rng.normal(size=(10, 3))])
    with pytest.raises(TypeError, match=r"^set 1 is None"):
        model.predict_many([good, None])
    assert model.predict_many([]) == []  # review 56h: no sets made no chunks and joblib's "n_jobs == 0"


def test_a_refused_set_whose_message_is_not_its_first_argument_is_named_in_a_note():
    """Review 56h: rewriting args[0] lost the prefix of exceptions with their own __str__ (UnicodeDecodeError)."""
    from skabc._sets import validate_each

    def undecodable(X):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    with pytest.raises(UnicodeDecodeError) as caught:
        validate_each(undecodable, [np.zeros((2, 2))])
    assert caught.value.encoding == "utf-8" and caught.value.__notes__ == ["(in set 0 of predict_many's sets)"]


def test_n_jobs_that_joblib_cannot_take_are_named_or_capped(tiny_kernel):
    """Probe 56e: n_jobs=0 (taken by the constructor, as SpectralClustering takes it) failed in joblib when groups
    were clustered; n_jobs=10**6 broke joblib's dispatch, and 48 jobs for 2 sets started 48 processes."""
    rng = np.random.default_rng(0)
    X, groups = rng.normal(size=(40, 2)), np.repeat([0, 1], 20)
    with pytest.raises(ValueError, match="n_jobs=0 clusters no set at a time"):
        ABCClustering(kernel=tiny_kernel, n_jobs=0, random_state=0).fit(X, groups=groups)
    model = ABCClustering(kernel=tiny_kernel, random_state=0).fit(X[:20])
    sets = [X[:20], X[20:]]
    serial = model.predict_many(sets)
    for a, b in zip(model.predict_many(sets, n_jobs=10**6), serial, strict=True):
        np.testing.assert_array_equal(a, b)



def test_a_missing_optional_package_is_named_with_the_extra_that_installs_it(monkeypatch):
    """Probe 57a: eigen_solver='amg' without pyamg failed with scikit-learn's message (no extra named), and
    load_omniglot without Pillow said 'pip install pillow' where the package's extra is 'images'."""
    from sklearn.datasets import make_moons

    from skabc.datasets import load_omniglot

    X, _ = make_moons(60, noise=0.05, random_state=0)
    monkeypatch.setitem(sys.modules, "pyamg", None)  # as if not installed
    for n_clusters in (2, None):
        with pytest.raises(ValueError, match=r"pip install 'skabc\[amg\]'"):
            ABCClustering(n_clusters=n_clusters, eigen_solver="amg", random_state=0).fit(X)
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match=r"pip install 'skabc\[images\]'"):
        load_omniglot()
