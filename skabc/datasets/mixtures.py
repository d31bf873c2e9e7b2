"""Sets closer to real tables: clusters in their own subspaces, and mixtures under invertible warps.

The other families put all structure in at most 16 dimensions.  Real data such
as images or wide tables hold it differently: each class varies along a few
directions of its own, spread over many dimensions, and classes overlap in
every projection onto a few principal axes while staying apart for their
nearest neighbours.  :func:`make_subspace_set` draws such sets; :func:`make_warped_set`
bends Gaussian mixtures by a random invertible residual network (clusters keep
their identity and connectivity but lose their ellipsoidal shape), an idea of
the ZEUS prior (Marszalek et al., 2025).
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
    overflow_error,
)
from .blobs import _blob_points

#: Most residual layers of :func:`make_warped_set` (each costs a pass over the set: 10**9 ran for hours).
MAX_LAYERS = 1000


def _set_counts(n_samples, n_clusters, imbalance, noise_fraction, random_state):
    """The shared draws of a mixture set: its generator, cluster sizes and number of noise points."""
    imbalance = _check_real("imbalance", imbalance)
    noise_fraction = _check_noise_fraction(noise_fraction)
    n_structure, n_noise = _split_noise(n_samples, noise_fraction, n_clusters, "n_clusters")
    rng = check_random_state(random_state)
    return rng, _split_counts(rng, n_structure, _size_weights(rng, n_clusters, imbalance)), n_noise


def _orthonormal(rng, rows: int, columns: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((rows, columns)))
    return q * np.sign(np.diag(r))


def _subspace_points(rng, counts, d: int, dims: tuple[int, int], separation: float, ambient_noise: float):
    """Clusters ``mean_c + U_c (s_c * z) + ambient_noise * e``: a random ``r_c``-dim subspace each."""
    k = len(counts)
    parts, labels, radii = [], [], []
    for c, count in enumerate(counts):
        r = int(rng.randint(dims[0], dims[1] + 1))
        basis = _orthonormal(rng, d, r)
        spreads = _log_uniform(rng, 0.3, 1.0, r)
        parts.append((rng.standard_normal((count, r)) * spreads) @ basis.T
                     + ambient_noise * rng.standard_normal((count, d)))
        labels.append(np.full(count, c))
        with np.errstate(over="ignore"):  # an absurd ambient_noise gives inf here, refused with the points below
            radii.append(np.sqrt(np.sum(spreads**2) + d * np.float64(ambient_noise) ** 2))
    # Centres ~ N(0, tau^2 I): expected distance between two is tau sqrt(2d), ``separation`` mean radii.
    tau = separation * float(np.mean(radii)) / np.sqrt(2.0 * d)
    centres = tau * rng.standard_normal((k, d))
    X = np.concatenate([part + centres[c] for c, part in enumerate(parts)])
    return X, np.concatenate(labels)


def make_subspace_set(
    n_samples: Int = 300,
    n_clusters: Int = 5,
    n_features: Int = 32,
    *,
    subspace_dim: Int | tuple[Int, Int] = (1, 6),
    separation: Float = 1.5,
    ambient_noise: Float = 0.1,
    imbalance: Float = 0.5,
    noise_fraction: Float = 0.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One set of clusters that each vary along a random low-dimensional subspace of their own.

    Cluster ``c`` draws a dimension ``r_c`` from ``subspace_dim``, a random
    orthonormal basis ``U_c`` of ``r_c`` directions in ``n_features``
    dimensions and spreads ``s`` log-uniform in ``[0.3, 1]`` along them; its
    points are ``mu_c + U_c (s * z) + ambient_noise * e`` with ``z, e``
    standard normal.  Centres are Gaussian, scaled so that the expected
    distance between two is ``separation`` times the clusters' mean RMS radius:
    around 1, clusters overlap in distance yet stay apart for nearest
    neighbours (their subspaces differ), as classes of images do.

    Parameters
    ----------
    n_samples : int, default=300
        Points in the set, background noise included.
    n_clusters : int, default=5
        Number of clusters; each gets at least one point.
    n_features : int, default=32
        Dimension of the points.
    subspace_dim : int or (int, int), default=(1, 6)
        Dimension of a cluster's subspace, or the range it is drawn from
        (uniformly per cluster); its upper end is capped at ``n_features``.
    separation : float, default=1.5
        Expected distance between two centres in units of the mean cluster
        radius; ``0`` puts every centre at the origin.
    ambient_noise : float, default=0.1
        Standard deviation of the isotropic noise in all ``n_features``
        directions (the subspace spreads are 0.3 to 1).
    imbalance : float, default=0.5
        Standard deviation of the log cluster-size weights (``0``: equal).
    noise_fraction : float, default=0.0
        Share of the points that is uniform background noise, each noise point
        with its own label.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The points, shuffled.
    y : ndarray of shape (n_samples,)
        Cluster labels ``0..n_clusters-1``; noise points ``n_clusters, n_clusters+1, ...``.

    Examples
    --------
    >>> from skabc.datasets import make_subspace_set
    >>> X, y = make_subspace_set(200, n_clusters=4, n_features=40, random_state=0)
    >>> X.shape, len(set(y))
    ((200, 40), 4)
    """
    n_samples = _check_int("n_samples", n_samples)
    n_clusters = _check_int("n_clusters", n_clusters)
    n_features = _check_int("n_features", n_features)
    _check_output_size(n_samples, n_features, "n_samples and n_features")
    dims = _check_range("subspace_dim", subspace_dim, 1, integer=True)
    if dims[0] > n_features:
        raise ValueError(f"subspace_dim must be at most n_features={n_features}, got {subspace_dim!r}.")
    dims = (dims[0], min(dims[1], n_features))
    separation = _check_real("separation", separation)
    ambient_noise = _check_real("ambient_noise", ambient_noise)
    rng, counts, n_noise = _set_counts(n_samples, n_clusters, imbalance, noise_fraction, random_state)
    X, y = _subspace_points(rng, counts, n_features, dims, separation, ambient_noise)
    return _finish(rng, X, y, n_noise, n_features, 0.0)


def _warp(rng, X: np.ndarray, strength: float) -> np.ndarray:
    """One random residual layer ``x + g(x)``, ``Lip(g) = strength < 1``: an invertible bending map."""
    d = X.shape[1]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        variance = float(X.var(axis=0).sum())
        scale = float(np.sqrt(variance))
        # The variance overflowed, or under- or nearly underflowed (a subnormal keeps few digits): at unit scale.
        if not np.isfinite(variance) or variance < np.finfo(np.float64).tiny:
            centred = X - X.mean(axis=0)
            peak = float(np.abs(centred).max())
            if not np.isfinite(peak):  # points near float64's largest: their mean or offsets overflow
                raise overflow_error()
            scale = peak * float(np.sqrt((centred / peak).var(axis=0).sum())) if peak > 0 else 1.0
    hidden = int(rng.randint(8, 33))
    # Input weights at the data's scale, so the tanh bends within the set rather than far outside it.
    W = rng.standard_normal((hidden, d)) * (_log_uniform(rng, 0.5, 3.0) / scale)
    b = rng.uniform(-1.0, 1.0, hidden) * np.sqrt(d)
    V = rng.standard_normal((d, hidden))
    gain = strength / (np.linalg.norm(W, 2) * np.linalg.norm(V, 2))
    return X + gain * np.tanh(X @ W.T + b) @ V.T


def make_warped_set(
    n_samples: Int = 300,
    n_clusters: Int = 3,
    n_features: Int = 2,
    *,
    n_layers: Int | tuple[Int, Int] = (1, 4),
    strength: Float | tuple[Float, Float] = (0.5, 0.95),
    cluster_std: Float | tuple[Float, Float] = (0.5, 1.5),
    min_separation: Float = 1.0,
    imbalance: Float = 0.5,
    noise_fraction: Float = 0.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One set of Gaussian blobs bent by a random invertible residual network.

    Blobs as :func:`~skabc.datasets.make_blobs_set` draws them (spreads from
    ``cluster_std``, anisotropy 1-3, centres at least ``min_separation``
    apart), then ``n_layers`` residual layers ``x <- x + g(x)`` with ``g`` a
    random one-hidden-layer tanh network whose Lipschitz constant is
    ``strength``: below 1, so each layer is invertible and a cluster stays one
    connected piece, while its shape becomes curved and uneven.

    Parameters
    ----------
    n_samples : int, default=300
        Points in the set, background noise included.
    n_clusters : int, default=3
        Number of blobs; each gets at least one point.
    n_features : int, default=2
        Dimension of the points.
    n_layers : int or (int, int), default=(1, 4)
        Number of residual layers, or the range it is drawn from; at most 1,000.
    strength : float or (float, float), default=(0.5, 0.95)
        Lipschitz constant of each layer's residual, in ``[0, 1)``, or the
        range it is drawn from per layer.
    cluster_std : float or (float, float), default=(0.5, 1.5)
        Spread of a blob, or the range it is drawn from (log-uniformly).
    min_separation : float, default=1.0
        Least distance between two centres before the warp, in units of the
        sum of the two blobs' largest axis spreads.
    imbalance : float, default=0.5
        Standard deviation of the log cluster-size weights (``0``: equal).
    noise_fraction : float, default=0.0
        Share of the points that is uniform background noise (added after the
        warp), each noise point with its own label.
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
    >>> from skabc.datasets import make_warped_set
    >>> X, y = make_warped_set(150, n_clusters=3, n_features=2, random_state=0)
    >>> X.shape, len(set(y))
    ((150, 2), 3)
    """
    n_samples = _check_int("n_samples", n_samples)
    n_clusters = _check_int("n_clusters", n_clusters)
    n_features = _check_int("n_features", n_features)
    _check_output_size(n_samples, n_features, "n_samples and n_features")
    layers = _check_range("n_layers", n_layers, 0, integer=True)
    if layers[1] > MAX_LAYERS:
        raise ValueError(f"n_layers must be at most {MAX_LAYERS}, got {n_layers!r}.")
    strengths = _check_range("strength", strength, 0.0)
    if strengths[1] >= 1:
        raise ValueError(f"strength must be below 1 (an invertible layer), got {strength!r}.")
    std_low, std_high = _check_range("cluster_std", cluster_std, 0.0, positive=True)
    min_separation = _check_real("min_separation", min_separation)
    rng, counts, n_noise = _set_counts(n_samples, n_clusters, imbalance, noise_fraction, random_state)
    X, y = _warped_points(rng, counts, n_features, (std_low, std_high), min_separation, layers, strengths)
    return _finish(rng, X, y, n_noise, n_features, 0.0)


def _warped_points(rng, counts, d: int, std_range, min_separation: float, layers, strengths):
    stds = _log_uniform(rng, std_range[0], std_range[1], len(counts)) if std_range[1] > std_range[0] \
        else np.full(len(counts), std_range[0])
    X, y = _blob_points(rng, counts, d, stds, (1.0, 3.0), min_separation)
    for _ in range(int(rng.randint(layers[0], layers[1] + 1))):
        X = _warp(rng, X, rng.uniform(*strengths) if strengths[1] > strengths[0] else strengths[0])
    return X, y
