"""One checkpointed training stage of the generic kernel, and its export: the skeleton every generic recipe shares.

A stage draws a pool of synthetic sets, trains a network (every weight, or those a ``trained`` prefix names)
through :func:`skabc.training.net.make_net` with skorch checkpoints every epoch, resumes from them, and adds
its CPU time to ``time.json`` in the checkpoint folder, so a run split into shorter ones loses nothing.

Recipes that draw a new prior pool every epoch (v5, v6) share :class:`FreshPoolDataset`, the budgeted epoch loop
:func:`train_fresh_pools`, the held-out BCE of a checkpoint and the command line :func:`recipe_main`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from skabc import ContextualKernel
from skabc.datasets import make_clustering_sets
from skabc.sampling import SampledSetsDataset


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
    from skabc.sampling import ClusterSetSampler
    from skabc.training.net import make_net

    torch.set_num_threads(threads)
    tune_allocator()  # whole sets of at most 500 points: the raised mmap threshold is safe and faster
    # Before the pool is drawn (minutes): a folder of another configuration is refused at once.
    check_recipe_config(directory, {"kernel": kernel_params, "pool": pool, "families": families, "seed": seed,
                                    "trained": trained, "criterion": type(criterion).__qualname__, "stage": stage})
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
            with noting_ctrl_c() as pressed:
                net.partial_fit(dataset, y=None, epochs=kernel.max_epochs - done)
            if pressed:
                stop_interrupted(directory)
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
    state = torch.load(latest_weights_file(directory), map_location="cpu", weights_only=True)
    load_weights(kernel, kernel_params["canonical_features"], state, "cpu")
    return kernel


def latest_weights_file(directory: Path) -> Path:
    """The weights file of the latest checkpoint in ``directory`` (the one its history names), as the package
    resumes from it: ``params.<epoch>.pt``, or an earlier version's single ``params.pt``."""
    from skabc.training.callbacks import checkpoint_file

    history = directory / "history.json"
    if not history.is_file():
        raise SystemExit(f"{directory} holds no checkpoint (no history.json): train first (--train)")
    return checkpoint_file(directory, "f_params", len(json.loads(history.read_text())))


def check_recipe_config(directory: Path, config: dict) -> None:
    """Refuse to resume ``directory`` under another configuration than the one that started it.

    The package's own resume check (``checkpointed_epochs``) reads a fit's parameters and data; a recipe trains
    through ``make_net`` and ``partial_fit`` instead, so it records what fixes its run (the kernel's parameters,
    seed, prior, dataset and loss) in ``recipe.json`` and compares every later run with it.  A folder that has
    checkpoints but no record (an earlier version's) adopts this run's, with a note.
    """
    record, current = directory / "recipe.json", json.loads(json.dumps(config, sort_keys=True, default=repr))
    if not record.exists():
        if (directory / "history.json").exists():
            print(f"note: {directory} has checkpoints but no recipe.json; recording this run's configuration",
                  flush=True)
        directory.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(current, indent=1, sort_keys=True))
        return
    saved = json.loads(record.read_text())
    changed = sorted(k for k in saved.keys() | current.keys() if saved.get(k) != current.get(k))
    if changed:
        raise SystemExit(f"{directory} was started with another configuration ({', '.join(changed)} differ, "
                         f"see {record}); a resume under it would mix two runs. Use another folder, or remove "
                         "this one to start afresh.")


@contextlib.contextmanager
def noting_ctrl_c():
    """Yield a list that Ctrl-C (SIGINT) appends to, raising ``KeyboardInterrupt`` as usual: skorch's
    ``partial_fit`` ends quietly on it, wherever in the epoch it lands (its end and checkpoint included)."""
    pressed: list[bool] = []

    def handler(signum, frame):
        pressed.append(True)
        signal.default_int_handler(signum, frame)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)


def stop_interrupted(directory: Path) -> None:
    """Say what a Ctrl-C left behind, and exit as an interrupted program does."""
    print(f"interrupted: the last whole checkpoint in {directory} is kept; run the same command to resume",
          flush=True)
    raise SystemExit(130)


def export_checkpoint(kernel_params: dict, directory: Path, path: str) -> None:
    """The latest checkpoint in ``directory`` as a kernel file, with the shipped generic kernel's settings."""
    from pretrained_settings import SETTINGS

    kernel = checkpoint_kernel(kernel_params, directory)
    kernel.recommended_clustering_ = dict(SETTINGS["generic"])
    kernel.save(path)
    history = json.loads((directory / "history.json").read_text())
    print(f"exported epoch {len(history)} (train loss {history[-1].get('train_loss'):.4f}) to {path}")


class FreshPoolDataset(SampledSetsDataset):
    """``n_sets`` whole prior sets per epoch, a new pool every epoch; epoch ``e`` depends only on ``seed + e``.

    Each training set is one whole pool set (subsets distort the densities the local geometry describes);
    batches group sets of similar size (less padding) and their order is shuffled.  ``set_transform`` (the
    kernel's input transform) is given by :func:`train_fresh_pools`.
    """

    def __init__(self, n_sets: int, batch_size: int, seed: int, families: dict, pool: dict) -> None:
        self.n_sets, self.batch_size, self.seed = int(n_sets), int(batch_size), int(seed)
        self.families, self.pool = dict(families), dict(pool)
        self.set_transform = None
        self.epoch, self._drawn_epoch, self._sets = 0, None, []

    def epoch_sets(self) -> list:
        """This epoch's ``(X, y)`` sets (a recipe with another mixture overrides this, not the batching)."""
        return draw_sets(self.n_sets, self.families, self.pool, self.seed + self.epoch)

    def _draw(self) -> None:
        sets = self.epoch_sets()
        by_size = sorted(range(len(sets)), key=lambda i: len(sets[i][1]))
        batches = [by_size[i:i + self.batch_size] for i in range(0, len(by_size), self.batch_size)]
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(batches))
        self._sets = [sets[i] for b in order for i in batches[b]]
        self._drawn_epoch = self.epoch

    def __getitem__(self, i: int):
        if self._drawn_epoch != self.epoch:
            self._draw()
        points, labels = self._sets[i]
        return self.set_transform(points), labels


def train_fresh_pools(kernel_params: dict, directory: Path, build: Callable[[ContextualKernel], torch.nn.Module],
                      dataset: FreshPoolDataset, seed: int, cpu_budget_seconds: float, threads: int,
                      stop_after_minutes: float | None, label: str,
                      on_initialized: Callable | None = None, criterion: torch.nn.Module | None = None) -> dict:
    """Train (or resume) one epoch at a time until the schedule, the CPU budget or the wall-time stop ends.

    ``time.json`` in ``directory`` adds up every run's CPU time after every epoch, so an interrupted run loses
    at most one epoch's count.  ``build(kernel)`` gives the network (called inside the seeded block); a
    checkpoint in ``directory`` replaces its weights when training resumes; ``on_initialized(net)``, if given,
    runs once the net (and its optimizer) exists; ``criterion`` replaces the same-cluster BCE.  Returns the
    ``time.json`` record.
    """
    from skabc._runtime import seeded_torch, tune_allocator
    from skabc.nn.build import set_transform
    from skabc.training.net import make_net

    torch.set_num_threads(threads)
    tune_allocator()
    check_recipe_config(directory, {"kernel": kernel_params, "seed": seed, "label": label,
                                    "dataset": [type(dataset).__qualname__, dataset.n_sets, dataset.batch_size,
                                                dataset.seed, dataset.families, dataset.pool],
                                    "criterion": type(criterion).__qualname__, "build": getattr(build, "__name__", "")})
    timing = directory / "time.json"
    record = json.loads(timing.read_text()) if timing.exists() else {"cpu_seconds": 0.0, "runs": 0}
    record["runs"] += 1
    spent_before, cpu, wall = record["cpu_seconds"], time.process_time(), time.perf_counter()
    kernel = ContextualKernel(**kernel_params, checkpoint_dir=directory, verbose=1)
    dataset.set_transform = set_transform(kernel)
    epochs = kernel_params["max_epochs"]
    total_steps = epochs * (kernel_params["sets_per_epoch"] // kernel_params["batch_size"])
    with seeded_torch(seed, torch.device("cpu")):
        net = make_net(kernel, build(kernel), torch.device("cpu"), total_steps, criterion=criterion)
        net.initialize()
        if on_initialized is not None:
            on_initialized(net)
        while True:
            history = directory / "history.json"
            done = len(json.loads(history.read_text())) if history.exists() else 0
            spent = spent_before + time.process_time() - cpu
            out_of_time = stop_after_minutes is not None and time.perf_counter() - wall > 60 * stop_after_minutes
            if done >= epochs or spent >= cpu_budget_seconds or out_of_time:
                break
            with noting_ctrl_c() as pressed:
                net.partial_fit(dataset, y=None, epochs=1)  # one at a time: time.json counts every epoch
            if pressed:
                stop_interrupted(directory)
            record.update(cpu_seconds=spent_before + time.process_time() - cpu, epochs=len(net.history),
                          threads=threads, train_loss=float(net.history[-1, "train_loss"]))
            timing.write_text(json.dumps(record))
    print(f"{label}: {record}", flush=True)
    return record


def held_out_bce(kernel: ContextualKernel, sets: list) -> float:
    """Mean same-cluster BCE of ``kernel``'s network over ``sets`` (each set its own batch)."""
    from skabc.nn.build import set_transform
    from skabc.nn.loss import SameClusterBCELoss
    from skabc.sampling import collate_sets

    transform, criterion, module = set_transform(kernel), SameClusterBCELoss(None), kernel.module_.eval()
    losses = []
    with torch.inference_mode():
        for X, y in sets:
            batch, labels = collate_sets([(transform(X), y)])
            losses.append(float(criterion(module(**batch), labels)))
    return float(np.mean(losses))


def evaluate_checkpoint(kernel_params: dict, directory: Path, sets: list, shipped: Path) -> dict:
    """Held-out BCE of the latest checkpoint in ``directory`` and of the ``shipped`` kernel file over ``sets``."""
    torch.set_num_threads(1)
    candidate = checkpoint_kernel(kernel_params, directory)
    history = json.loads((directory / "history.json").read_text())
    result = {"epochs": len(history), "candidate_bce": held_out_bce(candidate, sets),
              "shipped_bce": held_out_bce(ContextualKernel.load(shipped, device="cpu"), sets)}
    timing = directory / "time.json"
    if timing.exists():
        result["cpu_seconds"] = json.loads(timing.read_text())["cpu_seconds"]
    print(json.dumps(result), flush=True)
    return result


def draw_sets(n_sets: int, families, pool: dict, seed: int) -> list:
    """``n_sets`` whole sets of :func:`skabc.datasets.make_clustering_sets` drawn from ``seed``, as (X, y) pairs."""
    X, y, groups = make_clustering_sets(n_sets=n_sets, families=families, random_state=seed, **pool)
    return [(X[groups == g], y[groups == g]) for g in np.unique(groups)]


def prior_validation_sets(families: dict, pool: dict, seed: int, n_sets: int = 128) -> list:
    """``n_sets`` held-out sets of a recipe's training prior, drawn from ``seed``, as (X, y) pairs."""
    return draw_sets(n_sets, families, pool, seed)


def recipe_main(argv, description: str, *, train: Callable, kernel_params: dict, directory: Path, shipped: Path,
                validation_sets: Callable[[], list], extra_groups: Callable[[Path], dict], out: Path) -> int:
    """The command line of a fresh-pool recipe: ``--train``, ``--evaluate``, ``--export OUT``, ``--compare FILE``.

    ``train(threads, stop_after_minutes)`` trains; ``--evaluate`` is :func:`evaluate_checkpoint` on
    ``validation_sets()``; ``--export`` writes the latest checkpoint of ``directory``; ``--compare`` is
    ``train_generic_v2.compare`` against ``shipped`` on its validation groups plus ``extra_groups(clustbench
    folder)``, written to ``out``.
    """
    parser = argparse.ArgumentParser(description=description)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--train", action="store_true")
    action.add_argument("--evaluate", action="store_true")
    action.add_argument("--export", metavar="OUT")
    action.add_argument("--compare", metavar="CANDIDATE")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--stop-after", type=float, default=None, metavar="MINUTES")
    parser.add_argument("--data-home", default=None)
    args = parser.parse_args(argv)
    if args.train:
        train(args.threads, args.stop_after)
    elif args.evaluate:
        evaluate_checkpoint(kernel_params, directory, validation_sets(), shipped)
    elif args.export:
        export_checkpoint(kernel_params, directory, args.export)
    else:
        import train_generic_v2 as v2  # not at the top: v2's stages import this module

        home = Path(args.data_home) if args.data_home else v2.ROOT.parent / "shared" / "data" / "clustbench"
        v2.compare(args.data_home, args.threads, baseline=shipped, candidate=Path(args.compare),
                   extra_groups=extra_groups(home), out=out)
    return 0
