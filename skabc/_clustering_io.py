"""How a fitted ABCClustering is described for :mod:`skabc.persistence` and rebuilt from it."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.frozen import FrozenEstimator
from sklearn.utils.validation import check_is_fitted

from . import persistence
from .kernels import ContextualKernel, as_kernel
from .kernels.base import CLUSTERING_SETTINGS

# Prefix of the kernel's tensors in a saved model.
_KERNEL = "kernel."


def describe_clustering(model) -> tuple[dict, dict]:
    """Parameters, the resolved settings, the fitted kernel (any saveable class) and the labels."""
    check_is_fitted(model, "kernel_")
    frozen = isinstance(model.kernel_, FrozenEstimator)
    kernel = model.kernel_.estimator if frozen else model.kernel_
    if not persistence.is_saveable(kernel):
        raise TypeError(
            f"ABCClustering.save stores a ContextualKernel or a KernelEnsemble, and this model's kernel is a "
            f"{type(kernel).__name__}; save that kernel with its own save() if it has one, "
            "and the clustering parameters with get_params()"
        )
    kernel_meta, kernel_tensors = persistence.describe(kernel)
    tensors = {_KERNEL + k: v for k, v in kernel_tensors.items()}
    tensors["labels_"] = torch.as_tensor(np.asarray(model.labels_, dtype=np.int64))
    meta = {
        "params": persistence.plain_params(model, skip=("kernel",)),
        "kernel": kernel_meta,
        # How `kernel` was given: None (the generic kernel), frozen, or a kernel to train.
        "kernel_param": "none" if model.kernel is None else ("frozen" if frozen else "kernel"),
        "fitted": {name + "_": getattr(model, name + "_") for name in CLUSTERING_SETTINGS},
        "n_features_in": int(model.n_features_in_),
        "feature_names_in": [str(f) for f in getattr(model, "feature_names_in_", [])] or None,
        "n_clusters": int(model.n_clusters_),
    }
    return meta, tensors


def restore_clustering(cls, meta: dict, tensors: dict, device):
    """A fitted ``cls`` (ABCClustering) from :func:`describe_clustering`'s output, or a version-1 file's."""
    if "class" in meta["kernel"]:
        kernel = persistence.restore(meta["kernel"], persistence.nested(_KERNEL, tensors), device)
    else:  # version 1: always a ContextualKernel, its weights directly under "kernel."
        kernel = ContextualKernel._restore({"kernel": meta["kernel"]}, tensors, device)
    fitted = FrozenEstimator(kernel) if meta.get("kernel_param") == "frozen" else kernel
    param = None if meta.get("kernel_param") == "none" else fitted
    model = cls(kernel=param, **persistence.unlist(meta["params"]))
    model.kernel_ = fitted
    model.n_features_in_ = meta["n_features_in"]
    names = meta.get("feature_names_in")
    if names:
        model.feature_names_in_ = np.asarray(names, dtype=object)
    elif hasattr(kernel, "feature_names_in_"):
        model.feature_names_in_ = kernel.feature_names_in_
    model.labels_ = tensors["labels_"].numpy()
    model.n_clusters_ = meta["n_clusters"]
    # The settings resolved at fit (they fill in every 'auto' as they did then); version-1 files
    # stored none: resolve them as fit would, from the loaded kernel.
    resolved = {name[:-1]: value for name, value in meta.get("fitted", {}).items()}
    model._resolve_auto(resolved or as_kernel(fitted).recommended_clustering())
    return model
