"""The generic pretrained kernel: training on synthetic sets, and the zero-shot benchmark.

Usage
-----
python benchmarks/zero_shot.py --train     # train the generic kernel (checkpointed; rerun to resume)
python benchmarks/zero_shot.py --select    # choose inference settings on synthetic validation sets
python benchmarks/zero_shot.py --eval      # the benchmark nobody tuned for (see docs/zero_shot_results.md)
python benchmarks/zero_shot.py --eval --jobs 1 --timing   # ... with the side-by-side timing (as committed)
python benchmarks/zero_shot.py --eval --battery wut,graves,g2mg,h2mg   # ... whole clustbench batteries
python benchmarks/zero_shot.py --render    # rewrite the report from zero_shot.json (report code changes only)

``--eval`` runs the gallery toys and real datasets, the 13 listed sets of the
clustbench validation batteries when their folder is found (``--data-home``;
benchmarks/clustbench_data.py) and, with ``--timing``, ABC against
SpectralClustering kNN at n = 1,000 / 5,000 / 20,000 under ``--threads``.
Genie needs the extra ``pip install skabc[bench]``; self-tuning spectral
clustering is benchmarks/self_tuning.py.

Training draws a fixed pool of labelled sets from
:func:`skabc.datasets.make_clustering_sets` (blobs, varied densities, rings,
moons, curves, mixtures, structureless uniform sets; 1 to 64 features; 200 to
700 points; up to 15 clusters; uniform background noise as singletons) and
trains a :class:`~skabc.ContextualKernel` with ``canonical_features=16`` on
whole sets.  The weights go to ``benchmarks/weights/generic_v1.safetensors``: the generic
kernel v1, shipped until 2026-12-01 and the base of today's shipped generic kernel, which
``benchmarks/train_generic_v2.py --geometry-stage`` builds on it (``skabc/pretrained/generic.safetensors``).
The shipped weights are phase 1 (``--train``: 70 epochs, 55.7 min wall on
one thread) followed by phase 2 (``--train-more --phase 2``: 40 more epochs
from those weights at half the learning rate, 11.0 min wall on two threads),
phase 3 (``--train-more --phase 3``: 240 more epochs, 75.0 min wall on two
threads), phase 4 (``--train-more --phase 4``: 150 more epochs, 47.4 min
wall on two threads), phase 5 (``--train-more --phase 5``: 200 more epochs,
76.7 min wall on two threads, part of it shared with other jobs), phase 6
(``--train-more --phase 6``: 150 more epochs at half the peak learning rate,
44.4 min wall on two threads), phase 8 (``--train-more --phase 8``: 120
more epochs from phase 6 at half the peak learning rate, with the
``'scattered'`` family added to the pool, 53.5 min wall on two threads),
phase 9 (``--train-more --phase 9``: 70 more epochs at half phase 8's
learning rate, same pool, 33.6 min wall on two threads) and phase 10
(``--train-more --phase 10``: 70 more epochs at the same learning rate on a
blob-heavier pool, 33.5 min wall on two threads), then ``--select`` for
``affinity_power``, ``assign_labels`` and ``n_clusters_selection``.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from result_files import add_output_argument, output_path

from skabc import ContextualKernel
from skabc._runtime import tune_allocator
from skabc.datasets import FAMILY_WEIGHTS, make_clustering_sets

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "benchmarks" / ".checkpoints" / "generic"
#: What --train and --train-more write (and --train-more continues from): the generic kernel v1.
GENERIC_V1 = ROOT / "benchmarks" / "weights" / "generic_v1.safetensors"
V1_SETTINGS = {"affinity_power": 8.0, "assign_labels": "njw", "n_clusters_selection": "consensus"}
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"

TRAIN_SEED, VALIDATION_SEED = 31337, 4242
POOL = dict(n_sets=16_000, set_size=(200, 700), n_features=(1, 64), max_clusters=15)
# set_size >= every pool set: each training set is one whole drawn set (all its clusters, noise included).
KERNEL = dict(init="scratch", canonical_features=16, embedder="fourier", d_model=64, n_blocks=4, n_heads=4,
              compat="multiplicative", layer_norm="pre", set_size=700, batch_size=16, sets_per_epoch=512, max_epochs=70,
              lr=1e-3, random_state=0)


def _training_pool(threads: int, families: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Set the torch threads and draw the fixed training pool (the default mixture unless ``families``)."""
    torch.set_num_threads(threads)
    tune_allocator()
    X, y, groups = make_clustering_sets(**POOL, families=families, random_state=TRAIN_SEED)
    print(f"pool: {len(np.unique(groups))} sets, {len(X)} rows, width {X.shape[1]}", flush=True)
    return X, y, groups


def _ship(kernel: ContextualKernel, time_file: Path, **record) -> float:
    """Save a trained kernel as the generic kernel v1 and record its training time; wall minutes."""
    wall = float(sum(kernel.net_.history[:, "dur"]))
    # The v1 settings (zero_shot_select.json, phase 10); the shipped v2 stores its own (pretrained_settings.py).
    kernel.save(GENERIC_V1, recommended_clustering=V1_SETTINGS)
    time_file.write_text(json.dumps({"training_wall_seconds": wall, "epochs": len(kernel.net_.history), **record}))
    return wall / 60


def train(threads: int) -> None:
    X, y, groups = _training_pool(threads)
    kernel = ContextualKernel(**KERNEL, checkpoint_dir=CHECKPOINTS, verbose=1)
    start = time.process_time()
    kernel.fit(X, y, groups=groups)
    minutes = _ship(kernel, CHECKPOINTS / "time.json", cpu_seconds_last_run=time.process_time() - start)
    print(f"generic: {len(kernel.net_.history)} epochs, {minutes:.1f} min training wall time, saved")


# --------------------------------------------------------------------------- zero-shot evaluation (--eval)
# The six datasets of scikit-learn's gallery example "Comparing different clustering algorithms on toy
# datasets" (examples/cluster/plot_cluster_comparison.py), drawn with sklearn's own generators at many
# seeds and sizes, and four small real datasets.  Nothing here was tuned: ABCClustering runs with its
# defaults (k unknown), the baselines are configured as in the gallery example and given the true k.
TOY = ("noisy_circles", "noisy_moons", "varied", "aniso", "blobs", "no_structure")
STRUCTURED = TOY[:5]
REAL = ("iris", "wine", "breast_cancer", "digits")
DATASET_TITLES = {"noisy_circles": "noisy circles", "noisy_moons": "noisy moons", "varied": "varied variances",
                  "aniso": "anisotropic blobs", "blobs": "blobs", "no_structure": "no structure",
                  "iris": "iris", "wine": "wine", "breast_cancer": "breast cancer", "digits": "digits"}
TRUE_K = {"noisy_circles": 2, "noisy_moons": 2, "varied": 3, "aniso": 3, "blobs": 3, "no_structure": 1}
SIZES = (500, 1000, 1500)
#: Seeds per toy dataset and size of the committed run; fewer make a partial run.
DEFAULT_SEEDS = 20
ANISO = [[0.6, -0.6], [-0.4, 0.8]]
ALL_METHODS = ("ABC", "ABC_k", "SC_rbf", "SC_nn", "KMeans", "GMM", "Genie", "HDBSCAN", "SelfTuning")
# The methods that estimate k themselves: each is scored on its own k, and its k error is reported beside its ARI.
NO_K = ("ABC", "HDBSCAN", "SelfTuning")
# The baselines given the true k (ABC_k is given it too, but it is ABC, not a baseline to beat).
GIVEN_K_ALL = ("SC_rbf", "SC_nn", "KMeans", "GMM", "Genie")
METHOD_TITLES = {"ABC": "ABC (k unknown)", "ABC_k": "ABC (k given)", "SC_rbf": "Spectral rbf", "SC_nn": "Spectral kNN",
                 "KMeans": "KMeans", "GMM": "GaussianMixture", "Genie": "Genie", "HDBSCAN": "HDBSCAN",
                 "SelfTuning": "Self-tuning SC"}


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ModuleNotFoundError, ValueError):  # a missing parent package, or a module blocked in sys.modules
        return False


# Columns whose code is missing here are left out, each with a note (SKIPPED) rather than a crash: Genie needs
# the benchmark-only extra `pip install skabc[bench]`; self-tuning SC needs skabc.spectral.rotation.
SKIPPED = {method: reason for method, module, reason in (
    ("Genie", "genieclust", "genieclust is not installed (`pip install skabc[bench]`)"),
    ("SelfTuning", "skabc.spectral.rotation", "skabc.spectral.rotation is not available in this checkout"))
    if not _importable(module)}
METHODS = tuple(m for m in ALL_METHODS if m not in SKIPPED)
GIVEN_K = tuple(m for m in GIVEN_K_ALL if m in METHODS)
TAKES_TRUE_K = ("ABC_k", *GIVEN_K)
METHOD_LONG = {
    "ABC": ("`ABCClustering(random_state=seed)`: the shipped generic kernel, k not given; its arbiter keeps one of "
            "four partitions (the kernel's affinity with the consensus or the plain eigengap k, the set's 10-NN graph "
            "with the rotation or the plain eigengap k)"),
    "ABC_k": "`ABCClustering(n_clusters=k, random_state=seed)`: the same, given the true k (a diagnostic: how "
             "much the estimate of k costs; the requirements score ABC with k unknown)",
    "SC_rbf": "`SpectralClustering(n_clusters=k, affinity='rbf', random_state=seed)` (default gamma=1)",
    "SC_nn": "`SpectralClustering(n_clusters=k, affinity='nearest_neighbors', eigen_solver='arpack', "
             "random_state=seed)` (as in the gallery)",
    "KMeans": "`KMeans(n_clusters=k, random_state=seed)` (the gallery uses MiniBatchKMeans)",
    "GMM": "`GaussianMixture(n_components=k, covariance_type='full', random_state=seed)` (as in the gallery)",
    "Genie": "`genieclust.Genie(n_clusters=k, gini_threshold=0.3)` (Gagolewski et al. 2016; genieclust, the "
             "benchmark-only extra `skabc[bench]`)",
    "HDBSCAN": "`HDBSCAN(min_samples=3, min_cluster_size=15, allow_single_cluster=True)` (as in the gallery; "
               "no k; noise label -1 scored as one more label)",
    "SelfTuning": ("self-tuning spectral clustering (Zelnik-Manor & Perona 2004; `benchmarks/self_tuning.py`): "
                   "A_ij = exp(-d_ij^2 / (s_i s_j)), s_i the distance to the 7th neighbour, zero diagonal; k by "
                   "the eigenvector-rotation rule (`skabc.spectral.rotation.rotation_n_clusters`, its default "
                   "tolerance) on the leading eigenvectors of D^-1/2 A D^-1/2, capped at 20 eigenvectors (so k in "
                   "2..20: the rule never returns 1); then `SpectralClustering(n_clusters=k, "
                   "affinity='precomputed')` on A (no k)"),
}
# On the clustbench sets the baselines run as in the suite README's reference table, so our numbers can be
# checked against it: HDBSCAN() with its defaults and KMeans(n_init=10); the other methods as above.
CLUSTBENCH_LONG = {"HDBSCAN": "`HDBSCAN()` (defaults, as in the suite README; no k)",
                   "KMeans": "`KMeans(n_clusters=k, n_init=10, random_state=0)` (as in the suite README)"}
GALLERY_N = 1000
GALLERY_PNG = DOCS / "_static" / "zero_shot_gallery.png"
GALLERY_REAL_PNG = DOCS / "_static" / "zero_shot_gallery_real.png"
TIME_LIMIT_S = 2.0
REAL_ARI_MARGIN = 0.05


def make_toy(name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One gallery dataset of ``n`` points, ``random_state=seed``; the raw (unscaled) points and labels."""
    from sklearn import datasets

    if name == "noisy_circles":
        return datasets.make_circles(n_samples=n, factor=0.5, noise=0.05, random_state=seed)
    if name == "noisy_moons":
        return datasets.make_moons(n_samples=n, noise=0.05, random_state=seed)
    if name == "varied":
        return datasets.make_blobs(n_samples=n, cluster_std=[1.0, 2.5, 0.5], random_state=seed)
    if name == "aniso":
        X, y = datasets.make_blobs(n_samples=n, random_state=seed)
        return X @ np.asarray(ANISO), y
    if name == "blobs":
        return datasets.make_blobs(n_samples=n, random_state=seed)
    if name == "no_structure":
        return np.random.RandomState(seed).rand(n, 2), np.zeros(n, dtype=int)
    raise ValueError(name)


def load_real(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    loader = {"iris": datasets.load_iris, "wine": datasets.load_wine,
              "breast_cancer": datasets.load_breast_cancer, "digits": datasets.load_digits}[name]
    X, y = loader(return_X_y=True)
    return X.astype(np.float64), y


def dataset_points(name: str, n: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The StandardScaler-ed points every method gets (as in the gallery), and the true labels."""
    from sklearn.preprocessing import StandardScaler

    X, y = load_real(name) if name in REAL else make_toy(name, n, seed)
    return StandardScaler().fit_transform(X), y


def make_abc(kernel_path: str | None, seed):
    from skabc import ABCClustering

    if kernel_path is None:
        return ABCClustering(random_state=seed)  # the shipped generic kernel, with the settings its file stores
    from sklearn.frozen import FrozenEstimator

    from skabc.pretrained import load_saved_kernel

    # A development kernel runs as it would if shipped: ABCClustering's 'auto' settings resolve to those stored
    # in its file, or (a file that stores none) to the shipped generic kernel's.
    kernel = load_saved_kernel(kernel_path, device="cpu")
    return ABCClustering(kernel=FrozenEstimator(kernel), random_state=seed, **_clustering_settings(kernel_path)[0])


def _clustering_settings(kernel_path: str | None) -> tuple[dict, str]:
    """The explicit ABCClustering settings make_abc passes for a kernel file, and where they come from."""
    from skabc.pretrained import RECOMMENDED_CLUSTERING, load_saved_kernel

    if kernel_path is None:
        return {}, f"stored in the shipped generic file: {dict(RECOMMENDED_CLUSTERING.get('generic', {}))}"
    own = load_saved_kernel(kernel_path, device="cpu").recommended_clustering()
    if own:
        return {}, f"stored in the kernel file: {own}"
    generic = dict(RECOMMENDED_CLUSTERING.get("generic", {}))
    return generic, f"none stored in the kernel file; the shipped generic kernel's: {generic}"


def make_method(method: str, k: int, seed: int, kernel_path: str | None, suite: str = "gallery"):
    """The estimator of one benchmark column; ``k`` is the true number of clusters (unused by the NO_K methods)."""
    if method == "ABC":
        return make_abc(kernel_path, seed)
    if method == "ABC_k":
        return make_abc(kernel_path, seed).set_params(n_clusters=k)
    return make_baseline(method, k, seed, suite)


def make_baseline(method: str, k: int, seed: int, suite: str = "gallery"):
    """A baseline as in the gallery example, or (``suite='clustbench'``) as in the suite README where it differs."""
    from sklearn import cluster, mixture

    if suite == "clustbench" and method == "HDBSCAN":
        return cluster.HDBSCAN()
    if suite == "clustbench" and method == "KMeans":
        return cluster.KMeans(n_clusters=k, n_init=10, random_state=seed)
    if method == "Genie":
        import genieclust

        return genieclust.Genie(n_clusters=k, gini_threshold=0.3)
    if method == "SelfTuning":
        from self_tuning import SelfTuningSpectralClustering

        return SelfTuningSpectralClustering(random_state=seed)
    if method == "SC_rbf":
        return cluster.SpectralClustering(n_clusters=k, affinity="rbf", random_state=seed)
    if method == "SC_nn":
        return cluster.SpectralClustering(n_clusters=k, affinity="nearest_neighbors", eigen_solver="arpack",
                                          random_state=seed)
    if method == "KMeans":
        return cluster.KMeans(n_clusters=k, random_state=seed)
    if method == "GMM":
        return mixture.GaussianMixture(n_components=k, covariance_type="full", random_state=seed)
    if method == "HDBSCAN":
        return cluster.HDBSCAN(min_samples=3, min_cluster_size=15, allow_single_cluster=True)
    raise ValueError(method)


def _clusters_found(labels: np.ndarray) -> int:
    """Number of clusters, HDBSCAN's noise label -1 not counted as one."""
    return int(np.unique(labels[labels >= 0]).size)


def run_task(dataset: str, seed: int, n: int | None, kernel_path: str | None, keep_labels: bool) -> dict:
    """Cluster one set with every method; scores, clusters found, fit seconds (one thread each)."""
    import warnings

    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    X, y = dataset_points(dataset, n, seed)
    k = int(np.unique(y).size)
    record = {"dataset": dataset, "seed": seed, "n": len(X), "true_k": k, "scores": {}, "labels": {}}
    trivial = dataset == "no_structure"  # the baselines given k = 1 are right by construction: not run
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in METHODS:
            if trivial and method in TAKES_TRUE_K:
                continue
            model = make_method(method, k, seed, kernel_path)
            start = time.perf_counter()
            labels = np.asarray(model.fit_predict(X))
            seconds = time.perf_counter() - start
            score = {"k": _clusters_found(labels), "seconds": seconds,
                     "ari": float(adjusted_rand_score(y, labels)),
                     "nmi": float(normalized_mutual_info_score(y, labels))}
            score["k_error"] = abs(score["k"] - k)
            if method == "HDBSCAN":
                score["noise_fraction"] = float(np.mean(labels < 0))
            record["scores"][method] = score
            if keep_labels:
                record["labels"][method] = labels.astype(int).tolist()
    return record


def _mean_se(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    se = float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else 0.0
    return float(values.mean()), se


def _stats(records: list[dict], method: str) -> dict:
    rows = [r["scores"][method] for r in records if method in r["scores"]]
    if not rows:
        return {}
    ari, ari_se = _mean_se([s["ari"] for s in rows])
    nmi, nmi_se = _mean_se([s["nmi"] for s in rows])
    k = np.array([s["k"] for s in rows])
    true_k = records[0]["true_k"]
    out = {"n_sets": len(rows), "ari": ari, "ari_se": ari_se, "nmi": nmi, "nmi_se": nmi_se,
           "k_mean": float(k.mean()), "k_exact_fraction": float(np.mean(k == true_k)),
           "seconds_mean": float(np.mean([s["seconds"] for s in rows]))}
    if method in NO_K:
        out["k_abs_error"], out["k_abs_error_se"] = _mean_se(np.abs(k - true_k))
    if true_k == 1:
        out["one_cluster_fraction"] = out.pop("k_exact_fraction")
        del out["ari"], out["ari_se"], out["nmi"], out["nmi_se"]  # degenerate against a single true label
    if method == "HDBSCAN":
        out["noise_fraction_mean"] = float(np.mean([s["noise_fraction"] for s in rows]))
    return out


def summarise(records: list[dict]) -> dict:
    summary = {}
    for dataset in (*TOY, *REAL):
        mine = [r for r in records if r["dataset"] == dataset]
        if not mine:
            continue
        entry = {"true_k": mine[0]["true_k"], "methods": {}}
        for method in METHODS:
            stats = _stats(mine, method)
            if not stats:
                continue
            if dataset in TOY:
                stats["per_size"] = {str(n): _stats([r for r in mine if r["n"] == n], method)
                                     for n in sorted({r["n"] for r in mine})}
            entry["methods"][method] = stats
        summary[dataset] = entry
    structured = [d for d in STRUCTURED if d in summary]
    summary["structured_mean"] = {
        method: {metric: float(np.mean([summary[d]["methods"][method][metric] for d in structured]))
                 for metric in ("ari", "nmi")}
        for method in METHODS}
    # Mean |k_hat - k| over the datasets (each the mean over its sets): the five structured toys, all six
    # (the structureless square included: its true k is 1) and the four real datasets.
    groups = {"structured_k_error": structured, "gallery_k_error": [d for d in TOY if d in summary],
              "real_k_error": [d for d in REAL if d in summary]}
    for key, datasets in groups.items():
        if datasets:
            summary[key] = {m: float(np.mean([summary[d]["methods"][m]["k_abs_error"] for d in datasets]))
                            for m in NO_K if m in METHODS}
    if all(d in summary for d in REAL):
        summary["real_mean"] = {m: {"ari": float(np.mean([summary[d]["methods"][m]["ari"] for d in REAL]))}
                                for m in METHODS}
    return summary


def time_abc(kernel_path: str | None, n: int = GALLERY_N, repeats: int = 3, seed: int = 0) -> dict:
    """Wall seconds of ``fit_predict`` at ``n`` points per toy dataset: median of ``repeats`` runs, after a warm-up."""
    import os

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    sets = {name: dataset_points(name, n, seed)[0] for name in TOY}
    make_abc(kernel_path, seed).fit_predict(sets["blobs"])  # warm-up (imports, allocator, first load)
    medians = {}
    for name, X in sets.items():
        runs = []
        for _ in range(repeats):
            model = make_abc(kernel_path, seed)  # includes loading the weights, as ABCClustering() does
            start = time.perf_counter()
            model.fit_predict(X)
            runs.append(time.perf_counter() - start)
        medians[name] = float(np.median(runs))
    return {"n": n, "repeats": repeats, "torch_threads": threads, "median_seconds": medians,
            "worst_median_seconds": max(medians.values()),
            "load_average_1min": float(os.getloadavg()[0]) if hasattr(os, "getloadavg") else None}

# --------------------------------------------------------------------------- clustbench validation batteries
# The batteries of Gagolewski's suite held in ../shared/data/clustbench (benchmarks/clustbench_data.py):
# one run per set (random_state=0), every method as on the gallery except HDBSCAN and KMeans (CLUSTBENCH_LONG).
QUICK_CLUSTBENCH_N = 400


def clustbench_tasks(home: Path, spec: str) -> list[tuple[str, str]]:
    """(battery, name) pairs named by ``--battery``: 'listed' (the README's 13), battery names, or 'none'."""
    import clustbench_data

    pairs: list[tuple[str, str]] = []
    for token in (t.strip() for t in spec.split(",") if t.strip()):
        if token == "none":
            continue
        if token == "listed":
            pairs += [(b, name) for b, names in clustbench_data.LISTED.items() for name in names]
        elif token in clustbench_data.BATTERIES:
            pairs += [(token, name) for name in clustbench_data.dataset_names(home, token)]
        else:
            raise SystemExit(f"--battery: unknown {token!r}; use 'listed', 'none' or of {clustbench_data.BATTERIES}")
    return list(dict.fromkeys(pairs))  # each set once, first mention first


def run_clustbench_task(home: str, battery: str, name: str, kernel_path: str | None, quick: bool) -> dict:
    """Cluster one suite set with every method, by the suite's protocol; ARI, k found, seconds (one thread)."""
    import warnings

    import clustbench_data
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    X, reference = clustbench_data.load(Path(home), battery, name)
    if quick:
        keep = clustbench_data.subsample(reference, QUICK_CLUSTBENCH_N)
        X, reference = X[keep], reference[keep]
    k = int(reference.max())
    record = {"battery": battery, "dataset": name, "n": len(X), "d": X.shape[1], "true_k": k,
              "noise_points": int(np.sum(reference == 0)), "scores": {}}
    start_all = time.perf_counter()
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in METHODS:
            model = make_method(method, k, 0, kernel_path, suite="clustbench")
            start = time.perf_counter()
            try:
                labels = np.asarray(model.fit_predict(X))
            except (ValueError, MemoryError) as exc:  # e.g. a kernel refusing a set beyond its memory limit
                record["scores"][method] = {"error": f"{type(exc).__name__}: {exc}",
                                            "seconds": time.perf_counter() - start}
                continue
            score = {"k": _clusters_found(labels), "seconds": time.perf_counter() - start,
                     "ari": clustbench_data.score(reference, labels)}
            if method in NO_K:
                score["k_error"] = abs(score["k"] - k)
            record["scores"][method] = score
    record["seconds"] = time.perf_counter() - start_all
    return record


def _clustbench_means(records: list[dict]) -> dict:
    """Per method: mean ARI (a failed run scores 0), mean |k_hat - k| (NO_K), total seconds, over ``records``."""
    out = {"n_sets": len(records), "mean_ari": {}, "k_abs_error": {}, "seconds": {}, "failed": {}}
    for m in METHODS:
        rows = [r["scores"].get(m, {"error": "not run"}) for r in records]
        out["mean_ari"][m] = float(np.mean([s.get("ari", 0.0) for s in rows]))
        out["seconds"][m] = float(sum(s.get("seconds", 0.0) for s in rows))
        out["failed"][m] = sum("error" in s for s in rows)
        if m in NO_K:
            errors = [s["k_error"] for s in rows if "k_error" in s]
            out["k_abs_error"][m] = float(np.mean(errors)) if errors else None
    return out


def summarise_clustbench(records: list[dict], home: Path, spec: str, quick: bool, seconds: float) -> dict:
    import clustbench_data

    listed = {(b, n) for b, names in clustbench_data.LISTED.items() for n in names}
    mine = [r for r in records if (r["battery"], r["dataset"]) in listed]
    out = {"data_home": str(home), "battery_spec": spec, "quick": quick, "wall_seconds": seconds,
           "protocol": "StandardScaler, constant columns dropped, k = max(labels0), ARI on points with labels0 != 0, "
                       "one run per set with random_state=0 (suite README)",
           "methods": {m: CLUSTBENCH_LONG.get(m, METHOD_LONG[m]) for m in METHODS},
           "reference_mean_ari": clustbench_data.REFERENCE_MEAN_ARI,
           "listed": {**_clustbench_means(mine), "complete": len(mine) == len(listed)} if mine else None,
           "batteries": {b: _clustbench_means([r for r in records if r["battery"] == b])
                         for b in clustbench_data.BATTERIES if any(r["battery"] == b for r in records)},
           "all": _clustbench_means(records), "sets": records}
    return out


def clustbench_table(records: list[dict], means: dict, reference: dict | None) -> str:
    """Per set ARI (k found for the NO_K methods), the mean row, and the README's reference means."""
    header = "| set | n | k | " + " | ".join(METHOD_TITLES[m] for m in METHODS) + " | seconds |\n"
    lines = [header, "|---|---|---|" + "---|" * len(METHODS) + "---|\n"]
    for r in records:
        cells = []
        for m in METHODS:
            s = r["scores"].get(m, {})
            if "ari" not in s:
                cells.append("failed" if "error" in s else "n/a")
            else:
                cells.append(f"{s['ari']:.3f} (k {s['k']})" if m in NO_K else f"{s['ari']:.3f}")
        lines.append(f"| {r['battery']}/{r['dataset']} | {r['n']} | {r['true_k']} | "
                     + " | ".join(_bold_best(cells, [r["scores"].get(m, {}).get("ari") for m in METHODS]))
                     + f" | {r['seconds']:.0f} |\n")
    values = [means["mean_ari"][m] for m in METHODS]
    lines.append(f"| *mean ARI ({means['n_sets']} sets)* | | | "
                 + " | ".join(_bold_best([f"{v:.3f}" for v in values], values)) + " | |\n")
    lines.append("| *mean abs(k_hat - k)* | | | " + " | ".join(
        f"{means['k_abs_error'][m]:.2f}" if means["k_abs_error"].get(m) is not None else "" for m in METHODS)
        + " | |\n")
    if reference:
        lines.append("| *suite README reference mean ARI* | | | " + " | ".join(
            f"{reference[m]:.3f}" if m in reference else "" for m in METHODS) + " | |\n")
    return "".join(lines)


def clustbench_markdown(cb: dict) -> str:
    import clustbench_data

    md = ["## Validation batteries: Gagolewski's clustering benchmark suite\n\n",
          f"Data: `{cb['data_home']}` (`--battery {cb['battery_spec']}`); protocol: {cb['protocol']}. "
          "Cells: ARI; for the methods that estimate k, (k found) beside it, noise points of HDBSCAN counted as "
          "one more label in the ARI but not as a cluster in k. Seconds: all methods on the set, one thread.\n\n",
          "".join(f"- {METHOD_TITLES[m]}: {cb['methods'][m]}\n" for m in METHODS if m in CLUSTBENCH_LONG), "\n"]
    if cb.get("quick"):
        md.append(f"**Quick run: every set subsampled to at most {QUICK_CLUSTBENCH_N} points; not the benchmark.**\n\n")
    sets = cb["sets"]
    listed = {(b, n) for b, names in clustbench_data.LISTED.items() for n in names}
    if cb.get("listed"):
        md += ["### The 13 listed wut + graves sets (the suite README's reference table)\n\n",
               clustbench_table([r for r in sets if (r["battery"], r["dataset"]) in listed], cb["listed"],
                                cb["reference_mean_ari"]), "\n"]
    for battery, means in cb["batteries"].items():
        mine = [r for r in sets if r["battery"] == battery]
        if all((r["battery"], r["dataset"]) in listed for r in mine):
            continue  # already shown whole in the listed table
        md += [f"### Battery {battery} (all {len(mine)} sets run)\n\n", clustbench_table(mine, means, None), "\n"]
    return "".join(md)


def run_clustbench(home: Path, spec: str, jobs: int, kernel_path: str | None, quick: bool) -> dict | None:
    import clustbench_data
    from joblib import Parallel, delayed

    tasks = clustbench_tasks(home, spec)
    if not tasks:
        return None
    sizes = {t: clustbench_data.n_points(home, *t) for t in tasks}
    tasks.sort(key=lambda t: -sizes[t])  # biggest first
    print(f"clustbench: {len(tasks)} sets on {jobs} workers", flush=True)
    start = time.perf_counter()
    records = []
    for record in Parallel(n_jobs=jobs, return_as="generator_unordered")(
            delayed(run_clustbench_task)(str(home), b, n, kernel_path, quick) for b, n in tasks):
        records.append(record)
        abc = record["scores"].get("ABC", {})
        print(f"  {record['battery']}/{record['dataset']} (n = {record['n']}): {record['seconds']:.0f} s, "
              f"ABC ARI {abc.get('ari', float('nan')):.3f} k {abc.get('k')}", flush=True)
    order = {t: i for i, t in enumerate(clustbench_tasks(home, spec))}
    records.sort(key=lambda r: order[(r["battery"], r["dataset"])])
    return summarise_clustbench(records, home, spec, quick, time.perf_counter() - start)


# --------------------------------------------------------------------------- side-by-side timing (--timing)
TIMING_SIZES = (1000, 5000, 20000)
TIMING_RATIO = 3.0
TIMING_SMALL_LIMIT_S = 0.5


def time_side_by_side(kernel_path: str | None, threads: int, sizes=TIMING_SIZES, repeats: int = 3,
                      seed: int = 0) -> dict:
    """``fit_predict`` seconds of ABC (k unknown) and SpectralClustering kNN (true k) on the same blobs.

    Gallery blobs (``make_blobs``, 3 centres, StandardScaler) at each size;
    both methods under the same thread limit (torch and the BLAS/OpenMP
    pools), run alternately so that the machine's load falls on both; the
    median of ``repeats`` runs after one warm-up of each.
    """
    import os
    import warnings

    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    rows = []
    with threadpool_limits(threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warm = dataset_points("blobs", 1000, seed)[0]
        make_abc(kernel_path, seed).fit_predict(warm)
        make_baseline("SC_nn", 3, seed).fit_predict(warm)
        for n in sizes:
            X, y = dataset_points("blobs", n, seed)
            k = int(np.unique(y).size)
            runs: dict[str, list[float]] = {"ABC": [], "SC_nn": []}
            row = {"n": n, "true_k": k}
            for _ in range(repeats):
                for method in runs:
                    model = make_abc(kernel_path, seed) if method == "ABC" else make_baseline("SC_nn", k, seed)
                    start = time.perf_counter()
                    try:
                        labels = model.fit_predict(X)
                    except (ValueError, MemoryError) as exc:
                        row[f"{method}_error"] = f"{type(exc).__name__}: {exc}"
                        break
                    runs[method].append(time.perf_counter() - start)
                    if method == "ABC":
                        row["ABC_k_found"] = _clusters_found(np.asarray(labels))
                if any(f"{m}_error" in row for m in runs):
                    break
            for method, seconds in runs.items():
                row[f"{method}_seconds"] = seconds
                failed = not seconds or f"{method}_error" in row
                row[f"{method}_median_seconds"] = None if failed else float(np.median(seconds))
            if row["ABC_median_seconds"] is not None and row["SC_nn_median_seconds"] is not None:
                row["ratio"] = row["ABC_median_seconds"] / row["SC_nn_median_seconds"]
            rows.append(row)
            print(f"  timing n = {n}: " + ", ".join(f"{m} {row[f'{m}_median_seconds']}" for m in runs), flush=True)
    return {"threads": threads, "repeats": repeats, "data": f"gallery blobs (make_blobs, 3 centres), seed {seed}, "
            "StandardScaler", "abc": "ABCClustering(random_state=0), k unknown",
            "sc_nn": METHOD_LONG["SC_nn"].replace("seed", str(seed)), "rows": rows,
            "load_average_1min": float(os.getloadavg()[0]) if hasattr(os, "getloadavg") else None}


def timing_markdown(t: dict) -> str:
    lines = ["## Timing side by side (`--timing`)\n\n",
             f"`fit_predict` wall seconds on {t['data']}: {t['abc']} against {t['sc_nn']} with the true k; "
             f"{t['threads']} thread(s) for both (torch and BLAS/OpenMP), run alternately, median of {t['repeats']} "
             f"after a warm-up; 1-min load average {t['load_average_1min']:.1f} at the end.\n\n",
             "| n | ABC (k unknown) | Spectral kNN (k given) | ratio | ABC k found |\n|---|---|---|---|---|\n"]
    for r in t["rows"]:
        def cell(m, r=r):
            return f"{r[f'{m}_median_seconds']:.2f}" if r.get(f"{m}_median_seconds") is not None else \
                f"failed ({r.get(f'{m}_error', 'not run')})"
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "n/a"
        lines.append(f"| {r['n']} | {cell('ABC')} | {cell('SC_nn')} | {ratio} | {r.get('ABC_k_found', '')} |\n")
    return "".join(lines) + "\n"


def requirements(summary: dict | None, timing: dict | None, clustbench: dict | None = None,
                 side_by_side: dict | None = None) -> list[dict]:
    """Pass/fail lines; ``issue_20`` marks the "What must hold" lines of issue 20 that this benchmark measures."""
    out = []

    def add(requirement: str, passed: bool, detail: str, issue_20: bool = False) -> None:
        out.append({"requirement": requirement, "passed": bool(passed), "detail": detail, "issue_20": issue_20})

    if summary:
        mean = summary["structured_mean"]
        abc = mean["ABC"]["ari"]
        for rival in ("SC_rbf", "SC_nn", "HDBSCAN", "SelfTuning"):
            if rival in mean:
                add(f"structured toy mean ARI: ABC > {METHOD_TITLES[rival]}", abc > mean[rival]["ari"],
                    f"{abc:.3f} vs {mean[rival]['ari']:.3f}", issue_20=rival != "SC_rbf")
        one = summary["no_structure"]["methods"]["ABC"]
        add("no structure: ABC finds one cluster in most sets", one["one_cluster_fraction"] > 0.5,
            f"{one['one_cluster_fraction']:.0%} of {one['n_sets']} sets (mean k {one['k_mean']:.2f})")
        for dataset in REAL:
            if dataset not in summary:
                continue
            methods = summary[dataset]["methods"]
            best = max((m for m in GIVEN_K if m in methods), key=lambda m: methods[m]["ari"])
            a, b = methods["ABC"]["ari"], methods[best]["ari"]
            add(f"{dataset}: ABC ARI within {REAL_ARI_MARGIN} of the best baseline given k or above",
                a >= b - REAL_ARI_MARGIN, f"{a:.3f} vs {METHOD_TITLES[best]} {b:.3f}")
        real = summary.get("real_mean")
        if real and "SC_nn" in real:
            a, b = real["ABC"]["ari"], real["SC_nn"]["ari"]
            add("iris, wine, breast cancer, digits: mean ABC (k unknown) ARI >= Spectral kNN given k", a >= b,
                f"{a:.3f} vs {b:.3f}", issue_20=True)
        errors = summary.get("gallery_k_error", {})
        if "ABC" in errors and "HDBSCAN" in errors:
            add("gallery toys (all six): mean abs(k_hat - k) of ABC <= HDBSCAN's",
                errors["ABC"] <= errors["HDBSCAN"] + 1e-12,
                f"{errors['ABC']:.2f} vs {errors['HDBSCAN']:.2f}"
                + (f" (self-tuning SC {errors['SelfTuning']:.2f})" if "SelfTuning" in errors else ""), issue_20=True)
    if timing:
        worst = timing["worst_median_seconds"]
        add(f"fit_predict at n = {timing['n']} under {TIME_LIMIT_S:g} s", worst < TIME_LIMIT_S,
            f"slowest dataset median {worst:.2f} s ({timing['torch_threads']} torch threads)")
    listed = (clustbench or {}).get("listed")
    if listed:
        scope = "13 listed wut + graves sets" if listed["complete"] else f"{listed['n_sets']} of the 13 listed sets"
        ari, ref = listed["mean_ari"], clustbench["reference_mean_ari"]
        genie = f"; Genie given k {ari['Genie']:.3f} (README {ref['Genie']:.3f})" if "Genie" in ari else ""
        add(f"{scope}: ABC (k unknown) mean ARI >= Spectral kNN given k", ari["ABC"] >= ari["SC_nn"],
            f"{ari['ABC']:.3f} vs {ari['SC_nn']:.3f} (README {ref['SC_nn']:.3f}){genie}", issue_20=True)
        groups = [(scope, listed)]
        if clustbench["all"]["n_sets"] > listed["n_sets"]:
            groups.append((f"all {clustbench['all']['n_sets']} clustbench sets run", clustbench["all"]))
        for name, means in groups:
            e = means["k_abs_error"]
            if e.get("ABC") is not None and e.get("HDBSCAN") is not None:
                add(f"{name}: mean abs(k_hat - k) of ABC <= HDBSCAN's", e["ABC"] <= e["HDBSCAN"] + 1e-12,
                    f"{e['ABC']:.2f} vs {e['HDBSCAN']:.2f}"
                    + (f" (self-tuning SC {e['SelfTuning']:.2f})" if e.get("SelfTuning") is not None else ""),
                    issue_20=True)
    if side_by_side:
        for row in side_by_side["rows"]:
            if "ratio" not in row:
                add(f"fit_predict at n = {row['n']}: ABC <= {TIMING_RATIO:g}x Spectral kNN (true k)", False,
                    f"not measured: {row.get('ABC_error') or row.get('SC_nn_error')}", issue_20=True)
                continue
            add(f"fit_predict at n = {row['n']}: ABC <= {TIMING_RATIO:g}x Spectral kNN (true k)",
                row["ratio"] <= TIMING_RATIO,
                f"{row['ABC_median_seconds']:.2f} s vs {row['SC_nn_median_seconds']:.2f} s "
                f"({row['ratio']:.2f}x, {side_by_side['threads']} thread(s))", issue_20=True)
            if row["n"] == 1000:
                add(f"fit_predict at n = 1000 under {TIMING_SMALL_LIMIT_S:g} s",
                    row["ABC_median_seconds"] < TIMING_SMALL_LIMIT_S,
                    f"median {row['ABC_median_seconds']:.2f} s ({side_by_side['threads']} thread(s))", issue_20=True)
    return out


K_ERROR_LEGEND = ("For the methods that estimate k (ABC k unknown, HDBSCAN, self-tuning SC), `k err` is the mean "
                  "abs(k_hat - k) over the same sets (HDBSCAN's noise not counted as a cluster).\n\n")


def _cell(stats: dict, metric: str, method: str = "") -> str:
    if not stats:
        return "n/a"
    if "one_cluster_fraction" in stats:
        return f"1 cluster in {stats['one_cluster_fraction']:.0%} (k̄ {stats['k_mean']:.2f})"
    text = f"{stats[metric]:.3f} ± {stats[metric + '_se']:.3f}"
    return f"{text}, k err {stats['k_abs_error']:.2f}" if metric == "ari" and "k_abs_error" in stats else text


def _bold_best(cells: list[str], values: list[float | None]) -> list[str]:
    finite = [v for v in values if v is not None]
    if not finite:
        return cells
    best = max(finite)
    return [f"**{c}**" if v is not None and v >= best - 1e-12 else c for c, v in zip(cells, values, strict=True)]


def _mean_row(label: str, means: dict, errors: dict, metric: str) -> str:
    values = [means.get(m, {}).get(metric) for m in METHODS]
    cells = [f"{v:.3f}" if v is not None else "n/a" for v in values]
    if metric == "ari":
        cells = [f"{c}, k err {errors[m]:.2f}" if m in errors else c for c, m in zip(cells, METHODS, strict=True)]
    return f"| *{label}* | | {' | '.join(_bold_best(cells, values))} |\n"


def score_table(summary: dict, metric: str) -> str:
    header = "| dataset | true k | " + " | ".join(METHOD_TITLES[m] for m in METHODS) + " |\n"
    lines = [header, "|---|---|" + "---|" * len(METHODS) + "\n"]
    for dataset in (*TOY, "structured_mean", *REAL, "real_mean"):
        if dataset not in summary:
            continue
        if dataset == "structured_mean":
            lines.append(_mean_row("mean of the 5 structured toy sets", summary[dataset],
                                   summary.get("structured_k_error", {}), metric))
            continue
        if dataset == "real_mean":
            if metric == "ari":
                lines.append(_mean_row("mean of the 4 real datasets", summary[dataset],
                                       summary.get("real_k_error", {}), metric))
            continue
        methods = summary[dataset]["methods"]
        values = [methods.get(m, {}).get(metric) for m in METHODS]
        cells = _bold_best([_cell(methods.get(m, {}), metric, m) for m in METHODS], values)
        lines.append(f"| {DATASET_TITLES[dataset]} | {summary[dataset]['true_k']} | {' | '.join(cells)} |\n")
    return "".join(lines)


def per_size_table(summary: dict) -> str:
    lines = ["| dataset | n | " + " | ".join(METHOD_TITLES[m] for m in METHODS) + " |\n",
             "|---|---|" + "---|" * len(METHODS) + "\n"]
    for dataset in TOY:
        if dataset not in summary:
            continue
        methods = summary[dataset]["methods"]
        for n in methods["ABC"]["per_size"]:
            cells = []
            for m in METHODS:
                stats = methods.get(m, {}).get("per_size", {}).get(n, {})
                if not stats:
                    cells.append("n/a")
                elif "one_cluster_fraction" in stats:
                    cells.append(f"1 cluster {stats['one_cluster_fraction']:.0%}, k̄ {stats['k_mean']:.2f}")
                else:
                    cells.append(f"{stats['ari']:.3f} / {stats['nmi']:.3f}")
            lines.append(f"| {DATASET_TITLES[dataset]} | {n} | {' | '.join(cells)} |\n")
    return "".join(lines)


def k_table(summary: dict) -> str:
    sizes = [n for n in summary["blobs"]["methods"]["ABC"].get("per_size", {})] if "blobs" in summary else []
    others = [m for m in NO_K if m in METHODS and m != "ABC"]
    no_k = [m for m in NO_K if m in METHODS]
    header = ["dataset", "true k", "ABC mean k (all)", *(f"n = {n}" for n in sizes), "ABC exactly right",
              *(f"{METHOD_TITLES[m]} mean k" for m in others), *(f"k err {METHOD_TITLES[m]}" for m in no_k)]
    rows = [header, ["---"] * len(header)]
    for dataset in (*TOY, *REAL):
        if dataset not in summary:
            continue
        methods = summary[dataset]["methods"]
        abc = methods["ABC"]
        exact = abc.get("k_exact_fraction", abc.get("one_cluster_fraction"))
        rows.append([DATASET_TITLES[dataset], str(summary[dataset]["true_k"]), f"{abc['k_mean']:.2f}",
                     *(f"{abc['per_size'][n]['k_mean']:.2f}" if n in abc.get("per_size", {}) else "-" for n in sizes),
                     f"{exact:.0%}", *(f"{methods[m]['k_mean']:.2f}" if m in methods else "n/a" for m in others),
                     *(f"{methods[m]['k_abs_error']:.2f}" if "k_abs_error" in methods.get(m, {}) else "n/a"
                       for m in no_k)])
    for key, label in (("gallery_k_error", "mean over the 6 toy datasets"),
                       ("structured_k_error", "mean over the 5 structured toys"),
                       ("real_k_error", "mean over the 4 real datasets")):
        if key in summary:
            rows.append([f"*{label}*", *([""] * (len(header) - 1 - len(no_k))),
                         *(f"{summary[key][m]:.2f}" if m in summary[key] else "n/a" for m in no_k)])
    return "".join("| " + " | ".join(row) + " |\n" for row in rows)


def time_table(summary: dict) -> str:
    lines = ["| n | " + " | ".join(METHOD_TITLES[m] for m in METHODS) + " |\n", "|---|" + "---|" * len(METHODS) + "\n"]
    sizes = sorted({int(n) for d in TOY if d in summary for n in summary[d]["methods"]["ABC"]["per_size"]})
    for n in sizes:
        cells = []
        for m in METHODS:
            secs = [summary[d]["methods"][m]["per_size"][str(n)]["seconds_mean"] for d in TOY
                    if d in summary and m in summary[d]["methods"]]
            cells.append(f"{np.mean(secs):.2f}")
        lines.append(f"| {n} | {' | '.join(cells)} |\n")
    return "".join(lines)


_COLORS = ["#377eb8", "#ff7f00", "#4daf4a", "#f781bf", "#a65628", "#984ea3", "#999999", "#e41a1c", "#dede00"]


def plot_gallery(rows: list[tuple[str, np.ndarray, dict]], path: Path, fixed_limits: bool) -> None:
    """The gallery example's layout: one row per dataset, one column per method, ARI in the corner.

    ``rows``: (title, 2-D points, {method: (labels or None, corner text)}).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), len(METHODS), figsize=(2.1 * len(METHODS) + 0.9, 2.1 * len(rows) + 0.4),
                             squeeze=False)
    for i, (title, X2, results) in enumerate(rows):
        for j, method in enumerate(METHODS):
            ax = axes[i, j]
            labels, text = results.get(method, (None, "n/a"))
            if labels is None:
                colors = np.full(len(X2), "#bbbbbb")
            else:
                labels = np.asarray(labels)
                n_colors = max(int(labels.max()) + 1, 1)
                palette = np.array([_COLORS[c % len(_COLORS)] for c in range(n_colors)] + ["#000000"])
                colors = palette[labels]  # -1 (HDBSCAN noise) -> the last colour, black
            ax.scatter(X2[:, 0], X2[:, 1], s=4, color=colors, linewidths=0)
            if fixed_limits:
                ax.set_xlim(-2.5, 2.5)
                ax.set_ylim(-2.5, 2.5)
            ax.set_xticks(())
            ax.set_yticks(())
            ax.text(0.99, 0.01, text, transform=ax.transAxes, ha="right", va="bottom", fontsize=9,
                    bbox=dict(facecolor="white", alpha=0.7, edgecolor="none", pad=1))
            if i == 0:
                ax.set_title(METHOD_TITLES[method], fontsize=10)
            if j == 0:
                ax.set_ylabel(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    from PIL import Image  # a matplotlib dependency: a 64-colour palette keeps the committed file small

    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=64).save(path, optimize=True)


def _corner_text(dataset: str, method: str, score: dict | None) -> str:
    if score is None:
        return "k = 1 given (n/a)"
    if dataset == "no_structure":
        return f"k = {score['k']}"
    text = f"ARI {score['ari']:.2f}"
    return f"k = {score['k']}, {text}" if method in NO_K else text


def make_figures(records: list[dict], seed: int) -> list[Path]:
    from sklearn.decomposition import PCA

    toy_rows, real_rows = [], []
    for r in records:
        if not r["labels"] or r["seed"] != seed:
            continue
        X, _ = dataset_points(r["dataset"], r["n"] if r["dataset"] in TOY else None, seed)
        results = {m: (r["labels"].get(m), _corner_text(r["dataset"], m, r["scores"].get(m))) for m in METHODS}
        if r["dataset"] in TOY:
            toy_rows.append((TOY.index(r["dataset"]), (DATASET_TITLES[r["dataset"]], X, results)))
        else:
            X2 = PCA(n_components=2).fit_transform(X)
            real_rows.append((REAL.index(r["dataset"]), (f"{DATASET_TITLES[r['dataset']]} (PCA)", X2, results)))
    written = []
    if toy_rows:
        plot_gallery([row for _, row in sorted(toy_rows, key=lambda t: t[0])], GALLERY_PNG, fixed_limits=True)
        written.append(GALLERY_PNG)
    if real_rows:
        plot_gallery([row for _, row in sorted(real_rows, key=lambda t: t[0])], GALLERY_REAL_PNG, fixed_limits=False)
        written.append(GALLERY_REAL_PNG)
    return written


def _versions() -> dict:
    import hashlib
    import importlib.metadata
    import platform

    import joblib
    import sklearn

    import skabc

    versions = {"python": platform.python_version(), "skabc": skabc.__version__, "scikit-learn": sklearn.__version__,
                "torch": torch.__version__, "numpy": np.__version__, "joblib": joblib.__version__,
                "platform": platform.platform()}
    if "Genie" in METHODS:
        versions["genieclust"] = importlib.metadata.version("genieclust")
    if "SelfTuning" in METHODS:  # the k rule of the self-tuning column, still under development: pin its file
        from skabc.spectral import rotation

        versions["skabc.spectral.rotation sha256"] = hashlib.sha256(Path(rotation.__file__).read_bytes()).hexdigest()
    return versions


def _kernel_info(kernel_path: str | None) -> dict:
    import hashlib

    from skabc.pretrained import PRETRAINED_DIR

    path = PRETRAINED_DIR / "generic.safetensors" if kernel_path is None else Path(kernel_path)
    name = "generic (shipped default, ABCClustering())" if kernel_path is None else f"development kernel {path}"
    return {"name": name,
            "file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            # The arbiters choose the partitions too: a part is carried over only where these match as well.
            "arbiter_sha256": {f.name: hashlib.sha256(f.read_bytes()).hexdigest()
                               for f in sorted(PRETRAINED_DIR.glob("arbiter_*.json"))},
            "clustering_settings": _clustering_settings(kernel_path)[1]}


def _notes(summary: dict, reqs: list[dict], timing: dict, quick: bool, kernel_path: str | None,
           clustbench: dict | None = None, parts: dict | None = None) -> list[str]:
    notes = []
    if kernel_path is not None:
        notes.append(f"**These numbers come from a development kernel (`{kernel_path}`), not the shipped weights: "
                     "do not quote them.** It runs as it would if shipped; clustering settings: "
                     f"{_clustering_settings(kernel_path)[1]}.")
    if quick:
        notes.append("**Quick run (2 seeds, n = 500; clustbench sets subsampled): a smoke test, not the benchmark.**")
    for method, reason in SKIPPED.items():
        notes.append(f"Column {METHOD_TITLES[method]} skipped: {reason}.")
    for part, info in (parts or {}).items():
        if info.get("carried_over"):
            notes.append(f"The {part} part was not rerun: carried over from `{info['command']}` (same kernel and "
                         "arbiter files).")
    mean = summary["structured_mean"]
    order = sorted(METHODS, key=lambda m: -mean[m]["ari"])
    notes.append("Mean ARI over the five structured toy datasets, best first: "
                 + ", ".join(f"{METHOD_TITLES[m]} {mean[m]['ari']:.3f}" for m in order) + ".")
    for dataset in (*STRUCTURED, *REAL):
        if dataset not in summary:
            continue
        methods = summary[dataset]["methods"]
        best = max(METHODS, key=lambda m: methods[m]["ari"])
        abc = methods["ABC"]
        if best != "ABC":
            notes.append(f"{DATASET_TITLES[dataset]}: {METHOD_TITLES[best]} is best (ARI {methods[best]['ari']:.3f}); "
                         f"ABC {abc['ari']:.3f}, k found {abc['k_mean']:.2f} on average vs true "
                         f"{summary[dataset]['true_k']} (exactly right in {abc['k_exact_fraction']:.0%} of the sets).")
    notes.append("The comparison is not symmetric: the baselines other than HDBSCAN and self-tuning SC are *given* "
                 "the true number of clusters, ABC estimates it (from the eigengaps) and is scored on its own "
                 "estimate. A wrong k costs ABC ARI that the given-k baselines cannot lose. The column ABC (k given) "
                 "shows the same kernel given the true k: the difference between the two ABC columns is the price of "
                 "estimating k, the difference between ABC (k given) and the baselines is that of the learned "
                 "affinity itself.")
    notes.append("Real datasets are clustered whole (one set each, StandardScaler-ed, true k from the targets); "
                 "their seeds vary only the methods' `random_state`. Class labels of real data are not the only "
                 "valid clustering, so ARI there measures agreement with one labelling.")
    notes.append("HDBSCAN's noise points (label -1) are scored as one more label; its 'k' counts clusters without "
                 "the noise. On \"no structure\" the true k is 1: the baselines given k = 1 are right by construction "
                 "(n/a), ABC, HDBSCAN and self-tuning SC are scored on whether they return one cluster (self-tuning SC "
                 "cannot: the rotation rule scores 2 clusters and up).")
    if "SelfTuning" in METHODS:
        import inspect

        from skabc.spectral.rotation import rotation_n_clusters

        tolerance = inspect.signature(rotation_n_clusters).parameters["tolerance"].default
        notes.append("Self-tuning SC: the rotation rule picks the largest number of clusters whose alignment "
                     f"quality is within {tolerance:g} of the best among 2..20 "
                     "(`skabc.spectral.rotation.rotation_n_clusters`, its default tolerance, "
                     "capped at 20 eigenvectors here, as `ABCClustering(n_clusters_selection='rotation')` caps "
                     "it); with the 7th-neighbour scales the leading eigenvalues of unstructured or "
                     "blob-like sets stay close to 1 and the alignment quality of 15-20 eigenvectors can match or "
                     "beat that of the true k, so the estimate depends on the cap (the paper leaves the largest "
                     "number of clusters to the user).")
    if timing:
        notes.append(f"Timing: `ABCClustering().fit_predict(X)` at n = {timing['n']}, median of {timing['repeats']} "
                     f"runs per toy dataset after a warm-up, {timing['torch_threads']} torch threads, weights loaded "
                     f"in each call as `ABCClustering()` does; 1-min load average {timing['load_average_1min']:.1f} "
                     "during the run (other jobs on the machine make it slower). The per-method times in the table are "
                     "single-threaded averages inside the benchmark's parallel workers.")
    if clustbench:
        notes.append("Clustbench sets: one run each (`random_state=0`); the suite README's reference means follow "
                     "the same protocol, so the baseline columns should match them (a check of the protocol); its ABC "
                     "means come from a generic kernel other than the shipped one.")
    failed = [r["requirement"] for r in reqs if not r["passed"]]
    notes.append("Requirements failed: " + "; ".join(failed) + "." if failed else "All requirements passed.")
    notes.append("Nothing was tuned or selected on this benchmark: ABC runs as `ABCClustering()` with its defaults "
                 "and the shipped generic kernel, the baselines with the gallery example's settings. The kernel was "
                 "trained only on synthetic sets from `skabc.datasets.make_clustering_sets`; its families (blobs, "
                 "rings, moons, curves, uniform) resemble the gallery's shapes, but none of these generators, seeds "
                 "or real datasets was used in training.")
    return notes


def _requirement_lines(reqs: list[dict]) -> str:
    return "\n".join(f"{'PASS' if r['passed'] else 'FAIL'}  {r['requirement']}: {r['detail']}" for r in reqs)


#: What each entry of zero_shot.json's ``parts`` holds, as the report's first line names it.
PART_TITLES = {"gallery": "gallery toys and real datasets", "clustbench": "clustbench batteries",
               "timing_side_by_side": "side-by-side timing"}


def _produced_by(result: dict, command: str) -> str:
    """``Produced by ...`` naming the command that measured each part of the result (one for all: that one alone;
    no parts recorded: ``command``)."""
    by_command: dict[str, list[str]] = {}
    for part, info in (result.get("parts") or {}).items():
        if info:
            by_command.setdefault(info["command"], []).append(PART_TITLES.get(part, part))
    if not by_command:
        return f"Produced by `{command}`"
    if len(by_command) == 1:  # every part by one command: this run's, or (this run measuring none) an earlier one's
        return f"Produced by `{next(iter(by_command))}`"
    return "Produced by " + "; ".join(f"`{cmd}` ({', '.join(titles)})" for cmd, titles in by_command.items())


def write_outputs(result: dict, figures: list[Path], command: str, output: str | None = None) -> str:
    summary, timing, reqs = result["summary"], result["timing"], result["requirements"]
    tables = ("### Adjusted Rand index (mean ± standard error over sets)\n\n" + K_ERROR_LEGEND
              + score_table(summary, "ari") + "\n### Normalised mutual information\n\n" + score_table(summary, "nmi"))
    issue_lines = _requirement_lines([r for r in reqs if r.get("issue_20")])
    other_lines = _requirement_lines([r for r in reqs if not r.get("issue_20")])
    timing_lines = ", ".join(f"{DATASET_TITLES[d]} {s:.2f} s" for d, s in timing["median_seconds"].items())
    md = [
        "# Zero-shot benchmark: the scikit-learn clustering gallery\n\n",
        f"{_produced_by(result, command)}; raw numbers in `benchmarks/results/zero_shot.json`. "
        f"Kernel: {result['kernel']['name']}.\n\n",
        "The six datasets of scikit-learn's gallery example *Comparing different clustering algorithms on toy "
        "datasets* (`examples/cluster/plot_cluster_comparison.py`), drawn with scikit-learn's own generators "
        f"at seeds {result['seeds'][0]}..{result['seeds'][-1]} ({len(result['seeds'])} per size; `random_state=seed`) "
        f"and sizes n = {', '.join(map(str, result['sizes']))}, and four real datasets (iris, wine, breast cancer, "
        "digits, each clustered whole). Every method gets the StandardScaler-ed points, as in the gallery.\n\n",
        "".join(f"- {METHOD_TITLES[m]}: {METHOD_LONG[m]}\n" for m in METHODS), "\n",
        "## Results\n\n", tables, "\n",
        "### Per size (toy datasets): ARI / NMI\n\n", per_size_table(summary), "\n",
        "### Number of clusters found\n\n", k_table(summary), "\n",
        "### Fit time (seconds, one thread, mean over the toy datasets)\n\n", time_table(summary), "\n",
        f"`ABCClustering().fit_predict(X)` at n = {timing['n']} ({timing['torch_threads']} torch threads, median of "
        f"{timing['repeats']} after a warm-up): {timing_lines}.\n\n",
    ]
    if result.get("clustbench"):
        md.append(clustbench_markdown(result["clustbench"]))
    if result.get("timing_side_by_side"):
        md.append(timing_markdown(result["timing_side_by_side"]))
    md += ["## Requirements\n\n",
           "### Requirements this benchmark checks\n\n```text\n",
           issue_lines or "(none measured in this run)", "\n```\n\n",
           "### Further checks\n\n```text\n", other_lines, "\n```\n\n"]
    if figures:
        md.append("## Gallery\n\n")
        md.append(f"Seed {result['seeds'][0]}, n = {GALLERY_N}: points coloured by predicted label (black: HDBSCAN "
                  "noise), ARI in the corner; the methods with no k also show the number of clusters they found.\n\n")
        for fig in figures:
            alt = "real datasets, first two PCA components" if fig == GALLERY_REAL_PNG else "toy datasets"
            md.append(f"![zero-shot gallery: {alt}]({fig.relative_to(DOCS).as_posix()})\n\n")
    md.append("## Notes\n\n" + "".join(f"- {n}\n" for n in result["notes"]))
    # A partial run (a smoke test, fewer seeds, a development kernel) leaves the committed results, report and
    # figures to the full run they quote.
    partial = result.get("partial", result["quick"])
    path = output_path("zero_shot.json", partial, output)
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}", flush=True)
    if not partial and output is None:  # the report quotes the committed JSON
        (DOCS / "zero_shot_results.md").write_text("".join(md))
        print(f"wrote {DOCS / 'zero_shot_results.md'}", flush=True)
    printed = tables
    if result.get("clustbench") and result["clustbench"].get("listed"):
        printed += "\n" + clustbench_markdown(result["clustbench"])
    if result.get("timing_side_by_side"):
        printed += "\n" + timing_markdown(result["timing_side_by_side"])
    return printed + "\n" + _requirement_lines(reqs)


# Keys of zero_shot.json that each part of --eval writes.
GALLERY_KEYS = ("quick", "seeds", "sizes", "gallery", "jobs", "benchmark_seconds", "timing", "summary", "sets")


def _previous_parts(kernel: dict) -> dict:
    """The last zero_shot.json, when it measured the same kernel and arbiter files with this code's layout; else {}."""
    path = RESULTS / "zero_shot.json"
    if not path.exists():
        return {}
    previous = json.loads(path.read_text())
    recorded = previous.get("kernel", {})
    if (any(recorded.get(key) != kernel[key] for key in ("sha256", "arbiter_sha256")) or "parts" not in previous
            or previous.get("partial", previous["quick"])):
        return {}  # a run of other weights or arbiters (or one that recorded no arbiters) is not carried over
    return previous


def evaluate(n_seeds: int = DEFAULT_SEEDS, sizes=SIZES, jobs: int = 2, quick: bool = False,
             kernel_path: str | None = None, command: str = "python benchmarks/zero_shot.py --eval",
             data_home: str | None = None,
             battery: str = "listed", timing_threads: int | None = None, gallery: bool = True,
             output: str | None = None) -> dict:
    """The zero-shot benchmark: gallery + real datasets, clustbench batteries, side-by-side timing.

    A part not run this time (``gallery=False``, ``battery='none'``, no
    ``timing_threads``) is carried over from the last ``zero_shot.json`` when
    that measured the same kernel and arbiter files (and says so in its notes).
    A partial run (``quick``, fewer than :data:`DEFAULT_SEEDS` seeds, a
    development ``kernel_path``) writes ``zero_shot_partial.json`` (or
    ``output``) and leaves the report and its figures as they are.
    """
    import clustbench_data

    from skabc.pretrained import PRETRAINED_DIR

    if kernel_path is None and not (PRETRAINED_DIR / "generic.safetensors").exists():
        raise SystemExit(f"no generic weights at {PRETRAINED_DIR / 'generic.safetensors'}: run --train first "
                         "(or pass --kernel PATH for a development run)")
    kernel = _kernel_info(kernel_path)
    partial = quick or n_seeds < DEFAULT_SEEDS or kernel_path is not None
    previous = {} if partial else _previous_parts(kernel)
    parts: dict[str, dict] = {}
    figures: list[Path] = []
    result = {"benchmark": "zero_shot", "command": command, "partial": partial, "kernel": kernel,
              "methods": METHOD_LONG, "skipped_methods": SKIPPED, "versions": _versions()}
    if gallery:
        result.update(_run_gallery(n_seeds, sizes, jobs, quick, kernel_path,
                                   figures_wanted=not partial and output is None))
        figures = [ROOT / f for f in result["gallery"]["files"]]
        parts["gallery"] = {"command": command, "carried_over": False}
    elif "summary" in previous:
        result.update({k: previous[k] for k in GALLERY_KEYS})
        parts["gallery"] = {**previous["parts"]["gallery"], "carried_over": True}
        figures = [ROOT / f for f in result["gallery"]["files"]]
    else:
        raise SystemExit("--no-gallery needs an earlier full zero_shot.json of the same kernel and arbiter files to "
                         "carry over")

    home = clustbench_data.resolve_data_home(data_home, ROOT)
    result["clustbench"] = None
    if battery != "none" and home is not None:
        result["clustbench"] = run_clustbench(home, battery, jobs, kernel_path, quick)
        parts["clustbench"] = {"command": command, "carried_over": False}
    elif previous.get("clustbench"):
        result["clustbench"] = previous["clustbench"]
        parts["clustbench"] = {**previous["parts"]["clustbench"], "carried_over": True}
    if result["clustbench"] is None and battery != "none":
        print(f"clustbench batteries skipped: no data at {data_home or '../shared/data/clustbench'} "
              "(pass --data-home DIR)", flush=True)
        result["clustbench_skipped"] = (f"no listed sets at {data_home or '../shared/data/clustbench'} "
                                        "(pass --data-home DIR)")

    result["timing_side_by_side"] = None
    if timing_threads is not None:
        print(f"timing side by side ({timing_threads} thread(s))", flush=True)
        result["timing_side_by_side"] = time_side_by_side(kernel_path, timing_threads)
        parts["timing_side_by_side"] = {"command": command, "carried_over": False}
    elif previous.get("timing_side_by_side"):
        result["timing_side_by_side"] = previous["timing_side_by_side"]
        parts["timing_side_by_side"] = {**previous["parts"]["timing_side_by_side"], "carried_over": True}
    result["parts"] = parts
    _judge(result, kernel_path)
    print(write_outputs(result, figures, command, output))
    medians = result["timing"]["median_seconds"]
    print(f"ABC fit_predict at n = {result['timing']['n']}: " + ", ".join(f"{d} {s:.2f} s" for d, s in medians.items()))
    print(f"gallery {result['benchmark_seconds'] / 60:.1f} min"
          + (f", clustbench {result['clustbench']['wall_seconds'] / 60:.1f} min" if parts.get("clustbench") else "")
          + ("" if partial or output is not None else "; figures " + ", ".join(map(str, figures))))
    return result


def _judge(result: dict, kernel_path: str | None) -> None:
    """Set the requirement lines and the notes of ``result`` from its numbers."""
    result["requirements"] = requirements(result["summary"], result["timing"], result.get("clustbench"),
                                          result.get("timing_side_by_side"))
    result["notes"] = _notes(result["summary"], result["requirements"], result["timing"], result["quick"],
                             kernel_path, result.get("clustbench"), result.get("parts"))
    if "clustbench_skipped" in result:
        result["notes"].insert(0, f"The clustbench validation batteries were skipped: {result['clustbench_skipped']}.")


def render() -> None:
    """Rewrite the report (docs and the JSON's requirements and notes) from zero_shot.json's numbers; nothing reruns.

    For a change to the report's code only; the command recorded stays that of the run that measured the numbers.
    """
    result = json.loads((RESULTS / "zero_shot.json").read_text())
    # The columns the run measured, whatever this machine has installed (without genieclust, Genie's measured
    # column vanished from the report and the notes named another method best).
    global METHODS, SKIPPED
    SKIPPED = dict(result.get("skipped_methods", {}))
    METHODS = tuple(m for m in ALL_METHODS if m not in SKIPPED)
    shipped = result["kernel"]["name"].startswith("generic")
    kernel_path = None if shipped else result["kernel"]["file"]
    _judge(result, kernel_path)
    print(write_outputs(result, [ROOT / f for f in result["gallery"]["files"]], result["command"]))


def _run_gallery(n_seeds: int, sizes, jobs: int, quick: bool, kernel_path: str | None,
                 figures_wanted: bool = True) -> dict:
    """The gallery toys and the real datasets: every method on every (dataset, seed, size), then ABC's timing.

    The committed figures are drawn only where ``figures_wanted`` (a full run) and ``n = GALLERY_N`` is run.
    """
    from joblib import Parallel, delayed

    if quick:
        n_seeds, sizes = 2, (500,)
    seeds = list(range(n_seeds))
    figures_wanted = figures_wanted and not quick and GALLERY_N in sizes
    tasks = [(d, s, n, figures_wanted and s == seeds[0] and n == GALLERY_N) for d in TOY for s in seeds for n in sizes]
    tasks += [(d, s, None, figures_wanted and s == seeds[0]) for d in REAL for s in seeds]
    tasks.sort(key=lambda t: -(t[2] or 1800))  # biggest first: better load balance
    print(f"{len(tasks)} tasks on {jobs} workers ({len(seeds)} seeds, sizes {list(sizes)})", flush=True)
    start = time.perf_counter()
    records, step = [], max(1, len(tasks) // 10)
    for record in Parallel(n_jobs=jobs, return_as="generator_unordered")(
            delayed(run_task)(d, s, n, kernel_path, keep) for d, s, n, keep in tasks):
        records.append(record)
        if len(records) % step == 0 or len(records) == len(tasks):
            print(f"  {len(records)}/{len(tasks)} tasks, {time.perf_counter() - start:.0f} s", flush=True)
    benchmark_seconds = time.perf_counter() - start
    records.sort(key=lambda r: ((TOY + REAL).index(r["dataset"]), r["n"], r["seed"]))
    timing = time_abc(kernel_path)
    figures = make_figures(records, seeds[0]) if figures_wanted else []
    return {"quick": quick, "seeds": seeds, "sizes": list(sizes),
            "gallery": {"seed": seeds[0], "n": GALLERY_N, "files": [str(f.relative_to(ROOT)) for f in figures]},
            "jobs": jobs, "benchmark_seconds": benchmark_seconds, "timing": timing, "summary": summarise(records),
            "sets": [{k: v for k, v in r.items() if k != "labels"} for r in records]}


SELECT_POWERS = (1.0, 2.0, 4.0, 8.0, 16.0)
SELECT_ASSIGN = ("kmeans", "njw")
SELECT_SELECTION = ("eigengap", "consensus")


def select(kernel_path: str | None = None, n_sets: int = 150, jobs: int = 2) -> dict:
    """Choose ``affinity_power``, ``assign_labels`` and ``n_clusters_selection`` on synthetic validation sets.

    The sets come from the training distribution with another seed (and
    larger sizes, 300-1,500 points), never from the benchmark's datasets.
    Every setting sees the same sets, so differences are paired; the
    standard error of each setting's difference to the best is printed too.
    """
    from joblib import Parallel, delayed

    X, y, groups = make_clustering_sets(n_sets=n_sets, set_size=(300, 1500), n_features=(1, 64),
                                        max_clusters=15, random_state=VALIDATION_SEED)
    sets = [(X[groups == g], y[groups == g]) for g in np.unique(groups)]
    chunks = [sets[i::jobs] for i in range(jobs)]
    scores = [row for part in Parallel(n_jobs=jobs)(delayed(_select_chunk)(c, kernel_path) for c in chunks)
              for row in part]
    settings = [(p, a, c) for p in SELECT_POWERS for a in SELECT_ASSIGN for c in SELECT_SELECTION]
    ari = {s: np.array([row[s][0] for row in scores]) for s in settings}
    best = max(settings, key=lambda s: ari[s].mean())
    summary = {}
    for s in settings:
        diff = ari[s] - ari[best]
        summary[s] = {"mean_ari": float(ari[s].mean()), "se": float(ari[s].std() / np.sqrt(len(ari[s]))),
                      "diff_to_best": float(diff.mean()), "diff_se": float(diff.std() / np.sqrt(len(diff))),
                      "mean_abs_k_error": float(np.mean([row[s][1] for row in scores]))}
        print(f"affinity_power {s[0]:g}, assign_labels {s[1]:6s}, n_clusters_selection {s[2]:9s}: "
              f"ARI {summary[s]['mean_ari']:.4f} "
              f"+- {summary[s]['se']:.4f} (to best {summary[s]['diff_to_best']:+.4f} +- {summary[s]['diff_se']:.4f}), "
              f"|k_hat - k| {summary[s]['mean_abs_k_error']:.2f}")
    print(f"best: affinity_power {best[0]:g}, assign_labels {best[1]!r}, n_clusters_selection {best[2]!r} "
          "(set SETTINGS['generic'] in benchmarks/pretrained_settings.py and run it)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "zero_shot_select.json").write_text(json.dumps(
        {"command": "python benchmarks/zero_shot.py --select", "validation_seed": VALIDATION_SEED, "n_sets": n_sets,
         "set_size": [300, 1500], "kernel": _kernel_info(kernel_path),
         "settings": [{"affinity_power": p, "assign_labels": a, "n_clusters_selection": c, **summary[(p, a, c)]}
                      for p, a, c in settings],
         "best": {"affinity_power": best[0], "assign_labels": best[1], "n_clusters_selection": best[2]}}, indent=1))
    return summary


def _select_chunk(sets, kernel_path):
    from sklearn.metrics import adjusted_rand_score

    from skabc.pretrained import load, load_saved_kernel
    from skabc.spectral import CONSENSUS_POWERS, estimate_n_clusters, median_estimate, spectral_labels

    torch.set_num_threads(1)
    kernel = load("generic", device="cpu") if kernel_path is None else load_saved_kernel(kernel_path, device="cpu")
    rows = []
    for X, y in sets:
        A = kernel.transform(X)
        k = len(np.unique(y))
        # The eigengap estimate at every power any setting needs, computed once (as consensus_n_clusters does).
        needed = sorted({p * r for p in SELECT_POWERS for r in CONSENSUS_POWERS})
        eigengap_k = {q: estimate_n_clusters(A**q, 50, random_state=0)[0] for q in needed}
        row = {}
        for p in SELECT_POWERS:
            sharpened = A**p  # one power per setting, shared by the k estimates and both assignments
            k_by = {"eigengap": eigengap_k[p],
                    "consensus": median_estimate([eigengap_k[p * r] for r in CONSENSUS_POWERS])}
            for assign in SELECT_ASSIGN:
                labels_for = {}
                for selection, k_hat in k_by.items():
                    if k_hat not in labels_for:
                        labels_for[k_hat] = spectral_labels(sharpened, k_hat, random_state=0, assign_labels=assign)
                    row[(p, assign, selection)] = (adjusted_rand_score(y, labels_for[k_hat]), abs(k_hat - k))
        rows.append(row)
    return rows


# Later phases: each run's loss was still falling, so training continues from the shipped weights (warm
# start, a fresh warm-up + cosine schedule, new draws from the same pool).  Phase 2 ran 40 epochs at half
# the first peak learning rate; phases 3 to 5 longer schedules at the same peak, phases 6 and 7 half of
# it to settle.  A phase's weights are committed (train_more overwrites the shipped file) only when
# --select scores them above the previous phase's on the validation sets.
PHASES = {2: dict(max_epochs=40, lr=5e-4, random_state=1),
          3: dict(max_epochs=240, lr=5e-4, random_state=2),
          4: dict(max_epochs=150, lr=5e-4, random_state=3),
          5: dict(max_epochs=200, lr=5e-4, random_state=4),
          6: dict(max_epochs=150, lr=2.5e-4, random_state=5),
          7: dict(max_epochs=150, lr=2.5e-4, random_state=6),
          8: dict(max_epochs=120, lr=2.5e-4, random_state=7),
          9: dict(max_epochs=70, lr=1.25e-4, random_state=8),
          10: dict(max_epochs=70, lr=1.25e-4, random_state=9),
          11: dict(max_epochs=70, lr=1.25e-4, random_state=10)}
# Phase 7 finished (validation 0.655 against phase 6's 0.647) but its weights, in the ignored checkpoint
# folder, were lost with the machine before they were shipped.  Phase 8 starts again from phase 6 and adds
# the 'scattered' family (far-apart groups next to close pairs, Student-t tails) to the pool; it was to ship
# only if --select on the usual validation sets (default mixture, unchanged) scored it above phase 6: it
# did, 0.649 against 0.647.  Phase 9 settles phase 8 at half its learning rate, same pool, same rule: 0.652
# (A**4) against 0.649, shipped 2026-12-01.
# Phase 10 continues phase 9 on a blob-heavier pool (blobs 0.30 -> 0.45 of the default weights): given the
# true k the kernel still trailed SpectralClustering on overlapping Gaussian blobs (zero_shot_results.md).
# Same rule: 0.656 (A**8) against 0.652 (paired over the same sets +0.004 +- 0.011: within the noise),
# shipped 2026-12-01.
# Phase 11 continues phase 10 on the same pool.  Stricter rule, fixed before it ran: it ships only if its
# best --select setting beats phase 10's best (0.669, A**8 + 'njw' + consensus k) by more than one standard
# error of the paired difference over the same 150 sets.  It did not: 70 epochs, 35.1 min wall on two threads,
# training loss 0.19-0.23 over the last 20 epochs, best setting unchanged (A**8 + 'njw' + consensus) at 0.666
# against 0.669, so phase 10 stays shipped (2026-12-01).
SCATTERED_MIXTURE = {**FAMILY_WEIGHTS, "scattered": 0.15}
BLOB_HEAVY_MIXTURE = {**SCATTERED_MIXTURE, "blobs": 0.45}
PHASE_FAMILIES = {8: SCATTERED_MIXTURE, 9: SCATTERED_MIXTURE, 10: BLOB_HEAVY_MIXTURE, 11: BLOB_HEAVY_MIXTURE}


def train_more(threads: int, phase: int) -> None:
    if phase not in PHASES:
        raise SystemExit(f"--phase must be one of {sorted(PHASES)}, got {phase}")
    X, y, groups = _training_pool(threads, PHASE_FAMILIES.get(phase))
    kernel = ContextualKernel.load(GENERIC_V1, device="cpu").set_params(
        warm_start=True, checkpoint_dir=CHECKPOINTS / f"phase{phase}", verbose=1, **PHASES[phase])
    kernel.fit(X, y, groups=groups)
    minutes = _ship(kernel, CHECKPOINTS / f"phase{phase}_time.json", threads=threads)
    print(f"generic phase {phase}: {len(kernel.net_.history)} epochs, {minutes:.1f} min wall ({threads} threads)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--train-more", action="store_true", help="a later training phase from the shipped weights")
    parser.add_argument("--phase", type=int, default=max(PHASES), help="which phase --train-more runs")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval", action="store_true", help="run the zero-shot benchmark")
    parser.add_argument("--select", action="store_true",
                        help="choose affinity_power, assign_labels and n_clusters_selection on synthetic "
                             "validation sets")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                        help="seeds per toy dataset and size (--eval; fewer than the default is a partial run)")
    parser.add_argument("--jobs", type=int, default=2, help="joblib workers over (dataset, seed, size) (--eval)")
    parser.add_argument("--quick", action="store_true",
                        help="--eval smoke test: 2 seeds, n = 500, no picture, clustbench sets subsampled")
    parser.add_argument("--data-home", default=None,
                        help="folder of the clustbench batteries (default: the first shared/data/clustbench in a "
                             "folder above the repository, as ../shared/data/clustbench); skipped when absent")
    parser.add_argument("--battery", default="listed",
                        help="clustbench sets for --eval: 'listed' (the README's 13 wut + graves sets), battery "
                             "names among wut,graves,g2mg,h2mg (whole batteries, comma-separated, with or without "
                             "'listed'), or 'none'")
    parser.add_argument("--timing", action="store_true",
                        help="--eval also times ABC against SpectralClustering kNN side by side at n = 1,000 / "
                             "5,000 / 20,000 (both limited to --threads threads)")
    parser.add_argument("--no-gallery", action="store_true",
                        help="--eval without the gallery and real datasets (carried over from the last "
                             "zero_shot.json of the same kernel and arbiters)")
    parser.add_argument("--render", action="store_true",
                        help="rewrite docs/zero_shot_results.md from benchmarks/results/zero_shot.json (no rerun)")
    # development only: a saved kernel file instead of the shipped generic weights
    parser.add_argument("--kernel", default=None, help=argparse.SUPPRESS)
    add_output_argument(parser, "zero_shot.json")
    args = parser.parse_args(argv)
    if args.train:
        train(args.threads)
    if args.train_more:
        train_more(args.threads, args.phase)
    if args.select:
        select(args.kernel, jobs=args.jobs)
    if args.render:
        render()
    if args.eval:
        command = "python benchmarks/zero_shot.py " + " ".join(argv if argv is not None else sys.argv[1:])
        evaluate(n_seeds=args.seeds, jobs=args.jobs, quick=args.quick, kernel_path=args.kernel, command=command.strip(),
                 data_home=args.data_home, battery=args.battery, timing_threads=args.threads if args.timing else None,
                 gallery=not args.no_gallery, output=args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
