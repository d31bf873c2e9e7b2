"""The parameter constraints of :class:`~skabc.kernels.ContextualKernel` (scikit-learn's validation)."""

import os
from numbers import Integral, Real

import torch
from sklearn.utils._param_validation import Interval, StrOptions
from torch import nn

from ..nn.backends import ATTENTION_BACKENDS
from ..nn.embedders import EMBEDDERS
from ..nn.heads import COMPAT_FUNCTIONS

CONTEXTUAL_KERNEL_CONSTRAINTS: dict = {
    "attention": [StrOptions(set(ATTENTION_BACKENDS)), callable],
    "n_inducing": [Interval(Integral, 1, None, closed="left")],
    "window_size": [Interval(Integral, 2, None, closed="left")],
    "n_attention_samples": [Interval(Integral, 1, None, closed="left")],
    "window_attention": [StrOptions({"hamiltonian", "dense"})],
    "attention_options": [dict, None],
    "compat": [StrOptions(set(COMPAT_FUNCTIONS))],
    "n_blocks": [Interval(Integral, 0, None, closed="left")],
    "n_heads": [Interval(Integral, 1, None, closed="left")],
    "d_model": [Interval(Integral, 1, None, closed="left")],
    "layer_norm": [StrOptions({"pre", "post"})],
    "dropout": [Interval(Real, 0, 1, closed="left")],
    "canonical_features": [Interval(Integral, 1, None, closed="left"), None],
    "embedder": [StrOptions(set(EMBEDDERS)), nn.Module, callable, None],
    "local_geometry": ["boolean"],
    "embed_features": [Interval(Integral, 1, None, closed="left"), None],
    "context_gate": ["boolean"],
    "set_size": ["array-like", Interval(Integral, 2, None, closed="left")],
    "clusters_per_set": ["array-like", Interval(Integral, 1, None, closed="left"), None],
    "sets_per_epoch": [Interval(Integral, 1, None, closed="left"), None],
    "init": [StrOptions({"auto", "generic", "scratch"})],
    "fine_tune_alpha": [Interval(Real, 0, 1, closed="right"), StrOptions({"auto"})],
    "max_epochs": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "lr": [Interval(Real, 0, None, closed="neither")],
    "weight_decay": [Interval(Real, 0, None, closed="left")],
    "pos_weight": [Interval(Real, 0, None, closed="neither"), StrOptions({"balanced"}), None],
    "early_stopping": ["boolean", StrOptions({"auto"})],
    "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
    "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
    "max_time": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"}), None],
    "warm_start": ["boolean"],
    "checkpoint_dir": [str, os.PathLike, None],
    "checkpoint_every": [Interval(Integral, 1, None, closed="left")],
    "affinity_mode": [StrOptions({"auto", "dense", "sparse"})],
    "n_neighbors": [Interval(Integral, 1, None, closed="left")],
    "n_random_neighbors": [Interval(Integral, 0, None, closed="left")],
    "memory_limit": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"}), None],
    "device": [str, torch.device, None],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
}
