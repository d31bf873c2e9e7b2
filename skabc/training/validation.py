"""Validation on held-out classes or groups: the split, the validation sets, and their score.

What a user of a learned kernel cares about is how it clusters sets it has
not seen, often of classes it has not seen.  :func:`validation_split` holds
out whole groups when there are several (each group is an independent
problem), else whole classes plus a share of the rows of the others, so the
validation sets mix unseen classes with seen ones.  :func:`draw_validation_sets`
fixes the sets once (whole held-out groups where there are enough), and :func:`score_sets` clusters
them the way :class:`~skabc.ABCClustering` would (``k`` unknown) and returns
the mean adjusted Rand index.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score

from .._threads import single_native_thread
from ..sampling import ClusterSetSampler
from ..spectral import SpectralStep, consensus_n_clusters, estimate_n_clusters, spectral_labels
from ..spectral.arbiter import KNN_CANDIDATE_VARIANTS, KNN_PARTITION_VARIANTS, arbiter_for
from .divergence import check_finite_affinity

#: Fewest held-out labelled rows worth a validation split.
MIN_VALIDATION_ROWS = 20
#: Fewest classes a split into held-out classes leaves for training (with fewer, only rows are held out).
MIN_TRAINING_CLASSES = 3
#: Largest whole held-out group a validation set holds (a larger one is subsampled): scoring is quadratic in it.
MAX_WHOLE_GROUP_ROWS = 400


def holds_out_groups(labels: np.ndarray, group_codes) -> bool:
    """Whether :func:`validation_split` holds out whole groups: two or more groups hold labelled rows."""
    return group_codes is not None and len(np.unique(group_codes[labels >= 0])) >= 2


def holdable_groups(labels: np.ndarray, group_codes: np.ndarray) -> np.ndarray:
    """The groups :func:`validation_split` may hold out: those of two or more labelled rows."""
    groups, counts = np.unique(group_codes[labels >= 0], return_counts=True)
    return groups[counts >= 2]


def validation_split(labels: np.ndarray, group_codes: np.ndarray | None, fraction: float,
                     rng: np.random.Generator) -> np.ndarray | None:
    """Rows held out for validation, or ``None`` when the data cannot spare a useful split.

    Parameters
    ----------
    labels : ndarray of int
        Class codes, ``-1`` for unlabelled rows (never held out, never drawn).
    group_codes : ndarray of int or None
        Group of every row.
    fraction : float
        Share of the groups (or classes, and of the rows of the other
        classes) held out, in ``(0, 1)``.
    rng : numpy.random.Generator

    Returns
    -------
    held_out : ndarray of bool or None
        True for validation rows.  With two or more groups holding labelled
        rows: every row of ``round(fraction * n_groups)`` groups (at least
        one, never all) of those holding two or more (``None`` with fewer
        than two such groups).  Otherwise, with more than :data:`MIN_TRAINING_CLASSES` classes: every row of
        ``round(fraction * n_classes)`` classes (at least one, leaving at
        least :data:`MIN_TRAINING_CLASSES`) and ``fraction`` of the rows of every other class;
        with fewer classes, ``fraction`` of the rows of each; such a class gives at least one row, and
        never so many that it keeps fewer than two to train on.  ``None`` when fewer than
        :data:`MIN_VALIDATION_ROWS` rows would be held out, training would keep fewer than two labelled
        rows, or (without groups) the held-out rows would hold fewer than two classes.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    labelled = labels >= 0
    held_out = np.zeros(len(labels), dtype=bool)
    if holds_out_groups(labels, group_codes):
        # Only groups of two or more labelled rows: one row is no set to score, and holding out the one group
        # that could train left training with none ("no group holds at least 2 labelled rows").
        groups = holdable_groups(labels, group_codes)
        if len(groups) < 2:
            return None
        n_out = int(np.clip(round(fraction * len(groups)), 1, len(groups) - 1))
        held_out = labelled & np.isin(group_codes, rng.choice(groups, n_out, replace=False))
    else:
        classes = np.unique(labels[labelled])
        # Fine-tuning on two classes lost 0.07-0.31 ARI on new digits where all three trained lost 0.02-0.03.
        n_out = (int(np.clip(round(fraction * len(classes)), 1, len(classes) - MIN_TRAINING_CLASSES))
                 if len(classes) > MIN_TRAINING_CLASSES else 0)
        unseen = rng.choice(classes, n_out, replace=False) if n_out else np.array([], dtype=labels.dtype)
        held_out |= np.isin(labels, unseen) & labelled
        for c in np.setdiff1d(classes, unseen):
            rows = np.flatnonzero(labels == c)
            # At least one row of a class that can spare it, and never so many that it keeps fewer than two to
            # train on: sets of the held-out rows must mix classes (a small fraction rounded every share to none,
            # and sets of one class scored a kernel putting everything in one cluster perfect), and a class of
            # one training row teaches no pair.
            share = min(max(round(fraction * len(rows)), 1), max(len(rows) - 2, 0))
            held_out[rng.choice(rows, share, replace=False)] = True
        if len(np.unique(labels[held_out])) < 2:
            return None
    if held_out.sum() < MIN_VALIDATION_ROWS or (labelled & ~held_out).sum() < 2:
        return None
    return held_out


def draw_validation_sets(X: np.ndarray, labels: np.ndarray, group_codes, held_out: np.ndarray, n_sets: int,
                         set_size: tuple[int, int], seed: int, set_transform=None) -> list:
    """``n_sets`` fixed sets of the held-out rows, inputs already transformed.

    Where at least ``n_sets`` whole groups are held out, each set is one of
    them, chosen at random (at most :data:`MAX_WHOLE_GROUP_ROWS` of its rows):
    a group is a problem of the kind the user will cluster, and early
    stopping and the choice of clustering settings should see it whole.
    Otherwise the sets are drawn from the held-out rows (Algorithm 1, sizes
    from ``set_size``).

    Returns
    -------
    sets : list of (ndarray of float32, ndarray of int, ndarray)
        Network input, true labels and the rows as given (what an arbiter's
        kNN graph reads) of every set.
    """
    rows_labels = np.where(held_out, labels, -1)
    rng = np.random.default_rng([seed, 2])
    if holds_out_groups(labels, group_codes):
        groups = np.unique(group_codes[rows_labels >= 0])
        if len(groups) >= n_sets:
            chosen = [np.flatnonzero((group_codes == g) & (rows_labels >= 0))
                      for g in rng.choice(groups, n_sets, replace=False)]
            drawn = [(np.sort(rng.choice(rows, MAX_WHOLE_GROUP_ROWS, replace=False))
                      if len(rows) > MAX_WHOLE_GROUP_ROWS else rows) for rows in chosen]
            return [_validation_set(X, rows, np.unique(labels[rows], return_inverse=True)[1], set_transform)
                    for rows in drawn]
    sampler = ClusterSetSampler(rows_labels, group_codes, set_size)
    return [_validation_set(X, *sampler.draw(rng), set_transform) for _ in range(n_sets)]


def _validation_set(X: np.ndarray, rows: np.ndarray, set_labels: np.ndarray, set_transform) -> tuple:
    points = X[rows] if set_transform is None else set_transform(X[rows])
    return np.asarray(points, dtype=np.float32), set_labels, X[rows]


def set_affinity(module: torch.nn.Module, X: np.ndarray) -> np.ndarray:
    """Same-cluster probabilities of one (small, already transformed) set, float64, exactly symmetric."""
    device = next(module.parameters()).device
    was_training = module.training
    module.eval()
    try:
        with torch.inference_mode():
            logits = module(torch.as_tensor(X, device=device)[None])[0]
    finally:
        module.train(was_training)
    affinity = check_finite_affinity(torch.sigmoid(logits.double()).cpu().numpy())  # diverged: one clear error
    return 0.5 * (affinity + affinity.T)


def cluster_affinity(affinity: np.ndarray, settings: dict, rows=None, max_clusters: int = 50,
                     random_state: int = 0, n_clusters: int | None = None) -> np.ndarray:
    """Labels of one set from its affinity with ABCClustering's resolved ``settings``, ``k`` estimated unless given.

    With an ``'arbiter'`` in ``settings`` and the set's ``rows`` as given, the arbiter's choice among its
    candidate partitions (as ``ABCClustering`` clusters then; its file for a given ``k`` with ``n_clusters``).
    Validation sets hold at most a few hundred rows: their eigenproblems run on one native thread.
    """
    with single_native_thread():
        return _cluster_affinity(affinity, settings, rows, max_clusters, random_state, n_clusters)


def _cluster_affinity(affinity, settings, rows, max_clusters, random_state, n_clusters) -> np.ndarray:
    power = float(settings.get("affinity_power", 1.0))
    selection = settings.get("n_clusters_selection", "eigengap")
    if (settings.get("arbiter") and rows is not None) or selection not in ("consensus", "eigengap"):
        # The spectral step as ABCClustering runs it (any registered k rule; the arbiter's candidates with one).
        step = SpectralStep(n_clusters=n_clusters, max_clusters=max_clusters, affinity_power=power,
                            selection=selection, assign_labels=settings.get("assign_labels", "kmeans"))
        if settings.get("arbiter") and rows is not None:
            # A network being trained is not the kernel the arbiter's forest learned: no width limit (arbiter_for).
            return arbiter_for(settings["arbiter"], step, own_kernel=False).cluster(step, affinity, rows, random_state,
                                                                                    random_state)[0]
        return step.cluster(affinity, random_state, random_state)[0]
    powered = affinity if power == 1.0 else affinity**power
    k = n_clusters
    if k is None:
        estimate = consensus_n_clusters if selection == "consensus" else estimate_n_clusters
        k, _ = estimate(powered, max_clusters, random_state=random_state)
    return spectral_labels(powered, k, random_state=random_state,
                           assign_labels=settings.get("assign_labels", "kmeans"))


#: Clustering settings a fit with validation sets compares with its starting ones once training ends:
#: the power sharpens or softens the affinity; the rule reads ``k`` off one spectrum or the median of four.
SETTING_CANDIDATES = tuple({"affinity_power": power, "n_clusters_selection": rule}
                           for power in (1.0, 2.0, 4.0, 8.0) for rule in ("consensus", "eigengap"))


def settings_label(settings: dict) -> str:
    """``'A**4 consensus njw'``-style name of clustering settings (``'... arbiter generic'`` with one)."""
    label = (f"A**{float(settings.get('affinity_power', 1.0)):g} {settings.get('n_clusters_selection', 'eigengap')} "
             f"{settings.get('assign_labels', 'kmeans')}")
    return label + (f" arbiter {settings['arbiter']}" if settings.get("arbiter") else "")


def choose_settings(module: torch.nn.Module, sets: list, settings: dict) -> tuple[dict, dict]:
    """The clustering settings of :data:`SETTING_CANDIDATES` that cluster the validation ``sets`` best.

    ``settings`` (the kernel's own) stay unless a candidate beats them on
    these sets by more than one standard error of the paired differences:
    with a few dozen sets, smaller gains are noise.  An arbiter in
    ``settings`` is then tried on the winner once: it stays unless the
    winner alone beats it by more than one standard error, with ``k``
    estimated and, as its file for a given ``k`` decides too, with each
    set's true ``k`` (labels ``'..., k given'``).

    Returns
    -------
    chosen : dict
        ``settings`` updated with the winning candidate's values
        (``'arbiter'``: ``None`` when the arbiter lost).
    scores : dict
        :func:`settings_label` -> mean adjusted Rand index, every candidate.
    """
    affinities = [set_affinity(module, X) for X, *_ in sets]

    def ari(candidate: dict, k_given: bool = False) -> np.ndarray:
        return np.array([adjusted_rand_score(labels, cluster_affinity(
            affinity, candidate, rows=_rows(item), n_clusters=len(np.unique(labels)) if k_given else None))
            for affinity, (_, labels, *item) in zip(affinities, sets, strict=True)])

    arbiter = settings.get("arbiter")
    own = {name: value for name, value in settings.items() if name != "arbiter"}
    base = ari(own)
    scores = {settings_label(own): float(base.mean())}
    chosen, best, best_gain = own, base, 0.0
    for values in SETTING_CANDIDATES:
        candidate = {**own, **values}
        label = settings_label(candidate)
        if label in scores:
            continue
        result = ari(candidate)
        difference = result - base
        scores[label] = float(result.mean())
        if difference.mean() > max(best_gain, _standard_error(difference)):
            chosen, best, best_gain = candidate, result, float(difference.mean())
    if arbiter:
        with_arbiter = {**chosen, "arbiter": arbiter}
        arbitrated = ari(with_arbiter)
        scores[settings_label(with_arbiter)] = float(arbitrated.mean())
        loss = best - arbitrated
        chosen = {**chosen, "arbiter": None} if loss.mean() > _standard_error(loss) else with_arbiter
    if chosen.get("arbiter"):
        # The same name also chooses partitions at a given k: that must not lose either (each set's true k).
        alone, arbitrated = ari({**chosen, "arbiter": None}, k_given=True), ari(chosen, k_given=True)
        scores[settings_label({**chosen, "arbiter": None}) + ", k given"] = float(alone.mean())
        scores[settings_label(chosen) + ", k given"] = float(arbitrated.mean())
        loss = alone - arbitrated
        if loss.mean() > _standard_error(loss):
            chosen = {**chosen, "arbiter": None}
    return chosen, scores


def choose_partition(module: torch.nn.Module, sets: list, settings: dict) -> tuple[dict, dict]:
    """``settings`` with their arbiter's kNN-partition variant, unless the validation ``sets`` reject it.

    Where a kernel fine-tuned on a few classes clusters sets of new ones, the kNN graph of the rows cut at the
    arbiter's ``k`` beat the arbiter's own partition on all eight digit class splits of
    ``benchmarks/digit_splits.py`` (by 0.004 to 0.057 ARI).  Held-out sets mix seen rows, which the kernel
    memorised, with an unseen class, so they credit the kernel's partition: the variant stays unless the
    arbiter's own partition beats it by more than one standard error, with ``k`` estimated or given (each
    set's true ``k``).  Then the arbiter's kNN-candidates variant
    (:data:`~skabc.spectral.arbiter.KNN_CANDIDATE_VARIANTS`: the kNN graph's own ``k`` rules, where the kernel's
    over-count) replaces that choice only if it beats it by more than one standard error with ``k`` estimated and
    does not lose by more with ``k`` given.

    Parameters
    ----------
    module : torch.nn.Module
        The trained network.
    sets : list of tuple
        The validation sets, each ``(X, labels, ...)`` as :func:`draw_validation_sets` draws them.
    settings : dict
        The clustering settings chosen so far (their ``'arbiter'`` decides whether a variant exists).

    Returns
    -------
    chosen : dict
        ``settings``, with ``'arbiter'`` its kNN-partition or kNN-candidates variant where kept.
    scores : dict
        :func:`settings_label` -> mean adjusted Rand index of the three, ``k`` estimated and given.
    """
    arbiter = settings.get("arbiter")
    if arbiter not in KNN_PARTITION_VARIANTS or not sets:
        return dict(settings), {}
    variant = {**settings, "arbiter": KNN_PARTITION_VARIANTS[arbiter]}
    affinities = [set_affinity(module, X) for X, *_ in sets]
    scores, results = {}, {}

    def ari(candidate: dict, k_given: bool) -> np.ndarray:
        label = settings_label(candidate) + (", k given" if k_given else "")
        if label not in results:
            results[label] = np.array([adjusted_rand_score(labels, cluster_affinity(
                affinity, candidate, rows=_rows(item), n_clusters=len(np.unique(labels)) if k_given else None))
                for affinity, (_, labels, *item) in zip(affinities, sets, strict=True)])
            scores[label] = float(results[label].mean())
        return results[label]

    chosen = variant
    for k_given in (False, True):
        loss = ari(settings, k_given) - ari(variant, k_given)
        if loss.mean() > _standard_error(loss):
            chosen = dict(settings)
    # The kNN graph's own candidates: kept only where they win with k estimated and do not lose (beyond noise) with
    # k given.
    only = {**settings, "arbiter": KNN_CANDIDATE_VARIANTS[arbiter]}
    gain, loss = ari(only, False) - ari(chosen, False), ari(chosen, True) - ari(only, True)
    if gain.mean() > _standard_error(gain) and not loss.mean() > _standard_error(loss):
        chosen = only
    return chosen, scores


def _standard_error(difference: np.ndarray) -> float:
    return float(difference.std(ddof=1) / np.sqrt(len(difference))) if len(difference) > 1 else np.inf


def score_sets(module: torch.nn.Module, sets: list, settings: dict) -> float:
    """Mean adjusted Rand index of the clustered validation ``sets`` (``k`` unknown)."""
    scores = [adjusted_rand_score(labels, cluster_affinity(set_affinity(module, X), settings, rows=_rows(item)))
              for X, labels, *item in sets]
    return float(np.mean(scores))


def _rows(rest: list):
    """The rows as given of a validation set, when it holds them (``draw_validation_sets``' third entry)."""
    return rest[0] if rest else None
