"""An ensemble of learned kernels: the mean of their same-cluster probabilities.

Kernels trained from different seeds make different mistakes on sets unlike
their training data (a new alphabet, a new domain); the mean of their
probabilities is a better calibrated, more accurate affinity (a deep
ensemble).  The ensemble is itself a kernel: ``ABCClustering(kernel=...)``,
a Pipeline, or any ``affinity='precomputed'`` clusterer takes it as is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import _num_samples, check_is_fitted

from .. import _schema, persistence
from .._constraints import IntRange
from .._typing import Int
from .._user_warnings import each_warning_once, warn_user
from .._validation import KernelParamsMixin, add_note
from ..exceptions import TrainingInterruptedWarning
from ..training.early_stopping import choice_interrupted, interrupted_by_user
from ..training.plan import network_of
from ._contextual_io import WEIGHTS as _MEMBER_WEIGHTS
from ._contextual_io import check_contextual_part, described_width
from .base import (
    AffinityTransformerMixin,
    Kernel,
    TransformerKernel,
    as_kernel,
    check_recommended_clustering,
    fit_on_labels,
    kernel_affinity,
    kernel_is_fitted,
    save_with_settings,
    unfrozen,
)
from .contextual import ContextualKernel

if TYPE_CHECKING:
    import os

    import torch
    from typing_extensions import Self


@persistence.persistent
class KernelEnsemble(KernelParamsMixin, AffinityTransformerMixin, Kernel, auto_wrap_output_keys=None):
    """Mean affinity of several kernels trained from different seeds.

    Parameters
    ----------
    kernel : estimator, default=None
        The kernel to train ``n_members`` times (a clone each time, with its
        ``random_state`` drawn from this ensemble's ``random_state``);
        ``None`` means ``ContextualKernel()``.
    n_members : int, default=3
        Number of kernels.
    random_state : int, RandomState instance or None, default=None
        Seeds of the members.

    Attributes
    ----------
    kernels_ : list of estimators
        The fitted members: ``n_members`` of them, or those trained when Ctrl-C stopped the fit.
    n_features_in_ : int
        Number of features of the members bound to an input width; absent
        when every member canonicalises its input (the generic kernel, or one
        fine-tuned from it) and so takes sets of any width.
    feature_names_in_ : ndarray of str
        Feature names seen during fit, when X has them.

    Examples
    --------
    >>> from skabc import ContextualKernel, KernelEnsemble
    >>> from skabc.datasets import make_circles_sets
    >>> X, y, groups = make_circles_sets(n_sets=32, set_size=60, random_state=0)
    >>> member = ContextualKernel(d_model=16, n_blocks=1, max_epochs=1, set_size=60)
    >>> ensemble = KernelEnsemble(member, n_members=2, random_state=0).fit(X, y, groups=groups)
    >>> ensemble.transform(X[:60]).shape
    (60, 60)
    """

    #: The members' affinities are checked here, member by member, and their mean is one too.
    _checks_its_affinity = True

    _parameter_constraints: dict = {
        "kernel": [HasMethods(["fit", "transform"]), None],
        "n_members": [IntRange(1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, kernel: Any = None, n_members: Int = 3,
                 random_state: Int | np.random.RandomState | None = None):
        self.kernel = kernel
        self.n_members = n_members
        self.random_state = random_state

    def fit(self, X, y=None, groups=None):
        """Train ``n_members`` clones of ``kernel`` on the same labelled sets, from different seeds.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Cluster labels (as for :meth:`ContextualKernel.fit`); required, ``None`` is refused (the default
            only keeps scikit-learn's ``fit(X, y=None)`` signature).
        groups : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : KernelEnsemble
        """
        self._validate_params()
        if y is None:
            raise ValueError("KernelEnsemble requires y to be passed, but the target y is None: y holds the labels "
                             "its members train on. To combine fitted kernels, use KernelEnsemble.from_fitted")
        base = ContextualKernel() if self.kernel is None else self.kernel
        if isinstance(base, FrozenEstimator):
            raise ValueError("kernel is a FrozenEstimator: fit would copy that one fitted kernel n_members times, not "
                             "train members from different seeds; pass an unfitted kernel, or combine fitted kernels "
                             "with KernelEnsemble.from_fitted")
        if self.random_state is None and _nested_params(base, "checkpoint_dir"):
            raise ValueError("random_state=None draws new member seeds on every fit, so no member could resume the "
                             "checkpoint it wrote in checkpoint_dir; set KernelEnsemble(random_state=...) to an int")
        rng = check_random_state(self.random_state)
        members = []
        with each_warning_once():  # the members see the same labels: one remark on them, not one per member
            for index in range(self.n_members):
                member = clone(base)
                seed = int(rng.randint(np.iinfo(np.int32).max))
                # Every random_state and checkpoint_dir, a Pipeline's steps' too (their names carry the step's):
                # members differ by seed, and each resumes only its own run, from a folder of its own.
                member.set_params(**dict.fromkeys(_nested_params(member, "random_state", set_only=False), seed),
                                  **{name: str(Path(folder) / f"member_{index}")
                                     for name, folder in _nested_params(member, "checkpoint_dir").items()})
                if any(_nested_params(member, "verbose").values()):  # each member prints its own log: say whose
                    print(f"KernelEnsemble member {index + 1} of {self.n_members} (random_state={seed})", flush=True)
                members.append(fit_on_labels(member, X, y, groups))
                net = _training_net(member)
                if index + 1 < self.n_members and net is not None and interrupted_by_user(net):
                    # Ctrl-C stops the whole fit, as it stops one kernel's: the members trained so far are kept.
                    warn_user(f"KernelEnsemble training was interrupted during member {index + 1} of "
                              f"{self.n_members}: the ensemble keeps the "
                              f"{'member' if index == 0 else f'{index + 1} members'} trained so far."
                              + (" Call fit again to resume from checkpoint_dir."
                                 if _nested_params(member, "checkpoint_dir") and not choice_interrupted(net) else ""),
                              TrainingInterruptedWarning)
                    break
        self._set_members(members)
        return self

    @classmethod
    def from_fitted(cls, kernels) -> Self:
        """An ensemble of kernels that are already fitted (e.g. trained separately, or loaded).

        Parameters
        ----------
        kernels : list of fitted estimators
            Each ``transform(X)`` returns the ``(n, n)`` affinity of the set
            ``X`` (a ContextualKernel, a KernelEnsemble, a FrozenEstimator of
            one, or any such transformer).  The members bound to an input width
            share it; canonicalising ones (the generic kernel) take any width.

        Returns
        -------
        ensemble : KernelEnsemble
            Fitted; its ``kernel`` parameter is an unfitted clone of the first member.

        Raises
        ------
        TypeError
            If a member has no ``transform`` method (e.g. a PairwiseKernel).
        ValueError
            If there is no member, or the width-bound members take different widths, different column names,
            or some named columns and others none.
        """
        kernels = list(kernels)
        if not kernels:
            raise ValueError("from_fitted needs at least one fitted kernel")
        for i, kernel in enumerate(kernels):
            if not callable(getattr(kernel, "transform", None)):
                raise TypeError(
                    f"KernelEnsemble member {i} is a {type(kernel).__name__}, which has no transform method; members "
                    "must be fitted kernels whose transform(X) returns the (n, n) affinity of the set X (a "
                    "ContextualKernel, a KernelEnsemble, a FrozenEstimator of one, or any such transformer)")
            if not kernel_is_fitted(kernel):  # a Kernel with no fit of its own is ready unless it says otherwise
                check_is_fitted(kernel)  # scikit-learn's NotFittedError, naming the member's class
        widths = {w for w in map(_bound_width, kernels) if w is not None}
        if len(widths) > 1:
            raise ValueError(f"the kernels were fitted on different numbers of features: {sorted(widths)} (only "
                             "canonicalising kernels, such as the generic one, take sets of any width)")
        # Only width-bound members read column names (canonicalising ones take any columns, named or not).
        named = [getattr(unfrozen(k), "feature_names_in_", None) for k in kernels if _bound_width(k) is not None]
        names = {tuple(n) for n in named if n is not None}
        if names and any(n is None for n in named):
            # Else whether the ensemble has feature names would depend on the members' order, and every set would
            # warn: a DataFrame that the unnamed members were not fitted with, or an array that the named ones were.
            raise ValueError("some kernels were fitted on named columns (a DataFrame) and others on an array; fit "
                             "them all on the same kind of input, so that an ensemble passes every member the same "
                             "columns")
        if len(names) > 1:
            raise ValueError(f"the kernels were fitted on different feature names: {sorted(names)[:2]}; an ensemble "
                             "passes every member the same columns")
        # The template a refit clones: the first kernel itself, unfitted (a FrozenEstimator clones to itself, fitted).
        ensemble = cls(kernel=clone(unfrozen(kernels[0])), n_members=len(kernels))
        ensemble._set_members(kernels)
        return ensemble

    def _set_members(self, members: list) -> None:
        self.kernels_ = members
        # A refit may leave no width-bound member; settings saved with (or loaded into) the former members are theirs.
        for name in ("n_features_in_", "feature_names_in_", "recommended_clustering_"):
            self.__dict__.pop(name, None)
        bound = [k for k in members if _bound_width(k) is not None]
        if bound:
            self.n_features_in_ = _bound_width(bound[0])
            if hasattr(bound[0], "feature_names_in_"):
                self.feature_names_in_ = bound[0].feature_names_in_

    def affinity(self, X):
        """Mean of the members' affinities of the set ``X`` (what :meth:`transform` returns, as ``set_output`` asks).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One set.

        Returns
        -------
        affinity : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_samples)
            Dense when every member returns a dense affinity.  Otherwise sparse
            (as :meth:`returns_sparse` says): the mean over the union of the
            pairs the sparse members store, each counting a pair it does not
            store as 0 and each dense member giving its own value.
        """
        check_is_fitted(self, "kernels_")
        n, n_members = _num_samples(X), len(self.kernels_)
        members = [as_kernel(kernel) for kernel in self.kernels_]
        for member in members:  # a dense member's matrix and the running sum: two copies
            if not member.returns_sparse(n):
                member.check_memory(n, n_copies=2)
        dense = sparse = None
        for i, (kernel, member) in enumerate(zip(self.kernels_, members, strict=True)):
            # A kernel's affinity whatever its set_output; any other transformer's output as an array; both
            # checked (shape, finite, non-negative) as they are when the member is ABCClustering's kernel.
            if not isinstance(member, TransformerKernel):
                try:
                    affinity = kernel_affinity(member, X)
                except ValueError as error:
                    if type(error) is not ValueError:  # a subclass keeps its type; the traceback names the member
                        add_note(error, f"raised by KernelEnsemble member {i} ({type(kernel).__name__})")
                        raise
                    raise ValueError(f"KernelEnsemble member {i} ({type(kernel).__name__}): {error}") from error
            else:
                try:  # the member's own errors keep their type (an AffinityTooLargeError stays a MemoryError)
                    output = kernel.transform(X)
                except Exception as error:
                    add_note(error, f"raised by KernelEnsemble member {i} ({type(kernel).__name__})")  # names it
                    raise
                try:  # the checks' errors name the member in their message
                    affinity = member.checked(output, X)
                except ValueError as error:
                    raise ValueError(f"KernelEnsemble member {i} ({type(kernel).__name__}): {error}") from None
            if sp.issparse(affinity):
                sparse = affinity if sparse is None else sparse + affinity
            elif dense is None:
                dense = np.array(affinity, dtype=np.float64)  # our own copy (never a member's array, nor a matrix)
            else:
                dense += affinity  # in place: one running sum, as check_memory counts
        if sparse is None:
            dense /= n_members
            return dense
        # Sparse as soon as one member is (large sets): a dense member counts at the stored pairs only, so the
        # result stays as sparse as the sparse members (ndarray + sparse would be a dense numpy.matrix).
        mean = sp.csr_matrix(sparse / n_members)
        if dense is not None:
            mean.sum_duplicates()
            rows = np.repeat(np.arange(n), np.diff(mean.indptr))
            mean.data += dense[rows, mean.indices] / n_members
        return mean

    def _members_or_template(self) -> list:
        """The fitted members, or before ``fit`` the kernel each member will be a clone of."""
        return getattr(self, "kernels_", None) or [ContextualKernel() if self.kernel is None else self.kernel]

    @property
    def outputs_probabilities(self) -> bool:
        """A mean of probabilities is a probability: true when every member outputs them."""
        return all(as_kernel(k).outputs_probabilities for k in self._members_or_template())

    def returns_sparse(self, n_samples: int) -> bool:
        """Whether ``transform`` of ``n_samples`` points returns a sparse affinity: when any member does."""
        check_is_fitted(self, "kernels_")
        return any(as_kernel(k).returns_sparse(n_samples) for k in self.kernels_)

    def check_memory(self, n_samples: int, n_copies: float = 1.0) -> None:
        """Refuse a dense affinity that would not fit (one more copy: the running sum).

        Parameters
        ----------
        n_samples : int
            Points of the set.
        n_copies : float, default=1.0
            Dense ``n x n`` copies the caller holds besides the members' (the sum adds one).
        """
        check_is_fitted(self, "kernels_")
        for kernel in self.kernels_:
            as_kernel(kernel).check_memory(n_samples, n_copies=n_copies + 1)

    def recommended_clustering(self) -> dict:
        """ABCClustering settings saved with this ensemble, else those every member recommends; ``{}`` if none.

        Members fine-tuned from the generic kernel recommend its clustering (power, ``'njw'``, consensus, the
        arbiter): a mean of their affinities is clustered the same way, not with the generic defaults.  Where
        the members disagree the defaults apply, unless settings are saved with the ensemble.
        """
        if hasattr(self, "recommended_clustering_"):
            return dict(self.recommended_clustering_)
        members = [as_kernel(k).recommended_clustering() for k in check_is_fitted(self, "kernels_") or self.kernels_]
        return dict(members[0]) if members and all(m == members[0] for m in members) else {}

    def save(self, path, *, recommended_clustering: dict | None = None) -> None:
        """Write every member to one safetensors file (weights + JSON description); atomic.

        Parameters
        ----------
        path : str or path
        recommended_clustering : dict, default=None
            ABCClustering settings to store with the ensemble (see :meth:`recommended_clustering`); ``None``
            keeps its own.  A save that fails leaves them as they were.

        Raises
        ------
        TypeError
            If a member is not a ContextualKernel (or a FrozenEstimator of one), or a parameter is no plain value.
        """
        check_is_fitted(self, "kernels_")
        save_with_settings(self, path, recommended_clustering)

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: str | torch.device | None = "auto") -> Self:
        """Load an ensemble written by :meth:`save`, without unpickling anything.

        Parameters
        ----------
        path : str or path-like
        device : {'auto', 'cpu', 'cuda'}, a torch device string, torch.device or None, default='auto'
            ``'auto'`` (or ``None``): CUDA when available, else the CPU.
        """
        return persistence.load(path, device=device, expected=cls)

    def _describe(self) -> tuple[dict, dict]:
        """JSON description and tensors for :mod:`skabc.persistence` (members: ContextualKernels)."""
        check_is_fitted(self, "kernels_")
        if len(self.kernels_) > _schema.MAX_MEMBERS:  # load refuses more: say so now, not when the file is read
            raise ValueError(f"an ensemble of {len(self.kernels_)} members cannot be saved (at most "
                             f"{_schema.MAX_MEMBERS})")
        members, tensors = [], {}
        for i, member in enumerate(self.kernels_):
            # A frozen member is its kernel, fitted: it is saved as such and loads as a ContextualKernel.
            kernel = unfrozen(member)
            if not isinstance(kernel, ContextualKernel):
                raise TypeError(f"only ensembles of ContextualKernel (or FrozenEstimator of one) can be saved, "
                                f"got a {type(kernel).__name__}")
            meta, part = kernel._describe()
            members.append(meta["kernel"])
            tensors.update({_member_prefix(i) + k: v for k, v in persistence.nested(_MEMBER_WEIGHTS, part).items()})
        meta = {"params": persistence.plain_params(self, skip=("kernel",)), "members": members,
                "recommended_clustering": self.recommended_clustering()}
        return meta, tensors

    @classmethod
    def _check_description(cls, meta: dict, header: dict, where: str = "") -> None:
        """Validate a saved description and its file's tensors before anything is built (see :mod:`skabc._schema`)."""
        prefix = f"{where}." if where else ""
        _schema.check_keys(meta, where or "description", required=("params", "members"),
                           optional=("recommended_clustering",))
        _schema.check_params(cls, meta["params"], prefix + "params", allowed=("n_members", "random_state"))
        _schema.check_recommended(meta.get("recommended_clustering"), prefix + "recommended_clustering")
        members = meta["members"]
        if not isinstance(members, list) or not 1 <= len(members) <= min(_schema.MAX_MEMBERS, max(1, len(header))):
            raise _schema.fail(prefix + "members", f"expected a list of kernels, at least one and at most one per "
                                                   f"tensor of the file ({len(header)}) and {_schema.MAX_MEMBERS}, got "
                                                   f"{_schema.describe_value(members)}")
        # Each member's tensors, found in one pass (a pass per member would cost members x tensors).
        own_tensors = [{} for _ in members]
        for name, spec in header.items():
            index = name.split(".", 2)[1] if name.startswith("members.") and name.count(".") >= 2 else ""
            if index.isdigit() and len(index) < 10 and int(index) < len(members):
                own_tensors[int(index)][name] = spec
        expected, widths, names, named = {}, {}, {}, {}
        for i, part in enumerate(members):
            own = check_contextual_part(ContextualKernel, part, f"{prefix}members.{i}", own_tensors[i],
                                        _member_prefix(i))
            expected.update({_member_prefix(i) + k: v for k, v in own.items()})
            if (width := described_width(part)) is not None:  # bound to its input width, as from_fitted checks
                widths.setdefault(width, i)
            if part.get("feature_names_in") is not None:
                names.setdefault(tuple(part["feature_names_in"]), i)
            if width is not None:  # as from_fitted: width-bound members are all named or none
                named.setdefault(part.get("feature_names_in") is not None, i)
        for found in (names, named):
            if len(found) > 1:
                (_, first), (_, member) = sorted(found.items(), key=lambda item: item[1])[:2]
                raise _schema.fail(f"{prefix}members.{member}.feature_names_in", f"other feature names (or none) "
                                   f"than member {first}'s: an ensemble's members take one set of columns")
        if len(widths) > 1:
            (width, first), (other, member) = sorted(widths.items(), key=lambda item: item[1])[:2]
            raise _schema.fail(f"{prefix}members.{member}.n_features_in",
                               f"{other} features, but member {first} takes {width}: an ensemble's members take "
                               "one width")
        _schema.check_tensors(header, expected, where or "tensors")

    @classmethod
    def _restore(cls, meta: dict, tensors: dict, device) -> KernelEnsemble:
        """Rebuild a fitted ensemble from :meth:`_describe`'s output."""
        kernels = []
        for i, part in enumerate(meta["members"]):
            own = {_MEMBER_WEIGHTS + k: v for k, v in persistence.nested(_member_prefix(i), tensors).items()}
            kernels.append(ContextualKernel._restore({"kernel": part}, own, device))
        ensemble = cls.from_fitted(kernels)
        params = persistence.unlist(meta["params"])
        params.pop("n_members", None)  # from_fitted sets it from the members
        ensemble.set_params(**params)
        ensemble.recommended_clustering_ = check_recommended_clustering(meta.get("recommended_clustering") or {})
        return ensemble

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.required = True
        tags.transformer_tags.preserves_dtype = []
        return tags


def _bound_width(kernel) -> int | None:
    """The input width ``kernel`` requires; None when it takes any (canonicalising, as its ``transform`` decides)."""
    inner = unfrozen(kernel)
    if isinstance(inner, ContextualKernel) and network_of(inner).canonical_features is not None:
        return None
    width = getattr(inner, "n_features_in_", None)  # absent on an ensemble of canonicalising kernels
    return None if width is None else int(width)


def _member_prefix(i: int) -> str:
    return f"members.{i}."


def _nested_params(estimator, name: str, set_only: bool = True) -> dict:
    """``estimator``'s parameters called ``name``, its own or a nested estimator's (``'<step>__name'``, as in a
    Pipeline), that are set (not ``None``), or all of them with ``set_only=False``."""
    return {key: value for key, value in estimator.get_params().items()
            if (key == name or key.endswith(f"__{name}")) and (value is not None or not set_only)}


def _training_net(member):
    """The skorch net a member's fit trained, its own or a Pipeline step's; ``None`` if it has none."""
    for estimator in (member, *getattr(member, "named_steps", {}).values()):
        net = getattr(estimator, "net_", None)
        if net is not None:
            return net
    return None
