"""canonicalize_set / SetCanonicalizer: fixed width, invariances, equivariance, edge cases."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.spatial.distance import pdist
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

from skabc.preprocessing import (
    FENCE_IQRS,
    TARGET_RMS_RADIUS,
    SetCanonicalizer,
    canonicalize_set,
    compress_tails,
)


def _skewed_set(n=120, d=6, seed=0):
    """A set with well-separated principal variances and skewed axes (principal axes well defined)."""
    rng = np.random.default_rng(seed)
    latent = rng.exponential(size=(n, d)) * np.geomspace(4.0, 0.5, d)
    mix = np.linalg.qr(rng.normal(size=(d, d)))[0]
    return latent @ mix * rng.uniform(0.5, 3.0, d) + rng.normal(0, 5, d)


X0 = _skewed_set()
Z0 = canonicalize_set(X0)


def test_fixed_width_dtype_and_unit_rms_radius():
    assert Z0.shape == (len(X0), 16)
    assert Z0.dtype == np.float64
    assert_allclose(np.sqrt(np.mean(np.sum(Z0**2, axis=1))), TARGET_RMS_RADIUS)
    # Fewer features than components: the rest is exactly zero padding.
    assert np.all(Z0[:, X0.shape[1]:] == 0)
    assert np.all(np.any(Z0[:, : X0.shape[1]] != 0, axis=0))
    # Components by decreasing variance, uncorrelated, centred.
    variances = Z0.var(axis=0)
    assert np.all(np.diff(variances) <= 1e-12)
    cov = np.cov(Z0[:, :6].T)
    assert_allclose(cov - np.diag(np.diag(cov)), 0, atol=1e-10)
    assert_allclose(Z0.mean(axis=0), 0, atol=1e-12)


def test_more_features_than_components_and_than_points():
    rng = np.random.default_rng(1)
    wide = canonicalize_set(rng.normal(size=(200, 40)), n_components=16)
    assert wide.shape == (200, 16) and np.all(np.any(wide != 0, axis=0))
    # 10 points span at most 9 directions: the rest is exactly zero.
    few = canonicalize_set(rng.normal(size=(10, 40)), n_components=16)
    assert few.shape == (10, 16)
    assert np.all(np.any(few[:, :9] != 0, axis=0)) and np.all(few[:, 9:] == 0)
    assert canonicalize_set(rng.normal(size=(30, 5)), n_components=2).shape == (30, 2)


@pytest.mark.parametrize(
    "dtype, expected", [(np.float32, np.float32), (np.float64, np.float64), (np.int64, np.float64)]
)
def test_output_dtype(dtype, expected):
    X = (X0 * 10).astype(dtype)
    Z = canonicalize_set(X)
    assert Z.dtype == expected
    assert_allclose(Z, canonicalize_set(X.astype(np.float64)), atol=1e-5)


@pytest.mark.parametrize(
    "transform",
    [
        pytest.param(lambda X: X + np.arange(X.shape[1]) * 10.0 - 3.0, id="translation"),
        pytest.param(lambda X: X * 1e-3, id="global-scale-small"),
        pytest.param(lambda X: X * 7e4, id="global-scale-large"),
        pytest.param(lambda X: X * np.array([1e-2, 3.0, -1.0, 50.0, -0.2, 1e3]), id="per-column-scale-and-sign"),
        pytest.param(lambda X: X[:, [3, 0, 5, 1, 4, 2]], id="column-permutation"),
        pytest.param(lambda X: np.hstack([X, np.zeros((len(X), 20))]), id="zero-padding"),
        pytest.param(lambda X: np.hstack([np.full((len(X), 2), 4.2), X, np.zeros((len(X), 1))]), id="constant-columns"),
        pytest.param(lambda X: -X, id="negation"),
    ],
)
def test_invariances(transform):
    assert_allclose(canonicalize_set(transform(X0.copy())), Z0, atol=1e-8)


def test_huge_and_tiny_values_do_not_overflow():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_allclose(canonicalize_set(X0 * 1e300), Z0, atol=1e-8)
        assert_allclose(canonicalize_set(X0 * 1e-300), Z0, atol=1e-8)


def test_row_permutation_equivariance():
    perm = np.random.default_rng(3).permutation(len(X0))
    assert_allclose(canonicalize_set(X0[perm]), Z0[perm], atol=1e-6)


def test_deterministic():
    assert np.array_equal(canonicalize_set(X0), canonicalize_set(X0.copy()))


def test_positive_skewness_orientation():
    third = np.sum(Z0[:, :6] ** 3, axis=0)
    assert np.all(third > 0)


def _flipped_svd(svd):
    def flipped(a, *args, **kwargs):
        U, s, Vt = svd(a, *args, **kwargs)
        signs = np.where(np.arange(len(s)) % 2 == 0, -1.0, 1.0)
        return U * signs, s, Vt * signs[:, None]

    return flipped


def test_independent_of_svd_sign_convention(monkeypatch):
    monkeypatch.setattr(np.linalg, "svd", _flipped_svd(np.linalg.svd))
    assert np.array_equal(canonicalize_set(X0), Z0)


def test_symmetric_axis_tie_break(monkeypatch):
    # Zero third moment (b + c = 3.5 and b^3 + c^3 = 27.875 cancel -3, -1 and 0.5) but lopsided extremes: the
    # farthest point (c ~ 3.03 > 3) must come out on the positive side, whatever the SVD's sign.
    b, c = sorted(np.roots([1.0, -3.5, (42.875 - 27.875) / 10.5]))
    values = np.array([-3.0, -1.0, 0.5, b, c])[:, None]
    assert abs(np.sum((values - values.mean()) ** 3)) < 1e-10 and c > 3.0
    Z = canonicalize_set(values)
    assert Z[4, 0] > 0 and Z[0, 0] < 0
    assert_allclose(canonicalize_set(-values), Z, atol=1e-12)
    monkeypatch.setattr(np.linalg, "svd", _flipped_svd(np.linalg.svd))
    assert_allclose(canonicalize_set(values), Z, atol=1e-12)


@pytest.mark.parametrize(
    "X", [np.array([[1.0, -2.0, 3.0]]), np.full((7, 3), 5.5), np.zeros((4, 2)), np.array([[1e300], [1e300]])]
)
def test_one_point_and_constant_sets_give_zeros_without_warnings(X):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Z = canonicalize_set(X, n_components=5)
    assert Z.shape == (len(X), 5)
    assert np.all(Z == 0)


@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([[1.0, np.nan], [2.0, 3.0]]), "NaN"),
        (np.array([[1.0, np.inf], [2.0, 3.0]]), "infinity"),
        (np.arange(5.0), "2D"),
        (np.zeros((2, 3, 4)), "dim"),
        (np.zeros((0, 3)), "sample"),
        (np.zeros((3, 0)), "feature"),
    ],
)
def test_bad_input_raises(X, match):
    with pytest.raises(ValueError, match=match):
        canonicalize_set(X)


@pytest.mark.parametrize("n_components", [0, -1, 1.5, True, "16"])
def test_bad_n_components_raises(n_components):
    with pytest.raises(ValueError, match="n_components"):
        canonicalize_set(X0, n_components=n_components)


def test_transformer_matches_function_and_is_stateless():
    est = SetCanonicalizer(n_components=8)
    Z = est.fit_transform(X0)
    assert_allclose(Z, canonicalize_set(X0, n_components=8))
    assert est.n_features_in_ == X0.shape[1]
    # Fit learns nothing: a fitted instance transforms another set as the function does.
    other = _skewed_set(n=50, seed=5)
    assert_allclose(est.transform(other), canonicalize_set(other, n_components=8))
    # Unfitted, any width is accepted; fitted, the width must match.
    assert SetCanonicalizer().transform(np.hstack([X0, X0 ** 2])).shape == (len(X0), 16)
    with pytest.raises(ValueError, match="features"):
        est.transform(X0[:, :3])
    assert list(est.get_feature_names_out()) == [f"setcanonicalizer{i}" for i in range(8)]
    assert est.__sklearn_tags__().requires_fit is False


def test_transformer_parameter_validation_and_pandas_output():
    with pytest.raises(InvalidParameterError, match="n_components"):
        SetCanonicalizer(n_components=0).fit(X0)
    with pytest.raises(InvalidParameterError, match="n_components"):
        SetCanonicalizer(n_components=0).transform(X0)
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X0, columns=[f"f{i}" for i in range(X0.shape[1])])
    out = make_pipeline(SetCanonicalizer(n_components=4)).set_output(transform="pandas").fit_transform(frame)
    assert list(out.columns) == [f"setcanonicalizer{i}" for i in range(4)]
    assert_allclose(out.to_numpy(), Z0[:, :4] / np.sqrt(np.mean(np.sum(Z0[:, :4] ** 2, axis=1))))


def test_global_scaling_keeps_relative_column_scales():
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(size=200), 0.01 * rng.normal(size=200)])
    # Per-column standardisation makes the near-constant column as wide as the other; global scaling does not.
    assert np.std(canonicalize_set(X, 2)[:, 1]) > 0.5
    Z = canonicalize_set(X, 2, scaling="global")
    assert np.std(Z[:, 1]) < 0.05
    # Still invariant to translation and to one global factor, and of unit RMS radius.
    assert_allclose(canonicalize_set(3 * X - 5, 2, scaling="global"), Z, atol=1e-8)
    assert_allclose(np.sqrt(np.mean(np.sum(Z**2, axis=1))), TARGET_RMS_RADIUS)


def test_unknown_scaling_is_refused():
    with pytest.raises(ValueError, match="scaling"):
        canonicalize_set(X0, scaling="columns")


def _blobs_with_outlier(distance: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    X = np.concatenate([rng.normal(size=(100, 2)) * 0.3 + centre for centre in ([0, 0], [3, 0], [0, 3])])
    outlier = np.array([[distance, -distance / 3]])
    return np.vstack([X, outlier]), X


def test_far_rows_no_longer_squash_the_rest():
    X, clean = _blobs_with_outlier(1e6)
    inliers = canonicalize_set(X, 2)[:-1]
    kept = canonicalize_set(X, 2, tails="keep")[:-1]
    # Kept as it is, the far row holds the variance: the other 300 rows shrink to a dot.
    assert np.sqrt(np.mean(np.sum((kept - kept.mean(axis=0)) ** 2, axis=1))) < 1e-3
    # Squashed to within one IQR of its column's far fence, it leaves them their spread and their shape.
    assert np.sqrt(np.mean(np.sum((inliers - inliers.mean(axis=0)) ** 2, axis=1))) > 0.5
    distances = pdist(inliers)
    assert np.corrcoef(distances, pdist(clean))[0, 1] > 0.99


def test_tail_squash_is_bounded_monotone_and_invariant():
    X, _ = _blobs_with_outlier(1e3)
    far = np.vstack([X, [[1e5, -1e5 / 3]]])
    Z = canonicalize_set(far, 2, tails="keep")
    squashed = canonicalize_set(far, 2)
    # Order along every column is kept (rows far beyond the fence may tie at its bound); values inside the
    # fences do not move; nothing ends more than one IQR beyond its fence.
    step0 = compress_tails(far)
    for column in range(2):
        order = np.argsort(far[:, column], kind="stable")
        assert np.all(np.diff(step0[order, column]) >= 0)
    q25, q75 = np.percentile(far, [25, 75], axis=0)
    inside = (far >= q25 - FENCE_IQRS * (q75 - q25)) & (far <= q75 + FENCE_IQRS * (q75 - q25))
    assert inside[:-2].all() and np.array_equal(step0[inside], far[inside])
    reach = (FENCE_IQRS + 1) * (q75 - q25)
    assert np.all(step0 <= q75 + reach) and np.all(step0 >= q25 - reach)
    assert step0[-1, 0] >= step0[-2, 0] > far[:-2, 0].max()
    assert not np.allclose(Z, squashed)
    # Still invariant to translating and scaling columns.
    assert_allclose(canonicalize_set(far * [7.0, -0.01] + [3.0, 1e4], 2), squashed, atol=1e-8)


def test_sets_without_far_values_are_unchanged_by_the_tail_step():
    gaussian = np.random.default_rng(1).normal(size=(500, 4)) * [1.0, 5.0, 0.1, 2.0]
    assert np.array_equal(canonicalize_set(gaussian), canonicalize_set(gaussian, tails="keep"))
    binary = np.column_stack([np.r_[np.zeros(95), np.full(5, 40.0)], np.random.default_rng(0).normal(size=100)])
    # A column of zero IQR (a rare flag) has no scale to call anything far: left alone.
    assert np.array_equal(compress_tails(binary)[:, 0], binary[:, 0])


def test_unknown_tails_is_refused():
    with pytest.raises(ValueError, match="tails must be one of"):
        canonicalize_set(X0, tails="clip")
    with pytest.raises(InvalidParameterError, match="tails"):
        SetCanonicalizer(tails="clip").fit(X0)
    X, _ = _blobs_with_outlier(1e6)
    kept = canonicalize_set(X, 2, tails="keep")
    assert_allclose(SetCanonicalizer(n_components=2, tails="keep").fit_transform(X), kept)


def test_a_column_of_round_off_only_is_constant():
    # 0.3 and 0.1 + 0.2 differ in the last bit: no feature, in float64 as in the kernel's float32 path.
    from skabc import pretrained

    X = np.random.default_rng(0).normal(size=(120, 2))
    fuzz = np.where(np.random.default_rng(1).random(120) < 0.5, 0.1 + 0.2, 0.3)
    constant, fuzzy = np.c_[X, np.full(120, 0.3)], np.c_[X, fuzz]
    assert_allclose(canonicalize_set(fuzzy, 4), canonicalize_set(constant, 4))
    kernel = pretrained.load("generic")
    assert_allclose(kernel.transform(fuzzy), kernel.transform(constant), atol=1e-6)
    # A small spread that float64 resolves is still a feature.
    assert np.abs(canonicalize_set(np.c_[X[:, :1], 1e6 + 1e-4 * X[:, 1]], 2)[:, 1]).max() > 0.1


def test_tied_principal_variances_do_not_follow_the_row_order():
    """A probe: two integer grids side by side have equal variances once standardised; the SVD then picked
    the axes by rounding, i.e. by row order, and the kernel clustered the grids one way or another."""
    grid = np.stack(np.meshgrid(np.arange(15), np.arange(15)), -1).reshape(-1, 2).astype(float)
    X = np.r_[grid, grid + np.array([25.0, 0.0])]
    Z = canonicalize_set(X, 4)
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(len(X))
        assert_allclose(canonicalize_set(X[perm], 4), Z[perm], atol=1e-9)
    # The span's basis nearest the columns: here the standardised columns themselves.
    standardised = (X - X.mean(0)) / X.std(0)
    assert_allclose(np.abs(Z[:, :2]), np.abs(standardised) / np.sqrt(np.mean(np.sum(standardised**2, 1))),
                    atol=1e-9)


def test_transform_checks_parameters_set_after_fit():
    """A probe: a fitted SetCanonicalizer took tails='bogus' (as 'keep') and n_components=0 silently."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    for params in ({"tails": "bogus"}, {"n_components": 0}):
        with pytest.raises(InvalidParameterError):
            SetCanonicalizer().fit(X).set_params(**params).transform(X)


def test_wide_sets_take_the_gram_route_to_the_same_coordinates(monkeypatch):
    """Much wider than tall (a probe's 2,000 x 50,000 TF-IDF took 56 s, mostly a full SVD with its n x d factor):
    the Gram route gives the SVD's canonical coordinates, low-rank sets and tied variances included."""
    import skabc.preprocessing as preprocessing

    rng = np.random.default_rng(0)
    latent = rng.exponential(size=(60, 8)) * np.geomspace(4.0, 0.5, 8)
    skewed = latent @ rng.normal(size=(8, 3000))  # rank 8: the zero directions must stay dropped
    # Six groups of ten rows at orthonormal directions: five tied variances (kept as such by scaling='global').
    tied = np.repeat(np.linalg.qr(rng.normal(size=(2000, 6)))[0].T, 10, axis=0)
    dense = rng.normal(size=(50, 1500))
    real_svd, calls = np.linalg.svd, []

    def counted_svd(*args, **kwargs):
        calls.append(np.shape(args[0]))
        return real_svd(*args, **kwargs)

    for X, scaling in ((skewed, "features"), (tied, "global"), (dense, "features")):
        with monkeypatch.context() as patch:
            patch.setattr(np.linalg, "svd", counted_svd)
            gram = canonicalize_set(X, n_components=16, scaling=scaling)
            assert calls == []
            patch.setattr(preprocessing, "_GRAM_MIN_FEATURES", 10**9)
            assert_allclose(gram, canonicalize_set(X, n_components=16, scaling=scaling), atol=1e-7)
            assert calls == [X.shape]
            calls.clear()


def test_an_axis_symmetric_both_ways_takes_its_sign_from_the_set_not_from_rounding():
    """Probe 69c: in a point-symmetric set of two standardised columns every axis is +-(1, +-1)/sqrt(2), and the
    sign followed whichever component rounding made larger: row order, translation or units flipped a whole column
    (8 of 20 permutations).  Variances are not tied here."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(20, 2)) @ [[1, 0.6], [0, 1]]
    X = np.vstack([A, -A])
    Z = canonicalize_set(X, n_components=2)
    for _ in range(20):
        order = rng.permutation(len(X))
        assert_allclose(canonicalize_set(X[order], n_components=2), Z[order], atol=1e-9)
        assert_allclose(canonicalize_set(X * rng.uniform(0.1, 10, 2) + rng.normal(size=2) * 10, n_components=2), Z,
                        atol=1e-9)
    # Review 69: nearly uncorrelated columns (variances 1e-7 apart, not tied) carry axes rounded to ~eps / 1e-7,
    # which a tie tolerance of 1e-9 still let flip (9 of 30 permutations).
    a, b = rng.normal(size=(2, 40))
    a -= a.mean()
    b -= b.mean() + (a @ b) / (a @ a) * a
    B = np.c_[a / np.linalg.norm(a), b / np.linalg.norm(b) + 1e-7 * a / np.linalg.norm(a)]
    X = np.vstack([B, -B])
    Z = canonicalize_set(X, n_components=2)
    for _ in range(30):
        order = rng.permutation(len(X))
        assert_allclose(canonicalize_set(X[order], n_components=2), Z[order], atol=1e-6)


@pytest.mark.parametrize("magnitude", [1e100, 1e160, 1e200])
def test_a_huge_constant_column_leaves_a_global_scaling_unchanged(magnitude):
    """Probe 69c: with scaling='global' the constant column, dropped anyway, set the one factor: at 1e200 every
    other column underflowed to constant and the set came out all zeros (9e-6 off at 1e160)."""
    X = np.random.default_rng(1).exponential(size=(30, 3))
    wider = np.hstack([X, np.full((30, 1), magnitude)])
    Z = canonicalize_set(X, n_components=4, scaling="global")
    assert_allclose(canonicalize_set(wider, n_components=4, scaling="global"), Z, atol=1e-12)
    assert np.sqrt(np.mean(np.sum(Z**2, axis=1))) == pytest.approx(TARGET_RMS_RADIUS)
    # Review 69: a column constant to round-off (one row off by 2**-42) is dropped too, and scales nothing.
    nearly = np.full(30, magnitude)
    nearly[0] *= 1 + 2.0**-42
    tiny = X * 1e-20
    assert_allclose(canonicalize_set(np.c_[tiny, nearly], n_components=4, scaling="global"),
                    canonicalize_set(tiny, n_components=4, scaling="global"), atol=1e-12)


def test_tied_variances_of_a_wide_set_need_no_square_matrix_of_its_columns():
    """Probe 69c: the tied block's basis was read from the d x d projector (2 GB at d = 15,000 for ten rows); its
    columns are now formed one at a time (numpy reports its buffers to tracemalloc), to an orthonormal basis of the
    same span."""
    import tracemalloc

    from skabc.preprocessing import _column_basis

    axes = np.linalg.qr(np.random.default_rng(0).normal(size=(5000, 3)))[0]
    tracemalloc.start()
    try:
        basis = _column_basis(axes)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # the projector alone is 200 MB
    assert_allclose(basis @ (basis.T @ axes), axes, atol=1e-10)  # the same span
    assert_allclose(basis.T @ basis, np.eye(3), atol=1e-10)


def test_the_wrapper_takes_the_functions_scaling():
    """Probe 69c: SetCanonicalizer had no scaling, so scaling='global' (pixels) could not be used in a pipeline."""
    X = np.random.default_rng(2).normal(size=(40, 3)) * [1.0, 10.0, 100.0]
    global_ = SetCanonicalizer(n_components=3, scaling="global").fit_transform(X)
    assert_allclose(global_, canonicalize_set(X, 3, scaling="global"))
    assert not np.allclose(global_, SetCanonicalizer(n_components=3).fit_transform(X))
    with pytest.raises(InvalidParameterError, match="scaling"):
        SetCanonicalizer(scaling="pixels").fit(X)
    with pytest.raises(InvalidParameterError, match="scaling"):
        SetCanonicalizer().fit(X).set_params(scaling="pixels").transform(X)
    # Review 69b: added after tails, so positional calls of before keep their meaning.
    assert_allclose(SetCanonicalizer(3, "keep").fit_transform(X), canonicalize_set(X, 3, tails="keep"))
