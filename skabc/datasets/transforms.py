"""Background noise, gross outliers, embedding into more dimensions and discretised columns, for any labelled set."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .._typing import Float, Int
from ._common import (
    MAX_LEVELS,
    _background,
    _check_int,
    _check_output_size,
    _check_range,
    _check_real,
    _discretize,
    _embed,
    _log_uniform,
    check_finite_points,
)


def _check_set(X) -> np.ndarray:
    """One finite, non-empty 2-D set as a float array (dense and real: a sparse or complex one is refused)."""
    if sp.issparse(X):
        raise TypeError("X must be a dense array: these transforms draw dense points; pass X.toarray().")
    if np.iscomplexobj(X):
        raise ValueError("X holds complex numbers; the transforms take real coordinates.")
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-D array, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinity.")
    return X


def _check_labelled_set(X, y) -> tuple[np.ndarray, np.ndarray]:
    """One finite, non-empty 2-D set and its integer labels, as arrays."""
    X = _check_set(X)
    y = np.asarray(y)
    if y.shape != (X.shape[0],) or y.dtype.kind not in "iu":
        raise ValueError(f"y must be {X.shape[0]} integer labels, got an array of shape {y.shape} and dtype {y.dtype}.")
    return X, y


def _with_singleton_labels(y: np.ndarray, n_new: int) -> np.ndarray:
    """``y`` as int64 followed by ``n_new`` labels of their own, ``max(y)+1, max(y)+2, ...`` (from a Python int: a
    uint8 max of 255 would wrap); labels that int64 cannot hold are refused, not wrapped to negative ids."""
    top = int(y.max()) + n_new
    if top > np.iinfo(np.int64).max:
        raise ValueError(f"y's largest label {int(y.max())} leaves no room in int64 for {n_new} more "
                         f"label{'' if n_new == 1 else 's'}; relabel y (e.g. np.unique(y, return_inverse=True)[1]).")
    return np.concatenate([y.astype(np.int64), int(y.max()) + 1 + np.arange(n_new, dtype=np.int64)])


def add_background_noise(X, y, fraction: Float = 0.1, *, margin: Float = 0.1,
                         random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Append uniform background noise points, each with its own label.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        One set.
    y : array-like of int of shape (n_samples,)
        Its cluster labels.
    fraction : float, default=0.1
        Share of the *returned* points that is noise, in ``[0, 1)``:
        ``round(fraction * n_samples / (1 - fraction))`` points are added.
    margin : float, default=0.1
        The noise is uniform in the bounding box of ``X`` widened on every
        side by this share of its extent (a constant column stays constant).
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples + n_noise, n_features)
        ``X`` followed by the noise points.
    y : ndarray of shape (n_samples + n_noise,)
        ``y`` followed by the noise labels ``max(y)+1, max(y)+2, ...``: every
        noise point is a singleton cluster, since noise belongs with nothing
        (see the module documentation).
    """
    X, y = _check_labelled_set(X, y)
    fraction = _check_real("fraction", fraction, 0.0, 1.0, open_max=True)
    margin = _check_real("margin", margin)
    rng = check_random_state(random_state)
    n_noise = round(fraction * len(X) / (1 - fraction))
    _check_output_size(len(X) + n_noise, X.shape[1], "X and fraction")
    noise = _background(rng, X, n_noise, margin)
    check_finite_points(noise)
    return np.concatenate([X, noise]), _with_singleton_labels(y, n_noise)


def add_outliers(X, y, fraction: Float = 0.01, *, distance: Float | tuple[Float, Float] = (10.0, 1e4),
                 random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Append gross outliers, far from the set in random directions, each with its own label.

    Tables hold a few values no cluster explains (a typo, a unit mix-up, a
    sensor glitch).  Each outlier lies at ``mean + u * r * t``: ``u`` a random
    unit vector, ``r`` the set's root-mean-square radius about its mean, and
    ``t`` drawn log-uniformly from ``distance``.  Unlike
    :func:`add_background_noise`, which fills the set's own bounding box,
    these land far outside it.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        One set.
    y : array-like of int of shape (n_samples,)
        Its cluster labels.
    fraction : float, default=0.01
        Share of the *returned* points that are outliers, in ``[0, 1)``; at
        least one outlier when ``fraction > 0``.
    distance : float or (float, float), default=(10.0, 1e4)
        Distance from the mean in RMS radii, or the range it is drawn from
        (log-uniformly), per outlier; positive.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples + n_outliers, n_features)
        ``X`` followed by the outliers.
    y : ndarray of shape (n_samples + n_outliers,)
        ``y`` followed by the labels ``max(y)+1, max(y)+2, ...``: every
        outlier is a singleton cluster.

    Examples
    --------
    >>> import numpy as np
    >>> from skabc.datasets import add_outliers
    >>> X, y = np.random.default_rng(0).normal(size=(99, 2)), np.zeros(99, dtype=int)
    >>> X_out, y_out = add_outliers(X, y, fraction=0.01, distance=100.0, random_state=0)
    >>> X_out.shape, int(y_out[-1])
    ((100, 2), 1)
    """
    X, y = _check_labelled_set(X, y)
    fraction = _check_real("fraction", fraction, 0.0, 1.0, open_max=True)
    low, high = _check_range("distance", distance, 0.0, positive=True)
    rng = check_random_state(random_state)
    n_outliers = max(1, round(fraction * len(X) / (1 - fraction))) if fraction > 0 else 0
    _check_output_size(len(X) + n_outliers, X.shape[1], "X and fraction")
    centre = X.mean(axis=0)
    radius = np.sqrt(np.mean(np.sum((X - centre) ** 2, axis=1)))
    directions = rng.normal(size=(n_outliers, X.shape[1]))
    directions /= np.maximum(np.linalg.norm(directions, axis=1, keepdims=True), np.finfo(float).tiny)
    reach = _log_uniform(rng, low, high, size=(n_outliers, 1))
    # A constant set has no radius: its outliers lie the given number of units away.
    outliers = centre + directions * reach * (radius if radius > 0 else 1.0)
    check_finite_points(outliers)  # a set near 1e154 or a distance near 1e308 overflows: never inf rows
    return np.concatenate([X, outliers]), _with_singleton_labels(y, n_outliers)


def embed_in_dimensions(X, n_features: Int, *, noise_std: Float = 0.0, random_state=None) -> np.ndarray:
    """Place a low-dimensional set into ``n_features`` dimensions at a random orientation.

    The columns of ``X`` are mapped onto a random orthonormal basis of a
    ``d0``-dimensional subspace of ``R^n_features`` (distances are kept), and
    isotropic Gaussian noise is added in the ``n_features - d0`` directions
    orthogonal to it.

    Parameters
    ----------
    X : array-like of shape (n_samples, d0)
        The set.
    n_features : int
        Target dimension, ``>= d0``.  With ``n_features == d0`` this is a
        random rotation (and reflection) of ``X``.
    noise_std : float, default=0.0
        Standard deviation of the noise in every orthogonal direction, in the
        units of ``X``.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X_embedded : ndarray of shape (n_samples, n_features)
    """
    X = _check_set(X)
    n_features = _check_int("n_features", n_features)
    _check_output_size(len(X), n_features, "X and n_features")
    if n_features < X.shape[1]:
        raise ValueError(f"n_features={n_features} is smaller than the {X.shape[1]} columns of X.")
    noise_std = _check_real("noise_std", noise_std)
    return _embed(check_random_state(random_state), X, n_features, noise_std)


# --------------------------------------------------------------------------- the mixture


def discretize_columns(X, fraction: Float = 0.3, *, levels: Int | tuple[Int, Int] = (2, 10),
                       random_state=None) -> np.ndarray:
    """Round a random share of the columns to a few levels, as counts, ratings and categories are.

    Each chosen column is cut at the quantiles of a random number of levels
    (drawn from ``levels``) and replaced by the level index, rescaled to the
    column's original standard deviation: the values tables hold when a
    measurement is coarse or ordinal, where many points tie exactly.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The set.
    fraction : float, default=0.3
        Share of the columns discretised (rounded to the nearest column count;
        at least one when ``fraction > 0``).
    levels : int or (int, int), default=(2, 10)
        Number of distinct values of a discretised column, or the range it is
        drawn from per column; at least 2, at most 2**24.  A column where one value holds most
        rows gets fewer (its quantiles coincide), but two at least, unless it is
        constant.  The column's mean becomes 0, its standard deviation is kept.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X_discretized : ndarray of shape (n_samples, n_features)

    Examples
    --------
    >>> import numpy as np
    >>> from skabc.datasets import discretize_columns
    >>> X = np.random.default_rng(0).normal(size=(100, 4))
    >>> Xd = discretize_columns(X, fraction=0.5, levels=3, random_state=0)
    >>> sorted(len(np.unique(column)) for column in Xd.T)
    [3, 3, 100, 100]
    """
    X = _check_set(X)  # _discretize writes into a copy
    fraction = _check_real("fraction", fraction, 0.0, 1.0)
    levels = _check_range("levels", levels, 2, integer=True)
    if levels[1] > MAX_LEVELS:
        raise ValueError(f"levels must be at most {MAX_LEVELS:,}, got {levels!r}.")
    return _discretize(check_random_state(random_state), X, fraction, levels)

