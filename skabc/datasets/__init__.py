"""Data generators and loaders."""

from .circles import make_circles_sets
from .omniglot import load_omniglot, load_omniglot_sample
from .synthetic import (
    FAMILIES,
    FAMILY_WEIGHTS,
    add_background_noise,
    embed_in_dimensions,
    make_blobs_set,
    make_clustering_sets,
    make_curves_set,
    make_moons_set,
    make_rings_set,
)

__all__ = [
    "FAMILIES",
    "FAMILY_WEIGHTS",
    "add_background_noise",
    "embed_in_dimensions",
    "load_omniglot",
    "load_omniglot_sample",
    "make_blobs_set",
    "make_circles_sets",
    "make_clustering_sets",
    "make_curves_set",
    "make_moons_set",
    "make_rings_set",
]
