"""The public type hints say what the code accepts (skabc ships ``py.typed``: mypy and pyright trust them).

Pyright infers the type of an unannotated parameter from its default in a typed package (``coef0=1`` reads as
``coef0: int``, ``max_epochs='auto'`` as ``str``), so every parameter with a default other than ``None`` is annotated;
the classes ``@persistent`` decorates keep their own type; ``outputs_probabilities`` is a read-only property that a
kernel of one's own overrides as KernelEnsemble does.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import typing

import pytest

from skabc import ABCClustering, ContextualKernel, KernelEnsemble, persistence
from skabc.kernels import Kernel, PairwiseKernel, PrecomputedKernel, TransformerKernel
from skabc.preprocessing import SetCanonicalizer

#: Every public estimator and kernel class a user constructs.
PUBLIC_CLASSES = [ABCClustering, ContextualKernel, KernelEnsemble, PairwiseKernel, PrecomputedKernel,
                  TransformerKernel, SetCanonicalizer]

#: The modules whose public functions and methods must annotate every parameter with a non-None default.
ANNOTATED_MODULES = [
    "skabc.cluster", "skabc._clustering_io", "skabc.persistence", "skabc.pretrained", "skabc.plotting",
    "skabc.preprocessing", "skabc.sampling", "skabc.kernels.base", "skabc.kernels.contextual",
    "skabc.kernels.ensemble", "skabc.kernels.pairwise", "skabc.spectral.eigen", "skabc.spectral.select",
    "skabc.spectral.assign", "skabc.spectral.step", "skabc.datasets.synthetic", "skabc.datasets.shapes",
    "skabc.training.net", "skabc.training.callbacks", "skabc.training.early_stopping",
]


def _unannotated(parameters, where: str, *, with_default_only: bool) -> list[str]:
    found = []
    for p in parameters:
        if p.name in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if with_default_only and (p.default is p.empty or p.default is None):
            continue
        if p.annotation is p.empty:
            found.append(f"{where}({p.name}={p.default!r})" if p.default is not p.empty else f"{where}({p.name})")
    return found


@pytest.mark.parametrize("cls", PUBLIC_CLASSES, ids=lambda c: c.__name__)
def test_every_init_parameter_is_annotated(cls):
    assert _unannotated(inspect.signature(cls).parameters.values(), cls.__name__, with_default_only=False) == []


def _public_functions(module_name: str):
    module = importlib.import_module(module_name)
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module_name:
            continue
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
                if inspect.isfunction(function):
                    yield f"{name}.{attr}", function


def test_parameters_with_a_default_are_annotated():
    missing = []
    for module_name in ANNOTATED_MODULES:
        functions = list(_public_functions(module_name))
        assert functions, f"{module_name} defines no public function: the list of modules is stale"
        missing += [entry for name, function in functions
                    for entry in _unannotated(inspect.signature(function).parameters.values(),
                                              f"{module_name}.{name}", with_default_only=True)]
    assert missing == []


def test_persistent_returns_the_class_it_registers_typed_as_itself():
    for cls in (ABCClustering, ContextualKernel, KernelEnsemble):
        assert persistence._REGISTRY[cls.__name__] is cls  # the decorator returned the class itself
    hints = typing.get_type_hints(persistence.persistent)
    assert isinstance(hints["cls"], typing.TypeVar), hints  # not `type`, which erases the class for pyright
    assert hints["return"] is hints["cls"] and hints["cls"].__bound__ is type


def test_outputs_probabilities_is_a_read_only_property_that_subclasses_override():
    class Plain(Kernel):
        pass

    class ByAttribute(Kernel):
        outputs_probabilities = True

    class ByProperty(Kernel):
        @property
        def outputs_probabilities(self) -> bool:
            return True

    assert isinstance(inspect.getattr_static(Kernel, "outputs_probabilities"), property)
    assert Kernel().outputs_probabilities is False and Plain().outputs_probabilities is False
    with pytest.raises(AttributeError):
        Plain().outputs_probabilities = True
    assert ByAttribute().outputs_probabilities is True and ByProperty().outputs_probabilities is True
    assert ContextualKernel().outputs_probabilities is True
    assert PairwiseKernel().outputs_probabilities is False and PrecomputedKernel().outputs_probabilities is False


def _annotation(function, name: str) -> str:
    return str(inspect.signature(function).parameters[name].annotation if name != "return"
               else inspect.signature(function).return_annotation)


@pytest.mark.parametrize(("target", "name", "expected"), [
    ("skabc.plotting:plot_affinity", "ax", "Sequence[Axes]"),
    ("skabc.plotting:plot_candidates", "axes", "Sequence[Axes]"),
    ("skabc.plotting:plot_training", "axes", "Sequence[Axes]"),
    ("skabc.plotting:plot_eigengap", "n_clusters", "np.integer"),
    ("skabc.plotting:plot_clusters", "s", "ArrayLike"),
    ("skabc.pretrained:load", "device", "torch.device"),
    ("skabc.pretrained:load_saved_kernel", "device", "torch.device"),
    ("skabc:ABCClustering.from_pretrained", "device", "torch.device"),
    ("skabc:ABCClustering.load", "device", "torch.device"),
    ("skabc:ContextualKernel.load", "device", "torch.device"),
    ("skabc:KernelEnsemble.load", "device", "torch.device"),
    ("skabc.kernels:Kernel.affinity", "return", "sp.sparray"),
    ("skabc.kernels:PrecomputedKernel.affinity", "return", "sp.csr_array"),
    ("skabc.kernels:PairwiseKernel.affinity", "return", "sp.csr_array"),
    ("skabc.kernels:PairwiseKernel", "degree", "float"),
    ("skabc:ABCClustering", "affinity", "Callable"),
    ("skabc:ContextualKernel", "max_epochs", "int | Literal['auto']"),
    ("skabc.datasets:make_clustering_sets", "dtype", "DTypeLike"),
    ("skabc.spectral:estimate_n_clusters", "eigen_tol", "float | Literal['auto']"),
])
def test_hints_name_what_the_code_accepts(target, name, expected):
    module_name, _, qualname = target.partition(":")
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    assert expected in _annotation(obj, name).replace('"', "'")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="typing.get_overloads needs Python 3.11")
def test_plot_affinity_returns_one_axes_without_labels():
    from skabc.plotting import plot_affinity

    overloads = typing.get_overloads(plot_affinity)
    returns = {inspect.signature(f).parameters["labels"].annotation: inspect.signature(f).return_annotation
               for f in overloads}
    assert returns == {"None": "Axes", "ArrayLike": "np.ndarray"}
