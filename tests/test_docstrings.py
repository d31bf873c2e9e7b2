"""The parameter sections of the public estimators and modules say what their signatures take (numpydoc)."""

import inspect

import pytest

import skabc.nn as skabc_nn
from skabc import ABCClustering, ContextualKernel, KernelEnsemble
from skabc.kernels import PairwiseKernel, PrecomputedKernel
from skabc.preprocessing import SetCanonicalizer

validate = pytest.importorskip("numpydoc.validate").validate

#: Errors that make a docstring wrong rather than terse: a parameter undocumented (PR01), documented but not taken
#: (PR02), or listed out of order (PR03).
WRONG = {"PR01", "PR02", "PR03"}
#: The methods a scikit-learn user calls, where an estimator defines them itself.
API_METHODS = ("fit", "predict", "fit_predict", "transform", "fit_transform", "save", "load", "from_pretrained",
               "from_fitted", "predict_many", "affinity")
ESTIMATORS = (ABCClustering, ContextualKernel, KernelEnsemble, PairwiseKernel, PrecomputedKernel, SetCanonicalizer)
MODULES = tuple(getattr(skabc_nn, name) for name in skabc_nn.__all__ if inspect.isclass(getattr(skabc_nn, name)))


def _targets():
    for cls in ESTIMATORS + MODULES:
        yield f"{cls.__module__}.{cls.__qualname__}"
        for name in API_METHODS:
            owner = next((base for base in cls.__mro__ if name in vars(base)), None)
            if owner is not None and owner.__module__.startswith("skabc"):
                yield f"{owner.__module__}.{owner.__qualname__}.{name}"


@pytest.mark.parametrize("target", sorted(set(_targets())))
def test_parameters_are_documented_as_taken(target):
    errors = [f"{code}: {message}" for code, message in validate(target)["errors"] if code in WRONG]
    assert not errors, errors
