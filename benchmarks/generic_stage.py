"""One checkpointed training stage of the generic kernel, and its export: the skeleton every generic recipe shares.

A stage draws a pool of synthetic sets, trains a network (every weight, or those a ``trained`` prefix names)
through :func:`skabc.training.net.make_net` with skorch checkpoints every epoch, resumes from them, and adds
its CPU time to ``time.json`` in the checkpoint folder, so a run split into shorter ones loses nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from skabc import ContextualKernel
from skabc.datasets import make_clustering_sets


def run_stage(kernel_params: dict, directory: Path, pool: dict, families: dict, seed: int, threads: int,
              build: Callable[[ContextualKernel], torch.nn.Module], *, trained: tuple | None = None, criterion=None,
              stage: str = "stage") -> dict:
    """Train the network ``build(kernel)`` returns (called inside the seeded block) and record the run.

    ``trained``: prefixes of the parameters that train (the others frozen); ``None``: all of them.
    ``criterion``: the loss (default: the kernel's BCE).  Returns the ``time.json`` record.
    """
    from skorch.callbacks import Freezer

    from skabc._runtime import seeded_torch, tune_allocator
    from skabc.nn.build import set_transform
    from skabc.sampling import ClusterSetSampler, SampledSetsDataset
    from skabc.training.net import make_net

    torch.set_num_threads(threads)
    tune_allocator()  # whole sets of at most 500 points: the raised mmap threshold is safe and faster
    begin = time.perf_counter()
    X, y, groups = make_clustering_sets(**pool, families=families, random_state=seed)
    print(f"pool: {len(np.unique(groups))} sets, {len(X)} rows ({time.perf_counter() - begin:.0f} s)", flush=True)
    kernel = ContextualKernel(**kernel_params, checkpoint_dir=directory, verbose=1)
    steps = kernel.max_epochs * -(-kernel.sets_per_epoch // kernel.batch_size)
    dataset = SampledSetsDataset(X.astype(np.float32), ClusterSetSampler(y, groups, kernel.set_size),
                                 kernel.sets_per_epoch, kernel.batch_size, seed, set_transform=set_transform(kernel))
    history = directory / "history.json"
    done = len(json.loads(history.read_text())) if history.exists() else 0
    directory.mkdir(parents=True, exist_ok=True)
    timing = directory / "time.json"
    earlier = json.loads(timing.read_text()) if timing.exists() else {"cpu_seconds": 0.0, "runs": 0}
    cpu = time.process_time()
    with seeded_torch(seed, torch.device("cpu")):
        net = make_net(kernel, build(kernel), torch.device("cpu"), steps, criterion=criterion)
        if trained is not None:
            net.callbacks.append(("freeze", Freezer(lambda name: not name.startswith(trained), at=lambda net: True)))
        net.initialize()
        if done < kernel.max_epochs:
            net.partial_fit(dataset, y=None, epochs=kernel.max_epochs - done)
    record = {"stage": stage, "epochs": len(net.history), "threads": threads,
              "training_wall_seconds": float(sum(net.history[:, "dur"])),
              "cpu_seconds": earlier["cpu_seconds"] + time.process_time() - cpu, "runs": earlier["runs"] + 1}
    timing.write_text(json.dumps(record))
    print(f"{stage}: {record}")
    return record


def checkpoint_kernel(kernel_params: dict, directory: Path) -> ContextualKernel:
    """A kernel of ``kernel_params`` holding the latest checkpoint's weights in ``directory``."""
    from skabc.kernels._contextual_io import load_weights

    kernel = ContextualKernel(**kernel_params)
    state = torch.load(directory / "params.pt", map_location="cpu", weights_only=True)
    load_weights(kernel, kernel_params["canonical_features"], state, "cpu")
    return kernel


def export_checkpoint(kernel_params: dict, directory: Path, path: str) -> None:
    """The latest checkpoint in ``directory`` as a kernel file, with the shipped generic kernel's settings."""
    from pretrained_settings import SETTINGS

    kernel = checkpoint_kernel(kernel_params, directory)
    kernel.recommended_clustering_ = dict(SETTINGS["generic"])
    kernel.save(path)
    history = json.loads((directory / "history.json").read_text())
    print(f"exported epoch {len(history)} (train loss {history[-1].get('train_loss'):.4f}) to {path}")
