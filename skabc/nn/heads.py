"""Symmetric similarity heads: contextual embeddings -> same-cluster logits.

The ABC paper symmetrises by averaging two sigmoids.  We average the two
compatibility scores *before* the sigmoid instead, so the head outputs a
symmetric matrix of logits that trains with the numerically stable
``binary_cross_entropy_with_logits`` and whose sigmoid is still a symmetric
same-cluster probability in [0, 1].
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

COMPAT_FUNCTIONS = ("multiplicative", "additive")


class SimilarityHead(nn.Module):
    """Pairwise compatibility with separate query and key projections.

    Parameters
    ----------
    d_model : int
        Width of the contextual embeddings.
    compat : {'multiplicative', 'additive'}, default='multiplicative'
        ``'multiplicative'``: ``q_i . k_j / sqrt(d)``;
        ``'additive'``: ``w . tanh(q_i + k_j)``.
    d_head : int, default=None
        Width of queries and keys (default ``d_model``).
    chunk_bytes : int, default=64 * 2**20
        Memory budget of one chunk of the additive head's ``(B, rows, n,
        d_head)`` intermediate; rows are processed in chunks of that size
        (and recomputed in the backward pass) so memory stays bounded.
    """

    def __init__(
        self,
        d_model: int,
        compat: str = "multiplicative",
        d_head: int | None = None,
        chunk_bytes: int = 64 * 2**20,
    ) -> None:
        super().__init__()
        if compat not in COMPAT_FUNCTIONS:
            raise ValueError(f"compat must be one of {COMPAT_FUNCTIONS}, got {compat!r}")
        d_head = d_model if d_head is None else d_head
        self.compat = compat
        self.chunk_bytes = chunk_bytes
        self.query = nn.Linear(d_model, d_head)
        self.key = nn.Linear(d_model, d_head)
        if compat == "additive":
            self.score = nn.Linear(d_head, 1)
        else:
            self.bias = nn.Parameter(torch.zeros(()))
        self.scale = 1.0 / math.sqrt(d_head)

    def compatibility(self, z_rows: torch.Tensor, z_cols: torch.Tensor) -> torch.Tensor:
        """Asymmetric scores ``compat(z_i, z_j)`` of shape ``(B, n_rows, n_cols)``."""
        return self.scores(self.query(z_rows), self.key(z_cols))

    def project(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries and keys of the embeddings ``z``; computed once, reused by every block."""
        return self.query(z), self.key(z)

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Asymmetric scores from projected queries ``(B, r, h)`` and keys ``(B, c, h)``."""
        if self.compat == "multiplicative":
            return q @ k.transpose(1, 2) * self.scale + self.bias
        batch, n_rows, width = q.shape
        per_row = batch * k.shape[1] * width * q.element_size()
        step = max(1, self.chunk_bytes // max(per_row, 1))
        chunks = []
        for start in range(0, n_rows, step):
            q_chunk = q[:, start : start + step]
            if torch.is_grad_enabled() and q_chunk.requires_grad:
                # Recompute tanh(q + k) in backward instead of storing (B, n, n, d).
                chunks.append(checkpoint(self._additive, q_chunk, k, use_reentrant=False))
            else:
                chunks.append(self._additive(q_chunk, k))
        return torch.cat(chunks, dim=1)

    def _additive(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self.score(torch.tanh(q[:, :, None, :] + k[:, None, :, :])).squeeze(-1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Symmetric logits ``(B, n, n)`` for the embeddings ``z`` of shape ``(B, n, d)``."""
        scores = self.compatibility(z, z)
        return 0.5 * (scores + scores.transpose(1, 2))

    def block_logits(
        self, z: torch.Tensor, rows: slice, projected: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Symmetric logits of the rows ``rows`` against all points, ``(B, |rows|, n)``.

        Lets inference fill a large affinity block by block; pass
        ``projected=head.project(z)`` to avoid re-projecting all points per block.
        """
        q, k = self.project(z) if projected is None else projected
        return 0.5 * (self.scores(q[:, rows], k) + self.scores(q, k[:, rows]).transpose(1, 2))

    def rank_factors(
        self, z: torch.Tensor, projected: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Factors ``(left, right)`` that rank every row of the symmetric logits, or ``None``.

        For the multiplicative head, ``logits[b, i, j] = left[b, i] . right[b, j] + c[b, i]``
        with a constant ``c[b, i]`` per row, so each row of ``left @ right^T`` orders the
        points exactly as that row of the logits does (up to float rounding): the top-k
        partners of every point need one matrix product of width ``r`` per block and
        nothing else.  ``r = min(d_model, 2 * d_head)``:

        * ``left = (Wq^T k + Wk^T q) * scale / 2``, ``right = z`` (width ``d_model``), since
          the ``j``-dependent part of ``(q_i . k_j + q_j . k_i) * scale / 2`` is
          ``(Wq^T k_i + Wk^T q_i) . z_j * scale / 2`` (the projection biases cancel);
        * or ``left = [q, k] * scale / 2``, ``right = [k, q]`` (width ``2 * d_head``; ``c`` is
          the bias).

        The additive head has no such factorisation: ``None``.

        Parameters
        ----------
        z : torch.Tensor of shape (B, n, d_model)
            Contextual embeddings.
        projected : (q, k), optional
            ``self.project(z)``, if already computed.

        Returns
        -------
        (left, right) : pair of torch.Tensor of shape (B, n, r), or None
        """
        if self.compat != "multiplicative":
            return None
        q, k = self.project(z) if projected is None else projected
        half = 0.5 * self.scale
        if z.shape[-1] <= 2 * q.shape[-1]:
            left = (k @ self.query.weight + q @ self.key.weight) * half
            return left, z
        return torch.cat([q, k], dim=-1) * half, torch.cat([k, q], dim=-1)

    def pair_logits(
        self, projected: tuple[torch.Tensor, torch.Tensor], rows: torch.Tensor, cols: torch.Tensor
    ) -> torch.Tensor:
        """Symmetric logits of the pairs ``(rows, cols)`` of one set (indices broadcast together).

        Parameters
        ----------
        projected : (q, k)
            ``self.project(z)`` for one set, each of shape ``(1, n, d_head)`` or ``(n, d_head)``;
            the logits are computed in their dtype.
        rows, cols : LongTensor
            Point indices, broadcastable to a common shape (e.g. ``rows`` of shape ``(r, 1)``
            and ``cols`` of shape ``(r, m)`` for ``m`` partners of each of ``r`` points).

        Returns
        -------
        torch.Tensor of the broadcast shape of ``rows`` and ``cols``
            ``(compat(i, j) + compat(j, i)) / 2``, the entries ``forward(z)[0, i, j]``.
        """
        q, k = projected
        if q.dim() == 3:
            q, k = q[0], k[0]
        q_i, k_i, q_j, k_j = q[rows], k[rows], q[cols], k[cols]
        if self.compat == "multiplicative":
            dots = (q_i * k_j).sum(-1) + (q_j * k_i).sum(-1)
            return 0.5 * self.scale * dots + self.bias.to(q.dtype)
        weight, bias = self.score.weight.to(q.dtype)[0], self.score.bias.to(q.dtype)[0]
        both = torch.tanh(q_i + k_j) @ weight + torch.tanh(q_j + k_i) @ weight
        return 0.5 * both + bias
