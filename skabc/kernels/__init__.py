"""Kernels: the sources of the affinity that ABCClustering clusters.

Every kernel follows :class:`~skabc.kernels.base.Kernel`; the learned ones are
:class:`ContextualKernel` and :class:`KernelEnsemble`, and
:class:`TransformerKernel` adapts any transformer that returns an affinity.
"""

from .base import Kernel, TransformerKernel, as_kernel
from .contextual import ContextualKernel
from .ensemble import KernelEnsemble

__all__ = ["ContextualKernel", "Kernel", "KernelEnsemble", "TransformerKernel", "as_kernel"]
