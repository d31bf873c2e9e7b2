"""
Choosing the number of clusters by the eigengap
===============================================

With ``n_clusters=None``, :class:`~skabc.ABCClustering` estimates the number of clusters of each
set by the largest gap between consecutive eigenvalues of the normalised Laplacian
``L = I - D^-1/2 A D^-1/2`` of the learned affinity. The fitted model keeps the compared
eigenvalues in ``eigenvalues_`` and the choice in ``n_clusters_``.
"""

# %%
import matplotlib.pyplot as plt

from skabc import ABCClustering, pretrained
from skabc.datasets import make_circles_sets
from skabc.plotting import plot_eigengap

X, y, _ = make_circles_sets(n_sets=1, set_size=200, n_circles=4, random_state=3)
model = ABCClustering(kernel=pretrained.load("circles", device="cpu"), max_clusters=10,
                      random_state=0).fit(X)
print(f"estimated number of clusters: {model.n_clusters_} (true: 4)")

# %%
ax = plot_eigengap(model.eigenvalues_, n_clusters=model.n_clusters_)
ax.figure.tight_layout()
plt.show()
