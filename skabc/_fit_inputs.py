"""How ABCClustering reads its input: ``X`` checked as its ``affinity`` needs, and the kernel it resolves to.

``affinity='learned'`` reads ``X`` as float features for the network (integers as float64, so that a kernel
that canonicalises centres and rescales them exactly; sparse ``X`` densified under the kernel's memory limit) and
trains a kernel only when the user asks for it; every other ``affinity`` reads ``X`` as
SpectralClustering does (float64, sparse formats kept) and resolves to a
:class:`~skabc.kernels.pairwise.PairwiseKernel` or
:class:`~skabc.kernels.pairwise.PrecomputedKernel` with SpectralClustering's
settings.
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.validation import _num_samples, check_array, column_or_1d, validate_data

from ._clustering_io import check_affinity_unchanged
from ._runtime import memory_limit_bytes
from ._user_warnings import warn_user
from ._validation import encode_labels, format_bytes
from .exceptions import AffinityTooLargeError, SkabcWarning
from .kernels import ContextualKernel, KernelEnsemble
from .kernels.base import check_kernel_type, fit_on_labels, kernel_is_fitted, unfrozen
from .kernels.pairwise import (
    PRECOMPUTED_AFFINITIES,
    SPARSE_FORMATS,
    PairwiseKernel,
    PrecomputedKernel,
)
from .spectral._affinity_checks import ASYMMETRY_WARNING, asymmetry, beyond_rounding
from .training.plan import network_of, reads_canonical_input


def is_learned(affinity) -> bool:
    """Whether ``affinity`` is the learned kernel's (``'learned'``)."""
    return isinstance(affinity, str) and affinity == "learned"


def is_pairwise(affinity) -> bool:
    """Whether ``X`` is a square matrix over the samples (an affinity or distances), not features."""
    return isinstance(affinity, str) and affinity in PRECOMPUTED_AFFINITIES


def validate_set(model, X, *, reset: bool, ensure_min_samples: int):
    """``X`` validated as ``model.affinity`` needs it: float32 or float64 for the network (other types as float64:
    a canonicalising kernel centres and rescales a set before its own float32 cast, and an integer column of
    timestamps cast to float32 first lost its spread), float64 as SpectralClustering."""
    if not reset:
        check_affinity_unchanged(model)  # predict: X is read as fit read it
    dtype = [np.float64, np.float32] if is_learned(model.affinity) else np.float64
    if is_pairwise(model.affinity) and not reset:
        # A new set's affinity is m x m: its width is its size, not the fitted n_features_in_.
        return check_array(X, accept_sparse=SPARSE_FORMATS, dtype=dtype, ensure_min_samples=ensure_min_samples)
    return validate_data(model, X, reset=reset, accept_sparse=SPARSE_FORMATS, dtype=dtype,
                         ensure_min_samples=ensure_min_samples)


def symmetrised_for_fit(model, checked, group_codes=None):
    """A non-symmetric ``affinity='precomputed'`` matrix averaged with its transpose, with SpectralClustering's
    warning, as its ``fit`` does: a kNN connectivity graph (``kneighbors_graph``) is not symmetric, and code that
    clusters one must run unchanged.  ``predict`` refuses such a matrix instead: a new set's square block that is not
    symmetric is most likely the test x train block of cross-validation, which no averaging makes an affinity.

    With ``group_codes`` only the blocks of the sets clustered count (the rest of ``X`` is never read).  A matrix
    the kernel refuses anyway (not square, negative entries) is returned as it is, without a warning first.
    """
    if model.affinity != "precomputed" or checked.shape[0] != checked.shape[1]:
        return checked
    values = checked.data if sp.issparse(checked) else checked
    if not values.size or float(values.min()) < 0:  # no n x n temporary: min and max read the matrix in place
        return checked
    scale = float(values.max())
    if group_codes is None:
        largest = asymmetry(checked)
    else:
        matrix = checked.tocsr() if sp.issparse(checked) else checked
        blocks = (np.flatnonzero(group_codes == g) for g in np.unique(group_codes))
        largest = max(asymmetry(matrix[np.ix_(rows, rows)]) for rows in blocks)  # each block alone, no rows x n
    if not beyond_rounding(largest, scale):
        return checked
    # SpectralClustering's words first, so that filters written for it (by message) catch this one too.
    warn_user(f"{ASYMMETRY_WARNING} (affinity='precomputed': X[i, j] and X[j, i] differ by up to {largest:.3g}; "
              "the mean of X and X.T is clustered.)", SkabcWarning)
    mean = 0.5 * (checked + checked.T)
    return getattr(mean, "to" + checked.format)() if sp.issparse(checked) else mean  # the caller's format, as sklearn


def kernel_input(model, X, checked):
    """What the kernel is given: ``X`` as the caller passed it to a learned kernel (its feature names are
    checked there), validated and in CSR when sparse (made dense set by set: :func:`densify`, only the
    subsample of a set past ``max_samples``); the validated ``checked`` for scikit-learn's affinities, features in
    CSR or CSC when sparse (a subsample or a counting arbiter indexes rows: a COO matrix has none to index)."""
    if not is_learned(model.affinity):
        if sp.issparse(checked) and checked.format not in ("csr", "csc") and not is_pairwise(model.affinity):
            return checked.tocsr()
        return checked
    return checked.tocsr() if sp.issparse(checked) else X


def without_unseen_names(X_in, X, checked, kernel):
    """The validated ``checked`` in place of the caller's DataFrame ``X`` for a kernel fitted without feature names.

    ``ABCClustering`` has checked the names against its own already, and such a kernel (every shipped one was saved
    without names) would warn about names it never saw on every call, with nothing the user could change.
    """
    unseen = X_in is X and hasattr(X, "columns") and not hasattr(kernel, "feature_names_in_")
    return checked if unseen else X_in


#: Bytes per entry of the float64 working copies of a canonicalising kernel's standardisation and rotation, beyond
#: the dense copy of a sparse X itself: a whole fit on a 2,000 x 25,000 set (density 0.01) peaked 1.70 GiB above the
#: process's start made dense in float64 (8 + 28 bytes per entry give 1.68 GiB), 1.33 GiB in float32 (4 + 28: 1.49).
CANONICAL_BYTES = 28.0


def _canonicalises(kernel) -> bool:
    """Whether ``kernel`` (or a member of it) canonicalises its input: its sets of any width go through float64.

    A fitted network does or does not; an unfitted kernel as its fit will train (from the generic network, by
    default), which is what the kernel's own fit decides by (:func:`~skabc.training.plan.reads_canonical_input`).
    """
    kernel = unfrozen(kernel)
    members = kernel._members_or_template() if isinstance(kernel, KernelEnsemble) else [kernel]
    return any(isinstance(m, ContextualKernel) and (
        network_of(m).canonical_features is not None or (not kernel_is_fitted(m) and reads_canonical_input(m)))
        for m in map(unfrozen, members))


def densify(X, kernel) -> np.ndarray:
    """Sparse features as the dense array the network needs, if that copy (and its canonicalisation) fits the kernel's
    memory limit.

    A canonicalising kernel gets them in their own dtype, as it gets dense features: it centres and rescales a
    float64 set before its float32 cast, so that values far from zero or beyond float32's range keep their structure
    (cast first, columns 1.6e9 from zero collapsed to a few distinct rows).  Any other kernel reads float32.
    """
    canonicalises = _canonicalises(kernel)
    dtype = X.dtype if canonicalises else np.dtype(np.float32)
    limit = memory_limit_bytes(getattr(unfrozen(kernel), "memory_limit", "auto"))
    needed = (dtype.itemsize + (CANONICAL_BYTES if canonicalises else 0.0)) * X.shape[0] * X.shape[1]
    if limit is not None and needed > limit:
        raise AffinityTooLargeError(
            f"affinity='learned' needs dense features, and this sparse set ({X.shape[0]} x {X.shape[1]}) would "
            f"take {format_bytes(needed)} dense (with the kernel's working copies), over the memory limit of "
            f"{format_bytes(limit)}; reduce its "
            "width first (e.g. sklearn's TruncatedSVD), or use affinity='nearest_neighbors' or 'rbf', which "
            "take sparse X."
        )
    return X.astype(dtype).toarray()


def warn_if_square(model, X, group_codes) -> None:
    """SpectralClustering's warning: square features may be an affinity matrix meant as 'precomputed'."""
    if group_codes is None and X.shape[0] == X.shape[1] and not is_pairwise(model.affinity):
        # SpectralClustering's text first, so that filters written for it (by message) catch this one too.
        warn_user(
            "The spectral clustering API has changed. ``fit``now constructs an affinity matrix from data. To use a "
            f"custom affinity matrix, set ``affinity=precomputed``. (X is square, {X.shape[0]} x {X.shape[1]}, and "
            f"affinity={model.affinity!r} reads its rows as points with features; to cluster an affinity matrix "
            "you computed, set affinity='precomputed'.)",
            SkabcWarning,
        )


def resolve_kernel(model, X, y, groups):
    """The fitted kernel of ``model``: scikit-learn's for a non-learned ``affinity``, else the learned one."""
    if not is_learned(model.affinity):
        if model.kernel is not None:
            raise ValueError(
                f"kernel is used with affinity='learned' only, but affinity={model.affinity!r} was given "
                "with a kernel; pass one or the other."
            )
        if is_pairwise(model.affinity):
            return PrecomputedKernel(model.affinity, n_neighbors=model.n_neighbors, n_jobs=model.n_jobs)
        return PairwiseKernel(model.affinity, gamma=model.gamma, n_neighbors=model.n_neighbors, degree=model.degree,
                              coef0=model.coef0, kernel_params=model.kernel_params, n_jobs=model.n_jobs)
    if model.kernel is None:
        from .pretrained import load

        return load("generic")  # zero-shot: y is ignored, as by any clusterer
    check_kernel_type(model.kernel)
    fitted = kernel_is_fitted(model.kernel)
    fine_tune = fitted and bool(model.kernel.get_params(deep=False).get("warm_start", False))
    if y is not None and (not fitted or fine_tune) and np.any(encode_labels(y, _num_samples(X)) >= 0):
        # A copy keeps the user's kernel as given: clone for a fresh one, deepcopy to keep the weights.
        kernel = copy.deepcopy(model.kernel) if fine_tune else clone(model.kernel)
        y = column_or_1d(y) if np.ndim(y) == 2 else y  # a column vector was warned of above: not twice
        X = densify(X, kernel) if sp.issparse(X) else X
        return fit_on_labels(kernel, X, y, groups)
    if fine_tune and y is not None:  # asked to fine-tune on y, which labels no row (probe 54a: the kernel was kept)
        raise ValueError("ABCClustering was given y with no labels (every row -1, unlabelled) and a fitted kernel "
                         "with warm_start=True, which fine-tunes on the labels in y; pass labelled y, or "
                         "warm_start=False to use the kernel as it is.")
    if not fitted:
        # scikit-learn's wording for a missing y first (its checks and users' handlers look for it).
        given = ("requires y to be passed, but the target y is None" if y is None
                 else "was given y with no labels (every row -1, unlabelled)")
        raise ValueError(f"ABCClustering {given}: its `kernel` is not fitted, and fit trains it on the labels in y; "
                         "pass labelled y, or a fitted kernel.")
    return model.kernel


#: ``ContextualKernel`` settings for a short fine-tuning of the generic kernel on sets drawn from the
#: user's labelled rows: ``ABCClustering(kernel=skabc.pretrained.load('generic').set_params(**FINE_TUNE))``.
FINE_TUNE = dict(warm_start=True, set_size=(50, 200), clusters_per_set=None, sets_per_epoch=None,
                 batch_size=32, max_epochs=10, lr=3e-4)

