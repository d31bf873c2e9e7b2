"""Tables whose clusters differ in a few of their columns: informative columns next to pure noise.

Every other family places its structure at a random orientation (:func:`~skabc.datasets.embed_in_dimensions`),
so each column carries a share of it.  Real tables are often built otherwise: a few measured columns tell
the groups apart and the others vary within every group alike, along the axes of the table, not across
them.  Standardising such a table, as the canonicalisation and most pipelines do, shrinks the clusters along
the columns that separate them and leaves them wide along the noise: flat slabs side by side.
:func:`make_informative_set` draws such tables.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from .._typing import Float, Int
from ._common import (
    _check_int,
    _check_noise_fraction,
    _check_output_size,
    _check_range,
    _check_real,
    _finish,
    _log_uniform,
    _size_weights,
    _split_counts,
    _split_noise,
)
from .blobs import _blob_points


def _informative_points(rng, counts, n_informative: int, n_features: int, stds, anisotropy: tuple[Float, Float],
                        min_separation: float, noise_scale: tuple[Float, Float]):
    """Blobs in ``n_informative`` columns, independent Gaussian columns beside them, the columns shuffled."""
    X, y = _blob_points(rng, counts, n_informative, stds, anisotropy, min_separation)
    n_noise = n_features - n_informative
    if n_noise:
        # Each noise column's spread is drawn around the informative columns' own (their total spread).
        reference = float(np.sqrt(X.var(axis=0).mean())) or 1.0
        spreads = reference * _log_uniform(rng, *noise_scale, n_noise)
        X = np.concatenate([X, rng.standard_normal((len(X), n_noise)) * spreads], axis=1)
    return X[:, rng.permutation(n_features)], y


def make_informative_set(
    n_samples: Int = 300,
    n_clusters: Int = 3,
    n_features: Int = 6,
    *,
    n_informative: Int = 2,
    cluster_std: Float | tuple[Float, Float] = (0.5, 1.5),
    anisotropy: Float | tuple[Float, Float] = (1.0, 3.0),
    min_separation: Float = 1.5,
    noise_scale: Float | tuple[Float, Float] = (0.5, 2.0),
    imbalance: Float = 0.5,
    noise_fraction: Float = 0.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One table whose clusters differ in ``n_informative`` of its ``n_features`` columns only.

    The informative columns hold Gaussian blobs drawn as :func:`~skabc.datasets.make_blobs_set` draws them
    (``cluster_std``, ``anisotropy``, ``min_separation``), the other columns independent Gaussian noise, the
    same for every cluster, each with a spread drawn log-uniformly from ``noise_scale`` times the informative
    columns' RMS spread.  The columns are shuffled and never rotated: the structure lies along the axes of
    the table, as measured features hold it.

    Parameters
    ----------
    n_samples : int, default=300
        Points in the set, background noise included.
    n_clusters : int, default=3
        Number of blobs; each gets at least one point.
    n_features : int, default=6
        Columns of the table, ``>= n_informative``.
    n_informative : int, default=2
        Columns that tell the clusters apart.
    cluster_std : float or (float, float), default=(0.5, 1.5)
        Spread of a cluster in the informative columns, or the range it is drawn from (log-uniformly).
    anisotropy : float or (float, float), default=(1.0, 3.0)
        Ratio of a cluster's largest to smallest axis spread in the informative columns, or its range.
    min_separation : float, default=1.5
        Least distance between two centres, in units of the sum of the two clusters' largest axis spreads.
    noise_scale : float or (float, float), default=(0.5, 2.0)
        Spread of a noise column relative to the informative columns' RMS spread, or its range.
    imbalance : float, default=0.5
        Standard deviation of the log cluster-size weights; ``0`` gives equal expected sizes.
    noise_fraction : float, default=0.0
        Share of the ``n_samples`` points that is uniform background noise, each noise point with its own label.
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
    >>> from skabc.datasets import make_informative_set
    >>> X, y = make_informative_set(120, n_clusters=2, n_features=4, n_informative=1, random_state=0)
    >>> X.shape, len(set(y))
    ((120, 4), 2)
    """
    n_samples = _check_int("n_samples", n_samples)
    n_clusters = _check_int("n_clusters", n_clusters)
    n_features = _check_int("n_features", n_features)
    _check_output_size(n_samples, n_features, "n_samples and n_features")
    n_informative = _check_int("n_informative", n_informative)
    if n_informative > n_features:
        raise ValueError(f"n_informative={n_informative} is more than the n_features={n_features} columns.")
    std_low, std_high = _check_range("cluster_std", cluster_std, 0.0, positive=True)
    anisotropy = _check_range("anisotropy", anisotropy, 1.0)
    noise_scale = _check_range("noise_scale", noise_scale, 0.0, positive=True)
    min_separation = _check_real("min_separation", min_separation)
    imbalance = _check_real("imbalance", imbalance)
    noise_fraction = _check_noise_fraction(noise_fraction)
    n_structure, n_noise = _split_noise(n_samples, noise_fraction, n_clusters, "n_clusters")
    rng = check_random_state(random_state)
    counts = _split_counts(rng, n_structure, _size_weights(rng, n_clusters, imbalance))
    stds = _log_uniform(rng, std_low, std_high, n_clusters)
    X, y = _informative_points(rng, counts, n_informative, n_features, stds, anisotropy, min_separation,
                               noise_scale)
    return _finish(rng, X, y, n_noise, n_features, 0.0)
