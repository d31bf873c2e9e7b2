"""Training sets drawn from labelled rows (ABC paper, Appendix B, Algorithm 1).

Each training set ("input instance") is drawn within one group: pick a size
``L``, a number of clusters ``k`` that can fill it, ``k`` distinct classes, a
size ``1 <= n_i <= |class i|`` per class summing to ``L``, and ``n_i`` rows of
each class without replacement.  Rows labelled ``-1`` are never drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import numpy as np
import torch
from torch.utils.data import Dataset

from ._threads import single_native_thread
from ._typing import Int


def _as_plain(value):
    """A numpy array as the int (0-d) or tuple (1-D) it holds, as the parameter constraints ("array-like") allow."""
    if isinstance(value, np.ndarray) and value.ndim <= 1:
        return value.item() if value.ndim == 0 else tuple(value.tolist())
    return value


#: Largest set size (and number of clusters per set): the largest count a saved kernel holds.
MAX_SET_SIZE = 1 << 31


def check_set_size(set_size) -> tuple[int, int]:
    """Validate ``set_size`` (an int or a ``(min, max)`` pair) into ``(min, max)``."""
    set_size = _as_plain(set_size)
    if isinstance(set_size, Integral) and not isinstance(set_size, bool):
        low = high = int(set_size)
    elif (
        isinstance(set_size, (tuple, list))
        and len(set_size) == 2
        and all(isinstance(v, Integral) and not isinstance(v, bool) for v in set_size)
    ):
        low, high = int(set_size[0]), int(set_size[1])
    else:
        raise ValueError(f"set_size must be an int or a (min, max) pair of ints, got {set_size!r}")
    if low < 2 or high < low or high > MAX_SET_SIZE:  # larger trained, then failed to save (probe 67c)
        raise ValueError(f"set_size must satisfy 2 <= min <= max <= {MAX_SET_SIZE}, got {set_size!r}")
    return low, high


def check_clusters_per_set(clusters_per_set) -> tuple[int, int] | None:
    """Validate ``clusters_per_set`` (None, an int or a ``(min, max)`` pair)."""
    if clusters_per_set is None:
        return None
    clusters_per_set = _as_plain(clusters_per_set)
    if isinstance(clusters_per_set, Integral) and not isinstance(clusters_per_set, bool):
        low = high = int(clusters_per_set)
    elif (
        isinstance(clusters_per_set, (tuple, list))
        and len(clusters_per_set) == 2
        and all(isinstance(v, Integral) and not isinstance(v, bool) for v in clusters_per_set)
    ):
        low, high = (int(v) for v in clusters_per_set)
    else:
        raise ValueError(f"clusters_per_set must be None, an int or a (min, max) pair, got {clusters_per_set!r}")
    if low < 1 or high < low or high > MAX_SET_SIZE:
        raise ValueError(f"clusters_per_set must satisfy 1 <= min <= max <= {MAX_SET_SIZE}, got {clusters_per_set!r}")
    return low, high


class ClusterSetSampler:
    """Draw labelled training sets from rows, optionally within groups.

    Parameters
    ----------
    labels : ndarray of int, shape (n_rows,)
        Class codes ``>= 0``; ``-1`` marks unlabelled rows, which are never drawn.
    groups : ndarray of int, shape (n_rows,), optional
        Group codes; every drawn set lies within one group.
    set_size : int or (int, int)
        Size of a drawn set, or the range it is drawn from uniformly.
    clusters_per_set : int or (int, int), optional
        Range of the number of clusters per set.  By default ``k`` is drawn
        uniformly over every value that can fill the set (Algorithm 1).

    Raises
    ------
    ValueError
        If no group holds at least two labelled rows.
    """

    def __init__(self, labels, groups=None, set_size: Int | Sequence[Int] | np.ndarray = (50, 200),
                 clusters_per_set: Int | Sequence[Int] | None = None) -> None:
        self.set_size = check_set_size(set_size)
        self.clusters_per_set = check_clusters_per_set(clusters_per_set)
        labels = np.asarray(labels)
        groups = np.zeros(len(labels), dtype=np.int64) if groups is None else np.asarray(groups)
        # Codes as encode_labels / encode_groups give them: string labels compared with 0 as a numpy error.
        if labels.ndim != 1 or labels.dtype.kind not in "iu":
            raise ValueError(f"labels must be a 1-D array of integer class codes (-1: unlabelled), got dtype "
                             f"{labels.dtype} and shape {labels.shape}; encode them first (np.unique(..., "
                             "return_inverse=True))")
        if groups.shape != labels.shape:
            raise ValueError(f"groups must hold one code per label ({len(labels)}), got shape {groups.shape}")
        labelled = labels >= 0
        self.groups: list[list[np.ndarray]] = []
        for g in np.unique(groups[labelled]):
            rows = np.flatnonzero(labelled & (groups == g))
            if len(rows) < 2:
                continue
            order = np.argsort(labels[rows], kind="stable")
            rows = rows[order]
            _, starts = np.unique(labels[rows], return_index=True)
            self.groups.append(np.split(rows, starts[1:]))
        if not self.groups:
            raise ValueError(
                "Cannot draw training sets: no group holds at least 2 labelled rows (labels >= 0)."
            )
        sizes = np.array([sum(len(c) for c in g) for g in self.groups], dtype=float)
        # Groups are drawn in proportion to their labelled rows: every row is equally likely.
        self.group_weights = sizes / sizes.sum()
        #: The most points one drawn set holds: a set is drawn within one group's labelled rows.
        self.largest_set = int(min(self.set_size[1], sizes.max()))

    def draw_set_size(self, rng: np.random.Generator) -> int:
        """Draw a set size uniformly from the ``set_size`` range."""
        low, high = self.set_size
        return int(rng.integers(low, high + 1))

    def draw(self, rng: np.random.Generator, set_size: Int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Draw one set: row indices and cluster labels ``0..k-1`` (shuffled together)."""
        size = self.draw_set_size(rng) if set_size is None else int(set_size)
        classes = self.groups[rng.choice(len(self.groups), p=self.group_weights)]
        class_sizes = np.array([len(c) for c in classes])
        size = min(size, int(class_sizes.sum()))
        k = self._draw_n_clusters(rng, class_sizes, size)
        chosen = self._choose_classes(rng, class_sizes, k, size)
        size = min(size, int(class_sizes[chosen].sum()))
        counts = self._split_counts(rng, class_sizes[chosen], size)
        rows = np.concatenate([rng.choice(classes[c], n, replace=False) for c, n in zip(chosen, counts, strict=True)])
        labels = np.repeat(np.arange(k), counts)
        order = rng.permutation(size)
        return rows[order], labels[order]

    def _draw_n_clusters(self, rng, class_sizes: np.ndarray, size: int) -> int:
        n_classes = len(class_sizes)
        filled = np.cumsum(np.sort(class_sizes)[::-1])
        k_low = int(np.searchsorted(filled, size) + 1)  # fewest classes that can fill the set
        k_high = min(n_classes, size)
        if self.clusters_per_set is not None:
            want_low, want_high = self.clusters_per_set
            if want_high < k_low:  # asked for fewer clusters than can fill the set: smaller set
                return max(1, min(want_high, n_classes))
            k_low, k_high = max(k_low, want_low), min(k_high, want_high)
            if k_low > k_high:  # asked for more clusters than the group has
                return min(n_classes, size)
        return int(rng.integers(k_low, k_high + 1))

    @staticmethod
    def _choose_classes(rng, class_sizes: np.ndarray, k: int, size: int) -> np.ndarray:
        order = rng.permutation(len(class_sizes))
        chosen, rest = list(order[:k]), list(order[k:])
        if class_sizes[chosen].sum() < size and rest:
            # Swap the smallest chosen classes for the largest others until the set fits.
            chosen.sort(key=lambda c: class_sizes[c])
            rest.sort(key=lambda c: -class_sizes[c])
            for i, candidate in enumerate(rest[: len(chosen)]):
                if class_sizes[chosen].sum() >= size or class_sizes[candidate] <= class_sizes[chosen[i]]:
                    break
                chosen[i] = candidate
        return np.array(chosen)

    @staticmethod
    def _split_counts(rng, capacity: np.ndarray, size: int) -> np.ndarray:
        counts = np.ones(len(capacity), dtype=np.int64)
        remaining = size - len(capacity)
        while remaining > 0:
            open_ = counts < capacity
            extra = np.zeros_like(counts)
            extra[open_] = rng.multinomial(remaining, np.full(open_.sum(), 1.0 / open_.sum()))
            new = np.minimum(counts + extra, capacity)
            remaining -= int((new - counts).sum())
            counts = new
        return counts


class SampledSetsDataset(Dataset):
    """A virtual dataset of ``n_sets`` training sets, redrawn every epoch.

    Set ``i`` of epoch ``e`` depends only on ``(seed, e, i)``, so training is
    reproducible whatever the loader does.  Consecutive blocks of
    ``batch_size`` sets share one drawn size, which keeps padding small.
    ``set_transform``, when given, maps each drawn set (as a whole) before
    it is batched, e.g. to canonical coordinates.
    """

    def __init__(
        self, X: np.ndarray, sampler: ClusterSetSampler, n_sets: Int, batch_size: Int, seed: Int, set_transform=None
    ) -> None:
        self.X = X
        self.set_transform = set_transform
        self.sampler = sampler
        self.n_sets = int(n_sets)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.epoch = 0

    def __len__(self) -> int:
        return self.n_sets

    def __getitem__(self, i: int):
        size_rng = np.random.default_rng([self.seed, self.epoch, i // self.batch_size, 0])
        rng = np.random.default_rng([self.seed, self.epoch, i, 1])
        rows, labels = self.sampler.draw(rng, self.sampler.draw_set_size(size_rng))
        points = self.X[rows]
        if self.set_transform is None:
            return points, labels
        with single_native_thread():  # one set of a few hundred rows (an SVD): too small to split
            return self.set_transform(points), labels


def pad_sets(sets: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack sets of different sizes into a zero-padded batch and its key mask."""
    n_max = max(len(s) for s in sets)
    batch = torch.zeros((len(sets), n_max, *sets[0].shape[1:]), dtype=torch.float32)
    mask = torch.zeros((len(sets), n_max), dtype=torch.bool)
    for b, s in enumerate(sets):
        batch[b, : len(s)] = torch.as_tensor(s, dtype=torch.float32)
        mask[b, : len(s)] = True
    return batch, mask


def collate_sets(items):
    """Collate ``(points, labels)`` pairs into ``({'X', 'mask'}, labels)``; padding labelled -1."""
    sets, labels = zip(*items, strict=True)
    X, mask = pad_sets(list(sets))
    y = torch.full(mask.shape, -1, dtype=torch.long)
    for b, lab in enumerate(labels):
        y[b, : len(lab)] = torch.as_tensor(lab, dtype=torch.long)
    return {"X": X, "mask": mask}, y
