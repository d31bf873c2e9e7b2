"""Splitting a cluster that is two touching Gaussian blobs: the last step of an estimate of ``k``.

Blobs that touch are where every partition an arbiter weighs counts one
cluster too few: the learned kernel gives two touching blobs one block of
high affinity, and a kNN graph links them, yet cut into the right number of
pieces the same affinity separates them.  A Gaussian mixture tells them
apart, and cuts curved shapes into pieces.  This step asks the narrower
question once per cluster of the chosen partition (G-means, Hamerly & Elkan
2003, one level, with a density test): do two Gaussians explain it better
than one (BIC), is each of the two itself one Gaussian rather than two, and
is the density lower where they meet than inside each of them?  A moon or a
ring cut in two leaves curved halves, one curved cluster has no density
valley between its arms, and one heavy-tailed blob is no dense core beside
a sparse shell, so all stay whole.

Only sets whose mixture features (:func:`~skabc.spectral.mixture.mixture_features`)
have at most :data:`MAX_SPLIT_FEATURES` columns are tested, and only
clusters large enough for a full covariance to be told from two.  The step is
deterministic: its mixtures start from a fixed seed, so the labels depend on
``random_state`` only through the partition it splits.  Designed and chosen
by ``benchmarks/gaussian_split.py`` (design v4).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_array, column_or_1d
from sklearn.utils.extmath import randomized_svd, row_norms

from .._typing import Int
from .mixture import MAX_MIXTURE_FEATURES, fit_mixture, mixture_features
from .step import compact

#: Widest mixture features tested (full covariances need points; wider sets are left as they are).
MAX_SPLIT_FEATURES = 8
#: Points per parameter of one full-covariance component that each half must hold (the half's own test of
#: one Gaussian against two needs the power: with fewer, a non-Gaussian half passes as one).
CHILD_POINTS_PER_PARAMETER = 5
#: Fewest points either half may hold, however few columns (its own one-or-two-Gaussians test needs them).
MIN_CHILD_POINTS = 10
#: Smallest share of its cluster either half may hold.
MIN_CHILD_SHARE = 0.1
#: Neighbours whose distance measures the density of a point within its cluster.
VALLEY_NEIGHBORS = 10
#: Largest density where the halves meet, relative to the median density of each half, that still counts as a
#: valley between them.
MAX_VALLEY_DENSITY = 0.7
#: Rows of one cluster its tests are run on (a seeded draw beyond; the halves then come from the fitted mixture).
MAX_TESTED_ROWS = 20_000
#: Rows a set's width is judged on before its mixture features are computed (wide sets are never split).
WIDTH_CHECK_ROWS = 2000
#: A direction counts as kept by the features where its spread exceeds this share of the set's largest centred row
#: norm (the features keep spreads above 1e-12 of their largest value: a margin for the randomised projection).
WIDTH_CHECK_TOLERANCE = 1e-6
#: Seed of every mixture this step fits.
SPLIT_SEED = 0
#: Ending of ``candidate_`` where this step split some clusters of the kept candidate.
SPLIT_SUFFIX = "+gaussian-split"


def split_gaussian_clusters(X, labels: np.ndarray, max_clusters: Int) -> np.ndarray:
    """``labels`` with every cluster that is two touching Gaussian blobs split in two.

    A cluster is split when a two-component full-covariance Gaussian mixture
    has a lower BIC on it than one component, each half (the mixture's
    assignment) holds at least :data:`CHILD_POINTS_PER_PARAMETER` points per
    parameter of a component and :data:`MIN_CHILD_SHARE` of the cluster, each
    half has a lower BIC with one component than with two, and the density
    where the halves meet is below :data:`MAX_VALLEY_DENSITY` of the median
    density of each half (:func:`valley_density`).  Clusters are tested in order of their ids, one split
    each, while fewer than ``max_clusters``; a cluster of more than :data:`MAX_TESTED_ROWS` rows is tested on
    a seeded draw of that many, and all its rows take the half the fitted mixture gives them.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The set's rows.
    labels : ndarray of shape (n_samples,)
        Its partition, compact ids.
    max_clusters : int
        Most clusters after the splits.

    Returns
    -------
    labels : ndarray of shape (n_samples,)
        Compact ids, in order of first appearance; the ``labels`` given (the same object) where nothing is split.

    Examples
    --------
    >>> import numpy as np
    >>> from skabc.spectral.split import split_gaussian_clusters
    >>> rng = np.random.default_rng(0)
    >>> touching = np.vstack([rng.normal(0, 1, (200, 2)), rng.normal([4, 0], 1, (200, 2))])
    >>> np.bincount(split_gaussian_clusters(touching, np.zeros(400, dtype=int), max_clusters=10))
    array([204, 196])
    """
    X = check_array(X, accept_sparse="csr", dtype=(np.float64, np.float32))
    checked = column_or_1d(labels)
    # Nothing split: the caller's own array back (a caller may test identity), or the checked copy of a list.
    given = labels if isinstance(labels, np.ndarray) and labels.ndim == 1 else checked
    labels = checked
    if len(labels) != X.shape[0] or labels.dtype.kind not in "iu" or labels.min() < 0:
        raise ValueError(f"labels must be {X.shape[0]} non-negative integer ids, one per row of X; got "
                         f"{len(labels)} of dtype {labels.dtype}.")
    if X.shape[0] < 2 * MIN_CHILD_POINTS:  # no cluster to split (a set of one row has no features to fit)
        return given
    if _certainly_wider_than(X, MAX_SPLIT_FEATURES):  # before the projection of every row, which it would discard
        return given
    Z = mixture_features(X, SPLIT_SEED)
    d = Z.shape[1]
    if d > MAX_SPLIT_FEATURES:
        return given
    parameters = d + d * (d + 1) // 2
    smallest = max(MIN_CHILD_POINTS, CHILD_POINTS_PER_PARAMETER * (parameters + 1))
    out, next_id, split = labels.copy(), int(labels.max()) + 1, False
    for cluster in np.unique(labels):
        rows = np.flatnonzero(labels == cluster)
        if next_id >= max_clusters:
            break
        if len(rows) < 2 * smallest:
            continue
        # Tested on at most MAX_TESTED_ROWS of the cluster's rows (its cost grows with them, the rest of the fit's
        # does not past max_samples); every row then takes the half the two Gaussians give it.
        tested = rows if len(rows) <= MAX_TESTED_ROWS else np.sort(
            np.random.default_rng(SPLIT_SEED).choice(rows, MAX_TESTED_ROWS, replace=False))
        two = _two_gaussians(Z[tested], max(smallest, MIN_CHILD_SHARE * len(tested)))
        half = None if two is None else two.predict(Z[rows]).astype(bool)
        if half is not None and half.any() and not half.all():  # a draw's halves could leave one side empty
            out[rows[half]] = next_id
            next_id, split = next_id + 1, True
    return compact(out) if split else given


def _two_gaussians(Z: np.ndarray, smallest: float):
    """The two-component mixture where the cluster ``Z`` passes every test (its ``predict`` gives the halves),
    else ``None``."""
    one, two = fit_mixture(Z, 1, "full", SPLIT_SEED), fit_mixture(Z, 2, "full", SPLIT_SEED)
    if two.bic(Z) >= one.bic(Z):
        return None
    half = two.predict(Z).astype(bool)
    if min(half.sum(), (~half).sum()) < smallest:
        return None
    for part in (Z[~half], Z[half]):
        if fit_mixture(part, 1, "full", SPLIT_SEED).bic(part) > fit_mixture(part, 2, "full", SPLIT_SEED).bic(part):
            return None  # a half that is itself two Gaussians: a curved or chained shape, not two blobs
    return two if valley_density(Z, half) < MAX_VALLEY_DENSITY else None


def _certainly_wider_than(X, width: int) -> bool:
    """Whether the mixture features of ``X`` have more than ``width`` columns, judged before they are computed.

    Only for dense sets wider than :data:`~skabc.spectral.mixture.MAX_MIXTURE_FEATURES` (the features are then a
    projection of every row on its leading principal components, costly and discarded when too wide): ``True``
    where the ``width + 1``-th direction of at most :data:`WIDTH_CHECK_ROWS` rows spreads beyond
    :data:`WIDTH_CHECK_TOLERANCE` of the largest centred row norm of ``X``.  A row subset spreads no more in
    any direction than the set, a randomised SVD does not overstate, and no projected value exceeds that norm,
    so the features keep that direction too (their rule drops spreads under 1e-12 of their largest value):
    ``True`` never changes a split; ``False`` leaves it to the features.
    """
    n, d = X.shape
    if sp.issparse(X) or d <= MAX_MIXTURE_FEATURES or n - 1 <= width:
        return False
    rows = np.asarray(X[:: -(-n // WIDTH_CHECK_ROWS)], dtype=np.float64)
    if rows.shape[0] <= width:
        return False
    with np.errstate(over="ignore", invalid="ignore"):  # extreme magnitudes overflow to inf: answered False
        largest = float(row_norms(X).max() + np.linalg.norm(X.mean(axis=0, dtype=np.float64)))
        values = randomized_svd(rows - rows.mean(axis=0), width + 1, random_state=SPLIT_SEED)[1]
        return bool(values[width] / np.sqrt(n) > WIDTH_CHECK_TOLERANCE * largest)


def valley_density(Z: np.ndarray, half: np.ndarray) -> float:
    """Density where the two halves of ``Z`` meet, over the median density of the sparser half.

    A point's density is measured by the distance ``r`` to its
    :data:`VALLEY_NEIGHBORS`-th neighbour within ``Z`` (``r ** -d``); the halves meet at
    the points whose neighbours lie in both.  Below 1, the density dips where they meet below
    the typical density of both halves; a dense core and the sparse shell around it (one
    heavy-tailed cluster) meet at a density above the shell's.  ``0`` where no point has
    neighbours in both halves: they do not touch.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, d)
        One cluster's mixture features.
    half : ndarray of bool of shape (n_samples,)
        Which half each point is in.

    Returns
    -------
    ratio : float
    """
    half = np.asarray(half)
    if half.dtype != bool or half.shape != (len(Z),):  # 0/1 integers would index rows, not mask them
        raise ValueError(f"half must be a boolean array of one entry per row of Z ({len(Z)}), got dtype "
                         f"{half.dtype} and shape {half.shape}")
    m = min(VALLEY_NEIGHBORS, len(Z) - 1)
    distances, neighbors = NearestNeighbors(n_neighbors=m + 1).fit(Z).kneighbors(Z)
    radius = np.maximum(distances[:, -1], 1e-12)
    meeting = (half[neighbors[:, 1:]] != half[:, None]).any(axis=1)
    if not meeting.any():
        return 0.0
    sparser = max(np.median(radius[half]), np.median(radius[~half]))
    return float((sparser / np.median(radius[meeting])) ** Z.shape[1])


__all__ = ["SPLIT_SUFFIX", "split_gaussian_clusters", "valley_density"]
