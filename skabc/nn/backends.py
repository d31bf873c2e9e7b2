"""Registry of set-to-set attention backends.

A backend is any ``nn.Module`` built as ``factory(d_model=..., n_heads=...,
d_ff=..., layer_norm=..., dropout=..., **options)`` whose ``forward(x,
key_mask)`` maps ``(B, n, d)`` to ``(B, n, d)`` without letting padded points
(``key_mask == False``) influence real ones.  Adding a backend is one class
and one entry in :data:`ATTENTION_BACKENDS`.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from .blocks import SetAttentionBlock
from .induced import InducedSetAttentionBlock
from .outer import OuterProductAttentionBlock
from .sampled import SampledAttentionBlock

ATTENTION_BACKENDS: dict[str, Callable[..., nn.Module]] = {
    "sab": SetAttentionBlock,  # dense self-attention, O(n^2)
    "isab": InducedSetAttentionBlock,  # through m inducing points, O(n m)
    "sampled": SampledAttentionBlock,  # random Hamiltonian-cycle windows, O(n * window_size)
    "opa": OuterProductAttentionBlock,  # outer-product attention (SAM), O(n^2 d_head) time
}


# Estimator parameters that configure each named backend (passed as keyword options).
BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {
    "sab": (),
    "isab": ("n_inducing",),
    "sampled": ("window_size", "n_attention_samples", "window_attention"),
    "opa": (),
}


def option_names(attention) -> tuple[str, ...]:
    """The estimator parameters the backend ``attention`` reads: none for a callable, or for a backend registered
    without a :data:`BACKEND_OPTIONS` line (one that exposes no parameters needs none)."""
    return BACKEND_OPTIONS.get(attention, ()) if isinstance(attention, str) else ()


def resolve_backend(attention: str | Callable[..., nn.Module]) -> Callable[..., nn.Module]:
    """Return the block factory named by ``attention`` (or ``attention`` itself if callable).

    Parameters
    ----------
    attention : str or callable
        A name in :data:`ATTENTION_BACKENDS`, or a factory returning an ``nn.Module``.

    Returns
    -------
    factory : callable
        Called as ``factory(d_model=, n_heads=, d_ff=, layer_norm=, dropout=, ...)``.

    Raises
    ------
    ValueError
        If ``attention`` is neither a known name nor callable.
    """
    if callable(attention):
        return attention
    if isinstance(attention, str) and attention in ATTENTION_BACKENDS:
        return ATTENTION_BACKENDS[attention]
    raise ValueError(
        f"Unknown attention backend {attention!r}; expected one of "
        f"{sorted(ATTENTION_BACKENDS)} or a callable returning an nn.Module."
    )
