"""What a ContextualKernel fit will do, decided once: where it starts, how long it trains, how it validates.

:func:`plan_training` resolves every ``'auto'`` of the training parameters
(``init``, ``max_epochs``, ``batch_size``, ``early_stopping``, ``max_time``) for the data at hand
and returns a :class:`TrainingPlan`: the network's architecture, the weights
to start from, a kernel whose parameters say exactly how to train (what
:func:`skabc.training.train` reads), the rows left for training, and the
callbacks that validate on held-out classes or groups and stop the run.
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils import check_random_state

from .._runtime import resolve_device
from .._user_warnings import warn_user
from ..exceptions import SkabcWarning
from ..nn.build import set_transform
from ..sampling import check_set_size
from .early_stopping import StartWeightMix, TimeLimit, ValidationSetsScoring
from .schedule import (
    AUTO_MAX_TIME,
    GEOMETRY_MAX_STEPS,
    MAX_STEPS,
    REFERENCE_BATCH_SIZE,
    Schedule,
    auto_batch_size,
    training_schedule,
)
from .validation import MIN_VALIDATION_ROWS, draw_validation_sets, holdable_groups, holds_out_groups, validation_split

#: Parameters that define the network (its architecture and input map); the others say how to train or infer.
NETWORK_PARAMS = ("attention", "n_inducing", "window_size", "window_attention", "attention_options", "compat",
                  "n_blocks", "n_heads", "d_model", "layer_norm", "dropout", "canonical_features", "embedder",
                  "local_geometry", "embed_features", "context_gate")

#: The shipped kernel ``init='generic'`` fine-tunes (loaded through :func:`skabc.pretrained.load`).
GENERIC = "generic"
#: ``init_`` of a fit that continues a fitted kernel's own weights (``warm_start=True``).
WARM_START = "warm_start"

#: The training spec's attribute holding a RandomState ``random_state``'s state as the fit found it, before this
#: module and training draw from it: a checkpoint records the instance by it
#: (:func:`~skabc.training.checkpoints.describe_params`).
RANDOM_STATE_AT_FIT = "_random_state_at_fit"

#: Fixed held-out sets scored after every epoch when early stopping is on.
N_VALIDATION_SETS = 24

#: ``fine_tune_alpha='auto'`` where no held-out groups can show what fine-tuning costs on new data: the share
#: of the fine-tuned weights mixed with the generic ones.  Chosen on eight class splits of scikit-learn's digits
#: other than those of benchmarks/own_kernel.py (benchmarks/digit_splits.py: train on 3 or 5 digits, cluster
#: sets of the unseen ones): fine-tuned minus untrained ARI +0.030 on average; -0.058 before (weights unmixed,
#: settings re-chosen on the held-out sets, two training classes allowed).
CLASS_SPLIT_ALPHA = 0.5


@dataclass
class TrainingPlan:
    """The resolved training of one fit (see :func:`plan_training`)."""

    init: str
    network_params: dict
    spec: object  # a ContextualKernel with every training 'auto' resolved: what train() reads
    start_state: dict | None
    recommended_clustering: dict
    train_labels: np.ndarray
    schedule: Schedule | None
    fine_tune_alpha: float = 1.0
    callbacks: list = field(default_factory=list)
    max_time: float | None = None
    #: The held-out rows' labels, ``-1`` elsewhere (``None`` without validation): a checkpoint records them.
    validation_labels: np.ndarray | None = None

    @property
    def batch_size(self) -> int:
        """The resolved ``batch_size`` (the training spec's)."""
        return self.spec.batch_size

    def start_record(self) -> dict:
        """Where this fit starts, as its checkpoint records it (the spec trains as from scratch either way)."""
        record = {"init_": self.init, "fine_tune_alpha_": float(self.fine_tune_alpha)}
        if self.init == WARM_START:  # a resume starts from them again (checkpoints.saved_warm_start)
            record["recommended_clustering"] = dict(self.recommended_clustering)
        return record

    def record(self, kernel, net) -> None:
        """Set ``kernel``'s fitted attributes that say how this plan's training went."""
        kernel.init_ = self.init
        kernel.fine_tune_alpha_ = self.fine_tune_alpha
        kernel.network_params_ = self.network_params
        kernel.schedule_ = self.schedule
        kernel.batch_size_ = self.batch_size
        kernel.max_time_ = self.max_time
        validation = dict(net.callbacks_).get("validation")
        # The result and the start as each clusters (arbiter and mixed weights included), not the epochs' scores.
        kernel.validation_score_ = getattr(validation, "final_score_", None)
        kernel.start_validation_score_ = getattr(validation, "final_start_score_", None)
        # Settings chosen on the held-out sets for the weights kept, where there were held-out sets.
        kernel.recommended_clustering_ = dict(getattr(validation, "best_settings_", self.recommended_clustering))
        kernel.validation_settings_scores_ = dict(getattr(validation, "settings_scores_", {}))


def network_of(kernel):
    """A kernel whose network parameters are those of ``kernel``'s fitted network (the generic's if fine-tuned)."""
    network = getattr(kernel, "network_params_", None)
    if not network:
        return kernel
    return type(kernel)(**{**kernel.get_params(deep=False), **network})


def default_network_params(kernel) -> dict:
    """The ``__init__`` defaults of the network parameters of ``kernel``'s class."""
    signature = inspect.signature(type(kernel).__init__).parameters
    return {name: signature[name].default for name in NETWORK_PARAMS}


def resolve_init(kernel, continuing: bool) -> str:
    """``'warm_start'`` when continuing a fitted kernel, else ``init`` with ``'auto'`` resolved.

    ``'auto'`` is ``'generic'`` when every network parameter is at its
    default (the user asked for no particular network) or the generic kernel's own (a clone of it, as model
    selection makes, which dropped its weights: a new network of its shape would be trained silently otherwise),
    else ``'scratch'``.
    """
    if continuing:
        return WARM_START
    if kernel.init != "auto":
        return kernel.init
    own = {name: getattr(kernel, name) for name in NETWORK_PARAMS}
    return GENERIC if own == default_network_params(kernel) or own == generic_network_params() else "scratch"


@functools.cache
def generic_network_params() -> dict:
    """The network parameters of the shipped generic kernel, read from its file's description (nothing built)."""
    from .. import persistence
    from ..kernels.contextual import ContextualKernel
    from ..pretrained import AVAILABLE, PRETRAINED_DIR

    try:
        part = persistence.read_description(PRETRAINED_DIR / AVAILABLE[GENERIC])["kernel"]
    except (OSError, ValueError, KeyError):  # an installation without it: no network is the generic's
        return {}
    saved = persistence.unlist(part.get("network_params") or part["params"])
    defaults = default_network_params(ContextualKernel())  # a parameter newer than the file: its default
    return {name: saved.get(name, defaults[name]) for name in NETWORK_PARAMS}


def reads_canonical_input(kernel) -> bool:
    """Whether the network ``kernel``'s fit trains canonicalises every set (so any magnitude fits its float32
    cast): its own ``canonical_features``, or the generic network that ``init`` starts it from."""
    continuing = kernel.warm_start and hasattr(kernel, "module_")
    return network_of(kernel).canonical_features is not None or resolve_init(kernel, continuing) == GENERIC


#: A network that reads raw coordinates (no canonical_features, the MLP embedder) learns slowly or not at all from
#: columns offset by many spreads (X + 10: the median over the columns of |mean| / std above RAW_MAX_OFFSET, with
#: |mean| above RAW_MIN_OFFSET), of a typical spread outside RAW_SPREAD_RANGE (X / 100, X * 100), or where one
#: column spreads RAW_MAX_SPREAD_RATIO times more than the typical one (raw wine: proline).  Small spreads hurt
#: first: blob sets standardised then scaled, one block, 10 epochs, the loss fell 0.67 -> 0.34 at spread 1,
#: 0.70 -> 0.51 at 0.3, 0.70 -> 0.61 at 0.2 and not at all at 0.1 or below (load_diabetes' columns: 0.048);
#: 0.65 -> 0.44 at 30.  Pixels / 16 spread 0.27.  One column offset alone (a year beside standardised columns) is
#: flagged past RAW_MAX_COLUMN_OFFSET times both its own and the typical spread: with a third column of unit noise
#: offset by 100 or 2,000 the loss stayed at 0.69 (0.70 -> 0.43 at 0, 0.60 at 10, 0.45 at 5); raw iris (5.8 at a
#: spread of 0.8) and pixels on white stay below it.
RAW_MAX_OFFSET, RAW_MIN_OFFSET, RAW_MAX_COLUMN_OFFSET = 5.0, 2.0, 8.0
RAW_SPREAD_RANGE = (0.2, 50.0)
RAW_MAX_SPREAD_RATIO = 50.0


def warn_if_raw_columns_unscaled(X: np.ndarray, network: dict) -> None:
    """Warn where a network of raw coordinates is trained on columns far from standardised.

    Such a network (the paper's recipes) sees the coordinates as they come: a large common offset, or spreads
    of 0.01 or 100, leave its first layer's units saturated or flat, and the loss does not fall; one column of
    a far larger spread is all its distances see.  Medians over the varying columns decide the offset and the
    spread, so a few odd columns (image borders) do not, nor does an offset of about 1 (images on a white
    background); one column far off by its own and the typical spreads (a year) does, and is named.
    """
    if network.get("canonical_features") is not None or network.get("embedder") not in (None, "mlp"):
        return
    spread = X.std(axis=0, dtype=np.float64)
    varying = spread > 0
    if not varying.any():
        return
    offset, spread = np.abs(X.mean(axis=0, dtype=np.float64))[varying], spread[varying]
    typical = float(np.median(spread))
    shifted = float(np.median(offset / spread)) > RAW_MAX_OFFSET and float(np.median(offset)) > RAW_MIN_OFFSET
    far = np.flatnonzero(offset > RAW_MAX_COLUMN_OFFSET * np.maximum(spread, typical))
    if shifted or far.size or not RAW_SPREAD_RANGE[0] <= typical <= RAW_SPREAD_RANGE[1] or spread.max() > (
            RAW_MAX_SPREAD_RATIO * typical):
        column = np.flatnonzero(varying)[far[0]] if far.size else None
        apart = "" if column is None else (f"; column {column} lies at {X[:, column].mean(dtype=np.float64):.3g}, "
                                           f"{offset[far[0]] / spread[far[0]]:.3g} of its stds from 0")
        warn_user(f"this network reads raw coordinates (canonical_features=None), and X's columns are far from "
                  f"standardised (median |mean| {np.median(offset):.3g}, median std {typical:.3g}, largest std "
                  f"{spread.max():.3g}{apart}): it may learn little or nothing. Standardise X first "
                  "(sklearn.preprocessing.StandardScaler, also before transform), or set canonical_features.",
                  SkabcWarning)


def plan_training(kernel, X: np.ndarray, labels: np.ndarray, group_codes) -> TrainingPlan:
    """Resolve where ``kernel``'s fit starts, how long it trains and how it validates.

    Parameters
    ----------
    kernel : ContextualKernel
        Parameters validated.
    X : ndarray of shape (n_samples, n_features), float32
    labels : ndarray of int64
        ``-1`` for unlabelled rows.
    group_codes : ndarray of int64 or None

    Returns
    -------
    plan : TrainingPlan

    Raises
    ------
    ValueError
        If ``init='generic'`` is combined with network parameters of its
        own, the generic kernel cannot be fine-tuned, or ``d_model`` is not
        divisible by ``n_heads``.
    """
    warn_if_labels_teach_one_answer(labels, group_codes)
    device = resolve_device(kernel.device)  # once: the spec trains there (the fitted kernel's device_)
    continuing = kernel.warm_start and hasattr(kernel, "module_")
    init = resolve_init(kernel, continuing)
    own_network = {name: getattr(kernel, name) for name in NETWORK_PARAMS}
    # A warm start continues from the fitted weights and network, with the settings recommended for them.
    start_state = kernel.module_.state_dict() if continuing else None
    recommended = kernel.recommended_clustering() if continuing else {}
    network = own_network
    if continuing:
        fitted = getattr(kernel, "network_params_", None)  # absent on a loaded kernel: its own parameters
        network = dict(fitted or own_network)
        # A kernel fine-tuned from the generic one (however many warm starts ago) runs the generic network
        # with its own parameters at their defaults; any other runs its own.  Changed since: refused.
        from_generic = bool(fitted) and network != own_network and network == generic_network_params()
        expected = default_network_params(kernel) if from_generic else network
        moved = {k: v for k, v in own_network.items() if v != expected[k]}
        if moved:
            kept = (" (a kernel fine-tuned from the generic one keeps its network parameters at their defaults: "
                    "its network is network_params_)") if from_generic else ""
            raise ValueError(
                "warm_start=True continues the fitted network and cannot change its parameters "
                f"({', '.join(f'{k}: {expected[k]!r} -> {v!r}' for k, v in moved.items())}){kept}; reset them, or "
                "set warm_start=False to train a new network."
            )
    if init == GENERIC:
        changed = {k: v for k, v in own_network.items() if v != default_network_params(kernel)[k]}
        if changed and own_network != generic_network_params():  # its own network may be named, as a clone does
            raise ValueError(
                f"init='generic' fine-tunes the shipped generic kernel, whose network is fixed; it cannot take "
                f"network parameters of its own ({', '.join(f'{k}={v!r}' for k, v in changed.items())}). "
                "Leave them at their defaults, or pass init='scratch' to train that network from scratch."
            )
        start = _load_generic(device)
        network = _network_params(start)
        start_state = start.module_.state_dict()
        recommended = start.recommended_clustering() or _shipped_recommendation()

    warn_if_raw_columns_unscaled(X, network)
    # A checkpoint knows a RandomState by its state before the draws below (and training's) advance it.
    state_at_fit = kernel.random_state.get_state() if isinstance(kernel.random_state, np.random.RandomState) else None
    rng = np.random.default_rng(check_random_state(kernel.random_state).randint(np.iinfo(np.int32).max))
    early_stopping = kernel.early_stopping if kernel.early_stopping != "auto" else kernel.max_epochs == "auto"
    held_out = validation_split(labels, group_codes, kernel.validation_fraction, rng) if early_stopping else None
    if held_out is None and early_stopping and not isinstance(kernel.early_stopping, str):  # True or np.True_
        warn_user(f"early_stopping=True, but validation_fraction={kernel.validation_fraction} of these labels "
                  "leaves no useful held-out split (too few rows either side, or, without groups, held-out rows of one "
                  "class only): training runs without validation",
                  SkabcWarning)
    if held_out is not None and holds_out_groups(labels, group_codes):
        _warn_few_held_out_groups(len(np.unique(group_codes[held_out])), len(holdable_groups(labels, group_codes)))
    train_labels = labels if held_out is None else np.where(held_out, -1, labels)
    validation_labels = None if held_out is None else np.where(held_out, labels, -1)

    schedule = None
    max_epochs, sets_per_epoch, batch_size = kernel.max_epochs, kernel.sets_per_epoch, kernel.batch_size
    if max_epochs == "auto":
        n_rows, n_classes = int((train_labels >= 0).sum()), _classes_per_group(train_labels, group_codes)
        cap = GEOMETRY_MAX_STEPS if network.get("local_geometry") else MAX_STEPS
        set_size = check_set_size(kernel.set_size)
        if batch_size == "auto":
            batch_size = auto_batch_size(n_rows, n_classes, cap, set_size)
        schedule = training_schedule(n_rows, n_classes, batch_size, cap, set_size)
        max_epochs, per_epoch = schedule.max_epochs, schedule.sets_per_epoch
        if sets_per_epoch is None:
            sets_per_epoch = per_epoch
        else:  # the user's epoch length, as many epochs as the schedule's steps need (schedule_ says what runs)
            max_epochs = max(1, round(schedule.n_steps * batch_size / sets_per_epoch))
            schedule = Schedule(max_epochs, sets_per_epoch, max_epochs * math.ceil(sets_per_epoch / batch_size))
    elif batch_size == "auto":
        batch_size = REFERENCE_BATCH_SIZE
    spec = type(kernel)(**{**kernel.get_params(deep=False), **network, "max_epochs": max_epochs,
                           # int: torch's DataLoader refuses a numpy integer batch size (a grid over np.arange)
                           "sets_per_epoch": sets_per_epoch, "batch_size": int(batch_size), "early_stopping": False,
                           "init": "scratch", "device": str(device)})
    if state_at_fit is not None:
        setattr(spec, RANDOM_STATE_AT_FIT, state_at_fit)
    if spec.d_model % spec.n_heads != 0:
        raise ValueError(f"d_model={spec.d_model} must be divisible by n_heads={spec.n_heads}.")
    if continuing and kernel.checkpoint_dir is not None:
        # A warm-start run of checkpoint_dir begins again where it began, not at the weights its interrupted fit
        # left on the kernel (probe 63a).  Imported here: checkpoints reads this module's names.
        from .checkpoints import saved_warm_start

        saved = saved_warm_start(spec, X, train_labels, group_codes, validation_labels, start_state)
        if saved is not None:
            start_state, recommended = saved

    on_groups = held_out is not None and holds_out_groups(labels, group_codes)
    alpha = resolve_fine_tune_alpha(kernel, init, on_groups)
    callbacks = []
    if held_out is None:
        # The arbiter's forest learned the start's affinities: only held-out sets can show it still fits.
        recommended = {name: value for name, value in recommended.items() if name != "arbiter"}
    else:
        sets = draw_validation_sets(X, labels, group_codes, held_out, N_VALIDATION_SETS,
                                    check_set_size(kernel.set_size), int(rng.integers(2**31 - 1)), set_transform(spec))
        # Sets of held-out classes credit a fine-tune with what it memorised of its training classes: there the
        # generic kernel's own clustering settings stay (its arbiter included), only the weights are validated and
        # whether the kNN graph cuts the sets at the arbiter's k (choose_partition).
        class_split = not on_groups and init == GENERIC
        callbacks.append(("validation", ValidationSetsScoring(sets, recommended, patience=kernel.n_iter_no_change,
                                                              choose_clustering=not class_split, alpha=alpha,
                                                              knn_partition=class_split, start_state=start_state,
                                                              start_is_candidate=init != "scratch" or continuing)))
    if held_out is None and alpha < 1.0:
        callbacks.append(("start_weight_mix", StartWeightMix(alpha, start_state)))
    if held_out is None and early_stopping and kernel.early_stopping == "auto" and kernel.verbose:
        # The default asked for validation and got none (asked for explicitly, a warning said so above): without
        # this line a log without scores says nothing why.
        print(f"No validation: these labels leave no useful held-out split (validation_fraction="
              f"{kernel.validation_fraction}; a split needs at least {MIN_VALIDATION_ROWS} held-out rows and 2 left "
              "to train on, without groups held-out rows of two or more classes, and with groups 2 groups of 2 or more "
              "labelled rows), so no held-out set scores the "
              "training against its start and no early stopping ends it"
              + (f"; fine_tune_alpha={alpha:g} of the trained weights are kept." if alpha < 1.0 else "."),
              flush=True)
    max_time = kernel.max_time
    if max_time == "auto":
        max_time = AUTO_MAX_TIME if schedule is not None else None
    if max_time is not None:
        max_time = float(max_time)  # max_time_ is documented as a float (an int given stays one otherwise)
        callbacks.append(("time_limit", TimeLimit(max_time)))
    return TrainingPlan(init=init, network_params=network, spec=spec, start_state=start_state,
                        recommended_clustering=recommended, train_labels=train_labels, schedule=schedule,
                        fine_tune_alpha=alpha, callbacks=callbacks, max_time=max_time,
                        validation_labels=validation_labels)


def resolve_fine_tune_alpha(kernel, init: str, validates_on_groups: bool) -> float:
    """``fine_tune_alpha`` with ``'auto'`` resolved: the share of the trained weights in the result.

    ``'auto'`` is 1.0 unless the fit fine-tunes the generic kernel without
    held-out groups to validate on: then :data:`CLASS_SPLIT_ALPHA`.  Sets of
    held-out groups are new problems of the user's kind and choose the best
    weights as they are; held-out classes come with rows of the training
    classes, whose sets reward memorising those classes, and a network
    fine-tuned on a few classes can lose on new ones what the validation
    sets credit it with.

    Raises
    ------
    ValueError
        If ``fine_tune_alpha`` is below 1 for a fit that does not start
        from the generic kernel (a scratch start is random weights).
    """
    if kernel.fine_tune_alpha == "auto":
        return CLASS_SPLIT_ALPHA if init == GENERIC and not validates_on_groups else 1.0
    alpha = float(kernel.fine_tune_alpha)
    if alpha < 1.0 and init != GENERIC:
        raise ValueError(
            f"fine_tune_alpha={kernel.fine_tune_alpha!r} mixes the trained weights with the generic kernel's, so it "
            f"needs init='generic' (this fit resolved init to {init!r}); leave it at 'auto' or 1.0."
        )
    return alpha


def warn_if_labels_teach_one_answer(labels: np.ndarray, group_codes) -> None:
    """Warn where no training set can hold both a same-cluster and a different-cluster pair.

    Training sets are drawn within groups: with one class per group the kernel can only learn that every
    pair belongs together; with every labelled row of a group its own class, that none does.
    """
    pairs, counts = _group_class_pairs(labels, group_codes)
    rows_per_group = np.bincount(pairs[:, 0] - pairs[:, 0].min(), weights=counts) if len(pairs) else counts
    if len(pairs) == 0 or rows_per_group.max() < 2:
        return  # no set can be drawn at all: the sampler says so
    if not (counts >= 2).any():
        warn_user("No two labelled rows of a group share a class in y: the kernel can only learn that no two "
                  "points belong together.", SkabcWarning)
    elif _classes_per_group(labels, group_codes) < 2:
        where = "a single class" if group_codes is None else "one class per group"
        warn_user(f"y holds {where}: the kernel can only learn that all points of a set belong "
                  "together.", SkabcWarning)


def _group_class_pairs(labels: np.ndarray, group_codes) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (group, class) pairs of the labelled rows (one group when there are none), and their rows."""
    labelled = labels >= 0
    groups = np.zeros(int(labelled.sum()), dtype=np.int64) if group_codes is None else group_codes[labelled]
    return np.unique(np.column_stack([groups, labels[labelled]]), axis=0, return_counts=True)


def _classes_per_group(labels: np.ndarray, group_codes) -> int:
    """Largest number of distinct labelled classes within one group (all rows when no groups)."""
    pairs, _ = _group_class_pairs(labels, group_codes)
    return max(1, int(np.bincount(pairs[:, 0] - pairs[:, 0].min()).max())) if len(pairs) else 1


def _network_params(kernel) -> dict:
    return {name: kernel.get_params()[name] for name in NETWORK_PARAMS}


def _load_generic(device):
    from ..kernels.contextual import ContextualKernel
    from ..pretrained import load

    # On the device the fit trains on, as plan_training resolved it ('auto' once put the start on cuda:0 under
    # device='cpu', and mixing it with the trained weights failed once training ended).
    start = load(GENERIC, device=str(device))
    if not isinstance(start, ContextualKernel) or start.canonical_features is None:
        raise ValueError(
            f"init='generic' needs the shipped {GENERIC!r} kernel to be one ContextualKernel on canonical "
            f"features (any input width); this installation's is a {type(start).__name__}: pass init='scratch'."
        )
    return start


def _shipped_recommendation() -> dict:
    from ..pretrained import RECOMMENDED_CLUSTERING

    return dict(RECOMMENDED_CLUSTERING.get(GENERIC, {}))


#: Fewest held-out groups whose score a fit trusts without a word: the epoch kept, the clustering settings and
#: validation_score_ are all chosen on sets of these groups.
STEADY_HELD_OUT_GROUPS = 3


def _warn_few_held_out_groups(n_held_out: int, n_groups: int) -> None:
    """Say when early stopping rests on fewer than :data:`STEADY_HELD_OUT_GROUPS` held-out groups (probe 68g: digits
    in 4 groups of two classes, one held out, scored 0.61-0.75 against a start of 0.33-0.35 while the kernel lost
    0.2-0.5 ARI to its zero-shot start on unseen digits)."""
    if n_held_out < STEADY_HELD_OUT_GROUPS:
        warn_user(f"early stopping holds out {n_held_out} of {n_groups} groups: the epoch kept, the clustering "
                  "settings and validation_score_ rest on that few problems and can flatter the kernel on new ones; "
                  "more groups give a steadier choice, and with few groups of few classes each, fitting without "
                  "groups (classes held out, the fine-tune mixed with its start) is the safer one", SkabcWarning)
