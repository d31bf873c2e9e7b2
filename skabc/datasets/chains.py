"""Chains: long, thin polylines (zigzags), sparsely sampled or beaded, next to compact blobs.

A chain is one cluster however it is sampled: points spread thinly along a
path of straight segments, or gathered in small beads strung along it.  A
k-nearest-neighbour graph cuts such a path into pieces of about its
neighbourhood size, which look like many small clusters; these sets teach the
difference (the clustering benchmark suite's zigzag sets are of this kind).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree
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
    _split_counts,
    _split_noise,
    overflow_error,
)

#: Tries at placing a chain or blob at least ``gap`` from the others before the region grows by a quarter.
_PLACEMENT_TRIES = 50
#: Most segments of one chain: a polyline of more is no chain (10**12 asked numpy for terabytes).
MAX_SEGMENTS = 10_000
#: Most beads of one chain (beyond, a draw leaves numpy's 64-bit integers).
MAX_BEADS = 2**30


def _polyline(rng, n_segments: int, length_range: tuple[float, float], turn_range: tuple[float, float]):
    """Vertices of a random zigzag: ``n_segments`` straight segments, each turning left or right."""
    lengths = rng.uniform(*length_range, n_segments)
    turns = rng.uniform(*turn_range, n_segments) * rng.choice([-1.0, 1.0], n_segments)
    turns[0] = rng.uniform(0, 2 * np.pi)  # the first segment's direction
    angles = np.cumsum(turns)
    steps = lengths[:, None] * np.column_stack([np.cos(angles), np.sin(angles)])
    vertices = np.vstack([np.zeros(2), np.cumsum(steps, axis=0)])
    return vertices - vertices.mean(axis=0)


def _along(vertices: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Points at arc lengths ``s`` along the polyline ``vertices``."""
    seg = np.diff(vertices, axis=0)
    cumulative = np.concatenate([[0.0], np.cumsum(np.linalg.norm(seg, axis=1))])
    index = np.clip(np.searchsorted(cumulative, s, side="right") - 1, 0, len(seg) - 1)
    t = (s - cumulative[index]) / np.maximum(cumulative[index + 1] - cumulative[index], 1e-12)
    return vertices[index] + t[:, None] * seg[index]


def _chain_points(rng, count: int, vertices: np.ndarray, width: float, beads: int | None,
                  taper: float = 0.0) -> np.ndarray:
    """``count`` points along ``vertices``: in ``beads`` evenly spaced beads, or spread along it with density
    ``(1 - s / length) ** taper`` at arc length ``s`` (uniform for ``taper=0``)."""
    total = float(np.sum(np.linalg.norm(np.diff(vertices, axis=0), axis=1)))
    if beads is None and taper > 0:
        # Inverse of the CDF 1 - (1 - s / total) ** (taper + 1): dense at the start, thinning out to the end.
        s = total * (1.0 - (1.0 - rng.uniform(0, 1, count)) ** (1.0 / (taper + 1.0)))
    elif beads is None:
        s = rng.uniform(0, total, count)
    else:
        spread = 0.15 * total / beads  # beads a third of their spacing wide: gaps between them
        # The centres of the drawn beads only: a list of every bead's centre took gigabytes for absurd counts.
        centres = (rng.randint(0, beads, count) + 0.5) * total / beads
        s = np.clip(centres + rng.normal(0, spread, count), 0, total)
    return _along(vertices, s) + rng.normal(0, width, (count, 2))


def make_chains_set(
    n_samples: Int = 300,
    n_chains: Int = 2,
    n_blobs: Int = 2,
    n_features: Int = 2,
    *,
    n_segments: Int | tuple[Int, Int] = (2, 6),
    width: Float = 0.03,
    bead_probability: Float = 0.5,
    n_beads: Int | tuple[Int, Int] = (4, 20),
    blob_share: Float = 0.3,
    blob_std: Float | tuple[Float, Float] = (0.03, 0.12),
    gap: Float = 0.25,
    taper: Float | tuple[Float, Float] = 0.0,
    noise_fraction: Float = 0.0,
    embed_noise: Float = 0.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """One set of thin zigzag chains and compact blobs; every chain is one cluster.

    Each chain is a polyline of ``n_segments`` straight segments of length
    0.5-1.5, each turning 30-150 degrees left or right from the previous one.
    With probability ``bead_probability`` its points gather in ``n_beads``
    evenly spaced beads along the path (a chain of small blobs), else they are
    uniform along it; either way they scatter ``width`` across it.  The
    blobs are isotropic Gaussians.  Chains and blobs are placed at random, at
    least ``gap`` apart (the region they are placed in grows until they fit),
    so no two touch.

    Parameters
    ----------
    n_samples : int, default=300
        Points in the set, background noise included.
    n_chains : int, default=2
        Number of chains (at least 1).
    n_blobs : int, default=2
        Number of compact blobs (may be 0).
    n_features : int, default=2
        Dimension of the points, at least 2 (embedded at random beyond 2).
    n_segments : int or (int, int), default=(2, 6)
        Segments per chain, or the range each chain's number is drawn from; at most 10,000.
    width : float, default=0.03
        Standard deviation of the points across their chain's path.
    bead_probability : float, default=0.5
        Probability that a chain is beaded.
    n_beads : int or (int, int), default=(4, 20)
        Beads of a beaded chain, or the range drawn from; at most 2**30, its low end at most ``n_samples``
        (unless ``bead_probability=0``).
    blob_share : float, default=0.3
        Share of the structure points in the blobs (when ``n_blobs > 0``).
    blob_std : float or (float, float), default=(0.03, 0.12)
        Standard deviation of a blob, or the range drawn from (log-uniformly).
    gap : float, default=0.25
        Smallest distance between the points of two different clusters.
    taper : float or (float, float), default=0.0
        How fast the points of a chain that is not beaded thin out along it: density
        ``(1 - s / length) ** taper`` at arc length ``s``, dense at its start and sparse at its end (``0``:
        uniform), or the range each such chain draws it from.
    noise_fraction : float, default=0.0
        Share of the points that is uniform background noise, each noise point with its own label.
    embed_noise : float, default=0.0
        Standard deviation of the noise in the dimensions beyond the plane.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The points, shuffled.
    y : ndarray of shape (n_samples,)
        Labels: chains ``0..n_chains-1``, blobs after them, noise points after those (one label each).

    Examples
    --------
    >>> from skabc.datasets import make_chains_set
    >>> X, y = make_chains_set(n_samples=200, n_chains=2, n_blobs=1, random_state=0)
    >>> X.shape, int(y.max()) + 1
    ((200, 2), 3)
    """
    n_samples = _check_int("n_samples", n_samples)
    n_chains = _check_int("n_chains", n_chains)
    n_blobs = _check_int("n_blobs", n_blobs, 0)
    n_features = _check_int("n_features", n_features, 2)
    _check_output_size(n_samples, n_features, "n_samples and n_features")
    seg_low, seg_high = _check_range("n_segments", n_segments, 1, integer=True)
    if seg_high > MAX_SEGMENTS:
        raise ValueError(f"n_segments must be at most {MAX_SEGMENTS} (segments of one chain), got {n_segments!r}.")
    width = _check_real("width", width)
    bead_probability = _check_real("bead_probability", bead_probability, 0.0, 1.0)
    bead_low, bead_high = _check_range("n_beads", n_beads, 2, integer=True)
    if bead_probability > 0 and bead_low > n_samples:  # no count asked for can be filled (np.arange(2e8): 3.4 GB)
        raise ValueError(f"n_beads must allow at most n_samples={n_samples} beads (a bead holds points), "
                         f"got {n_beads!r}.")
    if bead_high > MAX_BEADS:
        raise ValueError(f"n_beads must be at most {MAX_BEADS:,} (beads of one chain), got {n_beads!r}.")
    blob_share = _check_real("blob_share", blob_share, 0.0, 1.0, open_max=True)
    std_low, std_high = _check_range("blob_std", blob_std, 0.0, positive=True)
    gap = _check_real("gap", gap)
    taper_low, taper_high = _check_range("taper", taper, 0.0)
    noise_fraction = _check_noise_fraction(noise_fraction)
    embed_noise = _check_real("embed_noise", embed_noise)
    k = n_chains + n_blobs
    n_structure, n_noise = _split_noise(n_samples, noise_fraction, k, "n_chains + n_blobs")
    rng = check_random_state(random_state)

    X, y = _chain_set_points(rng, n_structure, n_chains, n_blobs, (seg_low, seg_high), width, bead_probability,
                             (bead_low, bead_high), blob_share, (std_low, std_high), gap, (taper_low, taper_high))
    return _finish(rng, X, y, n_noise, n_features, embed_noise)


def _chain_set_points(rng, n: int, n_chains: int, n_blobs: int, segments: tuple[int, int], width: float,
                      bead_probability: float, beads: tuple[int, int], blob_share: float,
                      blob_std: tuple[float, float], gap: float,
                      taper: tuple[float, float] = (0.0, 0.0)) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` structure points of :func:`make_chains_set` in the plane, and their labels.

    A chain that is not beaded draws its ``taper`` from the range (uniformly), unless the range is ``(0, 0)``:
    then nothing is drawn, so the sets of a seed stay those drawn before tapers existed.
    """
    n_blob_points = round(blob_share * n) if n_blobs else 0
    n_blob_points = min(max(n_blob_points, n_blobs), n - n_chains)
    chain_counts = _split_counts(rng, n - n_blob_points, np.ones(n_chains))
    blob_counts = _split_counts(rng, n_blob_points, np.ones(n_blobs)) if n_blobs else np.zeros(0, dtype=int)
    shapes = []
    for c in range(n_chains):
        vertices = _polyline(rng, rng.randint(segments[0], segments[1] + 1), (0.5, 1.5), (np.pi / 6, 5 * np.pi / 6))
        n_beads = rng.randint(beads[0], beads[1] + 1) if rng.uniform() < bead_probability else None
        tapering = n_beads is None and taper[1] > 0
        chain_taper = rng.uniform(*taper) if tapering else 0.0
        shapes.append(_chain_points(rng, chain_counts[c], vertices, width, n_beads, chain_taper))
    for b in range(n_blobs):
        std = float(_log_uniform(rng, *blob_std))
        shapes.append(rng.normal(0, std, (blob_counts[b], 2)))
    X = np.concatenate(_place(rng, shapes, gap))
    return X, np.repeat(np.arange(n_chains + n_blobs), [len(s) for s in shapes])


def _place(rng, shapes: list[np.ndarray], gap: float) -> list[np.ndarray]:
    """Shift each shape to a random spot at least ``gap`` from those placed before (the region grows if needed)."""
    with np.errstate(over="ignore", invalid="ignore"):
        box = max(float(np.ptp(np.concatenate(shapes), axis=0).max()), 1.0)
    placed, tree = [], None
    for shape in shapes:
        attempt = 0
        while True:
            if not np.isfinite(2 * box):  # a width or spread near 1e308: the region to draw from overflows
                raise overflow_error()
            moved = shape + rng.uniform(-box, box, 2)
            # Nearest placed point of each moved point (a k-d tree: no n x m distance matrix for large sets).
            if tree is None or tree.query(moved, k=1)[0].min() >= gap:
                break
            attempt += 1
            if attempt % _PLACEMENT_TRIES == 0:
                box *= 1.25  # room for it further out: far enough, every spot fits
        placed.append(moved)
        tree = cKDTree(np.concatenate(placed))
    return placed
