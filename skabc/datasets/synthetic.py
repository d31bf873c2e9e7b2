"""Labelled clustering sets of the shapes people cluster, in 1 to ~100 dimensions.

The families live in :mod:`~skabc.datasets.blobs`, :mod:`~skabc.datasets.shapes` and
:mod:`~skabc.datasets.transforms`; this module mixes them.  Every ``make_*_set``
generator draws **one** set and returns ``(X, y)``: the points, shuffled, and
their cluster labels ``0..k-1``.  :func:`make_clustering_sets` draws many sets
from a mixture of these families and stacks them, zero-padded to one width, as
``(X, y, groups)`` ready for :class:`skabc.ContextualKernel`.

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
from typing import TYPE_CHECKING

import numpy as np
from sklearn.utils import check_random_state

from .._typing import Float, Int
from ._common import (
    _check_int,
    _check_output_size,
    _check_range,
    _check_real,
    _discretize,
    _finish,
    _log_uniform,
    _normalised,
    _size_weights,
    _split_counts,
)
from .blobs import _blob_points
from .chains import _chain_set_points
from .informative import _informative_points
from .mixtures import _subspace_points, _warped_points
from .shapes import CURVE_KINDS, _curve_points, _moon_points, _ring_points

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

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

#: Every family :func:`make_clustering_sets` can draw.  The last seven (``'scattered'`` ... ``'informative'``) are
#: not in the default mixture (the shipped generic kernel's first phases were trained without them, and the
#: default must keep drawing the same sets); name them in ``families`` to use them.
FAMILIES = (*FAMILY_WEIGHTS, "scattered", "subspaces", "warped", "separated", "chains", "tapered", "informative")

# Families whose structure lives in a plane: they need n_features >= 2.
_PLANAR_FAMILIES = frozenset({"rings", "moons", "curves", "mixed", "separated", "chains", "tapered"})


def _name_order(name) -> tuple:
    """Sort key of a family name: strings in order, anything else after them (by repr)."""
    return (0, name) if isinstance(name, str) else (1, repr(name))


def _check_families(families) -> tuple[list[str], np.ndarray]:
    if families is None:
        families = FAMILY_WEIGHTS
    elif isinstance(families, str):
        families = {families: 1.0}
    elif isinstance(families, (set, frozenset)):  # no order of its own: sorted, so a seed gives the same sets
        # Names of other types cannot be sorted with strings: they are unknown names, refused below.
        families = dict.fromkeys(sorted(families, key=_name_order), 1.0)
    elif not isinstance(families, Mapping):
        try:
            families = dict.fromkeys(families, 1.0)
        except TypeError:
            raise TypeError(f"families must be a family name, a sequence of names or a mapping of names to "
                            f"weights, got {families!r}.") from None
    unknown = [name for name in families if not isinstance(name, str) or name not in FAMILIES]
    if unknown or not families:
        raise ValueError(f"families must name some of {sorted(FAMILIES)}, got {families!r}.")
    names = list(families)
    weights = np.array([_check_real(f"families[{name!r}]", families[name]) for name in names])
    if weights.max() <= 0:
        raise ValueError(f"families needs a positive weight, got {families!r}.")
    return names, _normalised(weights)


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
    elif family == "subspaces":
        k = _draw_k(rng, 2, max_clusters, limit)
        counts = _split_counts(rng, n_struct, _size_weights(rng, k, rng.uniform(0.0, 1.0)))
        X, y = _subspace_points(rng, counts, d, (1, min(8, d)), rng.uniform(0.7, 3.0), _log_uniform(rng, 0.02, 0.3))
        if rng.uniform() < 0.25:  # tables with some coarse or ordinal columns
            X = _discretize(rng, X, rng.uniform(0.1, 0.6), (2, 10))
    elif family == "warped":
        k = _draw_k(rng, 1, max_clusters, limit)
        counts = _split_counts(rng, n_struct, _size_weights(rng, k, rng.uniform(0.0, 1.0)))
        X, y = _warped_points(rng, counts, min(d, _draw_dimension(rng, 2, 8)), (1.0, _log_uniform(rng, 1.0, 3.0)),
                              rng.uniform(0.5, 2.0), (1, 4), (0.5, 0.95))
    elif family == "separated":
        k = _draw_k(rng, 2, 6, limit)
        X, y = _ring_points(rng, n_struct, k, "separated", (0.3, 1.0), 1.0, rng.uniform(0.0, 0.04),
                            rng.uniform(0.0, 0.5), _log_uniform(rng, 0.1, 1.0))
    elif family in ("chains", "tapered"):
        n_chains = _draw_k(rng, 1, 4, limit)
        n_blobs = int(rng.randint(0, max(0, min(4, limit - n_chains)) + 1))
        tapered = family == "tapered"
        X, y = _chain_set_points(rng, n_struct, n_chains, n_blobs, (2, 6), _log_uniform(rng, 0.01, 0.06),
                                 0.0 if tapered else 0.5, (4, 20), rng.uniform(0.1, 0.5), (0.03, 0.15), 0.25,
                                 (1.0, 4.0) if tapered else (0.0, 0.0))
    elif family == "informative":
        k = _draw_k(rng, 2, min(8, max_clusters), limit)
        m = int(rng.randint(1, min(4, d) + 1))
        d = m + int(rng.randint(0, min(d - m, 2 * m + 2) + 1))  # axis-aligned: never embedded wider
        counts = _split_counts(rng, n_struct, _size_weights(rng, k, rng.uniform(0.0, 1.0)))
        X, y = _informative_points(rng, counts, m, d, _log_uniform(rng, 1.0, 2.0, k),
                                   (1.0, _log_uniform(rng, 1.0, 3.0)), rng.uniform(1.0, 3.0), (0.5, 2.0))
    elif family == "uniform":
        X = rng.uniform(-1, 1, (n_struct, d0)) * _log_uniform(rng, 0.2, 1.0, d0)
        y = np.zeros(n_struct, dtype=np.int64)
    elif family == "mixed":
        n_curved = min(n_struct, max(1, round(n_struct * rng.uniform(0.4, 0.8))))
        shape = rng.choice(["rings", "moons", "curves"])
        X, y = _planar(rng, shape, n_curved, 1, min(3, max(1, limit - 1)))
        if limit - (int(y.max()) + 1) < 1 and n_curved < n_struct:
            # No cluster left for blobs (max_clusters=1): the curved part takes every point of the set.
            X, y = _planar(rng, shape, n_struct, 1, 1)
        room = min(limit - (int(y.max()) + 1), n_struct - len(y))
        k_blobs = _draw_k(rng, 1, 6, room) if room >= 1 else 0
        if k_blobs:
            # A curved part of one point has no extent: blobs of zero spread would all sit on that point.
            extent = float((X.max(axis=0) - X.min(axis=0)).max()) or 1.0
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
    n_sets: Int = 100,
    set_size: Int | tuple[Int, Int] = (200, 600),
    *,
    families=None,
    n_features: Int | tuple[Int, Int] = (1, 100),
    max_clusters: Int = 15,
    max_features: Int | None = None,
    noise_probability: Float = 0.3,
    noise_fraction: Float | tuple[Float, Float] = (0.01, 0.1),
    dtype: DTypeLike = np.float32,
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
    - ``'subspaces'`` (not in the default mixture): 2 to ``max_clusters``
      clusters in all ``d`` dimensions, each varying along a random subspace
      of its own of 1-8 dimensions (:func:`~skabc.datasets.make_subspace_set`,
      ``separation`` 0.7-3, ambient noise 0.02-0.3); a quarter of these sets
      have 10-60% of their columns discretised to 2-10 levels
      (:func:`~skabc.datasets.discretize_columns`).
    - ``'warped'`` (not in the default mixture): 1 to ``max_clusters``
      blobs in 2-8 dimensions bent by 1-4 random invertible residual layers
      (:func:`~skabc.datasets.make_warped_set`).
    - ``'separated'`` (not in the default mixture): 2-6 circles apart from
      each other, gaps 0.1-1 (log-uniform) for radii 0.3-1
      (:func:`~skabc.datasets.make_rings_set` with ``layout='separated'``).
    - ``'chains'`` (not in the default mixture): 1-4 thin zigzags of 2-6
      segments, half of them beaded (4-20 beads), with 0-4 compact blobs
      holding 10-50% of the points, width 0.01-0.06 (log-uniform)
      (:func:`~skabc.datasets.make_chains_set`).
    - ``'tapered'`` (not in the default mixture): the same, no chain beaded, each chain's points
      thinning out from one end to the other (``taper`` 1-4): sparse ends that a neighbourhood graph
      cuts off in small pieces.
    - ``'informative'`` (not in the default mixture): 2-8 Gaussian blobs (at most ``max_clusters``) in
      1-4 columns of a table, next to up to ``2m + 2`` columns of pure noise (``m`` informative columns),
      never rotated (:func:`~skabc.datasets.make_informative_set`): the set is as wide as its columns,
      at most ``d``, the other columns zero.

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
    size_low, size_high = _check_range("set_size", set_size, 1, integer=True, count=True)
    d_low, d_high = _check_range("n_features", n_features, 1, integer=True, count=True)
    max_clusters = _check_int("max_clusters", max_clusters)
    if max_features is not None:
        max_features = _check_int("max_features", max_features)
        if max_features < d_high:
            raise ValueError(f"max_features={max_features} is smaller than the largest n_features ({d_high}).")
    # The least these sizes can return, then (below) what the sets drawn so far return.
    width_name = "n_sets, set_size and " + ("n_features" if max_features is None else "max_features")
    _check_output_size(n_sets * size_low, max_features or d_low, width_name)
    noise_probability = _check_real("noise_probability", noise_probability, 0.0, 1.0)
    frac_low, frac_high = _check_range("noise_fraction", noise_fraction, 0.0)
    if frac_high >= 1:
        raise ValueError(f"noise_fraction must be below 1, got {noise_fraction!r}.")
    if not isinstance(dtype, (type, np.dtype, str)):  # np.dtype(0.5) is float64: a value is no type
        raise ValueError(f"dtype must be a floating-point type (e.g. np.float32), got {dtype!r}.")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be a floating-point type (e.g. np.float32), got {dtype!r}.") from None
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a floating-point type, got {dtype}.")
    names, weights = _check_families(families)

    rng = check_random_state(random_state)
    drawn = rng.choice(len(names), size=n_sets, p=weights)
    sets, rows, widest = [], 0, 0
    for index in drawn:
        family = names[index]
        if family in _PLANAR_FAMILIES and d_high < 2:
            family = "blobs"
        n = int(rng.randint(size_low, size_high + 1))
        d = _draw_dimension(rng, max(d_low, 2) if family in _PLANAR_FAMILIES else d_low, d_high)
        rows, widest = rows + n, max(widest, d)
        _check_output_size(rows, max_features or widest, width_name)
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

