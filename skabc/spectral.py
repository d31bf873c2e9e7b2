"""The spectral step: eigengap estimate of k, then spectral clustering of an affinity."""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigvalsh
from scipy.sparse.linalg import eigsh
from sklearn.cluster import SpectralClustering

# Below this size a full dense eigendecomposition is cheaper than ARPACK.
DENSE_EIGEN_LIMIT = 1500


def normalized_adjacency(affinity: np.ndarray) -> np.ndarray:
    """``D^-1/2 A D^-1/2``, with rows of zero degree left at zero instead of dividing by 0."""
    degree = affinity.sum(axis=1)
    inv_sqrt = np.zeros_like(degree, dtype=np.float64)
    positive = degree > np.finfo(np.float64).tiny
    inv_sqrt[positive] = 1.0 / np.sqrt(degree[positive])
    return affinity * inv_sqrt[:, None] * inv_sqrt[None, :]


def laplacian_eigenvalues(affinity: np.ndarray, n_eigenvalues: int, random_state=None) -> np.ndarray:
    """Smallest ``n_eigenvalues`` eigenvalues of ``L = I - D^-1/2 A D^-1/2``, ascending.

    A full solver is used for small matrices and ARPACK (largest eigenvalues
    of the normalised adjacency) beyond :data:`DENSE_EIGEN_LIMIT` points.
    """
    n = affinity.shape[0]
    n_eigenvalues = int(min(n_eigenvalues, n))
    adjacency = normalized_adjacency(affinity)
    if n <= DENSE_EIGEN_LIMIT or n_eigenvalues >= n - 1:
        top = eigvalsh(adjacency, subset_by_index=[n - n_eigenvalues, n - 1])
    else:
        rng = np.random.default_rng(None if random_state is None else random_state)
        v0 = rng.uniform(-1, 1, n)
        top = eigsh(adjacency, k=n_eigenvalues, which="LA", v0=v0, return_eigenvectors=False)
    return np.sort(1.0 - top)


def estimate_n_clusters(
    affinity: np.ndarray, max_clusters: int, random_state=None
) -> tuple[int, np.ndarray]:
    """Number of clusters by the largest eigengap of the normalised Laplacian.

    ``k = argmax_i (lambda_{i+1} - lambda_i)`` over ``1 <= k <= min(max_clusters, n - 1)``
    (von Luxburg 2007; ABC paper section 3.4).  ``k = 1`` is a valid answer.

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
    eigenvalues = laplacian_eigenvalues(affinity, cap + 1, random_state=random_state)
    gaps = np.diff(eigenvalues)
    return int(np.argmax(gaps) + 1), eigenvalues


def spectral_labels(affinity: np.ndarray, n_clusters: int, **spectral_params) -> np.ndarray:
    """Cluster a precomputed affinity with scikit-learn's ``SpectralClustering``."""
    n = affinity.shape[0]
    if n_clusters <= 1 or n < 2:
        return np.zeros(n, dtype=np.int64)
    n_clusters = min(n_clusters, n)
    model = SpectralClustering(n_clusters=n_clusters, affinity="precomputed", **spectral_params)
    return model.fit(affinity).labels_.astype(np.int64)
