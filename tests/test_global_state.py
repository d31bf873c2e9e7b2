"""An estimator leaves the caller's process as it found it: allocator, random streams, warnings filters, umask."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
import torch
from conftest import TINY
from joblib import parallel_config
from sklearn.metrics.pairwise import rbf_kernel

from skabc import ABCClustering, ContextualKernel, pretrained
from skabc.datasets import make_circles_sets
from skabc.kernels import Kernel


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_fit_leaves_the_process_allocator_as_it_found_it():
    """Training tunes glibc to keep freed buffers; afterwards a freed array goes back to the OS as before."""
    script = textwrap.dedent("""
        import os, numpy as np
        from skabc import ContextualKernel
        from skabc.datasets import make_blobs_set
        X, y = make_blobs_set(60, n_clusters=3, random_state=0)
        ContextualKernel(d_model=16, n_blocks=1, n_heads=2, init="scratch", max_epochs=1, set_size=(10, 40),
                         sets_per_epoch=4, random_state=0).fit(X, y)
        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        before = rss()
        a = np.ones(64 * 2**20 // 8)
        del a
        print(rss() - before)
    """)
    env = {name: value for name, value in os.environ.items() if name != "SKABC_NO_MALLOPT"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    # Kept on the heap under the training thresholds: 64 MiB more; returned at glibc's: about nothing.
    assert int(out.stdout.split()[-1]) < 16 * 2**20


class _RecordingLibc:
    """Stands in for glibc: records the allocator settings a block makes."""

    def __init__(self):
        self.calls = []

    def mallopt(self, parameter, value):
        self.calls.append((parameter, value))

    def malloc_trim(self, pad):
        self.calls.append(("trim", pad))


@pytest.fixture
def recording_libc(monkeypatch):
    from skabc import _runtime

    libc = _RecordingLibc()
    monkeypatch.setattr(_runtime, "_tunable_libc", lambda: libc)
    return libc


def test_a_tuned_block_leaves_glibcs_own_ceiling_not_its_128_kib_defaults(recording_libc):
    """Probe 38d: leaving at 128 KiB (any mallopt turns glibc's self-adjusting threshold off) made every later buffer
    over 128 KiB be mapped anew on each use: a 16 MiB array 2-3 times slower after one fit."""
    from skabc._runtime import tuned_allocator

    with tuned_allocator():
        assert recording_libc.calls == [(-3, 1 << 30), (-1, 1 << 30)]
    assert recording_libc.calls[2:] == [(-3, 32 << 20), (-1, 64 << 20), ("trim", 0)]


def test_overlapping_tuned_blocks_tune_once_and_restore_after_the_last(recording_libc):
    """Fits training in threads at once: the first to finish restored the thresholds under the other one."""
    from skabc._runtime import tuned_allocator

    entered, leave = threading.Event(), threading.Event()

    def other_fit():
        with tuned_allocator():
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=other_fit)
    thread.start()
    entered.wait(10)
    with tuned_allocator():
        pass
    assert recording_libc.calls == [(-3, 1 << 30), (-1, 1 << 30)]  # the other fit still trains tuned
    leave.set()
    thread.join()
    assert recording_libc.calls[2:] == [(-3, 32 << 20), (-1, 64 << 20), ("trim", 0)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
@pytest.mark.parametrize("name, value, tuned", [
    ("MALLOC_MMAP_THRESHOLD_", "65536", False),
    ("MALLOC_TRIM_THRESHOLD_", "65536", False),
    ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536", False),
    ("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F", True),
])
def test_thresholds_a_process_started_with_are_kept(name, value, tuned):
    """mallopt cannot read a setting back: a process started with glibc's thresholds keeps them.  Set later in
    os.environ (dask's nanny writes MALLOC_TRIM_THRESHOLD_ there for its workers) they are not this process's."""
    script = textwrap.dedent("""
        import os
        from skabc._runtime import _tunable_libc
        started = _tunable_libc() is not None
        os.environ["MALLOC_TRIM_THRESHOLD_"] = "65536"
        print(started, _tunable_libc() is not None)
    """)
    env = {key: val for key, val in os.environ.items() if key not in ("SKABC_NO_MALLOPT", "MALLOC_MMAP_THRESHOLD_",
                                                                     "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={**env, name: value},
                         check=True)
    assert out.stdout.split() == [str(tuned), str(tuned)]


def test_loading_a_kernel_leaves_torchs_random_stream(tmp_path):
    """Building the module to load weights into draws default initial weights: not from the caller's stream."""
    path = tmp_path / "kernel.safetensors"
    pretrained.load("circles").save(path)
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    ContextualKernel.load(path)
    assert torch.equal(torch.rand(3), expected)


def test_the_sampled_backend_leaves_torchs_random_stream_at_fit_and_load(blob_data, tmp_path):
    """Probe 53e: a sampled block draws its window seed when built, and the shape-only builds on the meta device
    (the memory check before training, the file's check before loading) ran outside any fork of the stream."""
    X, y, groups = blob_data
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    kernel = ContextualKernel(**{**TINY, "attention": "sampled", "window_size": 8, "init": "scratch"}).fit(
        X, y, groups=groups)
    assert torch.equal(torch.rand(3), expected)
    kernel.save(tmp_path / "sampled.safetensors")
    torch.manual_seed(0)
    ContextualKernel.load(tmp_path / "sampled.safetensors")
    assert torch.equal(torch.rand(3), expected)


def test_shape_only_builds_in_another_thread_leave_a_seeded_fit_alone(blob_data):
    """Review 53h: the meta-device builds (a file's or the memory check's shapes) ran in a fork of torch's stream,
    and setting it back rewound a seeded fit drawing from it in another thread; they draw nothing now."""
    from skabc._schema import expected_tensors
    from skabc.nn.build import build_module

    X, y, groups = blob_data
    params = {**TINY, "dropout": 0.3, "max_epochs": 4, "init": "scratch"}
    solo = ContextualKernel(**params).fit(X, y, groups=groups).transform(X[:30])
    shapes_of = ContextualKernel(**{**TINY, "attention": "sampled", "window_size": 8, "init": "scratch"})
    done = threading.Event()

    def check_shapes_meanwhile():
        while not done.is_set():
            expected_tensors(lambda: build_module(shapes_of, X.shape[1]))

    other = threading.Thread(target=check_shapes_meanwhile)
    other.start()
    try:
        beside = ContextualKernel(**params).fit(X, y, groups=groups).transform(X[:30])
    finally:
        done.set()
        other.join()
    np.testing.assert_array_equal(beside, solo)


def test_training_on_the_cpu_seeds_no_gpu(blob_data, monkeypatch):
    """``torch.manual_seed`` would seed every GPU, which the forked RNG state does not restore."""
    seeded = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: seeded.append(seed))
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda seed: seeded.append(seed))
    X, y, groups = blob_data
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    seeded.clear()  # the caller's own seeding calls them: only what the fit does counts
    ContextualKernel(**TINY).fit(X, y, groups=groups)
    assert seeded == []
    assert torch.equal(torch.rand(3), expected)


def test_clustering_in_threads_leaves_the_callers_warnings_filters():
    """``catch_warnings`` blocks overlapping in joblib's threads restored each other's saved filters."""
    X, _, groups = make_circles_sets(n_sets=16, set_size=40, random_state=0)
    expected = ABCClustering(affinity="rbf", random_state=0).fit(X, groups=groups).labels_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the caller's own filter
        before = _filters()
        for _ in range(2):  # overlaps are a race (the test above forces one)
            with parallel_config(backend="threading"):
                labels = ABCClustering(affinity="rbf", random_state=0, n_jobs=2).fit(X, groups=groups).labels_
            assert _filters() == before
            np.testing.assert_array_equal(labels, expected)


class _OverlappingBlocksKernel(Kernel):
    """An RBF kernel whose affinity, on two of three sets, opens a ``catch_warnings`` block as another library
    would (without a lock) and makes the two overlap in the order that leaks the first block's filter.

    Set A (near the origin) enters its block and waits; set B (near 1000) ends at once, so its worker takes set C
    (near 2000), whose block and task are entered while A's filter is in force.  A leaves first; C leaves last and
    restores the filters it found: A's.
    """

    def affinity(self, X):
        where = X[0, 0]
        if where > 1500:  # C
            with warnings.catch_warnings():
                _BLOCKS["C in"].set()
                _BLOCKS["A out"].wait(10)
                time.sleep(0.5)  # A's task ends meanwhile: C's exits are the last
        elif where < 500:  # A
            with warnings.catch_warnings():
                warnings.simplefilter("error", ResourceWarning)
                _BLOCKS["C in"].wait(10)
            _BLOCKS["A out"].set()
        return rbf_kernel(X)


_BLOCKS: dict[str, threading.Event] = {}


def test_overlapping_filter_blocks_of_another_library_in_the_workers_leave_the_callers_filters():
    """Blocks opened by other code in the worker threads (scikit-learn opens one per check_array call) leave
    each other's filters behind when they overlap; the caller gets its own filters back all the same."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(30, 2)) + shift for shift in (0.0, 1000.0, 2000.0)])
    groups = np.repeat([0, 1, 2], 30)
    _BLOCKS.update({name: threading.Event() for name in ("C in", "A out")})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        before = _filters()
        with parallel_config(backend="threading"):
            ABCClustering(kernel=_OverlappingBlocksKernel(), n_clusters=2, random_state=0, n_jobs=2).fit(
                X, groups=groups)
        assert all(event.is_set() for event in _BLOCKS.values())  # the two blocks did overlap
        assert _filters() == before


def _filters() -> list:
    """The warnings filters, patterns as text (a library imported late may add one again, compiled)."""
    return [tuple(getattr(part, "pattern", part) for part in entry) for entry in warnings.filters]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_saved_model_has_the_permissions_open_would_give(tmp_path):
    """A private umask keeps a new file private; an existing file keeps its own mode when saved over."""
    kernel = pretrained.load("circles")
    old = os.umask(0o077)
    try:
        kernel.save(tmp_path / "private.safetensors")
    finally:
        os.umask(old)
    assert (tmp_path / "private.safetensors").stat().st_mode & 0o777 == 0o600
    shared = tmp_path / "shared.safetensors"
    kernel.save(shared)
    shared.chmod(0o640)
    kernel.save(shared)
    assert shared.stat().st_mode & 0o777 == 0o640


def test_checking_a_saved_model_runs_no_torch_machinery_it_does_not_need():
    """Shapes are checked on torch's 'meta' device, where drawing or multiplying imports sympy and dynamo
    (about 800 modules and a second; dynamo sets an environment variable)."""
    script = textwrap.dedent("""
        import os, sys
        import skabc
        from skabc import pretrained
        before, environment = set(sys.modules), dict(os.environ)
        for name in ("generic", "circles", "omniglot"):
            pretrained.load(name)
        print(sorted(m for m in set(sys.modules) - before if m.split(".")[0] == "sympy" or "_dynamo" in m)[:3])
        print(sorted(set(os.environ) ^ set(environment)))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "[]"]


def test_a_float64_default_dtype_changes_nothing(blob_data, tmp_path):
    """The network is float32: a caller's torch.set_default_dtype(torch.float64) made the generic kernel's
    file 'not loadable' (its shapes were checked as float64) and training mix float and double."""
    X, y, groups = blob_data
    kernel = ContextualKernel(**TINY).fit(X, y, groups=groups)
    expected = kernel.transform(X[:30]), ABCClustering(random_state=0).fit_predict(X[:60])
    kernel.save(tmp_path / "kernel.safetensors")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        again = ContextualKernel(**TINY).fit(X, y, groups=groups).transform(X[:30])
        # A fine-tune of the generic kernel (whose local geometry builds tensors of the default dtype), checked
        # for divergence after training: the check ran outside the float32 block and failed in scatter_add_.
        tuned = ContextualKernel(max_epochs=1, sets_per_epoch=8, device="cpu", random_state=0).fit(X[:200], y[:200])
        assert tuned.transform(X[:30]).shape == (30, 30)
        loaded = ContextualKernel.load(tmp_path / "kernel.safetensors").transform(X[:30])
        labels = ABCClustering(random_state=0).fit_predict(X[:60])
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(previous)
    np.testing.assert_array_equal(again, expected[0])
    np.testing.assert_array_equal(loaded, expected[0])
    np.testing.assert_array_equal(labels, expected[1])


def test_default_dtype_blocks_overlapping_in_threads_give_the_callers_back():
    """A probe (/work/probe35b): two float32 blocks overlapping in threads restored each other's saved dtype: the
    first in saved float64 and, closed first, restored it; the second saved float32 and restored that last."""
    from skabc._runtime import float32_default

    inside, close = threading.Event(), threading.Event()

    def second_block():
        with float32_default():
            inside.set()
            close.wait(10)

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        thread = threading.Thread(target=second_block)
        with float32_default():
            thread.start()
            assert inside.wait(10)
        assert torch.get_default_dtype() == torch.float32  # the second block is still open
        close.set()
        thread.join(10)
        after = torch.get_default_dtype()
    finally:
        torch.set_default_dtype(previous)
    assert after == torch.float64


def test_seeded_blocks_in_threads_take_turns():
    """A probe (/work/probe35b): trainings in two threads drew from each other's seeded streams (the generator is
    process-wide), so a kernel with dropout differed from the same fit run alone."""
    from skabc._runtime import seeded_torch

    cpu = torch.device("cpu")
    with seeded_torch(0, cpu):
        alone = torch.rand(4)
    with seeded_torch(1, cpu):
        other_alone = torch.rand(2)
    first_drew, second_inside, draws = threading.Event(), threading.Event(), {}

    def first():
        with seeded_torch(0, cpu):
            head = torch.rand(2)
            first_drew.set()
            second_inside.wait(1.0)  # it is not let in while this block is open: the wait runs out
            draws["first"] = torch.cat([head, torch.rand(2)])

    def second():
        assert first_drew.wait(10)
        with seeded_torch(1, cpu):  # reseeds the process's generator, were it let in
            second_inside.set()
            draws["second"] = torch.rand(2)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    torch.testing.assert_close(draws["first"], alone, rtol=0, atol=0)
    torch.testing.assert_close(draws["second"], other_alone, rtol=0, atol=0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
@pytest.mark.parametrize("lock", ["skabc._quiet_warnings._WARNINGS_LOCK", "skabc._runtime._SEEDED_LOCK",
                                  "skabc._runtime._DTYPE_LOCK"])
def test_a_child_forked_while_a_thread_holds_a_lock_of_the_package_does_not_hang(lock):
    """A probe (/work/probe35b): forked while another thread clustered (holding the warnings lock), a child waited on
    its copy of that lock for good in its first clustering."""
    import importlib

    from skabc._quiet_warnings import ignoring_warnings
    from skabc._runtime import float32_default

    module_name, name = lock.rsplit(".", 1)
    held, release = threading.Event(), threading.Event()

    def holder():
        with getattr(importlib.import_module(module_name), name):
            held.set()
            release.wait(20)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: every block of the package must open at once
        try:
            with ignoring_warnings(), float32_default(), seeded_torch_cpu():
                pass
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 20
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if done[0] == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0, "the forked child hung on a held lock"
    finally:
        release.set()
        thread.join(10)


def seeded_torch_cpu():
    from skabc._runtime import seeded_torch

    return seeded_torch(0, torch.device("cpu"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_skabc_no_mallopt_leaves_the_allocator_alone(monkeypatch):
    """SKABC_NO_MALLOPT (documented) turns the allocator tuning off: no libc to tune is found."""
    from skabc._runtime import _tunable_libc

    monkeypatch.delenv("SKABC_NO_MALLOPT", raising=False)
    if _tunable_libc() is None:
        pytest.skip("this process was started with allocator settings of its own, or has no glibc")
    monkeypatch.setenv("SKABC_NO_MALLOPT", "1")
    assert _tunable_libc() is None
