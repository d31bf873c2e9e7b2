"""
Clustering handwritten characters of an unseen alphabet
=======================================================

The shipped ``omniglot`` kernel was trained on the 30 background alphabets
of Omniglot only. Here it clusters drawings of Tengwar, one of the 20
held-out alphabets, without being told how many characters there are: the
largest eigengaps of the learned affinity propose numbers of clusters, and
the kernel's own probabilities choose among them.

The drawings come from the small sample bundled with the package
(:func:`skabc.datasets.load_omniglot_sample`); with the official archives on
disk, :func:`skabc.datasets.load_omniglot` gives all of them.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from skabc import ABCClustering
from skabc.datasets import load_omniglot_sample

sample = load_omniglot_sample()
rng = np.random.default_rng(0)
# A set of drawings of 8 characters, 4 to 11 drawings of each.
characters = rng.choice(12, size=8, replace=False)
rows = np.concatenate([rng.choice(np.flatnonzero(sample.target == c), size=rng.integers(4, 12), replace=False)
                       for c in characters])
rows = rng.permutation(rows)
images, truth = sample.data[rows], sample.target[rows]

model = ABCClustering.from_pretrained("omniglot", random_state=0, device="cpu")
labels = model.fit_predict(images)
print(f"{len(rows)} drawings of {len(characters)} characters; found {model.n_clusters_} clusters")
print(f"NMI {normalized_mutual_info_score(truth, labels):.3f}, ARI {adjusted_rand_score(truth, labels):.3f}")

# %%
# One row per cluster found, drawings side by side.
clusters = [np.flatnonzero(labels == c) for c in np.unique(labels)]
width = max(len(c) for c in clusters)
fig, axes = plt.subplots(len(clusters), width, figsize=(0.6 * width, 0.6 * len(clusters)), squeeze=False)
for ax in axes.ravel():
    ax.axis("off")
for row, members in zip(axes, clusters, strict=False):
    for ax, i in zip(row, members, strict=False):
        ax.imshow(sample.images[rows[i]], cmap="gray_r")
fig.suptitle("Each row: one cluster found by ABC (k unknown)")
plt.show()
