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
            dotted = _dotted(node.value)
            if dotted in modules:
                references.append((modules[dotted], node.attr))
    return references


def _is_submodule(package: str, name: str) -> bool:
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
        target = importlib.import_module(module)
        if not hasattr(target, name) and importlib.util.find_spec(f"{module}.{name}") is None:
            missing.append(f"{module}.{name}")
    assert not missing, f"{path.name} names what skabc does not have: {missing}"


def test_a_moved_name_is_caught():
    """The check itself: a private helper read through a module alias, and one imported by name."""
    script = "import skabc.sparse_affinity as sa\nfrom skabc.spectral import knn\nsa._ivf_topk\nknn.no_such_helper\n"
    references = _skabc_references(ast.parse(script))
    assert ("skabc.sparse_affinity", "_ivf_topk") in references
    assert ("skabc.spectral.knn", "no_such_helper") in references
    assert not hasattr(importlib.import_module("skabc.spectral.knn"), "no_such_helper")
