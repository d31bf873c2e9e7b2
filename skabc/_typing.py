"""Aliases for the public type hints: where the code takes a Python number it takes numpy's as well.

``np.float64`` is a ``float`` subclass, but numpy's integers and ``np.float32`` are not: without these, mypy and
pyright refuse ``ABCClustering(n_clusters=np.int64(3))`` or a ``k`` from ``np.arange``, which run fine.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np

#: A count, size or seed: a Python int or a numpy integer (``np.int64(3)``, an element of ``np.arange``).
Int: TypeAlias = int | np.integer
#: A real number: a Python float or int, or a numpy floating or integer scalar (``np.float32(0.5)``).
Float: TypeAlias = float | np.floating | np.integer

__all__ = ["Float", "Int"]
