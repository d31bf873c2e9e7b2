"""Shared fixtures: tiny, fast settings and small labelled data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from skabc import ContextualKernel

# Tests run on CPU with tiny models; one thread keeps timings stable on a 2-core CI box.
torch.set_num_threads(1)

#: Property-based tests draw the same examples on every run, so that a run of CI is red only for a change it tests;
#: ``SKABC_FUZZ_EXPLORE=1 pytest ...`` draws new ones (the forged-file fuzzing found a defect that way).
FUZZ_DERANDOMIZE = not os.environ.get("SKABC_FUZZ_EXPLORE")

TINY = dict(d_model=16, n_heads=2, n_blocks=1, set_size=(10, 40), sets_per_epoch=16, batch_size=8,
            max_epochs=1, random_state=0, device="cpu")


def make_blob_sets(n_sets=40, set_size=30, max_clusters=4, spread=0.08, random_state=0):
    """Sets of well-separated Gaussian blobs, 1..max_clusters per set; returns X, y, groups."""
    rng = np.random.default_rng(random_state)
    X, y, groups = [], [], []
    for g in range(n_sets):
        k = rng.integers(1, max_clusters + 1)
        centers = rng.uniform(-1, 1, (k, 2))
        labels = rng.integers(0, k, set_size)
        X.append(centers[labels] + spread * rng.normal(size=(set_size, 2)))
        y.append(labels)
        groups.append(np.full(set_size, g))
    return np.concatenate(X), np.concatenate(y), np.concatenate(groups)


def read_meta(path) -> dict:
    """The ``skabc`` description of a saved safetensors file."""
    with safe_open(str(path), framework="pt") as f:
        return json.loads(f.metadata()["skabc"])


def read_tensors(path) -> dict:
    """A file's tensors as copies: ``load_file`` maps the file, and a forgery written over it would change them
    under the test (a bus error with safetensors 0.4)."""
    return {name: value.clone() for name, value in load_file(str(path)).items()}


def forge(path, meta=None, tensors=None, raw=None) -> Path:
    """Write a safetensors file with the given description (or raw metadata string) and tensors."""
    save_file(tensors, str(path), metadata={"skabc": raw if raw is not None else json.dumps(meta)})
    return path


@pytest.fixture(scope="session")
def blob_data():
    return make_blob_sets()


@pytest.fixture(scope="session")
def tiny_kernel(blob_data):
    X, y, groups = blob_data
    return ContextualKernel(**TINY).fit(X, y, groups=groups)


@pytest.fixture(scope="session")
def tiny_kernel_seed_1(blob_data):
    """A second tiny kernel, from another seed (e.g. to build a KernelEnsemble)."""
    X, y, groups = blob_data
    return ContextualKernel(**{**TINY, "random_state": 1}).fit(X, y, groups=groups)


def same_matrix(left, right, atol=1e-6):
    """Assert two sparse matrices have the same pattern and (within atol) the same values."""
    left, right = left.tocsr(), right.tocsr()
    left.sort_indices()
    right.sort_indices()
    assert left.shape == right.shape
    assert np.array_equal(left.indptr, right.indptr)
    assert np.array_equal(left.indices, right.indices)
    assert np.allclose(left.data, right.data, rtol=0, atol=atol)
