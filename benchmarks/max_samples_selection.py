"""Selection run of ``max_samples='auto'`` for the learned affinity: how large a subsample ``ABCClustering()`` clusters.

Usage
-----
OMP_NUM_THREADS=1 python benchmarks/max_samples_selection.py --part 0/2 &
OMP_NUM_THREADS=1 python benchmarks/max_samples_selection.py --part 1/2; wait
python benchmarks/max_samples_selection.py --merge     # the rule applied -> results/max_samples_selection.json

Why.  A set of more than ``max_samples_`` points is clustered on a seeded random subsample of that many, every
other point labelled by its nearest drawn neighbours (``skabc._subsample``).  ``'auto'`` meant 2,000 since it was
introduced (for speed, never selected), while the shipped generic kernel was trained on sets of at most 1,200
points and the k-unknown arbiter's forest on sets of 150-1,200 points (its many-cluster pool: up to 2,000).  At
2,000 points the arbiter keeps the kernel's partition of large planar sets where the kNN graph's is better
(``train_arbiter.py``'s validation group ``clustbench_large``: 0.453 against the kNN rotation rule's 0.660).

Design and rule (fixed 2026-12-08 before any number of this run was read).  Two values only: 2,000 (shipped) and
1,200, the largest set of the kernel's training pools.  Every validation set has more than 1,200 points (so the
choice matters) and none is a benchmark's: the clustbench sets are fitted with ``random_state`` 1, 2 and 3
(``zero_shot.py`` fits 0), the toys at seeds 200-202 (``zero_shot.py``: 0-19, the arbiter's validation: 100-102).
Groups:

* ``clustbench_listed``: the five of ``zero_shot.py``'s 13 listed sets with more than 1,200 points (wut circles,
  cross, graph, labirynth, trapped_lovers), whole; ``clustbench_rest``: the six other wut sets of more than 1,200
  points (isolation, mk4, olympic, stripes, trajectories, windows).  Constant columns dropped, StandardScaler, noise
  points (label 0) not scored, as the clustbench protocol does.
* ``gaussians``: g2mg and h2mg at d = 2, 8, 16 and spreads 10, 30, 50 (18 sets of 2,048 points; the arbiter's
  group of that name uses d = 32-128 at 1,000-row subsamples).
* ``synthetic``: 40 sets of :func:`skabc.datasets.make_clustering_sets`'s default mixture, 1,300-4,000 points,
  1-64 features, up to 15 clusters (seed 7070); ``many_clusters``: 30 sets of the arbiter's many-cluster families,
  up to 50 clusters (seed 7071); ``planar``: 30 sets of the arbiter's large-planar families (seed 7072).
* ``toys``: the five structured gallery toys of ``zero_shot.py`` at n = 2,000 and 3,000, seeds 200-202.

Every set is clustered by ``ABCClustering(random_state=s, max_samples=m)`` with ``k`` unknown and with the true
``k`` (the clusters of the structure: background-noise singletons are not counted), ``s`` in 1, 2, 3; a set's
score is the mean ARI over ``s``.  Rule: 1,200 ships when, with ``k`` unknown, its paired mean gain over all sets
exceeds its standard error and no group loses more than 0.01, and with ``k`` given the paired mean change is at
least -0.005.

Record (2026-12-08, the package of 6f77f61; two parts side by
side on 2 cores, 24.7 CPU-min of fits; ``benchmarks/results/max_samples_selection.json``): **fails, not shipped.**  Over
the 159 sets, k unknown +0.0004 +- 0.0068 and k given -0.0098 +- 0.0043.  Per group, k unknown (k given):
clustbench_listed 0.396 -> 0.459 (0.855 -> 0.794), clustbench_rest 0.560 -> 0.597 (0.838 -> 0.751), planar 0.561 ->
0.589 (0.641 -> 0.641), synthetic 0.738 -> 0.743, toys 0.969 -> 0.968, but gaussians 0.809 -> 0.789 and
many_clusters 0.698 -> 0.661 (mean |k error| 6.80 -> 8.78): a smaller subsample helps large planar shapes and costs
sets of many or overlapping clusters, which need the points.  CPU per fit 1.3-1.7 s -> 0.5-0.6 s.  No other value
was tried on these sets.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_arbiter as ta
import zero_shot
from result_files import add_output_argument, output_path

from skabc import ABCClustering
from skabc.datasets import make_clustering_sets

ROOT = Path(__file__).resolve().parents[1]
DIRECTORY = ROOT / "benchmarks" / ".checkpoints" / "max_samples_selection"
VALUES = (2000, 1200)
SEEDS = (1, 2, 3)
LISTED = ("circles", "cross", "graph", "labirynth", "trapped_lovers")
REST = ("isolation", "mk4", "olympic", "stripes", "trajectories", "windows")
BIG = dict(set_size=(1300, 4000))


def _clustbench(home: Path, battery: str, name: str):
    data = np.loadtxt(gzip.open(home / battery / f"{name}.data.gz"), ndmin=2)
    labels = np.loadtxt(gzip.open(home / battery / f"{name}.labels0.gz"), dtype=int)
    data = StandardScaler().fit_transform(data[:, data.std(axis=0) > 0])
    return f"{battery}/{name}", data, labels, labels > 0


def _pool(name: str, families, seed: int, n_sets: int, **kwargs):
    X, y, g = make_clustering_sets(n_sets=n_sets, **BIG, families=families, random_state=seed, **kwargs)
    for i in np.unique(g):
        rows = X[g == i]
        yield f"{name}-{i}", rows[:, np.any(rows != 0, axis=0)], y[g == i], None


def validation_sets(home: Path):
    """(group, name, X, y, scored) of every set of the run, in a fixed order."""
    for name in LISTED:
        yield ("clustbench_listed", *_clustbench(home, "wut", name))
    for name in REST:
        yield ("clustbench_rest", *_clustbench(home, "wut", name))
    for battery in ("g2mg", "h2mg"):
        for d in (2, 8, 16):
            for spread in (10, 30, 50):
                yield ("gaussians", *_clustbench(home, battery, f"{battery}_{d}_{spread}"))
    pools = (("synthetic", None, 7070, 40, dict(n_features=(1, 64), max_clusters=15)),
             ("many_clusters", ta.MANY_CLUSTER_FAMILIES, 7071, 30, dict(n_features=(1, 64), max_clusters=50)),
             ("planar", ta.LARGE_PLANAR_FAMILIES, 7072, 30, dict(n_features=(2, 3), max_clusters=8)))
    for group, families, seed, n_sets, kwargs in pools:
        for name, X, y, scored in _pool(group, families, seed, n_sets, **kwargs):
            yield group, name, X, y, scored
    for toy in zero_shot.STRUCTURED:
        for n in (2000, 3000):
            for seed in (200, 201, 202):
                X, y = zero_shot.dataset_points(toy, n, seed)
                yield "toys", f"{toy}-{n}-{seed}", X, y, None


def collect(part: tuple[int, int], home: Path) -> None:
    """One row per set of this part (resumable: sets already written are skipped)."""
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    DIRECTORY.mkdir(parents=True, exist_ok=True)
    path = DIRECTORY / f"part-{part[0]}of{part[1]}.jsonl"
    done = {json.loads(line)["name"] for line in path.read_text().splitlines()} if path.exists() else set()
    with path.open("a") as out:
        for index, (group, name, X, y, scored) in enumerate(validation_sets(home)):
            if index % part[1] != part[0] or name in done:
                continue
            scored = np.ones(len(y), dtype=bool) if scored is None else np.asarray(scored)
            structure = scored & (np.bincount(y - y.min())[y - y.min()] > 1)
            k = len(np.unique(y[structure]))
            row = {"group": group, "name": name, "n": len(X), "true_k": k}
            for value in VALUES:
                for given in (False, True):
                    scores, ks, seconds = [], [], []
                    for seed in SEEDS:
                        start = time.process_time()
                        model = ABCClustering(n_clusters=k if given else None, random_state=seed,
                                              max_samples=value).fit(X)
                        seconds.append(time.process_time() - start)
                        scores.append(float(adjusted_rand_score(y[scored], model.labels_[scored])))
                        ks.append(int(model.n_clusters_))
                    key = f"{value}{'_given' if given else ''}"
                    row[key] = {"ari": scores, "k": ks, "cpu_seconds": seconds}
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(group, name, {v: round(float(np.mean(row[str(v)]["ari"])), 3) for v in VALUES}, flush=True)


def merge(output: str | None) -> dict:
    rows = {}
    for path in sorted(DIRECTORY.glob("part-*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows.setdefault(row["name"], row)
    rows = list(rows.values())
    base, new = (str(v) for v in VALUES)

    def paired(key_new: str, key_base: str, members) -> tuple[float, float]:
        diff = np.array([np.mean(r[key_new]["ari"]) - np.mean(r[key_base]["ari"]) for r in members])
        return float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else 0.0

    groups = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    per_group = {}
    for g, members in groups.items():
        per_group[g] = {"n_sets": len(members),
                        **{f"ari {key}": float(np.mean([np.mean(r[key]["ari"]) for r in members]))
                           for key in (base, new, f"{base}_given", f"{new}_given")},
                        **{f"k error {key}": float(np.mean([np.mean(np.abs(np.array(r[key]["k"]) - r["true_k"]))
                                                            for r in members])) for key in (base, new)},
                        "cpu_seconds": {key: float(np.mean([np.mean(r[key]["cpu_seconds"]) for r in members]))
                                        for key in (base, new)}}
    gain, se = paired(new, base, rows)
    gain_given, se_given = paired(f"{new}_given", f"{base}_given", rows)
    changes = {g: v[f"ari {new}"] - v[f"ari {base}"] for g, v in per_group.items()}
    passes = bool(gain > se and min(changes.values()) >= -0.01 and gain_given >= -0.005)
    result = {"command": " ".join(["python", *sys.argv]), "values": list(VALUES), "seeds": list(SEEDS),
              "n_sets": len(rows), "paired_gain": gain, "paired_se": se, "paired_gain_given_k": gain_given,
              "paired_se_given_k": se_given, "group_changes": changes, "per_group": per_group, "passes": passes}
    for g, v in per_group.items():
        print(f"{g:18s} ({v['n_sets']:2d}) k unknown {v[f'ari {base}']:.3f} -> {v[f'ari {new}']:.3f}   k given "
              f"{v[f'ari {base}_given']:.3f} -> {v[f'ari {new}_given']:.3f}   |k err| {v[f'k error {base}']:.2f} -> "
              f"{v[f'k error {new}']:.2f}   cpu s {v['cpu_seconds'][base]:.2f} -> {v['cpu_seconds'][new]:.2f}")
    print(f"all {len(rows)} sets: k unknown {gain:+.4f} +- {se:.4f}; k given {gain_given:+.4f} +- {se_given:.4f}; "
          f"passes: {passes}")
    path = output_path("max_samples_selection.json", False, output)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", default="0/1", help="i/n: every n-th set from the i-th (parallel runs)")
    parser.add_argument("--merge", action="store_true")
    parser.add_argument("--data-home", default=None, help="the clustbench folder (default ../shared/data/clustbench)")
    add_output_argument(parser, "max_samples_selection.json")
    args = parser.parse_args(argv)
    if args.merge:
        merge(args.output)
        return 0
    home = Path(args.data_home) if args.data_home else ROOT.parent / "shared" / "data" / "clustbench"
    i, n = (int(x) for x in args.part.split("/"))
    collect((i, n), home)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
