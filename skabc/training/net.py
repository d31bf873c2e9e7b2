"""Training a ContextualKernel: the skorch net, its callbacks, and the training memory policy.

The estimator validates its parameters and data; :func:`train` does the rest.
skorch's ``NeuralNet`` is built here, inside ``fit`` (building it in
``__init__`` would set attributes scikit-learn's checks forbid), and seeded
by hand (skorch has no ``random_state``); what a resumed run reads is checked by
:mod:`skabc.training.checkpoints`.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence

import numpy as np
import torch
from sklearn.utils import check_random_state
from skorch import NeuralNet
from skorch.callbacks import Callback, GradientNormClipping, ProgressBar
from torch import nn

from .._runtime import float32_default, memory_limit_bytes, resolve_device, seeded_torch, tuned_allocator
from .._schema import expected_tensors
from .._user_warnings import warn_user
from .._validation import format_bytes
from ..exceptions import AffinityTooLargeError, SkabcWarning, TrainingInterruptedWarning
from ..nn.build import build_module, set_transform
from ..nn.loss import SameClusterBCELoss
from ..sampling import ClusterSetSampler, SampledSetsDataset, check_clusters_per_set, collate_sets
from ._checkpoint_contents import first_mismatch
from .callbacks import (
    BestWeightsCheckpoint,
    EveryNthEpoch,
    KeepBestWeights,
    RandomStreamCheckpoint,
    RedrawEachEpoch,
    ResumeFromCheckpoint,
    WarmupCosine,
    WholeFilesCheckpoint,
    close_progress_bars,
)
from .checkpoints import checkpointed_epochs
from .divergence import diverged_error
from .early_stopping import TimeLimit, choice_interrupted, finished_epochs, interrupted_by_user

#: Largest training set for which the allocator is tuned while training (:func:`skabc._runtime.tuned_allocator`).
#: Larger, variable sets make buffers of many sizes that, kept on the heap, fragment it: batches of 8 sets of
#: 400-1,200 points with local geometry took the process to 7.4 GB in 40 steps (22.8 GB, killed, in a
#: long run) against 2.0 GB at glibc's defaults, which cost 1.65x the time per step there.
ALLOCATOR_MAX_SET_SIZE = 500

def train(kernel, X: np.ndarray, labels: np.ndarray, group_codes, set_size: tuple[int, int], previous_state=None,
          callbacks: Sequence[tuple[str, Callback]] = (), start: dict | None = None,
          validation_labels: np.ndarray | None = None):
    """Train ``kernel``'s network on sets drawn from the labelled rows of ``X``.

    Parameters
    ----------
    kernel : ContextualKernel
        Parameters validated.
    X : ndarray of shape (n_samples, n_features), float32
    labels : ndarray of int64
        ``-1`` for unlabelled rows.
    group_codes : ndarray of int64 or None
    set_size : (int, int)
        Checked range of training set sizes.
    previous_state : dict, default=None
        Weights to start from (warm start).
    callbacks : sequence of (str, skorch.callbacks.Callback), default=()
        More named callbacks, e.g. validation and early stopping
        (:mod:`skabc.training.early_stopping`); a run they end is not
        reported as interrupted.
    start : dict, default=None
        Where the fit resolved its start (:func:`~skabc.training.checkpoints.checkpointed_epochs`): a
        checkpoint of another start is refused.
    validation_labels : ndarray of int64, default=None
        The held-out rows' labels, ``-1`` elsewhere: a checkpoint of other validation data is refused.

    Returns
    -------
    net : skorch.NeuralNet
        Trained (or restored from ``checkpoint_dir`` and trained on).
    n_sets : int
        Training sets drawn per epoch.
    """
    sampler = ClusterSetSampler(labels, group_codes, set_size, check_clusters_per_set(kernel.clusters_per_set))
    n_labelled = int((labels >= 0).sum())
    n_sets = n_sets_per_epoch(kernel, n_labelled, set_size)
    # Sized by what can be drawn: the sampler's largest set, a batch of at most an epoch's sets.
    check_training_memory(kernel, sampler.largest_set, X.shape[1], batch_size=min(kernel.batch_size, n_sets))
    wanted, most = sampler.clusters_per_set, max(len(g) for g in sampler.groups)
    if wanted is not None and wanted[0] > most:  # the sampler draws what there is: say so (probe 54a)
        warn_user(f"clusters_per_set={kernel.clusters_per_set!r} asks for at least {wanted[0]} clusters a set, but "
                  f"the training sets draw on at most {most} labelled classes a group (classes or groups held out "
                  f"for validation are not drawn): each set holds at most {most}.")
    rows = max(sum(len(c) for c in g) for g in sampler.groups)
    if rows < sampler.set_size[0]:  # the same for set_size (probe 70c): every set was the whole group, unsaid
        warn_user(f"set_size={kernel.set_size!r} draws training sets of {sampler.set_size[0]} to "
                  f"{sampler.set_size[1]} rows, but the labelled rows a set is drawn from number at most {rows} a "
                  f"group (rows held out for validation are not drawn): each set holds at most {rows}, a group's "
                  "whole labelled rows where it holds them all.")
    device = resolve_device(kernel.device)

    steps = kernel.max_epochs * math.ceil(n_sets / kernel.batch_size)
    seed = int(check_random_state(kernel.random_state).randint(np.iinfo(np.int32).max))
    dataset = SampledSetsDataset(X, sampler, n_sets, kernel.batch_size, seed, set_transform=set_transform(kernel))

    with seeded_torch(seed, device), tuned_allocator(set_size[1] <= ALLOCATOR_MAX_SET_SIZE), float32_default():
        net = make_net(kernel, build_module(kernel, X.shape[1]), device, steps, callbacks)
        net.initialize()
        if previous_state is not None:
            _load_warm_start(net, previous_state)
        done = checkpointed_epochs(kernel, X, labels, group_codes, net=net, start=start,
                                   validation_labels=validation_labels, start_weights=previous_state)
        if done and done >= kernel.max_epochs:
            # A finished run of this configuration on these data: fit restores it and trains nothing (with
            # warm_start too, which would otherwise go on training from the current weights).
            # Reached only without the kernel that run fitted (skabc.training.result): an earlier version's
            # checkpoint, a kernel with a custom callable, which has no safe file, or a run stopped by Ctrl-C
            # while its clustering settings were chosen.
            warn_user(f"checkpoint_dir={str(kernel.checkpoint_dir)!r} holds a finished run of this configuration "
                      f"({done} of {kernel.max_epochs} epochs) but not the kernel it fitted: nothing is trained, "
                      "the kernel is re-derived from the last epoch's checkpoint (where the fit validates, from its "
                      "best validated weights, its clustering settings chosen again); use another directory or "
                      "remove it to train again", SkabcWarning)
        # ResumeFromCheckpoint restores the checkpoint at train begin; partial_fit keeps that state and turns
        # Ctrl-C into a clean stop.
        net.partial_fit(dataset, y=None, epochs=max(0, kernel.max_epochs - done))
        _handle_interruption(kernel, net)
    if not all(np.isfinite(row.get("train_loss", 0.0)) for row in net.history):
        raise diverged_error()
    return net, n_sets


def make_net(kernel, module: nn.Module, device: torch.device, total_steps: int,
             callbacks: Sequence[tuple[str, Callback]] = (), criterion: nn.Module | None = None) -> NeuralNet:
    """The skorch net that trains ``module`` with the kernel's optimisation parameters.

    Parameters
    ----------
    kernel : ContextualKernel
        Gives ``lr``, ``weight_decay``, ``pos_weight``, ``max_epochs``, ``batch_size``, ``verbose`` and the
        checkpoint settings.
    module : torch.nn.Module
        The network to train.
    device : torch.device
        Where it trains.
    total_steps : int
        Optimiser steps of the whole run (the length of the warm-up and cosine learning-rate schedule).
    callbacks : sequence of (name, Callback), default=()
        Added after the standard ones (:func:`training_callbacks`).
    criterion : torch.nn.Module, default=None
        The loss; ``None``: :class:`~skabc.nn.loss.SameClusterBCELoss` with the kernel's ``pos_weight``.

    Returns
    -------
    net : skorch.NeuralNet
        Not initialised; AdamW, gradient clipping, no internal train split.
    """
    return NeuralNet(
        module=module,
        criterion=SameClusterBCELoss(kernel.pos_weight) if criterion is None else criterion,
        optimizer=torch.optim.AdamW,
        optimizer__weight_decay=kernel.weight_decay,
        lr=kernel.lr,
        max_epochs=kernel.max_epochs,
        batch_size=kernel.batch_size,
        iterator_train__shuffle=False,
        iterator_train__collate_fn=collate_sets,
        train_split=None,
        predict_nonlinearity=None,
        device=str(device),
        callbacks=training_callbacks(kernel, total_steps, callbacks),
        verbose=kernel.verbose,
        # Only with verbose: skorch's log prints whatever verbose says once its sink is not print itself.
        **({"callbacks__print_log__sink": print_plain} if kernel.verbose and not _renders_colour() else {}),
    )


#: ANSI escape sequences (skorch colours its epoch table's columns with them).
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def print_plain(text: str) -> None:
    """Print a line of skorch's epoch log without its colour codes (a log file or pipe shows them as ``^[[36m``)."""
    print(_ANSI.sub("", text), flush=True)


def _live(stream) -> bool:
    """Whether ``stream`` renders live output (colours, a bar redrawn in place): a terminal, or a Jupyter kernel's
    output (not a terminal, but rendered)."""
    if "ipykernel" in sys.modules:
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


def _renders_colour() -> bool:
    """Whether stdout shows ANSI colours."""
    return _live(sys.stdout)


def draws_progress_bars() -> bool:
    """Whether stderr redraws a progress bar in place.

    In a log file or a pipe (nohup, CI) every redraw of tqdm's bar is more text on one line (about 1.4 KB an
    epoch on digits), and the epoch log's rows were glued to it; there the log's one row per epoch says enough.
    """
    return _live(sys.stderr)


def training_callbacks(kernel, total_steps: int, extra: Sequence[tuple[str, Callback]] = ()) -> list:
    """Named callbacks: resume first (the others read the restored history at train begin)."""
    callbacks = []
    if kernel.checkpoint_dir is not None:
        checkpoint = WholeFilesCheckpoint(kernel.checkpoint_dir, EveryNthEpoch(kernel.checkpoint_every))
        callbacks.append(("resume", ResumeFromCheckpoint(kernel.checkpoint_dir)))
    callbacks += [
        ("redraw_sets", RedrawEachEpoch()),
        ("keep_best", KeepBestWeights()),
        ("grad_clip", GradientNormClipping(gradient_clip_value=1.0)),
        ("lr_schedule", WarmupCosine(kernel.lr, max(total_steps, 1))),
        *extra,
    ]
    if kernel.verbose and draws_progress_bars():
        callbacks.append(("progress", ProgressBar()))
    if kernel.checkpoint_dir is not None:
        # Before the Checkpoint: a stop while it writes leaves the previous checkpoint's files of these two.
        callbacks.append(("best_weights", BestWeightsCheckpoint(kernel.checkpoint_dir, checkpoint.monitor)))
        callbacks.append(("random_stream", RandomStreamCheckpoint(kernel.checkpoint_dir, checkpoint.monitor,
                                                                  resolve_device(kernel.device))))
        callbacks.append(("checkpoint", checkpoint))
    return callbacks


def n_sets_per_epoch(kernel, n_labelled: int, set_size: tuple[int, int]) -> int:
    """``sets_per_epoch``, or enough sets to cover the labelled rows once, between 8 and 64 batches."""
    if kernel.sets_per_epoch is not None:
        return int(kernel.sets_per_epoch)
    covering = math.ceil(n_labelled / (0.5 * (set_size[0] + set_size[1])))
    return int(np.clip(covering, 8 * kernel.batch_size, 64 * kernel.batch_size))


def check_training_memory(kernel, largest_set: int, n_features: int | None = None,
                          batch_size: int | None = None) -> None:
    """Refuse a training configuration whose network or per-step pair tensors would not fit.

    Each step keeps, per set and block, attention scores for every head and
    the ``n x n`` logits, targets and loss for backpropagation (float32);
    dense attention makes that quadratic in ``set_size``.  Given ``n_features``, the network itself is
    sized too, on torch's 'meta' device (nothing allocated): its weights, their gradients and AdamW's two
    moments, float32 each.  A user's own embedder is left out of that (it is built by the user's code).

    Parameters
    ----------
    kernel : ContextualKernel
        Gives the network's size, ``batch_size``, ``memory_limit`` and ``device`` (``'auto'`` on a CUDA
        device: half of that device's memory).
    largest_set : int
        The most points a training set can hold.
    n_features : int, default=None
        Input width, to size the network's weights; ``None`` skips that check.
    batch_size : int, default=None
        The most sets a step holds; ``None`` is the kernel's ``batch_size``.

    Raises
    ------
    AffinityTooLargeError
        A ``MemoryError`` (and ``ValueError``) naming what is needed, the limit, and what to lower.
    """
    limit, where = memory_limit_bytes(kernel.memory_limit), ""
    device = resolve_device(kernel.device)
    if isinstance(kernel.memory_limit, str) and device.type == "cuda":
        # Training's tensors live on the GPU: 'auto' is half of its memory there, as it is half of the host's.
        limit, where = 0.5 * torch.cuda.get_device_properties(device).total_memory, " (half of the GPU's memory)"
    pair_tensors = kernel.n_blocks * (kernel.n_heads + 1) + 4
    batch_size = kernel.batch_size if batch_size is None else batch_size
    needed = 4.0 * batch_size * float(largest_set) ** 2 * pair_tensors
    if limit is not None and needed > limit:
        raise AffinityTooLargeError(
            f"training on sets of up to {largest_set} points in batches of {batch_size} needs about "
            f"{format_bytes(needed)} per step, over memory_limit={format_bytes(limit)}{where} (an estimate counting "
            f"{pair_tensors} tensors of {largest_set} x {largest_set} per set: {kernel.n_heads} heads + 1 in each "
            f"of {kernel.n_blocks} blocks, 4 for the loss); lower set_size or batch_size (the kernel applies to "
            "larger sets than it was trained on), or n_blocks or n_heads."
        )
    named_embedder = kernel.embedder is None or isinstance(kernel.embedder, str)
    if limit is not None and n_features is not None and named_embedder:
        shapes = expected_tensors(lambda: build_module(kernel, n_features)).values()
        weights = 16.0 * sum(math.prod(shape) for _, shape in shapes)
        if weights > limit:
            raise AffinityTooLargeError(
                f"the network of d_model={kernel.d_model}, n_blocks={kernel.n_blocks} on "
                f"{kernel.canonical_features or n_features} input features needs about {format_bytes(weights)} "
                f"to train, over memory_limit={format_bytes(limit)}{where}; lower d_model"
                + (", canonical_features or n_inducing." if kernel.attention == "isab" else " or canonical_features."))


def _load_warm_start(net: NeuralNet, state: dict) -> None:
    # Compare shapes first: torch's own error lists every tensor in its terms, not the user's.
    current = net.module_.state_dict()
    name = first_mismatch(state, current)
    if name is not None:
        reshaped = name in state and name in current
        detail = (f"{name} has shape {tuple(state[name].shape)} in the fitted network and "
                  f"{tuple(current[name].shape)} in the new one" if reshaped else
                  f"the networks hold different tensors ({len(set(state) ^ set(current))} differ)")
        hint = " X has another number of columns than the kernel was fitted on." if (
            reshaped and name.startswith("embedder.")) else ""
        raise ValueError(
            "warm_start=True continues the fitted network, which needs the same architecture and input width "
            f"(n_blocks, d_model, n_heads, attention, embedder, canonical_features, columns of X): {detail}.{hint} "
            "Set warm_start=False to train a new network."
        )
    net.module_.load_state_dict(state, strict=True)


def _refit_after_choice(kernel, finished: int) -> str:
    """What a refit with ``checkpoint_dir`` does after Ctrl-C stopped the choice of clustering settings."""
    if kernel.checkpoint_dir is None:
        return ""
    if finished >= kernel.max_epochs:
        return (" A refit with this checkpoint_dir trains nothing and makes the choice again from the last "
                "checkpoint (its best validated weights); remove the directory to train again.")
    # Early stopping or max_time ended the run before its last epoch: the checkpoint is of an unfinished run.
    return (" A refit with this checkpoint_dir resumes the run from its last checkpoint (with its best validated "
            "weights so far); remove the directory to train again.")


def _handle_interruption(kernel, net: NeuralNet) -> None:
    close_progress_bars(net)  # a run stopped inside an epoch leaves its bar drawn
    finished = finished_epochs(net)
    keeper, mixer = dict(net.callbacks_)["keep_best"], dict(net.callbacks_).get("start_weight_mix")
    best_state, keeper.best_state_ = keeper.best_state_, None  # no second copy of the weights in pickles
    if best_state is not None and mixer is not None:  # the weights kept are mixed as the finished run's are
        best_state = mixer.mix(best_state)
    if mixer is not None:
        mixer.release()
    limits = [cb.max_time for _, cb in net.callbacks_ if isinstance(cb, TimeLimit) and cb.stopped_]
    validation = dict(net.callbacks_).get("validation")
    # Validation restored its best weights: with no epoch scored, the start where it competes (a fine-tune's).
    restored_start = validation is not None and validation.start_is_candidate and validation.best_epoch_ == 0
    if choice_interrupted(net):  # after the epochs (or max_time's stop): its own account
        if validation.best_epoch_ > 0:
            weights = f"the weights of its best validation score ({validation.best_score_:.4f} ARI)"
        elif restored_start:
            weights = "its starting weights"
        else:
            weights = "the weights reached when its training stopped (no epoch was scored)"
        warn_user(f"ContextualKernel training was interrupted after {finished} of {kernel.max_epochs} scored epochs, "
                  "while the kept weights and clustering settings were scored on the held-out sets; the kernel "
                  f"keeps {weights} with its start's clustering settings (recommended_clustering() has not been "
                  "chosen for them)."
                  + _refit_after_choice(kernel, finished), TrainingInterruptedWarning)
        return
    if finished == 0 and limits:  # only max_time can end a run before its first epoch ends
        took = ("its starting weights are kept (no epoch finished, none was scored)" if restored_start
                else "the kernel took only part of one epoch's steps (no epoch finished)")
        warn_user(f"max_time={float(limits[0]):g} s ended training inside its first epoch: {took}. Raise max_time, "
                  "or lower sets_per_epoch, to train it.", SkabcWarning)
        return
    if not interrupted_by_user(net):
        return
    if validation is not None and validation.best_epoch_ > 0:  # its on_train_end restored the best weights
        kept = f"the weights of the best validation score so far ({validation.best_score_:.4f} ARI)"
    elif restored_start:
        kept = ("its starting weights (no epoch was scored)" if not finished
                else f"its starting weights (no epoch scored better than their {validation.start_score_:.4f} ARI)")
    elif not finished:  # no epoch's loss to compare ('inf' said nothing)
        kept = "the weights reached when it stopped, inside the first epoch"
    else:
        since = f" since it resumed at epoch {keeper.resumed_at_}" if keeper.resumed_at_ else " so far"
        kept = f"the weights of the best training loss{since} ({keeper.best_loss_:.4f})"
        if best_state is not None:
            net.module_.load_state_dict(best_state)
    warn_user(
        f"ContextualKernel training was interrupted after {finished} of {kernel.max_epochs} epochs; "
        f"the kernel keeps {kept}."
        + (" Call fit again to resume from checkpoint_dir." if kernel.checkpoint_dir is not None else ""),
        TrainingInterruptedWarning,
    )
