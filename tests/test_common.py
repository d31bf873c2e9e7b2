"""scikit-learn's estimator checks for every public estimator."""

from __future__ import annotations

import inspect

import numpy as np
from sklearn.utils.estimator_checks import parametrize_with_checks

from skabc import ABCClustering, ContextualKernel, KernelEnsemble
from skabc.preprocessing import SetCanonicalizer

TINY = dict(d_model=8, n_heads=2, n_blocks=1, set_size=(2, 20), sets_per_epoch=8, batch_size=8, max_epochs=1,
            random_state=0, device="cpu")

CONTEXT = (
    "by design: every output depends on the whole set it is computed on (a contextual kernel), "
    "so results on a subset or a reordered set are not rows of the results on the full set"
)
NO_LABELS = (
    "this instance's kernel is an untrained ContextualKernel, and fit without y needs a fitted one; the "
    "default instance ABCClustering() (the shipped generic kernel) runs check_clustering for real"
)
PER_SET = (
    "by design: transform canonicalises the X it is given as one set (centring, principal axes and scale "
    "are those of the whole set), so transforming a subset does not give rows of the transformed whole; "
    "row order does not matter (transform is row-permutation equivariant, and that check passes)"
)

SQUARE = (
    "by design: affinity='precomputed' takes the square n x n affinity matrix as X, and this check passes "
    "feature rows (not square: a clear ValueError)"
)


def _expected_failures(estimator) -> dict[str, str]:
    if isinstance(estimator, SetCanonicalizer):
        return {"check_methods_subset_invariance": PER_SET}
    failures = {}
    if not (isinstance(estimator, ABCClustering) and estimator.kernel is None and estimator.affinity == "learned"):
        # ABCClustering() passes it under test_sklearn_compatible's seeded permutation: the check sets
        # n_clusters=2, and its two clusters keep their ids in that order (in another they swap, so it passed or
        # failed with the tests run before it).  What holds in general (the partition follows a reordering, the
        # ids are in order of first appearance) is tested in test_cluster.py.
        failures["check_methods_sample_order_invariance"] = (
            CONTEXT + "; for ABCClustering also the ids of the clusters follow the order of the points"
        )
    if isinstance(estimator, (ContextualKernel, KernelEnsemble)):
        failures["check_methods_subset_invariance"] = CONTEXT
    if isinstance(estimator, ABCClustering) and estimator.affinity == "precomputed":
        failures.update({
            "check_clustering": SQUARE,
            "check_clustering(readonly_memmap=True)": SQUARE,
            "check_fit_idempotent": SQUARE,
            "check_methods_subset_invariance": SQUARE + "; predict(X[rows]) gets rows of an affinity, not a set's",
            "check_n_features_in_after_fitting": (
                "by design: predict takes a new set's own m x m affinity, whose width is its size, not "
                "n_features_in_ (a wrong shape fails as 'needs a square n x n affinity matrix')"
            ),
        })
    if isinstance(estimator, ABCClustering) and estimator.affinity == "nearest_neighbors":
        failures["check_methods_subset_invariance"] = (
            "by design: predict clusters the set it is given, and the check predicts one-point sets, which "
            "have no n_neighbors=5 neighbours (a clear ValueError)"
        )
    if isinstance(estimator, ABCClustering) and estimator.kernel is not None:
        failures["check_clustering"] = NO_LABELS
        failures["check_clustering(readonly_memmap=True)"] = NO_LABELS
    return failures


# An expected failure that passes is a stale reason: make it fail loudly (scikit-learn >= 1.8; the package
# supports 1.6, where the expected failures are plain xfails).
STRICT_XFAIL = ({"xfail_strict": True} if "xfail_strict" in inspect.signature(parametrize_with_checks).parameters
                else {})


@parametrize_with_checks(
    [
        ContextualKernel(**TINY),
        KernelEnsemble(ContextualKernel(**TINY), n_members=2, random_state=0),
        ABCClustering(kernel=ContextualKernel(**TINY), random_state=0),
        ABCClustering(random_state=0),
        ABCClustering(affinity="rbf", random_state=0),
        ABCClustering(n_clusters=3, affinity="nearest_neighbors", n_neighbors=5, random_state=0),
        ABCClustering(n_clusters=3, affinity="precomputed", random_state=0),
        SetCanonicalizer(),
    ],
    expected_failed_checks=_expected_failures,
    **STRICT_XFAIL,
)
def test_sklearn_compatible(estimator, check):
    # Some checks draw from numpy's global generator (check_methods_sample_order_invariance permutes the rows with
    # it): seeded, a check passes or fails whatever the tests before it drew.
    state = np.random.get_state()  # noqa: NPY002 - the global generator is what the checks draw from
    np.random.seed(0)  # noqa: NPY002
    try:
        check(estimator)
    finally:
        np.random.set_state(state)  # noqa: NPY002
