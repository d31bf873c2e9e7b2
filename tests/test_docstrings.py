"""The public API's docstrings say what it takes and returns (numpydoc): the estimators, their methods, the torch
modules of :mod:`skabc.nn`, and everything ``docs/api.rst`` shows."""

import inspect
import re
from pathlib import Path

import pytest

import skabc.nn as skabc_nn
from skabc import ABCClustering, ContextualKernel, KernelEnsemble
from skabc.kernels import PairwiseKernel, PrecomputedKernel
from skabc.preprocessing import SetCanonicalizer

validate = pytest.importorskip("numpydoc.validate").validate

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.rst"
#: Errors that make a docstring wrong rather than terse: a parameter undocumented (PR01), documented but not taken
#: (PR02), or listed out of order (PR03), a value returned without a Returns section (RT01), no docstring (GL08).
WRONG = {"PR01", "PR02", "PR03", "RT01", "GL08"}
#: The methods a scikit-learn user calls, where an estimator defines them itself.
API_METHODS = ("fit", "predict", "fit_predict", "transform", "fit_transform", "save", "load", "from_pretrained",
               "from_fitted", "predict_many", "affinity")
ESTIMATORS = (ABCClustering, ContextualKernel, KernelEnsemble, PairwiseKernel, PrecomputedKernel, SetCanonicalizer)
MODULES = tuple(getattr(skabc_nn, name) for name in skabc_nn.__all__ if inspect.isclass(getattr(skabc_nn, name)))


def _estimator_targets():
    for cls in ESTIMATORS + MODULES:
        yield f"{cls.__module__}.{cls.__qualname__}"
        for name in API_METHODS:
            owner = next((base for base in cls.__mro__ if name in vars(base)), None)
            if owner is not None and owner.__module__.startswith("skabc"):
                yield f"{owner.__module__}.{owner.__qualname__}.{name}"


def api_page_targets(text: str) -> list[str]:
    """Every ``autoclass`` / ``autofunction`` of an API page, and the members listed under a class."""
    module, targets = "skabc", []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if found := re.match(r"\.\. currentmodule:: (\S+)", line):
            module = found.group(1)
        elif found := re.match(r"\.\. auto(?:class|function):: (\S+)", line):
            name = found.group(1) if found.group(1).startswith("skabc.") else f"{module}.{found.group(1)}"
            targets.append(name)
            options = lines[index + 1] if index + 1 < len(lines) else ""
            if ":members:" in options:
                targets += [f"{name}.{member.strip()}" for member in options.split(":members:")[1].split(",")]
    return targets


def test_api_page_targets_are_read():
    # The page's own parser finds what it must: currentmodule prefixes and member lists.
    page = ".. currentmodule:: skabc.nn\n\n.. autoclass:: ABCNet\n   :members: forward, embed\n\n" \
           ".. autofunction:: skabc.spectral.compact\n"
    assert api_page_targets(page) == ["skabc.nn.ABCNet", "skabc.nn.ABCNet.forward", "skabc.nn.ABCNet.embed",
                                      "skabc.spectral.compact"]
    assert len(api_page_targets(API_PAGE.read_text())) > 80


@pytest.mark.parametrize("target", sorted(set(_estimator_targets()) | set(api_page_targets(API_PAGE.read_text()))))
def test_parameters_and_returns_are_documented(target):
    errors = [f"{code}: {message}" for code, message in validate(target)["errors"] if code in WRONG]
    assert not errors, errors


def _undocumented_defaults(target: str) -> list[str]:
    """The parameters of ``target`` with a signature default whose numpydoc type text does not state ``default=``."""
    from numpydoc.docscrape import NumpyDocString
    from numpydoc.validate import Validator

    obj = Validator._load_obj(target)
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):  # a property or an object without a signature takes nothing
        return []
    doc = NumpyDocString(inspect.getdoc(obj) or "")
    types = {name.strip().lstrip("*"): entry.type for section in ("Parameters", "Other Parameters")
             for entry in doc[section] for name in entry.name.split(",")}
    return [parameter.name for parameter in parameters
            if parameter.name not in ("self", "cls") and parameter.default is not parameter.empty
            and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
            and "default=" not in types.get(parameter.name, "")]


def test_parameter_defaults_are_documented():
    # Every parameter with a default says it in its type line (``default=...``), as scikit-learn's docstrings do; a
    # grouped line (``a, b : default=1, 2``) counts for each of its names.
    targets = sorted(set(_estimator_targets()) | set(api_page_targets(API_PAGE.read_text())))
    gaps = [f"{target}: {name}" for target in targets for name in _undocumented_defaults(target)]
    assert not gaps, f"{len(gaps)} parameters without default=: {gaps}"


def _documented_defaults(target: str) -> list[tuple[str, object, object]]:
    """``(name, signature default, documented default)`` for every ``default=`` of ``target``'s parameters.

    The documented text is read as Python in the namespace of the object's module (so ``SPECTRUM_SIZE`` or
    ``np.float32`` mean what the code means); a grouped line gives its values in order.
    """
    import sys

    import numpy as np
    from numpydoc.docscrape import NumpyDocString
    from numpydoc.validate import Validator

    obj = Validator._load_obj(target)
    try:
        parameters = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return []
    namespace = {"np": np, **vars(sys.modules[inspect.getmodule(obj).__name__])}
    doc = NumpyDocString(inspect.getdoc(obj) or "")
    found = []
    for entry in doc["Parameters"] + doc["Other Parameters"]:
        text = re.search(r"default=(.*)$", entry.type)
        if text is None:
            continue
        names = [name.strip().lstrip("*") for name in entry.name.split(",")]
        # Our own docstrings, read as the code they describe.
        values = eval(f"({text.group(1)},)", namespace)
        if len(names) == 1:
            values = values if len(values) == 1 else (values,)
        assert len(values) == len(names), f"{target}: {names} documents {len(values)} defaults"
        found += [(name, parameters[name].default, value) for name, value in zip(names, values, strict=True)
                  if name in parameters]
    return found


def _same_default(signature: object, documented: object) -> bool:
    if isinstance(signature, bool) or isinstance(documented, bool) or signature is None or documented is None:
        return signature is documented
    if isinstance(signature, (int, float)) and isinstance(documented, (int, float)):
        return signature == documented
    return type(signature) is type(documented) and signature == documented


def test_documented_defaults_are_the_signature_defaults():
    # ``default=`` is a promise: it must be the value the signature holds (a changed default with a stale docstring
    # misleads every reader of the API page).
    targets = sorted(set(_estimator_targets()) | set(api_page_targets(API_PAGE.read_text())))
    checked = [(target, *entry) for target in targets for entry in _documented_defaults(target)]
    wrong = [f"{target}: {name}: signature {actual!r}, documented {documented!r}"
             for target, name, actual, documented in checked if not _same_default(actual, documented)]
    assert len(checked) > 300 and not wrong, wrong


def test_same_default_tells_values_apart():
    assert _same_default(1e-3, 0.001) and _same_default(10, 10.0) and _same_default((10.0, 1e4), (10.0, 10000.0))
    assert not _same_default(False, 0) and not _same_default(None, 0) and not _same_default("auto", "kmeans")
    assert not _same_default(10, 3)
