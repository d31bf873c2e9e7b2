"""How a fitted ContextualKernel is described for :mod:`skabc.persistence` and rebuilt from it."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .. import persistence
from .._runtime import resolve_device
from ..nn.build import build_module
from ..training.plan import NETWORK_PARAMS, network_of
from .base import check_recommended_clustering

# Prefix of the weights' tensor names in a saved file.
WEIGHTS = "kernel."


def describe_contextual(kernel) -> tuple[dict, dict]:
    """Parameters, input width, feature names, recommended settings, and the weights."""
    check_is_fitted(kernel, "module_")
    part = {
        "params": persistence.plain_params(kernel, skip=("checkpoint_dir", "checkpoint_every", "verbose", "device")),
        "n_features_in": int(kernel.n_features_in_),
        "feature_names_in": [str(f) for f in getattr(kernel, "feature_names_in_", [])] or None,
    }
    network = getattr(kernel, "network_params_", None) or {}
    if any(getattr(kernel, name) != value for name, value in network.items()):
        # Fine-tuned from the generic kernel: the network is not the one the parameters describe.
        part["network_params"] = {name: persistence.json_ready(value) for name, value in network.items()}
    # Copies: an ensemble may hold one kernel twice, and safetensors refuses tensors that share memory.
    tensors = {WEIGHTS + k: v.detach().cpu().clone() for k, v in kernel.module_.state_dict().items()}
    return {"kernel": part, "recommended_clustering": kernel.recommended_clustering()}, tensors


def restore_contextual(cls, meta: dict, tensors: dict, device):
    """A fitted ``cls`` (ContextualKernel) from :func:`describe_contextual`'s output."""
    part = meta["kernel"]
    try:
        kernel = cls(**persistence.unlist(part["params"]), device=device)
    except TypeError as exc:
        raise ValueError(f"the saved kernel parameters do not match this version of skabc: {exc}") from exc
    if part.get("network_params"):
        network = persistence.unlist(part["network_params"])
        unknown = set(network) - set(NETWORK_PARAMS)
        if unknown:
            raise ValueError(f"the saved network parameters name unknown parameters: {sorted(unknown)}")
        kernel.network_params_ = network
    load_weights(kernel, part["n_features_in"], persistence.nested(WEIGHTS, tensors), device)
    if part.get("feature_names_in"):
        kernel.feature_names_in_ = np.asarray(part["feature_names_in"], dtype=object)
    kernel.recommended_clustering_ = check_recommended_clustering(meta.get("recommended_clustering") or {})
    return kernel


def load_weights(kernel, n_features: int, state_dict: dict, device) -> None:
    """Make ``kernel`` fitted from weights: it then holds just the module (no training net or optimizer)."""
    device = resolve_device(device)
    module = build_module(network_of(kernel), n_features)
    try:
        module.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:
        raise ValueError(f"saved weights do not fit the saved configuration: {exc}") from exc
    kernel.module_ = module.to(device)
    kernel.module_.eval()
    kernel.n_features_in_ = n_features
    kernel.n_training_sets_ = 0
