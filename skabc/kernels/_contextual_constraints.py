"""The parameter constraints of :class:`~skabc.kernels.ContextualKernel` (scikit-learn's validation)."""

import os

import numpy as np
import torch
from sklearn.utils._param_validation import StrOptions
from torch import nn

from .._constraints import IntRange, RealRange
from .._schema import MAX_COUNT, MAX_WIDTH
from ..nn.backends import ATTENTION_BACKENDS
from ..nn.embedders import EMBEDDERS
from ..nn.heads import COMPAT_FUNCTIONS

_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Largest learning rate accepted: far above any that trains, far enough below float32's largest value.
MAX_LR = 1e30
#: Most window samples a sampled-attention kernel averages at inference: each is a forward pass of every block, and
#: beyond a few dozen the average no longer changes (a saved file, too, must not ask for a billion passes).
MAX_ATTENTION_SAMPLES = 1024
#: Widest network (d_model, n_heads, n_inducing, canonical_features): what a saved kernel holds (a wider one trained,
#: then failed to save), far below the ~2**30 where torch's size arithmetic overflows before the memory check.
MAX_D_MODEL = MAX_WIDTH



def _count(low: int) -> IntRange:
    """A count of at least ``low`` and at most what a saved kernel holds (a larger one trained, then failed to save).

    Widths (``n_heads``, ``canonical_features``, ...) are not counts: the memory check names them."""
    return IntRange(low, MAX_COUNT, closed="both")


CONTEXTUAL_KERNEL_CONSTRAINTS: dict = {
    "attention": [StrOptions(set(ATTENTION_BACKENDS)), callable],
    "n_inducing": [IntRange(1, MAX_WIDTH, closed="both")],  # isab only: no memory check sees it under another
    "window_size": [_count(2)],
    "n_attention_samples": [IntRange(1, MAX_ATTENTION_SAMPLES, closed="both")],
    "window_attention": [StrOptions({"hamiltonian", "dense"})],
    "attention_options": [dict, None],
    "compat": [StrOptions(set(COMPAT_FUNCTIONS))],
    "n_blocks": [IntRange(0, None, closed="left")],
    "n_heads": [IntRange(1, MAX_WIDTH, closed="both")],
    "d_model": [IntRange(1, MAX_D_MODEL, closed="both")],
    "layer_norm": [StrOptions({"pre", "post"})],
    "dropout": [RealRange(0, 1, closed="left")],
    "canonical_features": [IntRange(1, MAX_WIDTH, closed="both"), None],
    "embedder": [StrOptions(set(EMBEDDERS)), nn.Module, callable, None],
    "local_geometry": ["boolean"],
    "embed_features": [IntRange(1, None, closed="left"), None],
    "context_gate": ["boolean"],
    "set_size": ["array-like", _count(2)],
    "clusters_per_set": ["array-like", _count(1), None],
    "sets_per_epoch": [_count(1), None],
    "init": [StrOptions({"auto", "generic", "scratch"})],
    "fine_tune_alpha": [RealRange(0, 1, closed="right"), StrOptions({"auto"})],
    "max_epochs": [_count(1), StrOptions({"auto"})],
    "batch_size": [_count(1), StrOptions({"auto"})],
    # float32 (the optimizer's own state) holds neither beyond its largest value: torch overflows deep inside.
    # AdamW's first step divides lr by its bias correction (0.1): from about 1e38 that overflowed in torch.
    "lr": [RealRange(0, MAX_LR, closed="right")],
    "weight_decay": [RealRange(0, _FLOAT32_MAX, closed="left")],
    # Beyond a million the loss's gradient norm overflows float32 under clipping: training silently stood still.
    "pos_weight": [RealRange(0, 1e6, closed="right"), StrOptions({"balanced"}), None],
    "early_stopping": ["boolean", StrOptions({"auto"})],
    "validation_fraction": [RealRange(0, 1, closed="neither")],
    "n_iter_no_change": [_count(1)],
    "max_time": [RealRange(0, None, closed="neither"), StrOptions({"auto"}), None],
    "warm_start": ["boolean"],
    "checkpoint_dir": [str, os.PathLike, None],
    "checkpoint_every": [_count(1)],
    "affinity_mode": [StrOptions({"auto", "dense", "sparse"})],
    "n_neighbors": [_count(1)],
    "n_random_neighbors": [_count(0)],
    "memory_limit": [RealRange(0, None, closed="neither"), StrOptions({"auto"}), None],
    "device": [str, torch.device, None],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
}
