"""Clustering one set every way the arbiter compares: the candidate partitions and how they share eigensolves.

Each candidate is an affinity source (the kernel's affinity, the set's kNN graph, a Gaussian mixture) and a
rule for ``k`` (:data:`CANDIDATES`).  :func:`candidate_partitions` computes them all for one set, solving
each affinity's spectrum once for every rule that reads it; :mod:`~skabc.spectral.arbiter` chooses among
them.  Adding a candidate is one entry in :data:`CANDIDATES` (and a retrained arbiter).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .assign import embedding_columns, embedding_labels
from .eigen import _check_eigen_solver, _smallest_eigenpairs, laplacian_eigenvalues, unit_eigenvectors
from .knn import knn_graph
from .mixture import MixtureSource
from .select import (
    N_CLUSTERS_SELECTORS,
    ZERO_EIGENVALUE,
    _eigengap_k,
    consensus_n_clusters,
    estimate_n_clusters,
    rotation_cap,
    rotation_selection,
)
from .step import SpectralStep, compact, raise_to_power
from .wide import wide_eigengap_k

#: Candidate name -> (affinity source, k rule).  ``'kernel'``: the kernel's affinity at the model's
#: ``affinity_power``; ``'knn'``: the set's symmetric kNN connectivity graph (:func:`~skabc.spectral.knn.knn_graph`).
#: Rule ``'given'``: the step's ``n_clusters`` (candidates of an arbiter for a given ``k``).  A rule that names
#: another candidate cuts this affinity into that candidate's ``k``: the kernel often counts the clusters of a
#: set right where it cuts them wrong (four crossing rays), and the kNN graph cuts them along its links.
CANDIDATES = {
    "kernel-consensus": ("kernel", "consensus"),
    "kernel-eigengap": ("kernel", "eigengap"),
    "knn-rotation": ("knn", "rotation"),
    "knn-eigengap": ("knn", "eigengap"),
    "knn-at-kernel-consensus": ("knn", "kernel-consensus"),
    "gmm-bic": ("gmm", "bic"),
    "kernel-given": ("kernel", "given"),
    "knn-given": ("knn", "given"),
    "knn-wide-eigengap": ("knn", "wide-eigengap"),
}
#: Candidates no forest weighs: an arbiter keeps them, as they are, for sets beyond its domain
#: (:data:`~skabc.spectral.arbiter.WIDE_SET_CANDIDATES`).
KEPT_ONLY = ("knn-wide-eigengap",)
#: Laplacian eigenvalues per affinity that an arbiter's features read, unless its file names another
#: ``spectrum_size``: a set of more clusters than that reads as if it had ``SPECTRUM_SIZE - 1``.
SPECTRUM_SIZE = 21
#: Most eigenvalues a candidate keeps (ABCClustering's default ``max_clusters`` + 1) and a file may read.
MAX_SPECTRUM_SIZE = 51

@dataclass(frozen=True)
class Candidate:
    """One partition of a set: its labels, the affinity it came from, and that affinity's spectrum.

    Parameters
    ----------
    name : str
        Its name in :data:`CANDIDATES`.
    labels : ndarray of shape (n_samples,)
        The partition, compact ids.
    affinity : ndarray or sparse matrix of shape (n_samples, n_samples)
        What was clustered.
    n_clusters : int
        Number of clusters in ``labels``.
    eigenvalues : ndarray or None
        What its ``k`` rule compared (``None`` for rule ``'given'``).
    spectrum : ndarray
        The smallest Laplacian eigenvalues of ``affinity`` (at most :data:`MAX_SPECTRUM_SIZE`).
    cut : callable or None, default=None
        ``cut(k, seed)``: ``affinity`` cut into ``k`` clusters, sharing the eigensolve (and the cuts) of this set's
        candidates of the same affinity.
    """

    name: str
    labels: np.ndarray
    affinity: object
    n_clusters: int
    eigenvalues: np.ndarray | None
    spectrum: np.ndarray
    cut: object = field(default=None, repr=False, compare=False)


def default_candidates(given_k: bool) -> tuple[str, ...]:
    """Every candidate of :data:`CANDIDATES` for a given ``k`` (rule ``'given'``), or every other one
    (:data:`KEPT_ONLY` excepted).

    Parameters
    ----------
    given_k : bool
        Whether ``k`` is given.

    Returns
    -------
    names : tuple of str
        Candidate names, in :data:`CANDIDATES`' order.
    """
    return tuple(name for name, (_, rule) in CANDIDATES.items()
                 if (rule == "given") == given_k and name not in KEPT_ONLY)


def candidate_partitions(step: SpectralStep, probabilities, X, eigen_seed, seed: int,
                         names: tuple[str, ...] | None = None, spectrum_size: int = SPECTRUM_SIZE) -> list[Candidate]:
    """Cluster one set every way in ``names``, all seeded as ``step`` is.

    ``k`` is unknown (the step's ``n_clusters`` is ignored) unless every candidate's rule is ``'given'``:
    then every partition has the step's ``n_clusters``.  ``names`` defaults to
    :func:`default_candidates` for the step.

    The eigensolves are shared: the consensus estimate's spectrum of an affinity (at its power) also gives
    the plain eigengap ``k`` and, where an affinity has a consensus candidate, the spectrum the features
    read (else the longest any rule computed); a ``k`` found by two rules is embedded once.  Rule ``'given'``
    computes ``spectrum_size`` eigenvalues for the features (no rule of its own needs them).

    Parameters
    ----------
    step : SpectralStep
        The spectral settings: power of the kernel's affinity, solver, label assignment, ``n_clusters``.
    probabilities : ndarray or sparse matrix of shape (n_samples, n_samples), or None
        The kernel's affinity of the set; ``None`` where no candidate in ``names`` reads it.
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        The set's rows (for its kNN graph and mixture).
    eigen_seed : int or None
        Seeds the eigensolves of the ``k`` rules.
    seed : int
        Seeds the embeddings and the label assignments.
    names : tuple of str, default=None
        Candidates to compute, names in :data:`CANDIDATES`.
    spectrum_size : int, default=SPECTRUM_SIZE
        Eigenvalues per affinity kept for the features at least.

    Returns
    -------
    candidates : list of Candidate
        One per name, in order.
    """
    names = default_candidates(step.n_clusters is not None) if names is None else names
    if probabilities is None:
        # A candidate reads the kernel's affinity through its source or the source lending it its k.
        readers = [name for name in names if "kernel" in (CANDIDATES[name][0], CANDIDATES.get(CANDIDATES[name][1],
                                                                                              ("",))[0])]
        if readers:
            raise ValueError(f"candidates {readers} read the kernel's affinity, and probabilities is None")
    elif probabilities.shape[0] != X.shape[0]:
        raise ValueError(f"X holds {X.shape[0]} rows and probabilities {probabilities.shape[0]}: both describe one set")
    if any(CANDIDATES[name][1] != "given" for name in names):
        step = replace(step, n_clusters=None)
    verbose, step = step.verbose, quiet_cuts(step)
    sources, found_by = {}, []
    for name in names:
        source, rule = CANDIDATES[name]
        if source == "gmm" and source not in sources:
            if "knn" not in sources:
                sources["knn"] = _Source(step, "knn", probabilities, X, spectrum_size)
            sources[source] = MixtureSource(sources["knn"], X)
        elif source not in sources:
            sources[source] = _Source(step, source, probabilities, X, spectrum_size)
            if (source, "consensus") in (CANDIDATES[other] for other in names):
                sources[source].k_by(rule="consensus", eigen_seed=eigen_seed, seed=seed)
        found = sources[source]
        if rule in CANDIDATES:  # another candidate's k, this affinity's partition and spectrum
            lender, lender_rule = CANDIDATES[rule]
            if lender not in sources:
                sources[lender] = _Source(step, lender, probabilities, X, spectrum_size)
            k, _ = sources[lender].k_by(lender_rule, eigen_seed, seed)
            eigenvalues = found.read_spectrum(eigen_seed)
        else:
            k, eigenvalues = found.k_by(rule, eigen_seed, seed)
        if verbose:  # where the cuts log (quiet_cuts), the label assignments' logs that follow are this candidate's
            print(f"candidate {name} (k={k})" + ("" if not step.verbose else ": the partition above"
                                                 if k in getattr(found, "partitions", ()) else ":"))
        found_by.append((name, found, found.labels_at(k, seed), eigenvalues))
    # Built once every rule has run: each candidate reads its affinity's whole spectrum.
    return [Candidate(name, labels, found.affinity, len(np.unique(labels)), eigenvalues,
                      found.spectrum[:MAX_SPECTRUM_SIZE], found.labels_at)
            for name, found, labels, eigenvalues in found_by]


def quiet_cuts(step: SpectralStep) -> SpectralStep:
    """``step`` for cutting the candidates: with ``k`` estimated, their label assignments log (k-means's, as
    SpectralClustering's do) from ``verbose=2`` only; at 1, four or five cuts' logs a set (about 190 lines for 300
    points) buried the one line that says which partition was kept.  With ``k`` given, ``verbose=1`` prints them
    as SpectralClustering does."""
    return step if step.verbose >= 2 or step.n_clusters is not None else replace(step, verbose=0)


class _Source:
    """One affinity of a set and what its rules found: each rule's ``k`` and eigenvalues, the partitions."""

    def __init__(self, step: SpectralStep, source: str, probabilities, X, spectrum_size: int = SPECTRUM_SIZE) -> None:
        self.spectrum_size = spectrum_size
        if source == "kernel":
            self.step, affinity = step, probabilities
        else:
            self.step, affinity = replace(step, affinity_power=1.0), knn_graph(X)
        affinity = raise_to_power(affinity, self.step.affinity_power)
        self.affinity, self.found, self.partitions, self.spectrum = affinity, {}, {}, None
        self._pairs = None  # a sparse affinity's eigenpairs, solved once for every rule and cut (_shared_pairs)

    def _shared_pairs(self, eigen_seed) -> tuple[np.ndarray, np.ndarray] | None:
        """A sparse affinity's ``max_clusters + 1`` smallest eigenpairs (values, embedding), solved once; else ``None``.

        Every rule that reads the spectrum (eigengap, rotation, the features' spectrum) and the cuts of the affinity
        (but those :meth:`labels_at` names) read this one solve, seeded by ``eigen_seed`` (the label assignments
        by ``seed``), instead of solving again for each: on the kNN graph four solves were one.  Dense affinities
        (the kernel's) keep their own solvers (:func:`consensus_n_clusters` at several powers; scikit-learn's
        embedding).
        """
        n = self.affinity.shape[0]
        if not sp.issparse(self.affinity) or n < 3:
            return None
        if self._pairs is None:
            step = self.step
            m = min(n, max(min(step.max_clusters, n - 1) + 1, self.spectrum_size, step.n_components or 0))
            self._pairs = _smallest_eigenpairs(self.affinity, m, _check_eigen_solver(step.eigen_solver),
                                               check_random_state(eigen_seed), step.eigen_tol, vectors=True)
        return self._pairs

    def k_by(self, rule: str, eigen_seed, seed: int) -> tuple[int, np.ndarray | None]:
        """``k`` and the eigenvalues compared by ``rule`` (``'given'``: the step's ``n_clusters``, ``None``)."""
        if rule not in self.found:
            step, spectrum = self.step, None
            if rule == "given":
                if step.n_clusters is None:
                    raise ValueError("candidates of rule 'given' need a given n_clusters")
                spectrum = self._solve_spectrum(eigen_seed)
                # eigenvalues_ stays None with k given, as without an arbiter; the features read the spectrum.
                self.found["given"] = (int(step.n_clusters), None)
            elif rule == "consensus":
                k, values = consensus_n_clusters(self.affinity, step.max_clusters, random_state=eigen_seed,
                                                 eigen_solver=step.eigen_solver, eigen_tol=step.eigen_tol)
                self.found["consensus"] = (k, values)
                gap_k = _eigengap_k(values, self.affinity.shape[0], step.max_clusters) if len(values) > 1 else 1
                self.found.setdefault("eigengap", (gap_k, values))
            elif rule in ("eigengap", "rotation") and (pairs := self._shared_pairs(eigen_seed)) is not None:
                n, (values, embedding) = self.affinity.shape[0], pairs
                if rule == "eigengap":
                    values = values[: min(step.max_clusters, n - 1) + 1]
                    self.found["eigengap"] = (_eigengap_k(values, n, step.max_clusters), values)
                elif rotation_cap(step, n) < 2:
                    self.found["rotation"] = (1, None)
                else:
                    selection = rotation_selection(step, self.affinity, values,
                                                   unit_eigenvectors(self.affinity, embedding), eigen_seed)
                    self.found["rotation"] = (selection.n_clusters, selection.eigenvalues)
            elif rule == "wide-eigengap":
                _, values = self.k_by("eigengap", eigen_seed, seed)
                pairs = self._shared_pairs(eigen_seed)  # spectrum_size values at least (51 shipped): gaps to compare
                longer = None if pairs is None else pairs[0]
                self.found[rule] = (wide_eigengap_k(values, self.affinity.shape[0], step.max_clusters, longer), values)
            elif rule == "eigengap":
                # Eigenvalues only: the partition comes from labels_at, as for every rule.
                self.found["eigengap"] = estimate_n_clusters(self.affinity, step.max_clusters, random_state=eigen_seed,
                                                             eigen_solver=step.eigen_solver, eigen_tol=step.eigen_tol)
            else:
                selection = N_CLUSTERS_SELECTORS[rule](replace(step, n_clusters=None, selection=rule),
                                                       self.affinity, self.affinity, eigen_seed, seed)
                self.found[rule] = (selection.n_clusters, selection.eigenvalues)
            values = spectrum if spectrum is not None else self.found[rule][1]
            # The longest spectrum of this affinity: the rotation rule solves for 21 eigenvalues, the eigengap
            # for max_clusters + 1, and a set of many clusters shows only in the longer one.
            if values is not None and (self.spectrum is None or len(values) > len(self.spectrum)):
                self.spectrum = values
            elif self.spectrum is None:
                self.spectrum = np.zeros(0)
        return self.found[rule]

    def read_spectrum(self, eigen_seed) -> np.ndarray:
        """This affinity's spectrum: the longest a rule computed, else ``spectrum_size`` eigenvalues."""
        if self.spectrum is None or not len(self.spectrum):
            self.spectrum = self._solve_spectrum(eigen_seed)
        return self.spectrum

    def _solve_spectrum(self, eigen_seed) -> np.ndarray:
        if (pairs := self._shared_pairs(eigen_seed)) is not None:
            return pairs[0][: self.spectrum_size]
        return laplacian_eigenvalues(self.affinity, min(self.spectrum_size, self.affinity.shape[0]),
                                     random_state=eigen_seed, eigen_solver=self.step.eigen_solver,
                                     eigen_tol=self.step.eigen_tol)

    def labels_at(self, k: int, seed: int) -> np.ndarray:
        """This affinity cut into ``k`` clusters (compact ids), each ``k`` once: from the shared solve where it has
        the columns the cut reads (its rules ran first, so it exists where they solved it).

        A cut that reads no more columns than the affinity has connected components (a one-column cut among them)
        solves on its own, without an iterative solve: it gets the exact indicator vectors of the largest
        components, which the shared solve has to rounding only (its zero eigenvalues differ by rounding alone,
        which would choose among the components, and k-means would split a blurred constant column)."""
        if k not in self.partitions:
            pairs, step = self._pairs, self.step
            reads = min(embedding_columns(k, step.n_components, step.assign_labels), self.affinity.shape[0])
            if pairs is not None and np.count_nonzero(pairs[0] < ZERO_EIGENVALUE) < reads <= pairs[1].shape[1]:
                self.partitions[k] = compact(embedding_labels(pairs[1], k, random_state=seed, n_components=(
                    step.n_components), n_init=step.n_init, assign_labels=step.assign_labels, verbose=step.verbose))
            else:
                self.partitions[k] = step.labels_for(self.affinity, k, seed)
        return self.partitions[k]
