"""The ``skabc`` command line (also ``python -m skabc``)."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import re
import sys
import time
import warnings
from pathlib import Path

from ._cli_files import check_distinct, check_output, check_picture, read_array, write_labels
from .nn.backends import ATTENTION_BACKENDS
from .nn.heads import COMPAT_FUNCTIONS


def _demo(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from .cluster import ABCClustering
    from .datasets import make_circles_sets
    from .demo import compare_on_circles, format_table
    from .kernels import ContextualKernel
    from .pretrained import load

    if args.plot is None:  # the default picture, unless matplotlib (the 'plot' extra) is missing
        args.plot = "circles_demo.png" if importlib.util.find_spec("matplotlib") else ""
        if not args.plot:
            print("No picture: matplotlib is not installed (pip install 'skabc[plot]').")
    if args.plot:
        check_picture(args.plot)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if args.train:
        print(f"Training a multiplicative ABC kernel from scratch for {args.epochs} epochs "
              "(the shipped one trained for 300; expect a weaker result).")
        X, y, groups = make_circles_sets(n_sets=2000, set_size=300, random_state=12345)
        kernel = ContextualKernel(init="scratch", d_model=64, n_blocks=6, set_size=(100, 300), sets_per_epoch=1024,
                                  max_epochs=args.epochs, random_state=0, verbose=0 if args.quiet else 1)
        kernels = {"multiplicative (trained now)": kernel.fit(X, y, groups=groups)}
        from .training.early_stopping import interrupted_by_user

        if interrupted_by_user(kernel.net_):  # fit keeps the partial kernel; the demo must not score it as trained
            raise KeyboardInterrupt
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
    from matplotlib.figure import Figure  # drawn without pyplot: the caller's backend and figures stay as they are
    from sklearn.cluster import SpectralClustering
    from sklearn.metrics import adjusted_rand_score

    from .plotting import plot_clusters

    X, y, _ = make_circles_sets(n_sets=1, set_size=200, random_state=seed)
    panels = [(f"ABC {name}\n(k by eigengap)", ABCClustering(kernel=k, random_state=0).fit_predict(X))
              for name, k in kernels.items()]
    panels.append(("SpectralClustering rbf\n(given the true k)",
                   SpectralClustering(4, random_state=0).fit_predict(X)))
    fig = Figure(figsize=(3.3 * len(panels), 3.6))
    for ax, (title, labels) in zip(np.atleast_1d(fig.subplots(1, len(panels))), panels, strict=True):
        plot_clusters(X, labels, ax=ax, title=f"{title}\nARI {adjusted_rand_score(y, labels):.2f}")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out


def _train(args: argparse.Namespace) -> int:
    from .kernels import ContextualKernel
    from .training.early_stopping import interrupted_by_user

    check_output(args.output, "output")
    check_distinct({"output": args.output}, {"X file": args.X, "y file": args.y, "groups file": args.groups})
    X = read_array(args.X, "X", 2, header=args.header)
    y = read_array(args.y, "y", 1, rows=len(X))
    groups = read_array(args.groups, "groups", 1, rows=len(X)) if args.groups else None
    # ContextualKernel()'s defaults (a fine-tune of the generic kernel on an automatic schedule) unless a network
    # option or --scratch asks for a new network; only the options given override the defaults.
    given = {"attention": args.attention, "compat": args.compat, "d_model": args.d_model, "n_blocks": args.n_blocks,
             "set_size": None if args.set_size is None else tuple(args.set_size), "max_time": args.max_time,
             "max_epochs": args.epochs}
    kernel = ContextualKernel(**{name: value for name, value in given.items() if value is not None},
                              init="scratch" if args.scratch else "auto", random_state=args.seed,
                              verbose=0 if args.quiet else 1)
    with contextlib.redirect_stdout(sys.stderr):  # the epoch log is progress: stdout keeps the results
        kernel.fit(X, y, groups=groups)
    interrupted = getattr(kernel, "net_", None) is not None and interrupted_by_user(kernel.net_)
    output = Path(args.output)
    renamed = interrupted and output.exists()
    if renamed:  # a partial run never replaces a kernel already there, nor any other existing file
        output = next(candidate for count in range(10**6) if not (candidate := output.with_name(
            f"{output.stem}.interrupted{f'-{count}' if count else ''}{output.suffix}")).exists())
    kernel.save(output)
    if interrupted:
        # The partial kernel is kept, as fit keeps it, but a script must not take it for a finished run.
        kept = f"; {args.output} was left as it was" if renamed else ""
        print(f"skabc train: interrupted; the partial kernel was saved to {output}{kept}", file=sys.stderr)
        return 130
    if not args.quiet:
        print(f"Saved the kernel to {args.output}")
    return 0


def _cluster(args: argparse.Namespace) -> int:
    from .cluster import ABCClustering
    from .pretrained import load_saved_kernel

    check_output(args.output, "output")
    check_distinct({"output": args.output, "--plot": args.plot},
                    {"X file": args.X, "groups file": args.groups, "--kernel file": args.kernel})
    if args.plot:
        check_picture(args.plot)
    X = read_array(args.X, "X", 2, header=args.header)
    groups = read_array(args.groups, "groups", 1, rows=len(X)) if args.groups else None
    bound = {} if args.max_clusters is None else {"max_clusters": args.max_clusters}  # else ABCClustering's
    if args.no_gaussian_split:
        bound["gaussian_split"] = False
    if args.kernel:
        model = ABCClustering(n_clusters=args.n_clusters, kernel=load_saved_kernel(args.kernel),
                              random_state=args.seed, **bound)
    else:
        # A shipped kernel comes with the clustering settings chosen for it (e.g. affinity_power).
        model = ABCClustering.from_pretrained(args.pretrained or "generic", n_clusters=args.n_clusters,
                                             random_state=args.seed, **bound)
    if groups is None:
        with warnings.catch_warnings():
            _ignore_precomputed_advice()
            labels = model.fit_predict(X)
        n_clusters = model.n_clusters_
    else:
        labels, n_clusters = _cluster_groups_with_progress(model, X, groups, quiet=args.quiet)
    write_labels(labels, args.output)
    if not args.quiet:
        print(f"{len(labels)} points in {n_clusters} cluster{'' if n_clusters == 1 else 's'}; labels written to "
              f"{args.output}")
    if args.plot:
        import numpy as np
        from matplotlib.figure import Figure  # no pyplot: the caller's backend and figures stay as they are

        from .plotting import plot_clusters

        # Count the labels written: with --groups, model.n_clusters_ is only the last group's.
        figure = Figure(figsize=(4, 4))
        found = len(np.unique(labels))
        plot_clusters(X, labels, ax=figure.subplots(), title=f"ABC: {found} cluster{'' if found == 1 else 's'}")
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)  # as for -o; check_output allowed it
        figure.savefig(args.plot, dpi=120)
        if not args.quiet:
            print(f"Saved the picture to {args.plot}")
    return 0


def _ignore_precomputed_advice() -> None:
    """Drop SpectralClustering's advice for square X (set affinity='precomputed'): the command has no such option,
    and a group as wide as it is long was called an affinity matrix (probe 67c)."""
    warnings.filterwarnings("ignore", message="The spectral clustering API has changed")


def _cluster_groups_with_progress(model, X, groups, quiet: bool = False):
    """Cluster each group as its own set with a progress bar; ids unique across groups, as fit does."""
    import numpy as np
    from tqdm.auto import tqdm

    from ._sets import warn_about_estimates
    from ._user_warnings import warn_user
    from ._validation import encode_groups

    codes = encode_groups(groups, len(X))  # one id per row, or a clear error
    labels = np.empty(len(X), dtype=np.int64)
    offset, sets, raised = 0, np.unique(codes), {}
    estimates = {"n_found": [], "spectra": [], "sizes": [], "chosen": []}  # per set: the warnings on estimates of k
    for g in tqdm(sets, desc="clustering sets", unit="set", disable=quiet):
        rows = np.flatnonzero(codes == g)
        # A one-row group is one cluster, as ABCClustering.fit(X, groups=...) makes it.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _ignore_precomputed_advice()  # a group is a set of points, as fit(X, groups=...) reads it
            found = model.fit_predict(X[rows]) if len(rows) > 1 else np.zeros(1, dtype=np.int64)
        own = set()
        if len(rows) > 1:
            estimates["n_found"].append(model.n_clusters_)
            estimates["spectra"].append(model.eigenvalues_)
            estimates["chosen"].append(model.candidate_)
            # The set's own warnings on its estimate (they name its size): said once below, over every set.
            with warnings.catch_warnings(record=True) as estimate:
                warnings.simplefilter("always")
                warn_about_estimates(model, [model.n_clusters_], [model.eigenvalues_], [len(rows)], [model.candidate_])
            own = {str(w.message) for w in estimate}
        else:
            estimates["n_found"].append(1)
            estimates["spectra"].append(None)
            estimates["chosen"].append(None)
        estimates["sizes"].append(len(rows))
        for warning in caught:  # counted over the sets, then said once each, as fit(X, groups=...) says them
            if str(warning.message) not in own:
                key = (warning.category, str(warning.message))
                raised[key] = raised.get(key, 0) + 1
        labels[rows] = found + offset
        offset += len(np.unique(found))
    for (category, message), count in raised.items():
        warn_user(message + (f" (in {count} of {len(sets)} sets)" if len(sets) > 1 else ""), category)
    if any(size > 1 for size in estimates["sizes"]):  # else nothing was fitted: no settings to read, no estimate
        warn_about_estimates(model, estimates["n_found"], estimates["spectra"], estimates["sizes"], estimates["chosen"])
    return labels, offset


def _evaluate(args: argparse.Namespace) -> int:
    import numpy as np
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    labels = read_array(args.labels, "labels", 1)
    truth = read_array(args.truth, "truth", 1, rows=len(labels))
    if len(labels) != len(truth):
        raise ValueError(f"labels has {len(labels)} entries but truth has {len(truth)}")
    for name, path, values in (("labels", args.labels, labels), ("truth", args.truth, truth)):
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            raise ValueError(f"{name} ({path!r}) holds NaN or infinite entries")
    if args.groups:  # each set scored alone: true ids repeat from set to set (0..k-1 in every one)
        from ._validation import encode_groups

        groups = read_array(args.groups, "groups", 1, rows=len(truth))
        if len(groups) != len(truth):
            raise ValueError(f"groups has {len(groups)} entries but labels and truth have {len(truth)}")
        codes = encode_groups(groups, len(truth))
        scores = np.array([[f(truth[codes == g], labels[codes == g]) for f in (adjusted_rand_score,
                            normalized_mutual_info_score)] for g in np.unique(codes)])
        if len(scores) == 1:  # no standard error of one set
            for name, score in zip(("ARI", "NMI"), scores[0], strict=True):
                print(f"{name} {score:.4f} (1 set)")
            return 0
        se = scores.std(axis=0, ddof=1) / np.sqrt(len(scores))
        for name, mean, error in zip(("ARI", "NMI"), scores.mean(axis=0), se, strict=True):
            print(f"{name} {mean:.4f} ± {error:.4f} (mean over {len(scores)} sets)")
        return 0
    print(f"ARI {adjusted_rand_score(truth, labels):.4f}")
    print(f"NMI {normalized_mutual_info_score(truth, labels):.4f}")
    return 0


# Largest count an option takes: a C int (torch's thread count), below the 2**31 a saved kernel holds, so no
# value fails after training, at the save (probe 67c).
_LARGEST_COUNT = 2**31 - 1


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return _at_most_largest(value, text)


def _add_header_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                        help="whether the first line of a .csv X names the columns (default: guessed: a line with no "
                             "number in it, or pandas' 0,1,... above rows that are not all whole numbers)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return _at_most_largest(value, text)


def _at_most_largest(value: int, text: str) -> int:
    if value > _LARGEST_COUNT:
        raise argparse.ArgumentTypeError(f"expected at most {_LARGEST_COUNT}, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive, finite number of seconds, got {text!r}")
    return value


def _seed(text: str) -> int:
    """A seed as ``random_state`` takes it (numpy's legacy seeding: 0 to 2**32 - 1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 4294967295, got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 4294967295, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skabc", description="Attention-Based Clustering: spectral clustering on a kernel learned from context.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"skabc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="cluster points on overlapping circles: ABC vs SpectralClustering",
        description="Cluster fresh sets of points on 4 overlapping circles with the shipped ABC kernels and "
        "with SpectralClustering given the true number of clusters; print the mean ARI and save a picture.",
    )
    demo.add_argument("--sets", type=_positive_int, default=20, help="fresh test sets per set size (default: 20)")
    demo.add_argument("--seed", type=_seed, default=2024, help="seed of the test sets (default: 2024)")
    demo.add_argument("--plot", default=None, metavar="PNG",
                      help="where to save the picture ('' to skip; default: circles_demo.png where matplotlib is "
                           "installed)")
    demo.add_argument("--train", action="store_true", help="train a kernel from scratch instead of the shipped one")
    demo.add_argument("--epochs", type=_positive_int, default=20,
                      help="epochs for --train (default: 20; one epoch took about 5 s on 2 cores here)")
    demo.add_argument("--threads", type=_non_negative_int, default=0,
                      help="torch threads (default: 0, torch's choice)")
    demo.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(func=_demo)

    train = sub.add_parser(
        "train", help="train a kernel on labelled points and save it",
        description="Train a ContextualKernel on labelled points (.npy or .csv) and save it as safetensors.",
    )
    train.add_argument("X", help="points, (n, d) .npy or .csv")
    _add_header_option(train)
    train.add_argument("y", help="cluster labels, (n,) .npy or .csv, numbers or names; -1 marks unlabelled rows")
    train.add_argument("-o", "--output", required=True, help="where to save the kernel (.safetensors)")
    train.add_argument("--groups", help="group of every row, (n,), numbers or names: training sets are drawn "
                       "within groups")
    network = ("; a value other than the generic kernel's trains a new network from scratch (default: fine-tune "
               "the generic kernel)")
    train.add_argument("--attention", choices=list(ATTENTION_BACKENDS), help="attention backend" + network)
    train.add_argument("--compat", choices=COMPAT_FUNCTIONS, help="similarity head" + network)
    train.add_argument("--d-model", type=_positive_int, help="embedding width, a multiple of the 4 heads" + network)
    train.add_argument("--n-blocks", type=_non_negative_int, help="attention blocks" + network)
    train.add_argument("--scratch", action="store_true", help="train the default network from scratch")
    train.add_argument("--set-size", type=_positive_int, nargs=2, metavar=("MIN", "MAX"),
                       help="training set sizes (default: 50 200)")
    train.add_argument("--epochs", type=_positive_int,
                       help="epochs (default: an automatic schedule from the rows and classes, with early stopping)")
    train.add_argument("--max-time", type=_seconds,
                       help="seconds of training before it stops (default: automatic, none without early stopping)")
    train.add_argument("--seed", type=_seed, default=0, help="random_state of the kernel (default: 0)")
    train.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    train.set_defaults(func=_train)

    cluster = sub.add_parser(
        "cluster", help="cluster points with a saved or shipped kernel",
        description="Cluster points (.npy or .csv) with a saved kernel (--kernel) or a shipped one (--pretrained; "
                    "default: the generic kernel, zero-shot).",
    )
    cluster.add_argument("X", help="points, (n, d) .npy or .csv")
    _add_header_option(cluster)
    cluster.add_argument("-o", "--output", required=True, help="labels file to write (.npy, or text otherwise)")
    source = cluster.add_mutually_exclusive_group()
    source.add_argument("--kernel",
                        help="a kernel saved by `skabc train`, ContextualKernel.save or KernelEnsemble.save")
    source.add_argument("--pretrained", help="a shipped kernel: 'generic' (default), 'omniglot', 'circles', ...")
    cluster.add_argument("--n-clusters", type=_positive_int, default=None,
                         help="default: estimated, as ABCClustering() estimates it")
    cluster.add_argument("--max-clusters", type=_positive_int, default=None,
                         help="largest estimate (default: ABCClustering's max_clusters)")
    cluster.add_argument("--no-gaussian-split", action="store_true",
                         help="keep clusters that are two touching Gaussian blobs whole (gaussian_split=False)")
    cluster.add_argument("--groups", help="group of every row, (n,), numbers or names: each group is clustered as "
                         "its own set")
    cluster.add_argument("--plot", metavar="PNG", help="also save a scatter plot of the clusters")
    cluster.add_argument("--seed", type=_seed, default=0, help="random_state of the clustering (default: 0)")
    cluster.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary line")
    cluster.set_defaults(func=_cluster)

    evaluate = sub.add_parser("evaluate", help="compare labels with the truth (ARI, NMI)",
                              description="Print the adjusted Rand index and NMI of labels against true labels.")
    evaluate.add_argument("labels", help="predicted labels, .npy or text of one label per line (what cluster -o "
                          "wrote)")
    evaluate.add_argument("truth", help="true labels, .npy or .csv, numbers or names")
    evaluate.add_argument("--groups", help="group of every row: each set is scored alone (mean ± s.e.)")
    evaluate.set_defaults(func=_evaluate)
    return parser


def _print_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on stderr, between progress bars: a command-line user has no source line to see."""
    from tqdm.auto import tqdm

    from .exceptions import SkabcWarning

    text = _as_options(str(message), _command_options) if issubclass(category, SkabcWarning) else str(message)
    tqdm.write(f"skabc: warning: {text}", file=sys.stderr)


#: Parameters a command-line user sets by option, and the option.
OPTIONS = {"n_clusters": "--n-clusters", "max_clusters": "--max-clusters", "d_model": "--d-model",
           "n_blocks": "--n-blocks", "set_size": "--set-size", "max_time": "--max-time", "max_epochs": "--epochs"}


#: The argparse names of the running command's options (None: every command's), for the warnings it prints.
_command_options: set[str] | None = None


def _as_options(message: str, command_options: set[str] | None = None) -> str:
    """``message``, one of the package's own, with the parameters a command-line user sets by option (:data:`OPTIONS`)
    named as those options, outside quoted text (file names: ``'set_size.csv'`` stays); scikit-learn's warnings
    are left as they are.  Only options of the running command (``command_options``, argparse's names), never a
    name inside a path or a dotted field of a model file (``kernel.params.set_size``): neither is set by option."""
    names = [parameter for parameter, option in OPTIONS.items()
             if command_options is None or option[2:].replace("-", "_") in command_options]
    if not names:
        return message
    name = re.compile(r"(?<![\w./\\-])(" + "|".join(names) + r")(?![\w/\\-]|\.\w)")
    # Odd parts are quoted, as repr quotes a path: '...', or "..." around an apostrophe (not one alone: kernel's).
    parts = re.split(r"((?<!\w)'[^']*'(?!\w)|(?<!\w)\"[^\"]*\"(?!\w))", message)
    return "".join(part if index % 2 else name.sub(lambda match: OPTIONS[match.group(1)], part)
                   for index, part in enumerate(parts))


def run() -> int:
    """The ``skabc`` command: :func:`main` with warnings printed as ``skabc: warning: ...`` lines."""
    warnings.showwarning = _print_warning
    return main()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    global _command_options
    _command_options = set(vars(args))
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)  # a usage error, as argparse reports one
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        # Ctrl-C: one line and the shell's code for it, not a traceback.
        print(f"skabc {args.command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, ImportError, MemoryError) as exc:
        # One line, no traceback: the first line of the message says what is wrong.
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in message:
            message = f"{message}: {exc.filename!r}"
        print(f"skabc {args.command}: error: {_as_options(message, _command_options)}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
