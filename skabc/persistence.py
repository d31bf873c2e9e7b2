"""Safe persistence keyed by class: safetensors tensors + one JSON description, never pickle.

Every saveable class registers itself with :func:`persistent` and implements
``_describe() -> (meta, tensors)`` and the classmethods
``_check_description(meta, header, where)`` and ``_restore(meta, tensors, device)``.
:func:`save` writes what ``_describe`` returns, tagged with the class name; :func:`load` reads the tag,
lets that class check the description, then rebuild itself.  Nothing is unpickled: a file holds tensors and a JSON
string.  Writes are atomic (temporary file, then rename).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import sklearn
import torch
from safetensors.torch import load_file, safe_open
from safetensors.torch import save as serialize

from . import _schema

FORMAT = "skabc"
#: Version 2 stores any registered kernel inside a saved ABCClustering, and every kernel's
#: recommended clustering settings; version 1 files (kernels and ContextualKernel models) still load.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)

_REGISTRY: dict[str, type] = {}


#: What a saveable class implements: its description and tensors; the classmethod refusing a description it cannot
#: restore (a ``ValueError`` naming the entry, before anything is built or allocated); the classmethod rebuilding it.
PERSISTENCE_METHODS = ("_describe", "_check_description", "_restore")
_C = TypeVar("_C", bound=type)  # the decorated class itself: type checkers keep seeing it, not a bare `type`


def persistent(cls: _C) -> _C:
    """Class decorator: files tagged ``cls.__name__`` are checked and rebuilt by ``cls`` (:data:`PERSISTENCE_METHODS`).

    A class missing one of those methods, or named as another saveable class is, is refused (``TypeError``) where it
    is defined: files name classes by name, so either would only fail, or load the other class, when a file is read.
    """
    missing = [name for name in PERSISTENCE_METHODS if not callable(getattr(cls, name, None))]
    if missing:
        raise TypeError(f"@persistent {cls.__name__} must implement {', '.join(missing)} (see skabc.persistence): "
                        "_describe() -> (meta, tensors), the classmethods _check_description(meta, header, where), "
                        "which raises ValueError for a description it cannot restore, and _restore(meta, tensors, "
                        "device)")
    known = _REGISTRY.get(cls.__name__)
    # The same class defined again: a reloaded module, or a script's own module imported by its name as well.
    modules = set() if known is None else {known.__module__, cls.__module__}
    script = modules & {"__main__", "__mp_main__"} and not any(m.startswith("skabc.") for m in modules)
    again = known is not None and known.__qualname__ == cls.__qualname__ and (len(modules) == 1 or script)
    if known is not None and not again:
        raise TypeError(f"@persistent {cls.__module__}.{cls.__qualname__}: files name their class, and "
                        f"{cls.__name__} is already {known.__module__}.{known.__qualname__}'s name; rename the class")
    _REGISTRY[cls.__name__] = cls  # the same class defined again replaces its old self
    return cls


def _refuse_non_plain(value):
    raise TypeError(
        f"cannot save a parameter of type {type(value).__name__} in the safe format; "
        "use pickle (or joblib) for estimators with custom modules or callables"
    )


def json_ready(value: Any, other: Callable[[Any], Any] = _refuse_non_plain) -> Any:
    """A parameter value as JSON (tuples and 1-D numeric arrays as lists); ``other(value)`` handles anything else."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): json_ready(v, other) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [json_ready(v, other) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "biuf":  # e.g. set_size=np.array(..)
        return value.tolist()
    return other(value)


def _a(name: str) -> str:
    """``name`` with its indefinite article ("an ABCClustering", "a ContextualKernel")."""
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def plain_params(estimator, skip: Collection[str] = (), other: Callable[[Any], Any] = _refuse_non_plain) -> dict:
    """``get_params(deep=False)`` as JSON, without the names in ``skip`` (``other`` as for :func:`json_ready`)."""
    params = {}
    for name, value in estimator.get_params(deep=False).items():
        if name in skip:
            continue
        if other is _refuse_non_plain and isinstance(value, np.random.RandomState):  # a file holds no stream: name it
            raise TypeError(f"cannot save {type(estimator).__name__} with random_state={type(value).__name__}(...): a "
                            "model file holds an int or None there: fit with an int random_state (or None) to save "
                            "it, or use pickle (or joblib)")
        params[name] = json_ready(value, other)
    return params


def unlist(params: dict) -> dict:
    """Saved parameters back as Python values (JSON lists were tuples)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}


def is_saveable(obj) -> bool:
    """Whether ``obj``'s class can be written by :func:`save`."""
    return _REGISTRY.get(type(obj).__name__) is type(obj)


def describe(obj) -> tuple[dict, dict]:
    """``obj``'s JSON description (tagged with its class) and tensors."""
    if not is_saveable(obj):
        raise TypeError(f"{_a(type(obj).__name__)} cannot be saved in skabc's safe format: it saves skabc's own "
                        f"classes ({', '.join(sorted(_REGISTRY))}), not subclasses of them; pickle it instead")
    meta, tensors = obj._describe()
    output = getattr(obj, "_sklearn_output_config", {}).get("transform")
    # set_output's container is part of a transformer's configuration, as a pickle keeps it.
    return {"class": type(obj).__name__, **meta, **({"output": output} if output is not None else {})}, tensors


def _with_output(obj, meta: dict):
    """``obj`` with the ``set_output`` container its (checked) description records, if any."""
    if meta.get("output") is not None:
        obj._sklearn_output_config = {"transform": meta["output"]}  # not set_output: loading needs no pandas
    return obj


#: Entries of every file's top-level description, whatever its class.
HEADER_KEYS = ("format", "format_version", "class", "versions")


def registered_class(meta: dict, where: str = "class", base: type | None = None) -> type:
    """The registered class a (checked) description names; ``base``: it must be a subclass of that."""
    name = meta.get("class")
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise _schema.fail(where, f"{name!r} is not a class this version of skabc can load "
                                  f"(known: {', '.join(sorted(_REGISTRY))})")
    if base is not None and not issubclass(cls, base):
        raise _schema.fail(where, f"{_a(name)} here is not {_a(base.__name__)}")
    return cls


def check_description(meta, header: dict, where: str = "", base: type | None = None, top_level: bool = False):
    """Validate a description and the tensors its file announces (``{name: (dtype, shape)}``), nothing built.

    Dispatches on the class the description names to its ``_check_description(meta, header, where)``;
    nested descriptions (a model's kernel, an ensemble's members) are checked by the same function.
    Returns the class.
    """
    prefix = f"{where}." if where else ""
    _schema.check_object(meta, where or "description")
    cls = registered_class(meta, prefix + "class", base)
    if "output" in meta:
        if not hasattr(cls, "set_output"):
            raise _schema.fail(prefix + "output", f"{_a(cls.__name__)} has no set_output")
        _schema.check_str(meta["output"], prefix + "output", _schema.OUTPUT_CONTAINERS)
    own = (*HEADER_KEYS, "output") if top_level else ("class", "output")
    cls._check_description({k: v for k, v in meta.items() if k not in own}, header, where)
    return cls


def restore(meta: dict, tensors: dict, device: str | torch.device | None = "auto"):
    """Rebuild the object a description (from :func:`describe`) and its tensors describe."""
    cls = _REGISTRY.get(meta.get("class"))
    if cls is None:
        raise ValueError(f"the saved object is a {meta.get('class')!r}, which this version of skabc cannot load")
    return _with_output(cls._restore(meta, tensors, device), meta)


def nested(prefix: str, tensors: dict) -> dict:
    """The tensors whose names start with ``prefix``, with the prefix removed."""
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def save(obj, path, extra: dict[str, str] | None = None) -> None:
    """Atomically write ``obj`` (a registered class) to the safetensors file ``path``; ``extra``: more metadata
    entries beside the description (:func:`load` reads none of them)."""
    meta, tensors = describe(obj)
    write(path, meta, tensors, extra)


def load(path: str | os.PathLike[str], device: str | torch.device | None = "auto", expected: type | None = None):
    """Load the object saved at ``path``; with ``expected``, refuse a file holding another class.

    The whole description is validated first (keys, types and ranges of every entry, and the names,
    dtypes and shapes of the tensors the file announces against those its configuration implies), so
    nothing is built or allocated for a file that cannot be loaded; then the tensors are read, and
    must be finite.  Every refusal is a ValueError naming the file and the entry.
    """
    meta = read_description(path)
    name = str(path)
    try:
        cls = registered_class(meta)
    except _schema.DescriptionError as exc:
        raise _schema.DescriptionError(f"{name!r}: {exc}") from None
    if expected is not None and not issubclass(cls, expected):
        raise ValueError(f"{name!r} holds {_a(cls.__name__)}, not {_a(expected.__name__)}")
    try:
        header = _schema.tensor_header(path)
        check_description(meta, header, top_level=True)
        tensors = load_file(name)
        _schema.check_finite(tensors, path)
        return restore(meta, tensors, device)
    except _schema.DescriptionError as exc:
        if str(exc).startswith(repr(name)):
            raise
        raise _schema.DescriptionError(f"{name!r} is not a model this version of skabc can load: {exc}") from None


def names_a_folder(path) -> bool:
    """Whether ``path`` ends in a separator, ``.`` or ``..``: ``Path()`` drops them, and 'out/' became a file 'out'."""
    return os.path.basename(os.fspath(path)) in ("", ".", "..")


def write(path, meta: dict, tensors: dict, extra: dict[str, str] | None = None) -> None:
    """Write tensors and the JSON ``meta`` (stamped with format and versions), with the metadata entries ``extra``,
    atomically to ``path``."""
    from . import __version__

    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "versions": {"skabc": __version__, "torch": torch.__version__, "sklearn": sklearn.__version__},
        **meta,
    }
    if len(tensors) > _schema.MAX_TENSORS:  # load refuses more: say so now, not when the file is read
        raise ValueError(f"cannot save {len(tensors)} tensors in one skabc model file (at most {_schema.MAX_TENSORS})")
    try:
        text = json.dumps(meta, allow_nan=False)  # load refuses NaN and Infinity: never written
    except ValueError:
        raise ValueError(f"cannot save {_a(str(meta.get('class')))}: a setting holds NaN or an infinite number, which "
                         "a model file cannot hold; change it with set_params") from None
    try:  # what load will check, on the description as JSON gives it back: never write a file load refuses
        check_description(json.loads(text), _schema.tensors_header(tensors), top_level=True)
    except _schema.DescriptionError as exc:
        raise ValueError(f"cannot save {_a(str(meta.get('class')))}: skabc could not load the file back ({exc}); "
                         "change that setting with set_params (and fit again where it shapes the network)") from None
    if names_a_folder(path):
        raise ValueError(f"cannot save to {str(path)!r}: it names a folder; give a file name (e.g. model.safetensors)")
    path = Path(path)
    if path.is_symlink():  # write where the link points, as open(path, 'w') would, not over the link
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise ValueError(f"cannot save to {str(path)!r}: it is a directory; give a file name (e.g. model.safetensors)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a part of the folder path is a file (or a dangling link)
        blocking = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), None)
        if blocking is None:
            raise
        raise ValueError(f"cannot save to {str(path)!r}: {str(blocking)!r} is a file, not a folder") from None
    tmp = None
    try:
        # A short name of its own beside the target: the target's name plus mkstemp's ending may pass 255 bytes.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".skabc-save-", suffix=".tmp")
        os.close(fd)
        # Serialised here and written by Python, so that a failed write (a full disk) is an OSError with its errno.
        _write(tmp, serialize(tensors, metadata={**(extra or {}), "skabc": text}))
        os.chmod(tmp, _file_mode(path))  # mkstemp creates 0600: the mode open() would give, or the replaced file's
        os.replace(tmp, path)
    except OSError as exc:  # name the file the caller gave, not the hidden temporary one beside it
        raise _naming(exc, path) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as file:
        file.write(data)


def _naming(error: OSError, path: Path) -> OSError:
    """``error`` again, of its class and errno, its message naming ``path`` instead of the temporary file."""
    message = f"cannot save to {str(path)!r}: {error.strerror or error}"
    args = (message,) if error.errno is None else (error.errno, message)
    try:
        return type(error)(*args)
    except TypeError:  # a subclass of another library's making, whose arguments are its own
        return OSError(*args)


def _file_mode(path: Path) -> int:
    """The permissions of ``path`` if it exists, else those a plain ``open(path, 'w')`` gives (0666 less the umask)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)  # the only way to read it; set back at once
        os.umask(umask)
        return 0o666 & ~umask


def read_description(path) -> dict:
    """The JSON description stored in a file written by skabc."""
    if not isinstance(path, (str, os.PathLike)):  # pathlib's own error names no argument
        raise TypeError(f"path must be a str or os.PathLike naming a saved skabc model, got {type(path).__name__}")
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"no saved skabc model at {str(path)!r}: it is a directory; give the model's file")
    if not path.is_file():
        raise FileNotFoundError(f"no saved skabc model at {str(path)!r}")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except Exception as exc:  # safetensors raises its own error types for bad headers
        raise ValueError(f"{str(path)!r} is not a safetensors file written by skabc: {exc}") from exc
    if "skabc" not in metadata:
        raise ValueError(f"{str(path)!r} is a safetensors file but holds no skabc description")
    meta = _schema.parse_description(metadata["skabc"], path)
    version = meta.get("format_version")
    if meta.get("format") == FORMAT and type(version) is int and version > max(READABLE_VERSIONS):
        from . import __version__

        writer = meta.get("versions", {}).get("skabc") if isinstance(meta.get("versions"), dict) else None
        by = f"skabc {writer}" if isinstance(writer, str) else "a newer skabc"
        raise ValueError(f"{str(path)!r} was written by {by} in format version {version}, newer than this skabc "
                         f"{__version__} reads (versions {READABLE_VERSIONS}): upgrade skabc to load it")
    if meta.get("format") != FORMAT or type(version) is not int or version not in READABLE_VERSIONS:
        raise ValueError(
            f"{str(path)!r} has format {meta.get('format')!r} version {meta.get('format_version')!r}; "
            f"this skabc reads {FORMAT!r} versions {READABLE_VERSIONS}"
        )
    versions = meta.get("versions", {})
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise _schema.DescriptionError(f"{str(path)!r}: versions: expected an object of version strings")
    return meta
