"""The documentation builds without warnings and the gallery renders its figures.

Needs the ``docs`` extra (sphinx, numpydoc, sphinx-gallery, myst-parser, matplotlib); skipped
without it.  Select it alone with ``pytest tests/test_docs.py`` or ``-k test_docs_build``.
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
        env={**os.environ, "SKABC_DOCS_RERUN_EXAMPLES": "1", "MPLBACKEND": "Agg"},
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
