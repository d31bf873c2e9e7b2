"""
Context matters: clustering overlapping circles
===============================================

The ABC paper's Figure 1. One set of points drawn on four overlapping circles is clustered by

* ABC with the shipped multiplicative kernel (``'circles'``),
* ABC with the shipped additive kernel (``'circles-additive'``),
* the *pairwise* ablation (``'circles-pairwise'``: no set encoder, so no context),

each choosing the number of clusters by the eigengap, and by scikit-learn's
:class:`~sklearn.cluster.SpectralClustering` given the true number of circles.
The adjusted Rand index (ARI) against the true circles is in each title.
"""

# %%
# One set of 200 points on 4 circles
# ----------------------------------
import matplotlib.pyplot as plt
from sklearn.cluster import SpectralClustering
from sklearn.metrics import adjusted_rand_score

from skabc import ABCClustering, pretrained
from skabc.datasets import make_circles_sets
from skabc.plotting import plot_clusters

X, y, _ = make_circles_sets(n_sets=1, set_size=200, n_circles=4, random_state=3)

# %%
# Cluster it four ways
# --------------------
# A fitted kernel given to :class:`~skabc.ABCClustering` without labels is used as is.
results = {}
for name, title in [("circles", "ABC multiplicative"),
                    ("circles-additive", "ABC additive"),
                    ("circles-pairwise", "ABC pairwise")]:
    model = ABCClustering(kernel=pretrained.load(name, device="cpu"), random_state=0).fit(X)
    results[f"{title} (k={model.n_clusters_})"] = model.labels_

spectral = SpectralClustering(n_clusters=4, random_state=0).fit(X)
results["SpectralClustering (true k=4)"] = spectral.labels_

# %%
# Plot
# ----
fig, axes = plt.subplots(1, 5, figsize=(16, 3.6))
plot_clusters(X, y, ax=axes[0], title="ground truth")
for ax, (title, labels) in zip(axes[1:], results.items(), strict=True):
    plot_clusters(X, labels, ax=ax, title=f"{title}\nARI = {adjusted_rand_score(y, labels):.2f}")
fig.tight_layout()
plt.show()
