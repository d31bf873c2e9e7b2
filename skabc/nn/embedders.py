"""Input embedders: map each point (row) independently to ``d_model`` features."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn


class MLPEmbedder(nn.Module):
    """Row-wise MLP for vector data.

    Parameters
    ----------
    n_features : int
        Input width.
    d_model : int
        Output width.
    hidden : sequence of int, default=None
        Widths of the hidden layers; ``None``: one layer of ``d_model``.
    """

    def __init__(self, n_features: int, d_model: int, hidden: Sequence[int] | None = None) -> None:
        super().__init__()
        hidden = [d_model] if hidden is None else list(hidden)
        layers: list[nn.Module] = []
        width = n_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.GELU()]
            width = h
        layers.append(nn.Linear(width, d_model))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def conv4_backbone(in_channels: int = 1, width: int = 64) -> nn.Sequential:
    """The four-block CNN of the ABC paper's Figure 3 (conv4 of few-shot learning).

    Each block is a 3x3 convolution, batch norm, ReLU and 2x2 max pooling; a
    28 x 28 image ends as ``width`` channels of 1 x 1, flattened to ``width``
    features.  Larger images are averaged over what is left after pooling.

    Parameters
    ----------
    in_channels : int, default=1
        Channels of the input images.
    width : int, default=64
        Channels of every block, and so the number of output features.

    Returns
    -------
    backbone : torch.nn.Sequential
        Maps ``(N, in_channels, H, W)`` images to ``(N, width)`` features.
    """
    layers: list[nn.Module] = []
    channels = in_channels
    for _ in range(4):
        layers += [
            nn.Conv2d(channels, width, kernel_size=3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
        ]
        channels = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return nn.Sequential(*layers)


#: Smallest image side the conv4 backbone's four 2x2 poolings leave a pixel of.
_CONV4_MIN_SIDE = 16


class Conv4Embedder(nn.Module):
    """Image embedder: conv4 backbone, then an MLP to ``d_model``.

    Accepts square single-channel images as flat rows ``(m, side * side)``
    (the layout :class:`~skabc.ContextualKernel` and scikit-learn use) or as
    ``(m, 1, side, side)`` tensors.

    Parameters
    ----------
    n_features : int
        Pixels per image; a perfect square of a side of 16 or more (784 for 28 x 28).
    d_model : int
        Output width.
    width : int, default=64
        Channels of the convolutions (the backbone's output width).
    """

    def __init__(self, n_features: int, d_model: int, width: int = 64) -> None:
        super().__init__()
        side = math.isqrt(n_features)
        if side * side != n_features or side < 1:
            raise ValueError(
                f"the conv4 embedder takes square images given as rows of side*side pixels; "
                f"{n_features} features is not a perfect square."
            )
        if side < _CONV4_MIN_SIDE:  # each of the four blocks halves the side: nothing would be left to pool
            raise ValueError(
                f"the conv4 embedder needs images of at least {_CONV4_MIN_SIDE} x {_CONV4_MIN_SIDE} pixels (its four "
                f"blocks halve the side each); these are {side} x {side}: use embedder='mlp' (or None) for them."
            )
        self.side = side
        self.backbone = conv4_backbone(1, width)
        self.head = MLPEmbedder(width, d_model)

    def forward(self, x):
        if x.dim() == 2:
            x = x.reshape(x.shape[0], 1, self.side, self.side)
        return self.head(self.backbone(x))


class FourierEmbedder(nn.Module):
    """Learnable Fourier features at many scales, then an MLP (for low-dimensional geometry).

    Each point ``x`` becomes ``[sin(W x), cos(W x), x]`` before the MLP.  Dot
    products of such features approximate shift-invariant kernels (random
    Fourier features, Rahimi & Recht 2007), so the multiplicative similarity
    head and the attention scores can express "close points belong together"
    from the first step, which a plain MLP on coordinates learns slowly.  The
    rows of ``W`` point in random directions with lengths spread
    log-uniformly over ``frequency_range`` (for inputs of about unit radius,
    e.g. canonical coordinates) and are trained with the rest.

    Parameters
    ----------
    n_features : int
        Input width.
    d_model : int
        Output width.
    n_frequencies : int, default=64
        Number of frequencies (the features are twice that, plus ``x``).
    frequency_range : (float, float), default=(0.5, 32.0)
        Range of the frequency lengths at initialisation.
    """

    def __init__(self, n_features: int, d_model: int, n_frequencies: int = 64,
                 frequency_range: tuple[float, float] = (0.5, 32.0)) -> None:
        super().__init__()
        frequencies = torch.empty(n_frequencies, n_features)
        if not frequencies.is_meta:
            # On 'meta' (a saved model's shapes checked before loading) nothing is drawn: torch's meta normal_
            # is written in Python and imports its symbolic-shape machinery (sympy, dynamo), about a second.
            directions = torch.randn(n_frequencies, n_features)
            directions = directions / directions.norm(dim=1, keepdim=True).clamp(min=1e-12)
            low, high = math.log(frequency_range[0]), math.log(frequency_range[1])
            frequencies = directions * torch.exp(low + (high - low) * torch.rand(n_frequencies, 1))
        self.frequencies = nn.Parameter(frequencies)
        self.mlp = MLPEmbedder(2 * n_frequencies + n_features, d_model, hidden=[2 * d_model])

    def forward(self, x):
        phase = x @ self.frequencies.T
        return self.mlp(torch.cat([torch.sin(phase), torch.cos(phase), x], dim=-1))


#: Named embedders accepted by ``ContextualKernel(embedder=...)``.
EMBEDDERS = {"mlp": MLPEmbedder, "conv4": Conv4Embedder, "fourier": FourierEmbedder}
