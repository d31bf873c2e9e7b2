"""Kernels shipped with the package, loaded offline from safetensors files."""

from __future__ import annotations

from pathlib import Path

from ..kernel import ContextualKernel

PRETRAINED_DIR = Path(__file__).resolve().parent

AVAILABLE = {
    "circles": "circles_multiplicative.safetensors",
    "circles-additive": "circles_additive.safetensors",
    "circles-pairwise": "circles_pairwise.safetensors",
}


def load(name: str, device: str = "auto") -> ContextualKernel:
    """Load a shipped, fitted :class:`~skabc.ContextualKernel` by name.

    Parameters
    ----------
    name : str
        One of :data:`AVAILABLE`: ``'circles'`` (multiplicative head, trained
        on the overlapping-circles problem), ``'circles-additive'`` and
        ``'circles-pairwise'`` (the no-context ablation).
    device : str
        Torch device, ``'auto'`` for CUDA when available.
    """
    if name not in AVAILABLE:
        raise ValueError(f"unknown pretrained kernel {name!r}; available: {sorted(AVAILABLE)}")
    path = PRETRAINED_DIR / AVAILABLE[name]
    if not path.exists():
        raise FileNotFoundError(f"the weights of {name!r} are missing from the installation ({path})")
    return ContextualKernel.load(path, device=device)


__all__ = ["AVAILABLE", "PRETRAINED_DIR", "load"]
