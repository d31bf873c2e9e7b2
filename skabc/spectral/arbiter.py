"""Choosing one partition of a set among candidates: the learned arbiter of ``ABCClustering(arbiter=...)``.

With ``k`` unknown, the learned kernel and a plain k-nearest-neighbour graph fail on different sets: the kernel
merges or cuts far-apart curves whose local links a kNN graph keeps, the kNN graph chains blobs that touch. Neither
k rule wins everywhere either.  An arbiter clusters the set every way it knows
(:data:`~skabc.spectral.candidates.CANDIDATES`: the kernel's affinity and the set's kNN graph, each with two k
rules), describes each partition by what needs no labels (its k, the Laplacian spectrum of its affinity around k,
how much it agrees with the other partitions, its cluster sizes, the set's size and width) and keeps the one its
regression forest predicts to score the highest ARI.  With ``k`` given, a second forest of the same name
(:data:`GIVEN_K_ARBITERS`) chooses between the two affinities cut into ``k`` pieces: the kernel's can link what a
kNN graph splits, and the other way round; it keeps the kNN graph's cut (close to SpectralClustering's: no
self-links, ``'njw'`` labels) unless it predicts the kernel's more than its typical error higher (the file's
``preferred`` and ``margin``).  The forests are trained by a research recipe (``benchmarks/train_arbiter.py``) on
labelled synthetic sets and shipped as JSON files of plain arrays, validated before use.  Each file states the most
dimensions its training sets spanned (``max_features``): the shipped generic kernel's set spanning more keeps the
kNN graph's partition instead of the forest's choice (:data:`WIDE_SET_CANDIDATES`), and its kernel's affinity is not
computed.  Adding a candidate is one entry in :data:`~skabc.spectral.candidates.CANDIDATES` (and a retrained
arbiter).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np

from .._schema import _finite
from . import candidates as _candidates
from ._arbiter_file import FORMAT, valid_margin, write_arbiter  # noqa: F401 (write_arbiter: recipes import it here)
from .candidates import CANDIDATES, MAX_SPECTRUM_SIZE, SPECTRUM_SIZE, Candidate, candidate_partitions, quiet_cuts
from .evidence import candidate_features, n_feature_columns, spans_more_than
from .forest import TreeEnsemble
from .knn import KNN_NEIGHBORS, knn_graph, links_every_row
from .select import ZERO_EIGENVALUE
from .step import SpectralStep

#: Folder of the shipped arbiters; name -> file in :data:`ARBITERS`.
_PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"
#: Arbiter name -> its file for ``k`` unknown, and (:data:`GIVEN_K_ARBITERS`) for a given ``k``.
#: ``'generic-count'`` only counts: the generic kernel's arbiter gives ``k`` for a scikit-learn affinity
#: (:mod:`skabc._counting`, which cuts the model's own affinity into it).
ARBITERS = {"generic": "arbiter_generic.json", "generic-knn": "arbiter_generic.json",
            "generic-knn-only": "arbiter_generic.json", "generic-count": "arbiter_generic.json"}
GIVEN_K_ARBITERS = {"generic": "arbiter_generic_given_k.json", "generic-knn": "arbiter_generic_given_k.json",
                    "generic-knn-only": "arbiter_generic_given_k.json"}
#: Arbiter -> its kNN-partition variant: the same forest chooses, and so its ``k``, but the set's kNN graph is cut
#: into that many clusters (a kernel fine-tuned on a few classes finds how many new classes a set holds better
#: than it separates them; ``benchmarks/digit_splits.py``).
KNN_PARTITION_VARIANTS = {"generic": "generic-knn"}
#: Arbiter -> its kNN-candidates variant: the same forest chooses among the kNN graph's candidates only (their
#: partitions and ``k``); with ``k`` given, the kNN graph cut into it.  On small sets of many columns (100 digit
#: images) the kernel's ``k`` rules over-count where the kNN graph's do not; a labelled fit keeps the variant only
#: where its held-out sets say so (:func:`~skabc.training.validation.choose_partition`).
KNN_CANDIDATE_VARIANTS = {"generic": "generic-knn-only"}
#: Candidate an arbiter holds -> what it keeps instead of its forest's choice (with the kernel it learned) for a set
#: spanning more dimensions than any it was trained on (its file's ``max_features``).  On 42 such sets of the
#: generic kernel (TF-IDF corpora, dense mixtures, g2mg/h2mg sets of 128 columns; ``benchmarks/wide_sets.py``) the
#: kNN graph's eigengap partition was never worse than the forest's choice, which once kept the kernel's 2-cluster
#: cut of 12 topics (ARI 0.00); at a given k, the kNN graph cut into it (0.795 against 0.756).  Its k = 1 must beat
#: later eigengaps by more (:func:`~skabc.spectral.wide.wide_eigengap_k`): wide kNN graphs' hubs inflate lambda_2.
WIDE_SET_CANDIDATES = {"knn-eigengap": "knn-wide-eigengap", "knn-given": "knn-given"}
#: Most tree nodes a file may hold (a forged file cannot make evaluation allocate without bound).
_MAX_NODES = 1_000_000


@dataclass(frozen=True)
class Arbiter:
    """A trained arbiter: its candidates, in order, and the forest predicting each one's ARI.

    Parameters
    ----------
    name : str
        The name it was loaded under (a key of :data:`ARBITERS` for the shipped ones).
    candidates : tuple of str
        Names in :data:`~skabc.spectral.candidates.CANDIDATES`, in the order of the forest's one-hot columns.
    forest : TreeEnsemble
        Predicts a candidate's ARI from its row of :func:`candidate_features`.
    provenance : dict
        What the file says of its training (recipe, data, validation scores).
    partition : {'kernel', 'knn'}, default='kernel'
        ``'kernel'``: the chosen candidate's partition; ``'knn'``: the set's kNN graph cut at the chosen ``k``.
    spectrum_size : int, default=SPECTRUM_SIZE
        Eigenvalues per affinity its features read (the file's ``spectrum_size``).
    sources : tuple of str, default=None
        The sources (:data:`~skabc.spectral.candidates.CANDIDATES`' first entries, e.g. ``('knn',)``) whose candidates
        may be kept; ``None``: any.  All are still computed (each one's features read the others), except for a set
        beyond :attr:`max_features`.
    max_features : int, default=None
        Widest set of its training data, in columns (the file's ``max_features``), so the most dimensions any of
        them spanned: a set spanning more (:meth:`beyond_domain`) keeps its candidate of
        :data:`WIDE_SET_CANDIDATES`, the only one computed.
        ``None``: no limit (what :func:`arbiter_for` gives for another kernel than the one its forest learned).
    preferred : str, default=None
        A candidate kept unless the forest predicts another to score more than ``margin`` higher (the file's
        ``preferred``): with ``k`` given, the kNN graph's cut wherever the forest is not surer than its typical
        error.
    margin : float, default=0.0
        How much higher (ARI) another candidate must be predicted to displace ``preferred``.
    """

    name: str
    candidates: tuple[str, ...]
    forest: TreeEnsemble
    provenance: dict
    partition: str = "kernel"
    spectrum_size: int = SPECTRUM_SIZE
    sources: tuple[str, ...] | None = None
    max_features: int | None = None
    preferred: str | None = None
    margin: float = 0.0

    @classmethod
    def from_file(cls, path, name: str | None = None) -> Arbiter:
        """Read and validate an arbiter file (``benchmarks/train_arbiter.py`` writes them).

        Parameters
        ----------
        path : str or path-like
            The JSON file.
        name : str, default=None
            The name to give the arbiter; ``None``: the file's stem.

        Returns
        -------
        arbiter : Arbiter

        Raises
        ------
        ValueError
            If the file is not JSON, not an arbiter file of this format
            version, names an unknown candidate, or holds a malformed forest.
        """
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError
            # (so is a number of more digits than Python converts); RecursionError: nesting deeper than the parser.
            raise ValueError(f"{path} is not a readable arbiter file: {type(error).__name__}: {error}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or type(data.get("version")) is not int \
                or data["version"] != 1:
            raise ValueError(f"{path} is not an arbiter file (format {FORMAT!r}, version 1)")
        candidates = data.get("candidates")
        weighed = set(CANDIDATES) - set(_candidates.KEPT_ONLY)  # those are kept beyond the domain, never weighed
        if (not isinstance(candidates, list) or len(candidates) < 2
                or not all(isinstance(c, str) and c in weighed for c in candidates)
                or len(set(candidates)) != len(candidates)):
            raise ValueError(f"{path}: candidates must be two or more distinct names of {sorted(weighed)}")
        if len({CANDIDATES[c][1] == "given" for c in candidates}) != 1:
            raise ValueError(f"{path}: candidates must all take a given k (rule 'given') or none of them")
        n_columns = n_feature_columns(len(candidates))
        trees, baseline = data.get("trees"), data.get("baseline")
        if data.get("n_columns") != n_columns:
            raise ValueError(f"{path}: n_columns must be {n_columns} for {len(candidates)} candidates")
        if not isinstance(trees, list) or not trees:
            raise ValueError(f"{path}: trees must be a non-empty list")
        if sum(len(t.get("value", ())) if isinstance(t, dict) else 0 for t in trees) > _MAX_NODES:
            raise ValueError(f"{path}: more than {_MAX_NODES} tree nodes")
        if isinstance(baseline, bool) or not isinstance(baseline, (int, float)) or not _finite(baseline):
            raise ValueError(f"{path}: baseline must be a finite number")
        spectrum_size = data.get("spectrum_size", SPECTRUM_SIZE)
        if isinstance(spectrum_size, bool) or not isinstance(spectrum_size, int) or not (
                3 <= spectrum_size <= MAX_SPECTRUM_SIZE):
            raise ValueError(f"{path}: spectrum_size must be an integer in [3, {MAX_SPECTRUM_SIZE}]")
        forest = TreeEnsemble(trees, baseline, n_columns)
        provenance = data.get("provenance", {})
        if not isinstance(provenance, dict):
            raise ValueError(f"{path}: provenance must be an object")
        max_features = data.get("max_features")
        if "max_features" in data and (type(max_features) is not int or max_features < 1):
            raise ValueError(f"{path}: max_features must be a positive integer (or absent: no limit)")
        preferred, margin = data.get("preferred"), data.get("margin", 0.0)
        if ("preferred" in data or "margin" in data) and preferred not in candidates:  # a margin alone means nothing
            raise ValueError(f"{path}: preferred must be one of its candidates {candidates} (or absent with margin)")
        if not valid_margin(margin):
            raise ValueError(f"{path}: margin must be a finite number >= 0")
        return cls(name or path.stem, tuple(candidates), forest, provenance, spectrum_size=spectrum_size,
                   max_features=max_features, preferred=preferred, margin=float(margin))

    @property
    def given_k(self) -> bool:
        """Whether this arbiter chooses among partitions at a given ``k`` (else ``k`` unknown)."""
        return CANDIDATES[self.candidates[0]][1] == "given"

    def beyond_domain(self, X) -> bool:
        """Whether the set ``X`` spans more dimensions than any this arbiter was trained on.

        Its dimensions are the numerical rank of its centred, column-scaled rows
        (:func:`~skabc.spectral.evidence.spans_more_than`): constant, dependent or empty columns add none.

        Parameters
        ----------
        X : ndarray or sparse matrix of shape (n_samples, n_features)
            The set's rows.

        Returns
        -------
        beyond : bool
            True where :attr:`max_features` is set and the set spans more dimensions.
        """
        return (self.max_features is not None and np.shape(X)[1] > self.max_features
                and spans_more_than(X, self.max_features))

    def kernel_free_candidate(self, step: SpectralStep, X) -> str | None:
        """The candidate :meth:`cluster` keeps for the set ``X`` without reading the kernel's affinity (a set beyond
        :attr:`max_features` keeps its kNN candidate: :meth:`cluster_wide` clusters it alone), else ``None``.

        Parameters
        ----------
        step : SpectralStep
            The spectral settings (its ``n_clusters`` must match this arbiter's mode).
        X : ndarray or sparse matrix of shape (n_samples, n_features)
            The set's rows.

        Returns
        -------
        name : str or None
        """
        wide = self.wide_candidate(X)  # first: a set of at most max_features columns is told by its width
        declined = wide is None or links_every_row(X) or (self.given_k and step.n_clusters >= np.shape(X)[0])
        return None if declined else wide  # cluster() cuts the kernel's affinity of the others

    def wide_candidate(self, X) -> str | None:
        """The candidate of :data:`WIDE_SET_CANDIDATES` this arbiter keeps for the set ``X``, whatever its forest
        predicts, if the set is beyond its domain (:meth:`beyond_domain`) and the arbiter has one.

        Parameters
        ----------
        X : ndarray or sparse matrix of shape (n_samples, n_features)
            The set's rows.

        Returns
        -------
        name : str or None
        """
        held = next((kept for name, kept in WIDE_SET_CANDIDATES.items() if name in self.candidates), None)
        return held if held is not None and self.beyond_domain(X) else None

    def _check_mode(self, step: SpectralStep) -> None:
        if self.given_k != (step.n_clusters is not None):
            raise ValueError(f"arbiter {self.name!r} is for {'a given' if self.given_k else 'an unknown'} k; "
                             f"this step has n_clusters={step.n_clusters!r}")

    def candidates_of(self, step: SpectralStep, probabilities, X, eigen_seed, seed: int) -> list[Candidate]:
        """This arbiter's candidate partitions of one set (:func:`~skabc.spectral.candidates.candidate_partitions`);
        beyond its domain, the candidate it holds of :data:`WIDE_SET_CANDIDATES` replaced by the one it keeps.

        Raises
        ------
        ValueError
            If ``step`` gives ``n_clusters`` and this arbiter is for ``k`` unknown, or the other way round,
            or the set's kNN graph links every row to every other (:func:`~skabc.spectral.knn.links_every_row`).
        """
        self._check_mode(step)
        if links_every_row(X):
            raise ValueError(f"an arbiter needs sets of more than {KNN_NEIGHBORS + 1} distinct rows (its "
                             f"{KNN_NEIGHBORS}-NN graph links every row of a smaller one to every other)")
        names = (tuple(WIDE_SET_CANDIDATES.get(n, n) for n in self.candidates) if self.wide_candidate(X) is not None
                 else self.candidates)  # beyond the domain, the candidate kept as cluster() computes it
        return candidate_partitions(step, probabilities, X, eigen_seed, seed, names, self.spectrum_size)

    def choose(self, candidates: list[Candidate], n_features_in: int, X=None) -> tuple[int, np.ndarray]:
        """Index of the candidate of :attr:`sources` kept (the highest predicted ARI but for the rules below), and
        every prediction.

        The first candidate wins ties, :attr:`preferred` (where allowed) any prediction within :attr:`margin` of
        the highest; with ``k`` given, a kNN graph of exactly ``k`` connected components wins whatever the forest
        predicts, and a set beyond :attr:`max_features` keeps its candidate of :data:`WIDE_SET_CANDIDATES` (if the
        arbiter has one).

        Parameters
        ----------
        candidates : list of Candidate
            The partitions of one set, in this arbiter's order (:meth:`candidates_of`).
        n_features_in : int
            The set's number of columns.
        X : ndarray or sparse matrix of shape (n_samples, n_features), default=None
            The set's rows, which :meth:`beyond_domain` reads; ``None``: the forest chooses.

        Returns
        -------
        best : int
            Index of the chosen candidate.
        scores : ndarray of shape (n_candidates,)
            The forest's predicted ARI of each.
        """
        scores = self.forest.predict(candidate_features(candidates, n_features_in, self.spectrum_size))
        if self.given_k:
            exact = _components_at_k(candidates)
            if exact is not None:
                return exact, scores
        wide = None if X is None else self.wide_candidate(X)
        if wide is not None:
            return [c.name for c in candidates].index(wide), scores
        allowed = np.flatnonzero([self.sources is None or CANDIDATES[c.name][0] in self.sources for c in candidates])
        allowed = allowed if allowed.size else np.arange(len(candidates))
        best = int(allowed[np.argmax(scores[allowed])])
        names = [c.name for c in candidates]
        if self.preferred in names and names.index(self.preferred) in allowed:
            kept = names.index(self.preferred)
            best = kept if scores[best] - scores[kept] <= self.margin else best
        return best, scores

    def cluster(self, step: SpectralStep, probabilities, X, eigen_seed, seed: int):
        """The chosen partition of one set, as :meth:`SpectralStep.cluster` returns one, plus its name.

        A kNN-partition arbiter (:data:`KNN_PARTITION_VARIANTS`) returns the set's kNN graph cut into the chosen
        candidate's ``k`` instead of a kernel candidate's partition, named ``'knn-at-<candidate>'``.  A set wider
        than :attr:`max_features` (:meth:`beyond_domain`) gets its candidate of :data:`WIDE_SET_CANDIDATES`, the
        only one computed.

        Parameters
        ----------
        step : SpectralStep
            The spectral settings (its ``n_clusters`` must match this arbiter's mode).
        probabilities : ndarray or sparse matrix of shape (n_samples, n_samples), or None
            The kernel's affinity of the set; ``None`` only where :meth:`kernel_free_candidate` names a candidate.
        X : ndarray or sparse matrix of shape (n_samples, n_features)
            The set's rows (for its kNN graph).
        eigen_seed : int or None
            Seeds the eigensolves of the ``k`` rules.
        seed : int
            Seeds the embeddings and the label assignments.

        Returns
        -------
        labels, affinity, n_clusters, eigenvalues
            As :meth:`SpectralStep.cluster` returns them, for the chosen partition.
        name : str or None
            The chosen candidate's name; ``None`` where there was nothing to choose (a set whose kNN graph
            links every row, or no more rows than the given ``k``: the step's own partition, singletons).

        Raises
        ------
        ValueError
            If ``step`` gives ``n_clusters`` and this arbiter is for ``k`` unknown, or the other way round.
        """
        self._check_mode(step)
        n = np.shape(X)[0]
        if links_every_row(X) or (self.given_k and step.n_clusters >= n):
            # Nothing to choose between (every pair linked: cuts are arbitrary), or singletons; else the checks hold.
            return (*step.cluster(probabilities, eigen_seed, seed), None)
        wide = self.wide_candidate(X)
        if wide is not None:  # beyond its training sets the forest is not asked: only what is kept is computed
            return self.cluster_wide(step, X, wide, eigen_seed, seed)
        candidates = candidate_partitions(step, probabilities, X, eigen_seed, seed, self.candidates, self.spectrum_size)
        best, scores = self.choose(candidates, np.shape(X)[1])  # within the domain (checked above)
        c = candidates[best]
        knn_partition = self.partition == "knn" and CANDIDATES[c.name][0] != "knn"
        if step.verbose:
            weighed = ", ".join(f"{o.name} k={o.n_clusters} ({score:.3f})"
                                for o, score in zip(candidates, scores, strict=True))
            kept = (f"the kNN graph cut at {c.name}'s k={c.n_clusters}" if knn_partition
                    else f"{c.name} (k={c.n_clusters})")
            if self.sources is not None:
                kept += f", the best of the {'/'.join(self.sources)} candidates"
            elif c.name == self.preferred and scores[best] < scores.max():
                kept += f", preferred within {self.margin:.3g} of the highest prediction"
            print(f"arbiter {self.name!r}: kept {kept}; weighed {weighed} (predicted ARI)")
        if knn_partition:
            # The kNN candidates' graph and its eigensolve where the arbiter has one (every shipped arbiter does).
            knn = next((other for other in candidates if CANDIDATES[other.name][0] == "knn"), None)
            if knn is None:
                graph = knn_graph(X)
                labels = replace(quiet_cuts(step), affinity_power=1.0).labels_for(graph, c.n_clusters, seed)
            else:
                graph, labels = knn.affinity, knn.cut(c.n_clusters, seed)
            return labels, graph, c.n_clusters, c.eigenvalues, f"knn-at-{c.name}"
        return c.labels, c.affinity, c.n_clusters, c.eigenvalues, c.name

    def cluster_wide(self, step: SpectralStep, X, name: str, eigen_seed, seed: int):
        """:meth:`cluster`'s partition of a set beyond :attr:`max_features`: its candidate ``name`` of
        :data:`WIDE_SET_CANDIDATES` (what :meth:`kernel_free_candidate` names) computed alone, from the rows.

        Parameters
        ----------
        step : SpectralStep
            The spectral settings (its ``n_clusters`` must match this arbiter's mode).
        X : ndarray or sparse matrix of shape (n_samples, n_features)
            The set's rows.
        name : str
            The candidate kept.
        eigen_seed : int or None
            Seeds the eigensolves of the ``k`` rule.
        seed : int
            Seeds the embedding and the label assignment.

        Returns
        -------
        labels, affinity, n_clusters, eigenvalues, name
            As :meth:`cluster` returns them.
        """
        self._check_mode(step)
        (c,) = candidate_partitions(step, None, X, eigen_seed, seed, (name,), self.spectrum_size)
        if step.verbose:
            print(f"arbiter {self.name!r}: kept {c.name} (k={c.n_clusters}), as for every set spanning more than "
                  f"the {self.max_features} dimensions of its forest's training sets")
        return c.labels, c.affinity, c.n_clusters, c.eigenvalues, c.name


def _components_at_k(candidates: list[Candidate]) -> int | None:
    """Index of the first kNN candidate whose graph has exactly its ``k > 1`` connected components, if any.

    No neighbour links those pieces, so no ``k``-partition merging two of them is right; the kernel's merged
    them on a far cluster of 20 rows (ARI 0.08, against 1 for SpectralClustering).  32 of the 220 validation
    sets of ``benchmarks/train_arbiter.py`` at a given ``k`` hold the rule; the forest chose the components.
    """
    for index, candidate in enumerate(candidates):
        k = candidate.n_clusters
        if (CANDIDATES[candidate.name][0] == "knn" and k > 1 and len(candidate.spectrum) > k
                and int(np.sum(np.asarray(candidate.spectrum) < ZERO_EIGENVALUE)) == k):
            return index
    return None


@cache
def load_arbiter(name: str, given_k: bool = False) -> Arbiter:
    """A shipped arbiter by name: its file for ``k`` unknown (:data:`ARBITERS`) or given (:data:`GIVEN_K_ARBITERS`).

    Parameters
    ----------
    name : str
        A key of :data:`ARBITERS` (or of :data:`GIVEN_K_ARBITERS`).
    given_k : bool, default=False
        Load the arbiter for a given ``k``.

    Returns
    -------
    arbiter : Arbiter
        Cached: every call with the same arguments returns the same object.

    Raises
    ------
    ValueError
        If no arbiter of that name is shipped for that mode, or its file fails validation.
    """
    registry = GIVEN_K_ARBITERS if given_k else ARBITERS
    if name not in registry:
        raise ValueError(f"unknown arbiter {name!r}{' for a given k' if given_k else ''}; "
                         f"shipped arbiters: {sorted(registry)}")
    arbiter = Arbiter.from_file(_PRETRAINED / registry[name], name)
    if name in KNN_PARTITION_VARIANTS.values():
        arbiter = replace(arbiter, partition="knn")
    if name in KNN_CANDIDATE_VARIANTS.values():
        arbiter = replace(arbiter, partition="knn", sources=("knn",))
    if arbiter.given_k != given_k:
        mode = "a given" if given_k else "an unknown"
        raise ValueError(f"the shipped arbiter file {registry[name]} is not for {mode} k")
    return arbiter


def arbiter_for(name: str, step: SpectralStep, own_kernel: bool = True) -> Arbiter:
    """The shipped arbiter ``name`` in ``step``'s mode: its file for a given ``k`` when ``step`` has ``n_clusters``.

    ``own_kernel``: whether it weighs the kernel its forest learned (the shipped generic one, as given or counting
    for a scikit-learn affinity).  Its ``max_features`` was measured with that kernel only: for any other (a
    fine-tuned one, which checks its settings on its own held-out sets, or your own) the forest chooses at every
    width (``max_features=None``).
    """
    arbiter = load_arbiter(name, given_k=step.n_clusters is not None)
    return arbiter if own_kernel else replace(arbiter, max_features=None)
