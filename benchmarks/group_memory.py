"""Peak memory of clustering many sets at once with ``groups``: ``fit`` keeps every group's affinity, ``predict`` none.

Usage
-----
python benchmarks/group_memory.py            # 12 groups of 2,000 rows; about a minute on 2 cores
python benchmarks/group_memory.py --quick    # 6 groups of 1,000 rows
PYTHONPATH=<another checkout> python benchmarks/group_memory.py --output /tmp/old.json  # that checkout's package

Each case runs in a fresh process (a peak resident size is per process): it imports skabc, clusters one set of
300 rows (so torch, the kernel and scikit-learn's code are loaded), reads its resident size (the start), then runs
``fit(X, groups=...)`` or ``predict(X, groups=...)`` on blobs split into equal groups and reads the peak resident
size of the process (``ru_maxrss``).  Reported: start, peak, their difference and that difference per kept pair
(the sum over groups of size squared) — the figure behind ``skabc._group_affinity.KEPT_COPIES``.  Cases:
``affinity='rbf'`` with ``n_clusters=4`` (dense affinities, SpectralClustering's path) and ``ABCClustering()`` (the
shipped generic kernel).  Linux reports ``ru_maxrss`` in KiB; elsewhere the script says it cannot measure.
Writes ``benchmarks/results/group_memory.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

from result_files import add_output_argument, output_path

CASES = {"rbf": {"affinity": "rbf", "n_clusters": 4}, "generic": {}}
CHILD = """
import json, resource, sys, warnings
import numpy as np
import torch
from sklearn.datasets import make_blobs
from skabc import ABCClustering

torch.set_num_threads(1)
warnings.simplefilter("ignore")
n_groups, size, method, params = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
X, _ = make_blobs(n_groups * size, centers=4, random_state=0)
groups = np.repeat(np.arange(n_groups), size)
model = ABCClustering(random_state=0, **params).fit(X[:300])
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if method == "fit":
    ABCClustering(random_state=0, **params).fit(X, groups=groups)
else:
    model.predict(X, groups=groups)
print(json.dumps({"start_kib": start, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def measure(n_groups: int, size: int, method: str, params: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(n_groups), str(size), method, json.dumps(params)],
                          capture_output=True, text=True, check=True)
    record = json.loads(done.stdout.strip().splitlines()[-1])
    pairs = n_groups * size**2
    grown = (record["peak_kib"] - record["start_kib"]) * 1024
    return {**record, "pairs": pairs, "grown_bytes": grown, "bytes_per_pair": grown / pairs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 groups of 1,000 rows")
    add_output_argument(parser, "group_memory.json")
    args = parser.parse_args(argv)
    if platform.system() != "Linux":
        print("ru_maxrss is in KiB on Linux only: this script measures there")
        return 1
    n_groups, size = (6, 1000) if args.quick else (12, 2000)
    rows = []
    print(f"{n_groups} groups of {size} rows (blobs, 4 centres); one fresh process per case, one thread")
    print(f"{'case':<10} {'method':<8} {'start MB':>9} {'peak MB':>9} {'grown MB':>9} {'bytes/pair':>11}")
    for case, params in CASES.items():
        for method in ("fit", "predict"):
            row = {"case": case, "params": params, "method": method, **measure(n_groups, size, method, params)}
            rows.append(row)
            print(f"{case:<10} {method:<8} {row['start_kib'] / 1024:9.0f} {row['peak_kib'] / 1024:9.0f} "
                  f"{row['grown_bytes'] / 2**20:9.0f} {row['bytes_per_pair']:11.1f}", flush=True)
    result = {"benchmark": "group_memory", "command": "python benchmarks/group_memory.py" + (" --quick" * args.quick),
              "n_groups": n_groups, "group_size": size, "python": platform.python_version(), "rows": rows}
    path = output_path("group_memory.json", args.quick, args.output)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
