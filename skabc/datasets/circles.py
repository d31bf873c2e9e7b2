"""Points on overlapping circles (ABC paper, section 5.1)."""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from .._typing import Float, Int
from ._common import _check_int, _check_output_size, _check_range, _check_real, check_finite_points


def make_circles_sets(
    n_sets: Int = 100,
    set_size: Int | tuple[Int, Int] = (100, 300),
    n_circles: Int | tuple[Int, Int] = 4,
    center_spread: Float = 0.5,
    radius_mean: Float = 0.3,
    radius_std: Float = 0.1,
    radius_range: tuple[Float, Float] = (0.2, 0.4),
    noise: Float = 0.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Independent drawings of points on several (likely overlapping) circles.

    Each drawing ("set") places ``n_circles`` circle centres uniformly in a
    disc of radius ``center_spread``, draws each radius from a normal
    distribution clipped to ``radius_range``, splits the set's points among
    the circles (every circle gets at least one; a set of fewer points than
    ``n_circles`` has one circle per point) and spreads each circle's
    points around it: ``c`` points get one angle each, drawn uniformly in
    its own of ``c`` equal arcs (stratified, so no stretch of a circle is
    left empty).  Which circle a point belongs
    to can only be told from the other points of its set: that is the context.

    Parameters
    ----------
    n_sets : int, default=100
        Number of independent drawings.
    set_size : int or (int, int), default=(100, 300)
        Points per drawing, or the range they are drawn from uniformly.
    n_circles : int or (int, int), default=4
        Circles per drawing, or the range they are drawn from uniformly.
    center_spread : float, default=0.5
        Radius of the disc the centres are drawn from.
    radius_mean, radius_std : float, default=0.3, 0.1
        Normal distribution of the radii.
    radius_range : (float, float), default=(0.2, 0.4)
        Radii are clipped to this range.
    noise : float, default=0.0
        Standard deviation of isotropic Gaussian noise added to every point.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Raises
    ------
    ValueError
        If a count is not a positive integer (or a ``(low, high)`` pair of them), a spread, standard
        deviation or ``noise`` is negative or not finite, or ``radius_range`` is not ``0 < min <= max``.

    Returns
    -------
    X : ndarray of shape (n_points, 2)
        Points of all drawings, drawing after drawing.
    y : ndarray of shape (n_points,)
        Circle index within its drawing (``0..n_circles-1``).
    groups : ndarray of shape (n_points,)
        Index of the drawing every point belongs to.
    """
    rng = check_random_state(random_state)
    n_sets = _check_int("n_sets", n_sets)
    low, high = _check_range("set_size", set_size, 1, integer=True, count=True)
    _check_output_size(n_sets * low, 2, "n_sets and set_size")  # the least they return; the sets drawn: below
    k_low, k_high = _check_range("n_circles", n_circles, 1, integer=True, count=True)
    center_spread, radius_std = _check_real("center_spread", center_spread), _check_real("radius_std", radius_std)
    radius_mean, noise = _check_real("radius_mean", radius_mean, -np.inf), _check_real("noise", noise)
    bounds = tuple(radius_range) if isinstance(radius_range, (tuple, list, np.ndarray)) else ()
    if len(bounds) != 2 or not 0 < _check_real("radius_range", bounds[0]) <= _check_real("radius_range", bounds[1]):
        raise ValueError(f"radius_range must satisfy 0 < min <= max, got {radius_range!r}")
    X, y, groups, rows = [], [], [], 0
    for s in range(n_sets):
        n = int(rng.randint(low, high + 1))
        rows += n
        _check_output_size(rows, 2, "n_sets and set_size")
        k = min(int(rng.randint(k_low, k_high + 1)), n)
        # Uniform in a disc: sqrt of a uniform radius.
        rho = center_spread * np.sqrt(rng.uniform(0, 1, k))
        phi = rng.uniform(0, 2 * np.pi, k)
        centers = np.column_stack([rho * np.cos(phi), rho * np.sin(phi)])
        radii = np.clip(rng.normal(radius_mean, radius_std, k), *radius_range)
        counts = rng.multinomial(n - k, np.full(k, 1.0 / k)) + 1
        labels = np.repeat(np.arange(k), counts)
        angles = np.concatenate(
            [np.linspace(0, 2 * np.pi, c, endpoint=False) + rng.uniform(0, 2 * np.pi / c, c) for c in counts]
        )
        points = centers[labels] + radii[labels, None] * np.column_stack([np.cos(angles), np.sin(angles)])
        if noise > 0:
            points = points + rng.normal(0.0, noise, points.shape)
        order = rng.permutation(n)
        X.append(points[order])
        y.append(labels[order])
        groups.append(np.full(n, s))
    X = np.concatenate(X)
    check_finite_points(X)
    return X, np.concatenate(y), np.concatenate(groups)
