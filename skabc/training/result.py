"""A complete fit's result, kept in its ``checkpoint_dir``: fitting again on that run returns the same kernel.

skorch's checkpoint holds the history and the last epoch's weights, not what the fit made of them: the best
validated epoch, its mix with the starting weights, the clustering settings chosen on the held-out sets.
Re-deriving those from a run with no epochs left to train gave another kernel (the starting weights, where
the held-out sets had preferred a trained epoch).  So a fit that completes its run (every epoch, or stopped
by early stopping) saves the fitted kernel next to the checkpoint, and a later fit of the same configuration
on the same data loads it (validated as any saved kernel) instead of training.  A run that stops early for
``max_time`` or an interruption is not complete: fitting again resumes it, and no result is kept.  The kept
kernel records the run it ends (:func:`~skabc.training.checkpoints.run_record`), so a kept file of another run
(another folder's, say) is refused.
"""

from __future__ import annotations

from pathlib import Path

from safetensors import safe_open

from .. import persistence
from .._user_warnings import warn_user
from ..exceptions import SkabcWarning
from ..persistence import json_ready
from ..sampling import check_set_size
from .checkpoints import RESULT_FILE, checkpointed_epochs, run_record, started_as_this_run
from .early_stopping import choice_interrupted, finished_epochs
from .net import n_sets_per_epoch
from .plan import WARM_START

#: Fitted attributes a restored kernel keeps from this fit: they describe its input, which validation just set.
THIS_FITS_INPUT = ("n_features_in_", "feature_names_in_")
#: Parameters of the fit's held-out validation (early stopping) that shape its result where it validates.
VALIDATION_PARAMS = ("n_iter_no_change", "validation_fraction")
#: The kept kernel's metadata entry (beside skabc's description, which load validates) naming the run it ends.
RUN_ENTRY = "skabc_run"


def run_is_complete(spec, net) -> bool:
    """Whether ``net`` trained every epoch of ``spec`` or its validation stopped it (not ``max_time``)."""
    if choice_interrupted(net):  # its settings were never chosen
        return False
    validation = dict(net.callbacks_).get("validation")
    return finished_epochs(net) >= spec.max_epochs or bool(getattr(validation, "stopped_", False))


def keep_result(kernel, complete: bool) -> None:
    """Save the just-fitted ``kernel`` into its ``checkpoint_dir`` if its run is complete; else drop any old one."""
    if kernel.checkpoint_dir is None:
        return
    path = Path(kernel.checkpoint_dir) / RESULT_FILE
    if complete:
        record = run_record(kernel.checkpoint_dir)
        try:
            persistence.save(kernel, path, None if record is None else {RUN_ENTRY: record})
            return
        except (TypeError, ValueError):  # a custom callable or module has no safe file: nothing to restore
            pass
    path.unlink(missing_ok=True)


def restore_result(kernel, plan, X, group_codes) -> bool:
    """Make ``kernel`` the fitted kernel a complete run of ``plan`` on these data kept; ``False`` if there is none.

    The checkpoint's configuration (the network trained, ``plan.spec``) and data are checked as for a resume (a
    different one is refused), and so is what the fit resolved around it (:func:`_resolved_otherwise`).
    """
    spec = plan.spec
    if kernel.checkpoint_dir is None or not (Path(kernel.checkpoint_dir) / RESULT_FILE).is_file():
        return False
    # A run that early stopping ended before its first checkpoint left its configuration and no history: it is
    # known by that file (read before checkpointed_epochs would write this fit's over it), else trained again.
    unsaved = started_as_this_run(spec, X, plan.train_labels, group_codes, plan.validation_labels)
    done = 0 if unsaved else checkpointed_epochs(spec, X, plan.train_labels, group_codes, announce=False,
                                                 validation_labels=plan.validation_labels)
    if not done and not unsaved:
        # Nothing here it could have come from: another folder's file (or a run's, its checkpoint removed), which
        # this fit would delete on its way.
        raise ValueError(
            f"checkpoint_dir={str(kernel.checkpoint_dir)!r} holds a kept kernel ({RESULT_FILE}) but no checkpoint of "
            "the run that fitted it; remove that file (or use another directory) to train here.")
    try:
        restored = type(kernel).load(Path(kernel.checkpoint_dir) / RESULT_FILE, device=kernel.device)
    except ValueError as error:  # damaged or foreign: say where it lies and what to do
        raise ValueError(f"checkpoint_dir={str(kernel.checkpoint_dir)!r} holds a kept kernel ({RESULT_FILE}) that "
                         f"cannot be read: {error}; remove the directory (or use another) to train again.") from None
    kept_run = _kept_run(Path(kernel.checkpoint_dir) / RESULT_FILE)
    if kept_run is not None and kept_run != run_record(kernel.checkpoint_dir):  # kept files of earlier versions: None
        raise ValueError(
            f"checkpoint_dir={str(kernel.checkpoint_dir)!r} holds a kept kernel ({RESULT_FILE}) that another run "
            "fitted (another configuration or other data than this folder's checkpoint, another folder's file); "
            "remove that file to derive the kernel again from the checkpoint, or remove the directory (or use "
            "another) to train again.")
    differ = _resolved_otherwise(kernel, plan, restored)
    if differ:
        raise ValueError(
            f"checkpoint_dir={str(kernel.checkpoint_dir)!r} holds a finished run whose fitted kernel ({RESULT_FILE}) "
            f"was made with other settings: {differ}; use another directory or remove it to train again.")
    kernel.__dict__.pop("net_", None)  # a previous fit's training net says nothing about this kernel
    for name, value in vars(restored).items():
        # The width and column names are this fit's X's (validated before): the data digest does not see names.
        if name.endswith("_") and name not in THIS_FITS_INPUT:
            setattr(kernel, name, value)
    # The checkpoint may predate the last epochs (checkpoint_every > 1); the kernel counts the sets it trained on.
    n_sets = n_sets_per_epoch(spec, int((plan.train_labels >= 0).sum()), check_set_size(spec.set_size))
    counted = getattr(restored, "n_training_sets_", 0)  # 0: a file that did not record it
    trained = round(counted / n_sets) if n_sets and counted else done
    stopped = ", stopped early" if trained < spec.max_epochs else ""
    warn_user(f"checkpoint_dir={str(kernel.checkpoint_dir)!r} holds a finished run of this configuration "
              f"({trained} of {spec.max_epochs} epochs{stopped}): nothing is trained, the kernel that run fitted is "
              f"restored from {RESULT_FILE}; use another directory or remove it to train again",
              SkabcWarning)
    return True


def _kept_run(path: Path) -> str | None:
    """The run a kept kernel file records (:data:`RUN_ENTRY`), ``None`` where it records none."""
    with safe_open(str(path), framework="pt") as file:
        return (file.metadata() or {}).get(RUN_ENTRY)


def _resolved_otherwise(kernel, plan, kept) -> str:
    """What ``kept`` (a finished run's kernel) resolved otherwise than this fit's ``plan``, as ``'name=there, here'``.

    The checkpoint's configuration leaves these out (it is the network's, and older checkpoints lack them): where
    the fit started and its share of the trained weights (unless it continues the kernel with ``warm_start``,
    which the guide promises returns the kept run), the network, the batches, and, where it validates, its early
    stopping.  Resolved values are compared, so ``'auto'`` and the value it became are the same.
    """
    ours = {"network_params_": plan.network_params, "batch_size_": plan.batch_size}
    if plan.init != WARM_START:  # continuing the kept kernel itself: no start of its own to compare
        ours.update({"init_": plan.init, "fine_tune_alpha_": plan.fine_tune_alpha})
    validates = "validation" in dict(plan.callbacks)
    ours["validated"] = validates
    theirs = {name: getattr(kept, name, None) for name in ours}
    theirs["validated"] = kept.__dict__.get("validation_score_") is not None
    if validates:
        ours.update({name: kernel.get_params(deep=False)[name] for name in VALIDATION_PARAMS})
        theirs.update({name: kept.get_params(deep=False)[name] for name in VALIDATION_PARAMS})
    differ = [name for name in ours if json_ready(ours[name], repr) != json_ready(theirs[name], repr)]
    return ", ".join(f"{name}={theirs[name]!r} there, {ours[name]!r} here" for name in differ)
