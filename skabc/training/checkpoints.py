"""Resumable training runs: what ``checkpoint_dir`` holds, checked before skorch restores any of it.

A checkpoint resumes only the configuration and data it was made of (:func:`checkpointed_epochs`); every file is
read first with torch's safe loader and must fit the network it would be restored into, so a forged or foreign
file gets a ``ValueError`` naming it, never a torch or skorch stack trace.
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import struct
from numbers import Real
from pathlib import Path

import numpy as np
import torch
from sklearn.base import BaseEstimator
from skorch import NeuralNet
from torch import nn

from .._schema import check_recommended
from ..persistence import json_ready
from ._checkpoint_contents import (
    check_best_weights,
    check_fits,
    check_generator_state,
    check_history,
    check_weights,
)
from .callbacks import (
    CHECKPOINT_FILES,
    START_FILE,
    best_weights_file,
    checkpoint_file,
    is_checkpoint_file_name,
    random_stream_file,
    save_atomically,
)
from .plan import RANDOM_STATE_AT_FIT, WARM_START

_CONFIG_FILE = "config.json"
#: The fitted kernel of a complete run, in ``checkpoint_dir`` (skabc's safe format; :mod:`skabc.training.result`).
RESULT_FILE = "fitted_kernel.safetensors"


def _digest(*parts: np.ndarray) -> str:
    """SHA-256 of arrays, each with its dtype and shape."""
    digest = hashlib.sha256()
    for part in parts:
        part = np.ascontiguousarray(part)
        digest.update(f"{part.dtype.str}{part.shape}".encode())
        digest.update(part.tobytes())
    return digest.hexdigest()


def data_digest(X: np.ndarray, labels: np.ndarray, group_codes) -> str:
    """SHA-256 of the training rows, their labels and groups: a checkpoint resumes on the data it was made of."""
    return _digest(X, labels, np.zeros(0) if group_codes is None else group_codes)


def validation_digest(validation_labels) -> str | None:
    """SHA-256 of the held-out rows' labels (``-1`` elsewhere), ``None`` without validation.

    :func:`data_digest` reads the training labels, where held-out rows are ``-1``: labels changed on those rows
    alone train the same sets but score other validation sets, so early stopping (and the weights kept) differ.
    """
    return None if validation_labels is None else _digest(np.asarray(validation_labels, dtype=np.int64))


def _pop_data_records(saved: dict, X: np.ndarray, labels: np.ndarray, group_codes, validation_labels) -> bool | None:
    """Take the data records out of a saved configuration: whether they are these data's (the held-out labels
    compared where recorded), ``None`` where no data were recorded (a checkpoint of an earlier version)."""
    saved_data = saved.pop("_data", None)
    recorded_validation, saved_validation = "_validation" in saved, saved.pop("_validation", None)
    if saved_data is None:
        return None
    return saved_data == data_digest(X, labels, group_codes) and (
        not recorded_validation or saved_validation == validation_digest(validation_labels))


def check_checkpoint_dir(checkpoint_dir, random_state) -> None:
    """Refuse a ``checkpoint_dir`` that is an empty path (it would write into the working folder) or a file, or
    one with ``random_state=None``."""
    if checkpoint_dir is None:
        return
    if random_state is None:
        # Found now, not once the run is interrupted: every fit would draw other training sets (and held-out rows,
        # whose checkpoint is then refused as other data), so no fit could resume it as it would have gone on.
        raise ValueError("random_state=None draws other training sets on every fit, so a fit could not resume the "
                         "checkpoint it writes in checkpoint_dir as the run would have gone on; set random_state to "
                         "an int (or checkpoint_dir=None).")
    if not str(checkpoint_dir).strip():
        raise ValueError("checkpoint_dir is an empty path; give a folder (e.g. 'checkpoints/'), or None to keep no "
                         "checkpoints.")
    if Path(checkpoint_dir).exists() and not Path(checkpoint_dir).is_dir():
        raise ValueError(f"checkpoint_dir={str(checkpoint_dir)!r} is a file, not a folder; give a folder for the "
                         "checkpoint files.")
    if Path(checkpoint_dir).is_dir():
        # Found now, not when that epoch's checkpoint fails to be written (after the training before it).
        blocking = sorted(entry.name for entry in Path(checkpoint_dir).iterdir()
                          if _is_checkpoint_name(entry.name.removesuffix(".tmp")) and entry.is_dir())
        if blocking:
            raise ValueError(f"checkpoint_dir={str(checkpoint_dir)!r} holds a folder named as a checkpoint file "
                             f"({blocking[0]!r}), where that file could not be written; remove it or use another "
                             "checkpoint_dir.")


def _is_checkpoint_name(name: str) -> bool:
    """Whether ``name`` is one a checkpoint folder's files are written under (``'params.7.pt'``, ``'config.json'``)."""
    return name in {_CONFIG_FILE, RESULT_FILE} or is_checkpoint_file_name(name)


def checkpointed_epochs(kernel, X: np.ndarray, labels: np.ndarray, group_codes, announce: bool = True,
                        net: NeuralNet | None = None, start: dict | None = None,
                        validation_labels: np.ndarray | None = None, start_weights: dict | None = None) -> int:
    """Epochs already saved in ``checkpoint_dir`` (0 if none); refuse a checkpoint of another configuration,
    of other data (:func:`data_digest`, computed only when there is a checkpoint directory) or of another
    ``start`` (where the fit resolved its weights to start from, e.g. ``{'init_': 'generic',
    'fine_tune_alpha_': 0.5}``: the trained kernel takes the scratch-like spec either way), and, given the
    initialised ``net`` it would be restored into, weights or optimizer state that do not fit it, and a run
    validated with another ``n_iter_no_change``.  ``validation_labels``: the held-out rows' labels
    (:func:`validation_digest`), checked where the checkpoint recorded them (older ones did not), as the patience.
    Numbers compare by value (``weight_decay=0`` resumes a run of ``0.0``); a ``RandomState`` ``random_state`` by
    its state when the fit began (:func:`describe_params`)."""
    if kernel.checkpoint_dir is None:
        return 0
    directory = Path(kernel.checkpoint_dir)
    directory.mkdir(parents=True, exist_ok=True)
    config_file = directory / _CONFIG_FILE
    params = describe_params(kernel)
    history = directory / CHECKPOINT_FILES["f_history"]
    # A finished run that early stopping ended before its first checkpoint: its configuration and kept kernel, no
    # history.  Other data or settings are refused as for a resume, not written over it (and its kernel deleted).
    finished_unsaved = not history.exists() and config_file.is_file() and (directory / RESULT_FILE).is_file()
    if history.exists() or finished_unsaved:
        try:
            saved = json.loads(config_file.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"cannot resume from {str(config_file)!r}: it is missing or not the configuration file "
                             f"skabc wrote ({error}); use another checkpoint_dir or remove this one to start "
                             "afresh.") from None
        if not isinstance(saved, dict):
            raise ValueError(f"cannot resume from {str(config_file)!r}: it is not the configuration file skabc "
                             "wrote; use another checkpoint_dir or remove this one to start afresh.")
        validated = saved.get("_validation") is not None if "_validation" in saved else None
        same_data = _pop_data_records(saved, X, labels, group_codes, validation_labels)
        saved_start, saved_patience = saved.pop("_start", None), saved.pop("_patience", None)
        if saved_start is not None and not isinstance(saved_start, dict):  # skabc writes a dict or null there
            raise ValueError(f"cannot resume from {str(config_file)!r}: it is not the configuration file skabc "
                             "wrote; use another checkpoint_dir or remove this one to start afresh.")
        if isinstance(saved_start, dict):  # what a warm start began from (saved_warm_start), not how it began
            saved_start = {key: value for key, value in saved_start.items() if key != "recommended_clustering"}
        if not _same(saved, params):
            raise ValueError(
                f"checkpoint_dir={str(directory)!r} holds a checkpoint of a different configuration "
                f"({_differences(saved, params)}); use another directory or remove it to start afresh."
            )
        # Checkpoints written before the start (or the data) were recorded resume as they did; a warm start
        # continues whatever run the checkpoint holds (as it does a finished one), but its own run is its own.
        if (saved_start is not None and start is not None and start.get("init_") != WARM_START
                and saved_start != json_ready(start, _name_of)):
            raise ValueError(
                f"checkpoint_dir={str(directory)!r} holds a run started otherwise "
                f"({_differences(saved_start, json_ready(start, _name_of))}); resuming it would give a kernel of "
                "neither start. Use another directory or remove it to start afresh."
            )
        if same_data is False and validated is not None and validated != (validation_labels is not None):
            # early_stopping is resolved before this configuration is described: a change shows as other data.
            raise ValueError(
                f"checkpoint_dir={str(directory)!r} holds a run trained {'with' if validated else 'without'} "
                f"held-out validation rows, and this fit {'has none' if validated else 'holds some out'} "
                "(early_stopping differs, or the data differ: fewer rows may leave no useful split); resume it "
                "with that run's early_stopping on its data, or use another directory or remove it to start afresh."
            )
        if same_data is False:
            raise ValueError(
                f"checkpoint_dir={str(directory)!r} holds a checkpoint of this configuration trained on other data "
                "(X, y or groups differ, or the held-out validation rows: another validation_fraction draws "
                "others); use another directory or remove it to start afresh."
            )
        # Left out of the configuration (earlier checkpoints lack it), yet where a resumed run stops depends on it;
        # a finished run's kept kernel is compared on its own (skabc.training.result), here only a resume.
        patience = _patience(kernel, validation_labels)
        if net is not None and None not in (saved_patience, patience) and not _same(saved_patience, patience):
            raise ValueError(
                f"checkpoint_dir={str(directory)!r} holds a run validated with n_iter_no_change={saved_patience!r} "
                f"({patience!r} here); resuming it would stop where neither run would. Set n_iter_no_change="
                f"{saved_patience!r}, or use another directory or remove it to start afresh."
            )
        if finished_unsaved:  # this run's own (restore_result knows it by started_as_this_run): nothing to resume
            return 0
        if kernel.verbose and announce:
            print(f"Resuming from the checkpoint in {str(directory)!r}.")
        return _check_checkpoint_files(directory, net, kernel.max_epochs)
    record = {**params, "_data": data_digest(X, labels, group_codes),
              "_validation": validation_digest(validation_labels), "_patience": _patience(kernel, validation_labels),
              **({"_start": json_ready(start, _name_of)} if start is not None else {})}
    config_file.write_text(_as_json(record))
    if start is not None and start.get("init_") == WARM_START and start_weights is not None:
        save_atomically({name: value.detach().cpu() for name, value in start_weights.items()}, directory / START_FILE)
    else:  # another run's, left in a folder reused after its history was removed
        (directory / START_FILE).unlink(missing_ok=True)
    return 0


def started_as_this_run(kernel, X: np.ndarray, labels: np.ndarray, group_codes,
                        validation_labels: np.ndarray | None = None) -> bool:
    """Whether ``checkpoint_dir`` holds no history but the configuration file of this configuration on these
    data: a run that ended before its first checkpoint (early stopping ahead of ``checkpoint_every``).  Read
    only: :func:`checkpointed_epochs` would write this fit's configuration over it."""
    if (Path(kernel.checkpoint_dir) / CHECKPOINT_FILES["f_history"]).exists():
        return False
    return _this_runs_start(kernel, X, labels, group_codes, validation_labels) is not None


def _this_runs_start(kernel, X: np.ndarray, labels: np.ndarray, group_codes, validation_labels) -> dict | None:
    """The ``_start`` record (``{}`` where none) of the configuration file in ``checkpoint_dir`` where it is this
    configuration's on these data, else ``None`` (none, unreadable, another run, or an earlier version's that
    recorded no data).  The start and the patience are not compared: the callers judge them."""
    try:
        saved = json.loads((Path(kernel.checkpoint_dir) / _CONFIG_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(saved, dict) or not _pop_data_records(saved, X, labels, group_codes, validation_labels):
        return None
    start = saved.pop("_start", None)
    saved.pop("_patience", None)
    return (start if isinstance(start, dict) else {}) if _same(saved, describe_params(kernel)) else None


def saved_warm_start(spec, X: np.ndarray, labels: np.ndarray, group_codes, validation_labels,
                     current: dict) -> tuple[dict, dict] | None:
    """The weights and clustering settings the warm-start run of this configuration on these data in
    ``spec.checkpoint_dir`` began from; ``None`` where it holds no such run (another configuration or other data
    are refused, or written over, as :func:`checkpointed_epochs` decides; an earlier version kept no start).

    A resume competes and scores against them: the fit that was stopped left its own result on the kernel, which
    would otherwise be taken for the start.  They must fit the network of ``current`` (the kernel's weights).
    """
    start = _this_runs_start(spec, X, labels, group_codes, validation_labels)
    if start is None or start.get("init_") != WARM_START:
        return None
    directory = Path(spec.checkpoint_dir)
    file = directory / START_FILE
    if not file.is_file():
        if "recommended_clustering" not in start:  # an earlier version's warm start: it kept none
            return None
        raise ValueError(f"checkpoint_dir={str(directory)!r} holds this warm-start run without the start it began "
                         f"at ({START_FILE}), so a resume would begin elsewhere; remove the folder (or use another) "
                         "to start afresh.")
    try:
        weights = torch.load(file, map_location="cpu", weights_only=True)
        check_weights(weights, current)
        settings = start.get("recommended_clustering", {})
        check_recommended(settings, "its recommended_clustering")
    except pickle.UnpicklingError as exc:
        raise _unpickling_refusal(file, exc) from None
    except (RuntimeError, OSError, EOFError, ValueError, TypeError, KeyError, struct.error) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"cannot resume from {str(file)!r}: it is not the start of a warm-start run skabc wrote "
                         f"({first_line}); remove the folder (or use another checkpoint_dir) to start "
                         "afresh.") from None
    return weights, dict(settings or {})


def _patience(kernel, validation_labels) -> int | None:
    """The early stopping patience a checkpoint records: ``n_iter_no_change`` where the run validates, else ``None``
    (nothing reads it)."""
    return None if validation_labels is None else int(kernel.n_iter_no_change)  # a numpy int is no JSON


def run_record(checkpoint_dir) -> str | None:
    """A digest of the configuration file of the run in ``checkpoint_dir`` (its configuration, data and start), or
    ``None`` where it cannot be read: the kernel a finished run keeps records it (:mod:`skabc.training.result`)."""
    try:
        saved = json.loads((Path(checkpoint_dir) / _CONFIG_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return hashlib.sha256(_as_json(saved).encode()).hexdigest()


def _as_json(value) -> str:
    """A configuration (or one of its values) as the checkpoint compares and stores it."""
    return json.dumps(value, sort_keys=True)


def _same(saved, current) -> bool:
    """Whether two configurations (or values of one) are the same as JSON holds them: numbers by value (``0`` and
    ``0.0``, as a parameter given either way trains alike), a bool only as a bool, lists and mappings entry by
    entry."""
    return _equal(json.loads(_as_json(saved)), json.loads(_as_json(current)))  # tuples as lists, keys as str


def _equal(saved, current) -> bool:
    """:func:`_same` of values read from JSON."""
    if isinstance(saved, bool) or isinstance(current, bool):
        return type(saved) is type(current) and saved == current
    if isinstance(saved, Real) and isinstance(current, Real):
        return saved == current or (math.isnan(saved) and math.isnan(current))
    if isinstance(saved, list) and isinstance(current, list):
        return len(saved) == len(current) and all(map(_equal, saved, current))
    if isinstance(saved, dict) and isinstance(current, dict):
        return saved.keys() == current.keys() and all(_equal(saved[k], current[k]) for k in saved)
    return type(saved) is type(current) and saved == current


def _differences(saved: dict, current: dict) -> str:
    """``'name=there, here'`` for every entry two configurations hold differently (at most four named)."""
    names = sorted(name for name in set(saved) | set(current)
                   if name not in saved or name not in current or not _same(saved[name], current[name]))
    text = "; ".join(f"{name}={saved.get(name)!r} there, {current.get(name)!r} here" for name in names[:4])
    return text + (f"; and {len(names) - 4} more" if len(names) > 4 else "")


def _check_checkpoint_files(directory: Path, net: NeuralNet | None = None, max_epochs=None) -> int:
    """Read every checkpoint file once before skorch restores them; return the epochs in the history.

    skorch's LoadInitState would fail inside ``partial_fit`` with torch's message for a refused pickle
    (which suggests ``weights_only=False``, never an option here) and without naming the file.  The
    ``.pt`` files are read as torch does then, with ``weights_only=True``: tensors and plain containers,
    never arbitrary objects; given ``net``, they must fit its module and optimizer (torch's own errors
    for a mismatch name neither the file nor the checkpoint).
    """
    history = None
    for key in ("f_history", "f_params", "f_optimizer"):  # the history names the epoch of the other two
        file = directory / CHECKPOINT_FILES[key] if history is None else checkpoint_file(directory, key, len(history))
        if not file.is_file():
            # The checkpoint's own file is the one missing (the fallback is an earlier version's single file).
            missing = file.name if history is None else CHECKPOINT_FILES[key].format(checkpoint=len(history))
            raise ValueError(f"checkpoint_dir={str(directory)!r} holds no {missing}, which its history names; "
                             "remove the folder to start afresh.")
        try:
            if history is None:
                history = json.loads(file.read_text())
                check_history(history, max_epochs)
            else:
                content = torch.load(file, map_location="cpu", weights_only=True)
                if net is not None:
                    check_fits(key, content, net)
        except pickle.UnpicklingError as exc:
            raise _unpickling_refusal(file, exc) from None
        except (RuntimeError, OSError, EOFError, ValueError, TypeError, KeyError, UnicodeDecodeError,
                struct.error) as exc:
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"cannot resume from {str(file)!r}: it is not a checkpoint skabc wrote ({first_line}); "
                             "remove it (or use another checkpoint_dir) to start afresh.") from None
    stream = random_stream_file(directory, len(history))
    if (stream.exists() or stream.is_symlink()) and not stream.is_file():
        raise ValueError(f"cannot resume from {str(stream)!r}: it is not a file; remove it (or use another "
                         "checkpoint_dir) to start afresh.")
    if stream.is_file():  # absent from checkpoints of the earliest versions: those resume without it
        try:
            state = torch.load(stream, map_location="cpu", weights_only=True)
            if not (isinstance(state, dict) and isinstance(state.get("cpu"), torch.Tensor)
                    and state["cpu"].dtype == torch.uint8 and state["cpu"].shape == torch.get_rng_state().shape):
                raise ValueError("not a saved random stream")
            check_generator_state(state["cpu"])
        except pickle.UnpicklingError as exc:
            raise _unpickling_refusal(stream, exc) from None
        except (RuntimeError, OSError, EOFError, ValueError, struct.error) as exc:
            raise ValueError(f"cannot resume from {str(stream)!r}: it is not a checkpoint skabc wrote "
                             f"({type(exc).__name__}); remove it (or use another checkpoint_dir) to start "
                             "afresh.") from None
    best = best_weights_file(directory, len(history))
    if best.exists() and not best.is_file():
        raise ValueError(f"cannot resume from {str(best)!r}: it is not a file; remove it (or use another "
                         "checkpoint_dir) to start afresh.")
    if best.is_file():  # written only where a run's best validated epoch is not its last checkpoint's
        try:
            saved = torch.load(best, map_location="cpu", weights_only=True)
            check_best_weights(saved, net)
        except pickle.UnpicklingError as exc:
            raise _unpickling_refusal(best, exc) from None
        except (RuntimeError, OSError, EOFError, ValueError, TypeError, KeyError, struct.error) as exc:
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"cannot resume from {str(best)!r}: it is not a checkpoint skabc wrote ({first_line}); "
                             "remove it (or use another checkpoint_dir) to start afresh.") from None
    return len(history)


def _unpickling_refusal(file: Path, exc: pickle.UnpicklingError) -> ValueError:
    """What a ``.pt`` checkpoint file that torch's safe unpickler refused is: pickled objects, or not a checkpoint."""
    if "GLOBAL" in str(exc):  # torch names the Python global it refused to unpickle
        return ValueError(f"refusing to resume from {str(file)!r}: it holds pickled Python objects besides tensors, "
                          "and unpickling them could run arbitrary code. skabc only reads checkpoints it wrote; "
                          "remove the file (or use another checkpoint_dir) to start afresh.")
    return ValueError(f"cannot resume from {str(file)!r}: it is not a checkpoint skabc wrote (corrupt or truncated); "
                      "remove it (or use another checkpoint_dir) to start afresh.")


def describe_params(estimator: BaseEstimator) -> dict:
    """JSON-ready description of the parameters that change training (callables by qualified name, a
    ``RandomState`` by a digest of its state when the fit began)."""
    # Settings that do not change training: a checkpoint made under other values still resumes.
    ignored = ("verbose", "device", "checkpoint_dir", "checkpoint_every", "memory_limit", "affinity_mode",
               "n_neighbors", "n_random_neighbors", "warm_start",
               # Resolved before training (the kernel train() gets has init='scratch', no early stopping):
               # leaving them out keeps checkpoints written before these parameters existed resumable (the
               # patience is recorded apart, where the run validates: checkpointed_epochs).
               "init", "early_stopping", "validation_fraction", "n_iter_no_change", "max_time",
               "fine_tune_alpha")
    params = {k: json_ready(v, _name_of) for k, v in estimator.get_params(deep=False).items() if k not in ignored}
    if isinstance(getattr(estimator, "random_state", None), np.random.RandomState):
        # By its state as the fit found it, before drawing from it (kept on the spec by plan_training): a
        # RandomState(5), or one an earlier fit drew from, draws other sets; its class alone resumed those silently.
        state = estimator.__dict__.get(RANDOM_STATE_AT_FIT) or estimator.random_state.get_state()
        params["random_state"] = f"RandomState:{_digest(state[1], np.array(state[2:4]), np.array(state[4:]))[:16]}"
    return params


def _name_of(value) -> str:
    """Custom modules and callables are described by their qualified name."""
    if isinstance(value, nn.Module):
        return f"module:{type(value).__module__}.{type(value).__qualname__}"
    return f"{type(value).__module__}.{getattr(value, '__qualname__', type(value).__qualname__)}"
