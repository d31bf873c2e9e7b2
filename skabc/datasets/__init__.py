"""Data generators and loaders."""

from .circles import make_circles_sets

__all__ = ["make_circles_sets"]
