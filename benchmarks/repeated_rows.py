"""Tables of discretised columns (many repeated rows): ABCClustering() with the arbiter's kNN graph of distinct rows.

Usage
-----
OMP_NUM_THREADS=1 python benchmarks/repeated_rows.py            # 40 tables of seeds no recipe uses
OMP_NUM_THREADS=1 python benchmarks/repeated_rows.py --select   # the selection run that decided the design

Tables: ``make_blobs`` (2-6 centres, 2-10 features, 300-2,000 rows, ``cluster_std=1.5``); in 30 of them every
column is cut into 2-6 quantile bins (a few dozen to a few hundred distinct rows), in 10 half of the columns
(:func:`skabc.datasets.discretize_columns`, 2-6 levels).  Repeated rows are the rule there: a row repeated more
than ``n_neighbors`` times has only its own copies as neighbours, and the plain 10-NN graph falls apart into
one clique per distinct row, which the arbiter's kNN candidates then cut into dozens of clusters.
:func:`skabc.spectral.knn.knn_graph` builds the graph of the distinct rows instead (copies share their row's
links and are linked to each other).

Methods: ``ABCClustering(random_state=0)`` (k unknown) with that graph (the default since 2026-12-03) and with
the plain kNN graph of the rows (what it used before; this script swaps the function back in), and, given the
true k, ``SpectralClustering(affinity='nearest_neighbors')`` and ``KMeans``.  ARI on all rows; mean |k_hat - k|.
Benchmark seeds 9200-9239; ``--select`` runs the pre-registered selection tables (seeds 9000-9029 and
9100-9109) and its ship rule: paired gain of ABC with the new graph > 2 SE (and no benchmark set with repeated
rows losing, checked separately: only iris has one, unchanged).  Writes
``benchmarks/results/repeated_rows.json`` (``repeated_rows_select.json``).
"""

from __future__ import annotations

import argparse
import json
import warnings
from functools import partial
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

import skabc.spectral.arbiter as arbiter_module
import skabc.spectral.candidates as candidates_module
from skabc import ABCClustering
from skabc.datasets import discretize_columns
from skabc.spectral import knn

ROOT = Path(__file__).resolve().parents[1]
DISTINCT_ROWS_GRAPH = knn.knn_graph


#: The arbiter's kNN graph before 2026-12-03: the plain symmetric kNN graph of the rows.
plain_knn_graph = partial(knn.knn_graph, distinct_rows=False)


def make_table(seed: int, all_columns: bool) -> tuple[np.ndarray, np.ndarray, dict]:
    rng = np.random.default_rng(seed)
    k, d, n, levels = (int(rng.integers(2, 7)), int(rng.integers(2, 11)), int(rng.integers(300, 2001)),
                       int(rng.integers(2, 7)))
    X, y = make_blobs(n, centers=k, n_features=d, cluster_std=1.5, random_state=seed)
    if all_columns:
        X = np.column_stack([np.digitize(c, np.quantile(c, np.linspace(0, 1, levels + 1)[1:-1])) for c in X.T])
    else:
        X = discretize_columns(X, fraction=0.5, levels=(2, 6), random_state=seed)
    X = np.asarray(X, dtype=float)
    return X, y, {"seed": seed, "k": k, "d": d, "n": n, "levels": levels if all_columns else "2-6, half the columns",
                  "distinct_rows": len(np.unique(X, axis=0))}


def abc(X: np.ndarray, graph) -> np.ndarray:
    # The candidates build the graph (skabc.spectral.candidates); the arbiter builds it where none of its
    # candidates has (its kNN-partition variant).
    modules = (candidates_module, arbiter_module)
    for module in modules:
        module.knn_graph = graph
    try:
        return ABCClustering(random_state=0).fit_predict(X)
    finally:
        for module in modules:
            module.knn_graph = DISTINCT_ROWS_GRAPH


def run(seeds_all: range, seeds_half: range) -> dict:
    rows = []
    tables = [make_table(s, True) for s in seeds_all] + [make_table(s, False) for s in seeds_half]
    for X, y, info in tables:
        k = info["k"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # disconnected kNN graphs of the given-k baseline
            labels = {"ABC, kNN graph of distinct rows (default)": abc(X, DISTINCT_ROWS_GRAPH),
                      "ABC, plain kNN graph (before)": abc(X, plain_knn_graph),
                      "SpectralClustering kNN given k": SpectralClustering(
                          k, affinity="nearest_neighbors", random_state=0).fit_predict(X),
                      "KMeans given k": KMeans(k, n_init=10, random_state=0).fit_predict(X)}
        scores = {m: {"ari": float(adjusted_rand_score(y, lab)), "k": len(np.unique(lab))}
                  for m, lab in labels.items()}
        rows.append({**info, "scores": scores})
        print(info["seed"], info["distinct_rows"], "/", info["n"], {m: (round(s["ari"], 3), s["k"]) for m, s in
                                                                    scores.items()}, flush=True)
    summary = {}
    for method in rows[0]["scores"]:
        ari = np.array([r["scores"][method]["ari"] for r in rows])
        summary[method] = {"ari": float(ari.mean()), "ari_se": float(ari.std(ddof=1) / np.sqrt(len(ari))),
                           "k_abs_error": float(np.mean([abs(r["scores"][method]["k"] - r["k"]) for r in rows]))}
    new, old = ("ABC, kNN graph of distinct rows (default)", "ABC, plain kNN graph (before)")
    gain = np.array([r["scores"][new]["ari"] - r["scores"][old]["ari"] for r in rows])
    paired = {"gain": float(gain.mean()), "se": float(gain.std(ddof=1) / np.sqrt(len(gain)))}
    for method, s in summary.items():
        print(f"{method:45s} {s['ari']:.3f} +- {s['ari_se']:.3f}   k err {s['k_abs_error']:.2f}")
    print(f"paired gain of the distinct-rows graph: {paired['gain']:+.3f} +- {paired['se']:.3f}, {len(rows)} tables")
    return {"n_tables": len(rows), "summary": summary, "paired_gain": paired, "tables": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--select", action="store_true", help="the selection tables and the ship rule")
    args = parser.parse_args(argv)
    if args.select:
        result = run(range(9000, 9030), range(9100, 9110))
        result["passes"] = result["paired_gain"]["gain"] > 2 * result["paired_gain"]["se"]
        print("ship rule", "passes" if result["passes"] else "fails")
        name, command = "repeated_rows_select.json", "OMP_NUM_THREADS=1 python benchmarks/repeated_rows.py --select"
    else:
        result = run(range(9200, 9230), range(9300, 9310))
        name, command = "repeated_rows.json", "OMP_NUM_THREADS=1 python benchmarks/repeated_rows.py"
    path = ROOT / "benchmarks" / "results" / name
    path.write_text(json.dumps({"benchmark": "repeated_rows", "command": command, **result}, indent=1))
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
