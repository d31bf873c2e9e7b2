"""Blob sets: Gaussian or Student-t clusters of varied size, spread and anisotropy."""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from .._typing import Float, Int
from ._common import (
    _check_int,
    _check_noise_fraction,
    _check_output_size,
    _check_positive,
    _check_range,
    _check_real,
    _finish,
    _log_uniform,
    _random_rotation,
    _size_weights,
    _split_counts,
    _split_noise,
)

#: Most 10% widenings of the box a centre may need (1.1**1000 is about 1e41): where the separations overflow
#: float64 no candidate ever fits, and the search would never end.
_MAX_WIDENINGS = 1000
#: Fewest degrees of freedom of Student-t blobs: below about 0.03 some chi-square draws underflow to 0.
MIN_TAIL_DF = 0.1


def _place_centers(rng, radius: np.ndarray, d: int, min_separation: float, box=None, spacing: float = 1.0):
    """Centres with ``||c_i - c_j|| >= min_separation * (radius_i + radius_j)``.

    Drawn one by one uniformly in a box (by default one sized for the clusters
    to fit, times ``spacing``); a centre that finds no room in 32 tries widens
    its box by 10%.
    """
    k = len(radius)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is refused below, by name
        if box is None:
            half = np.full(d, spacing * 1.5 * max(min_separation, 0.5) * radius.mean() * k ** (1 / d))
            mid = np.zeros(d)
        else:
            mid, half = (box[1] + box[0]) / 2, np.maximum((box[1] - box[0]) / 2, 1e-12)
        finite = bool(np.all(np.isfinite(half)) and np.all(np.isfinite(mid)) and np.all(np.isfinite(radius))
                      and np.isfinite(min_separation * 2 * radius.max()))
    if not finite:
        raise ValueError("cannot place the cluster centres: the spreads, min_separation or spacing overflow float64 "
                         f"(largest spread {radius.max():.3g}, min_separation {min_separation!r}).")
    centers = np.empty((k, d))
    for i in range(k):
        grow = 1.0
        for _ in range(_MAX_WIDENINGS):
            cand = mid + half * grow * rng.uniform(-1, 1, (32, d))
            if i == 0 or min_separation == 0:
                centers[i] = cand[0]
                break
            # Offsets in units of the two spreads before squaring: spreads of 1e-200 or 1e200 square to 0 or inf.
            with np.errstate(over="ignore", under="ignore"):
                offsets = (cand[:, None, :] - centers[None, :i, :]) / (radius[i] + radius[:i])[None, :, None]
                ratio = np.sqrt((offsets**2).sum(-1)).min(axis=1)
            ok = np.flatnonzero(ratio >= min_separation)
            if ok.size:
                centers[i] = cand[ok[0]]
                break
            grow *= 1.1
        else:
            raise ValueError(f"cannot place {k} cluster centres min_separation={min_separation!r} apart in "
                             f"{_MAX_WIDENINGS} widenings of the box (the spreads or min_separation overflow it).")
    return centers


def _blob_points(rng, counts, d: int, stds, anisotropy: tuple[Float, Float], min_separation: float, box=None,
                 spacing: float = 1.0, tail_df: float | None = None):
    """Gaussian blobs: per cluster a random rotation of axis spreads whose largest/smallest ratio is drawn
    log-uniformly from the ``anisotropy`` range; the spreads' geometric mean is the cluster's ``std``.
    With ``tail_df``, every point's offset is scaled by ``sqrt(df / chi2_df)``: Student-t blobs."""
    k = len(counts)
    ratio = _log_uniform(rng, *anisotropy, k)
    logs = rng.uniform(-0.5, 0.5, (k, d))
    if d > 1:
        logs[:, :2] = [-0.5, 0.5]  # the extremes, so the ratio is exact
        logs -= logs.mean(axis=1, keepdims=True)
    axes = stds[:, None] * np.exp(logs * np.log(ratio)[:, None])
    centers = _place_centers(rng, axes.max(axis=1), d, min_separation, box, spacing)
    parts = []
    for c in range(k):
        z = rng.standard_normal((counts[c], d)) * axes[c]
        if tail_df is not None:
            z *= np.sqrt(tail_df / rng.chisquare(tail_df, (counts[c], 1)))
        if d > 1 and ratio[c] > 1:
            z = z @ _random_rotation(rng, d)
        parts.append(z + centers[c])
    return np.concatenate(parts), np.repeat(np.arange(k), counts)



def make_blobs_set(
    n_samples: Int = 200,
    n_clusters: Int = 3,
    n_features: Int = 2,
    *,
    cluster_std: Float | tuple[Float, Float] = (0.5, 1.5),
    anisotropy: Float | tuple[Float, Float] = (1.0, 3.0),
    weights=None,
    imbalance: Float = 0.5,
    min_separation: Float = 1.0,
    spacing: Float = 1.0,
    tail_df: Float | None = None,
    noise_fraction: Float = 0.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One set of Gaussian (or Student-t) blobs of unequal sizes, spreads and shapes.

    Every cluster gets an overall spread ``s`` drawn log-uniformly from
    ``cluster_std``, axis spreads ``s * a_j`` (geometric mean ``s``) whose
    largest/smallest ratio is drawn log-uniformly from ``anisotropy``, and a
    random rotation: a random linear transform per cluster.  Centres are drawn one by one so that any
    two satisfy ``||c_i - c_j|| >= min_separation * (r_i + r_j)``, with
    ``r`` a cluster's largest axis spread, in a box sized for the clusters
    to fit, ``spacing`` times wider: at large ``spacing`` some groups lie far
    apart while others stay close, as in loosely spread data.

    Parameters
    ----------
    n_samples : int, default=200
        Points in the set, background noise included.
    n_clusters : int, default=3
        Number of blobs; each gets at least one point.
    n_features : int, default=2
        Dimension of the points.
    cluster_std : float or (float, float), default=(0.5, 1.5)
        Spread of a cluster, or the range it is drawn from (log-uniformly):
        a wide range gives clusters of very different densities.
    anisotropy : float or (float, float), default=(1.0, 3.0)
        Ratio of a cluster's largest to smallest axis spread (``1``: round),
        or the range it is drawn from per cluster (log-uniformly).  In one
        dimension a cluster has one spread: the ratio scales it by a
        factor drawn between ``ratio ** -0.5`` and ``ratio ** 0.5``.
    weights : array-like of shape (n_clusters,), default=None
        Relative cluster sizes.  ``None`` draws them log-normally with
        spread ``imbalance``.
    imbalance : float, default=0.5
        Standard deviation of the log cluster-size weights when ``weights``
        is None; ``0`` gives equal expected sizes.
    min_separation : float, default=1.0
        Least distance between two centres, in units of the sum of the two
        clusters' largest axis spreads; ``0`` places centres freely.
    spacing : float, default=1.0
        Width of the box the centres are drawn in, relative to one that just
        fits the clusters; values above 1 leave empty space between them.
    tail_df : float, default=None
        Degrees of freedom of Student-t blobs: every point's offset from its
        centre is scaled by ``sqrt(tail_df / chi2)``, giving heavy tails
        (outlying points that still belong to their cluster), heavier for
        smaller values; at least ``MIN_TAIL_DF`` (0.1).  ``None``: Gaussian blobs.
    noise_fraction : float, default=0.0
        Share of the ``n_samples`` points that is uniform background noise,
        each noise point with its own label (see the module documentation).
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The points, shuffled.
    y : ndarray of shape (n_samples,)
        Blob labels ``0..n_clusters-1``; noise points ``n_clusters, n_clusters+1, ...``.

    Examples
    --------
    >>> from skabc.datasets import make_blobs_set
    >>> X, y = make_blobs_set(100, n_clusters=4, n_features=5, random_state=0)
    >>> X.shape, len(set(y))
    ((100, 5), 4)
    """
    n_samples = _check_int("n_samples", n_samples)
    n_clusters = _check_int("n_clusters", n_clusters)
    n_features = _check_int("n_features", n_features)
    _check_output_size(n_samples, n_features, "n_samples and n_features")
    std_low, std_high = _check_range("cluster_std", cluster_std, 0.0, positive=True)
    anisotropy = _check_range("anisotropy", anisotropy, 1.0)
    imbalance = _check_real("imbalance", imbalance)
    min_separation = _check_real("min_separation", min_separation)
    spacing = _check_positive("spacing", spacing)
    if tail_df is not None:
        tail_df = _check_positive("tail_df", tail_df)
        if tail_df < MIN_TAIL_DF:
            raise ValueError(f"tail_df={tail_df!r} is below {MIN_TAIL_DF}: the chi-square draws of so few degrees of "
                             "freedom underflow to 0 and put points at infinity.")
    noise_fraction = _check_noise_fraction(noise_fraction)
    if weights is not None:
        try:
            weights = np.asarray(weights, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"weights must be {n_clusters} positive finite numbers, one per cluster, "
                             f"got {weights!r}.") from None
        if weights.shape != (n_clusters,) or not np.all(np.isfinite(weights)) or np.any(weights <= 0):
            raise ValueError(f"weights must be {n_clusters} positive finite numbers, one per cluster, got {weights!r}.")
    n_structure, n_noise = _split_noise(n_samples, noise_fraction, n_clusters, "n_clusters")
    rng = check_random_state(random_state)
    if weights is None:
        weights = _size_weights(rng, n_clusters, imbalance)
    counts = _split_counts(rng, n_structure, weights)
    stds = _log_uniform(rng, std_low, std_high, n_clusters)
    X, y = _blob_points(rng, counts, n_features, stds, anisotropy, min_separation, spacing=spacing, tail_df=tail_df)
    return _finish(rng, X, y, n_noise, n_features, 0.0)


