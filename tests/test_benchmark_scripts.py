"""The benchmark scripts still name what the package has.

They reach into the package (often its private helpers) and are run by hand, rarely; a name moved or
renamed in ``skabc`` would break one silently until someone reproduces a published number.  Every
``from skabc... import name`` in them must resolve, and every ``alias.attribute`` read through a module
they import from ``skabc`` must exist.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def _skabc_references(tree: ast.AST) -> list[tuple[str, str]]:
    """``(module, name)`` for every name a script takes from a skabc module, directly or as ``alias.name``."""
    modules: dict[str, str] = {}  # local alias -> skabc module it stands for
    references = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "skabc":
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "skabc":
            for alias in node.names:
                references.append((node.module, alias.name))
                if _is_submodule(node.module, alias.name):  # from skabc.spectral import knn: knn.helper is read
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            head, _, tail = (_dotted(node.value) or "").partition(".")
            if head in modules:  # skabc.sparse_affinity._x through 'import skabc' too
                module = ".".join([modules[head], *([tail] if tail else [])])
                if _is_module(module):  # not skabc.ABCClustering.fit: a class's attributes are its own
                    references.append((module, node.attr))
    return references


def _is_module(name: str) -> bool:
    parent, _, last = name.rpartition(".")
    return not parent or _is_submodule(parent, last)


def _is_submodule(package: str, name: str) -> bool:
    if not _is_module(package):
        return False
    # find_spec of a name under a plain module raises ModuleNotFoundError: only a package holds submodules.
    is_package = hasattr(importlib.import_module(package), "__path__")
    return is_package and importlib.util.find_spec(f"{package}.{name}") is not None


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names, None for anything else (a call, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def test_the_benchmark_scripts_are_found():
    assert len(SCRIPTS) >= 30 and BENCHMARKS / "zero_shot.py" in SCRIPTS


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_script_names_exist_in_the_package(path):
    missing = []
    for module, name in _skabc_references(ast.parse(path.read_text())):
        if not hasattr(importlib.import_module(module), name) and not _is_submodule(module, name):
            missing.append(f"{module}.{name}")
    assert not missing, f"{path.name} names what skabc does not have: {missing}"


def test_a_moved_name_is_caught(tmp_path):
    """The check itself, on a script that reads helpers through a module alias, a module imported by name and
    a chain from 'import skabc': every missing one is listed (review 63: the first raised ModuleNotFoundError)."""
    script = ("import skabc\nimport skabc.sparse_affinity as sa\nfrom skabc.spectral import knn\n"
              "sa._ivf_topk\nsa._gone\nknn.no_such_helper\nskabc.sparse_affinity._also_gone\n"
              "skabc.ABCClustering.fit\n")
    references = _skabc_references(ast.parse(script))
    assert {("skabc.sparse_affinity", "_ivf_topk"), ("skabc.spectral.knn", "no_such_helper"),
            ("skabc.sparse_affinity", "_also_gone")} <= set(references)
    assert ("skabc.ABCClustering", "fit") not in references
    (tmp_path / "old_script.py").write_text(script)
    with pytest.raises(AssertionError) as failure:
        test_benchmark_script_names_exist_in_the_package(tmp_path / "old_script.py")
    assert all(name in str(failure.value) for name in ("sparse_affinity._gone", "knn.no_such_helper",
                                                       "sparse_affinity._also_gone"))
    assert "_ivf_topk" not in str(failure.value)


def _calls(tree: ast.AST, name: str) -> bool:
    return any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == name for node in ast.walk(tree))


# The scripts that write their JSON through benchmarks/result_files.py (a partial run goes to <name>_partial.json).
WRITERS = [path for path in SCRIPTS if path.name != "result_files.py"
           and any(_calls(ast.parse(path.read_text()), name) for name in ("output_path", "write_result"))]


def test_the_scripts_writing_through_result_files_are_found():
    assert len(WRITERS) >= 15 and BENCHMARKS / "zero_shot.py" in WRITERS


@pytest.mark.parametrize("path", WRITERS, ids=lambda p: p.name)
def test_a_script_that_may_write_a_partial_result_takes_output(path):
    """Probe 67b: a partial run prints "(pass --output to choose)", and count_k.py and dask_scaling.py refused
    --output as an unrecognized argument."""
    tree = ast.parse(path.read_text())
    takes_output = _calls(tree, "add_output_argument") or any(
        isinstance(node, ast.Constant) and node.value == "--output" for node in ast.walk(tree))
    assert takes_output, f"{path.name} writes through result_files but has no --output option"
