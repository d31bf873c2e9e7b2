"""Benchmark: how much ``ABCClustering()`` (k unknown) depends on its ``random_state`` on the 13 listed sets.

Usage
-----
OMP_NUM_THREADS=1 python benchmarks/seed_spread.py [--seeds 6] [--jobs 2] [--data-home PATH]
                                                   [--output benchmarks/results/seed_spread.json]

Why.  ``benchmarks/zero_shot.py`` follows the suite's protocol, one run per set with ``random_state=0``.  A set
of more than ``max_samples='auto'`` (2,000) points is clustered through a random subsample drawn from that seed,
so one seed is one draw; scores on held-out data are measured under seeds nobody here chose.  This script runs
``ABCClustering(random_state=s)`` for ``s = 0 .. seeds - 1`` on every listed set, by the same protocol
(:mod:`clustbench_data`: StandardScaler, constant columns dropped, ARI on non-noise points), and reports the
per-set spread, the mean over the 13 sets for each seed, and the mean over all seeds.  SpectralClustering kNN
given the true k (``random_state`` only seeds its k-means) is run at the same seeds for comparison.
Prints a markdown table and writes the JSON; skipped (exit 0) when the data are absent.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
#: Seeds of the committed run; fewer make a partial run (benchmarks/result_files.py).
DEFAULT_SEEDS = 6


def run_set(home: str, battery: str, name: str, seeds: int) -> dict:
    """ARI and clusters found per seed for ABC (k unknown) and SpectralClustering kNN (true k) on one set."""
    import clustbench_data
    import torch
    from sklearn.cluster import SpectralClustering
    from threadpoolctl import threadpool_limits

    from skabc import ABCClustering

    torch.set_num_threads(1)
    X, reference = clustbench_data.load(Path(home), battery, name)
    k = int(reference.max())
    out = {"battery": battery, "dataset": name, "n": len(X), "true_k": k, "ABC": [], "SC_nn": []}
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(seeds):
            start = time.perf_counter()
            model = ABCClustering(random_state=seed).fit(X)
            out["ABC"].append({"seed": seed, "ari": clustbench_data.score(reference, model.labels_),
                               "k": int(model.n_clusters_), "candidate": model.candidate_,
                               "seconds": time.perf_counter() - start})
            labels = SpectralClustering(n_clusters=k, affinity="nearest_neighbors", random_state=seed).fit_predict(X)
            out["SC_nn"].append({"seed": seed, "ari": clustbench_data.score(reference, labels)})
    return out


def summarise(records: list[dict], seeds: int) -> dict:
    """Per method: mean over the sets at each seed, the mean over all seeds, and the sets whose ARI varies."""
    summary = {}
    for method in ("ABC", "SC_nn"):
        table = np.array([[run["ari"] for run in r[method]] for r in records])  # sets x seeds
        summary[method] = {"mean_per_seed": table.mean(axis=0).tolist(), "mean": float(table.mean()),
                           "min_seed_mean": float(table.mean(axis=0).min()),
                           "max_seed_mean": float(table.mean(axis=0).max()),
                           "seed_0": float(table[:, 0].mean())}
    summary["varying_sets"] = [f"{r['battery']}/{r['dataset']}" for r in records
                               if np.ptp([run["ari"] for run in r["ABC"]]) > 1e-9]
    return summary


def table(records: list[dict], summary: dict, seeds: int) -> str:
    lines = ["| set | n | k | " + " | ".join(f"ABC seed {s} (k)" for s in range(seeds)) + " | ABC mean | SC kNN |",
             "|---|---|---|" + "---|" * seeds + "---|---|"]
    for r in records:
        cells = " | ".join(f"{run['ari']:.3f} ({run['k']})" for run in r["ABC"])
        abc = np.mean([run["ari"] for run in r["ABC"]])
        sc = np.mean([run["ari"] for run in r["SC_nn"]])
        lines.append(f"| {r['battery']}/{r['dataset']} | {r['n']} | {r['true_k']} | {cells} | {abc:.3f} | {sc:.3f} |")
    per_seed = " | ".join(f"{m:.3f}" for m in summary["ABC"]["mean_per_seed"])
    lines.append(f"| *mean (13 sets)* | | | {per_seed} | **{summary['ABC']['mean']:.3f}** | "
                 f"{summary['SC_nn']['mean']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    import clustbench_data
    from joblib import Parallel, delayed

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="random_state 0 .. seeds - 1")
    parser.add_argument("--jobs", type=int, default=2, help="joblib workers over the sets (one thread each)")
    parser.add_argument("--data-home", default=None, help="the clustbench folder (default: ../shared/data/clustbench)")
    parser.add_argument("--output", default=None,
                        help="file under benchmarks/results/ (default: seed_spread.json, or seed_spread_partial.json "
                             "for fewer seeds than the default)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    home = clustbench_data.resolve_data_home(args.data_home, ROOT)
    if home is None:
        print(f"skipped: no clustbench data at {args.data_home or '../shared/data/clustbench'}")
        return 0
    tasks = [(b, name) for b, names in clustbench_data.LISTED.items() for name in names]
    start = time.perf_counter()
    records = Parallel(n_jobs=args.jobs)(delayed(run_set)(str(home), b, name, args.seeds) for b, name in tasks)
    summary = summarise(records, args.seeds)
    result = {"benchmark": "seed_spread", "command": "OMP_NUM_THREADS=1 python benchmarks/" + " ".join(
                  [Path(__file__).name, *(argv if argv is not None else sys.argv[1:])]),
              "seeds": list(range(args.seeds)), "data_home": str(home), "wall_seconds": time.perf_counter() - start,
              "summary": summary, "sets": records}
    text = table(records, summary, args.seeds)
    print(text)
    print(f"ABC (k unknown) over the 13 sets: seed 0 {summary['ABC']['seed_0']:.3f}, seeds 0-{args.seeds - 1} "
          f"{summary['ABC']['mean']:.3f} (seed means {summary['ABC']['min_seed_mean']:.3f}-"
          f"{summary['ABC']['max_seed_mean']:.3f}); SpectralClustering kNN given k {summary['SC_nn']['mean']:.3f}; "
          f"sets whose score moves with the seed: {', '.join(summary['varying_sets']) or 'none'}")
    from result_files import write_result

    write_result("seed_spread.json", result, args.seeds < DEFAULT_SEEDS, args.output)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
