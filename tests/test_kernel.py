"""ContextualKernel: training, the affinity it returns, errors on bad input."""

from __future__ import annotations

import json
import pickle
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, forge, make_blob_sets, read_meta, read_tensors
from sklearn.base import clone

import skabc.inference as inference
from skabc import ContextualKernel, KernelEnsemble
from skabc.pretrained import load


def test_affinity_is_symmetric_probability_matrix(tiny_kernel):
    X, _, _ = make_blob_sets(n_sets=1, set_size=57, random_state=3)
    A = tiny_kernel.transform(X)
    assert A.shape == (57, 57)
    assert A.dtype == np.float64
    np.testing.assert_array_equal(A, A.T)
    assert A.min() >= 0.0 and A.max() <= 1.0


@pytest.mark.parametrize("block_cells", [2**24, 300 * 7])
def test_generic_affinity_is_exactly_symmetric_also_when_filled_block_by_block(monkeypatch, block_cells):
    """Probe 59c: the blocks of the affinity are symmetric only up to rounding, and transform makes it exact, in one
    block or in many (forced here by a small block size)."""
    monkeypatch.setattr(inference, "_INFERENCE_BLOCK_CELLS", block_cells)
    X = make_blob_sets(n_sets=1, set_size=300, max_clusters=4, random_state=0)[0]
    A = load("generic").set_params(device="cpu").transform(X)
    np.testing.assert_array_equal(A, A.T)


@pytest.mark.parametrize("n", [1, 2, 3, 250])
def test_transform_any_set_size(tiny_kernel, n):
    """Sizes never seen in training (training sets had 10-40 points) work."""
    X = np.random.default_rng(n).normal(size=(n, 2))
    assert tiny_kernel.transform(X).shape == (n, n)


def test_affinity_is_permutation_equivariant(tiny_kernel):
    X = np.random.default_rng(0).normal(size=(30, 2))
    perm = np.random.default_rng(1).permutation(30)
    A = tiny_kernel.transform(X)
    A_perm = tiny_kernel.transform(X[perm])
    np.testing.assert_allclose(A_perm, A[np.ix_(perm, perm)], atol=1e-6)


def test_affinity_depends_on_context(tiny_kernel):
    """The pair (0, 1) is scored differently when the rest of the set changes."""
    rng = np.random.default_rng(0)
    pair = rng.normal(size=(2, 2))
    a = tiny_kernel.transform(np.vstack([pair, rng.normal(size=(20, 2))]))[0, 1]
    b = tiny_kernel.transform(np.vstack([pair, 3 + rng.normal(size=(20, 2))]))[0, 1]
    assert abs(a - b) > 1e-4


def test_pairwise_ablation_ignores_context():
    X, y, g = make_blob_sets(n_sets=10, random_state=0)
    kernel = ContextualKernel(**{**TINY, "n_blocks": 0}).fit(X, y, groups=g)
    rng = np.random.default_rng(0)
    pair = rng.normal(size=(2, 2))
    a = kernel.transform(np.vstack([pair, rng.normal(size=(20, 2))]))[0, 1]
    b = kernel.transform(np.vstack([pair, 3 + rng.normal(size=(20, 2))]))[0, 1]
    assert a == pytest.approx(b, abs=1e-6)


def _blob_sets_at_random_scales(n_sets: int, random_state: int):
    """Blob sets, each multiplied by its own factor in [0.1, 10]: a distance that means "same blob" in one
    set means "different blobs" in another, so only the rest of the set tells which."""
    X, y, g = make_blob_sets(n_sets=n_sets, random_state=random_state)
    scale = 10 ** np.random.default_rng(random_state + 100).uniform(-1, 1, n_sets)
    return X * scale[g][:, None], y, g


def _same_cluster_auc(affinity_of, X, y, g) -> float:
    """ROC AUC of the pair scores ``affinity_of(set)`` for "same cluster", pooled over the pairs of all sets."""
    from sklearn.metrics import roc_auc_score

    same, scores = [], []
    for s in np.unique(g):
        rows = g == s
        pairs = np.triu_indices(rows.sum(), 1)
        same.append((y[rows][:, None] == y[rows][None, :])[pairs])
        scores.append(affinity_of(X[rows])[pairs])
    return roc_auc_score(np.concatenate(same), np.concatenate(scores))


def test_training_learns_same_cluster_structure():
    """On sets where the scale of a cluster is only known from context, ~2 s of training rank same-cluster
    pairs far better than the raw distance and than the same training without the set encoder."""
    X, y, g = _blob_sets_at_random_scales(100, random_state=0)
    params = {**TINY, "d_model": 32, "max_epochs": 16, "sets_per_epoch": 128, "lr": 3e-3}
    kernel = ContextualKernel(**params).fit(X, y, groups=g)
    losses = kernel.net_.history[:, "train_loss"]
    assert losses[-1] < 0.8 * losses[0]
    pairwise = ContextualKernel(**{**params, "n_blocks": 0}).fit(X, y, groups=g)
    Xt, yt, gt = _blob_sets_at_random_scales(10, random_state=1)
    learned = _same_cluster_auc(kernel.transform, Xt, yt, gt)
    distance = _same_cluster_auc(lambda Z: -np.linalg.norm(Z[:, None] - Z[None], axis=-1), Xt, yt, gt)
    no_context = _same_cluster_auc(pairwise.transform, Xt, yt, gt)
    # Measured (random_state 0; 1 and 2 alike): learned 0.820 (0.825, 0.799), pairwise ablation 0.739
    # (0.757, 0.736), negative distance 0.719.  On sets of one scale the raw distance scores 0.954.
    assert learned > distance + 0.05, (learned, distance)
    assert learned > no_context + 0.03, (learned, no_context)


def test_same_random_state_same_affinity(blob_data):
    X, y, g = blob_data
    A1 = ContextualKernel(**TINY).fit(X, y, groups=g).transform(X[:30])
    A2 = ContextualKernel(**TINY).fit(X, y, groups=g).transform(X[:30])
    A3 = ContextualKernel(**{**TINY, "random_state": 1}).fit(X, y, groups=g).transform(X[:30])
    np.testing.assert_array_equal(A1, A2)
    assert not np.allclose(A1, A3)


def test_fit_does_not_touch_global_torch_rng(blob_data):
    import torch

    X, y, g = blob_data
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    ContextualKernel(**TINY).fit(X, y, groups=g)
    np.testing.assert_array_equal(torch.rand(3).numpy(), expected.numpy())


@pytest.mark.parametrize("compat", ["multiplicative", "additive"])
@pytest.mark.parametrize("layer_norm", ["pre", "post"])
def test_variants_fit(blob_data, compat, layer_norm):
    X, y, g = blob_data
    kernel = ContextualKernel(**{**TINY, "compat": compat, "layer_norm": layer_norm}).fit(X, y, groups=g)
    A = kernel.transform(X[:20])
    assert np.isfinite(A).all()


def test_unlabelled_rows_are_not_used_for_training(blob_data, monkeypatch):
    from skabc.sampling import ClusterSetSampler

    X, y, g = blob_data
    y_partial = y.copy()
    y_partial[::2] = -1
    unlabelled = y_partial == -1
    drawn = []
    real_draw = ClusterSetSampler.draw

    def recording_draw(self, rng, set_size=None):
        rows, labels = real_draw(self, rng, set_size)
        drawn.append(rows)
        return rows, labels

    monkeypatch.setattr(ClusterSetSampler, "draw", recording_draw)
    kernel = ContextualKernel(**TINY).fit(X, y_partial, groups=g)
    assert len(drawn) == TINY["sets_per_epoch"] * TINY["max_epochs"]
    rows = np.concatenate(drawn)
    assert not unlabelled[rows].any()
    assert len(np.unique(rows)) > 100  # 225 distinct labelled rows fed the 16 sets
    # Nothing else reads them either: whatever the unlabelled rows hold, training ends with the same weights.
    X_other = X.copy()
    X_other[unlabelled] = np.random.default_rng(0).normal(50.0, 10.0, size=(unlabelled.sum(), X.shape[1]))
    other = ContextualKernel(**TINY).fit(X_other, y_partial, groups=g)
    np.testing.assert_array_equal(other.transform(X[:30]), kernel.transform(X[:30]))


def test_string_labels(blob_data):
    X, y, g = blob_data
    kernel = ContextualKernel(**TINY).fit(X, np.array(["abcd"[i] for i in y]), groups=g)
    assert kernel.transform(X[:5]).shape == (5, 5)


def test_custom_embedder_module_is_not_mutated(blob_data):
    import torch

    X, y, g = blob_data
    embedder = torch.nn.Linear(2, 16)
    before = embedder.weight.detach().clone()
    kernel = ContextualKernel(**{**TINY, "embedder": embedder}).fit(X, y, groups=g)
    torch.testing.assert_close(embedder.weight.detach(), before)
    assert kernel.module_.embedder is not embedder


def test_embedder_factory_builds_the_module_or_is_refused_by_what_it_returned(blob_data):
    """embedder may be a factory (n_features, d_model) -> nn.Module (mutation survivor N3: a factory's module was
    untested, and refusing every module left the suite green)."""
    import torch

    X, y, g = blob_data
    calls = []

    def factory(n_features, d_model):
        calls.append((n_features, d_model))
        return torch.nn.Sequential(torch.nn.Linear(n_features, d_model), torch.nn.Tanh())

    kernel = ContextualKernel(**{**TINY, "embedder": factory}).fit(X, y, groups=g)
    assert calls[0] == (2, TINY["d_model"]) and isinstance(kernel.module_.embedder, torch.nn.Sequential)
    assert kernel.transform(X[:5]).shape == (5, 5)
    with pytest.raises(TypeError, match=r"embedder\(n_features, d_model\) must return an nn.Module, got <class"):
        ContextualKernel(**{**TINY, "embedder": lambda n_features, d_model: torch.tanh}).fit(X, y, groups=g)


def test_embedder_with_wrong_width_is_refused(blob_data):
    import torch

    X, y, g = blob_data
    with pytest.raises(ValueError, match="d_model"):
        ContextualKernel(**{**TINY, "embedder": torch.nn.Linear(2, 5)}).fit(X, y, groups=g)


def test_clone_and_pickle(tiny_kernel):
    X = np.random.default_rng(0).normal(size=(12, 2))
    clone(tiny_kernel)
    restored = pickle.loads(pickle.dumps(tiny_kernel))
    np.testing.assert_array_equal(restored.transform(X), tiny_kernel.transform(X))


def test_save_load_round_trip(tiny_kernel, tmp_path):
    X = np.random.default_rng(0).normal(size=(12, 2))
    path = tmp_path / "kernel.safetensors"
    tiny_kernel.save(path)
    loaded = ContextualKernel.load(path, device="cpu")
    np.testing.assert_array_equal(loaded.transform(X), tiny_kernel.transform(X))
    assert loaded.get_params() == {**tiny_kernel.get_params()}
    # A probe: the network a kernel trained from scratch runs was not reported after loading.
    assert loaded.network_params_ == tiny_kernel.network_params_


def test_device_is_checked_where_it_is_used(tiny_kernel):
    """A probe: 'meta' passed the device check and failed inside torch; a device set after fit was ignored."""
    X = np.random.default_rng(0).normal(size=(12, 2))
    with pytest.raises(ValueError, match="device='meta' holds no data"):
        ContextualKernel(**{**TINY, "device": "meta"}).fit(X, np.repeat([0, 1], 6))
    kernel = pickle.loads(pickle.dumps(tiny_kernel))
    with pytest.raises(ValueError, match=r"device must be 'auto' or a torch device.*got 'tpu9'"):
        kernel.set_params(device="tpu9").transform(X)
    np.testing.assert_array_equal(kernel.set_params(device="cpu").transform(X), tiny_kernel.transform(X))


@pytest.mark.parametrize("forge, match", [
    (lambda d: torch.save({"x": torch.zeros(2)}, d / "params.1.pt"), r"params\.1\.pt.*weights do not fit"),
    (lambda d: torch.save({k: torch.zeros(3, 3) for k in torch.load(d / "params.1.pt")}, d / "params.1.pt"),
     r"params\.1\.pt.*weights do not fit"),
    (lambda d: torch.save({"state": {}, "param_groups": []}, d / "optimizer.1.pt"),
     r"optimizer\.1\.pt.*optimizer state"),
    (lambda d: (d / "history.json").write_text("[{}]"), r"history\.json.*epoch 1 of the history"),
    (lambda d: (d / "history.json").write_text('[{"epoch": 1, "event_cp": false, "batches": [{}]}]'),
     r"records no saved epoch"),
    (lambda d: torch.save({"cpu": torch.zeros(3)}, d / "random_stream.1.pt"),
     r"random_stream\.1\.pt.*not a checkpoint"),
    (lambda d: torch.save({"cpu": torch.zeros(3, dtype=torch.uint8)}, d / "random_stream.1.pt"),
     r"random_stream\.1\.pt.*not a checkpoint"),
    # Probe 58a: these passed the check and failed in torch's AdamW, or in KeepBestWeights, with no file named.
    (lambda d: _forge_optimizer_state(d, "exp_avg", torch.zeros(7, 7)),
     r"optimizer\.1\.pt.*'exp_avg' of parameter 0 has shape \(7, 7\).*another network's"),
    (lambda d: _forge_optimizer_state(d, "step", "1"), r"optimizer\.1\.pt.*'step' of parameter 0 is not a tensor"),
    (lambda d: _forge_optimizer_state(d, "exp_avg_sq", None, parameter=999),
     r"optimizer\.1\.pt.*entry 999 for no parameter"),
    # Probe 63a: torch reads these by name only at the resumed run's first step: its KeyError named no file.
    (lambda d: _forge_optimizer_groups(d, lambda group: group.pop("betas")),
     r"optimizer\.1\.pt.*optimizer state does not work.*KeyError: 'betas'"),
    (lambda d: _forge_optimizer_groups(d, lambda group: group.update(betas="0.9")),
     r"optimizer\.1\.pt.*optimizer state sets betas='0.9', where this configuration's optimizer has \(0.9, 0.999\)"),
    # Note 63 left these: the resumed run ascended the loss, or ran torch's differentiable step, silently.
    (lambda d: _forge_optimizer_groups(d, lambda group: group.update(maximize=True)),
     r"optimizer\.1\.pt.*optimizer state sets maximize=True, where this configuration's optimizer has False"),
    (lambda d: _forge_optimizer_groups(d, lambda group: group.update(differentiable=True)),
     r"optimizer\.1\.pt.*optimizer state sets differentiable=True"),
    (lambda d: _forge_optimizer_groups(d, lambda group: None, lambda state: state.pop("exp_avg")),
     r"optimizer\.1\.pt.*optimizer state does not work.*KeyError: 'exp_avg'"),
    (lambda d: (d / "history.json").write_text(json.dumps([dict(json.loads((d / "history.json").read_text())[0],
                                                                train_loss="0.5")])),
     r"history\.json.*epoch 1 of the history has a train_loss of '0.5', not a finite number"),
    # Review 68b: a NaN loss resumed and trained to the end, then failed as 'training diverged', naming no file.
    (lambda d: (d / "history.json").write_text(json.dumps([dict(json.loads((d / "history.json").read_text())[0],
                                                                train_loss=float("nan"))])),
     r"history\.json.*epoch 1 of the history has a train_loss of nan, not a finite number"),
    # Review 68b: a start record that is no dict failed in the comparison (TypeError, AttributeError).
    (lambda d: (d / "config.json").write_text(json.dumps({**json.loads((d / "config.json").read_text()),
                                                          "_start": 5})),
     r"config\.json.*not the configuration file skabc wrote"),
])
def test_forged_checkpoint_files_are_refused_by_name(blob_data, tmp_path, forge, match):
    """A probe: checkpoint files that unpickle but do not fit the network failed in torch or skorch unnamed."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2, "checkpoint_dir": tmp_path}
    ContextualKernel(**params).fit(X, y, groups=g)
    (tmp_path / "fitted_kernel.safetensors").unlink(missing_ok=True)  # as if interrupted: a fit resumes
    history = json.loads((tmp_path / "history.json").read_text())
    (tmp_path / "history.json").write_text(json.dumps(history[:1]))
    for part in ("params", "optimizer"):  # the checkpoint of epoch 1's files
        (tmp_path / f"{part}.2.pt").rename(tmp_path / f"{part}.1.pt")
    forge(tmp_path)
    with pytest.raises(ValueError, match=match):
        ContextualKernel(**params).fit(X, y, groups=g)


def _forge_optimizer_state(folder, name, value, parameter=0):
    """Set the optimizer state ``name`` of ``parameter`` in the checkpoint of epoch 1 to ``value``."""
    saved = torch.load(folder / "optimizer.1.pt", weights_only=True)
    saved["state"][parameter] = {**saved["state"].get(0, {}), name: value}
    torch.save(saved, folder / "optimizer.1.pt")


def _forge_optimizer_groups(folder, edit_group, edit_state=lambda state: None):
    """Apply ``edit_group`` to every parameter group, ``edit_state`` to every parameter's state, of epoch 1's file."""
    saved = torch.load(folder / "optimizer.1.pt", weights_only=True)
    for group in saved["param_groups"]:
        edit_group(group)
    for state in saved["state"].values():
        edit_state(state)
    torch.save(saved, folder / "optimizer.1.pt")


def test_checkpoint_dir_must_be_a_folder(blob_data, tmp_path, monkeypatch):
    """A probe: a file gave pathlib's FileExistsError; '' wrote the checkpoint into the working folder."""
    X, y, g = blob_data
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        ContextualKernel(**{**TINY, "checkpoint_dir": tmp_path / "afile"}).fit(X, y, groups=g)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="checkpoint_dir is an empty path"):
        ContextualKernel(**{**TINY, "checkpoint_dir": ""}).fit(X, y, groups=g)
    assert not (tmp_path / "history.json").exists()


@pytest.mark.parametrize("name", ["params.2.pt", "best_params.3.pt", "history.json.tmp", "config.json",
                                  "fitted_kernel.safetensors"])
def test_a_folder_where_a_checkpoint_file_goes_is_refused_before_training(blob_data, tmp_path, name):
    """Session 51 left this: a folder named as a later checkpoint's file failed that epoch's write, after the
    training before it, with the system's IsADirectoryError."""
    X, y, g = blob_data
    (tmp_path / name).mkdir()
    (tmp_path / "params.02.pt").mkdir()  # not a name the checkpoint writes: left alone
    with pytest.raises(ValueError, match=rf"holds a folder named as a checkpoint file \('{re.escape(name)}'\)"):
        ContextualKernel(**{**TINY, "max_epochs": 3, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)
    (tmp_path / name).rmdir()
    ContextualKernel(**{**TINY, "max_epochs": 3, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)


def test_load_rejects_non_skabc_files(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x80\x04not a safetensors file")
    with pytest.raises(ValueError, match="safetensors"):
        ContextualKernel.load(bad)
    with pytest.raises(FileNotFoundError):
        ContextualKernel.load(tmp_path / "missing.safetensors")
    for not_a_path in (None, 3):  # review 51b: pathlib's own TypeError named no argument
        with pytest.raises(TypeError, match=r"path must be a str or os\.PathLike naming a saved skabc model"):
            ContextualKernel.load(not_a_path)


@pytest.mark.parametrize("draws", [{}, {"dropout": 0.2}, {"attention": "sampled", "window_size": 8}])
def test_checkpoint_resume_matches_uninterrupted(blob_data, tmp_path, draws):
    """A fit stopped after 1 of 3 epochs and resumed ends with the same weights as one run, also where training
    draws from torch's generator (a probe: dropout masks and attention samples came from a reseeded stream, 1e-3
    apart in the weights; the stream is checkpointed now)."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 3, **draws}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    part_first = ContextualKernel(**{**params, "checkpoint_dir": tmp_path})
    with pytest.warns(RuntimeWarning, match="interrupted after 1 of 3 epochs; the kernel keeps the weights of the "
                                            "best training loss so far"):
        _train_epochs(part_first, X, y, g, epochs=1)
    resumed = ContextualKernel(**{**params, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)
    assert len(resumed.net_.history) == 3
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)


@pytest.mark.parametrize("after_best", [0, 1, 2])
def test_resume_with_validation_keeps_the_best_epoch_and_patience_of_an_uninterrupted_run(
        blob_data, tmp_path, monkeypatch, after_best):
    """Review 51c: a run resumed from its checkpoint forgot the best epoch before the interruption (best score
    reset, patience counted from epoch 0): it kept other weights, or stopped at another epoch, than the same fit
    run in one go.  Scores here are a function of the weights, so both runs see the same sequence; the run is
    interrupted at its best epoch (the checkpoint holds its weights) or after it (a file of their own)."""
    import skabc.training.early_stopping as early_stopping

    def weight_score(module, sets, settings):
        return abs(sum(float(p.double().sum()) for p in module.state_dict().values())) * 1000.0 % 1.0

    monkeypatch.setattr(early_stopping, "score_sets", weight_score)
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 10, "early_stopping": True, "n_iter_no_change": 3}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    scores = [row["valid_ari"] for row in full.net_.history]
    best = max(epoch for epoch, row in enumerate(full.net_.history, start=1) if row["valid_ari_best"])
    stop = best + after_best
    assert best < len(scores) < 10 and stop < len(scores)  # early stopping ended it after the interruption
    with pytest.warns(RuntimeWarning, match=f"interrupted after {stop} of 10 epochs"):
        _train_epochs(ContextualKernel(**params, checkpoint_dir=tmp_path), X, y, g, epochs=stop)
    assert (tmp_path / f"best_params.{stop}.pt").is_file() == (after_best > 0)
    resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert [row["valid_ari"] for row in resumed.net_.history] == scores
    assert resumed.n_training_sets_ == full.n_training_sets_
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)


def test_a_stop_before_its_checkpoint_is_written_leaves_no_newer_best_weights(blob_data, tmp_path, monkeypatch):
    """Review 51e: the best weights were saved when an epoch ended, before skorch's Checkpoint wrote that epoch; a
    max_time stop after the epoch (or early stopping) in between left a file of a later best epoch than the history
    held, and the resume dropped the history's best epoch with a warning (another run than the uninterrupted one)."""
    import skabc.training.early_stopping as early_stopping

    # Scores by distinct weights, in the order first scored (the start first); the same weights score the same in
    # every run below.
    table = [0.0, 0.5, 0.3, 0.2, 0.4, 0.6, 0.1, 0.05, 0.05, 0.05, 0.05]
    seen = {}

    def table_score(module, sets, settings):
        key = tuple(float(p.double().sum()) for p in module.state_dict().values())
        return seen.setdefault(key, table[len(seen)] if len(seen) < len(table) else 0.0)

    monkeypatch.setattr(early_stopping, "score_sets", table_score)
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 9, "early_stopping": True, "n_iter_no_change": 4, "checkpoint_every": 3}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    scores = [(row["valid_ari"], row["valid_ari_best"]) for row in full.net_.history]
    assert [flag for _, flag in scores].count(True) == 2  # epochs 1 and 5 are the best so far
    stop = early_stopping.TimeLimit.on_epoch_end

    def stop_after_six(self, net, **kwargs):  # a stop once epoch 6 is scored, before its checkpoint (early stopping's)
        if len(net.history) == 6:
            self._stop(net, "would be passed by another epoch", after_epoch=True)
        return stop(self, net, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(early_stopping.TimeLimit, "on_epoch_end", stop_after_six)
        stopped = ContextualKernel(**params, max_time=1e9, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert len(stopped.net_.history) == 6
    assert len(json.loads((tmp_path / "history.json").read_text())) == 3
    saved = torch.load(tmp_path / "best_params.3.pt", weights_only=True)
    assert (saved["epoch"], saved["checkpoint"]) == (1, 3) and not (tmp_path / "best_params.6.pt").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert [(row["valid_ari"], row["valid_ari_best"]) for row in resumed.net_.history] == scores
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)


def test_a_max_time_stop_after_an_epoch_writes_that_epochs_checkpoint(blob_data, tmp_path, monkeypatch):
    """Probe 53b: max_time ended a run once an epoch was scored but before the checkpoint callbacks (placed after
    it) wrote that epoch, so the resume trained and scored it again.  It is written first now, and the resume goes
    on from it to the uninterrupted run's weights."""
    import skabc.training.early_stopping as early_stopping

    X, y, g = blob_data
    params = {**TINY, "max_epochs": 9, "early_stopping": True, "n_iter_no_change": 30}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    with monkeypatch.context() as patch:
        clock = iter(np.arange(0.0, 1e6, 1.0))  # every reading one second later: a few epochs fit in 20 s
        patch.setattr(early_stopping.time, "monotonic", lambda: float(next(clock)))
        stopped = ContextualKernel(**params, max_time=20, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    epochs = len(stopped.net_.history)
    assert 1 < epochs < 9 and dict(stopped.net_.callbacks_)["time_limit"].stopped_
    assert len(json.loads((tmp_path / "history.json").read_text())) == epochs
    assert (tmp_path / f"params.{epochs}.pt").is_file() and (tmp_path / f"random_stream.{epochs}.pt").is_file()
    scored = early_stopping.ValidationSetsScoring.on_epoch_end
    trained = []

    def count(self, net, **kwargs):  # once per epoch the resumed run trains
        trained.append(len(net.history))
        return scored(self, net, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(early_stopping.ValidationSetsScoring, "on_epoch_end", count)
        resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert trained == list(range(epochs + 1, 10))
    assert [row["valid_ari"] for row in resumed.net_.history] == [row["valid_ari"] for row in full.net_.history]
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)


def test_a_run_stopped_while_its_checkpoint_is_written_resumes_from_the_one_before(blob_data, tmp_path, monkeypatch):
    """Review 51f: Ctrl-C (or a crash) between skorch's checkpoint files and the best weights' file left a
    checkpoint without its best weights, and the resume dropped its best epoch.  The best weights are written
    first now, one file per checkpoint, and the previous checkpoint's stays until a newer one is written."""
    from skorch.callbacks import Checkpoint

    import skabc.training.early_stopping as early_stopping

    monkeypatch.setattr(early_stopping, "score_sets", lambda module, sets, settings: abs(
        sum(float(p.double().sum()) for p in module.state_dict().values())) * 1000.0 % 1.0)
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 10, "early_stopping": True, "n_iter_no_change": 3}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    best = max(epoch for epoch, row in enumerate(full.net_.history, start=1) if row["valid_ari_best"])
    assert best + 2 < len(full.net_.history)
    # Ctrl-C once the best weights of that epoch are saved, before skorch's files.
    _fit_stopped_in(Checkpoint, best + 2, ContextualKernel(**params, checkpoint_dir=tmp_path), X, y, g, monkeypatch)
    assert len(json.loads((tmp_path / "history.json").read_text())) == best + 1
    assert {f.name for f in tmp_path.glob("best_params.*.pt")} == {f"best_params.{best + 1}.pt",
                                                                  f"best_params.{best + 2}.pt"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert [row["valid_ari"] for row in resumed.net_.history] == [row["valid_ari"] for row in full.net_.history]
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)


def test_a_forged_or_missing_best_weights_file_is_refused_or_said(blob_data, tmp_path, monkeypatch):
    """The best validated weights a resume restores (best_params.<checkpoint>.pt) are read with torch's safe loader
    and must fit the network; a checkpoint without them (written by an earlier version) resumes as before, and says
    so."""
    import skabc.training.early_stopping as early_stopping

    monkeypatch.setattr(early_stopping, "score_sets", lambda module, sets, settings: abs(
        sum(float(p.double().sum()) for p in module.state_dict().values())) * 1000.0 % 1.0)
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 10, "early_stopping": True, "n_iter_no_change": 3}
    with pytest.warns(RuntimeWarning, match="interrupted after 3 of 10 epochs"):
        _train_epochs(ContextualKernel(**params, checkpoint_dir=tmp_path), X, y, g, epochs=3)
    best = tmp_path / "best_params.3.pt"
    saved = torch.load(best, weights_only=True)
    assert 1 <= saved["epoch"] < 3 and saved["checkpoint"] == 3
    nan = {name: torch.full_like(value, float("nan")) if value.is_floating_point() else value
           for name, value in saved["state"].items()}
    for forged, match in (({**saved, "state": {"x": torch.zeros(1)}}, "do not fit"),
                          ({**saved, "state": nan}, "holds NaN or infinite values"),
                          ({"epoch": saved["epoch"], "state": saved["state"]},
                           "not a mapping of 'epoch', 'checkpoint'"),
                          ({**saved, "epoch": 1.0}, "its epoch 1.0 is not a positive integer")):
        torch.save(forged, best)
        with pytest.raises(ValueError, match=r"cannot resume from .*best_params\.3\.pt.*" + match):
            ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    torch.save({**saved, "checkpoint": 2}, best)  # the file of another checkpoint than the history's
    with pytest.warns(UserWarning, match=r"does not hold the weights of its best epoch \(" + str(saved["epoch"])):
        ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    with pytest.warns(RuntimeWarning, match="interrupted after 3 of 10 epochs"):  # the same checkpoint again
        _train_epochs(ContextualKernel(**params, checkpoint_dir=tmp_path / "again"), X, y, g, epochs=3)
    tmp_path = tmp_path / "again"
    (tmp_path / "best_params.3.pt").unlink()
    with pytest.warns(UserWarning, match=r"does not hold the weights of its best epoch \(" + str(saved["epoch"])):
        ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)


def test_a_checkpoint_of_an_earlier_version_resumes_from_its_single_random_stream(blob_data, tmp_path):
    """Checkpoints now keep one random stream per checkpoint (random_stream.<epoch>.pt: a stop while skorch writes
    its files leaves the previous checkpoint's); one written before, with a single random_stream.pt, resumes from it
    as it did."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 3, "dropout": 0.2}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    with pytest.warns(RuntimeWarning, match="interrupted after 2 of 3 epochs"):
        _train_epochs(ContextualKernel(**params, checkpoint_dir=tmp_path), X, y, g, epochs=2)
    assert {f.name for f in tmp_path.glob("random_stream*")} == {"random_stream.1.pt", "random_stream.2.pt"}
    (tmp_path / "random_stream.2.pt").rename(tmp_path / "random_stream.pt")
    (tmp_path / "random_stream.1.pt").unlink()
    resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)
    assert not (tmp_path / "random_stream.pt").exists()  # review 52a: stale once a newer checkpoint has its own


def test_a_stop_while_the_random_stream_is_saved_resumes_with_the_stream_of_its_checkpoint(
        blob_data, tmp_path, monkeypatch):
    """Review 51f: the random stream was saved after skorch's checkpoint files, so a stop between the two left a
    checkpoint with the previous epoch's stream (other dropout masks after the resume)."""
    from skabc.training.callbacks import RandomStreamCheckpoint

    X, y, g = blob_data
    params = {**TINY, "max_epochs": 4, "dropout": 0.2}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    stopped = ContextualKernel(**params, checkpoint_dir=tmp_path)
    _fit_stopped_in(RandomStreamCheckpoint, 3, stopped, X, y, g, monkeypatch)
    resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)


def test_files_named_like_a_checkpoints_own_are_left_alone_and_bad_streams_refused(blob_data, tmp_path):
    """Review 51g: pruning the per-checkpoint files read 'random_stream.02.pt' as epoch 2 and deleted the live
    'random_stream.2.pt', crashed on a folder or on 'random_stream.\u00b2.pt' so named, and a stream file of garbage
    or of an invalid generator state failed in torch's words (struct.error, 'Invalid mt19937 state')."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 3, "dropout": 0.2}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    (tmp_path / "random_stream.02.pt").write_bytes(b"not ours")
    (tmp_path / "random_stream.0.pt").mkdir()
    (tmp_path / "random_stream.\u00b2.pt").write_bytes(b"not ours either")
    with pytest.warns(RuntimeWarning, match="interrupted after 2 of 3 epochs"):
        _train_epochs(ContextualKernel(**params, checkpoint_dir=tmp_path), X, y, g, epochs=2)
    assert (tmp_path / "random_stream.1.pt").is_file() and (tmp_path / "random_stream.2.pt").is_file()
    resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)
    history = json.loads((tmp_path / "history.json").read_text())
    (tmp_path / "fitted_kernel.safetensors").unlink()  # as if interrupted after epoch 2: a fit resumes
    (tmp_path / "history.json").write_text(json.dumps(history[:2]))
    for part in ("params", "optimizer"):  # the checkpoint of epoch 2's files
        (tmp_path / f"{part}.3.pt").rename(tmp_path / f"{part}.2.pt")
    stream = tmp_path / "random_stream.2.pt"
    invalid = torch.zeros_like(torch.get_rng_state())
    for content in (b"junk", None):
        if content is None:
            torch.save({"cpu": invalid}, stream)
        else:
            stream.write_bytes(content)
        with pytest.raises(ValueError, match=r"cannot resume from .*random_stream\.2\.pt"):
            ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)


@pytest.mark.parametrize("truncated", [False, True])
def test_a_stop_inside_skorchs_checkpoint_resumes_from_the_one_before(blob_data, tmp_path, monkeypatch, truncated):
    """Session 51 left this: skorch wrote the weights, the optimizer state and the history one after the other, in
    place, so Ctrl-C before the history (or while it was written) left the weights of epoch 3 beside the history
    of epoch 2, and the resume trained on from that mix silently (other weights than one run), or found a broken
    history.  Each checkpoint has its own weight files now, every file is written whole, the history last."""
    import skorch

    X, y, g = blob_data
    params = {**TINY, "max_epochs": 4, "dropout": 0.2}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    original = skorch.NeuralNet.save_params

    def stopped(self, **files):
        if "f_history" in files and len(self.history) == 3:
            if truncated:  # killed halfway through the history's write
                Path(files["f_history"]).write_text('[{"epoch": 1, "batches": [')
            raise KeyboardInterrupt
        return original(self, **files)

    with monkeypatch.context() as patch:
        patch.setattr(skorch.NeuralNet, "save_params", stopped)
        with pytest.warns(RuntimeWarning, match="interrupted"):
            ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert len(json.loads((tmp_path / "history.json").read_text())) == 2
    assert (tmp_path / "history.json.tmp").is_file() == truncated
    resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert len(resumed.net_.history) == 4 and not list(tmp_path.glob("*.tmp"))
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)
    # Only the last checkpoint's weight files stay.
    assert {f.name for f in tmp_path.glob("*.pt") if not f.name.startswith("random_stream")} == {
        "params.4.pt", "optimizer.4.pt"}


def test_a_stop_inside_the_last_checkpoint_leaves_no_partial_files(blob_data, tmp_path, monkeypatch):
    """Review 52a: a run stopped while its last epoch's checkpoint was written is complete (its kernel is kept and
    restored), so nothing rewrote the partial file the stop left (history.json.tmp): it stayed for good."""
    import skorch

    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2}
    original = skorch.NeuralNet.save_params

    def stopped(self, **files):
        if "f_history" in files and len(self.history) == 2:
            Path(files["f_history"]).write_text("[")
            raise KeyboardInterrupt
        return original(self, **files)

    with monkeypatch.context() as patch:
        patch.setattr(skorch.NeuralNet, "save_params", stopped)
        ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert list(tmp_path.glob("*.tmp"))
    (tmp_path / "notes.tmp").write_text("the user's")
    ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert [f.name for f in tmp_path.glob("*.tmp")] == ["notes.tmp"]


def test_files_of_the_user_and_stale_files_of_an_earlier_layout(blob_data, tmp_path, monkeypatch):
    """Review 52c: pruning deleted the user's 'params.0.pt' (epoch 0 is never a checkpoint's); an earlier version's
    single files stayed for good where a stop fell between the history's write and their removal in a run's last
    checkpoint (and a later loss of the tagged file would have resumed from them)."""
    import skabc.training.early_stopping as early_stopping

    monkeypatch.setattr(early_stopping, "score_sets", lambda module, sets, settings: abs(
        sum(float(p.double().sum()) for p in module.state_dict().values())) * 1000.0 % 1.0)
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 4, "dropout": 0.2, "early_stopping": True, "n_iter_no_change": 4}
    users = ["params.0.pt", "optimizer.0.pt", "random_stream.0.pt", "best_params.0.pt"]
    for name in users:
        (tmp_path / name).write_bytes(b"the user's")
    ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    assert all((tmp_path / name).read_bytes() == b"the user's" for name in users)
    for name in ("params.pt", "optimizer.pt", "random_stream.pt"):  # as a stop before their removal leaves them
        (tmp_path / name).write_bytes(b"stale")
    ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)  # restores the finished run
    assert not any((tmp_path / name).exists() for name in ("params.pt", "optimizer.pt", "random_stream.pt"))


def test_a_checkpoint_of_an_earlier_version_resumes_from_its_single_weight_files(blob_data, tmp_path):
    """Folders written before the weights had a file per checkpoint hold one params.pt and optimizer.pt: they
    resume from those as they did, and the next checkpoint replaces them."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 3, "dropout": 0.2}
    full = ContextualKernel(**params).fit(X, y, groups=g)
    with pytest.warns(RuntimeWarning, match="interrupted after 2 of 3 epochs"):
        _train_epochs(ContextualKernel(**params, checkpoint_dir=tmp_path), X, y, g, epochs=2)
    for part in ("params", "optimizer"):
        (tmp_path / f"{part}.2.pt").rename(tmp_path / f"{part}.pt")
    resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=g)
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)
    assert not (tmp_path / "params.pt").exists() and (tmp_path / "params.3.pt").is_file()


def test_a_checkpoint_that_cannot_be_written_stops_the_fit(blob_data, tmp_path, monkeypatch):
    """skorch's Checkpoint printed a failed write and trained on, leaving a folder that could not resume the run
    (or resumed an older one); the error now ends the fit, naming nothing but what the system said."""
    import skorch

    def full_disk(self, **files):
        raise OSError(28, "No space left on device")

    X, y, g = blob_data
    monkeypatch.setattr(skorch.NeuralNet, "save_params", full_disk)
    with pytest.raises(OSError, match="No space left"):
        ContextualKernel(**{**TINY, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)


def _fit_stopped_in(callback: type, epoch: int, kernel, X, y, g, monkeypatch) -> None:
    """Fit ``kernel`` with a Ctrl-C raised as ``callback`` begins its work at the end of epoch ``epoch``."""
    original = callback.on_epoch_end

    def stopped(self, net, **kwargs):
        if len(net.history) == epoch:
            raise KeyboardInterrupt
        return original(self, net, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(callback, "on_epoch_end", stopped)
        with pytest.warns(RuntimeWarning, match="interrupted"):
            kernel.fit(X, y, groups=g)


def _train_epochs(kernel, X, y, g, epochs):
    """Run only the first ``epochs`` epochs of a fit (simulates a run killed after them)."""
    import skorch

    original = skorch.NeuralNet.partial_fit

    def limited(self, *args, epochs=None, **kwargs):
        return original(self, *args, epochs=min(epochs, limit), **kwargs)

    limit = epochs
    skorch.NeuralNet.partial_fit = limited
    try:
        kernel.fit(X, y, groups=g)
    finally:
        skorch.NeuralNet.partial_fit = original


def test_checkpoint_of_other_configuration_is_refused(blob_data, tmp_path):
    X, y, g = blob_data
    ContextualKernel(**{**TINY, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)
    with pytest.raises(ValueError, match=r"different configuration \(d_model=16 there, 8 here\)"):
        ContextualKernel(**{**TINY, "d_model": 8, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)


@pytest.mark.parametrize("damage", ["truncate", "empty", "binary", "list", "delete"])
def test_a_damaged_checkpoint_configuration_is_named(blob_data, tmp_path, damage):
    """A probe: a damaged config.json was reported as "a checkpoint of a different configuration"."""
    X, y, g = blob_data
    ContextualKernel(**{**TINY, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)
    config = tmp_path / "config.json"
    text = config.read_text()
    {"truncate": lambda: config.write_text(text[: len(text) // 2]), "empty": lambda: config.write_text(""),
     "binary": lambda: config.write_bytes(b"\xff\xfe\x00"), "list": lambda: config.write_text("[1, 2]"),
     "delete": config.unlink}[damage]()
    with pytest.raises(ValueError, match=r"cannot resume from '.*config\.json'.*not the configuration file"):
        ContextualKernel(**{**TINY, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)


def test_checkpoint_of_other_data_is_refused(blob_data, tmp_path, capsys):
    """A probe: the same configuration fitted on other data returned the checkpoint's weights, silently."""
    X, y, g = blob_data
    first = ContextualKernel(**{**TINY, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)
    with pytest.warns(UserWarning, match="the kernel that run fitted is restored"):
        again = ContextualKernel(**{**TINY, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)
    np.testing.assert_array_equal(again.transform(X[:30]), first.transform(X[:30]))
    for other in ((X[::-1], y, g), (X, y[::-1], g), (X, y, g[::-1])):
        with pytest.raises(ValueError, match="trained on other data"):
            ContextualKernel(**{**TINY, "checkpoint_dir": tmp_path}).fit(other[0], other[1], groups=other[2])


@pytest.mark.parametrize("validated", [True, False])
def test_a_checkpoint_of_another_early_stopping_names_it(blob_data, tmp_path, validated):
    """Probe 63a: switching early_stopping alone was refused as "trained on other data (X, y or groups differ ...)":
    the held-out rows change the training labels, and the message never named what changed."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2, "validation_fraction": 0.3, "checkpoint_dir": tmp_path}
    ContextualKernel(**params, early_stopping=validated).fit(X, y, groups=g)
    said = "with held-out validation rows, and this fit has none" if validated else "without held-out validation"
    with pytest.raises(ValueError, match=rf"holds a run trained {said}.*early_stopping differs"):
        ContextualKernel(**params, early_stopping=not validated).fit(X, y, groups=g)
    with pytest.raises(ValueError, match="trained on other data"):  # other data, validated alike: as before
        ContextualKernel(**params, early_stopping=validated).fit(X[::-1], y, groups=g)


def test_checkpoint_with_other_validation_labels_is_refused(blob_data, tmp_path):
    """Left open in session 47: the data digest read the training labels, where held-out rows are -1, so labels
    changed on the held-out rows alone (other validation sets, other early stopping) restored the old run."""
    from skabc.training.plan import plan_training

    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2, "early_stopping": True, "validation_fraction": 0.3, "checkpoint_dir": tmp_path}
    ContextualKernel(**params).fit(X, y, groups=g)
    plan = plan_training(ContextualKernel(**params), X.astype(np.float32), y.astype(np.int64), g.astype(np.int64))
    held_out = (plan.train_labels < 0) & (y >= 0)
    assert held_out.any()
    relabelled = y.copy()
    relabelled[held_out] = 0  # every held-out group one cluster: the training rows and their labels are unchanged
    assert not np.array_equal(relabelled, y)
    with pytest.raises(ValueError, match="trained on other data"):
        ContextualKernel(**params).fit(X, relabelled, groups=g)
    with pytest.warns(UserWarning, match="nothing is trained"):  # the same labels still restore the run
        ContextualKernel(**params).fit(X, y, groups=g)
    config = tmp_path / "config.json"
    saved = json.loads(config.read_text())
    assert saved.pop("_validation") is not None
    config.write_text(json.dumps(saved))  # a checkpoint of an earlier version, which did not record them
    kept = tmp_path / "fitted_kernel.safetensors"
    forge(kept, read_meta(kept), read_tensors(kept))  # nor the run its kept kernel ends (probe 58a)
    with pytest.warns(UserWarning, match="nothing is trained"):  # resumes as it did
        ContextualKernel(**params).fit(X, relabelled, groups=g)


def test_resumed_fine_tune_mixes_with_the_true_start(tmp_path):
    """A probe: a fine-tune resumed from its checkpoint mixed with the checkpoint's weights, not the generic
    start (fine_tune_alpha_ 0.5 reported, the weights of 1.0 returned)."""
    from skabc.datasets import make_circles_sets

    X, y, _ = make_circles_sets(n_sets=6, set_size=40, random_state=0)
    params = dict(max_epochs=2, sets_per_epoch=4, batch_size=4, set_size=(20, 40), random_state=0, device="cpu")
    full = ContextualKernel(**params).fit(X, y)
    assert full.fine_tune_alpha_ == 0.5 and full.validation_score_ is None
    first = ContextualKernel(**params, checkpoint_dir=tmp_path)
    with pytest.warns(RuntimeWarning, match="interrupted after 1 of 2 epochs"):
        _train_epochs(first, X, y, None, epochs=1)
    resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y)
    np.testing.assert_allclose(resumed.transform(X[:40]), full.transform(X[:40]), atol=1e-5)
    with pytest.warns(UserWarning, match=r"holds a finished run of this configuration \(2 of 2 epochs\)"):
        finished = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y)  # nothing left to train
    np.testing.assert_allclose(finished.transform(X[:40]), full.transform(X[:40]), atol=1e-5)
    # warm_start on a finished checkpoint trained nothing, silently: the user believed they had fine-tuned.
    with pytest.warns(UserWarning, match="nothing is trained, the kernel that run fitted is restored"):
        finished.set_params(warm_start=True).fit(X, y)


def test_interrupted_run_resumed_from_another_start_is_refused(tmp_path):
    """A probe: an interrupted fine-tune of the generic kernel resumed under init='scratch' (the same network)
    and returned weights of neither start; the start is part of the checkpoint now."""
    from skabc.datasets import make_circles_sets
    from skabc.training.plan import generic_network_params

    X, y, _ = make_circles_sets(n_sets=6, set_size=40, random_state=0)
    params = dict(max_epochs=2, sets_per_epoch=4, batch_size=4, set_size=(20, 40), random_state=0, device="cpu")
    first = ContextualKernel(**params, checkpoint_dir=tmp_path)
    with pytest.warns(RuntimeWarning, match="interrupted after 1 of 2 epochs"):
        _train_epochs(first, X, y, None, epochs=1)
    assert first.init_ == "generic"
    other = ContextualKernel(**params, **generic_network_params(), init="scratch", checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match=r"started otherwise .*init_='generic' there, 'scratch' here"):
        other.fit(X, y)


def test_interrupted_warm_start_is_not_resumed_by_a_fresh_fit(blob_data, tmp_path):
    """Review 47c: a warm start recorded no start, so a fresh fit resumed its interrupted run (the fitted
    kernel's weights trained on, reported as init_='scratch')."""
    X, y, g = blob_data
    fitted = ContextualKernel(**{**TINY, "max_epochs": 3}).fit(X, y, groups=g)
    fitted.set_params(warm_start=True, checkpoint_dir=tmp_path)
    with pytest.warns(RuntimeWarning, match="interrupted after 1 of 3 epochs"):
        _train_epochs(fitted, X, y, g, epochs=1)
    fresh = ContextualKernel(**{**TINY, "max_epochs": 3, "checkpoint_dir": tmp_path})
    with pytest.raises(ValueError, match=r"started otherwise \(init_='warm_start' there, 'scratch' here\)"):
        fresh.fit(X, y, groups=g)


def _learning_sets():
    """Blob sets a small network learns from in a few epochs, starting from one that has not: validation scores
    that move, unlike TINY's on blob_data."""
    from sklearn.datasets import make_blobs

    rng = np.random.default_rng(0)
    sets = [make_blobs(60, centers=int(rng.integers(2, 5)), cluster_std=0.6, center_box=(-4, 4),
                       random_state=int(rng.integers(10**6))) for _ in range(12)]
    X, y = np.vstack([s[0] for s in sets]) / 3.0, np.concatenate([s[1] for s in sets])
    params = {**TINY, "d_model": 32, "set_size": (20, 40), "sets_per_epoch": 64, "embedder": "fourier"}
    base = ContextualKernel(**{**params, "max_epochs": 1, "lr": 1e-4}).fit(X, y, groups=np.repeat(np.arange(12), 60))
    tune = {"warm_start": True, "max_epochs": 4, "early_stopping": True, "n_iter_no_change": 4, "lr": 5e-3}
    return X, y, np.repeat(np.arange(12), 60), base, tune


def _same_run(resumed, full) -> None:
    assert [row["valid_ari"] for row in resumed.net_.history] == [row["valid_ari"] for row in full.net_.history]
    assert resumed.start_validation_score_ == full.start_validation_score_
    assert resumed.validation_settings_scores_ == full.validation_settings_scores_
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)


def test_an_interrupted_warm_start_resumes_from_its_own_start(tmp_path, monkeypatch):
    """Probe 63a: the stopped fit leaves its result on the kernel, and the resume (fit again, as the warning says)
    took that for the start: the start competed and scored as the interrupted result, with its clustering
    settings, so the resumed run scored and stopped otherwise than the run that was not interrupted.  The start is
    kept in the folder (start.pt, its settings in config.json) and read back."""
    import copy

    from skorch.callbacks import Checkpoint

    X, y, g, base, tune = _learning_sets()
    full = copy.deepcopy(base).set_params(**tune).fit(X, y, groups=g)
    assert len({row["valid_ari"] for row in full.net_.history} | {full.start_validation_score_}) > 2
    stopped = copy.deepcopy(base).set_params(**tune, checkpoint_dir=tmp_path)
    _fit_stopped_in(Checkpoint, 3, stopped, X, y, g, monkeypatch)  # the checkpoint of epoch 2 is on disk
    assert (tmp_path / "start.pt").is_file()
    stopped.fit(X, y, groups=g)
    _same_run(stopped, full)
    torch.save({"x": torch.zeros(2)}, tmp_path / "start.pt")  # forged: refused by name
    (tmp_path / "fitted_kernel.safetensors").unlink()
    with pytest.raises(ValueError, match=r"start\.pt.*not the start of a warm-start run.*weights do not fit"):
        copy.deepcopy(base).set_params(**tune, checkpoint_dir=tmp_path).fit(X, y, groups=g)


def test_a_warm_start_stopped_early_lost_start_or_other_network(tmp_path, monkeypatch):
    """Review 63: a warm start stopped before its first checkpoint began again at the interrupted result (and wrote
    it over start.pt); a folder whose start.pt was lost resumed from that result in silence; a folder of another
    network's warm start blamed its start.pt where the configuration differs."""
    import copy

    from skorch.callbacks import Checkpoint

    X, y, g, base, tune = _learning_sets()
    full = copy.deepcopy(base).set_params(**tune).fit(X, y, groups=g)
    early = copy.deepcopy(base).set_params(**tune, checkpoint_dir=tmp_path / "a", checkpoint_every=2)
    _fit_stopped_in(Checkpoint, 1, early, X, y, g, monkeypatch)
    assert not (tmp_path / "a" / "history.json").exists() and (tmp_path / "a" / "start.pt").is_file()
    early.fit(X, y, groups=g)
    _same_run(early, full)
    lost = copy.deepcopy(base).set_params(**tune, checkpoint_dir=tmp_path / "b")
    _fit_stopped_in(Checkpoint, 3, lost, X, y, g, monkeypatch)
    (tmp_path / "b" / "start.pt").unlink()
    with pytest.raises(ValueError, match=r"holds this warm-start run without the start it began at \(start\.pt\)"):
        lost.fit(X, y, groups=g)
    other = ContextualKernel(**{**TINY, "max_epochs": 1}).fit(X, y, groups=g).set_params(**tune,
                                                                                        checkpoint_dir=tmp_path / "b")
    with pytest.raises(ValueError, match=r"different configuration \(.*d_model=32 there, 16 here"):
        other.fit(X, y, groups=g)


def test_a_configuration_compares_numbers_by_value(blob_data, tmp_path):
    """Review 47c: weight_decay 0 then 0.0 was refused with empty parentheses; probe 58a: it was refused at all
    (the configuration compared JSON text), though both train alike.  A value that differs is still named."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2, "weight_decay": 0, "pos_weight": 1, "checkpoint_dir": tmp_path}
    with pytest.warns(RuntimeWarning, match="interrupted after 1 of 2 epochs"):
        _train_epochs(ContextualKernel(**params), X, y, g, epochs=1)
    resumed = ContextualKernel(**{**params, "weight_decay": 0.0, "pos_weight": 1.0}).fit(X, y, groups=g)
    assert len(resumed.net_.history) == 2
    with pytest.raises(ValueError, match=r"different configuration \(weight_decay=0 there, 0.1 here\)"):
        ContextualKernel(**{**params, "weight_decay": 0.1}).fit(X, y, groups=g)
    from skabc.training.checkpoints import _same

    assert not _same({"compat": True}, {"compat": 1}) and _same({"lr": [1, 2.5]}, {"lr": (1.0, 2.5)})


def test_a_random_state_instance_resumes_only_the_state_it_began_with(blob_data, tmp_path):
    """Probe 58a: a RandomState was described by its class alone, so a run of RandomState(0) resumed under
    RandomState(5) (or an instance an earlier fit had drawn from) and returned weights of neither seed."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2, "checkpoint_dir": tmp_path}
    full = ContextualKernel(**{**TINY, "max_epochs": 2, "random_state": np.random.RandomState(0)}).fit(X, y, groups=g)
    reused = np.random.RandomState(0)
    with pytest.warns(RuntimeWarning, match="interrupted after 1 of 2 epochs"):
        _train_epochs(ContextualKernel(**{**params, "random_state": reused}), X, y, g, epochs=1)
    for other in (np.random.RandomState(5), reused):  # another seed; the instance that fit drew from
        with pytest.raises(ValueError, match=r"different configuration \(random_state='RandomState:\w+' there"):
            ContextualKernel(**{**params, "random_state": other}).fit(X, y, groups=g)
    resumed = ContextualKernel(**{**params, "random_state": np.random.RandomState(0)}).fit(X, y, groups=g)
    assert len(resumed.net_.history) == 2
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, full.module_.state_dict()[name], rtol=0, atol=0)


def test_random_state_none_with_a_checkpoint_dir_is_refused_before_training(blob_data, tmp_path):
    """Probe 58a: every fit with random_state=None drew other sets (and held-out rows, so a validated run's
    checkpoint was refused as other data only once it had been interrupted); refused at the first fit, as
    KernelEnsemble refuses it."""
    X, y, g = blob_data
    with pytest.raises(ValueError, match=r"random_state=None draws other training sets on every fit.*set "
                                         r"random_state to an int"):
        ContextualKernel(**{**TINY, "random_state": None, "checkpoint_dir": tmp_path}).fit(X, y, groups=g)
    assert not any(tmp_path.iterdir())


def test_a_run_resumes_only_with_its_early_stopping_patience(blob_data, tmp_path):
    """Probe 58a: n_iter_no_change was in neither the configuration nor the start, so a validated run interrupted
    with patience 5 resumed with patience 2 and stopped where neither run would."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 3, "early_stopping": True, "validation_fraction": 0.3, "n_iter_no_change": 5,
              "checkpoint_dir": tmp_path}
    with pytest.warns(RuntimeWarning, match="interrupted after 1 of 3 epochs"):
        _train_epochs(ContextualKernel(**params), X, y, g, epochs=1)
    with pytest.raises(ValueError, match=r"validated with n_iter_no_change=5 \(2 here\).*Set n_iter_no_change=5"):
        ContextualKernel(**{**params, "n_iter_no_change": 2}).fit(X, y, groups=g)
    config = tmp_path / "config.json"
    saved = json.loads(config.read_text())
    assert saved.pop("_patience") == 5
    config.write_text(json.dumps(saved))  # a checkpoint of an earlier version, which did not record it
    assert len(ContextualKernel(**{**params, "n_iter_no_change": 2}).fit(X, y, groups=g).net_.history) >= 2


def test_a_numpy_integer_patience_is_recorded_with_the_checkpoint(blob_data, tmp_path):
    """Review 58r: the recorded patience was the parameter as given, and np.int64(3) (IntRange takes it) is no
    JSON: the first fit with a checkpoint_dir failed with a TypeError."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2, "early_stopping": True, "validation_fraction": 0.3,
              "n_iter_no_change": np.int64(3), "checkpoint_dir": tmp_path}
    ContextualKernel(**params).fit(X, y, groups=g)
    assert json.loads((tmp_path / "config.json").read_text())["_patience"] == 3


def test_a_kept_kernel_of_another_run_is_refused(blob_data, tmp_path):
    """Probe 58a: the kept fitted_kernel.safetensors recorded no run, so another folder's (the same configuration
    on other data) restored silently; removing it derives the kernel again, and a file without the record (an
    earlier version's) is restored as before."""
    X, y, g = blob_data
    params = {**TINY, "checkpoint_dir": tmp_path / "a"}
    first = ContextualKernel(**params).fit(X, y, groups=g)
    ContextualKernel(**{**params, "checkpoint_dir": tmp_path / "b"}).fit(X[::-1], y[::-1], groups=g[::-1])
    kept = tmp_path / "a" / "fitted_kernel.safetensors"
    shutil.copy(tmp_path / "b" / "fitted_kernel.safetensors", kept)
    with pytest.raises(ValueError, match=r"holds a kept kernel \(fitted_kernel\.safetensors\) that another run "
                                         r"fitted.*remove that file to derive the kernel again"):
        ContextualKernel(**params).fit(X, y, groups=g)
    kept.unlink()
    with pytest.warns(UserWarning, match="the kernel is re-derived"):
        again = ContextualKernel(**params).fit(X, y, groups=g)
    np.testing.assert_array_equal(again.transform(X[:30]), first.transform(X[:30]))
    first.save(kept)  # no record of its run, as an earlier version kept it
    with pytest.warns(UserWarning, match="the kernel that run fitted is restored"):
        ContextualKernel(**params).fit(X, y, groups=g)


def test_restored_run_keeps_this_fits_column_names(blob_data, tmp_path):
    """A probe: restoring a finished run took that run's feature_names_in_ (renamed columns hold the same data),
    and the kernel refused the frame it had just been fitted on."""
    pd = pytest.importorskip("pandas")
    X, y, g = blob_data
    params = {**TINY, "checkpoint_dir": tmp_path}
    ContextualKernel(**params).fit(pd.DataFrame(X, columns=["a", "b"]), y, groups=g)
    renamed = pd.DataFrame(X, columns=["p", "q"])
    with pytest.warns(UserWarning, match="restored"):
        kernel = ContextualKernel(**params).fit(renamed, y, groups=g)
    assert list(kernel.feature_names_in_) == ["p", "q"]
    assert kernel.transform(renamed.iloc[:30]).shape == (30, 30)
    with pytest.warns(UserWarning, match="restored"):
        plain = ContextualKernel(**params).fit(X, y, groups=g)
    assert not hasattr(plain, "feature_names_in_")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain.transform(X[:30])


def test_restored_run_counts_the_epochs_it_trained(blob_data, tmp_path):
    """A probe: with checkpoint_every=2 the last checkpoint of a 3-epoch run holds 2 epochs, and the restore
    said '2 of 3 epochs, stopped early' of a run that trained all 3."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 3, "checkpoint_dir": tmp_path, "checkpoint_every": 2}
    ContextualKernel(**params).fit(X, y, groups=g)
    with pytest.warns(UserWarning, match=r"\(3 of 3 epochs\): nothing is trained"):
        ContextualKernel(**params).fit(X, y, groups=g)


def test_an_early_stopped_run_is_restored_whatever_checkpoint_every(blob_data, tmp_path):
    """Review 47c: early stopping ends a run before the checkpoint's turn (the validation runs first), so a run
    stopped before its first save left no history, and every later fit of it trained it again; it is known by
    its configuration file now.  Probe 63a: another configuration, or other data, wrote over that folder (and
    deleted its kept kernel) where a folder with a history refuses them; they are refused alike now."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 12, "early_stopping": True, "n_iter_no_change": 1, "checkpoint_every": 3,
              "validation_fraction": 0.3, "checkpoint_dir": tmp_path}
    first = ContextualKernel(**params).fit(X, y, groups=g)
    trained = len(first.net_.history)
    assert trained < 3 and not (tmp_path / "history.json").exists()  # stopped before its first save
    with pytest.warns(UserWarning, match=rf"\({trained} of 12 epochs, stopped early\): nothing is trained"):
        again = ContextualKernel(**params).fit(X, y, groups=g)
    assert not hasattr(again, "net_")
    np.testing.assert_array_equal(again.transform(X[:30]), first.transform(X[:30]))
    kept = (tmp_path / "fitted_kernel.safetensors").read_bytes()
    with pytest.raises(ValueError, match=r"different configuration \(lr"):
        ContextualKernel(**{**params, "lr": 2e-3}).fit(X, y, groups=g)
    with pytest.raises(ValueError, match="trained on other data"):
        ContextualKernel(**params).fit(X[::-1], y, groups=g)
    assert (tmp_path / "fitted_kernel.safetensors").read_bytes() == kept  # the finished run is still there
    with pytest.warns(UserWarning, match="nothing is trained"):
        ContextualKernel(**params).fit(X, y, groups=g)


def test_a_damaged_kept_kernel_is_named_with_what_to_do(blob_data, tmp_path):
    """Review 47g: a damaged fitted_kernel.safetensors gave the loader's error alone, not where it lies or that
    removing it trains again."""
    X, y, g = blob_data
    params = {**TINY, "checkpoint_dir": tmp_path}
    ContextualKernel(**params).fit(X, y, groups=g)
    (tmp_path / "fitted_kernel.safetensors").write_bytes(b"\x00" * 4)
    with pytest.raises(ValueError, match=r"holds a kept kernel \(fitted_kernel.safetensors\) that cannot be read: "
                                         r".*remove the directory \(or use another\) to train again"):
        ContextualKernel(**params).fit(X, y, groups=g)
    shutil.rmtree(tmp_path)
    assert hasattr(ContextualKernel(**params).fit(X, y, groups=g), "net_")  # as the message says: it trains


def test_max_time_is_resolved_to_a_float(blob_data):
    X, y, g = blob_data
    kernel = ContextualKernel(**{**TINY, "max_time": 600}).fit(X, y, groups=g)
    assert type(kernel.max_time_) is float and kernel.max_time_ == 600.0


def test_resumed_validated_fine_tune_scores_the_true_start(tmp_path):
    """With held-out groups, a resumed run scored the checkpoint's weights as its start."""
    from skabc.datasets import make_circles_sets

    X, y, groups = make_circles_sets(n_sets=10, set_size=40, random_state=0)
    params = dict(max_epochs=2, sets_per_epoch=4, batch_size=4, set_size=(20, 40), random_state=0, device="cpu",
                  early_stopping=True, n_iter_no_change=5)
    full = ContextualKernel(**params).fit(X, y, groups=groups)
    first = ContextualKernel(**params, checkpoint_dir=tmp_path)
    with pytest.warns(RuntimeWarning, match="interrupted after 1 of 2 epochs"):
        _train_epochs(first, X, y, groups, epochs=1)
    resumed = ContextualKernel(**params, checkpoint_dir=tmp_path).fit(X, y, groups=groups)
    assert resumed.start_validation_score_ == pytest.approx(full.start_validation_score_, abs=1e-9)
    assert resumed.validation_score_ >= resumed.start_validation_score_


def test_a_finished_validated_run_refitted_returns_the_kernel_it_fitted(tmp_path):
    """A probe: fitting again on a finished run's checkpoint re-derived the result from no epochs and returned
    the starting (generic) weights, where the run had kept a trained, mixed epoch."""
    from skabc.datasets import make_circles_sets
    from skabc.pretrained import load

    X, y, groups = make_circles_sets(n_sets=10, set_size=40, random_state=0)
    params = dict(max_epochs=2, sets_per_epoch=4, batch_size=4, set_size=(20, 40), random_state=0, device="cpu",
                  early_stopping=True, checkpoint_dir=tmp_path)
    first = ContextualKernel(**params).fit(X, y, groups=groups)
    generic = load("generic").set_params(device="cpu").transform(X[:40])
    assert not np.allclose(first.transform(X[:40]), generic, atol=1e-4)  # the run kept trained weights
    with pytest.warns(UserWarning, match=r"finished run of this configuration \(2 of 2 epochs\): nothing is trained"):
        again = ContextualKernel(**params).fit(X, y, groups=groups)
    np.testing.assert_array_equal(again.transform(X[:40]), first.transform(X[:40]))
    assert again.recommended_clustering() == first.recommended_clustering()
    assert again.validation_score_ == first.validation_score_ and again.n_training_sets_ == first.n_training_sets_
    # A run cut short by max_time is not finished: no kernel is kept, a later fit resumes it.
    timed = ContextualKernel(**{**params, "checkpoint_dir": tmp_path / "timed", "max_time": 1e-6}).fit(X, y)
    assert timed.n_training_sets_ < 8 and not (tmp_path / "timed" / "fitted_kernel.safetensors").exists()


# ------------------------------------------------------------------ bad input
def _X():
    return np.random.default_rng(0).normal(size=(20, 2))


def _y():
    return np.repeat([0, 1], 10)


@pytest.mark.parametrize(
    "X, y, groups, error, match",
    [
        (np.full((20, 2), np.nan), _y(), None, ValueError, "NaN"),
        (np.full((20, 2), np.inf), _y(), None, ValueError, "infinity"),
        (np.zeros(20), _y(), None, ValueError, "2D array"),
        (np.zeros((20, 2, 2)), _y(), None, ValueError, "dim"),
        (np.zeros((1, 2)), [0], None, ValueError, "minimum of 2"),
        (_X(), _y()[:5], None, ValueError, "y has 5 entries but X has 20 rows"),
        (_X(), _y(), np.zeros(5), ValueError, "groups has 5 entries"),
        (_X(), np.linspace(0, 1, 20), None, ValueError, "continuous"),
        (_X(), np.full(20, -1), None, ValueError, r"y has no labelled rows \(every label is -1\)"),
        (_X(), _y(), np.arange(20), ValueError, "no group holds at least 2 labelled rows"),
        (np.array([["a", "b"]] * 20), _y(), None, ValueError, "values other than numbers"),
    ],
)
def test_bad_input_raises_clear_errors(X, y, groups, error, match):
    with pytest.raises(error, match=match):
        ContextualKernel(**TINY).fit(X, y, groups=groups)


def test_integer_labels_in_an_object_column_are_labels():
    """A probe: integers in an object array (a pandas column) were refused as "Unknown label type"."""
    X, y = _X(), _y()
    as_object = ContextualKernel(**TINY).fit(X, y.astype(object)).transform(X)
    np.testing.assert_array_equal(as_object, ContextualKernel(**TINY).fit(X, y).transform(X))


@pytest.mark.parametrize("labels", [np.array([0.0, 1e19, 2e19]), np.array([0, 2**70, 3], dtype=object)])
def test_whole_number_labels_beyond_int64_are_refused_by_name(labels):
    """Probe 67a: floats 0/1e19/2e19 were refused as a 'continuous' target after numpy's cast warning, and integers
    of 2**70 in an object column got scikit-learn's 'Unknown label type' with the array and no reason."""
    y = labels[np.arange(20) % 3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="beyond the int64 range"):
            ContextualKernel(**TINY).fit(_X(), y)


def test_one_labelled_row_gets_one_error_and_no_contradicting_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="no group holds at least 2 labelled rows"):
            ContextualKernel(**TINY).fit(_X(), np.r_[0, np.full(19, -1)])


@pytest.mark.parametrize(
    "params, match",
    [
        ({"attention": "nope"}, "attention"),
        ({"compat": "cosine"}, "compat"),
        ({"set_size": 1}, "set_size"),
        ({"set_size": (30, 10)}, "set_size"),
        ({"set_size": "big"}, "set_size"),
        ({"d_model": 15, "n_heads": 2}, "divisible"),
        ({"layer_norm": "middle"}, "layer_norm"),
        ({"device": "tpu9"}, "device"),
        ({"clusters_per_set": 0}, "clusters_per_set"),
    ],
)
def test_bad_parameters_raise(blob_data, params, match):
    X, y, g = blob_data
    with pytest.raises(ValueError, match=match):
        ContextualKernel(**{**TINY, **params}).fit(X, y, groups=g)


def test_transform_checks_features_and_fit(tiny_kernel):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(ValueError, match="features"):
        tiny_kernel.transform(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="NaN"):
        tiny_kernel.transform(np.full((5, 2), np.nan))
    with pytest.raises(NotFittedError):
        ContextualKernel().transform(np.zeros((5, 2)))


@pytest.mark.parametrize(
    "X, y",
    [
        (np.ones((20, 2)), np.repeat([0, 1], 10)),  # all points identical
        (np.random.default_rng(0).normal(size=(20, 2)), np.zeros(20, dtype=int)),  # one class
        (np.repeat(np.random.default_rng(0).normal(size=(5, 2)), 4, axis=0), np.repeat([0, 1, 2, 3, 4], 4)),
    ],
    ids=["identical-points", "one-class", "duplicates"],
)
def test_degenerate_but_valid_input_works(X, y):
    kernel = ContextualKernel(**TINY).fit(X, y)
    A = kernel.transform(X)
    assert np.isfinite(A).all() and A.shape == (20, 20)


def test_ctrl_c_keeps_best_weights_and_a_usable_kernel(blob_data, monkeypatch):
    """A KeyboardInterrupt mid-epoch ends fit with a warning and the best completed epoch's weights."""
    from skabc import sampling

    X, y, g = blob_data
    calls = {"n": 0}
    original = sampling.SampledSetsDataset.__getitem__

    def interrupting(self, i):
        calls["n"] += 1
        if calls["n"] > 2 * 16 + 3:  # two full epochs of 16 sets, then Ctrl-C
            raise KeyboardInterrupt
        return original(self, i)

    monkeypatch.setattr(sampling.SampledSetsDataset, "__getitem__", interrupting)
    kernel = ContextualKernel(**{**TINY, "max_epochs": 5})
    with pytest.warns(RuntimeWarning, match="interrupted after 2 of 5 epochs"):
        kernel.fit(X, y, groups=g)
    best = min(kernel.net_.history[:, "train_loss"][:2])
    assert dict(kernel.net_.callbacks_)["keep_best"].best_loss_ == best
    A = kernel.transform(X[:10])
    assert np.isfinite(A).all()


def test_ctrl_c_after_a_resume_keeps_the_restored_epochs_weights(blob_data, tmp_path, monkeypatch):
    """Probe 63a: a resumed run stopped again inside its first new epoch kept that half-trained epoch's weights
    while its warning said "the weights of the best training loss so far": the keeper had forgotten the restored
    weights.  They are its first candidate now, and the warning says since when it compares."""
    from skabc import sampling

    X, y, g = blob_data
    params = {**TINY, "max_epochs": 6, "checkpoint_dir": tmp_path}
    original = sampling.SampledSetsDataset.__getitem__
    calls = {"n": 0, "limit": 3 * 16 + 11}

    def interrupting(self, i):
        calls["n"] += 1
        if calls["n"] > calls["limit"]:  # inside the second batch of an epoch: one step of it taken
            raise KeyboardInterrupt
        return original(self, i)

    monkeypatch.setattr(sampling.SampledSetsDataset, "__getitem__", interrupting)
    with pytest.warns(RuntimeWarning, match="interrupted after 3 of 6 epochs"):
        ContextualKernel(**params).fit(X, y, groups=g)
    calls.update(n=0, limit=11)
    with pytest.warns(RuntimeWarning, match=r"best training loss since it resumed at epoch 3 \("):
        resumed = ContextualKernel(**params).fit(X, y, groups=g)
    restored = torch.load(tmp_path / "params.3.pt", weights_only=True)
    for name, value in resumed.module_.state_dict().items():
        torch.testing.assert_close(value, restored[name], rtol=0, atol=0)


def test_ctrl_c_during_the_last_epochs_validation_is_an_interruption(blob_data, tmp_path, monkeypatch):
    """Left open in session 47: Ctrl-C while the last epoch was being scored counted the run as complete (its
    loss was logged), with no warning, and the kernel was kept in checkpoint_dir as the finished run's, which
    every later fit restored: a run whose last epoch was never scored against the others."""
    from skabc.exceptions import TrainingInterruptedWarning
    from skabc.training.early_stopping import ValidationSetsScoring

    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2, "early_stopping": True, "validation_fraction": 0.3, "checkpoint_dir": tmp_path}
    original = ValidationSetsScoring.on_epoch_end

    def interrupted_on_the_last(self, net, **kwargs):
        if len(net.history) == net.max_epochs:
            raise KeyboardInterrupt
        return original(self, net, **kwargs)

    monkeypatch.setattr(ValidationSetsScoring, "on_epoch_end", interrupted_on_the_last)
    with pytest.warns(TrainingInterruptedWarning, match=r"interrupted after 1 of 2 epochs"):
        kernel = ContextualKernel(**params).fit(X, y, groups=g)
    assert np.isfinite(kernel.transform(X[:10])).all()
    assert not (tmp_path / "fitted_kernel.safetensors").exists()  # not kept as a finished run
    monkeypatch.setattr(ValidationSetsScoring, "on_epoch_end", original)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # resumed and scored, not restored
        resumed = ContextualKernel(**params).fit(X, y, groups=g)
    assert all("valid_ari" in row for row in resumed.net_.history)
    # Review 48b: a fine-tune stopped while its only epoch was scored kept its start "as no epoch scored better".
    monkeypatch.setattr(ValidationSetsScoring, "on_epoch_end", interrupted_on_the_last)
    fine_tune = {**params, "init": "generic", "max_epochs": 1, "checkpoint_dir": None}
    for name in ("d_model", "n_heads", "n_blocks"):
        fine_tune.pop(name)
    with pytest.warns(TrainingInterruptedWarning, match=r"after 0 of 1 epochs; the kernel keeps its starting "
                                                        r"weights \(no epoch was scored\)"):
        ContextualKernel(**fine_tune).fit(X, y, groups=g)


def test_ctrl_c_while_the_settings_are_chosen_stops_cleanly(blob_data, tmp_path, monkeypatch):
    """Review 48b: Ctrl-C while the kept weights and clustering settings were scored on the held-out sets (after
    the epochs; minutes on real data) escaped fit as a bare KeyboardInterrupt, leaving no kernel, where the guide
    promises a clean stop."""
    from skabc.exceptions import TrainingInterruptedWarning
    from skabc.training import early_stopping

    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2, "early_stopping": True, "validation_fraction": 0.3, "checkpoint_dir": tmp_path}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(early_stopping, "choose_settings", interrupted)
    with pytest.warns(TrainingInterruptedWarning, match=r"interrupted after 2 of 2 scored epochs, while the kept "
                                                        r"weights and clustering settings were scored .* keeps the "
                                                        r"weights of its best validation score \(.* ARI\) with its "
                                                        r"start's .* A refit with this checkpoint_dir trains nothing "
                                                        r"and makes the choice again"):
        kernel = ContextualKernel(**params).fit(X, y, groups=g)
    validation = dict(kernel.net_.callbacks_)["validation"]
    assert kernel.recommended_clustering_ == validation.settings and kernel.validation_score_ is None
    assert np.isfinite(kernel.transform(X[:10])).all()
    assert not (tmp_path / "fitted_kernel.safetensors").exists()  # no finished run kept with unchosen settings
    # Review 48c: with no epoch scored (a first Ctrl-C while epoch 1 was scored, or max_time inside it) the warning
    # gave the best validation score as -inf, or only max_time's account of a run the CLI reports as interrupted.
    original = early_stopping.ValidationSetsScoring.on_epoch_end

    def interrupted_in_the_first(self, net, **kwargs):
        if len(net.history) == 1:
            raise KeyboardInterrupt
        return original(self, net, **kwargs)

    unsaved = {**params, "checkpoint_dir": None}
    with monkeypatch.context() as patch:
        patch.setattr(early_stopping.ValidationSetsScoring, "on_epoch_end", interrupted_in_the_first)
        with pytest.warns(TrainingInterruptedWarning, match=r"after 0 of 2 scored epochs, .* keeps the weights reached "
                                                            r"when its training stopped \(no epoch was scored\)"):
            ContextualKernel(**unsaved).fit(X, y, groups=g)
    with pytest.warns(TrainingInterruptedWarning, match=r"after 0 of 2 scored epochs"):
        ContextualKernel(**unsaved, max_time=1e-4).fit(X, y, groups=g)
    # Early stopping ended the run before its last epoch: a refit resumes it, and the warning says so.
    stopping = {**params, "max_epochs": 12, "n_iter_no_change": 1, "checkpoint_dir": tmp_path / "stopping"}
    with pytest.warns(TrainingInterruptedWarning, match=r"A refit with this checkpoint_dir resumes the run"):
        stopped = ContextualKernel(**stopping).fit(X, y, groups=g)
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no restore: it trains again from the last checkpoint
        resumed = ContextualKernel(**stopping).fit(X, y, groups=g)
    # Review 51c: with the best epoch and patience restored it stops where the run did (it used to train on), and
    # this time chooses its settings.
    assert len(resumed.net_.history) == len(stopped.net_.history) and resumed.validation_score_ is not None


def test_memory_limit_refuses_huge_dense_affinity(tiny_kernel):
    from skabc.exceptions import AffinityTooLargeError

    small = clone(tiny_kernel)
    small.__dict__.update({k: v for k, v in tiny_kernel.__dict__.items() if k.endswith("_")})
    from skabc.inference import working_bytes

    small.set_params(memory_limit=(8 + working_bytes(small, 100)) * 100**2)
    assert small.transform(np.zeros((100, 2))).shape == (100, 100)
    with pytest.raises(AffinityTooLargeError, match="memory_limit") as info:
        small.transform(np.zeros((101, 2)))
    assert isinstance(info.value, MemoryError) and isinstance(info.value, ValueError)
    # The default ('auto', half the RAM) refuses a set whose affinity alone would need petabytes.
    with pytest.raises(MemoryError, match="GiB"):
        tiny_kernel.check_memory(10**8)


def test_load_never_unpickles(tmp_path):
    """A pickle crafted to run code is rejected by load without running it."""
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            import os

            return (os.system, (f"touch {marker}",))

    bad = tmp_path / "model.safetensors"
    bad.write_bytes(pickle.dumps(Exploit()))
    with pytest.raises(ValueError):
        ContextualKernel.load(bad)
    assert not marker.exists()


def test_load_rejects_wrong_shapes(tiny_kernel, tmp_path):
    import json

    from safetensors.torch import load_file, safe_open, save_file

    path = tmp_path / "k.safetensors"
    tiny_kernel.save(path)
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads(f.metadata()["skabc"])
    meta["kernel"]["params"]["d_model"] = 32
    save_file({k: v.clone() for k, v in load_file(str(path)).items()}, str(path), metadata={"skabc": json.dumps(meta)})
    # Refused from the header, before any network is built.
    # The first block's tensors are checked first (the layout of one block, before the whole network's).
    with pytest.raises(ValueError, match=r"q_proj\.weight' has shape \[16, 16\], but the configuration needs "
                                         r"\[32, 32\]"):
        ContextualKernel.load(path)


@pytest.mark.parametrize("version, writer, match", [
    (999, "9.1", r"written by skabc 9\.1 in format version 999, newer than this skabc .* reads \(versions \(1, 2\)\): "
                 "upgrade skabc"),
    (3, None, r"written by a newer skabc in format version 3, .*upgrade skabc"),
    (0, "0.0.1", r"has format 'skabc' version 0; this skabc reads 'skabc' versions \(1, 2\)"),
])
def test_load_rejects_other_format_versions(tiny_kernel, tmp_path, version, writer, match):
    """A file of a newer format says it is newer and to upgrade, naming the skabc that wrote it where it can."""
    import json

    from safetensors.torch import load_file, safe_open, save_file

    path = tmp_path / "k.safetensors"
    tiny_kernel.save(path)
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads(f.metadata()["skabc"])
    meta["format_version"] = version
    if writer is None:
        del meta["versions"]["skabc"]
    else:
        meta["versions"]["skabc"] = writer
    save_file({k: v.clone() for k, v in load_file(str(path)).items()}, str(path), metadata={"skabc": json.dumps(meta)})
    with pytest.raises(ValueError, match=match):
        ContextualKernel.load(path)


def test_checkpoint_every_n_epochs(blob_data, tmp_path):
    import json

    X, y, g = blob_data
    kernel = ContextualKernel(**{**TINY, "max_epochs": 4, "checkpoint_dir": tmp_path, "checkpoint_every": 2})
    kernel.fit(X, y, groups=g)
    history = json.loads((tmp_path / "history.json").read_text())
    saved = [row["epoch"] for row in kernel.net_.history if row.get("event_cp")]
    assert saved == [2, 4] and len(history) == 4


def test_device_auto_works_without_cuda(blob_data):
    X, y, g = blob_data
    kernel = ContextualKernel(**{**TINY, "device": "auto"}).fit(X, y, groups=g)
    expected = "cuda" if __import__("torch").cuda.is_available() else "cpu"
    assert next(kernel.module_.parameters()).device.type == expected


@pytest.mark.parametrize(
    "params",
    [
        {"attention": "isab", "n_inducing": 5},
        {"attention": "sampled", "window_size": 6, "n_attention_samples": 2},
        {"attention": "sampled", "window_attention": "dense"},
        {"attention": "opa"},
    ],
    ids=["isab", "sampled", "sampled-dense", "opa"],
)
def test_backends_through_the_estimator(blob_data, params, tmp_path):
    X, y, g = blob_data
    kernel = ContextualKernel(**{**TINY, **params}).fit(X, y, groups=g)
    A = kernel.transform(X[:30])
    assert A.shape == (30, 30) and np.isfinite(A).all()
    np.testing.assert_array_equal(A, kernel.transform(X[:30]))  # inference is deterministic
    if params["attention"] == "isab":
        assert kernel.module_.blocks[0].inducing.shape[0] == 5
    # The safe format keeps backend options and buffers (e.g. the sampled blocks' seeds).
    kernel.save(tmp_path / "k.safetensors")
    np.testing.assert_array_equal(ContextualKernel.load(tmp_path / "k.safetensors", device="cpu").transform(X[:30]), A)


def test_n_attention_samples_applies_to_a_fitted_kernel_without_refit(blob_data, tmp_path):
    X, y, g = blob_data
    kernel = ContextualKernel(**{**TINY, "attention": "sampled", "window_size": 6, "n_attention_samples": 1})
    kernel.fit(X, y, groups=g)
    one = kernel.transform(X[:30])
    weights = {k: v.clone() for k, v in kernel.module_.state_dict().items()}
    averaged = kernel.set_params(n_attention_samples=4).transform(X[:30])
    assert not np.allclose(one, averaged)  # four window samples, not one
    assert all(b.n_attention_samples == 4 for b in kernel.module_.blocks)
    assert all(torch.equal(v, kernel.module_.state_dict()[k]) for k, v in weights.items())
    np.testing.assert_array_equal(kernel.set_params(n_attention_samples=1).transform(X[:30]), one)
    # A loaded kernel takes the option the same way.
    kernel.save(tmp_path / "k.safetensors")
    loaded = ContextualKernel.load(tmp_path / "k.safetensors", device="cpu")
    np.testing.assert_array_equal(loaded.set_params(n_attention_samples=4).transform(X[:30]), averaged)


def test_attention_options_reach_a_custom_factory(blob_data):
    from skabc.nn import SetAttentionBlock

    seen = {}

    def factory(**kwargs):
        seen.update(kwargs)
        kwargs.pop("marker")
        return SetAttentionBlock(**kwargs)

    X, y, g = blob_data
    ContextualKernel(**{**TINY, "attention": factory, "attention_options": {"marker": 7}}).fit(X, y, groups=g)
    assert seen["marker"] == 7 and seen["d_model"] == TINY["d_model"]


@pytest.mark.parametrize("returned, name", [(42, "int"), (None, "NoneType")])
def test_a_custom_attention_factory_that_builds_no_module_is_named(blob_data, returned, name):
    """Probe 53e: a factory returning 42 or None failed inside torch (`int is not a Module subclass`, `'NoneType'
    object is not callable`). (A block's forward is not probed: review 53h, a probe set of any size refuses blocks
    that need more points, and it drew from streams the fit had seeded.)"""
    X, y, g = blob_data
    with pytest.raises(TypeError, match=rf"attention\(\.\.\.\) must return an nn.Module, got {name}"):
        ContextualKernel(**{**TINY, "attention": lambda **kwargs: returned, "init": "scratch"}).fit(X, y, groups=g)


def test_training_memory_is_checked_before_training(blob_data):
    from skabc.exceptions import AffinityTooLargeError

    X, y, g = blob_data
    with pytest.raises(AffinityTooLargeError, match="lower set_size or batch_size"):
        ContextualKernel(**{**TINY, "memory_limit": 10_000}).fit(X, y, groups=g)


def test_training_memory_message_names_the_blocks_when_they_are_the_cause(blob_data):
    """Probe 67c: a billion blocks were refused with advice to lower set_size or batch_size alone."""
    from skabc.exceptions import AffinityTooLargeError

    X, y, g = blob_data
    with pytest.raises(AffinityTooLargeError, match=r"counting 5000000004 tensors of .*: 4 heads \+ 1 in each of "
                                                    r"1000000000 blocks, 4 for the loss\).*or n_blocks or n_heads"):
        ContextualKernel(**{**TINY, "init": "scratch", "n_heads": 4, "n_blocks": 10**9}).fit(X, y, groups=g)


def test_training_memory_is_sized_by_the_sets_that_can_be_drawn(blob_data):
    """Probe 56a: sets are drawn within one group (30 rows here) and a batch holds at most an epoch's sets, yet the
    check sized a step by the nominal set_size and batch_size: (10, 20000) was refused for 22 GB while 5000 ran."""
    X, y, g = blob_data
    limit = {"memory_limit": 2**30}  # the nominal step below needs 4 * 8 * 20000**2 * 7 bytes = 84 GiB
    ContextualKernel(**{**TINY, **limit, "set_size": (10, 20_000), "max_epochs": 1}).fit(X, y, groups=g)
    ContextualKernel(**{**TINY, **limit, "batch_size": 10**9, "max_epochs": 1}).fit(X, y, groups=g)


def test_a_custom_embedder_of_the_wrong_input_width_is_named(blob_data):
    """Probe 56a: an nn.Module embedder of another input width failed in torch ('mat1 and mat2 shapes cannot be
    multiplied'), where embed_features or canonical_features set the width it sees, not X's."""
    X, y, g = blob_data
    for extra, says in (({}, r"\(m, 2\) inputs;"), ({"embed_features": 1}, r"\(m, 1\) inputs \(embed_features=1\)"),
                        ({"canonical_features": 3}, r"\(m, 3\) inputs \(canonical_features=3\)")):
        kernel = ContextualKernel(**{**TINY, "embedder": torch.nn.Linear(7, TINY["d_model"]), **extra})
        with pytest.raises(ValueError, match="embedder must take " + says):
            kernel.fit(X, y, groups=g)


def test_a_custom_attention_block_of_the_wrong_width_is_named(blob_data):
    """Probe 56a: a block returning d_model / 2 columns failed in the next LayerNorm ('normalized_shape=[16]')."""

    class HalfWidth(torch.nn.Module):
        def __init__(self, d_model, **kwargs):
            super().__init__()
            self.linear = torch.nn.Linear(d_model, d_model // 2)

        def forward(self, x, key_mask):
            return self.linear(x)

    X, y, g = blob_data
    with pytest.raises(ValueError, match=r"attention blocks must map .* HalfWidth returned \(8, \d+, 8\)"):
        ContextualKernel(**{**TINY, "attention": HalfWidth, "init": "scratch"}).fit(X, y, groups=g)


def test_a_diverged_fit_names_weight_decay_too(blob_data):
    """Probe 56a: weight_decay=1e30 diverges, and the message named only lr and X's scale."""
    X, y, g = blob_data
    with pytest.raises(ValueError, match=r"training diverged .* lower lr or weight_decay"):
        ContextualKernel(**{**TINY, "weight_decay": 1e30, "init": "scratch", "max_epochs": 1}).fit(X, y, groups=g)


@pytest.mark.parametrize(("lr", "imputed_first"), [(10.0, False), (100.0, False), (1.3, False), (10.0, True)])
def test_a_fit_whose_affinities_collapsed_to_one_value_is_refused(lr, imputed_first):
    """Probe 67a: lr=10 blew the loss up to 1e8 and left it finite; every affinity came out exactly 1 (lr=100:
    exactly 0, diagonal included), the fit passed and clustering returned one cluster without a word.  Review 67:
    lr=1.3 left every affinity below 1e-235 (not exactly one value), and 16 equal (imputed) rows heading two classes
    made the check look at one row only."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(3 * i, 1, (30, 4)) for i in range(3)])
    y = np.repeat(np.arange(3), 30)
    if imputed_first:
        X[:16] = X[30:46] = X.mean(axis=0)
    with pytest.raises(ValueError, match=r"training collapsed: .* same affinity .* lower lr or weight_decay"):
        ContextualKernel(lr=lr, max_epochs=2, random_state=0, device="cpu").fit(X, y)


def test_unlabelled_rows_are_no_second_class_to_the_collapse_check():
    """Review 67: -1 rows among the rows checked counted as a class, so one class collapsed by lr=1 was refused as
    'two different classes' where the same labels without -1 rows were not."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = np.where(np.arange(60) % 3 == 0, -1, 0)
    ContextualKernel(lr=1.0, max_epochs=2, random_state=0, device="cpu").fit(X, y)


def test_the_collapse_check_leaves_a_kernel_that_tells_pairs_apart(tiny_kernel, blob_data):
    """The check refuses only one value for every pair: a fitted kernel's affinities of two classes vary."""
    from skabc.training.divergence import check_trained_weights

    X, y, _ = blob_data
    X = np.asarray(X, dtype=np.float32)
    check_trained_weights(tiny_kernel.module_, X, None, np.asarray(y))

    class Saturated(torch.nn.Module):  # every pair's logit 30: sigmoid gives exactly 1 in float32
        def __init__(self):
            super().__init__()
            self.bias = torch.nn.Parameter(torch.tensor(30.0))

        def forward(self, x):
            return self.bias * torch.ones(x.shape[0], x.shape[1], x.shape[1])

    constant = Saturated()
    with pytest.raises(ValueError, match="training collapsed"):
        check_trained_weights(constant, X, None, np.asarray(y))
    check_trained_weights(constant, X, None, np.zeros(len(X), dtype=int))  # one class: nothing to tell apart


def test_a_learning_rate_that_overflows_the_optimiser_is_refused_by_name(blob_data):
    """Probe 67a: lr from about 1e38 up to the old ceiling (float32's largest value) raised torch's 'value cannot
    be converted to type float without overflow' from inside AdamW."""
    X, y, g = blob_data
    with pytest.raises(ValueError, match=r"'lr' parameter of ContextualKernel must be .* 1e\+30"):
        ContextualKernel(**{**TINY, "lr": 1e38, "init": "scratch", "max_epochs": 1}).fit(X, y, groups=g)


def test_interrupted_save_keeps_the_previous_file(tiny_kernel, tmp_path, monkeypatch):
    """Writes go to a temporary file renamed into place: a failure leaves the old model intact."""
    from skabc import persistence

    path = tmp_path / "k.safetensors"
    tiny_kernel.save(path)
    before = path.read_bytes()

    def broken_write(filename, data):
        with open(filename, "wb") as f:
            f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(persistence, "_write", broken_write)
    with pytest.raises(OSError, match=f"cannot save to '{path}': disk full"):  # an OSError with no errno too
        tiny_kernel.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["k.safetensors"]


def test_canonical_features_accept_any_width_and_ignore_translation_and_scale():

    X, y, groups = make_blob_sets(n_sets=20, set_size=30, random_state=4)
    X = np.hstack([X, np.zeros((len(X), 3))])  # zero padding, as for sets of mixed widths
    kernel = ContextualKernel(**{**TINY, "canonical_features": 6}).fit(X, y, groups=groups)
    assert kernel.module_.embedder.net[0].in_features == 6
    A = kernel.transform(X[:30, :2])
    np.testing.assert_allclose(kernel.transform(5.0 * X[:30, :2] - 3.0), A, atol=1e-5)
    np.testing.assert_allclose(kernel.transform(np.hstack([X[:30, :2], np.ones((30, 7))])), A, atol=1e-5)
    assert kernel.transform(np.random.default_rng(0).normal(size=(12, 40))).shape == (12, 12)
    plain = ContextualKernel(**TINY).fit(X, y, groups=groups)
    with pytest.raises(ValueError, match="features"):
        plain.transform(X[:30, :2])


def test_warm_start_continues_from_the_fitted_weights(blob_data):
    X, y, groups = blob_data
    kernel = ContextualKernel(**TINY).fit(X, y, groups=groups)
    start = {k: v.clone() for k, v in kernel.module_.state_dict().items()}
    cold = ContextualKernel(**{**TINY, "random_state": 1}).fit(X, y, groups=groups)
    warm = kernel.set_params(warm_start=True, random_state=1, lr=1e-5).fit(X, y, groups=groups)
    moved_warm = max(float((warm.module_.state_dict()[k] - v).abs().max()) for k, v in start.items())
    moved_cold = max(float((cold.module_.state_dict()[k] - v).abs().max()) for k, v in start.items())
    assert moved_warm < 1e-3 < moved_cold
    with pytest.raises(ValueError, match=r"cannot change its parameters \(d_model: 16 -> 32\)"):
        kernel.set_params(d_model=32).fit(X, y, groups=groups)


def test_warm_start_on_another_width_names_the_columns(blob_data):
    """torch's load_state_dict error (every tensor, in torch's terms) used to be the whole message."""
    X, y, groups = blob_data
    kernel = ContextualKernel(**TINY).fit(X, y, groups=groups)
    with pytest.raises(ValueError, match=r"X has another number of columns than the kernel was fitted on") as info:
        kernel.set_params(warm_start=True).fit(np.hstack([X, X]), y, groups=groups)
    assert "size mismatch" not in str(info.value) and "warm_start=False" in str(info.value)
    # A probe (/work/probe35d): the refused fit had set n_features_in_ to the new width already, and the kernel,
    # weights intact, then refused its own data ('expecting 4 features').
    assert kernel.n_features_in_ == X.shape[1]
    np.testing.assert_array_equal(kernel.transform(X[:20]), ContextualKernel(**TINY).fit(X, y, groups=groups)
                                  .transform(X[:20]))


def test_a_pos_weight_that_would_stall_training_is_refused(blob_data):
    """A probe (/work/probe35d): pos_weight=1e30 overflowed the clipped gradient's norm: the weights never moved."""
    X, y, groups = blob_data
    with pytest.raises(ValueError, match=r"'pos_weight' parameter of ContextualKernel must be .*1000000"):
        ContextualKernel(**{**TINY, "pos_weight": 1e30}).fit(X, y, groups=groups)


@pytest.mark.parametrize("attention, options, message", [
    ("sab", {"bogus": 1}, r"unknown option 'bogus' for the attention backend 'sab'; it takes no other options"),
    ("isab", {"n_inducing": 4}, r"cannot set 'n_inducing': it is the kernel parameter n_inducing"),
    ("sab", {"dropout": 0.5}, r"cannot set 'dropout': every block receives it"),
    ("sampled", {"windowsize": 8}, r"unknown option 'windowsize'.*it takes"),
])
def test_attention_options_are_checked_before_torch_builds_blocks(blob_data, attention, options, message):
    """Unknown keys reached the block's constructor and came back as torch-side TypeErrors."""
    X, y, groups = blob_data
    with pytest.raises(ValueError, match=message):
        ContextualKernel(**{**TINY, "attention": attention, "attention_options": options}).fit(X, y, groups=groups)


def test_fourier_embedder_trains_saves_and_reloads(tmp_path, blob_data):
    X, y, groups = blob_data
    kernel = ContextualKernel(**{**TINY, "embedder": "fourier"}).fit(X, y, groups=groups)
    frequencies = kernel.module_.embedder.frequencies
    assert frequencies.shape == (64, 2) and frequencies.requires_grad
    A = kernel.transform(X[:30])
    order = np.random.default_rng(0).permutation(30)
    np.testing.assert_allclose(kernel.transform(X[:30][order]), A[order][:, order], atol=1e-5)
    kernel.save(tmp_path / "fourier.safetensors")
    again = ContextualKernel.load(tmp_path / "fourier.safetensors")
    np.testing.assert_allclose(again.transform(X[:30]), A, atol=1e-6)


def test_a_column_whose_spread_float32_would_lose_is_refused(tiny_kernel, blob_data):
    """A probe: X + 1e9 became one distinct row in float32, and a scratch kernel still returned a partition."""
    X, y, g = blob_data
    with pytest.raises(ValueError, match=r"column 0 of X spans .* from zero: .*float32.*centre X first"):
        ContextualKernel(**TINY).fit(X + 1e9, y, groups=g)
    with pytest.raises(ValueError, match=r"column 0 of X spans"):
        tiny_kernel.transform(X[:30] + 1e9)
    tiny_kernel.transform(X[:30] + 1e3)  # an offset float32 resolves is fine


def test_a_column_of_round_off_is_a_constant_column_for_the_network(tiny_kernel, blob_data):
    """Probe 62b: a column of 0.3 and 0.1 + 0.2 (one float64 step apart) refused the whole set as a column whose
    values float32 'would merge', where the exactly constant column was accepted; float32 makes them one value."""
    X = np.column_stack([blob_data[0][:30, 0], np.full(30, 0.3)])
    noisy = X.copy()
    noisy[::2, 1] = 0.1 + 0.2
    np.testing.assert_array_equal(tiny_kernel.transform(noisy), tiny_kernel.transform(X))
    coarse = X.astype(np.float32)
    coarse[::2, 1] = np.nextafter(np.float32(0.3), np.float32(1))  # float32 values that are distinct, 1 step apart
    with pytest.raises(ValueError, match=r"column 1 of X spans 2\.98e-08 at 0\.3 from zero: float32, the network's "
                                         r"arithmetic .* holds fewer than 16 distinct values across it"):
        tiny_kernel.transform(coarse)


@pytest.mark.parametrize("params, match", [({"affinity_mode": "Sparse"}, "affinity_mode"),
                                           ({"n_attention_samples": 0}, "n_attention_samples"),
                                           ({"n_random_neighbors": -1}, "n_random_neighbors")])
def test_inference_options_set_after_fit_are_validated_by_transform(tiny_kernel, params, match):
    """A probe: a misspelt affinity_mode gave the dense affinity, n_attention_samples=0 a NaN 'overflow'."""
    kernel = pickle.loads(pickle.dumps(tiny_kernel))
    with pytest.raises(ValueError, match=match):
        kernel.set_params(**params).transform(np.random.default_rng(0).normal(size=(12, 2)))


def test_a_run_stopped_inside_its_first_epoch_says_so(blob_data, monkeypatch):
    """max_time inside the first epoch ended the fit silently (n_training_sets_ 0); Ctrl-C there warned of a best
    training loss of 'inf'."""
    import skorch

    X, y, g = blob_data
    with pytest.warns(UserWarning, match=r"max_time=1e-06 s ended training inside its first epoch"):
        timed = ContextualKernel(**{**TINY, "max_epochs": 3, "max_time": 1e-6}).fit(X, y, groups=g)
    # Probe 69d: the sets of that cut epoch were not counted (0); its batch moved the weights.
    assert timed.n_training_sets_ == sum(b["train_batch_size"] for b in timed.net_.history[-1]["batches"]) > 0

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(skorch.NeuralNet, "train_step", interrupted)
    # Probe 44d: it said "keeps the weights with the weights reached when it stopped".
    with pytest.warns(RuntimeWarning, match="interrupted after 0 of 3 epochs; the kernel keeps the weights reached "
                                            "when it stopped, inside the first epoch") as record:
        ContextualKernel(**{**TINY, "max_epochs": 3}).fit(X, y, groups=g)
    assert not any("inf" in str(w.message) for w in record)


def test_a_generic_fine_tune_cut_in_its_first_epoch_is_not_the_shipped_kernel():
    """Probe 69d: n_training_sets_ counted finished epochs only, so a fine-tune that max_time stopped inside its
    first epoch reported 0 sets and passed for the untouched shipped kernel, whose weights it no longer has."""
    from skabc import pretrained
    from skabc._sets import is_shipped_generic
    from skabc.datasets import make_circles_sets

    X, y, groups = make_circles_sets(n_sets=8, set_size=40, random_state=0)
    with pytest.warns(UserWarning, match="inside its first epoch"):
        kernel = ContextualKernel(max_epochs=1, sets_per_epoch=100_000, set_size=30, batch_size=4, max_time=1e-6,
                                  random_state=0, device="cpu").fit(X, y, groups=groups)
    assert kernel.init_ == "generic" and kernel.n_training_sets_ == 4
    assert not np.allclose(kernel.transform(X[:40]), pretrained.load("generic", device="cpu").transform(X[:40]))
    assert not is_shipped_generic(kernel)


def test_clusters_per_set_beyond_the_classes_of_every_group_is_warned_of(blob_data):
    """Probe 54a: every set held the classes there were, fewer than asked, without a word."""
    from skabc.exceptions import SkabcWarning

    X, y, groups = blob_data
    most = max(len(np.unique(y[groups == g])) for g in np.unique(groups))
    with pytest.warns(SkabcWarning, match=rf"asks for at least {most + 1} clusters a set, .* at most {most} labelled"):
        ContextualKernel(**{**TINY, "clusters_per_set": most + 1}).fit(X, y, groups=groups)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkabcWarning)
        ContextualKernel(**{**TINY, "clusters_per_set": most}).fit(X, y, groups=groups)


def test_a_set_size_beyond_the_labelled_rows_of_every_group_is_warned_of(blob_data):
    """Probe 70c: sets asked of 50-200 rows from groups of 30 were every group's whole rows, without a word."""
    from skabc.exceptions import SkabcWarning

    X, y, groups = blob_data
    most = max(int(np.sum(groups == g)) for g in np.unique(groups))
    with pytest.warns(SkabcWarning, match=rf"training sets of {most + 1} to {most + 20} rows, .* at most {most} a"):
        ContextualKernel(**{**TINY, "set_size": (most + 1, most + 20)}).fit(X, y, groups=groups)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkabcWarning)
        ContextualKernel(**{**TINY, "set_size": (most, most + 20)}).fit(X, y, groups=groups)


@pytest.mark.parametrize("make", [lambda: ContextualKernel(**TINY), lambda: KernelEnsemble(ContextualKernel(**TINY))])
def test_an_unfitted_kernel_has_no_recommended_clustering(make):
    """Probe 70c: an unfitted ContextualKernel said {} (the generic defaults), and recommends other settings once
    fitted; scikit-learn raises NotFittedError for what a fit decides."""
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        make().recommended_clustering()


def test_a_read_only_float32_set_reaches_torch_as_a_writable_array(monkeypatch):
    """Torch warned 'The given NumPy array is not writable' from inside skabc (once per process: so the array handed
    over is checked, not the warning) for a memmap or a float32 frame under pandas' copy-on-write."""
    import torch

    from skabc import ContextualKernel, inference

    handed = []
    as_tensor = torch.as_tensor

    def recording(data, *args, **kwargs):
        if isinstance(data, np.ndarray):
            handed.append(data.flags.writeable)
        return as_tensor(data, *args, **kwargs)

    from sklearn.datasets import make_blobs

    X, y = make_blobs(60, centers=3, random_state=0)
    X = X.astype(np.float32)
    kernel = ContextualKernel(init="scratch", d_model=16, n_heads=2, n_blocks=1, set_size=(10, 40), sets_per_epoch=8,
                              batch_size=8, max_epochs=1, random_state=0, device="cpu").fit(X, y)  # raw coordinates
    X.setflags(write=False)
    monkeypatch.setattr(inference.torch, "as_tensor", recording)
    kernel.transform(X)
    assert handed and all(handed)
    assert not X.flags.writeable  # the caller's array is left as it was


def test_a_kept_kernel_with_no_checkpoint_beside_it_is_refused_not_deleted(blob_data, tmp_path):
    """Review 68b: another folder's kept kernel, alone in a folder, was deleted and replaced by the fit without a
    word (the guide: a kept file of another run is refused)."""
    import shutil

    X, y, g = blob_data
    params = {**TINY, "max_epochs": 2}
    ContextualKernel(**params, checkpoint_dir=tmp_path / "a").fit(X, y, groups=g)
    (tmp_path / "b").mkdir()
    kept = shutil.copy(tmp_path / "a" / "fitted_kernel.safetensors", tmp_path / "b")
    before = Path(kept).read_bytes()
    with pytest.raises(ValueError, match=r"holds a kept kernel \(fitted_kernel.safetensors\) but no checkpoint"):
        ContextualKernel(**params, checkpoint_dir=tmp_path / "b").fit(X, y, groups=g)
    assert Path(kept).read_bytes() == before


def test_a_finished_run_with_no_saved_epoch_is_restored(blob_data, tmp_path):
    """A run that ends before its first checkpoint (checkpoint_every beyond max_epochs) keeps its kernel, and the
    same fit again restores it: not refused as a kept kernel without a checkpoint."""
    X, y, g = blob_data
    params = {**TINY, "max_epochs": 1, "checkpoint_every": 5, "checkpoint_dir": tmp_path}
    first = ContextualKernel(**params).fit(X, y, groups=g)
    again = ContextualKernel(**params).fit(X, y, groups=g)
    np.testing.assert_array_equal(first.transform(X[:30]), again.transform(X[:30]))


def test_early_stopping_on_few_held_out_groups_says_so():
    """Probe 68g: digits in 4 groups of two classes held out one group; the epoch, the settings and the reported
    gain (0.61-0.75 against 0.33-0.35) all rested on it, while the kernel lost to its start on unseen digits."""
    from skabc.exceptions import SkabcWarning

    X, y, g = make_blob_sets(n_sets=40, set_size=30)
    few = np.isin(g, np.unique(g)[:4])
    with pytest.warns(SkabcWarning, match=r"early stopping holds out 1 of 4 groups.*fitting without groups"):
        ContextualKernel(**{**TINY, "early_stopping": True}).fit(X[few], y[few], groups=g[few])
    lone = [np.flatnonzero(g == group)[0] for group in np.unique(g)[4:7]]  # three groups of one row each: never
    # held out, so not counted
    y_lone = np.where(np.isin(np.arange(len(y)), lone), y, -1)
    keep = few | np.isin(np.arange(len(y)), lone)
    with pytest.warns(SkabcWarning, match=r"holds out 1 of 4 groups"):
        ContextualKernel(**{**TINY, "early_stopping": True}).fit(X[keep], np.where(few, y, y_lone)[keep],
                                                                 groups=g[keep])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ContextualKernel(**{**TINY, "early_stopping": True}).fit(X, y, groups=g)  # 8 of 40 held out
    assert not [w for w in caught if "early stopping holds out" in str(w.message)]
