"""The candidate partitions a fitted ``ABCClustering``'s arbiter weighs for one set (``plot_candidates``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array, check_random_state
from sklearn.utils.validation import check_is_fitted

from ._counting import COUNTING_ARBITERS, counting_setup
from ._fit_inputs import validate_set
from ._sets import draw_seeds, is_shipped_generic
from .kernels import as_kernel
from .kernels.base import kernel_affinity
from .spectral.arbiter import arbiter_for
from .spectral.candidates import CANDIDATES
from .spectral.split import split_gaussian_clusters


def arbiter_candidates(model, X) -> tuple[list, np.ndarray, int, str]:
    """Every candidate partition a fitted ``model``'s arbiter weighs for the set ``X``, as ``fit(X)`` would.

    ``X`` is one whole set, validated as ``predict`` validates it (width, feature names) and seeded as a fit on it
    alone seeds it (no ``max_samples`` subsample).

    Returns
    -------
    candidates : list of :class:`~skabc.spectral.candidates.Candidate`
    scores : ndarray
        The forest's predicted ARI of each.
    kept : int
        Index of the partition the arbiter keeps: for the shipped generic kernel's set beyond its forest's training
        sets (:meth:`~skabc.spectral.arbiter.Arbiter.beyond_domain`), its kNN candidate, whatever the forest
        predicts.
    kept_as : {'partition', 'k', 'split', 'wide'}
        What the model's labels keep of that candidate: its partition; only its ``k`` (a kNN-partition arbiter
        cuts the set's kNN graph into it, a counting arbiter the model's own affinity); or its partition with
        some clusters split (``gaussian_split_``); ``'wide'``: its partition, kept as the set is beyond the
        forest's training sets, whatever the forest predicts.

    Raises
    ------
    NotFittedError
        If ``model`` is not fitted.
    ValueError
        If ``model`` was fitted without an arbiter, or ``X`` is too small for one.
    TypeError
        If ``model`` is not an ``ABCClustering``.
    """
    from .cluster import ABCClustering

    if not isinstance(model, ABCClustering):  # a SpectralClustering has no arbiter to ask, nor an arbiter_ to lack
        raise TypeError(f"the candidates are an ABCClustering's arbiter's; got a {type(model).__name__}")
    check_is_fitted(model)
    if getattr(model, "arbiter_", None) is None:
        raise ValueError("this model was fitted without an arbiter (arbiter_ is None): there are no candidates")
    step = model.spectral_step_
    # The rows predict would take: a set of another width or other feature names is refused, not drawn.
    validate_set(model, X, reset=False, ensure_min_samples=1)
    rows = check_array(X, accept_sparse="csr")
    if sp.issparse(rows):
        rows = rows.toarray()  # the network reads dense rows, as fit gives them to it
    eig_seed, seed = draw_seeds(model, check_random_state(model.random_state), 1)[0]
    if model.arbiter_ in COUNTING_ARBITERS:  # the counting kernel's candidates (they give k, not the partition)
        kernel, step, arbiter = counting_setup(model.arbiter_, step)
    else:
        kernel = as_kernel(model.kernel_)
        arbiter = arbiter_for(model.arbiter_, step, own_kernel=is_shipped_generic(kernel))
    candidates = arbiter.candidates_of(step, kernel_affinity(kernel, rows), rows, eig_seed, seed)
    kept, scores = arbiter.choose(candidates, rows.shape[1], rows)
    if model.arbiter_ in COUNTING_ARBITERS or (arbiter.partition == "knn"
                                                and CANDIDATES[candidates[kept].name][0] != "knn"):
        return candidates, scores, kept, "k"
    labels = candidates[kept].labels
    if model.gaussian_split_ and split_gaussian_clusters(rows, labels, step.max_clusters) is not labels:
        return candidates, scores, kept, "split"
    return candidates, scores, kept, "wide" if arbiter.wide_candidate(rows) is not None else "partition"
