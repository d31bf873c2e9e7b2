"""The circles demo: ABC against spectral clustering on points on overlapping circles."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.cluster import SpectralClustering
from sklearn.metrics import adjusted_rand_score

from .cluster import ABCClustering
from .datasets import make_circles_sets
from .kernels import ContextualKernel

BASELINES = {
    "SpectralClustering rbf (true k)": dict(affinity="rbf"),
    "SpectralClustering kNN (true k)": dict(affinity="nearest_neighbors"),
}


def _sets(n_sets: int, set_size: int, seed: int, n_circles: int):
    X, y, groups = make_circles_sets(n_sets=n_sets, set_size=set_size, n_circles=n_circles, random_state=seed)
    for g in range(n_sets):
        rows = groups == g
        yield X[rows], y[rows]


def compare_on_circles(
    kernels: Mapping[str, ContextualKernel],
    set_sizes: Sequence[int] = (100, 200, 300),
    n_sets: int = 200,
    n_circles: int = 4,
    random_state: int = 0,
    baselines: bool = True,
) -> list[dict]:
    """Mean ARI of each kernel (eigengap k and true k) and of spectral baselines on fresh sets.

    Returns one row per (method, set size) with ``mean_ari``, ``sem_ari``,
    ``n_sets`` and, for ABC with the eigengap, the mean absolute error of
    the estimated number of clusters and the seconds per set.
    """
    rows = []
    for size in set_sizes:
        # Modulo 2**32: numpy's seeds stop there, and any seed the command line takes must run.
        sets = list(_sets(n_sets, size, (random_state + size) % 2**32, n_circles))
        for name, kernel in kernels.items():
            for known in (False, True):
                # A fitted kernel and no labels: fit_predict only clusters.
                model = ABCClustering(n_clusters=n_circles if known else None, kernel=kernel, random_state=0)
                scores, k_err = [], []
                start = time.perf_counter()
                for X, y in sets:
                    labels = model.fit_predict(X)
                    scores.append(adjusted_rand_score(y, labels))
                    k_err.append(abs(len(np.unique(labels)) - n_circles))
                seconds = (time.perf_counter() - start) / len(sets)
                rows.append(_row(f"ABC {name} ({'true k' if known else 'eigengap k'})", size, scores,
                                 seconds, None if known else float(np.mean(k_err))))
        if baselines:
            for name, params in BASELINES.items():
                scores = []
                start = time.perf_counter()
                for X, y in sets:
                    model = SpectralClustering(n_clusters=n_circles, random_state=0, **params)
                    with warnings.catch_warnings():
                        # The baseline's own remark on a disconnected kNN graph: its score says what it costs.
                        warnings.filterwarnings("ignore", message="Graph is not fully connected")
                        scores.append(adjusted_rand_score(y, model.fit_predict(X)))
                rows.append(_row(name, size, scores, (time.perf_counter() - start) / len(sets), None))
    return rows


def _row(method: str, size: int, scores: list[float], seconds: float, k_error: float | None) -> dict:
    scores = np.asarray(scores)
    return {
        "method": method,
        "set_size": size,
        "n_sets": len(scores),
        "mean_ari": float(scores.mean()),
        "sem_ari": float(scores.std(ddof=1) / np.sqrt(len(scores))) if len(scores) > 1 else 0.0,
        "mean_abs_k_error": k_error,
        "seconds_per_set": seconds,
    }


def format_table(rows: list[dict]) -> str:
    """Markdown table: one line per method, one column per set size (mean ARI +- s.e.)."""
    sizes = sorted({r["set_size"] for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cell = {(r["method"], r["set_size"]): r for r in rows}
    lines = ["| method | " + " | ".join(f"n = {s}" for s in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for m in methods:
        cells = []
        for s in sizes:
            r = cell.get((m, s))
            # One set has no standard error (sem_ari 0.0 in the rows): the mean alone, not a '± 0.000'.
            spread = f" ± {r['sem_ari']:.3f}" if r is not None and r["n_sets"] > 1 else ""
            cells.append("" if r is None else f"{r['mean_ari']:.3f}{spread}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
