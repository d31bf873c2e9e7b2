"""Rings, moons and curves: the non-convex families of the synthetic sets."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from sklearn.utils import check_random_state

from .._typing import Float, Int
from ._common import (
    _check_int,
    _check_noise_fraction,
    _check_output_size,
    _check_range,
    _check_real,
    _disc,
    _finish,
    _rotate2d,
    _size_weights,
    _split_counts,
    _split_noise,
)

CURVE_KINDS = ("arc", "spiral", "sine")
RING_LAYOUTS = ("random", "concentric", "separated")


def _ring_points(rng, n, k, layout, radius_range, center_spread, noise, imbalance, min_gap=0.0):
    low, high = radius_range
    if layout == "concentric":
        radii = low + (high - low) * (np.arange(k) + rng.uniform(0.2, 0.8, k)) / k
        centers = np.zeros((k, 2))
    elif layout == "separated":
        radii = rng.uniform(low, high, k)
        centers = _apart(rng, radii, center_spread, min_gap)
    else:
        radii = rng.uniform(low, high, k)
        centers = _disc(rng, center_spread, k)
    counts = _split_counts(rng, n, radii * _size_weights(rng, k, imbalance))
    labels = np.repeat(np.arange(k), counts)
    angle = rng.uniform(0, 2 * np.pi, n)
    X = centers[labels] + radii[labels, None] * np.column_stack([np.cos(angle), np.sin(angle)])
    return X + rng.normal(0.0, noise, X.shape), labels


def _apart(rng, radii: np.ndarray, spread: float, gap: float) -> np.ndarray:
    """Centres, one by one in a disc of radius ``spread``, so that circles ``i, j`` stay ``gap`` apart.

    After 50 misses in a row the disc widens by 10%: any number of circles fits, and the layout stays compact.
    """
    centers = np.zeros((0, 2))
    for radius in radii:
        misses = 0
        while True:
            candidate = _disc(rng, spread, 1)
            if np.all(np.linalg.norm(centers - candidate, axis=1) >= radii[: len(centers)] + radius + gap):
                break
            misses += 1
            if misses == 50:
                spread, misses = max(1.1 * spread, radius + gap), 0
        centers = np.vstack([centers, candidate])
    return centers


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


def make_rings_set(
    n_samples: Int = 200,
    n_rings: Int = 3,
    n_features: Int = 2,
    *,
    layout: str = "random",
    radius_range: tuple[Float, Float] = (0.3, 1.0),
    center_spread: Float = 1.0,
    noise: Float = 0.03,
    imbalance: Float = 0.0,
    noise_fraction: Float = 0.0,
    embed_noise: Float = 0.0,
    min_gap: Float = 0.2,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One set of points on rings: overlapping, concentric or separated circles.

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
    layout : {'random', 'concentric', 'separated'}, default='random'
        ``'random'``: centres uniform in a disc of radius ``center_spread``,
        radii uniform in ``radius_range`` (rings overlap).  ``'concentric'``:
        one centre, radii spread evenly over ``radius_range`` with jitter.
        ``'separated'``: radii as for ``'random'``, centres drawn one by one
        in a disc of radius ``center_spread`` (widened until they fit) so
        that no two circles come closer than ``min_gap``: apart, non-convex
        clusters that a neighbourhood graph separates.
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
    min_gap : float, default=0.2
        Smallest distance between two circles (before noise), ``layout='separated'`` only.
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
    _check_output_size(n_samples, n_features, "n_samples and n_features")
    if layout not in RING_LAYOUTS:
        raise ValueError(f"layout must be one of {RING_LAYOUTS}, got {layout!r}.")
    radius_range = _check_range("radius_range", radius_range, 0.0, positive=True)
    center_spread = _check_real("center_spread", center_spread)
    noise = _check_real("noise", noise)
    imbalance = _check_real("imbalance", imbalance)
    noise_fraction = _check_noise_fraction(noise_fraction)
    embed_noise = _check_real("embed_noise", embed_noise)
    min_gap = _check_real("min_gap", min_gap)
    n_structure, n_noise = _split_noise(n_samples, noise_fraction, n_rings, "n_rings")
    rng = check_random_state(random_state)
    X, y = _ring_points(rng, n_structure, n_rings, layout, radius_range, center_spread, noise, imbalance, min_gap)
    return _finish(rng, X, y, n_noise, n_features, embed_noise)


def make_moons_set(
    n_samples: Int = 200,
    n_moons: Int = 2,
    n_features: Int = 2,
    *,
    noise: Float = 0.1,
    arc_jitter: Float = 0.3,
    imbalance: Float = 0.0,
    noise_fraction: Float = 0.0,
    embed_noise: Float = 0.0,
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
    _check_output_size(n_samples, n_features, "n_samples and n_features")
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
    n_samples: Int = 200,
    n_curves: Int = 3,
    n_features: Int = 2,
    *,
    kinds: Sequence[str] = CURVE_KINDS,
    noise: Float = 0.03,
    center_spread: Float = 1.0,
    imbalance: Float = 0.0,
    noise_fraction: Float = 0.0,
    embed_noise: Float = 0.0,
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
    _check_output_size(n_samples, n_features, "n_samples and n_features")
    if not isinstance(kinds, str) and not isinstance(kinds, Iterable):
        raise TypeError(f"kinds must be a curve kind or a sequence of {CURVE_KINDS}, got {kinds!r}.")
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


