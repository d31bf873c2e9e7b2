"""skorch callbacks that end a training run early: on a validation score, or on a time budget.

Both stop the run the way skorch's own ``EarlyStopping`` does (raising
``KeyboardInterrupt``, which ``NeuralNet.partial_fit`` turns into a clean
end of training) and say so in ``stopped_``, so the kernel can tell a
planned stop from a user's Ctrl-C.
"""

from __future__ import annotations

import time

import torch
from skorch.callbacks import Callback

from .callbacks import close_progress_bars, write_epoch_checkpoint
from .validation import choose_partition, choose_settings, score_sets, settings_label


def _clone_state(state: dict) -> dict:
    return {k: v.detach().clone() for k, v in state.items()}


def _copy_state(module) -> dict:
    return _clone_state(module.state_dict())


def mix_weights(start: dict, trained: dict, alpha: float) -> dict:
    """``start + alpha * (trained - start)`` for every floating-point tensor (the others as trained).

    Weight-space ensembling of a fine-tuned network with its start (WiSE-FT,
    Wortsman et al., CVPR 2022): the mix keeps part of what the start knew
    about data unlike the fine-tuning data.

    Parameters
    ----------
    start : dict
        State dict of the starting weights.
    trained : dict
        State dict of the trained weights, the same keys.
    alpha : float
        0 gives the start, 1 the trained weights.

    Returns
    -------
    mixed : dict
        A new state dict.
    """
    return {name: torch.lerp(start[name].to(value.device), value, alpha) if value.is_floating_point() else value
            for name, value in trained.items()}


class StartWeightMix(Callback):
    """Once training ends, replace the trained weights by their mix with the starting ones (:func:`mix_weights`).

    For fits without validation sets; :class:`ValidationSetsScoring` mixes
    its best weights itself, before it chooses the clustering settings.

    Parameters
    ----------
    alpha : float
        Share of the trained weights, in ``(0, 1]``.
    start_state : dict, default=None
        The weights the fit started from; ``None``: the module's at train begin.  Given, a run resumed from
        a checkpoint (whose module holds the checkpoint's weights at train begin) mixes with the true start.
    """

    def __init__(self, alpha: float, start_state: dict | None = None) -> None:
        self.alpha = alpha
        self.start_state = start_state

    def on_train_begin(self, net, **kwargs):
        start = self.start_state if self.start_state is not None else net.module_.state_dict()
        self.start_state_ = _clone_state(start) if self.alpha < 1.0 else None

    def on_train_end(self, net, **kwargs):
        if self.start_state_ is not None:
            net.module_.load_state_dict(self.mix(_copy_state(net.module_)))

    def mix(self, trained: dict) -> dict:
        """``trained`` mixed with the starting weights (as they are without a start or with ``alpha=1``)."""
        return trained if self.start_state_ is None else mix_weights(self.start_state_, trained, self.alpha)

    def release(self) -> None:
        """Drop the copies of the starting weights (once the fit is done: none in pickles)."""
        self.start_state_ = self.start_state = None


class ValidationSetsScoring(Callback):
    """Score held-out validation sets after every epoch; keep the best weights; stop when they stall.

    The weights the run starts from are scored first (``start_score_``) and
    count as a candidate: if no epoch beats them, training ends with them
    restored.  Once the clustering settings are chosen (or kept, with
    ``choose_clustering=False``), the result is
    compared once more with the start as it would cluster on its own (its
    weights with all of ``settings``, arbiter included): where the start
    scores higher, its weights and settings are restored, so a fine-tuned
    kernel is never worse on the held-out sets than the kernel it started
    from.  A run resumed from a checkpoint takes back its best epoch, score and weights so far
    (:meth:`restore_best`, called by :class:`~skabc.training.callbacks.BestWeightsCheckpoint`), so it keeps and
    stops on what the uninterrupted run would.

    Parameters
    ----------
    sets : list of tuple
        Validation sets (network input, true labels, rows as given), from
        :func:`~skabc.training.validation.draw_validation_sets`.
    settings : dict
        How the sets are clustered (ABCClustering's resolved
        ``affinity_power``, ``assign_labels``, ``n_clusters_selection``,
        and ``arbiter`` when the kernel started from one that has it: every
        epoch is scored without it, the final choice tries it).
    patience : int or None, default=5
        Epochs without a better score before the run stops; ``None`` never
        stops (the best weights are still restored).
    name : str, default='valid_ari'
        History key of the score (``name + '_best'`` marks improvements,
        which skorch's epoch log highlights).
    choose_clustering : bool, default=True
        Once the best weights are restored, compare ``settings`` with the
        other clustering settings of
        :data:`~skabc.training.validation.SETTING_CANDIDATES` on the same sets
        (:func:`~skabc.training.validation.choose_settings`).
    alpha : float, default=1.0
        Share of the best weights in the result: below 1, the best weights
        (when they are not the start) are mixed with the starting ones
        (:func:`mix_weights`) before the settings are chosen and the result
        is compared with the start.
    knn_partition : bool, default=False
        With ``choose_clustering=False``: switch the arbiter of ``settings`` to its kNN-partition variant
        unless the sets reject it, or to its kNN-candidates variant where they clearly prefer that
        (:func:`~skabc.training.validation.choose_partition`).
    start_state : dict, default=None
        The weights the fit started from; ``None``: the module's at train begin.  Given, a run resumed from a
        checkpoint scores, mixes with and falls back to the true start, not the checkpoint's weights.
    start_is_candidate : bool, default=True
        Whether the start competes with the epochs.  ``False`` for a network trained from scratch: its random
        start could score as well as a few epochs of training (a tiny network's near-constant affinity cuts
        sets as a trained one still does), and was then kept with every epoch's work dropped.

    Attributes
    ----------
    start_score_ : float
        Score of the starting weights.
    best_score_ : float
        Best score seen (``start_score_`` included).
    best_epoch_ : int
        Epoch of the best score, ``0`` for the starting weights.
    kept_start_ : bool
        Whether the final comparison restored the starting weights and settings.
    stopped_ : bool
        Whether this callback ended the run.
    best_settings_ : dict
        The clustering settings chosen for the restored weights (``settings``
        itself with ``choose_clustering=False``, or a kNN variant of it with ``knn_partition``).
    settings_scores_ : dict
        Mean validation ARI of every compared setting (with ``choose_clustering=False``: only the three
        partitions of ``knn_partition``) and, where the weights changed, of the start as it clusters alone.
    final_score_, final_start_score_ : float or None
        Once training ends: the score of the result as it clusters (its weights, mixed where ``alpha < 1``,
        with ``best_settings_``), and of the starting weights with ``settings`` (an arbiter included, where
        the epochs' scores leave it out).  ``None`` without sets (and the start's without a start).
    """

    def __init__(self, sets: list, settings: dict, patience: int | None = 5, name: str = "valid_ari",
                 choose_clustering: bool = True, alpha: float = 1.0, knn_partition: bool = False,
                 start_state: dict | None = None, start_is_candidate: bool = True) -> None:
        self.start_state = start_state
        self.start_is_candidate = start_is_candidate
        self.sets = sets
        self.settings = settings
        self.patience = patience
        self.name = name
        self.choose_clustering = choose_clustering
        self.alpha = alpha
        self.knn_partition = knn_partition

    def on_train_begin(self, net, **kwargs):
        # Epochs are scored by the kernel's own partitions (the weights only change the kernel; an arbiter would
        # cost three more spectral steps a set every epoch); choose_settings tries the arbiter once, at the end.
        self.epoch_settings_ = {name: value for name, value in self.settings.items() if name != "arbiter"}
        if self.start_state is None:
            self.best_state_ = self.start_state_ = _copy_state(net.module_)
            self.start_score_ = score_sets(net.module_, self.sets, self.epoch_settings_)
        else:  # the true start, scored in place of the module's (a resumed run's holds the checkpoint)
            current = _copy_state(net.module_)
            self.best_state_ = self.start_state_ = _clone_state(self.start_state)
            net.module_.load_state_dict(self.start_state_)
            self.start_score_ = score_sets(net.module_, self.sets, self.epoch_settings_)
            net.module_.load_state_dict(current)
        self.best_score_ = self.start_score_ if self.start_is_candidate else -float("inf")
        if not self.start_is_candidate:  # the first epoch scored is the first best; nothing falls back to the start
            self.best_state_ = self.start_state_ = None
        self.best_epoch_ = 0
        self.stopped_ = False
        self.kept_start_ = False
        self.choice_interrupted_ = False

    @property
    def holds_start(self) -> bool:
        """Whether the weights training ends with are the start's: kept by the final comparison, or no epoch scored
        above a start that competed."""
        return self.kept_start_ or (self.best_epoch_ == 0 and self.start_is_candidate)

    def best_so_far(self, net) -> tuple[int, float] | None:
        """The best epoch and score the history of ``net`` records (a resumed run's epochs before the resume), or
        ``None`` where no epoch beat the start (none was scored, for a start that does not compete)."""
        best = [(epoch, row[self.name]) for epoch, row in enumerate(net.history, start=1)
                if row.get(self.name + "_best") is True and self.name in row]
        return None if not best else (best[-1][0], float(best[-1][1]))

    def restore_best(self, epoch: int, score: float, state: dict) -> None:
        """Take back a resumed run's best epoch, its score and its weights (after :meth:`on_train_begin`)."""
        self.best_epoch_, self.best_score_, self.best_state_ = epoch, score, _clone_state(state)

    def on_epoch_end(self, net, **kwargs):
        score = score_sets(net.module_, self.sets, self.epoch_settings_)
        epoch = len(net.history)
        improved = score > self.best_score_
        net.history.record(self.name, score)
        net.history.record(self.name + "_best", bool(improved))
        if improved:
            self.best_score_, self.best_epoch_ = score, epoch
            self.best_state_ = _copy_state(net.module_)
        elif self.patience is not None and epoch - self.best_epoch_ >= self.patience:
            self.stopped_ = True
            epochs = f"{self.patience} epoch" + ("s" if self.patience != 1 else "")
            kept = (f"the weights of epoch {self.best_epoch_} ({self.best_score_:.4f})" if self.best_epoch_ else
                    f"the start's weights ({self.best_score_:.4f}; no epoch scored above them)")
            _stop_after_epoch(net, f"early stopping: no better {self.name} in {epochs}; {kept} are kept")

    def on_train_end(self, net, **kwargs):
        # No second copy of the weights in pickles.
        state, start, self.best_state_, self.start_state_ = self.best_state_, self.start_state_, None, None
        self.start_state = None
        if state is not None and start is not None and self.best_epoch_ > 0 and self.alpha < 1.0:
            state = mix_weights(start, state, self.alpha)
        if state is not None:
            net.module_.load_state_dict(state)
        self.best_settings_, self.settings_scores_ = dict(self.settings), {}
        self.final_score_ = self.final_start_score_ = None
        if not self.sets:
            return
        if getattr(net, "verbose", 0):  # the work below takes seconds to minutes, with no bar of its own
            print(f"scoring the kept weights and clustering settings on {len(self.sets)} held-out sets ...", flush=True)
        best = self.best_epoch_, self.best_score_
        try:
            self._choose(net, state, start)
            if getattr(net, "verbose", 0):  # the epoch table shows neither the start nor what is kept (probe 52e)
                scored = sum(self.name in row for row in net.history)
                print(self._summary(epoch_beat_start=best[0] > 0, epochs_scored=scored), flush=True)
        except KeyboardInterrupt:
            # Ctrl-C here (skorch catches it in the epochs only): the best epoch's weights (the scoring may have
            # loaded the start's) with the start's settings, unscored; the fit warns, and keeps no finished run.
            if state is not None:
                net.module_.load_state_dict(state)
            self.best_settings_, self.final_score_, self.final_start_score_ = dict(self.settings), None, None
            self.kept_start_, self.choice_interrupted_ = False, True
            self.best_epoch_, self.best_score_ = best

    def _summary(self, epoch_beat_start: bool, epochs_scored: int) -> str:
        """What the fit keeps and its held-out score, against the start's where it competed (before the final
        comparison: whether an epoch beat the start, and how many epochs were scored)."""
        settings = settings_label(self.best_settings_)
        # A start kept by the final comparison, or because no epoch scored above it (probe 57e: the log then read
        # as if an epoch's weights were kept).
        if self.holds_start:
            if not epochs_scored:
                why = "no epoch was scored"
            elif self.kept_start_ and epoch_beat_start:
                why = "the trained ones scored no higher"
            else:
                why = (f"no epoch's {self.name} beat the start's {self.start_score_:.4f}, scored as the epochs are, "
                       "without an arbiter")
            return (f"held-out {self.name} {self.final_score_:.4f}: the start's weights are kept, clustered with "
                    f"{settings} ({why})")
        start = "" if self.final_start_score_ is None else f"; the start scored {self.final_start_score_:.4f}"
        return f"held-out {self.name} {self.final_score_:.4f} with the kept weights, clustered with {settings}{start}"

    def _choose(self, net, state, start) -> None:
        """The kept weights' clustering settings and, for a start that competes, the start against them."""
        if self.choose_clustering:
            self.best_settings_, self.settings_scores_ = choose_settings(net.module_, self.sets, self.settings)
        elif self.knn_partition:
            self.best_settings_, self.settings_scores_ = choose_partition(net.module_, self.sets, self.settings)
        if start is None or (self.best_epoch_ == 0 and (self.knn_partition or self.best_settings_ == self.settings)):
            # The start's weights, clustered as they are or as choose_partition found better.
            self.final_score_ = self._score(net.module_, self.best_settings_)
            self.final_start_score_ = self._score(net.module_, self.settings) if start is not None else None
            return
        kept = self._score(net.module_, self.best_settings_)
        start_label = "start weights, " + settings_label(self.settings)
        self.settings_scores_[start_label] = score_sets(_with_state(net.module_, start), self.sets, self.settings)
        self.final_start_score_ = self.final_score_ = self.settings_scores_[start_label]
        if self.final_start_score_ > kept:
            self.kept_start_, self.best_settings_ = True, dict(self.settings)
            self.best_score_, self.best_epoch_ = self.start_score_, 0
        else:
            net.module_.load_state_dict(state)  # set with the start at train begin
            self.final_score_ = kept

    def _score(self, module, settings: dict) -> float:
        """The sets' score of ``module`` clustered with ``settings``, from ``settings_scores_`` where it is."""
        label = settings_label(settings)
        if label not in self.settings_scores_:
            self.settings_scores_[label] = score_sets(module, self.sets, settings)
        return self.settings_scores_[label]


def _with_state(module, state: dict):
    module.load_state_dict(state)
    return module


class TimeLimit(Callback):
    """Stop training once ``max_time`` seconds (wall clock) have passed since it began.

    Checked after every optimiser step; the weights of the step that ran
    past the limit stay (a :class:`ValidationSetsScoring` restores its best
    ones at the end anyway).  With such a callback, an epoch that cannot end
    inside the limit is not begun: its weights would never be scored, so the
    run stops at the end of the last epoch after which not even the shortest
    epoch so far would fit, instead of spending that time on work it drops.

    Parameters
    ----------
    max_time : float
        Seconds.

    Attributes
    ----------
    stopped_ : bool
        Whether the limit ended the run.
    """

    def __init__(self, max_time: float) -> None:
        self.max_time = max_time

    def on_train_begin(self, net, **kwargs):
        self.start_ = time.monotonic()
        self.stopped_ = False
        self.shortest_epoch_ = float("inf")
        # Only a run whose best validated weights are restored drops the work of an unscored epoch.
        self.validated_ = any(isinstance(cb, ValidationSetsScoring) for _, cb in getattr(net, "callbacks_", ()))

    def on_epoch_begin(self, net, **kwargs):
        self.epoch_start_ = time.monotonic()

    def on_batch_end(self, net, training: bool = False, **kwargs):
        if training and time.monotonic() - self.start_ > self.max_time:
            self._stop(net, "reached")

    def on_epoch_end(self, net, **kwargs):
        # Runs after the validation callback (added before it), so this epoch is already scored; it is saved
        # before the stop, since the checkpoint callbacks come after this one (a resume goes on from it).
        now = time.monotonic()
        self.shortest_epoch_ = min(self.shortest_epoch_, now - self.epoch_start_)
        if self.validated_ and now - self.start_ + self.shortest_epoch_ > self.max_time:
            write_epoch_checkpoint(net)
            self._stop(net, "would be passed by another epoch", after_epoch=True)

    def _stop(self, net, why: str, after_epoch: bool = False) -> None:
        self.stopped_ = True
        kept = "the best validated weights are kept" if self.validated_ else "the last weights are kept"
        message = (f"max_time={self.max_time:g} s {why} after {time.monotonic() - self.start_:.1f} s of training "
                   f"(epoch {len(getattr(net, 'history', ()))}): training stops; {kept}")
        if after_epoch:
            _stop_after_epoch(net, message)
        close_progress_bars(net)
        if getattr(net, "verbose", 0):
            print(message + ".", flush=True)  # a run cut inside an epoch prints no row for it: say what ended it
        raise KeyboardInterrupt


def _stop_after_epoch(net, message: str) -> None:
    """End the run after a finished epoch, printing its row of the log first (and why the run ends).

    skorch prints an epoch's row last of all its callbacks' ``on_epoch_end``: raising before it would leave
    the epoch that ends the run out of the log.
    """
    close_progress_bars(net)
    if getattr(net, "verbose", 0):
        printer = dict(net.callbacks_).get("print_log")
        if printer is not None:
            printer.on_epoch_end(net)
        print(message + ".", flush=True)
    raise KeyboardInterrupt


def planned_stop(net) -> bool:
    """Whether one of these callbacks, not the user, ended the run of ``net``."""
    return any(getattr(cb, "stopped_", False) for _, cb in net.callbacks_)


def finished_epochs(net) -> int:
    """Epochs of the run of ``net`` that ended: trained and, where it validates, scored.

    Ctrl-C while an epoch is being scored leaves its loss logged without its score: that epoch did not end
    (the weights kept are the best of those scored, and a resume trains it again).
    """
    validation = dict(net.callbacks_).get("validation")
    logged = "train_loss" if validation is None else validation.name
    return sum(logged in row for row in net.history)


def choice_interrupted(net) -> bool:
    """Whether Ctrl-C stopped the choice of the clustering settings on the held-out sets after the epochs of ``net``."""
    return bool(getattr(dict(net.callbacks_).get("validation"), "choice_interrupted_", False))


def interrupted_by_user(net) -> bool:
    """Whether the run of ``net`` ended before its last epoch without one of these callbacks ending it (Ctrl-C),
    or Ctrl-C stopped the choice of its clustering settings (:func:`choice_interrupted`)."""
    if choice_interrupted(net):
        return True
    return finished_epochs(net) < net.max_epochs and not planned_stop(net)


__all__ = ["StartWeightMix", "TimeLimit", "ValidationSetsScoring", "choice_interrupted", "finished_epochs",
           "interrupted_by_user", "mix_weights", "planned_stop"]
