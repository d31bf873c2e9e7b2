"""The public type hints say what the code accepts (skabc ships ``py.typed``: mypy and pyright trust them).

Pyright infers the type of an unannotated parameter from its default in a typed package (``coef0=1`` reads as
``coef0: int``, ``max_epochs='auto'`` as ``str``), so every parameter with a default other than ``None`` is annotated;
the classes ``@persistent`` decorates keep their own type; ``outputs_probabilities`` is a read-only property that a
kernel of one's own overrides as KernelEnsemble does.  Counts, sizes, seeds and real numbers take numpy's scalars
(``np.int64(3)``, a ``k`` from ``np.arange``, ``np.float32(0.5)``: only ``np.float64`` subclasses a Python number),
as the code does, through ``skabc._typing``'s ``Int`` and ``Float``.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import typing

import numpy as np
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
    ("skabc.plotting:plot_eigengap", "n_clusters", "Int | None"),
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
    ("skabc.kernels:PairwiseKernel", "degree", "Float"),
    ("skabc:ABCClustering", "affinity", "Callable"),
    ("skabc:ContextualKernel", "max_epochs", "Int | Literal['auto']"),
    ("skabc:ContextualKernel", "batch_size", "Int | Literal['auto']"),
    ("skabc:ContextualKernel", "set_size", "Int | Sequence[Int] | np.ndarray"),
    ("skabc:ContextualKernel", "clusters_per_set", "Int | Sequence[Int] | None"),
    ("skabc.sampling:ClusterSetSampler", "set_size", "Int | Sequence[Int] | np.ndarray"),
    ("skabc:ABCClustering", "n_clusters", "Int | None"),
    ("skabc:ABCClustering", "gamma", "Float"),
    ("skabc.datasets:make_clustering_sets", "set_size", "Int | tuple[Int, Int]"),
    ("skabc.spectral:consensus_n_clusters", "powers", "tuple[Float, ...]"),
    ("skabc.datasets:make_clustering_sets", "dtype", "DTypeLike"),
    ("skabc.spectral:estimate_n_clusters", "eigen_tol", "Float | Literal['auto']"),
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


#: The modules whose public signatures take numpy's integers and floats wherever they take Python's.
NUMPY_NUMBER_MODULES = ["skabc", "skabc.kernels", "skabc.datasets", "skabc.plotting", "skabc.preprocessing",
                        "skabc.pretrained", "skabc.sampling", "skabc.spectral", "skabc.sparse_affinity"]

#: Parameters that keep a Python ``int`` or ``float`` on purpose.
PYTHON_NUMBERS_ONLY = {
    "Selection.__init__(n_clusters)",  # a record the selectors return: its k is read back as an int
}
#: Hooks a kernel of one's own overrides as ``returns_sparse(self, n_samples: int)`` and ``check_memory(self,
#: n_samples: int, n_copies: float = 1.0)``: a wider base makes those overrides incompatible for mypy and pyright.
KERNEL_HOOKS = ("returns_sparse", "check_memory")


def _python_number_parameters(module_name: str):
    """``Owner.function(parameter)`` of every public signature of ``module_name`` hinted a bare int or float."""
    module = importlib.import_module(module_name)
    for name in getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]:
        obj = getattr(module, name)
        if not str(getattr(obj, "__module__", "")).startswith("skabc"):
            continue
        if inspect.isfunction(obj):
            functions = [(name, obj)]
        elif inspect.isclass(obj):
            functions = [(f"{name}.{attr}", value.__func__ if isinstance(value, (classmethod, staticmethod)) else value)
                         for attr, value in vars(obj).items() if attr == "__init__" or not attr.startswith("_")]
        else:
            continue
        for where, function in functions:
            if inspect.isfunction(function):
                yield from (f"{where}({p.name})" for p in inspect.signature(function).parameters.values()
                            if re.search(r"\b(int|float)\b", str(p.annotation)))


def test_public_signatures_take_numpy_numbers():
    found = {entry for module_name in NUMPY_NUMBER_MODULES for entry in _python_number_parameters(module_name)}
    assert sorted(e for e in found - PYTHON_NUMBERS_ONLY if e.split("(")[0].split(".")[-1] not in KERNEL_HOOKS) == []
    assert PYTHON_NUMBERS_ONLY <= found  # the exceptions are still there (else drop them from the list)
    assert "Kernel.returns_sparse(n_samples)" in found and "Kernel.check_memory(n_copies)" in found


def test_number_aliases_take_numpy_scalars():
    from skabc._typing import Float, Int

    assert typing.get_args(Int) == (int, np.integer)
    assert typing.get_args(Float) == (float, np.floating, np.integer)
    assert all(isinstance(v, Int) for v in (3, np.int64(3), np.int32(3), np.uint8(3), *np.arange(2, 4)))
    # A Python int is a float to the type checkers (numeric promotion), not to isinstance.
    assert all(isinstance(v, Float) for v in (0.5, np.float32(0.5), np.float64(0.5), np.float16(1), np.int64(3)))
    assert not isinstance(0.5, Int) and not isinstance(np.float64(3), Int) and not isinstance("3", Float)


def test_numpy_scalars_run_where_the_hints_take_them():
    from skabc.datasets import discretize_columns, make_blobs_set, make_circles_sets
    from skabc.preprocessing import canonicalize_set
    from skabc.sampling import ClusterSetSampler
    from skabc.spectral import estimate_n_clusters

    i, f = np.int64, np.float32
    X, _ = make_blobs_set(n_samples=i(60), n_clusters=i(3), cluster_std=(f(0.5), f(1.0)), noise_fraction=f(0.0),
                          random_state=i(0))
    for k in np.arange(2, 4):
        model = ABCClustering(n_clusters=k, affinity="rbf", gamma=f(0.5), n_init=i(2), max_clusters=i(8),
                              eigen_tol=f(0.0), random_state=i(0))
        assert len(np.unique(model.fit_predict(X))) == k
    kernel = PairwiseKernel("nearest_neighbors", n_neighbors=i(5), gamma=f(1.0), degree=i(3), coef0=f(1.0)).fit(X)
    assert kernel.affinity(X).shape == (60, 60)
    assert canonicalize_set(X, n_components=i(2)).shape == SetCanonicalizer(i(2)).fit_transform(X).shape == (60, 2)
    assert discretize_columns(X, fraction=f(0.5), levels=(i(2), i(4)), random_state=0).shape == (60, 2)
    k, _ = estimate_n_clusters(np.exp(-np.square(X[:, None] - X[None]).sum(-1)), max_clusters=i(6), eigen_tol=f(0))
    assert 1 <= k <= 6
    _, yc, groups = make_circles_sets(n_sets=i(2), set_size=(i(20), i(30)), n_circles=i(2), noise=f(0.01))
    for set_size in (np.array([4, 8]), (i(4), i(8)), i(6)):
        sampler = ClusterSetSampler(yc, groups, set_size=set_size, clusters_per_set=(i(1), i(2)))
        assert 4 <= len(sampler.draw(np.random.default_rng(0), set_size=i(6))[0]) <= 8


def test_a_numpy_integer_batch_size_trains():
    """torch's DataLoader refuses a numpy integer batch size: fit gave 'batch_size should be a positive integer
    value, but got batch_size=2' for the np.int64 that a grid over np.arange passes."""
    from conftest import TINY

    from skabc.datasets import make_circles_sets

    X, y, groups = make_circles_sets(n_sets=4, set_size=30, random_state=0)
    kernel = ContextualKernel(**{**TINY, "batch_size": np.int64(2)}).fit(X, y, groups=groups)
    assert kernel.batch_size_ == 2 and type(kernel.batch_size_) is int


def test_an_array_set_size_saves_as_the_hint_promises(tmp_path):
    """set_size is hinted to take an array, and fit takes one: save refused it ('cannot save a parameter of type
    ndarray ... use pickle'), for the kernel and for a model holding it."""
    from conftest import TINY

    from skabc.datasets import make_circles_sets

    X, y, groups = make_circles_sets(n_sets=4, set_size=30, random_state=0)
    kernel = ContextualKernel(**{**TINY, "set_size": np.array([10, 40])})
    model = ABCClustering(kernel=kernel, random_state=0).fit(X, y, groups=groups)
    model.save(tmp_path / "model.safetensors")
    model.kernel_.save(tmp_path / "kernel.safetensors")
    loaded = ABCClustering.load(tmp_path / "model.safetensors")
    assert list(loaded.kernel.set_size) == [10, 40] and list(loaded.kernel_.set_size) == [10, 40]
    np.testing.assert_array_equal(loaded.predict(X[:30]), model.predict(X[:30]))
    assert list(ContextualKernel.load(tmp_path / "kernel.safetensors").set_size) == [10, 40]
