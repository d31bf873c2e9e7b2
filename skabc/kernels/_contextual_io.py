"""How a fitted ContextualKernel is described for :mod:`skabc.persistence` and rebuilt from it, and how it pickles."""

from __future__ import annotations

import copy
import io
import pickle
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from .. import _schema, persistence
from .._runtime import resolve_device, untouched_torch_rng
from .._user_warnings import warn_user
from ..nn.build import build_module, check_architecture_unchanged, check_attention_options, record_architecture
from ..sampling import check_clusters_per_set, check_set_size
from ..training.plan import NETWORK_PARAMS, network_of
from ..training.schedule import Schedule
from .base import check_recommended_clustering

if TYPE_CHECKING:
    from skorch import NeuralNet

# Prefix of the weights' tensor names in a saved file.
WEIGHTS = "kernel."

# A block's tensor names (relative to the kernel's prefix) start so (an index of more digits is no real block).
_BLOCK_NAME = re.compile(r"blocks\.(\d{1,9})\.")

# Parameters save() does not write: machine-specific, or (checkpoint_dir) where later training would write.
UNSAVED_PARAMS = ("checkpoint_dir", "checkpoint_every", "verbose", "device")
# Parameters of this machine's limits, not of the model: not written, and where an older file holds them, read and
# dropped (a file must not lift the memory guard of the machine that loads it).
MACHINE_PARAMS = ("memory_limit",)
# Fitted attributes that say how training went, saved so that a loaded kernel still tells: name -> kind.
FIT_RECORD = {"init_": "str", "fine_tune_alpha_": "number", "batch_size_": "int", "max_time_": "number",
              "validation_score_": "number", "start_validation_score_": "number", "n_training_sets_": "int",
              "schedule_": "schedule", "validation_settings_scores_": "scores"}
SCHEDULE_FIELDS = ("max_epochs", "sets_per_epoch", "n_steps")
# Ranges of the record's numbers, (low, high, low included): a share of weights, seconds, ARIs.
FIT_RECORD_RANGES = {"fine_tune_alpha_": (0.0, 1.0, False), "max_time_": (0.0, np.inf, False),
                     "validation_score_": (-1.0, 1.0, True), "start_validation_score_": (-1.0, 1.0, True),
                     "validation_settings_scores_": (-1.0, 1.0, True), "batch_size_": (1, np.inf, True)}
# Most entries of a saved validation_settings_scores_ (a fit compares about a dozen settings).
MAX_SETTINGS_SCORES = 256


@dataclass(frozen=True)
class PickledNetwork:
    """A fitted kernel's network (``net_`` and ``module_``) as its pickle holds it, and the device it was on."""

    data: bytes
    device: str

    @classmethod
    def of(cls, network: dict) -> PickledNetwork:
        module, buffer = network["module_"], io.BytesIO()
        pickler = _NetworkPickler(buffer, getattr(network.get("net_"), "module_", None))
        pickler.dump(network)
        if pickler.left_out > 2:  # held elsewhere too (by a callback?): that holder would be restored without it
            buffer = io.BytesIO()
            _NetworkPickler(buffer, None).dump(network)
        return cls(buffer.getvalue(), str(next(module.parameters()).device))

    def restore(self) -> dict:
        """``net_`` and ``module_``, on the device they were on where this machine has it, else on the CPU."""
        try:
            device = resolve_device(self.device)  # refuses a device this machine lacks: 'cuda:1' on one GPU, 'mps'...
        except ValueError:
            warn_user(f"this kernel was pickled with its network on {self.device}, which this machine does not "
                      f"have: the network is loaded on the CPU, where it runs with device='cpu' or 'auto'.")
            device = torch.device("cpu")
        return _NetworkUnpickler(io.BytesIO(self.data), device).load()


class _NetworkPickler(pickle.Pickler):
    """Leaves out the module a skorch net pickles itself: it is the kernel's ``module_`` and the net's ``module``."""

    def __init__(self, file, pickled_by_net) -> None:
        super().__init__(file)
        self.pickled_by_net, self.left_out = pickled_by_net, 0  # left out: the kernel's module_, the net's module

    def persistent_id(self, obj):
        if self.pickled_by_net is None or obj is not self.pickled_by_net:
            return None
        self.left_out += 1
        return "net_.module_"


class _NetworkUnpickler(pickle.Unpickler):
    """Puts the tensors on ``device``: torch pickles a storage as ``torch.save`` bytes, which read back without a
    map location need the device they were saved from (a GPU's pickle failed to load on a machine without one)."""

    def __init__(self, file, device: torch.device) -> None:
        super().__init__(file)
        self.device = device

    def persistent_load(self, pid):
        if pid != "net_.module_":
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r} in a kernel's pickle")
        return None  # set to the net's module once the kernel is loaded (FittedNetworkMixin._one_network)

    def find_class(self, module: str, name: str):
        if module == "torch.storage" and name == "_load_from_bytes":
            return lambda data: torch.load(io.BytesIO(data), map_location=self.device, weights_only=False)
        return super().find_class(module, name)


class FittedNetworkMixin:
    """Where a fitted kernel's network is (``device_``), and a pickle of it that holds the weights once and loads on
    a machine without the GPU it was on."""

    # The fitted attributes ``fit`` or a load sets from other modules, declared for type checkers (documented in
    # ContextualKernel); a declaration sets nothing: an unfitted kernel has none of them.
    net_: NeuralNet
    n_features_in_: int
    feature_names_in_: np.ndarray
    n_training_sets_: int
    init_: str
    fine_tune_alpha_: float
    network_params_: dict
    schedule_: Schedule | None
    batch_size_: int
    max_time_: float | None
    validation_score_: float | None
    start_validation_score_: float | None
    validation_settings_scores_: dict
    recommended_clustering_: dict

    @property
    def device_(self) -> torch.device:
        """The device of the fitted network: ``device`` as ``fit`` resolved it (``'auto'``: CUDA when available, else
        the CPU), or where ``transform`` moved it after ``set_params(device=...)``."""
        check_is_fitted(self, "module_")
        return next(self.module_.parameters()).device

    def recommended_clustering(self) -> dict:
        """The ABCClustering settings its fit (or file) chose: see :meth:`Kernel.recommended_clustering`.

        Returns
        -------
        settings : dict
            Keys among ``'affinity_power'``, ``'assign_labels'``, ``'n_clusters_selection'`` and ``'arbiter'``.

        Raises
        ------
        NotFittedError
            Before ``fit`` or a load: what the network's training will choose is not known yet (``{}`` would
            read as the generic defaults, which a fit does not keep).
        """
        check_is_fitted(self)
        return super().recommended_clustering()

    def __getstate__(self) -> dict:
        state = dict(super().__getstate__())  # a copy: Python 3.11's object.__getstate__ gives __dict__ itself
        if "module_" in state:
            state["module_"] = PickledNetwork.of({name: state.pop(name) for name in ("net_", "module_")
                                                  if name in state})
        return state

    def __setstate__(self, state: dict) -> None:
        if isinstance(state.get("module_"), PickledNetwork):
            state = {**state, **state["module_"].restore()}
        super().__setstate__(state)
        self._one_network()

    def __copy__(self):  # shallow, as without __getstate__: the copy shares the network
        copied = type(self).__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    def __deepcopy__(self, memo: dict):  # without a pickle of the network (pretrained.load copies its kernels)
        copied = memo[id(self)] = type(self).__new__(type(self))
        copied.__dict__.update(copy.deepcopy(self.__dict__, memo))
        copied._one_network()
        return copied

    def _one_network(self) -> None:
        """``module_`` is the net's module: skorch rebuilds its ``module_`` from its own pickle (mapped to the CPU
        where CUDA is missing), a copy apart from the ``module`` parameter and from the kernel's ``module_``."""
        net = self.__dict__.get("net_")
        if net is not None and "module_" in self.__dict__:
            self.module_ = net.module = net.module_


def describe_contextual(kernel) -> tuple[dict, dict]:
    """Parameters, input width, feature names, recommended settings, and the weights."""
    check_is_fitted(kernel, "module_")
    check_architecture_unchanged(kernel, "save")
    part = {
        "params": persistence.plain_params(kernel, skip=UNSAVED_PARAMS + MACHINE_PARAMS),
        "n_features_in": int(kernel.n_features_in_),
        "feature_names_in": [str(f) for f in getattr(kernel, "feature_names_in_", [])] or None,
    }
    network = getattr(kernel, "network_params_", None) or {}
    if any(getattr(kernel, name) != value for name, value in network.items()):
        # Fine-tuned from the generic kernel: the network is not the one the parameters describe.
        part["network_params"] = {name: persistence.json_ready(value) for name, value in network.items()}
    record = fit_record(kernel)
    if record:
        part["fit_record"] = record
    # Copies: an ensemble may hold one kernel twice, and safetensors refuses tensors that share memory.
    tensors = {WEIGHTS + k: v.detach().cpu().clone() for k, v in kernel.module_.state_dict().items()}
    return {"kernel": part, "recommended_clustering": kernel.recommended_clustering()}, tensors


def restore_contextual(cls, meta: dict, tensors: dict, device):
    """A fitted ``cls`` (ContextualKernel) from :func:`describe_contextual`'s output."""
    part = meta["kernel"]
    try:
        params = {k: v for k, v in persistence.unlist(part["params"]).items() if k not in MACHINE_PARAMS}
        kernel = cls(**params, device=device)
    except TypeError as exc:
        raise ValueError(f"the saved kernel parameters do not match this version of skabc: {exc}") from exc
    if part.get("network_params"):
        network = persistence.unlist(part["network_params"])
        unknown = set(network) - set(NETWORK_PARAMS)
        if unknown:
            raise ValueError(f"the saved network parameters name unknown parameters: {sorted(unknown)}")
        kernel.network_params_ = network
    else:  # written only where it differs from the parameters (a fine-tune of the generic network)
        kernel.network_params_ = {name: getattr(kernel, name) for name in NETWORK_PARAMS}
    load_weights(kernel, part["n_features_in"], persistence.nested(WEIGHTS, tensors), device)
    if part.get("feature_names_in"):
        kernel.feature_names_in_ = np.asarray(part["feature_names_in"], dtype=object)
    kernel.recommended_clustering_ = check_recommended_clustering(meta.get("recommended_clustering") or {})
    for name, value in (part.get("fit_record") or {}).items():
        setattr(kernel, name, Schedule(**value) if name == "schedule_" and value is not None else value)
    return kernel


def fit_record(kernel) -> dict:
    """:data:`FIT_RECORD` attributes ``kernel`` has, as JSON values (a kernel loaded from an older file has none)."""
    if not hasattr(kernel, "init_"):  # never fitted here, nor loaded with a record: nothing to tell
        return {}
    record = {}
    for name in FIT_RECORD:
        value = getattr(kernel, name, None)
        if name == "schedule_" and value is not None:
            value = {field: int(getattr(value, field)) for field in SCHEDULE_FIELDS}
        elif name == "validation_settings_scores_":
            value = {str(label): float(score) for label, score in (value or {}).items()}
        elif isinstance(value, np.generic):
            value = value.item()
        record[name] = value
    return record


def load_weights(kernel, n_features: int, state_dict: dict, device) -> None:
    """Make ``kernel`` fitted from weights: it then holds just the module (no training net or optimizer)."""
    device = resolve_device(device)
    with untouched_torch_rng():  # every weight is overwritten: the draws would only move the caller's stream
        module = build_module(network_of(kernel), n_features)
    try:
        module.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:
        raise ValueError(f"saved weights do not fit the saved configuration: {exc}") from exc
    kernel.module_ = module.to(device)
    kernel.module_.eval()
    kernel.n_features_in_ = n_features
    record_architecture(kernel)
    kernel.n_training_sets_ = 0


def described_width(part: dict) -> int | None:
    """The input width a (validated) saved kernel description is bound to; ``None`` for a canonicalising kernel."""
    network = {**part["params"], **(part.get("network_params") or {})}
    return part["n_features_in"] if network.get("canonical_features") is None else None


def check_contextual(cls, meta: dict, header: dict, where: str = "") -> None:
    """Validate a saved kernel description and its file's tensors before anything is built (:mod:`skabc._schema`)."""
    prefix = f"{where}." if where else ""
    _schema.check_keys(meta, where or "description", required=("kernel",), optional=("recommended_clustering",))
    _schema.check_recommended(meta.get("recommended_clustering"), prefix + "recommended_clustering")
    expected = check_contextual_part(cls, meta["kernel"], prefix + "kernel", header, WEIGHTS)
    _schema.check_tensors(header, {WEIGHTS + k: v for k, v in expected.items()}, where or "tensors")


def check_contextual_part(cls, part, where: str, header: dict, tensor_prefix: str) -> dict:
    """Validate one kernel's entry (params, n_features_in, feature_names_in); return the tensors it implies.

    Only the parameters :func:`describe_contextual` writes are accepted (a file must not choose, say,
    the ``checkpoint_dir`` later training writes into), each valid for the constructor, and sizes are
    bounded before the implied network is laid out on torch's 'meta' device (no memory).  Laying out
    costs time per block, so the file's tensors under ``tensor_prefix`` must first be exactly those of
    ``n_blocks`` blocks of this configuration (one block laid out gives their names, dtypes and shapes):
    a forged ``n_blocks`` costs no more than the tensors the file holds (:data:`skabc._schema.MAX_TENSORS`).

    Parameters
    ----------
    cls : type
        :class:`~skabc.ContextualKernel`.
    part : dict
        The kernel's entry of the description.
    where : str
        The entry's path in the description, for messages (``'kernel'``, ``'members.0'``).
    header : dict
        ``{name: (dtype, shape)}`` of the file's tensors (those of this kernel at least).
    tensor_prefix : str
        The prefix of this kernel's tensor names in ``header`` (``'kernel.'``, ``'members.0.'``).

    Returns
    -------
    expected : dict
        ``{name: (dtype, shape)}`` of the network's state dict, names without ``tensor_prefix``.
    """
    _schema.check_keys(part, where, required=("params", "n_features_in"),
                       optional=("feature_names_in", "network_params", "fit_record"))
    if part.get("fit_record") is not None:
        _check_fit_record(part["fit_record"], f"{where}.fit_record")
    allowed = [name for name in cls().get_params(deep=False) if name not in UNSAVED_PARAMS]
    params = _schema.check_params(cls, part["params"], f"{where}.params", allowed)
    n_features = _schema.check_int(part["n_features_in"], f"{where}.n_features_in", 1, _schema.MAX_FEATURES)
    _schema.check_names(part.get("feature_names_in"), f"{where}.feature_names_in", n_features)
    if part.get("network_params") is not None:
        # A fine-tuned kernel's network is the generic one's: the weights must fit that configuration.
        network = _schema.check_params(cls, part["network_params"], f"{where}.network_params", list(NETWORK_PARAMS))
        params = {**params, **network}
    kernel = cls(**params)
    _check_saved_sizes(kernel, f"{where}.params")
    blocks = {int(m.group(1)) for name in header
              if name.startswith(tensor_prefix) and (m := _BLOCK_NAME.match(name, len(tensor_prefix)))}
    # Compared without a range of n_blocks: a forged one of 2**31 must cost nothing.
    missing = next(i for i in range(len(blocks) + 1) if i not in blocks)
    if missing < kernel.n_blocks:
        raise _schema.fail("tensors", f"the file lacks the weights '{tensor_prefix}blocks.{missing}.*' that its "
                                      f"configuration needs ({where}.params.n_blocks={kernel.n_blocks})")
    if blocks and max(blocks) >= kernel.n_blocks:
        raise _schema.fail("tensors", f"the file holds unexpected tensors "
                                      f"'{tensor_prefix}blocks.{min(i for i in blocks if i >= kernel.n_blocks)}.*' "
                                      f"({where}.params.n_blocks={kernel.n_blocks})")
    try:
        if kernel.n_blocks:  # every block's tensors, from one block's layout, before all are laid out
            one_block = _schema.expected_tensors(lambda: build_module(cls(**{**params, "n_blocks": 1}), n_features))
            block = {name[len("blocks.0."):]: spec for name, spec in one_block.items() if name.startswith("blocks.0.")}
            in_blocks = tensor_prefix + "blocks."
            _schema.check_tensors({name: spec for name, spec in header.items() if name.startswith(in_blocks)},
                                  {f"{in_blocks}{i}.{rest}": spec for i in range(kernel.n_blocks)
                                   for rest, spec in block.items()}, "tensors")
        return _schema.expected_tensors(lambda: build_module(kernel, n_features))
    except _schema.DescriptionError:
        raise
    except (TypeError, ValueError, RuntimeError, AssertionError, ArithmeticError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _schema.fail(f"{where}.params", f"this configuration cannot be built ({message})") from None


def _check_fit_record(record, where: str) -> None:
    """Each entry of a saved fit record: a known name holding null or a value of its kind."""
    _schema.check_keys(record, where, optional=tuple(FIT_RECORD))
    for name, value in record.items():
        kind, at = FIT_RECORD[name], f"{where}.{name}"
        if value is None:
            continue
        if kind == "str":
            _schema.check_str(value, at, choices=("generic", "scratch", "warm_start"))
        elif kind == "int":
            _schema.check_int(value, at, 0, _schema.MAX_COUNT)
            _check_record_range(name, value, at)
        elif kind == "number":
            _check_record_range(name, _schema.check_number(value, at), at)
        elif kind == "schedule":
            _schema.check_keys(value, at, required=SCHEDULE_FIELDS)
            for field in SCHEDULE_FIELDS:
                _schema.check_int(value[field], f"{at}.{field}", 0, _schema.MAX_COUNT)
        else:
            _schema.check_object(value, at)
            if len(value) > MAX_SETTINGS_SCORES:
                raise _schema.fail(at, f"{len(value)} entries, more than {MAX_SETTINGS_SCORES}")
            for label, score in value.items():
                _check_record_range(name, _schema.check_number(score, f"{at}.{label}"), f"{at}.{label}")


def _check_record_range(name: str, value, at: str) -> None:
    if name not in FIT_RECORD_RANGES:
        return
    low, high, low_included = FIT_RECORD_RANGES[name]
    if not ((low <= value if low_included else low < value) and value <= high):
        raise _schema.fail(at, f"{value} is out of range {'[' if low_included else '('}{low:g}, {high:g}"
                               f"{')' if np.isinf(high) else ']'}")


def _check_saved_sizes(kernel, where: str) -> None:
    """Cross-parameter rules of a saved configuration that ``_parameter_constraints`` cannot say (they bound every
    width by :data:`skabc._schema.MAX_WIDTH`)."""
    if kernel.d_model % kernel.n_heads:
        raise _schema.fail(where, f"d_model={kernel.d_model} is not divisible by n_heads={kernel.n_heads}")
    for name, check in (("set_size", check_set_size), ("clusters_per_set", check_clusters_per_set)):
        try:
            check(getattr(kernel, name))
        except ValueError as exc:
            raise _schema.fail(f"{where}.{name}", str(exc)) from None
    if kernel.attention_options is not None:
        _schema.check_plain_mapping(kernel.attention_options, f"{where}.attention_options")
    try:  # the rule training applies (nn.build owns it), reported as an entry of the file
        check_attention_options(kernel)
    except (ValueError, TypeError) as exc:
        raise _schema.fail(f"{where}.attention_options", str(exc)) from None
