"""The CUDA path against the CPU path, on a machine with a GPU: same answers, and how much faster.

Usage
-----
python benchmarks/cuda_check.py                 # needs a CUDA device; about 5 minutes
python benchmarks/cuda_check.py --worker DIR    # one side only (what the run above starts twice)
python benchmarks/cuda_check.py --compare DIR   # the table of two sides already run into DIR

``device='auto'`` puts every skabc network on the GPU when torch sees one.  This script runs the same
checks twice in fresh processes, once with the GPU visible and once with ``CUDA_VISIBLE_DEVICES=''``,
and compares them:

- zero-shot: ``ABCClustering(random_state=0)`` with ``k`` unknown and given on gallery blobs and moons,
  iris and digits: the labels of the two devices (ARI between them, the ``k`` found) and the learned
  affinities (largest absolute difference);
- training: each attention backend (``'sab'``, ``'isab'``, ``'sampled'``, ``'opa'``) trains a small
  scratch kernel on circles; its affinity is finite and on the device;
- a kernel trained on the device saved, loaded on the CPU and on ``'auto'``, pickled: the same affinity;
- a finished run's ``checkpoint_dir`` restored by a fit with ``device='cpu'``;
- the default fine-tune (``ABCClustering(kernel=ContextualKernel(random_state=0)).fit``) on digits 0-4,
  then 30 sets of unseen digits as ``benchmarks/own_kernel.py`` draws them: fit wall time and mean ARI;
- the shipped Omniglot ensemble (convolutional embedder) on the 240 bundled Omniglot drawings: same labels;
- ``fit_predict`` wall seconds at n = 1,000, 5,000, 20,000 (median of 3) and 30,000 (sparse mode),
  against ``SpectralClustering(affinity='nearest_neighbors')`` given the true ``k`` on the CPU.

Prints a table and writes ``benchmarks/results/cuda_check.json``.  Without a CUDA device it says so and
exits with status 2 (nothing to compare).  Device results differ in the last bits (other kernels and
reduction orders), so the labels are compared by ARI, not bit for bit.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch
from result_files import add_output_argument, output_path
from sklearn.cluster import SpectralClustering
from sklearn.datasets import load_digits, load_iris, make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

import skabc
from skabc import ABCClustering, ContextualKernel, pretrained
from skabc.datasets import load_omniglot_sample, make_circles_sets

BACKENDS = ("sab", "isab", "sampled", "opa")
TIMING_SIZES = (1_000, 5_000, 20_000)
SMALL = dict(d_model=32, n_blocks=2, sets_per_epoch=64, set_size=(50, 150), init="scratch", random_state=0,
             verbose=0)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _device(kernel) -> str:
    return str(next(kernel.module_.parameters()).device)


def _circles():
    return make_circles_sets(n_sets=60, set_size=(100, 200), random_state=1)


def zero_shot(arrays: dict) -> dict:
    datasets = {"blobs": make_blobs(1000, centers=3, random_state=0),
                "moons": make_moons(1000, noise=0.05, random_state=0),
                "iris": load_iris(return_X_y=True), "digits": load_digits(return_X_y=True)}
    out = {}
    for name, (X, y) in datasets.items():
        X = StandardScaler().fit_transform(X)
        for k in (None, len(np.unique(y))):
            model = ABCClustering(n_clusters=k, random_state=0)
            key = f"{name}, k {'given' if k else 'unknown'}"
            arrays[key] = model.fit_predict(X)
            arrays[key + " affinity"] = np.asarray(model.kernel_.affinity(X[:300]))
            out[key] = {"ari": adjusted_rand_score(y, arrays[key]), "k": len(np.unique(arrays[key])),
                        "device": _device(model.kernel_)}
    return out


def backends(arrays: dict) -> dict:
    X, y, groups = _circles()
    out = {}
    for attention in BACKENDS:
        kernel = ContextualKernel(attention=attention, max_epochs=3, **SMALL).fit(X, y, groups=groups)
        affinity = np.asarray(kernel.affinity(X[groups == 0]))
        out[attention] = {"device": _device(kernel), "finite": bool(np.isfinite(affinity).all()),
                          "train_loss": [float(v) for v in kernel.net_.history[:, "train_loss"]]}
    return out


def save_load(arrays: dict) -> dict:
    X, y, groups = _circles()
    kernel = ContextualKernel(max_epochs=2, **SMALL).fit(X, y, groups=groups)
    expected = np.asarray(kernel.affinity(X[groups == 1]))
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.safetensors"
        kernel.save(path)
        for device in ("cpu", "auto"):
            loaded = ContextualKernel.load(path, device=device)
            out[f"load on {device}"] = {"device": _device(loaded), "max_abs_diff": float(
                np.abs(np.asarray(loaded.affinity(X[groups == 1])) - expected).max())}
    unpickled = pickle.loads(pickle.dumps(kernel))
    out["pickle"] = {"device": _device(unpickled),
                     "max_abs_diff": float(np.abs(np.asarray(unpickled.affinity(X[groups == 1])) - expected).max())}
    return out


def checkpoint_across_devices(arrays: dict) -> dict:
    X, y, groups = _circles()
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the restore says what it does
        first = ContextualKernel(max_epochs=3, checkpoint_dir=folder, **SMALL).fit(X, y, groups=groups)
        again = ContextualKernel(max_epochs=3, checkpoint_dir=folder, device="cpu", **SMALL).fit(X, y, groups=groups)
    a, b = np.asarray(first.affinity(X[groups == 2])), np.asarray(again.affinity(X[groups == 2]))
    return {"trained on": _device(first), "restored on": _device(again), "max_abs_diff": float(np.abs(a - b).max())}


def fine_tune_digits(arrays: dict) -> dict:
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    rows = y < 5
    _sync()
    start = time.perf_counter()
    model = ABCClustering(kernel=ContextualKernel(random_state=0), random_state=0).fit(X[rows], y[rows])
    _sync()
    seconds = time.perf_counter() - start
    rng = np.random.default_rng([31_001, 5])  # benchmarks/own_kernel.py's sets of digits 5-9
    scores = []
    for _ in range(30):
        chosen = rng.choice(np.arange(5, 10), int(rng.integers(2, 6)), replace=False)
        pick = rng.choice(np.flatnonzero(np.isin(y, chosen)), 100, replace=False)
        scores.append(adjusted_rand_score(y[pick], model.predict(X[pick])))
    return {"fit_wall_s": seconds, "mean_ari": float(np.mean(scores)), "device": _device(model.kernel_),
            "epochs": len(model.kernel_.net_.history), "init": getattr(model.kernel_, "init_", None)}


def omniglot(arrays: dict) -> dict:
    kernel = pretrained.load("omniglot")
    sample = load_omniglot_sample()  # 240 bundled drawings of 12 characters: a set with structure to agree on
    arrays["omniglot"] = ABCClustering(kernel=kernel, random_state=0).fit_predict(sample.data)
    return {"type": type(kernel).__name__, "k": len(np.unique(arrays["omniglot"])),
            "ari": adjusted_rand_score(sample.target, arrays["omniglot"])}


def timing(arrays: dict) -> dict:
    out = {}
    for n in (*TIMING_SIZES, 30_000):
        X, y = make_blobs(n, centers=3, random_state=0)
        X = StandardScaler().fit_transform(X)
        ABCClustering(random_state=0).fit_predict(X[:500])  # warm-up: weights, CUDA context
        seconds = []
        for _ in range(3 if n in TIMING_SIZES else 1):
            _sync()
            start = time.perf_counter()
            labels = ABCClustering(random_state=0).fit_predict(X)
            _sync()
            seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        SpectralClustering(3, affinity="nearest_neighbors", eigen_solver="arpack", random_state=0).fit_predict(X)
        out[str(n)] = {"abc_s": float(np.median(seconds)), "spectral_knn_s": time.perf_counter() - start,
                       "k": len(np.unique(labels)), "ari": adjusted_rand_score(y, labels)}
    return out


CHECKS = (zero_shot, backends, save_load, checkpoint_across_devices, fine_tune_digits, omniglot, timing)


def worker(folder: Path) -> dict:
    """Run every check on whatever torch sees; ``folder/<side>.json`` and ``.npz`` hold the results."""
    side = "cuda" if torch.cuda.is_available() else "cpu"
    folder.mkdir(parents=True, exist_ok=True)
    arrays, record = {}, {"side": side, "torch": torch.__version__, "skabc": skabc.__version__,
                          "gpu": torch.cuda.get_device_name(0) if side == "cuda" else None, "checks": {}}
    for check in CHECKS:
        start = time.perf_counter()
        try:
            record["checks"][check.__name__] = {"ok": True, "result": check(arrays)}
        except Exception as exc:  # a failing check is a result: the others still run
            record["checks"][check.__name__] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                                                "traceback": traceback.format_exc()[-4000:]}
        record["checks"][check.__name__]["seconds"] = time.perf_counter() - start
        print(f"{side}: {check.__name__}: {'ok' if record['checks'][check.__name__]['ok'] else 'FAILED'}",
              flush=True)
        # Written after every check: a run cut short by a time limit keeps what it measured.
        np.savez_compressed(folder / f"{side}.npz", **arrays)
        (folder / f"{side}.json").write_text(json.dumps(record, indent=1, default=str))
    return record


def _load_side(folder: Path, side: str) -> tuple[dict, dict]:
    """One side's record and arrays; a clear SystemExit naming the file when it is missing or unreadable."""
    try:
        record = json.loads((folder / f"{side}.json").read_text())
        with np.load(folder / f"{side}.npz") as arrays:
            return record, {key: arrays[key] for key in arrays.files}
    except (OSError, ValueError) as exc:  # missing, or not JSON / npz (a run killed while writing)
        raise SystemExit(f"cuda_check: cannot read the {side} side in {folder}: {type(exc).__name__}: {exc}") from None


def compare(folder: Path) -> dict:
    """Both sides' records, and the agreement of their zero-shot labels and affinities."""
    loaded = {side: _load_side(folder, side) for side in ("cuda", "cpu")}
    records, arrays = {side: loaded[side][0] for side in loaded}, {side: loaded[side][1] for side in loaded}
    agreement = {}
    for key in arrays["cpu"]:
        if key not in arrays["cuda"]:
            continue
        a, b = arrays["cpu"][key], arrays["cuda"][key]
        if a.shape != b.shape:
            agreement[key] = {"shapes_differ": 1.0}
        else:
            agreement[key] = ({"max_abs_diff": float(np.abs(a - b).max())} if key.endswith("affinity")
                              else {"ari_between_devices": adjusted_rand_score(a, b)})
    failed = [f"{side}: {name}: {check.get('error', 'no result recorded')}" for side, record in records.items()
              for name, check in record.get("checks", {}).items() if not check.get("ok", False)]
    failed += [f"{side}: {check.__name__}: not run (the side was cut short)" for side, record in records.items()
               for check in CHECKS if check.__name__ not in record.get("checks", {})]
    # A GPU machine where device='auto' stayed on the CPU would otherwise compare the CPU with itself and pass.
    devices = {result.get("device") for result in
               (records["cuda"].get("checks", {}).get("zero_shot", {}).get("result") or {}).values()}
    if records["cuda"].get("side") != "cuda" or any(not str(device).startswith("cuda") for device in devices):
        failed.append(f"cuda: the CUDA side ran on {sorted(map(str, devices)) or records['cuda'].get('side')}")
    failed += [f"{key}: the two sides' arrays differ in shape" for key, value in agreement.items()
               if "shapes_differ" in value]
    return {"records": records, "agreement": agreement, "failed": failed}


def table(result: dict) -> str:
    lines = ["| check | agreement (CPU vs CUDA) |", "|---|---|"]
    lines += [f"| {key} | {', '.join(f'{k} {v:.4g}' for k, v in value.items())} |"
              for key, value in result["agreement"].items()]
    cuda, cpu = (result["records"][side].get("checks", {}).get("timing", {}).get("result") or {}
                 for side in ("cuda", "cpu"))
    lines += ["", "| n | ABC on CUDA (s) | ABC on the CPU (s) | SpectralClustering kNN, CPU (s) |", "|---|---|---|---|"]
    lines += [f"| {n} | {cuda[n]['abc_s']:.2f} | {cpu.get(n, {}).get('abc_s', float('nan')):.2f} | "
              f"{cuda[n]['spectral_knn_s']:.2f} |" for n in cuda]
    lines += ["", "Failed checks: " + ("; ".join(result["failed"]) if result["failed"] else "none")]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", metavar="DIR", help="run the checks on this side only, into DIR")
    parser.add_argument("--folder", metavar="DIR", help="keep each side's results here (default: a new temp folder)")
    parser.add_argument("--compare", metavar="DIR", help="compare the two sides already in DIR; run nothing")
    add_output_argument(parser, "cuda_check.json")
    args = parser.parse_args(argv)
    if args.worker:
        worker(Path(args.worker))
        return 0
    if args.compare:
        return _report(Path(args.compare), args.output)
    if not torch.cuda.is_available():
        print("cuda_check: torch sees no CUDA device here, so there is nothing to compare; run it where one is.")
        return 2
    folder = Path(args.folder or tempfile.mkdtemp(prefix="cuda_check_"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"each side's results: {folder} (kept: compare them later with --compare {folder})", flush=True)
    for hidden in (False, True):
        env = {**os.environ, **({"CUDA_VISIBLE_DEVICES": ""} if hidden else {})}
        subprocess.run([sys.executable, __file__, "--worker", str(folder)], env=env, check=True)
    return _report(folder, args.output)


def _report(folder: Path, output: str | None) -> int:
    result = compare(folder)
    result["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count()}
    print(table(result))
    # A comparison with failed or missing checks never replaces the committed full result.
    path = output_path("cuda_check.json", partial=bool(result["failed"]), output=output)
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"wrote {path}")
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
