"""ContextualKernel: a transformer returning the learned n x n affinity of a set."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .. import persistence
from .._typing import Float, Int
from .._validation import check_magnitude, check_not_masked_or_missing, encode_groups, encode_labels, to_network_float32
from ..inference import check_affinity_memory, learned_affinity
from ..nn.build import apply_inference_options, check_architecture_unchanged, set_transform
from ..training.fitting import fit_kernel, unchanged_on_failure
from ..training.plan import network_of, reads_canonical_input
from ._contextual_constraints import CONTEXTUAL_KERNEL_CONSTRAINTS
from ._contextual_io import FittedNetworkMixin, check_contextual, describe_contextual, restore_contextual
from .base import AffinityTransformerMixin, Kernel, check_named_columns, save_with_settings

if TYPE_CHECKING:
    import os

    import torch
    from typing_extensions import Self

# affinity_mode='auto' switches to the sparse top-k affinity beyond this many points.
SPARSE_AUTO_MIN_SAMPLES = 10_000


@persistence.persistent
class ContextualKernel(FittedNetworkMixin, AffinityTransformerMixin, Kernel, auto_wrap_output_keys=None):
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
        ``attention='sampled'``: points per random window.  A set of at most this many points is one
        window: dense attention with ``window_attention='dense'``, one random cycle with ``'hamiltonian'``.
    n_attention_samples : int, default=4
        ``attention='sampled'``: window samples averaged at inference, at most 1024 (more samples, less variance,
        proportionally more time; sets that fit in one dense window are computed once).  Inference-only:
        changing it with ``set_params`` on a fitted kernel takes effect without refitting.
    window_attention : {'dense', 'hamiltonian'}, default='dense'
        ``attention='sampled'``: attention pattern inside a window: dense
        attention among the window's points (O(n w) per block; the Sampled
        Transformer's random element sampling) or its Hamiltonian path
        pattern (each point sees itself and its two path neighbours, O(n));
        how they compare: ``docs/backends_results.md``.
    attention_options : dict, default=None
        Extra keyword options for the backend factory (e.g. for a custom
        callable ``attention``); the named options above are set by their own parameters.
    compat : {'multiplicative', 'additive'}, default='multiplicative'
        Compatibility function of the similarity head.
    n_blocks : int, default=4
        Number of stacked attention blocks; ``0`` is the pairwise ablation.
    n_heads : int, default=4
        Attention heads per block.
    d_model : int, default=64
        Width of the embeddings, at most 2**16 (as are ``n_heads``, ``n_inducing``, ``canonical_features``);
        must be divisible by ``n_heads``.
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
        kernel uses 64, its embedder reading the first 16: ``embed_features=16``).
    embedder : {'mlp', 'fourier', 'conv4'}, nn.Module or callable, default=None
        Row-wise input embedder.  ``None`` or ``'mlp'``: an MLP;
        ``'fourier'``: learnable multi-scale Fourier features, then an MLP
        (:class:`skabc.nn.FourierEmbedder`; learns locality much faster on
        low-dimensional geometric data);
        ``'conv4'``: the paper's four-block CNN for square single-channel
        images given as rows of ``side * side`` pixels (side 16 or more), then an MLP
        (:class:`skabc.nn.Conv4Embedder`).  A module is deep-copied at fit; a
        callable is called as ``embedder(n_features, d_model)``.  It must map
        ``(m, n_features)`` to ``(m, d_model)``.
    local_geometry : bool, default=False
        Give the network the local geometry of every set (:mod:`skabc.nn.geometry`: self-tuning scaled
        distances, kNN membership, shared neighbours) as attention biases and an additive term of the
        similarity logits.  Needs ``attention='sab'``.  The pair features are dense in ``n``: sets of more
        than :data:`skabc.inference.GEOMETRY_MAX_SAMPLES` points, and sparse affinities, are computed without them.
    embed_features : int, default=None
        Number of leading input (or canonical) columns the embedder sees;
        ``None``: all.  With ``local_geometry`` the distances still use every
        column, so a wide ``canonical_features`` keeps the distances of wide
        tables while the embedder stays small.
    context_gate : bool, default=False
        With ``local_geometry``: weigh the head's logits against the geometry
        term by two factors per set read from context (:class:`skabc.nn.ABCNet`).
    init : {'auto', 'generic', 'scratch'}, default='auto'
        ``'generic'``: fine-tune the shipped generic kernel (its network and
        clustering settings; leave the parameters above at their defaults);
        ``'scratch'``: the network above, new; ``'auto'``: ``'generic'`` if
        the parameters above are all defaults, else ``'scratch'``.
    fine_tune_alpha : float in (0, 1] or 'auto', default='auto'
        Share of the fine-tuned weights in the result, ``start + alpha *
        (trained - start)`` (WiSE-FT; below 1 only with ``init='generic'``).
        ``'auto'``: 0.5 for a fit that starts from the generic kernel with no held-out groups to validate on
        (it validates on held-out classes, or not at all: an int ``max_epochs``), else 1.0.
    set_size : int or (int, int), default=(50, 200)
        Size of each training set, or the range it is drawn from.
    clusters_per_set : int or (int, int), default=None
        Range of clusters per training set; ``None`` draws ``k`` uniformly
        among the values that fit the data (Algorithm 1).
    sets_per_epoch : int, default=None
        Training sets per epoch; ``None``: the automatic schedule's, else
        enough to cover the labelled rows once (8 to 64 batches).
    max_epochs : int or 'auto', default='auto'
        Epochs (fresh sets each).  ``'auto'``: the sets of 200 to 3,200 steps of 32 from the
        labelled rows and classes at the reference set size (smaller sets get more, larger ones fewer,
        never under 200), in at most 16 epochs (:func:`skabc.training.training_schedule`).
    batch_size : int or 'auto', default='auto'
        Sets per optimisation step.  ``'auto'``: 16 where the CPU budget ends the run, else 32
        (:func:`skabc.training.auto_batch_size`, resolved into ``batch_size_``).
    lr : float, default=1e-3
        Peak learning rate of AdamW (linear warm-up, then cosine decay), at most 1e30.
    weight_decay : float, default=0.0
        AdamW weight decay.
    pos_weight : float, 'balanced' or None, default=None
        Same-cluster cells' loss weight (at most 1e6); ``'balanced'``: a batch's other/same cell ratio, at least 1.
    early_stopping : bool or 'auto', default='auto'
        Score sets of held-out groups (else classes, plus some rows of the
        others), ``k`` unknown, after every epoch; keep the best weights,
        a fine-tune's starting ones included (a scratch start is scored,
        never kept); stop after ``n_iter_no_change`` epochs
        without progress.  ``'auto'``: on with ``max_epochs='auto'``.  Labels
        with no useful split (under 20 rows held out, or fewer than two
        groups of two labelled rows) train without validation (said with
        ``verbose=1``; ``early_stopping=True`` warns).
    validation_fraction : float, default=0.2
        Share of the groups, or of the classes and rows, held out.
    n_iter_no_change : int, default=5
        Patience of early stopping, in epochs.
    max_time : float, 'auto' or None, default='auto'
        Seconds of training (wall clock) before it stops (the training loop: validation and the choice of
        clustering settings afterwards come on top).  ``'auto'``: with
        ``max_epochs='auto'``, :data:`~skabc.training.schedule.AUTO_MAX_TIME` (a slow machine ends the
        automatic schedule there), else none; resolved into ``max_time_``.
    warm_start : bool, default=False
        If true and the kernel is already fitted, ``fit`` starts from the
        current weights (fine-tuning, e.g. from a shipped pretrained kernel)
        instead of a fresh initialisation; the optimizer and learning-rate
        schedule start afresh.  The architecture parameters must not change.
    checkpoint_dir : str or path, default=None
        If set, weights, optimizer state, history and torch's random stream are saved there every
        ``checkpoint_every`` epochs, and a fit that finds a checkpoint of the same configuration there resumes
        from it (drawing the same sets an uninterrupted run would), so long trainings survive being stopped.
        A finished run keeps the kernel it fitted there; a fit on it restores that kernel.  Needs a
        ``random_state`` (``None`` is refused: every fit would draw other sets).
    checkpoint_every : int, default=1
        Save a checkpoint after every this many epochs.
    affinity_mode : {'auto', 'dense', 'sparse'}, default='auto'
        What :meth:`transform` returns: the dense ``n x n`` affinity (on its diagonal each point paired with
        itself as the network scores it, not fixed at 1), or a sparse one holding each point's
        ``n_neighbors`` highest learned affinities and ``n_random_neighbors`` random partners (computed block
        by block, never dense; no diagonal stored, :mod:`skabc.sparse_affinity`).  ``'auto'``: dense up to
        :data:`SPARSE_AUTO_MIN_SAMPLES` points, sparse beyond (so the diagonal changes meaning there).
    n_neighbors : int, default=30
        Neighbours kept per point in the sparse affinity.
    n_random_neighbors : int, default=20
        Random partners added per point in the sparse affinity, with their
        exact learned affinities.  The top-``n_neighbors`` of a point within
        its cluster are mostly its nearest points, so without them a large
        cluster becomes a thin local mesh that the eigengap splits into many
        pieces; random partners tie each cluster together (see
        :mod:`skabc.sparse_affinity`).  They are drawn from the points'
        values (:func:`~skabc.sparse_affinity.row_keys`): permuting distinct rows permutes the result
        (exact search; up to neighbours whose affinities tie to rounding).  ``0``: the plain kNN graph.
    memory_limit : float, 'auto' or None, default='auto'
        Largest dense ``n x n`` result (bytes) that :meth:`transform` and
        :class:`ABCClustering` may build (sparse mode: the sparse one while it is built,
        about 4 KB a point and 128 bytes a pair kept); a larger set is refused with a
        clear error before anything is allocated.  ``'auto'``: half of the
        physical memory (for training on a GPU, half of the GPU's); ``None``: no check.
    device : str, torch.device or None, default='auto'
        Torch device; ``'auto'`` (or ``None``) uses CUDA when available, else the CPU.
    random_state : int, RandomState instance or None, default=None
        Seeds weight initialisation, set sampling and batch order.
    verbose : int, default=0
        ``> 0`` prints skorch's epoch log (with ``valid_ari``) and, in a terminal or notebook, a progress bar.

    Attributes
    ----------
    net_, module_ : skorch.NeuralNet, ABCNet
        The trained network wrapper (its ``history`` holds the epochs' losses and scores) and its torch module
        (``net_.module_``).  A kernel loaded from a file, or restored from a finished run's ``checkpoint_dir``,
        has ``module_`` only: its training history is not kept.
    n_features_in_ : int
        Number of features seen during fit; a canonicalising kernel (``network_params_['canonical_features']``
        set: the generic one and those fine-tuned from it) takes sets of any width.
    feature_names_in_ : ndarray of str
        Feature names seen during fit, when X has them; a frame given to ``transform`` must have these.
    n_training_sets_ : int
        Training sets of every trained batch, an epoch cut short included (0: untrained, the start kept, no record).
    init_, fine_tune_alpha_, network_params_, schedule_, batch_size_ : str, float, dict, Schedule or None, int
        Where the fit started; the resolved ``fine_tune_alpha``; the fitted network's parameters; the schedule;
        the resolved ``batch_size``.
    max_time_, device_ : float or None, torch.device
        The resolved ``max_time``; where the network is (``device`` resolved, ``'auto'``: CUDA when available).
    validation_score_, start_validation_score_ : float or None
        Held-out mean ARI of the result and of the start as each clusters (own settings, arbiter included).
    validation_settings_scores_, recommended_clustering_ : dict, dict
        Held-out mean ARI of the trained weights per setting, and of the start's (``'start weights, ...'``);
        the ABCClustering settings :meth:`recommended_clustering` returns (the best, if ahead by over one SE).

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

    #: Its affinities are symmetric by construction.
    _checks_its_affinity = True

    @property
    def outputs_probabilities(self) -> bool:
        """True: the affinities are same-cluster probabilities (the sigmoid of the head's logits)."""
        return True

    _parameter_constraints: dict = CONTEXTUAL_KERNEL_CONSTRAINTS

    def __init__(
        self,
        attention: str | Callable[..., Any] = "sab", n_inducing: Int = 16, window_size: Int = 128,
        n_attention_samples: Int = 4, window_attention: str = "dense", attention_options: dict[str, Any] | None = None,
        compat: str = "multiplicative", n_blocks: Int = 4, n_heads: Int = 4, d_model: Int = 64, layer_norm: str = "pre",
        dropout: Float = 0.0, canonical_features: Int | None = None,
        embedder: str | torch.nn.Module | Callable[..., Any] | None = None, local_geometry: bool = False,
        embed_features: Int | None = None, context_gate: bool = False,
        init: str = "auto", fine_tune_alpha: Float | Literal["auto"] = "auto",
        set_size: Int | Sequence[Int] | np.ndarray = (50, 200), clusters_per_set: Int | Sequence[Int] | None = None,
        sets_per_epoch: Int | None = None, max_epochs: Int | Literal["auto"] = "auto",
        batch_size: Int | Literal["auto"] = "auto", lr: Float = 1e-3, weight_decay: Float = 0.0,
        pos_weight: Float | Literal["balanced"] | None = None,
        early_stopping: bool | Literal["auto"] = "auto", validation_fraction: Float = 0.2, n_iter_no_change: Int = 5,
        max_time: Float | Literal["auto"] | None = "auto", warm_start: bool = False,
        checkpoint_dir: str | os.PathLike[str] | None = None, checkpoint_every: Int = 1,
        affinity_mode: str = "auto", n_neighbors: Int = 30, n_random_neighbors: Int = 20,
        memory_limit: Float | Literal["auto"] | None = "auto",
        device: str | torch.device | None = "auto",
        random_state: Int | np.random.RandomState | None = None,
        verbose: Int = 0,
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
        self.local_geometry = local_geometry
        self.embed_features = embed_features
        self.context_gate = context_gate
        self.init, self.fine_tune_alpha = init, fine_tune_alpha
        self.set_size = set_size
        self.clusters_per_set = clusters_per_set
        self.sets_per_epoch = sets_per_epoch
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.pos_weight = pos_weight
        self.early_stopping, self.validation_fraction = early_stopping, validation_fraction
        self.n_iter_no_change, self.max_time = n_iter_no_change, max_time
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
            raise ValueError("ContextualKernel requires y to be passed, but the target y is None: y holds labels. "
                             "To use a fitted kernel as it is in a Pipeline, wrap it in sklearn.frozen.FrozenEstimator")
        check_not_masked_or_missing(X)
        with unchanged_on_failure(self):
            X = validate_data(self, X, dtype=self._input_dtype(), ensure_min_samples=2)
            scale_free = reads_canonical_input(self)  # any magnitude: the cast rescales it
            X = to_network_float32(X if scale_free else check_magnitude(X), scale_free=scale_free)
            group_codes = encode_groups(groups, X.shape[0])
            fit_kernel(self, X, encode_labels(y, X.shape[0]), group_codes)
        return self

    def _input_dtype(self):
        # float64 first: a canonicalising kernel rescales before its float32 cast, any other checks what it would lose.
        return (np.float64, np.float32)

    # ------------------------------------------------------------ inference
    def affinity(self, X):
        """Learned affinity of the set ``X`` (what :meth:`transform` returns, in the container ``set_output`` asks).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One set, each row seen in the context of the others (any ``n_features`` for a canonicalising
            kernel, e.g. the generic one or one fine-tuned from it; else ``n_features_in_``).

        Returns
        -------
        affinity : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_samples)
            Symmetric same-cluster probabilities in [0, 1], float64; sparse
            in sparse mode (each point's ``n_neighbors`` strongest pairs and
            ``n_random_neighbors`` random ones; the diagonal: ``affinity_mode``).
        """
        check_is_fitted(self, "module_")
        self._validate_params()  # inference options set after fit (affinity_mode, n_attention_samples...) too
        check_architecture_unchanged(self, "transform")
        X = self._validate_set(X)
        self.check_memory(X.shape[0])
        sparse = self.returns_sparse(X.shape[0])
        network = network_of(self)
        apply_inference_options(network, self.module_)
        return learned_affinity(self.module_, X, sparse=sparse, n_neighbors=self.n_neighbors,
                                n_random_neighbors=self.n_random_neighbors, set_transform=set_transform(network))

    def _validate_set(self, X) -> np.ndarray:
        """Validate a set for inference; canonical kernels take any width (a frame's names are still checked)."""
        check_not_masked_or_missing(X)
        if network_of(self).canonical_features is None:
            X = validate_data(self, X, dtype=self._input_dtype(), reset=False, ensure_min_samples=1)
            return to_network_float32(check_magnitude(X), scale_free=False)
        check_named_columns(self, X)
        X = check_array(X, dtype=self._input_dtype(), ensure_min_samples=1, estimator=self, input_name="X")
        return to_network_float32(X, scale_free=True)

    def returns_sparse(self, n_samples: int) -> bool:
        """Whether :meth:`transform` returns a sparse affinity for a set of ``n_samples`` points.

        Parameters
        ----------
        n_samples : int
            Size of the set.

        Returns
        -------
        sparse : bool
            ``affinity_mode='sparse'``, or ``'auto'`` and more than :data:`SPARSE_AUTO_MIN_SAMPLES` points.
        """
        if self.affinity_mode == "auto":
            return n_samples > SPARSE_AUTO_MIN_SAMPLES
        return self.affinity_mode == "sparse"

    def check_memory(self, n_samples: int, n_copies: float = 1.0) -> None:
        """Refuse a set whose dense ``n x n`` float64 results (and the network's work) exceed ``memory_limit``,
        or, in sparse mode, whose sparse affinity would.

        Parameters
        ----------
        n_samples : int
            Size of the set.
        n_copies : float, default=1.0
            How many dense ``n x n`` float64 matrices the caller will hold at once.

        Raises
        ------
        AffinityTooLargeError
            A ``MemoryError`` (and ``ValueError``) naming the size needed, the limit, and what to do instead.
        """
        check_affinity_memory(self, n_samples, n_copies)

    # ---------------------------------------------------------- persistence
    def save(self, path, *, recommended_clustering: dict | None = None) -> None:
        """Write the fitted kernel to one safetensors file (weights + JSON description).

        Atomic: an interrupted save leaves no broken file.  Not written: this machine's ``device``, ``verbose``,
        ``memory_limit`` and ``checkpoint_*``.  Plain parameters only (no custom module or callable): pickle the others.

        Parameters
        ----------
        path : str or path
        recommended_clustering : dict, default=None
            ABCClustering settings to store with the kernel (what its ``'auto'`` values resolve to, see
            :meth:`recommended_clustering`; the kernel keeps them too); ``None`` keeps the kernel's own.
        """
        check_is_fitted(self, "module_")
        save_with_settings(self, path, recommended_clustering)

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: str | torch.device | None = "auto") -> Self:
        """Load a kernel written by :meth:`save`, without unpickling anything.

        Parameters
        ----------
        path : str or path-like
        device : {'auto', 'cpu', 'cuda'}, a torch device string, torch.device or None, default='auto'
            ``'auto'`` (or ``None``): CUDA when available, else the CPU.
        """
        return persistence.load(path, device=device, expected=cls)

    def _describe(self) -> tuple[dict, dict]:
        """JSON description and tensors for :mod:`skabc.persistence`."""
        return describe_contextual(self)

    @classmethod
    def _restore(cls, meta: dict, tensors: dict, device) -> ContextualKernel:
        """Rebuild a fitted kernel from :meth:`_describe`'s output (or a version-1 file's)."""
        return restore_contextual(cls, meta, tensors, device)

    @classmethod
    def _check_description(cls, meta: dict, header: dict, where: str = "") -> None:
        """Validate a saved description and its file's tensors before anything is built."""
        check_contextual(cls, meta, header, where)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.transformer_tags.preserves_dtype = []
        tags.input_tags.allow_nan = False
        return tags

