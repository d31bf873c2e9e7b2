"""Kernels shipped with the package, loaded offline from safetensors files (never pickle)."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

from ..kernels import ContextualKernel, KernelEnsemble

PRETRAINED_DIR = Path(__file__).resolve().parent

AVAILABLE = {
    "generic": "generic.safetensors",
    "omniglot": "omniglot.safetensors",
    "circles": "circles_multiplicative.safetensors",
    "circles-additive": "circles_additive.safetensors",
    "circles-pairwise": "circles_pairwise.safetensors",
}

#: ABCClustering settings chosen for each kernel on its own validation data
#: (see benchmarks/zero_shot.py --select and benchmarks/omniglot.py --select).
RECOMMENDED_CLUSTERING: dict[str, dict] = {
    # benchmarks/results/omniglot_select.json (300 sets of 3 validation alphabets, the 3-kernel ensemble),
    # NMI with k unknown: 0.916 with these settings; 0.910 with the plain eigengap (and 'njw') on A**4.
    "omniglot": {"affinity_power": 4.0, "assign_labels": "njw", "n_clusters_selection": "likelihood"},
    # benchmarks/results/zero_shot_select.json (150 synthetic validation sets, phase-10 weights): ARI 0.669
    # with A**8, 'njw' and the consensus estimate of k, against 0.656 with the plain eigengap (paired
    # +0.013 +- 0.006), 0.650 with A**16 (consensus) and 0.645 with A**4 (eigengap); 'njw' was ahead of
    # 'kmeans' at every power.
    "generic": {"affinity_power": 8.0, "assign_labels": "njw", "n_clusters_selection": "consensus"},
}



def load(name: str, device: str = "auto") -> ContextualKernel | KernelEnsemble:
    """Load a shipped, fitted :class:`~skabc.ContextualKernel` by name.

    Parameters
    ----------
    name : str
        One of :data:`AVAILABLE`:

        * ``'generic'``: the default kernel of :class:`~skabc.ABCClustering`,
          trained on synthetic clustering problems of 1 to 64 features
          (blobs, rings, moons, curves, varied densities, noise); it takes
          tabular sets of any width (``canonical_features=16``).
        * ``'omniglot'``: handwritten characters, 28 x 28 images given as
          rows of 784 pixels in [0, 1] with ink = 1 (as returned by
          :func:`skabc.datasets.load_omniglot`).
        * ``'circles'``, ``'circles-additive'``, ``'circles-pairwise'``:
          the overlapping-circles problem (the last is the no-context
          ablation).
    device : str
        Torch device, ``'auto'`` for CUDA when available.

    Returns
    -------
    kernel : ContextualKernel or KernelEnsemble
        A fitted kernel (a fresh object on every call); ``'omniglot'`` is a
        :class:`~skabc.KernelEnsemble` of three set encoders on one CNN.
    """
    if name not in AVAILABLE:
        raise ValueError(f"unknown pretrained kernel {name!r}; available: {sorted(AVAILABLE)}")
    # Read once per process and device; every caller gets its own copy to fine-tune or modify.
    return copy.deepcopy(_load_once(name, device))


@cache
def _load_once(name: str, device: str) -> ContextualKernel | KernelEnsemble:
    path = PRETRAINED_DIR / AVAILABLE[name]
    if not path.exists():
        raise FileNotFoundError(f"the weights of {name!r} are missing from the installation ({path})")
    return load_saved_kernel(path, device=device)


def load_saved_kernel(path, device: str = "auto") -> ContextualKernel | KernelEnsemble:
    """Load a kernel saved by :meth:`ContextualKernel.save` or :meth:`KernelEnsemble.save`, whichever it is.

    Parameters
    ----------
    path : str or path
    device : str
        Torch device, ``'auto'`` for CUDA when available.

    Returns
    -------
    kernel : ContextualKernel or KernelEnsemble
    """
    from .._persistence import read_description

    if read_description(path)["class"] == KernelEnsemble.__name__:
        return KernelEnsemble.load(path, device=device)
    return ContextualKernel.load(path, device=device)


def load_clustering(name: str, device: str = "auto", **params):
    """A ready :class:`~skabc.ABCClustering` around the shipped kernel ``name``.

    The kernel is wrapped in :class:`sklearn.frozen.FrozenEstimator`, so
    ``fit`` / ``fit_predict`` cluster new sets without training (even when
    given labels) and ``clone`` keeps it fitted.  Settings recommended for the
    kernel (:data:`RECOMMENDED_CLUSTERING`) are applied first; ``params``
    override them.

    Examples
    --------
    >>> from skabc.pretrained import load_clustering
    >>> model = load_clustering("circles", random_state=0)
    >>> type(model).__name__
    'ABCClustering'
    """
    from sklearn.frozen import FrozenEstimator

    from ..cluster import ABCClustering

    settings = {**RECOMMENDED_CLUSTERING.get(name, {}), **params}
    return ABCClustering(kernel=FrozenEstimator(load(name, device=device)), **settings)


__all__ = ["AVAILABLE", "PRETRAINED_DIR", "RECOMMENDED_CLUSTERING", "load", "load_clustering", "load_saved_kernel"]
