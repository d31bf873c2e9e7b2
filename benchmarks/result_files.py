"""Where a benchmark run writes its JSON: a partial run never replaces the committed full result.

A run of a subset (``--only``, ``--splits``, fewer seeds, a quick smoke test, absent optional data) measures
less than the file under ``benchmarks/results/`` that the docs quote: by default it writes beside it, to
``<name>_partial.json`` (git-ignored), and says so, and leaves the pages and figures under ``docs/`` as they are;
``--output`` (:func:`add_output_argument`) names any other file, and leaves ``docs/`` as it is too (the pages quote
the committed files).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def add_output_argument(parser: argparse.ArgumentParser, *names: str) -> None:
    """Add the ``--output`` option every benchmark takes, for its committed result files ``names`` (one per mode)."""
    defaults = " or ".join(names)
    partials = " or ".join(name.replace(".json", "_partial.json") for name in names)
    parser.add_argument("--output", default=None, metavar="FILE",
                        help=f"the JSON file to write: a bare file name goes under benchmarks/results/, a path with "
                             f"a folder is used as it is (default: {defaults}, or {partials} for a partial run)")


def output_path(name: str, partial: bool, output: str | None = None) -> Path:
    """The JSON file a run writes.

    Parameters
    ----------
    name : str
        The committed result's file name (e.g. ``'count_k.json'``).
    partial : bool
        Whether this run measures less than the committed full run.
    output : str, optional
        A file name under ``benchmarks/results/`` (or a path) given by the user: always used.

    Returns
    -------
    path : Path
        Its folder exists: a finished run must not be lost at the last write to a folder not made yet.
    """
    RESULTS.mkdir(exist_ok=True)
    if output is not None:
        path = Path(output)
        path = path if path.is_absolute() or path.parent != Path(".") else RESULTS / path
        path.parent.mkdir(parents=True, exist_ok=True)
        return path
    if partial:
        partial_path = RESULTS / name.replace(".json", "_partial.json")
        print(f"a partial run: writing {partial_path.relative_to(RESULTS.parent.parent)}, not the committed {name} "
              "(pass --output to choose); docs/ left as it is", flush=True)
        return partial_path
    return RESULTS / name


def write_result(name: str, result: dict, partial: bool, output: str | None = None) -> Path:
    """Write ``result`` as indented JSON to :func:`output_path`'s file and say where; returns the path."""
    path = output_path(name, partial, output)
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    return path
