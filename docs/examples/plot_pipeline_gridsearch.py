"""
Pipeline and grid search with groups
====================================

:class:`~skabc.ContextualKernel` is a transformer that returns an affinity, so it fits in a
:class:`~sklearn.pipeline.Pipeline` in front of any ``affinity='precomputed'`` clusterer.
:class:`~skabc.ABCClustering` is a clusterer with ``predict``, so
:class:`~sklearn.model_selection.GridSearchCV` can score it on held-out sets; with metadata
routing, ``groups`` reaches both the splitter (:class:`~sklearn.model_selection.GroupKFold`, so
no set is split between folds) and the estimator (each set is sampled from and clustered on its own).

The kernels here are tiny and trained for two short epochs so that the example runs in seconds;
their scores say nothing about a properly trained kernel (see :doc:`/circles_results`).
"""

# %%
# Data: 60 sets of 60 points on 4 circles
# ---------------------------------------
import matplotlib.pyplot as plt
import numpy as np
import sklearn
from sklearn.cluster import SpectralClustering
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.metadata_routing import MetadataRequest

from skabc import ABCClustering, ContextualKernel
from skabc.datasets import make_circles_sets

X, y, groups = make_circles_sets(n_sets=60, set_size=60, random_state=0)
TINY = dict(d_model=16, n_blocks=1, max_epochs=2, sets_per_epoch=64, set_size=(20, 60),
            device="cpu", random_state=0)

# %%
# A Pipeline: scaler, learned kernel, spectral clustering
# -------------------------------------------------------
# ``groups`` is routed to the kernel's ``fit`` so that training sets are drawn within sets.
with sklearn.config_context(enable_metadata_routing=True):
    pipe = make_pipeline(
        StandardScaler(),
        ContextualKernel(**TINY).set_fit_request(groups=True),
        SpectralClustering(n_clusters=4, affinity="precomputed", random_state=0),
    )
    pipe.fit(X, y, groups=groups)

# ``SpectralClustering`` has no ``predict``: to cluster a new set, transform it with the fitted
# scaler and kernel, then cluster the affinity.
X_new, y_new, _ = make_circles_sets(n_sets=1, set_size=100, random_state=1)
labels = pipe[-1].fit_predict(pipe[:-1].transform(X_new))
print(f"pipeline ARI on a new set: {adjusted_rand_score(y_new, labels):.2f}")


# %%
# A scorer that clusters each held-out set on its own
# ---------------------------------------------------
# ``'adjusted_rand_score'`` would cluster a whole test fold as one set. This scorer asks for
# ``groups`` too (through its metadata request) and averages the ARI over the held-out sets.
class PerSetARI:
    def __call__(self, estimator, X, y, groups=None):
        labels = estimator.predict(X, groups=groups)
        return np.mean([adjusted_rand_score(y[groups == g], labels[groups == g])
                        for g in np.unique(groups)])

    def get_metadata_routing(self):
        request = MetadataRequest(owner=type(self).__name__)
        request.score.add_request(param="groups", alias=True)
        return request


# %%
# GridSearchCV over the kernel's similarity head
# ----------------------------------------------
with sklearn.config_context(enable_metadata_routing=True):
    model = ABCClustering(n_clusters=4, kernel=ContextualKernel(**TINY), random_state=0)
    model.set_fit_request(groups=True)
    search = GridSearchCV(model, {"kernel__compat": ["multiplicative", "additive"]},
                          cv=GroupKFold(n_splits=3), scoring=PerSetARI())
    search.fit(X, y, groups=groups)

results = search.cv_results_
columns = ["param_kernel__compat", "mean_test_score", "std_test_score", "rank_test_score",
           "mean_fit_time"]
print("  ".join(f"{c:>20}" for c in columns))
for i in range(len(results["params"])):
    print("  ".join(f"{results[c][i]:>20.3f}" if isinstance(results[c][i], float)
                    else f"{results[c][i]!s:>20}" for c in columns))
print("best:", search.best_params_)

# %%
# Mean held-out score of each setting
# -----------------------------------
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.bar([str(p) for p in results["param_kernel__compat"]], results["mean_test_score"],
       yerr=results["std_test_score"], color=["tab:blue", "tab:orange"], capsize=4)
ax.set_ylabel("mean per-set ARI (3 folds)")
ax.set_title("GridSearchCV over kernel__compat")
fig.tight_layout()
plt.show()
