"""Scaling of ABCClustering.fit_predict with n: backends x affinity modes, against scikit-learn baselines.

Usage
-----
python benchmarks/scaling.py                 # n = 1e3, 1e4, 1e5; about 10-15 minutes on 2 cores
python benchmarks/scaling.py --threads 1     # one torch / BLAS thread per configuration
python benchmarks/scaling.py --quick         # smoke run: n = 300 and 1,000, tiny kernels, no results written
python benchmarks/scaling.py --render        # rewrite the docs table and plot from the JSON

Every configuration runs in a fresh subprocess, which reports the wall time of
``fit_predict`` alone (kernel loading is timed separately), how much of it the
learned affinity took (``kernel.transform``: encoder + affinity), the peak RSS
of the process (``ru_maxrss``: the interpreter, torch, the kernel and the
points included), the number of clusters found and the ARI against the true
circles.  A configuration that would exceed the memory limit or take more than
``--timeout`` seconds (estimated from the previous size) is recorded as
skipped, with the reason; one that the package refuses (a dense affinity too
large for memory) is recorded with the error message.

Kernels: ``'sab'`` is the shipped ``circles`` kernel (6 SABs); the others have
the package defaults (``d_model=64, n_blocks=4``) and are trained briefly on
circle sets, once, into ``benchmarks/.checkpoints/scaling/`` (timings do not
depend on the weights, except through the number of clusters the eigengap
finds).  The 64-d points are the circles embedded in 64 dimensions by a fixed
random isometry plus a little noise, clustered by kernels trained on such sets.

Writes ``benchmarks/results/scaling.json``, the table in
``docs/scaling_results.md`` (between the ``scaling-table`` markers; the notes
around it are kept) and ``docs/scaling_results.png``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from result_files import add_output_argument, output_path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "scaling.json"
DOCS_MD = ROOT / "docs" / "scaling_results.md"
DOCS_PNG = ROOT / "docs" / "scaling_results.png"
CACHE = ROOT / "benchmarks" / ".checkpoints" / "scaling"
CIRCLES_BACKENDS = ROOT / "benchmarks" / ".checkpoints"  # backend_<name>.safetensors of circles.py

SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (300, 1_000)
BACKENDS = ("sab", "isab", "sampled", "opa")
QUADRATIC_BACKENDS = ("sab", "opa")  # O(n^2) attention in the encoder
WIDE_BACKENDS = ("isab", "sampled")  # the 64-d case at the largest size
N_CLUSTERS = 4  # circles per set; given to the baselines
DATA_SEED = 2024
N_NEIGHBORS = 30  # ContextualKernel's default
RECALL_ROWS = 2_000  # rows whose exact top-k is computed for the recall at the largest size

# Brief training per backend (package defaults otherwise); OPA trains slowly, so it gets one small batch.
TRAINING = {
    "isab": dict(max_epochs=6, sets_per_epoch=512),
    # The Hamiltonian pattern in windows of 32 (ContextualKernel's defaults before they became dense windows
    # of 128): the configuration these timings were measured with.
    "sampled": dict(max_epochs=6, sets_per_epoch=512, window_size=32, window_attention="hamiltonian",
                    n_attention_samples=1),
    "opa": dict(max_epochs=1, sets_per_epoch=32, set_size=100),
}
QUICK_TRAINING = dict(max_epochs=1, sets_per_epoch=16, set_size=60, batch_size=16)


# --------------------------------------------------------------------------- data and kernels


def make_points(n: int, d: int, seed: int = DATA_SEED):
    """One set of ``n`` points on 4 overlapping circles, in ``d`` dimensions; returns X (float32) and y."""
    from skabc.datasets import make_circles_sets

    X, y, _ = make_circles_sets(n_sets=1, set_size=n, n_circles=N_CLUSTERS, random_state=seed)
    return _lift(X, d, seed).astype(np.float32), y


def _lift(X: np.ndarray, d: int, seed: int) -> np.ndarray:
    """Embed 2-d points in ``d`` dimensions: a fixed random isometry plus noise of 1% of the spread."""
    if d == 2:
        return X
    basis, _ = np.linalg.qr(np.random.default_rng(12345).standard_normal((d, 2)))
    noise = 0.01 * np.random.default_rng(seed + 1).standard_normal((len(X), d))
    return X @ basis.T + noise


def _points_file(cache: Path, n: int, d: int) -> Path:
    """The points of size ``n`` and width ``d``, drawn once into ``cache`` (an ``.npz`` with X and y)."""
    path = cache / "points" / f"circles_n{n}_d{d}_seed{DATA_SEED}.npz"
    if not path.is_file():
        X, y = make_points(n, d)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, X=X, y=y)
    return path


def prepare_kernel(backend: str, d: int, threads: int, quick: bool = False, cache: Path = CACHE) -> dict:
    """Train (once; cached) the kernel of one backend for ``d``-dimensional points; returns its description."""
    import torch

    from skabc import ContextualKernel
    from skabc.datasets import make_circles_sets

    if backend == "sab" and d == 2 and not quick:
        return {"backend": backend, "d": d, "kernel": "pretrained:circles", "train_s": None,
                "what": "shipped circles kernel (6 SABs, d_model=64)"}
    params = dict(attention=backend, set_size=(100, 300), random_state=0, device="cpu")
    params.update(QUICK_TRAINING if quick else TRAINING.get(backend, TRAINING["isab"]))
    # The file name holds a digest of the training settings: changing them trains a new kernel.
    digest = hashlib.sha1(json.dumps([params, d], sort_keys=True).encode()).hexdigest()[:8]
    path = cache / f"{backend}_d{d}_{digest}.safetensors"
    what = f"trained briefly: {params}"
    timing = path.with_suffix(".json")
    if path.is_file():
        train_s = json.loads(timing.read_text())["train_s"] if timing.is_file() else None
        return {"backend": backend, "d": d, "kernel": _relative(path), "train_s": train_s,
                "what": what + " (cached: trained by an earlier run)"}
    torch.set_num_threads(threads)
    X, y, groups = make_circles_sets(n_sets=600, set_size=300, random_state=777)
    X = _lift(X, d, 777).astype(np.float32)
    start = time.perf_counter()
    # init='scratch': these timings are of kernels trained from scratch, not of the generic fine-tuning.
    kernel = ContextualKernel(**params, init="scratch").fit(X, y, groups=groups)
    train_s = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    kernel.save(path)
    timing.write_text(json.dumps({"train_s": round(train_s, 1), "threads": threads}))
    return {"backend": backend, "d": d, "kernel": _relative(path), "train_s": round(train_s, 1), "what": what}


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def load_kernel(spec: str):
    from skabc import ContextualKernel

    if spec.startswith("pretrained:"):
        from skabc.pretrained import load

        return load(spec.split(":", 1)[1], device="cpu")
    return ContextualKernel.load(spec, device="cpu")


# --------------------------------------------------------------------------- one configuration


def run_config(config: dict, threads: int) -> dict:
    """Run one configuration in this process and return its result row.

    ``config``: ``method`` ('abc', 'spectral_rbf', 'spectral_nn', 'minibatch_kmeans', 'recall'),
    ``n``, ``d``, for ABC ``backend``, ``mode`` ('dense' / 'sparse') and ``kernel`` (a spec for
    :func:`load_kernel`), and optionally ``points``: an ``.npz`` file with ``X`` and ``y`` (so
    that the baselines' processes need not import torch); else the points are drawn here.
    """
    from sklearn.metrics import adjusted_rand_score

    if config["method"] in ("abc", "recall"):
        import torch

        torch.set_num_threads(threads)
    row = dict(config)
    row.pop("points", None)
    if config.get("points"):
        with np.load(config["points"]) as data:
            X, y = data["X"], data["y"]
    else:
        X, y = make_points(config["n"], config["d"])
    rss_before = _peak_rss_mb()
    method = config["method"]
    try:
        if method == "recall":
            row.update(_recall(config, X))
        elif method == "abc":
            row.update(_fit_predict_abc(config, X))
        else:
            row.update(_fit_predict_baseline(method, X))
    except MemoryError as exc:  # AffinityTooLargeError is one
        row.update(status=f"refused: {type(exc).__name__}: {exc}")
        return row
    if "labels" in row:
        labels = row.pop("labels")
        row["ari"] = round(float(adjusted_rand_score(y, labels)), 4)
        row["n_clusters"] = len(np.unique(labels))
    row["status"] = "ok"
    row["rss_before_mb"] = round(rss_before, 1)
    row["peak_rss_mb"] = round(_peak_rss_mb(), 1)
    return row


def _fit_predict_abc(config: dict, X: np.ndarray) -> dict:
    from skabc import ABCClustering

    start = time.perf_counter()
    kernel = load_kernel(config["kernel"]).set_params(affinity_mode=config["mode"])
    load_s = time.perf_counter() - start
    spent = []
    affinity = kernel.affinity

    def timed_affinity(data):
        begin = time.perf_counter()
        result = affinity(data)
        spent.append(time.perf_counter() - begin)
        return result

    # Instance attribute: times the encoder + affinity inside fit_predict (ABCClustering asks a kernel for its
    # affinity through Kernel.affinity; timing transform, as this did, timed nothing).
    kernel.affinity = timed_affinity
    model = ABCClustering(kernel=kernel, random_state=0, max_samples=None)
    start = time.perf_counter()
    labels = model.fit_predict(X)
    elapsed = time.perf_counter() - start
    affinity = model.affinity_matrix_
    out = {"load_s": round(load_s, 3), "fit_predict_s": round(elapsed, 3), "labels": labels,
           "affinity_s": round(sum(spent), 3) if spent else None,
           "spectral_s": round(elapsed - sum(spent), 3) if spent else None}
    if hasattr(affinity, "nnz"):
        out["affinity_nnz"] = int(affinity.nnz)
    return out


def _fit_predict_baseline(method: str, X: np.ndarray) -> dict:
    from sklearn.cluster import MiniBatchKMeans, SpectralClustering

    if method == "spectral_rbf":
        model = SpectralClustering(n_clusters=N_CLUSTERS, affinity="rbf", random_state=0)
    elif method == "spectral_nn":
        model = SpectralClustering(n_clusters=N_CLUSTERS, affinity="nearest_neighbors", random_state=0)
    elif method == "minibatch_kmeans":
        model = MiniBatchKMeans(n_clusters=N_CLUSTERS, random_state=0, n_init=3)
    else:
        raise ValueError(f"unknown method {method!r}")
    start = time.perf_counter()
    labels = model.fit_predict(X)
    return {"fit_predict_s": round(time.perf_counter() - start, 3), "labels": labels}


def _recall(config: dict, X: np.ndarray) -> dict:
    """Recall of each point's exact top-k by the approximate 'ivf' search (every row up to 20,000 points).

    ``recall``: the fraction of the exact top-k found.  ``recall_ties``: the fraction of the kept
    neighbours that score at least the exact k-th best (less 1e-5 of the row's best score, float
    rounding): on a nearly constant kernel many points tie and the exact top-k is arbitrary among them.
    """
    import torch

    from skabc import sparse_affinity

    kernel = load_kernel(config["kernel"])
    from skabc.inference import encode

    z = encode(kernel.module_, X)
    head = kernel.module_.head
    n = X.shape[0]
    k = N_NEIGHBORS
    with torch.inference_mode():
        left, right = (t[0].contiguous() for t in head.rank_factors(z))
        start = time.perf_counter()
        approx = sparse_affinity._ivf_topk(left, right, k, sparse_affinity._IVF_N_PROBE, 0)
        ivf_s = time.perf_counter() - start
        rows = torch.arange(n)
        if n > 20_000:
            rows = torch.randperm(n, generator=torch.Generator().manual_seed(0))[:RECALL_ROWS]
        start = time.perf_counter()
        exact_values, exact, kept = [], [], []
        for chunk in torch.split(rows, 1024):
            scores = left[chunk] @ right.T
            scores[torch.arange(len(chunk)), chunk] = -torch.inf
            top = torch.topk(scores, k, dim=1)
            exact_values.append(top.values)
            exact.append(top.indices)
            kept.append(scores.gather(1, approx[chunk]))
        exact_s = (time.perf_counter() - start) * n / len(rows)
        exact_values, exact, kept = torch.cat(exact_values), torch.cat(exact), torch.cat(kept)
        slack = 1e-5 * exact_values[:, :1].abs()
        tied = (kept >= exact_values[:, -1:] - slack).float().mean().item()
    hits = [len(np.intersect1d(a, b)) for a, b in zip(exact.numpy(), approx[rows].numpy(), strict=True)]
    spread = (exact_values[:, 0] - exact_values[:, -1]).median().item()
    return {"recall": round(float(np.mean(hits)) / k, 4), "recall_ties": round(tied, 4),
            "rows_checked": len(rows), "top_k_score_spread": float(f"{spread:.3g}"),
            "ivf_search_s": round(ivf_s, 3), "exact_search_s_estimated": round(exact_s, 3),
            "n_probe": sparse_affinity._IVF_N_PROBE, "cell_size": sparse_affinity._IVF_CELL_SIZE}


def _peak_rss_mb() -> float:
    """Peak resident memory of this process, MB.

    Linux: ``VmHWM`` of ``/proc/self/status``, the high-water mark of this process image only
    (``ru_maxrss`` survives ``exec``, so a child would report its parent's peak if that was higher).
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


# --------------------------------------------------------------------------- orchestration


def _run_in_subprocess(config: dict, threads: int, timeout: float) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads)}
    command = [sys.executable, str(Path(__file__).resolve()), "--run-config", json.dumps(config),
               "--threads", str(threads)]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {**config, "status": f"skipped (timeout: still running after {timeout:.0f} s)"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            row = json.loads(line)
            row["process_s"] = round(time.perf_counter() - start, 1)
            return row
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return {**config, "status": f"failed (exit {done.returncode}): {' | '.join(tail)}"}


def _memory_limit_bytes() -> float:
    """ContextualKernel's default ``memory_limit='auto'``: half of the physical memory."""
    try:
        return 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return math.inf


def _skip_reason(config: dict, measured: dict, timeout: float) -> str | None:
    """Why a configuration is not run: memory it cannot have, or a time estimated from the previous size."""
    n = config["n"]
    if config["method"] == "spectral_rbf":
        needed = 3 * 8.0 * n * n  # the rbf matrix, the Laplacian, a working copy
        if needed > _memory_limit_bytes():
            return f"skipped (dense {n} x {n} rbf affinity and Laplacian need ~{needed / 2**30:.0f} GiB)"
    if config.get("mode") == "dense" and 4 * 8.0 * n * n > _memory_limit_bytes():
        return None  # run it: the package refuses it at once (AffinityTooLargeError), which is the point
    key = _series(config)
    if key in measured:
        n_prev, t_prev = measured[key]
        quadratic = (config["method"] == "spectral_rbf" or config.get("mode") == "dense"
                     or config.get("backend") in QUADRATIC_BACKENDS)
        power = 2.0 if quadratic else 1.0
        # Margin 1.5: quadratic parts outgrow the fixed costs that dominate small sets (OPA: n^2.2 measured).
        estimate = t_prev * (n / n_prev) ** power * (1.5 if quadratic else 1.0)
        if estimate > timeout:
            return (f"skipped (estimated {estimate:.0f} s from {t_prev:.1f} s at n = {n_prev}, "
                    f"O(n^{power:.0f}), over the {timeout:.0f} s limit)")
    return None


def _series(row: dict) -> str:
    if row["method"] == "abc":
        return f"ABC {row['backend']} {row['mode']}" + (f" d={row['d']}" if row["d"] != 2 else "")
    return {"spectral_rbf": "SpectralClustering rbf", "spectral_nn": "SpectralClustering kNN",
            "minibatch_kmeans": "MiniBatchKMeans", "recall": "recall"}[row["method"]] + (
        f" d={row['d']}" if row["d"] != 2 else "")


def build_configs(sizes, kernels: dict) -> list[dict]:
    configs = []
    for n in sizes:
        for backend in BACKENDS:
            for mode in ("dense", "sparse"):
                configs.append(dict(method="abc", backend=backend, mode=mode, n=n, d=2,
                                    kernel=kernels[(backend, 2)]))
        for method in ("spectral_rbf", "spectral_nn", "minibatch_kmeans"):
            configs.append(dict(method=method, n=n, d=2))
    largest = max(sizes)
    for backend in WIDE_BACKENDS:
        if (backend, 64) in kernels:
            configs.append(dict(method="abc", backend=backend, mode="sparse", n=largest, d=64,
                                kernel=kernels[(backend, 64)]))
    return configs


def build_recall_configs(sizes, kernels: dict) -> list[dict]:
    """Recall of the 'ivf' search at 1e4 (every row) and at the largest size (sampled rows).

    Besides the benchmark's kernels, the longer-trained backend kernels of ``benchmarks/circles.py
    --train-backend`` are measured too when they are on disk.
    """
    found = {name: CIRCLES_BACKENDS / f"backend_{name}.safetensors" for name in ("isab", "sampled")}
    extra = {f"{name} (circles.py, 40 epochs)": str(path) for name, path in found.items() if path.is_file()}
    configs = []
    for n in sorted({s for s in sizes if s >= 10_000} | {max(sizes)}):
        for backend, spec in [(b, kernels[(b, 2)]) for b in ("sab", "isab", "sampled")] + list(extra.items()):
            if backend == "sab" and n > 10_000:
                continue  # O(n^2) encoder
            configs.append(dict(method="recall", backend=backend, n=n, d=2, kernel=spec))
    return configs


def exponent(rows: list[dict], series: str, n_low: int, n_high: int) -> float | None:
    """Slope of log(fit_predict time) against log(n) between two sizes of one series."""
    times = {r["n"]: r["fit_predict_s"] for r in rows if r.get("status") == "ok" and _series(r) == series
             and "fit_predict_s" in r}
    if n_low not in times or n_high not in times:
        return None
    return math.log(times[n_high] / times[n_low]) / math.log(n_high / n_low)


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def markdown_table(rows: list[dict]) -> str:
    lines = ["| method | n | d | fit_predict (s) | affinity (s) | spectral (s) | peak RSS (MB) | k found | ARI |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["method"] == "recall":
            continue
        name = _series(r).replace(f" d={r['d']}", "")
        if r.get("status") != "ok":
            lines.append(f"| {name} | {r['n']:,} | {r['d']} | {_short_status(r['status'])} | | | | | |")
            continue
        fmt = lambda v, p=1: "" if v is None else f"{v:.{p}f}"  # noqa: E731
        lines.append(f"| {name} | {r['n']:,} | {r['d']} | {fmt(r['fit_predict_s'], 2)} | {fmt(r.get('affinity_s'), 2)} "
                     f"| {fmt(r.get('spectral_s'), 2)} | {fmt(r.get('peak_rss_mb'), 0)} | {r.get('n_clusters', '')} "
                     f"| {fmt(r.get('ari'), 3)} |")
    return "\n".join(lines)


def _short_status(status: str) -> str:
    """The first sentence of a refusal (the JSON keeps the whole message), noting the advice it gives."""
    if not status.startswith("refused"):
        return status
    advice = " It suggests `affinity_mode='sparse'`." if "affinity_mode='sparse'" in status else ""
    return status.split(". ")[0] + "." + advice


def recall_table(rows: list[dict]) -> str:
    lines = ["| kernel | n | rows checked | recall of the exact top-30 | counting ties | top-30 score spread "
             "| ivf search (s) | exact search (s, est.) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["method"] != "recall":
            continue
        if r.get("status") != "ok":
            lines.append(f"| {r['backend']} | {r['n']:,} | {r['status']} | | | | | |")
            continue
        lines.append(f"| {r['backend']} | {r['n']:,} | {r['rows_checked']:,} | {r['recall']:.4f} "
                     f"| {r['recall_ties']:.4f} | {r['top_k_score_spread']:.3g} | {r['ivf_search_s']:.2f} "
                     f"| {r['exact_search_s_estimated']:.2f} |")
    return "\n".join(lines)


def write_docs(result: dict) -> None:
    table = "\n\n".join([
        f"Measured {result['date']} with `{result['command']}`; {result['threads']} thread(s) per "
        f"configuration; load average before / after: {result['load_average_before']} / "
        f"{result['load_average_after']}.",
        markdown_table(result["rows"]),
        "Exponent of fit_predict time in n between 1e4 and 1e5 (slope of log time against log n): "
        + ", ".join(f"{k}: {v:.2f}" for k, v in result["exponents"].items() if v is not None) + ".",
        "Recall of the approximate `'ivf'` neighbour search (exact top-30 of each checked row found):",
        recall_table(result["rows"]),
    ])
    start, end = "<!-- scaling-table:start -->", "<!-- scaling-table:end -->"
    text = DOCS_MD.read_text() if DOCS_MD.is_file() else f"# Scaling\n\n{start}\n{end}\n"
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    DOCS_MD.write_text(f"{head}{start}\n{table}\n{end}{tail}")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r.get("status") == "ok" and "fit_predict_s" in r:
            series.setdefault(_series(r), []).append((r["n"], r["fit_predict_s"]))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name, points in sorted(series.items()):
        points.sort()
        n, t = zip(*points, strict=True)
        style = "-o" if name.startswith("ABC") and "sparse" in name else ("--s" if name.startswith("ABC") else ":^")
        ax.plot(n, t, style, label=name, markersize=5)
    sizes = sorted({r["n"] for r in rows})
    ax.plot(sizes, [0.5 * s / sizes[0] for s in sizes], color="grey", lw=0.8, label="slope 1 (linear)")
    ax.axhline(60, color="red", lw=0.8, ls="--", label="60 s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (points in the set)")
    ax.set_ylabel("fit_predict wall time (s)")
    ax.set_title("fit_predict on circles: ABC (briefly trained kernels) vs scikit-learn")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run on n = 300 and 1,000 with tiny kernels (cached under "
                             "benchmarks/.checkpoints/scaling/quick); no results written")
    parser.add_argument("--threads", type=int, default=2, help="torch / BLAS threads per configuration")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per configuration")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="sizes to run (other than the default's is a partial run: the docs are left as they are)")
    add_output_argument(parser, RESULTS.name)
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/scaling_results.*")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite the docs table and plot from benchmarks/results/scaling.json")
    parser.add_argument("--run-config", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.run_config:  # child process: one configuration, one JSON line
        try:
            row = run_config(json.loads(args.run_config), args.threads)
        except Exception as exc:  # reported, not raised: the parent records it
            row = {**json.loads(args.run_config), "status": f"failed: {type(exc).__name__}: {exc}"}
            traceback.print_exc()
        print(json.dumps(row), flush=True)
        return 0

    if args.render:
        result = json.loads(RESULTS.read_text())
        write_docs(result)
        plot(result["rows"], DOCS_PNG)
        print(f"wrote {DOCS_MD} and {DOCS_PNG} from {RESULTS}")
        return 0

    import torch

    import skabc

    sizes = tuple(args.sizes or (QUICK_SIZES if args.quick else SIZES))
    started = time.strftime("%Y-%m-%d %H:%M")
    load_before = _load_average()
    cache = CACHE / "quick" if args.quick else CACHE
    kernels, kernel_info = {}, []
    for backend in BACKENDS:
        for d in (2, 64) if backend in WIDE_BACKENDS else (2,):
            info = prepare_kernel(backend, d, args.threads, quick=args.quick, cache=cache)
            kernels[(backend, d)] = info["kernel"]
            kernel_info.append(info)
            print(f"kernel {backend} d={d}: {info['what']}"
                  + (f", trained in {info['train_s']} s" if info["train_s"] else ""), flush=True)

    rows, measured = [], {}
    for config in build_configs(sizes, kernels) + build_recall_configs(sizes, kernels):
        config["points"] = str(_points_file(cache, config["n"], config["d"]))
        reason = _skip_reason(config, measured, args.timeout)
        row = {**config, "status": reason} if reason else _run_in_subprocess(config, args.threads, args.timeout)
        row.pop("kernel", None)
        row.pop("points", None)
        rows.append(row)
        if row.get("status") == "ok" and "fit_predict_s" in row:
            measured[_series(row)] = (row["n"], row["fit_predict_s"])
        _print_row(row)

    n_low, n_high = (10_000, 100_000) if not args.quick else (min(sizes), max(sizes))
    exponents = {s: exponent(rows, s, n_low, n_high) for s in sorted({_series(r) for r in rows})
                 if not s.startswith("recall")}
    for name, value in exponents.items():
        if value is not None:
            print(f"exponent of time in n, {n_low:,} -> {n_high:,}, {name}: {value:.2f}")
    result = {
        "command": " ".join(["python benchmarks/scaling.py", *(sys.argv[1:] if argv is None else argv)]),
        "date": started, "threads": args.threads, "timeout_s": args.timeout, "sizes": list(sizes),
        "load_average_before": load_before, "load_average_after": _load_average(),
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "python": platform.python_version(), "torch": torch.__version__, "skabc": skabc.__version__},
        "kernels": kernel_info, "exponents": exponents, "rows": rows,
    }
    if args.quick:
        print(markdown_table(rows))
        return 0
    partial = sizes != tuple(SIZES)  # the docs quote the committed sizes
    path = output_path(RESULTS.name, partial, args.output)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")
    if not (args.no_docs or partial or args.output):  # the docs quote the committed JSON
        write_docs(result)
        plot(rows, DOCS_PNG)
        print(f"wrote {DOCS_MD} and {DOCS_PNG}")
    return 0


def _print_row(row: dict) -> None:
    name = _series(row)
    if row.get("status") != "ok":
        print(f"{name:32s} n={row['n']:>7,}: {row['status']}", flush=True)
    elif row["method"] == "recall":
        print(f"{name + ' ' + row['backend']:32s} n={row['n']:>7,}: recall {row['recall']:.4f} "
              f"(counting ties {row['recall_ties']:.4f}; {row['rows_checked']} rows), "
              f"ivf {row['ivf_search_s']:.2f} s", flush=True)
    else:
        print(f"{name:32s} n={row['n']:>7,}: {row['fit_predict_s']:8.2f} s, peak RSS {row['peak_rss_mb']:7.0f} MB, "
              f"k={row.get('n_clusters')}, ARI {row.get('ari', float('nan')):.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
