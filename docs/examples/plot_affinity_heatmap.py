"""
Learned affinity versus the true same-cluster matrix
====================================================

:meth:`ContextualKernel.transform <skabc.ContextualKernel.transform>` returns the learned affinity
of the set it is given: the probability that two points lie on the same circle. Sorted by the true
circle, a good affinity is block-diagonal. The multiplicative kernel, which sees the whole set,
recovers the blocks; the pairwise ablation, which sees only two points at a time, cannot.
"""

# %%
import matplotlib.pyplot as plt

from skabc import pretrained
from skabc.datasets import make_circles_sets
from skabc.plotting import plot_affinity

X, y, _ = make_circles_sets(n_sets=1, set_size=200, n_circles=4, random_state=3)

# %%
# One row per kernel: learned affinity (left), ground truth (right).
fig, axes = plt.subplots(2, 2, figsize=(8, 8))
for row, (name, title) in zip(axes, [("circles", "multiplicative (with context)"),
                                      ("circles-pairwise", "pairwise (no context)")], strict=True):
    affinity = pretrained.load(name, device="cpu").transform(X)
    plot_affinity(affinity, labels=y, ax=row, title=title)
fig.tight_layout()
plt.show()
