"""The validation batteries of Gagolewski's clustering benchmark suite, loaded and scored by its protocol.

The data (``wut``, ``graves``, ``g2mg``, ``h2mg``) are not shipped with skabc;
``../shared/data/clustbench/README.md`` describes the copy and the protocol:
StandardScaler, constant columns dropped, ``k = max(labels0)``, ARI on the
points whose reference label is not 0 (noise), a method with no k scored on its
own partition (its noise label counted as one more cluster).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

BATTERIES = ("wut", "graves", "g2mg", "h2mg")
#: The 13 sets of the README's reference table.
LISTED = {"graves": ("dense", "fuzzyx", "line", "parabolic", "ring_noisy", "zigzag_noisy"),
          "wut": ("circles", "cross", "graph", "labirynth", "mk3", "smile", "trapped_lovers")}
#: The README's reference mean ARI on the 13 listed sets (2026-12-01, scikit-learn 1.9.1, genieclust 1.3.0),
#: keyed by the benchmark's method names.
REFERENCE_MEAN_ARI = {"Genie": 0.803, "SC_nn": 0.756, "GMM": 0.610, "KMeans": 0.415, "HDBSCAN": 0.439,
                      "ABC_k": 0.751, "ABC": 0.575}
RELATIVE_HOME = Path("shared") / "data" / "clustbench"


def find_data_home(root: Path) -> Path | None:
    """The first ``shared/data/clustbench`` in a folder above ``root`` (a worktree may sit deeper), or None."""
    for parent in root.resolve().parents:
        candidate = parent / RELATIVE_HOME
        if (candidate / "README.md").is_file():
            return candidate
    return None


def resolve_data_home(data_home, root: Path) -> Path | None:
    """``data_home`` (a ``--data-home`` option) or :func:`find_data_home`'s, if it holds the listed sets' batteries.

    ``None`` where it does not (an empty or wrong folder included): the caller skips the batteries and says so,
    instead of failing on the first missing file.
    """
    home = Path(data_home) if data_home else find_data_home(root)
    if home is None or not all((home / battery / f"{name}.data.gz").is_file()
                               for battery, names in LISTED.items() for name in names):
        return None
    return home


def dataset_names(home: Path, battery: str) -> list[str]:
    """Every dataset of one battery, sorted."""
    if battery not in BATTERIES:
        raise ValueError(f"unknown battery {battery!r}; expected one of {BATTERIES}")
    folder = Path(home) / battery
    if not folder.is_dir():
        raise FileNotFoundError(f"no battery folder {folder}")
    return sorted(p.name[: -len(".data.gz")] for p in folder.glob("*.data.gz"))


def _read(path: Path) -> np.ndarray:
    with gzip.open(path, "rt") as handle:
        return np.loadtxt(handle, ndmin=2)


def load(home: Path, battery: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The protocol's points (standardised, constant columns dropped) and the reference labels ``labels0``."""
    from sklearn.preprocessing import StandardScaler

    folder = Path(home) / battery
    X = _read(folder / f"{name}.data.gz")
    labels = _read(folder / f"{name}.labels0.gz").ravel().astype(int)
    if len(labels) != len(X):
        raise ValueError(f"{battery}/{name}: {len(X)} rows but {len(labels)} labels")
    X = X[:, np.ptp(X, axis=0) > 0]
    return StandardScaler().fit_transform(X), labels


def n_points(home: Path, battery: str, name: str) -> int:
    """The number of points of one set (its reference labels read alone)."""
    return len(_read(Path(home) / battery / f"{name}.labels0.gz"))


def score(reference: np.ndarray, predicted: np.ndarray) -> float:
    """ARI on the points whose reference label is not 0 (the suite's noise points are not scored)."""
    from sklearn.metrics import adjusted_rand_score

    kept = reference != 0
    return float(adjusted_rand_score(reference[kept], np.asarray(predicted)[kept]))


def subsample(labels: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    """Indices of at most ``size`` points drawn without replacement (for --quick smoke runs only)."""
    if len(labels) <= size:
        return np.arange(len(labels))
    return np.sort(np.random.RandomState(seed).choice(len(labels), size, replace=False))
