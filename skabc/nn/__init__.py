"""Torch building blocks of ABC: attention blocks, backends, heads, embedders, loss."""

from .backends import ATTENTION_BACKENDS, BACKEND_OPTIONS, resolve_backend
from .blocks import MultiheadAttentionBlock, SetAttentionBlock
from .embedders import EMBEDDERS, Conv4Embedder, FourierEmbedder, MLPEmbedder, conv4_backbone
from .heads import COMPAT_FUNCTIONS, SimilarityHead
from .induced import InducedSetAttentionBlock
from .loss import SameClusterBCELoss, same_cluster_matrix
from .model import ABCNet
from .outer import OuterProductAttentionBlock, outer_product_attention
from .sampled import SampledAttentionBlock, sample_windows

__all__ = [
    "ATTENTION_BACKENDS",
    "BACKEND_OPTIONS",
    "COMPAT_FUNCTIONS",
    "EMBEDDERS",
    "ABCNet",
    "Conv4Embedder",
    "FourierEmbedder",
    "InducedSetAttentionBlock",
    "MLPEmbedder",
    "MultiheadAttentionBlock",
    "OuterProductAttentionBlock",
    "SameClusterBCELoss",
    "SampledAttentionBlock",
    "SetAttentionBlock",
    "SimilarityHead",
    "conv4_backbone",
    "outer_product_attention",
    "resolve_backend",
    "same_cluster_matrix",
    "sample_windows",
]
