"""Checks of a saved model's description, run before the loader builds or allocates anything.

A model file is a safetensors file: a header (tensor names, dtypes, shapes and one JSON string, the
description) followed by the tensor data.  A forged or corrupt file must end in a :class:`ValueError` /
:class:`TypeError` that names the file and the offending entry, never in a ``KeyError`` deep in the
loader, a torch error, a huge allocation, or a kernel silently configured by the file (e.g. a
``checkpoint_dir`` that later training would write into).  The helpers here validate:

* the JSON itself (size, ``NaN``/``Infinity`` literals, nesting), then every entry's type and range, with
  unknown keys refused;
* estimator parameters against the estimator's own ``_parameter_constraints``, restricted to the names
  ``save()`` writes;
* the tensors announced by the header (names, dtypes, shapes) against those the described configuration
  implies, computed on torch's ``meta`` device (which allocates nothing);
* after the data is read, that every floating-point tensor is finite.
"""

from __future__ import annotations

import json
import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import InvalidParameterError, validate_parameter_constraints

#: ``set_output(transform=...)`` containers (scikit-learn's), as a description may record one.
OUTPUT_CONTAINERS = ("default", "pandas", "polars")
#: Largest description accepted (the shipped ones are a few KiB).
MAX_DESCRIPTION_CHARS = 1 << 20
#: Bounds of sizes in a description: far above any real model, far below what would exhaust memory.
MAX_WIDTH = 1 << 16  # d_model, canonical_features, n_inducing, n_heads
MAX_FEATURES = 1 << 24  # n_features_in
MAX_COUNT = 1 << 31  # window_size, set sizes, epochs, numbers of points
#: Most tensors in a model file (the shipped Omniglot ensemble has 225): checking a file costs time per tensor.
MAX_TENSORS = 20_000
#: Most members of a saved KernelEnsemble (the shipped one has 3): each is laid out when its file is checked.
MAX_MEMBERS = 256

_SAFETENSORS_DTYPES = {
    torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL",
}


class DescriptionError(ValueError):
    """A saved description that this version of skabc refuses to load; the message says where and why."""


def fail(where: str, problem: str) -> DescriptionError:
    """The error for the entry ``where`` (a path such as ``kernel.params.d_model``)."""
    return DescriptionError(f"{where}: {problem}" if where else problem)


def parse_description(text, path) -> dict:
    """The JSON description as a dict, or a clear error naming ``path``."""
    name = str(path)
    if not isinstance(text, str):
        raise DescriptionError(f"{name!r}: the skabc description is not a string")
    if len(text) > MAX_DESCRIPTION_CHARS:
        raise DescriptionError(
            f"{name!r}: the skabc description has {len(text)} characters, more than any skabc model "
            f"({MAX_DESCRIPTION_CHARS}); the file is not one skabc wrote"
        )

    def refuse_constant(token: str):
        raise ValueError(f"the JSON literal {token} is not allowed")

    try:
        meta = json.loads(text, parse_constant=refuse_constant)
    except RecursionError:
        raise DescriptionError(f"{name!r}: the skabc description is nested too deeply to be one skabc wrote") from None
    except ValueError as exc:  # json.JSONDecodeError, NaN literals, integers of thousands of digits
        raise DescriptionError(f"{name!r}: the skabc description is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise DescriptionError(f"{name!r}: the skabc description is a JSON {type(meta).__name__}, not an object")
    return meta


def check_keys(value, where: str, required=(), optional=()) -> dict:
    """``value`` must be a dict holding every ``required`` key and nothing beyond ``optional``."""
    if not isinstance(value, dict):
        raise fail(where, f"expected a JSON object, got {describe_value(value)}")
    missing = [k for k in required if k not in value]
    if missing:
        raise fail(where, f"missing entr{'y' if len(missing) == 1 else 'ies'} {', '.join(map(repr, missing))}")
    unknown = sorted(set(value) - set(required) - set(optional))
    if unknown:
        raise fail(where, f"unknown entr{'y' if len(unknown) == 1 else 'ies'} {', '.join(map(repr, unknown))} "
                          "(files written by save() never hold them)")
    return value


def check_int(value, where: str, low: int, high: int) -> int:
    if not isinstance(value, Integral) or isinstance(value, bool):
        raise fail(where, f"expected an integer, got {describe_value(value)}")
    if not low <= value <= high:
        raise fail(where, f"{value} is out of range [{low}, {high}]")
    return int(value)


def check_number(value, where: str) -> float:
    """A finite JSON number (not a boolean); an integer beyond float64's range is not one (:func:`_finite`)."""
    if not _is_number(value) or not _finite(value):
        raise fail(where, f"expected a finite number, got {describe_value(value)}")
    return float(value)


def check_str(value, where: str, choices=None) -> str:
    if not isinstance(value, str):
        raise fail(where, f"expected a string, got {describe_value(value)}")
    if choices is not None and value not in choices:
        raise fail(where, f"{value!r} is not one of {sorted(choices)}")
    return value


def check_names(value, where: str, n: int | None = None):
    """Feature names: None, or a list of ``n`` strings."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(where, f"expected null or a list of strings, got {describe_value(value)}")
    if n is not None and len(value) != n:
        raise fail(where, f"{len(value)} feature names for n_features_in={n}")
    return value


def check_object(value, where: str) -> dict:
    """``value`` must be a JSON object (a dict)."""
    if not isinstance(value, dict):
        raise fail(where, f"expected a JSON object, got {describe_value(value)}")
    return value


def check_plain_mapping(value, where: str) -> dict:
    """A dict of strings to JSON scalars (no nested containers)."""
    check_object(value, where)
    for key, item in value.items():
        if item is not None and not isinstance(item, (str, bool, Integral, Real)):
            raise fail(f"{where}.{key}", f"expected a string, number, boolean or null, got {describe_value(item)}")
    return value


def check_params(cls, params, where: str, allowed) -> dict:
    """Estimator parameters as ``save()`` wrote them: known names only, each valid for ``cls``.

    Names missing from the file (saved by an older version) keep their defaults.  Values are checked
    with the estimator's own ``_parameter_constraints``, so a file can hold nothing its constructor
    would refuse; JSON lists come back as tuples, as the parameters were.
    """
    params = check_keys(params, where, optional=allowed)
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    for name, value in values.items():
        if isinstance(value, (dict, tuple)) and name not in _CONTAINER_PARAMS:
            raise fail(f"{where}.{name}", f"expected a scalar, got {describe_value(params[name])}")
        if isinstance(value, tuple) and not all(_is_number(v) for v in value):
            raise fail(f"{where}.{name}", "expected a list of numbers")
        if isinstance(value, tuple) and not all(_finite(v) and abs(v) <= MAX_COUNT for v in value):
            raise fail(f"{where}.{name}", f"expected finite numbers of at most {MAX_COUNT} in absolute value")
        if isinstance(value, dict):
            check_plain_mapping(value, f"{where}.{name}")
        if isinstance(value, Real) and not isinstance(value, bool) and not _finite(value):
            raise fail(f"{where}.{name}", f"expected a finite number, got {describe_value(value)}")
        if (isinstance(value, Integral) and not isinstance(value, bool) and abs(value) > MAX_COUNT
                and name not in _NOT_COUNTS):
            raise fail(f"{where}.{name}", f"{value} is out of range (at most {MAX_COUNT} in absolute value)")
    constraints = {k: v for k, v in cls._parameter_constraints.items() if k in values}
    for name, value in values.items():  # scikit-learn's Interval takes True for 1: a file must not (where the
        # constructor takes a flag for it: verbose=True, as SpectralClustering's; random_state=True, as numpy's seed)
        takes_flag = any(isinstance(c, str) and c in _FLAG_CONSTRAINTS for c in constraints.get(name, ()))
        if isinstance(value, bool) and not takes_flag:
            raise fail(f"{where}.{name}", "expected a number or a string, got a boolean")
    try:
        validate_parameter_constraints(constraints, values, caller_name=f"{where} ({cls.__name__})")
    except InvalidParameterError as exc:
        raise fail(where, str(exc)) from None
    return values


# scikit-learn constraints that take a boolean as a flag, not as the integer 0 or 1.
_FLAG_CONSTRAINTS = ("boolean", "verbose", "random_state")
# Parameters whose saved value may be a container: sizes as [min, max], backend options and a pairwise
# affinity's keywords as objects.
_CONTAINER_PARAMS = ("set_size", "clusters_per_set", "attention_options", "kernel_params")
# Integers that are not counts, so MAX_COUNT does not bound them: a seed (numpy takes up to 2**32 - 1) and a
# number of bytes.  (Their constraints still apply.)
_NOT_COUNTS = ("random_state", "memory_limit")


def check_recommended(settings, where: str) -> None:
    """Recommended clustering settings stored with a kernel: null, or what ``check_recommended_clustering`` accepts."""
    from .kernels.base import check_recommended_clustering

    if settings is None:
        return
    check_object(settings, where)
    try:
        check_recommended_clustering(settings)
    except ValueError as exc:
        raise fail(where, str(exc)) from None


def tensor_header(path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (dtype, shape)}`` of every tensor in a safetensors file, read from its header only."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        names, out = f.keys(), {}
        if len(names) > MAX_TENSORS:
            raise fail("tensors", f"the file holds {len(names)} tensors, more than a skabc model file may "
                                  f"({MAX_TENSORS})")
        for name in names:
            tensor = f.get_slice(name)
            out[name] = (tensor.get_dtype(), tuple(tensor.get_shape()))
    return out


def tensors_header(tensors: dict) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (dtype, shape)}`` of tensors about to be written, as :func:`tensor_header` reads them back."""
    return {name: (_SAFETENSORS_DTYPES.get(t.dtype, str(t.dtype)), tuple(t.shape)) for name, t in tensors.items()}


def expected_tensors(build) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (dtype, shape)}`` of the state dict of the module ``build()`` makes, built on 'meta'.

    The meta device records shapes and dtypes without allocating storage, so even a description of an
    absurdly large network costs nothing here.  No block draws from torch's random stream there (the sampled one
    skips its seed), so the caller's stream, and any other thread's seeded fit, are left as they are.
    """
    with torch.device("meta"):
        module = build()
    return {k: (_SAFETENSORS_DTYPES.get(v.dtype, str(v.dtype)), tuple(v.shape)) for k, v in module.state_dict().items()}


def check_tensors(found: dict, expected: dict, where: str) -> None:
    """The tensors in the file must be exactly those the configuration implies, dtype and shape included."""
    missing = sorted(set(expected) - set(found))
    if missing:
        raise fail(where, f"the file lacks the weight{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(map(repr, missing[:3]))}{' ...' if len(missing) > 3 else ''} "
                          "that its configuration needs")
    unknown = sorted(set(found) - set(expected))
    if unknown:
        raise fail(where, f"the file holds unexpected tensor{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(map(repr, unknown[:3]))}{' ...' if len(unknown) > 3 else ''}")
    for name, (dtype, shape) in expected.items():
        got_dtype, got_shape = found[name]
        if got_dtype != dtype:
            raise fail(where, f"tensor {name!r} has dtype {got_dtype}, but the configuration needs {dtype}")
        if tuple(got_shape) != tuple(shape):
            raise fail(where, f"tensor {name!r} has shape {list(got_shape)}, but the configuration needs "
                              f"{list(shape)}")


def check_finite(tensors: dict, path) -> None:
    """Every floating-point tensor read from ``path`` must be finite (NaN weights give NaN affinities)."""
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise DescriptionError(f"{str(path)!r}: tensor {name!r} holds {bad} NaN or infinite value(s)")


def check_labels(found: dict, name: str, where: str) -> None:
    """A saved ``labels_`` tensor: one int64 entry per row."""
    if name not in found:
        raise fail(where, f"the file lacks the tensor {name!r}")
    dtype, shape = found[name]
    if dtype != "I64" or len(shape) != 1 or shape[0] < 1:
        raise fail(where, f"tensor {name!r} must be a non-empty 1-D int64 array, got {dtype} of shape {list(shape)}")


def label_values_ok(labels: np.ndarray, n_clusters: int) -> bool:
    return labels.size > 0 and int(labels.min()) >= 0 and int(labels.max()) < n_clusters


def _finite(value) -> bool:
    """``math.isfinite`` that takes an integer beyond float64's range as infinite (it raised OverflowError)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _is_number(value) -> bool:
    return isinstance(value, (Integral, Real)) and not isinstance(value, bool)


def describe_value(value) -> str:
    """A short description of a JSON value for messages: its kind and the start of its text."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if type(value) in names:
        return f"{names[type(value)]} ({_short(value)})"
    if isinstance(value, Integral) and abs(value) > 2**64:  # not its hundreds of digits
        return f"an integer of {int(int(value).bit_length() * math.log10(2)) + 1} digits"
    if isinstance(value, (Integral, Real)):
        return f"the number {value!r}"
    return type(value).__name__


def _short(value) -> str:
    try:
        text = json.dumps(value)
    except (ValueError, TypeError, RecursionError):  # a value nested near the recursion limit
        text = type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."
