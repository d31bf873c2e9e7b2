"""Structure the package promises: no import cycle inside skabc, small modules, tests import the package only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "skabc"
TESTS = Path(__file__).resolve().parent
MAX_LINES = 470  # "about 450": cluster.py is 461, most of it the numpydoc of 13 parameters


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path, modules: set[str]) -> set[str]:
    """skabc modules imported when ``path`` is imported (not inside functions or TYPE_CHECKING blocks)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                if candidate in modules:
                    found.add(candidate)
                elif base in modules:
                    found.add(base)
    return found - {name}


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _top_level_imports(path, set(files)) for name, path in files.items()}


def test_no_import_cycle_inside_the_package():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt):], nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    # The graph is real: the estimator module imports the kernels and the spectral step.
    assert {"skabc.kernels", "skabc.spectral"} <= graph["skabc.cluster"]


def test_pretrained_depends_on_kernels_only():
    graph = _graph()
    assert "skabc.cluster" not in graph["skabc.pretrained"]
    assert "skabc.kernels" in graph["skabc.pretrained"]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_unit_tests_do_not_import_benchmark_scripts_or_their_results():
    for path in TESTS.glob("test_*.py"):
        if path.name == Path(__file__).name:
            continue
        text = path.read_text()
        assert "spec_from_file_location" not in text, path.name
        assert "benchmarks/results" not in text and '"results"' not in text, path.name


def test_exception_notes_go_through_the_python_3_10_safe_helper():
    """setup.cfg admits Python 3.10, whose exceptions have no ``add_note``: a direct call there raised an
    AttributeError in place of the error it annotated (probe 57a, predict_many's refused set)."""
    direct = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "add_note" and path.name == "_validation.py":
                continue
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_note"
                    and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "error"
                             and path.name == "_validation.py")):
                direct.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert direct == []


def test_the_note_helper_leaves_an_exception_without_notes_as_it_is():
    from skabc._validation import add_note

    class Python310Error:  # no add_note, as every exception on Python 3.10
        pass

    error = Python310Error()
    add_note(error, "a note")  # no AttributeError
    assert vars(error) == {}
    modern = ValueError("x")
    add_note(modern, "a note")
    assert modern.__notes__ == ["a note"]
