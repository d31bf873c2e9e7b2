"""Clustering one set or many: per-set seeds fixed before dispatch, joblib (or Dask) over the sets.

Each set is clustered by :func:`_cluster_one` (the kernel's affinity, then the
spectral step); with ``groups``, every group is one set and ids are offset
group after group so they are unique across groups.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Iterable, Mapping
from itertools import pairwise
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from sklearn import config_context
from sklearn.utils import _safe_indexing, check_array, check_random_state
from sklearn.utils._param_validation import validate_parameter_constraints
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples

from ._counting import COUNTING_ARBITERS, count_then_cut, counting_setup
from ._fit_inputs import densify, is_pairwise
from ._group_affinity import check_kept_memory, dense_copies, join_blocks
from ._subsample import clustered_size, draw_rows, extend_labels, spread_affinity
from ._threads import process_pools_restored, single_native_thread
from ._user_warnings import each_warning_once, recording_warnings, warn_user
from ._validation import N_JOBS_CONSTRAINT, add_note
from .exceptions import AffinityTooLargeError, SkabcWarning
from .kernels import as_kernel
from .kernels.base import kernel_affinity
from .kernels.pairwise import PairwiseKernel, PrecomputedKernel
from .spectral import compact
from .spectral.arbiter import WIDE_SET_CANDIDATES, arbiter_for
from .spectral.split import SPLIT_SUFFIX, split_gaussian_clusters


def cluster_groups(model, X, n_samples: int, group_codes, keep_affinity: bool = True):
    """Cluster each group as one set; returns labels, the affinity, k, eigenvalues and chosen candidates per set.

    ``X`` is passed on as the caller gave it (e.g. a DataFrame), so the kernel
    validates it against the feature names it was fitted with.  The groups are
    clustered in parallel over ``n_jobs``; ids are then offset group after group
    so they are unique across groups.  The affinity is the one set's as the kernel returned it, or every group's
    joined into one sparse matrix; ``None`` without ``keep_affinity`` (each set's is dropped once it is clustered).
    """
    grouped = group_codes is not None
    if not grouped:
        group_codes = np.zeros(n_samples, dtype=np.int64)
    groups = np.unique(group_codes)
    seeds = set_seeds(model, len(groups))
    if len(groups) == 1:
        # One set: X itself, not a copy (a precomputed affinity stays the user's matrix), and its
        # labels as the spectral step returned them (SpectralClustering's own, for its affinities).
        set_labels, affinity, found, eigenvalues, chosen = map_sets(model, [X], seeds, model.n_jobs, keep_affinity)[0]
        warn_about_estimates(model, [found], [eigenvalues], [n_samples], [chosen])
        if grouped and keep_affinity:  # sparse with groups, one group or many, as documented
            affinity = join_blocks([np.arange(n_samples)], [affinity], n_samples)
        return set_labels, affinity, [found], [eigenvalues], [chosen]
    rows_of = [np.flatnonzero(group_codes == g) for g in groups]
    if keep_affinity:
        sizes = [clustered_size(len(rows), model.max_samples_) for rows in rows_of]
        check_kept_memory(as_kernel(model.kernel_), sizes, getattr(model, "arbiter_", None))
    if sp.issparse(X):
        X = X.tocsr()  # row-indexable
    if is_pairwise(model.affinity):
        subsets = [_safe_indexing(_safe_indexing(X, rows), rows, axis=1) for rows in rows_of]
    else:
        subsets = [_safe_indexing(X, rows) for rows in rows_of]
    results = map_sets(model, subsets, seeds, model.n_jobs, keep_affinity)
    del subsets
    labels = np.empty(n_samples, dtype=np.int64)
    affinities, n_found, spectra, choices = [], [], [], []
    offset = 0
    for rows, (set_labels, affinity, found, eigenvalues, chosen) in zip(rows_of, results, strict=True):
        # Ids 0..found-1 in every set (already so but for SpectralClustering's), so offsets never collide.
        labels[rows] = offset + compact(set_labels)
        offset += found
        affinities.append(affinity)
        n_found.append(found)
        spectra.append(eigenvalues)
        choices.append(chosen)
    del results, affinity  # the affinities list holds the only references: join_blocks frees each once copied
    warn_about_estimates(model, n_found, spectra, [len(rows) for rows in rows_of], choices)
    joined = join_blocks(rows_of, affinities, n_samples) if keep_affinity else None
    return labels, joined, n_found, spectra, choices


def warn_about_estimates(model, n_found: list, spectra: list, sizes: list, chosen: list) -> None:
    """The warnings on the estimates of ``k`` of one call: a bound reached, sets too small for the generic kernel
    (``chosen``: each set's kept candidate, ``None`` where a counting arbiter kept the affinity's own rule)."""
    warn_at_max_clusters(model, n_found, spectra)
    warn_if_small_sets(model, sizes, chosen)
    warn_if_sparse_generic(model, sizes, chosen)


def warn_at_max_clusters(model, n_found: list, spectra: list | None = None) -> None:
    """Warn where an estimated ``k`` reached ``max_clusters``: the set may hold more clusters than it was allowed.

    A graph of more connected components than ``max_clusters`` can only be cut into ``max_clusters`` pieces by
    merging some of them, and the estimate then says nothing about the real number.  Such a graph shows as
    ``max_clusters + 1`` zero Laplacian eigenvalues in the spectrum the ``k`` rule read (``spectra``, one per
    set), also where the rule settled below the cap (the eigengap of an all-zero spectrum is anywhere).
    """
    step = model.spectral_step_  # the fitted settings: predict clusters with them whatever set_params did since
    if step.n_clusters is not None or step.max_clusters < 2:  # max_clusters=1 asks for one cluster
        return
    spectra = [None] * len(n_found) if spectra is None else spectra
    capped = sum(found >= step.max_clusters or _more_components_than(values, step.max_clusters)
                 for found, values in zip(n_found, spectra, strict=True))
    if capped:
        where = "the set" if len(n_found) == 1 else f"{capped} of {len(n_found)} sets"
        warn_user(f"The estimated number of clusters of {where} reached max_clusters={step.max_clusters}, or its "
                  "spectrum shows more separate groups than that; the data may hold more clusters. Raise "
                  "max_clusters to let the estimate go higher.",
                  SkabcWarning)


#: Fewest rows of a set on which ``ABCClustering()``'s estimate of ``k`` is not known to run high.  The shipped
#: generic kernel was trained on sets of 150 to 500 rows; on smaller ones its affinity links each point to a few
#: neighbours only.  ``benchmarks/small_sets.py`` (``results/small_sets.json``): below 80 rows the estimate ran
#: 1.7-2.1 clusters high on average and found 3 of 20 one-cluster sets as one, above 0.7-0.9 and 10 of 11 (the
#: threshold was read off two throw-away runs at other seeds, before the benchmark ran).
SMALL_SET_ROWS = 80


def warn_if_small_sets(model, sizes: list[int], chosen: list) -> None:
    """Warn where the shipped generic kernel estimated ``k`` on sets of fewer than :data:`SMALL_SET_ROWS` rows (a
    set of one row has one answer); for a counting arbiter, on the sets it counted (``chosen`` not ``None``)."""
    small = [n for n in sizes if 2 <= n < SMALL_SET_ROWS]
    if not small:  # the common case, before any look at the kernel (every fit and predict passes here)
        return
    step = model.spectral_step_
    counted = getattr(model, "arbiter_", None) in COUNTING_ARBITERS  # k from the generic kernel, cut elsewhere
    # Not the sets a counting arbiter did not count (too wide, or too few distinct rows: candidate None), nor those
    # whose kNN graph counted without the kernel.
    small = [n for n, kept in zip(sizes, chosen, strict=True)
             if 2 <= n < SMALL_SET_ROWS and not (counted and kept is None) and _counted_by_kernel(model, kept, n)]
    if not small:
        return
    if step.n_clusters is None and step.max_clusters >= 2 and (counted or is_shipped_generic(model.kernel_)):
        where = f"a set of {small[0]} rows" if len(sizes) == 1 else (
            f"{len(small)} of {len(sizes)} sets of fewer than {SMALL_SET_ROWS} rows (the smallest {min(small)})")
        warn_user(f"The number of clusters was estimated on {where}: the shipped generic kernel was trained on sets "
                  f"of 150 to 500 rows and tends to over-estimate k on sets of fewer than {SMALL_SET_ROWS} rows (the "
                  "guide's 'Small sets'). Pass n_clusters where you know it.", SkabcWarning)


def warn_if_sparse_generic(model, sizes: list[int], chosen: list) -> None:
    """Warn where the shipped generic kernel estimated ``k`` on its sparse affinity (sets of more than 10,000 rows
    clustered whole, as ``max_samples=None`` does, or ``affinity_mode='sparse'``): its top-k
    graph over-counts there (4 blobs of 6,000 points: k = 23 sparse, 4 dense; ``docs/scaling_results.md``)."""
    step = model.spectral_step_
    if step.n_clusters is not None or step.max_clusters < 2 or getattr(model, "arbiter_", None) in COUNTING_ARBITERS:
        return
    kernel = as_kernel(model.kernel_)
    clustered = [clustered_size(n, model.max_samples_) for n in sizes]
    sparse = [n for n, kept in zip(clustered, chosen, strict=True)
              if n > 1 and kernel.returns_sparse(n) and _counted_by_kernel(model, kept, n)]
    if sparse and is_shipped_generic(kernel):
        where = f"a set of {sizes[0]} rows" if len(sizes) == 1 else f"{len(sparse)} of {len(sizes)} sets"
        # The remedy by the cause: the kernel's mode, or a set clustered whole past the sparse mode's threshold.
        instead = ("set the kernel's affinity_mode to 'auto' (dense up to 10,000 rows)"
                   if getattr(kernel, "affinity_mode", None) == "sparse" else
                   "keep the default max_samples (the set is then clustered on a subsample, densely)")
        warn_user(f"The number of clusters was estimated on the sparse affinity of {where}: the shipped generic "
                  f"kernel's sparse graph tends to over-estimate k (the guide's 'Large sets'). Pass n_clusters, or "
                  f"{instead}.", SkabcWarning)


def _counted_by_kernel(model, kept, n_rows: int) -> bool:
    """Whether the generic kernel's candidates counted the ``k`` of a set of ``n_rows`` (clustered) rows that kept
    candidate ``kept``: not where its arbiter (the counting one for a scikit-learn affinity) kept the kNN graph of a
    set beyond its forest's training sets, without them.  A set that could span more dimensions (more columns and
    rows than ``max_features``) and kept that candidate is taken for one."""
    name = getattr(model, "arbiter_", None)
    if name is None or kept is None:
        return True
    step = model.spectral_step_
    arbiter = counting_setup(name, step)[2] if name in COUNTING_ARBITERS else arbiter_for(name, step)
    base = kept.removeprefix("affinity-at-").removesuffix(SPLIT_SUFFIX)
    return not (base in WIDE_SET_CANDIDATES.values() and arbiter.max_features is not None
                and min(getattr(model, "n_features_in_", 0), n_rows - 1) > arbiter.max_features)


def is_shipped_generic(kernel) -> bool:
    """The generic kernel as shipped, however given (``kernel=None``, ``pretrained.load``, ``from_pretrained``, a
    saved model): it recommends the generic arbiter and has trained on no sets here, which a fine-tune has."""
    inner = as_kernel(kernel)
    return getattr(inner, "n_training_sets_", None) == 0 and inner.recommended_clustering().get("arbiter") == "generic"


#: A Laplacian eigenvalue below this is a (near-)separate component: a normalised cut of 1e-4 or less.  Learned
#: affinities are dense, so their components show as 1e-10 to 1e-7, not as the exact zeros of a kNN graph.
NEAR_ZERO_EIGENVALUE = 1e-4


def _more_components_than(eigenvalues, max_clusters: int) -> bool:
    values = None if eigenvalues is None else np.asarray(eigenvalues, dtype=np.float64).ravel()
    return values is not None and values.size > max_clusters and bool(values[max_clusters] < NEAR_ZERO_EIGENVALUE)


def set_seeds(model, n_sets: int) -> list:
    """Per-set seeds of ``n_sets`` sets (groups, or ``predict_many``'s sets), each drawn as for that set alone.

    An int ``random_state`` gives every set the seeds ``predict`` gives it alone, so a group's labels are those of
    clustering the group by itself (up to the offset of its ids); a ``RandomState`` or ``None`` is drawn from set
    after set, as by successive calls.  Drawn before any work is dispatched, so scheduling cannot change them:
    of several sets, none is handed the ``RandomState`` itself (with ``n_jobs > 1`` every worker drew from a copy
    of it, and the labels changed with ``n_jobs``).
    """
    shared = n_sets == 1 or isinstance(model.random_state, Integral)
    return [draw_seeds(model, check_random_state(model.random_state), 1, shared)[0] for _ in range(n_sets)]


def draw_seeds(model, rng, n_sets: int, shared: bool = True) -> list:
    """Per-set ``(eigengap seed or None, spectral seed)``, drawn in the order of the serial loop.

    Read from the fitted spectral step (``n_clusters``, and whether it is SpectralClustering's own), not the
    parameters, which ``set_params`` may have changed since: the seeds then moved while the algorithm stayed.
    """
    step = model.spectral_step_
    if n_sets == 1 and shared and step.follows_sklearn:
        # Seeded as SpectralClustering seeds itself: random_state untouched, for one RandomState
        # shared by the eigensolver and the assignment.
        return [(None, model.random_state)]
    seeds = []
    for _ in range(n_sets):
        eig_seed = None if step.n_clusters is not None else int(rng.randint(2**31 - 1))
        seeds.append((eig_seed, int(rng.randint(np.iinfo(np.int32).max))))
    return seeds


def check_n_jobs(n_jobs):
    """``predict_many``'s ``n_jobs`` checked as the constructor's is (joblib's own errors name neither)."""
    validate_parameter_constraints({"n_jobs": N_JOBS_CONSTRAINT}, {"n_jobs": n_jobs}, caller_name="predict_many")
    return n_jobs


def validate_each(validate, sets) -> list:
    """Each of ``sets`` through ``validate``; an error names the set by its position (one bad set among hundreds)."""
    validated = []
    for position, X in enumerate(sets):
        if X is None:  # check_array read it as the scalar NaN
            raise TypeError(f"set {position} is None; each set is an array-like of rows.")
        try:
            validated.append(validate(X))
        except (ValueError, TypeError) as error:
            if error.args and isinstance(error.args[0], str) and type(error).__str__ is BaseException.__str__:
                error.args = (f"set {position}: {error.args[0]}", *error.args[1:])
            else:  # a message not made of its first argument: said beside it
                add_note(error, f"(in set {position} of predict_many's sets)")
            raise
    return validated


def check_sets(sets):
    """``predict_many``'s ``sets``: an iterable of sets, not one set (whose rows it would take for sets)."""
    one_set = (sp.issparse(sets) or isinstance(sets, (str, bytes, Mapping))
               or (isinstance(sets, np.ndarray) and sets.ndim < 3) or hasattr(sets, "iloc"))
    if one_set or not isinstance(sets, Iterable):
        raise TypeError(f"predict_many takes an iterable of sets (e.g. a list of arrays), got a "
                        f"{type(sets).__name__}; to cluster one set use predict(X).")
    return sets


def warn_if_more_clusters_than_points(n_clusters: int | None, sets: list, max_samples: int | None) -> None:
    """Say once per call where ``n_clusters`` exceeds the points of a set: only singletons make that many clusters."""
    if n_clusters is None:
        return
    # A set past max_samples is clustered on that many rows (fit refuses a max_samples below n_clusters).
    clustered = [min(_num_samples(X), max_samples or _num_samples(X)) for X in sets]
    short = [n for n in clustered if n < n_clusters]
    if not short:
        return
    if len(sets) == 1:
        plural = "s" if short[0] != 1 else ""
        what = f"the {short[0]} point{plural} of the set; every point becomes its own cluster"
    else:
        sizes = f"{min(short)} to {max(short)} points" if min(short) != max(short) else (
            f"{short[0]} point{'s' if short[0] != 1 else ''}")
        what = (f"the points of {len(short)} of {len(sets)} sets ({sizes}); every point of such a set becomes its own "
                "cluster")
    warn_user(f"n_clusters={n_clusters} is more than {what}.", SkabcWarning)


def map_sets(model, sets: list, seeds: list, n_jobs, keep_affinity: bool = True) -> list:
    """Cluster each set, in order: in this process for one set, else with joblib; a remark every set makes is
    said once.  Without ``keep_affinity`` each set's affinity is ``None``, dropped as soon as the set is clustered
    (so many sets never hold their affinities at once)."""
    with each_warning_once():
        return _map_sets(model, sets, seeds, n_jobs, keep_affinity)


def _map_sets(model, sets: list, seeds: list, n_jobs, keep_affinity: bool) -> list:
    kernel, max_samples = model.kernel_, model.max_samples_
    # The arbiter travels as its name (each process reads the shipped file once).
    clustering = (model.spectral_step_, getattr(model, "arbiter_", None))
    if clustering[1] in COUNTING_ARBITERS and isinstance(model.random_state, Integral):
        # The counted k cuts the affinity seeded exactly as SpectralClustering(n_clusters=k) would be: every
        # set alike, so predict_many(sets)[i] stays predict(sets[i]).
        clustering = (*clustering, model.random_state)
    warn_if_more_clusters_than_points(model.spectral_step_.n_clusters, sets, max_samples)
    if len(sets) == 1:
        return [_kept(_cluster_one(kernel, clustering, sets[0], *seeds[0], max_samples), keep_affinity)]
    # Only the fitted kernel and the spectral settings travel, not labels_ or affinity_matrix_.
    # A few contiguous chunks per worker: the kernel is pickled once per chunk, not once per set.
    if n_jobs == 0:  # the constructor takes it (and False), as SpectralClustering's does
        raise ValueError(f"n_jobs={n_jobs!r} clusters no set at a time: use None or 1 (one at a time) or -1 (all "
                         "processors) to cluster several sets.")
    workers = effective_n_jobs(n_jobs)
    n_chunks = min(len(sets), 4 * workers)
    bounds = np.linspace(0, len(sets), n_chunks + 1).astype(int)
    caller = (os.getpid(), threading.get_ident())
    tasks = (delayed(_cluster_chunk)(kernel, clustering, sets[a:b], seeds[a:b], max_samples, caller, keep_affinity)
             for a, b in pairwise(bounds))
    # No more workers than chunks: n_jobs=48 started 48 processes for 2 sets (20x slower); 10**6 broke joblib.
    # The caller's filters are restored after the workers: blocks of other libraries in the worker threads (scikit-learn
    # opens one per check_array call) overlap without a lock and leave each other's filters behind.
    with warnings.catch_warnings(), process_pools_restored():
        chunks = Parallel(n_jobs=max(1, min(workers, n_chunks)))(tasks)  # no sets: no chunks, one idle worker
    # Warnings raised in a worker process never reach the caller's filters, and those of a worker thread would point
    # into the thread pool: each chunk there records its own, and they are raised again here, once each at the
    # caller's line, so catch_warnings and simplefilter('error') see the same with any n_jobs or joblib backend
    # (filters by category or message; one by module sees the caller's).  Not always under Dask: a worker of one thread
    # ran two chunks at once in two (probe 46c), the filters are process-global, the chunks' recording blocks overlapped
    # and some warnings printed there; a lock around the blocks deadlocked that worker (the first chunk never ended).
    for _, caught in chunks:
        for category, message in caught:
            warn_user(message, category)
    return [result for chunk, _ in chunks for result in chunk]


def _kept(result: tuple, keep_affinity: bool) -> tuple:
    """One set's result, its affinity replaced by ``None`` unless kept."""
    return result if keep_affinity else (result[0], None, *result[2:])


#: Most rows of a set whose spectral step, arbiter and Gaussian split run with one native thread: their
#: eigensolves, kNN graphs, forests and mixtures are too small to split, and idle pool threads spin (on two cores
#: 1.4-1.8x slower at 200-1,000 rows), while the dense eigensolves of 2,000 rows gain from a second thread.
SINGLE_THREAD_ROWS = 1000


def _native_threads_for(n_rows: int):
    """One native thread for a set of at most :data:`SINGLE_THREAD_ROWS` rows, else the pools as they are."""
    return single_native_thread() if n_rows <= SINGLE_THREAD_ROWS else contextlib.nullcontext()


def _cluster_one(kernel, clustering: tuple, X, eig_seed, seed: int, max_samples: int | None = None):
    """Cluster one set: the kernel's affinity, then the spectral step (on a subsample past ``max_samples``),
    then, where the step says so, the split of its clusters that are two touching Gaussian blobs (whole set).

    ``clustering``: the :class:`~skabc.spectral.SpectralStep`, the arbiter's name (or ``None``) and, for a
    counting arbiter, optionally the int ``random_state`` its cut is seeded with.
    Returns (labels from 0, affinity, k found, eigenvalues, the candidate the
    arbiter kept or ``None``).  A module-level
    function so joblib can ship it, with the fitted kernel, to worker processes
    or Dask workers.
    """
    result = _partition_one(kernel, clustering, X, eig_seed, seed, max_samples)
    step = clustering[0]
    if not step.gaussian_split:
        return result
    labels, affinity, _, eigenvalues, chosen = result
    with _native_threads_for(_num_samples(X)):
        split = split_gaussian_clusters(X, labels, step.max_clusters)  # it validates X as any array-like
    if split is labels:
        return result
    if step.verbose:
        print(f"gaussian split: {int(labels.max()) + 1} clusters -> {int(split.max()) + 1} (two touching Gaussian "
              "blobs each)")
    return split, affinity, int(split.max()) + 1, eigenvalues, None if chosen is None else chosen + SPLIT_SUFFIX


def _partition_one(kernel, clustering: tuple, X, eig_seed, seed: int, max_samples: int | None = None):
    rows = draw_rows(_num_samples(X), max_samples, seed)
    if rows is not None:
        subset = _safe_indexing(X, rows)
        try:
            labels, affinity, found, eigenvalues, chosen = _partition_one(kernel, clustering, subset, eig_seed,
                                                                          seed)
        except AffinityTooLargeError as error:  # the set is the subsample: its size is the user's max_samples
            raise AffinityTooLargeError(f"{error} This set of {_num_samples(X)} rows was clustered on a subsample "
                                        f"of max_samples={max_samples} rows: a lower max_samples needs less.") from None
        # Ids in order of first appearance over the whole set, as for a set clustered whole.
        return (compact(extend_labels(X, rows, labels)), spread_affinity(affinity, rows, _num_samples(X)), found,
                eigenvalues, chosen)
    if isinstance(kernel, (PairwiseKernel, PrecomputedKernel)):
        # ABCClustering validated every parameter scikit-learn's functions get here; skip their own
        # validation, as SpectralClustering.fit does (_fit_context), so the drop-in costs no more.
        with config_context(skip_parameter_validation=True):
            return _cluster_one_set(kernel, clustering, X, eig_seed, seed)
    return _cluster_one_set(kernel, clustering, X, eig_seed, seed)


def _cluster_one_set(kernel, clustering: tuple, X, eig_seed, seed: int):
    step, arbiter, *cut_random_state = clustering
    chosen = (arbiter_for(arbiter, step, own_kernel=is_shipped_generic(kernel))
              if arbiter is not None and arbiter not in COUNTING_ARBITERS else None)
    if chosen is not None and (wide := chosen.kernel_free_candidate(step, rows := _float_rows(X))) is not None:
        with _native_threads_for(rows.shape[0]):  # beyond its forest's sets: the kNN graph alone
            return chosen.cluster_wide(step, rows, wide, eig_seed, seed)
    if sp.issparse(X) and not isinstance(kernel, (PairwiseKernel, PrecomputedKernel)):
        X = densify(X, kernel)  # this set (or subsample) only: a learned kernel reads dense rows
    kernel = as_kernel(kernel)
    n = _num_samples(X)
    if not kernel.returns_sparse(n):
        # The affinity plus the spectral step's Laplacian and working copies (the arbiter's two affinities: more).
        kernel.check_memory(n, n_copies=dense_copies(arbiter))
    affinity = kernel_affinity(kernel, X)  # outside the limit: a forward pass splits well (a counting arbiter's
    # pass of the generic kernel, below, runs inside it: on 1,000 rows still faster than before, review 67c)
    with _native_threads_for(n):
        if arbiter in COUNTING_ARBITERS:
            return count_then_cut(arbiter, step, affinity, X, eig_seed, seed, *cut_random_state)
        if arbiter is not None:
            return chosen.cluster(step, affinity, _float_rows(X), eig_seed, seed)
        return (*step.cluster(affinity, eig_seed, seed), None)


def _float_rows(X):
    """A set's rows as an arbiter reads them: floats as the kernel reads them (numeric strings too, as
    SpectralClustering takes them); sparse ones a copy (scipy sums a CSR's duplicates in place)."""
    return check_array(X, accept_sparse="csr", dtype=(np.float64, np.float32), copy=sp.issparse(X))


def _cluster_chunk(kernel, clustering: tuple, sets: list, seeds: list, max_samples: int | None,
                   caller: tuple[int, int], keep_affinity: bool = True) -> tuple:
    """``_cluster_one`` over a chunk of sets, in order (one joblib task), and the warnings they raised.

    ``caller``: the process id and thread id of the caller.  On its own thread (one job) the warnings are raised
    as they come; on another thread of its process (joblib's threading backend) the package's are recorded by a
    context variable (a ``catch_warnings`` block would swap the process-global filters under threads running in
    parallel); in another process every warning is recorded.
    """
    def run() -> list:
        return [_kept(_cluster_one(kernel, clustering, X, *seed, max_samples), keep_affinity)
                for X, seed in zip(sets, seeds, strict=True)]

    if os.getpid() == caller[0]:
        if threading.get_ident() == caller[1]:
            return run(), []
        with recording_warnings() as caught:
            results = run()
        return results, caught
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # the caller's filters decide when map_sets raises them again
        results = run()
    return results, [(w.category, str(w.message)) for w in caught]
