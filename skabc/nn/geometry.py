"""Local geometry of a set, as features of every pair and every point.

A set encoder that sees raw coordinates only has to learn density adaptation
(what "close" means here, in this part of the set) from scratch.  These
features hand it the classical answers, computed per set on the fly:

* the self-tuning scaled distance ``u_ij = d_ij^2 / (s_i s_j)`` of Zelnik-Manor &
  Perona (2004), ``s_i`` the distance from ``i`` to its :data:`SCALE_NEIGHBOR`-th
  nearest neighbour, as ``exp(-u)`` at three bandwidths and ``log(1 + u)``;
* k-nearest-neighbour membership both ways (``j`` among the ``k`` nearest of
  ``i`` or ``i`` among those of ``j``) for k in :data:`KNN_SIZES`, and mutual
  membership at the middle size;
* the shared-neighbour fraction ``|N(i) & N(j)| / k`` of kNN-adjacent pairs;
* the plain distance, in the set's own units.

Every feature is symmetric in ``i, j`` and means the same thing at every set
size (ranks and neighbour counts, never fractions of ``n``), so a model trained
on sets of a few hundred points reads them the same way on sets of thousands.
Padded points (``mask == False``) are never anyone's neighbour.
"""

from __future__ import annotations

import torch

#: Neighbour rank whose distance is a point's local scale ``s_i`` (Zelnik-Manor & Perona use 7).
SCALE_NEIGHBOR = 7
#: Neighbourhood sizes of the kNN-membership features; the middle one also gives mutual kNN and shared neighbours.
KNN_SIZES = (5, 10, 30)
#: Bandwidth multipliers of the ``exp(-u / b)`` features.
BANDWIDTHS = (1.0, 4.0, 16.0)
#: Number of pair features returned by :func:`pair_features`.
N_PAIR_FEATURES = len(BANDWIDTHS) + 1 + len(KNN_SIZES) + 2 + 1
#: Number of point features returned by :func:`pair_features`.
N_POINT_FEATURES = 2

_EPS = 1e-6
#: float32 ``exp`` is exactly 0 from -103.97 down (checked for torch's CPU kernel on every float32 in [-105, -103]).
_EXP_ZERO_BELOW = -104.0


def pair_features(X: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Local-geometry features of every pair and every point of a padded batch of sets.

    Parameters
    ----------
    X : Tensor of shape (B, n, d)
        Coordinates (e.g. canonical coordinates).
    mask : bool Tensor of shape (B, n), default=None
        ``True`` for real points; ``None``: all real.

    Returns
    -------
    pairs : Tensor of shape (B, N_PAIR_FEATURES, n, n)
        Symmetric pair features (see the module documentation), one ``n x n``
        map per feature (channels first: the layout of per-head attention
        biases, and a plain copy to stack); rows and columns of padded points
        are zero.
    points : Tensor of shape (B, n, N_POINT_FEATURES)
        ``log(s_i / median_j s_j)`` (relative local density) and
        ``log(s5_i / s30_i)`` (how the neighbourhood grows: a proxy of the local
        dimension), zero for padded points.
    """
    batch, n, _ = X.shape
    X = X.detach().float()
    if mask is None:
        mask = torch.ones(batch, n, dtype=torch.bool, device=X.device)
    real_pair = mask[:, :, None] & mask[:, None, :]
    # Exact differences, not the |x|^2 + |y|^2 - 2xy expansion: its rounding reorders close neighbours.
    dist = torch.cdist(*[_without_zero_tail(X)] * 2, compute_mode="donot_use_mm_for_euclid_dist")
    # Neighbour search: padded points and the point itself are never neighbours.
    eye = torch.eye(n, dtype=torch.bool, device=X.device)[None]
    search = dist.masked_fill(~real_pair | eye, float("inf"))
    n_real = mask.sum(dim=1)  # (B,)
    k_max = max(1, min(max(KNN_SIZES), n - 1))
    near_dist, near_idx = torch.topk(search, k_max, dim=2, largest=False)  # (B, n, k_max), ascending
    rank_ok = torch.arange(k_max, device=X.device)[None, None, :] < (n_real[:, None, None] - 1)
    rank_ok = (rank_ok & mask[:, :, None]).expand(batch, n, k_max)

    def scale_at(rank: int) -> torch.Tensor:
        """Distance to the ``rank``-th neighbour (the farthest existing one in small sets)."""
        index = torch.clamp(torch.minimum(torch.full_like(n_real, rank), n_real - 1) - 1, min=0, max=k_max - 1)
        s = near_dist.gather(2, index[:, None, None].expand(batch, n, 1)).squeeze(2)
        return torch.where(torch.isfinite(s), s, torch.zeros_like(s))

    scale = scale_at(SCALE_NEIGHBOR)
    # A floor relative to the set's typical scale keeps duplicates from giving u = inf.
    typical = _masked_median(scale, mask)
    scale = torch.maximum(scale, _EPS * (1.0 + typical[:, None]))
    u = dist.square() / (scale[:, :, None] * scale[:, None, :])
    # Every map is written into its channel of one preallocated tensor: stacking a list of maps copies them all
    # once more, a tenth of the network's inference time at n = 1,000.  The features are constants of the input
    # (no gradient flows through them), hence the in-place ``out=`` writes.
    pairs = torch.empty(batch, N_PAIR_FEATURES, n, n, dtype=u.dtype, device=u.device)
    for channel, bandwidth in enumerate(BANDWIDTHS):
        _exp_of_negative_(torch.div(u, -bandwidth, out=pairs[:, channel]))
    torch.log1p(u, out=pairs[:, len(BANDWIDTHS)])
    graph_maps = []
    middle = KNN_SIZES[len(KNN_SIZES) // 2]
    not_self = real_pair & ~eye
    for size in KNN_SIZES:
        # Neighbours are those as near as the size-th, ties included: the top-k list breaks ties by row index,
        # which made the features (and the partition) of integer grids or repeated rows depend on row order.
        directed = (search <= scale_at(size)[:, :, None]) & not_self
        graph_maps.append(directed | directed.transpose(1, 2))
        if size == middle:
            mutual = directed & directed.transpose(1, 2)
            # Only here does the top-k list matter (a host sync on a GPU: once per forward, not per size).
            ties = not torch.equal(directed, _knn_adjacency(near_idx, rank_ok, size, n))
            shared = (_shared_by_product(directed, size) if ties
                      else _shared_neighbours(near_idx, rank_ok, size, n))
    for channel, feature in enumerate([*graph_maps, mutual, shared, dist], start=len(BANDWIDTHS) + 1):
        pairs[:, channel].copy_(feature)
    if not bool(real_pair.all()):
        pairs.masked_fill_(~real_pair[:, None], 0.0)

    small, large = scale_at(KNN_SIZES[0]), scale_at(KNN_SIZES[-1])
    points = torch.stack(
        [torch.log(scale / (typical[:, None] + _EPS)), torch.log((small + _EPS) / (large + _EPS))], dim=-1
    )
    points = torch.nan_to_num(points, nan=0.0, posinf=0.0, neginf=0.0) * mask[..., None]
    return pairs, points


def _without_zero_tail(X: torch.Tensor, block: int = 8) -> torch.Tensor:
    """``X`` without its trailing columns that are 0 in every row, kept to a multiple of ``block`` columns.

    Canonical coordinates pad a 2-D set with zeros to the network's width (64): their squared differences add
    exact zeros to the distances, which took 22 ms of 25 at n = 1,000.  Whole blocks of eight keep the CPU
    kernel's summation, so the distances are bitwise those of all the columns (checked for every width to 32).
    """
    used = torch.nonzero(X.detach().abs().amax(dim=tuple(range(X.dim() - 1))))
    keep = min(X.shape[-1], -(-(int(used.max()) + 1 if len(used) else 1) // block) * block)
    return X[..., :keep].contiguous() if keep < X.shape[-1] else X


def _exp_of_negative_(values: torch.Tensor) -> torch.Tensor:
    """``exp`` of non-positive float32 ``values``, in place, those whose ``exp`` is 0 set to 0 without it.

    The vectorised CPU ``exp`` takes a slow path for arguments below about -88, which most pairs of a set of
    separate clusters reach: it was a third of :func:`pair_features`' time at n = 1,000.  Same values.
    """
    underflow = values < _EXP_ZERO_BELOW
    return values.masked_fill_(underflow, 0.0).exp_().masked_fill_(underflow, 0.0)


def _knn_adjacency(near_idx: torch.Tensor, rank_ok: torch.Tensor, size: int, n: int) -> torch.Tensor:
    """Directed kNN adjacency ``(B, n, n)``: ``[i, j]`` true when ``j`` is among the ``size`` nearest of ``i``."""
    batch = near_idx.shape[0]
    size = min(size, near_idx.shape[2])
    adjacency = torch.zeros(batch, n, n, dtype=torch.bool, device=near_idx.device)
    adjacency.scatter_(2, near_idx[:, :, :size], rank_ok[:, :, :size])
    return adjacency


def _shared_neighbours(near_idx: torch.Tensor, rank_ok: torch.Tensor, size: int, n: int) -> torch.Tensor:
    """``|N(i) & N(j)| / size`` on kNN-adjacent pairs (either way), zero elsewhere; symmetric.

    Computed on the ``n * size`` adjacent pairs only, by comparing neighbour lists
    (``O(n size^3)``), never by an ``n x n x n`` product.
    """
    batch = near_idx.shape[0]
    listed = min(size, near_idx.shape[2])  # a padded batch lists more neighbours than a small set has alone
    lists = near_idx[:, :, :listed].masked_fill(~rank_ok[:, :, :listed], -1)  # (B, n, s); -1: no neighbour
    flat = lists.clamp(min=0).reshape(batch, n * listed)
    theirs = torch.gather(lists, 1, flat[:, :, None].expand(-1, -1, listed)).reshape(batch, n, listed, listed)
    mine = lists[:, :, None, :, None]  # (B, n, 1, s, 1)
    common = ((theirs[:, :, :, None, :] == mine) & (mine >= 0)).any(dim=-1).sum(dim=-1)  # (B, n, s)
    # Over ``size``, not the neighbours listed: the same fraction alone or padded, as _shared_by_product divides.
    common = common.float().masked_fill(lists < 0, 0.0) / size
    shared = torch.zeros(batch, n, n, device=near_idx.device, dtype=common.dtype)  # not the default dtype
    # Add, not assign: the missing neighbours all point at column 0 with a 0 (distinct real ones never collide).
    shared.scatter_add_(2, lists.clamp(min=0), common)
    return torch.maximum(shared, shared.transpose(1, 2))


def _shared_by_product(directed: torch.Tensor, size: int) -> torch.Tensor:
    """:func:`_shared_neighbours` of tie-including neighbourhoods (a set may then have more than ``size``).

    One ``n x n x n`` product, so only for sets with ties at a neighbourhood's edge; capped at 1.
    """
    adjacency = directed.float()
    common = torch.bmm(adjacency, adjacency.transpose(1, 2)) / size
    return common.clamp_(max=1.0) * (directed | directed.transpose(1, 2))


def _masked_median(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Median of ``values[b][mask[b]]`` per set ``(B,)``; 0 for an empty set."""
    filled = values.masked_fill(~mask, float("nan"))
    median = torch.nanmedian(filled, dim=1).values
    return torch.nan_to_num(median, nan=0.0)
