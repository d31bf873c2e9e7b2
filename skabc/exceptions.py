"""Exceptions raised by skabc."""


class AffinityTooLargeError(MemoryError, ValueError):
    """A dense ``n x n`` result would not fit in the configured memory limit.

    Subclasses both :class:`MemoryError` and :class:`ValueError`, so code that
    guards either keeps working.
    """
