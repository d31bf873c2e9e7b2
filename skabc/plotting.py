"""Plot helpers (matplotlib is an optional extra: ``pip install skabc[plot]``)."""

from __future__ import annotations

import numpy as np


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - exercised only without matplotlib
        raise ImportError("skabc.plotting needs matplotlib: pip install 'skabc[plot]'") from exc
    return plt


def _axes(ax, ncols=1, figsize=None):
    plt = _pyplot()
    if ax is not None:
        return ax
    _, ax = plt.subplots(1, ncols, figsize=figsize or (4 * ncols, 4))
    return ax


def plot_affinity(affinity, labels=None, ax=None, title="learned affinity"):
    """Heatmap of an affinity, rows sorted by ``labels``; next to the true same-cluster matrix if given.

    Returns the axes (two when ``labels`` is given: learned, then ground truth).
    """
    affinity = np.asarray(affinity.toarray() if hasattr(affinity, "toarray") else affinity)
    if labels is None:
        ax = _axes(ax)
        ax.imshow(affinity, vmin=0, vmax=1, cmap="viridis")
        ax.set_title(title)
        return ax
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")
    axes = _axes(ax, ncols=2)
    axes[0].imshow(affinity[np.ix_(order, order)], vmin=0, vmax=1, cmap="viridis")
    axes[0].set_title(title)
    truth = (labels[order][:, None] == labels[order][None, :]).astype(float)
    axes[1].imshow(truth, vmin=0, vmax=1, cmap="viridis")
    axes[1].set_title("true same-cluster matrix")
    return axes


def plot_eigengap(eigenvalues, n_clusters=None, ax=None):
    """Smallest Laplacian eigenvalues, with the eigengap choice ``n_clusters`` marked."""
    eigenvalues = np.asarray(eigenvalues)
    ax = _axes(ax)
    index = np.arange(1, len(eigenvalues) + 1)
    ax.plot(index, eigenvalues, "o-", color="0.3")
    if n_clusters is not None and 1 <= n_clusters < len(eigenvalues):
        ax.axvspan(n_clusters, n_clusters + 1, color="tab:orange", alpha=0.3,
                   label=f"largest gap: k = {n_clusters}")
        ax.legend(loc="lower right")
    ax.set_xlabel("i")
    ax.set_ylabel("eigenvalue of the normalised Laplacian")
    ax.set_title("eigengap spectrum")
    return ax


def plot_clusters(X, labels, ax=None, title=None, s=10):
    """2-D scatter coloured by cluster; data with more than two features is projected by PCA."""
    X = np.asarray(X, dtype=float)
    if X.shape[1] > 2:
        centred = X - X.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        X = centred @ vt[:2].T
    elif X.shape[1] == 1:
        X = np.column_stack([X[:, 0], np.zeros(len(X))])
    ax = _axes(ax)
    ax.scatter(X[:, 0], X[:, 1], c=np.asarray(labels), cmap="tab10", s=s)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax


def plot_candidates(model, X, axes=None, s=10):
    """The partitions a fitted ``ABCClustering``'s arbiter weighs for the set ``X``, the kept one in bold.

    One panel per candidate (:mod:`skabc.spectral.arbiter`), titled with its name, its number of
    clusters and the forest's predicted ARI. ``X`` is clustered as one whole set, seeded as
    ``model.fit(X)`` seeds it (without ``max_samples``' subsample); data with more than two features
    is projected by PCA, as in :func:`plot_clusters`.

    Returns the axes.

    Raises
    ------
    ValueError
        If ``model`` was fitted without an arbiter (``arbiter_`` is None).
    """
    from ._sets import arbiter_candidates

    candidates, scores, kept = arbiter_candidates(model, X)
    points = X.toarray() if hasattr(X, "toarray") else np.asarray(X, dtype=float)
    axes = np.ravel(_axes(axes, ncols=len(candidates)))
    for i, (ax, candidate) in enumerate(zip(axes, candidates, strict=True)):
        title = f"{candidate.name}: k = {candidate.n_clusters}\npredicted ARI {scores[i]:.2f}"
        plot_clusters(points, candidate.labels, ax=ax, title=title + (" (kept)" if i == kept else ""), s=s)
        if i == kept:
            ax.title.set_fontweight("bold")
    return axes
