"""Safe persistence of fitted kernels: safetensors weights + a JSON description.

Nothing is ever unpickled on load: the file holds tensors and a JSON string.
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

FORMAT = "skabc.kernel"
FORMAT_VERSION = 1


def _plain(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(
        f"cannot save a parameter of type {type(value).__name__} in the safe format; "
        "use pickle (or joblib) for kernels with custom modules or callables"
    )


def save_kernel(kernel, path) -> None:
    """Atomically write ``kernel``'s weights and description to ``path``."""
    from . import __version__

    params = {k: _plain(v) for k, v in kernel.get_params(deep=False).items() if k != "checkpoint_dir"}
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "class": type(kernel).__name__,
        "params": params,
        "n_features_in": int(kernel.n_features_in_),
        "feature_names_in": [str(f) for f in getattr(kernel, "feature_names_in_", [])] or None,
        "versions": {"skabc": __version__, "torch": torch.__version__, "sklearn": sklearn.__version__},
    }
    state = {k: v.detach().cpu().contiguous() for k, v in kernel.module_.state_dict().items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_file(state, tmp, metadata={"skabc": json.dumps(meta)})
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_description(path) -> dict:
    """The JSON description stored in a saved kernel file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no saved kernel at {str(path)!r}")
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


def load_kernel(cls, path, device="auto"):
    """Rebuild a fitted kernel of class ``cls`` from ``path``."""
    meta = read_description(path)
    if meta["class"] != cls.__name__:
        raise ValueError(f"{str(path)!r} holds a {meta['class']}, not a {cls.__name__}")
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["params"].items()}
    kernel = cls(**params)
    kernel._restore(meta["n_features_in"], load_file(str(path)), device)
    if meta.get("feature_names_in"):
        kernel.feature_names_in_ = np.asarray(meta["feature_names_in"], dtype=object)
    return kernel
