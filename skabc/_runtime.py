"""Process-level helpers: device selection, allocator tuning, seeding."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import sys
import threading
from numbers import Real

import torch

_MALLOC_TUNED = False
#: glibc's mallopt parameters.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Thresholds a tuned block leaves behind: the ceiling of glibc's own dynamic mmap threshold (32 MiB on 64-bit, the
#: trim threshold twice that), where a process that has freed large buffers ends up on its own.  Any mallopt turns
#: the dynamic threshold off for good, and glibc's documented 128 KiB defaults then map and unmap every larger
#: buffer on each use: after one fit, a 16 MiB array cost 2-3 times as much to allocate and fill, and numpy work
#: with large temporaries about 5 % more, against nothing at the ceiling (docs/changelog.md up to 76b68f2).
_RESTORED_MMAP_THRESHOLD, _RESTORED_TRIM_THRESHOLD = 32 << 20, 64 << 20
#: Threshold while tuned: large tensor buffers stay on the heap between steps.
_TUNED_THRESHOLD = 1 << 30
#: glibc's environment settings of the thresholds: a process started with them keeps them (mallopt cannot read them
#: back).
_MALLOC_ENVIRONMENT = (b"MALLOC_MMAP_THRESHOLD_", b"MALLOC_TRIM_THRESHOLD_")
#: :func:`tuned_allocator` blocks open in the process (threads may train at once: the first in tunes, the last out
#: restores).
_ALLOCATOR_LOCK = threading.Lock()
_TUNED_BLOCKS = 0
#: Held by every seeded block (:func:`seeded_torch`).
_SEEDED_LOCK = threading.RLock()
#: :func:`float32_default` blocks open in the process, and the default dtype they found.
_DTYPE_LOCK = threading.Lock()
_FLOAT32_BLOCKS = 0
_CALLER_DTYPE = torch.float32


def _new_locks_in_child() -> None:
    # A lock held by another thread at a fork stays held in the child for good: the child starts with fresh ones.
    global _SEEDED_LOCK, _DTYPE_LOCK, _ALLOCATOR_LOCK
    _SEEDED_LOCK, _DTYPE_LOCK, _ALLOCATOR_LOCK = threading.RLock(), threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_new_locks_in_child)


@functools.cache
def _started_with_malloc_settings() -> bool:
    """Whether the process started with glibc's thresholds set in its environment.

    glibc reads them once, at start, so the start's environment (``/proc/self/environ``) counts, not
    ``os.environ``: dask's nanny, for one, writes ``MALLOC_TRIM_THRESHOLD_`` there for the workers it spawns.
    """
    try:
        with open("/proc/self/environ", "rb") as environ:
            entries = environ.read().split(b"\0")
    except OSError:
        return False
    for entry in entries:
        name, _, value = entry.partition(b"=")
        if name in _MALLOC_ENVIRONMENT or (name == b"GLIBC_TUNABLES" and b"glibc.malloc." in value):
            return True
    return False


def _tunable_libc():
    """glibc, where its allocator may be tuned (Linux, no ``SKABC_NO_MALLOPT``, not started with thresholds of the
    user's own), else ``None``."""
    if not sys.platform.startswith("linux") or os.environ.get("SKABC_NO_MALLOPT") or _started_with_malloc_settings():
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        _ = (libc.mallopt, libc.malloc_trim)  # both must exist (musl has no malloc_trim)
    except (OSError, AttributeError):
        return None
    return libc


def _set_thresholds(libc, mmap_threshold: int, trim_threshold: int) -> None:
    libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
    libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold)


def tune_allocator() -> None:
    """Keep glibc from returning large tensor buffers to the OS, for the rest of the process.

    Training allocates and frees the same large buffers each step; glibc's
    default mmap threshold unmaps them every time: without tuning, epochs of
    the conv4 embedder took 1.3-1.6x as long, of the additive head 1.7x, and
    of the default multiplicative network no longer (one thread).  For
    research scripts that own their process; the package itself tunes only
    while it trains
    (:func:`tuned_allocator`).  Opt out with ``SKABC_NO_MALLOPT=1``.
    """
    global _MALLOC_TUNED
    libc = _tunable_libc()
    if _MALLOC_TUNED or libc is None:
        return
    _MALLOC_TUNED = True
    _set_thresholds(libc, _TUNED_THRESHOLD, _TUNED_THRESHOLD)


@contextlib.contextmanager
def tuned_allocator(enabled: bool = True):
    """:func:`tune_allocator`'s thresholds inside the block only.

    On leaving, the heap is trimmed and the thresholds are those glibc reaches on its own once it has freed large
    buffers (:data:`_RESTORED_MMAP_THRESHOLD`), so later work in the caller's process is no slower than in one
    that never trained: any ``mallopt`` turns glibc's dynamic threshold off for good, and its 128 KiB defaults
    would then map every larger buffer anew on each use.  Blocks may overlap in threads: the first in tunes, the
    last out restores.  Nothing happens when ``enabled`` is false, the process was tuned for good or started with
    glibc's thresholds in its environment, or glibc is not there.
    """
    global _TUNED_BLOCKS
    libc = _tunable_libc() if enabled and not _MALLOC_TUNED else None
    if libc is None:
        yield
        return
    with _ALLOCATOR_LOCK:
        if _TUNED_BLOCKS == 0:
            _set_thresholds(libc, _TUNED_THRESHOLD, _TUNED_THRESHOLD)
        _TUNED_BLOCKS += 1
    try:
        yield
    finally:
        with _ALLOCATOR_LOCK:
            _TUNED_BLOCKS -= 1
            if _TUNED_BLOCKS == 0 and not _MALLOC_TUNED:  # tune_allocator() inside a block tuned it for good
                _set_thresholds(libc, _RESTORED_MMAP_THRESHOLD, _RESTORED_TRIM_THRESHOLD)
                libc.malloc_trim(0)


def resolve_device(device) -> torch.device:
    """``'auto'`` -> CUDA when available, else CPU; anything else must name a torch device."""
    if device == "auto" or device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto' or a torch device such as 'cpu' or 'cuda', got {device!r}") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available on this machine")
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r} was requested but this machine has {torch.cuda.device_count()} CUDA "
                         f"device(s), numbered from 0")
    if resolved.type == "meta":  # allocates nothing, so it passes the probe below, then fails at .item()
        raise ValueError(f"device={device!r} holds no data (torch's shape-only device); use 'auto', 'cpu' or 'cuda'")
    if resolved.type not in ("cpu", "cuda"):
        # 'mps', 'xpu'...: torch only says so at the first allocation, deep inside training.
        try:
            torch.empty(1, device=resolved)
        except (RuntimeError, AssertionError, ImportError) as exc:  # 'hpu': torch imports a module it lacks
            raise ValueError(
                f"device={device!r} is not available on this machine (this torch build cannot allocate "
                f"tensors there: {type(exc).__name__}); use 'auto', 'cpu' or 'cuda'"
            ) from None
    return resolved


@contextlib.contextmanager
def seeded_torch(seed: int, device: torch.device):
    """Seed torch's CPU generator, and ``device``'s where it is a GPU, inside a forked RNG state.

    Only the generators forked are seeded (``torch.manual_seed`` would seed every GPU, which the fork does not
    restore), so the caller's global RNG states are all untouched afterwards.
    """
    cuda_index = None
    if device.type == "cuda":
        cuda_index = device.index if device.index is not None else torch.cuda.current_device()
    # torch's generators are process-wide: fits overlapping in threads drew from each other's seeded streams (and
    # the fork's restore rewound both), so seeded blocks run one at a time.
    with _SEEDED_LOCK, torch.random.fork_rng(devices=[] if cuda_index is None else [cuda_index]):
        torch.default_generator.manual_seed(seed)
        if cuda_index is not None:
            with torch.cuda.device(cuda_index):
                torch.cuda.manual_seed(seed)
        yield


@contextlib.contextmanager
def untouched_torch_rng():
    """Leave torch's CPU random stream as it was: building a module draws its default initial weights."""
    with torch.random.fork_rng(devices=[]):
        yield


@contextlib.contextmanager
def float32_default():
    """torch's default dtype float32 inside the block (as a decorator too), the caller's again after it.

    The network is float32 (its sets, its saved weights); a caller's ``torch.set_default_dtype(torch.float64)``
    would otherwise make the tensors it creates on the way float64 and mix the two.  The setting is
    process-wide: while any block is open, every thread's default is float32.
    """
    global _FLOAT32_BLOCKS, _CALLER_DTYPE
    # The default dtype is process-wide: blocks overlapping in threads restored each other's saved value and left
    # the caller's float64 as float32.  The first block in saves it, the last one out restores it.
    with _DTYPE_LOCK:
        if _FLOAT32_BLOCKS == 0:
            _CALLER_DTYPE = torch.get_default_dtype()
            torch.set_default_dtype(torch.float32)
        _FLOAT32_BLOCKS += 1
    try:
        yield
    finally:
        with _DTYPE_LOCK:
            _FLOAT32_BLOCKS -= 1
            if _FLOAT32_BLOCKS == 0:
                torch.set_default_dtype(_CALLER_DTYPE)


def memory_limit_bytes(memory_limit) -> float | None:
    """A ``memory_limit`` parameter in bytes: ``'auto'`` is half the physical memory, ``None`` no limit.

    Checked here, where it is used: ``set_params`` on a fitted kernel changes it without a new ``fit``.

    Raises
    ------
    ValueError
        If ``memory_limit`` is not ``None``, ``'auto'`` or a positive finite number.
    """
    if memory_limit is None:
        return None
    if isinstance(memory_limit, str) and memory_limit == "auto":
        try:
            return 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):  # not POSIX: no reliable figure
            return None
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, Real) or not 0 < memory_limit < math.inf:
        raise ValueError(f"memory_limit must be a positive number of bytes, 'auto' or None, got {memory_limit!r}")
    return float(memory_limit)
