"""The documentation builds without warnings and the gallery renders its figures; the docstrings' examples run.

The build needs the ``docs`` extra (sphinx, numpydoc, sphinx-gallery, myst-parser, matplotlib) and is
skipped without it; select it alone with ``-k test_docs_build``.  The examples need the package only, so they
run under ``make test-min`` too (numpy 1.x prints some values otherwise).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
EXAMPLES = sorted(p.stem for p in (DOCS / "examples").glob("plot_*.py"))


def test_docs_build(tmp_path):
    for module in ("sphinx", "numpydoc", "sphinx_gallery", "myst_parser", "matplotlib"):
        pytest.importorskip(module)
    assert EXAMPLES, "no gallery examples found"
    out = tmp_path / "html"
    doctrees = tmp_path / "doctrees"
    started = time.time() - 1
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-b", "html",
         "-d", str(doctrees), str(DOCS), str(out)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "SKABC_DOCS_RERUN_EXAMPLES": "1", "SKABC_DOCS_JOBS": "2", "MPLBACKEND": "Agg"},
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    for page in ("index", "api", "guide", "circles_results", "backends_results", "auto_examples/index"):
        assert (out / f"{page}.html").is_file(), page
    for name in EXAMPLES:
        assert (out / "auto_examples" / f"{name}.html").is_file(), name
        # sphinx-gallery writes the figures next to the generated sources (docs/auto_examples).
        figure = DOCS / "auto_examples" / "images" / f"sphx_glr_{name}_001.png"
        assert figure.is_file(), name
        assert figure.stat().st_mtime >= started, f"{name} was not run again"
        assert (out / "_images" / f"sphx_glr_{name}_001.png").is_file(), name


def _modules_with_examples() -> list[str]:
    """Every module of the package whose docstrings hold an interactive example."""
    import importlib.util
    import pkgutil

    import skabc

    names = ["skabc"] + [module.name for module in pkgutil.walk_packages(skabc.__path__, "skabc.")]
    return [name for name in names
            if ">>>" in Path(importlib.util.find_spec(name).origin).read_text(encoding="utf-8")]


EXAMPLE_MODULES = _modules_with_examples()


def test_modules_with_examples_are_found():
    assert {"skabc.cluster", "skabc.kernels.contextual", "skabc.datasets.transforms"} <= set(EXAMPLE_MODULES)


@pytest.mark.parametrize("name", EXAMPLE_MODULES)
def test_docstring_examples_run_as_written(name):
    # The Examples sections are what users copy first: each runs and prints what it shows.
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0, result
