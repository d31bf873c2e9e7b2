"""Masked binary cross-entropy against the same-cluster matrix."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def same_cluster_matrix(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Targets and validity of every pair for padded label rows.

    Parameters
    ----------
    labels : torch.Tensor of shape (B, n)
        Integer cluster labels of each set, ``-1`` marking padding.

    Returns
    -------
    target : torch.Tensor of shape (B, n, n)
        1.0 where two points share a label, else 0.0 (float32).
    pair_valid : torch.Tensor of shape (B, n, n)
        ``True`` for pairs of two real (unpadded) points.
    """
    valid = labels >= 0
    pair_valid = valid[:, :, None] & valid[:, None, :]
    target = (labels[:, :, None] == labels[:, None, :]).to(torch.float32)
    return target, pair_valid


class SameClusterBCELoss(nn.Module):
    """Mean BCE over the real (unpadded) cells of a batch of logit matrices.

    Parameters
    ----------
    pos_weight : float, 'balanced' or None, default=None
        Weight of the same-cluster (positive) cells.  ``'balanced'`` uses the
        ratio of negative to positive real cells of each batch, at least 1 (a
        batch of mostly same-cluster cells, few clusters per set, is not
        weighed towards "different"); ``None``: unweighted.
    """

    def __init__(self, pos_weight: float | str | None = None) -> None:
        super().__init__()
        self.pos_weight = pos_weight

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        target, pair_valid = same_cluster_matrix(labels.to(logits.device))
        target = target.to(logits.dtype)
        weight = pair_valid.to(logits.dtype)
        if self.pos_weight is not None:
            if self.pos_weight == "balanced":
                n_pos = (target * weight).sum()
                n_neg = weight.sum() - n_pos
                pos_weight = (n_neg / n_pos.clamp(min=1.0)).clamp(min=1.0)
            else:
                pos_weight = torch.as_tensor(float(self.pos_weight), dtype=logits.dtype, device=logits.device)
            weight = weight * (1.0 + (pos_weight - 1.0) * target)
        # Padded cells are zeroed before the loss, not only weighed 0 after it: a non-finite logit there would poison
        # the mean (inf * 0), and a NaN one the gradient, which where() alone passes back as NaN (0 * NaN).
        loss = F.binary_cross_entropy_with_logits(logits.masked_fill(~pair_valid, 0.0), target, reduction="none")
        return (loss * weight).sum() / pair_valid.sum().clamp(min=1)
