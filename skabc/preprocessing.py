"""Per-set input canonicalisation: any set, of any width and scale, to a fixed width.

One neural kernel has one input width, but tabular data comes with any number of
features in any units.  :func:`canonicalize_set` maps a whole set ``X`` of shape
``(n, d)``, for any ``d >= 1``, to a fixed width ``n_components`` by a fixed,
parameter-free procedure computed *on that set alone*:

(0) tame gross outliers: in every column, a value beyond Tukey's far fences
    ``q25 - 3 IQR`` and ``q75 + 3 IQR`` is pulled in to
    ``fence +- IQR * tanh(excess / IQR)``: at most one IQR beyond its fence,
    monotone, smooth, slope 1 at the fence (``tails='keep'`` leaves it).
    Without it a few far rows (typos, sensor glitches) carry most of the
    variance, and steps (a) and (e) squash every other row into a dot; a
    column of zero IQR is left as it is;
(a) centre every column and divide it by its standard deviation; a column of
    (near-)zero variance, such as zero padding, becomes exactly 0
    (``scaling='features'``, the default).  With ``scaling='global'`` the
    columns are only centred and keep their relative scales: columns that
    share one unit, such as the pixels of an image, then weigh as they do in
    the data, where standardising would inflate near-constant pixels to the
    weight of the informative ones;
(b) rotate to the principal axes of the standardised set (SVD; for a set of
    many more columns than rows, the eigenvectors of its ``n x n`` Gram
    matrix), components by decreasing variance; directions of (near-)zero
    variance become exactly 0;
(c) fix the sign of every axis: positive third moment (skewness) along it;
    a (near-)symmetric axis is oriented so that its farthest point is on the
    positive side; an axis symmetric on both counts so that its largest
    component (the first of equally large ones, in column order) is positive;
(d) keep the first ``n_components`` axes, zero-padding when there are fewer;
(e) divide by the root-mean-square radius of the kept coordinates,
    ``sqrt(mean_i ||z_i||^2)``, and multiply by :data:`TARGET_RMS_RADIUS`
    (1.0): every non-constant set comes out with unit RMS radius.

The result is invariant to translating ``X``, to scaling it globally or (with
``scaling='features'``) per column, to permuting or appending constant (e.g. zero) columns, and to the sign
convention of the SVD; it is *equivariant* to permuting rows (the rows of the
output are permuted the same way).  These invariances are exact up to rounding
except where the set's principal variances are (nearly) tied: there the
principal axes themselves are undetermined, and so is the rotation within the
tied subspace; and permuting columns can flip an axis symmetric both ways in
step (c) whose largest components tie.  Constant sets and sets of one point map to zeros.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_array, validate_data

from ._constraints import IntRange
from ._typing import Int
from ._user_warnings import warn_user

#: RMS radius of every non-constant canonicalised set (step e).
TARGET_RMS_RADIUS = 1.0

#: (a) A column whose spread is at most this fraction of its largest |value| (before centring) is constant:
#: 2**-44, 256 units in the last place of float64, where 1e-12 (4,500 of them) took real spreads for constant
#: (blobs 8.6 wide at 1e13, nanosecond timestamps of bursts 0.5 ms apart: one cluster).
CONSTANT_TOLERANCE = 2.0**-44
# (b) Principal directions with a singular value at most this fraction of the largest are dropped.
_RANK_TOL = 1e-9
# (b) A set of at least this many columns, and this many times more columns than rows, takes the Gram route.
_GRAM_MIN_FEATURES, _GRAM_WIDTH_RATIO = 1024, 2
# (b) The Gram route's _RANK_TOL: it squares the singular values, which resolves about sqrt(2.2e-16) of the largest.
_GRAM_RANK_TOL = 1e-6
# (b) Singular values closer than this fraction of the largest are tied (their axes are not determined).
_TIE_TOL = 1e-10
# (c) |skewness| at most this counts as symmetric, and so does |max + min| <= this * (max - min).
_SYMMETRY_TOL = 1e-6
# (c) An axis's components within this fraction of its largest one tie for "largest" (the first of them wins):
# an axis carries errors of about machine epsilon over its variance's gap to the next, so 1e-9 flipped axes whose
# variances were 1e-7 apart.
_LARGEST_TOL = 1e-6

_FLOAT_DTYPES = (np.float64, np.float32)

#: How step (a) scales the columns: each by its own standard deviation, or all by one factor.
SCALINGS = ("features", "global")
#: Step (0): pull values beyond the far fences in (a bounded squash), or keep them.
TAILS = ("compress", "keep")
#: Step (0): the fences lie this many interquartile ranges beyond the quartiles (Tukey's "far out").
FENCE_IQRS = 3.0


def canonicalize_set(X, n_components: Int = 16, *, scaling: str = "features", tails: str = "compress") -> np.ndarray:
    """Map one set of any width and scale to ``n_components`` canonical coordinates.

    The steps, the invariances and the constant are described in the module
    documentation of :mod:`skabc.preprocessing`.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        One set: ``n_samples >= 1`` points with ``n_features >= 1`` finite
        features.
    n_components : int, default=16
        Width of the output.
    scaling : {'features', 'global'}, default='features'
        Step (a): standardise every column (invariance to per-column units),
        or only centre them and keep their relative scales (for columns in
        one unit, e.g. pixels).
    tails : {'compress', 'keep'}, default='compress'
        Step (0): pull values beyond the far fences of their column to
        within one IQR of the fence, or keep them as they are.

    Returns
    -------
    Z : ndarray of shape (n_samples, n_components)
        Canonical coordinates, ``float32`` for ``float32`` input and
        ``float64`` otherwise (the computation is always in ``float64``).
        Columns by decreasing variance; the root-mean-square of the row norms
        is :data:`TARGET_RMS_RADIUS`, or every entry is 0 for a constant set.

    Raises
    ------
    ValueError
        If ``X`` is not 2-D, is empty, or holds NaN or infinity, if
        ``n_components`` is not a positive integer, or if ``scaling`` is
        not one of :data:`SCALINGS`, or ``tails`` not one of :data:`TAILS`.

    Examples
    --------
    >>> import numpy as np
    >>> from skabc.preprocessing import canonicalize_set
    >>> X = np.random.default_rng(0).normal(size=(50, 3)) * [1, 10, 100] + 7
    >>> Z = canonicalize_set(X, n_components=4)
    >>> Z.shape
    (50, 4)
    >>> bool(np.allclose(canonicalize_set(2 * X[:, ::-1] - 3, n_components=4), Z))
    True
    """
    if isinstance(n_components, bool) or not isinstance(n_components, Integral) or n_components < 1:
        raise ValueError(f"n_components must be a positive integer, got {n_components!r}.")
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}.")
    if tails not in TAILS:
        raise ValueError(f"tails must be one of {TAILS}, got {tails!r}.")
    X = check_array(X, dtype=_FLOAT_DTYPES, ensure_min_samples=1, ensure_min_features=1, input_name="X")
    return _canonicalize(X, int(n_components), scaling, tails)


def warn_round_off_columns(columns: np.ndarray) -> None:
    """Say which varying columns the constant test (:data:`CONSTANT_TOLERANCE`) reads as constant: their values
    differ by round-off of their magnitude only, and a far offset (raw timestamps) can shrink a real spread to that."""
    if columns.size:
        shown = ", ".join(str(int(c)) for c in columns[:10]) + (", ..." if columns.size > 10 else "")
        warn_user(f"column(s) {shown} of X vary by at most 2**-44 of their largest |value|, within round-off of "
                  "them: treated as constant (dropped). If they carry information (e.g. raw timestamps), centre or "
                  "standardise X first (sklearn.preprocessing.StandardScaler).")


def compress_tails(X: np.ndarray) -> np.ndarray:
    """Step (0): every value beyond its column's far fences pulled in to ``fence +- IQR * tanh(excess / IQR)``.

    Bounded, so that however far a few rows lie, they cannot carry the set's variance (a logarithm leaves an
    outlier at 10,000 radii a dozen IQRs out, still most of the variance of a set with 1% of them).
    Invariant to translating and scaling a column, like the steps after it; a copy only where a value moves.
    """
    low_quartile, high_quartile = _quartiles(X)
    spread = high_quartile - low_quartile
    # A column of zero IQR (mostly one value, e.g. a rare flag) has no scale to call anything far.
    width = np.where(spread > 0, spread, np.inf)
    high, low = high_quartile + FENCE_IQRS * width, low_quartile - FENCE_IQRS * width
    above, below = X > high, X < low
    if not (above.any() or below.any()):
        return X
    X = X.copy()
    for outside, fence, sign in ((above, high, 1.0), (below, low, -1.0)):
        rows, cols = np.nonzero(outside)
        excess = sign * (X[rows, cols] - fence[cols])
        X[rows, cols] = fence[cols] + sign * width[cols] * np.tanh(excess / width[cols])
    return X


def _quartiles(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.percentile(X, [25, 75], axis=0)`` (linear interpolation) from one sort: a fraction of its cost."""
    ordered = np.sort(X, axis=0)
    quartiles = []
    for position in (0.25 * (len(X) - 1), 0.75 * (len(X) - 1)):
        below = int(position)
        above = min(below + 1, len(X) - 1)
        quartiles.append(ordered[below] + (ordered[above] - ordered[below]) * (position - below))
    return quartiles[0], quartiles[1]


def _canonicalize(X: np.ndarray, n_components: Int, scaling: str = "features", tails: str = "compress") -> np.ndarray:
    """Steps (0)-(e) on a validated finite 2-D float array."""
    n = X.shape[0]
    out = np.zeros((n, n_components), dtype=X.dtype if X.dtype == np.float32 else np.float64)

    # (0) Tame gross outliers, (a) standardise.  Dividing by the largest |value| first keeps huge values
    # from overflowing (in the quartiles' differences too) and changes nothing else: both steps are
    # invariant to per-column scaling.  A set with nothing beyond its fences takes the very same path.
    Z = np.asarray(X, dtype=np.float64)
    peak = np.max(np.abs(Z), axis=0)
    Z = Z / np.where(peak > 0, peak, 1.0)
    if tails == "compress":
        Z = compress_tails(Z)
    # Constant means a spread of at most round-off of the column's own values: measured after centring, the
    # spread would be compared with itself, and 0.3 against 0.1 + 0.2 became a column of -1 and +1.
    magnitude = np.max(np.abs(Z), axis=0, initial=0.0)
    Z = Z - Z.mean(axis=0)
    std = np.sqrt(np.mean(Z * Z, axis=0))
    varying = std > CONSTANT_TOLERANCE * magnitude + np.finfo(np.float64).tiny
    warn_round_off_columns(np.flatnonzero(~varying & (std > 0)))
    if not varying.any():
        return out
    if scaling == "features":
        Z = Z[:, varying] / std[varying]
    else:  # one factor for every column keeps their relative scales: their own peaks, relative to the largest
        # varying one (a constant column, dropped anyway, must not scale the others into underflow at 1e200)
        Z = Z[:, varying] * (peak[varying] / peak[varying].max())

    # (b) Principal axes, by decreasing variance; drop directions of (numerically) zero variance.
    P, axes, s = _principal_axes(Z, n_components)
    k = len(s)
    for start, stop in _tied_blocks(s):
        # Equal variances leave the axes within their span to rounding, i.e. to the row order: take the
        # span's own basis nearest the columns instead (two integer grids side by side, standardised).
        axes[:, start:stop] = _column_basis(axes[:, start:stop])
        P[:, start:stop] = Z @ axes[:, start:stop]

    # (c) Orientation: positive skewness, else farthest point on the positive side, else the axis's largest
    # component positive (not the SVD's sign, which may follow the row order).
    m2 = np.sum(P * P, axis=0)
    m3 = np.sum(P * P * P, axis=0)
    skewed = np.abs(m3) * np.sqrt(n) > _SYMMETRY_TOL * m2**1.5
    high, low = P.max(axis=0), P.min(axis=0)
    lopsided = np.abs(high + low) > _SYMMETRY_TOL * (high - low)
    # The first component within _LARGEST_TOL of the largest: standardised columns often tie (two columns give
    # +-(1, +-1)/sqrt(2)), and a plain argmax let rounding, so the row order, choose between them.
    magnitudes = np.abs(axes)
    first_largest = np.argmax(magnitudes >= (1.0 - _LARGEST_TOL) * magnitudes.max(axis=0), axis=0)
    largest = axes[first_largest, np.arange(k)]
    sign = np.where(skewed, np.sign(m3), np.where(lopsided, np.sign(high + low), np.sign(largest)))
    P = P * sign

    # (d) + (e) Keep the first n_components axes (zero padding stays in `out`), unit RMS radius.
    rms = np.sqrt(np.sum(m2[:k]) / n)
    out[:, :k] = P * (TARGET_RMS_RADIUS / rms)
    return out


def _principal_axes(Z: np.ndarray, n_components: Int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coordinates ``(n, k)``, axes ``(d, k)`` and singular values of the first ``k <= n_components`` principal
    directions of the centred ``Z`` of nonzero variance.

    A set much wider than tall (text, images as rows) takes them from the ``n x n`` Gram matrix: ``n^2 d`` work and
    no ``n x d`` factor, where the SVD of 1,000 x 30,000 took 7.7 s and the Gram route 1.0 s.  Squared, singular
    values below about 1e-8 of the largest drown in rounding, so that route drops them (:data:`_GRAM_RANK_TOL`).
    """
    n, d = Z.shape
    if d >= max(_GRAM_WIDTH_RATIO * n, _GRAM_MIN_FEATURES):
        variances, vectors = np.linalg.eigh(Z @ Z.T)  # ascending
        s = np.sqrt(np.clip(variances[::-1], 0.0, None))
        k = min(int(np.count_nonzero(s > _GRAM_RANK_TOL * s[0])), n_components)
        left = vectors[:, ::-1][:, :k]
        return left * s[:k], (Z.T @ left) / s[:k], s[:k]
    U, s, Vt = np.linalg.svd(Z, full_matrices=False)
    k = min(int(np.count_nonzero(s > _RANK_TOL * s[0])), n_components)
    return U[:, :k] * s[:k], Vt[:k].T, s[:k]


def _tied_blocks(singular_values: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` of every run of two or more singular values equal to within :data:`_TIE_TOL`."""
    blocks, start = [], 0
    for i in range(1, len(singular_values) + 1):
        if i == len(singular_values) or singular_values[i - 1] - singular_values[i] > _TIE_TOL * singular_values[0]:
            if i - start > 1:
                blocks.append((start, i))
            start = i
    return blocks


def _column_basis(axes: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the span of ``axes`` (orthonormal columns) fixed by the span alone: the
    projections of the coordinate axes onto it, in column order, made orthonormal (Gram-Schmidt)."""
    basis = []
    for row in axes:  # the projector's columns one at a time: axes @ axes.T is d x d (2 GB at d = 15,000)
        column = axes @ row
        v = column - sum((b @ column) * b for b in basis) if basis else column
        norm = np.linalg.norm(v)
        if norm > 1e-6:
            basis.append(v / norm)
            if len(basis) == axes.shape[1]:
                break
    return np.column_stack(basis)


class SetCanonicalizer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Canonicalise a set to a fixed width (see :func:`canonicalize_set`).

    A scikit-learn wrapper of :func:`canonicalize_set`, for pipelines.
    :meth:`transform` treats the ``X`` it is given as **one set**: every
    output row depends on all the rows of that ``X`` (centring, principal
    axes, scale are those of the set), so transforming a subset does not give
    the corresponding rows of the transformed whole.  Rows are handled
    equivariantly: reordering the rows of ``X`` reorders the output the same
    way.

    Nothing is learned: :meth:`fit` only validates ``X`` and records
    ``n_features_in_`` (and ``feature_names_in_``), which :meth:`transform`
    then checks, as usual in scikit-learn.  An unfitted instance transforms
    sets of any width.

    Parameters
    ----------
    n_components : int, default=16
        Width of the output.
    tails : {'compress', 'keep'}, default='compress'
        Step (0) of :func:`canonicalize_set`: pull values beyond their
        column's far fences to within one IQR of the fence, or keep them.
    scaling : {'features', 'global'}, default='features'
        Step (a) of :func:`canonicalize_set`: standardise every column, or
        only centre them and keep their relative scales (columns in one
        unit, e.g. pixels).

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during :meth:`fit`, when ``X`` has string
        column names.

    See Also
    --------
    canonicalize_set : The function applied to every set.

    Examples
    --------
    >>> import numpy as np
    >>> from skabc.preprocessing import SetCanonicalizer
    >>> X = np.random.default_rng(0).normal(size=(30, 5))
    >>> SetCanonicalizer(n_components=8).fit_transform(X).shape
    (30, 8)
    """

    # Set by ``fit`` (scikit-learn's ``validate_data``), declared for type checkers.
    n_features_in_: int
    feature_names_in_: np.ndarray

    _parameter_constraints: dict = {"n_components": [IntRange(1, None, closed="left")],
                                    "scaling": [StrOptions(set(SCALINGS))], "tails": [StrOptions(set(TAILS))]}

    def __init__(self, n_components: Int = 16, tails: str = "compress", scaling: str = "features"):
        self.n_components = n_components
        self.tails = tails
        self.scaling = scaling

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Validate ``X`` and record its number of features; nothing is learned.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A set.
        y : None, default=None
            Ignored.

        Returns
        -------
        self : SetCanonicalizer
        """
        validate_data(self, X, dtype=_FLOAT_DTYPES, ensure_min_samples=1)
        return self

    def transform(self, X):
        """Canonicalise ``X`` as one set.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One set, with the features seen in :meth:`fit` if fitted.

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
            ``float32`` for ``float32`` input, ``float64`` otherwise.
        """
        self._validate_params()  # set_params after fit too: a misspelt option would silently keep the default
        X = validate_data(self, X, dtype=_FLOAT_DTYPES, ensure_min_samples=1, reset=False)
        return _canonicalize(X, self.n_components, scaling=self.scaling, tails=self.tails)

    @property
    def _n_features_out(self) -> Int:
        return self.n_components

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False  # stateless: fit learns nothing
        tags.input_tags.allow_nan = False
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
