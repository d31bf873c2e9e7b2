"""Input checks shared by the estimators: clear errors before any torch code runs."""

from __future__ import annotations

import sys
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d

from .preprocessing import CONSTANT_TOLERANCE, FENCE_IQRS, _quartiles, warn_round_off_columns

UNLABELLED = -1

# Beyond this magnitude float32 activations (squared in layer norms) overflow to inf/NaN.
#: joblib's n_jobs: None, a positive count, or -1, -2, ... (all workers, all but one...); 0 means nothing.
N_JOBS_CONSTRAINT = [Interval(Integral, None, -1, closed="right"), Interval(Integral, 1, None, closed="left"), None]
MAX_ABS_VALUE = 1e15

# A scale-free set whose largest |value| is below this would lose its values in the float32 cast
# (float32's smallest normal number is about 1.2e-38); such a set is first rescaled by a power of two.
TINY_SET_SCALE = 2.0**-64

# A scale-free column lying farther than this many of its own spreads from zero would keep fewer than 20 of
# float32's 24 bits for its spread; it is centred first (in float64).  At 2**10 (14 bits), blobs 900 spreads out
# moved the generic kernel's affinity by 2e-2 and changed k; centred beyond 16, it moves by about 1e-6.
FAR_OFFSET_RATIO = 2.0**4
#: A column lying more than this many of its spreads from zero keeps fewer than 16 distinct float32 values
#: across its range (float32 has a 24-bit significand): the network of a kernel that is not scale-free refuses it.
FLOAT32_OFFSET_RATIO = 2.0**20
#: A scale-free column whose largest |value| is more than this many times its quartiles' would, scaled into float32's
#: range by that value, round its ordinary values to 0 (float32's smallest normal number is 2**-126).
FLOAT32_RANGE_RATIO = 2.0**100
#: Where such a column's far values are moved: this many interquartile ranges beyond the canonicalisation's far
#: fence, where tanh is 1.0 in float64, so that its tail step maps them where it maps the original values.
MOVED_IQRS = 40.0


def add_note(error: BaseException, note: str) -> None:
    """``error.add_note(note)`` where Python has it (3.11+).  Python 3.10, which setup.cfg admits, has no notes: the
    error is raised as it is there, rather than an AttributeError in its place."""
    if hasattr(error, "add_note"):
        error.add_note(note)


def check_magnitude(X: np.ndarray) -> np.ndarray:
    """Refuse values the network's float32 arithmetic cannot hold (a kernel that is not scale-free).

    Too large, a whole set too small (every value would round to zero), or a column whose spread is
    lost in float32 next to its offset from zero (values around 1e9 that differ by units all become one
    value, and every row of such a set looks the same).
    """
    if X.size:
        largest = float(np.max(np.abs(X)))
        if largest > MAX_ABS_VALUE:
            raise ValueError(
                f"X holds values up to {largest:.3g}, too large for the network's float32 arithmetic "
                f"(limit {MAX_ABS_VALUE:.0e}); rescale it first, e.g. with sklearn's StandardScaler."
            )
        if 0.0 < largest < np.finfo(np.float32).tiny:
            # Every value would round to zero or lose its digits in float32: a constant affinity, one cluster.
            raise ValueError(
                f"X's largest absolute value is {largest:.3g}, below float32's smallest normal number "
                f"({np.finfo(np.float32).tiny:.3g}): the network would see zeros; rescale it first, e.g. with "
                "sklearn's StandardScaler."
            )
        low, high = X.min(axis=0), X.max(axis=0)
        spread = high.astype(np.float64) - low
        offset = np.maximum(np.abs(low), np.abs(high)).astype(np.float64)
        # A spread within round-off of the values (0.3 against 0.1 + 0.2) is a constant column, as a canonicalising
        # kernel takes it: float32 loses only that round-off.
        lost = (spread > CONSTANT_TOLERANCE * offset) & (offset > FLOAT32_OFFSET_RATIO * spread)
        if lost.any():
            column = int(np.flatnonzero(lost)[0])
            raise ValueError(
                f"column {column} of X spans {spread[column]:.3g} at {offset[column]:.3g} from zero: float32, the "
                "network's arithmetic (about 7 significant digits), holds fewer than 16 distinct values across it, "
                "so its rows would look alike; centre X first, e.g. with sklearn's StandardScaler."
            )
    return X


def check_not_masked_or_missing(X, input_name: str = "X") -> None:
    """Refuse inputs whose missing entries, or text, scikit-learn's conversion would not report clearly.

    ``np.asarray`` drops the mask of a masked array, so the fill values would be
    clustered as data; ``pd.NA`` in an object column makes the float conversion
    fail with a message naming neither the input nor the problem.
    """
    if isinstance(X, np.ma.MaskedArray):
        if np.ma.getmaskarray(X).any():
            raise ValueError(
                f"{input_name} is a masked array with masked entries; their mask would be ignored and the "
                f"hidden values used as data. Drop or impute the masked entries first "
                f"(e.g. {input_name}.filled(value) or sklearn.impute.SimpleImputer)."
            )
        return
    if isinstance(X, np.ndarray) and X.dtype.kind in "USO" and X.ndim == 2:
        _check_numeric_array(X, input_name)  # after the missing entries below, which it would call text
    pandas = sys.modules.get("pandas")  # pd.NA can only exist when pandas is imported
    if pandas is None:
        return
    if isinstance(X, (pandas.DataFrame, pandas.Series)):
        # NumPy float columns hold NaN, which scikit-learn's own checks report (after the feature names): only the
        # object and extension columns, where pd.NA lives, are checked here.
        frame = X.to_frame() if isinstance(X, pandas.Series) else X
        held = [i for i, dtype in enumerate(frame.dtypes) if not (isinstance(dtype, np.dtype) and dtype.kind in "fiub")]
        missing = bool(frame.iloc[:, held].isna().to_numpy().any()) if held else False
    elif isinstance(X, np.ndarray) and X.dtype == object:
        missing = bool(np.any(pandas.isna(X)))
    else:
        return
    if missing:
        raise ValueError(
            f"Input {input_name} contains NaN (missing values such as pd.NA or None); drop or impute them "
            "first (e.g. with sklearn.impute.SimpleImputer)."
        )
    if isinstance(X, (pandas.DataFrame, pandas.Series)) and held:
        _check_numeric_columns(frame, held, input_name)


def _converts_to_float(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _check_numeric_array(X: np.ndarray, input_name: str) -> None:
    """Name the first column of a text or object array that holds no number (numpy's error names neither)."""
    try:
        np.asarray(X, dtype=np.float64)
        return
    except TypeError:  # objects that are not text (a dict): scikit-learn's own TypeError says so
        return
    except ValueError:
        pass
    pandas = sys.modules.get("pandas")
    if X.dtype == object and pandas is not None and bool(np.any(pandas.isna(X))):
        return  # missing entries: check_not_masked_or_missing names them
    for column in range(X.shape[1]):
        value = next((v for v in X[:, column] if isinstance(v, str | bytes) and not _converts_to_float(v)), None)
        if value is not None:
            value = value.item() if isinstance(value, np.generic) else value  # 'a', not np.str_('a')
            raise ValueError(f"{input_name} holds values other than numbers (e.g. {value!r} in column {column}): "
                             + _NUMBERS_FIRST)


#: How to turn columns of text into numbers (the end of the errors above and below).
_NUMBERS_FIRST = ("turn them into numbers first (categories: sklearn.preprocessing.OneHotEncoder or OrdinalEncoder, "
                  "e.g. in a sklearn.compose.ColumnTransformer; dates: e.g. days since a start), or drop them.")


def _check_numeric_columns(frame, held: list, input_name: str) -> None:
    """Name the columns of a DataFrame that hold no numbers (pandas' own error quotes a value, not its column)."""
    text = {}
    for i in held:
        column = frame.iloc[:, i]
        if getattr(column.dtype, "kind", "") in "mM":  # dates and durations: numbers only once chosen how
            text[frame.columns[i]] = column.iloc[0] if len(column) else None
            continue
        try:
            np.asarray(column, dtype=np.float64)
        except (TypeError, ValueError):
            text[frame.columns[i]] = next((value for value in column if not _converts_to_float(value)), None)
    if text:
        names = ", ".join(repr(name) for name in text)
        column, value = next(iter(text.items()))
        raise ValueError(
            f"{input_name} has columns that hold values other than numbers ({names}; e.g. {value!r} in {column!r}): "
            + _NUMBERS_FIRST
        )


def to_network_float32(X: np.ndarray, scale_free: bool) -> np.ndarray:
    """Cast a validated float array to float32 for the network.

    For a kernel that canonicalises every set (``scale_free``), the result
    must depend neither on where ``X`` lies nor on its global scale, and
    float32 must not erase either: a column lying more than
    :data:`FAR_OFFSET_RATIO` of its own spreads from zero (timestamps,
    projected coordinates) is first centred on its midrange, and a set whose
    largest |value| is below :data:`TINY_SET_SCALE` or above
    :data:`MAX_ABS_VALUE` is multiplied by a power of two (exact); neither
    changes its canonical coordinates.  Sets of ordinary magnitude and
    offset are cast exactly as ``check_array(X, dtype=np.float32)`` would,
    but for constant columns, which become 0 (canonicalisation drops them).
    Where rescaling is needed, each column takes its own power of two (one
    column of far larger units would otherwise set the scale for all), and
    in a column whose largest |value| is more than :data:`FLOAT32_RANGE_RATIO`
    times its quartiles (a ``1e99`` sentinel among values near 1) the far
    values are first moved in to :data:`MOVED_IQRS` interquartile ranges
    beyond the far fence: float32 would otherwise round every other value
    of the column to 0, and the canonicalisation's tail step maps a value
    there where it maps the original one.
    """
    if scale_free and X.size and X.dtype == np.float64:
        low, high = X.min(axis=0), X.max(axis=0)
        # Halves first: the midrange of values near the float64 limit must not overflow.  Their spread may: inf is
        # a spread that is neither far nor constant, as it should be.
        with np.errstate(over="ignore"):
            magnitude, spread = np.maximum(np.abs(low), np.abs(high)), (high / 2 - low / 2) * 2
            far = magnitude > FAR_OFFSET_RATIO * spread
        # A spread within round-off of the values (0.3 against 0.1 + 0.2) is a constant column: centred, its
        # round-off would be all there is to standardise.
        constant = spread <= CONSTANT_TOLERANCE * magnitude
        warn_round_off_columns(np.flatnonzero(constant & (spread > 0)))
        if far.any():
            X = X.copy()
            X[:, far] -= low[far] / 2 + high[far] / 2
            X[:, constant] = 0.0
        largest = float(np.max(np.abs(X)))
        if 0.0 < largest < TINY_SET_SCALE or largest > MAX_ABS_VALUE:
            X = _far_values_moved_in(X)
            peak = np.max(np.abs(X), axis=0)
            X = np.ldexp(X, -np.frexp(np.where(peak > 0, peak, 1.0))[1])  # each column's largest |value| in [0.5, 1)
    return X.astype(np.float32, copy=False)


def _far_values_moved_in(X: np.ndarray) -> np.ndarray:
    """In each column of a dynamic range beyond float32's (:data:`FLOAT32_RANGE_RATIO`), the values beyond
    ``fence + MOVED_IQRS * IQR`` (the canonicalisation's far fences, ``FENCE_IQRS`` interquartile ranges beyond
    the quartiles) moved to it; every other value kept exactly, and a copy only where one moves."""
    peak = np.max(np.abs(X), axis=0)
    scaled = X / np.where(peak > 0, peak, 1.0)  # in [-1, 1]: the quartiles' arithmetic cannot overflow
    low_quartile, high_quartile = _quartiles(scaled)  # the canonicalisation's own, for its own fences
    width = high_quartile - low_quartile
    typical = np.maximum(np.abs(low_quartile), np.abs(high_quartile))
    wide = (width > 0) & (typical * FLOAT32_RANGE_RATIO < 1.0)
    if not wide.any():
        return X
    X = X.copy()
    for column in np.flatnonzero(wide):
        reach = (FENCE_IQRS + MOVED_IQRS) * width[column]
        bounds = np.array([low_quartile[column] - reach, high_quartile[column] + reach]) * peak[column]
        X[:, column] = np.clip(X[:, column], bounds[0], bounds[1])
    return X


def format_bytes(n_bytes: float) -> str:
    """A memory size in GiB, or in MiB / KiB when it is small (never '0.0 GiB')."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= size:
            return f"{n_bytes / size:.1f} {unit}"
    return f"{n_bytes:.0f} bytes"


def _check_label_values(values: np.ndarray, input_name: str, hint: str) -> None:
    """Refuse object labels holding missing values, mixing strings with numbers (unsortable) or booleans with numbers
    other than the unlabelled marker -1 (``True`` and ``1`` would be one class)."""
    if values.dtype != object:
        return
    if any(v is None or (isinstance(v, (float, np.floating)) and v != v) for v in values) or _holds_pandas_na(values):
        raise ValueError(f"{input_name} contains missing values (NaN, None or pd.NA); {hint}")
    kinds = {"string" if isinstance(v, (str, bytes)) else type(v).__name__ for v in values}
    for kind, plural in (("string", "strings"), ("bool", "booleans")):  # True is 1 to np.unique: one class
        if kind == "bool" and all(v == -1 for v in values if type(v).__name__ != "bool"):
            continue  # booleans beside the unlabelled marker: nothing merges
        if kind in kinds and len(kinds) > 1:
            others = sorted(kinds - {kind})
            raise TypeError(
                f"{input_name} mixes {plural} with {', '.join(others)} values; use one type for every entry "
                f"(e.g. convert them all to str)."
            )


def _holds_pandas_na(values: np.ndarray) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and any(v is pandas.NA for v in values)


def _object_numbers(values: np.ndarray) -> np.ndarray:
    """Numbers in an object column (pandas) as numbers, which scikit-learn calls of unknown type: integers exactly
    (a float64 cast would merge classes beyond 2**53), also booleans and whole floats; float64 where one value is
    fractional (then refused as continuous).  Other columns as they are; integers beyond int64 refused."""
    if not all(isinstance(v, (Real, np.bool_)) for v in values):
        return values
    try:
        if all(isinstance(v, (Integral, np.bool_)) or float(v).is_integer() for v in values):
            return np.array([int(v) for v in values], dtype=np.int64)
        return values.astype(np.float64)
    except OverflowError:  # scikit-learn's own message dumped the array without saying why
        raise _beyond_int64_error() from None


def _beyond_int64_error() -> ValueError:
    return ValueError("y holds whole-number labels beyond the int64 range (|label| >= 2**63), which cannot be told "
                      "apart as numbers; encode the classes as smaller integers or as strings.")


def encode_labels(y, n_samples: int) -> np.ndarray:
    """Cluster labels as codes ``0..C-1``, with ``-1`` (unlabelled) kept as ``-1``."""
    check_not_masked_or_missing_labels(y, "y")
    y = column_or_1d(y, warn=True)
    if len(y) != n_samples:
        raise ValueError(f"y has {len(y)} entries but X has {n_samples} rows.")
    _check_label_values(y, "y", "use -1 to mark unlabelled rows.")
    if y.dtype == object and len(y):
        y = _object_numbers(y)
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinity; use -1 to mark unlabelled rows.")
    if y.dtype.kind == "f" and len(y) and np.abs(y).max() >= 2.0**63 and np.all(y == np.round(y)):
        raise _beyond_int64_error()  # else scikit-learn's cast warned and called the labels continuous
    kind = type_of_target(y, input_name="y", raise_unknown=True)
    if kind not in ("binary", "multiclass"):
        raise ValueError(
            f"y must hold discrete cluster labels (got a {kind!r} target); ABC learns which rows belong together."
        )
    codes = np.full(len(y), UNLABELLED, dtype=np.int64)
    labelled = ~_is_unlabelled(y)
    if labelled.any():
        _, codes[labelled] = np.unique(y[labelled], return_inverse=True)
    return codes


def check_not_masked_or_missing_labels(values, input_name: str) -> None:
    """Refuse a masked label array with masked entries (its mask would be ignored)."""
    if isinstance(values, np.ma.MaskedArray) and np.ma.getmaskarray(values).any():
        raise ValueError(
            f"{input_name} is a masked array with masked entries; their mask would be ignored. Give them a "
            f"real value first with {input_name}.filled(value) (in y, -1 marks unlabelled rows)."
        )


def _is_unlabelled(y: np.ndarray) -> np.ndarray:
    if y.dtype.kind in "iuf":
        return y == UNLABELLED
    # Labels read as text (a file, an object column): '-1' marks unlabelled rows there too, not a class.
    return np.isin(np.char.strip(y.astype(str)), ("-1", "-1.0"))


def encode_groups(groups, n_samples: int) -> np.ndarray | None:
    """Group ids as codes ``0..G-1`` (or None)."""
    if groups is None:
        return None
    check_not_masked_or_missing_labels(groups, "groups")
    if np.ndim(groups) != 1:
        raise ValueError(f"groups must be a 1-D array of one group id per row, got shape {np.shape(groups)}")
    groups = column_or_1d(groups)
    if len(groups) != n_samples:
        raise ValueError(f"groups has {len(groups)} entries but X has {n_samples} rows.")
    _check_label_values(groups, "groups", "give every row a group.")
    if groups.dtype.kind == "f" and not np.all(np.isfinite(groups)):
        raise ValueError("groups contains NaN or infinity.")
    return np.unique(groups, return_inverse=True)[1].astype(np.int64)


class KernelParamsMixin:
    """``set_params(kernel__...)`` while ``kernel=None``: a clear error, not ``'NoneType' has no set_params``.

    ``None`` stands for a default kernel that ``fit`` builds, so there is no object yet whose parameters could
    be set; scikit-learn's own message blames ``None``.
    """

    def set_params(self, **params):
        """Set the parameters of this estimator, as scikit-learn's ``set_params``.

        Parameters
        ----------
        **params : dict
            Estimator parameters; ``kernel__<name>`` sets a parameter of ``kernel`` (which must not be ``None``).

        Returns
        -------
        self : estimator instance

        Raises
        ------
        ValueError
            If a ``kernel__`` parameter is set while ``kernel`` is ``None``.
        """
        nested = sorted(name for name in params if name.startswith("kernel__"))
        if nested and params.get("kernel", getattr(self, "kernel", None)) is None:
            name, parts = type(self).__name__, nested[0].split("__")
            # The example must have the parameter named: kernel__kernel__x is a KernelEnsemble's kernel's.
            example = ("ContextualKernel()" if len(parts) == 2
                       else "KernelEnsemble(ContextualKernel())" if parts[1] == "kernel" else "...")
            raise ValueError(f"{name} cannot set {', '.join(nested)}: its kernel is None (the default is built in "
                             f"fit); give it a kernel first, e.g. {name}.set_params(kernel={example}, "
                             f"{nested[0]}=...)")
        return super().set_params(**params)
