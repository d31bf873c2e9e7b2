"""Unit tests of the torch building blocks in :mod:`skabc.nn`."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import skabc.nn.blocks as blocks
from skabc.nn import (
    ATTENTION_BACKENDS,
    ABCNet,
    MultiheadAttentionBlock,
    SameClusterBCELoss,
    SetAttentionBlock,
    SimilarityHead,
    resolve_backend,
    same_cluster_matrix,
)

D_MODEL = 16
N_HEADS = 4
N_FEATURES = 3
ATOL = 1e-5


def _padded(x_real: torch.Tensor, n_total: int, seed: int = 0, scale: float = 1e3):
    """Pad ``(1, n, ...)`` to ``(1, n_total, ...)`` with large random garbage; return padded batch and mask."""
    gen = torch.Generator().manual_seed(seed)
    n = x_real.shape[1]
    garbage = scale * torch.randn((1, n_total - n, *x_real.shape[2:]), generator=gen)
    x = torch.cat([x_real, garbage], dim=1)
    mask = torch.zeros(1, n_total, dtype=torch.bool)
    mask[:, :n] = True
    return x, mask


def _net(**kwargs) -> ABCNet:
    torch.manual_seed(0)
    params = {"d_model": D_MODEL, "n_heads": N_HEADS, "n_blocks": 2}
    params.update(kwargs)
    return ABCNet(N_FEATURES, **params).eval()


# --------------------------------------------------------------------------- blocks


@pytest.mark.parametrize("layer_norm", ["pre", "post"])
def test_blocks_output_shape(layer_norm):
    """MAB maps (B, n_q, d) x (B, n_k, d) to (B, n_q, d); SAB keeps the shape."""
    torch.manual_seed(0)
    mab = MultiheadAttentionBlock(D_MODEL, N_HEADS, d_ff=8, layer_norm=layer_norm)
    x, y = torch.randn(2, 5, D_MODEL), torch.randn(2, 9, D_MODEL)
    assert mab(x, y).shape == (2, 5, D_MODEL)
    sab = SetAttentionBlock(D_MODEL, N_HEADS, layer_norm=layer_norm)
    assert sab(y).shape == (2, 9, D_MODEL)
    assert sab(y, torch.ones(2, 9, dtype=torch.bool)).shape == (2, 9, D_MODEL)


@pytest.mark.parametrize("block", [MultiheadAttentionBlock, SetAttentionBlock])
def test_blocks_reject_bad_arguments(block):
    """d_model not divisible by n_heads, or an unknown layer_norm, raise ValueError."""
    with pytest.raises(ValueError, match="divisible"):
        block(10, 4)
    with pytest.raises(ValueError, match="layer_norm"):
        block(D_MODEL, N_HEADS, layer_norm="middle")


@pytest.mark.parametrize("layer_norm", ["pre", "post"])
def test_sab_padding_does_not_affect_real_points(layer_norm):
    """Garbage in padded rows leaves the outputs of the 7 real rows unchanged."""
    torch.manual_seed(0)
    sab = SetAttentionBlock(D_MODEL, N_HEADS, layer_norm=layer_norm).eval()
    x_real = torch.randn(1, 7, D_MODEL)
    x_pad, mask = _padded(x_real, 12)
    with torch.no_grad():
        out_real = sab(x_real)
        out_pad = sab(x_pad, mask)
    assert out_pad.shape == (1, 12, D_MODEL)
    assert torch.allclose(out_pad[:, :7], out_real, atol=ATOL)


def _ragged_sab_case():
    """A SAB, a batch of a 4-row set padded to 7 and a 7-row set, its mask, and each set's output alone."""
    torch.manual_seed(0)
    sab = SetAttentionBlock(8, 2).eval()
    x = torch.randn(2, 7, 8)
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[0, 4:] = False
    with torch.no_grad():
        alone = sab(x[:1, :4])[0], sab(x[1:])[0]
    return sab, x, mask, alone


def test_sab_padding_does_not_affect_real_points_on_the_chunked_inference_path(monkeypatch):
    """Probe 59c: without grad and past INFERENCE_SCORE_CELLS score cells, attention runs in chunks of query rows;
    each chunk keeps the key mask (dropping it there let padded keys change the real points)."""
    sab, x, mask, (alone_0, alone_1) = _ragged_sab_case()
    monkeypatch.setattr(blocks, "INFERENCE_SCORE_CELLS", 8)  # 2 sets x 2 heads x 7 x 7 cells: chunked
    with torch.no_grad():
        out = sab(x, mask)
    assert torch.allclose(out[0, :4], alone_0, atol=ATOL)
    assert torch.allclose(out[1], alone_1, atol=ATOL)


def test_sab_nan_in_padded_rows_does_not_reach_real_points():
    """Probe 59c: padded keys are zeroed before attention, since a masked NaN key would still give 0 * NaN = NaN."""
    sab, x, mask, (alone_0, _) = _ragged_sab_case()
    x[0, 4:] = float("nan")
    out = sab(x, mask)  # grad enabled: the unchunked path
    assert torch.isfinite(out[0, :4]).all()
    assert torch.allclose(out[0, :4], alone_0, atol=ATOL)


def test_post_norm_block_output_is_layer_normed():
    """Probe 59c: layer_norm='post' is the Set Transformer block LN(H + rFF(H)): with a fresh LayerNorm every output
    row has mean 0 and variance 1 over the features, whatever the input's scale (the final LN was droppable)."""
    torch.manual_seed(0)
    sab = SetAttentionBlock(D_MODEL, N_HEADS, layer_norm="post").eval()
    x = 5 * torch.randn(3, 10, D_MODEL) + 2
    with torch.no_grad():
        out = sab(x)
    assert torch.allclose(out.mean(-1), torch.zeros(3, 10), atol=ATOL)
    assert torch.allclose(out.var(-1, unbiased=False), torch.ones(3, 10), atol=1e-3)


@pytest.mark.parametrize("compat", ["multiplicative", "additive"])
@pytest.mark.parametrize("layer_norm", ["pre", "post"])
def test_abcnet_padding_does_not_affect_real_cells(layer_norm, compat):
    """The logits of real cells are the same with or without (garbage) padding."""
    net = _net(layer_norm=layer_norm, compat=compat)
    torch.manual_seed(1)
    x_real = torch.randn(1, 7, N_FEATURES)
    x_pad, mask = _padded(x_real, 12)
    with torch.no_grad():
        logits_real = net(x_real)
        logits_pad = net(x_pad, mask)
    assert logits_pad.shape == (1, 12, 12)
    assert torch.isfinite(logits_pad).all()
    assert torch.allclose(logits_pad[:, :7, :7], logits_real, atol=ATOL)


def test_abcnet_batch_of_ragged_sets_matches_sets_alone():
    """Each set in a padded batch gets the logits it gets alone."""
    net = _net()
    torch.manual_seed(2)
    a, b = torch.randn(1, 5, N_FEATURES), torch.randn(1, 9, N_FEATURES)
    x = torch.zeros(2, 9, N_FEATURES)
    x[0, :5], x[1] = a[0], b[0]
    x[0, 5:] = 50.0
    mask = torch.zeros(2, 9, dtype=torch.bool)
    mask[0, :5], mask[1] = True, True
    with torch.no_grad():
        batch = net(x, mask)
        assert torch.allclose(batch[0, :5, :5], net(a)[0], atol=ATOL)
        assert torch.allclose(batch[1], net(b)[0], atol=ATOL)


@pytest.mark.parametrize("compat", ["multiplicative", "additive"])
@pytest.mark.parametrize("layer_norm", ["pre", "post"])
def test_abcnet_permutation_equivariance(layer_norm, compat):
    """Permuting the points permutes rows and columns of the logits."""
    net = _net(layer_norm=layer_norm, compat=compat)
    torch.manual_seed(3)
    x = torch.randn(1, 10, N_FEATURES)
    perm = torch.randperm(10)
    with torch.no_grad():
        logits = net(x)
        logits_perm = net(x[:, perm])
    assert torch.allclose(logits_perm, logits[:, perm][:, :, perm], atol=ATOL)


def test_abcnet_blocks_do_not_share_weights():
    """The n_blocks blocks are distinct modules with independent parameter tensors."""
    net = _net(n_blocks=3)
    blocks = list(net.blocks)
    assert len(blocks) == 3
    assert len({id(b) for b in blocks}) == 3
    ptrs = [{p.data_ptr() for p in b.parameters()} for b in blocks]
    for i in range(3):
        for j in range(i + 1, 3):
            assert not ptrs[i] & ptrs[j]
    per_block = sum(p.numel() for p in blocks[0].parameters())
    in_blocks = sum(p.numel() for p in net.blocks.parameters())
    assert in_blocks == 3 * per_block
    # Changing one block's weights leaves the others untouched.
    with torch.no_grad():
        blocks[0].mab.q_proj.weight.add_(1.0)
    assert not torch.equal(blocks[0].mab.q_proj.weight, blocks[1].mab.q_proj.weight)
    assert not torch.equal(blocks[1].mab.q_proj.weight, blocks[2].mab.q_proj.weight)


def test_abcnet_final_norm_only_for_pre_norm_with_blocks():
    """A final LayerNorm follows pre-norm stacks; post-norm and the ablation have none."""
    assert isinstance(_net(layer_norm="pre").final_norm, nn.LayerNorm)
    assert isinstance(_net(layer_norm="post").final_norm, nn.Identity)
    assert isinstance(_net(n_blocks=0).final_norm, nn.Identity)


# --------------------------------------------------------------------------- head


@pytest.mark.parametrize("compat", ["multiplicative", "additive"])
def test_similarity_head_symmetric_probabilities(compat):
    """Logits are symmetric and their sigmoid lies in [0, 1]."""
    torch.manual_seed(0)
    head = SimilarityHead(D_MODEL, compat, d_head=8)
    logits = head(torch.randn(2, 11, D_MODEL))
    assert logits.shape == (2, 11, 11)
    assert torch.allclose(logits, logits.transpose(1, 2), atol=1e-6)
    prob = torch.sigmoid(logits)
    assert ((prob >= 0) & (prob <= 1)).all()


def test_similarity_head_rejects_unknown_compat():
    """An unknown compatibility function raises ValueError."""
    with pytest.raises(ValueError, match="compat"):
        SimilarityHead(D_MODEL, "cosine")


def _head_values_and_grads(chunk_bytes: int, z0: torch.Tensor):
    torch.manual_seed(0)
    head = SimilarityHead(D_MODEL, "additive", chunk_bytes=chunk_bytes)
    z = z0.clone().requires_grad_(True)
    weight = torch.linspace(-1.0, 1.0, z0.shape[1] ** 2).reshape(1, z0.shape[1], z0.shape[1])
    logits = head(z)
    (logits * weight).sum().backward()
    grads = {name: p.grad.clone() for name, p in head.named_parameters()}
    return logits.detach(), z.grad.clone(), grads


def test_additive_head_chunking_matches_unchunked_values_and_gradients():
    """Tiny chunks (one row each, checkpointed) give the same logits and gradients as one chunk."""
    torch.manual_seed(4)
    z0 = torch.randn(2, 9, D_MODEL)
    small = _head_values_and_grads(1, z0)
    large = _head_values_and_grads(2**40, z0)
    assert torch.allclose(small[0], large[0], atol=1e-6)
    assert torch.allclose(small[1], large[1], atol=1e-6)
    assert small[2].keys() == large[2].keys()
    for name in small[2]:
        assert torch.allclose(small[2][name], large[2][name], atol=1e-5), name


def test_additive_head_chunking_without_grad():
    """Under no_grad the chunked path (no checkpoint) gives the same logits."""
    torch.manual_seed(5)
    z = torch.randn(1, 8, D_MODEL)
    torch.manual_seed(0)
    head_small = SimilarityHead(D_MODEL, "additive", chunk_bytes=1)
    torch.manual_seed(0)
    head_large = SimilarityHead(D_MODEL, "additive", chunk_bytes=2**40)
    with torch.no_grad():
        assert torch.allclose(head_small(z), head_large(z), atol=1e-6)


@pytest.mark.parametrize("compat", ["multiplicative", "additive"])
def test_block_logits_reassemble_forward(compat):
    """Row blocks from block_logits, concatenated, equal the full forward logits."""
    torch.manual_seed(6)
    head = SimilarityHead(D_MODEL, compat, chunk_bytes=200)
    z = torch.randn(2, 10, D_MODEL)
    with torch.no_grad():
        full = head(z)
        parts = [head.block_logits(z, slice(s, s + 3)) for s in range(0, 10, 3)]
    assert [p.shape[1] for p in parts] == [3, 3, 3, 1]
    assert torch.allclose(torch.cat(parts, dim=1), full, atol=1e-6)


# --------------------------------------------------------------------------- model variants


@pytest.mark.parametrize("compat", ["multiplicative", "additive"])
def test_pairwise_ablation_is_context_free(compat):
    """With n_blocks=0 the logit of a pair does not depend on the other points."""
    net = _net(n_blocks=0, compat=compat)
    torch.manual_seed(7)
    x = torch.randn(1, 8, N_FEATURES)
    with torch.no_grad():
        small = net(x[:, :3])
        big = net(x)
    assert torch.allclose(big[:, :3, :3], small, atol=ATOL)


def test_context_matters_with_blocks():
    """With attention blocks, adding points does change the logits of a pair (sanity check of the ablation)."""
    net = _net(n_blocks=2)
    torch.manual_seed(7)
    x = torch.randn(1, 8, N_FEATURES)
    with torch.no_grad():
        assert not torch.allclose(net(x)[:, :3, :3], net(x[:, :3]), atol=1e-4)


def test_custom_embedder_is_used():
    """A user embedder replaces the MLP and sees rows of shape (B * n, *point_shape)."""
    torch.manual_seed(0)
    embedder = nn.Sequential(nn.Flatten(), nn.Linear(6, D_MODEL))
    seen = []
    embedder.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape))
    net = ABCNet(6, d_model=D_MODEL, n_heads=N_HEADS, n_blocks=1, embedder=embedder).eval()
    assert net.embedder is embedder
    x = torch.randn(2, 5, 2, 3)
    with torch.no_grad():
        logits = net(x)
        assert logits.shape == (2, 5, 5)
        assert seen == [torch.Size([10, 2, 3])]
        embedder[1].weight.mul_(2.0)
        assert not torch.allclose(net(x), logits)


def test_custom_linear_embedder():
    """An nn.Linear(n_features, d_model) embedder is used as given."""
    torch.manual_seed(0)
    linear = nn.Linear(N_FEATURES, D_MODEL)
    net = ABCNet(N_FEATURES, d_model=D_MODEL, n_heads=N_HEADS, n_blocks=0, embedder=linear).eval()
    x = torch.randn(1, 4, N_FEATURES)
    with torch.no_grad():
        assert torch.allclose(net(x), net.head(linear(x)), atol=1e-6)


# --------------------------------------------------------------------------- backends


def test_resolve_backend():
    """Names resolve through the registry, callables are returned as is, the rest raise ValueError."""
    assert resolve_backend("sab") is SetAttentionBlock
    assert ATTENTION_BACKENDS["sab"] is SetAttentionBlock

    def factory(**kwargs):
        return SetAttentionBlock(**kwargs)

    assert resolve_backend(factory) is factory
    with pytest.raises(ValueError, match="Unknown attention backend"):
        resolve_backend("performer")
    with pytest.raises(ValueError, match="Unknown attention backend"):
        resolve_backend(3)


def test_custom_backend_factory_receives_options():
    """A callable backend is called once per block with the block settings and attention_options."""
    calls = []

    def factory(d_model, n_heads, d_ff, layer_norm, dropout, scale=None):
        calls.append((d_model, n_heads, d_ff, layer_norm, dropout, scale))
        return SetAttentionBlock(d_model, n_heads, d_ff, layer_norm, dropout)

    ABCNet(N_FEATURES, d_model=D_MODEL, n_heads=2, n_blocks=2, attention=factory, layer_norm="post",
           d_ff=8, dropout=0.1, attention_options={"scale": 7})
    assert calls == [(D_MODEL, 2, 8, "post", 0.1, 7)] * 2


# --------------------------------------------------------------------------- loss


def test_same_cluster_matrix():
    """0/1 same-cluster targets and the validity of pairs of real points."""
    labels = torch.tensor([[0, 1, 0, -1], [2, 2, -1, -1]])
    target, valid = same_cluster_matrix(labels)
    expected_target = torch.tensor(
        [
            [[1, 0, 1, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 1]],
            [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]],
        ],
        dtype=torch.float32,
    )
    expected_valid = torch.tensor(
        [
            [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0]],
            [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
        ],
        dtype=torch.bool,
    )
    assert target.dtype == torch.float32
    assert torch.equal(valid, expected_valid)
    # Targets matter only on valid pairs.
    assert torch.equal(target[valid], expected_target[valid])


def _loss_case():
    torch.manual_seed(8)
    labels = torch.tensor([[0, 0, 1, 2, 1, -1, -1], [1, 0, 1, 1, -1, -1, -1]])
    logits = torch.randn(2, 7, 7)
    logits = 0.5 * (logits + logits.transpose(1, 2))
    return logits, labels


def _hand_loss(logits, labels, pos_weight=None):
    total, count = 0.0, 0
    for b in range(labels.shape[0]):
        n = int((labels[b] >= 0).sum())
        lab = labels[b, :n]
        target = (lab[:, None] == lab[None, :]).float()
        pw = None if pos_weight is None else torch.tensor(float(pos_weight))
        cells = F.binary_cross_entropy_with_logits(logits[b, :n, :n], target, pos_weight=pw, reduction="sum")
        total, count = total + cells, count + n * n
    return total / count


def test_loss_matches_hand_computation_over_real_cells():
    """The loss is the mean BCE with logits over real cells only."""
    logits, labels = _loss_case()
    loss = SameClusterBCELoss()(logits, labels)
    assert torch.allclose(loss, _hand_loss(logits, labels), atol=1e-6)


@pytest.mark.parametrize("pad_value", [1e4, -1e4, 1e30, float("inf"), float("nan")])
def test_loss_ignores_padded_cells(pad_value):
    """Huge or non-finite logits in padded cells change neither the loss nor receive gradient (probe 59a: a plain
    product with the zero weight passed the finite values, and inf * 0 is NaN)."""
    logits, labels = _loss_case()
    pad = (labels < 0)[:, :, None] | (labels < 0)[:, None, :]
    huge = logits.masked_fill(pad, pad_value).requires_grad_(True)
    loss_fn = SameClusterBCELoss()
    loss = loss_fn(huge, labels)
    assert torch.isfinite(loss)
    assert torch.allclose(loss, loss_fn(logits, labels), atol=1e-6)
    loss.backward()
    assert torch.all(huge.grad[pad] == 0)


@pytest.mark.parametrize("pos_weight", [1.0, 3.0, 0.5])
def test_loss_float_pos_weight(pos_weight):
    """A float pos_weight weighs positive cells as torch's pos_weight does (mean over real cells)."""
    logits, labels = _loss_case()
    loss = SameClusterBCELoss(pos_weight)(logits, labels)
    assert torch.allclose(loss, _hand_loss(logits, labels, pos_weight), atol=1e-6)
    if pos_weight > 1:
        assert loss > SameClusterBCELoss()(logits, labels)


def test_loss_balanced_pos_weight():
    """'balanced' gives a finite value equal to pos_weight = n_neg / n_pos over real cells."""
    logits, labels = _loss_case()
    target, valid = same_cluster_matrix(labels)
    n_pos = float(target[valid].sum())
    n_neg = float(valid.sum()) - n_pos
    loss = SameClusterBCELoss("balanced")(logits, labels)
    assert torch.isfinite(loss)
    assert torch.allclose(loss, _hand_loss(logits, labels, max(1.0, n_neg / n_pos)), atol=1e-6)


def test_loss_balanced_single_cluster_is_finite():
    """'balanced' stays finite when every real pair is positive (no negatives)."""
    labels = torch.tensor([[0, 0, 0, -1]])
    logits = torch.randn(1, 4, 4)
    loss = SameClusterBCELoss("balanced")(logits, labels)
    assert torch.isfinite(loss)
    assert torch.allclose(loss, _hand_loss(logits, labels), atol=1e-6)


@pytest.mark.parametrize("compat", ["multiplicative", "additive"])
@pytest.mark.parametrize("layer_norm", ["pre", "post"])
def test_no_gradient_reaches_padded_inputs(layer_norm, compat):
    """The loss gradient w.r.t. padded input rows is exactly zero, and nonzero on real rows."""
    net = _net(layer_norm=layer_norm, compat=compat)
    torch.manual_seed(9)
    x_real = torch.randn(1, 7, N_FEATURES)
    x_pad, mask = _padded(x_real, 12, scale=100.0)
    x_pad = torch.cat([x_pad, torch.randn(1, 12, N_FEATURES)], dim=0).requires_grad_(True)
    mask = torch.cat([mask, torch.ones(1, 12, dtype=torch.bool)], dim=0)
    labels = torch.full((2, 12), -1)
    labels[0, :7] = torch.tensor([0, 1, 0, 1, 2, 2, 0])
    labels[1] = torch.arange(12) % 3
    loss = SameClusterBCELoss("balanced")(net(x_pad, mask), labels)
    loss.backward()
    grad = x_pad.grad
    assert torch.all(grad[0, 7:] == 0)
    assert grad[0, :7].abs().sum() > 0
    assert grad[1].abs().sum() > 0


def test_make_net_uses_the_given_criterion_else_the_kernels_bce():
    from skabc import ContextualKernel
    from skabc.nn.build import build_module
    from skabc.nn.loss import SameClusterBCELoss
    from skabc.training.net import make_net

    class DoubledBCE(SameClusterBCELoss):
        def forward(self, logits, labels):
            return 2.0 * super().forward(logits, labels)

    kernel = ContextualKernel(d_model=8, n_blocks=1, n_heads=2, pos_weight=3.0, max_epochs=1)
    default = make_net(kernel, build_module(kernel, 2), torch.device("cpu"), 1).initialize()
    given = make_net(kernel, build_module(kernel, 2), torch.device("cpu"), 1, criterion=DoubledBCE(3.0)).initialize()
    assert type(default.criterion_) is SameClusterBCELoss and default.criterion_.pos_weight == 3.0
    logits, labels = torch.randn(1, 4, 4), torch.tensor([[0, 0, 1, -1]])
    assert torch.isclose(given.criterion_(logits, labels), 2.0 * default.criterion_(logits, labels))
