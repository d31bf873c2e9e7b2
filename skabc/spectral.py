"""The spectral step: eigengap estimate of k, then spectral clustering of an affinity.

Every function takes a dense ``ndarray`` affinity or a scipy sparse one (e.g.
the kNN affinity of :func:`skabc.sparse_affinity.topk_affinity`).  Dense
input takes the original dense code path unchanged.  Sparse input never
forms an ``n x n`` dense matrix: the graph is split into its connected
components, and each component's smallest Laplacian eigenpairs are found by
an iterative solver (``eigen_solver``):

* ``'arpack'`` (default): ``eigsh`` for the largest eigenvalues of the
  normalised adjacency ``D^-1/2 A D^-1/2`` (``which='LA'``), no factorisation;
* ``'lobpcg'``: LOBPCG for the smallest eigenvalues of ``L``;
* ``'amg'``: LOBPCG preconditioned by pyamg's smoothed aggregation (needs
  the optional ``pyamg`` package).

Solving per component is what makes disconnected graphs (common for kNN
graphs of well-separated clusters) reliable: ``L`` then has one zero
eigenvalue per component, and a single Lanczos run on the whole graph tends
to return fewer copies of a repeated eigenvalue than it has.  Per
component, the spectra are simply merged.  A graph with more components
than eigenvalues asked for gives all zeros, and the eigengap cannot see past
them (it then answers 1).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh, eigvalsh
from scipy.sparse.csgraph import connected_components, reverse_cuthill_mckee
from scipy.sparse.linalg import ArpackError, eigsh, lobpcg
from sklearn.cluster import SpectralClustering, k_means
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_symmetric

# Up to this size the eigengap uses LAPACK's dense eigvalsh (2,000 points: ~1 s on this 2-core box).
# Learned affinities often have dozens of eigenvalues close to 1, where ARPACK converges slowly: on
# load_digits (1,797 points) it took 28-180 s per set, against ~1 s dense.
DENSE_EIGEN_LIMIT = 2500
# Connected components of a sparse graph up to this size are solved densely (at most ~0.5 MiB each).
SPARSE_DENSE_LIMIT = 256
# A component on which ARPACK fails is solved densely up to this size (~128 MiB), else by LOBPCG.
ARPACK_FALLBACK_DENSE_LIMIT = 4096
# Components of at least this many points are reordered (reverse Cuthill-McKee) and solved by ARPACK in
# single precision, refined in double (see _single_precision_eigsh).
ARPACK_LARGE_COMPONENT = 20_000

EIGEN_SOLVERS = ("arpack", "lobpcg", "amg")

_ARPACK_MIN_NCV = 40
# Residual tolerance of LOBPCG for eigen_tol='auto'; eigenvalue errors are about its square.
_LOBPCG_TOL = 1e-5
_LOBPCG_MAXITER = {"lobpcg": 2000, "amg": 200}
# LOBPCG results with residuals above this multiple of the tolerance are refused (ARPACK takes over).
_LOBPCG_ACCEPT = 100.0
# Diagonal shift of L for the AMG preconditioner only: a singular matrix makes a poor one.
_AMG_SHIFT = 1e-5


def normalized_adjacency(affinity):
    """``D^-1/2 A D^-1/2``, with rows of zero degree left at zero instead of dividing by 0.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)

    Returns
    -------
    adjacency : ndarray, or scipy.sparse.csr_matrix for sparse input
    """
    if sp.issparse(affinity):
        return _sparse_normalized_adjacency(_as_csr(affinity))[0]
    degree = affinity.sum(axis=1)
    inv_sqrt = np.zeros_like(degree, dtype=np.float64)
    positive = degree > np.finfo(np.float64).tiny
    inv_sqrt[positive] = 1.0 / np.sqrt(degree[positive])
    return affinity * inv_sqrt[:, None] * inv_sqrt[None, :]


def laplacian_eigenvalues(
    affinity, n_eigenvalues: int, random_state=None, eigen_solver: str | None = None, eigen_tol="auto"
) -> np.ndarray:
    """Smallest ``n_eigenvalues`` eigenvalues of ``L = I - D^-1/2 A D^-1/2``, ascending.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric non-negative affinity.  Dense: a full solver below
        :data:`DENSE_EIGEN_LIMIT` points, else ARPACK on the normalised
        adjacency (``eigen_solver`` and ``eigen_tol`` are not used).
        Sparse: per connected component, see the module notes.
    n_eigenvalues : int
        How many eigenvalues; capped at ``n``.
    random_state : int, RandomState instance or None
        Seeds the starting vectors of the iterative solvers.
    eigen_solver : {'arpack', 'lobpcg', 'amg'}, default=None
        Sparse solver; ``None`` is ``'arpack'``.  ``'amg'`` needs ``pyamg``.
    eigen_tol : float or 'auto', default='auto'
        Sparse solver tolerance: ``'auto'`` is machine precision for ARPACK
        and a residual of ``1e-5`` for LOBPCG.

    Returns
    -------
    eigenvalues : ndarray of shape (min(n_eigenvalues, n),)
        A disconnected sparse graph has one (numerically) zero eigenvalue
        per connected component; a row of zero degree gives eigenvalue 1.
    """
    solver = _check_eigen_solver(eigen_solver)
    n = affinity.shape[0]
    n_eigenvalues = int(min(n_eigenvalues, n))
    if sp.issparse(affinity):
        if n_eigenvalues < 1:
            return np.zeros(0)
        values, _ = _smallest_eigenpairs(
            affinity, n_eigenvalues, solver, check_random_state(random_state), eigen_tol, vectors=False
        )
        return values
    adjacency = normalized_adjacency(affinity)
    if n <= DENSE_EIGEN_LIMIT or n_eigenvalues >= n - 1:
        top = eigvalsh(adjacency, subset_by_index=[n - n_eigenvalues, n - 1])
    else:
        rng = np.random.default_rng(None if random_state is None else random_state)
        v0 = rng.uniform(-1, 1, n)
        top = eigsh(adjacency, k=n_eigenvalues, which="LA", v0=v0, return_eigenvectors=False)
    return np.sort(1.0 - top)


def _largest_eigengap(eigenvalues: np.ndarray) -> int:
    """``k = argmax_i (lambda_{i+1} - lambda_i)`` (1-based) of ascending eigenvalues."""
    return int(np.argmax(np.diff(eigenvalues)) + 1)


def estimate_n_clusters(
    affinity, max_clusters: int, random_state=None, eigen_solver: str | None = None, eigen_tol="auto"
) -> tuple[int, np.ndarray]:
    """Number of clusters by the largest eigengap of the normalised Laplacian.

    ``k = argmax_i (lambda_{i+1} - lambda_i)`` over ``1 <= k <= min(max_clusters, n - 1)``
    (von Luxburg 2007; ABC paper section 3.4).  ``k = 1`` is a valid answer.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric non-negative affinity.
    max_clusters : int
        Largest ``k`` considered.
    random_state : int, RandomState instance or None
        Seeds the iterative eigensolvers.
    eigen_solver : {'arpack', 'lobpcg', 'amg'}, default=None
        Solver for sparse affinities, see :func:`laplacian_eigenvalues`.
    eigen_tol : float or 'auto', default='auto'
        Tolerance of the sparse solver.

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
        affinity, cap + 1, random_state=random_state, eigen_solver=eigen_solver, eigen_tol=eigen_tol
    )
    return _largest_eigengap(eigenvalues), eigenvalues


#: Relative powers of :func:`consensus_n_clusters`: the affinity as given, two softer versions and one sharper.
CONSENSUS_POWERS = (0.25, 0.5, 1.0, 2.0)


def consensus_n_clusters(
    affinity,
    max_clusters: int,
    random_state=None,
    eigen_solver: str | None = None,
    eigen_tol="auto",
    powers: tuple[float, ...] = CONSENSUS_POWERS,
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
    random_state : int, RandomState instance or None
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
    reported = min(powers, key=lambda r: abs(np.log(r)))
    estimates, eigenvalues = [], None
    for r in powers:
        powered = affinity if r == 1.0 else (affinity.power(r) if sp.issparse(affinity) else affinity**r)
        k, values = estimate_n_clusters(
            powered, max_clusters, random_state=random_state, eigen_solver=eigen_solver, eigen_tol=eigen_tol
        )
        estimates.append(k)
        if r == reported and eigenvalues is None:
            eigenvalues = values
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


def eigengap_candidates(eigenvalues: np.ndarray, n_candidates: int) -> list[int]:
    """The ``n_candidates`` values of ``k`` with the largest eigengaps, largest gap first.

    Parameters
    ----------
    eigenvalues : ndarray
        Smallest Laplacian eigenvalues, ascending (as :func:`estimate_n_clusters` returns them).
    n_candidates : int
        How many candidates at most.

    Returns
    -------
    candidates : list of int
        ``k = i`` for the gaps ``lambda_{i+1} - lambda_i`` in decreasing order
        (ties: smaller ``k`` first); the first is the eigengap estimate.
    """
    gaps = np.diff(np.asarray(eigenvalues, dtype=np.float64))
    if gaps.size == 0:
        return [1]
    order = np.argsort(-gaps, kind="stable")[: max(1, int(n_candidates))]
    return [int(i) + 1 for i in order]


def pair_log_likelihood(probabilities, labels: np.ndarray, eps: float = 1e-6) -> float:
    """Bernoulli log-likelihood of a partition under same-cluster probabilities.

    ``sum_{i<j} [s_ij log p_ij + (1 - s_ij) log(1 - p_ij)]`` with
    ``s_ij = 1`` when ``labels[i] == labels[j]``: how well the partition
    explains the pair probabilities a :class:`~skabc.ContextualKernel` was
    trained (with this very loss) to output.  For a sparse matrix only the
    stored pairs count.

    Parameters
    ----------
    probabilities : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric, values in ``[0, 1]``.
    labels : ndarray of shape (n,)
    eps : float
        Probabilities are clipped to ``[eps, 1 - eps]`` so one confident
        mistake costs a finite amount.

    Returns
    -------
    float
    """
    labels = np.asarray(labels)
    if sp.issparse(probabilities):
        coo = sp.triu(probabilities, k=1, format="coo")
        same = labels[coo.row] == labels[coo.col]
        return _bernoulli_log_likelihood(np.asarray(coo.data, dtype=np.float64), same, eps)
    probabilities = np.asarray(probabilities)
    n = probabilities.shape[0]
    total = 0.0
    # Row blocks of the strict upper triangle: memory stays O(block * n) on large dense sets.
    block = max(1, 2**22 // max(n, 1))
    for start in range(0, n, block):
        stop = min(n, start + block)
        p = probabilities[start:stop].astype(np.float64)
        same = labels[start:stop, None] == labels[None, :]
        upper = np.arange(start, stop)[:, None] < np.arange(n)[None, :]
        total += _bernoulli_log_likelihood(p[upper], same[upper], eps)
    return float(total)


def _bernoulli_log_likelihood(p: np.ndarray, same: np.ndarray, eps: float) -> float:
    p = np.clip(p, eps, 1.0 - eps)
    return float(np.where(same, np.log(p), np.log1p(-p)).sum())


def spectral_labels(affinity, n_clusters: int, **spectral_params) -> np.ndarray:
    """Spectral clustering of a precomputed affinity.

    Dense affinities go to scikit-learn's ``SpectralClustering``.  Sparse ones
    use the component-wise eigensolver of this module (scikit-learn's sparse
    ARPACK path factorises the shifted Laplacian, whose fill-in makes it slow
    on kNN graphs of high-dimensional data) and then the same label
    assignment as scikit-learn.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric non-negative affinity.
    n_clusters : int
        Number of clusters; ``<= 1`` labels everything 0.
    **spectral_params
        ``SpectralClustering`` parameters.  The sparse path understands
        ``eigen_solver``, ``n_components``, ``random_state``, ``n_init``,
        ``eigen_tol``, ``assign_labels`` and ``verbose``.

    Returns
    -------
    labels : ndarray of shape (n,), int64
    """
    n = affinity.shape[0]
    if n_clusters <= 1 or n < 2:
        return np.zeros(n, dtype=np.int64)
    n_clusters = min(n_clusters, n)
    if sp.issparse(affinity) or spectral_params.get("assign_labels") == "njw":
        return _embedding_labels(affinity, n_clusters, **spectral_params)
    model = SpectralClustering(n_clusters=n_clusters, affinity="precomputed", **spectral_params)
    with warnings.catch_warnings():
        # A learned affinity may split into components (confident "different cluster" pairs);
        # those components are clusters, which the embedding represents correctly.
        warnings.filterwarnings("ignore", message="Graph is not fully connected", category=UserWarning)
        return model.fit(affinity).labels_.astype(np.int64)


# --------------------------------------------------------------------------- sparse path


def _embedding_labels(
    affinity,
    n_clusters: int,
    *,
    eigen_solver: str | None = None,
    n_components: int | None = None,
    random_state=None,
    n_init: int = 10,
    eigen_tol="auto",
    assign_labels: str = "kmeans",
    verbose: bool = False,
) -> np.ndarray:
    """Normalised spectral embedding, then :func:`_assign`.

    Sparse affinities use this module's component-wise eigensolver; dense
    ones (reached only for ``assign_labels='njw'``, which scikit-learn lacks)
    use scikit-learn's ``spectral_embedding`` exactly as ``SpectralClustering``
    calls it, so only the assignment differs from the other options.
    """
    _check_assign_labels(assign_labels)
    # One RandomState for the eigensolver then the assignment, as SpectralClustering does.
    random_state = check_random_state(random_state)
    n_components = int(min(n_clusters if n_components is None else n_components, affinity.shape[0]))
    if sp.issparse(affinity):
        solver = _check_eigen_solver(eigen_solver)
        _, vectors = _smallest_eigenpairs(affinity, n_components, solver, random_state, eigen_tol, vectors=True)
    else:
        from sklearn.manifold import spectral_embedding

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Graph is not fully connected", category=UserWarning)
            vectors = spectral_embedding(affinity, n_components=n_components, eigen_solver=eigen_solver,
                                         random_state=random_state, eigen_tol=eigen_tol, drop_first=False)
    return _assign(vectors, n_clusters, assign_labels, random_state, n_init, verbose)


#: Label assignments: scikit-learn's three, and ``'njw'`` (Ng, Jordan & Weiss 2001: k-means on the
#: rows of the spectral embedding scaled to unit length).
ASSIGN_LABELS = ("kmeans", "discretize", "cluster_qr", "njw")


def _check_assign_labels(assign_labels: str) -> None:
    if assign_labels not in ASSIGN_LABELS:
        raise ValueError(f"assign_labels must be one of {ASSIGN_LABELS}, got {assign_labels!r}")


def sklearn_spectral_labels(
    affinity,
    n_clusters: int,
    *,
    eigen_solver: str | None = None,
    n_components: int | None = None,
    random_state=None,
    n_init: int = 10,
    eigen_tol="auto",
    assign_labels: str = "kmeans",
    verbose: bool = False,
) -> np.ndarray:
    """Spectral clustering of an affinity step for step as ``SpectralClustering.fit`` does it.

    The non-learned affinities of :class:`~skabc.ABCClustering` go through
    this when ``n_clusters`` is given, so that the same settings give the
    same partition as :class:`~sklearn.cluster.SpectralClustering`, in the
    same time: scikit-learn's :func:`~sklearn.manifold.spectral_embedding`
    (dense or sparse, with its warnings, e.g. for a graph that is not fully
    connected), then its label assignment, one ``RandomState`` for both.
    ``assign_labels='njw'`` adds the row normalisation of :func:`_assign`.

    Parameters
    ----------
    affinity : ndarray or scipy sparse matrix of shape (n, n)
        Symmetric non-negative affinity.
    n_clusters : int
    eigen_solver, n_components, random_state, n_init, eigen_tol, assign_labels, verbose
        As for :class:`~sklearn.cluster.SpectralClustering`.

    Returns
    -------
    labels : ndarray of shape (n,)
        scikit-learn's labels, with scikit-learn's dtype (int32 from k-means).
    """
    from sklearn.manifold import spectral_embedding

    _check_assign_labels(assign_labels)
    random_state = check_random_state(random_state)
    maps = spectral_embedding(
        affinity,
        n_components=n_clusters if n_components is None else n_components,
        eigen_solver=eigen_solver,
        random_state=random_state,
        eigen_tol=eigen_tol,
        drop_first=False,
    )
    return _assign_raw(maps, n_clusters, assign_labels, random_state, n_init, verbose)


def _assign(vectors: np.ndarray, n_clusters: int, assign_labels: str, random_state, n_init: int, verbose) -> np.ndarray:
    """scikit-learn's label assignment in the spectral embedding ``vectors``, as int64."""
    return np.asarray(_assign_raw(vectors, n_clusters, assign_labels, random_state, n_init, verbose), dtype=np.int64)


def _assign_raw(vectors: np.ndarray, n_clusters: int, assign_labels: str, random_state, n_init: int, verbose):
    """:func:`_assign` with the labels in the dtype scikit-learn's assignment returns them."""
    if verbose:
        print(f"Computing label assignment using {assign_labels}")
    if assign_labels in ("kmeans", "njw"):
        if assign_labels == "njw":
            # Unit rows: a point's direction in the embedding says which cluster it leans to, its
            # length mostly how well it is connected; many small clusters separate better this way.
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        _, labels, _ = k_means(vectors, n_clusters, random_state=random_state, n_init=n_init, verbose=verbose)
    else:
        # Imported here: public functions of a private scikit-learn module.
        from sklearn.cluster._spectral import cluster_qr, discretize

        if assign_labels == "cluster_qr":
            labels = cluster_qr(vectors)
        else:
            labels = discretize(vectors, random_state=random_state)
    return labels


def eigengap_spectral_labels(
    affinity,
    max_clusters: int,
    eigen_random_state=None,
    *,
    eigen_solver: str | None = None,
    n_components: int | None = None,
    random_state=None,
    n_init: int = 10,
    eigen_tol="auto",
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
    eigen_random_state : int, RandomState instance or None
        Seeds the eigensolver (the eigengap's, and for sparse input the only one).
    eigen_solver, n_components, random_state, n_init, eigen_tol, assign_labels, verbose
        As for :func:`spectral_labels`; ``random_state`` seeds the label assignment
        (and, for dense input, scikit-learn's eigensolver).

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
    n_clusters = _largest_eigengap(eigenvalues)
    if n_clusters <= 1:
        return np.zeros(n, dtype=np.int64), n_clusters, eigenvalues
    embedding = vectors[:, : (n_clusters if n_components is None else wanted)]
    labels = _assign(embedding, n_clusters, assign_labels, check_random_state(random_state), n_init, verbose)
    return labels, n_clusters, eigenvalues


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
            "`pip install pyamg`, or use eigen_solver='arpack' or 'lobpcg'."
        ) from exc
    return pyamg


def _as_csr(affinity) -> sp.csr_matrix:
    """A float64 CSR copy with canonical indices, checked finite and symmetrised like scikit-learn."""
    matrix = sp.csr_matrix(affinity, dtype=np.float64, copy=True)
    if matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"affinity must be square, got shape {matrix.shape}")
    matrix.sum_duplicates()
    if not np.all(np.isfinite(matrix.data)):
        raise ValueError("affinity contains NaN or infinite values")
    if np.any(matrix.data < 0):
        raise ValueError("affinity must be non-negative")
    return sp.csr_matrix(check_symmetric(matrix, raise_warning=True))


def _sparse_normalized_adjacency(matrix: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """``D^-1/2 A D^-1/2`` of a CSR matrix, and ``sqrt(degree)`` (0 where the degree is 0)."""
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
    """The ``m`` smallest eigenvalues of the sparse normalised Laplacian, ascending.

    With ``vectors=True`` also the spectral embedding ``D^-1/2 x`` of their
    eigenvectors ``x`` (zero outside each vector's component), sign-fixed as
    scikit-learn does, shape ``(n, m)``.
    """
    if solver == "amg":
        _import_pyamg()  # fail before any work
    matrix = _as_csr(affinity)
    n = matrix.shape[0]
    adjacency, sqrt_degree = _sparse_normalized_adjacency(matrix)
    # Structural zeros would connect components the Laplacian sees as separate.
    matrix.eliminate_zeros()
    n_comp, comp = connected_components(matrix, directed=False)
    order = np.argsort(comp, kind="stable")
    bounds = np.searchsorted(comp[order], np.arange(n_comp + 1))
    sizes = np.diff(bounds)
    # Each component of positive degree has exactly one zero eigenvalue; zero-degree points give 1.
    proper = sqrt_degree[order[bounds[:-1]]] > 0  # a component's points all have degree > 0, or it is one point
    n_proper = int(proper.sum())
    per_component = max(1, m - n_proper + 1)

    found_values, found_vectors, found_rows = [], [], []
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
    shifts could be applied"), the component is solved again densely up to
    :data:`ARPACK_FALLBACK_DENSE_LIMIT` points, else by LOBPCG.  Should LOBPCG not converge (it
    can return its starting guess with many eigenvalues on expander-like kNN graphs), the
    component is solved again by ARPACK, with a warning.  ``fallback=False`` stops these retries.
    """
    size = adjacency.shape[0]
    iterative_ok = m < size - 1 if solver == "arpack" else size >= 5 * (m + 1)  # lobpcg needs room
    if size <= SPARSE_DENSE_LIMIT or not iterative_ok:
        return _dense_eigenpairs(adjacency, m, vectors)
    if solver == "arpack":
        tol = 0.0 if eigen_tol == "auto" else float(eigen_tol)
        v0 = rng.uniform(-1, 1, size)
        # A wider Lanczos basis than ARPACK's default (2m + 1) converges ~2x faster on the tightly
        # clustered small eigenvalues of large kNN graphs, for n * 40 floats of memory.
        ncv = min(size, max(2 * m + 1, _ARPACK_MIN_NCV))
        order = None
        large = size >= ARPACK_LARGE_COMPONENT
        if large:
            # Bandwidth-reducing order: the products with the matrix then read memory far more
            # locally (2x faster at 100,000 points); the eigenpairs are mapped back below.
            order = reverse_cuthill_mckee(adjacency, symmetric_mode=True)
            adjacency = adjacency[order][:, order]
        try:
            if large:
                top, vecs = _single_precision_eigsh(adjacency, m, v0, ncv, tol)
            else:
                result = eigsh(adjacency, k=m, which="LA", v0=v0, ncv=ncv, tol=tol, return_eigenvectors=vectors)
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
    with warnings.catch_warnings():
        # Convergence is checked below, on the residuals of the pairs actually returned.
        warnings.filterwarnings("ignore", message=".*not reaching the requested tolerance", category=UserWarning)
        warnings.filterwarnings("ignore", message=".*(Exited|Failed) ", category=UserWarning)
        values, vecs = lobpcg(
            laplacian, start, M=preconditioner, tol=tol, largest=False, maxiter=_LOBPCG_MAXITER[solver]
        )
    ascending = np.argsort(values, kind="stable")[:m]
    values, vecs = values[ascending], vecs[:, ascending]
    residual = np.linalg.norm(laplacian @ vecs - vecs * values, axis=0) / np.linalg.norm(vecs, axis=0)
    if fallback and not np.all(residual <= _LOBPCG_ACCEPT * max(tol, _LOBPCG_TOL)):
        warnings.warn(
            f"eigen_solver={solver!r} did not converge on a component of {size} points "
            f"(largest residual {np.nanmax(residual):.2g}); solving it again with ARPACK.",
            UserWarning,
            stacklevel=2,
        )
        return _component_eigenpairs(adjacency, sqrt_degree, m, "arpack", rng, "auto", vectors, False)
    return values, (vecs if vectors else None)


def _single_precision_eigsh(adjacency: sp.csr_matrix, m: int, v0: np.ndarray, ncv: int, tol: float):
    """Largest ``m`` eigenpairs of a large symmetric matrix: float32 Lanczos, then float64 Rayleigh-Ritz.

    ARPACK's cost on large kNN graphs is mostly memory traffic over its Lanczos basis (``n x ncv``),
    which single precision halves (measured 2-2.4x faster at 100,000 points).  One Rayleigh-Ritz step
    in float64 on the returned basis then brings the eigenvalue errors from ~1e-6 down to the square
    of the residuals (~1e-12), so the eigengap sees float64-accurate eigenvalues.
    """
    values, vectors = eigsh(adjacency.astype(np.float32), k=m, which="LA", v0=v0.astype(np.float32), ncv=ncv,
                            tol=tol, return_eigenvectors=True)
    basis, _ = np.linalg.qr(vectors.astype(np.float64))
    projected = basis.T @ (adjacency @ basis)
    values, rotation = eigh(0.5 * (projected + projected.T))
    return values, basis @ rotation


def _dense_eigenpairs(adjacency: sp.csr_matrix, m: int, vectors: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Smallest ``m`` eigenpairs of ``I - adjacency`` by a dense symmetric solver (small components)."""
    size = adjacency.shape[0]
    dense = adjacency.toarray()
    if vectors:
        top, vecs = eigh(dense, subset_by_index=[size - m, size - 1])
    else:
        top, vecs = eigvalsh(dense, subset_by_index=[size - m, size - 1]), None
    ascending = np.argsort(1.0 - top, kind="stable")
    return (1.0 - top)[ascending], (vecs[:, ascending] if vectors else None)
