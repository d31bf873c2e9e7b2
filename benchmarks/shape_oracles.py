"""What a rule that knows the truth scores on own_kernel.py's circles and arcs: each point to the nearest true shape.

Usage
-----
python benchmarks/shape_oracles.py            # -> benchmarks/results/shape_oracles.json

Why.  Issue 22 asks for an eigengap ARI of at least 0.80 on fresh sets of circles and of one more shape
family; ``own_kernel.py`` measures both on 60 test groups each.  Where shapes cross, some points are
ambiguous for any method, so the same bar asks more of one family than of another.  This script puts an
oracle beside it: for every test group, each true cluster's circle is fitted to its own points by least
squares (Kasa's algebraic fit) and its arc is the circle minus the largest angular gap between those
points; every point then goes to the nearest fitted arc.  The rule knows ``k`` and every shape, which no
clusterer does; it is not the best such rule (weighing the arcs by their density with the generator's
noise scored 0.884 on the arcs where it scores 0.872, review 46d), and fitting the shapes to the true
clusters flatters it a little (on 60 other arcs sets, seed 38_102, 0.869 where the nearest arc by the
generator's own parameters scored 0.859).  Clusters of collinear points would get a meaningless circle;
the generators here draw none.

Writes the mean ARI of that rule per family (the same test groups as ``own_kernel.py``: its generators and
seeds), beside ``own_kernel.json``'s eigengap ARI of ``ContextualKernel()`` defaults where that file exists.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from own_kernel import ARCS_TEST_SEED, CIRCLES_TEST_SEED, N_SETS, arcs, circles
from sklearn.metrics import adjusted_rand_score

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = {"circles": (circles, CIRCLES_TEST_SEED), "arcs": (arcs, ARCS_TEST_SEED)}
OWN_KERNEL_METHOD = "ABC defaults, eigengap (k unknown)"


def fit_arc(points: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """Centre, radius, start angle and angular span of the arc through ``points`` (2-D)."""
    design = np.column_stack([points, np.ones(len(points))])
    (a, b, c), *_ = np.linalg.lstsq(design, (points**2).sum(axis=1), rcond=None)
    centre = np.array([a / 2, b / 2])
    radius = float(np.sqrt(max(c + centre @ centre, 0.0)))
    angles = np.sort(np.arctan2(*(points - centre).T[::-1]))
    gaps = np.diff(np.append(angles, angles[0] + 2 * np.pi))
    widest = int(gaps.argmax())
    start = angles[(widest + 1) % len(angles)]
    return centre, radius, float(start), float(2 * np.pi - gaps[widest])


def distance_to_arc(X: np.ndarray, centre: np.ndarray, radius: float, start: float, span: float) -> np.ndarray:
    """Euclidean distance of every row of ``X`` to the arc."""
    offset = X - centre
    along = (np.arctan2(offset[:, 1], offset[:, 0]) - start) % (2 * np.pi)
    to_circle = np.abs(np.linalg.norm(offset, axis=1) - radius)
    ends = centre + radius * np.array([[np.cos(start), np.sin(start)],
                                       [np.cos(start + span), np.sin(start + span)]])
    to_ends = np.linalg.norm(X[:, None, :] - ends[None], axis=2).min(axis=1)
    return np.where(along <= span, to_circle, to_ends)


def nearest_shape_labels(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's nearest arc among the arcs fitted to the true clusters of ``y``."""
    classes = np.unique(y)
    distances = np.column_stack([distance_to_arc(X, *fit_arc(X[y == label])) for label in classes])
    return classes[distances.argmin(axis=1)]


def oracle(make, seed: int) -> dict:
    X, y, groups = make(N_SETS * 2, seed)
    scores = [adjusted_rand_score(y[groups == g], nearest_shape_labels(X[groups == g], y[groups == g]))
              for g in np.unique(groups)]
    return {"n_test_sets": len(scores), "mean": float(np.mean(scores)),
            "se": float(np.std(scores, ddof=1) / np.sqrt(len(scores)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.parse_args()
    own = ROOT / "benchmarks" / "results" / "own_kernel.json"
    measured = json.loads(own.read_text()) if own.exists() else {}
    result = {"benchmark": "shape_oracles", "command": "python benchmarks/shape_oracles.py", "families": {}}
    print(f"{'family':<8}  {'nearest true shape':>18}  {'ContextualKernel() defaults':>27}  {'bar':>4}")
    for family, (make, seed) in FAMILIES.items():
        row = {"nearest true shape (oracle)": oracle(make, seed), "bar": 0.80}
        if family in measured:
            row["ContextualKernel() defaults, own_kernel.json"] = measured[family]["scores"][OWN_KERNEL_METHOD]
        result["families"][family] = row
        abc = row.get("ContextualKernel() defaults, own_kernel.json", {}).get("mean", float("nan"))
        print(f"{family:<8}  {row['nearest true shape (oracle)']['mean']:>18.3f}  {abc:>27.3f}  {0.80:>4.2f}")
    out = ROOT / "benchmarks" / "results" / "shape_oracles.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
