"""A Gaussian mixture's partition of a set, its ``k`` chosen by BIC: an arbiter candidate for ellipsoidal clusters.

Blobs that touch, sheared or of unequal spread are where a kNN graph and the
learned kernel both see one cluster too few (on scikit-learn's gallery toys,
every spectral candidate agreed on two of three blobs in most wrong sets),
and where a Gaussian mixture is the model that generated the data.  It fails
elsewhere (rings, chains, wide real tables), so it is one more candidate for
an arbiter to weigh (:mod:`skabc.spectral.arbiter`), never a rule of its own.

The columns are standardised (a mixture is fitted in any units), wide sets are
projected on their :data:`MAX_MIXTURE_FEATURES` leading principal components,
and the covariances are full up to :data:`FULL_COVARIANCE_MAX_FEATURES`
columns, diagonal beyond.  ``k`` grows from 1 until BIC has not improved for
:data:`BIC_PATIENCE` values in a row.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture
from sklearn.utils import check_array

from .._quiet_warnings import ignoring_warnings
from ._affinity_checks import scale_free

#: Largest ``k`` the BIC search tries (each mixture fit costs more than a spectral cut).
MAX_MIXTURE_CLUSTERS = 20
#: Values of ``k`` past the best BIC after which the search stops.
BIC_PATIENCE = 3
#: Columns a mixture is fitted on: wider sets are projected on their leading principal components.
MAX_MIXTURE_FEATURES = 16
#: Full covariances up to this many columns; diagonal ones beyond (their parameters grow with d^2).
FULL_COVARIANCE_MAX_FEATURES = 8
#: Regularisation added to the covariances' diagonal, in units of the standardised columns.
REG_COVAR = 1e-4


def mixture_features(X, random_state: int) -> np.ndarray:
    """The standardised (and, when wide, projected) columns a mixture is fitted on.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    random_state : int
        Seed of the randomised projection of wide sets.

    Returns
    -------
    Z : ndarray of shape (n_samples, m)
        ``m <= min(n_features, MAX_MIXTURE_FEATURES)``: constant columns are dropped (a single zero column where
        every row is the same).
    """
    X = check_array(X, accept_sparse="csr", dtype=(np.float64, np.float32))  # NaN was dropped as a column: k = 1
    n = X.shape[0]
    n_components = min(MAX_MIXTURE_FEATURES, X.shape[1], max(n - 1, 1))
    # Extreme magnitudes scaled first: the spreads square the values (overflow past ~1e154), and the
    # standardised columns do not depend on the scale.
    X = scale_free(X)
    top, bottom = X.max(axis=0), X.min(axis=0)
    if not np.any((top - bottom).toarray() if sp.issparse(top) else top > bottom):
        return np.zeros((n, 1))  # every row the same: a projection of no spread divides by zero (numpy warned)
    if sp.issparse(X):
        X = X.tocsr()
        stored = np.flatnonzero(np.bincount(X.indices, minlength=X.shape[1]))  # sparse arrays have no getnnz
        if len(stored) < X.shape[1]:  # empty columns add nothing, and cost the projection (hashed text: 2**20)
            X = X[:, stored]
        if X.shape[1] > n_components:
            X = TruncatedSVD(n_components, random_state=random_state).fit_transform(X)
        else:
            X = X.toarray()
    X = np.asarray(X, dtype=np.float64)
    if X.shape[1] > n_components:
        X = PCA(n_components, random_state=random_state).fit_transform(X)
    spread = X.std(axis=0)
    # Relative to the values' magnitude: a set measured in tiny units keeps its columns.
    kept = spread > 1e-12 * float(np.abs(X).max())
    Z = X[:, kept]
    Z = (Z - Z.mean(axis=0)) / spread[kept]
    return Z if Z.shape[1] else np.zeros((n, 1))


def bic_mixture_partition(X, max_clusters: int, random_state: int) -> np.ndarray:
    """Labels of the Gaussian mixture whose number of components ``k`` has the lowest BIC (ids 0 to k - 1).

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The set's rows.
    max_clusters : int
        Largest ``k`` tried (at most :data:`MAX_MIXTURE_CLUSTERS` and ``n_samples - 1``).
    random_state : int
        Seed of each mixture's initialisation.

    Returns
    -------
    labels : ndarray of shape (n_samples,)
    """
    Z = mixture_features(X, random_state)
    n = Z.shape[0]
    covariance = "full" if Z.shape[1] <= FULL_COVARIANCE_MAX_FEATURES else "diag"
    best_k, best_labels = 1, np.zeros(n, dtype=np.int64)
    largest = min(max_clusters, MAX_MIXTURE_CLUSTERS, n - 1)
    best_bic = fit_mixture(Z, 1, covariance, random_state).bic(Z) if largest >= 2 else np.inf
    for k in range(2, largest + 1):
        mixture = fit_mixture(Z, k, covariance, random_state)
        bic = mixture.bic(Z)
        if bic < best_bic:
            best_bic, best_k, best_labels = bic, k, mixture.predict(Z)
        elif k - best_k >= BIC_PATIENCE:
            break
    return np.unique(best_labels, return_inverse=True)[1].astype(np.int64)


def fit_mixture(Z: np.ndarray, k: int, covariance: str, random_state: int) -> GaussianMixture:
    """A ``k``-component mixture of ``covariance`` type fitted to ``Z`` (:data:`REG_COVAR`), unconverged or not."""
    with ignoring_warnings({"category": ConvergenceWarning}):  # a mixture that has not converged still has a BIC
        return GaussianMixture(k, covariance_type=covariance, reg_covar=REG_COVAR,
                               random_state=random_state).fit(Z)


class MixtureSource:
    """The ``'gmm'`` source: a Gaussian mixture's partition (rule ``'bic'``), read through the kNN graph of ``knn``.

    ``knn`` is the arbiter's kNN-graph source of the same set (``affinity``, ``spectrum``, ``step``, ``k_by``):
    the mixture's candidate reads that graph's spectrum and, in a kNN-partition arbiter, is cut from it."""

    def __init__(self, knn, X) -> None:
        self.knn, self.X, self.found = knn, X, {}

    @property
    def affinity(self):
        return self.knn.affinity

    @property
    def spectrum(self):
        return self.knn.spectrum

    def k_by(self, rule: str, eigen_seed, seed: int) -> tuple[int, np.ndarray | None]:
        if rule != "bic":
            raise ValueError(f"a Gaussian mixture's k comes from rule 'bic', not {rule!r}")
        if "bic" not in self.found:
            if self.knn.spectrum is None:  # the features read the graph's spectrum
                self.knn.k_by("eigengap", eigen_seed, seed)
            labels = bic_mixture_partition(self.X, self.knn.step.max_clusters, seed)
            self.found["bic"] = (len(np.unique(labels)), labels)
        return self.found["bic"][0], self.knn.spectrum

    def labels_at(self, k: int, seed: int) -> np.ndarray:
        return self.found["bic"][1]


__all__ = ["MixtureSource", "bic_mixture_partition", "fit_mixture", "mixture_features"]
