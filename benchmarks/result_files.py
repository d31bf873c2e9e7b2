"""Where a benchmark run writes its JSON: a partial run never replaces the committed full result.

A run of a subset (``--only``, ``--splits``, fewer seeds, a quick smoke test, absent optional data) measures
less than the file under ``benchmarks/results/`` that the docs quote: by default it writes beside it, to
``<name>_partial.json`` (git-ignored), and says so; ``--output`` names any other file.
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


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
    """
    RESULTS.mkdir(exist_ok=True)  # a checkout without it must not lose a finished run at the last write
    if output is not None:
        path = Path(output)
        return path if path.is_absolute() or path.parent != Path(".") else RESULTS / path
    if partial:
        partial_path = RESULTS / name.replace(".json", "_partial.json")
        print(f"a partial run: writing {partial_path.relative_to(RESULTS.parent.parent)}, not the committed {name} "
              "(pass --output to choose)", flush=True)
        return partial_path
    return RESULTS / name


def write_result(name: str, result: dict, partial: bool, output: str | None = None) -> Path:
    """Write ``result`` as indented JSON to :func:`output_path`'s file and say where; returns the path."""
    path = output_path(name, partial, output)
    path.parent.mkdir(parents=True, exist_ok=True)  # an --output in a folder not made yet
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    return path
