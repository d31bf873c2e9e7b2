"""Induced set attention block (ISAB, Set Transformer, Lee et al. 2019)."""

from __future__ import annotations

import torch
from torch import nn

from .blocks import MultiheadAttentionBlock


class InducedSetAttentionBlock(nn.Module):
    """ISAB_m(X) = MAB(X, MAB(I, X)): self-attention through ``m`` learned inducing points.

    The ``m`` inducing points ``I`` first attend to the (real) points of the
    set, giving a summary ``H`` of shape ``(B, m, d)``; every point then
    attends to ``H``.  Time and memory are ``O(n m)`` instead of ``O(n^2)``.
    ``H`` has no padding, so only the first attention needs the key mask;
    padded points therefore never reach real ones.

    Parameters
    ----------
    d_model : int
        Width of the points.
    n_heads : int
        Attention heads of both attention blocks.
    d_ff : int, default=None
        Hidden width of the feed-forward layers (default ``4 * d_model``).
    layer_norm : {'pre', 'post'}, default='pre'
        Layer norm placement, see :class:`~skabc.nn.blocks.MultiheadAttentionBlock`.
    dropout : float, default=0.0
        Dropout inside both attention blocks.
    n_inducing : int, default=16
        Number ``m`` of inducing points.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        layer_norm: str = "pre",
        dropout: float = 0.0,
        n_inducing: int = 16,
    ) -> None:
        super().__init__()
        if n_inducing < 1:
            raise ValueError(f"n_inducing must be a positive integer, got {n_inducing!r}")
        self.inducing = nn.Parameter(torch.empty(n_inducing, d_model))
        nn.init.xavier_uniform_(self.inducing)
        self.summarise = MultiheadAttentionBlock(d_model, n_heads, d_ff, layer_norm, dropout)
        self.broadcast = MultiheadAttentionBlock(d_model, n_heads, d_ff, layer_norm, dropout)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        inducing = self.inducing.unsqueeze(0).expand(x.shape[0], -1, -1)
        h = self.summarise(inducing, x, key_mask)
        return self.broadcast(x, h)
