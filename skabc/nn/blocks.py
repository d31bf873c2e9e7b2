"""Multihead attention blocks for sets (Set Transformer, Lee et al. 2019).

Every block here maps a padded batch of sets ``x`` of shape ``(B, n, d)``
together with a boolean ``key_mask`` of shape ``(B, n)`` (``True`` for real
points) to a batch of the same shape.  Padded points are never used as keys,
so they cannot influence real points; their own outputs are meaningless and
ignored downstream.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

LAYER_NORM_PLACEMENTS = ("pre", "post")

# Largest attention score tensor (cells) materialised at once outside training.
INFERENCE_SCORE_CELLS = 2**25


class MultiheadAttentionBlock(nn.Module):
    """MAB(X, Y): X attends to Y, then a row-wise feed-forward layer.

    Parameters
    ----------
    d_model : int
        Width of the points.
    n_heads : int
        Number of attention heads; ``d_model`` must be divisible by it.
        Scores are scaled by ``1 / sqrt(d_model / n_heads)`` (the head width).
    d_ff : int, default=None
        Hidden width of the feed-forward layer (default ``4 * d_model``).
    layer_norm : {'pre', 'post'}, default='pre'
        ``'post'`` is the Set Transformer block, ``LN(H + rFF(H))`` with
        ``H = LN(X + Attention(X, Y))``; ``'pre'`` normalises the inputs of
        each residual branch instead, which trains deeper stacks more stably.
    dropout : float, default=0.0
        Dropout on attention weights and on the residual branches.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        layer_norm: str = "pre",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if layer_norm not in LAYER_NORM_PLACEMENTS:
            raise ValueError(f"layer_norm must be one of {LAYER_NORM_PLACEMENTS}, got {layer_norm!r}")
        self.n_heads = n_heads
        self.pre_norm = layer_norm == "pre"
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.norm_q = nn.LayerNorm(d_model)
        self.norm_kv = nn.LayerNorm(d_model)
        self.norm_ff = nn.LayerNorm(d_model)
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.feed_forward = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.drop = nn.Dropout(dropout)

    def attend(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        key_mask: torch.Tensor | None,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Multihead scaled dot-product attention of ``queries`` over ``keys``.

        ``bias``, of shape ``(B, n_heads, n_q, n_k)``, is added to the scores
        (e.g. pair features, :mod:`skabc.nn.geometry`) in place of ``key_mask``
        there: it must hold ``-inf`` at padded keys, as
        :meth:`~skabc.nn.ABCNet.attention_bias` builds it (one bias shared by
        every block, not a masked copy per block kept for backpropagation);
        ``key_mask`` still zeroes the padded keys' values.
        """
        batch, n_q, width = queries.shape
        n_k = keys.shape[1]
        head = width // self.n_heads

        def split(t: torch.Tensor, n: int) -> torch.Tensor:
            return t.view(batch, n, self.n_heads, head).transpose(1, 2)

        if key_mask is not None:  # padded rows may hold anything: a masked NaN key would still be 0 * NaN = NaN
            keys = keys.masked_fill(~key_mask[:, :, None], 0.0)
        q = split(self.q_proj(queries), n_q)
        k = split(self.k_proj(keys), n_k)
        v = split(self.v_proj(keys), n_k)
        mask = None if key_mask is None else key_mask[:, None, None, :]
        if bias is not None:
            mask = bias  # carries the key mask itself (-inf at padded keys): see ABCNet.attention_bias
        dropout = self.dropout if self.training else 0.0
        # SDPA scales by 1/sqrt(head width), which is what multihead attention needs.
        if torch.is_grad_enabled() or batch * self.n_heads * n_q * n_k <= INFERENCE_SCORE_CELLS:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        else:
            # Inference on a large set: queries in chunks keep the score matrix bounded.
            rows = max(1, INFERENCE_SCORE_CELLS // (batch * self.n_heads * n_k))
            out = torch.cat(
                [
                    F.scaled_dot_product_attention(
                        q[:, :, i : i + rows], k, v, attn_mask=None if mask is None else _rows(mask, i, rows)
                    )
                    for i in range(0, n_q, rows)
                ],
                dim=2,
            )
        return self.out_proj(out.transpose(1, 2).reshape(batch, n_q, width))

    def residual(self, x: torch.Tensor, attention: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """Wrap an attention map in this block's residual branches, layer norms and feed-forward layer.

        Parameters
        ----------
        x : Tensor of shape (B, n, d)
            Queries (the residual stream).
        attention : callable
            Maps the queries, layer-normalised first when ``layer_norm='pre'``,
            to the attention output of shape ``(B, n, d)``.  Other set blocks
            (sampled, outer-product attention) plug their attention in here so
            they share the exact residual structure of MAB.

        Returns
        -------
        Tensor of shape (B, n, d)
        """
        if self.pre_norm:
            h = x + self.drop(attention(self.norm_q(x)))
            return h + self.drop(self.feed_forward(self.norm_ff(h)))
        h = self.norm_q(x + self.drop(attention(x)))
        return self.norm_ff(h + self.drop(self.feed_forward(h)))

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, key_mask: torch.Tensor | None = None, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        if y is x:
            # Self-attention: keys are the (normalised) queries themselves.
            return self.residual(x, lambda q: self.attend(q, q, key_mask, bias))
        keys = self.norm_kv(y) if self.pre_norm else y
        return self.residual(x, lambda q: self.attend(q, keys, key_mask, bias))


class SetAttentionBlock(nn.Module):
    """SAB(X) = MAB(X, X): dense self-attention over the whole set, O(n^2).

    Parameters
    ----------
    d_model, n_heads : int
        Point width and attention heads, as for :class:`MultiheadAttentionBlock`.
    d_ff : int, default=None
        Feed-forward width, as for :class:`MultiheadAttentionBlock` (``4 * d_model`` by default).
    layer_norm : {'pre', 'post'}, default='pre'
        Placement of the layer normalisations, as for :class:`MultiheadAttentionBlock`.
    dropout : float, default=0.0
        Dropout rate of the attention weights and the residual branches.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        layer_norm: str = "pre",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.mab = MultiheadAttentionBlock(d_model, n_heads, d_ff, layer_norm, dropout)

    #: Accepts an additive attention bias of shape (B, n_heads, n, n) (see :mod:`skabc.nn.geometry`), with ``-inf``
    #: at padded keys (see :meth:`MultiheadAttentionBlock.attend`).
    accepts_attention_bias = True

    def forward(
        self, x: torch.Tensor, key_mask: torch.Tensor | None = None, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.mab(x, x, key_mask, bias)


def _rows(mask: torch.Tensor, start: int, rows: int) -> torch.Tensor:
    """Rows ``start:start+rows`` of a score mask or bias whose query axis may be broadcast (size 1)."""
    return mask if mask.shape[2] == 1 else mask[:, :, start : start + rows]
