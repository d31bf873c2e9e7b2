"""k unknown with scikit-learn's affinities: counted by the generic kernel, or read off the affinity's own eigengap.

Usage
-----
OMP_NUM_THREADS=1 python benchmarks/count_k.py            # gallery toys and the 13 listed clustbench sets
OMP_NUM_THREADS=1 python benchmarks/count_k.py --quick    # smoke run: 2 seeds, n = 500, no clustbench; nothing written
OMP_NUM_THREADS=1 python benchmarks/count_k.py --select   # the selection run that decided the design (its own JSON)
OMP_NUM_THREADS=1 python benchmarks/count_k.py --select-rotation   # the one that chose a kNN graph's own k rule

``ABCClustering(affinity=..., random_state=0)`` with ``n_clusters`` unset counts the clusters as
``ABCClustering()`` does (the shipped generic kernel and its arbiter; ``arbiter_ == 'generic-count'``) and cuts
the chosen affinity into that many, as SpectralClustering would; ``n_clusters_selection='eigengap'`` reads ``k``
off that affinity's own Laplacian instead (what ``'auto'`` did before).  Both run on:

* scikit-learn's gallery toys (``benchmarks/zero_shot.py``'s generators: noisy circles, noisy moons, varied,
  anisotropic, blobs, no structure), StandardScaler, seeds 0-9 at n = 500 and 1,000; the kNN graph
  (``'nearest_neighbors'``) and the RBF (``'rbf'``, gamma=1) affinities;
* the 13 listed wut + graves sets of ``../shared/data/clustbench`` (the suite's protocol, ``clustbench_data``;
  skipped when absent), the kNN graph only (a dense RBF of 5,000 points is SpectralClustering's cost, not
  this comparison's).

Reference: ``SpectralClustering(n_clusters=k, affinity=...)`` given the true ``k``.  Reported: mean ARI and mean
``|k_hat - k|`` per group.  Writes ``benchmarks/results/count_k.json``.

Selection (``--select``, run before the benchmark; ``benchmarks/results/count_k_select.json``): the design and
its ship rule were fixed first: on gallery toys of seeds 600-609 (n = 500 for even seeds, 1,500 for odd ones) and
on 63 sets of :func:`skabc.datasets.make_clustering_sets` (9 per default family, seeds 8080-8086), the kNN graph's
counted ``k`` must beat its own eigengap by more than two standard errors of the paired ARI differences, with no
family losing more than 0.02 on average (ARI on all points; the RBF is reported, not ruled on).

Where ``k`` is read off the kNN graph's own spectrum (a precomputed graph, ``affinity=
'precomputed_nearest_neighbors'``, has no rows to count on; or ``arbiter=None``), ``'auto'`` is the rotation
rule (``n_clusters_selection='rotation'``, :data:`skabc.kernels.pairwise.KNN_GRAPH_CLUSTERING`), chosen by
``--select-rotation`` (``benchmarks/results/count_k_rotation_select.json``), with its rule fixed first: the
graph ``NearestNeighbors(n_neighbors=10).fit(Xs).kneighbors_graph(Xs, mode='distance')`` of the StandardScaler-ed
rows, clustered with ``affinity='precomputed_nearest_neighbors'``, on gallery toys of seeds 100-109 (n = 500 and
1,000, the six kinds), five generators of :mod:`skabc.datasets` at seeds 100-104 (n = 400), the 13 listed
clustbench sets and iris, wine, breast cancer and digits (these 17 are benchmark sets too); rotation replaces
the eigengap if its mean ARI is higher, no group (toys, generators, clustbench + real) loses more than 0.02, and
its mean ``|k_hat - k|`` is lower.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import clustbench_data
import numpy as np
from result_files import add_output_argument, output_path
from sklearn.cluster import SpectralClustering
from sklearn.metrics import adjusted_rand_score
from zero_shot import dataset_points

from skabc import ABCClustering

ROOT = Path(__file__).resolve().parents[1]
TOYS = ("noisy_circles", "noisy_moons", "varied", "aniso", "blobs", "no_structure")
METHODS = {
    "counted (default)": {},
    "own eigengap": {"n_clusters_selection": "eigengap"},
    "own rotation": {"n_clusters_selection": "rotation"},
}
#: The kNN graph's own k rules compared by ``--select-rotation``.
OWN_RULES = ("eigengap", "rotation")


def cluster(params: dict, affinity: str, X: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # kNN graphs of far-apart blobs are disconnected
        return ABCClustering(affinity=affinity, random_state=0, **params).fit_predict(X)


def reference(affinity: str, X: np.ndarray, k: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return SpectralClustering(n_clusters=k, affinity=affinity, random_state=0).fit_predict(X)


def score_set(X, k: int, affinities, score) -> dict:
    row = {}
    for affinity in affinities:
        for method, params in METHODS.items():
            start = time.process_time()
            labels = cluster(params, affinity, X)
            row[f"{affinity}, {method}"] = {"ari": score(labels), "k": len(np.unique(labels)),
                                           "cpu_s": time.process_time() - start}
        labels = np.zeros(len(X), dtype=int) if k == 1 else reference(affinity, X, k)
        row[f"{affinity}, SpectralClustering given k"] = {"ari": score(labels), "k": k}
    return row


def summarise(rows: list[dict]) -> dict:
    out = {}
    for name in rows[0]["scores"]:
        ari = np.array([r["scores"][name]["ari"] for r in rows])
        err = np.array([abs(r["scores"][name]["k"] - r["k"]) for r in rows])
        out[name] = {"ari": float(ari.mean()), "ari_se": float(ari.std(ddof=1) / np.sqrt(len(ari))),
                     "k_abs_error": float(err.mean())}
    return out


def select() -> dict:
    """The selection run: the ship rule's sets (module notes), both affinities, per-family means."""
    from skabc.datasets import make_clustering_sets
    from skabc.datasets.synthetic import FAMILY_WEIGHTS

    sets = [(toy, *dataset_points(toy, 500 if seed % 2 == 0 else 1500, seed))
            for toy in TOYS for seed in range(600, 610)]
    for i, family in enumerate(FAMILY_WEIGHTS):
        X, y, groups = make_clustering_sets(9, families={family: 1.0}, random_state=8080 + i)
        for g in np.unique(groups):
            rows = X[groups == g].astype(np.float64)
            sets.append((f"pool {family}", rows[:, np.abs(rows).max(axis=0) > 0], y[groups == g]))
    rows = []
    for family, X, y in sets:
        scores = score_set(X, len(np.unique(y)), ("nearest_neighbors", "rbf"), partial(adjusted_rand_score, y))
        rows.append({"family": family, "n": len(X), "k": len(np.unique(y)), "scores": scores})
    gain = np.array([r["scores"]["nearest_neighbors, counted (default)"]["ari"]
                     - r["scores"]["nearest_neighbors, own eigengap"]["ari"] for r in rows])
    families = {f: summarise([r for r in rows if r["family"] == f]) for f in dict.fromkeys(r["family"] for r in rows)}
    worst = min(s["nearest_neighbors, counted (default)"]["ari"] - s["nearest_neighbors, own eigengap"]["ari"]
                for s in families.values())
    passes = bool(gain.mean() > 2 * gain.std(ddof=1) / np.sqrt(len(gain)) and worst >= -0.02)
    for family, s in families.items():
        print(f"{family:16s}", {m: round(v["ari"], 3) for m, v in s.items()})
    print(f"kNN graph, counted - own eigengap: {gain.mean():+.3f} +- {gain.std(ddof=1) / np.sqrt(len(gain)):.3f} "
          f"over {len(gain)} sets; worst family {worst:+.3f}; ship rule {'passes' if passes else 'fails'}")
    return {"n_sets": len(rows), "paired_gain": float(gain.mean()),
            "paired_gain_se": float(gain.std(ddof=1) / np.sqrt(len(gain))), "worst_family_gain": float(worst),
            "passes": passes, "families": families, "sets": rows}


def select_rotation(home: Path | None) -> dict:
    """The selection run of a kNN graph's own ``k`` rule (module notes): per set, ARI and ``k`` of each rule."""
    from sklearn.neighbors import NearestNeighbors
    from sklearn.preprocessing import StandardScaler
    from zero_shot import load_real

    from skabc.datasets import make_blobs_set, make_chains_set, make_rings_set, make_subspace_set, make_warped_set

    sets = [("toys", f"{toy} n={n} seed={seed}", *dataset_points(toy, n, seed), None)
            for toy in TOYS for seed in range(100, 110) for n in (500, 1000)]
    for make in (make_chains_set, make_warped_set, make_subspace_set, make_rings_set, make_blobs_set):
        for seed in range(100, 105):
            X, y = make(n_samples=400, random_state=seed)[:2]
            sets.append(("generators", f"{make.__name__} seed={seed}", StandardScaler().fit_transform(X), y, None))
    if home is not None:
        for battery, names in clustbench_data.LISTED.items():
            for name in names:
                X, labels0 = clustbench_data.load(home, battery, name)
                sets.append(("clustbench + real", f"{battery}/{name}", X, labels0, "suite"))
    for name in ("iris", "wine", "breast_cancer", "digits"):
        X, y = load_real(name)
        sets.append(("clustbench + real", name, StandardScaler().fit_transform(X), y, None))
    rows = []
    for group, name, X, y, protocol in sets:
        k = int(y.max()) if protocol == "suite" else len(np.unique(y))
        score = partial(clustbench_data.score, y) if protocol == "suite" else partial(adjusted_rand_score, y)
        graph = NearestNeighbors(n_neighbors=10).fit(X).kneighbors_graph(X, mode="distance")
        row = {"group": group, "set": name, "n": len(X), "k": k}
        for rule in OWN_RULES:
            labels = cluster({"n_clusters_selection": rule}, "precomputed_nearest_neighbors", graph)
            row[rule] = {"ari": score(labels), "k": len(np.unique(labels))}
        rows.append(row)
        print(group, name, {rule: (round(row[rule]["ari"], 3), row[rule]["k"]) for rule in OWN_RULES}, flush=True)
    means = {}
    for group in [*dict.fromkeys(r["group"] for r in rows), "all"]:
        chosen = [r for r in rows if group in ("all", r["group"])]
        means[group] = {rule: {"ari": float(np.mean([r[rule]["ari"] for r in chosen])),
                               "k_abs_error": float(np.mean([abs(r[rule]["k"] - r["k"]) for r in chosen])),
                               "n_sets": len(chosen)} for rule in OWN_RULES}
        print(f"{group:18s}", {rule: (round(m["ari"], 3), round(m["k_abs_error"], 2))
                               for rule, m in means[group].items()})
    overall = means["all"]
    passes = bool(overall["rotation"]["ari"] > overall["eigengap"]["ari"]
                  and overall["rotation"]["k_abs_error"] < overall["eigengap"]["k_abs_error"]
                  and all(m["rotation"]["ari"] >= m["eigengap"]["ari"] - 0.02 for m in means.values()))
    print(f"rotation replaces the eigengap: ship rule {'passes' if passes else 'fails'}")
    return {"n_sets": len(rows), "passes": passes, "means": means, "sets": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds, n = 500, no clustbench; nothing written")
    parser.add_argument("--select", action="store_true", help="the selection run that decided the design")
    parser.add_argument("--data-home", default=None,
                        help="folder of the clustbench batteries (default: ../shared/data/clustbench); without "
                             "them the run is partial and writes count_k_partial.json")
    parser.add_argument("--select-rotation", action="store_true",
                        help="the selection run of a kNN graph's own k rule (eigengap or rotation)")
    add_output_argument(parser, "count_k.json", "count_k_select.json", "count_k_rotation_select.json")
    args = parser.parse_args(argv)
    if args.select_rotation:
        home = clustbench_data.resolve_data_home(args.data_home, ROOT)
        result = {"benchmark": "count_k --select-rotation",
                  "command": "OMP_NUM_THREADS=1 python benchmarks/count_k.py --select-rotation",
                  **select_rotation(home)}
        # Without the clustbench sets the selection run measures less than the committed one.
        path = output_path("count_k_rotation_select.json", home is None, args.output)
        path.write_text(json.dumps(result, indent=1))
        print(f"wrote {path}")
        return 0
    if args.select:
        result = {"benchmark": "count_k --select", "command": "OMP_NUM_THREADS=1 python benchmarks/count_k.py --select",
                  **select()}
        path = output_path("count_k_select.json", False, args.output)
        path.write_text(json.dumps(result, indent=1))
        print(f"wrote {path}")
        return 0
    seeds, sizes = (range(2), (500,)) if args.quick else (range(10), (500, 1000))
    groups = {}
    rows = []
    for toy in TOYS:
        for n in sizes:
            for seed in seeds:
                X, y = dataset_points(toy, n, seed)
                k = len(np.unique(y))
                scores = score_set(X, k, ("nearest_neighbors", "rbf"), partial(adjusted_rand_score, y))
                rows.append({"set": f"{toy} n={n} seed={seed}", "k": k, "scores": scores})
        print(toy, {m: round(v["ari"], 3) for m, v in summarise(rows[-len(seeds) * len(sizes):]).items()}, flush=True)
    groups["gallery toys"] = {"n_sets": len(rows), "summary": summarise(rows), "sets": rows}
    home = clustbench_data.resolve_data_home(args.data_home, ROOT)
    if home is None and not args.quick:
        print(f"clustbench sets skipped: none at {args.data_home or '../shared/data/clustbench'} "
              "(pass --data-home DIR)", flush=True)
    if home is not None and not args.quick:
        rows = []
        for battery, names in clustbench_data.LISTED.items():
            for name in names:
                X, labels0 = clustbench_data.load(home, battery, name)
                k = int(labels0.max())
                scores = score_set(X, k, ("nearest_neighbors",), partial(clustbench_data.score, labels0))
                rows.append({"set": f"{battery}/{name}", "k": k, "scores": scores})
                print(battery, name, {m: (round(v["ari"], 3), v["k"]) for m, v in scores.items()}, flush=True)
        groups["clustbench (13 listed)"] = {"n_sets": len(rows), "summary": summarise(rows), "sets": rows}
    for group, result in groups.items():
        print(f"\n{group} ({result['n_sets']} sets): mean ARI, mean |k_hat - k|")
        for method, s in result["summary"].items():
            print(f"  {method:48s} {s['ari']:.3f} +- {s['ari_se']:.3f}   k err {s['k_abs_error']:.2f}")
    if not args.quick:
        command = " ".join(["OMP_NUM_THREADS=1 python benchmarks/count_k.py", *(argv if argv is not None
                                                                                else sys.argv[1:])])
        out = {"benchmark": "count_k", "command": command, "machine": {"platform": platform.platform()},
               "groups": groups}
        path = output_path("count_k.json", home is None, args.output)
        path.write_text(json.dumps(out, indent=1))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
