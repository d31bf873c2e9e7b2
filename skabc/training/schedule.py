"""How long to train: a schedule from the amount of labelled data, not a fixed number of epochs.

With ``max_epochs='auto'`` a :class:`~skabc.ContextualKernel` asks
:func:`training_schedule` how many optimiser steps the labelled rows are
worth and how to cut them into epochs (one validation score per epoch).
Early stopping on held-out classes or groups usually ends the run sooner.

The step cap keeps the worst case inside a CPU budget of 10 CPU-minutes with
margin: fine-tuning the generic kernel on 300,000 rows of circles or arcs
within :data:`GEOMETRY_MAX_STEPS` reference steps took 7.5-8.4 CPU-minutes
with batches of 32 and 8.1-8.4 with batches of 16 (3,248 steps), validation
included (``benchmarks/own_kernel.py``, on the machine the cap was sized on;
the committed run, on a slower one, reached :data:`AUTO_MAX_TIME` first:
9.1 and 9.0 CPU-minutes).  It is stated for the reference step
(:data:`REFERENCE_BATCH_SIZE` sets drawn from :data:`REFERENCE_SET_SIZE`) and
scales with the estimated cost of the actual step (:func:`relative_step_cost`:
a fixed overhead plus the work of its sets), so a larger ``batch_size`` or
``set_size`` buys fewer steps and a smaller batch more, never a longer fit.
Below the cap, the schedule asks for as many *sets* as the reference step
would see; a smaller batch cuts them into more, cheaper steps.  At one CPU
budget, batches of 16 learned more than batches of 32 when fine-tuning on
circles and arcs, where the budget ends the run (held-out sets of seeds no
benchmark uses), and less on small data, where the labelled rows end it and
more steps overfit (unseen digits; recorded in ``docs/changelog.md`` up to 76b68f2): hence
:func:`auto_batch_size`, ContextualKernel's ``batch_size='auto'``.
A network with local geometry costs more per step than one without (pair
features and the gradients of the attention biases; 1.6 times as much in an
earlier measurement, before its pair maps became one batched matmul), hence its
own cap, :data:`GEOMETRY_MAX_STEPS`.
The cap counts steps, so a slower machine takes longer over them: there
:data:`AUTO_MAX_TIME` (ContextualKernel's ``max_time='auto'``) ends the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

from ..sampling import check_set_size

#: Optimiser steps per square root of the labelled rows (more data, more steps, with diminishing returns).
STEPS_PER_SQRT_ROW = 12.0
#: Fewest and most optimiser steps of an automatic schedule.
MIN_STEPS, MAX_STEPS = 200, 3200
#: The step cap of a network with ``local_geometry`` (its steps cost more; measured against the 10 CPU-min budget).
GEOMETRY_MAX_STEPS = 1800
#: The step the caps are stated for: batches of this many sets of sizes drawn uniformly from this range
#: (ContextualKernel's defaults).
REFERENCE_BATCH_SIZE, REFERENCE_SET_SIZE = 32, (50, 200)
#: Fixed cost of one optimiser step (optimizer update, batching, Python), in sets of the reference size: fine-tuning
#: the generic kernel on 57,856 sets of 50-200 points took 504 CPU-s in 1,808 steps of 32 and 560 CPU-s in 3,616
#: steps of 16 (about 0.031 s a step against 0.0077 s a set; one thread).
STEP_OVERHEAD_SETS = 4.0
#: A step's cost grows as this power of the set size (attention, pair features and the pairwise head are
#: quadratic; scaled from n = 150, n^2 matched the measured CPU time per step of the generic network to
#: within 23% from 200 to 400 points, never below it).
STEP_COST_EXPONENT = 2.0
#: ``batch_size='auto'`` where the CPU budget, not the labelled rows, ends the run (:func:`auto_batch_size`).
SMALL_BATCH_SIZE = 16
#: Validation scores per automatic schedule (the epochs it is cut into).
EVALUATIONS = 16
#: ``max_time='auto'`` of an automatic schedule: seconds of training (wall clock) after which it stops, keeping
#: its best validated weights.  The step cap is a count, sized on one machine (the module notes); on a slower one
#: the same steps take longer (fine-tuning on 300,000 rows of arcs: 504 CPU-s there, 726 on a machine 1.44 times
#: slower, one thread), and this limit keeps the fit inside the 10-minute budget, setup and the final choice of
#: clustering settings included.  It never binds where the cap's run fits in it, so there the fit stays exactly
#: reproducible.  A count of CPU seconds would not do: a multi-threaded step costs more CPU time, not more wall.
AUTO_MAX_TIME = 9 * 60.0


@dataclass(frozen=True)
class Schedule:
    """An automatic training schedule.

    Parameters
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


def relative_step_cost(batch_size: int, set_size: tuple[int, int]) -> float:
    """Estimated CPU cost of one optimiser step, relative to the reference step.

    ``STEP_OVERHEAD_SETS + batch_size * w(set_size)``, with ``w`` the mean of
    ``n ** STEP_COST_EXPONENT`` over set sizes ``n`` uniform on ``set_size``
    (both ends included) relative to that of :data:`REFERENCE_SET_SIZE`,
    divided by the same for :data:`REFERENCE_BATCH_SIZE` and
    :data:`REFERENCE_SET_SIZE`.

    Parameters
    ----------
    batch_size : int
        Sets per optimiser step.
    set_size : int or (int, int)
        Smallest and largest training set (an int: every set that size); at least 2 points, as
        :class:`~skabc.ContextualKernel` takes it.

    Returns
    -------
    cost : float

    Examples
    --------
    >>> from skabc.training.schedule import relative_step_cost
    >>> relative_step_cost(32, (50, 200))
    1.0
    >>> round(relative_step_cost(16, (50, 200)), 2)
    0.56
    >>> round(relative_step_cost(32, (100, 300)), 2)
    2.31
    """

    _check_counts(batch_size=batch_size)
    set_size = check_set_size(set_size)  # the kernel's own check: a reversed range costed nothing

    def work(sizes: tuple[int, int]) -> float:
        low, high = sizes
        return sum(n**STEP_COST_EXPONENT for n in range(low, high + 1)) / (high - low + 1)

    per_set = work(set_size) / work(REFERENCE_SET_SIZE)
    return (STEP_OVERHEAD_SETS + batch_size * per_set) / (STEP_OVERHEAD_SETS + REFERENCE_BATCH_SIZE)


def training_schedule(n_labelled: int, n_classes: int, batch_size: int, max_steps: int = MAX_STEPS,
                      set_size: tuple[int, int] = REFERENCE_SET_SIZE) -> Schedule:
    """Training length for ``n_labelled`` labelled rows of ``n_classes`` classes.

    Counted in reference steps (:data:`REFERENCE_BATCH_SIZE` sets each), the
    run grows as the square root of the labelled rows
    (:data:`STEPS_PER_SQRT_ROW`), from :data:`MIN_STEPS`; a problem with
    fewer than five classes gets proportionally fewer (at least the
    minimum), since its sets repeat the same few clusters and overfit
    sooner.  Those sets are cut into batches of ``batch_size``.  The cap,
    ``max_steps`` divided by the step's :func:`relative_step_cost`, is a
    CPU budget: costlier steps get fewer, cheaper ones more (never fewer
    than the minimum).  The steps are cut into :data:`EVALUATIONS` epochs
    (fewer where large batches leave too few steps for that, and the last
    rounding may pass the cap by a few steps) so that early stopping can act
    on a validation score every sixteenth of the run.

    Parameters
    ----------
    n_labelled : int
        Labelled rows (``y >= 0``) available for training.
    n_classes : int
        Distinct labels among them (per group, the largest count).
    batch_size : int
        Sets per optimiser step.
    max_steps : int, default=MAX_STEPS
        The cap at the reference step (:data:`GEOMETRY_MAX_STEPS` for networks with local geometry).
    set_size : (int, int), default=REFERENCE_SET_SIZE
        Smallest and largest training set.

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
    >>> training_schedule(300_000, 5, batch_size=32, set_size=(100, 400)).n_steps
    880
    >>> training_schedule(1_000, 5, batch_size=16).n_steps
    768
    """
    _check_counts(n_labelled=n_labelled, n_classes=n_classes, batch_size=batch_size)
    per_reference_step = REFERENCE_BATCH_SIZE / batch_size  # steps that see as many sets as one reference step
    floor = math.ceil(MIN_STEPS * per_reference_step)
    wanted = _wanted_reference_steps(n_labelled, n_classes) * per_reference_step
    steps = int(min(_step_cap(batch_size, max_steps, set_size), max(floor, wanted)))
    per_epoch = max(1, math.ceil(steps / EVALUATIONS))
    epochs = math.ceil(steps / per_epoch)
    return Schedule(max_epochs=epochs, sets_per_epoch=per_epoch * batch_size, n_steps=epochs * per_epoch)


def auto_batch_size(n_labelled: int, n_classes: int, max_steps: int = MAX_STEPS,
                    set_size: tuple[int, int] = REFERENCE_SET_SIZE) -> int:
    """``batch_size='auto'``: :data:`SMALL_BATCH_SIZE` where the CPU budget ends the run, else the reference.

    Where the labelled rows are worth more reference steps than the cap
    allows, the budget ends the run and smaller batches, more steps of
    fewer sets, learn more from it.  Where the rows end it, the schedule is
    short and more steps overfit the few classes: batches of
    :data:`REFERENCE_BATCH_SIZE`.

    Parameters
    ----------
    n_labelled, n_classes, max_steps, set_size
        As for :func:`training_schedule`.

    Returns
    -------
    batch_size : int

    Examples
    --------
    >>> from skabc.training.schedule import GEOMETRY_MAX_STEPS, auto_batch_size
    >>> auto_batch_size(300_000, 5, GEOMETRY_MAX_STEPS), auto_batch_size(1_000, 5, GEOMETRY_MAX_STEPS)
    (16, 32)
    """
    _check_counts(n_labelled=n_labelled, n_classes=n_classes)
    capped = _wanted_reference_steps(n_labelled, n_classes) >= _step_cap(REFERENCE_BATCH_SIZE, max_steps, set_size)
    return SMALL_BATCH_SIZE if capped else REFERENCE_BATCH_SIZE


def _check_counts(**counts) -> None:
    """Refuse counts that are not integers >= 1, by name (a float batch gave a float number of sets per epoch)."""
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")


def _step_cap(batch_size: int, max_steps: int, set_size: tuple[int, int]) -> int:
    """Most steps of ``batch_size`` sets within the budget of ``max_steps`` reference steps (never below the
    floor of :data:`MIN_STEPS` reference steps' sets)."""
    floor = math.ceil(MIN_STEPS * REFERENCE_BATCH_SIZE / batch_size)
    return max(floor, int(max_steps / relative_step_cost(batch_size, set_size)))


def _wanted_reference_steps(n_labelled: int, n_classes: int) -> float:
    """Reference steps the labelled rows are worth before any bound (see :func:`training_schedule`)."""
    return STEPS_PER_SQRT_ROW * math.sqrt(n_labelled) * min(1.0, n_classes / 5)
