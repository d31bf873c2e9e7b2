"""Padding, precision and batch statistics of the neural modules (review 68c: each test failed on the commit before
its fix)."""

from __future__ import annotations

import copy

import pytest
import torch

from skabc import ContextualKernel
from skabc.nn import ABCNet, Conv4Embedder, outer_product_attention
from skabc.nn.build import build_module
from skabc.nn.geometry import pair_features


def _padded(sets: list[torch.Tensor], width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(s.shape[0] for s in sets) if width is None else width
    X = torch.zeros(len(sets), width, sets[0].shape[1])
    mask = torch.zeros(len(sets), width, dtype=torch.bool)
    for i, s in enumerate(sets):
        X[i, : len(s)], mask[i, : len(s)] = s, True
    return X, mask


@pytest.mark.parametrize("n", [3, 5, 8, 10])
def test_a_small_set_s_geometry_is_the_same_alone_and_padded(n):
    """The shared-neighbour fraction of a set of at most 10 points was divided by the neighbours its batch could
    list (n - 1 alone, 10 next to a larger set): 0.857 alone, 0.600 padded for 8 points."""
    torch.manual_seed(0)
    small = torch.randn(n, 3)
    alone_pairs, alone_points = pair_features(small[None])
    X, mask = _padded([small, torch.randn(40, 3)])
    pairs, points = pair_features(X, mask)
    torch.testing.assert_close(pairs[0, :, :n, :n], alone_pairs[0])
    torch.testing.assert_close(points[0, :n], alone_points[0])


def test_batch_norm_in_the_embedder_never_sees_padded_rows():
    """Conv4Embedder's BatchNorm took its training-mode statistics over padded (zero) images too: the same two sets
    gave real-pair logits 0.22 apart padded to 8 or to 32 points."""
    torch.manual_seed(0)
    model = ABCNet(n_features=256, d_model=16, n_heads=2, n_blocks=1, embedder=Conv4Embedder(256, 16)).train()
    a, b = torch.rand(5, 256), torch.rand(8, 256)
    with torch.no_grad():
        narrow = model(*_padded([a, b]))
        wide = model(*_padded([a, b], width=32))
    real = _padded([a, b])[1]
    real = real[:, :, None] & real[:, None, :]
    torch.testing.assert_close(narrow[real], wide[:, :8, :8][real], atol=1e-5, rtol=1e-5)


def test_outer_product_attention_gradient_ignores_garbage_in_masked_keys():
    torch.manual_seed(0)
    q = torch.randn(1, 4, 3, requires_grad=True)
    k, v = torch.randn(1, 5, 3), torch.randn(1, 5, 3)
    k[0, 3:], v[0, 3:] = float("nan"), float("nan")
    outer_product_attention(q, k, v, torch.tensor([[True, True, True, False, False]])).sum().backward()
    assert torch.isfinite(q.grad).all()


def test_building_a_kernel_leaves_the_user_s_batch_norm_statistics_alone():
    """The embedder's shape probe ran in training mode on two zero rows: a pretrained backbone's running variance
    went from 2.0 to 1.8 and its batch count to 1."""
    embedder = Conv4Embedder(256, 16)
    with torch.no_grad():
        embedder.backbone[1].running_mean.fill_(0.5)
        embedder.backbone[1].running_var.fill_(2.0)
    before = copy.deepcopy(embedder.state_dict())
    module = build_module(ContextualKernel(embedder=embedder, init="scratch", d_model=16, n_heads=2, n_blocks=1), 256)
    for name, value in before.items():
        torch.testing.assert_close(module.embedder.state_dict()[name], value)
    assert embedder.training  # its mode as it was


def test_local_geometry_runs_in_double_precision():
    """pair_features computes in float32 (the neighbour search), and its features met float64 weights."""
    torch.manual_seed(0)
    model = ABCNet(3, d_model=16, n_heads=2, n_blocks=1, local_geometry=True).double()
    assert model(torch.randn(1, 12, 3, dtype=torch.float64)).dtype == torch.float64
