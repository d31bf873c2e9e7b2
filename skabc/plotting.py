"""Plot helpers (matplotlib is an optional extra: ``pip install skabc[plot]``)."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array

from ._typing import Float, Int

if TYPE_CHECKING:  # matplotlib is optional: its types for the annotations only
    from matplotlib.axes import Axes
    from numpy.typing import ArrayLike


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - exercised only without matplotlib
        raise ImportError("skabc.plotting needs matplotlib: pip install 'skabc[plot]'") from exc
    return plt


def _axes(ax, ncols: int = 1, figsize=None, what: str = "ax") -> Any:
    """The axes to draw ``ncols`` panels on: a new figure's if ``ax`` is None, else ``ax`` once checked.  One panel
    takes a single Axes; several take a sequence (or array) of exactly ``ncols`` Axes, returned flattened."""
    plt = _pyplot()
    from matplotlib.axes import Axes

    if ax is None:
        _, ax = plt.subplots(1, ncols, figsize=figsize or (4 * ncols, 4))
        return ax
    if ncols == 1:
        if not isinstance(ax, Axes):
            raise TypeError(f"{what} must be a single matplotlib Axes, got {type(ax).__name__}")
        return ax
    if isinstance(ax, Axes):
        raise ValueError(f"{what} must hold {ncols} Axes, one per panel, got a single Axes")
    axes = np.ravel(np.asarray(ax, dtype=object))
    if len(axes) != ncols or not all(isinstance(a, Axes) for a in axes):
        raise ValueError(f"{what} must hold {ncols} Axes, one per panel, got {len(axes)} items")
    return axes


#: Most cells of a sparse affinity :func:`plot_affinity` makes dense (a picture shows far fewer: 10,000 x 10,000).
MAX_DRAWN_CELLS = 10_000**2


@overload
def plot_affinity(affinity, labels: None = None, ax: Axes | None = None, title: str = ...) -> Axes: ...
@overload
def plot_affinity(affinity, labels: ArrayLike, ax: Sequence[Axes] | np.ndarray | None = None,
                  title: str = ...) -> np.ndarray: ...
def plot_affinity(affinity, labels: ArrayLike | None = None, ax: Axes | Sequence[Axes] | np.ndarray | None = None,
                  title: str = "learned affinity") -> Axes | np.ndarray:
    """Heatmap of an affinity, rows sorted by ``labels``; next to the true same-cluster matrix if given.

    Parameters
    ----------
    affinity : array-like or sparse matrix of shape (n_samples, n_samples)
        Values in [0, 1] (the colour scale), e.g. ``ContextualKernel.transform(X)``.
    labels : array-like of shape (n_samples,), default=None
        True clusters: rows and columns are sorted by them, and their same-cluster matrix is drawn beside
        (a row labelled ``-1``, unlabelled or noise, shares a cluster with no other).
    ax : matplotlib Axes, or sequence or array of two, default=None
        A single Axes, or two (learned, ground truth) when ``labels`` is given; ``None`` makes a figure.
    title : str, default='learned affinity'
        Title of the affinity's panel.

    Returns
    -------
    axes : Axes, or array of two Axes (learned, then ground truth) when ``labels`` is given.

    Raises
    ------
    ValueError
        If ``affinity`` is not a non-empty square 2-D matrix of finite values (a sparse one of more than
        :data:`MAX_DRAWN_CELLS` cells is refused before it is made dense), ``labels`` does not have one entry per
        row of it or holds NaN, or ``ax`` does not hold as many Axes as there are panels.
    TypeError
        If ``affinity`` does not hold real numbers, or ``labels`` are complex or mix types that cannot be ordered.
    """
    if sp.issparse(affinity) and affinity.shape[0] != affinity.shape[1]:
        raise ValueError(f"affinity must be a non-empty square 2-D matrix, got shape {affinity.shape}")
    if sp.issparse(affinity) and affinity.shape[0] * affinity.shape[1] > MAX_DRAWN_CELLS:
        raise ValueError(f"a heatmap of a {affinity.shape[0]}x{affinity.shape[1]} affinity would need it dense "
                         f"({affinity.shape[0] * affinity.shape[1] * 8 / 2**30:.1f} GiB) for more cells than a "
                         f"picture shows; draw a subset of at most {int(MAX_DRAWN_CELLS ** 0.5)} rows")
    try:
        affinity = np.asarray(affinity.toarray() if hasattr(affinity, "toarray") else affinity)
    except ValueError:  # ragged rows
        raise ValueError("affinity must be a non-empty square 2-D matrix; its rows have different lengths") from None
    if affinity.ndim != 2 or affinity.shape[0] != affinity.shape[1] or affinity.size == 0:
        raise ValueError(f"affinity must be a non-empty square 2-D matrix, got shape {affinity.shape}")
    # Checked before any figure is made: matplotlib's own error comes from deep inside imshow, after it.
    if affinity.dtype.kind not in "biuf":
        raise TypeError(f"affinity must hold real numbers, got dtype {affinity.dtype}")
    if not np.isfinite(affinity).all():  # imshow draws them as blanks
        raise ValueError("affinity holds NaN or infinity")
    if labels is None:
        panel = _axes(ax)
        panel.imshow(affinity, vmin=0, vmax=1, cmap="viridis")
        panel.set_title(title)
        return panel
    labels = _checked_labels(labels)
    # Fancy indexing with fewer labels would silently draw a sub-block of the affinity.
    if labels.shape != (len(affinity),):
        raise ValueError(f"labels must have one entry per row of the {len(affinity)}x{len(affinity)} affinity, "
                         f"got shape {labels.shape}")
    order = np.argsort(_sortable_codes(labels), kind="stable")
    axes = _axes(ax, ncols=2)
    axes[0].imshow(affinity[np.ix_(order, order)], vmin=0, vmax=1, cmap="viridis")
    axes[0].set_title(title)
    # A point labelled -1 (unlabelled, noise) shares a cluster with no other point, as everywhere in the package.
    ranked, alone = labels[order], _noise(labels[order])
    truth = ((ranked[:, None] == ranked[None, :]) & ~(alone[:, None] | alone) | np.eye(len(ranked), dtype=bool)) * 1.0
    axes[1].imshow(truth, vmin=0, vmax=1, cmap="viridis")
    axes[1].set_title("true same-cluster matrix")
    return axes


def plot_eigengap(eigenvalues, n_clusters: Int | None = None, ax: Axes | None = None) -> Axes:
    """Smallest Laplacian eigenvalues, with the eigengap choice ``n_clusters`` marked.

    ``eigenvalues`` is one spectrum (1-D, ascending), or a list of them, one per set: what
    ``ABCClustering.eigenvalues_`` holds after a fit with ``groups`` (entries ``None``, sets without a
    spectrum, are skipped); each spectrum is one line.  ``n_clusters``, the ``k`` to mark (the gap after
    the ``k``-th eigenvalue), needs a single spectrum.

    Parameters
    ----------
    eigenvalues : array-like of shape (m,), or list of them
        One spectrum, or one per set (``None`` entries skipped).
    n_clusters : int, default=None
        The ``k`` to mark (one spectrum only).
    ax : matplotlib Axes, default=None
        ``None`` makes a figure.

    Returns
    -------
    ax : Axes

    Raises
    ------
    ValueError
        If a spectrum is not 1-D, is empty, is not numbers or holds NaN or infinity, if there is no
        spectrum, or if ``n_clusters`` is given with several spectra or lies outside ``[1, len(eigenvalues)]``.
    TypeError
        If a spectrum is complex.
    """
    many = isinstance(eigenvalues, (list, tuple)) and any(e is None or np.ndim(e) != 0 for e in eigenvalues)
    spectra = [_spectrum(e) for e in (eigenvalues if many else [eigenvalues]) if e is not None]
    if not spectra:
        raise ValueError("no spectrum to plot: " + ("every entry is None" if many else "eigenvalues is None")
                         + " (eigenvalues_ is None where n_clusters was given)")
    if n_clusters is not None:
        if len(spectra) > 1:
            raise ValueError(f"n_clusters marks one spectrum; got {len(spectra)} (one per group): plot them "
                             "without n_clusters, or one at a time with its own k")
        if isinstance(n_clusters, bool) or not isinstance(n_clusters, Integral):
            raise TypeError(f"n_clusters must be an integer, got {n_clusters!r}")
        if not 1 <= n_clusters <= len(spectra[0]):
            raise ValueError(f"n_clusters={n_clusters} is outside the spectrum's 1..{len(spectra[0])}")
    ax = _axes(ax)
    # Sets named by their place in eigenvalues_ (None entries included), each in a colour of its own.
    places = [i for i, e in enumerate(eigenvalues if many else [eigenvalues]) if e is not None]
    colours = _colours(np.arange(len(spectra))) if many else ["0.3"]
    for place, spectrum, colour in zip(places, spectra, colours, strict=True):
        label = f"set {place}" if len(spectra) > 1 else None
        ax.plot(np.arange(1, len(spectrum) + 1), spectrum, "o-", color=colour, label=label, markersize=3 if many else 6)
    if n_clusters is not None and n_clusters < len(spectra[0]):
        # "chosen", not "largest gap": a consensus or an arbiter may choose another k than this spectrum's gap.
        ax.axvspan(n_clusters, n_clusters + 1, color="tab:orange", alpha=0.3, label=f"chosen k = {n_clusters}")
    elif n_clusters is not None:  # k = every eigenvalue (a set of as many clusters as points): no gap after it
        ax.axvline(n_clusters, color="tab:orange", label=f"chosen k = {n_clusters} (no eigenvalue after it)")
    if n_clusters is not None or len(spectra) > 1:
        ax.legend(loc="lower right")
    ax.set_xlabel("i")
    ax.set_ylabel("eigenvalue of the normalised Laplacian")
    ax.set_title(f"eigengap spectra of {len(spectra)} sets" if len(spectra) > 1 else "eigengap spectrum")
    return ax


def _spectrum(values) -> np.ndarray:
    if np.iscomplexobj(values) or (isinstance(values, (list, tuple)) and any(isinstance(v, complex) for v in values)):
        raise TypeError("eigenvalues must be real numbers (a symmetric Laplacian has no complex ones)")
    try:
        spectrum = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"eigenvalues must be numbers, got {values!r}") from None
    if spectrum.ndim != 1 or not len(spectrum):
        raise ValueError(f"a spectrum must be a non-empty 1-D array of eigenvalues, got shape {spectrum.shape}")
    if not np.all(np.isfinite(spectrum)):
        raise ValueError("a spectrum holds NaN or infinity")
    return spectrum


def plot_clusters(X, labels, ax: Axes | None = None, title: str | None = None, s: Float | ArrayLike = 10) -> Axes:
    """2-D scatter coloured by cluster; data with more than two features is projected by PCA.

    ``X`` is a 2-D array or sparse matrix of shape (n_samples, n_features) and ``labels`` holds one
    label (of any sortable type, e.g. strings) per sample; the number ``-1`` (noise or unlabelled, as
    HDBSCAN and skabc mark them) is drawn in light grey, not as one more cluster.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples, n_features)
    labels : array-like of shape (n_samples,)
    ax : matplotlib Axes, default=None
        ``None`` makes a figure.
    title : str, default=None
        Axes title.
    s : float or array-like of shape (n_samples,), default=10
        Marker size, or one per point.

    Returns
    -------
    ax : Axes

    Raises
    ------
    ValueError
        If ``X`` is not 2-D, is empty or holds NaN or infinity, ``labels`` does not have one
        entry per sample or holds NaN, or ``s`` is negative or not one size or one per point.
    TypeError
        If ``labels`` are complex or mix types that cannot be ordered (``None`` among numbers).
    """
    X = check_array(X, accept_sparse="csr", dtype=float, input_name="X")
    X = X.toarray() if sp.issparse(X) else X
    _check_marker_sizes(s, len(X))
    labels = _checked_labels(labels)
    if labels.shape != (len(X),):
        raise ValueError(f"labels must have one entry per sample of X ({len(X)}), got shape {labels.shape}")
    if X.shape[1] > 2:
        centred = X - X.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        X = centred @ vt[:2].T  # fewer than 2 columns when n_samples < 2: padded below
    if X.shape[1] < 2:
        X = np.column_stack([X[:, 0], np.zeros(len(X))])
    _pyplot()  # the package's message where matplotlib is missing, before its colours are imported
    from matplotlib.colors import to_rgba_array

    noise = _noise(labels)
    colours = np.tile(to_rgba_array(NOISE_COLOUR), (len(labels), 1))
    if not noise.all():  # codes of the clusters only, so noise takes no cluster's colour
        colours[~noise] = to_rgba_array(_colours(_sortable_codes(labels[~noise])))
    ax = _axes(ax)
    ax.scatter(X[:, 0], X[:, 1], c=colours, s=s)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax


#: Colour of the points labelled -1 (noise, unlabelled).
NOISE_COLOUR = "#c8c8c8"


def _check_marker_sizes(s, n: int) -> None:
    """``s`` as matplotlib's scatter takes it: one size, or one per point; finite and non-negative."""
    try:  # numbers only: '10' converted to float, and matplotlib then failed on a figure already made
        sizes = np.asarray(s).astype(float) if np.asarray(s).dtype.kind in "iuf" else None
    except (TypeError, ValueError):
        sizes = None
    if sizes is None or sizes.shape not in ((), (n,)) or not (np.isfinite(sizes).all() and (sizes >= 0).all()):
        raise ValueError(f"s (the marker size) must be a non-negative number or one per point ({n}), got {s!r}")


def _checked_labels(labels) -> np.ndarray:
    """``labels`` as an array; complex or missing (NaN) labels name no cluster: refused, not drawn as one."""
    labels = np.asarray(labels)
    if np.iscomplexobj(labels):
        raise TypeError("labels must be numbers or strings, not complex")
    if labels.dtype.kind == "f" and np.isnan(labels).any():
        raise ValueError("labels hold NaN: give every sample a cluster label")
    return labels


def _noise(labels: np.ndarray) -> np.ndarray:
    """Where ``labels`` hold the number -1 (noise, unlabelled), whatever their dtype (an object array of ints
    too); string labels hold none."""
    if labels.dtype.kind in "iuf":
        return labels == -1
    if labels.dtype.kind == "O":
        return np.array([isinstance(v, Real) and not isinstance(v, bool) and v == -1 for v in labels], dtype=bool)
    return np.zeros(len(labels), dtype=bool)


def _sortable_codes(labels: np.ndarray) -> np.ndarray:
    """Integer codes of ``labels`` in their sorted order; a clear TypeError for labels that cannot be ordered."""
    try:
        return np.unique(labels, return_inverse=True)[1].reshape(-1)
    except TypeError:  # labels of mixed types (None among ints)
        raise TypeError("labels must be of one comparable type (numbers or strings), got "
                        f"{sorted({type(v).__name__ for v in labels.ravel()})}") from None


def _colours(codes: np.ndarray) -> np.ndarray:
    """One colour per cluster code, none grey (:data:`NOISE_COLOUR` is noise's): tab10 up to 9 clusters and tab20 up
    to 18, each without its greys (tab20's light one was the noise colour); beyond, hues in golden-ratio steps at
    three lightness levels, so that codes next to each other differ (evenly spaced hues made neighbours alike)."""
    import matplotlib
    from matplotlib.colors import hsv_to_rgb

    n = int(codes.max()) + 1 if len(codes) else 1
    if n <= 18:
        name, greys = ("tab10", (7,)) if n <= 9 else ("tab20", (14, 15))
        table = [colour for i, colour in enumerate(matplotlib.colormaps[name].colors) if i not in greys]
    else:
        step = np.arange(n)
        table = hsv_to_rgb(np.column_stack([(step * 0.6180339887) % 1.0, np.full(n, 0.8),
                                            np.array([0.95, 0.65, 0.4])[step % 3]]))
    return np.asarray(table)[codes]


def plot_candidates(model: Any, X, axes: Sequence[Axes] | np.ndarray | None = None, s: Float = 10) -> np.ndarray:
    """The partitions a fitted ``ABCClustering``'s arbiter weighs for the set ``X``, the kept one in bold.

    One panel per candidate (:mod:`skabc.spectral.arbiter`), titled with its name, its number of clusters and the
    forest's predicted ARI. ``X`` is validated as ``model.predict`` validates it and clustered as one whole set, seeded
    as ``model.fit(X)`` seeds it (without ``max_samples``' subsample); data with more than two features is projected by
    PCA, as in :func:`plot_clusters`. ``axes``, if given, holds one Axes per candidate.

    An arbiter that keeps only a candidate's ``k`` (``arbiter_`` ``'generic-knn'``, which cuts the set's kNN graph into
    it, or ``'generic-count'``, which cuts the model's own affinity) marks that panel "(k kept)": the model's partition
    is another one, which ``plot_clusters(X, model.fit_predict(X))`` draws; so does "(kept, split)", where
    ``gaussian_split_`` split some of its clusters. "(kept: wide)": the set spans more dimensions than the forest's.

    Parameters
    ----------
    model : ABCClustering
        Fitted with an arbiter.
    X : array-like of shape (n_samples, n_features)
        One set.
    axes : sequence or array of matplotlib Axes, default=None
        One per candidate; ``None`` makes a figure.
    s : float, default=10
        Marker size.

    Returns
    -------
    axes : ndarray of Axes

    Raises
    ------
    ValueError
        If ``model`` was fitted without an arbiter (``arbiter_`` is None), ``X`` is not what ``predict`` takes
        (other features), ``axes`` does not hold one Axes per candidate, or ``s`` is no marker size.
    TypeError
        If ``model`` is not an ``ABCClustering``.
    """
    from ._arbiter_candidates import arbiter_candidates
    candidates, scores, kept, kept_as = arbiter_candidates(model, X)
    points = X.toarray() if hasattr(X, "toarray") else np.asarray(X, dtype=float)
    _check_marker_sizes(s, len(points))  # before a figure is made (a refusal left an empty one open)
    axes = np.ravel(_axes(axes, ncols=len(candidates), what="axes"))
    mark = {"partition": " (kept)", "k": " (k kept)", "split": " (kept, split)", "wide": " (kept: wide)"}[kept_as]
    for i, (ax, candidate) in enumerate(zip(axes, candidates, strict=True)):
        title = f"{candidate.name}: k = {candidate.n_clusters}\npredicted ARI {scores[i]:.2f}"
        plot_clusters(points, candidate.labels, ax=ax, title=title + (mark if i == kept else ""), s=s)
        if i == kept:
            ax.title.set_fontweight("bold")
    return axes


def plot_training(kernel: Any, axes: Sequence[Axes] | np.ndarray | None = None) -> np.ndarray:
    """Training curves of a fitted :class:`~skabc.ContextualKernel`: its loss and its held-out score per epoch.

    Left, the training loss (binary cross-entropy) per epoch.  Right, for a fit that validated (early stopping on
    held-out groups or classes), the mean ARI of the held-out sets with ``k`` unknown as the fit scored them after every
    epoch (the kernel's own partitions, without an arbiter), epoch 0 being the weights it started from, and a star on
    the epoch whose weights the kernel kept: the best epoch (of a resumed run, the best since the resume), or ``0``, the
    start, kept where no epoch beat it or where, once the clustering settings were chosen, it clustered the held-out
    sets better as it clusters on its own (with its arbiter: ``start_validation_score_`` against ``validation_score_``).
    With ``fine_tune_alpha_`` below 1 the kept weights are the best epoch's mixed with the start's.  An epoch a stop
    (``max_time``, Ctrl-C) ended before it was scored is left out; a network trained from scratch whose run scored no
    epoch gets no star (its start never competes: the run's last weights were kept).

    Parameters
    ----------
    kernel : ContextualKernel, FrozenEstimator of one, or ABCClustering
        A kernel fitted in this process (an ``ABCClustering``: its ``kernel_``).
    axes : sequence or array of two matplotlib Axes, default=None
        ``None`` makes a figure.

    Returns
    -------
    axes : ndarray of two Axes

    Raises
    ------
    TypeError
        If ``kernel`` is not a ``ContextualKernel`` (a ``KernelEnsemble``: plot its ``kernels_`` one by one).
    ValueError
        If the kernel has no training history: loaded from a file or restored from a finished run's
        ``checkpoint_dir``, it keeps its weights only.
    NotFittedError
        If the kernel (or the ``ABCClustering``) is not fitted.
    """
    history, validation = _training_record(kernel)
    axes = _axes(axes, ncols=2, figsize=(9, 3.5), what="axes")
    from matplotlib.ticker import MaxNLocator

    finished = [row for row in history if "train_loss" in row]  # a stop inside an epoch leaves its row unscored
    epochs = np.array([row["epoch"] for row in finished])
    axes[0].plot(epochs, [row["train_loss"] for row in finished], "o-", color="0.3", markersize=3)
    axes[0].set(xlabel="epoch", ylabel="training loss (BCE)", title=f"training loss, {len(epochs)} epochs")
    for ax in axes:  # epochs are whole numbers (matplotlib's default ticks put 1.5 between two)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    scored = [(row["epoch"], row["valid_ari"]) for row in finished if row.get("valid_ari") is not None]
    if getattr(validation, "start_score_", None) is None:
        axes[1].text(0.5, 0.5, "no held-out sets:\nthis fit trained without validation", ha="center", va="center",
                     transform=axes[1].transAxes)
        axes[1].set_axis_off()
        return axes
    x = np.array([0, *(epoch for epoch, _ in scored)])
    y = np.array([validation.start_score_, *(score for _, score in scored)], dtype=float)
    axes[1].plot(x, y, "o-", color="0.3", markersize=3, label="held-out sets, k unknown")
    # The callback's own record, not the history's flags: the final comparison may restore the start.
    won = bool(getattr(validation, "kept_start_", False))
    kept = 0 if won else int(validation.best_epoch_)
    title = "validation"
    if kept == 0 and not won and not getattr(validation, "start_is_candidate", True):
        # A new network's start never competes: with no epoch scored, the run kept its last weights, not these.
        title = "validation: no scored epoch kept"
    else:
        alpha = float(getattr(validation, "alpha", 1.0))
        what = (("the start" + (", which won the final comparison" if won else "")) if kept == 0
                else f"epoch {kept}" + (f", mixed with the start ({alpha:g})" if alpha < 1 else ""))
        axes[1].plot([kept], y[x == kept][:1], "*", markersize=14, color="tab:orange", label=f"kept: {what}")
    axes[1].legend(loc="best")
    axes[1].set(xlabel="epoch (0: the start)", ylabel="mean ARI", title=title)
    return axes


def _training_record(kernel) -> tuple[list, Any]:
    """The epoch history of a fitted ContextualKernel (given as itself, frozen, or an ABCClustering's) and its
    validation callback (``None`` for a fit that did not validate)."""
    from sklearn.frozen import FrozenEstimator
    from sklearn.utils.validation import check_is_fitted

    from .cluster import ABCClustering
    from .kernels import ContextualKernel, KernelEnsemble

    if isinstance(kernel, ABCClustering):
        check_is_fitted(kernel)
        kernel = kernel.kernel_
    if isinstance(kernel, FrozenEstimator):
        kernel = kernel.estimator
    if isinstance(kernel, KernelEnsemble):
        raise TypeError("plot_training takes one ContextualKernel: plot each of the ensemble's kernels_ in turn")
    if not isinstance(kernel, ContextualKernel):
        raise TypeError(f"plot_training takes a fitted ContextualKernel (or an ABCClustering using one), got "
                        f"{type(kernel).__name__}")
    check_is_fitted(kernel, "module_")
    net = getattr(kernel, "net_", None)
    if net is None or not len(net.history):
        raise ValueError("this kernel has no training history: a kernel loaded from a file, or restored from a "
                         "finished run's checkpoint_dir, keeps its weights only")
    return list(net.history), dict(getattr(net, "callbacks_", [])).get("validation")


__all__ = ["MAX_DRAWN_CELLS", "NOISE_COLOUR", "plot_affinity", "plot_candidates", "plot_clusters", "plot_eigengap",
           "plot_training"]
