"""Input embedders: map each point (row) independently to ``d_model`` features."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn


class MLPEmbedder(nn.Module):
    """Row-wise MLP for vector data.

    Parameters
    ----------
    n_features : int
        Input width.
    d_model : int
        Output width.
    hidden : sequence of int
        Widths of the hidden layers (default one layer of ``d_model``).
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
