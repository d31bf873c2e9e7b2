"""Data generators and loaders."""

from .blobs import make_blobs_set
from .chains import make_chains_set
from .circles import make_circles_sets
from .informative import make_informative_set
from .mixtures import make_subspace_set, make_warped_set
from .omniglot import load_omniglot, load_omniglot_sample
from .shapes import make_curves_set, make_moons_set, make_rings_set
from .synthetic import FAMILIES, FAMILY_WEIGHTS, make_clustering_sets
from .transforms import add_background_noise, add_outliers, discretize_columns, embed_in_dimensions

__all__ = [
    "FAMILIES",
    "FAMILY_WEIGHTS",
    "add_background_noise",
    "add_outliers",
    "discretize_columns",
    "embed_in_dimensions",
    "load_omniglot",
    "load_omniglot_sample",
    "make_blobs_set",
    "make_chains_set",
    "make_circles_sets",
    "make_clustering_sets",
    "make_curves_set",
    "make_informative_set",
    "make_moons_set",
    "make_rings_set",
    "make_subspace_set",
    "make_warped_set",
]
