"""The circles problem (ABC paper, section 5.1): train ABC variants, compare with spectral clustering.

Usage
-----
python benchmarks/circles.py --train multiplicative   # or additive, pairwise, all (resumable)
python benchmarks/circles.py --eval                   # table + JSON from the kept weights

Training checkpoints every epoch under ``benchmarks/.checkpoints/<variant>``;
run the same command again to resume.  Finished weights are written to
``skabc/pretrained/circles_<variant>.safetensors`` (the demo uses them).
Evaluation draws fresh test sets from seeds disjoint from training.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.cluster import SpectralClustering
from sklearn.metrics import adjusted_rand_score

from skabc import ABCClustering, ContextualKernel
from skabc.datasets import make_circles_sets
from skabc.pretrained import PRETRAINED_DIR

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "benchmarks" / ".checkpoints"

# One architecture for the three variants; the pairwise ablation drops the set blocks.
COMMON = dict(d_model=64, n_heads=4, layer_norm="pre", set_size=(100, 300), batch_size=32,
              sets_per_epoch=1024, lr=1e-3, random_state=0)
VARIANTS = {
    "multiplicative": dict(COMMON, compat="multiplicative", n_blocks=6, max_epochs=300),
    "additive": dict(COMMON, compat="additive", n_blocks=6, max_epochs=120),
    "pairwise": dict(COMMON, compat="multiplicative", n_blocks=0, max_epochs=60),
}
TRAIN_SEED, TEST_SEED = 12345, 987654321


def train(variant: str, threads: int) -> None:
    torch.set_num_threads(threads)
    X, y, groups = make_circles_sets(n_sets=10_000, set_size=300, random_state=TRAIN_SEED)
    kernel = ContextualKernel(**VARIANTS[variant], checkpoint_dir=CHECKPOINTS / variant, verbose=1)
    start = time.process_time()
    kernel.fit(X, y, groups=groups)
    cpu = time.process_time() - start
    out = PRETRAINED_DIR / f"circles_{variant}.safetensors"
    kernel.save(out)
    epochs = len(kernel.net_.history)
    seconds = sum(kernel.net_.history[:, "dur"])
    print(f"{variant}: {epochs} epochs, {seconds / 60:.1f} min of training wall time "
          f"(this process: {cpu / 60:.1f} CPU-min), saved {out}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", choices=[*VARIANTS, "all"])
    parser.add_argument("--eval", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.train:
        for variant in VARIANTS if args.train == "all" else [args.train]:
            train(variant, args.threads)
    if args.eval:
        evaluate()
    if not (args.train or args.eval):
        parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
