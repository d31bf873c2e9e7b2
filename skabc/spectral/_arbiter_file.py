"""Writing an arbiter file: what research recipes (``benchmarks/train_arbiter.py``) call; the package only reads
them (:meth:`skabc.spectral.arbiter.Arbiter.from_file`)."""

from __future__ import annotations

import json
import math
from numbers import Real
from pathlib import Path

import numpy as np

from .candidates import SPECTRUM_SIZE

#: The ``format`` every arbiter file names.
FORMAT = "skabc-arbiter"


def valid_margin(value) -> bool:
    """Whether ``value`` can be an arbiter file's ``margin``: a finite real number >= 0, not a boolean (the one test
    of the writer and of :meth:`~skabc.spectral.arbiter.Arbiter.from_file`)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return False
    try:
        return math.isfinite(float(value)) and value >= 0
    except OverflowError:  # an integer past float's range
        return False


def write_arbiter(path, model, candidates, provenance: dict, spectrum_size: int = SPECTRUM_SIZE,
                  max_features: int | None = None, preferred: str | None = None, margin: float = 0.0) -> None:
    """Write a fitted scikit-learn ``GradientBoostingRegressor`` (squared error) over
    :func:`~skabc.spectral.evidence.candidate_features` rows as an arbiter file that
    :meth:`~skabc.spectral.arbiter.Arbiter.from_file` reads: per tree, its node arrays, the learning rate folded
    into the leaf values.  A list of such models is written as one ensemble predicting their mean (every leaf value
    divided by their number, the baselines averaged).  ``max_features``: the widest set of the training data;
    ``preferred`` and ``margin``: the candidate kept unless another is predicted more than ``margin`` higher (see
    :class:`~skabc.spectral.arbiter.Arbiter`).
    """
    models = list(model) if isinstance(model, list | tuple) else [model]
    trees = []
    for member in models:
        for (estimator,) in member.estimators_:
            tree = estimator.tree_
            leaf = tree.children_left < 0
            trees.append({"feature": np.where(leaf, 0, tree.feature).tolist(),
                          "threshold": np.where(leaf, 0.0, tree.threshold).tolist(),
                          "left": np.where(leaf, 0, tree.children_left).tolist(),
                          "right": np.where(leaf, 0, tree.children_right).tolist(),
                          "value": (member.learning_rate * tree.value[:, 0, 0] / len(models)).tolist(),
                          "is_leaf": leaf.astype(int).tolist(), "missing_left": [1] * tree.node_count})
    baseline = float(np.mean([member.init_.constant_.ravel()[0] for member in models]))
    data = {"format": FORMAT, "version": 1, "candidates": list(candidates), "n_columns": int(models[0].n_features_in_),
            "baseline": baseline, "spectrum_size": int(spectrum_size), "trees": trees, "provenance": provenance}
    if max_features is not None:
        if isinstance(max_features, bool) or not isinstance(max_features, int | np.integer) or max_features < 1:
            raise ValueError(f"max_features must be a positive integer or None, got {max_features!r}")
        data["max_features"] = int(max_features)
    if preferred is not None or margin:
        if preferred not in data["candidates"] or not valid_margin(margin):
            raise ValueError(f"preferred must be one of {data['candidates']} and margin a finite number >= 0, got "
                             f"{preferred!r} and {margin!r}")
        data["preferred"], data["margin"] = str(preferred), float(margin)
    Path(path).write_text(json.dumps(data, separators=(",", ":")))
