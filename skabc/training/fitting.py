"""One ContextualKernel fit, end to end: plan it, train (or restore a finished run's kernel), record how it went."""

from __future__ import annotations

import numpy as np

from ..nn.build import record_architecture
from ..sampling import check_set_size
from .net import check_checkpoint_dir, train
from .plan import plan_training
from .result import keep_result, restore_result, run_is_complete


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
    check_checkpoint_dir(kernel.checkpoint_dir)
    plan = plan_training(kernel, X, labels, group_codes)
    if restore_result(kernel, plan.spec, X, plan.train_labels, group_codes):
        return
    keep_result(kernel, complete=False)  # a kernel kept before no longer matches what this run will leave
    kernel.net_, n_sets = train(plan.spec, X, plan.train_labels, group_codes, check_set_size(kernel.set_size),
                                plan.start_state, plan.callbacks)
    kernel.module_ = kernel.net_.module_
    kernel.module_.eval()
    record_architecture(kernel)
    kernel.n_training_sets_ = n_sets * sum("train_loss" in row for row in kernel.net_.history)
    plan.record(kernel, kernel.net_)
    keep_result(kernel, run_is_complete(plan.spec, kernel.net_))
