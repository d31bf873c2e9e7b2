"""The ``skabc`` command line (also ``python -m skabc``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _demo(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from .cluster import ABCClustering
    from .datasets import make_circles_sets
    from .demo import compare_on_circles, format_table
    from .kernel import ContextualKernel
    from .pretrained import load

    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if args.train:
        print(f"Training a multiplicative ABC kernel from scratch for {args.epochs} epochs "
              "(the shipped one trained for 300; expect a weaker result).")
        X, y, groups = make_circles_sets(n_sets=2000, set_size=300, random_state=12345)
        kernel = ContextualKernel(d_model=64, n_blocks=6, set_size=(100, 300), sets_per_epoch=1024,
                                  max_epochs=args.epochs, random_state=0, verbose=0 if args.quiet else 1)
        kernels = {"multiplicative (trained now)": kernel.fit(X, y, groups=groups)}
    else:
        kernels = {"multiplicative": load("circles"), "additive": load("circles-additive"),
                   "pairwise": load("circles-pairwise")}
    print(f"Clustering {args.sets} fresh sets of 4 overlapping circles per size "
          "(mean adjusted Rand index ± s.e.; higher is better):\n")
    rows = compare_on_circles(kernels, set_sizes=(100, 200, 300), n_sets=args.sets, random_state=args.seed)
    print(format_table(rows))
    if args.plot:
        out = _figure(kernels, args.seed, Path(args.plot), ABCClustering, make_circles_sets, np)
        print(f"\nSaved the picture to {out}")
    print(f"\nDone in {time.perf_counter() - start:.0f} s.")
    return 0


def _figure(kernels, seed, out, ABCClustering, make_circles_sets, np):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.cluster import SpectralClustering
    from sklearn.metrics import adjusted_rand_score

    from .plotting import plot_clusters

    X, y, _ = make_circles_sets(n_sets=1, set_size=200, random_state=seed)
    panels = [(f"ABC {name}\n(k by eigengap)", ABCClustering(kernel=k, random_state=0).fit_predict(X))
              for name, k in kernels.items()]
    panels.append(("SpectralClustering rbf\n(given the true k)",
                   SpectralClustering(4, random_state=0).fit_predict(X)))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.3 * len(panels), 3.6))
    for ax, (title, labels) in zip(np.atleast_1d(axes), panels, strict=True):
        plot_clusters(X, labels, ax=ax, title=f"{title}\nARI {adjusted_rand_score(y, labels):.2f}")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skabc",
        description="Attention-Based Clustering: spectral clustering on a kernel learned from context.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="cluster points on overlapping circles: ABC vs SpectralClustering",
        description="Cluster fresh sets of points on 4 overlapping circles with the shipped ABC kernels and "
        "with SpectralClustering given the true number of clusters; print the mean ARI and save a picture.",
    )
    demo.add_argument("--sets", type=_positive_int, default=20, help="fresh test sets per set size (default: 20)")
    demo.add_argument("--seed", type=int, default=2024, help="seed of the test sets (default: 2024)")
    demo.add_argument("--plot", default="circles_demo.png", metavar="PNG",
                      help="where to save the picture ('' to skip; default: circles_demo.png)")
    demo.add_argument("--train", action="store_true", help="train a kernel from scratch instead of the shipped one")
    demo.add_argument("--epochs", type=_positive_int, default=20, help="epochs for --train (default: 20, ~5 CPU-min)")
    demo.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    demo.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        print(f"skabc {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
