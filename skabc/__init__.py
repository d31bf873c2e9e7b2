"""skabc: Attention-Based Clustering (a kernel learned from context) for scikit-learn."""

from .cluster import ABCClustering
from .kernel import ContextualKernel

__version__ = "0.1.0"

__all__ = ["ABCClustering", "ContextualKernel", "__version__"]
