"""Selection run: the power of the generic kernel's affinity, re-chosen for the full pipeline of ``ABCClustering()``.

Usage
-----
OMP_NUM_THREADS=1 python benchmarks/affinity_power.py              # validation sets and two fresh groups
OMP_NUM_THREADS=1 python benchmarks/affinity_power.py --only fresh

Why.  The generic kernel recommends ``affinity_power=4`` (``recommended_clustering()``), chosen when it shipped
(2026-12-01, ``train_generic_v2.py --compare``) with the consensus ``k`` alone, before the arbiters and the Gaussian
split.  On throw-away small sets of 10-300 rows (``make_clustering_sets``, session 44) the power 2 estimated ``k``
closer and scored higher in 9 of 10 size bins, so the question was asked again for the whole pipeline.

Candidates: ``ABCClustering(affinity_power=p, random_state=0)`` for p in :data:`POWERS`, everything else as
``ABCClustering()`` resolves it (arbiter ``'generic'``, ``gaussian_split='auto'``), against the shipped 4.
Rule (fixed before the first run): on the 260 validation sets of ``train_arbiter.py`` a paired gain over 4 above
one SE on the union and no validation group down by more than 0.01; the two fresh groups of ``gaussian_split.py``
(seeds 5151, 6161) none down by more than 0.01; if both candidates pass, the larger union gain.  Only then would the
benchmarks quoting ``ABCClustering()`` decide (``zero_shot.py``'s three ABC means and ``many_clusters.py``, none down
by more than 0.01).  Writes ``benchmarks/results/affinity_power.json``.

Record (2026-12-05, this script, 470 CPU-s): **both fail, the power stays 4.**  Validation union 0.6938 -> 0.6807
with 2 (-0.0130 +- 0.0083) and 0.6897 with 3 (-0.0040 +- 0.0066): gallery toys 0.938 -> 0.947 and the other
wut + graves sets 0.677 -> 0.724 / 0.699 gain, but g2mg/h2mg pairs of Gaussians 0.469 -> 0.385 / 0.424, synthetic
0.712 -> 0.678 / 0.710 and many small clusters 0.614 -> 0.602 / 0.595 lose; fresh groups +0.003 / +0.032 and
-0.053 / -0.005.  A softer affinity counts small sets better and merges close Gaussians and small clusters.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gaussian_split

from skabc import ABCClustering

SHIPPED = 4.0
POWERS = (2.0, 3.0)


def measure(sets) -> dict:
    rows = []
    for name, X, y, scored in sets:
        X = np.asarray(X, dtype=np.float64)
        scored = np.ones(len(y), dtype=bool) if scored is None else np.asarray(scored)
        row = {"name": name}
        for power in (SHIPPED, *POWERS):
            labels = ABCClustering(affinity_power=power, random_state=0).fit(X).labels_
            row[str(power)] = float(adjusted_rand_score(y[scored], labels[scored]))
        rows.append(row)
    groups = np.array([r["name"].split(":")[0] for r in rows])
    before = np.array([r[str(SHIPPED)] for r in rows])
    out = {"n_sets": len(rows), "sets": rows, "powers": {}}
    for power in POWERS:
        after = np.array([r[str(power)] for r in rows])
        diff = after - before
        out["powers"][str(power)] = {
            "union": [float(before.mean()), float(after.mean())], "paired_gain": float(diff.mean()),
            "paired_se": float(diff.std(ddof=1) / np.sqrt(diff.size)),
            "groups": {g: [float(before[groups == g].mean()), float(after[groups == g].mean())]
                       for g in dict.fromkeys(groups)}}
    return out


def verdict(parts: dict) -> dict:
    """The pre-registered rule per candidate power (needs the validation part and both fresh groups)."""
    out = {}
    for power in map(str, POWERS):
        validation = parts["validation"]["powers"][power]
        passes = (validation["paired_gain"] > validation["paired_se"]
                  and all(b - a >= -0.01 for a, b in validation["groups"].values())
                  and all(parts[f]["powers"][power]["union"][1] - parts[f]["powers"][power]["union"][0] >= -0.01
                          for f in ("fresh", "fresh2")))
        out[power] = bool(passes)
    return out


def _power_line(part: str, power: str, s: dict) -> str:
    groups = ", ".join(f"{g} {a:.3f} -> {b:.3f}" for g, (a, b) in s["groups"].items())
    return (f"{part} power {power}: union {s['union'][0]:.4f} -> {s['union'][1]:.4f} "
            f"({s['paired_gain']:+.4f} +- {s['paired_se']:.4f}); {groups}")


def _judge(result: dict) -> None:
    result["passes"] = verdict(result["parts"])
    print("rule:", ", ".join(f"power {p} {'passes' if ok else 'fails'}" for p, ok in result["passes"].items()))


def main(argv=None) -> int:
    sources = {"validation": gaussian_split.validation_sets, "fresh": gaussian_split.fresh_sets,
               "fresh2": lambda: gaussian_split.fresh_sets(gaussian_split.SECOND_FRESH_SEED, "fresh2")}
    return gaussian_split.selection_main("affinity_power", __doc__, sources, measure, "powers", _power_line, argv,
                                         finish=_judge)


if __name__ == "__main__":
    raise SystemExit(main())
