"""Learned affinities of a trained set encoder: dense or top-k sparse behind one function, and the memory guard."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from ._runtime import float32_default, memory_limit_bytes
from ._typing import Int
from ._validation import format_bytes
from .exceptions import AffinityTooLargeError
from .sparse_affinity import row_keys, topk_affinity

# Rows of the affinity computed at once, bounding the (rows, n) logit block.
_INFERENCE_BLOCK_CELLS = 2**24

#: Largest set whose local-geometry terms (dense ``n x n`` pair features) a kernel computes; larger sets,
#: and every sparse affinity, are computed without them (for the shipped generic kernel, whose shared
#: weights were frozen while its geometry maps trained, that is its base kernel v1's affinity, exactly so
#: for sets of at most 16 principal dimensions: wider sets reach the embedder scaled by 64 components' RMS).
GEOMETRY_MAX_SAMPLES = 4000


def encode(module: nn.Module, X: np.ndarray, set_transform=None, with_geometry: bool = False,
           use_geometry: bool | None = None):
    """Contextual embeddings ``(1, n, d_model)`` of the set ``X`` (float32 rows).

    ``with_geometry=True`` also returns the terms the geometry adds to the
    logits, ``(scale, extra)`` of :meth:`ABCNet.logit_terms` (``(None, None)``
    when it is not used), computed once with the embeddings.
    ``use_geometry``: whether a ``local_geometry`` module uses them; ``None``:
    up to :data:`GEOMETRY_MAX_SAMPLES` points.
    """
    module.eval()
    device = next(module.parameters()).device
    if set_transform is not None:
        X = set_transform(X)
    if use_geometry is None:
        use_geometry = X.shape[0] <= GEOMETRY_MAX_SAMPLES
    use_geometry = bool(use_geometry and getattr(module, "local_geometry", False))
    if isinstance(X, np.ndarray) and not X.flags.writeable:
        X = X.copy()  # torch warns that it cannot share a read-only array (a memmap, pandas' copy-on-write)
    with torch.inference_mode():
        points = torch.as_tensor(X, device=device)[None]
        geometry = module.geometry(points) if use_geometry else None
        z = module.encode(points, None, geometry, use_geometry=use_geometry)
        if not with_geometry:
            return z
        terms = module.logit_terms(z, geometry)
    return z, terms


@float32_default()
def learned_affinity(
    module: nn.Module,
    X: np.ndarray,
    *,
    sparse: bool = False,
    n_neighbors: Int = 30,
    n_random_neighbors: Int = 20,
    set_transform=None,
) -> np.ndarray | sp.csr_matrix:
    """Same-cluster probabilities of every pair of the set ``X`` under ``module``.

    Parameters
    ----------
    module : ABCNet
        A trained set encoder with a similarity head.
    X : ndarray of shape (n, n_features), float32
        One validated set.
    sparse : bool, default=False
        False: the dense ``n x n`` float64 affinity, computed in row blocks.
        True: each point's ``n_neighbors`` highest affinities and
        ``n_random_neighbors`` random partners (drawn from the points' values,
        :func:`~skabc.sparse_affinity.row_keys`), never dense.
    n_neighbors, n_random_neighbors : int
        Sparse mode only.
    set_transform : callable, default=None
        Per-set map applied to ``X`` before the network.

    Returns
    -------
    affinity : ndarray or scipy.sparse.csr_matrix of shape (n, n)
        Symmetric, in ``[0, 1]``.
    """
    z, (scale, extra) = encode(module, X, set_transform, with_geometry=True,
                               use_geometry=False if sparse else None)
    if not bool(torch.isfinite(z).all()):
        raise _overflow_error()
    if sparse:
        affinity = topk_affinity(module.head, z, n_neighbors, n_random=n_random_neighbors, point_keys=row_keys(X))
        if not np.isfinite(affinity.data.sum()):
            raise _overflow_error()
        return affinity
    n = X.shape[0]
    with torch.inference_mode():
        projected = module.head.project(z)
        rows = max(1, _INFERENCE_BLOCK_CELLS // max(n, 1))
        affinity = np.empty((n, n), dtype=np.float64)
        for start in range(0, n, rows):
            block = module.head.block_logits(z, slice(start, start + rows), projected)
            if scale is not None:
                block = scale[:, None, None] * block
            if extra is not None:
                block = block + extra[:, start : start + rows]
            # Sigmoid in float64: confident "different cluster" logits stay positive instead of
            # underflowing to 0, so the affinity graph stays connected for the spectral step.
            affinity[start : start + rows] = torch.sigmoid(block[0].double()).cpu().numpy()
    if not np.isfinite(affinity.sum()):  # one reduction, no n x n mask
        raise _overflow_error()
    # Blocks are symmetric up to rounding; make it exact.
    affinity += affinity.T
    affinity *= 0.5
    return affinity


def _overflow_error() -> ValueError:
    return ValueError("the kernel's affinity of this set is not finite (NaN or infinity): its weights overflow, as a "
                      "corrupted or forged model file's, or a training run's that diverged, would; refit or reload "
                      "the kernel.")


#: Peak memory of a sparse learned affinity while it is built, in bytes: per pair kept before the symmetric union
#: (each point's neighbours and random partners: their indices and values, the union and the CSR result), and per
#: point (the network's work and the neighbour search).  Measured on the shipped generic kernel, peak resident
#: memory, one thread: 111-127 bytes per pair at 3,000-8,000 points with 1,000 to all neighbours per point; 115 and
#: 211 MB at 5,000 and 40,000 points with 1 to 5 (2.7 KB per point and a fixed ~100 MB); 141-427 MB at 12,000-40,000
#: points with the defaults, 30 + 20 (about 225 bytes per pair).  ``ABCClustering``'s spectral step peaks lower.
SPARSE_BYTES_PER_PAIR = 128.0
SPARSE_BYTES_PER_POINT = 4096.0


def check_affinity_memory(kernel, n_samples: int, n_copies: float = 1.0) -> None:
    """A :class:`~skabc.ContextualKernel`'s memory check for a set: its sparse affinity in sparse mode (the
    construction peaks, not the caller's copies of the result), else ``n_copies`` dense results and the work."""
    if kernel.returns_sparse(n_samples):
        check_sparse_memory(n_samples, kernel.n_neighbors, kernel.n_random_neighbors, kernel.memory_limit)
    else:
        check_dense_memory(n_samples, n_copies, kernel.memory_limit, working_bytes(kernel, n_samples))


def check_sparse_memory(n_samples: int, n_neighbors: int, n_random_neighbors: int, memory_limit) -> None:
    """Refuse a set whose sparse affinity of ``n_neighbors`` and ``n_random_neighbors`` per point would exceed
    ``memory_limit`` (as many neighbours as points build every pair, in sparse form).

    Raises
    ------
    AffinityTooLargeError
        Naming the size needed, the limit, and what to do instead.
    """
    limit = memory_limit_bytes(memory_limit)
    per_point = min(n_neighbors, max(n_samples - 1, 0)) + min(n_random_neighbors, max(n_samples - 1, 0))
    needed = float(n_samples) * (SPARSE_BYTES_PER_POINT + SPARSE_BYTES_PER_PAIR * per_point)
    if limit is not None and needed > limit:
        raise AffinityTooLargeError(
            f"a set of {n_samples} points needs about {format_bytes(needed)} for its sparse affinity of "
            f"{per_point} pairs per point (n_neighbors={n_neighbors}, n_random_neighbors={n_random_neighbors}), "
            f"over memory_limit={format_bytes(limit)}. Lower n_neighbors or n_random_neighbors, cluster smaller "
            "sets (e.g. pass groups to split it), or raise memory_limit if the machine has the memory."
        )


#: Peak working memory of a dense learned affinity beyond its float64 result, in bytes per pair: with the local
#: geometry's pair maps (up to :data:`GEOMETRY_MAX_SAMPLES` points) and without.  Measured on the shipped generic
#: kernel (72 and 18 bytes per pair in all, result included, at 1,500-4,500 points; one thread).
WORKING_BYTES_PER_PAIR = {True: 64.0, False: 10.0}


def working_bytes(kernel, n_samples: int) -> float:
    """:data:`WORKING_BYTES_PER_PAIR` of a dense affinity of ``n_samples`` points under ``kernel``'s network."""
    module = getattr(kernel, "module_", None)  # None before fit
    geometry = bool(getattr(module, "local_geometry", False)) and n_samples <= GEOMETRY_MAX_SAMPLES
    return WORKING_BYTES_PER_PAIR[geometry]


def check_dense_memory(n_samples: int, n_copies: float, memory_limit, working_bytes_per_pair: float = 0.0) -> None:
    """Refuse a set whose ``n_copies`` dense ``n x n`` float64 results, plus ``working_bytes_per_pair`` bytes
    of working memory per pair, would exceed ``memory_limit``.

    Raises
    ------
    AffinityTooLargeError
        Naming the size needed, the limit, and what to do instead.
    """
    limit = memory_limit_bytes(memory_limit)
    needed = (n_copies * 8.0 + working_bytes_per_pair) * float(n_samples) ** 2
    if limit is not None and needed > limit:
        raise AffinityTooLargeError(
            f"a set of {n_samples} points needs about {format_bytes(needed)} for its dense "
            f"{n_samples} x {n_samples} affinity{' and its computation' if working_bytes_per_pair else ''}, "
            f"over memory_limit={format_bytes(limit)}. "
            "Use affinity_mode='sparse' (each point's n_neighbors strongest pairs), cluster smaller "
            "sets (e.g. pass groups to split it), or raise memory_limit if the machine has the memory."
        )
