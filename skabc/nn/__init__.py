"""Torch building blocks of ABC: attention blocks, backends, heads, embedders, loss."""

from .backends import ATTENTION_BACKENDS, resolve_backend
from .blocks import MultiheadAttentionBlock, SetAttentionBlock
from .embedders import MLPEmbedder
from .heads import COMPAT_FUNCTIONS, SimilarityHead
from .loss import SameClusterBCELoss, same_cluster_matrix
from .model import ABCNet

__all__ = [
    "ATTENTION_BACKENDS",
    "COMPAT_FUNCTIONS",
    "ABCNet",
    "MLPEmbedder",
    "MultiheadAttentionBlock",
    "SameClusterBCELoss",
    "SetAttentionBlock",
    "SimilarityHead",
    "resolve_backend",
    "same_cluster_matrix",
]
