"""The set-to-kernel network: embedder -> stacked set blocks -> similarity head."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from .backends import resolve_backend
from .embedders import MLPEmbedder
from .geometry import N_PAIR_FEATURES, N_POINT_FEATURES, pair_features
from .heads import SimilarityHead

#: Fixed gain on the geometry maps' outputs.  Adam's steps do not depend on the scale of the gradient, so
#: this makes the maps' effective learning rate this many times the shared weights': a model warm-started
#: from one without geometry learns to use the new inputs while its shared weights barely move (fine-tuning
#: those at a rate the new maps need degrades them).
GEOMETRY_GAIN = 100.0


class ABCNet(nn.Module):
    """Attention-Based Clustering network.

    Maps a padded batch of sets ``X`` of shape ``(B, n, *point_shape)`` and a
    key mask ``(B, n)`` to symmetric same-cluster logits ``(B, n, n)``.

    Parameters
    ----------
    n_features : int
        Number of input features per point (used by the default embedder).
    d_model : int, default=128
        Width of the contextual embeddings.
    n_heads : int, default=4
        Attention heads per block.
    n_blocks : int, default=2
        Number of stacked set blocks; ``0`` gives the pairwise ablation (no
        context: the head sees per-point features only).
    compat : {'multiplicative', 'additive'}, default='multiplicative'
        Compatibility function of the similarity head.
    attention : str or callable, default='sab'
        Backend name from :data:`skabc.nn.backends.ATTENTION_BACKENDS`, or a
        factory called as ``attention(d_model=, n_heads=, d_ff=, layer_norm=,
        dropout=, **attention_options)``.
    layer_norm : {'pre', 'post'}, default='pre'
        Placement of layer normalisation inside the blocks.
    d_ff : int, default=None
        Hidden width of the blocks' feed-forward layers; ``None``: each block's own (``4 * d_model``).
    dropout : float, default=0.0
        Dropout inside the blocks.
    embedder : nn.Module, default=None
        Row-wise module mapping ``(m, *point_shape)`` to ``(m, d_model)``;
        default :class:`MLPEmbedder`.
    attention_options : dict, default=None
        Extra keyword arguments for the backend factory.
    local_geometry : bool, default=False
        Give the model the set's local geometry (:func:`skabc.nn.geometry.pair_features`,
        computed from all ``n_features`` input columns): per-block, per-head
        biases on the attention scores (Graphormer-style), an additive term of
        the similarity logits, and point features added to the embeddings.
        All three are linear maps initialised at zero, so a model built with
        it computes exactly what the same weights without it compute until
        training moves them (warm start from a model without geometry).
        Needs a backend that accepts attention biases (``'sab'``).
    embed_features : int, default=None
        Number of leading input columns the embedder sees (default: all);
        the geometry still uses all of them.  Lets a model read distances in
        many dimensions while its embedder stays narrow.
    context_gate : bool, default=False
        With ``local_geometry``: let the model weigh its learned similarity
        against the local geometry by how much of the set its embedder sees.
        With ``r`` the share of the set's variance outside the embedder's
        columns, the geometry maps become ``W + r dW`` (maps of their own for
        wide data whose first columns miss the structure), and the similarity
        head's logits and the geometry term are scaled by two positive factors
        ``exp(r G [pooled z, 1])`` read from the set's mean contextual
        embedding.  ``dW`` and ``G`` start at zero, and a set within the
        embedder's columns (``r = 0``) is computed exactly as without the gate.
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
        local_geometry: bool = False,
        embed_features: int | None = None,
        context_gate: bool = False,
    ) -> None:
        super().__init__()
        self.embed_features = n_features if embed_features is None else int(embed_features)
        if not 1 <= self.embed_features <= n_features:
            raise ValueError(f"embed_features must be in [1, n_features={n_features}], got {embed_features!r}")
        self.embedder = MLPEmbedder(self.embed_features, d_model) if embedder is None else embedder
        factory = resolve_backend(attention)
        options = dict(attention_options or {})
        # One fresh module per block: `[Block()] * n` would share the weights.
        blocks = [factory(d_model=d_model, n_heads=n_heads, d_ff=d_ff, layer_norm=layer_norm, dropout=dropout,
                          **options) for _ in range(n_blocks)]
        wrong = [type(block).__name__ for block in blocks if not isinstance(block, nn.Module)]
        if wrong:  # a user's factory: torch's own error named neither it nor the parameter
            raise TypeError(f"attention(...) must return an nn.Module, got {wrong[0]}")
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = nn.LayerNorm(d_model) if (layer_norm == "pre" and n_blocks > 0) else nn.Identity()
        self.head = SimilarityHead(d_model, compat)
        self.local_geometry = bool(local_geometry)
        if self.local_geometry:
            if not all(getattr(block, "accepts_attention_bias", False) for block in self.blocks):
                raise ValueError("local_geometry=True needs an attention backend that accepts biases ('sab').")
            self.n_heads = n_heads
            # One linear map to every head's attention bias, shared by all blocks as in Graphormer (one
            # (B, heads, n, n) tensor per step, not one per block), and one to the logits; zero at start.
            self.pair_bias = nn.Linear(N_PAIR_FEATURES, n_heads + 1)
            self.point_proj = nn.Linear(N_POINT_FEATURES, d_model)
            for layer in (self.pair_bias, self.point_proj):
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)
        self.context_gate = bool(context_gate)
        if self.context_gate:
            if not self.local_geometry:
                raise ValueError("context_gate=True needs local_geometry=True (it weighs the geometry term).")
            self.gate = nn.Linear(d_model + 1, 2, bias=False)
            self.wide_pair_bias = nn.Linear(N_PAIR_FEATURES, n_heads + 1)
            self.wide_point_proj = nn.Linear(N_POINT_FEATURES, d_model)
            for layer in (self.gate, self.wide_pair_bias, self.wide_point_proj):
                for weight in layer.parameters():
                    nn.init.zeros_(weight)

    def geometry(self, X: torch.Tensor, mask: torch.Tensor | None = None):
        """Pair and point features of the batch (``None`` without ``local_geometry``); with the context
        gate, also every set's share of variance outside the embedder's columns ``(B,)``."""
        if not self.local_geometry:
            return None
        pairs, points = pair_features(X, mask)  # float32, as the neighbour search is done
        dtype = self.pair_bias.weight.dtype  # the module's (float64 after .double())
        pairs, points = pairs.to(dtype), points.to(dtype)
        return (pairs, points, self.outside_share(X, mask).to(dtype)) if self.context_gate else (pairs, points)

    def outside_share(self, X: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Share of each set's variance in the columns the embedder does not see ``(B,)``; 0 if it sees all."""
        X = X.float()
        weights = torch.ones(X.shape[:2], device=X.device) if mask is None else mask.float()
        count = weights.sum(dim=1, keepdim=True).clamp(min=1.0)
        mean = (X * weights[..., None]).sum(dim=1, keepdim=True) / count[..., None]
        variance = (((X - mean) ** 2) * weights[..., None]).sum(dim=1)  # (B, n_features)
        return variance[:, self.embed_features :].sum(dim=1) / variance.sum(dim=1).clamp(min=1e-12)

    def _maps(self, geometry, layer: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-set weight ``(B, out, in)`` and bias ``(B, out)`` of a geometry map, ``W + r dW``."""
        base, wide = getattr(self, layer), getattr(self, f"wide_{layer}")
        r = geometry[2].to(base.weight.dtype)
        return base.weight + r[:, None, None] * wide.weight, base.bias + r[:, None] * wide.bias

    def encode(self, X: torch.Tensor, mask: torch.Tensor | None = None, geometry=None,
               use_geometry: bool = True) -> torch.Tensor:
        """Contextual embeddings ``(B, n, d_model)`` of a padded batch of sets.

        ``geometry``: :meth:`geometry` of the same batch, if already computed.
        ``use_geometry=False`` leaves the geometry terms out (what the shared
        weights compute alone), for sets too large for dense pair features.
        """
        batch, n = X.shape[:2]
        inputs = X[..., : self.embed_features] if X.dim() == 3 else X
        rows = inputs.reshape(batch * n, *inputs.shape[2:])
        if mask is not None and self.training and _batch_statistics(self.embedder):
            # Padded rows (zero images) would enter a BatchNorm's batch statistics, and so every real output.
            real = mask.reshape(batch * n)
            embedded = self.embedder(rows[real])
            z = embedded.new_zeros(batch * n, *embedded.shape[1:]).masked_scatter(
                real.reshape(-1, *[1] * (embedded.dim() - 1)), embedded).reshape(batch, n, -1)
        else:
            z = self.embedder(rows).reshape(batch, n, -1)
        if not use_geometry:
            geometry = None
        elif self.local_geometry and geometry is None:
            geometry = self.geometry(X, mask)
        if geometry is not None and self.context_gate:
            weight, bias = self._maps(geometry, "point_proj")
            z = z + GEOMETRY_GAIN * (torch.einsum("bnp,bdp->bnd", geometry[1], weight) + bias[:, None, :])
        elif geometry is not None:
            z = z + GEOMETRY_GAIN * self.point_proj(geometry[1])
        bias = None if geometry is None else self.attention_bias(geometry, mask)
        for block in self.blocks:
            shape = z.shape
            z = block(z, mask) if bias is None else block(z, mask, bias)
            if getattr(z, "shape", None) != shape:  # a user's block: torch's error came from a later layer, unnamed
                returned = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
                raise ValueError(f"attention blocks must map (sets, n, d_model) to the same shape {tuple(shape)}; "
                                 f"{type(block).__name__} returned {returned}.")
        return self.final_norm(z)

    def attention_bias(self, geometry, mask: torch.Tensor | None) -> torch.Tensor:
        """Attention bias ``(B, n_heads, n, n)`` from the pair features, padded keys at ``-inf``."""
        pairs = geometry[0]
        if self.context_gate:
            weight, bias = self._maps(geometry, "pair_bias")
            weight, bias = weight[:, : self.n_heads], bias[:, : self.n_heads]
        else:
            weight, bias = self.pair_bias.weight[: self.n_heads], self.pair_bias.bias[: self.n_heads]
        scores = GEOMETRY_GAIN * _pair_maps(pairs, weight, bias)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        return scores

    def head_bias(self, geometry) -> torch.Tensor | None:
        """Additive term ``(B, n, n)`` of the similarity logits (``None`` without geometry)."""
        if geometry is None:
            return None
        pairs = geometry[0]
        if self.context_gate:
            weight, bias = self._maps(geometry, "pair_bias")
            weight, bias = weight[:, -1:], bias[:, -1:]
        else:
            weight, bias = self.pair_bias.weight[-1:], self.pair_bias.bias[-1:]
        return GEOMETRY_GAIN * _pair_maps(pairs, weight, bias)[:, 0]

    def logit_terms(self, z: torch.Tensor, geometry, mask: torch.Tensor | None = None):
        """``(scale, extra)``: the logits are ``scale[:, None, None] * head(z) + extra``.

        ``scale`` is ``None`` (1) without a context gate, ``extra`` ``None`` (0)
        without geometry; sets encoded without geometry get neither.
        """
        if geometry is None:
            return None, None
        extra = self.head_bias(geometry)
        if not self.context_gate:
            return None, extra
        scales = self.logit_scales(geometry[2], z, mask)
        return scales[:, 0], scales[:, 1, None, None] * extra

    def logit_scales(self, outside: torch.Tensor, z: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The context gate's two positive factors per set ``(B, 2)``: head logits, geometry term.

        ``outside``: :meth:`outside_share` of the sets.
        """
        weights = torch.ones(z.shape[:2], dtype=z.dtype, device=z.device) if mask is None else mask.to(z.dtype)
        pooled = (z * weights[..., None]).sum(dim=1) / weights.sum(dim=1, keepdim=True).clamp(min=1.0)
        # Times the outside share: sets the embedder sees whole keep the ungated network's logits exactly.
        context = torch.cat([pooled, torch.ones_like(pooled[:, :1])], dim=1) * outside[:, None].to(z.dtype)
        # The maps' gain, for the same reason; bounded so that no set can push a factor to 0 or infinity.
        return torch.exp(torch.clamp(GEOMETRY_GAIN * self.gate(context), -4.0, 4.0))

    def forward(self, X: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        geometry = self.geometry(X, mask)
        z = self.encode(X, mask, geometry)
        logits = self.head(z)
        scale, extra = self.logit_terms(z, geometry, mask)
        if scale is not None:
            logits = scale[:, None, None] * logits
        if extra is not None:
            logits = logits + extra
        return logits


def _pair_maps(pairs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Linear maps ``(B, m, n, n)`` of pair features ``(B, F, n, n)``: ``weight`` ``(m, F)`` or per set ``(B, m, F)``,
    ``bias`` ``(m,)`` or ``(B, m)``.

    One ``bmm`` over the flattened pairs with the weight broadcast along the batch: an einsum over the feature
    axis (or ``matmul``'s broadcasting) makes permuted copies of the whole ``(B, F, n, n)`` tensor, forward and
    backward, six times slower at n = 150.
    """
    batch, _, n, _ = pairs.shape
    if weight.dim() == 2:
        weight = weight.expand(batch, *weight.shape)
    return (torch.bmm(weight, pairs.flatten(2)) + bias[..., None]).view(batch, -1, n, n)


def _batch_statistics(module: nn.Module) -> bool:
    """Whether a module normalises by its batch's statistics when training (a BatchNorm anywhere inside)."""
    return any(isinstance(layer, nn.modules.batchnorm._BatchNorm) for layer in module.modules())
