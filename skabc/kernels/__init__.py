"""Kernels: the sources of the affinity that ABCClustering clusters.

Every kernel follows :class:`~skabc.kernels.base.Kernel`; the learned ones are
:class:`ContextualKernel` and :class:`KernelEnsemble`, and
:class:`TransformerKernel` adapts any transformer that returns an affinity;
:class:`PairwiseKernel` and :class:`PrecomputedKernel` are scikit-learn's own
affinities (every non-learned ``ABCClustering(affinity=...)``).
"""

from .base import Kernel, TransformerKernel, as_kernel
from .contextual import ContextualKernel
from .ensemble import KernelEnsemble
from .pairwise import PairwiseKernel, PrecomputedKernel

__all__ = ["ContextualKernel", "Kernel", "KernelEnsemble", "PairwiseKernel", "PrecomputedKernel", "TransformerKernel",
           "as_kernel"]
