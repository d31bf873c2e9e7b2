"""Your own kernel with default parameters: unseen digits, circles, arcs, and the time a fit takes.

Usage
-----
OMP_NUM_THREADS=1 python benchmarks/own_kernel.py            # everything (about 20 CPU-minutes)
OMP_NUM_THREADS=1 python benchmarks/own_kernel.py --only digits   # a part: own_kernel_partial.json
OMP_NUM_THREADS=1 python benchmarks/own_kernel.py --only digits --only small --only circles --output a.json &
OMP_NUM_THREADS=1 python benchmarks/own_kernel.py --only arcs --output b.json; wait
python benchmarks/own_kernel.py --merge a.json b.json    # the two parts -> own_kernel.json, checks recomputed

Every learned kernel here is ``ContextualKernel(random_state=0)`` with every
other parameter at its default, fitted through
``ABCClustering(kernel=...).fit(X, y)`` the way a new user would; ``k`` is
never given to ABC.  Test sets come from seeds used nowhere else (the
defaults were chosen on other splits and seeds).  Prints a table and writes
``benchmarks/results/own_kernel.json`` (a run of some parts only: ``own_kernel_partial.json``, unless ``--output``).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.cluster import SpectralClustering
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import adjusted_rand_score

from skabc import ABCClustering, ContextualKernel
from skabc.datasets import make_circles_sets

ROOT = Path(__file__).resolve().parents[1]
N_SETS = 30
DIGIT_SPLITS = {"train 0-4, test 5-9": ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9)),
                "train 5-9, test 0-4": ((5, 6, 7, 8, 9), (0, 1, 2, 3, 4))}
DIGITS_SEED, CIRCLES_TRAIN_SEED, CIRCLES_TEST_SEED, ARCS_TRAIN_SEED, ARCS_TEST_SEED, SMALL_SEED = (
    31_001, 31_002, 31_003, 31_004, 31_005, 31_006)
# The circles: 3 to 5 overlapping circles, radii 0.15-0.5, sets of 100-300 points, ~300k rows.
CIRCLES = dict(set_size=(100, 300), n_circles=(3, 5), radius_mean=0.3, radius_std=0.12, radius_range=(0.15, 0.5))
N_TRAIN_SETS = 1_500


def default_kernel() -> ContextualKernel:
    return ContextualKernel(random_state=0)


def spectral_knn(X: np.ndarray, k: int) -> np.ndarray:
    return SpectralClustering(n_clusters=k, affinity="nearest_neighbors", random_state=0).fit_predict(X)


def timed_fit(X, y, groups=None) -> tuple[ABCClustering, float]:
    cpu = time.process_time()
    model = ABCClustering(kernel=default_kernel(), random_state=0).fit(X, y, groups=groups)
    return model, time.process_time() - cpu


def training_facts(kernel: ContextualKernel) -> dict:
    """How the fit went (getattr: the script also measures versions of skabc before these attributes)."""
    schedule = getattr(kernel, "schedule_", None)
    return {"init": getattr(kernel, "init_", None), "epochs": len(kernel.net_.history),
            "schedule": None if schedule is None else vars(schedule),
            "validation_ari": getattr(kernel, "validation_score_", None),
            "start_validation_ari": getattr(kernel, "start_validation_score_", None)}


def mean_se(values) -> dict:
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "se": float(values.std(ddof=1) / np.sqrt(len(values)))}


def digit_sets(y: np.ndarray, classes, rng) -> list[np.ndarray]:
    """``N_SETS`` sets of 100 images of 2 to 5 of ``classes`` each."""
    sets = []
    for _ in range(N_SETS):
        chosen = rng.choice(classes, int(rng.integers(2, 6)), replace=False)
        sets.append(rng.choice(np.flatnonzero(np.isin(y, chosen)), 100, replace=False))
    return sets


def timed_kernel_fit(X, y, groups=None) -> tuple[ContextualKernel, float]:
    """``ContextualKernel()`` defaults fitted, and the CPU seconds of that training alone."""
    cpu = time.process_time()
    kernel = default_kernel().fit(X, y, groups=groups)
    return kernel, time.process_time() - cpu


def run_digits() -> dict:
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    generic = ABCClustering(random_state=0)
    out = {}
    for name, (train, test) in DIGIT_SPLITS.items():
        rows = np.isin(y, train)
        model, cpu = timed_fit(X[rows], y[rows])
        kernel = model.kernel_
        sets = digit_sets(y, np.array(test), np.random.default_rng([DIGITS_SEED, test[0]]))
        scores = {"ABC defaults (k unknown)": [], "generic zero-shot (k unknown)": [],
                  "SpectralClustering kNN (k given)": []}
        for rows_ in sets:
            truth = y[rows_]
            scores["ABC defaults (k unknown)"].append(adjusted_rand_score(truth, model.predict(X[rows_])))
            scores["generic zero-shot (k unknown)"].append(adjusted_rand_score(truth, generic.fit_predict(X[rows_])))
            scores["SpectralClustering kNN (k given)"].append(
                adjusted_rand_score(truth, spectral_knn(X[rows_], len(np.unique(truth)))))
        out[name] = {"fit_cpu_s": cpu, "n_labelled": int(rows.sum()), **training_facts(kernel),
                     "scores": {k: mean_se(v) for k, v in scores.items()}}
    return out


def make_arcs_sets(n_sets: int, set_size=(100, 300), n_arcs=(3, 5), noise: float = 0.02, random_state=None):
    """Sets of 3 to 5 noisy circular arcs (a quarter to three quarters of a circle) that cross and nest."""
    rng = np.random.default_rng(random_state)
    X, y, groups = [], [], []
    for s in range(n_sets):
        n, k = int(rng.integers(set_size[0], set_size[1] + 1)), int(rng.integers(n_arcs[0], n_arcs[1] + 1))
        labels = np.sort(np.concatenate([np.arange(k), rng.integers(0, k, n - k)]))
        centres = rng.uniform(-0.5, 0.5, (k, 2))
        radii, start = rng.uniform(0.2, 0.5, k), rng.uniform(0, 2 * np.pi, k)
        span = rng.uniform(0.5 * np.pi, 1.5 * np.pi, k)
        angle = start[labels] + span[labels] * rng.uniform(0, 1, n)
        points = centres[labels] + radii[labels, None] * np.column_stack([np.cos(angle), np.sin(angle)])
        X.append(points + rng.normal(0, noise, points.shape))
        y.append(labels)
        groups.append(np.full(n, s))
    return np.concatenate(X).astype(np.float32), np.concatenate(y), np.concatenate(groups)


def run_shapes(name: str, make, train_seed: int, test_seed: int) -> dict:
    X, y, groups = make(N_TRAIN_SETS, train_seed)
    kernel, cpu = timed_kernel_fit(X, y, groups)
    Xt, yt, gt = make(N_SETS * 2, test_seed)
    methods = {"ABC defaults, eigengap (k unknown)": ABCClustering(kernel=FrozenEstimator(kernel), random_state=0,
                                                                   n_clusters_selection="eigengap"),
               "ABC defaults (k unknown)": ABCClustering(kernel=FrozenEstimator(kernel), random_state=0),
               "generic zero-shot (k unknown)": ABCClustering(random_state=0)}
    # With the true k as well: how much of the loss is the count, how much the kernel.
    scores = {m: [] for m in [*methods, "ABC defaults (k given)", "SpectralClustering kNN (k given)"]}
    for g in np.unique(gt):
        rows = gt == g
        k = len(np.unique(yt[rows]))
        for method, clusterer in methods.items():
            scores[method].append(adjusted_rand_score(yt[rows], clusterer.fit_predict(Xt[rows])))
        given = ABCClustering(kernel=FrozenEstimator(kernel), random_state=0, n_clusters=k)
        scores["ABC defaults (k given)"].append(adjusted_rand_score(yt[rows], given.fit_predict(Xt[rows])))
        scores["SpectralClustering kNN (k given)"].append(adjusted_rand_score(yt[rows], spectral_knn(Xt[rows], k)))
    return {"fit_cpu_s": cpu, "n_labelled": len(X), **training_facts(kernel), "n_test_sets": len(np.unique(gt)),
            "scores": {k: mean_se(v) for k, v in scores.items()}}


def circles(n_sets, seed):
    return make_circles_sets(n_sets=n_sets, random_state=seed, **CIRCLES)


def arcs(n_sets, seed):
    return make_arcs_sets(n_sets, random_state=seed)


def run_small() -> dict:
    X, y, groups = make_circles_sets(n_sets=5, set_size=200, random_state=SMALL_SEED, n_circles=(3, 5))
    _, cpu = timed_kernel_fit(X, y, groups)
    return {"n_labelled": len(X), "fit_cpu_s": cpu}


def checks(result: dict) -> list[dict]:
    lines = []
    for name, split in result.get("digits", {}).items():
        s = split["scores"]
        abc = s["ABC defaults (k unknown)"]["mean"]
        lines.append({"line": f"digits {name}: ABC defaults >= SpectralClustering kNN (k given)",
                      "value": abc, "target": s["SpectralClustering kNN (k given)"]["mean"]})
        lines.append({"line": f"digits {name}: ABC defaults >= generic zero-shot",
                      "value": abc, "target": s["generic zero-shot (k unknown)"]["mean"]})
    for family in ("circles", "arcs"):
        if family in result:
            r = result[family]
            lines.append({"line": f"{family}: eigengap ARI >= 0.80 with defaults",
                          "value": r["scores"]["ABC defaults, eigengap (k unknown)"]["mean"], "target": 0.80})
            lines.append({"line": f"{family}: training within 10 CPU-min", "value": -r["fit_cpu_s"] / 60,
                          "target": -10.0})
    if "small" in result:
        lines.append({"line": "fit on 1,000 labelled rows under 2 CPU-min",
                      "value": -result["small"]["fit_cpu_s"] / 60, "target": -2.0})
    if "circles" in result:
        lines.append({"line": f"fit on {result['circles']['n_labelled']:,} labelled rows under 10 CPU-min",
                      "value": -result["circles"]["fit_cpu_s"] / 60, "target": -10.0})
    for line in lines:
        line["pass"] = bool(line["value"] >= line["target"])
    return lines


def table(result: dict) -> str:
    rows = []
    for section in ("digits",):
        for name, split in result.get(section, {}).items():
            for method, s in split["scores"].items():
                rows.append((f"digits {name}", method, f"{s['mean']:.3f} ± {s['se']:.3f}"))
    for family in ("circles", "arcs"):
        for method, s in result.get(family, {}).get("scores", {}).items():
            rows.append((family, method, f"{s['mean']:.3f} ± {s['se']:.3f}"))
    width = [max(len(r[i]) for r in rows) for i in range(3)] if rows else [0, 0, 0]
    text = [f"{a:<{width[0]}}  {b:<{width[1]}}  {c}" for a, b, c in rows]
    for line in result["checks"]:
        value = -line["value"] if line["target"] < 0 else line["value"]
        target = -line["target"] if line["target"] < 0 else line["target"]
        text.append(f"{'PASS' if line['pass'] else 'FAIL'}  {line['line']}: {value:.3f} (target {target:.3f})")
    return "\n".join(text)


#: Every part of a full run (the committed own_kernel.json); fewer make a partial run.
PARTS = ("digits", "small", "circles", "arcs")


def main() -> None:
    from result_files import output_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=PARTS, action="append")
    parser.add_argument("--output", default=None,
                        help="file name under benchmarks/results/ (default: own_kernel.json for every part, else "
                             "own_kernel_partial.json)")
    parser.add_argument("--merge", nargs="+", metavar="FILE",
                        help="combine result files of parts run in parallel (names under benchmarks/results/) "
                             "into --output, checks recomputed; runs nothing")
    args = parser.parse_args()
    if args.merge:
        merged = {"benchmark": "own_kernel", "parts": [], "commands": []}
        for name in args.merge:
            part = json.loads((ROOT / "benchmarks" / "results" / name).read_text())
            for key in ("digits", "small", "circles", "arcs"):
                if key in part:
                    merged[key] = part[key]
                    merged["parts"].append(key)
            merged["commands"].append(part["command"])
            merged.update({k: part[k] for k in ("n_sets", "machine") if k in part})
        merged["checks"] = checks(merged)
        print(table(merged))
        out = output_path("own_kernel.json", set(merged["parts"]) != set(PARTS), args.output)
        out.write_text(json.dumps(merged, indent=2))
        print(f"wrote {out}")
        return
    torch.set_num_threads(1)
    parts = args.only or list(PARTS)
    result = {"benchmark": "own_kernel", "command": "OMP_NUM_THREADS=1 python benchmarks/own_kernel.py"
              + "".join(f" --only {p}" for p in (args.only or []))
              + (f" --output {args.output}" if args.output else ""), "n_sets": N_SETS,
              "machine": {"platform": platform.platform(), "torch_threads": torch.get_num_threads()}}
    start = time.perf_counter()
    for part in parts:
        if part == "digits":
            result["digits"] = run_digits()
        elif part == "small":
            result["small"] = run_small()
        elif part == "circles":
            result["circles"] = run_shapes("circles", circles, CIRCLES_TRAIN_SEED, CIRCLES_TEST_SEED)
        else:
            result["arcs"] = run_shapes("arcs", arcs, ARCS_TRAIN_SEED, ARCS_TEST_SEED)
        print(f"{part} done after {(time.perf_counter() - start) / 60:.1f} min", flush=True)
    result["checks"] = checks(result)
    result["wall_s"] = time.perf_counter() - start
    print(table(result))
    out = output_path("own_kernel.json", set(parts) != set(PARTS), args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
