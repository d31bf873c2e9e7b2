"""Parameter constraints shared by the estimators, beyond scikit-learn's own."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval


class IntRange(Interval):
    """scikit-learn's ``Interval(Integral, left, right, closed=...)`` that refuses ``True`` and ``False``.

    ``bool`` is an ``Integral``, so a flag passed where a count is meant would otherwise be taken as 1 or 0, or
    fail deep inside numpy, scipy or torch.  Parameters that scikit-learn's own estimators take as counts
    (``n_init``, ``n_jobs``) keep the plain ``Interval``, so code written for them runs unchanged.
    """

    def __init__(self, left, right, *, closed: str) -> None:
        super().__init__(Integral, left, right, closed=closed)

    def is_satisfied_by(self, val) -> bool:
        return not isinstance(val, bool) and super().is_satisfied_by(val)


class RealRange(Interval):
    """scikit-learn's ``Interval(Real, left, right, closed=...)`` that refuses ``True`` and ``False``: a flag where an
    amount is meant (``max_time=True``: one second; ``memory_limit=True``: one byte) is a mistake, not a number.
    Parameters that :class:`~sklearn.cluster.SpectralClustering` takes (``gamma``, ``eigen_tol``, ...) keep the
    plain ``Interval``, so code written for it runs unchanged."""

    def __init__(self, left, right, *, closed: str) -> None:
        super().__init__(Real, left, right, closed=closed)

    def is_satisfied_by(self, val) -> bool:
        return not isinstance(val, bool) and super().is_satisfied_by(val)


#: ``n_jobs`` as :class:`~sklearn.cluster.SpectralClustering` takes it: any int (joblib refuses 0 only where jobs run),
#: so code written for it runs with the drop-in.
SPECTRAL_N_JOBS = [Integral, None]
