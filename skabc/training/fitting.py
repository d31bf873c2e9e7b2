"""One ContextualKernel fit, end to end: plan it, train (or restore a finished run's kernel), record how it went."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from ..nn.build import record_architecture, set_transform
from ..sampling import check_set_size
from .callbacks import remove_partial_files
from .checkpoints import check_checkpoint_dir
from .divergence import check_trained_weights
from .net import train
from .plan import WARM_START, plan_training
from .result import keep_result, restore_result, run_is_complete


@contextlib.contextmanager
def unchanged_on_failure(estimator, names: tuple | None = ("n_features_in_", "feature_names_in_")):
    """Give ``estimator`` back the fitted ``names`` it had where the block raises (a refused or failed fit);
    ``names=None``: every fitted attribute (``name_``, and the ``_fitted...`` records beside them).

    Input validation sets the width and names of the new ``X`` before training can refuse it (a warm start on
    another width): the kernel then kept its weights but took the refused width, and failed on its own data.
    """
    def restored(name: str) -> bool:
        return name.endswith("_") or name.startswith("_fitted") if names is None else name in names

    before = {name: value for name, value in vars(estimator).items() if restored(name)}
    try:
        yield
    except BaseException:
        for name in [name for name in vars(estimator) if restored(name)]:
            delattr(estimator, name)
        vars(estimator).update(before)
        raise


def fit_kernel(kernel, X: np.ndarray, labels: np.ndarray, group_codes) -> None:
    """Make ``kernel`` fitted on the labelled rows: every fitted attribute of ``ContextualKernel.fit``.

    Parameters
    ----------
    kernel : ContextualKernel
        Parameters validated; ``n_features_in_`` (and ``feature_names_in_``) already set for ``X``.
    X : ndarray of shape (n_samples, n_features), float32
    labels : ndarray of int64
        ``-1`` for unlabelled rows.
    group_codes : ndarray of int64 or None
    """
    if not np.any(labels >= 0):  # else the schedule's own check says it, in its terms (probe 52e)
        raise ValueError("y has no labelled rows (every label is -1): a ContextualKernel learns which rows belong "
                         "together from labelled ones; label some, or use a fitted kernel as it is.")
    check_checkpoint_dir(kernel.checkpoint_dir, kernel.random_state)
    if kernel.checkpoint_dir is not None and Path(kernel.checkpoint_dir).is_dir():
        remove_partial_files(kernel.checkpoint_dir)
    plan = plan_training(kernel, X, labels, group_codes)
    if restore_result(kernel, plan, X, group_codes):
        return
    keep_result(kernel, complete=False)  # a kernel kept before no longer matches what this run will leave
    net, _ = train(plan.spec, X, plan.train_labels, group_codes, check_set_size(kernel.set_size),
                        plan.start_state, plan.callbacks, start=plan.start_record(),
                        validation_labels=plan.validation_labels)
    net.module_.eval()
    check_trained_weights(net.module_, X, set_transform(plan.spec), labels)  # before the kernel takes them
    kernel.net_, kernel.module_ = net, net.module_
    record_architecture(kernel)
    # Every trained batch's sets: an epoch max_time cut short moved the weights too (counted 0 in a first epoch,
    # such a kernel passed for the untouched generic one).
    kernel.n_training_sets_ = int(sum(batch.get("train_batch_size", 0) for row in kernel.net_.history
                                      for batch in row.get("batches", ()) if "train_loss" in batch))
    # Where the held-out sets kept an untrained start (the generic weights), nothing trained what the kernel holds; a
    # warm start's weights were trained before, and its count stays above 0.
    validation = dict(kernel.net_.callbacks_).get("validation")
    if validation is not None and validation.holds_start and plan.init != WARM_START:
        kernel.n_training_sets_ = 0
    plan.record(kernel, kernel.net_)
    keep_result(kernel, run_is_complete(plan.spec, kernel.net_))
