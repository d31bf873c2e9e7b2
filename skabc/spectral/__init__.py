"""The spectral step: eigensolvers, k selectors (one registry), label assignment, and SpectralStep.

* :mod:`~skabc.spectral.eigen`: Laplacian eigensolvers, dense and sparse, with fallbacks;
* :mod:`~skabc.spectral.select`: estimators of ``k`` and :data:`N_CLUSTERS_SELECTORS`;
* :mod:`~skabc.spectral.likelihood`: the Bernoulli log-likelihood of a partition under pair probabilities;
* :mod:`~skabc.spectral.assign`: kmeans / discretize / cluster_qr / njw in the embedding;
* :mod:`~skabc.spectral.step`: :class:`SpectralStep`, the frozen settings that turn an affinity into labels.
"""

from .assign import ASSIGN_LABELS, spectral_labels
from .eigen import EIGEN_SOLVERS, laplacian_eigenvalues, normalized_adjacency, top_eigenvectors
from .likelihood import pair_log_likelihood
from .rotation import alignment_qualities, rotation_n_clusters
from .select import (
    CONSENSUS_POWERS,
    LIKELIHOOD_CANDIDATES,
    N_CLUSTERS_SELECTORS,
    ROTATION_MAX_CLUSTERS,
    Selection,
    consensus_n_clusters,
    eigengap_candidates,
    eigengap_spectral_labels,
    estimate_n_clusters,
    median_estimate,
)
from .step import SpectralStep, compact

__all__ = [
    "ASSIGN_LABELS",
    "CONSENSUS_POWERS",
    "EIGEN_SOLVERS",
    "LIKELIHOOD_CANDIDATES",
    "N_CLUSTERS_SELECTORS",
    "ROTATION_MAX_CLUSTERS",
    "Selection",
    "SpectralStep",
    "alignment_qualities",
    "compact",
    "consensus_n_clusters",
    "eigengap_candidates",
    "eigengap_spectral_labels",
    "estimate_n_clusters",
    "laplacian_eigenvalues",
    "median_estimate",
    "normalized_adjacency",
    "pair_log_likelihood",
    "rotation_n_clusters",
    "spectral_labels",
    "top_eigenvectors",
]
