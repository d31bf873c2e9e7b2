"""
A drop-in for SpectralClustering, without giving it k
=====================================================

The layout of scikit-learn's clustering comparison: six toy datasets (rows),
clustered by (columns)

* ``ABCClustering()``: the shipped generic kernel, the number of clusters
  estimated (no ``k`` given);
* ``ABCClustering(n_clusters=k)``: the same kernel, given the true ``k``;
* ``ABCClustering(affinity='nearest_neighbors')``: scikit-learn's kNN graph,
  no ``k`` given (SpectralClustering cannot do this): the clusters are
  counted as ``ABCClustering()`` counts them (the generic kernel and its
  arbiter) and the kNN graph is cut into that many;
* the same with ``n_clusters_selection='eigengap'``: ``k`` read off the kNN
  graph's own Laplacian spectrum instead;
* :class:`~sklearn.cluster.SpectralClustering` on that kNN graph, given ``k``
  (``ABCClustering(n_clusters=k, affinity='nearest_neighbors')`` returns the
  very same labels).

Each panel shows the number of clusters used and the fit time; the titles of
the first row name the columns.  The data are standardised first, as in
scikit-learn's example; "no structure" has no true ``k`` and is given 3, as
there.

What to read in it: the learned affinity is close to block-diagonal, so the
eigengap of its Laplacian finds ``k`` on most of these sets.  The plain
eigengap of a kNN graph does not: on these manifold-like 2-D sets its
Laplacian eigenvalues grow smoothly, with larger gaps far beyond the true
``k``, so the fourth column finds far too many clusters.  That is why a
scikit-learn affinity with ``k`` unknown is counted with the generic kernel
by default (third column; ``arbiter_ == 'generic-count'``).  Given ``k``, the
kNN affinity of ``ABCClustering`` is exactly SpectralClustering's (last
column).
"""

# %%
# Six datasets of 500 points
# --------------------------
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn import datasets
from sklearn.cluster import SpectralClustering
from sklearn.preprocessing import StandardScaler

from skabc import ABCClustering

n_samples = 500
seed = 30
rng = np.random.RandomState(seed)
X_aniso, y_aniso = datasets.make_blobs(n_samples=n_samples, random_state=170)
problems = [
    ("noisy circles", datasets.make_circles(n_samples=n_samples, factor=0.5, noise=0.05, random_state=seed), 2),
    ("noisy moons", datasets.make_moons(n_samples=n_samples, noise=0.05, random_state=seed), 2),
    ("varied", datasets.make_blobs(n_samples=n_samples, cluster_std=[1.0, 2.5, 0.5], random_state=170), 3),
    ("anisotropic", (X_aniso @ np.array([[0.6, -0.6], [-0.4, 0.8]]), y_aniso), 3),
    ("blobs", datasets.make_blobs(n_samples=n_samples, random_state=seed), 3),
    ("no structure", (rng.rand(n_samples, 2), None), 3),
]

# %%
# Five clusterers per dataset
# ---------------------------
def clusterers(k):
    return {
        "ABCClustering()\n(k estimated)": ABCClustering(random_state=0),
        "ABCClustering(n_clusters=k)": ABCClustering(n_clusters=k, random_state=0),
        "ABCClustering(affinity=\n'nearest_neighbors') (k counted)": ABCClustering(
            affinity="nearest_neighbors", random_state=0),
        "... n_clusters_selection=\n'eigengap' (k from its spectrum)": ABCClustering(
            affinity="nearest_neighbors", n_clusters_selection="eigengap", random_state=0),
        "SpectralClustering(n_clusters=k,\naffinity='nearest_neighbors')": SpectralClustering(
            n_clusters=k, affinity="nearest_neighbors", random_state=0),
    }


fig, axes = plt.subplots(len(problems), 5, figsize=(16, 17))
for row, (name, (X, _), k) in enumerate(problems):
    X = StandardScaler().fit_transform(X)
    for col, (title, model) in enumerate(clusterers(k).items()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # kNN graphs of far-apart blobs are disconnected
            start = time.perf_counter()
            labels = model.fit_predict(X)
            seconds = time.perf_counter() - start
        ax = axes[row, col]
        ax.scatter(X[:, 0], X[:, 1], s=6, c=labels, cmap="tab10", vmin=0, vmax=9)
        ax.set_xticks(())
        ax.set_yticks(())
        found = len(np.unique(labels))
        ax.text(0.99, 0.01, f"k={found}  {seconds:.2f}s", transform=ax.transAxes, ha="right", va="bottom", size=10)
        if row == 0:
            ax.set_title(title, size=10)
        if col == 0:
            ax.set_ylabel(name, size=11)
fig.tight_layout()
plt.show()
