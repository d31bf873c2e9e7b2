"""A complete fit's result, kept in its ``checkpoint_dir``: fitting again on that run returns the same kernel.

skorch's checkpoint holds the history and the last epoch's weights, not what the fit made of them: the best
validated epoch, its mix with the starting weights, the clustering settings chosen on the held-out sets.
Re-deriving those from a run with no epochs left to train gave another kernel (the starting weights, where
the held-out sets had preferred a trained epoch).  So a fit that completes its run (every epoch, or stopped
by early stopping) saves the fitted kernel next to the checkpoint, and a later fit of the same configuration
on the same data loads it (validated as any saved kernel) instead of training.  A run that stops early for
``max_time`` or an interruption is not complete: fitting again resumes it, and no result is kept.
"""

from __future__ import annotations

from pathlib import Path

from .._user_warnings import warn_user
from ..exceptions import SkabcWarning
from ..persistence import json_ready
from .net import checkpointed_epochs

#: The fitted kernel of a complete run, in ``checkpoint_dir`` (skabc's safe format).
RESULT_FILE = "fitted_kernel.safetensors"
#: Parameters that do not change what a complete run fitted: inference and bookkeeping, and a time limit that a
#: complete run did not reach.  Every other one must equal the kept kernel's (the checkpoint's configuration is
#: that of the network trained, which leaves out the fit's own early stopping and mixing with the start).
NOT_IN_RESULT = ("verbose", "device", "checkpoint_dir", "checkpoint_every", "memory_limit", "affinity_mode",
                 "n_neighbors", "n_random_neighbors", "warm_start", "max_time")


def run_is_complete(spec, net) -> bool:
    """Whether ``net`` trained every epoch of ``spec`` or its validation stopped it (not ``max_time``)."""
    finished = sum("train_loss" in row for row in net.history)
    validation = dict(net.callbacks_).get("validation")
    return finished >= spec.max_epochs or bool(getattr(validation, "stopped_", False))


def keep_result(kernel, complete: bool) -> None:
    """Save the just-fitted ``kernel`` into its ``checkpoint_dir`` if its run is complete; else drop any old one."""
    if kernel.checkpoint_dir is None:
        return
    path = Path(kernel.checkpoint_dir) / RESULT_FILE
    if complete:
        try:
            kernel.save(path)
            return
        except (TypeError, ValueError):  # a custom callable or module has no safe file: nothing to restore
            pass
    path.unlink(missing_ok=True)


def restore_result(kernel, spec, X, labels, group_codes) -> bool:
    """Make ``kernel`` the fitted kernel a complete run of ``spec`` on these data kept; ``False`` if there is none.

    The checkpoint's configuration and data are checked as for a resume (a different one is refused).
    """
    if kernel.checkpoint_dir is None or not (Path(kernel.checkpoint_dir) / RESULT_FILE).is_file():
        return False
    done = checkpointed_epochs(spec, X, labels, group_codes, announce=False)
    if not done:
        return False
    restored = type(kernel).load(Path(kernel.checkpoint_dir) / RESULT_FILE, device=kernel.device)
    mine, kept = kernel.get_params(deep=False), restored.get_params(deep=False)
    differ = [name for name in mine if name not in NOT_IN_RESULT
              and json_ready(mine[name], repr) != json_ready(kept.get(name), repr)]
    if differ:
        values = ", ".join(f"{name}={kept.get(name)!r} there, {mine[name]!r} here" for name in differ)
        raise ValueError(
            f"checkpoint_dir={str(kernel.checkpoint_dir)!r} holds a finished run whose fitted kernel ({RESULT_FILE}) "
            f"was made with other parameters: {values}; use another directory or remove it to train again.")
    kernel.__dict__.pop("net_", None)  # a previous fit's training net says nothing about this kernel
    for name, value in vars(restored).items():
        if name.endswith("_"):
            setattr(kernel, name, value)
    stopped = ", stopped early" if done < spec.max_epochs else ""
    warn_user(f"checkpoint_dir={str(kernel.checkpoint_dir)!r} holds a finished run of this configuration "
              f"({done} of {spec.max_epochs} epochs{stopped}): nothing is trained, the kernel that run fitted is "
              f"restored from {RESULT_FILE}; use another directory or remove it to train again",
              SkabcWarning)
    return True
