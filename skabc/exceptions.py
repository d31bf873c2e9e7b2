"""Exceptions raised by skabc."""


class AffinityTooLargeError(MemoryError, ValueError):
    """A dense ``n x n`` result would not fit in the configured memory limit.

    Subclasses both :class:`MemoryError` and :class:`ValueError`, so code that
    guards either keeps working.
    """


class SkabcWarning(UserWarning):
    """Base class of the warnings skabc raises itself.

    ``warnings.filterwarnings("ignore", category=SkabcWarning)`` silences them all (or ``"error"`` makes them
    errors) and leaves the warnings of other libraries as they are.  A subclass of :class:`UserWarning`, so
    filters on that category keep working.
    """


class TrainingInterruptedWarning(SkabcWarning, RuntimeWarning):
    """Training stopped before its planned end (Ctrl-C): the kernel keeps the best weights it had reached.

    Also a :class:`RuntimeWarning`, the category it had before it had a class of its own.
    """
