"""The kernel protocol: what every affinity source (learned or not) tells ABCClustering.

A kernel turns one set ``X`` into its ``n x n`` affinity and answers three
questions about it without computing it: is it sparse for ``n`` points, does
it fit in memory, and which clustering settings suit it.  ABCClustering and
the spectral step talk to kernels through this class; the few things they read
only where a kernel has them (fitted state, feature names, a memory limit, an
ensemble's members) default to what suits a kernel without them.  The affinity
of any kernel but skabc's own is checked where it is used (:func:`kernel_affinity`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn import get_config
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.utils.validation import _num_samples, check_is_fitted

from .._schema import OUTPUT_CONTAINERS
from .._user_warnings import warn_user
from ..exceptions import SkabcWarning
from ..spectral import ASSIGN_LABELS, N_CLUSTERS_SELECTORS
from ..spectral._affinity_checks import ASYMMETRY_WARNING, asymmetry, beyond_rounding, rounding_rtol
from ..spectral.arbiter import ARBITERS

#: The ABCClustering settings a kernel may recommend (what each ``'auto'`` resolves to).
CLUSTERING_SETTINGS = ("affinity_power", "assign_labels", "n_clusters_selection", "arbiter")


#: Values each recommended setting may take.
_SETTING_CHECKS = {
    # Finite: compared exactly, an integer past float's range too (a forged file); NaN fails too.
    "affinity_power": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= sys.float_info.max,
    "assign_labels": lambda v: v in ASSIGN_LABELS,
    "n_clusters_selection": lambda v: isinstance(v, str) and v in N_CLUSTERS_SELECTORS,
    "arbiter": lambda v: v is None or (isinstance(v, str) and v in ARBITERS),
}


def check_recommended_clustering(settings) -> dict:
    """A validated copy of recommended clustering settings (e.g. read from a file)."""
    if not isinstance(settings, dict):
        raise ValueError(f"recommended clustering settings must be a dict, got {type(settings).__name__}")
    for name, value in settings.items():
        if name not in _SETTING_CHECKS:
            raise ValueError(f"unknown recommended clustering setting {name!r}; expected among {CLUSTERING_SETTINGS}")
        if not _SETTING_CHECKS[name](value):
            raise ValueError(f"invalid recommended value {value!r} for {name!r}")
    return {name: (float(v) if name == "affinity_power" else v) for name, v in settings.items()}


def check_named_columns(kernel, X) -> None:
    """Refuse a frame whose column names are not those ``kernel`` was fitted on.

    For kernels that take sets of any width, which scikit-learn's ``validate_data(reset=False)`` would refuse: the
    width stays free, but a frame's names are checked as scikit-learn checks them (when every one is a string),
    since a frame of other columns is most likely the wrong frame.  An array is taken as it is.
    """
    fitted = getattr(kernel, "feature_names_in_", None)
    columns = getattr(X, "columns", None)
    if fitted is None or columns is None:
        return
    strings = [isinstance(name, str) for name in columns]
    if any(strings) and not all(strings):  # as scikit-learn refuses them
        raise TypeError(f"Feature names are only supported if all input features have string names; X has columns "
                        f"{list(columns)[:6]}. Convert them all to str, or pass an array.")
    if not any(strings):
        return
    if list(columns) != list(fitted):
        raise ValueError(
            f"The feature names should match those that were passed during fit: this {type(kernel).__name__} was "
            f"fitted on columns {list(fitted)[:6]}, X has {list(columns)[:6]}. It takes sets of any width: to "
            "apply it to other columns on purpose, pass them as an array (X.to_numpy())."
        )


def save_with_settings(kernel, path, recommended_clustering: dict | None) -> None:
    """Save ``kernel`` (:func:`skabc.persistence.save`) with ``recommended_clustering`` when given, which it keeps;
    a save that fails leaves the kernel's settings as they were."""
    from .. import persistence  # persistence reads the kernel classes, which import this module

    if recommended_clustering is None:
        persistence.save(kernel, path)
        return
    before = kernel.__dict__.get("recommended_clustering_")
    kernel.recommended_clustering_ = check_recommended_clustering(recommended_clustering)
    try:
        persistence.save(kernel, path)
    except BaseException:
        if before is None:
            del kernel.recommended_clustering_
        else:
            kernel.recommended_clustering_ = before
        raise


class Kernel(BaseEstimator):
    """Base class of skabc kernels: the one protocol every affinity source follows.

    Subclasses implement :meth:`affinity` (for transformers, ``transform`` is
    the same function) and override the other methods when their answer is
    not the default.

    Attributes
    ----------
    outputs_probabilities : bool
        True when every affinity entry is a same-cluster probability in
        ``[0, 1]``: what ``n_clusters_selection='likelihood'`` reads (it checks
        the values itself), and a :class:`~skabc.kernels.KernelEnsemble` says only when every
        member does.  A read-only property, ``False`` here: a subclass overrides it with a property (a class
        attribute ``outputs_probabilities = True`` works too, but pyright refuses an attribute over a property);
        it cannot be set on an instance.
    """

    @property
    def outputs_probabilities(self) -> bool:
        """Whether the affinity entries are same-cluster probabilities: ``False`` unless a subclass says so."""
        return False

    #: Whether :meth:`affinity` guarantees a valid affinity itself (skabc's own kernels).  Any other kernel's
    #: output is checked where it is used (:func:`kernel_affinity`): a bug in a user's kernel is named, not clustered.
    _checks_its_affinity: bool = False

    def affinity(self, X) -> np.ndarray | sp.spmatrix | sp.sparray:
        """The symmetric, non-negative ``n x n`` affinity of the set ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One set.

        Returns
        -------
        affinity : ndarray, scipy sparse matrix or sparse array of shape (n_samples, n_samples)
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement affinity(X)")

    def returns_sparse(self, n_samples: int) -> bool:
        """Whether :meth:`affinity` returns a sparse matrix for a set of ``n_samples`` points.

        Parameters
        ----------
        n_samples : int
            Size of the set.

        Returns
        -------
        sparse : bool
            ``False`` here: a kernel that can return sparse affinities says when.
        """
        return False

    def check_memory(self, n_samples: int, n_copies: float = 1.0) -> None:
        """Raise :class:`~skabc.exceptions.AffinityTooLargeError` if ``n_copies`` dense results would not fit.

        The default kernel has no memory limit.

        Parameters
        ----------
        n_samples : int
            Size of the set.
        n_copies : float, default=1.0
            How many dense ``n x n`` float64 matrices the caller will hold at once.
        """

    def recommended_clustering(self) -> dict:
        """ABCClustering settings that this kernel's ``'auto'`` values resolve to.

        A fitted or loaded kernel keeps them in ``recommended_clustering_`` (chosen on its
        validation data, or saved with it).

        Returns
        -------
        settings : dict
            Keys among ``'affinity_power'``, ``'assign_labels'``,
            ``'n_clusters_selection'`` and ``'arbiter'``; ``{}`` means the generic
            defaults (power 1, ``'kmeans'``, ``'eigengap'``, no arbiter).
        """
        return dict(getattr(self, "recommended_clustering_", {}))


class AffinityTransformerMixin(TransformerMixin, auto_wrap_output_keys=None):  # transform wraps its own output
    """``transform`` for kernels: :meth:`Kernel.affinity`, in the container ``set_output`` asks for.

    The default is the affinity as it comes (ndarray or sparse).  ``'pandas'`` or ``'polars'`` (here or in
    scikit-learn's global ``transform_output``) give a DataFrame whose columns are the set's points, named
    ``<classname>0``, ``<classname>1``, ... (the pandas index is the input's).  There is no
    ``get_feature_names_out``: the columns are the points of whichever set is transformed, not features.
    ABCClustering reads :meth:`Kernel.affinity`, so no output setting reaches it.
    """

    def transform(self, X):
        """The affinity of the set ``X`` (:meth:`affinity`), in the container :meth:`set_output` asks for.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One set.

        Returns
        -------
        affinity : ndarray, scipy.sparse.csr_matrix or DataFrame of shape (n_samples, n_samples)
            The rows of ``X`` against each other, in the context of that set: not new rows against the training rows
            (``n_test x n_train``) as scikit-learn's fitted transformers such as ``KNeighborsTransformer`` give, so
            not a ``kernel='precomputed'`` input of a predictor such as ``SVC``.  Any clusterer that takes an
            ``affinity='precomputed'`` set takes it.
        """
        return self._as_output(self.affinity(X), X)

    def fit_transform(self, X, y=None, groups=None):
        """Fit on ``(X, y, groups)``, then return the affinity of ``X`` as one set.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Labelled rows, as :meth:`fit` takes them; their affinity is computed as one set.
        y : array-like of shape (n_samples,), default=None
            Labels, as :meth:`fit` takes them (a trainable kernel requires them).
        groups : array-like of shape (n_samples,), default=None
            Set ids, as :meth:`fit` takes them.

        Returns
        -------
        affinity : ndarray, scipy.sparse.csr_matrix or DataFrame of shape (n_samples, n_samples)
        """
        return self.fit(X, y, groups=groups).transform(X)

    def set_output(self, *, transform=None):
        """Choose the container :meth:`transform` returns: ``'default'``, ``'pandas'`` or ``'polars'``.

        Parameters
        ----------
        transform : {'default', 'pandas', 'polars'} or None, default=None
            ``None`` leaves the setting unchanged.

        Returns
        -------
        self : estimator
        """
        if transform is None:
            return self
        if not isinstance(transform, str) or transform not in OUTPUT_CONTAINERS:
            raise ValueError(f"set_output(transform=...) must be one of {OUTPUT_CONTAINERS} or None, got {transform!r}")
        if transform != "default" and importlib.util.find_spec(transform) is None:
            raise ImportError(f"set_output(transform={transform!r}) needs {transform}: pip install {transform}")
        self._sklearn_output_config = {**getattr(self, "_sklearn_output_config", {}), "transform": transform}
        return self

    def _as_output(self, affinity, X):
        container = getattr(self, "_sklearn_output_config", {}).get("transform", get_config()["transform_output"])
        if container == "default":
            return affinity
        name = type(self).__name__
        if sp.issparse(affinity):  # scikit-learn's own wording, which its checks and users' filters know
            raise ValueError(f"{container.capitalize()} output does not support sparse data: {name} returned a "
                             f"sparse affinity for this set of {affinity.shape[0]} points; set affinity_mode='dense' "
                             "or set_output(transform='default').")
        columns = [f"{name.lower()}{i}" for i in range(affinity.shape[1])]
        if container == "polars":
            return importlib.import_module("polars").DataFrame(affinity, schema=columns, orient="row")
        index = X.index if hasattr(X, "index") and hasattr(X, "columns") else None
        return importlib.import_module("pandas").DataFrame(affinity, index=index, columns=columns, copy=False)


class TransformerKernel(Kernel):
    """Adapter: any fitted transformer whose ``transform`` returns an affinity is a :class:`Kernel`.

    Parameters
    ----------
    transformer : estimator, default=None
        Fitted; ``transform(X)`` returns the ``(n, n)`` affinity of the set
        ``X`` (dense or sparse).  Required: the ``None`` default is scikit-learn's
        convention for a parameter that has no default value.
    """

    _checks_its_affinity = True  # affinity() checks the transformer's output

    def __init__(self, transformer: Any = None):
        self.transformer = transformer

    def affinity(self, X):
        """``transformer.transform(X)``, checked: the finite, non-negative ``(n, n)`` affinity of the rows of ``X``."""
        return self.checked(self.transformer.transform(X), X)

    def checked(self, affinity, X):
        """``affinity``, the transformer's output for the set ``X``, once checked (:func:`checked_affinity`)."""
        return checked_affinity(affinity, X, f"{type(self.transformer).__name__}.transform(X)")

    def returns_sparse(self, n_samples: int) -> bool:
        """Whether the wrapped transformer's affinity is sparse: unknown before ``transform``.

        Parameters
        ----------
        n_samples : int
            Size of the set.

        Returns
        -------
        sparse : bool
            ``False``: the caller treats the result as it comes.
        """
        return False

    def __sklearn_is_fitted__(self) -> bool:
        check_is_fitted(self.transformer)
        return True


def checked_affinity(affinity, X, source: str):
    """A kernel's output ``affinity`` for the set ``X`` as the spectral step needs it, once checked.

    The ``(n, n)`` array (or sparse matrix) of finite, non-negative reals, booleans and integers as float64 (a 0/1
    adjacency); one that differs from its transpose is averaged with it, as scikit-learn's spectral embedding
    averages any affinity, with SpectralClustering's warning where the difference is beyond rounding.  Anything
    else is a ``ValueError`` naming ``source`` (the call that returned it, e.g. ``'MyKernel.affinity(X)'``) and
    the problem.
    """
    if not sp.issparse(affinity):
        try:
            affinity = np.asarray(affinity)
        except (TypeError, ValueError) as error:  # a ragged list
            raise ValueError(f"the kernel {source} must return an affinity matrix, got {error}") from None
    n = _num_samples(X)
    if affinity.ndim != 2 or affinity.shape != (n, n):
        raise ValueError(f"the kernel {source} must return the ({n}, {n}) affinity of the {n} rows of X, got "
                         f"shape {affinity.shape}")
    values = affinity.data if sp.issparse(affinity) else affinity
    if values.dtype.kind not in "biuf" or not np.isfinite(values).all():
        raise ValueError(f"the affinity the kernel {source} returned holds NaN, infinite or non-numeric values")
    if values.dtype.kind != "f":
        affinity, values = affinity.astype(np.float64), values.astype(np.float64)
    if values.size and values.min() < 0:
        raise ValueError(f"the affinity the kernel {source} returned has negative entries (down to "
                         f"{float(values.min()):.3g}); spectral clustering needs non-negative affinities, such "
                         "as exp(-gamma * d**2) or a kNN connectivity")
    largest = asymmetry(affinity)
    if largest == 0:
        return affinity
    # Rounding of the output's own precision is no asymmetry: averaged without a word (scikit-learn's spectral
    # embedding would warn of any difference past 1e-10).
    if beyond_rounding(largest, float(values.max(initial=0.0)), rounding_rtol(values.dtype)):
        # SpectralClustering's words first, so that filters written for it (by message) catch this one too; no
        # per-set number, so that a fit of many sets warns once.
        warn_user(f"{ASYMMETRY_WARNING} (The kernel {source} returned an affinity that differs from its transpose "
                  "beyond rounding; their mean is clustered.)", SkabcWarning)
    affinity = 0.5 * (affinity + affinity.T)
    affinity = affinity.tocsr() if sp.issparse(affinity) else affinity
    return affinity


def kernel_affinity(kernel: Kernel, X):
    """``kernel.affinity(X)``; checked (:func:`checked_affinity`) unless the kernel guarantees it itself."""
    affinity = kernel.affinity(X)
    # The flag vouches for skabc's own affinity methods: a subclass that overrides one is checked as any kernel.
    if kernel._checks_its_affinity and type(kernel).affinity.__module__.startswith("skabc."):
        return affinity
    return checked_affinity(affinity, X, f"{type(kernel).__name__}.affinity(X)")


def fit_on_labels(kernel, X, y, groups=None):
    """``kernel.fit(X, y)``, with ``groups=groups`` only where given, refused in skabc's words where its ``fit``
    cannot take them (:func:`check_takes_groups`): a plain transformer kernel or a Pipeline need not take any.

    Parameters
    ----------
    kernel : estimator
        An unfitted kernel (or a copy to fine-tune).
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        Cluster labels.
    groups : array-like of shape (n_samples,), default=None

    Returns
    -------
    kernel : estimator
        What ``kernel.fit`` returns.
    """
    if groups is not None and get_config().get("enable_metadata_routing", False):
        # Routing on: a kernel whose fit request declines groups trains without them (each is still one set to cluster).
        declined = getattr(kernel, "_get_metadata_request", None) and kernel._get_metadata_request().fit.requests
        groups = None if declined and declined.get("groups") is False else groups
    if groups is None:
        return kernel.fit(X, y)
    check_takes_groups(kernel)
    return kernel.fit(X, y, groups=groups)


def check_takes_groups(kernel) -> None:
    """Refuse, in skabc's words, ``groups`` for an unfitted kernel whose ``fit`` cannot take them: a transformer
    without a ``groups`` argument, or a Pipeline while scikit-learn's metadata routing is off (the Pipeline's own
    error tells the user to pass step parameters to a ``Pipeline.fit`` they never called)."""
    import inspect

    from sklearn.pipeline import Pipeline

    if isinstance(kernel, Pipeline):  # routed to the steps that request them (scikit-learn names one that does not)
        takes = get_config().get("enable_metadata_routing", False)
    else:  # a groups argument, or a fit(**params) of its own that decides
        parameters = inspect.signature(kernel.fit).parameters.values()
        takes = any(p.name == "groups" or p.kind is p.VAR_KEYWORD for p in parameters)
    if not takes:
        raise ValueError(
            f"groups were given, but the kernel's fit ({type(kernel).__name__}.fit) takes no groups: pass no "
            "groups, or turn on scikit-learn's metadata routing (sklearn.set_config(enable_metadata_routing=True)) "
            "and request them from the step that takes them (e.g. ContextualKernel().set_fit_request(groups=True))."
        )


def unfrozen(estimator):
    """The estimator a :class:`sklearn.frozen.FrozenEstimator` wraps, or ``estimator`` itself."""
    return estimator.estimator if isinstance(estimator, FrozenEstimator) else estimator


def kernel_is_fitted(kernel) -> bool:
    """Whether a ``kernel`` parameter (frozen or not) is ready to use (else ``fit`` trains it on ``y``)."""
    inner = unfrozen(kernel)  # a FrozenEstimator has a fit of its own, whatever it wraps
    try:
        if hasattr(inner, "fit"):
            check_is_fitted(inner)
        # A Kernel with no fit of its own (only affinity(X)) is ready unless it says otherwise.
        elif not getattr(inner, "__sklearn_is_fitted__", lambda: True)():
            raise NotFittedError(f"{type(inner).__name__} is not fitted")
    except NotFittedError:
        return False
    return True


def check_kernel_type(kernel) -> None:
    """Refuse, with a ``TypeError`` saying what to do, a ``kernel`` that :func:`as_kernel` cannot use.

    ``ABCClustering``'s parameter check takes any object with an ``affinity`` method, as a :class:`Kernel` has; one
    that is neither a :class:`Kernel` (frozen or not) nor a transformer would only fail later, inside the fit.
    """
    if isinstance(unfrozen(kernel), Kernel) or all(callable(getattr(kernel, m, None)) for m in ("fit", "transform")):
        return
    raise TypeError(f"kernel={type(kernel).__name__}(...) has an affinity method but does not derive from "
                    "skabc.kernels.Kernel, and is no transformer (fit and transform): derive it from "
                    "skabc.kernels.Kernel (which supplies the rest of the protocol), or give it fit and transform.")


def as_kernel(estimator) -> Kernel:
    """The :class:`Kernel` view of a fitted kernel, a frozen one, or any affinity transformer.

    A :class:`sklearn.frozen.FrozenEstimator` around a kernel is the kernel
    itself for inference (freezing only stops ``fit``).

    Parameters
    ----------
    estimator : Kernel, FrozenEstimator or transformer
        A kernel of this package, one wrapped in a ``FrozenEstimator``, or any
        transformer whose ``transform(X)`` returns the ``n x n`` affinity of ``X``.

    Returns
    -------
    kernel : Kernel
        The kernel itself, or a :class:`TransformerKernel` around the transformer.
    """
    inner = unfrozen(estimator)
    if isinstance(inner, Kernel):
        return inner
    return TransformerKernel(estimator)

