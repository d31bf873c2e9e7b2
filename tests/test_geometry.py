"""Local-geometry pair features and the models that use them."""

import numpy as np
import pytest
import torch

from skabc import ContextualKernel
from skabc.datasets import make_circles_sets
from skabc.nn.geometry import BANDWIDTHS, KNN_SIZES, N_PAIR_FEATURES, SCALE_NEIGHBOR, pair_features
from skabc.nn.model import ABCNet


def _brute_force(X: np.ndarray) -> dict:
    """The features of one set from their definitions, with numpy sorts."""
    n = len(X)
    d = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    off = d + np.diag(np.full(n, np.inf))
    order = np.argsort(off, axis=1, kind="stable")
    scale = np.sort(off, axis=1)[:, SCALE_NEIGHBOR - 1]
    u = d**2 / (scale[:, None] * scale[None])
    knn = {k: np.zeros((n, n), bool) for k in KNN_SIZES}
    for k in KNN_SIZES:
        knn[k][np.arange(n)[:, None], order[:, :k]] = True
    middle = KNN_SIZES[len(KNN_SIZES) // 2]
    lists = [set(order[i, :middle]) for i in range(n)]
    either = knn[middle] | knn[middle].T
    shared = np.array([[len(lists[i] & lists[j]) / middle if either[i, j] else 0.0 for j in range(n)]
                       for i in range(n)])
    return {"u": u, "knn": knn, "mutual": knn[middle] & knn[middle].T, "shared": shared, "dist": d}


def test_pair_features_match_their_definitions():
    X = np.random.default_rng(0).normal(size=(60, 3))
    pairs, points = pair_features(torch.as_tensor(X, dtype=torch.float32)[None])
    pairs = np.moveaxis(pairs[0].double().numpy(), 0, -1)  # (n, n, features)
    ref = _brute_force(X)
    assert pairs.shape == (60, 60, N_PAIR_FEATURES)
    for b, bandwidth in enumerate(BANDWIDTHS):
        np.testing.assert_allclose(pairs[..., b], np.exp(-ref["u"] / bandwidth), atol=1e-4)
    np.testing.assert_allclose(pairs[..., len(BANDWIDTHS)], np.log1p(ref["u"]), atol=1e-3, rtol=1e-4)
    offset = len(BANDWIDTHS) + 1
    for i, k in enumerate(KNN_SIZES):
        np.testing.assert_array_equal(pairs[..., offset + i], ref["knn"][k] | ref["knn"][k].T)
    np.testing.assert_array_equal(pairs[..., offset + len(KNN_SIZES)], ref["mutual"])
    np.testing.assert_allclose(pairs[..., offset + len(KNN_SIZES) + 1], ref["shared"], atol=1e-6)
    np.testing.assert_allclose(pairs[..., -1], ref["dist"], atol=1e-4)
    assert np.allclose(pairs, pairs.transpose(1, 0, 2))
    assert points.shape == (1, 60, 2) and torch.isfinite(points).all()
    # The point features, by brute force (probe 59a: only their shape was checked): the density log(s7 / median s7)
    # (torch's median is the lower one) and the growth log(s5 / s30), s_k the distance to the k-th neighbour.
    ranked = np.sort(np.where(np.eye(60, dtype=bool), np.inf, np.linalg.norm(X[:, None] - X[None], axis=-1)), axis=1)
    s5, s7, s30 = ranked[:, 4], ranked[:, 6], ranked[:, 29]
    np.testing.assert_allclose(points[0, :, 0].double().numpy(), np.log(s7 / np.sort(s7)[29]), atol=1e-4)
    np.testing.assert_allclose(points[0, :, 1].double().numpy(), np.log(s5 / s30), atol=1e-4)


def test_pair_features_ignore_padding_and_handle_tiny_sets():
    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.normal(size=(2, 40, 2)), dtype=torch.float32)
    mask = torch.ones(2, 40, dtype=torch.bool)
    mask[1, 25:] = False
    pairs, points = pair_features(X, mask)
    alone, alone_points = pair_features(X[1:2, :25])
    torch.testing.assert_close(pairs[1, :, :25, :25], alone[0])
    torch.testing.assert_close(points[1, :25], alone_points[0])
    assert pairs[1, :, 25:].abs().sum() == 0 and pairs[1, :, :, 25:].abs().sum() == 0
    for n in (1, 2, 5):  # fewer points than the neighbourhood sizes
        small, small_points = pair_features(X[:1, :n])
        assert torch.isfinite(small).all() and torch.isfinite(small_points).all()


def test_pair_features_are_scale_free_but_for_the_distance():
    X = torch.as_tensor(np.random.default_rng(2).normal(size=(1, 50, 4)), dtype=torch.float32)
    pairs, points = pair_features(X)
    scaled, scaled_points = pair_features(7.0 * X)
    torch.testing.assert_close(pairs[:, :-1], scaled[:, :-1], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(points, scaled_points, atol=1e-4, rtol=1e-4)


def test_pair_features_are_permutation_equivariant_where_distances_tie():
    # An integer grid and repeated rows: many neighbours as near as the k-th; row order must not pick among them.
    grid = np.stack(np.meshgrid(np.arange(8), np.arange(6)), -1).reshape(-1, 2).astype(np.float32)
    X = np.concatenate([grid, grid[:5], grid[:5]])
    perm = np.random.default_rng(0).permutation(len(X))
    pairs, points = pair_features(torch.as_tensor(X)[None])
    permuted, permuted_points = pair_features(torch.as_tensor(X[perm])[None])
    index = torch.as_tensor(perm)
    torch.testing.assert_close(permuted[0], pairs[0][:, index][:, :, index])
    torch.testing.assert_close(permuted_points[0], points[0][index])
    # Copies of one row are interchangeable: their rows of every map are equal.
    offset = len(BANDWIDTHS) + 1
    maps = pairs[0, offset:-1]
    torch.testing.assert_close(maps[:, 0, 1:48], maps[:, 48, 1:48])
    # Ties included: each point has at least as many neighbours as the size asks, the grid's inner points more.
    directed_10 = pairs[0, offset + KNN_SIZES.index(10)]
    assert bool((directed_10.sum(1) >= 10).all()) and int(directed_10.sum(1).max()) > 10
    shared = pairs[0, offset + len(KNN_SIZES) + 1]
    assert float(shared.max()) <= 1.0 and torch.equal(shared, shared.T)


def test_identical_rows_get_one_affinity():
    from skabc import pretrained

    kernel = pretrained.load("generic")  # a network with local geometry
    A = kernel.transform(np.ones((40, 3)))
    off = A[~np.eye(40, dtype=bool)]
    assert off.max() - off.min() < 1e-5
    rows = np.round(np.random.default_rng(0).normal(size=(120, 2)) * 2)  # rounded: ties and copies
    perm = np.random.default_rng(1).permutation(120)
    np.testing.assert_allclose(kernel.transform(rows[perm]), kernel.transform(rows)[np.ix_(perm, perm)], atol=1e-4)


def test_geometry_model_starts_as_the_model_without_it_and_its_maps_matter():
    torch.manual_seed(0)
    X = torch.randn(2, 30, 6)
    mask = torch.ones(2, 30, dtype=torch.bool)
    mask[0, 20:] = False
    with_geometry = ABCNet(6, d_model=16, n_heads=2, n_blocks=2, local_geometry=True, embed_features=3).eval()
    plain = ABCNet(3, d_model=16, n_heads=2, n_blocks=2).eval()
    missing, unexpected = with_geometry.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and set(missing) == {"pair_bias.weight", "pair_bias.bias",
                                               "point_proj.weight", "point_proj.bias"}
    with torch.no_grad():
        same = with_geometry(X, mask)
        torch.testing.assert_close(same, plain(X[..., :3], mask))
        torch.nn.init.normal_(with_geometry.pair_bias.weight)
        changed = with_geometry(X, mask)
    assert not torch.allclose(changed, same)
    torch.testing.assert_close(changed, changed.transpose(1, 2))
    # Padding still never influences real points.
    torch.testing.assert_close(changed[0, :20, :20], with_geometry(X[:1, :20])[0], atol=1e-4, rtol=1e-4)


def test_embed_features_runs_from_one_column_to_all_of_them():
    """The embedder reads the first embed_features columns, 1 to n_features (mutation survivor N22 refused 1)."""
    X = torch.randn(1, 10, 4, generator=torch.Generator().manual_seed(0))
    for width in (1, 4):
        net = ABCNet(4, d_model=16, n_heads=2, n_blocks=1, local_geometry=True, embed_features=width).eval()
        assert net.embedder.net[0].in_features == width
        assert torch.isfinite(net(X)).all()
    for width in (0, 5):
        with pytest.raises(ValueError, match=rf"embed_features must be in \[1, n_features=4\], got {width}"):
            ABCNet(4, d_model=16, n_heads=2, n_blocks=1, local_geometry=True, embed_features=width)


def test_a_kernel_embeds_every_canonical_column_when_embed_features_says_so(blob_data):
    """embed_features equal to the input width is the whole input (mutation survivor N35 refused it)."""
    X, y, groups = blob_data
    kernel = ContextualKernel(local_geometry=True, canonical_features=4, embed_features=4, d_model=8, n_heads=2,
                              n_blocks=1, max_epochs=1, set_size=(10, 20), random_state=0, verbose=0)
    kernel.fit(X, y, groups=groups)
    assert kernel.module_.embed_features == 4 and kernel.transform(X[:12]).shape == (12, 12)
    with pytest.raises(ValueError, match="embed_features=5 exceeds the input width 4"):
        kernel.set_params(embed_features=5).fit(X, y, groups=groups)


def test_geometry_needs_a_backend_that_takes_biases():
    with pytest.raises(ValueError, match="accepts biases"):
        ABCNet(4, d_model=16, n_heads=2, n_blocks=1, attention="isab", local_geometry=True)
    with pytest.raises(ValueError, match="embed_features"):
        ABCNet(4, d_model=16, n_heads=2, n_blocks=1, local_geometry=True, embed_features=5)


def test_geometry_kernel_fits_saves_and_loads(tmp_path):
    X, y, groups = make_circles_sets(n_sets=16, set_size=40, random_state=0)
    kernel = ContextualKernel(local_geometry=True, canonical_features=4, embed_features=2, d_model=16, n_heads=2,
                              n_blocks=1, set_size=40, max_epochs=1, batch_size=8, random_state=0)
    kernel.fit(X, y, groups=groups)
    A = kernel.transform(X[:40])
    assert A.shape == (40, 40) and np.allclose(A, A.T) and ((A >= 0) & (A <= 1)).all()
    path = tmp_path / "geometry.safetensors"
    kernel.save(path)
    loaded = ContextualKernel.load(path, device="cpu")
    assert loaded.local_geometry and loaded.embed_features == 2
    np.testing.assert_array_equal(loaded.transform(X[:40]), A)
    # Sparse affinities leave the geometry terms out: they hold what the network without them computes.
    sparse = loaded.set_params(affinity_mode="sparse", n_neighbors=39, n_random_neighbors=0).transform(X[:40])
    plain = ContextualKernel.load(path, device="cpu")
    _zero_geometry(plain)
    off_diagonal = ~np.eye(40, dtype=bool)
    np.testing.assert_allclose(sparse.toarray()[off_diagonal], plain.transform(X[:40])[off_diagonal], atol=1e-6)


def _zero_geometry(kernel) -> None:
    for layer in (kernel.module_.pair_bias, kernel.module_.point_proj):
        layer.weight.data.zero_()
        layer.bias.data.zero_()


def test_large_sets_are_computed_without_the_geometry_terms(monkeypatch):
    import skabc.inference as inference

    X, y, groups = make_circles_sets(n_sets=8, set_size=30, random_state=1)
    kernel = ContextualKernel(local_geometry=True, canonical_features=4, d_model=16, n_heads=2, n_blocks=1,
                              set_size=30, max_epochs=1, batch_size=8, random_state=0).fit(X, y, groups=groups)
    torch.nn.init.normal_(kernel.module_.pair_bias.weight)
    with_terms = kernel.transform(X[:30])
    monkeypatch.setattr(inference, "GEOMETRY_MAX_SAMPLES", 29)
    without = kernel.transform(X[:30])
    assert not np.allclose(with_terms, without)
    _zero_geometry(kernel)
    monkeypatch.setattr(inference, "GEOMETRY_MAX_SAMPLES", 4000)
    np.testing.assert_allclose(kernel.transform(X[:30]), without, atol=1e-6)


def test_context_gate_starts_neutral_then_weighs_head_against_geometry():
    torch.manual_seed(0)
    X = torch.randn(2, 30, 6)
    mask = torch.ones(2, 30, dtype=torch.bool)
    mask[0, 20:] = False
    plain = ABCNet(6, d_model=16, n_heads=2, n_blocks=2, local_geometry=True, embed_features=3).eval()
    torch.nn.init.normal_(plain.pair_bias.weight, std=0.01)
    gated = ABCNet(6, d_model=16, n_heads=2, n_blocks=2, local_geometry=True, embed_features=3,
                   context_gate=True).eval()
    missing, unexpected = gated.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and set(missing) == {"gate.weight", "wide_pair_bias.weight", "wide_pair_bias.bias",
                                               "wide_point_proj.weight", "wide_point_proj.bias"}
    with torch.no_grad():
        torch.testing.assert_close(gated(X, mask), plain(X, mask))
        # A gate that silences the head leaves the geometry term alone.
        gated.gate.weight[0, -1] = -1.0  # x outside share (~1/2) x GEOMETRY_GAIN: clamped at exp(-4)
        geometry = gated.geometry(X, mask)
        z = gated.encode(X, mask, geometry)
        scales = gated.logit_scales(geometry[2], z, mask)
        torch.testing.assert_close(scales, torch.tensor([[np.exp(-4.0), 1.0]] * 2, dtype=torch.float32))
        expected = np.exp(-4.0) * gated.head(z) + gated.head_bias(geometry)
        torch.testing.assert_close(gated(X, mask), expected)
        # The gate reads context: with weights on, different sets get different factors, padding ignored.
        torch.nn.init.normal_(gated.gate.weight, std=0.01)
        out = gated(X, mask)
        factors = gated.logit_scales(gated.outside_share(X, mask), z, mask)
        assert not torch.allclose(factors[0], factors[1])
    torch.testing.assert_close(out[0, :20, :20], gated(X[:1, :20])[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out, out.transpose(1, 2))


def test_context_gate_reads_the_variance_outside_the_embedded_columns():
    gated = ABCNet(6, d_model=8, n_heads=2, n_blocks=1, local_geometry=True, embed_features=3,
                   context_gate=True).eval()
    with torch.no_grad():
        gated.gate.weight[0, -1] = 0.01  # the head factor grows with the outside share only
        X = torch.randn(1, 40, 6)
        narrow = X.clone()
        narrow[..., 3:] *= 0.01  # structure inside the embedded columns
        z = gated.encode(X)
        wide, within = gated.outside_share(X), gated.outside_share(narrow)
        assert gated.logit_scales(wide, z)[0, 0] > gated.logit_scales(within, z)[0, 0] > 1.0


def test_context_gate_leaves_sets_within_the_embedded_columns_alone():
    torch.manual_seed(1)
    plain = ABCNet(6, d_model=8, n_heads=2, n_blocks=1, local_geometry=True, embed_features=3).eval()
    torch.nn.init.normal_(plain.pair_bias.weight, std=0.01)
    gated = ABCNet(6, d_model=8, n_heads=2, n_blocks=1, local_geometry=True, embed_features=3,
                   context_gate=True).eval()
    gated.load_state_dict(plain.state_dict(), strict=False)
    X = torch.zeros(1, 40, 6)
    X[..., :3] = torch.randn(1, 40, 3)  # e.g. a 3-column table canonicalised to 6 zero-padded columns
    with torch.no_grad():
        for layer in (gated.gate, gated.wide_pair_bias, gated.wide_point_proj):
            torch.nn.init.normal_(layer.weight, std=1.0)
        torch.testing.assert_close(gated(X), plain(X))
        X[..., 4] = 0.1 * torch.randn(1, 40)
        assert not torch.allclose(gated(X), plain(X))


def test_context_gate_needs_geometry():
    with pytest.raises(ValueError, match="context_gate=True needs local_geometry=True"):
        ABCNet(4, d_model=16, n_heads=2, n_blocks=1, context_gate=True)
    X, y, groups = make_circles_sets(n_sets=4, set_size=20, random_state=0)
    with pytest.raises(ValueError, match="context_gate=True needs local_geometry=True"):
        ContextualKernel(context_gate=True, d_model=16, n_heads=2, n_blocks=1, max_epochs=1).fit(X, y, groups=groups)


def test_gated_kernel_fits_saves_loads_and_infers_as_its_network(tmp_path):
    X, y, groups = make_circles_sets(n_sets=16, set_size=40, random_state=0)
    kernel = ContextualKernel(local_geometry=True, context_gate=True, canonical_features=4, embed_features=2,
                              d_model=16, n_heads=2, n_blocks=1, set_size=40, max_epochs=1, batch_size=8,
                              random_state=0).fit(X, y, groups=groups)
    torch.nn.init.normal_(kernel.module_.gate.weight, std=0.01)
    A = kernel.transform(X[:40])
    with torch.no_grad():
        from skabc.nn.build import set_transform

        points = torch.as_tensor(set_transform(kernel)(X[:40].astype(np.float32)))[None]
        direct = torch.sigmoid(kernel.module_(points)[0].double()).numpy()
    np.testing.assert_allclose(A, (direct + direct.T) / 2, atol=1e-6)
    path = tmp_path / "gated.safetensors"
    kernel.save(path)
    loaded = ContextualKernel.load(path, device="cpu")
    assert loaded.context_gate
    np.testing.assert_array_equal(loaded.transform(X[:40]), A)


def test_wide_maps_change_only_sets_beyond_the_embedded_columns():
    torch.manual_seed(2)
    gated = ABCNet(6, d_model=8, n_heads=2, n_blocks=1, local_geometry=True, embed_features=3,
                   context_gate=True).eval()
    within = torch.zeros(1, 30, 6)
    within[..., :3] = torch.randn(1, 30, 3)
    wide = torch.randn(1, 30, 6)
    with torch.no_grad():
        before = gated(within), gated(wide)
        torch.nn.init.normal_(gated.wide_pair_bias.weight, std=0.01)
        torch.nn.init.normal_(gated.wide_point_proj.weight, std=0.01)
        torch.testing.assert_close(gated(within), before[0])
        assert not torch.allclose(gated(wide), before[1])


@pytest.mark.parametrize("per_set", [False, True])
def test_pair_maps_are_the_linear_map_over_the_feature_axis(per_set):
    from skabc.nn.model import _pair_maps

    gen = torch.Generator().manual_seed(0)
    pairs = torch.rand(3, 5, 7, 7, generator=gen)
    weight = torch.randn(*((3,) if per_set else ()), 2, 5, generator=gen)
    bias = torch.randn(*((3,) if per_set else ()), 2, generator=gen)
    expected = torch.einsum("bfij,bhf->bhij" if per_set else "bfij,hf->bhij", pairs, weight)
    expected = expected + (bias[:, :, None, None] if per_set else bias[None, :, None, None])
    torch.testing.assert_close(_pair_maps(pairs, weight, bias), expected)


def test_exponential_features_equal_torch_exp_where_it_underflows():
    """The bandwidth features skip the exponential of pairs too far apart for float32 (torch's vectorised exp is
    several times slower below -88) and must still equal it exactly: 0 below -103.97, subnormal just above."""
    from skabc.nn.geometry import _exp_of_negative_

    values = torch.cat([torch.linspace(-200.0, 0.0, 20001), torch.linspace(-104.5, -87.0, 20001),
                        torch.tensor([-1e30, -float("inf"), -103.972084, -103.97208])])
    expected = torch.exp(values)
    assert bool((expected[(values > -104) & (values < -100)] > 0).any())  # the window the shortcut must keep
    assert torch.equal(_exp_of_negative_(values.clone()), expected)


@pytest.mark.parametrize("used, width", [((0, 1, 2), 8), ((0, 1, 10), 16), ((3, 17), 24)])
def test_distances_skip_the_zero_padding_of_canonical_coordinates(monkeypatch, used, width):
    """Canonical coordinates pad a low-dimensional set with zero columns to the network's width: the distances
    are computed on the columns up to the last used one (in whole blocks of eight; mutation survivor N10 kept
    only the blocks up to the first), with the features bitwise unchanged."""
    from skabc.nn import geometry

    X = torch.zeros(2, 50, 64)
    X[..., list(used)] = torch.randn(2, 50, len(used), generator=torch.Generator().manual_seed(0))
    widths, original = [], torch.cdist
    monkeypatch.setattr(torch, "cdist", lambda a, b, **kw: widths.append(a.shape[-1]) or original(a, b, **kw))
    trimmed = pair_features(X)
    assert widths == [width]
    monkeypatch.setattr(geometry, "_without_zero_tail", lambda X: X)
    full = pair_features(X)
    assert widths == [width, 64]
    assert all(torch.equal(a, b) for a, b in zip(trimmed, full, strict=True))
    assert pair_features(torch.zeros(1, 4, 64))[0].shape == (1, N_PAIR_FEATURES, 4, 4)  # no used column at all


def test_pair_features_follow_the_input_dtype_whatever_the_default():
    """Probe 58b: under torch.set_default_dtype(torch.float64) the shared-neighbour count failed in scatter_add_."""
    x = torch.randn(2, 9, 3)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        under_float64 = pair_features(x)
    finally:
        torch.set_default_dtype(before)
    torch.testing.assert_close(under_float64, pair_features(x))
