"""Eigensolvers of the normalised Laplacian, dense and sparse, with their fallbacks.

Every function takes a dense ``ndarray`` affinity or a scipy sparse one (e.g. the kNN affinity of
:func:`skabc.sparse_affinity.topk_affinity`).  Dense input takes LAPACK (or ARPACK beyond :data:`DENSE_EIGEN_LIMIT`); it
may be signed (a kernel such as ``'cosine'``, as scikit-learn takes it) while no row sums below zero.  Sparse input is
non-negative and never forms an ``n x n`` dense matrix: the graph is split into its connected components, and each
component's smallest Laplacian eigenpairs are found by an iterative solver (``eigen_solver``):

* ``'arpack'`` (default): ``eigsh`` for the largest eigenvalues of the normalised adjacency ``D^-1/2 A D^-1/2``
  (``which='LA'``), no factorisation;
* ``'lobpcg'``: LOBPCG for the smallest eigenvalues of ``L``;
* ``'amg'``: LOBPCG preconditioned by pyamg's smoothed aggregation (needs the optional ``pyamg`` package).

Solving per component makes disconnected graphs (common for kNN graphs of well-separated clusters) reliable: ``L`` then
has one zero eigenvalue per component, and a single Lanczos run on the whole graph tends to return fewer copies of a
repeated eigenvalue than it has; per component, the spectra are merged.  A graph with more components than eigenvalues
asked for gives all zeros, and the eigengap cannot see past them (it then answers the most clusters it can: the number
of eigenvalues minus one).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, eigh, eigvalsh
from scipy.sparse.csgraph import connected_components, reverse_cuthill_mckee
from scipy.sparse.linalg import ArpackError, eigsh, lobpcg
from sklearn.utils import check_random_state

from .._quiet_warnings import ignoring_warnings
from .._typing import Float, Int
from .._user_warnings import warn_user
from ..exceptions import SkabcWarning
from ._affinity_checks import (
    ASYMMETRY_WARNING,
    asymmetry,
    beyond_rounding,
    check_degrees,
    dense_affinity,
    rounding_rtol,
    scale_free,
    square_size,
)

# Up to this size the eigengap uses LAPACK (2,000 points: ~1 s; ARPACK converges slowly on the dozens of eigenvalues
# close to 1 of learned affinities: 28-180 s per load_digits set).
DENSE_EIGEN_LIMIT = 2500
# From this size up to DENSE_EIGEN_LIMIT a dense solve runs LAPACK in float32 (REFINED_EXTRA columns more than asked:
# float32 mixes nearly equal eigenvalues' vectors), refined in float64 (Rayleigh-Ritz): faster than ARPACK, which often
# fails on learned affinities (dozens of eigenvalues close to 1) and then cost 3-4x. Float64 LAPACK where the last
# Laplacian eigenvalue of the basis is below REFINED_MIN_GAP, or the error bound (residual^2 / gap) of one below
# REFINED_NEAR_ZERO is above REFINED_ZERO_ERROR, a tenth of the arbiter's zero (blocks linked at 1e-6: 6e-11 at 2,500).
DENSE_REFINED_MIN = 600
REFINED_EXTRA, REFINED_MIN_GAP, REFINED_NEAR_ZERO, REFINED_ZERO_ERROR = 8, 0.05, 1e-6, 1e-11
# Connected components of a sparse graph up to this size are solved densely (at most ~0.5 MiB each).
SPARSE_DENSE_LIMIT = 256
# A component on which ARPACK fails, or (up to this size) exceeds its restarts (a degenerate spectrum: 50 duplicated
# points of 2,000 took 196, the digest sets at most 17), is solved densely up to this size (~128 MiB), else by LOBPCG.
ARPACK_FALLBACK_DENSE_LIMIT, ARPACK_FALLBACK_MAXITER = 4096, 50
# Components of at least this size are reordered (RCM) and solved by float32 ARPACK, refined in double (see below).
ARPACK_LARGE_COMPONENT = 20_000

EIGEN_SOLVERS = ("arpack", "lobpcg", "amg")

_ARPACK_MIN_NCV = 40
_LOBPCG_TOL = 1e-5  # residual tolerance of LOBPCG for eigen_tol='auto'; eigenvalue errors are about its square
_LOBPCG_MAXITER = {"lobpcg": 2000, "amg": 200}
_LOBPCG_ACCEPT = 100.0  # LOBPCG residuals above this multiple of the tolerance are refused (ARPACK takes over),
_LOBPCG_MAX_RESIDUAL = 1e-2  # and above this at any tolerance (eigen_tol=0.5 accepted LOBPCG's random start)
_AMG_SHIFT = 1e-5  # diagonal shift of L for the AMG preconditioner only: a singular matrix makes a poor one
def normalized_adjacency(affinity):
    """``D^-1/2 A D^-1/2``, with rows of zero degree left at zero instead of dividing by 0.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Square; a dense one whose rows sum below zero, or a sparse one with negative entries, is refused.

    Returns
    -------
    adjacency : ndarray, or scipy.sparse.csr_matrix for sparse input
    """
    if sp.issparse(affinity):
        return _sparse_normalized_adjacency(_as_csr(affinity))[0]
    affinity = scale_free(dense_affinity(affinity))
    check_degrees(degree := affinity.sum(axis=1, dtype=np.float64))  # float64: a float32 sum left ~1e-8 at 0
    inv_sqrt = np.zeros_like(degree, dtype=np.float64)
    positive = degree > np.finfo(np.float64).tiny
    inv_sqrt[positive] = 1.0 / np.sqrt(degree[positive])
    adjacency = affinity * inv_sqrt[:, None]
    adjacency *= inv_sqrt[None, :]  # in place: one n x n temporary less (800 MB at 10,000 points)
    return adjacency


def laplacian_eigenvalues(
    affinity, n_eigenvalues: Int, random_state: Int | np.random.RandomState | None = None,
    eigen_solver: str | None = None, eigen_tol: Float | Literal["auto"] = "auto",
    single_precision: bool = False,
) -> np.ndarray:
    """Smallest ``n_eigenvalues`` eigenvalues of ``L = I - D^-1/2 A D^-1/2``, ascending.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric affinity (see the module notes for signs).  Dense: LAPACK up to :data:`DENSE_EIGEN_LIMIT` points (from
        :data:`DENSE_REFINED_MIN` in float32, refined in float64), else ARPACK on the normalised adjacency
        (``eigen_solver``, ``eigen_tol`` unused).  Sparse: per connected component, see the module notes.
    n_eigenvalues : int
        How many eigenvalues; capped at ``n``.
    random_state : int, RandomState instance or None, default=None
        Seeds the starting vectors of the iterative solvers.
    eigen_solver : {'arpack', 'lobpcg', 'amg'}, default=None
        Sparse solver; ``None`` is ``'arpack'``.  ``'amg'`` needs ``pyamg``.
    eigen_tol : float or 'auto', default='auto'
        Sparse solver tolerance: ``'auto'`` is machine precision for ARPACK and a residual of ``1e-5`` for LOBPCG.
    single_precision : bool, default=False
        Dense affinities of at most :data:`DENSE_EIGEN_LIMIT` points: LAPACK in float32 without the refinement,
        eigenvalues correct to about ``1e-6`` (returned as float64), entries below float32's smallest normal number
        set to 0.  Enough to compare eigengaps; not for reading eigenvalues close to zero.  Ignored for sparse and
        larger affinities.

    Returns
    -------
    eigenvalues : ndarray of shape (min(n_eigenvalues, n),)
        A disconnected sparse graph has one (numerically) zero eigenvalue per connected component; a row of zero
        degree gives eigenvalue 1.
    """
    solver = _check_eigen_solver(eigen_solver)
    n = square_size(affinity)  # before any early return: a non-square matrix is refused at every count
    n_eigenvalues = int(min(n_eigenvalues, n))
    if n_eigenvalues < 1:
        return np.zeros(0)
    if sp.issparse(affinity):
        return _smallest_eigenpairs(affinity, n_eigenvalues, solver, check_random_state(random_state), eigen_tol,
                                    vectors=False)[0]
    adjacency = normalized_adjacency(affinity)
    if single_precision and n <= DENSE_EIGEN_LIMIT:
        top = _largest_dense_eigenpairs(_single_precision(adjacency), n_eigenvalues, False)[0].astype(np.float64)
    else:
        top, _ = _dense_top_eigenpairs(adjacency, n_eigenvalues, random_state, vectors=False)
    return np.sort(1.0 - top)


def top_eigenvectors(
    affinity, n_vectors: Int, random_state: Int | np.random.RandomState | None = None,
    eigen_solver: str | None = None, eigen_tol: Float | Literal["auto"] = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Smallest Laplacian eigenvalues and the matching eigenvectors of ``D^-1/2 A D^-1/2``.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric affinity, non-negative, or (dense) signed with no row summing below zero.
    n_vectors : int
        How many pairs; capped at ``n``.
    random_state, eigen_solver, eigen_tol : default=None, None, 'auto'
        As for :func:`laplacian_eigenvalues`.

    Returns
    -------
    eigenvalues : ndarray of shape (m,)
        Ascending Laplacian eigenvalues (``1 -`` those of the normalised adjacency).
    vectors : ndarray of shape (n, m)
        Orthonormal eigenvectors of the normalised adjacency, column ``j`` for ``eigenvalues[j]``.
    """
    solver = _check_eigen_solver(eigen_solver)
    n = square_size(affinity)  # before any early return: a non-square matrix is refused at every count
    m = int(min(n_vectors, n))
    if m < 1:
        return np.zeros(0), np.zeros((n, 0))
    if sp.issparse(affinity):
        values, embedding = _smallest_eigenpairs(affinity, m, solver, check_random_state(random_state), eigen_tol,
                                                 vectors=True)
        return values, unit_eigenvectors(affinity, embedding)
    top, vectors = _dense_top_eigenpairs(normalized_adjacency(affinity), m, random_state, vectors=True)
    order = np.argsort(-top, kind="stable")
    return 1.0 - top[order], vectors[:, order]


def unit_eigenvectors(affinity, embedding: np.ndarray) -> np.ndarray:
    """The unit eigenvectors ``x`` of a sparse affinity's normalised adjacency behind its embedding ``D^-1/2 x``."""
    sqrt_degree = _sparse_normalized_adjacency(_as_csr(affinity))[1]
    vectors = embedding * np.where(sqrt_degree > 0, sqrt_degree, 1.0)[:, None]
    return vectors / np.maximum(np.linalg.norm(vectors, axis=0), np.finfo(float).tiny)


def _dense_top_eigenpairs(adjacency: np.ndarray, m: int, random_state, vectors: bool):
    """Largest ``m`` eigenvalues (and eigenvectors, else ``None``) of a dense normalised adjacency.

    LAPACK below :data:`DENSE_REFINED_MIN` points; from there to :data:`DENSE_EIGEN_LIMIT` float32 LAPACK refined
    in float64 where that is accurate (see the constants); beyond, ARPACK (seeded by ``random_state``).
    """
    n = adjacency.shape[0]
    if n > DENSE_EIGEN_LIMIT and m < n - 1:
        v0 = np.random.default_rng(None if random_state is None else random_state).uniform(-1, 1, n)
        result = eigsh(adjacency, k=m, which="LA", v0=v0, return_eigenvectors=vectors)
        return result if vectors else (result, None)
    if n >= DENSE_REFINED_MIN and m < n - 1:
        single, basis = _largest_dense_eigenpairs(_single_precision(adjacency), min(n - 1, m + REFINED_EXTRA), True)
        gap = 1.0 - single[0]  # the basis' last Laplacian eigenvalue: near-zero ones' distance to those outside
        if gap >= REFINED_MIN_GAP:
            values, refined, residuals = _rayleigh_ritz(adjacency, basis, residuals=True)
            if np.all(residuals[values > 1.0 - REFINED_NEAR_ZERO] ** 2 <= REFINED_ZERO_ERROR * gap):
                return values[-m:], (refined[:, -m:] if vectors else None)
    return _largest_dense_eigenpairs(adjacency, m, vectors)


def _single_precision(adjacency: np.ndarray) -> np.ndarray:
    """A float32 copy for LAPACK, entries below float32's smallest normal set to 0 (subnormals: a 7x slower solve)."""
    single = adjacency.astype(np.float32)
    single[np.abs(single) < np.finfo(np.float32).tiny] = 0.0
    return single


def _rayleigh_ritz(matrix, basis, residuals: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Eigenpairs of a symmetric ``matrix`` in the span of ``basis`` (approximate eigenvectors), in float64, ascending,
    and with ``residuals`` each pair's residual norm ``||matrix x - value x||`` (else ``None``).

    A refined eigenvalue errs by at most about its residual squared over its distance to the eigenvalues outside the
    span (from single-precision eigenvectors: residuals ~3e-7, errors ~1e-13 where that distance is ~1)."""
    basis, _ = np.linalg.qr(np.asarray(basis, dtype=np.float64))
    product = matrix @ basis
    projected = basis.T @ product
    values, rotation = eigh(0.5 * (projected + projected.T))
    vectors = basis @ rotation
    return values, vectors, np.linalg.norm(product @ rotation - vectors * values, axis=0) if residuals else None


def _largest_dense_eigenpairs(matrix: np.ndarray, m: int, vectors: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Largest ``m`` eigenvalues (ascending) of a dense symmetric matrix, and their eigenvectors if asked.

    LAPACK's subset driver (MRRR) can fail outright ("Internal Error") on highly degenerate spectra (cliques of
    identical rows); the full divide-and-conquer solve does not, at a few times the cost, so it takes over."""
    n = matrix.shape[0]
    try:
        if vectors:
            return eigh(matrix, subset_by_index=[n - m, n - 1])
        return eigvalsh(matrix, subset_by_index=[n - m, n - 1]), None
    except LinAlgError:
        if vectors:
            values, vecs = eigh(matrix, driver="evd")
            return values[n - m :], vecs[:, n - m :]
        return eigvalsh(matrix, driver="evd")[n - m :], None


def _check_eigen_solver(eigen_solver: str | None) -> str:
    if eigen_solver is None:
        return "arpack"
    if eigen_solver not in EIGEN_SOLVERS:
        raise ValueError(f"eigen_solver must be one of {EIGEN_SOLVERS} or None, got {eigen_solver!r}")
    return eigen_solver


def _import_pyamg():
    try:
        import pyamg
    except ImportError as exc:
        raise ValueError(
            "eigen_solver='amg' needs the optional package pyamg, which is not installed: "
            "pip install 'skabc[amg]' (or pyamg), or use eigen_solver='arpack' or 'lobpcg'."
        ) from exc
    return pyamg


def _as_csr(affinity) -> sp.csr_matrix:
    """A float64 CSR copy with canonical indices, checked finite, and symmetrised as scikit-learn's
    ``check_symmetric`` does (its warning said as the dense path says it, and only beyond rounding)."""
    if np.dtype(affinity.dtype).kind == "c":  # the float64 cast below would drop the imaginary part with a warning
        raise ValueError(f"affinity must hold real numbers, got dtype {affinity.dtype}")
    matrix = sp.csr_matrix(affinity, dtype=np.float64, copy=True)
    if matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"affinity must be square, got shape {matrix.shape}")
    matrix.sum_duplicates()
    if not np.all(np.isfinite(matrix.data)):
        raise ValueError("affinity contains NaN or infinite values")
    if np.any(matrix.data < 0):
        raise ValueError("affinity must be non-negative")
    largest = asymmetry(matrix)
    if largest < 1e-10:  # scikit-learn's check_symmetric tolerance: below it, the matrix stays as it is
        return matrix
    if beyond_rounding(largest, float(matrix.data.max(initial=0.0)), rounding_rtol(matrix.dtype)):
        warn_user(ASYMMETRY_WARNING)  # as the dense path says it (scikit-learn's words, as a SkabcWarning)
    return sp.csr_matrix(0.5 * (matrix + matrix.T))


def _sparse_normalized_adjacency(matrix: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """``D^-1/2 A D^-1/2`` of a CSR matrix, and ``sqrt(degree)`` (0 where the degree is 0)."""
    matrix = scale_free(matrix)
    degree = np.asarray(matrix.sum(axis=1)).ravel()
    sqrt_degree = np.zeros(matrix.shape[0])
    positive = degree > np.finfo(np.float64).tiny
    sqrt_degree[positive] = np.sqrt(degree[positive])
    inv_sqrt = np.zeros_like(sqrt_degree)
    inv_sqrt[positive] = 1.0 / sqrt_degree[positive]
    adjacency = matrix.copy()
    row_of_entry = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    adjacency.data *= inv_sqrt[row_of_entry] * inv_sqrt[adjacency.indices]
    return adjacency, sqrt_degree


def _smallest_eigenpairs(
    affinity, m: int, solver: str, rng: np.random.RandomState, eigen_tol, vectors: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``m`` smallest eigenvalues of the sparse normalised Laplacian, ascending; with ``vectors=True`` also the
    spectral embedding ``D^-1/2 x`` of their eigenvectors ``x`` (zero outside each vector's component), sign-fixed
    as scikit-learn does, shape ``(n, m)``."""
    if solver == "amg":
        _import_pyamg()  # fail before any work
    matrix = _as_csr(affinity)
    n = matrix.shape[0]
    adjacency, sqrt_degree = _sparse_normalized_adjacency(matrix)
    adjacency.eliminate_zeros()  # components as the Laplacian sees them: not through a zero-degree row's links
    n_comp, comp = connected_components(adjacency, directed=False)
    order = np.argsort(comp, kind="stable")
    bounds = np.searchsorted(comp[order], np.arange(n_comp + 1))
    sizes = np.diff(bounds)
    # Each component of positive degree has exactly one zero eigenvalue; zero-degree points give 1.
    proper = sqrt_degree[order[bounds[:-1]]] > 0  # a component's points all have degree > 0, or it is one point
    n_proper = int(proper.sum())
    per_component = max(1, m - n_proper + 1)

    found_values, found_vectors, found_rows, exact = [], [], [], []  # exact: found entries known exactly
    # Largest components first, so that ties (e.g. many zero eigenvalues) keep the big ones.
    for c in np.argsort(-sizes, kind="stable"):
        rows = order[bounds[c] : bounds[c + 1]]
        if not proper[c]:
            found_values.append(np.ones(1))
            found_vectors.append(np.ones((1, 1)))
            found_rows.append(rows)
            continue
        if per_component == 1:
            # Only the zero eigenpair is needed, and it is known exactly: x = sqrt(degree).
            x = sqrt_degree[rows]
            exact.append(len(found_values))
            found_values.append(np.zeros(1))
            found_vectors.append((x / np.linalg.norm(x))[:, None])
            found_rows.append(rows)
            continue
        block = adjacency if n_comp == 1 else adjacency[rows][:, rows]  # one component: rows == arange(n)
        values, vecs = _component_eigenpairs(
            block, sqrt_degree[rows], min(per_component, len(rows)), solver, rng, eigen_tol, vectors
        )
        found_values.append(values)
        found_vectors.append(vecs)
        found_rows.append(rows)

    all_values = np.concatenate(found_values)
    chosen = np.argsort(all_values, kind="stable")[:m]
    values = all_values[chosen]
    if not vectors:
        return values, None
    owner = np.repeat(np.arange(len(found_values)), [len(v) for v in found_values])
    column = np.concatenate([np.arange(len(v)) for v in found_values])
    embedding = np.zeros((n, len(chosen)))
    for j, pick in enumerate(chosen):
        embedding[found_rows[owner[pick]], j] = found_vectors[owner[pick]][:, column[pick]]
    # Recover u = D^-1/2 x (zero-degree points are their own component: D taken as 1).
    embedding /= np.where(sqrt_degree > 0, sqrt_degree, 1.0)[:, None]
    # Where x is exactly known, u is constant on its component: exactly so (k-means would split its last bits).
    for j in np.flatnonzero(np.isin(owner[chosen], exact)):
        rows = found_rows[owner[chosen[j]]]
        embedding[rows, j] = 1.0 / np.linalg.norm(sqrt_degree[rows])
    peak = np.argmax(np.abs(embedding), axis=0)
    embedding *= np.sign(embedding[peak, np.arange(embedding.shape[1])])
    return values, embedding


def _component_eigenpairs(
    adjacency: sp.csr_matrix,
    sqrt_degree: np.ndarray,
    m: int,
    solver: str,
    rng,
    eigen_tol,
    vectors: bool,
    fallback: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Smallest ``m`` eigenpairs of ``I - adjacency`` for one connected component.

    Should ARPACK fail (it can on nearly regular graphs, whose spectrum is highly degenerate: "no
    shifts could be applied"; up to :data:`ARPACK_FALLBACK_DENSE_LIMIT` points, also after
    :data:`ARPACK_FALLBACK_MAXITER` restarts), the component is solved again densely up to that size, else by
    LOBPCG.  Should LOBPCG not converge (it can return its starting guess with many eigenvalues on expander-like
    kNN graphs), the component is solved again by ARPACK, with a warning.  ``fallback=False`` stops these retries.
    """
    size = adjacency.shape[0]
    iterative_ok = m < size - 1 if solver == "arpack" else size >= 5 * (m + 1)  # lobpcg needs room
    if size <= SPARSE_DENSE_LIMIT or not iterative_ok:
        return _dense_eigenpairs(adjacency, m, vectors)
    if solver == "arpack":
        tol = 0.0 if eigen_tol == "auto" else float(eigen_tol)
        v0 = rng.uniform(-1, 1, size)
        # A wider Lanczos basis than ARPACK's default (2m + 1) converges ~2x faster on the tightly clustered small
        # eigenvalues of large kNN graphs, for n * 40 floats of memory.
        ncv = min(size, max(2 * m + 1, _ARPACK_MIN_NCV))
        order = None
        large = size >= ARPACK_LARGE_COMPONENT
        if large:
            # Bandwidth-reducing order: the products read memory far more locally (2x faster at 100,000 points).
            order = reverse_cuthill_mckee(adjacency, symmetric_mode=True)
            adjacency = adjacency[order][:, order]
        try:
            if large:
                top, vecs = _single_precision_eigsh(adjacency, m, v0, ncv, tol)
            else:
                result = eigsh(adjacency, k=m, which="LA", v0=v0, ncv=ncv, tol=tol, return_eigenvectors=vectors,
                               maxiter=ARPACK_FALLBACK_MAXITER if size <= ARPACK_FALLBACK_DENSE_LIMIT else None)
                top, vecs = result if vectors else (result, None)
        except ArpackError:
            if order is not None:
                inverse = np.argsort(order)
                adjacency = adjacency[inverse][:, inverse]
            if size <= ARPACK_FALLBACK_DENSE_LIMIT or size < 5 * (m + 1) or not fallback:
                return _dense_eigenpairs(adjacency, m, vectors)
            return _component_eigenpairs(adjacency, sqrt_degree, m, "lobpcg", rng, eigen_tol, vectors, False)
        if order is not None and vectors:
            unordered = np.empty_like(vecs)
            unordered[order] = vecs
            vecs = unordered
        ascending = np.argsort(1.0 - top, kind="stable")
        return (1.0 - top)[ascending], (vecs[:, ascending] if vectors else None)
    laplacian = (sp.identity(size, format="csr") - adjacency).tocsr()
    preconditioner = None
    if solver == "amg":
        pyamg = _import_pyamg()
        shifted = (laplacian + _AMG_SHIFT * sp.identity(size, format="csr")).tocsr()
        preconditioner = pyamg.smoothed_aggregation_solver(shifted).aspreconditioner()
    # One spare vector speeds LOBPCG up; the first guess is the exact zero eigenvector.
    start = rng.standard_normal((size, m + 1))
    start[:, 0] = sqrt_degree
    tol = _LOBPCG_TOL if eigen_tol == "auto" else float(eigen_tol)
    # Convergence is checked below, on the residuals of the pairs actually returned.
    with ignoring_warnings({"message": ".*not reaching the requested tolerance", "category": UserWarning},
                           {"message": ".*(Exited|Failed) ", "category": UserWarning}):
        values, vecs = lobpcg(
            laplacian, start, M=preconditioner, tol=tol, largest=False, maxiter=_LOBPCG_MAXITER[solver]
        )
    ascending = np.argsort(values, kind="stable")[:m]
    values, vecs = values[ascending], vecs[:, ascending]
    residual = np.linalg.norm(laplacian @ vecs - vecs * values, axis=0) / np.linalg.norm(vecs, axis=0)
    if fallback and not np.all(residual <= min(_LOBPCG_ACCEPT * max(tol, _LOBPCG_TOL), _LOBPCG_MAX_RESIDUAL)):
        warn_user(
            f"eigen_solver={solver!r} did not converge on a component of {size} points "
            f"(largest residual {np.nanmax(residual):.2g}); solving it again with ARPACK.",
            SkabcWarning,
        )
        return _component_eigenpairs(adjacency, sqrt_degree, m, "arpack", rng, "auto", vectors, False)
    return values, (vecs if vectors else None)


def _single_precision_eigsh(adjacency: sp.csr_matrix, m: int, v0: np.ndarray, ncv: int, tol: float):
    """Largest ``m`` eigenpairs of a large symmetric matrix: float32 Lanczos, then float64 Rayleigh-Ritz.

    ARPACK's cost on large kNN graphs is mostly memory traffic over its Lanczos basis (``n x ncv``), which single
    precision halves (measured 2-2.4x faster at 100,000 points).  One Rayleigh-Ritz step in float64 on the returned
    basis then brings the eigenvalue errors from ~1e-6 down to the square of the residuals (~1e-12), so the eigengap
    sees float64-accurate eigenvalues.
    """
    _, vectors = eigsh(adjacency.astype(np.float32), k=m, which="LA", v0=v0.astype(np.float32), ncv=ncv, tol=tol,
                       return_eigenvectors=True)
    return _rayleigh_ritz(adjacency, vectors)[:2]


def _dense_eigenpairs(adjacency: sp.csr_matrix, m: int, vectors: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Smallest ``m`` eigenpairs of ``I - adjacency`` by a dense symmetric solver (small components)."""
    top, vecs = _largest_dense_eigenpairs(adjacency.toarray(), m, vectors)
    ascending = np.argsort(1.0 - top, kind="stable")
    return (1.0 - top)[ascending], (vecs[:, ascending] if vectors else None)
