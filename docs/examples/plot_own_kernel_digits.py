"""
Learn a kernel from your labels: unseen handwritten digits
==========================================================

Train :class:`~skabc.ContextualKernel` with its default parameters on labelled images of the
digits 0 to 4, then cluster new sets of the digits 5 to 9, which it never saw, without telling it
how many digits each set holds. The default fit fine-tunes the shipped generic kernel, validates on
a held-out digit after every epoch and keeps the best weights, mixed half and half with the generic
ones (``fine_tune_alpha_``: sets of a held-out digit and of the training digits cannot show what
fine-tuning costs on new digits); ``max_time`` caps it here so the
example stays short (drop it for the full schedule). For comparison: the generic kernel with no
training at all, and scikit-learn's :class:`~sklearn.cluster.SpectralClustering` on a
nearest-neighbour graph, which is given the true number of digits.

Five training digits teach little that carries to new ones, and ``max_time`` stops the fit by the
clock: how many epochs it gets, and whether it beats the untrained kernel on these ten sets, depends on
the machine's speed (on two machines, one run each: 4-5 epochs and below the untrained kernel, 3 epochs
and above it). Check the gain on a class of your own that the fit never saw before relying on it.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import SpectralClustering
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score

from skabc import ABCClustering, ContextualKernel
from skabc.plotting import plot_training

X, y = load_digits(return_X_y=True)
X = X / 16  # pixels in [0, 1]
seen = y < 5
model = ABCClustering(kernel=ContextualKernel(random_state=0, max_time=20), random_state=0)
model.fit(X[seen], y[seen])
kernel = model.kernel_
print(f"started from: {kernel.init_}; epochs: {len(kernel.net_.history)}; held-out ARI "
      f"{kernel.start_validation_score_:.2f} at the start, {kernel.validation_score_:.2f} kept")

# %%
# The fit's training loss and held-out score per epoch; the star marks the weights it kept.
plot_training(kernel)
plt.tight_layout()

# %%
# Ten new sets of 100 images of two to five of the unseen digits.
rng = np.random.default_rng(0)
scores = {"ABC, your kernel": [], "ABC, generic (no training)": [], "SpectralClustering kNN (k given)": []}
generic = ABCClustering(random_state=0)
for _ in range(10):
    digits = rng.choice(np.arange(5, 10), rng.integers(2, 6), replace=False)
    rows = rng.choice(np.flatnonzero(np.isin(y, digits)), 100, replace=False)
    truth = y[rows]
    scores["ABC, your kernel"].append(adjusted_rand_score(truth, model.predict(X[rows])))
    scores["ABC, generic (no training)"].append(adjusted_rand_score(truth, generic.fit_predict(X[rows])))
    knn = SpectralClustering(n_clusters=len(digits), affinity="nearest_neighbors", random_state=0)
    scores["SpectralClustering kNN (k given)"].append(adjusted_rand_score(truth, knn.fit_predict(X[rows])))
for name, values in scores.items():
    print(f"{name:34s} mean ARI {np.mean(values):.3f}")

# %%
fig, ax = plt.subplots(figsize=(6, 3))
names = list(scores)
ax.barh(names, [np.mean(scores[n]) for n in names], xerr=[np.std(scores[n]) / np.sqrt(10) for n in names])
ax.set_xlabel("mean adjusted Rand index on unseen digits")
ax.set_xlim(0, 1)
fig.tight_layout()
plt.show()
