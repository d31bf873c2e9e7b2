"""Data generators and loaders."""

from .circles import make_circles_sets
from .omniglot import load_omniglot

__all__ = ["load_omniglot", "make_circles_sets"]
