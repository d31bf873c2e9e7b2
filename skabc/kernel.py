"""ContextualKernel: a transformer returning the learned n x n affinity of a set."""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import warnings
from numbers import Integral, Real
from pathlib import Path

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data
from skorch import NeuralNet
from skorch.callbacks import Callback, Checkpoint, GradientNormClipping, ProgressBar
from torch import nn

from ._persistence import json_ready, load_kernel, save_kernel
from ._runtime import resolve_device, seeded_torch, tune_allocator
from ._validation import (
    check_magnitude,
    check_not_masked_or_missing,
    encode_groups,
    encode_labels,
    format_bytes,
    to_network_float32,
)
from .exceptions import AffinityTooLargeError
from .nn.backends import ATTENTION_BACKENDS, BACKEND_OPTIONS
from .nn.embedders import EMBEDDERS
from .nn.heads import COMPAT_FUNCTIONS
from .nn.loss import SameClusterBCELoss
from .nn.model import ABCNet
from .nn.sampled import SampledAttentionBlock
from .preprocessing import canonicalize_set
from .sampling import (
    ClusterSetSampler,
    SampledSetsDataset,
    check_clusters_per_set,
    check_set_size,
    collate_sets,
)
from .sparse_affinity import row_keys, topk_affinity

_CHECKPOINT_FILES = {"f_params": "params.pt", "f_optimizer": "optimizer.pt", "f_history": "history.json"}

# affinity_mode='auto' switches to the sparse top-k affinity beyond this many points.
SPARSE_AUTO_MIN_SAMPLES = 10_000

#: Parameters the fitted weights depend on: changing one after fit needs a refit.  (``dropout`` and
#: the training settings do not matter at inference; ``n_attention_samples`` is inference-only.)
ARCHITECTURE_PARAMS = ("attention", "n_inducing", "window_size", "window_attention", "attention_options",
                       "compat", "n_blocks", "n_heads", "d_model", "layer_norm", "canonical_features", "embedder")

# Rows of the affinity computed at once at inference, bounding the (rows, n) logit block.
_INFERENCE_BLOCK_CELLS = 2**24


class _WarmupCosine(Callback):
    """Linear warm-up then cosine decay, as a pure function of the global step.

    The step is recovered from the history, so a resumed fit continues the
    schedule exactly where the interrupted one stopped.
    """

    def __init__(self, peak_lr: float, total_steps: int, warmup: float = 0.05, final_ratio: float = 0.01) -> None:
        self.peak_lr = peak_lr
        self.total_steps = total_steps
        self.warmup = warmup
        self.final_ratio = final_ratio

    def lr_at(self, step: int) -> float:
        warm = max(1, int(self.warmup * self.total_steps))
        if step < warm:
            return self.peak_lr * (0.1 + 0.9 * step / warm)
        progress = min(1.0, (step - warm) / max(1, self.total_steps - warm))
        floor = self.final_ratio * self.peak_lr
        return floor + 0.5 * (self.peak_lr - floor) * (1 + math.cos(math.pi * progress))

    def on_train_begin(self, net, **kwargs):
        self.step_ = sum(len(row["batches"]) for row in net.history)

    def on_batch_begin(self, net, training=False, **kwargs):
        if training:
            for group in net.optimizer_.param_groups:
                group["lr"] = self.lr_at(self.step_)

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.step_ += 1


class _KeepBestWeights(Callback):
    """Remember the weights of the epoch with the lowest training loss.

    Used only when a fit is interrupted (Ctrl-C): the kernel then keeps the
    best weights seen so far instead of those of a half-finished epoch.
    """

    def on_train_begin(self, net, **kwargs):
        losses = [row.get("train_loss") for row in net.history if "train_loss" in row]
        self.best_loss_ = min(losses) if losses else float("inf")
        self.best_state_ = None

    def on_epoch_end(self, net, **kwargs):
        loss = net.history[-1].get("train_loss")
        if loss is not None and loss <= self.best_loss_:
            self.best_loss_ = loss
            self.best_state_ = {k: v.detach().clone() for k, v in net.module_.state_dict().items()}


class _EveryNthEpoch:
    """Checkpoint monitor: true after every ``n``-th epoch (a class, so the net stays picklable)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, net) -> bool:
        return len(net.history) % self.n == 0


class _RedrawEachEpoch(Callback):
    """Tell the virtual dataset which epoch it is, so every epoch sees new sets."""

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        if isinstance(dataset_train, SampledSetsDataset):
            dataset_train.epoch = len(net.history) - 1


class ContextualKernel(TransformerMixin, BaseEstimator):
    """Learned kernel from context (Attention-Based Clustering, Coward et al. 2020).

    A set encoder (an input embedder followed by ``n_blocks`` set-attention
    blocks) turns a whole set into contextual embeddings; a symmetric
    similarity head turns every pair into a same-cluster probability.  The
    network is trained with binary cross-entropy against the same-cluster
    matrix of training sets drawn from labelled rows (Algorithm 1 of the
    paper).  :meth:`transform` returns the learned affinity of the set it is
    given, ready for any ``affinity='precomputed'`` clusterer.

    Parameters
    ----------
    attention : {'sab', 'isab', 'sampled', 'opa'} or callable, default='sab'
        Set-to-set block: dense self-attention (``'sab'``, O(n^2)), induced
        set attention (``'isab'``, O(n m)), attention within random windows
        (``'sampled'``, O(n w)), outer-product attention (``'opa'``),
        or a factory called as ``attention(d_model=, n_heads=, d_ff=,
        layer_norm=, dropout=, **attention_options)`` returning a module with
        ``forward(x, key_mask)``.
    n_inducing : int, default=16
        ``attention='isab'``: number of learned inducing points.
    window_size : int, default=128
        ``attention='sampled'``: points per random window.  A set of at most
        this many points is one window, i.e. dense attention.
    n_attention_samples : int, default=4
        ``attention='sampled'``: window samples averaged at inference (more
        samples, less variance, proportionally more time; sets that fit in
        one dense window are computed once).  Inference-only: changing it
        with ``set_params`` on a fitted kernel takes effect without
        refitting.
    window_attention : {'dense', 'hamiltonian'}, default='dense'
        ``attention='sampled'``: attention pattern inside a window: dense
        attention among the window's points (O(n w) per block; the Sampled
        Transformer's random element sampling) or its Hamiltonian path
        pattern (each point sees itself and its two path neighbours, O(n)).
        The defaults are the configuration that came within 0.025 ARI of
        SAB on the circles benchmark; the Hamiltonian pattern did not learn
        that problem (``docs/backends_results.md``).
    attention_options : dict, default=None
        Extra keyword options for the backend factory (e.g. for a custom
        callable ``attention``); they override the named options above.
    compat : {'multiplicative', 'additive'}, default='multiplicative'
        Compatibility function of the similarity head.
    n_blocks : int, default=4
        Number of stacked attention blocks; ``0`` is the pairwise ablation.
    n_heads : int, default=4
        Attention heads per block.
    d_model : int, default=64
        Width of the embeddings; must be divisible by ``n_heads``.
    layer_norm : {'pre', 'post'}, default='pre'
        Layer-norm placement in the blocks (``'post'`` is the Set Transformer's).
    dropout : float, default=0.0
        Dropout inside the blocks.
    canonical_features : int, default=None
        If set, every set is first mapped to this many canonical coordinates
        by :func:`skabc.preprocessing.canonicalize_set` (standardised,
        rotated to principal axes, sign-fixed, truncated or zero-padded,
        scaled to unit RMS radius), in training and at inference alike.  The
        kernel then accepts sets of any number of features and is invariant
        to translation and scaling of the features (the shipped generic
        kernel uses 16).
    embedder : {'mlp', 'fourier', 'conv4'}, nn.Module or callable, default=None
        Row-wise input embedder.  ``None`` or ``'mlp'``: an MLP;
        ``'fourier'``: learnable multi-scale Fourier features, then an MLP
        (:class:`skabc.nn.FourierEmbedder`; learns locality much faster on
        low-dimensional geometric data);
        ``'conv4'``: the paper's four-block CNN for square single-channel
        images given as rows of ``side * side`` pixels, followed by an MLP
        (:class:`skabc.nn.Conv4Embedder`).  A module is deep-copied at fit; a
        callable is called as ``embedder(n_features, d_model)``.  It must map
        ``(m, n_features)`` to ``(m, d_model)``.
    set_size : int or (int, int), default=(50, 200)
        Size of each training set, or the range it is drawn from.
    clusters_per_set : int or (int, int), default=None
        Range of clusters per training set; ``None`` draws ``k`` uniformly
        among the values that fit the data (Algorithm 1).
    sets_per_epoch : int, default=None
        Training sets drawn per epoch.  ``None``: enough sets to cover the
        labelled rows once, between 8 and 64 batches.
    max_epochs : int, default=40
        Number of epochs; fresh sets are drawn every epoch.  With the
        default ``sets_per_epoch`` an epoch is at most 64 batches, so the
        defaults train for at most 2,560 steps, whatever the number of rows
        (measured: 8.5 CPU-min, 4.6 min on two cores, for 300,000 rows; see
        ``benchmarks/circles.py --defaults``).
    batch_size : int, default=32
        Sets per optimisation step.
    lr : float, default=1e-3
        Peak learning rate of AdamW (linear warm-up, then cosine decay).
    weight_decay : float, default=0.0
        AdamW weight decay.
    pos_weight : float or 'balanced', default=None
        Weight of same-cluster cells in the loss.
    warm_start : bool, default=False
        If true and the kernel is already fitted, ``fit`` starts from the
        current weights (fine-tuning, e.g. from a shipped pretrained kernel)
        instead of a fresh initialisation; the optimizer and learning-rate
        schedule start afresh.  The architecture parameters must not change.
    checkpoint_dir : str or path, default=None
        If set, weights, optimizer state and history are saved there after
        every epoch, and a fit that finds a checkpoint of the same
        configuration there resumes from it (drawing the same sets an
        uninterrupted run would), so long trainings survive being stopped.
    checkpoint_every : int, default=1
        Save a checkpoint after every this many epochs.
    affinity_mode : {'auto', 'dense', 'sparse'}, default='auto'
        What :meth:`transform` returns: the dense ``n x n`` affinity, or a
        sparse one holding each point's ``n_neighbors`` highest learned
        affinities and ``n_random_neighbors`` random partners (computed
        block by block, never dense).  ``'auto'``: dense
        up to :data:`SPARSE_AUTO_MIN_SAMPLES` points, sparse beyond.
    n_neighbors : int, default=30
        Neighbours kept per point in the sparse affinity.
    n_random_neighbors : int, default=20
        Random partners added per point in the sparse affinity, with their
        exact learned affinities.  The top-``n_neighbors`` of a point within
        its cluster are mostly its nearest points, so without them a large
        cluster becomes a thin local mesh that the eigengap splits into many
        pieces; random partners tie each cluster together (see
        :mod:`skabc.sparse_affinity`).  They are drawn from the points'
        values (:func:`~skabc.sparse_affinity.row_keys`), so permuting the
        rows permutes the result.  ``0`` keeps the plain kNN graph.
    memory_limit : float, 'auto' or None, default='auto'
        Largest dense ``n x n`` result (bytes) that :meth:`transform` and
        :class:`ABCClustering` may build; a larger set is refused with a
        clear error before anything is allocated.  ``'auto'``: half of the
        physical memory; ``None``: no check.
    device : str, default='auto'
        Torch device; ``'auto'`` uses CUDA when available, else the CPU.
    random_state : int, RandomState instance or None, default=None
        Seeds weight initialisation, set sampling and batch order.
    verbose : int, default=0
        ``> 0`` prints skorch's epoch log and a progress bar.

    Attributes
    ----------
    net_ : skorch.NeuralNet
        The trained network wrapper; ``net_.module_`` is the :class:`ABCNet`.
    module_ : ABCNet
        The trained torch module.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Feature names seen during fit, when X has them.
    n_training_sets_ : int
        Number of training sets drawn over all epochs.

    Examples
    --------
    >>> from skabc import ContextualKernel
    >>> from skabc.datasets import make_circles_sets
    >>> X, y, groups = make_circles_sets(n_sets=64, set_size=60, random_state=0)
    >>> kernel = ContextualKernel(d_model=32, n_blocks=1, max_epochs=1, set_size=60,
    ...                           random_state=0).fit(X, y, groups=groups)
    >>> kernel.transform(X[:60]).shape
    (60, 60)
    """

    _parameter_constraints: dict = {
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
        "set_size": ["array-like", Interval(Integral, 2, None, closed="left")],
        "clusters_per_set": ["array-like", Interval(Integral, 1, None, closed="left"), None],
        "sets_per_epoch": [Interval(Integral, 1, None, closed="left"), None],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "weight_decay": [Interval(Real, 0, None, closed="left")],
        "pos_weight": [Interval(Real, 0, None, closed="neither"), StrOptions({"balanced"}), None],
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

    def __init__(
        self,
        attention="sab",
        n_inducing=16,
        window_size=128,
        n_attention_samples=4,
        window_attention="dense",
        attention_options=None,
        compat="multiplicative",
        n_blocks=4,
        n_heads=4,
        d_model=64,
        layer_norm="pre",
        dropout=0.0,
        canonical_features=None,
        embedder=None,
        set_size=(50, 200),
        clusters_per_set=None,
        sets_per_epoch=None,
        max_epochs=40,
        batch_size=32,
        lr=1e-3,
        weight_decay=0.0,
        pos_weight=None,
        warm_start=False,
        checkpoint_dir=None,
        checkpoint_every=1,
        affinity_mode="auto",
        n_neighbors=30,
        n_random_neighbors=20,
        memory_limit="auto",
        device="auto",
        random_state=None,
        verbose=0,
    ):
        self.attention = attention
        self.n_inducing = n_inducing
        self.window_size = window_size
        self.n_attention_samples = n_attention_samples
        self.window_attention = window_attention
        self.attention_options = attention_options
        self.compat = compat
        self.n_blocks = n_blocks
        self.n_heads = n_heads
        self.d_model = d_model
        self.layer_norm = layer_norm
        self.dropout = dropout
        self.canonical_features = canonical_features
        self.embedder = embedder
        self.set_size = set_size
        self.clusters_per_set = clusters_per_set
        self.sets_per_epoch = sets_per_epoch
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.pos_weight = pos_weight
        self.warm_start = warm_start
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.affinity_mode = affinity_mode
        self.n_neighbors = n_neighbors
        self.n_random_neighbors = n_random_neighbors
        self.memory_limit = memory_limit
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, groups=None):
        """Train the kernel on sets drawn from labelled rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points.
        y : array-like of shape (n_samples,)
            Cluster labels; ``-1`` marks unlabelled rows, which are ignored.
        groups : array-like of shape (n_samples,), default=None
            Group of every row; each training set is drawn within one group
            (e.g. one alphabet, or one independent drawing of a problem).

        Returns
        -------
        self : ContextualKernel
        """
        self._validate_params()
        if y is None:
            raise ValueError(
                "ContextualKernel requires y to be passed, but the target y is None: it learns from cluster labels."
            )
        previous = self.module_.state_dict() if (self.warm_start and hasattr(self, "module_")) else None
        check_not_masked_or_missing(X)
        X = validate_data(self, X, dtype=self._input_dtype(), ensure_min_samples=2)
        X = to_network_float32(check_magnitude(X), scale_free=self.canonical_features is not None)
        labels = encode_labels(y, X.shape[0])
        group_codes = encode_groups(groups, X.shape[0])
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}.")
        set_size = check_set_size(self.set_size)
        self._check_training_memory(set_size[1])
        sampler = ClusterSetSampler(labels, group_codes, set_size, check_clusters_per_set(self.clusters_per_set))
        device = resolve_device(self.device)
        tune_allocator()

        n_labelled = int((labels >= 0).sum())
        n_sets = self._n_sets_per_epoch(n_labelled, set_size)
        steps = self.max_epochs * math.ceil(n_sets / self.batch_size)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        dataset = SampledSetsDataset(X, sampler, n_sets, self.batch_size, seed, set_transform=self._set_transform())

        with seeded_torch(seed, device):
            self.net_ = self._make_net(self._build_module(X.shape[1]), device, steps)
            self.net_.initialize()
            if previous is not None:
                self._load_warm_start(previous)
            done = self._resume_from_checkpoint()
            if done < self.max_epochs:
                # partial_fit keeps the (possibly restored) state and turns Ctrl-C into a clean stop.
                self.net_.partial_fit(dataset, y=None, epochs=self.max_epochs - done)
            self._handle_interruption()
        if not all(np.isfinite(row.get("train_loss", 0.0)) for row in self.net_.history):
            raise ValueError(
                "training diverged (the loss became NaN or infinite); lower lr or rescale X "
                "(e.g. with sklearn's StandardScaler)."
            )
        self.module_ = self.net_.module_
        self.module_.eval()
        self._fitted_architecture_ = self._architecture()
        self.n_training_sets_ = n_sets * sum("train_loss" in row for row in self.net_.history)
        return self

    def _architecture(self) -> dict:
        return {name: getattr(self, name) for name in ARCHITECTURE_PARAMS}

    def check_architecture_unchanged(self, action: str = "transform") -> None:
        """Refuse to use the fitted weights after a parameter they depend on was changed.

        ``set_params(d_model=32)`` or ``set_params(canonical_features=4)`` on a
        fitted kernel does not change its network; transforming or saving with
        the new value would fail inside torch or write a file that cannot be
        loaded, so both ask for a refit instead.
        """
        fitted = getattr(self, "_fitted_architecture_", None)
        if fitted is None:  # fitted by an older version: nothing recorded
            return
        for name, value in fitted.items():
            current = getattr(self, name)
            if current is not value and current != value:
                raise ValueError(
                    f"{name}={current!r} was set after fit, but the fitted weights were built with "
                    f"{name}={value!r}; {action} needs the configuration the kernel was fitted with. "
                    f"Set {name} back to {value!r}, or fit again."
                )

    def _input_dtype(self):
        # A canonicalising kernel validates in float64: its float32 cast comes after any rescaling.
        return (np.float64, np.float32) if self.canonical_features is not None else np.float32

    def _load_warm_start(self, state: dict) -> None:
        try:
            self.net_.module_.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ValueError(
                "warm_start=True needs the same architecture as the fitted kernel (n_blocks, d_model, "
                f"n_heads, attention, embedder, canonical_features, input width): {exc}"
            ) from exc

    def _set_transform(self):
        """The per-set input map applied before the network (``None``: identity)."""
        if self.canonical_features is None:
            return None
        return _Canonicalize(int(self.canonical_features))

    def _handle_interruption(self) -> None:
        finished = sum("train_loss" in row for row in self.net_.history)
        keeper = dict(self.net_.callbacks_)["keep_best"]
        best_state, keeper.best_state_ = keeper.best_state_, None  # no second copy of the weights in pickles
        if finished >= self.max_epochs:
            return
        if best_state is not None:
            self.net_.module_.load_state_dict(best_state)
        warnings.warn(
            f"ContextualKernel training was interrupted after {finished} of {self.max_epochs} epochs; "
            f"the kernel keeps the weights with the best training loss so far ({keeper.best_loss_:.4f}). "
            + ("Call fit again to resume from checkpoint_dir." if self.checkpoint_dir is not None else ""),
            RuntimeWarning,
            stacklevel=3,
        )

    def _make_net(self, module: ABCNet, device: torch.device, total_steps: int) -> NeuralNet:
        return NeuralNet(
            module=module,
            criterion=SameClusterBCELoss(self.pos_weight),
            optimizer=torch.optim.AdamW,
            optimizer__weight_decay=self.weight_decay,
            lr=self.lr,
            max_epochs=self.max_epochs,
            batch_size=self.batch_size,
            iterator_train__shuffle=False,
            iterator_train__collate_fn=collate_sets,
            train_split=None,
            predict_nonlinearity=None,
            device=str(device),
            callbacks=self._callbacks(total_steps),
            verbose=self.verbose,
        )

    def _resume_from_checkpoint(self) -> int:
        """Restore weights, optimizer and history from ``checkpoint_dir``; return epochs done."""
        if self.checkpoint_dir is None:
            return 0
        directory = Path(self.checkpoint_dir)
        directory.mkdir(parents=True, exist_ok=True)
        config_file = directory / "config.json"
        config = json.dumps(_describe_params(self), sort_keys=True)
        if (directory / _CHECKPOINT_FILES["f_history"]).exists():
            saved = config_file.read_text() if config_file.exists() else None
            if saved != config:
                raise ValueError(
                    f"checkpoint_dir={str(directory)!r} holds a checkpoint of a different configuration; "
                    "use another directory or remove it to start afresh."
                )
            self._load_checkpoint_files(directory)
            return len(self.net_.history)
        config_file.write_text(config)
        return 0

    def _load_checkpoint_files(self, directory: Path) -> None:
        """Load history, weights and optimizer state file by file, so an error names its file.

        The ``.pt`` files are read with ``torch.load(weights_only=True)``: tensors
        and plain containers only, never arbitrary pickled objects.
        """
        for argument, name in _CHECKPOINT_FILES.items():
            file = directory / name
            if not file.is_file():
                raise ValueError(f"checkpoint_dir={str(directory)!r} holds no {name}; remove it to start afresh.")
            try:
                self.net_.load_params(**{argument: str(file)})
            except pickle.UnpicklingError as exc:
                if "GLOBAL" not in str(exc):  # torch names the Python global it refused; else the file is corrupt
                    raise ValueError(
                        f"cannot resume from {str(file)!r}: it is not a checkpoint skabc wrote (corrupt or "
                        "truncated); remove it (or use another checkpoint_dir) to start afresh."
                    ) from None
                raise ValueError(
                    f"refusing to resume from {str(file)!r}: it holds pickled Python objects besides tensors, "
                    "and unpickling them could run arbitrary code. skabc only reads checkpoints it wrote; "
                    "remove the file (or use another checkpoint_dir) to start afresh."
                ) from None
            except (RuntimeError, OSError, EOFError, ValueError, TypeError, KeyError) as exc:
                raise ValueError(
                    f"cannot resume from {str(file)!r}: it is not a checkpoint skabc wrote for this "
                    f"configuration ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                    "remove it (or use another checkpoint_dir) to start afresh."
                ) from None

    def _n_sets_per_epoch(self, n_labelled: int, set_size: tuple[int, int]) -> int:
        if self.sets_per_epoch is not None:
            return int(self.sets_per_epoch)
        covering = math.ceil(n_labelled / (0.5 * (set_size[0] + set_size[1])))
        return int(np.clip(covering, 8 * self.batch_size, 64 * self.batch_size))

    def _build_module(self, n_features: int) -> ABCNet:
        if self.canonical_features is not None:
            n_features = int(self.canonical_features)
        embedder = self.embedder
        if isinstance(embedder, str):
            embedder = EMBEDDERS[embedder](n_features, self.d_model)
        elif isinstance(embedder, nn.Module):
            embedder = copy.deepcopy(embedder)  # never train the user's own object
        elif embedder is not None:
            embedder = embedder(n_features, self.d_model)
            if not isinstance(embedder, nn.Module):
                raise TypeError(f"embedder(n_features, d_model) must return an nn.Module, got {type(embedder)}")
        module = ABCNet(
            n_features=n_features,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_blocks=self.n_blocks,
            compat=self.compat,
            attention=self.attention,
            layer_norm=self.layer_norm,
            dropout=self.dropout,
            embedder=embedder,
            attention_options=self._backend_options(),
        )
        if embedder is not None:
            with torch.no_grad():
                out = module.embedder(torch.zeros(2, n_features))
            if out.shape != (2, self.d_model):
                raise ValueError(
                    f"embedder must map (m, {n_features}) inputs to (m, d_model={self.d_model}); "
                    f"it returned shape {tuple(out.shape)}."
                )
        return module

    def _backend_options(self) -> dict:
        names = BACKEND_OPTIONS.get(self.attention, ()) if isinstance(self.attention, str) else ()
        return {**{name: getattr(self, name) for name in names}, **(self.attention_options or {})}

    def _apply_inference_options(self, module: nn.Module) -> None:
        """Give the fitted blocks the current inference-only options, so set_params needs no refit.

        ``n_attention_samples`` only sets how many window samples the sampled
        backend averages in eval mode; the weights do not depend on it.
        """
        samples = self._backend_options().get("n_attention_samples")
        if samples is None:
            return
        for block in module.modules():
            if isinstance(block, SampledAttentionBlock):
                block.n_attention_samples = int(samples)

    def _callbacks(self, total_steps: int) -> list:
        callbacks = [
            ("redraw_sets", _RedrawEachEpoch()),
            ("keep_best", _KeepBestWeights()),
            ("grad_clip", GradientNormClipping(gradient_clip_value=1.0)),
            ("lr_schedule", _WarmupCosine(self.lr, max(total_steps, 1))),
        ]
        if self.verbose:
            callbacks.append(("progress", ProgressBar()))
        if self.checkpoint_dir is not None:
            callbacks.append(
                ("checkpoint", Checkpoint(monitor=_EveryNthEpoch(self.checkpoint_every),
                                          dirname=str(self.checkpoint_dir), f_pickle=None,
                                          f_criterion=None, load_best=False, **_CHECKPOINT_FILES))
            )
        return callbacks

    # ------------------------------------------------------------ inference
    def transform(self, X):
        """Learned affinity of the set ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One set; every row is seen in the context of all the others.

        Returns
        -------
        affinity : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_samples)
            Symmetric same-cluster probabilities in [0, 1], float64; sparse
            in sparse mode (each point's ``n_neighbors`` strongest pairs and
            ``n_random_neighbors`` random ones).
        """
        check_is_fitted(self, "module_")
        self.check_architecture_unchanged("transform")
        X = self._validate_set(X)
        if self.uses_sparse_affinity(X.shape[0]):
            return topk_affinity(self.module_.head, self._encode(X), self.n_neighbors,
                                 n_random=self.n_random_neighbors, point_keys=row_keys(X))
        self.check_memory(X.shape[0])
        return self._affinity(X)

    def _validate_set(self, X) -> np.ndarray:
        """Validate a set for inference; canonical kernels accept any number of features."""
        check_not_masked_or_missing(X)
        if self.canonical_features is not None:
            X = check_array(X, dtype=self._input_dtype(), ensure_min_samples=1)
        else:
            X = validate_data(self, X, dtype=np.float32, reset=False, ensure_min_samples=1)
        return to_network_float32(check_magnitude(X), scale_free=self.canonical_features is not None)

    def _check_training_memory(self, largest_set: int) -> None:
        """Refuse a training configuration whose per-step pair tensors would not fit.

        Each step keeps, per set and block, attention scores for every head and
        the ``n x n`` logits, targets and loss for backpropagation (float32);
        dense attention makes that quadratic in ``set_size``.
        """
        limit = _memory_limit_bytes(self.memory_limit)
        pair_tensors = self.n_blocks * (self.n_heads + 1) + 4
        needed = 4.0 * self.batch_size * float(largest_set) ** 2 * pair_tensors
        if limit is not None and needed > limit:
            raise AffinityTooLargeError(
                f"training on sets of up to {largest_set} points in batches of {self.batch_size} needs about "
                f"{format_bytes(needed)} per step, over memory_limit={format_bytes(limit)}; "
                "lower set_size or batch_size (the kernel applies to larger sets than it was trained on)."
            )

    def uses_sparse_affinity(self, n_samples: int) -> bool:
        """Whether :meth:`transform` returns a sparse affinity for a set of ``n_samples`` points."""
        if self.affinity_mode == "auto":
            return n_samples > SPARSE_AUTO_MIN_SAMPLES
        return self.affinity_mode == "sparse"

    def check_memory(self, n_samples: int, n_copies: float = 1.0) -> None:
        """Refuse a set whose dense ``n x n`` float64 results would exceed ``memory_limit``.

        Parameters
        ----------
        n_samples : int
            Size of the set.
        n_copies : float
            How many dense ``n x n`` float64 matrices the caller will hold at once.

        Raises
        ------
        AffinityTooLargeError
            A ``MemoryError`` (and ``ValueError``) naming the size needed, the limit, and what to do instead.
        """
        limit = _memory_limit_bytes(self.memory_limit)
        needed = n_copies * 8.0 * float(n_samples) ** 2
        if limit is not None and needed > limit:
            raise AffinityTooLargeError(
                f"a set of {n_samples} points needs about {format_bytes(needed)} for its dense "
                f"{n_samples} x {n_samples} affinity, over memory_limit={format_bytes(limit)}. "
                "Use affinity_mode='sparse' (each point's n_neighbors strongest pairs), cluster smaller "
                "sets (e.g. pass groups to split it), or raise memory_limit if the machine has the memory."
            )

    def fit_transform(self, X, y=None, groups=None):
        """Fit on ``(X, y, groups)``, then return the affinity of ``X`` as one set."""
        return self.fit(X, y, groups=groups).transform(X)

    def _encode(self, X: np.ndarray) -> torch.Tensor:
        """Contextual embeddings ``(1, n, d_model)`` of the set ``X``."""
        module = self.module_
        module.eval()
        self._apply_inference_options(module)
        device = next(module.parameters()).device
        transform = self._set_transform()
        if transform is not None:
            X = transform(X)
        with torch.inference_mode():
            return module.encode(torch.as_tensor(X, device=device)[None])

    def _affinity(self, X: np.ndarray) -> np.ndarray:
        module = self.module_
        n = X.shape[0]
        z = self._encode(X)
        with torch.inference_mode():
            projected = module.head.project(z)
            rows = max(1, _INFERENCE_BLOCK_CELLS // max(n, 1))
            affinity = np.empty((n, n), dtype=np.float64)
            for start in range(0, n, rows):
                block = module.head.block_logits(z, slice(start, start + rows), projected)
                # Sigmoid in float64: confident "different cluster" logits stay positive instead of
                # underflowing to 0, so the affinity graph stays connected for the spectral step.
                affinity[start : start + rows] = torch.sigmoid(block[0].double()).cpu().numpy()
        # Blocks are symmetric up to rounding; make it exact.
        affinity += affinity.T
        affinity *= 0.5
        return affinity

    # ---------------------------------------------------------- persistence
    def save(self, path) -> None:
        """Write the fitted kernel to one safetensors file (weights + JSON description).

        The write is atomic: an interrupted save never leaves a broken file.
        Only kernels whose parameters are plain values (no custom module or
        callable) can be saved this way; pickle works for the others.
        """
        check_is_fitted(self, "module_")
        save_kernel(self, path)

    @classmethod
    def load(cls, path, device="auto") -> ContextualKernel:
        """Load a kernel written by :meth:`save`, without unpickling anything."""
        return load_kernel(cls, path, device=device)

    def _restore(self, n_features: int, state_dict: dict, device) -> None:
        """Become fitted from saved weights (used by :func:`load_kernel`)."""
        device = resolve_device(device)
        self.net_ = self._make_net(self._build_module(n_features), device, 1)
        self.net_.initialize()
        try:
            self.net_.module_.load_state_dict(state_dict, strict=True)
        except RuntimeError as exc:
            raise ValueError(f"saved weights do not fit the saved configuration: {exc}") from exc
        self.module_ = self.net_.module_.to(device)
        self.module_.eval()
        self.n_features_in_ = n_features
        self._fitted_architecture_ = self._architecture()
        self.n_training_sets_ = 0

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.transformer_tags.preserves_dtype = []
        tags.input_tags.allow_nan = False
        return tags


class _Canonicalize:
    """Picklable per-set map to canonical coordinates (float32 for the network)."""

    def __init__(self, n_components: int) -> None:
        self.n_components = n_components

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return canonicalize_set(np.asarray(X, dtype=np.float32), self.n_components).astype(np.float32, copy=False)


def _describe_params(estimator: BaseEstimator) -> dict:
    """JSON-ready description of an estimator's parameters (callables by qualified name)."""

    # Settings that do not change training: a checkpoint made under other values still resumes.
    ignored = ("verbose", "device", "checkpoint_dir", "checkpoint_every", "memory_limit", "affinity_mode",
               "n_neighbors", "n_random_neighbors", "warm_start")
    return {k: json_ready(v, _name_of) for k, v in estimator.get_params(deep=False).items() if k not in ignored}


def _name_of(value) -> str:
    """Custom modules and callables are described by their qualified name."""
    if isinstance(value, nn.Module):
        return f"module:{type(value).__module__}.{type(value).__qualname__}"
    return f"{type(value).__module__}.{getattr(value, '__qualname__', type(value).__qualname__)}"


def _memory_limit_bytes(memory_limit) -> float | None:
    if memory_limit is None:
        return None
    if memory_limit == "auto":
        try:
            return 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):  # not POSIX: no reliable figure
            return None
    return float(memory_limit)
