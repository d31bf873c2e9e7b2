"""How long to train: a schedule from the amount of labelled data, not a fixed number of epochs.

With ``max_epochs='auto'`` a :class:`~skabc.ContextualKernel` asks
:func:`training_schedule` how many optimiser steps the labelled rows are
worth and how to cut them into epochs (one validation score per epoch).
Early stopping on held-out classes or groups usually ends the run sooner;
the step cap keeps the worst case inside a CPU budget of about 10 CPU-minutes:
3,200 steps of the generic network v1 on circles took 7.6 CPU-minutes,
validation included; a network with local geometry costs about 1.6 times as
much per step (pair features and the gradients of the attention biases: 3,200
steps took 12.1 CPU-minutes), so its cap is :data:`GEOMETRY_MAX_STEPS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Optimiser steps per square root of the labelled rows (more data, more steps, with diminishing returns).
STEPS_PER_SQRT_ROW = 12.0
#: Fewest and most optimiser steps of an automatic schedule.
MIN_STEPS, MAX_STEPS = 200, 3200
#: The step cap of a network with ``local_geometry`` (the same CPU budget as MAX_STEPS at ~1.6x the cost).
GEOMETRY_MAX_STEPS = 2000
#: Validation scores per automatic schedule (the epochs it is cut into).
EVALUATIONS = 16


@dataclass(frozen=True)
class Schedule:
    """An automatic training schedule.

    Attributes
    ----------
    max_epochs : int
        Epochs (fresh sets every epoch, one validation score after each).
    sets_per_epoch : int
        Training sets drawn per epoch (a whole number of batches).
    n_steps : int
        Optimiser steps if nothing stops the run earlier.
    """

    max_epochs: int
    sets_per_epoch: int
    n_steps: int


def training_schedule(n_labelled: int, n_classes: int, batch_size: int, max_steps: int = MAX_STEPS) -> Schedule:
    """Training length for ``n_labelled`` labelled rows of ``n_classes`` classes.

    The number of steps grows as the square root of the labelled rows
    (:data:`STEPS_PER_SQRT_ROW`), clipped to ``[MIN_STEPS, max_steps]``; a
    problem with fewer than five classes gets proportionally fewer steps
    (at least :data:`MIN_STEPS`), since its sets repeat the same few
    clusters and overfit sooner.  The steps are cut into
    :data:`EVALUATIONS` epochs so that early stopping can act on a
    validation score every sixteenth of the run.

    Parameters
    ----------
    n_labelled : int
        Labelled rows (``y >= 0``) available for training.
    n_classes : int
        Distinct labels among them (per group, the largest count).
    batch_size : int
        Sets per optimiser step.
    max_steps : int, default=MAX_STEPS
        The cap (:data:`GEOMETRY_MAX_STEPS` for networks with local geometry).

    Returns
    -------
    schedule : Schedule

    Examples
    --------
    >>> from skabc.training.schedule import training_schedule
    >>> training_schedule(1_000, 5, batch_size=32).n_steps
    384
    >>> training_schedule(300_000, 5, batch_size=32).n_steps
    3200
    """
    if n_labelled < 1 or n_classes < 1 or batch_size < 1:
        raise ValueError(
            f"n_labelled, n_classes and batch_size must be positive, got {n_labelled}, {n_classes}, {batch_size}."
        )
    steps = STEPS_PER_SQRT_ROW * math.sqrt(n_labelled) * min(1.0, n_classes / 5)
    steps = int(min(max(max_steps, MIN_STEPS), max(MIN_STEPS, steps)))
    per_epoch = max(1, math.ceil(steps / EVALUATIONS))
    epochs = math.ceil(steps / per_epoch)
    return Schedule(max_epochs=epochs, sets_per_epoch=per_epoch * batch_size, n_steps=epochs * per_epoch)
