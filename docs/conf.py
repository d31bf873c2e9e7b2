"""Sphinx configuration of the skabc documentation (builds offline)."""

import os
import sys

import matplotlib
import sphinx_gallery
from packaging.version import Version

matplotlib.use("Agg")

sys.path.insert(0, os.path.abspath(".."))

import skabc

project = "skabc"
author = "skabc developers"
copyright = "skabc developers"
version = skabc.__version__
release = skabc.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip", "auto_examples/*.md5",
                    "auto_examples/*.pickle"]

# API pages: no stub generation, no intersphinx (everything builds offline).
autosummary_generate = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
numpydoc_xref_param_type = False

# MyST: the existing Markdown pages link to each other by file name.
myst_heading_anchors = 3

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "show_memory": False,
    "within_subsection_order": "FileNameSortKey",
    # Examples run again only when their source changed, unless this is set (tests/test_docs.py).
    "run_stale_examples": os.environ.get("SKABC_DOCS_RERUN_EXAMPLES") == "1",
}
# Examples run in this many processes where sphinx-gallery can (0.17 and later; older ones refuse the key).
if Version(sphinx_gallery.__version__) >= Version("0.17"):
    sphinx_gallery_conf["parallel"] = int(os.environ.get("SKABC_DOCS_JOBS", "1"))

html_theme = "alabaster"
html_title = f"skabc {version}"
html_static_path = []
