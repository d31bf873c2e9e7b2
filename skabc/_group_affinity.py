"""The affinity a fit with ``groups`` keeps: its memory checked as a total, its blocks joined in the rows' order.

Each group is clustered as its own set, and ``affinity_matrix_`` holds every group's affinity as one sparse
``n x n`` matrix (zero between groups).  The kernel's memory check sees one set at a time, so a fit of many groups
that each pass it could still hold more than the machine has: :func:`check_kept_memory` asks the kernel about the
total before any set is clustered.  :func:`join_blocks` builds the matrix block by block, freeing each, with no
permuted copies of the whole.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._validation import format_bytes
from .exceptions import AffinityTooLargeError

#: Memory per kept pair while the blocks are joined, in dense ``float64`` copies (8 bytes): the dense blocks not yet
#: copied, the joined matrix (value and int32 column index) and one block's temporaries.  Measured: 20.1 bytes per
#: pair over the start of a fit with 12 groups of 2,000 rows, ``affinity='rbf'`` (``python
#: benchmarks/group_memory.py``, ``benchmarks/results/group_memory.json``); the rest is margin for the allocator,
#: which does not always hand freed blocks back at once.
KEPT_COPIES = 3.0


def dense_copies(arbiter) -> int:
    """Dense ``n x n`` matrices one set's clustering holds at once: the affinity, the spectral step's Laplacian and
    working copies, and an arbiter's two affinities."""
    return 6 if arbiter else 4


def check_kept_memory(kernel, set_sizes: list[int], arbiter) -> None:
    """Refuse a fit whose groups' affinities, kept together, would not fit where each set alone does.

    ``set_sizes``: the rows each group is clustered on (its subsample past ``max_samples``).  Groups whose affinity
    the kernel returns sparse keep few pairs and are not counted.  The kernel decides, by its own ``check_memory``,
    asked about its largest dense set holding the copies that the kept total amounts to.

    Raises
    ------
    AffinityTooLargeError
        Naming the groups, the pairs kept and what to do instead.
    """
    dense = [n for n in set_sizes if not kernel.returns_sparse(n)]
    if len(dense) < 2:
        return  # one set: its own check, with its own advice, runs when it is clustered
    largest, pairs = max(dense), float(sum(float(n) ** 2 for n in dense))
    try:
        kernel.check_memory(largest, n_copies=dense_copies(arbiter))
    except AffinityTooLargeError:
        return  # the largest set alone is refused when it is clustered, with its own advice
    try:
        kernel.check_memory(largest, n_copies=max(dense_copies(arbiter), KEPT_COPIES * pairs / largest**2))
    except AffinityTooLargeError:
        raise AffinityTooLargeError(
            f"fit with groups keeps every group's affinity in affinity_matrix_: {len(dense)} groups of up to "
            f"{largest} rows hold {pairs:,.0f} pairs, about {format_bytes(8.0 * KEPT_COPIES * pairs)} while they are "
            "joined, more than the kernel allows (its memory_limit; for scikit-learn's affinities, this machine's "
            "memory). predict(X, groups=groups) keeps no affinity; or fit on fewer groups at a time, lower "
            "max_samples, or raise the kernel's memory_limit if the machine has the memory."
        ) from None


def join_blocks(rows_of: list[np.ndarray], blocks: list, n_samples: int) -> sp.csr_matrix:
    """The groups' affinities as one CSR ``n_samples x n_samples`` matrix, each at its group's rows and columns.

    ``rows_of[g]``: the sorted rows of group ``g``; ``blocks[g]``: its affinity (dense or sparse), set to ``None``
    once copied, so that the dense blocks' memory goes while the result fills.  A dense block's zeros are dropped,
    a sparse block's stored entries kept (duplicates summed), as ``scipy.sparse.block_diag`` and a permutation of
    its rows and columns gave them; column indices come sorted.
    """
    counts = np.zeros(n_samples, dtype=np.int64)
    for g, (rows, block) in enumerate(zip(rows_of, blocks, strict=True)):
        if sp.issparse(block):
            block = sp.csr_matrix(block)
            if not block.has_canonical_format:  # summed and sorted in a copy: the kernel's matrix stays as it was
                block = block.copy()
                block.sum_duplicates()
            blocks[g] = block
            counts[rows] = np.diff(block.indptr)
        else:
            blocks[g] = block = np.asarray(block)  # a view of an ndarray: no copy
            counts[rows] = np.count_nonzero(block, axis=1)
    indptr = np.concatenate(([0], np.cumsum(counts)))
    index_dtype = np.int32 if max(int(indptr[-1]), n_samples) < np.iinfo(np.int32).max else np.int64
    # Pages are taken as they are written: the result grows while the dense blocks are freed.
    data = np.empty(int(indptr[-1]), dtype=np.result_type(*(block.dtype for block in blocks)))
    indices = np.empty(int(indptr[-1]), dtype=index_dtype)
    for g, rows in enumerate(rows_of):
        block, blocks[g] = sp.csr_matrix(blocks[g]), None
        # Each entry's place: its row's start in the result, plus its place within that row of the block.
        places = np.repeat(indptr[rows] - block.indptr[:-1], np.diff(block.indptr)) + np.arange(block.nnz)
        data[places] = block.data
        indices[places] = rows[block.indices]  # rows are sorted, so each row's columns stay sorted
    return sp.csr_matrix((data, indices, indptr.astype(index_dtype)), shape=(n_samples, n_samples))
