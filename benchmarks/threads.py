"""What one native thread for the small dense steps buys: ``fit_predict`` with the limit and without it.

Usage
-----
python benchmarks/threads.py            # n = 1,000, 5,000, 20,000; about 2 minutes on 2 cores
python benchmarks/threads.py --quick    # n = 1,000 only, one repeat each

The rotation search and k-means of the spectral step run with every BLAS and
OpenMP pool limited to one thread (``skabc._threads.single_native_thread``).
This script runs ``ABCClustering(random_state=0).fit_predict`` on standardised
blobs with the process's default thread counts, alternating a run with the
limit and a run with it lifted (the limit replaced by a block that does
nothing), and reports the median wall seconds of each, their ratio, and
whether both gave the same labels.  Run it without ``OMP_NUM_THREADS`` set:
the limit matters where threads can spin.  Writes
``benchmarks/results/threads.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import time

import numpy as np
from result_files import output_path
from sklearn.datasets import make_blobs
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_info

import skabc._threads as threads
from skabc import ABCClustering


class _NoLimit:
    def limit(self, limits):
        return contextlib.nullcontext()


def _time(X: np.ndarray, limited: bool) -> tuple[float, np.ndarray]:
    original = threads._controller
    if not limited:
        threads._controller = _NoLimit
    try:
        start = time.perf_counter()
        labels = ABCClustering(random_state=0).fit_predict(X)
        return time.perf_counter() - start, labels
    finally:
        threads._controller = original


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 1,000 only, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    sizes, repeats = ((1_000,), 1) if args.quick else ((1_000, 5_000, 20_000), args.repeats)
    X0, _ = make_blobs(500, centers=3, random_state=0)
    ABCClustering(random_state=0).fit_predict(StandardScaler().fit_transform(X0))  # warm-up: weights, pools
    rows = []
    print("| n | limited (s) | unlimited (s) | unlimited / limited | same labels |")
    print("|---|---|---|---|---|")
    for n in sizes:
        X, _ = make_blobs(n, centers=3, random_state=0)
        X = StandardScaler().fit_transform(X)
        timings = {True: [], False: []}
        labels = {}
        for _ in range(repeats):
            for limited in (False, True):
                seconds, labels[limited] = _time(X, limited)
                timings[limited].append(seconds)
        row = {"n": n, "limited_s": float(np.median(timings[True])), "unlimited_s": float(np.median(timings[False])),
               "same_labels": bool(np.array_equal(labels[True], labels[False]))}
        row["ratio"] = row["unlimited_s"] / row["limited_s"]
        rows.append(row)
        print(f"| {n} | {row['limited_s']:.2f} | {row['unlimited_s']:.2f} | {row['ratio']:.2f} "
              f"| {row['same_labels']} |", flush=True)
    pools = [{key: info[key] for key in ("user_api", "internal_api", "num_threads")} for info in threadpool_info()]
    result = {"rows": rows, "repeats": repeats, "pools": pools, "cpus": os.cpu_count(),
              "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "platform": platform.platform()}
    path = output_path("threads.json", partial=args.quick, output=args.output)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
