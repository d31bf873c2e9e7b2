"""Synthetic clustering sets: shapes, labels, noise semantics, seeds, padding, bad parameters."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.spatial.distance import pdist

from skabc.datasets import (
    FAMILIES,
    FAMILY_WEIGHTS,
    add_background_noise,
    add_outliers,
    discretize_columns,
    embed_in_dimensions,
    make_blobs_set,
    make_chains_set,
    make_circles_sets,
    make_clustering_sets,
    make_curves_set,
    make_informative_set,
    make_moons_set,
    make_rings_set,
    make_subspace_set,
    make_warped_set,
)
from skabc.preprocessing import canonicalize_set

_make_informative_set = partial(make_informative_set, n_informative=1)
GENERATORS = [
    (make_blobs_set, "n_clusters"),
    (make_rings_set, "n_rings"),
    (make_moons_set, "n_moons"),
    (make_curves_set, "n_curves"),
    (make_subspace_set, "n_clusters"),
    (make_warped_set, "n_clusters"),
    (partial(make_chains_set, n_blobs=0), "n_chains"),
    (_make_informative_set, "n_clusters"),
]


@pytest.mark.parametrize("make, count", GENERATORS)
@pytest.mark.parametrize("n_features", [2, 7])
def test_single_set_shapes_and_label_counts(make, count, n_features):
    X, y = make(150, **{count: 4}, n_features=n_features, random_state=0)
    assert X.shape == (150, n_features) and X.dtype == np.float64
    assert y.shape == (150,) and y.dtype == np.int64
    assert np.array_equal(np.unique(y), np.arange(4))
    assert np.all(np.isfinite(X))
    # Blobs fill their dimensions; planar shapes span a random plane, plus the others with embed_noise.
    planar = make not in (make_blobs_set, make_subspace_set, make_warped_set, _make_informative_set)
    assert np.linalg.matrix_rank(X - X.mean(axis=0)) == (2 if planar else n_features)
    if planar:
        X, _ = make(150, **{count: 4}, n_features=n_features, embed_noise=0.01, random_state=0)
        assert np.linalg.matrix_rank(X - X.mean(axis=0)) == n_features


@pytest.mark.parametrize("make, count", GENERATORS)
def test_single_set_seeded(make, count):
    X1, y1 = make(80, **{count: 3}, random_state=7)
    X2, y2 = make(80, **{count: 3}, random_state=7)
    X3, _ = make(80, **{count: 3}, random_state=8)
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
    assert not np.allclose(X1, X3)


@pytest.mark.parametrize("make, count", GENERATORS)
def test_noise_points_are_singletons(make, count):
    X, y = make(200, **{count: 3}, noise_fraction=0.1, random_state=1)
    assert X.shape[0] == 200
    labels, sizes = np.unique(y, return_counts=True)
    noise = labels >= 3
    assert noise.sum() == 20
    assert np.all(sizes[noise] == 1)
    assert np.array_equal(labels[~noise], np.arange(3))
    assert np.array_equal(labels[noise], np.arange(3, 23))


def test_blobs_one_dimension_and_weights():
    X, y = make_blobs_set(1000, n_clusters=3, n_features=1, weights=[8, 1, 1], random_state=0)
    assert X.shape == (1000, 1)
    sizes = np.bincount(y)
    assert sizes[0] > 700 and sizes[1] < 200 and sizes[2] < 200


def test_blobs_min_separation():
    X, y = make_blobs_set(900, n_clusters=6, n_features=2, cluster_std=1.0, anisotropy=1.0, imbalance=0.0,
                          min_separation=4.0, random_state=0)
    centroids = np.array([X[y == c].mean(axis=0) for c in range(6)])
    # Centres at least 4 * (1 + 1) apart; centroids of ~150 points are within ~0.2 of them.
    assert pdist(centroids).min() > 7.5


def test_blobs_varying_density_and_anisotropy():
    X, y = make_blobs_set(1000, n_clusters=5, n_features=3, cluster_std=(0.1, 10.0), anisotropy=1.0,
                          imbalance=0.0, random_state=0)
    spreads = np.array([X[y == c].std(axis=0).mean() for c in range(5)])
    assert spreads.max() / spreads.min() > 5
    X, y = make_blobs_set(4000, n_clusters=1, n_features=4, cluster_std=2.0, anisotropy=10.0, random_state=0)
    axes = np.sqrt(np.linalg.eigvalsh(np.cov(X.T)))
    assert 8 < axes.max() / axes.min() < 12
    assert 1.7 < np.exp(np.log(axes).mean()) < 2.3  # geometric mean of the axis spreads: cluster_std
    X, y = make_blobs_set(2000, n_clusters=1, n_features=4, cluster_std=1.0, anisotropy=1.0, random_state=0)
    axes = np.sqrt(np.linalg.eigvalsh(np.cov(X.T)))
    assert axes.max() / axes.min() < 1.3


def test_blobs_spacing_spreads_the_centres():
    def centroid_distances(spacing):
        X, y = make_blobs_set(800, n_clusters=8, n_features=2, cluster_std=1.0, anisotropy=1.0, imbalance=0.0,
                              min_separation=1.5, spacing=spacing, random_state=0)
        return pdist(np.array([X[y == c].mean(axis=0) for c in range(8)]))

    tight, loose = centroid_distances(1.0), centroid_distances(4.0)
    assert np.median(loose) > 2.5 * np.median(tight)
    assert loose.min() > 2.5  # min_separation still holds: 1.5 * (1 + 1), less centroid noise


def test_blobs_student_t_tails():
    def excess_kurtosis(tail_df):
        X, _ = make_blobs_set(20_000, n_clusters=1, n_features=1, cluster_std=1.0, tail_df=tail_df, random_state=0)
        z = (X[:, 0] - X[:, 0].mean()) / X[:, 0].std()
        return float(np.mean(z**4) - 3)

    assert abs(excess_kurtosis(None)) < 0.2
    assert excess_kurtosis(5.0) > 2.0  # 6 in theory for 5 degrees of freedom
    X, y = make_blobs_set(300, n_clusters=3, n_features=4, tail_df=3.0, noise_fraction=0.1, random_state=0)
    assert X.shape == (300, 4) and np.all(np.isfinite(X)) and len(np.unique(y)) == 3 + 30


def test_scattered_family_is_opt_in():
    assert "scattered" in FAMILIES and "scattered" not in FAMILY_WEIGHTS
    X, y, groups = make_clustering_sets(n_sets=12, set_size=(100, 200), families="scattered", n_features=(2, 20),
                                        noise_probability=0.0, random_state=0)
    ks = [len(np.unique(ys)) for _, ys in _sets(X, y, groups)]
    assert min(ks) >= 2 and max(ks) <= 8 and len(set(ks)) > 2


def test_concentric_rings_share_a_centre():
    X, y = make_rings_set(300, n_rings=3, layout="concentric", noise=0.0, radius_range=(0.3, 1.0), random_state=0)
    radius = np.linalg.norm(X, axis=1)
    per_ring = [radius[y == c] for c in range(3)]
    assert all(np.ptp(r) < 1e-9 for r in per_ring)
    assert 0.3 <= per_ring[0][0] < per_ring[1][0] < per_ring[2][0] <= 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_separated_rings_keep_their_gap(seed):
    from scipy.spatial.distance import cdist

    X, y = make_rings_set(400, n_rings=6, layout="separated", noise=0.0, min_gap=0.3, center_spread=0.5,
                          random_state=seed)
    closest = min(cdist(X[y == a], X[y == b]).min() for a in range(6) for b in range(a))
    assert closest >= 0.3 - 1e-9  # six circles of radius up to 1 cannot fit a disc of 0.5: it widened
    X, y = make_rings_set(400, n_rings=6, layout="random", noise=0.0, center_spread=0.5, random_state=seed)
    assert min(cdist(X[y == a], X[y == b]).min() for a in range(6) for b in range(a)) < 0.3


def test_separated_family_is_opt_in_and_apart():
    assert "separated" in FAMILIES and "separated" not in FAMILY_WEIGHTS
    from sklearn.neighbors import kneighbors_graph

    def linked_within(family):
        X, y, groups = make_clustering_sets(n_sets=10, set_size=(150, 250), families=family, n_features=2,
                                            noise_probability=0.0, random_state=0)
        shares, ks = [], []
        for Xs, ys in _sets(X, y, groups):
            rows, cols = kneighbors_graph(Xs, 3).nonzero()
            shares.append(np.mean(ys[rows] == ys[cols]))
            ks.append(len(np.unique(ys)))
        return np.array(shares), ks

    # Apart: 3-NN links almost never cross circles (a sparse small circle can reach another), unlike 'rings'.
    separated, ks = linked_within("separated")
    assert min(ks) >= 2 and max(ks) <= 6
    assert separated.mean() > 0.99 and separated.min() > 0.95
    assert linked_within("rings")[0].mean() < 0.9


@pytest.mark.parametrize("seed", range(4))
def test_chains_are_one_cluster_each_and_apart(seed):
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial.distance import cdist
    from sklearn.neighbors import kneighbors_graph

    X, y = make_chains_set(300, n_chains=3, n_blobs=2, bead_probability=1.0, n_beads=(6, 8), gap=0.3,
                           random_state=seed)
    assert np.array_equal(np.unique(y), np.arange(5))
    assert min(cdist(X[y == a], X[y == b]).min() for a in range(5) for b in range(a)) >= 0.3
    # Beaded: a 3-NN graph cuts every chain into pieces, yet each chain is one label (what the family teaches).
    for chain in range(3):
        n_pieces, _ = connected_components(kneighbors_graph(X[y == chain], 3), directed=False)
        assert n_pieces >= 2
    # Thin: a chain is long against its width (its second principal spread is small beside its extent).
    for chain in range(3):
        P = X[y == chain] - X[y == chain].mean(axis=0)
        assert np.ptp(P, axis=0).max() > 0.5


@pytest.mark.parametrize("taper, dense_share", [(0.0, (0.4, 0.6)), (3.0, (0.9, 0.97))])
def test_a_tapered_chain_thins_out_from_one_end(taper, dense_share):
    # One straight segment, no width: density (1 - s/L)**taper puts 1 - 0.5**(taper + 1) of it in its first half.
    X, _ = make_chains_set(4000, n_chains=1, n_blobs=0, n_segments=1, width=0.0, bead_probability=0.0,
                           taper=taper, random_state=0)
    t = (X - X.mean(axis=0)) @ np.linalg.svd(X - X.mean(axis=0), full_matrices=False)[2][0]
    first_half = np.mean(t < (t.min() + t.max()) / 2)
    assert dense_share[0] < max(first_half, 1 - first_half) < dense_share[1]


@pytest.mark.parametrize("family", ["chains", "tapered"])
def test_chains_family_is_opt_in_and_counts_its_shapes(family):
    assert family in FAMILIES and family not in FAMILY_WEIGHTS
    _, y, groups = make_clustering_sets(n_sets=12, set_size=(150, 400), families=family, n_features=(2, 5),
                                        max_clusters=6, noise_probability=0.0, random_state=0)
    ks = [len(np.unique(y[groups == g])) for g in range(12)]
    assert 1 <= min(ks) and max(ks) <= 6 and len(set(ks)) > 1


def _circle_radius(P):
    """Radius of the least-squares circle through 2-D points."""
    A = np.column_stack([2 * P, np.ones(len(P))])
    (a, b, c), *_ = np.linalg.lstsq(A, (P**2).sum(axis=1), rcond=None)
    return np.sqrt(c + a**2 + b**2)


def test_moons_are_unit_half_circles():
    X, y = make_moons_set(400, n_moons=3, noise=0.0, random_state=0)
    for c in range(3):
        assert_allclose(_circle_radius(X[y == c]), 1.0, rtol=1e-9)
        # A half circle (+- arc_jitter): the farthest two points are nearly a diameter apart.
        assert 1.7 < pdist(X[y == c]).max() <= 2.0 + 1e-9


def test_curves_kinds():
    X, y = make_curves_set(300, n_curves=2, kinds=("arc",), noise=0.0, random_state=0)
    for c in range(2):
        radius = _circle_radius(X[y == c])
        assert 0.3 - 1e-9 <= radius <= 1.0 + 1e-9
    X, y = make_curves_set(300, n_curves=2, kinds="sine", noise=0.0, random_state=0)
    # A sine wave is not a circle: the residuals of a circle fit are large.
    P = X[y == 0]
    A = np.column_stack([2 * P, np.ones(len(P))])
    residual = np.linalg.lstsq(A, (P**2).sum(axis=1), rcond=None)[1]
    assert residual.size == 0 or residual[0] > 1e-3
    X, y = make_curves_set(200, n_curves=2, kinds=["spiral"], n_features=5, random_state=0)
    assert X.shape == (200, 5) and set(np.unique(y)) == {0, 1}


def test_embed_in_dimensions():
    X = np.random.default_rng(0).normal(size=(60, 2))
    E = embed_in_dimensions(X, 10, random_state=0)
    assert E.shape == (60, 10)
    assert_allclose(pdist(E), pdist(X), rtol=1e-10)
    # Noise only in the orthogonal directions: distances can only grow, and the structure's plane stays exact.
    N = embed_in_dimensions(X, 10, noise_std=0.1, random_state=0)
    assert np.all(pdist(N) >= pdist(X) - 1e-10)
    assert not np.allclose(pdist(N), pdist(X))
    assert np.array_equal(embed_in_dimensions(X, 10, noise_std=0.1, random_state=0), N)
    same = embed_in_dimensions(X, 2, noise_std=0.5, random_state=1)
    assert_allclose(pdist(same), pdist(X), rtol=1e-10)
    with pytest.raises(ValueError, match="smaller than the 2 columns"):
        embed_in_dimensions(X, 1)


def test_add_background_noise():
    X, y = make_blobs_set(90, n_clusters=3, random_state=0)
    X = np.hstack([X, np.zeros((90, 1))])
    Xn, yn = add_background_noise(X, y, fraction=0.25, random_state=0)
    n_noise = round(0.25 * 90 / 0.75)
    assert Xn.shape == (90 + n_noise, 3) and yn.shape == (90 + n_noise,)
    assert np.array_equal(Xn[:90], X) and np.array_equal(yn[:90], y)
    assert np.array_equal(yn[90:], np.arange(3, 3 + n_noise))
    extent = X.max(axis=0) - X.min(axis=0)
    assert np.all(Xn[90:] >= X.min(axis=0) - 0.1 * extent) and np.all(Xn[90:] <= X.max(axis=0) + 0.1 * extent)
    assert np.all(Xn[:, 2] == 0)
    X0, y0 = add_background_noise(X, y, fraction=0.0)
    assert np.array_equal(X0, X) and np.array_equal(y0, y)


def test_add_outliers():
    X, y = make_blobs_set(198, n_clusters=3, random_state=0)
    Xo, yo = add_outliers(X, y, fraction=0.01, distance=(50.0, 5000.0), random_state=0)
    assert Xo.shape == (200, X.shape[1]) and np.array_equal(Xo[:198], X) and np.array_equal(yo[:198], y)
    assert np.array_equal(yo[198:], [3, 4])
    radius = np.sqrt(np.mean(np.sum((X - X.mean(axis=0)) ** 2, axis=1)))
    reach = np.linalg.norm(Xo[198:] - X.mean(axis=0), axis=1) / radius
    assert np.all(reach >= 50.0 - 1e-9) and np.all(reach <= 5000.0 + 1e-9)
    assert np.array_equal(add_outliers(X, y, random_state=3)[0], add_outliers(X, y, random_state=3)[0])
    # At least one outlier for any positive fraction; none for 0.
    assert len(add_outliers(X[:10], y[:10], fraction=0.001)[0]) == 11
    assert len(add_outliers(X, y, fraction=0.0)[0]) == 198
    fixed = add_outliers(X, y, fraction=0.01, distance=100.0, random_state=1)[0][198:]
    assert_allclose(np.linalg.norm(fixed - X.mean(axis=0), axis=1), 100.0 * radius)


def _sets(X, y, groups):
    return [(X[groups == g], y[groups == g]) for g in np.unique(groups)]


def test_clustering_sets_shapes_groups_labels():
    X, y, groups = make_clustering_sets(n_sets=40, set_size=(30, 60), n_features=(1, 12), random_state=0)
    assert X.dtype == np.float32 and y.dtype == np.int64 and groups.dtype == np.int64
    assert X.shape[0] == y.shape[0] == groups.shape[0]
    assert np.array_equal(np.unique(groups), np.arange(40))
    assert np.all(np.diff(groups) >= 0)  # set after set
    sizes = np.bincount(groups)
    assert sizes.min() >= 30 and sizes.max() <= 60
    # Labels never shared between sets.
    for label in np.unique(y):
        assert len(np.unique(groups[y == label])) == 1
    # Each set's non-zero columns are a prefix of the columns: the rest is exact zero padding.
    widths = []
    for xs, _ in _sets(X, y, groups):
        used = np.any(xs != 0, axis=0)
        width = int(used.sum())
        assert np.all(used[:width]) and not np.any(used[width:])
        widths.append(width)
    assert 1 <= min(widths) and max(widths) == X.shape[1] <= 12
    assert len(set(widths)) > 3


def test_clustering_sets_seeded():
    first = make_clustering_sets(n_sets=20, set_size=(20, 40), n_features=(1, 30), random_state=3)
    second = make_clustering_sets(n_sets=20, set_size=(20, 40), n_features=(1, 30), random_state=3)
    other = make_clustering_sets(n_sets=20, set_size=(20, 40), n_features=(1, 30), random_state=4)
    for a, b in zip(first, second, strict=True):
        assert np.array_equal(a, b)
    assert first[0].shape != other[0].shape or not np.array_equal(first[0], other[0])


def test_clustering_sets_width_and_dimensions():
    X, y, groups = make_clustering_sets(n_sets=30, set_size=50, n_features=(3, 7), max_features=10, random_state=0)
    assert X.shape == (1500, 10)
    assert np.all(X[:, 7:] == 0)
    for xs, _ in _sets(X, y, groups):
        assert 3 <= np.any(xs != 0, axis=0).sum() <= 7
    X, _, _ = make_clustering_sets(n_sets=20, set_size=40, n_features=1, random_state=0)
    assert X.shape == (800, 1) and np.all(X[:, 0] != 0)
    X, _, _ = make_clustering_sets(n_sets=10, set_size=40, n_features=5, dtype=np.float64, random_state=0)
    assert X.shape == (400, 5) and X.dtype == np.float64


def test_clustering_sets_max_clusters_and_noise():
    X, y, groups = make_clustering_sets(n_sets=60, set_size=(100, 150), n_features=(2, 6), max_clusters=4,
                                        noise_probability=0.0, random_state=0)
    counts = [len(np.unique(ys)) for _, ys in _sets(X, y, groups)]
    assert max(counts) <= 4 and min(counts) >= 1 and len(set(counts)) == 4
    X, y, groups = make_clustering_sets(n_sets=20, set_size=200, families={"blobs": 1.0}, max_clusters=3,
                                        noise_probability=1.0, noise_fraction=0.1, random_state=0)
    for _, ys in _sets(X, y, groups):
        sizes = np.unique(ys, return_counts=True)[1]
        assert np.sum(sizes == 1) >= 20  # the 20 noise points, each alone
        assert np.sum(sizes > 1) <= 3


def test_uniform_family_is_one_cluster():
    X, y, groups = make_clustering_sets(n_sets=10, set_size=(50, 80), families=["uniform"], noise_probability=1.0,
                                        random_state=0)
    for _, ys in _sets(X, y, groups):
        assert len(np.unique(ys)) == 1 and len(ys) >= 50


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_generates(family):
    X, y, groups = make_clustering_sets(n_sets=8, set_size=(40, 80), families=family, n_features=(1, 20),
                                        random_state=0)
    assert np.all(np.isfinite(X)) and len(np.unique(groups)) == 8
    for xs, ys in _sets(X, y, groups):
        if family != "uniform":
            assert len(np.unique(ys)) >= 1
        if family in ("rings", "moons", "curves", "mixed"):
            assert np.any(xs != 0, axis=0).sum() >= 2
        # The padded set canonicalises like the unpadded one.
        width = int(np.any(xs != 0, axis=0).sum())
        assert_allclose(canonicalize_set(xs), canonicalize_set(xs[:, :width]), atol=1e-5)


def test_informative_clusters_differ_in_their_informative_columns_only():
    """The structure lies along the table's axes: the clusters' means differ in n_informative columns, and every
    other column is the same noise for every cluster (not a rotation of the blobs into them)."""
    X, y = make_informative_set(3000, n_clusters=3, n_features=7, n_informative=2, min_separation=3.0,
                                random_state=0)
    means = np.array([X[y == c].mean(axis=0) for c in range(3)])
    spread = means.max(axis=0) - means.min(axis=0)
    informative = np.argsort(spread)[-2:]
    noise = np.setdiff1d(np.arange(7), informative)
    assert spread[informative].min() > 10 * spread[noise].max()
    # A noise column has the same spread in every cluster, and is independent of the informative ones.
    stds = np.array([X[y == c][:, noise].std(axis=0) for c in range(3)])
    assert_allclose(stds / stds.mean(axis=0), 1.0, atol=0.1)
    assert np.abs(np.corrcoef(X.T)[np.ix_(noise, informative)]).max() < 0.1
    # In make_clustering_sets the family keeps its own width and is never embedded at a random orientation.
    X, y, groups = make_clustering_sets(n_sets=20, set_size=(200, 300), families="informative",
                                        n_features=(1, 64), random_state=0)
    for xs, ys in _sets(X, y, groups):
        width = int(np.any(xs != 0, axis=0).sum())
        xs = xs[:, :width]
        kept = np.bincount(ys)[ys] > 1  # clusters, not background-noise singletons
        means = np.array([xs[ys == c].mean(axis=0) for c in np.unique(ys[kept])])
        apart = means.max(axis=0) - means.min(axis=0)
        assert 1 <= width <= 14 and np.sum(apart > 0.5 * apart.max()) <= 4  # m <= 4 columns and 2m + 2 of noise


def test_new_families_are_opt_in():
    new = {"subspaces", "warped", "informative"}
    assert new <= set(FAMILIES) and not new & set(FAMILY_WEIGHTS)


def test_subspace_clusters_are_apart_for_neighbours_not_for_principal_axes():
    """The family's point: in 48 dimensions the clusters overlap in distance and in their first principal
    axes, while each point's nearest neighbours are of its own cluster."""
    from sklearn.decomposition import PCA
    from sklearn.neighbors import NearestNeighbors

    X, y = make_subspace_set(600, n_clusters=8, n_features=48, subspace_dim=(3, 6), separation=1.0,
                             random_state=0)
    assert X.shape == (600, 48) and np.array_equal(np.unique(y), np.arange(8))
    _, index = NearestNeighbors(n_neighbors=6).fit(X).kneighbors(X)
    same_in_full = (y[index[:, 1:]] == y[:, None]).mean()
    Z = PCA(2, random_state=0).fit_transform(X)
    _, index = NearestNeighbors(n_neighbors=6).fit(Z).kneighbors(Z)
    same_in_plane = (y[index[:, 1:]] == y[:, None]).mean()
    assert same_in_full > 0.9 and same_in_plane < 0.6
    # Each cluster varies along at most 6 directions (+ the small ambient noise).
    spectrum = np.linalg.svd(X[y == 0] - X[y == 0].mean(axis=0), compute_uv=False) ** 2
    assert spectrum[:6].sum() / spectrum.sum() > 0.6


def test_separation_moves_subspace_centres_apart():
    gaps = []
    for separation in (0.0, 4.0):
        X, y = make_subspace_set(300, n_clusters=3, n_features=20, separation=separation, random_state=1)
        centres = np.array([X[y == c].mean(axis=0) for c in range(3)])
        gaps.append(pdist(centres).min())
    assert gaps[0] < 0.5 < 2.0 < gaps[1]


def test_warped_set_bends_blobs_but_keeps_them_whole():
    straight, y0 = make_warped_set(400, n_clusters=1, n_features=2, n_layers=0, random_state=3)
    bent, y1 = make_warped_set(400, n_clusters=1, n_features=2, n_layers=4, strength=0.95, random_state=3)
    assert np.array_equal(y0, y1)
    # The same points before and after the warp (same seed, same draws before it), no longer a linear image.
    design = np.column_stack([straight, np.ones(len(straight))])
    residual = bent - design @ np.linalg.lstsq(design, bent, rcond=None)[0]
    assert np.abs(residual).max() > 0.05 * np.abs(bent - bent.mean(axis=0)).max()
    # Invertible layers never tear a blob: its nearest-neighbour graph stays one piece.
    from scipy.sparse.csgraph import connected_components
    from sklearn.neighbors import kneighbors_graph

    assert connected_components(kneighbors_graph(bent, 10), directed=False)[0] == 1


def test_discretize_columns():
    X = np.random.default_rng(0).normal(size=(200, 10)) * np.arange(1, 11)
    Xd = discretize_columns(X, fraction=0.3, levels=(2, 5), random_state=0)
    counts = np.array([len(np.unique(column)) for column in Xd.T])
    assert (counts <= 5).sum() == 3 and (counts == 200).sum() == 7
    coarse = counts <= 5
    assert_allclose(Xd[:, ~coarse], X[:, ~coarse])
    assert_allclose(Xd[:, coarse].std(axis=0), X[:, coarse].std(axis=0))
    # Rank order kept within a discretised column.
    column = np.flatnonzero(coarse)[0]
    order = np.argsort(X[:, column])
    assert np.all(np.diff(Xd[order, column]) >= 0)
    assert_allclose(discretize_columns(X, fraction=0.0), X)


def test_family_weights_sum_to_one():
    assert sum(FAMILY_WEIGHTS.values()) == pytest.approx(1.0)
    assert FAMILY_WEIGHTS["blobs"] + FAMILY_WEIGHTS["densities"] == pytest.approx(0.4)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: make_blobs_set(0), "n_samples must be an integer >= 1"),
        (lambda: make_blobs_set(10, n_clusters=0), "n_clusters must be an integer >= 1"),
        (lambda: make_blobs_set(3, n_clusters=5), "fewer than n_clusters=5"),
        (lambda: make_blobs_set(10, n_clusters=2, noise_fraction=0.9), "fewer than n_clusters=2"),
        (lambda: make_blobs_set(10, cluster_std=(2.0, 1.0)), "cluster_std must satisfy low <= high"),
        (lambda: make_blobs_set(10, cluster_std=0.0), "cluster_std must be positive"),
        (lambda: make_blobs_set(10, anisotropy=0.5), "anisotropy must be a finite number >= 1.0"),
        (lambda: make_blobs_set(10, anisotropy=(3.0, 2.0)), "anisotropy must satisfy low <= high"),
        (lambda: make_blobs_set(10, n_clusters=2, weights=[1, 2, 3]), "weights must be 2 positive"),
        (lambda: make_blobs_set(10, n_clusters=2, weights=[1, -1]), "weights must be 2 positive"),  # D44
        (lambda: make_blobs_set(10, n_clusters=2, weights=[1, 0]), "weights must be 2 positive"),
        (lambda: make_blobs_set(10, noise_fraction=1.0), "noise_fraction must be a finite number"),
        (lambda: make_blobs_set(10, spacing=0.0), "spacing must be a positive finite number"),
        (lambda: make_blobs_set(10, tail_df=-1.0), "tail_df must be a positive finite number"),
        (lambda: make_blobs_set(10, tail_df=float("inf")), "tail_df must be a positive finite number"),
        (lambda: make_rings_set(10, n_features=1), "n_features must be an integer >= 2"),
        (lambda: make_rings_set(10, layout="spiral"), "layout must be one of"),
        (lambda: make_moons_set(10, noise=-1.0), "noise must be a finite number >= 0"),
        (lambda: make_curves_set(10, kinds=("arc", "zigzag")), "kinds must be a non-empty sequence"),
        (lambda: make_curves_set(10, kinds=()), "kinds must be a non-empty sequence"),
        (lambda: make_chains_set(10, n_chains=0), "n_chains must be an integer >= 1"),
        (lambda: make_chains_set(10, n_blobs=-1), "n_blobs must be an integer >= 0"),
        (lambda: make_chains_set(10, n_beads=1), "n_beads must be an integer >= 2"),
        (lambda: make_chains_set(10, blob_share=1.0), "blob_share must be"),
        (lambda: make_chains_set(10, n_features=1), "n_features must be an integer >= 2"),
        (lambda: make_chains_set(10, taper=-1.0), "taper must be"),
        (lambda: add_background_noise(np.zeros((3, 2)), [0.5, 1, 2]), "integer labels"),
        (lambda: add_background_noise(np.zeros((3, 2)), [0, 1, 2], fraction=1.0), "fraction must be"),
        (lambda: add_outliers(np.zeros((3, 2)), [0, 1, 2], fraction=-0.1), "fraction must be"),
        (lambda: add_outliers(np.zeros((3, 2)), [0, 1, 2], distance=0.0), "distance must be positive"),
        (lambda: add_outliers(np.zeros((3, 2)), [0, 1, 2], distance=(100.0, 10.0)), "distance must satisfy low"),
        (lambda: add_outliers(np.full((3, 2), np.nan), [0, 1, 2]), "NaN or infinity"),
        (lambda: embed_in_dimensions(np.zeros(3), 4), "2-D array"),
        (lambda: make_subspace_set(10, n_features=3, subspace_dim=(4, 6)), "subspace_dim must be at most"),
        (lambda: make_subspace_set(10, separation=-1.0), "separation must be a finite number >= 0"),
        (lambda: make_warped_set(10, strength=1.0), "strength must be below 1"),
        (lambda: make_warped_set(10, n_layers=(3, 1)), "n_layers must satisfy low <= high"),
        (lambda: discretize_columns(np.zeros((5, 2)), levels=1), "levels must be an integer >= 2"),
        (lambda: make_informative_set(10, n_features=2, n_informative=3), "n_informative=3 is more than"),
        (lambda: make_informative_set(10, n_informative=0), "n_informative must be an integer >= 1"),
        (lambda: make_informative_set(10, noise_scale=0.0), "noise_scale must be positive"),
        (lambda: discretize_columns(np.zeros((5, 2)), fraction=1.5), "fraction must be a finite number"),
        (lambda: make_clustering_sets(0), "n_sets must be an integer >= 1"),
        (lambda: make_clustering_sets(2, set_size=(50, 10)), "set_size must satisfy low <= high"),
        (lambda: make_clustering_sets(2, n_features=(0, 5)), "n_features must be an integer >= 1"),
        (lambda: make_clustering_sets(2, n_features=(2, 50), max_features=20), "max_features=20 is smaller"),
        (lambda: make_clustering_sets(2, families={"blobs": 1, "galaxies": 1}), "families must name some of"),
        (lambda: make_clustering_sets(2, families={"blobs": 0}), "families needs a positive weight"),
        (lambda: make_clustering_sets(2, families={"blobs": -1}), "must be a finite number >= 0"),
        (lambda: make_clustering_sets(2, noise_fraction=(0.1, 1.0)), "noise_fraction must be below 1"),
        (lambda: make_clustering_sets(2, noise_probability=2.0), "noise_probability must be"),
        (lambda: make_clustering_sets(2, dtype=np.int32), "dtype must be a floating-point type"),
        (lambda: make_clustering_sets(2, max_clusters=0), "max_clusters must be an integer >= 1"),
    ],
)
def test_bad_parameters_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(("params", "message"), [
    (dict(noise=-1.0), "noise must be a finite number >= 0.0"),
    (dict(noise=float("nan")), "noise must be a finite number"),  # ran as noise=0
    (dict(center_spread=-1.0), "center_spread must be a finite number >= 0.0"),
    (dict(radius_std=-1.0), "radius_std must be a finite number >= 0.0"),  # numpy's 'scale < 0'
    (dict(n_sets=2.5), "n_sets must be an integer >= 1"),  # a raw TypeError
    (dict(set_size=(50, 10)), "set_size must satisfy low <= high"),
    (dict(radius_range=(0.4, float("inf"))), "radius_range must be a finite number"),
    (dict(radius_range=(0.0, 0.5)), r"radius_range must satisfy 0 < min <= max"),  # a circle of radius 0 (D23)
])
def test_make_circles_sets_refuses_bad_parameters_by_name(params, message):
    """The circles generator checked less than the others: negative or NaN noise ran as noise=0."""
    with pytest.raises(ValueError, match=message):
        make_circles_sets(random_state=0, **{"n_sets": 2, "set_size": 30, **params})


# ------------------------------------------------------------------ probe 34 (generators)
def test_mixed_sets_of_one_cluster_keep_every_point():
    """A probe: 'mixed' with max_clusters=1 dropped the points meant for blobs (sets of 45-75 of 100)."""
    X, _, g = make_clustering_sets(n_sets=20, set_size=100, families="mixed", max_clusters=1, n_features=2,
                                   random_state=0)
    assert X.shape == (2000, 2) and np.all(np.bincount(g) == 100)


@pytest.mark.parametrize("dtype, top", [(np.uint8, 255), (np.int8, 127)])
def test_noise_labels_do_not_wrap_in_small_integer_types(dtype, top):
    """A probe: uint8 labels ending at 255 gave noise labels 0, 1, ... that joined real clusters."""
    X = np.random.default_rng(0).normal(size=(10, 2))
    y = np.array([0] * 5 + [top] * 5, dtype=dtype)
    for add in (partial(add_background_noise, fraction=0.5), partial(add_outliers, fraction=0.2)):
        _, labels = add(X, y, random_state=0)
        assert labels.dtype == np.int64 and list(labels[10:]) == list(range(top + 1, top + 1 + len(labels) - 10))


def test_tail_df_too_small_for_float64_is_refused():
    """A probe: tail_df=0.01 put points at infinity (chi-square draws underflow to 0)."""
    with pytest.raises(ValueError, match=r"tail_df=0\.01 is below 0\.1"):
        make_blobs_set(200, 3, tail_df=0.01, random_state=0)
    assert np.isfinite(make_blobs_set(200, 3, tail_df=0.1, random_state=0)[0]).all()


def test_families_given_as_a_set_draw_the_same_sets_in_every_process():
    """A probe: a set of names has no order (string hashes vary per process), so the same seed drew other sets."""
    names = ["blobs", "moons", "rings", "uniform"]
    as_set = make_clustering_sets(n_sets=4, set_size=50, families=set(reversed(names)), random_state=0)
    as_list = make_clustering_sets(n_sets=4, set_size=50, families=sorted(names), random_state=0)
    for a, b in zip(as_set, as_list, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="families must be a family name, a sequence of names or a mapping"):
        make_clustering_sets(n_sets=1, families=5, random_state=0)


def test_weights_near_the_float64_limit_split_as_their_ratios_say():
    """A probe: weights [1e308, 1e308, 1] overflowed their sum and gave counts [1, 1, 18]."""
    _, y = make_blobs_set(20, 3, weights=[1e308, 1e308, 1], random_state=0)
    counts = np.bincount(y)
    assert counts[2] == 1 and abs(int(counts[0]) - int(counts[1])) <= 6


@pytest.mark.parametrize("generator", [make_blobs_set, make_curves_set, make_moons_set, make_rings_set,
                                       make_subspace_set, make_warped_set])
@pytest.mark.parametrize("imbalance", [1e3, 1e12])
def test_any_finite_imbalance_draws_sizes(generator, imbalance):
    """exp(imbalance * z) overflowed to inf, and inf / inf gave numpy's 'pvals contains NaNs'."""
    X, y = generator(60, imbalance=imbalance, random_state=0)
    assert len(X) == 60
    sizes = np.bincount(y)
    assert sizes.min() >= 1 and sizes.max() >= 60 - 2 * len(sizes)  # one cluster takes nearly all


def test_generator_arguments_of_the_wrong_kind_are_named():
    with pytest.raises(TypeError, match="kinds must be"):
        make_curves_set(kinds=0)
    with pytest.raises(ValueError, match="weights must be 3 positive finite numbers"):
        make_blobs_set(30, n_clusters=3, weights="nonsense")
    with pytest.raises(ValueError, match="dtype must be a floating-point type"):
        make_clustering_sets(n_sets=2, dtype="nonsense")
    with pytest.raises(ValueError, match="dtype must be a floating-point type"):
        make_clustering_sets(n_sets=2, dtype=np.float32(0.5))  # a value, not a type
    assert make_clustering_sets(n_sets=2, dtype=np.float32, random_state=0)[0][0].dtype == np.float32


def test_discretize_columns_keeps_two_levels_of_a_tied_column_and_refuses_non_finite_input():
    """A probe: a column mostly of one value (every quantile edge on it) came back constant 0, losing the column;
    NaN was accepted (a NaN column back) and an empty set raised numpy's IndexError."""
    column = np.r_[np.zeros(90), np.arange(1, 11)]
    Xd = discretize_columns(column[:, None], fraction=1.0, levels=8, random_state=0)
    assert len(np.unique(Xd)) == 2 and np.isclose(Xd.std(), column.std())
    for bad, match in [(np.full((5, 2), np.nan), "NaN or infinity"), (np.zeros((0, 2)), "non-empty 2-D")]:
        with pytest.raises(ValueError, match=match):
            discretize_columns(bad, random_state=0)


def test_range_messages_and_omniglot_arguments_are_checked_first(tmp_path):
    """A probe: 'must be a integer'; load_omniglot looked for its archive before checking expect_complete (a
    FileNotFoundError for a bad argument), and data_home=5 gave pathlib's TypeError."""
    from skabc.datasets import load_omniglot

    with pytest.raises(ValueError, match="must be an integer or a"):
        discretize_columns(np.ones((5, 2)), levels=(2, 3, 4))
    with pytest.raises(ValueError, match="expect_complete must be True or False"):
        load_omniglot(data_home=tmp_path, expect_complete="yes")
    with pytest.raises(TypeError, match="data_home must be a folder"):
        load_omniglot(data_home=5)


@pytest.mark.parametrize("make", [
    partial(make_blobs_set, cluster_std=1e308), partial(make_blobs_set, spacing=1e308),
    partial(make_blobs_set, min_separation=1e308), partial(make_informative_set, min_separation=1e308),
])
def test_centres_that_overflow_are_refused_not_searched_for_ever(make):
    """A probe (/work/probe42a): the box search for centres widened its box without end once the separations
    overflowed float64 (still running when killed)."""
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="cannot place"):
        make(random_state=0)


@pytest.mark.parametrize("make", [
    partial(make_warped_set, cluster_std=1e307), partial(make_rings_set, noise=1e308),
    partial(make_moons_set, noise=1e308), partial(make_circles_sets, 3, noise=1e308),
    lambda random_state: add_background_noise(np.ones((10, 2)) * np.arange(10)[:, None], np.zeros(10, int),
                                              margin=1e308, random_state=random_state),
])
def test_points_that_overflow_are_refused(make):
    """A probe (/work/probe42a): these returned all-NaN or infinite points without a word."""
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="not finite"):
        make(random_state=0)


def test_an_ambient_noise_that_overflows_is_refused_as_the_others_are():
    """Probe 53f: make_subspace_set(ambient_noise=1e160) raised a raw OverflowError from a Python float's square."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="not finite"):
            make_subspace_set(ambient_noise=1e160, random_state=0)


def test_background_noise_around_a_single_point_is_spread_in_a_unit_box():
    """Probe 53f: the box of one distinct structure point has no size, and every noise point was a copy of it, with
    a label of its own."""
    X, y = make_blobs_set(n_samples=2, n_clusters=1, noise_fraction=0.5, random_state=0)
    assert len(np.unique(X, axis=0)) == 2 and np.abs(X[0] - X[1]).max() <= 0.5 * 1.2 + 1e-12
    assert sorted(y) == [0, 1]  # the point's cluster, and the noise point's own label
    X, _, groups = make_clustering_sets(n_sets=3, set_size=2, families="blobs", n_features=2, noise_probability=1,
                                        noise_fraction=0.5, random_state=0)
    assert all(len(np.unique(X[groups == g], axis=0)) == 2 for g in range(3))


def test_a_bead_count_no_set_can_hold_is_refused_before_allocating():
    """Probe 53f: n_beads=2e8 for 50 points took 3.4 GB (np.arange of the beads) to return 50 points."""
    with pytest.raises(ValueError, match=r"n_beads must allow at most n_samples=50 beads"):
        make_chains_set(n_samples=50, n_chains=1, n_blobs=0, bead_probability=1.0, n_beads=2 * 10**8)
    assert make_chains_set(n_samples=10, random_state=0)[0].shape == (10, 2)  # the default (4, 20) beads still go


def test_families_of_other_types_are_unknown_names():
    """A probe (/work/probe42a): a name that is not a string raised sorting's TypeError ('<' not supported)."""
    for families in ([5, "zz"], {"blobs", 5}, {"blobs": 1.0, None: 1.0}):
        with pytest.raises(ValueError, match="families must name some of"):
            make_clustering_sets(2, 10, families=families, random_state=0)


def test_embed_in_dimensions_refuses_missing_values_and_no_rows():
    with pytest.raises(ValueError, match="NaN or infinity"):
        embed_in_dimensions(np.array([[np.nan, 1.0]]), 3)
    with pytest.raises(ValueError, match="non-empty"):
        embed_in_dimensions(np.zeros((0, 2)), 3)


def test_transforms_refuse_sets_whose_numbers_overflow_instead_of_returning_inf_or_nan():
    """Probe 45f: add_outliers returned rows of inf and discretize_columns columns of NaN for sets near 1e160."""
    from skabc.datasets import add_outliers, discretize_columns

    X, y = np.random.default_rng(0).normal(size=(50, 3)), np.zeros(50, dtype=int)
    with np.errstate(all="ignore"):
        with pytest.raises(ValueError, match="not finite"):
            add_outliers(X * 1e160, y, 0.1, random_state=0)
        with pytest.raises(ValueError, match="not finite"):
            discretize_columns(X * 1e160, 1.0, random_state=0)
    assert np.isfinite(add_outliers(X * 1e100, y, 0.1, random_state=0)[0]).all()


def test_mixed_sets_with_a_one_point_curve_give_their_blobs_a_spread():
    """Probe 45f: a 'mixed' set whose curved part is one point put zero-spread blobs on it: 5 copies of one point
    with 5 labels."""
    X, y, groups = make_clustering_sets(6, (5, 30), families="mixed", n_features=(1, 100), max_clusters=3,
                                        noise_probability=0.5, noise_fraction=(0.1, 0.5), random_state=26)
    for g in np.unique(groups):
        _, first = np.unique(X[groups == g], axis=0, return_inverse=True)
        labels = y[groups == g]
        assert all(len(np.unique(labels[first.ravel() == u])) == 1 for u in np.unique(first))


# ------------------------------------------------------------------ requests too large, overflow, odd input (probe 55c)
@pytest.mark.parametrize("make", [
    lambda: make_circles_sets(n_sets=2, set_size=10**13),
    lambda: make_blobs_set(30, n_features=10**12),
    lambda: make_clustering_sets(2, 20, n_features=10**12, random_state=0),
    lambda: embed_in_dimensions(np.zeros((5, 2)), 10**13),
    lambda: add_background_noise(np.zeros((20, 2)), np.zeros(20, dtype=int), fraction=1 - 1e-15),
], ids=["circles-set_size", "blobs-n_features", "clustering-n_features", "embed", "noise-fraction"])
def test_requests_beyond_the_output_limit_are_refused_by_their_parameters(make):
    # They reached numpy as allocations of terabytes (MemoryError), or built gigabytes silently.
    with pytest.raises(ValueError, match=r"ask for [\d,]+ x [\d,]+ values, more than"):
        make()


def test_the_output_limit_judges_the_sets_drawn_not_the_largest_they_could_be(monkeypatch):
    import skabc.datasets._common as common

    monkeypatch.setattr(common, "MAX_VALUES", 239)  # two sets of at most 60 points in 2-D could reach 240
    X, _, _ = make_circles_sets(n_sets=2, set_size=(10, 60), random_state=0)
    assert X.size <= 239
    with pytest.raises(ValueError, match="n_sets and set_size ask for"):
        make_circles_sets(n_sets=2, set_size=(10, 10**9), random_state=0)
    X, _, _ = make_clustering_sets(2, set_size=(10, 60), n_features=2, random_state=0)
    assert X.size <= 239


def test_unbounded_loop_counts_are_refused():
    with pytest.raises(ValueError, match="n_layers must be at most 1000"):  # 10**9 layers ran for hours
        make_warped_set(30, 2, n_layers=10**9, random_state=0)
    with pytest.raises(ValueError, match="n_segments must be at most 10000"):
        make_chains_set(50, n_segments=10**12, random_state=0)


def test_bead_counts_far_beyond_the_points_cost_no_memory():
    X, y = make_chains_set(40, n_chains=1, n_blobs=0, bead_probability=1.0, n_beads=(2, 2**30), random_state=0)
    assert X.shape == (40, 2) and set(y) == {0}  # every bead's centre was listed: 2**30 of them took 8 GB
    with pytest.raises(ValueError, match="n_beads must be at most 1,073,741,824"):
        make_chains_set(40, n_beads=(2, 10**20), random_state=0)  # was numpy's "high is out of bounds for int64"


def test_bead_counts_do_not_matter_where_no_chain_is_beaded():
    X, _ = make_chains_set(n_samples=3, n_chains=1, n_blobs=0, bead_probability=0.0, random_state=0)
    assert X.shape == (3, 2)
    with pytest.raises(ValueError, match="n_beads must allow at most n_samples=3"):
        make_chains_set(n_samples=3, n_chains=1, n_blobs=0, bead_probability=0.5, random_state=0)


@pytest.mark.parametrize("spread", [{"width": 1e308}, {"blob_std": 1e308}])
def test_chains_overflowing_spreads_get_the_generators_overflow_error(spread):
    with pytest.raises(ValueError, match="the drawn points are not finite"):  # was numpy's OverflowError
        make_chains_set(50, random_state=0, **spread)


@pytest.mark.parametrize("make", [partial(make_blobs_set, n_clusters=5), partial(make_rings_set, n_rings=3)],
                         ids=["blobs", "rings"])
def test_an_overflowing_imbalance_gives_one_large_cluster_without_warnings(make, recwarn):
    X, y = make(30, imbalance=1e308, random_state=0)  # reached numpy's multinomial as NaN weights
    assert X.shape[0] == 30 and np.all(np.isfinite(X))
    assert np.bincount(y).max() > 30 - 2 * len(np.unique(y))  # every other cluster keeps its one point or so
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_discretized_levels_beyond_their_limit_are_refused_by_name():
    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(ValueError, match="levels must be at most 16,777,216"):  # asked numpy for terabytes
        discretize_columns(X, fraction=1.0, levels=10**12, random_state=0)
    Xd = discretize_columns(X, fraction=1.0, levels=(40, 80), random_state=0)  # more levels than rows: as before
    assert all(len(np.unique(column)) <= 30 for column in Xd.T)


@pytest.mark.parametrize("transform", [partial(add_background_noise, y=np.zeros(4, dtype=int)),
                                       partial(add_outliers, y=np.zeros(4, dtype=int)),
                                       partial(embed_in_dimensions, n_features=3), discretize_columns])
def test_transforms_refuse_sparse_and_complex_sets_by_name(transform):
    import scipy.sparse as sp

    X = np.arange(8.0).reshape(4, 2)
    with pytest.raises(TypeError, match="X must be a dense array"):  # was "setting an array element with a sequence"
        transform(sp.csr_matrix(X))
    with pytest.raises(ValueError, match="X holds complex numbers"):  # was cast to real, dropping the imaginary part
        transform(X + 1j)


def test_huge_family_weights_and_separations_raise_no_runtime_warnings(recwarn):
    make_clustering_sets(2, 20, families={"blobs": 1e308, "rings": 1e308}, n_features=(2, 4), random_state=0)
    make_blobs_set(30, min_separation=1e300, random_state=0)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("make", [make_blobs_set, make_warped_set])
@pytest.mark.parametrize("scale", [1e-200, 1e-161, 1e-150, 1e150, 1e200])  # 1e-161: a subnormal variance
def test_blobs_and_warped_sets_scale_with_cluster_std(make, scale):
    """Probe 62a: at cluster_std=1e200 two warp layers raised numpy's 'SVD did not converge', and at 1e-200 the
    warped set collapsed to one point and the blobs to 95 distinct ones (squared offsets under- and overflowed).
    The same seed at another scale draws the same set, scaled."""
    layers = {"n_layers": 2} if make is make_warped_set else {}  # two layers: the second met the first's overflow
    X, y = make(200, cluster_std=scale, random_state=0, **layers)
    base, base_y = make(200, cluster_std=1.0, random_state=0, **layers)
    np.testing.assert_array_equal(y, base_y)
    assert_allclose(X / scale, base, rtol=0, atol=1e-12 * np.abs(base).max())


@pytest.mark.parametrize("make, name", [(make_circles_sets, "n_circles"), (make_circles_sets, "set_size"),
                                        (make_clustering_sets, "set_size"), (make_clustering_sets, "n_features")])
def test_huge_upper_ends_of_count_ranges_are_named(make, name):
    """Probe 62a: numpy's 'high is out of bounds for int64', or a TypeError from np.log of a Python int. An upper end
    that numpy can draw is judged by the sets drawn, as before: too many values, or (circles) at most one per point."""
    with pytest.raises(ValueError, match=rf"^{name} must be at most 2\*\*62 \(numpy draws counts as int64\), got"):
        make(n_sets=2, random_state=0, **{name: (1, 2**63 if name != "n_features" else 2**70)})
    if name == "n_circles":
        _, y, groups = make(n_sets=2, set_size=30, n_circles=(1, 2**62), random_state=0)
        assert all(len(np.unique(y[groups == g])) <= 30 for g in (0, 1))
    else:
        with pytest.raises(ValueError, match=r"ask for [\d,]+ x [\d,]+ values, more than"):
            make(n_sets=2, random_state=0, **{name: (1, 2**62)})


def test_the_size_refusal_names_max_features_where_it_sets_the_width():
    with pytest.raises(ValueError, match=r"^n_sets, set_size and max_features ask for 60 x 1,000,000,000,000"):
        make_clustering_sets(3, set_size=20, n_features=2, max_features=10**12)


def test_fractions_and_numpy_arrays_are_the_numbers_and_pairs_they_hold():
    """Probe 62a: a Fraction passed the Real check and then failed in np.isfinite; np.array([low, high]) was refused
    as 'not a (low, high) pair' by every generator but make_circles_sets."""
    from fractions import Fraction

    def same(left, right):
        np.testing.assert_array_equal(left[0], right[0])
        np.testing.assert_array_equal(left[1], right[1])

    same(make_blobs_set(60, noise_fraction=Fraction(1, 10), random_state=0),
         make_blobs_set(60, noise_fraction=0.1, random_state=0))
    same(make_rings_set(60, noise=Fraction(1, 20), random_state=0), make_rings_set(60, noise=0.05, random_state=0))
    same(make_blobs_set(60, cluster_std=np.array([0.5, 1.5]), random_state=0),
         make_blobs_set(60, cluster_std=(0.5, 1.5), random_state=0))
    same(make_rings_set(60, radius_range=np.array([0.3, 1.0]), random_state=0),
         make_rings_set(60, radius_range=(0.3, 1.0), random_state=0))
    same(make_circles_sets(2, set_size=np.array(50), random_state=0),
         make_circles_sets(2, set_size=50, random_state=0))
    with pytest.raises(ValueError, match="cluster_std must be a number or a"):
        make_blobs_set(60, cluster_std=np.array([0.5, 1.0, 1.5]))


@pytest.mark.parametrize("transform", [add_background_noise, add_outliers])
def test_labels_past_int64_are_refused_not_wrapped(transform):
    """Probe 62a: uint64 labels of 2**63 raised a raw OverflowError; a label of 2**63 - 1 has no room for more."""
    X = np.array([[0.0, 0.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match=r"^y's largest label 9223372036854775808 leaves no room in int64"):
        transform(X, np.array([0, 2**63], dtype=np.uint64), 0.4, random_state=0)
    with pytest.raises(ValueError, match=r"leaves no room in int64 for 1 more label;"):
        transform(X, np.array([0, 2**63 - 1]), 0.4, random_state=0)
    _, y = transform(X, np.array([0, 255], dtype=np.uint8), 0.4, random_state=0)
    np.testing.assert_array_equal(y, [0, 255, 256])


@pytest.mark.parametrize("family, low, high", [("rings", 2, 5), ("moons", 2, 4), ("curves", 1, 5), ("mixed", 2, 9),
                                               ("uniform", 1, 1), ("densities", 2, 15), ("blobs", 1, 15)])
def test_default_families_draw_the_cluster_counts_their_documentation_gives(family, low, high):
    """make_clustering_sets' documented ranges per family (mutation survivor D12 sent rings, moons and curves to the
    mixed branch, which adds blobs, and mixed to the curves one, with every test green)."""
    _, y, groups = make_clustering_sets(n_sets=40, set_size=(100, 200), families=family, n_features=2,
                                        noise_probability=0.0, random_state=0)
    ks = [len(np.unique(y[groups == g])) for g in range(40)]
    assert low <= min(ks) and max(ks) <= high, (min(ks), max(ks))
    assert max(ks) - min(ks) >= (0 if low == high else 2)  # the range is drawn from, not one count


def test_circles_sets_draw_sizes_and_counts_over_their_whole_ranges():
    """set_size and n_circles are inclusive ranges; a drawing holds as many circles as drawn, never more than its
    points (mutation survivors D19, D20: sizes that never reached the upper end; a circle per point)."""
    _, y, groups = make_circles_sets(n_sets=40, set_size=(20, 21), n_circles=(3, 5), random_state=0)
    sizes = np.bincount(groups)
    ks = [len(np.unique(y[groups == g])) for g in range(40)]
    assert set(sizes) == {20, 21} and set(ks) == {3, 4, 5}
    _, y, groups = make_circles_sets(n_sets=5, set_size=4, n_circles=(6, 8), random_state=0)
    assert all(len(np.unique(y[groups == g])) == 4 for g in range(5))  # capped at the points of the drawing


def test_warped_sets_take_up_to_max_layers():
    """n_layers's documented bound is inclusive (mutation survivor D28 refused 1,000)."""
    from skabc.datasets.mixtures import MAX_LAYERS

    X, _ = make_warped_set(12, 2, n_layers=MAX_LAYERS, random_state=0)
    assert MAX_LAYERS == 1000 and np.isfinite(X).all()
