"""Small sets: how ``ABCClustering()`` estimates k on sets of 10 to 300 rows.

Usage
-----
OMP_NUM_THREADS=1 python benchmarks/small_sets.py          # 5 size bins x 50 sets, about 5 CPU-minutes

Why.  The shipped generic kernel was trained on sets of 150 to 500 rows.  On much smaller sets its affinity links
each point to a few neighbours only (a set of 20 rows of one class got 17 clusters), so the estimate of ``k``
runs high there; ``ABCClustering`` warns when it estimates ``k`` on such a set
(:data:`skabc._sets.SMALL_SET_ROWS`).  This script measures the estimate per size bin, so that the warning's
threshold and the guide's numbers can be checked and any future kernel trained on small sets judged on it.

Sets: ``make_clustering_sets`` with its default families, 1-16 features, at most 6 clusters, no background noise,
50 sets per bin of rows (10-20, 20-40, 40-80, 80-150, 150-300), seed 8800 + the bin's lower end (seeds no recipe
or selection run used; the threshold was read off seeds 6600 and 7700 + the lower end, throw-away runs).
Methods: ``ABCClustering(random_state=0)`` (k unknown), the same given the true k, a full-covariance Gaussian
mixture with the lowest BIC (k unknown, :func:`skabc.spectral.mixture.bic_mixture_partition`), and
``SpectralClustering(affinity='nearest_neighbors')`` given the true k (``n_neighbors`` at most ``n - 1``).
ARI on all rows (a set of one cluster scores 1 only where the partition is one cluster too); mean k - k_true and
its absolute value; the share of one-cluster sets found as one.  Writes ``benchmarks/results/small_sets.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import SpectralClustering
from sklearn.metrics import adjusted_rand_score

from skabc import ABCClustering
from skabc.datasets import make_clustering_sets
from skabc.spectral.mixture import bic_mixture_partition

ROOT = Path(__file__).resolve().parents[1]
BINS = ((10, 20), (20, 40), (40, 80), (80, 150), (150, 300))
SETS_PER_BIN = 50
SEED = 8800
METHODS = ("ABC (k unknown)", "ABC given k", "GaussianMixture BIC (k unknown)", "SpectralClustering kNN given k")


def partitions(X: np.ndarray, k: int) -> dict[str, np.ndarray]:
    n = len(X)
    one = np.zeros(n, dtype=int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small-set warning itself, disconnected kNN graphs of the baseline
        return {
            "ABC (k unknown)": ABCClustering(random_state=0).fit_predict(X),
            "ABC given k": one if k == 1 else ABCClustering(n_clusters=k, random_state=0).fit_predict(X),
            "GaussianMixture BIC (k unknown)": bic_mixture_partition(X, 20, 0),
            "SpectralClustering kNN given k": one if k == 1 else SpectralClustering(
                k, affinity="nearest_neighbors", n_neighbors=min(10, n - 1), random_state=0).fit_predict(X),
        }


def run(seed: int = SEED, sets_per_bin: int = SETS_PER_BIN) -> dict:
    rows = []
    for low, high in BINS:
        X, y, g = make_clustering_sets(n_sets=sets_per_bin, set_size=(low, high), n_features=(1, 16), max_clusters=6,
                                       noise_probability=0.0, random_state=seed + low)
        for i in np.unique(g):
            Xi = np.asarray(X[g == i], dtype=np.float64)
            Xi, yi = Xi[:, np.any(Xi != 0, axis=0)], y[g == i]  # the set's own columns (the rest is padding)
            k = len(np.unique(yi))
            scores = {m: {"ari": float(adjusted_rand_score(yi, lab)), "k": len(np.unique(lab))}
                      for m, lab in partitions(Xi, k).items()}
            rows.append({"bin": f"{low}-{high}", "n": len(yi), "d": Xi.shape[1], "true_k": k, "scores": scores})
    summary = {}
    for low, high in BINS:
        name = f"{low}-{high}"
        in_bin = [r for r in rows if r["bin"] == name]
        ones = [r for r in in_bin if r["true_k"] == 1]
        summary[name] = {"n_sets": len(in_bin), "one_cluster_sets": len(ones), "methods": {}}
        for method in METHODS:
            ari = np.array([r["scores"][method]["ari"] for r in in_bin])
            error = np.array([r["scores"][method]["k"] - r["true_k"] for r in in_bin])
            summary[name]["methods"][method] = {
                "ari": float(ari.mean()), "ari_se": float(ari.std(ddof=1) / np.sqrt(len(ari))),
                "k_error": float(error.mean()), "k_abs_error": float(np.abs(error).mean()),
                "one_cluster_found": (float(np.mean([r["scores"][method]["k"] == 1 for r in ones])) if ones
                                      else None)}
    return {"seed": seed, "sets_per_bin": sets_per_bin, "summary": summary, "sets": rows}


def table(result: dict) -> str:
    lines = [f"{'rows':>8}  {'method':32}  {'ARI':>13}  {'k - k_true':>10}  {'|k - k_true|':>12}  {'k=1 found':>9}"]
    for name, s in result["summary"].items():
        for method, m in s["methods"].items():
            found = "" if m["one_cluster_found"] is None else f"{m['one_cluster_found']:.2f}"
            lines.append(f"{name:>8}  {method:32}  {m['ari']:.3f} +- {m['ari_se']:.3f}  {m['k_error']:>+10.2f}  "
                         f"{m['k_abs_error']:>12.2f}  {found:>9}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets-per-bin", type=int, default=SETS_PER_BIN)
    args = parser.parse_args(argv)
    start = time.process_time()
    result = run(sets_per_bin=args.sets_per_bin)
    result["cpu_seconds"] = time.process_time() - start
    print(table(result))
    path = ROOT / "benchmarks" / "results" / "small_sets.json"
    command = "OMP_NUM_THREADS=1 python benchmarks/small_sets.py" + (
        f" --sets-per-bin {args.sets_per_bin}" if args.sets_per_bin != SETS_PER_BIN else "")
    path.write_text(json.dumps({"benchmark": "small_sets", "command": command, **result}, indent=1))
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
