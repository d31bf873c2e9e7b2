"""Recipe of a candidate generic kernel v9: v7 with a quarter of its anchor.

Usage
-----
python benchmarks/train_generic_v9.py --train [--threads 1] [--stop-after MINUTES]  # resumable, checkpointed
python benchmarks/train_generic_v9.py --evaluate                 # held-out BCE: latest checkpoint vs shipped kernel
python benchmarks/train_generic_v9.py --export OUT.safetensors   # the latest checkpoint as a kernel file
python benchmarks/train_generic_v9.py --compare OUT.safetensors  # step 2 of the ship rule (v7's)

Why.  v6 (no anchor) moved the shipped weights by 2.1 % of their norm and lost the 13 listed clustbench sets
(0.601 -> 0.514); v7 (decoupled L2-SP of 200) moved them by 0.13 %, kept those sets (0.637) and changed nothing
else either (``informative`` 0.636 -> 0.636; union +0.001 +- 0.004, step 2 fails).  v9 is the one step between
them, chosen from those two results on the validation groups before v9 ran: everything as in v7 (prior, tables,
schedule, budget, ship rule) but :data:`ANCHOR` = 50, which lets a steady gradient hold a weight about four times
as far from its shipped value (``1 / ANCHOR``) and forgets a step's noise over 200 steps instead of 50.  New seeds.

Record (2026-12-04/05)
----------------------
* ``--train``: 100 epochs on one thread in three runs (the first stopped at epoch 48 to free its core for v8's
  arbiter rows, the second ended by ``--stop-after 5``; each resumed from its checkpoint), 00:07 to 00:47 by
  ``date``, **1,174 CPU-seconds = 0.33 CPU-hours** (``time.json``; the stopped epoch's part is not counted).  Median
  |change| of the weights 0.00040 (v7 0.00017, v8 0.00092, v6 0.0025), 0.32 % of their norm.
  ``benchmarks/weights/generic_v9_candidate.safetensors`` (sha256 244480f7...).
* Step 1 (``--evaluate``): held-out BCE **0.258** against the shipped kernel's 0.275 on v7's 128 held-out sets:
  passes.
* Step 2 (``--compare``, ``benchmarks/results/generic_v9_compare.json``): **passes.**  Both at A**4 with the plain
  eigengap: union of 220 validation sets 0.681 against 0.667 (paired +0.014 +- 0.007); clustbench (13) 0.618 vs
  0.601, the other 19 clustbench sets 0.613 vs 0.591, gaussians 0.491 vs 0.406, ``informative`` 0.660 vs 0.636, wide
  0.634 vs 0.629, synthetic 0.700 vs 0.704, gallery toys 0.915 vs 0.918 (the largest loss, -0.003).
* Step 3 (``train_arbiter.py --kernel benchmarks/weights/generic_v9_candidate.safetensors --collect prior`` in two
  parts and ``--collect validation``, 00:55-01:20 by ``date`` on two cores, shared with tests; ``--fit --kernel ...
  --output benchmarks/results/arbiter_v9_compare.json``): **fails; not shipped.**  The candidate with an arbiter of
  its own against the shipped pipeline on the arbiter's 260 validation sets: union 0.701 against 0.688 (paired
  +0.012 +- 0.009), but clustbench (13) 0.670 against 0.702, gallery toys 0.906 against 0.922 and synthetic 0.699
  against 0.712 fall by more than 0.01 (gaussians 0.612 vs 0.469, the other 19 clustbench sets 0.717 vs 0.678,
  ``informative`` 0.679 vs 0.652, many clusters 0.622 vs 0.608, wide 0.691 vs 0.693; |k error| 3.58 against 3.64).
  As with v8, the kernel alone gains on the 13 listed sets and the pipeline with its arbiter loses there.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_generic_v6 as v6
import train_generic_v7 as v7
from generic_stage import prior_validation_sets, recipe_main

ROOT = v7.ROOT
DIRECTORY = ROOT / "benchmarks" / ".checkpoints" / "generic_v9"
SEED = 7_600_000
VALIDATION_SEED = v7.VALIDATION_SEED  # step 1 on v7's held-out sets: the same prior
ANCHOR = 50.0


def train(threads: int, stop_after_minutes: float | None) -> None:
    """Train (or resume) until the schedule, the CPU budget or ``stop_after_minutes`` of wall time ends."""
    v7.train_anchored(DIRECTORY, SEED, ANCHOR, threads, stop_after_minutes, "generic v9")


def main(argv=None) -> int:
    return recipe_main(argv, __doc__.split("\n\n")[0], train=train, kernel_params=v7.KERNEL, directory=DIRECTORY,
                       shipped=v7.SHIPPED,
                       validation_sets=lambda: prior_validation_sets(v7.FAMILIES, v7.POOL, VALIDATION_SEED),
                       extra_groups=v6.extra_groups, out=ROOT / "benchmarks" / "results" / "generic_v9_compare.json")


if __name__ == "__main__":
    raise SystemExit(main())
