"""Estimators of the number of clusters, and the registry that ABCClustering's ``n_clusters_selection`` names.

Every selector has one signature, ``selector(step, affinity, probabilities,
eigen_seed, seed) -> Selection``: ``affinity`` is what the spectral step
clusters (the kernel's output raised to ``affinity_power``), ``probabilities``
the kernel's output itself.  A selector that already clustered the set (the
likelihood compares partitions; the sparse eigengap shares its eigensolve
with the embedding) returns the labels too.  Adding one is one function and
one line in :data:`N_CLUSTERS_SELECTORS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import TYPE_CHECKING, Literal

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .._typing import Float, Int
from ._affinity_checks import scale_free
from .assign import _check_assign_labels, embedding_labels, spectral_labels
from .eigen import (
    _check_eigen_solver,
    _smallest_eigenpairs,
    laplacian_eigenvalues,
    top_eigenvectors,
)
from .likelihood import pair_log_likelihood
from .rotation import rotation_n_clusters

if TYPE_CHECKING:
    from .step import SpectralStep

#: How many eigengap candidates ``n_clusters_selection='likelihood'`` compares.
LIKELIHOOD_CANDIDATES = 5


#: Laplacian eigenvalues below this count as zero: one per connected component of the affinity.
ZERO_EIGENVALUE = 1e-8
#: A float32 spectrum whose eigenvalues all lie below this may be zeros only: it is solved again in float64.
SINGLE_PRECISION_ZERO = 1e-4
#: Laplacian eigenvalues closer than this are one repeated eigenvalue (exact blocks, copies of rows): a float32
#: affinity, as every learned one is, moves them apart by about 1e-7.
TIED_EIGENVALUES = 1e-6


def _largest_eigengap(eigenvalues: np.ndarray) -> int:
    """``k = argmax_i (lambda_{i+1} - lambda_i)`` (1-based) of ascending eigenvalues.

    Where every eigenvalue compared is zero, the affinity has at least that many connected components:
    the largest gap lies beyond them, and the most clusters these eigenvalues can say (their number
    minus one) is returned, not the ``k = 1`` that an argmax over equal (zero) gaps would give.
    """
    values = np.asarray(eigenvalues, dtype=np.float64)
    if len(values) > 1 and values[-1] < ZERO_EIGENVALUE:
        return len(values) - 1
    return int(np.argmax(np.diff(values)) + 1)


def _eigengap_k(eigenvalues: np.ndarray, n_points: int, max_clusters: Int) -> int:
    """:func:`_largest_eigengap`, except where ``eigenvalues`` are the whole spectrum and all zero: every one of the
    ``n_points`` points is its own component, and ``k = n_points`` (within ``max_clusters``), not ``n_points - 1``
    clusters of which one joins two points that nothing links."""
    values = np.asarray(eigenvalues, dtype=np.float64)
    if 1 < n_points == len(values) <= max_clusters and values[-1] < ZERO_EIGENVALUE:
        return n_points
    return _largest_eigengap(values)


def estimate_n_clusters(
    affinity,
    max_clusters: Int,
    random_state: Int | np.random.RandomState | None = None,
    eigen_solver: str | None = None,
    eigen_tol: Float | Literal["auto"] = "auto",
    single_precision: bool = False,
) -> tuple[int, np.ndarray]:
    """Number of clusters by the largest eigengap of the normalised Laplacian.

    ``k = argmax_i (lambda_{i+1} - lambda_i)`` over ``1 <= k <= min(max_clusters, n - 1)``
    (von Luxburg 2007; ABC paper section 3.4).  ``k = 1`` is a valid answer, and so is ``k = n`` where no pair
    of the ``n <= max_clusters`` points is linked (every point its own component).

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric affinity, non-negative, or (dense) signed with no row summing below zero.
    max_clusters : int
        Largest ``k`` considered.
    random_state : int, RandomState instance or None, default=None
        Seeds the iterative eigensolvers.
    eigen_solver : {'arpack', 'lobpcg', 'amg'}, default=None
        Solver for sparse affinities, see :func:`laplacian_eigenvalues`.
    eigen_tol : float or 'auto', default='auto'
        Tolerance of the sparse solver.
    single_precision : bool, default=False
        A float32 dense solve, see :func:`laplacian_eigenvalues`.

    Returns
    -------
    n_clusters : int
    eigenvalues : ndarray
        The smallest Laplacian eigenvalues that were compared, ascending.
    """
    n = affinity.shape[0]
    if n < 2:
        return 1, np.zeros(n)
    cap = int(max(1, min(max_clusters, n - 1)))
    eigenvalues = laplacian_eigenvalues(
        affinity, cap + 1, random_state=random_state, eigen_solver=eigen_solver, eigen_tol=eigen_tol,
        single_precision=single_precision,
    )
    if single_precision and eigenvalues[-1] < SINGLE_PRECISION_ZERO:
        # All near zero: more components than were counted, and float32's errors (~1e-7) hide which are exactly 0.
        eigenvalues = laplacian_eigenvalues(affinity, cap + 1, random_state=random_state, eigen_solver=eigen_solver,
                                            eigen_tol=eigen_tol)
    return _eigengap_k(eigenvalues, n, max_clusters), eigenvalues


#: Relative powers of :func:`consensus_n_clusters`: the affinity as given, two softer versions and one sharper.
CONSENSUS_POWERS = (0.25, 0.5, 1.0, 2.0)


def consensus_n_clusters(
    affinity,
    max_clusters: Int,
    random_state: Int | np.random.RandomState | None = None,
    eigen_solver: str | None = None,
    eigen_tol: Float | Literal["auto"] = "auto",
    powers: tuple[Float, ...] = CONSENSUS_POWERS,
) -> tuple[int, np.ndarray]:
    """Number of clusters by the median of eigengap estimates over powers of the affinity.

    The eigengap estimate of a soft affinity depends on how much it is
    sharpened: raised to a high power, a broad cluster next to tight ones
    falls apart into several (too many clusters); left soft, close clusters
    merge (too few).  This estimates ``k`` with :func:`estimate_n_clusters` on
    ``affinity ** r`` for every ``r`` in ``powers`` and returns the median of
    those estimates, rounded down: where the estimates disagree it lands
    between them instead of betting on one.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric non-negative affinity.
    max_clusters : int
        Largest ``k`` considered by every estimate.
    random_state : int, RandomState instance or None, default=None
        Seeds the iterative eigensolvers (the same seed for every power).
    eigen_solver : {'arpack', 'lobpcg', 'amg'}, default=None
        Solver for sparse affinities, see :func:`laplacian_eigenvalues`.
    eigen_tol : float or 'auto', default='auto'
        Tolerance of the sparse solver.
    powers : tuple of float, default=CONSENSUS_POWERS
        Positive exponents applied elementwise to ``affinity``.

    Returns
    -------
    n_clusters : int
    eigenvalues : ndarray
        The smallest Laplacian eigenvalues of ``affinity ** r`` for the
        ``r`` in ``powers`` closest to 1, ascending (those of ``affinity``
        itself with the default ``powers``).

    Raises
    ------
    ValueError
        If ``powers`` is empty or holds a non-positive or non-finite value,
        or if ``affinity`` has negative entries (fractional powers of them
        are not real).
    """
    powers = tuple(float(r) for r in powers)
    if not powers or not all(np.isfinite(r) and r > 0 for r in powers):
        raise ValueError(f"powers must be a non-empty tuple of positive finite numbers, got {powers!r}.")
    entries = affinity.data if sp.issparse(affinity) else np.asarray(affinity)
    lowest = np.min(entries) if entries.size else 0.0
    if lowest < 0:
        raise ValueError(
            f"The consensus estimate raises the affinity to fractional powers, so it must be non-negative; this one "
            f"has entries down to {lowest:.3g}. Use n_clusters_selection='eigengap' for a signed kernel."
        )
    # Powers of entries near 1e-200 underflow (a vote of k = 1), near 1e200 overflow; the Laplacian has no scale.
    affinity = scale_free(affinity, powers)
    reported = min(powers, key=lambda r: abs(np.log(r)))
    estimates, eigenvalues = [], None
    # A dense affinity's reported power first, so that its spectrum is there when the others agree early (below).
    # The median does not depend on the order, and every power gets the same seed.
    order = powers if sp.issparse(affinity) else sorted(powers, key=lambda power: power != reported)
    for r in order:
        powered = affinity if r == 1.0 else (affinity.power(r) if sp.issparse(affinity) else affinity**r)
        # Only the reported spectrum is read beyond its largest gap (the arbiter's features go down to 1e-12):
        # the others are solved in float32 (errors ~1e-7), which changes k only where two gaps tie that closely.
        k, values = estimate_n_clusters(
            powered, max_clusters, random_state=random_state, eigen_solver=eigen_solver, eigen_tol=eigen_tol,
            single_precision=r != reported,
        )
        estimates.append(k)
        if r == reported and eigenvalues is None:
            eigenvalues = values
        if (eigenvalues is not None and len(order) >= 3 and len(estimates) == len(order) - 1
                and len(set(estimates)) == 1 and (random_state is None or isinstance(random_state, Integral))):
            break  # all but one agree: the last vote cannot move the median (a solve saved; a caller's stream kept)
    return median_estimate(estimates), eigenvalues


def median_estimate(estimates) -> int:
    """The consensus of several estimates of ``k``: their median, rounded down.

    Parameters
    ----------
    estimates : sequence of int
        Non-empty.

    Returns
    -------
    n_clusters : int
    """
    return int(np.floor(np.median(estimates)))


def eigengap_candidates(eigenvalues: np.ndarray, n_candidates: Int, n_points: Int | None = None,
                        max_clusters: Int | None = None) -> list[int]:
    """The ``n_candidates`` values of ``k`` with the largest eigengaps, largest gap first.

    Parameters
    ----------
    eigenvalues : ndarray
        Smallest Laplacian eigenvalues, ascending (as :func:`estimate_n_clusters` returns them).
    n_candidates : int
        How many candidates at most.
    n_points : int, default=None
        The set's size, given with ``max_clusters``: where ``eigenvalues`` are the whole spectrum and all
        zero, no two points are linked and the one candidate is ``n_points`` (as :func:`estimate_n_clusters`
        answers, within ``max_clusters``), not ``n_points - 1``.
    max_clusters : int, default=None
        The largest ``k`` allowed, given with ``n_points``.

    Returns
    -------
    candidates : list of int
        ``k = i`` for the gaps ``lambda_{i+1} - lambda_i`` in decreasing order
        (ties: smaller ``k`` first); the first is the eigengap estimate.
    """
    values = np.asarray(eigenvalues, dtype=np.float64)
    gaps = np.diff(values)
    if gaps.size == 0:
        return [1]
    if values[-1] < ZERO_EIGENVALUE or values[0] >= 1.0 - TIED_EIGENVALUES:  # zeros only, or ones only (no
        # point linked, even to itself): every gap is equal, and the estimate is the one candidate
        return [_largest_eigengap(values) if n_points is None else _eigengap_k(values, n_points, max_clusters)]
    order = np.argsort(-gaps, kind="stable")[: max(1, int(n_candidates))]
    return [int(i) + 1 for i in order]


def eigengap_spectral_labels(
    affinity,
    max_clusters: Int,
    eigen_random_state: Int | np.random.RandomState | None = None,
    *,
    eigen_solver: str | None = None,
    n_components: Int | None = None,
    random_state: Int | np.random.RandomState | None = None,
    n_init: Int = 10,
    eigen_tol: Float | Literal["auto"] = "auto",
    assign_labels: str = "kmeans",
    verbose: bool = False,
) -> tuple[np.ndarray, int, np.ndarray]:
    """Eigengap estimate of ``k``, then spectral clustering into ``k`` clusters.

    The result is that of :func:`estimate_n_clusters` (seeded by
    ``eigen_random_state``) followed by :func:`spectral_labels` (seeded by
    ``random_state``).  A dense affinity takes exactly that path.  For a
    sparse one the two steps share a single eigensolve: the eigenvectors of
    the ``max_clusters + 1`` smallest eigenvalues, computed for the eigengap,
    already hold the spectral embedding, which on large graphs halves the
    time of the spectral step (the eigensolver dominates it).

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric non-negative affinity.
    max_clusters : int
        Largest ``k`` considered.
    eigen_random_state : int, RandomState instance or None, default=None
        Seeds the eigensolver (the eigengap's, and for sparse input the only one).
    eigen_solver, n_components, random_state, n_init : default=None, None, None, 10
        As for :func:`spectral_labels`; ``random_state`` seeds the label assignment
        (and, for dense input, scikit-learn's eigensolver).
    eigen_tol, assign_labels, verbose : default='auto', 'kmeans', False
        As for :func:`spectral_labels`.

    Returns
    -------
    labels : ndarray of shape (n,), int64
    n_clusters : int
        The eigengap estimate.
    eigenvalues : ndarray
        The smallest Laplacian eigenvalues compared, ascending.
    """
    params = dict(eigen_solver=eigen_solver, n_components=n_components, random_state=random_state, n_init=n_init,
                  eigen_tol=eigen_tol, assign_labels=assign_labels, verbose=verbose)
    n = affinity.shape[0]
    if not sp.issparse(affinity) or n < 2:
        n_clusters, eigenvalues = estimate_n_clusters(
            affinity, max_clusters, random_state=eigen_random_state, eigen_solver=eigen_solver, eigen_tol=eigen_tol
        )
        return spectral_labels(affinity, n_clusters, **params), n_clusters, eigenvalues
    _check_assign_labels(assign_labels)
    solver = _check_eigen_solver(eigen_solver)
    cap = int(max(1, min(max_clusters, n - 1)))
    n_eigen = int(min(cap + 1, n))
    wanted = 0 if n_components is None else int(min(n_components, n))
    values, vectors = _smallest_eigenpairs(
        affinity, max(n_eigen, wanted), solver, check_random_state(eigen_random_state), eigen_tol, vectors=True
    )
    eigenvalues = values[:n_eigen]
    n_clusters = _eigengap_k(eigenvalues, n, max_clusters)
    labels = embedding_labels(vectors, n_clusters, n_components=n_components, random_state=random_state,
                              n_init=n_init, assign_labels=assign_labels, verbose=verbose)
    return labels, n_clusters, eigenvalues


# ----------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Selection:
    """What a selector found: ``k``, the eigenvalues it compared, and the labels if it clustered already.

    Parameters
    ----------
    n_clusters : int
        The chosen ``k``.
    eigenvalues : ndarray or None
        The Laplacian eigenvalues the rule compared, smallest first (``None`` if it read none).
    labels : ndarray of shape (n_samples,) or None, default=None
        The partition, where the rule computed it on the way (else the step cuts the affinity into ``k``).
    """

    n_clusters: int
    eigenvalues: np.ndarray | None
    labels: np.ndarray | None = None


def select_eigengap(step: SpectralStep, affinity, probabilities, eigen_seed, seed) -> Selection:
    """The largest eigengap; on a sparse affinity one eigensolve also gives the embedding."""
    if sp.issparse(affinity):
        labels, k, eigenvalues = eigengap_spectral_labels(
            affinity, step.max_clusters, eigen_seed, random_state=seed, **step.embedding_params()
        )
        return Selection(k, eigenvalues, labels)
    k, eigenvalues = estimate_n_clusters(affinity, step.max_clusters, random_state=eigen_seed,
                                         eigen_solver=step.eigen_solver, eigen_tol=step.eigen_tol)
    return Selection(k, eigenvalues)


def select_consensus(step: SpectralStep, affinity, probabilities, eigen_seed, seed) -> Selection:
    """The median eigengap estimate over powers of the affinity (:func:`consensus_n_clusters`)."""
    k, eigenvalues = consensus_n_clusters(affinity, step.max_clusters, random_state=eigen_seed,
                                          eigen_solver=step.eigen_solver, eigen_tol=step.eigen_tol)
    return Selection(k, eigenvalues)


def select_likelihood(step: SpectralStep, affinity, probabilities, eigen_seed, seed) -> Selection:
    """Cluster for each eigengap candidate ``k``; keep the partition most likely under the probabilities."""
    values = probabilities.data if sp.issparse(probabilities) else probabilities
    if values.size and (np.min(values) < 0 or np.max(values) > 1):
        raise ValueError(
            "n_clusters_selection='likelihood' needs a kernel whose affinity holds same-cluster probabilities "
            f"in [0, 1]; this one gave values in [{np.min(values):.3g}, {np.max(values):.3g}]. "
            "Use n_clusters_selection='eigengap'."
        )
    # The candidates share one eigensolve.
    _, eigenvalues = estimate_n_clusters(affinity, step.max_clusters, random_state=eigen_seed,
                                         eigen_solver=step.eigen_solver, eigen_tol=step.eigen_tol)
    best_labels, best_score = None, -np.inf
    for k in eigengap_candidates(eigenvalues, LIKELIHOOD_CANDIDATES, affinity.shape[0], step.max_clusters):
        labels = step.labels_for(affinity, k, seed)
        score = pair_log_likelihood(probabilities, labels)
        if score > best_score:
            best_labels, best_score = labels, score
    return Selection(len(np.unique(best_labels)), eigenvalues, best_labels)


#: Most eigenvectors :func:`select_rotation` aligns (each more costs an ``n x c x c`` optimisation).
ROTATION_MAX_CLUSTERS = 20


def select_rotation(step: SpectralStep, affinity, probabilities, eigen_seed, seed) -> Selection:
    """Eigenvector alignment (Zelnik-Manor & Perona 2004), unless the eigengap sees no structure at all.

    The alignment only scores ``k >= 2``; a set whose largest eigengap says ``k = 1`` keeps one cluster.  One
    eigensolve gives the eigenvalues and the vectors aligned.  An affinity with more connected components than the
    eigenvectors aligned (every one of them has eigenvalue zero) has more clusters than the alignment can score:
    there the plain eigengap over ``max_clusters`` decides.
    """
    cap = rotation_cap(step, affinity.shape[0])
    if cap < 2:  # no k >= 2 to align (two points, or max_clusters=1): the eigengap, which also reads k = n
        return select_eigengap(step, affinity, probabilities, eigen_seed, seed)
    values, vectors = top_eigenvectors(affinity, cap + 1, random_state=eigen_seed, eigen_solver=step.eigen_solver,
                                       eigen_tol=step.eigen_tol)
    return rotation_selection(step, affinity, values, vectors, eigen_seed)


def rotation_cap(step: SpectralStep, n_samples: int) -> int:
    """Most clusters :func:`select_rotation` scores on a set of ``n_samples`` rows (it reads one eigenpair more)."""
    return int(min(step.max_clusters, ROTATION_MAX_CLUSTERS, n_samples - 1))


def rotation_selection(step: SpectralStep, affinity, values: np.ndarray, vectors: np.ndarray, eigen_seed) -> Selection:
    """:func:`select_rotation` from the smallest ``rotation_cap + 1`` (or more) eigenvalues and unit eigenvectors
    of ``affinity``, solved by the caller (for ``rotation_cap >= 2``): one solve can serve other rules too."""
    cap, window = rotation_cap(step, affinity.shape[0]), min(step.max_clusters, affinity.shape[0] - 1) + 1
    solved, values, vectors = values, values[: cap + 1], vectors[:, : cap + 1]
    if values[-1] < ZERO_EIGENVALUE:
        # Only zeros: more components than the alignment can score; the eigengap over max_clusters counts them
        # (max_clusters itself if there are more still), not a rotation of an arbitrary basis of their indicators.
        if len(solved) >= window:  # the caller's solve holds that eigengap's window (a shared one, or cap's)
            return Selection(_eigengap_k(solved[:window], affinity.shape[0], step.max_clusters), solved[:window])
        return Selection(*estimate_n_clusters(affinity, step.max_clusters, random_state=eigen_seed,
                                              eigen_solver=step.eigen_solver, eigen_tol=step.eigen_tol))
    if _largest_eigengap(values) == 1:
        return Selection(1, values)
    # A count inside a repeated eigenvalue (two exact blocks: [0, 0, 1, 1, ...]) cuts an arbitrary basis of it, and
    # an eigenvector of Laplacian eigenvalue >= 1 (adjacency eigenvalue <= 0) indicates no cluster: copies of rows
    # were split by one (two distinct rows, ten copies each: k = 11).
    allowed = (np.diff(values[: cap + 1])[1:] > TIED_EIGENVALUES) & (values[1:cap] < 1.0)  # c = 2..cap
    return Selection(rotation_n_clusters(vectors[:, :cap], cap, allowed=allowed), values)


#: ``n_clusters_selection`` name -> selector.
N_CLUSTERS_SELECTORS = {
    "eigengap": select_eigengap,
    "consensus": select_consensus,
    "likelihood": select_likelihood,
    "rotation": select_rotation,
}
