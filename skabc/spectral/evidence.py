"""What an arbiter reads of a set's candidate partitions: unlabelled evidence, and the feature rows of its forest.

Also how many dimensions a set spans (:func:`spans_more_than`), which bounds an arbiter's domain.  Evidence is
plain JSON values (research recipes store it and compute the features of another spectrum width
without clustering again); :func:`evidence_features` turns it into one row per candidate.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from ..preprocessing import CONSTANT_TOLERANCE
from .candidates import CANDIDATES, SPECTRUM_SIZE, Candidate
from .select import ZERO_EIGENVALUE

#: Singular values of a set's centred, column-scaled rows below this share of the largest add no dimension.
RANK_TOLERANCE = 1e-9
#: Laplacian eigenvalues below this are zero to the accuracy of the solvers (ARPACK and LAPACK ~1e-16; float32 solves
#: refined in float64 ~1e-13, near-zero dense ones within 1e-11 by a residual bound; LOBPCG's tolerance ~1e-10): the
#: features read them as 0. The shipped forests split ``log10(lambda + 1e-12)`` down to lambda ~ 3e-16, where which
#: solver ran, or the BLAS build, would otherwise choose the branch.
EIGENVALUE_RESOLUTION = 1e-10


def candidate_evidence(candidates: list[Candidate], n_features_in: int) -> dict:
    """What an arbiter's features read of one set's candidates, as plain JSON values.

    Research recipes store it, so that features of another width can be computed without clustering again.

    Parameters
    ----------
    candidates : list of Candidate
        The partitions of one set (:func:`~skabc.spectral.candidates.candidate_partitions`).
    n_features_in : int
        The set's number of columns.

    Returns
    -------
    evidence : dict
        ``n`` and ``n_features_in`` of the set; per candidate its ``names``, ``k``, cluster ``sizes``
        (``bincount`` of its labels) and its affinity's ``spectra``; the candidates' pairwise ``agreement``
        (ARI).
    """
    agree = np.ones((len(candidates), len(candidates)))
    for i in range(len(candidates)):
        for j in range(i + 1, len(candidates)):  # ARI is symmetric: each pair once
            agree[i, j] = agree[j, i] = adjusted_rand_score(candidates[i].labels, candidates[j].labels)
    return {"n": len(candidates[0].labels), "n_features_in": int(n_features_in),
            "names": [c.name for c in candidates], "k": [int(c.n_clusters) for c in candidates],
            "sizes": [np.bincount(c.labels).tolist() for c in candidates],
            "spectra": [np.asarray(c.spectrum, dtype=np.float64).tolist() for c in candidates],
            "agreement": agree.tolist()}


def evidence_features(evidence: dict, spectrum_size: int = SPECTRUM_SIZE) -> np.ndarray:
    """The feature rows of a :func:`candidate_evidence` record, one per candidate.

    Parameters
    ----------
    evidence : dict
        What :func:`candidate_evidence` returns.
    spectrum_size : int, default=SPECTRUM_SIZE
        Eigenvalues of each affinity read (its ``k``-th and ``k+1``-th, its number of zeros); the
        number of columns does not depend on it.

    Returns
    -------
    features : ndarray of shape (n_candidates, n_feature_columns(n_candidates))
    """
    if spectrum_size < 2:  # a candidate's own features read its k-th and k+1-th eigenvalues
        raise ValueError(f"spectrum_size must be at least 2, got {spectrum_size}")
    n, names = evidence["n"], evidence["names"]
    by_source = {}
    for name, spectrum in zip(names, evidence["spectra"], strict=True):
        # The shared columns read 7 eigenvalues of each source whatever spectrum_size is (1 where not read).
        by_source.setdefault(CANDIDATES[name][0], _padded(spectrum[:spectrum_size], max(spectrum_size, 8)))
    shared = [np.log(n), np.log(max(evidence["n_features_in"], 1))]
    for source in ("kernel", "knn"):
        shared.extend(by_source.get(source, np.ones(8))[1:8])
    agree = np.asarray(evidence["agreement"], dtype=np.float64)
    rows = []
    for i in range(len(names)):
        k = evidence["k"][i]
        spectrum = _padded(evidence["spectra"][i], spectrum_size)
        at = min(max(k, 1), spectrum_size - 1)
        low, high = spectrum[at - 1], spectrum[at]
        own = [np.log(max(k, 1)), low, high, high - low, np.log10(max(low, 0.0) + 1e-12),
               np.log10(max(high, 0.0) + 1e-12), float(np.sum(spectrum < ZERO_EIGENVALUE))]
        agreement = [agree[i, j] for j in range(len(names)) if j != i]
        sizes = np.asarray(evidence["sizes"][i], dtype=np.float64)
        shares = sizes / n
        onehot = [float(j == i) for j in range(len(names))]
        rows.append(own + agreement + [shares.min(), shares.max()] + shared + onehot)
    return np.asarray(rows, dtype=np.float64)


def candidate_features(candidates: list[Candidate], n_features_in: int,
                       spectrum_size: int = SPECTRUM_SIZE) -> np.ndarray:
    """One row of unlabelled evidence per candidate (:func:`evidence_features` of :func:`candidate_evidence`)."""
    return evidence_features(candidate_evidence(candidates, n_features_in), spectrum_size)


def n_feature_columns(n_candidates: int) -> int:
    """Width of :func:`candidate_features`' rows for ``n_candidates`` candidates."""
    return 7 + (n_candidates - 1) + 2 + 2 + 2 * 7 + n_candidates


def _padded(spectrum: np.ndarray, size: int) -> np.ndarray:
    """The first ``size`` eigenvalues, padded with 1 (a tiny set has fewer), those below
    :data:`EIGENVALUE_RESOLUTION` read as 0."""
    out = np.ones(size)
    values = np.asarray(spectrum, dtype=np.float64)[:size]
    out[: len(values)] = np.where(values < EIGENVALUE_RESOLUTION, 0.0, values)
    return out


def spans_more_than(X, bound: int) -> bool:
    """Whether the set ``X`` spans more than ``bound`` dimensions: the numerical rank of its centred rows, each column
    scaled to its largest magnitude.

    Columns the canonicalisation takes for constant (a spread within
    :data:`~skabc.preprocessing.CONSTANT_TOLERANCE` of their magnitude) and empty ones add none; nor do dependent
    ones, nor the rounding of the input's own precision (float32 rows of rank 5 span 5).  The centred rows'
    projection on ``bound + 1`` random directions (a fixed seed) keeps rank ``min(rank, bound + 1)`` almost surely,
    so one small SVD answers.  Each column is scaled before it is centred, so no magnitude float64 holds overflows
    and a column far from zero keeps its spread.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        The set's rows, finite.
    bound : int
        The number of dimensions to exceed.

    Returns
    -------
    spans : bool
    """
    n = X.shape[0]
    if n <= bound + 1:  # centred, n rows span at most n - 1 dimensions
        return False
    precision = np.finfo(X.dtype if np.issubdtype(X.dtype, np.floating) else np.float64).eps
    if sp.issparse(X):
        X = sp.csc_matrix(X, dtype=np.float64, copy=True)
        X.sum_duplicates()
        X.eliminate_zeros()  # stored zeros are no magnitude
        X = X[:, np.flatnonzero(np.diff(X.indptr))]  # columns of zeros add nothing (and a hashed text has many)
        peak = abs(X).max(axis=0).toarray().ravel()
        X.data /= np.repeat(peak, np.diff(X.indptr))  # a division: the reciprocal of a subnormal peak overflows
        spread = (X.max(axis=0) - X.min(axis=0)).toarray().ravel()  # implicit zeros included
    else:
        X = np.asarray(X, dtype=np.float64)
        peak = np.max(np.abs(X), axis=0)
        X = X[:, peak > 0] / peak[peak > 0]
        X = X - X[0]
        spread = np.max(np.abs(X), axis=0)
    keep = spread > CONSTANT_TOLERANCE
    if np.count_nonzero(keep) <= bound:
        return False
    X = X[:, keep] / spread[keep] if not sp.issparse(X) else X[:, keep]
    projected = np.asarray(X @ np.random.default_rng(0).standard_normal((X.shape[1], bound + 1)))
    singular = np.linalg.svd(projected - projected.mean(axis=0), compute_uv=False)
    # The rounding of the input's own precision spans every direction, about its eps times the largest value.
    return bool(singular[-1] > max(RANK_TOLERANCE, 64 * precision) * singular[0])
