"""skorch callbacks used to train a ContextualKernel: one theme each, public so recipes can reuse them."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import torch
from skorch.callbacks import Callback, Checkpoint, LoadInitState, ProgressBar
from skorch.history import History

from .._user_warnings import warn_user
from ..sampling import SampledSetsDataset

__all__ = ["BestWeightsCheckpoint", "EveryNthEpoch", "KeepBestWeights", "RandomStreamCheckpoint", "RedrawEachEpoch",
           "ResumeFromCheckpoint", "WarmupCosine", "WholeFilesCheckpoint"]


class WarmupCosine(Callback):
    """Linear warm-up then cosine decay of the learning rate, as a pure function of the global step.

    The step is recovered from the history, so a resumed fit continues the
    schedule exactly where the interrupted one stopped.

    Parameters
    ----------
    peak_lr : float
        Learning rate at the end of the warm-up.
    total_steps : int
        Optimisation steps of the whole fit.
    warmup : float, default=0.05
        Fraction of the steps spent warming up (from ``0.1 * peak_lr``).
    final_ratio : float, default=0.01
        Learning rate at the last step, as a fraction of ``peak_lr``.
    """

    def __init__(self, peak_lr: float, total_steps: int, warmup: float = 0.05, final_ratio: float = 0.01) -> None:
        self.peak_lr = peak_lr
        self.total_steps = total_steps
        self.warmup = warmup
        self.final_ratio = final_ratio

    def lr_at(self, step: int) -> float:
        """The learning rate of global step ``step``."""
        warm = max(1, int(self.warmup * self.total_steps))
        if step < warm:
            return self.peak_lr * (0.1 + 0.9 * step / warm)
        progress = min(1.0, (step - warm) / max(1, self.total_steps - warm))
        floor = self.final_ratio * self.peak_lr
        return floor + 0.5 * (self.peak_lr - floor) * (1 + math.cos(math.pi * progress))

    def on_train_begin(self, net, **kwargs):
        self.step_ = sum(len(row["batches"]) for row in net.history)

    def on_batch_begin(self, net, training: bool = False, **kwargs):
        if training:
            for group in net.optimizer_.param_groups:
                group["lr"] = self.lr_at(self.step_)

    def on_batch_end(self, net, training: bool = False, **kwargs):
        if training:
            self.step_ += 1


class KeepBestWeights(Callback):
    """Remember the weights of the epoch with the lowest training loss.

    Used only when a fit is interrupted (Ctrl-C): the kernel then keeps the
    best weights seen so far instead of those of a half-finished epoch.  A
    run resumed from a checkpoint has only its last epoch's weights: the
    candidates are those and the epochs trained after them (``resumed_at_``
    names that epoch, 0 for a fresh run).
    """

    def on_train_begin(self, net, **kwargs):
        losses = [row.get("train_loss") for row in net.history if "train_loss" in row]
        self.resumed_at_ = len(losses)
        self.best_loss_ = losses[-1] if losses else float("inf")
        # ResumeFromCheckpoint runs first: these are the restored epoch's weights.
        self.best_state_ = {k: v.detach().clone() for k, v in net.module_.state_dict().items()} if losses else None

    def on_epoch_end(self, net, **kwargs):
        loss = net.history[-1].get("train_loss")
        if loss is not None and loss <= self.best_loss_:
            self.best_loss_ = loss
            self.best_state_ = {k: v.detach().clone() for k, v in net.module_.state_dict().items()}


def close_progress_bars(net) -> None:
    """Close the open bar of every ProgressBar callback of ``net``.

    skorch closes a bar when its epoch ends; a run ended inside an epoch, or by a callback that raises at the
    end of one before the bar's own ``on_epoch_end``, would leave it drawn on the terminal, and the next line
    printed would be glued to it.  Closing twice is harmless.
    """
    for _, callback in getattr(net, "callbacks_", ()):
        bar = getattr(callback, "pbar_", None) if isinstance(callback, ProgressBar) else None
        if bar is not None:
            bar.close()


class EveryNthEpoch:
    """Checkpoint monitor: true after every ``n``-th epoch (a class, so the net stays picklable).

    Parameters
    ----------
    n : int
        Checkpoint period in epochs (ContextualKernel's ``checkpoint_every``).
    """

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, net) -> bool:
        return len(net.history) % self.n == 0


class RedrawEachEpoch(Callback):
    """Tell the virtual dataset which epoch it is, so every epoch sees new sets."""

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        if isinstance(dataset_train, SampledSetsDataset):
            dataset_train.epoch = len(net.history) - 1


#: torch's random stream in a checkpoint folder, one file per checkpoint named by its epoch
#: (:class:`RandomStreamCheckpoint`); checkpoints of earlier versions hold one ``random_stream.pt``.
RANDOM_STREAM_FILE = "random_stream.{checkpoint}.pt"
LEGACY_RANDOM_STREAM_FILE = "random_stream.pt"
#: The best validated weights of a run in a checkpoint folder, one file per checkpoint whose best epoch is an earlier
#: one (:class:`BestWeightsCheckpoint`), named by the checkpoint's epoch: ``{'epoch': best epoch, 'checkpoint': the
#: checkpoint's epoch, 'state': weights}``.
BEST_WEIGHTS_FILE = "best_params.{checkpoint}.pt"


#: skorch's Checkpoint files in a checkpoint folder (:class:`WholeFilesCheckpoint`): the weights and optimizer state
#: one file per checkpoint named by its epoch, the history (which names the checkpoint's epoch) one file written last.
CHECKPOINT_FILES = {"f_params": "params.{checkpoint}.pt", "f_optimizer": "optimizer.{checkpoint}.pt",
                    "f_history": "history.json"}
#: A warm-start run's starting weights, written with its configuration (:mod:`skabc.training.checkpoints`).
START_FILE = "start.pt"
#: The weights and optimizer state in checkpoint folders of earlier versions (one file each, overwritten).
LEGACY_CHECKPOINT_FILES = {"f_params": "params.pt", "f_optimizer": "optimizer.pt"}


def _own_or_legacy(dirname, pattern: str, legacy: str | None, checkpoint: int) -> Path:
    """The file of ``pattern`` for the checkpoint of epoch ``checkpoint``, else an earlier version's ``legacy``."""
    tagged = Path(dirname) / pattern.format(checkpoint=checkpoint)
    return tagged if legacy is None or tagged.exists() or tagged.is_symlink() else Path(dirname) / legacy


def checkpoint_file(dirname, key: str, checkpoint: int) -> Path:
    """skorch's file ``key`` (``'f_params'``, ``'f_optimizer'``, ``'f_history'``) of the checkpoint of epoch
    ``checkpoint``: its own file, else (weights and optimizer state) the one an earlier version wrote."""
    return _own_or_legacy(dirname, CHECKPOINT_FILES[key], LEGACY_CHECKPOINT_FILES.get(key), checkpoint)


def best_weights_file(dirname, checkpoint: int) -> Path:
    """Where the best weights that go with the checkpoint of epoch ``checkpoint`` are saved."""
    return Path(dirname) / BEST_WEIGHTS_FILE.format(checkpoint=checkpoint)


def random_stream_file(dirname, checkpoint: int) -> Path:
    """The random stream of the checkpoint of epoch ``checkpoint``: its own file, else an earlier version's one."""
    return _own_or_legacy(dirname, RANDOM_STREAM_FILE, LEGACY_RANDOM_STREAM_FILE, checkpoint)


def keep_two_checkpoints(pattern: str, dirname, epoch: int) -> None:
    """Remove the files of ``pattern`` (``'...{checkpoint}...'``) for checkpoints before the newest one earlier than
    ``epoch``: that one stays until this epoch's checkpoint is written, since a stop while it is written leaves
    the history of the one before."""
    head, tail = pattern.split("{checkpoint}")
    named = (_checkpoint_number(pattern, file.name) for file in Path(dirname).glob(head + "*" + tail)
             if file.is_file())
    # Only the names written here ('7', never '07', '0' or other digits): others are not these files, and stay.
    earlier = sorted(number for number in named if number is not None and number < epoch)
    for checkpoint in earlier[:-1]:
        (Path(dirname) / pattern.format(checkpoint=checkpoint)).unlink(missing_ok=True)


def _checkpoint_number(pattern: str, name: str) -> int | None:
    """The epoch in ``name`` if it is ``pattern`` (``'params.{checkpoint}.pt'``) as the callbacks write it: epochs
    from 1, never ``'params.07.pt'`` or ``'params.0.pt'``; else ``None``."""
    head, _, tail = pattern.partition("{checkpoint}")
    middle = name[len(head):len(name) - len(tail)]
    if (not tail or len(name) <= len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail)
            or not (middle.isascii() and middle.isdigit()) or str(int(middle)) != middle or middle == "0"):
        return None
    return int(middle)


def is_checkpoint_file_name(name: str) -> bool:
    """Whether a checkpoint writes a file named ``name`` (``'params.7.pt'``, ``'history.json'``), or an earlier
    version did."""
    single = {CHECKPOINT_FILES["f_history"], START_FILE, LEGACY_RANDOM_STREAM_FILE, *LEGACY_CHECKPOINT_FILES.values()}
    if name in single:
        return True
    return any(_checkpoint_number(pattern, name) is not None
               for pattern in (CHECKPOINT_FILES["f_params"], CHECKPOINT_FILES["f_optimizer"], BEST_WEIGHTS_FILE,
                               RANDOM_STREAM_FILE))


def remove_partial_files(dirname) -> None:
    """Remove what a run stopped while it wrote a checkpoint left: partial files (``'params.3.pt.tmp'``), never
    read, and an earlier version's single files once the history's checkpoint has its own.  Otherwise only a run
    that reaches that epoch again would (a run stopped in its last one is complete, and is only restored)."""
    for partial in Path(dirname).glob("*.tmp"):
        if partial.is_file() and is_checkpoint_file_name(partial.name.removesuffix(".tmp")):
            partial.unlink()
    try:
        epoch = len(json.loads((Path(dirname) / CHECKPOINT_FILES["f_history"]).read_text()))
    except (OSError, ValueError, TypeError):  # none, or damaged: the checks before a resume say so
        return
    remove_legacy_files(dirname, epoch)


def remove_legacy_files(dirname, checkpoint: int) -> None:
    """Remove an earlier version's single files where the checkpoint of epoch ``checkpoint`` has its own."""
    tagged = [Path(dirname) / CHECKPOINT_FILES[key].format(checkpoint=checkpoint) for key in LEGACY_CHECKPOINT_FILES]
    if all(file.is_file() for file in tagged):
        for name in LEGACY_CHECKPOINT_FILES.values():
            (Path(dirname) / name).unlink(missing_ok=True)
    if (Path(dirname) / RANDOM_STREAM_FILE.format(checkpoint=checkpoint)).is_file():
        (Path(dirname) / LEGACY_RANDOM_STREAM_FILE).unlink(missing_ok=True)


def write_atomically(file, write) -> None:
    """``write(path)`` into ``file`` whole or not at all: to ``<file>.tmp`` first, then renamed over ``file``."""
    partial = Path(file).with_name(Path(file).name + ".tmp")
    write(str(partial))
    os.replace(partial, file)


def save_atomically(content, file: Path) -> None:
    """``torch.save`` to ``file`` whole or not at all (as skorch's checkpoint files are read back)."""
    write_atomically(file, lambda path: torch.save(content, path))


class WholeFilesCheckpoint(Checkpoint):
    """skorch's Checkpoint that a stop at any point leaves resumable: every file whole, the history written last.

    skorch writes its files one after the other, in place, onto the previous checkpoint's: a stop between the
    weights and the history (Ctrl-C, a killed job) left the weights of one epoch beside the history of another,
    and a resume trained on from that mix silently.  Here the weights and optimizer state go to files of their own
    checkpoint (:data:`CHECKPOINT_FILES`), each written whole (:func:`write_atomically`), and the history last, so a
    stop before it leaves the previous checkpoint in force, files and all; the files of checkpoints before the
    one written are removed after it.  A failed write raises (skorch's Checkpoint prints it and trains on, so
    a resume would find a checkpoint missing).

    Parameters
    ----------
    dirname : str or path
        The checkpoint folder.
    monitor : callable
        ``monitor(net)`` is true after an epoch whose checkpoint is written.
    """

    def __init__(self, dirname, monitor) -> None:
        super().__init__(monitor=monitor, dirname=str(dirname), f_params=CHECKPOINT_FILES["f_params"].format(
            checkpoint="{last_epoch[epoch]}"), f_optimizer=CHECKPOINT_FILES["f_optimizer"].format(
            checkpoint="{last_epoch[epoch]}"), f_history=CHECKPOINT_FILES["f_history"], f_criterion=None,
            f_pickle=None, load_best=False)

    def _save_params(self, f, net, f_name, log_name):
        write_atomically(f, lambda path: net.save_params(**{f_name: path}))

    def on_epoch_end(self, net, **kwargs):
        super().on_epoch_end(net, **kwargs)
        if net.history[-1, self.event_name]:
            epoch = len(net.history)
            for key in LEGACY_CHECKPOINT_FILES:
                keep_two_checkpoints(CHECKPOINT_FILES[key], self.dirname, epoch + 1)  # this one alone
            remove_legacy_files(self.dirname, epoch)  # its stream was written just before (RandomStreamCheckpoint)


class ResumeFromCheckpoint(LoadInitState):
    """Restore the checkpoint in force at train begin: its history, then the files of the epoch it names.

    Read only after :func:`~skabc.training.checkpoints.checkpointed_epochs` has checked every file; a folder
    of an earlier version (one ``params.pt`` and ``optimizer.pt``) resumes from those (:func:`checkpoint_file`).

    Parameters
    ----------
    dirname : str or path
        The checkpoint folder.
    """

    def __init__(self, dirname) -> None:
        self.dirname = dirname
        super().__init__(checkpoint=None)

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        if self.did_load_:
            return
        self.did_load_ = True
        history_file = Path(self.dirname) / CHECKPOINT_FILES["f_history"]
        if not history_file.is_file():
            return
        history = History.from_file(str(history_file))
        net.load_params(**{key: str(checkpoint_file(self.dirname, key, len(history)))
                           for key in LEGACY_CHECKPOINT_FILES})
        net.history = history


class RandomStreamCheckpoint(Callback):
    """Save torch's random stream with each checkpoint; restore it before the first epoch of a resumed run.

    Dropout masks and sampled attention draw from torch's generator: without its state a resumed run would
    draw other ones than the uninterrupted run (the sets themselves are drawn from seeds per epoch).  Placed
    after every callback that draws from it and just before skorch's Checkpoint (which draws nothing), so the
    state saved is the one the next epoch starts from; one file per checkpoint (:func:`random_stream_file`),
    the previous one kept until this one's checkpoint is written, as :class:`BestWeightsCheckpoint` does.

    Parameters
    ----------
    dirname : str or path
        The checkpoint folder.
    monitor : callable
        ``monitor(net)`` is true after an epoch whose checkpoint is written (the Checkpoint's own).
    device : torch.device
        The training device: a GPU's generator is saved too.
    """

    def __init__(self, dirname, monitor, device) -> None:
        self.dirname = dirname
        self.monitor = monitor
        self.device = device

    def _state(self) -> dict:
        state = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    def on_train_begin(self, net, **kwargs):
        file = random_stream_file(self.dirname, len(net.history))
        # Resumed (the history holds the checkpointed epochs): restore before the next epoch's first batch.
        self.pending_ = torch.load(file, weights_only=True) if len(net.history) and file.is_file() else None

    def on_epoch_begin(self, net, **kwargs):
        if getattr(self, "pending_", None) is not None:
            torch.set_rng_state(self.pending_["cpu"])
            if "cuda" in self.pending_ and self.device.type == "cuda":
                torch.cuda.set_rng_state(self.pending_["cuda"], self.device)
            self.pending_ = None

    def on_epoch_end(self, net, **kwargs):
        if self.monitor(net):
            epoch = len(net.history)
            save_atomically(self._state(), Path(self.dirname) / RANDOM_STREAM_FILE.format(checkpoint=epoch))
            keep_two_checkpoints(RANDOM_STREAM_FILE, self.dirname, epoch)


class BestWeightsCheckpoint(Callback):
    """Save a validated run's best weights with each checkpoint; give them back to a resumed run.

    A run with held-out validation (the callback named ``'validation'``, a
    :class:`~skabc.training.early_stopping.ValidationSetsScoring`) keeps its best epoch's weights, not its
    last; resumed from a checkpoint, it must also know that epoch, its score and its weights, or it keeps
    other weights, and stops at another epoch, than the run that was not interrupted.  The epoch and score are
    in the restored history; the weights are the checkpoint's own where the best epoch is the checkpoint's,
    else in the file :func:`best_weights_file` names for that checkpoint.  Placed just before skorch's
    Checkpoint: a stop that ends an epoch first (early stopping, ``max_time``) writes neither, and one that
    ends the run while the checkpoint is written leaves the previous checkpoint's file in place (the one
    before that is removed once a newer one is written).

    Parameters
    ----------
    dirname, monitor
        The checkpoint folder, and whether an epoch's checkpoint is written, as for
        :class:`RandomStreamCheckpoint`.
    """

    def __init__(self, dirname, monitor) -> None:
        self.dirname = dirname
        self.monitor = monitor

    def on_train_begin(self, net, **kwargs):
        validation = dict(net.callbacks_).get("validation")
        best = None if validation is None or not len(net.history) else validation.best_so_far(net)
        if best is None:  # a fresh run, or no epoch before the resume beat the start
            return
        epoch, checkpoint = best[0], len(net.history)
        if epoch == checkpoint:
            validation.restore_best(epoch, best[1], net.module_.state_dict())
            return
        file = best_weights_file(self.dirname, checkpoint)
        # Read and checked with the other checkpoint files before training (skabc.training.checkpoints).
        saved = torch.load(file, map_location="cpu", weights_only=True) if file.is_file() else None
        if saved is None or saved["epoch"] != epoch or saved["checkpoint"] != checkpoint:
            warn_user(f"the checkpoint in {str(self.dirname)!r} does not hold the weights of its best epoch ({epoch}, "
                      f"{validation.name} {best[1]:.4f}) (a checkpoint of an earlier skabc version, or a file "
                      "removed): only the start and the epochs after the resume compete for the weights kept.")
            return
        validation.restore_best(epoch, best[1], saved["state"])

    def on_epoch_end(self, net, **kwargs):
        validation = dict(net.callbacks_).get("validation")
        epoch = len(net.history)
        if validation is None or not self.monitor(net):
            return
        if 0 < validation.best_epoch_ < epoch:  # else the checkpoint's own weights are the best
            save_atomically({"epoch": validation.best_epoch_, "checkpoint": epoch, "state": validation.best_state_},
                            best_weights_file(self.dirname, epoch))
        keep_two_checkpoints(BEST_WEIGHTS_FILE, self.dirname, epoch)


def write_epoch_checkpoint(net) -> None:
    """Write the checkpoint of the epoch that has just ended now, in the order its callbacks write it.

    For a stop raised at the end of an epoch by a callback placed before the checkpoint ones (``max_time``): the
    epoch is trained and scored, and a resumed run would otherwise train it again.  Each writes only where its
    monitor says this epoch has a checkpoint.
    """
    for _, callback in getattr(net, "callbacks_", ()):
        if isinstance(callback, (BestWeightsCheckpoint, RandomStreamCheckpoint, WholeFilesCheckpoint)):
            callback.on_epoch_end(net)
