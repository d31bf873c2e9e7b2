"""A gradient-boosted regression forest evaluated from plain arrays (the arbiter files' trees), validated first."""

from __future__ import annotations

import numpy as np

from .._schema import _is_number

#: Largest prediction a forest may make in absolute value (the shipped ones predict an ARI, within [-1, 1]).
_MAX_PREDICTION = 1e6


class TreeEnsemble:
    """A sum of regression trees over feature rows (a gradient-boosted forest's prediction), from plain arrays.

    Each tree holds, per node, ``feature``, ``threshold``, ``left``, ``right``,
    ``value``, ``is_leaf`` and ``missing_left`` (a NaN feature goes left);
    a row goes left when ``x[feature] <= threshold``, ``x`` read as float32 as
    scikit-learn's trees read it.  Children come after their parent, so every
    path ends at a leaf.
    """

    def __init__(self, trees: list[dict], baseline: float, n_columns: int) -> None:
        self.baseline = float(baseline)
        self.n_columns = int(n_columns)
        self.trees = [self._checked(i, tree) for i, tree in enumerate(trees)]
        # Every prediction is the baseline plus one leaf per tree: bounded, so no sum overflows to inf or NaN.
        bound = abs(self.baseline) + sum(float(np.max(np.abs(t["value"]))) for t in self.trees)
        if not np.isfinite(bound) or bound > _MAX_PREDICTION:
            raise ValueError(f"the trees' leaf values can sum to {bound:.3g}: more than {_MAX_PREDICTION:g}")

    def _checked(self, index: int, tree) -> dict:
        where = f"tree {index}"
        if not isinstance(tree, dict):
            raise ValueError(f"{where} must be an object of node arrays")
        keys = ("feature", "threshold", "left", "right", "value", "is_leaf", "missing_left")
        missing = [k for k in keys if k not in tree]
        if missing:
            raise ValueError(f"{where} lacks {missing}")
        # JSON numbers only: numpy would read "0.3" or true as numbers, and a forged file is not a shipped one.
        if not all(isinstance(tree[k], list) and all(_is_number(v) for v in tree[k]) for k in keys):
            raise ValueError(f"{where}: node arrays must be lists of numbers")
        try:
            arrays = {k: np.asarray(tree[k], dtype=np.float64) for k in keys}
        except OverflowError:  # an integer beyond float64's range
            raise ValueError(f"{where}: node arrays must be finite") from None
        sizes = {a.shape for a in arrays.values()}
        if len(sizes) != 1 or len(next(iter(sizes))) != 1 or next(iter(sizes))[0] < 1:
            raise ValueError(f"{where}: node arrays must be 1-D, non-empty and of one length")
        m = arrays["value"].shape[0]
        if not all(np.isfinite(a).all() for a in arrays.values()):
            raise ValueError(f"{where}: node arrays must be finite")
        if not all(np.isin(arrays[k], (0, 1)).all() for k in ("is_leaf", "missing_left")):
            raise ValueError(f"{where}: is_leaf and missing_left must hold 0 or 1")
        leaf = arrays["is_leaf"] != 0
        nodes = np.arange(m)
        inner = ~leaf
        for side in ("left", "right"):
            child = arrays[side][inner]
            if np.any(child != np.round(child)) or np.any(child <= nodes[inner]) or np.any(child >= m):
                raise ValueError(f"{where}: every {side} child must be a later node of the tree")
        feature = arrays["feature"][inner]
        if np.any(feature != np.round(feature)) or np.any(feature < 0) or np.any(feature >= self.n_columns):
            raise ValueError(f"{where}: features must index the {self.n_columns} feature columns")
        return {"feature": arrays["feature"].astype(np.int64), "threshold": arrays["threshold"],
                "left": arrays["left"].astype(np.int64), "right": arrays["right"].astype(np.int64),
                "value": arrays["value"], "leaf": leaf, "missing_left": arrays["missing_left"] != 0}

    def predict(self, F: np.ndarray) -> np.ndarray:
        """Predicted value of every row of ``F`` ``(rows, n_columns)``."""
        # scikit-learn's trees read X as float32 (their thresholds lie between float32 values): a float64 row on a
        # threshold went the other way (probe 59a: 8 of 20 such rows, by up to 0.135).
        F = np.asarray(F, dtype=np.float32).astype(np.float64)
        if F.ndim != 2 or F.shape[1] != self.n_columns:
            raise ValueError(f"feature rows must have {self.n_columns} columns, got shape {F.shape}")
        out = np.full(F.shape[0], self.baseline)
        rows = np.arange(F.shape[0])
        for tree in self.trees:
            node = np.zeros(F.shape[0], dtype=np.int64)
            while True:
                active = ~tree["leaf"][node]
                if not active.any():
                    break
                at, r = node[active], rows[active]
                x = F[r, tree["feature"][at]]
                go_left = np.where(np.isnan(x), tree["missing_left"][at], x <= tree["threshold"][at])
                node[active] = np.where(go_left, tree["left"][at], tree["right"][at])
            out += tree["value"][node]
        return out
