"""Kernels shipped with the package, loaded offline from safetensors files (never pickle)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from .. import persistence
from .._runtime import resolve_device
from ..kernels import ContextualKernel, Kernel, KernelEnsemble
from ..persistence import read_description

if TYPE_CHECKING:
    import os

    import torch

PRETRAINED_DIR = Path(__file__).resolve().parent

AVAILABLE = {
    "generic": "generic.safetensors",
    "omniglot": "omniglot.safetensors",
    "circles": "circles_multiplicative.safetensors",
    "circles-additive": "circles_additive.safetensors",
    "circles-pairwise": "circles_pairwise.safetensors",
}


def _recommended(name: str) -> dict:
    """The clustering settings stored in the shipped file ``name`` (read from its JSON header only)."""
    path = PRETRAINED_DIR / AVAILABLE[name]
    return dict(read_description(path).get("recommended_clustering") or {}) if path.exists() else {}


class _SettingsByKernel(Mapping):
    """Kernel name -> its settings, read-only: each lookup returns a fresh ``dict``, so changing one changes no
    later lookup, and it still saves, pickles and serialises as the plain dict it is."""

    def __init__(self, table: dict) -> None:
        self._table = table

    def __getitem__(self, name: str) -> dict:
        return dict(self._table[name])

    def __iter__(self):
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        return repr(self._table)


#: ABCClustering settings chosen for each shipped kernel on its own validation data, as stored in
#: its file (``benchmarks/pretrained_settings.py`` writes them; read-only, each lookup a copy).
RECOMMENDED_CLUSTERING: Mapping[str, dict] = _SettingsByKernel(
    {name: settings for name in AVAILABLE if (settings := _recommended(name))}
)


def load(name: str, device: str | torch.device | None = "auto") -> ContextualKernel | KernelEnsemble:
    """Load a shipped, fitted :class:`~skabc.ContextualKernel` by name.

    Parameters
    ----------
    name : str
        One of :data:`AVAILABLE`:

        * ``'generic'``: the default kernel of :class:`~skabc.ABCClustering`,
          trained on synthetic clustering problems of 1 to 64 features
          (blobs, rings, moons, curves, varied densities, noise); it takes
          tabular sets of any width (``canonical_features=64``, the
          embedder reading the first 16) and sees each set's local geometry
          (``local_geometry=True``) up to 4,000 points.
        * ``'omniglot'``: handwritten characters, 28 x 28 images given as
          rows of 784 pixels in [0, 1] with ink = 1 (as returned by
          :func:`skabc.datasets.load_omniglot`).
        * ``'circles'``, ``'circles-additive'``, ``'circles-pairwise'``:
          the overlapping-circles problem (the last is the no-context
          ablation).
    device : str, torch.device or None, default='auto'
        Torch device, ``'auto'`` (or ``None``) for CUDA when available.

    Returns
    -------
    kernel : ContextualKernel or KernelEnsemble
        A fitted kernel (a fresh object on every call); ``'omniglot'`` is a
        :class:`~skabc.KernelEnsemble` of three set encoders on one CNN.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be the name of a pretrained kernel (a str), got {type(name).__name__}; "
                        f"available: {sorted(AVAILABLE)}")
    if name not in AVAILABLE:
        raise ValueError(f"unknown pretrained kernel {name!r}; available: {sorted(AVAILABLE)}")
    resolve_device(device)  # a clear error before the cache hashes the device (a list raised "unhashable")
    # Read once per process and device; every caller gets its own copy to fine-tune or modify.
    return copy.deepcopy(_load_once(name, device))


@cache
def _load_once(name: str, device: str | torch.device | None) -> ContextualKernel | KernelEnsemble:
    path = PRETRAINED_DIR / AVAILABLE[name]
    if not path.exists():
        raise FileNotFoundError(f"the weights of {name!r} are missing from the installation ({path})")
    return load_saved_kernel(path, device=device)


def load_saved_kernel(
    path: str | os.PathLike[str], device: str | torch.device | None = "auto"
) -> ContextualKernel | KernelEnsemble:
    """Load a kernel saved by :meth:`ContextualKernel.save` or :meth:`KernelEnsemble.save`, whichever it is.

    Parameters
    ----------
    path : str or path
    device : str, torch.device or None, default='auto'
        Torch device, ``'auto'`` (or ``None``) for CUDA when available.

    Returns
    -------
    kernel : ContextualKernel or KernelEnsemble
    """
    return persistence.load(path, device=device, expected=Kernel)


__all__ = ["AVAILABLE", "PRETRAINED_DIR", "RECOMMENDED_CLUSTERING", "load", "load_saved_kernel"]
