"""Recipe of a candidate generic kernel v7: the shipped kernel fine-tuned on its own prior plus plain tables, anchored.

Usage
-----
python benchmarks/train_generic_v7.py --train [--threads 1] [--stop-after MINUTES]  # resumable, checkpointed
python benchmarks/train_generic_v7.py --evaluate                 # held-out BCE: latest checkpoint vs shipped kernel
python benchmarks/train_generic_v7.py --export OUT.safetensors   # the latest checkpoint as a kernel file
python benchmarks/train_generic_v7.py --compare OUT.safetensors  # step 2 of the ship rule (below)

Why.  v6 (``train_generic_v6.py``) fine-tuned the shipped kernel on v5's prior plus tables whose clusters differ in
a few columns (``'informative'``): ``ABCClustering`` with it fixed most slab and label-column tables
(``plain_tables.py``: slabs 0.505 -> 0.886) but the 13 listed clustbench sets fell from 0.601 to 0.514 (kernel
alone), although its weights moved little (median |change| 0.0025 against a median |weight| of 0.061, 2.1 % of
the weights' norm; 87 % of that drift by epoch 133 of 300).  Every further training of the shipped weights so far
(v2's geometry maps trained on, v3, v6) lost those 2-D shape sets.  Two causes are addressed together: v6 trained
on v5's prior, not on the one the shipped kernel learned (the shift alone can move what the kernel does on
shapes), and nothing held the weights near the shipped ones.

Design (fixed 2026-12-04 before the first step, not changed during the run)
---------------------------------------------------------------------------
* Network: the shipped generic kernel, its architecture and its weights; every weight trains.
* Anchor (L2-SP, decoupled): after every optimiser step each weight moves towards its shipped value by
  ``lr_t * ANCHOR * (w - w_shipped)`` (``lr_t`` the scheduled rate), in place of AdamW's decay towards zero
  (weight decay 0).  With :data:`ANCHOR` = 200 and the peak rate 1e-4, a weight forgets a step's noise with a
  time constant of 50 steps, and a steady gradient can hold it at most about ``1 / ANCHOR`` = 0.005 from its
  shipped value (Adam's steps are at most about ``lr`` each): v6's 90th-percentile drift was 0.0069.
* Data: every epoch a new pool of :data:`SETS_PER_EPOCH` whole sets (``generic_stage.FreshPoolDataset``,
  ``random_state = SEED + epoch``) from the shipped kernel's own prior (``train_generic_v2.POOL_FAMILIES``: the
  default families, scattered points, blobs at 0.40; 150-500 points, 1-64 features, up to 15 clusters) plus
  ``'informative'`` at weight 0.35 of 1.60 in all (22 %, about one set in five; 55 of 256 an epoch on average).
  Seeds used by nothing else.  (This line first said "0.35 of 2.45, about one set in seven", a slip of the
  arithmetic found in review after the run; v8 copied that share, see its docstring.)
* Optimisation: AdamW, peak lr 1e-4 (v6's), warm-up then cosine over :data:`EPOCHS` x 16 steps of 16 sets (v6's
  held-out loss had reached its final value by epoch 133), gradient norm clipped at 1.
* Budget: at most :data:`CPU_BUDGET_SECONDS` (0.75 CPU-hours) on one thread, on top of the shipped kernel's own.

Ship rule (v6's, fixed with the design)
---------------------------------------
1. ``--evaluate``: held-out BCE on :data:`VALIDATION_SEED`'s 128 sets of this prior below the shipped kernel's.
2. ``--compare``: ``train_generic_v2.compare`` (the kernel alone, its best power and k rule) on v5's validation
   groups plus the arbiter recipe's ``informative`` group (the groups v6 was judged on): paired gain over the
   shipped kernel above its standard error, no group down by more than 0.01.
3. The arbiter recollected for the candidate (``train_arbiter.py --kernel ... --collect``, ``--fit``) and the
   pipeline against the shipped one on the arbiter's validation union with ``informative``: the same rule.
   Only then ``benchmarks/zero_shot.py --eval`` and the issue's lines.

Record (2026-12-04)
-------------------
* ``--train``: 100 epochs (1,600 steps of 16 sets) in one run on one thread, 23:27 to 23:57 by ``date`` (the
  other core busy with v8 and tests), **1,324 CPU-seconds = 0.37 CPU-hours** (``time.json``); training loss 0.282
  at epoch 100.  The weights moved a fifteenth of v6's: median |change| 0.00017 (v6 0.0025), 0.13 % of the
  weights' norm (v6 2.1 %).  ``benchmarks/weights/generic_v7_candidate.safetensors`` (``--export``; sha256
  1c015c8f...).
* Step 1 (``--evaluate``): held-out BCE **0.261** against the shipped kernel's 0.275 on this prior's 128 validation
  sets: passes.
* Step 2 (``--compare``, ``benchmarks/results/generic_v7_compare.json``): **fails; not shipped.**  Both kernels at
  their best setting, A**4 with the plain eigengap: union of 220 sets 0.668 against 0.667 (paired +0.001 +- 0.004),
  below the rule's standard error.  The anchor kept what v6 lost (clustbench (13) 0.637 against 0.601, the other 19
  clustbench sets 0.601 against 0.591, gaussians 0.416 against 0.406) and also what v6 gained: ``informative``
  0.636 against 0.636, wide 0.624 against 0.629, synthetic 0.699 against 0.704, gallery toys 0.917 against 0.918.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_generic_v2 as v2
import train_generic_v5 as v5
import train_generic_v6 as v6
from generic_stage import FreshPoolDataset, prior_validation_sets, recipe_main, train_fresh_pools

ROOT = v2.ROOT
DIRECTORY = ROOT / "benchmarks" / ".checkpoints" / "generic_v7"
SHIPPED = v5.SHIPPED
SEED = 7_400_000
VALIDATION_SEED = 7_399_999
FAMILIES = {**v2.POOL_FAMILIES, "informative": 0.35}
POOL = dict(set_size=(150, 500), n_features=(1, 64), max_clusters=15)
SETS_PER_EPOCH, BATCH_SIZE = 256, 16
EPOCHS = 100
PEAK_LR = 1e-4
ANCHOR = 200.0
CPU_BUDGET_SECONDS = 0.75 * 3600
KERNEL = {**v6.KERNEL, "lr": PEAK_LR, "max_epochs": EPOCHS, "weight_decay": 0.0}


def anchor_to_shipped(net, strength: float = ANCHOR) -> None:
    """Pull every weight towards its shipped value after each optimiser step (decoupled L2-SP of ``strength``)."""
    from skabc import ContextualKernel

    anchors = ContextualKernel.load(SHIPPED, device="cpu").module_.state_dict()
    pairs = [(weight, anchors[name]) for name, weight in net.module_.named_parameters()]

    def pull(optimizer, args, kwargs) -> None:
        lr = optimizer.param_groups[0]["lr"]
        with torch.no_grad():
            for weight, anchor in pairs:
                weight.sub_(lr * strength * (weight - anchor))

    net.optimizer_.register_step_post_hook(pull)


def train_anchored(directory: Path, seed: int, strength: float, threads: int, stop_after_minutes: float | None,
                   label: str) -> None:
    """This recipe's training (prior, schedule, budget) with an anchor of ``strength``, checkpoints in ``directory``."""
    train_fresh_pools(KERNEL, directory, v6.shipped_network,
                      FreshPoolDataset(SETS_PER_EPOCH, BATCH_SIZE, seed, FAMILIES, POOL), seed, CPU_BUDGET_SECONDS,
                      threads, stop_after_minutes, label,
                      on_initialized=functools.partial(anchor_to_shipped, strength=strength))


def train(threads: int, stop_after_minutes: float | None) -> None:
    """Train (or resume) until the schedule, the CPU budget or ``stop_after_minutes`` of wall time ends."""
    train_anchored(DIRECTORY, SEED, ANCHOR, threads, stop_after_minutes, "generic v7")


def main(argv=None) -> int:
    return recipe_main(argv, __doc__.split("\n\n")[0], train=train, kernel_params=KERNEL, directory=DIRECTORY,
                       shipped=SHIPPED, validation_sets=lambda: prior_validation_sets(FAMILIES, POOL, VALIDATION_SEED),
                       extra_groups=v6.extra_groups, out=ROOT / "benchmarks" / "results" / "generic_v7_compare.json")


if __name__ == "__main__":
    raise SystemExit(main())
