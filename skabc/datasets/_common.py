"""Shared parameter checks and random helpers of the synthetic set generators."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from .._typing import Float, Int


def _finite(value) -> bool:
    """Whether a ``numbers.Real`` is finite: a Fraction too (``np.isfinite`` refuses it), and an int past float's
    range is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _check_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _check_real(name: str, value, minimum: float = 0.0, maximum: float = np.inf, *, open_max: bool = False) -> float:
    ok = isinstance(value, Real) and not isinstance(value, bool) and _finite(value) and value >= minimum
    ok = ok and (value < maximum if open_max else value <= maximum)
    if not ok:
        bound = f"< {maximum}" if open_max else f"<= {maximum}"
        upper = "" if maximum == np.inf else f" and {bound}"
        raise ValueError(f"{name} must be a finite number >= {minimum}{upper}, got {value!r}.")
    return float(value)


def _check_positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not _finite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}.")
    return float(value)


def _check_range(name: str, value, minimum: float, *, integer: bool = False, positive: bool = False,
                 count: bool = False) -> tuple:
    """A number, or a ``(low, high)`` pair with ``minimum <= low <= high``; a ``count`` (of rows, features or
    clusters, drawn from the range by numpy as an int64) at most ``2**62``.  Whether the counts drawn fit the output
    limit is judged on the sets drawn (:func:`_check_output_size`), not on the largest the range allows."""
    given = value.tolist() if isinstance(value, np.ndarray) and value.ndim <= 1 else value  # np.array([lo, hi])
    pair = (given, given) if np.isscalar(given) else tuple(given) if isinstance(given, (tuple, list)) else None
    kind = "an integer" if integer else "a number"
    if pair is None or len(pair) != 2:
        raise ValueError(f"{name} must be {kind} or a (low, high) pair, got {value!r}.")
    check = _check_int if integer else _check_real
    low, high = (check(name, v, minimum) for v in pair)
    if positive and low <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}.")
    if high < low:
        raise ValueError(f"{name} must satisfy low <= high, got {value!r}.")
    if count and high > MAX_COUNT:
        raise ValueError(f"{name} must be at most 2**62 (numpy draws counts as int64), got {value!r}.")
    return low, high


#: Most values a generator or transform returns (8 GiB of float64): a larger request is refused, by its parameters,
#: before its points are drawn (counts of 10**12 asked numpy for terabytes).
MAX_VALUES = 2**30
#: Largest upper end of a count range: numpy draws ``randint(low, high + 1)`` as int64.
MAX_COUNT = 2**62
#: Most levels of a discretised column (its quantile edges are listed: 10**12 asked numpy for terabytes).
MAX_LEVELS = 2**24


def _check_output_size(rows: int, columns: int, what: str) -> None:
    """Refuse an output of more than :data:`MAX_VALUES` values, naming the parameters ``what`` that ask for it."""
    if rows * columns > MAX_VALUES:
        raise ValueError(f"{what} ask for {rows:,} x {columns:,} values, more than the {MAX_VALUES:,} a generator "
                         "returns; ask for fewer.")


def _check_noise_fraction(value) -> float:
    return _check_real("noise_fraction", value, 0.0, 1.0, open_max=True)


def _split_noise(n_samples: int, noise_fraction: float, n_structure_min: int, name: str) -> tuple[int, int]:
    """Points of structure and of background noise in a set of ``n_samples``."""
    n_noise = round(noise_fraction * n_samples)
    if n_samples - n_noise < n_structure_min:
        raise ValueError(
            f"n_samples={n_samples} with noise_fraction={noise_fraction} leaves {n_samples - n_noise} points "
            f"of structure, fewer than {name}={n_structure_min} (every cluster needs a point)."
        )
    return n_samples - n_noise, n_noise


# --------------------------------------------------------------------------- drawing helpers


def _log_uniform(rng, low: Float, high: Float, size=None):
    return np.exp(rng.uniform(np.log(low), np.log(high), size))


#: Largest log weight whose exp (with ``k`` of them summed) stays finite in float64.
_LARGEST_LOG = 700.0


def _size_weights(rng, k: int, imbalance: float) -> np.ndarray:
    """Log-normal cluster-size weights; ``imbalance=0`` gives equal expected sizes."""
    draws = rng.standard_normal(k)
    with np.errstate(over="ignore", invalid="ignore"):
        logs = imbalance * draws
        if not np.all(np.isfinite(logs)):  # an imbalance near 1e308: the largest weight 1, the others ~0 (never NaN)
            logs = imbalance * (draws - draws.max())
        elif logs.max() > _LARGEST_LOG:  # exp would overflow to inf (and inf / inf to NaN): scale (only then)
            logs = logs - logs.max()
        return np.exp(logs)


def _split_counts(rng, n: int, weights: np.ndarray) -> np.ndarray:
    """``len(weights)`` counts >= 1 summing to ``n``, the rest spread in proportion to the weights."""
    return rng.multinomial(n - len(weights), _normalised(weights)) + 1


def _normalised(weights: np.ndarray) -> np.ndarray:
    """Non-negative finite ``weights`` (a positive sum) divided by their sum."""
    with np.errstate(over="ignore"):
        total = weights.sum()
    if not np.isfinite(total):  # finite weights near 1e308 overflow their sum: rescale (only then)
        weights = weights / weights.max()
    return weights / weights.sum()


def _random_rotation(rng, d: int) -> np.ndarray:
    """Uniformly random orthogonal ``d x d`` matrix."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def _disc(rng, radius: float, k: int) -> np.ndarray:
    """``k`` points uniform in a disc."""
    rho = radius * np.sqrt(rng.uniform(0, 1, k))
    phi = rng.uniform(0, 2 * np.pi, k)
    return np.column_stack([rho * np.cos(phi), rho * np.sin(phi)])


def _rotate2d(rng, X: np.ndarray) -> np.ndarray:
    a = rng.uniform(0, 2 * np.pi)
    c, s = np.cos(a), np.sin(a)
    return X @ np.array([[c, s], [-s, c]])


def _background(rng, X: np.ndarray, n_noise: int, margin: float) -> np.ndarray:
    """``n_noise`` points uniform in the bounding box of ``X`` widened by ``margin`` of its extent."""
    low, high = X.min(axis=0), X.max(axis=0)
    pad = margin * (high - low)
    return rng.uniform(0, 1, (n_noise, X.shape[1])) * (high - low + 2 * pad) + (low - pad)


def _embed(rng, X: np.ndarray, n_features: int, noise_std: float) -> np.ndarray:
    d0 = X.shape[1]
    q, r = np.linalg.qr(rng.standard_normal((n_features, d0)))
    basis = q * np.sign(np.diag(r))  # (n_features, d0), orthonormal columns
    out = X @ basis.T
    if noise_std > 0 and n_features > d0:
        noise = rng.normal(0.0, noise_std, out.shape)
        out += noise - (noise @ basis) @ basis.T  # only in the directions orthogonal to the structure
    return out


def _finish(rng, X, y, n_noise: int, n_features: int, embed_noise: float, margin: float = 0.1):
    """Add singleton-labelled background noise, embed into ``n_features`` dimensions, shuffle."""
    if n_noise:
        # A structure of one distinct point (two-point sets) spans no box: the noise would be copies of it.
        box = X if np.ptp(X, axis=0).any() else np.concatenate([X - 0.5, X + 0.5])
        X = np.concatenate([X, _background(rng, box, n_noise, margin)])
        y = np.concatenate([y, y.max() + 1 + np.arange(n_noise)])
    if n_features > X.shape[1]:
        X = _embed(rng, X, n_features, embed_noise)
    check_finite_points(X)
    order = rng.permutation(len(X))
    return X[order], y[order].astype(np.int64)


def check_finite_points(X: np.ndarray) -> None:
    """Refuse drawn points that overflowed float64 (a spread, noise or margin near 1e308), by the cause."""
    if not np.all(np.isfinite(X)):
        raise overflow_error()


def overflow_error() -> ValueError:
    """The error of drawn points that overflowed float64."""
    return ValueError("the drawn points are not finite: a spread, noise, margin or scale parameter overflows float64; "
                      "use values of an ordinary scale.")


def _discretize(rng, X: np.ndarray, fraction: float, levels: tuple[Int, Int]) -> np.ndarray:
    """``X`` with ``round(fraction * d)`` random columns cut at quantiles into few levels (see the public doc)."""
    d = X.shape[1]
    chosen = 0 if fraction == 0 else max(1, round(fraction * d))
    X = X.copy()
    for column in rng.choice(d, size=chosen, replace=False):
        values = X[:, column]
        count = int(rng.randint(levels[0], levels[1] + 1))
        edges = np.quantile(values, np.linspace(0, 1, count + 1)[1:-1])
        codes = np.searchsorted(edges, values, side="right").astype(float)
        if codes.std() == 0:
            # Every edge on the value most rows hold, the smallest: the values equal to it form the lower level.
            codes = np.searchsorted(edges, values, side="left").astype(float)
        spread = codes.std()
        X[:, column] = (codes - codes.mean()) * (values.std() / spread if spread > 0 else 0.0)
    check_finite_points(X)  # a column near 1e154 overflows its standard deviation: never NaN columns
    return X


# --------------------------------------------------------------------------- public generators

