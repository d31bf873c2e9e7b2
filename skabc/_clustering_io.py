"""How a fitted ABCClustering is described for :mod:`skabc.persistence` and rebuilt from it."""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING

import numpy as np
import torch
from sklearn import config_context
from sklearn.base import BaseEstimator, clone
from sklearn.frozen import FrozenEstimator
from sklearn.utils.validation import check_is_fitted

from . import _schema, persistence
from ._user_warnings import warn_user
from .kernels import ContextualKernel, as_kernel
from .kernels._contextual_io import described_width
from .kernels.base import CLUSTERING_SETTINGS, Kernel, kernel_is_fitted
from .spectral.arbiter import CANDIDATES
from .spectral.split import SPLIT_SUFFIX
from .training.fitting import unchanged_on_failure

if TYPE_CHECKING:
    from .spectral import SpectralStep

# Prefix of the kernel's tensors in a saved model.
_KERNEL = "kernel."

#: Parameters of the machine, not of the model: not written, and dropped where an older file holds them (a file's
#: ``n_jobs`` of 10**6 would start that many worker processes at ``predict``).
MACHINE_PARAMS = ("n_jobs",)


def describe_clustering(model) -> tuple[dict, dict]:
    """Parameters, the resolved settings, the fitted kernel (any saveable class) and the labels."""
    check_is_fitted(model, "kernel_")
    frozen = isinstance(model.kernel_, FrozenEstimator)
    kernel = model.kernel_.estimator if frozen else model.kernel_
    if not persistence.is_saveable(kernel):
        what = (f"affinity={model.affinity!r} learns nothing to store; keep the parameters (get_params()) and "
                "refit" if isinstance(model.affinity, str) and model.affinity != "learned" else
                f"this model's kernel is a {type(kernel).__name__}; save that kernel with its own save() if it has "
                "one, and the clustering parameters with get_params()")
        raise TypeError(
            f"ABCClustering.save stores a learned kernel (a ContextualKernel or a KernelEnsemble), and {what}, "
            "or pickle the fitted model"
        )
    now = _comparable_params(model)
    at_fit = getattr(model, "_fitted_params", now)
    changed = [f"{name} ({at_fit.get(name)!r} -> {value!r})" for name, value in now.items()
               if value != at_fit.get(name)]
    if changed:
        raise ValueError(
            f"{', '.join(changed)} changed with set_params after fit; the file would pair those parameters with a "
            "fit made under others. Refit, or set them back, first."
        )
    if model.n_init > MAX_SAVED_N_INIT:  # load refuses it: say so now, not when the file is read
        raise ValueError(f"n_init={model.n_init}: a model file may ask for at most {MAX_SAVED_N_INIT} k-means "
                         f"restarts; refit with n_init <= {MAX_SAVED_N_INIT} to save the model")
    kernel_meta, kernel_tensors = persistence.describe(kernel)
    tensors = {_KERNEL + k: v for k, v in kernel_tensors.items()}
    tensors["labels_"] = torch.as_tensor(np.asarray(model.labels_, dtype=np.int64))
    meta = {
        "params": persistence.plain_params(model, skip=("kernel", *MACHINE_PARAMS)),
        "kernel": kernel_meta,
        # How `kernel` was given: None (the generic kernel), frozen, a fitted kernel used as it is (or fine-tuned
        # with warm_start), or an unfitted one that fit trained on y (a refit of the loaded model trains again).
        "kernel_param": _kernel_param(model, frozen),
        "fitted": {name + "_": getattr(model, name + "_") for name in CLUSTERING_SETTINGS},
        "n_features_in": int(model.n_features_in_),
        "feature_names_in": [str(f) for f in getattr(model, "feature_names_in_", [])] or None,
        "n_clusters": int(model.n_clusters_),
        "candidate": model.candidate_,
        # What gaussian_split resolved to: a later version's 'auto' may resolve otherwise, the file predicts as fit.
        "gaussian_split": bool(model.gaussian_split_),
    }
    return meta, tensors


def _kernel_param(model, frozen: bool) -> str:
    if model.kernel is None:
        return "none"
    if frozen:
        return "frozen"
    return "kernel" if kernel_is_fitted(model.kernel) else "trained"  # a Kernel with no fit of its own: "kernel"


def check_affinity_unchanged(model) -> None:
    """Refuse to predict after ``affinity`` changed with ``set_params``: ``X`` is read as the parameter says, the
    fitted kernel clusters ('rbf' -> 'precomputed' took feature columns by row number and still applied the RBF
    kernel; 'rbf' -> 'nearest_neighbors' predicted with the RBF kernel).  A callable must be the object fit used
    (pickle, deepcopy and joblib keep it the same object as the parameter): two lambdas, or two instances of one
    class, share a repr."""
    if "_fitted_affinity" not in vars(model):
        return
    fitted, now = model._fitted_affinity, model.affinity
    if (now != fitted) if isinstance(now, str) and isinstance(fitted, str) else (now is not fitted):
        raise ValueError(f"affinity changed with set_params after fit ({fitted!r} -> {now!r}); predict clusters with "
                         "the fitted kernel, which reads X as fit did. Set it back, or refit.")


def keeps_last_fit(fit):
    """Wrap ``ABCClustering.fit`` so that one that raises leaves the fitted attributes as they were: validation sets
    the new width, and the kernel and settings are resolved, before the clustering can fail (a refit refused for
    memory kept the old labels_ with the new n_features_in_, and saved so)."""
    @functools.wraps(fit)
    def guarded(model, *args, **kwargs):
        with unchanged_on_failure(model, names=None):
            return fit(model, *args, **kwargs)
    return guarded


def remember_fitted_params(model) -> None:
    """Keep the parameters ``fit`` clustered with: a model changed by ``set_params`` since is not saved as it is
    (and the affinity object itself: predict refuses another)."""
    model._fitted_params = _comparable_params(model)
    model._fitted_affinity = model.affinity


def _comparable_params(model) -> dict:
    # Objects (a RandomState, a callable, the kernel) compare by their repr, which names the object or its
    # parameters.  verbose and n_jobs do not change the labels: they may change.
    return persistence.plain_params(model, skip=("verbose", "n_jobs"), other=_comparable)


def _comparable(value) -> str:
    """``repr(value)``; an estimator's whole, whatever scikit-learn's display settings: its repr is cut short past
    700 characters (a kernel's weight_decay went unseen) and ``print_changed_only`` rewrites it (a save refused a
    kernel unchanged since fit) (probe 64e)."""
    if isinstance(value, BaseEstimator) and type(value).__repr__ is BaseEstimator.__repr__:  # not a repr of its own
        with config_context(print_changed_only=True):
            return value.__repr__(N_CHAR_MAX=sys.maxsize)
    return repr(value)


def restore_clustering(cls, meta: dict, tensors: dict, device):
    """A fitted ``cls`` (ABCClustering) from :func:`describe_clustering`'s output, or a version-1 file's."""
    labels = tensors["labels_"].numpy()
    if not _schema.label_values_ok(labels, meta["n_clusters"]):  # the values, read: before any network is built
        raise _schema.fail("labels_", f"cluster ids must lie in [0, n_clusters={meta['n_clusters']}), got "
                                      f"[{labels.min()}, {labels.max()}]")
    if (used := len(np.unique(labels))) != meta["n_clusters"]:  # fit counts the clusters its labels number
        ids = f"{used} cluster id{'' if used == 1 else 's'}"
        raise _schema.fail("labels_", f"they use {ids} where n_clusters={meta['n_clusters']}: a fitted model's "
                                      "labels number its clusters 0 .. n_clusters - 1, each one used")
    if "class" in meta["kernel"]:
        kernel = persistence.restore(meta["kernel"], persistence.nested(_KERNEL, tensors), device)
    else:  # version 1: always a ContextualKernel, its weights directly under "kernel."
        kernel = ContextualKernel._restore({"kernel": meta["kernel"]}, tensors, device)
    fitted = FrozenEstimator(kernel) if meta.get("kernel_param") == "frozen" else kernel
    param = {"none": None, "trained": clone(kernel)}.get(meta.get("kernel_param"), fitted)
    # Files written before gaussian_split or max_samples existed clustered without the split, and whole sets;
    # their defaults are now 'auto'.
    params = {"gaussian_split": False, "max_samples": None,
              **{k: v for k, v in persistence.unlist(meta["params"]).items() if k not in MACHINE_PARAMS}}
    model = cls(kernel=param, **params)
    remember_fitted_params(model)
    model.kernel_ = fitted
    model.n_features_in_ = meta["n_features_in"]
    names = meta.get("feature_names_in")
    if names:
        model.feature_names_in_ = np.asarray(names, dtype=object)
    elif "feature_names_in" not in meta and hasattr(kernel, "feature_names_in_"):
        # Version-1 files did not say; a later file's None means the model saw none (its kernel may have).
        model.feature_names_in_ = kernel.feature_names_in_
    model.labels_ = labels
    model.n_clusters_ = meta["n_clusters"]
    model.candidate_ = meta.get("candidate")  # files written before it was stored: unknown
    # The settings resolved at fit (they fill in every 'auto' as they did then); version-1 files
    # stored none: resolve them as fit would, from the loaded kernel.
    resolved = {name[:-1]: value for name, value in meta.get("fitted", {}).items()}
    if "fitted" not in meta:
        _warn_unrecorded_settings(meta["params"])
    # gaussian_split_ as the fit resolved it; files written before it was stored: as the parameter resolves.
    model._resolve_auto(resolved or as_kernel(fitted).recommended_clustering(), meta.get("gaussian_split"))
    return model


def _warn_unrecorded_settings(params: dict) -> None:
    """A version-1 file did not record what its ``'auto'`` settings resolved to, and the versions that wrote such
    files resolved them for the generic kernel from their own code (affinity_power 4 or 8, 'njw', 'consensus'),
    which the file does not say either: the loaded model resolves them from the kernel, and may predict otherwise
    (probe 59b: 33 of 48 sets)."""
    auto = [name for name in CLUSTERING_SETTINGS if params.get(name) == "auto"]
    if auto:
        warn_user(
            "this model file was written by an earlier skabc (file format 1), which did not record what its 'auto' "
            f"settings ({', '.join(auto)}) resolved to at fit; they are resolved from its kernel now, and predict "
            "may give other labels than the saved model did (its labels_ are the saved ones). A model fitted with "
            "the generic kernel (kernel=None) used that version's settings for it: fit ABCClustering() with "
            "kernel=None again to get today's generic settings, and save it."
        )


#: Most k-means restarts (``n_init``) a model file may ask for.
MAX_SAVED_N_INIT = 1000


def _check_combinations(cls, params: dict, where: str) -> None:
    """Parameters that contradict each other (``max_samples`` below ``n_clusters``, an arbiter with no file for a
    given ``k``): refused as the file's, before its kernel is built, not when the loaded model resolves them."""
    from ._resolve import _check_contradictions, resolve_arbiter  # _resolve reads _fit_inputs, which reads this

    model = cls(**params)
    try:
        _check_contradictions(model)
        resolve_arbiter(model, None)
    except ValueError as error:
        raise _schema.fail(where, str(error)) from None


def check_clustering(cls, meta: dict, header: dict, where: str = "") -> None:
    """Validate a saved model's description and its file's tensors before anything is built (:mod:`skabc._schema`)."""
    prefix = f"{where}." if where else ""
    _schema.check_keys(meta, where or "description", required=("params", "kernel", "n_features_in", "n_clusters"),
                       optional=("kernel_param", "fitted", "feature_names_in", "candidate", "gaussian_split"))
    allowed = [name for name in cls().get_params(deep=False) if name != "kernel"]
    _schema.check_params(cls, meta["params"], prefix + "params", allowed)
    _check_combinations(cls, meta["params"], prefix + "params")
    # More k-means restarts than any setting needs: a forged n_init of 1e9 made predict run for hours.
    _schema.check_int(meta["params"].get("n_init", cls().n_init), prefix + "params.n_init", 1, MAX_SAVED_N_INIT)
    if meta["params"].get("affinity", "learned") != "learned":  # save() refuses the others: their model is not it
        raise _schema.fail(prefix + "params.affinity", f"{meta['params']['affinity']!r}, but a saved model's "
                                                       "affinity is 'learned' (its saved kernel)")
    n_features = _schema.check_int(meta["n_features_in"], prefix + "n_features_in", 1, _schema.MAX_FEATURES)
    _schema.check_names(meta.get("feature_names_in"), prefix + "feature_names_in", n_features)
    _schema.check_int(meta["n_clusters"], prefix + "n_clusters", 1, _schema.MAX_COUNT)
    _check_split(meta, prefix)  # first: its refusals name the contradiction, where the candidate's only its name
    _check_candidate(meta.get("candidate"), prefix + "candidate", meta["params"].get("n_clusters"))
    _check_given_count(meta, prefix)
    if "kernel_param" in meta:
        _schema.check_str(meta["kernel_param"], prefix + "kernel_param", {"none", "frozen", "kernel", "trained"})
    fitted = _schema.check_keys(meta.get("fitted", {}), prefix + "fitted",
                                optional=[name + "_" for name in CLUSTERING_SETTINGS])
    _schema.check_recommended({name[:-1]: value for name, value in fitted.items()}, prefix + "fitted")
    _schema.check_labels(header, "labels_", where or "tensors")
    n_rows = header["labels_"][1][0]
    if meta["n_clusters"] > n_rows:  # every cluster found holds at least one of the fitted rows
        raise _schema.fail(prefix + "n_clusters", f"{meta['n_clusters']} clusters, but the model was fitted on "
                                                  f"{n_rows} rows")
    kernel_header = {name: spec for name, spec in header.items() if name != "labels_"}
    stray = sorted(name for name in kernel_header if not name.startswith(_KERNEL))
    if stray:
        raise _schema.fail(where or "tensors", f"the file holds unexpected tensors {stray[:3]}")
    kernel = meta["kernel"]
    if isinstance(kernel, dict) and "class" in kernel:
        persistence.check_description(kernel, persistence.nested(_KERNEL, kernel_header), prefix + "kernel",
                                      base=Kernel)
    else:  # version 1: always a ContextualKernel, its weights directly under "kernel."
        ContextualKernel._check_description({"kernel": kernel}, kernel_header, where)
    width = _kernel_width(kernel)
    if width is not None and width != n_features:
        raise _schema.fail(prefix + "n_features_in", f"{n_features} features, but the model's kernel takes {width}")
    names, kernel_names = meta.get("feature_names_in"), _kernel_names(kernel)
    if width is not None and names and kernel_names and list(names) != list(kernel_names):
        # fit refuses other names than its width-bound kernel's ("unseen at fit time"); loaded, every DataFrame would
        # then be refused at predict.
        raise _schema.fail(prefix + "feature_names_in", f"{_schema.describe_value(names)}, but the model's kernel "
                                                        f"was fitted on {_schema.describe_value(kernel_names)}: a fit "
                                                        "takes its width-bound kernel's columns")


def _bound_parts(kernel: dict) -> list[dict]:
    """The ContextualKernel entries of a validated kernel description that are bound to their input width."""
    if "class" not in kernel:
        parts = [kernel]
    else:
        parts = {"ContextualKernel": [kernel.get("kernel")],
                 "KernelEnsemble": kernel.get("members")}.get(kernel["class"])
    return [part for part in parts or () if described_width(part) is not None]


def _kernel_width(kernel: dict) -> int | None:
    """The input width a validated kernel description is bound to (``None``: any width, or not a ContextualKernel's)."""
    return next((described_width(part) for part in _bound_parts(kernel)), None)


def _kernel_names(kernel: dict) -> list | None:
    """The feature names a validated width-bound kernel description was fitted on (``None``: none recorded)."""
    return next((part.get("feature_names_in") for part in _bound_parts(kernel)), None)


def _check_given_count(meta: dict, prefix: str) -> None:
    """With ``params.n_clusters`` given, fit finds at most that many clusters per set (one set per candidate entry)."""
    given, candidate = meta["params"].get("n_clusters"), meta.get("candidate")
    sets = len(candidate) if isinstance(candidate, list) else 1
    # Files written before candidate_ was stored do not say how many sets (groups) they clustered.
    if given is not None and "candidate" in meta and meta["n_clusters"] > given * sets:
        raise _schema.fail(prefix + "n_clusters", f"{meta['n_clusters']} clusters, but params.n_clusters={given} "
                                                  f"asks for at most {given * sets} ({sets} set(s))")


def _check_candidate(value, where: str, given_k=None) -> None:
    """``candidate_`` as fit sets it: null, an arbiter candidate's name (``'affinity-at-<name>'`` for a counting
    arbiter, ``'knn-at-<name>'`` for a kNN-partition one, ending ``'+gaussian-split'`` where clusters were split),
    or one such entry per group; a rule for a given ``k`` exactly where ``params.n_clusters`` is given."""
    names = {name for name, (_, rule) in CANDIDATES.items() if (rule == "given") == (given_k is not None)}
    # A kNN-partition arbiter cuts either k; counting arbiters and the split serve an estimated k only.
    prefixes = ("knn",) if given_k is not None else ("affinity", "knn")
    names |= {f"{prefix}-at-{name}" for prefix in prefixes for name in names}
    if given_k is None:
        names |= {name + SPLIT_SUFFIX for name in names}
    entries = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not 1 <= len(value) <= _schema.MAX_COUNT:
        raise _schema.fail(where, f"expected one entry per group, got a list of {len(value)}")
    for entry in entries:
        if entry is not None:
            _schema.check_str(entry, where, names)


def _check_split(meta: dict, prefix: str) -> None:
    """The stored ``gaussian_split_``: a boolean, false with ``n_clusters`` given, true where a candidate was split."""
    if "gaussian_split" not in meta:
        return
    value = meta["gaussian_split"]
    if not isinstance(value, bool):
        raise _schema.fail(prefix + "gaussian_split", f"expected true or false, got {_schema.describe_value(value)}")
    if value and meta["params"].get("n_clusters") is not None:
        raise _schema.fail(prefix + "gaussian_split", "true, but params.n_clusters is given: fit splits only where "
                                                      "it estimated k")
    asked = meta["params"].get("gaussian_split", "auto")
    if isinstance(asked, bool) and value != (asked and meta["params"].get("n_clusters") is None):
        raise _schema.fail(prefix + "gaussian_split", f"{str(value).lower()} contradicts params.gaussian_split="
                                                      f"{str(asked).lower()}")
    entries = meta.get("candidate") if isinstance(meta.get("candidate"), list) else [meta.get("candidate")]
    if not value and any(isinstance(e, str) and e.endswith(SPLIT_SUFFIX) for e in entries):
        raise _schema.fail(prefix + "gaussian_split", f"false, but candidate names a partition split by it "
                                                      f"({SPLIT_SUFFIX!r})")


class ClusteringPersistenceMixin:
    """``save``, ``load`` and ``from_pretrained`` of :class:`~skabc.ABCClustering`, through :mod:`skabc.persistence`."""

    # The fitted attributes ``fit`` or a load sets from other modules, declared for type checkers (documented in
    # ABCClustering); a declaration sets nothing: an unfitted model has none of them.
    affinity_power_: float
    assign_labels_: str
    n_clusters_selection_: str
    arbiter_: str | None
    gaussian_split_: bool
    max_samples_: int | None
    spectral_step_: SpectralStep
    n_features_in_: int
    feature_names_in_: np.ndarray

    def save(self, path) -> None:
        """Write the fitted model to one safetensors file (kernel weights, labels, JSON parameters).

        The write is atomic.  The fitted kernel (a :class:`ContextualKernel`
        or a :class:`KernelEnsemble`, frozen or not), the settings every
        ``'auto'`` resolved to and ``candidate_`` are stored, so the loaded
        model predicts exactly as this one.  ``affinity_matrix_`` and
        ``eigenvalues_`` are not stored (``predict`` recomputes what it needs), nor are the machine's settings
        (``n_jobs``; the kernel's ``device``, ``verbose``, ``memory_limit``): the loaded model takes their defaults.

        Parameters
        ----------
        path : str or path-like
            File to write (conventionally ``*.safetensors``).
        """
        check_is_fitted(self, "kernel_")
        persistence.save(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: str | torch.device | None = "auto"):
        """Load a model written by :meth:`save`, without unpickling anything.

        Parameters
        ----------
        path : str or path-like
        device : str, torch.device or None, default='auto'
            Where the kernel's network runs: ``'auto'`` or ``None`` (CUDA when available, else the CPU), ``'cpu'``,
            ``'cuda'`` or any torch device.

        Returns
        -------
        model : ABCClustering
            Fitted; the whole file is validated before anything is built.
        """
        return persistence.load(path, device=device, expected=cls)

    @classmethod
    def from_pretrained(cls, name: str, *, device: str | torch.device | None = "auto", **params):
        """A ready model around the shipped kernel ``name`` (see :func:`skabc.pretrained.load`).

        The kernel is wrapped in :class:`sklearn.frozen.FrozenEstimator`, so
        ``fit`` / ``fit_predict`` cluster new sets without training (even when
        given labels) and ``clone`` keeps it fitted.

        Parameters
        ----------
        name : str
            A shipped kernel, e.g. ``'generic'``, ``'circles'`` or ``'omniglot'``.
        device : str, torch.device or None, default='auto'
            Where the kernel's network runs (as in :meth:`load`).
        **params
            ABCClustering parameters; every ``'auto'`` one not given resolves to
            the settings stored with the kernel (chosen on its validation data).

        Returns
        -------
        model : ABCClustering
            Not fitted; its kernel is.

        Examples
        --------
        >>> from skabc import ABCClustering
        >>> model = ABCClustering.from_pretrained("circles", random_state=0)
        >>> type(model.kernel).__name__
        'FrozenEstimator'
        """
        from .pretrained import load

        if "kernel" in params:  # Python's own "got multiple values for keyword argument" named neither
            raise TypeError(f"from_pretrained({name!r}) sets kernel to the shipped one; pass the other parameters, "
                            "or use ABCClustering(kernel=...) for a kernel of your own")
        return cls(kernel=FrozenEstimator(load(name, device=device)), **params)

    def _describe(self) -> tuple[dict, dict]:
        """JSON description and tensors for :mod:`skabc.persistence`."""
        return describe_clustering(self)

    @classmethod
    def _restore(cls, meta: dict, tensors: dict, device):
        """Rebuild a fitted model from :meth:`_describe`'s output (or a version-1 file's)."""
        return restore_clustering(cls, meta, tensors, device)

    @classmethod
    def _check_description(cls, meta: dict, header: dict, where: str = "") -> None:
        """Validate a saved description and its file's tensors before anything is built."""
        check_clustering(cls, meta, header, where)
