"""Benchmark: sets wider than any the generic kernel's arbiter was trained on (more than 64 columns).

Usage
-----
python benchmarks/wide_sets.py [--seeds 20] [--data-home DIR] [--output benchmarks/results/wide_sets.json]

Why.  The arbiter of ``ABCClustering()`` (``skabc/pretrained/arbiter_generic.json``) learned which candidate
partition to keep from synthetic sets of 1 to 64 columns, and the gallery, the clustbench sets and the real
datasets of ``benchmarks/zero_shot.py`` hold at most 64; users' text, expression and image tables hold hundreds
to tens of thousands.  On TF-IDF rows its forest kept the kernel's cut of a few outlying documents (2 clusters,
ARI 0.00, for 4 topics) and predicted the kNN graph's right partition to score 0.25.  Since 2026-12-07 the generic
kernel's set spanning more dimensions than the file's ``max_features`` (the rank of its centred, column-scaled rows)
keeps the kNN graph's candidate (``skabc.spectral.arbiter.WIDE_SET_CANDIDATES``); this script measures that rule
against the forest's choice (the rule lifted) and the classical methods.

Sets: the first two families at seeds 500-519 (the width rule was chosen on seeds 0 to 11 of them), the next three
at seeds 600-619 (the one-cluster rule of ``skabc.spectral.wide`` was chosen on other seeds of similar generators;
its stand-out test was added after a run of an earlier version of these (without the anisotropic Gaussians),
which split 3 of 20 one-cluster sets without it):

- ``tf-idf``: synthetic bag-of-words corpora, TF-IDF rows (sparse): 2 to 12 topics of random sizes, 400 to 1,500
  documents of 20 to 200 words, a Zipf vocabulary of 3,000 to 30,000 words; each topic draws 15-50 % of a
  document's words from its own sparse distribution over the vocabulary, the rest from the shared Zipf one.
- ``dense``: 300 to 1,200 rows of 100, 300 or 1,000 columns, 2 to 12 clusters, by turns isotropic blobs, blobs in a
  random 5-dimensional subspace plus noise in every column (both StandardScaler-ed), and Poisson counts of
  cluster-specific Gamma rates (raw).
- ``short docs``: TF-IDF rows of 300 to 1,300 short documents (lo to 3 lo words, lo from 5 to 40), 2 to 8 topics of
  40-300 words each (sizes unequal in 40 % of the corpora), 20-40 % of each document's words from its topic, the
  rest from a Zipf vocabulary of 3,000 or 8,000 words.
- ``expression``: 200 to 900 rows of 300, 1,000 or 3,000 log-Poisson counts, 2 to 8 groups that each shift
  20-120 genes up or down (StandardScaler).
- ``one cluster``: sets with no clusters, where the answer is ``k = 1`` (ARI 1 for one cluster, else 0): Gaussian,
  Student-t and Poisson noise of 100-1,000 columns, one anisotropic Gaussian (standard deviations falling to
  1e-1 to 1e-3 over 80-500 columns, StandardScaler-ed with probability 1/2), and the two families above with one
  topic or group.
- ``clustbench``: the g2mg and h2mg sets of 128 columns of ``--data-home`` (the suite's protocol: StandardScaler,
  k = max(labels0), ARI on labels0 != 0); skipped when the data is absent.

Methods: ``ABCClustering(random_state=0)`` and ``ABCClustering(n_clusters=k, random_state=0)``, each also with the
arbiter's width limit lifted (what they did before 2026-12-07); ``ABCClustering(random_state=0)`` with the plain
eigengap instead of :func:`skabc.spectral.wide.wide_eigengap_k` (what it did from 2026-12-07 to that rule),
``SpectralClustering(n_clusters=k,
affinity='nearest_neighbors', random_state=0)`` and ``HDBSCAN()`` (defaults, no k; noise is one more label, not a
cluster).  Prints a markdown table (mean ARI per family, with the mean absolute error of k where it is estimated)
and writes the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
FIRST_SEED = 500
#: Sets per synthetic family of the committed run.
DEFAULT_SEEDS = 20
METHODS = ("ABC (k unknown)", "ABC, plain eigengap (k unknown)", "ABC, no width limit (k unknown)", "ABC (k given)",
           "ABC, no width limit (k given)", "Spectral kNN (k given)", "HDBSCAN (no k)")
#: Seeds of the families added with the one-cluster rule (its threshold was chosen on seeds 100-119 of them).
FIRST_NEW_FAMILY_SEED = 600


def make_corpus(seed: int):
    """One synthetic corpus (see the module notes): sparse TF-IDF rows and the topic of each."""
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.default_rng(seed)
    k, n = int(rng.choice([2, 3, 4, 6, 8, 12])), int(rng.integers(400, 1500))
    vocabulary = int(rng.integers(3000, 30000))
    zipf = 1.0 / np.arange(1, vocabulary + 1) ** rng.uniform(0.9, 1.2)
    zipf /= zipf.sum()
    topics = [0.5 * rng.dirichlet(np.full(vocabulary, 0.05)) + 0.5 * zipf[rng.permutation(vocabulary)]
              for _ in range(k)]
    y = rng.choice(k, n, p=rng.dirichlet(np.full(k, rng.choice([1.0, 5.0]))))
    share = rng.uniform(0.15, 0.5)
    rows, words = [], []
    for i in range(n):
        length = int(rng.integers(20, 200))
        own = rng.binomial(length, share)
        words.extend(np.r_[rng.choice(vocabulary, own, p=topics[y[i]]), rng.choice(vocabulary, length - own, p=zipf)])
        rows.extend([i] * length)
    counts = sp.csr_matrix((np.ones(len(rows)), (rows, words)), shape=(n, vocabulary))
    return TfidfTransformer().fit_transform(counts), np.unique(y, return_inverse=True)[1]


def make_dense(seed: int):
    """One dense wide set (see the module notes) and its labels."""
    from sklearn.datasets import make_blobs
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    k, n, d = int(rng.choice([2, 3, 5, 8, 12])), int(rng.integers(300, 1200)), int(rng.choice([100, 300, 1000]))
    if seed % 3 == 0:
        X, y = make_blobs(n, d, centers=k, cluster_std=rng.uniform(2, 6), random_state=seed)
    elif seed % 3 == 1:
        Z, y = make_blobs(n, 5, centers=k, cluster_std=rng.uniform(0.5, 1.5), random_state=seed)
        X = Z @ rng.normal(size=(5, d)) + rng.normal(scale=rng.uniform(1, 4), size=(n, d))
    else:
        y = rng.integers(0, k, n)
        X = rng.poisson(rng.gamma(0.5, 1.0, size=(k, d))[y] * rng.uniform(0.5, 2)).astype(float)
        return X, np.unique(y, return_inverse=True)[1]
    return StandardScaler().fit_transform(X), y


def make_short_docs(seed: int, k: int | None = None):
    """One corpus of short documents (see the module notes): sparse TF-IDF rows and the topic of each."""
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.default_rng(seed)
    k = int(rng.choice([2, 3, 4, 6, 8])) if k is None else k
    n, vocabulary, lo = int(rng.integers(300, 1300)), int(rng.choice([3000, 8000])), int(rng.integers(5, 40))
    y = rng.choice(k, n, p=rng.dirichlet(np.ones(k)) if rng.random() < 0.4 else None)
    topic_words, share = int(rng.integers(40, 300)), rng.uniform(0.2, 0.4)
    zipf = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    zipf /= zipf.sum()
    topics = [rng.choice(vocabulary, topic_words, replace=False) for _ in range(k)]
    weights = [rng.dirichlet(np.ones(topic_words)) for _ in range(k)]
    rows, words = [], []
    for i in range(n):
        length = int(rng.integers(lo, 3 * lo))
        own = rng.binomial(length, share)
        words.extend(np.r_[rng.choice(topics[y[i]], own, p=weights[y[i]]),
                           rng.choice(vocabulary, length - own, p=zipf)])
        rows.extend([i] * length)
    counts = sp.csr_matrix((np.ones(len(rows)), (rows, words)), shape=(n, vocabulary))
    return TfidfTransformer().fit_transform(counts), np.unique(y, return_inverse=True)[1]


def make_expression(seed: int, k: int | None = None):
    """One expression-like table (see the module notes), StandardScaler-ed, and the group of each row."""
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    k = int(rng.choice([2, 3, 4, 6, 8])) if k is None else k
    n, d = int(rng.integers(200, 900)), int(rng.choice([300, 1000, 3000]))
    shifted, effect = int(rng.integers(20, 120)), rng.uniform(0.4, 1.0)
    y = rng.integers(0, k, n)
    means = np.tile(rng.normal(2, 1, d), (k, 1))
    for c in range(k):
        means[c, rng.choice(d, shifted, replace=False)] += rng.choice([-effect, effect], shifted)
    X = np.log1p(rng.poisson(np.exp(means[y] + rng.normal(0, 0.3, (n, d)))))
    return StandardScaler().fit_transform(X), np.unique(y, return_inverse=True)[1]


def make_one_cluster(seed: int):
    """One set of no clusters (see the module notes) and its labels (all zero)."""
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    kind = seed % 6
    if kind == 3:
        return make_short_docs(seed, k=1)
    if kind == 4:
        return make_expression(seed, k=1)
    if kind == 5:
        n, d = int(rng.integers(150, 800)), int(rng.choice([80, 100, 200, 500]))
        X = rng.normal(size=(n, d)) @ (rng.normal(size=(d, d)) * np.geomspace(1, rng.choice([0.1, 0.01, 0.001]), d)).T
        return StandardScaler().fit_transform(X) if rng.random() < 0.5 else X, np.zeros(n, dtype=int)
    n, d = int(rng.integers(200, 1000)), int(rng.choice([100, 300, 1000]))
    if kind == 2:
        return rng.poisson(rng.gamma(0.5, 1.0, size=d), size=(n, d)).astype(float), np.zeros(n, dtype=int)
    X = rng.normal(size=(n, d)) if kind == 0 else rng.standard_t(3, size=(n, d))
    return StandardScaler().fit_transform(X), np.zeros(n, dtype=int)


@contextlib.contextmanager
def plain_eigengap():
    """The kNN candidate kept beyond the arbiter's domain with the plain eigengap rule (``k = 1`` as any other)."""
    from skabc.spectral import candidates

    kept = candidates.CANDIDATES["knn-wide-eigengap"]
    candidates.CANDIDATES["knn-wide-eigengap"] = ("knn", "eigengap")
    try:
        yield
    finally:
        candidates.CANDIDATES["knn-wide-eigengap"] = kept


@contextlib.contextmanager
def arbiter_width_limit_lifted():
    """The shipped arbiters without their ``max_features``: the forest chooses at every width, as before."""
    from skabc.spectral import arbiter

    load = arbiter.load_arbiter
    arbiter.load_arbiter = lambda name, given_k=False: replace(load(name, given_k), max_features=None)
    try:
        yield
    finally:
        arbiter.load_arbiter = load


def cluster(method: str, X, k: int) -> np.ndarray:
    from sklearn.cluster import HDBSCAN, SpectralClustering

    from skabc import ABCClustering

    if method == "Spectral kNN (k given)":
        return SpectralClustering(n_clusters=k, affinity="nearest_neighbors", random_state=0).fit_predict(X)
    if method == "HDBSCAN (no k)":
        return HDBSCAN().fit_predict(X.toarray() if hasattr(X, "toarray") else X)
    model = ABCClustering(n_clusters=k if "given" in method else None, random_state=0)
    variant = (arbiter_width_limit_lifted() if "no width limit" in method else plain_eigengap() if "plain" in method
               else contextlib.nullcontext())
    with variant:
        return model.fit_predict(X)


def sets(n_seeds: int, data_home):
    for seed in range(FIRST_SEED, FIRST_SEED + n_seeds):
        X, y = make_corpus(seed)
        yield "tf-idf", f"corpus {seed}", X, y, None
    for seed in range(FIRST_SEED, FIRST_SEED + n_seeds):
        X, y = make_dense(seed)
        yield "dense", f"dense {seed}", X, y, None
    for family, make in (("short docs", make_short_docs), ("expression", make_expression),
                         ("one cluster", make_one_cluster)):
        for seed in range(FIRST_NEW_FAMILY_SEED, FIRST_NEW_FAMILY_SEED + n_seeds):
            X, y = make(seed)
            yield family, f"{family} {seed}", X, y, None
    if data_home is None:
        print("clustbench data not found: skipping its wide sets (pass --data-home)", flush=True)
        return
    import clustbench_data
    from sklearn.preprocessing import StandardScaler

    for battery in ("g2mg", "h2mg"):
        for name in clustbench_data.dataset_names(data_home, battery):
            if name.split("_")[1] == "128":
                X, labels0 = clustbench_data.load(data_home, battery, name)
                yield "clustbench", f"{battery}/{name}", StandardScaler().fit_transform(X), labels0, labels0


def run(n_seeds: int, data_home) -> dict:
    import clustbench_data
    from sklearn.metrics import adjusted_rand_score

    records = []
    for family, name, X, y, labels0 in sets(n_seeds, data_home):
        k = int(labels0.max()) if labels0 is not None else len(np.unique(y))
        row = {"family": family, "set": name, "n": int(X.shape[0]), "n_features": int(X.shape[1]), "k": k}
        for method in METHODS:
            start = time.perf_counter()
            labels = cluster(method, X, k)
            ari = clustbench_data.score(labels0, labels) if labels0 is not None else adjusted_rand_score(y, labels)
            row[method] = {"ari": float(ari), "k": len(np.unique(labels[labels >= 0])),
                           "seconds": time.perf_counter() - start}
        records.append(row)
        print(f"{name} ({X.shape[0]} x {X.shape[1]}, k={k}): "
              + ", ".join(f"{m} {row[m]['ari']:.3f} (k {row[m]['k']})" for m in METHODS), flush=True)
    return {"records": records, "summary": summarise(records)}


def summarise(records: list[dict]) -> dict:
    out = {}
    for family in (*dict.fromkeys(r["family"] for r in records), "all"):
        rows = [r for r in records if family in ("all", r["family"])]
        out[family] = {"n_sets": len(rows)}
        for m in METHODS:
            out[family][m] = {"ari": float(np.mean([r[m]["ari"] for r in rows])),
                              "k_abs_error": float(np.mean([abs(r[m]["k"] - r["k"]) for r in rows]))}
    return out


def table(summary: dict) -> str:
    lines = ["| sets | n | " + " | ".join(METHODS) + " |", "|---" * (len(METHODS) + 2) + "|"]
    for family, cells in summary.items():
        label = "*all*" if family == "all" else family
        lines.append(f"| {label} | {cells['n_sets']} | " + " | ".join(
            f"{cells[m]['ari']:.3f}" + (f", k err {cells[m]['k_abs_error']:.2f}" if "given" not in m else "")
            for m in METHODS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="sets per synthetic family")
    parser.add_argument("--data-home", default=None, help="clustbench data folder (default: ../shared/data/clustbench "
                        "where it exists)")
    parser.add_argument("--output", default=None, help="default: benchmarks/results/wide_sets.json, or "
                        "wide_sets_partial.json for fewer seeds or no clustbench data")
    args = parser.parse_args(argv)
    import torch

    sys.path.insert(0, str(ROOT))
    import clustbench_data

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    data_home = clustbench_data.resolve_data_home(args.data_home, ROOT.parent)
    result = run(args.seeds, data_home)
    result["command"] = "python benchmarks/wide_sets.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(table(result["summary"]))
    from result_files import write_result

    write_result("wide_sets.json", result, args.seeds < DEFAULT_SEEDS or data_home is None, args.output)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
