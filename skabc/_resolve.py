"""How ABCClustering's ``'auto'`` settings resolve: once in ``fit``, and again when a saved model is loaded.

Every ``'auto'`` takes the kernel's recommendation
(:meth:`~skabc.kernels.Kernel.recommended_clustering`, stored with every
shipped kernel), else what :class:`~sklearn.cluster.SpectralClustering` does;
the resolved values become fitted attributes and build the frozen
:class:`~skabc.spectral.SpectralStep`.
"""

from __future__ import annotations

from numbers import Integral

from ._fit_inputs import is_learned, is_pairwise
from ._subsample import resolve_max_samples
from ._user_warnings import warn_user
from .exceptions import SkabcWarning
from .kernels.base import check_recommended_clustering
from .spectral import SpectralStep
from .spectral.arbiter import GIVEN_K_ARBITERS
from .spectral.eigen import _import_pyamg

#: What each 'auto' setting resolves to when the kernel recommends nothing (SpectralClustering's choices).
SPECTRAL_DEFAULTS = {"affinity_power": 1.0, "assign_labels": "kmeans", "n_clusters_selection": "eigengap",
                     "arbiter": None}


def resolve_settings(model, recommended: dict, gaussian_split: bool | None = None) -> None:
    """Set ``model``'s ``affinity_power_``, ``assign_labels_``, ``n_clusters_selection_``, ``arbiter_``,
    ``max_samples_``, ``gaussian_split_`` and ``spectral_step_`` from its parameters, ``'auto'`` taken from
    ``recommended``; ``gaussian_split``: what a saved model's fit resolved it to (else resolved here).

    Raises
    ------
    ValueError
        As :func:`check_setting_combinations` (but for a missing pyamg).
    """
    _check_contradictions(model)
    recommended = {**SPECTRAL_DEFAULTS, **check_recommended_clustering(recommended)}

    def resolved(name: str):
        value = getattr(model, name)
        return recommended[name] if value == "auto" else value

    model.affinity_power_ = float(resolved("affinity_power"))
    model.assign_labels_ = resolved("assign_labels")
    model.n_clusters_selection_ = resolved("n_clusters_selection")
    model.arbiter_ = resolve_arbiter(model, recommended["arbiter"])
    model.max_samples_ = resolve_max_samples(model.max_samples, is_learned(model.affinity))
    if model.max_samples_ is not None and model.n_clusters is not None:  # 'auto' here: an int below k is refused
        model.max_samples_ = max(model.max_samples_, int(model.n_clusters))  # a subsample must hold k points
    model.gaussian_split_ = resolve_gaussian_split(model) if gaussian_split is None else gaussian_split
    model.spectral_step_ = SpectralStep(
        n_clusters=model.n_clusters, max_clusters=model.max_clusters, selection=model.n_clusters_selection_,
        affinity_power=model.affinity_power_, assign_labels=model.assign_labels_, eigen_solver=model.eigen_solver,
        n_components=model.n_components, n_init=model.n_init, eigen_tol=model.eigen_tol, verbose=model.verbose,
        follows_sklearn=model._follows_sklearn(), gaussian_split=model.gaussian_split_,
    )


def check_setting_combinations(model) -> None:
    """Refuse parameters that contradict each other, whatever the data, and a solver that is not installed (``fit``
    checks them before it changes anything; loading a saved model needs no pyamg until it clusters).

    Raises
    ------
    ValueError
        If ``max_samples`` is set for a precomputed affinity or distance
        matrix, which cannot be subsampled as a set of points, or is below
        a given ``n_clusters``; if ``eigen_solver='amg'`` and pyamg is missing.
    """
    _check_contradictions(model)
    if model.eigen_solver == "amg":  # scikit-learn's own message names no extra to install
        _import_pyamg()


def _check_contradictions(model) -> None:
    if is_pairwise(model.affinity) and model.max_samples not in ("auto", None):
        raise ValueError(f"max_samples={model.max_samples!r} subsamples sets of points; affinity="
                         f"{model.affinity!r} takes the whole matrix. Leave max_samples='auto' (or None).")
    if _asks_split(model) and (model.n_clusters is not None or is_pairwise(model.affinity)):
        raise ValueError("gaussian_split=True splits clusters of a partition whose k was estimated from rows; "
                         f"n_clusters={model.n_clusters!r} and affinity={model.affinity!r} leave nothing to split. "
                         "Leave gaussian_split='auto' (or False).")
    if (isinstance(model.max_samples, Integral) and model.n_clusters is not None
            and model.max_samples < model.n_clusters):
        raise ValueError(f"max_samples={model.max_samples} is below n_clusters={model.n_clusters}: a subsample "
                         "clustered first holds fewer points than the clusters asked for. Raise max_samples.")


#: SpectralClustering's parameters of a scikit-learn affinity, with their defaults (ABCClustering's too).
AFFINITY_PARAMETER_DEFAULTS = {"gamma": 1.0, "n_neighbors": 10, "degree": 3, "coef0": 1, "kernel_params": None}


def warn_unread_affinity_parameters(model) -> None:
    """Warn where a scikit-learn affinity's parameter is set but the learned affinity, which does not read it, is used.

    ``SpectralClustering(gamma=0.01)`` means an RBF affinity of that width (its ``affinity`` defaults to
    ``'rbf'``); with the class name swapped, ``affinity`` defaults to ``'learned'`` and the same keyword would have
    no effect without a word.
    """
    if not is_learned(model.affinity):
        return
    # An empty kernel_params changes nothing, as None.
    unread = [f"{name}={getattr(model, name)!r}" for name, default in AFFINITY_PARAMETER_DEFAULTS.items()
              if getattr(model, name) != default and not (name == "kernel_params" and getattr(model, name) == {})]
    if unread:
        warn_user(f"{', '.join(unread)} set, but affinity='learned' (ABCClustering's default; SpectralClustering's "
                  "is 'rbf') does not read it: pass affinity='rbf' (or the affinity it was meant for) to use it, or "
                  "leave it at its default.", SkabcWarning)


def resolve_gaussian_split(model) -> bool:
    """Whether each set's partition gets :func:`~skabc.spectral.split.split_gaussian_clusters`: ``k`` estimated
    from rows, and the split asked for or, for ``'auto'``, a learned affinity's partition kept by the
    ``'generic'`` arbiter (what it was chosen after, ``benchmarks/gaussian_split.py``: that arbiter's partitions
    merge touching blobs; after the others, or on a scikit-learn affinity, it was not measured; a fine-tuned
    kernel that keeps the generic arbiter gets it too).  Needs ``arbiter_`` resolved;
    ``check_setting_combinations`` refuses it asked for with ``k`` given."""
    if model.n_clusters is not None or is_pairwise(model.affinity):
        return False
    if isinstance(model.gaussian_split, str):
        return is_learned(model.affinity) and model.arbiter_ == "generic"
    return bool(model.gaussian_split)


def _asks_split(model) -> bool:
    """``gaussian_split`` set to true (not ``'auto'``, which also means off where nothing is estimated)."""
    return not isinstance(model.gaussian_split, str) and bool(model.gaussian_split)


def counts_with_generic(model) -> bool:
    """Whether ``'auto'`` counts clusters with the generic kernel: a scikit-learn affinity of the rows, ``k`` and
    its rule left to the model (:mod:`skabc._counting`; a kNN graph's or an RBF's own eigengap overcounts)."""
    return (not is_learned(model.affinity) and not is_pairwise(model.affinity) and model.n_clusters is None
            and model.n_clusters_selection == "auto")


def resolve_arbiter(model, recommended: str | None) -> str | None:
    """The arbiter a fit uses (its file for ``k`` unknown, or for the given ``n_clusters``).

    ``'auto'`` takes the kernel's recommendation: with ``k`` unknown unless a k rule was chosen (the user's
    choice of partition, which the arbiter would overrule), with ``n_clusters`` given always.  A scikit-learn
    affinity of the rows, with ``k`` and its rule left to the model, gets ``'generic-count'``.

    Raises
    ------
    ValueError
        If an arbiter is named for a precomputed matrix (it needs the rows, for their kNN graph), or
        one with no file for a given ``k`` is named with ``n_clusters``.
    """
    if model.arbiter is None:
        return None
    if model.arbiter == "auto":
        if counts_with_generic(model):
            return "generic-count"
        if recommended is None or is_pairwise(model.affinity):
            return None
        if model.n_clusters is None:
            return recommended if model.n_clusters_selection == "auto" else None
        return recommended if recommended in GIVEN_K_ARBITERS else None
    if is_pairwise(model.affinity):
        raise ValueError(f"arbiter={model.arbiter!r} compares partitions of the rows of X, among them their kNN "
                         f"graph's; affinity={model.affinity!r} gives a matrix, not rows. Use arbiter=None.")
    if model.n_clusters is not None and model.arbiter not in GIVEN_K_ARBITERS:
        raise ValueError(f"arbiter={model.arbiter!r} has no file for a given n_clusters; arbiters for a given k: "
                         f"{sorted(GIVEN_K_ARBITERS)}. Use arbiter=None.")
    return model.arbiter
