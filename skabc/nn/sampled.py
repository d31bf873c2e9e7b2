"""Sampled attention block (paper: "Sampled Transformer for Point Sets").

Random element sampling chains a random ordering of the points into windows
that share their end points, and Hamiltonian self-attention lets every point
attend to itself and its neighbours in that ordering.  Together the windows
form a random Hamiltonian cycle through the set, so one block costs ``O(n)``
(``O(n * window_size)`` with dense attention inside the windows) instead of
``O(n^2)``, and resampling the cycle approximates dense attention on average.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import MultiheadAttentionBlock

WINDOW_ATTENTIONS = ("hamiltonian", "dense")


def sample_windows(n: int, window_size: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Chain a random ordering of ``n`` points into windows that form a cycle.

    A random permutation ``pi`` of ``range(n)`` is cut into windows of
    ``window_size`` points with stride ``window_size - 1``: the last point of
    window ``i`` is the first point of window ``i + 1``, and the last point of
    the last window is ``pi[0]``, the first point of the first window, so the
    windows chain into a cycle through every point (the paper's
    ``X^i = X[R^i + R^{gamma(i)}_1]``).

    The paper assumes ``(window_size - 1) * l == n``.  Otherwise
    ``l = ceil(n / (window_size - 1))`` windows are used and the cycle is
    lengthened to ``l * (window_size - 1)`` slots by wrapping around: the
    missing ``l * (window_size - 1) - n < window_size - 1`` slots, just before
    the closing ``pi[0]``, are filled with ``pi[1], pi[2], ...`` (random points
    already used in the first window, never twice in one window).  So every
    window is full, consecutive windows share exactly one point, and every
    point is covered once or twice.

    Parameters
    ----------
    n : int
        Number of points.
    window_size : int
        Points per window, at least 2.
    generator : torch.Generator, optional
        Source of randomness (torch's global generator if ``None``).

    Returns
    -------
    LongTensor of shape (l, window_size)
        Point indices of each window, in path order.  If ``window_size >= n``
        there is a single window of shape ``(1, n)`` holding every point once
        (no point is repeated, so dense attention in it is exactly dense
        attention over the set); ``n == 0`` gives no windows.
    """
    if window_size < 2:
        raise ValueError(f"window_size must be at least 2, got {window_size!r}")
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n!r}")
    if n == 0:
        return torch.empty(0, window_size, dtype=torch.long)
    order = torch.randperm(n, generator=generator)
    if window_size >= n:
        return order.unsqueeze(0)
    stride = window_size - 1
    n_windows = math.ceil(n / stride)
    length = n_windows * stride
    cycle = torch.cat([order, order[1 : 1 + length - n]])
    slots = torch.arange(n_windows)[:, None] * stride + torch.arange(window_size)
    return cycle[slots % length]


class SampledAttentionBlock(nn.Module):
    """Set block with sampled (random-window) self-attention, ``O(n * window_size)``.

    The real points of each set are chained into windows by
    :func:`sample_windows`.  Inside a window, ``'hamiltonian'`` attention lets
    every point attend to itself and its previous and next point in the window
    (the Hamiltonian path pattern, Eq. 4 of the paper; through the shared end
    points the windows join into one Hamiltonian cycle, and a single window
    holding the whole set of at least 3 points is closed into a cycle too);
    ``'dense'`` attention is full attention within each window.  A point that
    lies in two windows (the shared end points, and the wrap-around slots)
    gets the **mean** of its attention outputs.  Attention uses the
    projections of a :class:`~skabc.nn.blocks.MultiheadAttentionBlock`, and
    the residuals, layer norms and feed-forward layer are exactly those of
    that block, so with ``window_attention='dense'`` and
    ``window_size >= n`` this block equals a :class:`SetAttentionBlock` with
    the same weights.

    Windows are resampled on every forward pass in training mode, from torch's
    global random generator (as the paper resamples per batch; this acts like
    dropout).  In eval mode they come from generators seeded with
    ``seed + k`` for sample ``k``, so the windows are the same at every call (the output too, on the CPU; CUDA
    sums a window's messages with atomic additions, in no fixed order), and the
    block output is averaged over ``n_attention_samples`` samples.  Every set
    of a batch draws its windows from the same seed over its own real points
    only, so a set gets the same windows whatever it is batched or padded with.

    Parameters
    ----------
    d_model : int
        Width of the points.
    n_heads : int
        Attention heads; ``d_model`` must be divisible by it.
    d_ff : int, default=None
        Hidden width of the feed-forward layer (default ``4 * d_model``).
    layer_norm : {'pre', 'post'}, default='pre'
        Layer norm placement, see :class:`~skabc.nn.blocks.MultiheadAttentionBlock`.
    dropout : float, default=0.0
        Dropout on the attention weights and on the residual branches.
    window_size : int, default=32
        Points per window (the paper's ``n_s``), at least 2.
    n_attention_samples : int, default=1
        Number of window samples averaged in eval mode (training uses one).
    window_attention : {'hamiltonian', 'dense'}, default='hamiltonian'
        Attention pattern inside a window.
    seed : int, default=None
        Seed of the eval-mode windows.  ``None`` draws one from torch's global
        generator at construction, so that stacked blocks use different
        windows, as they do in training; it is stored in the persistent
        buffer ``eval_seed`` and thus saved with the weights.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        layer_norm: str = "pre",
        dropout: float = 0.0,
        window_size: int = 32,
        n_attention_samples: int = 1,
        window_attention: str = "hamiltonian",
        seed: int | None = None,
    ) -> None:
        super().__init__()
        if window_size < 2:
            raise ValueError(f"window_size must be at least 2, got {window_size!r}")
        if n_attention_samples < 1:
            raise ValueError(f"n_attention_samples must be a positive integer, got {n_attention_samples!r}")
        if window_attention not in WINDOW_ATTENTIONS:
            raise ValueError(f"window_attention must be one of {WINDOW_ATTENTIONS}, got {window_attention!r}")
        self.mab = MultiheadAttentionBlock(d_model, n_heads, d_ff, layer_norm, dropout)
        self.window_size = window_size
        self.n_attention_samples = n_attention_samples
        self.window_attention = window_attention
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                                 or not 0 <= seed < 2**62):
            raise ValueError(f"seed must be an integer in [0, 2**62), got {seed!r}")  # eval_seed + k stays in int64
        if seed is None:
            # A layout on the 'meta' device (a file's or the memory check's shapes, nothing allocated) needs no seed,
            # and a draw there moved the caller's stream outside any seeded fit (probe 53e). A real build draws it on
            # the CPU, as before.
            seed = 0 if torch.empty(0).is_meta else int(torch.randint(0, 2**62, (), device="cpu"))
        self.register_buffer("eval_seed", torch.tensor(seed, dtype=torch.long))

    def draw_windows(self, lengths: Sequence[int], sample_index: int | None = None) -> list[torch.Tensor]:
        """Windows for sets with ``lengths`` real points.

        Parameters
        ----------
        lengths : sequence of int
            Number of real points of each set.
        sample_index : int, optional
            Eval-mode sample ``k`` (generator seeded with ``eval_seed + k``);
            ``None`` draws from torch's global generator, as in training.

        Returns
        -------
        list of LongTensor
            One :func:`sample_windows` result per set, indexing its real points.
        """
        if sample_index is None:
            return [sample_windows(n, self.window_size) for n in lengths]
        generator = torch.Generator()
        cache: dict[int, torch.Tensor] = {}
        for n in set(lengths):
            # Reseeding per set: a set's windows depend on its own size only, not on its batch.
            generator.manual_seed(int(self.eval_seed) + sample_index)
            cache[n] = sample_windows(n, self.window_size, generator)
        return [cache[n] for n in lengths]

    def forward(
        self,
        x: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        windows: torch.Tensor | Sequence[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Apply the block.

        Parameters
        ----------
        x : Tensor of shape (B, n, d)
            Padded batch of sets.
        key_mask : bool Tensor of shape (B, n), default=None
            ``True`` for real points.
        windows : LongTensor or sequence of LongTensor, default=None
            Explicit windows (one sample, no averaging) instead of sampled
            ones: per set a ``(l, w)`` tensor of indices into that set's real
            points (counted in order along the set axis), or one tensor used
            for every set.  Hamiltonian attention follows the column order.

        Returns
        -------
        Tensor of shape (B, n, d)
        """
        batch, n = x.shape[:2]
        lengths = [n] * batch if key_mask is None else key_mask.sum(1).tolist()
        if windows is not None:
            if isinstance(windows, torch.Tensor):
                windows = [windows] * batch
            if len(windows) != batch:
                raise ValueError(f"got windows for {len(windows)} sets, expected {batch}")
            return self._forward_windows(x, key_mask, windows)
        if self.training:
            return self._forward_windows(x, key_mask, self.draw_windows(lengths))
        out = self._forward_windows(x, key_mask, self.draw_windows(lengths, 0))
        if self.window_attention == "dense" and max(lengths, default=0) <= self.window_size:
            # Every set is one window: dense attention over all of it, the same for every sample.
            return out
        for k in range(1, self.n_attention_samples):
            out = out + self._forward_windows(x, key_mask, self.draw_windows(lengths, k))
        return out / self.n_attention_samples

    def _forward_windows(
        self, x: torch.Tensor, key_mask: torch.Tensor | None, windows: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        return self.mab.residual(x, lambda q: self._window_attention(q, key_mask, windows))

    def _flat_windows(
        self, n: int, key_mask: torch.Tensor | None, windows: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Windows of all sets as rows of indices into the flattened batch ``(B * n)``, -1 for unused slots.

        Also returns, per window, whether a Hamiltonian path in it must be closed into a cycle.
        """
        mask = None if key_mask is None else key_mask.detach().cpu()
        rows: list[torch.Tensor] = []
        closed: list[bool] = []
        for b, win in enumerate(windows):
            win = torch.as_tensor(win, dtype=torch.long).cpu()
            if win.numel() == 0:
                continue
            if win.dim() != 2:
                raise ValueError(f"windows must be 2-d (l, w) index tensors, got shape {tuple(win.shape)}")
            positions = torch.arange(n) if mask is None else mask[b].nonzero().squeeze(1)
            if win.min() < 0 or win.max() >= len(positions):
                raise ValueError(f"window indices of set {b} must lie in [0, {len(positions)})")
            rows.append(b * n + positions[win])
            # A set given as one window: close its path so that it still is a Hamiltonian cycle.
            closed.extend([win.shape[0] == 1 and win.shape[1] >= 3] * win.shape[0])
        width = max((r.shape[1] for r in rows), default=0)
        flat = torch.cat([F.pad(r, (0, width - r.shape[1]), value=-1) for r in rows]) if rows else torch.empty(0, 0)
        return flat.long(), torch.tensor(closed, dtype=torch.bool)

    def _window_attention(
        self, q: torch.Tensor, key_mask: torch.Tensor | None, windows: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Attention output ``(B, n, d)`` of the (normalised) points ``q`` within the windows."""
        batch, n, width = q.shape
        flat, closed = self._flat_windows(n, key_mask, windows)
        out = q.new_zeros(batch * n, width)
        if flat.numel() == 0:
            return out.view(batch, n, width)
        flat, closed = flat.to(q.device), closed.to(q.device)
        valid = flat >= 0
        index = flat.clamp(min=0)
        points = q.reshape(batch * n, width)
        if self.window_attention == "dense":
            gathered = points[index]
            attended = self.mab.attend(gathered, gathered, valid)
        else:
            attended = self._hamiltonian(points, index, valid, closed)
        # Mean over the windows a point appears in; points in no window (padding) get 0.
        out = out.index_add(0, flat[valid], attended[valid])
        counts = torch.zeros(batch * n, device=q.device, dtype=q.dtype).index_add(
            0, flat[valid], torch.ones_like(flat[valid], dtype=q.dtype)
        )
        return (out / counts.clamp(min=1)[:, None]).view(batch, n, width)

    def _hamiltonian(
        self, points: torch.Tensor, index: torch.Tensor, valid: torch.Tensor, closed: torch.Tensor
    ) -> torch.Tensor:
        """Each window slot attends to [previous, itself, next]: three keys per query, O(n) in all."""
        n_windows, width = index.shape
        slots = torch.arange(width, device=index.device).expand(n_windows, width)
        lengths = valid.sum(1, keepdim=True)
        prev_slot, next_slot = slots - 1, slots + 1
        prev_ok = (prev_slot >= 0) & valid
        next_ok = (next_slot < lengths) & valid
        # Closed windows wrap around: slot 0 <-> slot length - 1.
        prev_slot = torch.where(closed[:, None] & (slots == 0), lengths - 1, prev_slot)
        next_slot = torch.where(closed[:, None] & (slots == lengths - 1), 0, next_slot)
        prev_ok |= closed[:, None] & valid
        next_ok |= closed[:, None] & valid
        neighbours = torch.stack([prev_slot, slots, next_slot], dim=-1).clamp(0, width - 1)
        # Unused slots keep their (finite, discarded) self key so no softmax row is empty.
        neighbour_ok = torch.stack([prev_ok, torch.ones_like(valid), next_ok], dim=-1)
        neighbour_index = index.gather(1, neighbours.view(n_windows, -1)).view(n_windows, width, 3)
        queries = points[index].view(n_windows * width, 1, -1)
        keys = points[neighbour_index].view(n_windows * width, 3, -1)
        attended = self.mab.attend(queries, keys, neighbour_ok.view(n_windows * width, 3))
        return attended.view(n_windows, width, -1)
