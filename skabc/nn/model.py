"""The set-to-kernel network: embedder -> stacked set blocks -> similarity head."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from .backends import resolve_backend
from .embedders import MLPEmbedder
from .heads import SimilarityHead


class ABCNet(nn.Module):
    """Attention-Based Clustering network.

    Maps a padded batch of sets ``X`` of shape ``(B, n, *point_shape)`` and a
    key mask ``(B, n)`` to symmetric same-cluster logits ``(B, n, n)``.

    Parameters
    ----------
    n_features : int
        Number of input features per point (used by the default embedder).
    d_model : int
        Width of the contextual embeddings.
    n_heads : int
        Attention heads per block.
    n_blocks : int
        Number of stacked set blocks; ``0`` gives the pairwise ablation (no
        context: the head sees per-point features only).
    compat : {'multiplicative', 'additive'}
        Compatibility function of the similarity head.
    attention : str or callable
        Backend name from :data:`skabc.nn.backends.ATTENTION_BACKENDS`, or a
        factory called as ``attention(d_model=, n_heads=, d_ff=, layer_norm=,
        dropout=, **attention_options)``.
    layer_norm : {'pre', 'post'}
        Placement of layer normalisation inside the blocks.
    d_ff : int, optional
        Hidden width of the blocks' feed-forward layers.
    dropout : float
        Dropout inside the blocks.
    embedder : nn.Module, optional
        Row-wise module mapping ``(m, *point_shape)`` to ``(m, d_model)``;
        default :class:`MLPEmbedder`.
    attention_options : dict, optional
        Extra keyword arguments for the backend factory.
    """

    def __init__(
        self,
        n_features: int,
        d_model: int = 128,
        n_heads: int = 4,
        n_blocks: int = 2,
        compat: str = "multiplicative",
        attention: str | Callable[..., nn.Module] = "sab",
        layer_norm: str = "pre",
        d_ff: int | None = None,
        dropout: float = 0.0,
        embedder: nn.Module | None = None,
        attention_options: dict | None = None,
    ) -> None:
        super().__init__()
        self.embedder = MLPEmbedder(n_features, d_model) if embedder is None else embedder
        factory = resolve_backend(attention)
        options = dict(attention_options or {})
        # One fresh module per block: `[Block()] * n` would share the weights.
        self.blocks = nn.ModuleList(
            factory(d_model=d_model, n_heads=n_heads, d_ff=d_ff, layer_norm=layer_norm, dropout=dropout, **options)
            for _ in range(n_blocks)
        )
        self.final_norm = nn.LayerNorm(d_model) if (layer_norm == "pre" and n_blocks > 0) else nn.Identity()
        self.head = SimilarityHead(d_model, compat)

    def encode(self, X: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Contextual embeddings ``(B, n, d_model)`` of a padded batch of sets."""
        batch, n = X.shape[:2]
        z = self.embedder(X.reshape(batch * n, *X.shape[2:])).reshape(batch, n, -1)
        for block in self.blocks:
            z = block(z, mask)
        return self.final_norm(z)

    def forward(self, X: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.encode(X, mask))
