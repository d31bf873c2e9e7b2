"""skabc: Attention-Based Clustering (a kernel learned from context) for scikit-learn."""

from .cluster import ABCClustering
from .kernels import ContextualKernel, KernelEnsemble

__version__ = "0.1.0"

__all__ = ["ABCClustering", "ContextualKernel", "KernelEnsemble", "__version__"]
