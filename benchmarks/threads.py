"""What one native thread for the small dense steps buys: ``fit_predict`` with the limit and without it.

Usage
-----
python benchmarks/threads.py            # n = 1,000, 5,000, 20,000 and the fine-tune; about 5 minutes on 2 cores
python benchmarks/threads.py --quick    # n = 1,000 only, one repeat each, no fine-tune

The rotation search and k-means of the spectral step run with every BLAS and
OpenMP pool limited to one thread (``skabc._threads.single_native_thread``).
This script runs ``ABCClustering(random_state=0).fit_predict`` on standardised
blobs with the process's default thread counts, alternating a run with the
limit and a run with it lifted (the limit replaced by a block that does
nothing), and reports the median wall seconds of each, their ratio, and
whether both gave the same labels.  Then the default fine-tune,
``ABCClustering(kernel=ContextualKernel(random_state=0)).fit`` on digits 0-4,
once each way (where the training sets are canonicalised and the validation
sets clustered inside the same limit): its wall seconds, and the largest
difference between the two kernels' affinities on 200 digits 5-9 (threads
may change the last bits of a set's SVD, and training carries them on).
Run it without ``OMP_NUM_THREADS`` set:
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
from result_files import add_output_argument, output_path
from sklearn.datasets import load_digits, make_blobs
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_info

import skabc._threads as threads
from skabc import ABCClustering, ContextualKernel


class _NoLimit:
    def limit(self, limits):
        return contextlib.nullcontext()


def _time(fit, limited: bool):
    """Wall seconds of ``fit()`` and what it returned, with the limit in place or lifted."""
    original = threads._controller
    if not limited:
        threads._controller = lambda: (_NoLimit(), _NoLimit())
    try:
        start = time.perf_counter()
        result = fit()
        return time.perf_counter() - start, result
    finally:
        threads._controller = original


def _fine_tune() -> dict:
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    unseen = X[y >= 5][:200]
    row, affinities = {}, {}
    for limited in (False, True):
        seconds, model = _time(lambda: ABCClustering(kernel=ContextualKernel(random_state=0), random_state=0)
                               .fit(X[y < 5], y[y < 5]), limited)
        row["limited_s" if limited else "unlimited_s"] = seconds
        affinities[limited] = np.asarray(model.kernel_.affinity(unseen))
    row["ratio"] = row["unlimited_s"] / row["limited_s"]
    row["affinity_max_abs_diff"] = float(np.abs(affinities[True] - affinities[False]).max())
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 1,000 only, one repeat (--repeats is ignored)")
    parser.add_argument("--repeats", type=int, default=3)
    add_output_argument(parser, "threads.json")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if all(info["num_threads"] == 1 for info in threadpool_info() if info["user_api"] in ("blas", "openmp")):
        print("threads.py: every BLAS and OpenMP pool has one thread here (OMP_NUM_THREADS=1?), so the limit changes "
              "nothing and a ratio would be noise; run it with the default threads.")
        return 2
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
                seconds, labels[limited] = _time(lambda X=X: ABCClustering(random_state=0).fit_predict(X), limited)
                timings[limited].append(seconds)
        row = {"n": n, "limited_s": float(np.median(timings[True])), "unlimited_s": float(np.median(timings[False])),
               "same_labels": bool(np.array_equal(labels[True], labels[False]))}
        row["ratio"] = row["unlimited_s"] / row["limited_s"]
        rows.append(row)
        print(f"| {n} | {row['limited_s']:.2f} | {row['unlimited_s']:.2f} | {row['ratio']:.2f} "
              f"| {row['same_labels']} |", flush=True)
    fine_tune = None
    if not args.quick:
        fine_tune = _fine_tune()
        print(f"\ndigits fine-tune: {fine_tune['limited_s']:.1f} s limited, {fine_tune['unlimited_s']:.1f} s unlimited "
              f"({fine_tune['ratio']:.2f}x); affinities differ by up to {fine_tune['affinity_max_abs_diff']:.2g}",
              flush=True)
    pools = [{key: info[key] for key in ("user_api", "internal_api", "num_threads")} for info in threadpool_info()]
    result = {"rows": rows, "fine_tune": fine_tune, "repeats": repeats, "pools": pools, "cpus": os.cpu_count(),
              "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "platform": platform.platform()}
    path = output_path("threads.json", partial=args.quick, output=args.output)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
