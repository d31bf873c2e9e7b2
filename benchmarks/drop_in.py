"""ABCClustering as a drop-in: same partition as SpectralClustering, at most 1.2x its time.

Usage
-----
OMP_NUM_THREADS=1 python benchmarks/drop_in.py            # n = 1,000 / 10,000 / 100,000 (kNN only at 100k)
OMP_NUM_THREADS=1 python benchmarks/drop_in.py --quick    # smoke run: n = 300 and 1,000, nothing written

For every non-learned affinity and size, ``ABCClustering(n_clusters=k, affinity=...,
random_state=0)`` and ``SpectralClustering(n_clusters=k, affinity=..., random_state=0)``
fit the same data side by side in this one process, alternating which goes
first (``--repeats`` rounds: 25 up to 1,000 points, where a fit takes
milliseconds, 4 at 10,000, 3 at 100,000).  Time is the CPU time of this
process (``time.process_time``; with ``OMP_NUM_THREADS=1`` everything runs on
one thread), the fastest round of each: on a shared machine the wall time
also counts the other jobs that held the core (it is kept in the JSON).  Both estimators first fit a small problem once,
untimed, so that no first call pays for lazy imports.  Reported: the adjusted Rand index between the
two partitions (1 = the same partition up to label ids), whether the labels
are identical, both times and their ratio.  Target: ARI 1 and ratio <= 1.2.

The data are ``make_blobs`` in 2-D (5 centres, ``cluster_std=1.5``).  For
``'precomputed'`` the input is the rbf affinity of the points, for
``'precomputed_nearest_neighbors'`` their sparse 15-nearest-neighbour distance
graph; building those inputs is not timed (both estimators get the same
matrix).  At 100,000 points only the sparse kNN affinities run: a dense
100,000 x 100,000 affinity takes 80 GB.

Writes ``benchmarks/results/drop_in.json`` and the table of
``docs/coming_from_spectral.md`` (between the ``drop-in-table`` markers);
``--render`` rewrites that table from the JSON without running anything.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import sklearn
from result_files import add_output_argument, output_path
from sklearn.cluster import SpectralClustering
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.neighbors import NearestNeighbors

import skabc
from skabc import ABCClustering

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "drop_in.json"
DOCS_MD = ROOT / "docs" / "coming_from_spectral.md"
TABLE_START, TABLE_END = "<!-- drop-in-table -->", "<!-- /drop-in-table -->"

N_CLUSTERS = 5
MAX_RATIO = 1.2
GAMMA = 1.0
DENSE_AFFINITIES = ("rbf", "laplacian", "precomputed")
KNN_AFFINITIES = ("nearest_neighbors", "precomputed_nearest_neighbors")
#: Affinities run at each size: every kind at 1,000, the dense ones at 10,000 too, kNN only at 100,000.
PLAN = {
    1_000: DENSE_AFFINITIES + KNN_AFFINITIES,
    10_000: ("rbf", "precomputed", *KNN_AFFINITIES),
    100_000: KNN_AFFINITIES,
}
QUICK_PLAN = {300: DENSE_AFFINITIES + KNN_AFFINITIES, 1_000: ("rbf", *KNN_AFFINITIES)}


def make_input(X: np.ndarray, affinity: str):
    """What ``fit`` is given: the points, their rbf affinity, or their kNN distance graph."""
    if affinity == "precomputed":
        return rbf_kernel(X, gamma=GAMMA)
    if affinity == "precomputed_nearest_neighbors":
        return NearestNeighbors(n_neighbors=15).fit(X).kneighbors_graph(X, mode="distance")
    return X


def timed_fit(estimator, data) -> tuple[np.ndarray, float, float]:
    """Labels, CPU seconds of this process, wall seconds."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    estimator.fit(data)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return estimator.labels_, cpu, wall


def compare(n: int, affinity: str, repeats: int, seed: int = 0) -> dict:
    X, _ = make_blobs(n_samples=n, centers=N_CLUSTERS, cluster_std=1.5, random_state=seed)
    data = make_input(X, affinity)
    params = dict(n_clusters=N_CLUSTERS, affinity=affinity, gamma=GAMMA, random_state=0)
    times = {"abc": [], "sklearn": []}
    walls = {"abc": [], "sklearn": []}
    labels = {}
    for round_ in range(repeats):
        order = ("abc", "sklearn") if round_ % 2 == 0 else ("sklearn", "abc")
        for name in order:
            estimator = ABCClustering(**params) if name == "abc" else SpectralClustering(**params)
            with warnings.catch_warnings():
                # Both raise the same warnings (e.g. "Graph is not fully connected"); the table says enough.
                warnings.simplefilter("ignore", UserWarning)
                labels[name], seconds, wall = timed_fit(estimator, data)
            times[name].append(seconds)
            walls[name].append(wall)
            del estimator
    abc_s, sk_s = min(times["abc"]), min(times["sklearn"])
    return {
        "n": n,
        "affinity": affinity,
        "ari": float(adjusted_rand_score(labels["sklearn"], labels["abc"])),
        "identical_labels": bool(np.array_equal(labels["sklearn"], labels["abc"])),
        "same_dtype": labels["sklearn"].dtype == labels["abc"].dtype,
        "abc_seconds": abc_s,
        "sklearn_seconds": sk_s,
        "ratio": abc_s / sk_s,
        "abc_all_cpu_seconds": times["abc"],
        "sklearn_all_cpu_seconds": times["sklearn"],
        "abc_wall_seconds": min(walls["abc"]),
        "sklearn_wall_seconds": min(walls["sklearn"]),
    }


def print_row(row: dict) -> None:
    ok = row["ari"] == 1.0 and row["ratio"] <= MAX_RATIO
    print(f"{row['n']:>8,} {row['affinity']:<31} {row['ari']:>5.3f} {row['identical_labels']!s:>9} "
          f"{row['abc_seconds']:>9.3f} {row['sklearn_seconds']:>9.3f} {row['ratio']:>6.2f}  {'ok' if ok else 'MISS'}",
          flush=True)


def render_table(rows: list[dict]) -> None:
    """Write the results as a Markdown table into the docs page, between its markers."""
    lines = ["| n | affinity | ARI | identical labels | ABCClustering CPU s | SpectralClustering CPU s | ratio |",
             "|---:|---|---:|---|---:|---:|---:|"]
    lines += [f"| {r['n']:,} | `{r['affinity']}` | {r['ari']:.3f} | {'yes' if r['identical_labels'] else 'no'} | "
              f"{r['abc_seconds']:.3f} | {r['sklearn_seconds']:.3f} | {r['ratio']:.2f} |" for r in rows]
    text = DOCS_MD.read_text()
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    DOCS_MD.write_text(head + TABLE_START + "\n" + "\n".join(lines) + "\n" + TABLE_END + tail)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 300 and 1,000 only; nothing written")
    parser.add_argument("--repeats", type=int, default=None,
                        help="rounds per configuration (default: 25 up to 1,000 points, 4 at 10,000, 3 beyond; "
                             "another number is a partial run, which leaves the docs table as it is)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="run only these sizes of the plan (e.g. --sizes 1000): a partial run, which leaves "
                             "the docs table as it is")
    parser.add_argument("--render", action="store_true", help="rewrite the docs table from the JSON; run nothing")
    add_output_argument(parser, RESULTS.name)
    args = parser.parse_args(argv)
    if args.render:
        render_table(json.loads(RESULTS.read_text())["rows"])
        return 0
    plan = QUICK_PLAN if args.quick else PLAN
    if args.sizes:
        unknown = sorted(set(args.sizes) - set(plan))
        if unknown:
            parser.error(f"--sizes {' '.join(map(str, unknown))}: not in the plan, whose sizes are "
                         f"{', '.join(map(str, plan))}")
        plan = {n: affinities for n, affinities in plan.items() if n in args.sizes}
    for affinity in DENSE_AFFINITIES + KNN_AFFINITIES:  # warm-up, untimed
        compare(200, affinity, repeats=1)

    print(f"{'n':>8} {'affinity':<31} {'ARI':>5} {'identical':>9} {'ABC s':>9} {'SC s':>9} {'ratio':>6}")
    rows = []
    for n, affinities in plan.items():
        for affinity in affinities:
            repeats = args.repeats or (25 if n <= 1_000 else 4 if n <= 10_000 else 3)
            row = {**compare(n, affinity, repeats), "repeats": repeats}
            rows.append(row)
            print_row(row)
    misses = [r for r in rows if not (r["ari"] == 1.0 and r["ratio"] <= MAX_RATIO)]
    print(f"\n{len(rows) - len(misses)} of {len(rows)} configurations give the same partition (ARI 1) "
          f"within {MAX_RATIO}x SpectralClustering's time.")
    if not args.quick:
        partial = bool(args.sizes) or args.repeats is not None
        path = output_path(RESULTS.name, partial, args.output)
        path.write_text(json.dumps({
            "command": " ".join(["OMP_NUM_THREADS=1 python benchmarks/drop_in.py",
                                 *(argv if argv is not None else sys.argv[1:])]),
            "target": {"ari": 1.0, "max_ratio": MAX_RATIO},
            "machine": {"platform": platform.platform(), "processor": platform.processor(),
                        "cpu_count": os.cpu_count(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")},
            "versions": {"skabc": skabc.__version__, "sklearn": sklearn.__version__, "numpy": np.__version__},
            "rows": rows,
        }, indent=2) + "\n")
        print(f"wrote {path}")
        if not partial and args.output is None:  # the docs quote the committed JSON
            render_table(rows)
            print(f"wrote the table of {DOCS_MD.relative_to(ROOT)}")
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
