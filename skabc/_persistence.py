"""Safe persistence of fitted estimators: safetensors tensors + a JSON description.

Nothing is ever unpickled on load: a file holds tensors and one JSON string.
Writes are atomic (temporary file, then rename).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import sklearn
import torch
from safetensors.torch import load_file, safe_open, save_file

FORMAT = "skabc"
FORMAT_VERSION = 1
KERNEL_PREFIX = "kernel."


def _refuse_non_plain(value):
    raise TypeError(
        f"cannot save a parameter of type {type(value).__name__} in the safe format; "
        "use pickle (or joblib) for estimators with custom modules or callables"
    )


def json_ready(value, other=_refuse_non_plain):
    """A parameter value as JSON (tuples as lists); ``other(value)`` handles anything else."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): json_ready(v, other) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [json_ready(v, other) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return other(value)


def _params(estimator, skip=()) -> dict:
    return {k: json_ready(v) for k, v in estimator.get_params(deep=False).items() if k not in skip}


def _unlist(params: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}


def _kernel_part(kernel) -> tuple[dict, dict]:
    meta = {
        "params": _params(kernel, skip=("checkpoint_dir", "checkpoint_every", "verbose", "device")),
        "n_features_in": int(kernel.n_features_in_),
        "feature_names_in": [str(f) for f in getattr(kernel, "feature_names_in_", [])] or None,
    }
    network = getattr(kernel, "network_params_", None) or {}
    if any(getattr(kernel, k) != v for k, v in network.items()):
        # A fine-tuned generic kernel: its network is not the one its parameters describe.
        meta["network_params"] = {k: json_ready(v) for k, v in network.items()}
    tensors = {KERNEL_PREFIX + k: v.detach().cpu().contiguous() for k, v in kernel.module_.state_dict().items()}
    return meta, tensors


def _write(path, estimator, meta: dict, tensors: dict) -> None:
    from . import __version__

    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "class": type(estimator).__name__,
        "versions": {"skabc": __version__, "torch": torch.__version__, "sklearn": sklearn.__version__},
        **meta,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={"skabc": json.dumps(meta)})
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a saved model is an ordinary readable file
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_description(path) -> dict:
    """The JSON description stored in a file written by skabc."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no saved skabc model at {str(path)!r}")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except Exception as exc:  # safetensors raises its own error types for bad headers
        raise ValueError(f"{str(path)!r} is not a safetensors file written by skabc: {exc}") from exc
    if "skabc" not in metadata:
        raise ValueError(f"{str(path)!r} is a safetensors file but holds no skabc description")
    meta = json.loads(metadata["skabc"])
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{str(path)!r} has format {meta.get('format')!r} version {meta.get('format_version')!r}; "
            f"this skabc reads {FORMAT!r} version {FORMAT_VERSION}"
        )
    return meta


def _read(cls, path) -> tuple[dict, dict]:
    meta = read_description(path)
    if meta["class"] != cls.__name__:
        raise ValueError(f"{str(path)!r} holds a {meta['class']}, not a {cls.__name__}")
    return meta, load_file(str(path))


def _restore_kernel(kernel_cls, part: dict, tensors: dict, device):
    try:
        kernel = kernel_cls(**_unlist(part["params"]), device=device)
    except TypeError as exc:
        raise ValueError(f"the saved kernel parameters do not match this version of skabc: {exc}") from exc
    state = {k[len(KERNEL_PREFIX):]: v for k, v in tensors.items() if k.startswith(KERNEL_PREFIX)}
    if part.get("network_params"):
        kernel.network_params_ = _unlist(part["network_params"])
    kernel._restore(part["n_features_in"], state, device)
    if part.get("feature_names_in"):
        kernel.feature_names_in_ = np.asarray(part["feature_names_in"], dtype=object)
    return kernel


def save_kernel(kernel, path) -> None:
    """Atomically write a fitted ``ContextualKernel`` to ``path``."""
    meta, tensors = _kernel_part(kernel)
    _write(path, kernel, {"kernel": meta}, tensors)


def load_kernel(cls, path, device="auto"):
    """Rebuild a fitted kernel of class ``cls`` from ``path``."""
    meta, tensors = _read(cls, path)
    return _restore_kernel(cls, meta["kernel"], tensors, device)


def save_clustering(model, path) -> None:
    """Atomically write a fitted ``ABCClustering`` (its parameters, kernel and labels) to ``path``."""
    if not hasattr(model.kernel_, "module_"):
        raise TypeError(
            f"ABCClustering.save stores a ContextualKernel, and this model's kernel is a "
            f"{type(model.kernel_).__name__}; save that kernel with its own save() (KernelEnsemble has one) "
            "and the clustering parameters with get_params()"
        )
    kernel_meta, tensors = _kernel_part(model.kernel_)
    tensors["labels_"] = torch.as_tensor(np.asarray(model.labels_, dtype=np.int64))
    meta = {
        "params": _params(model, skip=("kernel",)),
        "kernel": kernel_meta,
        "n_features_in": int(model.n_features_in_),
        "n_clusters": int(model.n_clusters_),
    }
    _write(path, model, meta, tensors)


def load_clustering(cls, kernel_cls, path, device="auto"):
    """Rebuild a fitted ``ABCClustering`` from ``path``."""
    meta, tensors = _read(cls, path)
    kernel = _restore_kernel(kernel_cls, meta["kernel"], tensors, device)
    model = cls(kernel=kernel, **_unlist(meta["params"]))
    model.kernel_ = kernel
    model.n_features_in_ = meta["n_features_in"]
    if hasattr(kernel, "feature_names_in_"):
        model.feature_names_in_ = kernel.feature_names_in_
    model.labels_ = tensors["labels_"].numpy()
    model.n_clusters_ = meta["n_clusters"]
    return model


def _member_prefix(i: int) -> str:
    return f"members.{i}."


def save_ensemble(ensemble, path) -> None:
    """Atomically write a fitted ``KernelEnsemble`` of ContextualKernels to ``path``."""
    members, tensors = [], {}
    for i, kernel in enumerate(ensemble.kernels_):
        meta, part = _kernel_part(kernel)
        members.append(meta)
        tensors.update({_member_prefix(i) + k[len(KERNEL_PREFIX):]: v for k, v in part.items()})
    _write(path, ensemble, {"params": _params(ensemble, skip=("kernel",)), "members": members}, tensors)


def load_ensemble(cls, kernel_cls, path, device="auto"):
    """Rebuild a fitted ``KernelEnsemble`` of class ``cls`` from ``path``."""
    meta, tensors = _read(cls, path)
    kernels = []
    for i, part in enumerate(meta["members"]):
        prefix = _member_prefix(i)
        own = {KERNEL_PREFIX + k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        kernels.append(_restore_kernel(kernel_cls, part, own, device))
    ensemble = cls.from_fitted(kernels)
    params = _unlist(meta["params"])
    params.pop("n_members", None)  # from_fitted sets it from the members
    return ensemble.set_params(**params)
