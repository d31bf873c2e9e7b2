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
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_generic_v6 as v6
import train_generic_v7 as v7
from generic_stage import FreshPoolDataset, prior_validation_sets, recipe_main, train_fresh_pools

ROOT = v7.ROOT
DIRECTORY = ROOT / "benchmarks" / ".checkpoints" / "generic_v9"
SEED = 7_600_000
VALIDATION_SEED = v7.VALIDATION_SEED  # step 1 on v7's held-out sets: the same prior
ANCHOR = 50.0


def train(threads: int, stop_after_minutes: float | None) -> None:
    """Train (or resume) until the schedule, the CPU budget or ``stop_after_minutes`` of wall time ends."""
    train_fresh_pools(v7.KERNEL, DIRECTORY, v6.shipped_network,
                      FreshPoolDataset(v7.SETS_PER_EPOCH, v7.BATCH_SIZE, SEED, v7.FAMILIES, v7.POOL), SEED,
                      v7.CPU_BUDGET_SECONDS, threads, stop_after_minutes, "generic v9",
                      on_initialized=functools.partial(v7.anchor_to_shipped, strength=ANCHOR))


def main(argv=None) -> int:
    return recipe_main(argv, __doc__.split("\n\n")[0], train=train, kernel_params=v7.KERNEL, directory=DIRECTORY,
                       shipped=v7.SHIPPED,
                       validation_sets=lambda: prior_validation_sets(v7.FAMILIES, v7.POOL, VALIDATION_SEED),
                       extra_groups=v6.extra_groups, out=ROOT / "benchmarks" / "results" / "generic_v9_compare.json")


if __name__ == "__main__":
    raise SystemExit(main())
