"""Benchmark: sets of many small clusters, k unknown (the zero-shot path of ``ABCClustering()``).

Usage
-----
python benchmarks/many_clusters.py [--seeds 4] [--centres 5 10 ...] [--output benchmarks/results/many_clusters.json]

Why.  The held-back external benchmark of issue 20 found ``ABCClustering()`` under-splitting sets of many small
clusters (4 clusters found for 31 blobs, 5 for 15), and the gallery and the 13 listed clustbench sets hold at most
10 clusters, so nothing else here measures it.  The sets: ``make_blobs`` with 5, 10, 15, 20, 30, 40, 60 and 80 centres
(the last two above ``ABCClustering``'s default ``max_clusters=50``, so an estimate can reach 50 at most),
2,000 points (the size ``ABCClustering`` clusters before it subsamples), 2 to 4 features, unit spread, centres
in a box of half-width ``8 * sqrt(k)``, so that some blobs touch and most stand apart; StandardScaler; seeds
700, 701, ... (no recipe draws them).

Methods: ``ABCClustering(random_state=0)`` (k unknown, the shipped generic kernel and its arbiter), the same with
``max_clusters=100`` (what its warning advises where the estimate reaches 50),
``ABCClustering(affinity='nearest_neighbors', n_clusters_selection='eigengap', random_state=0)``
(SpectralClustering's 10-NN graph, k by its own eigengap: what ``'auto'`` did for that affinity until
2026-12-03, when it began to count with the generic kernel, as the first column does),
``ABCClustering(n_clusters=k, random_state=0)``, ``SpectralClustering(n_clusters=k,
affinity='nearest_neighbors', random_state=0)`` (given k) and ``HDBSCAN()`` (defaults, no k; its noise counted as
one more label, not as a cluster).  Prints a markdown table (mean ARI per number of centres, with the mean
absolute error of the estimated k) and writes the JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CENTRES = (5, 10, 15, 20, 30, 40, 60, 80)
#: Sets per number of centres of the committed run.
DEFAULT_SEEDS = 4
N_POINTS = 2_000
FIRST_SEED = 700
METHODS = ("ABC (k unknown)", "ABC max_clusters=100 (k unknown)", "ABC kNN graph (k unknown)", "ABC (k given)",
           "Spectral kNN (k given)", "HDBSCAN (no k)")


def make_set(k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One set of ``k`` blobs (see the module notes), standardised."""
    from sklearn.datasets import make_blobs
    from sklearn.preprocessing import StandardScaler

    X, y = make_blobs(n_samples=N_POINTS, centers=k, cluster_std=1.0, center_box=(-8 * np.sqrt(k), 8 * np.sqrt(k)),
                      n_features=2 + seed % 3, random_state=seed)
    return StandardScaler().fit_transform(X), y


def cluster(method: str, X: np.ndarray, k: int) -> np.ndarray:
    from sklearn.cluster import HDBSCAN, SpectralClustering

    from skabc import ABCClustering

    if method == "ABC (k unknown)":
        return ABCClustering(random_state=0).fit_predict(X)
    if method == "ABC max_clusters=100 (k unknown)":
        return ABCClustering(max_clusters=100, random_state=0).fit_predict(X)
    if method == "ABC kNN graph (k unknown)":
        return ABCClustering(affinity="nearest_neighbors", n_clusters_selection="eigengap",
                             random_state=0).fit_predict(X)
    if method == "ABC (k given)":
        return ABCClustering(n_clusters=k, random_state=0).fit_predict(X)
    if method == "Spectral kNN (k given)":
        return SpectralClustering(n_clusters=k, affinity="nearest_neighbors", random_state=0).fit_predict(X)
    return HDBSCAN().fit_predict(X)


def run(n_seeds: int, centres=CENTRES) -> dict:
    from sklearn.metrics import adjusted_rand_score

    records = []
    for k in centres:
        for seed in range(FIRST_SEED, FIRST_SEED + n_seeds):
            X, y = make_set(k, seed)
            row = {"centres": k, "seed": seed}
            for method in METHODS:
                start = time.perf_counter()
                labels = cluster(method, X, k)
                found = len(np.unique(labels[labels >= 0]))
                row[method] = {"ari": float(adjusted_rand_score(y, labels)), "k": found,
                               "seconds": time.perf_counter() - start}
            records.append(row)
            print(f"k={k} seed={seed}: " + ", ".join(f"{m} {row[m]['ari']:.3f} (k {row[m]['k']})" for m in METHODS),
                  flush=True)
    return {"records": records, "summary": summarise(records)}


def summarise(records: list[dict]) -> dict:
    out = {}
    for k in (*sorted({r["centres"] for r in records}), "all"):
        rows = [r for r in records if k == "all" or r["centres"] == k]
        out[str(k)] = {m: {"ari": float(np.mean([r[m]["ari"] for r in rows])),
                           "k_abs_error": float(np.mean([abs(r[m]["k"] - r["centres"]) for r in rows]))}
                       for m in METHODS}
    return out


def table(summary: dict) -> str:
    lines = ["| centres | " + " | ".join(METHODS) + " |", "|---" * (len(METHODS) + 1) + "|"]
    for key, cells in summary.items():
        label = "*mean*" if key == "all" else key
        lines.append(f"| {label} | " + " | ".join(
            f"{cells[m]['ari']:.3f}" + (f", k err {cells[m]['k_abs_error']:.2f}" if "given" not in m else "")
            for m in METHODS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="sets per number of centres")
    parser.add_argument("--centres", type=int, nargs="+", default=list(CENTRES), help="numbers of centres")
    parser.add_argument("--output", default=None, help="default: benchmarks/results/many_clusters.json, or "
                        "many_clusters_partial.json for fewer seeds or centres than the committed run")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    result = run(args.seeds, args.centres)
    result["command"] = "python benchmarks/many_clusters.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(table(result["summary"]))
    from result_files import write_result

    partial = args.seeds < DEFAULT_SEEDS or not set(CENTRES) <= set(args.centres)
    write_result("many_clusters.json", result, partial, args.output)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
