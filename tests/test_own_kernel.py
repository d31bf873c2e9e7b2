"""Learning your own kernel: the schedule, the validation split, early stopping, max_time, init."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs
from skorch.history import History

import skabc.training.early_stopping as early_stopping
import skabc.training.net as net_module
import skabc.training.plan as plan
import skabc.training.validation as validation
from skabc import ContextualKernel, pretrained
from skabc.training.early_stopping import TimeLimit, ValidationSetsScoring
from skabc.training.schedule import (
    AUTO_MAX_TIME,
    MAX_STEPS,
    MIN_STEPS,
    Schedule,
    auto_batch_size,
    relative_step_cost,
    training_schedule,
)
from skabc.training.validation import validation_split

FAST = dict(set_size=(2, 20), batch_size=4, device="cpu", random_state=0)
TINY_NET = dict(d_model=8, n_heads=2, n_blocks=1)


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(n_samples=240, centers=6, n_features=3, random_state=0)
    return X.astype(np.float32), y


# ------------------------------------------------------------------ schedule
def test_schedule_grows_with_rows_and_classes_within_its_bounds():
    steps = [training_schedule(n, 10, 32).n_steps for n in (10, 1_000, 10_000, 10**7)]
    assert steps == sorted(steps) and steps[0] >= MIN_STEPS and steps[-1] <= MAX_STEPS + 16
    assert steps[1] < steps[2]  # the bounds do not hide the growth in between
    assert training_schedule(5_000, 2, 32).n_steps < training_schedule(5_000, 5, 32).n_steps
    assert training_schedule(5_000, 4, 32).n_steps < training_schedule(5_000, 5, 32).n_steps  # "fewer than five"


def test_schedule_caps_networks_with_local_geometry_lower(blobs, monkeypatch):
    """A geometry step costs more: its cap keeps the longest fit in the same CPU budget."""
    from skabc.training.schedule import GEOMETRY_MAX_STEPS

    assert GEOMETRY_MAX_STEPS < MAX_STEPS
    assert training_schedule(10**7, 10, 32, GEOMETRY_MAX_STEPS).n_steps <= GEOMETRY_MAX_STEPS + 16
    assert training_schedule(1_000, 10, 32, GEOMETRY_MAX_STEPS) == training_schedule(1_000, 10, 32)
    calls = _plan_only(monkeypatch)
    X, y = blobs
    ContextualKernel(**FAST).fit(X, y)  # fine-tunes the generic kernel, which has local geometry
    ContextualKernel(**FAST, init="scratch").fit(X, y)
    assert [cap for _, _, _, cap, _ in calls] == [GEOMETRY_MAX_STEPS, MAX_STEPS]



@pytest.mark.parametrize(("call", "message"), [
    (lambda: training_schedule(300_000, 5, 32, set_size=(400, 100)), r"2 <= min <= max"),  # 6,576 steps > cap
    (lambda: relative_step_cost(32, (1, 100)), r"2 <= min <= max"),  # a set the kernel refuses, costed
    (lambda: training_schedule(1_000, 5, 2.5), "batch_size must be an integer >= 1, got 2.5"),  # 760.0 sets
    (lambda: relative_step_cost(0, (50, 200)), "batch_size must be an integer >= 1, got 0"),
    (lambda: auto_batch_size(-5, 5), "n_labelled must be an integer >= 1, got -5"),  # "math domain error"
], ids=["reversed-set-size", "one-point-sets", "float-batch", "zero-batch", "negative-rows"])
def test_schedule_helpers_refuse_what_they_cannot_size(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_schedule_helpers_take_a_set_size_array_as_the_kernel_does():
    # Review 55f: the new check took tuples and lists only; ContextualKernel(set_size=...) takes a 1-D array too.
    assert relative_step_cost(32, np.array([50, 200])) == relative_step_cost(32, (50, 200))
    assert training_schedule(1_000, 5, 32, set_size=np.array([50, 200])) == training_schedule(1_000, 5, 32)
    # One owner of what a set_size is (skabc.sampling.check_set_size): an int is every set that size, as for the kernel.
    assert relative_step_cost(32, 100) == relative_step_cost(32, (100, 100))

def test_schedule_cap_shrinks_with_the_cost_of_a_step(blobs, monkeypatch):
    """Larger sets or batches cost more per step: the cap is a CPU budget, not a step count."""
    from skabc.training.schedule import REFERENCE_BATCH_SIZE, REFERENCE_SET_SIZE, relative_step_cost

    assert relative_step_cost(REFERENCE_BATCH_SIZE, REFERENCE_SET_SIZE) == pytest.approx(1.0)
    # A step has a fixed overhead: twice the sets cost less than twice as much.
    assert 1.5 < relative_step_cost(64, REFERENCE_SET_SIZE) < 2.0
    assert relative_step_cost(32, (100, 300)) > 2.0 > relative_step_cost(32, (50, 150))
    huge = 10**8
    reference = training_schedule(huge, 10, 32, 1600).n_steps
    assert reference == 1600
    assert training_schedule(huge, 10, 64, 1600).n_steps <= 1600 / 1.5 + 16
    assert training_schedule(huge, 10, 32, 1600, (100, 300)).n_steps <= 1600 / 2.2 + 16
    # Cheaper steps buy more of them, but fewer sets in all (each step pays its overhead).
    small = training_schedule(huge, 10, 16, 1600)
    assert reference < small.n_steps < 2 * reference
    assert small.n_steps * 16 < reference * 32
    # No cost takes a run below the floor.
    assert training_schedule(huge, 10, 32, 1600, (2000, 4000)).n_steps >= MIN_STEPS
    # The kernel hands the schedule its own set_size.
    calls = _plan_only(monkeypatch)
    X, y = blobs
    ContextualKernel(**{**FAST, "set_size": (5, 25)}).fit(X, y)
    assert [size for *_, size in calls] == [(5, 25)]


def test_schedule_below_the_cap_sees_as_many_sets_whatever_the_batch():
    """Below the cap the labelled rows decide how many sets a fit sees; the batch only cuts them into steps."""
    for n_labelled in (1_000, 20_000):
        reference = training_schedule(n_labelled, 10, 32)
        for batch_size in (8, 16, 64):
            schedule = training_schedule(n_labelled, 10, batch_size)
            assert schedule.n_steps * batch_size == pytest.approx(reference.n_steps * 32, rel=0.05)
    assert training_schedule(10, 10, 8).n_steps * 8 >= MIN_STEPS * 32  # the floor too, in sets


def _plan_only(monkeypatch) -> list:
    """Make ``ContextualKernel.fit`` plan its training without training; return the schedule calls' arguments."""
    calls = []
    real = plan.training_schedule
    monkeypatch.setattr(plan, "training_schedule", lambda *args: calls.append(args) or real(*args))
    monkeypatch.setattr(ContextualKernel, "fit", lambda self, X, y, groups=None: plan.plan_training(
        self, X, np.asarray(y), None) and self)
    return calls


def test_schedule_is_whole_batches_of_epochs():
    schedule = training_schedule(3_000, 7, batch_size=8)
    assert schedule.sets_per_epoch % 8 == 0
    assert schedule.n_steps == schedule.max_epochs * schedule.sets_per_epoch // 8


def test_schedule_refuses_empty_data():
    with pytest.raises(ValueError, match="n_labelled must be an integer >= 1, got 0"):
        training_schedule(0, 3, 32)


# ------------------------------------------------------------------ split
def test_split_holds_out_whole_groups():
    labels = np.tile(np.arange(4), 50)
    groups = np.repeat(np.arange(10), 20)
    held = validation_split(labels, groups, 0.2, np.random.default_rng(0))
    per_group = [set(held[groups == g]) for g in range(10)]
    assert all(len(s) == 1 for s in per_group)  # a group is held out entirely or not at all
    assert sum(s == {True} for s in per_group) == 2


def _held_out_groups(sizes, n_classes=3):
    """Rows of groups of the given sizes (column 0: the row index), their labels, groups, all held out."""
    groups = np.repeat(np.arange(len(sizes)), sizes)
    labels = np.concatenate([np.arange(n) % n_classes for n in sizes])
    X = np.column_stack([np.arange(len(labels)), np.zeros(len(labels))]).astype(np.float32)
    return X, labels, groups, np.ones(len(labels), dtype=bool)


def test_validation_sets_are_whole_held_out_groups_when_there_are_enough():
    X, labels, groups, held = _held_out_groups([30 + g for g in range(30)] + [1_000])
    sets = validation.draw_validation_sets(X, labels, groups, held, 24, (10, 20), seed=0)
    seen, large = set(), []
    for _, set_labels, raw in sets:
        rows = raw[:, 0].astype(int)
        (group,) = np.unique(groups[rows])
        assert group not in seen
        seen.add(group)
        np.testing.assert_array_equal(np.unique(labels[rows], return_inverse=True)[1], set_labels)
        if group == 30:
            large = rows
        else:
            np.testing.assert_array_equal(np.sort(rows), np.flatnonzero(groups == group))  # whole, not 10-20 rows
    assert len(sets) == 24
    assert len(large) in (0, validation.MAX_WHOLE_GROUP_ROWS)  # the group of 1,000, if chosen, subsampled
    sets = validation.draw_validation_sets(X, labels, groups, groups == 30, 1, (10, 20), seed=0)
    assert len(sets[0][1]) == validation.MAX_WHOLE_GROUP_ROWS


def test_validation_sets_are_drawn_from_few_held_out_groups():
    X, labels, groups, held = _held_out_groups([60] * 5)
    sets = validation.draw_validation_sets(X, labels, groups, held, 24, (10, 20), seed=0)
    assert len(sets) == 24 and all(10 <= len(set_labels) <= 20 for _, set_labels, _ in sets)


def test_split_holds_out_whole_classes_and_some_rows_of_the_others():
    labels = np.repeat(np.arange(5), 40)
    held = validation_split(labels, None, 0.2, np.random.default_rng(0))
    fully = [c for c in range(5) if held[labels == c].all()]
    assert len(fully) == 1
    others = [held[labels == c].mean() for c in range(5) if c not in fully]
    assert np.allclose(others, 0.2)


def test_split_leaves_three_classes_to_train_on():
    for n_classes, n_whole in ((3, 0), (4, 1)):
        labels = np.repeat(np.arange(n_classes), 40)
        held = validation_split(labels, None, 0.2, np.random.default_rng(0))
        assert sum(held[labels == c].all() for c in range(n_classes)) == n_whole
        assert held.sum() >= 0.2 * len(labels) - 1  # rows of every remaining class are held out


@pytest.mark.parametrize(("sizes", "fraction", "any_split"), [([60, 2, 2, 2, 2], 0.2, False), ([40] * 6, 0.01, True),
                                                             ([60, 5, 5, 5, 5], 0.05, True)])
def test_held_out_rows_of_classes_never_hold_one_class_alone(sizes, fraction, any_split):
    """Probe 67a: a small fraction or classes of two rows rounded every other class's share to none, so the held-out
    rows were one whole class; every validation set was then one cluster, and a kernel that put everything together
    scored 1.0 (early stopping kept the first epoch, and new sets of six blobs came back as one cluster)."""
    labels = np.repeat(np.arange(len(sizes)), sizes)
    splits = [validation_split(labels, None, fraction, np.random.default_rng(seed)) for seed in range(20)]
    assert any(held is not None for held in splits) == any_split  # classes of two rows give none to validation
    for held in splits:
        assert held is None or len(np.unique(labels[held])) >= 2


def test_a_class_of_two_rows_keeps_both_to_train_on():
    """Review 67: the first fix took one row of every class of two for validation, so 40 classes of two rows kept
    no pair to train on (a default fit then scored 0.44 ARI on new pair sets, against 0.76 before)."""
    labels = np.repeat(np.arange(100), 2)
    held = validation_split(labels, None, 0.2, np.random.default_rng(0))
    kept = np.bincount(labels[~held], minlength=100)
    assert np.all(kept[kept > 0] == 2)


def test_split_gives_up_on_tiny_data():
    assert validation_split(np.repeat(np.arange(3), 5), None, 0.2, np.random.default_rng(0)) is None


def test_split_never_holds_out_every_group():
    """Probe 59c: with groups, round(fraction * n_groups) groups are held out, "at least one, never all": two groups
    and fraction 0.9 hold out one whole group (holding out both left nothing to train on, and gave None)."""
    labels = np.tile(np.repeat(np.arange(3), 10), 2)
    groups = np.repeat([0, 1], 30)
    held = validation_split(labels, groups, 0.9, np.random.default_rng(0))
    assert held is not None
    assert len(np.unique(groups[held])) == 1 and held.sum() == 30


def test_a_large_fraction_leaves_every_class_two_rows_to_train_on():
    """Probe 59c: 3 classes of 10 rows and fraction 0.95 held out every row (then None, not a split that left
    training nothing); review 67b: fraction 0.3 of classes of two rows left one row of each, no pair to train on.
    Every class now keeps two."""
    for labels, fraction in ((np.repeat(np.arange(3), 10), 0.95), (np.repeat(np.arange(100), 2), 0.3),
                             (np.repeat(np.arange(30), 3), 0.5)):
        held = validation_split(labels, None, fraction, np.random.default_rng(0))
        kept = np.bincount(labels[~held], minlength=labels.max() + 1) if held is not None else None
        assert held is None or np.all((kept == 0) | (kept >= 2)), kept
    held = validation_split(np.repeat(np.arange(3), 10), None, 0.95, np.random.default_rng(0))
    assert np.array_equal(np.bincount(np.repeat(np.arange(3), 10)[~held]), [2, 2, 2])


@pytest.mark.parametrize("seed", range(3))
def test_split_of_many_classes_by_a_large_fraction_keeps_the_minimum_to_train_on(seed):
    """Probe 59c: without groups, round(fraction * n_classes) classes are held out whole, "leaving at least
    MIN_TRAINING_CLASSES": 5 classes at fraction 0.9 hold out 2 whole, and 3 keep training rows (not 1)."""
    labels = np.repeat(np.arange(5), 40)
    held = validation_split(labels, None, 0.9, np.random.default_rng(seed))
    assert held is not None
    assert sum(held[labels == c].all() for c in range(5)) == 5 - validation.MIN_TRAINING_CLASSES
    assert len(np.unique(labels[~held])) == validation.MIN_TRAINING_CLASSES


# ------------------------------------------------------------------ callbacks
class _Net:
    """What the callbacks read of a skorch net."""

    def __init__(self):
        self.module_ = torch.nn.Linear(2, 1)
        self.history = History()


def _run_epochs(monkeypatch, scores, patience=None, alpha=1.0, start_is_candidate=True):
    """Drive ValidationSetsScoring through scripted scores; return the weight after each epoch and the net."""
    feed = iter(scores)
    monkeypatch.setattr(early_stopping, "score_sets", lambda module, sets, settings: next(feed))
    net, callback = _Net(), ValidationSetsScoring(sets=[], settings={}, patience=patience, alpha=alpha,
                                                  start_is_candidate=start_is_candidate)
    callback.on_train_begin(net)
    weights = [net.module_.bias.item()]
    for epoch in range(1, len(scores)):
        net.history.new_epoch()
        with torch.no_grad():
            net.module_.bias.fill_(float(epoch))
        weights.append(epoch)
        try:
            callback.on_epoch_end(net)
        except KeyboardInterrupt:
            break
    callback.on_train_end(net)
    return weights, net, callback


def test_early_stopping_restores_the_best_weights(monkeypatch):
    _, net, callback = _run_epochs(monkeypatch, [0.5, 0.6, 0.9, 0.7, 0.8])
    assert callback.best_epoch_ == 2 and callback.best_score_ == 0.9
    assert net.module_.bias.item() == 2.0  # the weights of epoch 2, not of the last epoch
    assert net.history[:, "valid_ari_best"] == [True, True, False, False]


def test_fine_tuning_never_ends_worse_than_its_start(monkeypatch):
    weights, net, callback = _run_epochs(monkeypatch, [0.7, 0.6, 0.65, 0.5])
    assert callback.best_epoch_ == 0 and callback.best_score_ == 0.7
    assert net.module_.bias.item() == pytest.approx(weights[0])  # the starting weights are back


def test_validation_mixes_the_best_weights_with_the_start(monkeypatch):
    weights, net, callback = _run_epochs(monkeypatch, [0.5, 0.6, 0.9, 0.7], alpha=0.25)
    assert callback.best_epoch_ == 2
    assert net.module_.bias.item() == pytest.approx(weights[0] + 0.25 * (2.0 - weights[0]))


def test_mix_weights_blends_floating_point_tensors_and_keeps_the_others():
    start = {"w": torch.zeros(3), "count": torch.tensor(1)}
    trained = {"w": torch.full((3,), 2.0), "count": torch.tensor(5)}
    mixed = early_stopping.mix_weights(start, trained, 0.25)
    assert torch.allclose(mixed["w"], torch.full((3,), 0.5)) and mixed["count"].item() == 5


def test_fine_tune_alpha_auto_is_half_unless_groups_validate():
    generic, scratch = ContextualKernel(), ContextualKernel(init="scratch")
    assert plan.resolve_fine_tune_alpha(generic, "generic", validates_on_groups=False) == plan.CLASS_SPLIT_ALPHA
    assert plan.resolve_fine_tune_alpha(generic, "generic", validates_on_groups=True) == 1.0
    assert plan.resolve_fine_tune_alpha(scratch, "scratch", validates_on_groups=False) == 1.0
    assert plan.resolve_fine_tune_alpha(ContextualKernel(fine_tune_alpha=0.3), "generic", False) == 0.3
    labels, groups = np.tile(np.arange(4), 10), np.repeat(np.arange(5), 8)
    assert validation.holds_out_groups(labels, groups) and not validation.holds_out_groups(labels, None)
    assert not validation.holds_out_groups(labels, np.zeros(40, dtype=int))  # one group: classes are held out
    with pytest.raises(ValueError, match=r"fine_tune_alpha=0.3.*init='generic'.*'scratch'"):
        plan.resolve_fine_tune_alpha(ContextualKernel(fine_tune_alpha=0.3), "scratch", False)


def test_a_scratch_start_never_wins_over_the_epochs(monkeypatch, blobs):
    """A probe (/work/probe35d): a tiny scratch network's validation score stayed at its random start's for five
    epochs (a near-constant affinity cuts sets the same way), and the random weights were returned."""
    weights, net, callback = _run_epochs(monkeypatch, [0.7, 0.6, 0.6, 0.6, 0.6], patience=2, start_is_candidate=False)
    assert callback.best_epoch_ == 1 and callback.stopped_
    assert net.module_.bias.item() == 1.0 and net.module_.bias.item() != pytest.approx(weights[0])
    X, y = blobs
    starts = {}
    for init in ("scratch", "generic"):
        kernel = ContextualKernel(**FAST, init=init)
        kernel._validate_params()
        found = dict(plan.plan_training(kernel, X, y, None).callbacks)["validation"]
        starts[init] = found.start_is_candidate
    assert starts == {"scratch": False, "generic": True}


def test_training_that_diverges_says_so_from_fit_and_keeps_the_kernel_as_it_was(blobs):
    """A probe (/work/probe35d): with lr=1e30 a run whose last step overflowed the weights passed fit (the loss was
    still finite) and the first transform blamed a corrupted model file; with early stopping, scipy's 'array must
    not contain infs or NaNs' came out of the validation scoring."""
    X, y = blobs
    kernel = ContextualKernel(**TINY_NET, **FAST, init="scratch", max_epochs=1, sets_per_epoch=4).fit(X, y)
    before = kernel.transform(X[:20])
    for extra in ({"max_epochs": 1, "sets_per_epoch": 4}, {"max_epochs": "auto"}):
        with pytest.raises(ValueError, match="training diverged"):
            kernel.set_params(lr=1e30, **extra).fit(X, y)
        np.testing.assert_array_equal(kernel.transform(X[:20]), before)  # the last good fit stands


def test_held_out_groups_are_groups_that_can_form_a_set():
    """A probe (/work/probe35d): with 150 groups of one row and one of 150, the split held out the only group that
    could train ('no group holds at least 2 labelled rows'), or scored sets of one row (ARI 1 every epoch)."""
    labels = np.r_[np.arange(150) % 3, np.arange(150) % 3]
    groups = np.r_[np.arange(150), np.full(150, 150)]
    for seed in range(6):
        assert validation_split(labels, groups, 0.2, np.random.default_rng(seed)) is None
    groups = np.r_[np.arange(150), np.repeat([150, 151, 152], 50)]
    for seed in range(6):
        held_out = validation_split(labels, groups, 0.2, np.random.default_rng(seed))
        assert held_out is not None and set(np.unique(groups[held_out])) <= {150, 151, 152}
        assert not held_out[:150].any()


def test_schedule_says_what_runs_with_the_users_epoch_length(blobs, monkeypatch):
    """A probe (/work/probe35d): with max_epochs='auto' and sets_per_epoch=16, schedule_ said 16 epochs of 400 sets
    where 400 epochs of 16 ran."""
    X, y = blobs
    kernel = ContextualKernel(**TINY_NET, **FAST, init="scratch", sets_per_epoch=16, max_time=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernel.fit(X, y)
    assert kernel.schedule_.sets_per_epoch == 16
    assert kernel.schedule_.max_epochs == kernel.net_.max_epochs
    assert kernel.schedule_.n_steps == kernel.net_.max_epochs * 4  # batches of 4 sets


def test_patience_stops_the_run(monkeypatch):
    _, net, callback = _run_epochs(monkeypatch, [0.5, 0.6, 0.4, 0.4, 0.4, 0.4], patience=2)
    assert callback.stopped_ and len(net.history) == 3


def test_max_time_stops_training_without_an_interruption_warning(blobs):
    X, y = blobs
    kernel = ContextualKernel(**TINY_NET, **FAST, init="scratch", max_epochs=5, sets_per_epoch=8, max_time=1e-9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel.fit(X, y)
    # A planned stop is not reported as an interrupted fit; one inside the first epoch says it trained little.
    assert not any("interrupted" in str(w.message) for w in caught)
    assert [str(w.message).split(":")[0] for w in caught] == ["max_time=1e-09 s ended training inside its first epoch"]
    assert len(kernel.net_.history) == 1 and len(kernel.net_.history[-1]["batches"]) == 1
    assert kernel.max_time_ == 1e-9
    assert TimeLimit(1.0).max_time == 1.0


def test_max_time_inside_the_first_epoch_of_a_fine_tune_says_the_start_is_kept(blobs):
    """A probe (/work/probe35d): the warning said the kernel took part of an epoch's steps, where validation had
    restored the starting weights."""
    X, y = blobs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = ContextualKernel(**FAST, max_time=1e-9).fit(X, y)
    messages = [str(w.message) for w in caught if "max_time" in str(w.message)]
    assert len(messages) == 1 and "its starting weights are kept (no epoch finished, none was scored)." in messages[0]
    np.testing.assert_array_equal(kernel.transform(X[:30]), pretrained.load("generic").transform(X[:30]))
    # Probe 70c: the batches of the cut epoch were counted, though the start's weights were kept.
    assert kernel.n_training_sets_ == 0


def test_max_time_says_it_ended_the_run_when_verbose(blobs, capsys):
    """A run cut inside its first epoch prints no epoch row; the time limit says it stopped it."""
    X, y = blobs
    params = dict(**TINY_NET, **FAST, init="scratch", max_epochs=5, sets_per_epoch=8, max_time=1e-9)
    ContextualKernel(**{**params, "verbose": 1}).fit(X, y)
    assert "max_time=1e-09 s reached after" in capsys.readouterr().out
    ContextualKernel(**{**params, "verbose": 0}).fit(X, y)
    assert capsys.readouterr().out == ""


def test_labels_that_are_all_unlabelled_are_refused_in_the_users_terms():
    """Probe 52e: the training schedule's check answered, naming n_labelled, n_classes and batch_size."""
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=r"y has no labelled rows \(every label is -1\)"):
        ContextualKernel(**FAST).fit(X, np.full(20, -1))


@pytest.mark.parametrize("init", ["generic", "scratch"])
def test_verbose_ends_with_the_held_out_score_of_what_is_kept(blobs, capsys, init):
    """Probe 52e: the epoch table ends at the last epoch's score; the start's score, the kept weights' score after
    the choice of settings (and the mix with the start) and that choice were never printed."""
    X, y = blobs
    params = dict(**FAST, max_epochs=2, sets_per_epoch=8, early_stopping=True, init=init, verbose=1)
    kernel = ContextualKernel(**params, **({} if init == "generic" else TINY_NET)).fit(X, y)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"held-out valid_ari {kernel.validation_score_:.4f}" in last
    assert validation.settings_label(kernel.recommended_clustering()) in last
    assert ("the start scored" in last or "the start's weights are kept" in last) == (init == "generic")


def test_time_limit_does_not_begin_an_epoch_that_cannot_end_in_time(monkeypatch):
    """With validation (best weights restored), an epoch that cannot end by the limit is not begun."""
    from types import SimpleNamespace

    now = [0.0]
    monkeypatch.setattr(early_stopping.time, "monotonic", lambda: now[0])

    def epoch(limit, net, seconds):
        limit.on_epoch_begin(net)
        now[0] += seconds
        limit.on_epoch_end(net)

    validated = SimpleNamespace(callbacks_=[("validation", object.__new__(ValidationSetsScoring))])
    limit = TimeLimit(100.0)
    limit.on_train_begin(validated)
    epoch(limit, validated, 30.0)
    epoch(limit, validated, 20.0)  # 50 s gone; the shortest epoch (20 s) still fits
    epoch(limit, validated, 25.0)  # 75 s gone: 75 + 20 <= 100, a fourth epoch may end in time
    epoch(limit, validated, 10.0)  # 85 s gone, the shortest now 10 s: 95 <= 100
    assert not limit.stopped_
    with pytest.raises(KeyboardInterrupt):
        epoch(limit, validated, 10.0)  # 95 s gone: not even a 10 s epoch ends by 100 s
    assert limit.stopped_
    # Without validation the last weights stay, so training goes on until a step runs past the limit.
    bare = SimpleNamespace(callbacks_=[])
    now[0], limit = 0.0, TimeLimit(100.0)
    limit.on_train_begin(bare)
    epoch(limit, bare, 95.0)
    limit.on_batch_end(bare, training=True)
    assert not limit.stopped_
    now[0] = 100.5
    with pytest.raises(KeyboardInterrupt):
        limit.on_batch_end(bare, training=True)
    assert limit.stopped_


def test_max_time_auto_limits_only_automatic_schedules(blobs):
    """'auto': an automatic schedule gets AUTO_MAX_TIME (a slow machine ends it there), fixed epochs no limit."""
    X, y = blobs

    def resolved(**params):
        kernel = ContextualKernel(**TINY_NET, **FAST, init="scratch", **params)
        training = plan.plan_training(kernel, X, np.asarray(y), None)
        return training.max_time, [cb.max_time for name, cb in training.callbacks if name == "time_limit"]

    assert resolved() == (AUTO_MAX_TIME, [AUTO_MAX_TIME]) and 0 < AUTO_MAX_TIME <= 10 * 60
    assert resolved(max_epochs=3) == (None, [])
    assert resolved(max_epochs=3, max_time=7.5) == (7.5, [7.5])
    assert resolved(max_time=None) == (None, [])
    with pytest.raises(ValueError, match="max_time"):
        ContextualKernel(max_time="soon").fit(X, y)


def test_max_time_auto_ends_an_automatic_schedule_at_its_limit(blobs, monkeypatch):
    X, y = blobs
    monkeypatch.setattr(plan, "training_schedule",
                        lambda n, k, b, cap, size: Schedule(max_epochs=3, sets_per_epoch=8, n_steps=6))
    monkeypatch.setattr(plan, "AUTO_MAX_TIME", 1e-9)  # the run is past its limit after its first step
    kernel = ContextualKernel(**TINY_NET, **FAST, init="scratch").fit(X, y)
    assert kernel.max_time_ == 1e-9 and kernel.schedule_.max_epochs == 3
    assert len(kernel.net_.history) == 1 and len(kernel.net_.history[-1]["batches"]) == 1


# ------------------------------------------------------------------ init
def test_defaults_fine_tune_the_generic_kernel(blobs):
    X, y = blobs
    generic = pretrained.load("generic", device="cpu")
    kernel = ContextualKernel(**FAST, max_epochs=1, sets_per_epoch=4).fit(X, y)
    assert kernel.init_ == "generic"
    assert kernel.network_params_["canonical_features"] == generic.canonical_features
    assert kernel.recommended_clustering()  # the generic kernel's clustering settings come along
    start = generic.module_.state_dict()
    moved = max(float((kernel.module_.state_dict()[k] - v).abs().max()) for k, v in start.items())
    assert 0 < moved < 0.05
    assert kernel.transform(X[:30, :2]).shape == (30, 30)  # like the generic kernel, any width


def test_fine_tuned_weights_are_mixed_with_the_generic_ones(blobs):
    X, y = blobs
    start = pretrained.load("generic", device="cpu").module_.state_dict()
    fit = dict(**FAST, max_epochs=1, sets_per_epoch=4)
    mixed = ContextualKernel(**fit).fit(X, y)  # no validation sets: 'auto' is the class-split share
    trained = ContextualKernel(**fit, fine_tune_alpha=1.0).fit(X, y)
    assert mixed.fine_tune_alpha_ == plan.CLASS_SPLIT_ALPHA and trained.fine_tune_alpha_ == 1.0
    for name, value in trained.module_.state_dict().items():
        expected = start[name] + plan.CLASS_SPLIT_ALPHA * (value - start[name])
        assert torch.allclose(mixed.module_.state_dict()[name], expected, atol=1e-6), name


def test_an_interrupted_fine_tune_keeps_mixed_weights(blobs, monkeypatch):
    from skabc import sampling

    X, y = blobs
    original = sampling.SampledSetsDataset.__getitem__

    def fit(alpha):
        calls = {"n": 0}

        def interrupting(self, i):  # two epochs of four sets, then Ctrl-C
            calls["n"] += 1
            if calls["n"] > 2 * 4 + 1:
                raise KeyboardInterrupt
            return original(self, i)

        monkeypatch.setattr(sampling.SampledSetsDataset, "__getitem__", interrupting)
        with pytest.warns(RuntimeWarning, match="interrupted after 2 of 5 epochs"):
            return ContextualKernel(**FAST, max_epochs=5, sets_per_epoch=4, fine_tune_alpha=alpha).fit(X, y)

    start = pretrained.load("generic", device="cpu").module_.state_dict()
    mixed, trained = fit(0.5), fit(1.0)
    assert dict(mixed.net_.callbacks_)["start_weight_mix"].start_state_ is None  # no copy left in pickles
    for name, value in trained.module_.state_dict().items():
        assert torch.allclose(mixed.module_.state_dict()[name], start[name] + 0.5 * (value - start[name]), atol=1e-6)


def test_scratch_switch_and_its_conflict_with_init_generic(blobs):
    X, y = blobs
    kernel = ContextualKernel(**FAST, init="scratch", max_epochs=1, sets_per_epoch=4).fit(X, y)
    assert kernel.init_ == "scratch" and kernel.network_params_["canonical_features"] is None
    assert kernel.recommended_clustering() == {}
    assert ContextualKernel(**TINY_NET, **FAST, max_epochs=1, sets_per_epoch=4).fit(X, y).init_ == "scratch"
    with pytest.raises(ValueError, match=r"init='generic'.*d_model=8"):
        ContextualKernel(**TINY_NET, **FAST, init="generic", max_epochs=1).fit(X, y)


def test_warm_start_of_a_fine_tuned_kernel_refuses_a_changed_network(blobs):
    """A probe: set_params(d_model=32) then a warm fit kept the generic network silently (d_model 64); and a
    second warm start of a fine-tuned kernel tried to load its weights into a default network."""
    X, y = blobs
    kernel = ContextualKernel(**FAST, max_epochs=1, sets_per_epoch=4, warm_start=True).fit(X, y)
    assert kernel.init_ == "generic"
    for _ in range(2):  # continuing with the defaults, as often as wanted
        kernel.fit(X, y)
        assert kernel.init_ == "warm_start" and kernel.network_params_["canonical_features"] == 64
    with pytest.raises(ValueError, match=r"warm_start=True continues the fitted network.*d_model: 64 -> 32"):
        kernel.set_params(d_model=32).fit(X, y)


def test_auto_schedule_with_early_stopping_ends_no_worse_than_it_started(blobs, monkeypatch):
    X, y = blobs
    # The automatic schedule, shortened for a unit test: the same code path with two epochs of one step.
    monkeypatch.setattr(plan, "training_schedule",
                        lambda n, k, b, cap, size: Schedule(max_epochs=2, sets_per_epoch=4, n_steps=2))
    groups = np.arange(len(y)) % 5  # held-out groups: the clustering settings are chosen on their sets
    kernel = ContextualKernel(**FAST).set_params(set_size=(10, 30)).fit(X, y, groups=groups)
    assert kernel.init_ == "generic" and kernel.schedule_.max_epochs == 2 and kernel.fine_tune_alpha_ == 1.0
    assert kernel.validation_score_ >= kernel.start_validation_score_
    assert "valid_ari" in kernel.net_.history[-1]
    # Every candidate setting was scored on the held-out sets, and the winner once more with the generic
    # kernel's arbiter (the start's); the kernel recommends the best.
    scores = kernel.validation_settings_scores_
    # ... at the sets' true k too where it survived, and, unless the start itself was kept, the start as it
    # clusters alone (its weights and settings).
    starts = [label for label in scores if label.startswith("start weights, ")]
    given = [label for label in scores if label.endswith(", k given")]
    assert len(scores) == len(validation.SETTING_CANDIDATES) + 1 + len(given) + len(starts)
    assert len(starts) <= 1 and len(given) in (0, 2)
    assert sum(label.endswith("arbiter generic") and label not in starts for label in scores) == 1
    chosen = {k: v for k, v in kernel.recommended_clustering().items() if v is not None}
    # The setting without the arbiter scores at least the generic kernel's own (a candidate replaces it only by
    # beating it by more than a standard error), and is the generic kernel's own where none won clearly.
    alone = {**chosen, "arbiter": None}
    own = {**pretrained.load("generic").recommended_clustering(), "arbiter": None}
    assert scores[validation.settings_label(alone)] >= scores[validation.settings_label(own)]
    assert alone == own or scores[validation.settings_label(alone)] > scores[validation.settings_label(own)]
    if chosen.get("arbiter") is not None:
        assert validation.settings_label(chosen) in scores


def test_a_fine_tune_validated_on_held_out_classes_keeps_the_generic_settings(blobs, monkeypatch):
    X, y = blobs
    monkeypatch.setattr(plan, "training_schedule",
                        lambda n, k, b, cap, size: Schedule(max_epochs=2, sets_per_epoch=4, n_steps=2))
    kernel = ContextualKernel(**FAST).set_params(set_size=(10, 30)).fit(X, y)
    assert kernel.fine_tune_alpha_ == plan.CLASS_SPLIT_ALPHA and "valid_ari" in kernel.net_.history[-1]
    generic = pretrained.load("generic").recommended_clustering()
    chosen = kernel.recommended_clustering()
    variants = [generic, *({**generic, "arbiter": name} for name in ("generic-knn", "generic-knn-only"))]
    assert chosen in variants
    # No other settings were tried: the generic ones, their kNN partition and the kNN candidates, with k estimated
    # and given; the result was compared with the start as it clusters on its own.
    labels = [validation.settings_label(s) for s in variants]
    compared = {*labels, *(label + ", k given" for label in labels)}
    best_epoch = dict(kernel.net_.callbacks_)["validation"].best_epoch_
    start = set() if best_epoch == 0 else {"start weights, " + validation.settings_label(generic)}
    assert set(kernel.validation_settings_scores_) == compared | start


def test_a_fine_tuned_kernel_saves_and_loads(tmp_path, blobs):
    X, y = blobs
    kernel = ContextualKernel(**FAST, max_epochs=1, sets_per_epoch=4).fit(X, y)
    kernel.save(tmp_path / "mine.safetensors")
    loaded = ContextualKernel.load(tmp_path / "mine.safetensors", device="cpu")
    np.testing.assert_allclose(loaded.transform(X[:40]), kernel.transform(X[:40]), atol=1e-6)


# ------------------------------------------------------- clustering settings chosen on validation sets
def _stub_validation(monkeypatch, winner: dict, n_sets: int = 12, margin: int | None = None):
    """Sets whose clustering is perfect under ``winner``'s power and rule, one cluster otherwise.

    ``margin``: only that many sets are clustered better by the winner, and the last set better by the
    start settings (the rest score the same).
    """
    rng = np.random.default_rng(0)
    sets = [(rng.normal(size=(20, 2)).astype(np.float32), rng.integers(0, 3, 20)) for _ in range(n_sets)]
    monkeypatch.setattr(validation, "set_affinity", lambda module, X: X)
    truth = {id(X): labels for X, labels in sets}

    def cluster(affinity, settings, **kwargs):
        labels = truth[id(affinity)]
        index = [id(X) for X, _ in sets].index(id(affinity))
        wins = all(settings.get(k) == v for k, v in winner.items()) and (margin is None or index < margin)
        start_wins = margin is not None and index == len(sets) - 1 and settings.get("affinity_power") == 4.0
        return labels if wins or start_wins else np.zeros_like(labels)

    monkeypatch.setattr(validation, "cluster_affinity", cluster)
    return sets


def test_choose_settings_takes_a_clear_winner(monkeypatch):
    winner = {"affinity_power": 8.0, "n_clusters_selection": "eigengap"}
    sets = _stub_validation(monkeypatch, winner)
    start = {"affinity_power": 4.0, "assign_labels": "njw", "n_clusters_selection": "consensus"}
    chosen, scores = validation.choose_settings(None, sets, start)
    assert chosen == {**start, **winner}  # assign_labels kept
    assert scores["A**8 eigengap njw"] == 1.0 and scores["A**4 consensus njw"] == 0.0
    assert len(scores) == len(validation.SETTING_CANDIDATES)


def test_choose_settings_keeps_the_start_when_the_gain_is_within_noise(monkeypatch):
    winner = {"affinity_power": 2.0, "n_clusters_selection": "consensus"}
    sets = _stub_validation(monkeypatch, winner, n_sets=24, margin=2)  # +1 on two sets, -1 on one
    start = {"affinity_power": 4.0, "assign_labels": "njw", "n_clusters_selection": "consensus"}
    chosen, scores = validation.choose_settings(None, sets, start)
    assert scores["A**2 consensus njw"] > scores["A**4 consensus njw"]
    assert chosen == start


@pytest.mark.parametrize(("arbiter_wins", "wins_at_given_k", "kept"),
                         [(True, True, "generic"), (False, True, None), (True, False, None)])
def test_choose_settings_keeps_the_arbiter_unless_it_clearly_loses(monkeypatch, arbiter_wins, wins_at_given_k, kept):
    rng = np.random.default_rng(0)
    sets = [(rng.normal(size=(20, 2)).astype(np.float32), rng.integers(0, 3, 20)) for _ in range(12)]
    monkeypatch.setattr(validation, "set_affinity", lambda module, X: X)
    truth = {id(X): labels for X, labels in sets}

    def cluster(affinity, settings, n_clusters=None, **kwargs):
        assert n_clusters in (None, len(np.unique(truth[id(affinity)])))  # the set's true k when given
        wins = arbiter_wins if n_clusters is None else wins_at_given_k
        good = bool(settings.get("arbiter")) == wins
        return truth[id(affinity)] if good else np.zeros(20, dtype=int)

    monkeypatch.setattr(validation, "cluster_affinity", cluster)
    start = {"affinity_power": 4.0, "assign_labels": "njw", "n_clusters_selection": "consensus", "arbiter": "generic"}
    chosen, scores = validation.choose_settings(None, sets, start)
    assert chosen == {**start, "arbiter": kept}
    assert scores["A**4 consensus njw arbiter generic"] == (1.0 if arbiter_wins else 0.0)
    # At the sets' true k the arbiter is compared only where it survived with k estimated.
    assert ("A**4 consensus njw arbiter generic, k given" in scores) is arbiter_wins
    if arbiter_wins:
        assert scores["A**4 consensus njw arbiter generic, k given"] == (1.0 if wins_at_given_k else 0.0)


def _stub_partitions(monkeypatch, right) -> list:
    """12 validation sets whose clustering is perfect where ``right(arbiter, set index, n_clusters)``, one cluster
    elsewhere (``choose_partition``'s affinities and clusterings stubbed)."""
    rng = np.random.default_rng(0)
    sets = [(rng.normal(size=(20, 2)).astype(np.float32), rng.integers(0, 3, 20)) for _ in range(12)]
    monkeypatch.setattr(validation, "set_affinity", lambda module, X: X)
    index = {id(X): i for i, (X, _) in enumerate(sets)}

    def cluster(affinity, settings, n_clusters=None, **kwargs):
        i = index[id(affinity)]
        return sets[i][1] if right(settings["arbiter"], i, n_clusters) else np.zeros(20, dtype=int)

    monkeypatch.setattr(validation, "cluster_affinity", cluster)
    return sets


@pytest.mark.parametrize(("kernel_wins", "kernel_wins_at_given_k", "kept"),
                         [(0, 0, "generic-knn"), (12, 0, "generic"), (0, 12, "generic"), (2, 0, "generic-knn")])
def test_choose_partition_takes_the_knn_variant_unless_the_kernel_clearly_wins(monkeypatch, kernel_wins,
                                                                              kernel_wins_at_given_k, kept):
    """On the first ``kernel_wins`` sets only the kernel's partition is right, on the others only the graph's;
    with 2, the graph is wrong on two sets and the kernel on one (both right elsewhere): a win within noise."""
    def right(arbiter, i, n_clusters):
        wins = kernel_wins if n_clusters is None else kernel_wins_at_given_k
        kernel_right, graph_right = (i < 11, i >= 2) if wins == 2 else (i < wins, i >= wins)
        return kernel_right if arbiter == "generic" else graph_right  # kNN candidates: as the graph

    sets = _stub_partitions(monkeypatch, right)
    start = {"affinity_power": 4.0, "assign_labels": "njw", "n_clusters_selection": "consensus", "arbiter": "generic"}
    chosen, scores = validation.choose_partition(None, sets, start)
    assert chosen == {**start, "arbiter": kept}
    labels = ("A**4 consensus njw arbiter generic", "A**4 consensus njw arbiter generic-knn",
              "A**4 consensus njw arbiter generic-knn-only")
    assert set(scores) == {*labels, *(label + ", k given" for label in labels)}
    # Without an arbiter that has a kNN-partition variant there is nothing to compare.
    assert validation.choose_partition(None, sets, {**start, "arbiter": None}) == ({**start, "arbiter": None}, {})


@pytest.mark.parametrize(("only_right", "only_right_at_given_k", "kept"),
                         [(12, 12, "generic-knn-only"), (8, 12, "generic-knn-only"), (12, 0, "generic-knn"),
                          (6, 12, "generic-knn")])
def test_choose_partition_takes_the_knn_candidates_only_where_they_clearly_win(monkeypatch, only_right,
                                                                               only_right_at_given_k, kept):
    """The kernel's partition and the kNN graph cut at its k are right on the first 6 of 12 sets, the kNN
    candidates on the first ``only_right``: kept only by a win beyond one standard error with k estimated (two sets
    more: 0.17 against 0.11) that does not lose with k given."""
    def right(arbiter, i, n_clusters):
        if arbiter != "generic-knn-only":
            return i < 6
        return i < (only_right if n_clusters is None else only_right_at_given_k)

    sets = _stub_partitions(monkeypatch, right)
    start = {"affinity_power": 4.0, "assign_labels": "njw", "n_clusters_selection": "consensus", "arbiter": "generic"}
    chosen, scores = validation.choose_partition(None, sets, start)
    assert chosen == {**start, "arbiter": kept}
    assert scores["A**4 consensus njw arbiter generic-knn-only"] == only_right / 12


# A tie keeps the fine-tune (probe 59a: ">=" passed the other two cases and threw the fine-tuned weights away).
@pytest.mark.parametrize(("start_score", "kept_start"), [(0.9, True), (0.1, False), (0.5, False)])
def test_the_start_as_it_clusters_alone_is_restored_when_it_scores_higher(monkeypatch, start_score, kept_start):
    from types import SimpleNamespace

    module = torch.nn.Linear(1, 1, bias=False)
    start_settings = {"affinity_power": 4.0, "n_clusters_selection": "consensus", "arbiter": "generic"}
    tuned_settings = {**start_settings, "affinity_power": 8.0, "arbiter": None}
    tuned_scores = {validation.settings_label(tuned_settings): 0.5}
    monkeypatch.setattr(early_stopping, "choose_settings", lambda *args: (tuned_settings, tuned_scores))
    # The start (weight 0) scores start_score with its own settings; anything else would be a wrong comparison.
    monkeypatch.setattr(early_stopping, "score_sets", lambda module, sets, settings: (
        start_score if float(module.weight) == 0.0 and settings == start_settings else -1.0))
    scoring = ValidationSetsScoring(sets=[object()], settings=start_settings)
    with torch.no_grad():
        module.weight.fill_(0.0)
    scoring.start_state_ = {"weight": module.weight.detach().clone()}
    scoring.best_state_ = {"weight": torch.ones(1, 1)}
    scoring.start_score_, scoring.best_score_, scoring.best_epoch_, scoring.kept_start_ = 0.3, 0.4, 3, False
    scoring.on_train_end(SimpleNamespace(module_=module))
    assert scoring.kept_start_ is kept_start
    assert float(module.weight) == (0.0 if kept_start else 1.0)
    assert scoring.best_settings_ == (start_settings if kept_start else tuned_settings)
    assert scoring.best_epoch_ == (0 if kept_start else 3)
    assert scoring.settings_scores_["start weights, A**4 consensus kmeans arbiter generic"] == start_score


def test_scoring_the_true_start_puts_the_module_s_own_weights_back(monkeypatch):
    """With ``start_state`` (a resumed run, a fine-tune mixed with its start), the start is loaded only to be scored:
    training goes on from the module's own weights, the checkpoint's (probe 59a: no test saw them replaced)."""
    from types import SimpleNamespace

    from skorch.history import History

    monkeypatch.setattr(early_stopping, "score_sets", lambda module, sets, settings: 0.5)
    net = SimpleNamespace(module_=torch.nn.Linear(2, 1), history=History())
    with torch.no_grad():
        net.module_.bias.fill_(0.0)
    start = {name: value.detach().clone() for name, value in net.module_.state_dict().items()}
    with torch.no_grad():
        net.module_.bias.fill_(5.0)  # the checkpoint's weights, loaded before training resumes
    scoring = ValidationSetsScoring(sets=[object()], settings={}, start_state=start)
    scoring.on_train_begin(net)
    assert float(net.module_.bias) == 5.0 and scoring.start_score_ == 0.5


@pytest.mark.parametrize(("largest", "tuned"), [(20, True), (600, False)])
def test_allocator_is_tuned_only_for_small_training_sets(blobs, monkeypatch, largest, tuned):
    """Large variable sets fragment a heap whose mmap threshold was raised: no tuning for them."""
    import skabc.training.net as net

    calls = []
    real = net.tuned_allocator
    monkeypatch.setattr(net, "tuned_allocator", lambda enabled: calls.append(enabled) or real(enabled))
    X, y = blobs
    ContextualKernel(**TINY_NET, **{**FAST, "set_size": (2, largest)}, init="scratch", max_epochs=1,
                     sets_per_epoch=4).fit(X, y)
    assert calls == [tuned]


def test_auto_batch_size_is_small_only_where_the_budget_ends_the_run(blobs, monkeypatch):
    """``batch_size='auto'``: 16 where the rows are worth more steps than the cap allows, else 32 (the schedule
    the fit then follows is the one of the resolved batch); an int, or a fixed ``max_epochs``, decides alone."""
    from skabc.training import schedule
    from skabc.training.schedule import GEOMETRY_MAX_STEPS, auto_batch_size

    assert auto_batch_size(300_000, 5, GEOMETRY_MAX_STEPS) == 16
    assert auto_batch_size(1_000, 5, GEOMETRY_MAX_STEPS) == 32
    X, y = blobs
    fitted = []
    monkeypatch.setattr(ContextualKernel, "fit", lambda self, X, y, groups=None: fitted.append(
        plan.plan_training(self, X, np.asarray(y), None)) or self)
    auto = {**FAST, "batch_size": "auto"}
    ContextualKernel(**auto).fit(X, y)
    ContextualKernel(**{**auto, "batch_size": 8}).fit(X, y)
    ContextualKernel(**{**auto, "max_epochs": 2}).fit(X, y)
    monkeypatch.setattr(schedule, "STEPS_PER_SQRT_ROW", 10_000.0)  # the rows now outweigh the cap
    ContextualKernel(**auto).fit(X, y)
    assert [p.batch_size for p in fitted] == [32, 8, 32, 16]
    assert [p.spec.batch_size for p in fitted] == [32, 8, 32, 16]
    capped = fitted[-1].schedule
    assert capped.sets_per_epoch % 16 == 0 and capped.n_steps > GEOMETRY_MAX_STEPS


@pytest.mark.parametrize(("labels", "groups", "match"), [
    (lambda n: np.zeros(n, dtype=int), None, "y holds a single class:"),
    (lambda n: np.arange(n) % 3, lambda n: np.arange(n) % 3, "one class per group"),
    (lambda n: np.arange(n), None, "No two labelled rows"),
    (lambda n: np.arange(n) // 2, lambda n: np.arange(n) % 2, "No two labelled rows"),
])
def test_labels_that_teach_only_one_answer_warn(labels, groups, match):
    """y whose training sets hold only same-cluster (or only different-cluster) pairs: the fit says so."""
    X = np.random.default_rng(0).normal(size=(60, 2))
    with pytest.warns(UserWarning, match=match):
        ContextualKernel(d_model=16, n_heads=2, n_blocks=1, set_size=(10, 20), sets_per_epoch=8, batch_size=8,
                         max_epochs=1, random_state=0, device="cpu").fit(
            X, labels(60), groups=None if groups is None else groups(60))


def test_labels_with_both_kinds_of_pair_do_not_warn():
    X, y = make_blobs(60, centers=3, random_state=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*(a single class|one class per group|No two labelled rows)")
        ContextualKernel(d_model=16, n_heads=2, n_blocks=1, set_size=(10, 20), sets_per_epoch=8, batch_size=8,
                         max_epochs=1, random_state=0, device="cpu").fit(X, y, groups=np.arange(60) % 2)


def test_the_generic_start_is_loaded_on_the_device_the_fit_trains_on(blobs, monkeypatch):
    """Probe 45e: a torch.device (not a string) loaded the generic start with 'auto', on cuda:0 of a GPU machine
    while device=torch.device('cpu') trained on the CPU; mixing the two failed once training ended."""
    import torch

    import skabc.pretrained as pretrained

    devices, real = [], pretrained.load
    monkeypatch.setattr(pretrained, "load", lambda name, device="auto": devices.append(device) or real(name, device))
    X, y = blobs
    kernel = ContextualKernel(**{**FAST, "device": torch.device("cpu")}, max_epochs=1, sets_per_epoch=4).fit(X, y)
    assert kernel.init_ == "generic" and devices and set(devices) == {"cpu"}


def test_a_clone_of_the_fine_tune_recipe_still_fine_tunes_the_generic_kernel():
    """Probe 45h: clone (every GridSearchCV and cross_validate fold) drops the loaded generic kernel's weights, and
    init='auto' then trained a new network of its shape from random weights on the short fine-tune schedule,
    silently; its network parameters are the generic kernel's own, so 'auto' starts from the generic weights."""
    from sklearn.base import clone

    import skabc.pretrained as pretrained
    from skabc import ABCClustering
    from skabc.cluster import FINE_TUNE
    from skabc.datasets import make_circles_sets
    from skabc.training.plan import NETWORK_PARAMS

    X, y, groups = make_circles_sets(n_sets=12, set_size=30, random_state=0)
    kernel = pretrained.load("generic").set_params(**FINE_TUNE).set_params(
        sets_per_epoch=4, max_epochs=1, set_size=(10, 30), device="cpu")
    model = ABCClustering(kernel=kernel, random_state=0)
    assert clone(model).fit(X, y, groups=groups).kernel_.init_ == "generic"
    assert model.fit(X, y, groups=groups).kernel_.init_ == "warm_start"  # the fitted kernel itself continues
    # Naming the generic kernel's network is not "a network of its own" for init='generic' either.
    network = {name: kernel.get_params()[name] for name in NETWORK_PARAMS}
    explicit = ContextualKernel(init="generic", **network, **FAST, max_epochs=1, sets_per_epoch=4).fit(X, y)
    assert explicit.init_ == "generic"


def test_a_network_of_its_own_trains_from_scratch_without_reading_the_generic_file(monkeypatch):
    """'auto' reads the generic kernel's description only for a network that is not the default one, and an
    installation without that file still trains such a network from scratch."""
    from skabc import persistence
    from skabc.training import plan

    def missing(path):
        raise FileNotFoundError(path)

    monkeypatch.setattr(persistence, "read_description", missing)
    plan.generic_network_params.cache_clear()
    try:
        assert plan.resolve_init(ContextualKernel(), continuing=False) == "generic"
        assert plan.resolve_init(ContextualKernel(**TINY_NET), continuing=False) == "scratch"
    finally:
        plan.generic_network_params.cache_clear()


def test_the_epoch_log_has_no_colour_codes_where_stdout_is_no_terminal(blobs, capsys):
    """Probe 45c: `skabc train > log.txt` wrote skorch's colour codes (^[[36m0.3829^[[0m) into the file; verbose=0
    still prints nothing."""
    X, y = blobs
    ContextualKernel(**TINY_NET, **FAST, init="scratch", max_epochs=2, verbose=1).fit(X, y)
    out = capsys.readouterr().out
    assert "train_loss" in out and "\x1b[" not in out
    ContextualKernel(**TINY_NET, **FAST, init="scratch", max_epochs=2, verbose=0).fit(X, y)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("limit", ["early_stopping", "max_time"])
def test_the_epoch_that_ends_the_run_is_printed(blobs, capsys, monkeypatch, limit):
    """skorch prints an epoch's row after every callback: a stop raised before it left that epoch out of the log."""
    X, y = blobs
    groups = np.repeat(np.arange(6), 40)
    monkeypatch.setattr(net_module, "draws_progress_bars", lambda: True)  # as in a terminal
    params = dict(**TINY_NET, **FAST, init="scratch", max_epochs=30, verbose=1)
    if limit == "early_stopping":
        monkeypatch.setattr(early_stopping, "score_sets", lambda *args: 0.5)  # never better than the start
        kernel = ContextualKernel(**params, early_stopping=True, n_iter_no_change=2).fit(X, y, groups=groups)
        message = "early stopping: no better valid_ari in 2 epochs"
    else:
        clock = iter(np.arange(0.0, 1e6, 1.0))  # every reading one second later: a few epochs fit in 60 s
        monkeypatch.setattr(early_stopping.time, "monotonic", lambda: float(next(clock)))
        kernel = ContextualKernel(**params, early_stopping=True, n_iter_no_change=30, max_time=60).fit(
            X, y, groups=groups)
        message = "max_time=60 s would be passed by another epoch"
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if re.match(r"^\s+\d+\s", line)]
    assert 0 < len(kernel.net_.history) < 30 and len(rows) == len(kernel.net_.history)
    lines = out.rstrip().splitlines()
    # The stop, then what the run still does after its last epoch (it took seconds with nothing printed), then
    # what it keeps.
    assert lines[-2].startswith("scoring the kept weights and clustering settings on ")
    assert lines[-1].startswith("held-out valid_ari ")
    assert message in out and lines[-3].startswith(message.split(":")[0][:10])
    # The last epoch's progress bar is closed (cleared) before the stop is printed, not left drawn with the
    # next line glued to it (probe /work/probe39b/r01_bar_left_on_stop.py).
    assert dict(kernel.net_.callbacks_)["progress"].pbar_.disable


def test_ctrl_c_inside_an_epoch_clears_its_progress_bar(blobs, capsys, monkeypatch):
    """Ctrl-C inside an epoch left that epoch's bar drawn, and the interruption warning was printed onto it
    (probe /work/probe39b/r06_ctrl_c.py)."""
    from skorch.callbacks import ProgressBar

    X, y = blobs
    drawn = ProgressBar.on_batch_end

    def interrupted(self, net, **kwargs):
        drawn(self, net, **kwargs)
        if len(net.history) == 2:  # the user presses Ctrl-C during the second epoch
            raise KeyboardInterrupt

    monkeypatch.setattr(ProgressBar, "on_batch_end", interrupted)
    monkeypatch.setattr(net_module, "draws_progress_bars", lambda: True)  # as in a terminal
    kernel = ContextualKernel(**TINY_NET, **FAST, init="scratch", max_epochs=5, verbose=1)
    with pytest.warns(RuntimeWarning, match="interrupted after 1 of 5 epochs; .*loss so far \\([0-9.]+\\)\\.$"):
        kernel.fit(X, y, groups=np.repeat(np.arange(6), 40))
    assert dict(kernel.net_.callbacks_)["progress"].pbar_.disable


def test_a_log_file_gets_the_epoch_rows_without_a_progress_bar(blobs, capsys, monkeypatch):
    """Probe 53b: with stderr a file or pipe (nohup, CI), tqdm's bar still redrew itself there, about 1.4 KB an
    epoch, and the epoch log's rows ended up on its line.  The bar is drawn only where it redraws in place."""
    X, y = blobs
    params = dict(**TINY_NET, **FAST, init="scratch", max_epochs=3, verbose=1)
    assert not net_module.draws_progress_bars()  # pytest's captured stderr is not a terminal
    kernel = ContextualKernel(**params).fit(X, y)
    captured = capsys.readouterr()
    assert "progress" not in dict(kernel.net_.callbacks_) and "\r" not in captured.err + captured.out
    assert len([line for line in captured.out.splitlines() if re.match(r"^\s+\d+\s", line)]) == 3
    monkeypatch.setattr(net_module, "draws_progress_bars", lambda: True)  # a terminal or a notebook
    kernel = ContextualKernel(**params).fit(X, y)
    assert "\r" in capsys.readouterr().err and "progress" in dict(kernel.net_.callbacks_)


def test_validation_scores_are_the_result_and_the_start_as_each_clusters(blobs, monkeypatch):
    """A probe: validation_score_ was the best epoch's score, unmixed and without the arbiter, and the start's
    without the arbiter too, so a fine-tune that gained 0.003 as it clusters reported +0.045."""
    from skabc.training.validation import settings_label

    X, y = blobs
    monkeypatch.setattr(plan, "training_schedule",
                        lambda n, k, b, cap, size: Schedule(max_epochs=3, sets_per_epoch=8, n_steps=6))
    # Every epoch scores better (so the result is a mix, not the start); the final scores are real.
    real, epoch_scores = early_stopping.score_sets, iter([0.0, 0.1, 0.2, 0.3])
    monkeypatch.setattr(early_stopping, "score_sets", lambda module, sets, settings: (
        real(module, sets, settings) if settings.get("arbiter") else next(epoch_scores)))
    kernel = ContextualKernel(**FAST).set_params(set_size=(10, 30)).fit(X, y)  # classes held out: alpha 0.5
    scores = kernel.validation_settings_scores_
    assert kernel.fine_tune_alpha_ == 0.5 and kernel.validation_score_ is not None
    (start_label,) = [label for label in scores if label.startswith("start weights, ")]  # the weights changed
    assert "arbiter generic" in start_label and kernel.start_validation_score_ == scores[start_label]
    # The result: the start where it clustered better, else the mix with the recommended settings.
    result = (scores[start_label] if dict(kernel.net_.callbacks_)["validation"].kept_start_
              else scores[settings_label(kernel.recommended_clustering())])
    assert kernel.validation_score_ == result
    assert [row["valid_ari"] for row in kernel.net_.history] == [0.1, 0.2, 0.3]
    assert kernel.validation_score_ != 0.3  # the mix as it clusters, not the best epoch's own score
    assert kernel.validation_score_ >= kernel.start_validation_score_


def test_verbose_says_when_the_labels_leave_nothing_to_validate_on(blobs, capsys):
    """With the default early stopping, labels too few to hold out a split train unchecked: verbose says so."""
    X, y = blobs
    few = np.flatnonzero(y < 3)[:45]  # 3 classes of about 15 rows: 20% of each is under 20 rows in all
    plan.plan_training(ContextualKernel(**TINY_NET, **FAST, init="scratch", verbose=1), X[few], y[few], None)
    assert "No validation: these labels leave no useful held-out split" in capsys.readouterr().out
    plan.plan_training(ContextualKernel(**FAST, verbose=1), X[few], y[few], None)  # fine-tuning the generic kernel
    assert "fine_tune_alpha=0.5 of the trained weights are kept" in capsys.readouterr().out
    for params, rows in [({"verbose": 0}, few), ({"verbose": 1}, np.arange(len(y))),
                         ({"verbose": 1, "max_epochs": 3}, few)]:  # quiet; a split; no early stopping asked
        plan.plan_training(ContextualKernel(**TINY_NET, **FAST, init="scratch", **params), X[rows], y[rows], None)
        assert capsys.readouterr().out == "", params
    groups = np.r_[np.zeros(200, dtype=int), np.ones(40, dtype=int)]  # group 1 holds a single labelled row
    one_group = np.where(np.arange(len(y)) > 200, -1, y)
    plan.plan_training(ContextualKernel(**TINY_NET, **FAST, init="scratch", verbose=1), X, one_group, groups)
    assert "with groups 2 groups of 2 or more labelled rows" in capsys.readouterr().out
    with pytest.warns(UserWarning, match="early_stopping=True, but"):  # asked for explicitly: the warning says it
        plan.plan_training(ContextualKernel(**TINY_NET, **FAST, init="scratch", early_stopping=True, verbose=1),
                           X[few], y[few], None)
    assert capsys.readouterr().out == ""


# ------------------------------------------------------------------------------------- inputs of a kernel's fit
def _three_blobs(n: int = 120) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = make_blobs(n_samples=n, centers=3, n_features=4, random_state=0)
    return X, y, np.arange(n) % 4


def test_a_raw_coordinate_network_warns_of_columns_far_from_standardised():
    """Such a network learned nothing from X + 10 or X / 100 (loss flat at 0.64) and said nothing; nor from X / 10
    (spreads of 0.1, load_diabetes' 0.048), which the first bound (0.05) let pass (probe 44b)."""
    X, y, g = _three_blobs()
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    tiny = dict(d_model=16, n_heads=2, n_blocks=1, set_size=(10, 40), sets_per_epoch=8, batch_size=8,
                max_epochs=1, random_state=0, device="cpu", init="scratch")
    wide_spread = X * np.array([1.0, 1.0, 1.0, 300.0])  # one column in other units (raw wine's proline)
    a_year = X + np.array([0.0, 0.0, 0.0, 2000.0])  # one column far off (probe 44b: the medians missed it)
    for unscaled in (X + 10, X / 100, X / 10, X * 100, wide_spread, a_year):
        with pytest.warns(UserWarning, match="reads raw coordinates .* far from standardised") as record:
            ContextualKernel(**tiny).fit(unscaled, y, groups=g)
    assert "column 3 lies at 2e+03, " in str(record[-1].message)  # the column the medians hide is named
    from sklearn.datasets import load_digits, load_iris

    images, labels = load_digits(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ContextualKernel(**tiny).fit(X, y, groups=g)  # standardised: no word
        ContextualKernel(**tiny, canonical_features=4).fit(X + 10, y, groups=g)  # canonicalised: no word
        # Pixels in [0, 1], ink on black or on white (an offset of about 1 is no trouble): no word.
        for pixels in (images[:200] / 16, 1 - images[:200] / 16, images[:200]):
            ContextualKernel(**tiny).fit(pixels, labels[:200])
        iris, species = load_iris(return_X_y=True)  # means up to 7 of their spreads, under 8 typical ones
        ContextualKernel(**{**tiny, "set_size": (10, 30)}).fit(iris, species)


def test_a_fit_from_the_generic_network_takes_any_magnitude_as_its_result_does():
    X, y, g = _three_blobs()
    # It was refused ("too large for the network's float32 arithmetic"), though the fitted kernel takes it.
    kernel = ContextualKernel(init="generic", max_epochs=1, sets_per_epoch=8, set_size=40, random_state=0,
                              device="cpu").fit(X * 1e20, y, groups=g)
    np.testing.assert_allclose(kernel.transform(X[:40] * 1e20), kernel.transform(X[:40]), atol=1e-5)
    with pytest.raises(ValueError, match="too large for the network's float32"):
        ContextualKernel(init="scratch", max_epochs=1, sets_per_epoch=8, set_size=40).fit(X * 1e20, y, groups=g)


def test_set_size_as_an_array_is_a_pair():
    from skabc.sampling import check_set_size

    assert check_set_size(np.array([10, 40])) == (10, 40)
    assert check_set_size(np.array([10, 40], dtype=np.int32)) == (10, 40)
    with pytest.raises(ValueError, match="set_size must be an int or a"):
        check_set_size(np.array([10.5, 40]))


def test_square_rows_that_train_a_kernel_get_no_precomputed_warning_and_unlabelled_y_is_named():
    from skabc import ABCClustering

    X, y, _ = _three_blobs(4)  # 4 rows of 4 features: square
    tiny = dict(d_model=16, n_heads=2, n_blocks=1, set_size=(2, 4), sets_per_epoch=4, batch_size=4, max_epochs=1,
                random_state=0, device="cpu", init="scratch")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ABCClustering(kernel=ContextualKernel(**tiny), random_state=0).fit((X - X.mean(0)) / X.std(0), y)
    assert not [w for w in caught if "API has changed" in str(w.message)]
    with pytest.warns(UserWarning, match="API has changed"):  # a fitted kernel reads square rows as before
        ABCClustering(random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"y with no labels \(every row -1"):
        ABCClustering(kernel=ContextualKernel(**tiny)).fit(X, np.full(4, -1))


def test_abc_with_a_kernel_to_train_says_it_requires_y():
    from sklearn.frozen import FrozenEstimator

    from skabc import ABCClustering

    assert ABCClustering(kernel=ContextualKernel()).__sklearn_tags__().target_tags.required
    assert not ABCClustering().__sklearn_tags__().target_tags.required
    assert not ABCClustering(kernel=FrozenEstimator(pretrained.load("generic"))).__sklearn_tags__().target_tags.required
    with pytest.raises(ValueError, match="requires y to be passed, but the target y is None"):
        ABCClustering(kernel=ContextualKernel()).fit(np.zeros((5, 2)) + np.arange(5)[:, None])


def test_a_fit_that_keeps_its_start_says_so(monkeypatch, capsys):
    """Probe 57e: with no epoch scoring above the generic start, early stopping kept the start, and the log said
    'the weights of epoch 0' and then 'held-out valid_ari ... with the kept weights; the start scored' the same: it
    read as if an epoch's weights were kept."""
    settings = {"affinity_power": 4.0, "n_clusters_selection": "consensus", "arbiter": "generic"}
    feed = iter([0.47, 0.46, 0.41])  # the start, then two epochs below it
    monkeypatch.setattr(early_stopping, "score_sets", lambda module, sets, settings: next(feed))
    net = _Net()
    net.verbose, net.callbacks_ = 1, []
    callback = ValidationSetsScoring(sets=[object()], settings=settings, patience=2)
    callback.on_train_begin(net)
    with pytest.raises(KeyboardInterrupt):
        for _ in range(2):
            net.history.new_epoch()
            callback.on_epoch_end(net)
    assert "the start's weights (0.4700; no epoch scored above them) are kept" in capsys.readouterr().out
    assert callback.best_epoch_ == 0
    callback.best_settings_, callback.final_score_, callback.final_start_score_ = settings, 0.4327, 0.4327
    summary = callback._summary(epoch_beat_start=False, epochs_scored=2)
    assert "held-out valid_ari 0.4327: the start's weights are kept" in summary
    assert "beat the start's 0.4700" in summary and "with the kept weights" not in summary
    # Review 57h: kept by the final comparison of settings, with no epoch ahead, it credited "the trained ones".
    callback.kept_start_ = True
    summary = callback._summary(epoch_beat_start=False, epochs_scored=2)
    assert "beat the start's 0.4700" in summary and "trained" not in summary
    # max_time ended the run inside its first epoch
    assert callback._summary(epoch_beat_start=False, epochs_scored=0).endswith("(no epoch was scored)")
