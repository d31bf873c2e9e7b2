"""The torch module a ContextualKernel's parameters describe, built the same way for training and loading."""

from __future__ import annotations

import copy
import inspect
from numbers import Integral, Real

import numpy as np
import torch
from torch import nn

from .._runtime import float32_default, resolve_device
from ..preprocessing import canonicalize_set
from .backends import BACKEND_OPTIONS, option_names, resolve_backend
from .embedders import EMBEDDERS
from .model import ABCNet
from .sampled import SampledAttentionBlock

#: Keywords every attention block receives from the network itself, never from ``attention_options``.
BLOCK_KEYWORDS = ("d_model", "n_heads", "d_ff", "layer_norm", "dropout")


def check_attention_options(kernel) -> None:
    """Refuse ``attention_options`` the backend would not take, before torch reports it as a TypeError.

    A key the network or a named kernel parameter already passes (``dropout``, ``n_inducing`` for
    ``'isab'``) is refused too: it has one owner, and a saved kernel is only loadable that way.
    """
    options = kernel.attention_options
    if not options:
        return
    named = option_names(kernel.attention)
    for key in options:
        if not isinstance(key, str):
            raise TypeError(f"attention_options keys must be strings (keyword names), got {key!r}.")
        if key in named:
            raise ValueError(f"attention_options cannot set {key!r}: it is the kernel parameter {key}; set it there.")
        if key in BLOCK_KEYWORDS:
            raise ValueError(f"attention_options cannot set {key!r}: every block receives it from the network "
                             f"({', '.join(BLOCK_KEYWORDS)}).")
    parameters = inspect.signature(resolve_backend(kernel.attention)).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return  # a factory that takes any keyword decides itself
    unknown = sorted(set(options) - set(parameters))
    if unknown:
        accepted = sorted(set(parameters) - set(BLOCK_KEYWORDS) - set(named))
        name = kernel.attention if isinstance(kernel.attention, str) else getattr(kernel.attention, "__name__", "")
        raise ValueError(
            f"attention_options: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"for the attention backend {name!r}; it takes {', '.join(map(repr, accepted)) or 'no other options'}."
        )
    if isinstance(kernel.attention, str):  # a built-in backend: its options' types are its annotations
        for key, value in options.items():
            _check_option_type(key, value, str(parameters[key].annotation))


def _check_option_type(key: str, value, annotation: str) -> None:
    """Refuse an option of a built-in backend whose value is not of its annotated type (bools are not ints)."""
    kinds = {part.strip() for part in annotation.split("|")}
    if value is None and "None" in kinds:
        return
    if "int" in kinds and isinstance(value, Integral) and not isinstance(value, bool):
        return
    if "float" in kinds and isinstance(value, Real) and not isinstance(value, bool) and np.isfinite(value):
        return
    if "str" in kinds and isinstance(value, str):
        return
    if kinds <= {"int", "float", "str", "None"}:
        raise TypeError(f"attention_options[{key!r}] must be {' or '.join(sorted(kinds))}, got {value!r}.")


def build_module(kernel, n_features: int) -> ABCNet:
    """A fresh :class:`ABCNet` for the kernel's architecture parameters and ``n_features`` inputs.

    Its parameters are float32 whatever torch's default dtype (``torch.set_default_dtype`` in the caller's
    process): the network reads float32 sets, and saved weights are float32.
    """
    with float32_default():
        return _build_module(kernel, n_features)


def _build_module(kernel, n_features: int) -> ABCNet:
    check_attention_options(kernel)
    if kernel.canonical_features is not None:
        n_features = int(kernel.canonical_features)
    embed_features = getattr(kernel, "embed_features", None)
    if embed_features is not None and embed_features > n_features:
        raise ValueError(f"embed_features={embed_features} exceeds the input width {n_features}.")
    embed_width = n_features if embed_features is None else int(embed_features)
    embedder = kernel.embedder
    if isinstance(embedder, str):
        embedder = EMBEDDERS[embedder](embed_width, kernel.d_model)
    elif isinstance(embedder, nn.Module):
        embedder = copy.deepcopy(embedder)  # never train the user's own object
    elif embedder is not None:
        embedder = embedder(embed_width, kernel.d_model)
        if not isinstance(embedder, nn.Module):
            raise TypeError(f"embedder(n_features, d_model) must return an nn.Module, got {type(embedder)}")
    module = ABCNet(
        n_features=n_features,
        d_model=kernel.d_model,
        n_heads=kernel.n_heads,
        n_blocks=kernel.n_blocks,
        compat=kernel.compat,
        attention=kernel.attention,
        layer_norm=kernel.layer_norm,
        dropout=kernel.dropout,
        embedder=embedder,
        attention_options=backend_options(kernel),
        local_geometry=bool(getattr(kernel, "local_geometry", False)),
        embed_features=embed_features,
        context_gate=bool(getattr(kernel, "context_gate", False)),
    )
    on_meta = any(parameter.is_meta for parameter in module.parameters())
    if on_meta:  # on 'meta' (shapes only) torch's Python kernels would import sympy
        return module
    if embedder is not None:
        width = _embed_width_origin(kernel, embed_width)
        out = _probe_embedder(module.embedder, embed_width, width)
        if out.shape != (2, kernel.d_model):
            raise ValueError(
                f"embedder must map (m, {embed_width}) inputs{width} to (m, d_model={kernel.d_model}); "
                f"it returned shape {tuple(out.shape)}."
            )
    return module


def _embed_width_origin(kernel, embed_width: int) -> str:
    """Where the embedder's input width comes from, when it is not X's width."""
    if getattr(kernel, "embed_features", None) is not None:
        return f" (embed_features={embed_width})"
    if kernel.canonical_features is not None:
        return f" (canonical_features={embed_width})"
    return ""


def _probe_embedder(embedder: nn.Module, embed_width: int, origin: str) -> torch.Tensor:
    """The embedder run on zeros of two points, on its own device (a user's module may already sit on a GPU); a
    failure is reported as the parameter's, not as torch's shape error deep inside the first fit."""
    weight = next(embedder.parameters(), None)
    zeros = torch.zeros(2, embed_width, device=None if weight is None else weight.device)
    training = embedder.training
    try:
        with torch.no_grad():
            embedder.eval()  # a BatchNorm in train mode would take the zeros into its running statistics
            out = embedder(zeros)
    except (RuntimeError, TypeError, ValueError, IndexError) as error:
        raise ValueError(f"embedder must take (m, {embed_width}) inputs{origin}; it failed on zeros of shape "
                         f"(2, {embed_width}): {error}") from error
    finally:
        embedder.train(training)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"embedder must return a torch.Tensor, got {type(out).__name__}.")
    return out


#: Parameters the fitted weights depend on: changing one after fit needs a refit.  (``dropout`` and
#: the training settings do not matter at inference; ``n_attention_samples`` is inference-only.)
ARCHITECTURE_PARAMS = ("attention", "n_inducing", "window_size", "window_attention", "attention_options",
                       "compat", "n_blocks", "n_heads", "d_model", "layer_norm", "canonical_features", "embedder",
                       "local_geometry", "embed_features", "context_gate")


def record_architecture(kernel) -> None:
    """Remember, on a kernel that just became fitted, the parameter values its module was built with."""
    # A backend's own parameter matters only to that backend: n_inducing changed on a 'sab' kernel changes nothing.
    unused = ({name for names in BACKEND_OPTIONS.values() for name in names} - set(option_names(kernel.attention))
              if isinstance(kernel.attention, str) else set())
    kernel._fitted_architecture_ = {name: getattr(kernel, name) for name in ARCHITECTURE_PARAMS if name not in unused}


def check_architecture_unchanged(kernel, action: str) -> None:
    """Refuse to use fitted weights after a parameter they depend on was changed by ``set_params``.

    ``set_params(d_model=32)`` or ``set_params(canonical_features=4)`` on a fitted kernel does not
    change its network; transforming (``action='transform'``) with the new value would fail inside
    torch, and saving (``'save'``) would write a file that cannot be loaded.
    """
    fitted = getattr(kernel, "_fitted_architecture_", None)
    if fitted is None:  # fitted by an older version: nothing recorded
        return
    for name, value in fitted.items():
        current = getattr(kernel, name)
        if name == "attention_options" and not current and not value:  # None and {}: no options either way
            continue
        if current is not value and current != value:
            # The parameter's value at fit; a fine-tune's network is the generic one's (network_params_ names it).
            network = getattr(kernel, "network_params_", None) or {}
            built = (f" (its network has {name}={network[name]!r})"
                     if name in network and network[name] is not value and network[name] != value else "")
            raise ValueError(
                f"{name}={current!r} was set after fit, but the kernel was fitted with {name}={value!r}{built}; "
                f"{action} needs the configuration the kernel was fitted with. Set {name} back to {value!r}, "
                "or fit again."
            )


def backend_options(kernel) -> dict:
    """Keyword options of the attention backend: its named kernel parameters, then ``attention_options``."""
    names = option_names(kernel.attention)
    return {**{name: getattr(kernel, name) for name in names}, **(kernel.attention_options or {})}


def apply_inference_options(kernel, module: nn.Module) -> None:
    """Give the fitted blocks the current inference-only options, so set_params needs no refit.

    ``n_attention_samples`` only sets how many window samples the sampled
    backend averages in eval mode; the weights do not depend on it.  ``device``
    is checked and the module moved there (``set_params(device=...)`` after fit).
    """
    device = resolve_device(kernel.device)
    if next(module.parameters()).device != device:
        module.to(device)
    samples = backend_options(kernel).get("n_attention_samples")
    if samples is None:
        return
    for block in module.modules():
        if isinstance(block, SampledAttentionBlock):
            block.n_attention_samples = int(samples)


class Canonicalize:
    """Picklable per-set map to canonical coordinates (float32 for the network)."""

    def __init__(self, n_components: int) -> None:
        self.n_components = n_components

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return canonicalize_set(np.asarray(X, dtype=np.float32), self.n_components).astype(np.float32, copy=False)


def set_transform(kernel):
    """The per-set input map applied before the network (``None``: identity)."""
    if kernel.canonical_features is None:
        return None
    return Canonicalize(int(kernel.canonical_features))
