"""Scale-out of ABCClustering.predict_many over a local Dask cluster: 1 worker vs 2 workers.

Usage
-----
OMP_NUM_THREADS=1 python benchmarks/dask_scaling.py            # 16 sets of 3,000 points, once (the committed run)
OMP_NUM_THREADS=1 python benchmarks/dask_scaling.py --sets 64 --size 300 --repeats 3   # another load: a partial run

Clusters the sets with the shipped ``circles`` kernel through
``ABCClustering.predict_many`` inside ``joblib.parallel_config(backend='dask')``
on a ``LocalCluster`` of 1 and then 2 worker processes (one thread each, so
torch and BLAS use one core per worker), checks that the labels match the
serial run, and writes the wall times and the speed-up to
``benchmarks/results/dask_scaling.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from distributed import Client, LocalCluster
from joblib import parallel_config
from result_files import add_output_argument, output_path

import skabc
from skabc import ABCClustering
from skabc.datasets import make_circles_sets
from skabc.pretrained import load

RESULTS = Path(__file__).resolve().parent / "results" / "dask_scaling.json"
#: The configuration of the committed result (the guide quotes it); another one is a partial run.
COMMITTED = {"sets": 16, "size": 3000, "repeats": 1, "seed": 0}


def _time_on_cluster(model, sets, n_workers: int, repeats: int):
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, env=env) as cluster, Client(cluster):
        with parallel_config(backend="dask"):
            model.predict_many(sets[:n_workers])  # warm-up: workers import torch and receive the kernel
            times, labels = [], None
            for _ in range(repeats):
                start = time.perf_counter()
                labels = model.predict_many(sets)
                times.append(time.perf_counter() - start)
    return times, labels


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=COMMITTED["sets"])
    parser.add_argument("--size", type=int, default=COMMITTED["size"])
    parser.add_argument("--repeats", type=int, default=COMMITTED["repeats"])
    parser.add_argument("--seed", type=int, default=COMMITTED["seed"])
    add_output_argument(parser, RESULTS.name)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    X, _, groups = make_circles_sets(n_sets=args.sets, set_size=args.size, random_state=args.seed)
    sets = [X[groups == g] for g in np.unique(groups)]
    model = ABCClustering(kernel=load("circles", device="cpu"), random_state=0).fit(sets[0])

    start = time.perf_counter()
    serial = model.predict_many(sets, n_jobs=1)
    serial_s = time.perf_counter() - start

    rows = {}
    for n_workers in (1, 2):
        times, labels = _time_on_cluster(model, sets, n_workers, args.repeats)
        same = all(np.array_equal(a, b) for a, b in zip(labels, serial, strict=True))
        rows[n_workers] = {"wall_s": times, "best_s": min(times), "labels_match_serial": same}
        print(f"{n_workers} worker(s): best {min(times):.2f} s of {[round(t, 2) for t in times]}; "
              f"labels match serial: {same}")
    speedup = rows[1]["best_s"] / rows[2]["best_s"]
    print(f"in-process serial (n_jobs=1): {serial_s:.2f} s")
    print(f"speed-up 2 workers vs 1: {speedup:.2f}x")

    result = {
        "n_sets": args.sets, "set_size": args.size, "kernel": "circles", "repeats": args.repeats,
        "serial_in_process_s": serial_s, "workers": {str(k): v for k, v in rows.items()}, "speedup_2_vs_1": speedup,
        "cpu_count": os.cpu_count(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "python": platform.python_version(), "torch": torch.__version__, "skabc": skabc.__version__,
        "command": " ".join(["OMP_NUM_THREADS=1 python benchmarks/dask_scaling.py", *(argv or sys.argv[1:])]),
    }
    # Other sets, sizes, seed or fewer repeats than the committed run measure something else: not its file.
    partial = ((args.sets, args.size, args.seed) != (COMMITTED["sets"], COMMITTED["size"], COMMITTED["seed"])
               or args.repeats < COMMITTED["repeats"])
    path = output_path(RESULTS.name, partial, args.output)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
