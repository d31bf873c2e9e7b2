"""Labelled clustering sets of the shapes people cluster, in 1 to ~100 dimensions.

Every ``make_*_set`` generator draws **one** set and returns ``(X, y)``: the
points, shuffled, and their cluster labels ``0..k-1``.  :func:`make_clustering_sets`
draws many sets from a mixture of these families and stacks them, zero-padded
to one width, as ``(X, y, groups)`` ready for :class:`skabc.ContextualKernel`.

Background noise.  Uniform background points (``noise_fraction``,
:func:`add_background_noise`) are not a cluster, so they must not share a
label; and they must stay in the sets (rows labelled ``-1`` are never drawn
into training sets).  Every noise point therefore gets its **own** label, a
singleton cluster: a kernel trained on them learns that such a point belongs
with nothing.  Singleton labels are numbered after the clusters' labels.

Structureless data.  The ``'uniform'`` family of :func:`make_clustering_sets`
gives *all* points of a set one label, so that a kernel learns to answer "one
cluster" where there is no structure.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

#: Default mixture of :func:`make_clustering_sets`: family -> probability of a set.
FAMILY_WEIGHTS = {
    "blobs": 0.30,
    "densities": 0.10,
    "rings": 0.12,
    "moons": 0.10,
    "curves": 0.13,
    "mixed": 0.15,
    "uniform": 0.10,
}

#: Every family :func:`make_clustering_sets` can draw.  ``'scattered'`` is not in the default mixture
#: (the shipped generic kernel's first phases were trained without it); name it in ``families`` to use it.
FAMILIES = (*FAMILY_WEIGHTS, "scattered")

CURVE_KINDS = ("arc", "spiral", "sine")
RING_LAYOUTS = ("random", "concentric")

# Families whose structure lives in a plane: they need n_features >= 2.
_PLANAR_FAMILIES = frozenset({"rings", "moons", "curves", "mixed"})


# --------------------------------------------------------------------------- parameter checks


def _check_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _check_real(name: str, value, minimum: float = 0.0, maximum: float = np.inf, *, open_max: bool = False) -> float:
    ok = isinstance(value, Real) and not isinstance(value, bool) and np.isfinite(value) and value >= minimum
    ok = ok and (value < maximum if open_max else value <= maximum)
    if not ok:
        bound = f"< {maximum}" if open_max else f"<= {maximum}"
        upper = "" if maximum == np.inf else f" and {bound}"
        raise ValueError(f"{name} must be a finite number >= {minimum}{upper}, got {value!r}.")
    return float(value)


def _check_positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}.")
    return float(value)


def _check_range(name: str, value, minimum: float, *, integer: bool = False, positive: bool = False) -> tuple:
    """A number, or a ``(low, high)`` pair with ``minimum <= low <= high``."""
    pair = (value, value) if np.isscalar(value) else tuple(value) if isinstance(value, (tuple, list)) else None
    kind = "integer" if integer else "number"
    if pair is None or len(pair) != 2:
        raise ValueError(f"{name} must be a {kind} or a (low, high) pair, got {value!r}.")
    check = _check_int if integer else _check_real
    low, high = (check(name, v, minimum) for v in pair)
    if positive and low <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}.")
    if high < low:
        raise ValueError(f"{name} must satisfy low <= high, got {value!r}.")
    return low, high


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


def _log_uniform(rng, low: float, high: float, size=None):
    return np.exp(rng.uniform(np.log(low), np.log(high), size))


def _size_weights(rng, k: int, imbalance: float) -> np.ndarray:
    """Log-normal cluster-size weights; ``imbalance=0`` gives equal expected sizes."""
    return np.exp(imbalance * rng.standard_normal(k))


def _split_counts(rng, n: int, weights: np.ndarray) -> np.ndarray:
    """``len(weights)`` counts >= 1 summing to ``n``, the rest spread in proportion to the weights."""
    k = len(weights)
    return rng.multinomial(n - k, weights / weights.sum()) + 1


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


def _place_centers(rng, radius: np.ndarray, d: int, min_separation: float, box=None, spacing: float = 1.0):
    """Centres with ``||c_i - c_j|| >= min_separation * (radius_i + radius_j)``.

    Drawn one by one uniformly in a box (by default one sized for the clusters
    to fit, times ``spacing``); a centre that finds no room in 32 tries widens
    its box by 10%.
    """
    k = len(radius)
    if box is None:
        half = np.full(d, spacing * 1.5 * max(min_separation, 0.5) * radius.mean() * k ** (1 / d))
        mid = np.zeros(d)
    else:
        mid, half = (box[1] + box[0]) / 2, np.maximum((box[1] - box[0]) / 2, 1e-12)
    centers = np.empty((k, d))
    for i in range(k):
        grow = 1.0
        while True:
            cand = mid + half * grow * rng.uniform(-1, 1, (32, d))
            if i == 0 or min_separation == 0:
                centers[i] = cand[0]
                break
            dist = np.sqrt(((cand[:, None, :] - centers[None, :i, :]) ** 2).sum(-1))
            ratio = (dist / (radius[i] + radius[:i])).min(axis=1)
            ok = np.flatnonzero(ratio >= min_separation)
            if ok.size:
                centers[i] = cand[ok[0]]
                break
            grow *= 1.1
    return centers


def _blob_points(rng, counts, d: int, stds, anisotropy: tuple[float, float], min_separation: float, box=None,
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


def _ring_points(rng, n, k, layout, radius_range, center_spread, noise, imbalance):
    low, high = radius_range
    if layout == "concentric":
        radii = low + (high - low) * (np.arange(k) + rng.uniform(0.2, 0.8, k)) / k
        centers = np.zeros((k, 2))
    else:
        radii = rng.uniform(low, high, k)
        centers = _disc(rng, center_spread, k)
    counts = _split_counts(rng, n, radii * _size_weights(rng, k, imbalance))
    labels = np.repeat(np.arange(k), counts)
    angle = rng.uniform(0, 2 * np.pi, n)
    X = centers[labels] + radii[labels, None] * np.column_stack([np.cos(angle), np.sin(angle)])
    return X + rng.normal(0.0, noise, X.shape), labels


def _moon_points(rng, n, k, noise, arc_jitter, imbalance):
    counts = _split_counts(rng, n, _size_weights(rng, k, imbalance))
    labels = np.repeat(np.arange(k), counts)
    start = rng.uniform(-arc_jitter, arc_jitter, k)
    stop = np.pi + rng.uniform(-arc_jitter, arc_jitter, k)
    t = start[labels] + (stop - start)[labels] * rng.uniform(0, 1, n)
    # Moon i: centre (i, i % 2 / 2), upper half for even i and lower for odd: a chain of interleaved arcs
    # (k=2 is scikit-learn's make_moons).
    flip = np.where(labels % 2 == 0, 1.0, -1.0)
    X = np.column_stack([labels + flip * np.cos(t), 0.5 * (labels % 2) + flip * np.sin(t)])
    return _rotate2d(rng, X + rng.normal(0.0, noise, X.shape)), labels


def _curve_points(rng, n, k, kinds, noise, center_spread, imbalance):
    kind = [kinds[i] for i in rng.randint(0, len(kinds), k)]
    n_spirals = kind.count("spiral")
    spiral_center, spiral_phase, spiral_index = _disc(rng, center_spread, 1)[0], rng.uniform(0, 2 * np.pi), 0
    curves, lengths = [], np.empty(k)
    for c in range(k):
        if kind[c] == "arc":
            center, radius = _disc(rng, center_spread, 1)[0], rng.uniform(0.3, 1.0)
            start, span = rng.uniform(0, 2 * np.pi), rng.uniform(0.5 * np.pi, 1.5 * np.pi)
            curves.append(("arc", center, radius, start, span))
            lengths[c] = radius * span
        elif kind[c] == "spiral":
            # Interleaved arms around one centre, like the two-spirals problem.
            turns, outer = rng.uniform(0.75, 1.5), rng.uniform(0.6, 1.2)
            phase = spiral_phase + 2 * np.pi * spiral_index / n_spirals
            spiral_index += 1
            curves.append(("spiral", spiral_center, outer, phase, 2 * np.pi * turns))
            lengths[c] = outer * np.pi * turns
        else:
            length, amplitude, periods = rng.uniform(1.0, 2.0), rng.uniform(0.1, 0.3), rng.uniform(1.0, 3.0)
            omega = 2 * np.pi * periods / length
            center = _disc(rng, center_spread, 1)[0]
            curves.append(("sine", center, length, amplitude, omega, rng.uniform(0, 2 * np.pi)))
            lengths[c] = length * np.sqrt(1 + (amplitude * omega) ** 2 / 2)
    counts = _split_counts(rng, n, lengths * _size_weights(rng, k, imbalance))
    parts = []
    for c, curve in enumerate(curves):
        u = rng.uniform(0, 1, counts[c])
        if curve[0] == "arc":
            _, center, radius, start, span = curve
            t = start + span * u
            P = center + radius * np.column_stack([np.cos(t), np.sin(t)])
        elif curve[0] == "spiral":
            _, center, outer, phase, theta_max = curve
            theta = theta_max * np.sqrt(u)  # about uniform along the arc (length grows with theta)
            r = outer * (0.1 + 0.9 * theta / theta_max)
            P = center + r[:, None] * np.column_stack([np.cos(theta + phase), np.sin(theta + phase)])
        else:
            _, center, length, amplitude, omega, phase = curve
            x = length * (u - 0.5)
            P = center + _rotate2d(rng, np.column_stack([x, amplitude * np.sin(omega * x + phase)]))
        parts.append(P)
    X = np.concatenate(parts)
    return X + rng.normal(0.0, noise, X.shape), np.repeat(np.arange(k), counts)


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
        X = np.concatenate([X, _background(rng, X, n_noise, margin)])
        y = np.concatenate([y, y.max() + 1 + np.arange(n_noise)])
    if n_features > X.shape[1]:
        X = _embed(rng, X, n_features, embed_noise)
    order = rng.permutation(len(X))
    return X[order], y[order].astype(np.int64)


# --------------------------------------------------------------------------- public generators


def make_blobs_set(
    n_samples: int = 200,
    n_clusters: int = 3,
    n_features: int = 2,
    *,
    cluster_std: float | tuple[float, float] = (0.5, 1.5),
    anisotropy: float | tuple[float, float] = (1.0, 3.0),
    weights=None,
    imbalance: float = 0.5,
    min_separation: float = 1.0,
    spacing: float = 1.0,
    tail_df: float | None = None,
    noise_fraction: float = 0.0,
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
        or the range it is drawn from per cluster (log-uniformly).  Ignored
        in one dimension.
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
        smaller values.  ``None``: Gaussian blobs.
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
    std_low, std_high = _check_range("cluster_std", cluster_std, 0.0, positive=True)
    anisotropy = _check_range("anisotropy", anisotropy, 1.0)
    imbalance = _check_real("imbalance", imbalance)
    min_separation = _check_real("min_separation", min_separation)
    spacing = _check_positive("spacing", spacing)
    if tail_df is not None:
        tail_df = _check_positive("tail_df", tail_df)
    noise_fraction = _check_noise_fraction(noise_fraction)
    if weights is not None:
        weights = np.asarray(weights, dtype=float)
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


def make_rings_set(
    n_samples: int = 200,
    n_rings: int = 3,
    n_features: int = 2,
    *,
    layout: str = "random",
    radius_range: tuple[float, float] = (0.3, 1.0),
    center_spread: float = 1.0,
    noise: float = 0.03,
    imbalance: float = 0.0,
    noise_fraction: float = 0.0,
    embed_noise: float = 0.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One set of points on rings: overlapping circles or concentric rings.

    Each ring gets points in proportion to its circumference (times a random
    size weight), uniformly random in angle, plus isotropic Gaussian noise.

    Parameters
    ----------
    n_samples : int, default=200
        Points in the set, background noise included.
    n_rings : int, default=3
        Number of rings; each gets at least one point.
    n_features : int, default=2
        Dimension of the points, at least 2; beyond 2 the plane of the rings
        is embedded at random (:func:`embed_in_dimensions`).
    layout : {'random', 'concentric'}, default='random'
        ``'random'``: centres uniform in a disc of radius ``center_spread``,
        radii uniform in ``radius_range`` (rings overlap).  ``'concentric'``:
        one centre, radii spread evenly over ``radius_range`` with jitter.
    radius_range : (float, float), default=(0.3, 1.0)
        Range of the radii.
    center_spread : float, default=1.0
        Radius of the disc the centres are drawn from (``layout='random'``).
    noise : float, default=0.03
        Standard deviation of the Gaussian noise on every point.
    imbalance : float, default=0.0
        Spread of the log size weights (``0``: density equal on all rings).
    noise_fraction : float, default=0.0
        Share of the points that is uniform background noise, each noise point
        with its own label.
    embed_noise : float, default=0.0
        Standard deviation of the noise in the dimensions beyond the plane.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The points, shuffled.
    y : ndarray of shape (n_samples,)
        Ring labels ``0..n_rings-1``; noise points ``n_rings, n_rings+1, ...``.
    """
    n_samples = _check_int("n_samples", n_samples)
    n_rings = _check_int("n_rings", n_rings)
    n_features = _check_int("n_features", n_features, 2)
    if layout not in RING_LAYOUTS:
        raise ValueError(f"layout must be one of {RING_LAYOUTS}, got {layout!r}.")
    radius_range = _check_range("radius_range", radius_range, 0.0, positive=True)
    center_spread = _check_real("center_spread", center_spread)
    noise = _check_real("noise", noise)
    imbalance = _check_real("imbalance", imbalance)
    noise_fraction = _check_noise_fraction(noise_fraction)
    embed_noise = _check_real("embed_noise", embed_noise)
    n_structure, n_noise = _split_noise(n_samples, noise_fraction, n_rings, "n_rings")
    rng = check_random_state(random_state)
    X, y = _ring_points(rng, n_structure, n_rings, layout, radius_range, center_spread, noise, imbalance)
    return _finish(rng, X, y, n_noise, n_features, embed_noise)


def make_moons_set(
    n_samples: int = 200,
    n_moons: int = 2,
    n_features: int = 2,
    *,
    noise: float = 0.1,
    arc_jitter: float = 0.3,
    imbalance: float = 0.0,
    noise_fraction: float = 0.0,
    embed_noise: float = 0.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One set of interleaved half-moons, at a random orientation.

    Moon ``i`` is a unit half circle centred at ``(i, (i % 2) / 2)``, opening
    down for even ``i`` and up for odd ``i``: with two moons this is
    scikit-learn's ``make_moons``, with more a chain of interleaved arcs.
    Each arc's ends move by up to ``arc_jitter`` radians.

    Parameters
    ----------
    n_samples : int, default=200
        Points in the set, background noise included.
    n_moons : int, default=2
        Number of arcs; each gets at least one point.
    n_features : int, default=2
        Dimension of the points, at least 2 (embedded at random beyond 2).
    noise : float, default=0.1
        Standard deviation of the Gaussian noise on every point.
    arc_jitter : float, default=0.3
        Largest random change of each end of an arc, in radians.
    imbalance : float, default=0.0
        Spread of the log size weights (``0``: equal expected sizes).
    noise_fraction : float, default=0.0
        Share of the points that is uniform background noise, each noise point
        with its own label.
    embed_noise : float, default=0.0
        Standard deviation of the noise in the dimensions beyond the plane.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The points, shuffled.
    y : ndarray of shape (n_samples,)
        Moon labels ``0..n_moons-1``; noise points ``n_moons, n_moons+1, ...``.
    """
    n_samples = _check_int("n_samples", n_samples)
    n_moons = _check_int("n_moons", n_moons)
    n_features = _check_int("n_features", n_features, 2)
    noise = _check_real("noise", noise)
    arc_jitter = _check_real("arc_jitter", arc_jitter, 0.0, np.pi / 2)
    imbalance = _check_real("imbalance", imbalance)
    noise_fraction = _check_noise_fraction(noise_fraction)
    embed_noise = _check_real("embed_noise", embed_noise)
    n_structure, n_noise = _split_noise(n_samples, noise_fraction, n_moons, "n_moons")
    rng = check_random_state(random_state)
    X, y = _moon_points(rng, n_structure, n_moons, noise, arc_jitter, imbalance)
    return _finish(rng, X, y, n_noise, n_features, embed_noise)


def make_curves_set(
    n_samples: int = 200,
    n_curves: int = 3,
    n_features: int = 2,
    *,
    kinds=CURVE_KINDS,
    noise: float = 0.03,
    center_spread: float = 1.0,
    imbalance: float = 0.0,
    noise_fraction: float = 0.0,
    embed_noise: float = 0.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One set of noisy curves: random arcs, interleaved spirals, sine waves.

    Each curve's kind is drawn uniformly from ``kinds``.  An ``'arc'`` is a
    random stretch (90 to 270 degrees) of a circle of radius 0.3-1.0; all
    ``'spiral'`` curves of a set are interleaved arms (0.75-1.5 turns) around
    one centre, as in the two-spirals problem; a ``'sine'`` is 1-3 periods of
    a sine wave of length 1-2 and amplitude 0.1-0.3 at a random angle.  Points
    are spread about uniformly along each curve, each curve getting points in
    proportion to its length (times a random size weight).

    Parameters
    ----------
    n_samples : int, default=200
        Points in the set, background noise included.
    n_curves : int, default=3
        Number of curves; each gets at least one point.
    n_features : int, default=2
        Dimension of the points, at least 2 (embedded at random beyond 2).
    kinds : sequence of {'arc', 'spiral', 'sine'}, default=('arc', 'spiral', 'sine')
        Kinds of curve to draw from.
    noise : float, default=0.03
        Standard deviation of the Gaussian noise on every point.
    center_spread : float, default=1.0
        Radius of the disc the curves' centres are drawn from.
    imbalance : float, default=0.0
        Spread of the log size weights (``0``: equal density on all curves).
    noise_fraction : float, default=0.0
        Share of the points that is uniform background noise, each noise point
        with its own label.
    embed_noise : float, default=0.0
        Standard deviation of the noise in the dimensions beyond the plane.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The points, shuffled.
    y : ndarray of shape (n_samples,)
        Curve labels ``0..n_curves-1``; noise points ``n_curves, n_curves+1, ...``.
    """
    n_samples = _check_int("n_samples", n_samples)
    n_curves = _check_int("n_curves", n_curves)
    n_features = _check_int("n_features", n_features, 2)
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    if not kinds or any(kind not in CURVE_KINDS for kind in kinds):
        raise ValueError(f"kinds must be a non-empty sequence of {CURVE_KINDS}, got {kinds!r}.")
    noise = _check_real("noise", noise)
    center_spread = _check_real("center_spread", center_spread)
    imbalance = _check_real("imbalance", imbalance)
    noise_fraction = _check_noise_fraction(noise_fraction)
    embed_noise = _check_real("embed_noise", embed_noise)
    n_structure, n_noise = _split_noise(n_samples, noise_fraction, n_curves, "n_curves")
    rng = check_random_state(random_state)
    X, y = _curve_points(rng, n_structure, n_curves, kinds, noise, center_spread, imbalance)
    return _finish(rng, X, y, n_noise, n_features, embed_noise)


def add_background_noise(X, y, fraction: float = 0.1, *, margin: float = 0.1, random_state=None):
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
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-D array, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinity.")
    if y.shape != (X.shape[0],) or y.dtype.kind not in "iu":
        raise ValueError(f"y must be {X.shape[0]} integer labels, got an array of shape {y.shape} and dtype {y.dtype}.")
    fraction = _check_real("fraction", fraction, 0.0, 1.0, open_max=True)
    margin = _check_real("margin", margin)
    rng = check_random_state(random_state)
    n_noise = round(fraction * len(X) / (1 - fraction))
    noise = _background(rng, X, n_noise, margin)
    labels = y.max() + 1 + np.arange(n_noise, dtype=np.int64)
    return np.concatenate([X, noise]), np.concatenate([y.astype(np.int64), labels])


def embed_in_dimensions(X, n_features: int, *, noise_std: float = 0.0, random_state=None) -> np.ndarray:
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
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-D array with at least one column, got shape {X.shape}.")
    n_features = _check_int("n_features", n_features)
    if n_features < X.shape[1]:
        raise ValueError(f"n_features={n_features} is smaller than the {X.shape[1]} columns of X.")
    noise_std = _check_real("noise_std", noise_std)
    return _embed(check_random_state(random_state), X, n_features, noise_std)


# --------------------------------------------------------------------------- the mixture


def _check_families(families) -> tuple[list[str], np.ndarray]:
    if families is None:
        families = FAMILY_WEIGHTS
    elif isinstance(families, str):
        families = {families: 1.0}
    elif not isinstance(families, Mapping):
        families = dict.fromkeys(families, 1.0)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown or not families:
        raise ValueError(f"families must name some of {sorted(FAMILIES)}, got {families!r}.")
    names = list(families)
    weights = np.array([_check_real(f"families[{name!r}]", families[name]) for name in names])
    if weights.sum() <= 0:
        raise ValueError(f"families needs a positive weight, got {families!r}.")
    return names, weights / weights.sum()


def _draw_dimension(rng, low: int, high: int) -> int:
    """Log-uniform integer in ``[low, high]``: low dimensions are as common as high ones per octave."""
    return int(min(high, np.floor(np.exp(rng.uniform(np.log(low), np.log(high + 1))))))


def _draw_k(rng, low: int, high: int, limit: int) -> int:
    high = min(high, limit)
    return int(rng.randint(min(low, high), high + 1))


def _one_set(rng, family: str, n: int, d: int, max_clusters: int, noise_fraction: float):
    """One set of ``family`` with ``n`` points in ``d`` dimensions; the draws are documented in the mixer."""
    n_noise = min(round(noise_fraction * n), n - 1) if family != "uniform" else 0
    n_struct = n - n_noise
    limit = min(max_clusters, n_struct)
    d0 = min(d, _draw_dimension(rng, 2, 16))  # intrinsic dimension of blobs and uniform sets
    if family in ("blobs", "densities"):
        if family == "blobs":
            k = _draw_k(rng, 1, max_clusters, limit)
            ratio, imbalance, min_sep = _log_uniform(rng, 1.0, 3.0), rng.uniform(0.0, 1.0), rng.uniform(0.25, 2.5)
        else:
            k = _draw_k(rng, 2, max_clusters, limit)
            ratio, imbalance, min_sep = _log_uniform(rng, 5.0, 20.0), rng.uniform(0.5, 1.5), rng.uniform(1.0, 3.0)
        counts = _split_counts(rng, n_struct, _size_weights(rng, k, imbalance))
        stds = _log_uniform(rng, 1.0, ratio, k)
        X, y = _blob_points(rng, counts, d0, stds, (1.0, _log_uniform(rng, 1.0, 10.0)), min_sep)
    elif family == "scattered":
        k = _draw_k(rng, 2, 8, limit)
        counts = _split_counts(rng, n_struct, _size_weights(rng, k, rng.uniform(0.0, 1.0)))
        stds = _log_uniform(rng, 1.0, 2.0, k)
        tail_df = _log_uniform(rng, 3.0, 30.0) if rng.uniform() < 0.5 else None
        X, y = _blob_points(rng, counts, d0, stds, (1.0, _log_uniform(rng, 1.0, 3.0)), rng.uniform(1.0, 2.5),
                            spacing=_log_uniform(rng, 1.5, 5.0), tail_df=tail_df)
    elif family == "uniform":
        X = rng.uniform(-1, 1, (n_struct, d0)) * _log_uniform(rng, 0.2, 1.0, d0)
        y = np.zeros(n_struct, dtype=np.int64)
    elif family == "mixed":
        n_curved = min(n_struct, max(1, round(n_struct * rng.uniform(0.4, 0.8))))
        X, y = _planar(rng, rng.choice(["rings", "moons", "curves"]), n_curved, 1, min(3, max(1, limit - 1)))
        room = min(limit - (int(y.max()) + 1), n_struct - n_curved)
        k_blobs = _draw_k(rng, 1, 6, room) if room >= 1 else 0
        if k_blobs:
            extent = float((X.max(axis=0) - X.min(axis=0)).max())
            counts = _split_counts(rng, n_struct - len(y), _size_weights(rng, k_blobs, rng.uniform(0.0, 1.0)))
            stds = extent * _log_uniform(rng, 0.02, 0.1, k_blobs)
            box = (X.min(axis=0), X.max(axis=0))
            Xb, yb = _blob_points(rng, counts, 2, stds, (1.0, 3.0), rng.uniform(1.0, 2.0), box)
            X, y = np.concatenate([X, Xb]), np.concatenate([y, yb + y.max() + 1])
    else:
        X, y = _planar(rng, family, n_struct, 2 if family != "curves" else 1, 5 if family != "moons" else 4,
                       limit=limit)
    scale = float(np.sqrt(X.var(axis=0).mean())) or 1.0
    return _finish(rng, X, y, n_noise, d, scale * rng.uniform(0.0, 0.05))


def _planar(rng, family: str, n: int, low: int, high: int, limit: int | None = None):
    """Rings, moons or curves with a random number of components and random parameters."""
    k = _draw_k(rng, low, high, high if limit is None else limit)
    k = max(1, min(k, n))
    if family == "rings":
        layout = "concentric" if rng.uniform() < 0.4 else "random"
        return _ring_points(rng, n, k, layout, (0.3, 1.0), 1.0, rng.uniform(0.0, 0.06), rng.uniform(0.0, 0.5))
    if family == "moons":
        return _moon_points(rng, n, k, rng.uniform(0.02, 0.15), 0.3, rng.uniform(0.0, 0.5))
    return _curve_points(rng, n, k, CURVE_KINDS, rng.uniform(0.0, 0.05), 1.0, rng.uniform(0.0, 0.5))


def make_clustering_sets(
    n_sets: int = 100,
    set_size: int | tuple[int, int] = (200, 600),
    *,
    families=None,
    n_features: int | tuple[int, int] = (1, 100),
    max_clusters: int = 15,
    max_features: int | None = None,
    noise_probability: float = 0.3,
    noise_fraction: float | tuple[float, float] = (0.01, 0.1),
    dtype=np.float32,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Many labelled sets drawn from a mixture of the shapes people cluster.

    Every set independently draws a family (by ``families`` weights), a size
    from ``set_size``, a dimension ``d`` log-uniformly from ``n_features``,
    and the family's own parameters, below.  Low-dimensional structure is
    embedded into ``d`` dimensions at a random orientation, with Gaussian
    noise of 0-5% of the structure's spread in the orthogonal directions
    (:func:`embed_in_dimensions`).  With probability ``noise_probability`` a
    set (other than ``'uniform'``) gets uniform background noise, each noise
    point a singleton label.  Sets are zero-padded to ``max_features``
    columns and stacked; :func:`skabc.preprocessing.canonicalize_set` maps
    zero columns to nothing.

    Families (default weights in :data:`FAMILY_WEIGHTS`):

    - ``'blobs'`` (0.30): 1 to ``max_clusters`` Gaussian blobs in 2-16
      dimensions (log-uniform, at most ``d``), spreads within a factor 1-3 of
      each other, per-cluster anisotropy from 1 up to a set's 1-10, log-size
      imbalance 0-1, ``min_separation`` 0.25-2.5 (overlapping to well apart).
    - ``'densities'`` (0.10): 2 to ``max_clusters`` blobs whose spreads differ
      by a factor 5-20 and whose sizes differ strongly: varying densities.
    - ``'rings'`` (0.12): 2-5 rings, concentric (40%) or overlapping circles.
    - ``'moons'`` (0.10): 2-4 interleaved half-moons.
    - ``'curves'`` (0.13): 1-5 arcs, interleaved spirals and sine waves.
    - ``'mixed'`` (0.15): 1-3 rings, moons or curves plus 1-6 small blobs in
      the same region of the plane.
    - ``'uniform'`` (0.10): no structure, uniform in a random box of 2-16
      dimensions (at most ``d``); **all points share one label** ("one cluster").
    - ``'scattered'`` (not in the default mixture): 2 to 8 blobs in 2-16
      dimensions, spread ``spacing`` 1.5-5 (log-uniform) so that far-apart
      groups sit next to close pairs (centres 2-5 spreads apart at the
      least), half of the sets with Student-t tails (``tail_df`` 3-30).

    Planar families need ``d >= 2``: they draw ``d`` from the part of
    ``n_features`` at or above 2, and a set of such a family with
    ``n_features`` below 2 is drawn as ``'blobs'`` instead.  Component counts
    never exceed ``max_clusters`` or the set's number of points.

    Parameters
    ----------
    n_sets : int, default=100
        Number of sets.
    set_size : int or (int, int), default=(200, 600)
        Points per set, or the range it is drawn from uniformly.
    families : dict, sequence of str, str or None, default=None
        Family -> weight, or names weighted equally; ``None`` is
        :data:`FAMILY_WEIGHTS`.  Names come from :data:`FAMILIES`.
    n_features : int or (int, int), default=(1, 100)
        Dimension of a set, or the range it is drawn from log-uniformly.
    max_clusters : int, default=15
        Most clusters in a set (background noise singletons not counted).
    max_features : int, default=None
        Width of the returned ``X``; ``None`` is the largest dimension drawn.
        Must be at least the upper end of ``n_features``.
    noise_probability : float, default=0.3
        Probability that a set gets background noise.
    noise_fraction : float or (float, float), default=(0.01, 0.1)
        Share of such a set's points that is noise, or its range (uniform).
    dtype : numpy float dtype, default=np.float32
        Type of ``X`` (float32 halves the memory of the padded array).
    random_state : int, RandomState instance or None, default=None
        Seed: the same seed gives the same sets.

    Returns
    -------
    X : ndarray of shape (n_points, width)
        Points of all sets, set after set, zero beyond each set's dimension.
    y : ndarray of shape (n_points,)
        Cluster labels, unique across sets (each set's labels are offset by
        the number of labels before it).
    groups : ndarray of shape (n_points,)
        Index of the set every point belongs to.

    Examples
    --------
    >>> from skabc.datasets import make_clustering_sets
    >>> X, y, groups = make_clustering_sets(n_sets=5, set_size=50, n_features=(2, 8), random_state=0)
    >>> X.shape[0], int(groups.max())
    (250, 4)
    """
    n_sets = _check_int("n_sets", n_sets)
    size_low, size_high = _check_range("set_size", set_size, 1, integer=True)
    d_low, d_high = _check_range("n_features", n_features, 1, integer=True)
    max_clusters = _check_int("max_clusters", max_clusters)
    if max_features is not None:
        max_features = _check_int("max_features", max_features)
        if max_features < d_high:
            raise ValueError(f"max_features={max_features} is smaller than the largest n_features ({d_high}).")
    noise_probability = _check_real("noise_probability", noise_probability, 0.0, 1.0)
    frac_low, frac_high = _check_range("noise_fraction", noise_fraction, 0.0)
    if frac_high >= 1:
        raise ValueError(f"noise_fraction must be below 1, got {noise_fraction!r}.")
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a floating-point type, got {dtype}.")
    names, weights = _check_families(families)

    rng = check_random_state(random_state)
    drawn = rng.choice(len(names), size=n_sets, p=weights)
    sets = []
    for index in drawn:
        family = names[index]
        if family in _PLANAR_FAMILIES and d_high < 2:
            family = "blobs"
        n = int(rng.randint(size_low, size_high + 1))
        d = _draw_dimension(rng, max(d_low, 2) if family in _PLANAR_FAMILIES else d_low, d_high)
        fraction = rng.uniform(frac_low, frac_high) if rng.uniform() < noise_probability else 0.0
        sets.append(_one_set(rng, family, n, d, max_clusters, fraction))

    width = max_features if max_features is not None else max(x.shape[1] for x, _ in sets)
    X = np.zeros((sum(len(x) for x, _ in sets), width), dtype=dtype)
    y = np.empty(len(X), dtype=np.int64)
    groups = np.empty(len(X), dtype=np.int64)
    start = offset = 0
    for s, (xs, ys) in enumerate(sets):
        stop = start + len(xs)
        X[start:stop, : xs.shape[1]] = xs
        y[start:stop] = ys + offset
        groups[start:stop] = s
        offset += int(ys.max()) + 1
        start = stop
    return X, y, groups
