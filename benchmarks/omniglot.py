"""Omniglot clustering (ABC paper, section 5.2 and Table 4), trained on two CPU cores.

Usage
-----
Pass ``--data-home DIR`` (the folder of the two official zips) or set ``$SKABC_DATA``.

python benchmarks/omniglot.py --train            # all stages; run again to resume after a stop
python benchmarks/omniglot.py --train --stage 1  # only the CNN (or 2: set encoder, 3: assemble)
python benchmarks/omniglot.py --select           # model selection on held-out background alphabets
python benchmarks/omniglot.py --eval             # Table 4 on the 20 evaluation alphabets (shipped weights)

Recipe (end-to-end training as in the paper would take days on this machine):

1. Stage 1, the image embedder.  The conv4 CNN of the paper's Figure 3 is
   trained as a classifier over the characters of ``CNN_ALPHABETS`` (22 of
   the 30 background alphabets), every rotation by 90 degrees counting as a
   new character, with random shifts of up to 2 pixels.
2. Stage 2, the set encoder.  The CNN is frozen; the images of 27
   background alphabets (the 22 above and 5 others whose characters the CNN
   never saw, so their embeddings look like those of new alphabets) and
   their rotations are embedded once, and three :class:`~skabc.ContextualKernel`
   (MLP -> 2 SABs -> multiplicative head), one per seed of ``STAGE2_SEEDS``,
   are trained on sets of 100 of them drawn within (alphabet, rotation) groups.
3. Assembly.  The CNN and each stage-2 kernel become one kernel with
   ``embedder='conv4'`` that takes 28 x 28 images as rows of 784 pixels; a
   :class:`~skabc.KernelEnsemble` averages the three and is written to
   ``skabc/pretrained/omniglot.safetensors``.

The 3 validation alphabets of ``background_split()`` are used for model
selection (``--select``: the clustering settings of
the settings that ``benchmarks/pretrained_settings.py``
stores in ``skabc/pretrained/omniglot.safetensors``); the 20 evaluation alphabets are used
only by ``--eval``.
Checkpoints (every ``--checkpoint-minutes``) live in
``benchmarks/.checkpoints/omniglot``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from result_files import add_output_argument
from safetensors.torch import load_file, save_file
from threadpoolctl import threadpool_limits
from torch import nn

from skabc._runtime import tune_allocator
from skabc.datasets import load_omniglot
from skabc.nn import conv4_backbone

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "benchmarks" / ".checkpoints" / "omniglot"
# Where the archives are: --data-home, else load_omniglot's search ($SKABC_DATA, ~/skabc_data).
DATA_HOME = None
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"

SPLIT_SEED = 2020
STAGE1 = dict(steps=10_000, batch=128, lr=2e-3, weight_decay=1e-4, max_shift=2, seed=1)


def background_split(n_alphabets: int = 30) -> dict[str, np.ndarray]:
    """Fixed split of the 30 background alphabets: CNN / set encoder / validation."""
    order = np.random.default_rng(SPLIT_SEED).permutation(n_alphabets)
    return {"cnn": np.sort(order[:22]), "encoder": np.sort(order[22:27]), "validation": np.sort(order[27:])}


def load_background():
    return load_omniglot("background", image_size=28, data_home=DATA_HOME)


# ----------------------------------------------------------------- stage 1
class _Classifier(nn.Module):
    def __init__(self, n_classes: int) -> None:
        super().__init__()
        self.backbone = conv4_backbone(1, 64)
        self.classify = nn.Linear(64, n_classes)

    def forward(self, x):
        return self.classify(self.backbone(x))


def _augment(images: np.ndarray, rotations: np.ndarray, rng: np.random.Generator, max_shift: int) -> np.ndarray:
    """Rotate each image by ``rotations * 90`` degrees and shift it by up to ``max_shift`` pixels."""
    out = np.empty_like(images)
    side = images.shape[-1]
    padded = np.pad(images, ((0, 0), (max_shift, max_shift), (max_shift, max_shift)))
    shifts = rng.integers(0, 2 * max_shift + 1, size=(len(images), 2))
    for i, (rot, (dy, dx)) in enumerate(zip(rotations, shifts, strict=True)):
        out[i] = np.rot90(padded[i, dy : dy + side, dx : dx + side], k=int(rot))
    return out


def train_stage1(checkpoint_minutes: float) -> Path:
    out = CHECKPOINTS / "stage1_cnn.safetensors"
    if out.exists():
        print(f"stage 1 done: {out}")
        return out
    data = load_background()
    keep = np.isin(data.alphabet, background_split()["cnn"])
    images, chars = data.images[keep], data.target[keep]
    _, classes = np.unique(chars, return_inverse=True)
    n_classes = 4 * (classes.max() + 1)
    cfg = STAGE1
    torch.manual_seed(cfg["seed"])
    model = _Classifier(n_classes)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    state_file = CHECKPOINTS / "stage1_state.pt"
    step, cpu_before = 0, 0.0
    if state_file.exists():
        state = torch.load(state_file, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, cpu_before = int(state["step"]), float(state["cpu_seconds"])
        print(f"stage 1: resuming at step {step}")
    CHECKPOINTS.mkdir(parents=True, exist_ok=True)
    loss_fn = nn.CrossEntropyLoss()
    start_cpu, last_save, running = time.process_time(), time.monotonic(), []
    model.train()
    while step < cfg["steps"]:
        # Batches are a pure function of the step, so a resumed run draws what an uninterrupted one would.
        rng = np.random.default_rng([cfg["seed"], step])
        idx = rng.integers(0, len(images), size=cfg["batch"])
        rot = rng.integers(0, 4, size=cfg["batch"])
        batch = torch.from_numpy(_augment(images[idx], rot, rng, cfg["max_shift"]))[:, None]
        target = torch.from_numpy(classes[idx] * 4 + rot)
        lr = cfg["lr"] * 0.5 * (1 + math.cos(math.pi * step / cfg["steps"]))
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = loss_fn(model(batch), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        running.append(loss.item())
        step += 1
        if step % 200 == 0:
            print(f"stage 1 step {step}/{cfg['steps']} loss {np.mean(running):.3f} lr {lr:.2e}", flush=True)
            running = []
        if time.monotonic() - last_save > 60 * checkpoint_minutes or step == cfg["steps"]:
            cpu = cpu_before + time.process_time() - start_cpu
            tmp = state_file.with_suffix(".tmp")
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                        "cpu_seconds": cpu}, tmp)
            tmp.replace(state_file)
            last_save = time.monotonic()
    cpu = cpu_before + time.process_time() - start_cpu
    save_file({k: v.contiguous() for k, v in model.backbone.state_dict().items()}, str(out),
              metadata={"cpu_seconds": f"{cpu:.1f}", "n_classes": str(n_classes)})
    print(f"stage 1: {cfg['steps']} steps, {cpu / 60:.1f} CPU-min, saved {out}")
    return out


def load_backbone() -> nn.Module:
    backbone = conv4_backbone(1, 64)
    backbone.load_state_dict(load_file(str(CHECKPOINTS / "stage1_cnn.safetensors")))
    return backbone.eval()


# ----------------------------------------------------------------- stage 2
STAGE2 = dict(init="scratch", d_model=128, n_heads=4, n_blocks=2, compat="multiplicative", layer_norm="pre",
              set_size=100, batch_size=32, sets_per_epoch=3200, max_epochs=12, lr=1e-3, dropout=0.1,
              weight_decay=0.01, random_state=2)


@torch.inference_mode()
def embed(backbone: nn.Module, images: np.ndarray, batch: int = 1024) -> np.ndarray:
    """Frozen CNN features (n, 64) of images (n, 28, 28)."""
    parts = [backbone(torch.from_numpy(images[i : i + batch])[:, None]).numpy() for i in range(0, len(images), batch)]
    return np.concatenate(parts)


def rotated_embeddings(backbone: nn.Module, data, alphabets: np.ndarray):
    """Embeddings of the images of ``alphabets`` and their 3 rotations, each rotation a new character.

    Returns ``(features, labels, groups)``; groups are (alphabet, rotation) pairs.
    """
    keep = np.isin(data.alphabet, alphabets)
    images, chars, alpha = data.images[keep], data.target[keep], data.alphabet[keep]
    feats, labels, groups = [], [], []
    for rot in range(4):
        feats.append(embed(backbone, np.ascontiguousarray(np.rot90(images, k=rot, axes=(1, 2)))))
        labels.append(chars * 4 + rot)
        groups.append(alpha * 4 + rot)
    return np.concatenate(feats), np.concatenate(labels), np.concatenate(groups)


# Three set encoders from different seeds, averaged (skabc.KernelEnsemble). On the validation
# alphabets (--select, A**4, 'njw'): NMI 0.921 with k known and 0.916 with k unknown ('likelihood');
# the first member alone, in the same selection run before the ensemble: 0.913 and 0.906.
STAGE2_SEEDS = (2, 3, 4)


def _stage2_name(seed: int) -> str:
    """Checkpoint name of the member trained with ``random_state=seed`` (the first predates the others)."""
    return "stage2" if seed == STAGE2_SEEDS[0] else f"stage2_s{seed}"


def stage2_kernels():
    """The trained stage-2 members (frozen-embedding kernels), in STAGE2_SEEDS order."""
    from skabc import ContextualKernel

    paths = [CHECKPOINTS / f"{_stage2_name(seed)}_kernel.safetensors" for seed in STAGE2_SEEDS]
    missing = [path for path in paths if not path.is_file()]
    if missing:  # the checkpoints are git-ignored: a fresh checkout has none
        raise SystemExit(f"no trained stage-2 member at {missing[0].relative_to(ROOT)}: run "
                         "`python benchmarks/omniglot.py --train --stage 2` first (or --train for every stage)")
    return [ContextualKernel.load(path, device="cpu") for path in paths]


def train_stage2(threads: int) -> None:
    from skabc import ContextualKernel

    data = load_background()
    split = background_split()
    # All non-validation background alphabets: the 5 the CNN never saw (embeddings like those of new
    # alphabets) and the 22 it was trained on (variety).  With the 5 alone the set encoder memorised
    # their characters (training loss 0.005; validation NMI, k known, 0.80 against KMeans' 0.91).
    X, y, groups = rotated_embeddings(load_backbone(), data, np.concatenate([split["encoder"], split["cnn"]]))
    print(f"stage 2: {len(X)} embeddings, {len(np.unique(y))} characters, {len(np.unique(groups))} groups")
    for seed in STAGE2_SEEDS:
        out = CHECKPOINTS / f"{_stage2_name(seed)}_kernel.safetensors"
        if out.exists():
            print(f"stage 2, seed {seed}: done ({out})")
            continue
        kernel = ContextualKernel(**dict(STAGE2, random_state=seed), checkpoint_dir=CHECKPOINTS / _stage2_name(seed),
                                  verbose=1)
        kernel.fit(X, y, groups=groups)
        kernel.save(out)
        wall = sum(kernel.net_.history[:, "dur"])
        print(f"stage 2, seed {seed}: {len(kernel.net_.history)} epochs, {wall / 60:.1f} min, saved {out}")


# ---------------------------------------------------------------- assembly
def assemble(out: Path | None = None):
    """One kernel per stage-2 member taking 784-pixel rows (CNN backbone + its MLP, blocks and head),
    averaged by a KernelEnsemble written to ``skabc/pretrained/omniglot.safetensors``."""
    from skabc import ContextualKernel, KernelEnsemble
    from skabc.kernels._contextual_io import load_weights
    from skabc.pretrained import PRETRAINED_DIR

    out = PRETRAINED_DIR / "omniglot.safetensors" if out is None else out
    backbone = load_file(str(CHECKPOINTS / "stage1_cnn.safetensors"))
    members = []
    for stage2 in stage2_kernels():
        state = {}
        for name, tensor in stage2.module_.state_dict().items():
            if name.startswith("embedder."):
                name = "embedder.head." + name[len("embedder."):]
            state[name] = tensor
        state.update({"embedder.backbone." + k: v for k, v in backbone.items()})
        params = {k: v for k, v in stage2.get_params(deep=False).items()}
        params.update(embedder="conv4", checkpoint_dir=None, verbose=0, device="auto")
        kernel = ContextualKernel(**params)
        load_weights(kernel, 28 * 28, state, "cpu")
        members.append(kernel)
    ensemble = KernelEnsemble.from_fitted(members)
    from pretrained_settings import SETTINGS  # benchmarks/: the settings chosen by --select

    ensemble.save(out, recommended_clustering=SETTINGS["omniglot"])
    print(f"assembled ensemble of {len(members)} kernels saved to {out}")
    return ensemble


# -------------------------------------------------------------- evaluation
def draw_sets(labels: np.ndarray, alphabet: np.ndarray, alphabets, n_per_alphabet: int, seed: int,
              n_clusters: int | None = None):
    """Yield ``(alphabet, rows, true_labels)`` per set: 100 images of one alphabet (paper's protocol).

    The number of characters is drawn uniformly from 5 (the fewest that fill
    100 images) up to what the alphabet holds, or fixed to ``n_clusters``.
    """
    from skabc.sampling import ClusterSetSampler

    for a in alphabets:
        rows = np.flatnonzero(alphabet == a)
        sampler = ClusterSetSampler(labels[rows], None, set_size=100, clusters_per_set=n_clusters)
        for i in range(n_per_alphabet):
            picked, truth = sampler.draw(np.random.default_rng([seed, int(a), i]))
            yield a, rows[picked], truth


def median_gamma(X: np.ndarray) -> float:
    """RBF width from the median squared distance of the set (the usual heuristic)."""
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return 1.0 / float(np.median(sq[np.triu_indices(len(X), 1)]))


def baselines(features: np.ndarray, k: int, seed: int) -> dict[str, np.ndarray]:
    """Context-free clusterers on the CNN embeddings, given the true k."""
    import warnings

    from sklearn.cluster import KMeans, SpectralClustering

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "kmeans": KMeans(k, n_init=10, random_state=seed).fit_predict(features),
            "spectral_rbf": SpectralClustering(k, affinity="rbf", gamma=median_gamma(features),
                                               random_state=seed).fit_predict(features),
            "spectral_knn": SpectralClustering(k, affinity="nearest_neighbors", n_neighbors=10,
                                               random_state=seed).fit_predict(features),
        }


SELECT_GRID = dict(affinity_power=(1.0, 2.0, 4.0, 6.0, 8.0), assign_labels=("kmeans", "njw"),
                   n_clusters_selection=("eigengap", "likelihood"))


def select(n_per_alphabet: int = 100, seed: int = 7) -> dict:
    """Choose the clustering settings of the shipped model on the validation background alphabets.

    The evaluation alphabets are never used.  Every combination of
    :data:`SELECT_GRID` runs ``ABCClustering`` on the stage-2 kernel with k
    unknown and with k known; the combination with the best NMI with k
    unknown wins (it becomes the settings that
    ``benchmarks/pretrained_settings.py`` stores in ``skabc/pretrained/omniglot.safetensors``).
    """
    from itertools import product

    from sklearn.frozen import FrozenEstimator
    from sklearn.metrics import normalized_mutual_info_score as nmi

    from skabc import ABCClustering, KernelEnsemble

    kernel = KernelEnsemble.from_fitted(stage2_kernels())
    model = ABCClustering(kernel=FrozenEstimator(kernel), random_state=0)
    data = load_background()
    feats = embed(load_backbone(), data.images)
    grid = [dict(zip(SELECT_GRID, values, strict=True)) for values in product(*SELECT_GRID.values())]

    def name(setting):
        return "/".join(f"{v:g}" if isinstance(v, float) else v for v in setting.values())

    scores: dict[str, list] = {}
    with threadpool_limits(1):
        for _, rows, truth in draw_sets(data.target, data.alphabet, background_split()["validation"],
                                        n_per_alphabet, seed):
            k = len(np.unique(truth))
            for setting in grid:
                labels = model.set_params(n_clusters=None, **setting).fit_predict(feats[rows])
                scores.setdefault(f"unknown/{name(setting)}", []).append(nmi(truth, labels))
                scores.setdefault(f"k_error/{name(setting)}", []).append(abs(model.n_clusters_ - k))
                if setting["n_clusters_selection"] == "eigengap":  # k known: the selection plays no part
                    labels = model.set_params(n_clusters=k).fit_predict(feats[rows])
                    scores.setdefault(f"known/{name(setting)}", []).append(nmi(truth, labels))
            for method, labels in baselines(feats[rows], k, 0).items():
                scores.setdefault(f"baseline/{method}", []).append(nmi(truth, labels))
    summary = {key: float(np.mean(v)) for key, v in scores.items()}
    for key, values in scores.items():
        print(f"{key:40s} {np.mean(values):.4f} +- {np.std(values) / np.sqrt(len(values)):.4f}")
    best = max(grid, key=lambda setting: summary[f"unknown/{name(setting)}"])
    print(f"best (k unknown): {best}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "omniglot_select.json").write_text(json.dumps(
        {"command": "python benchmarks/omniglot.py --select", "validation_alphabets":
         background_split()["validation"].tolist(), "sets": len(scores["baseline/kmeans"]), "seed": seed,
         "grid": {k: list(v) for k, v in SELECT_GRID.items()}, "scores": summary, "best": best}, indent=1))
    return summary


EVAL_SEED, EVAL_SETS_PER_ALPHABET = 20201, 50


def _evaluate_alphabet(images: np.ndarray, feats: np.ndarray, target: np.ndarray,
                       alphabet: np.ndarray, a: int, n_sets: int) -> dict:
    """All tasks on one evaluation alphabet; returns lists of per-set scores."""


    torch.set_num_threads(1)
    out: dict[str, list] = {}
    # One BLAS thread, as in the joblib workers that produced the published table: with the same library
    # versions the scores are then the same bit for bit wherever this runs (tests/test_pretrained.py
    # recomputes some); other numpy/scipy builds move their last digits (check_reproduction).
    with threadpool_limits(1):
        _evaluate_sets(images, feats, target, alphabet, a, n_sets, out)
    return out


def _evaluate_sets(images, feats, target, alphabet, a, n_sets, out) -> None:
    from sklearn.metrics import adjusted_rand_score as ari
    from sklearn.metrics import normalized_mutual_info_score as nmi

    from skabc import ABCClustering

    # The shipped kernel is loaded once; set_params keeps it (frozen) for every set and task.
    model = ABCClustering.from_pretrained("omniglot", device="cpu")

    def record(key, truth, labels):
        out.setdefault(f"{key}/nmi", []).append(nmi(truth, labels))
        out.setdefault(f"{key}/ari", []).append(ari(truth, labels))

    for task, fixed_k in (("variable", None), ("k20", 20)):
        for i, (_, rows, truth) in enumerate(draw_sets(target, alphabet, [a], n_sets, EVAL_SEED, fixed_k)):
            k = len(np.unique(truth))
            seed = i
            if task == "variable":
                labels = model.set_params(n_clusters=None, random_state=seed).fit_predict(images[rows])
                record("abc/unknown", truth, labels)
                out.setdefault("k_true", []).append(k)
                out.setdefault("k_hat", []).append(model.n_clusters_)
            labels = model.set_params(n_clusters=k, random_state=seed).fit_predict(images[rows])
            record(f"abc/{'known' if task == 'variable' else 'k20'}", truth, labels)
            for name, labels in baselines(feats[rows], k, seed).items():
                record(f"{name}/{'known' if task == 'variable' else 'k20'}", truth, labels)


REPRODUCE_KEYS = ("abc/unknown/nmi", "abc/known/nmi", "abc/k20/nmi", "kmeans/known/nmi")
#: Relative difference within which a recomputed score reproduces a published one (last digits of other builds).
REPRODUCE_RTOL = 1e-12


def reproduce(data_home=None, n_sets: int = 3) -> dict[str, list[float]]:
    """Per-set scores of the first ``n_sets`` sets of every task on the first evaluation alphabet.

    Stored in the results JSON; ``--reproduce`` recomputes them and requires
    equality (``tests/test_omniglot.py`` runs it as a user would).
    """
    from skabc.pretrained import load

    kernel = load("omniglot", device="cpu")
    data = load_omniglot("evaluation", image_size=28, data_home=data_home)
    feats = embed(kernel.kernels_[0].module_.embedder.backbone.eval(), data.images)
    scores = _evaluate_alphabet(data.data, feats, data.target, data.alphabet, 0, n_sets)
    return {key: [float(v) for v in scores[key]] for key in REPRODUCE_KEYS}


def check_reproduction(data_home=None) -> int:
    """Recompute the published per-set scores (``reproduce`` in the results JSON); 0 if all are reproduced.

    With the library versions that produced them they are equal bit for bit; other numpy/scipy builds move
    the last digits, so a score within :data:`REPRODUCE_RTOL` (relative) of the published one counts as
    reproduced, and is reported as such.
    """
    published = json.loads((RESULTS / "omniglot.json").read_text())["reproduce"]
    scores = reproduce(data_home, n_sets=len(published[REPRODUCE_KEYS[0]]))
    exact = close = different = 0
    for key in REPRODUCE_KEYS:
        for i, (got, want) in enumerate(zip(scores[key], published[key], strict=True)):
            if got == want:
                verdict, exact = "same", exact + 1
            elif math.isclose(got, want, rel_tol=REPRODUCE_RTOL, abs_tol=REPRODUCE_RTOL):
                verdict, close = f"same to {REPRODUCE_RTOL:g}", close + 1
            else:
                verdict, different = "DIFFERENT", different + 1
            print(f"{key:18s} set {i}: {got!r:22s} published {want!r:22s} {verdict}")
    if different:
        print(f"{different} scores differ from benchmarks/results/omniglot.json")
        return 1
    print("all published per-set scores reproduced" + (" bit for bit" if not close else
          f": {exact} bit for bit, {close} to within {REPRODUCE_RTOL:g} (other library builds)"))
    return 0


def evaluate(n_sets: int = EVAL_SETS_PER_ALPHABET, n_jobs: int = 2, command: str = "python benchmarks/omniglot.py "
             "--eval", output: str | None = None) -> None:
    """Table 4 of the paper on the 20 evaluation alphabets, from the shipped weights.

    Fewer sets per alphabet than :data:`EVAL_SETS_PER_ALPHABET` is a partial run: its JSON goes to
    ``omniglot_partial.json`` (or ``output``) and the docs page is left as it is.
    """
    from joblib import Parallel, delayed

    from skabc.pretrained import load

    start = time.perf_counter()
    kernel = load("omniglot", device="cpu")
    data = load_omniglot("evaluation", image_size=28, data_home=DATA_HOME)
    feats = embed(kernel.kernels_[0].module_.embedder.backbone.eval(), data.images)
    alphabets = range(len(data.alphabet_names))
    per_alphabet = Parallel(n_jobs=n_jobs)(
        delayed(_evaluate_alphabet)(data.data, feats, data.target, data.alphabet, a, n_sets) for a in alphabets
    )
    seconds = time.perf_counter() - start
    write_results(data.alphabet_names, per_alphabet, n_sets, seconds, reproduce(DATA_HOME), command, output)


def _mean(values) -> float:
    return float(np.mean(values))


def _paired_sem(per_alphabet: list[dict], a: str, b: str) -> float:
    """Standard error of the mean per-set difference ``a - b`` over every set of every alphabet."""
    diff = np.concatenate([np.subtract(scores[a], scores[b]) for scores in per_alphabet])
    return float(np.std(diff) / np.sqrt(len(diff)))


def write_results(names, per_alphabet: list[dict], n_sets: int, seconds: float, check: dict,
                  command: str = "python benchmarks/omniglot.py --eval", output: str | None = None) -> None:
    from result_files import output_path

    from skabc.pretrained import RECOMMENDED_CLUSTERING

    keys = sorted(per_alphabet[0])
    rows = {}
    for name, scores in zip(names, per_alphabet, strict=True):
        row = {key: _mean(v) for key, v in scores.items() if key not in ("k_true", "k_hat")}
        row["k_abs_error"] = _mean(np.abs(np.array(scores["k_hat"]) - np.array(scores["k_true"])))
        row["k_hat_mean"] = _mean(scores["k_hat"])
        row["k_true_mean"] = _mean(scores["k_true"])
        rows[str(name)] = row
    mean = {key: _mean([r[key] for r in rows.values()]) for key in next(iter(rows.values()))}
    partial = n_sets < EVAL_SETS_PER_ALPHABET
    provenance = training_provenance()
    result = {
        "benchmark": "omniglot",
        "command": command,
        "partial": partial,
        "protocol": f"20 evaluation alphabets x {n_sets} sets of 100 images per task; variable k uniform in "
                    "[5, characters of the alphabet], and k = 20",
        "eval_seed": EVAL_SEED,
        "seconds": seconds,
        **provenance,
        "stage2": {k: (list(v) if isinstance(v, tuple) else v) for k, v in STAGE2.items()},
        "stage2_seeds": list(STAGE2_SEEDS),
        "split": {k: v.tolist() for k, v in background_split().items()},
        "settings": dict(RECOMMENDED_CLUSTERING["omniglot"]),
        "known_minus_kmeans_sem": _paired_sem(per_alphabet, "abc/known/nmi", "kmeans/known/nmi"),
        "mean": mean,
        "per_alphabet": rows,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "keys": keys,
        "reproduce": check,
    }
    path = output_path("omniglot.json", partial, output)
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    if not partial and output is None:  # the page quotes the committed JSON
        (DOCS / "omniglot_results.md").write_text(markdown(result))
    print(markdown(result))


def training_provenance() -> dict:
    """The shipped weights' training record: ``training_minutes`` and ``stage1`` (the CNN file's metadata).

    From the training checkpoints where this checkout has them (they are git-ignored), else carried over from the
    committed ``omniglot.json``, which recorded them for the same weights; ``None`` where neither has them.
    """
    stage1 = load_file_metadata(CHECKPOINTS / "stage1_cnn.safetensors")
    histories = [CHECKPOINTS / _stage2_name(seed) / "history.json" for seed in STAGE2_SEEDS]
    if "cpu_seconds" in stage1 and all(history.exists() for history in histories):
        return {"training_minutes": training_minutes(), "stage1": stage1}
    committed = RESULTS / "omniglot.json"
    recorded = json.loads(committed.read_text()) if committed.exists() else {}
    return {"training_minutes": recorded.get("training_minutes"), "stage1": recorded.get("stage1")}


def training_minutes() -> dict:
    """Stage 1's CPU minutes (its file's metadata) and stage 2's wall minutes (no CPU time was recorded for it)."""
    stage1 = float(load_file_metadata(CHECKPOINTS / "stage1_cnn.safetensors").get("cpu_seconds", "nan"))
    # Stage 2: the epoch durations (wall clock) of every member, from its checkpoint history.
    stage2 = 0.0
    for seed in STAGE2_SEEDS:
        history = CHECKPOINTS / _stage2_name(seed) / "history.json"
        stage2 += sum(row["dur"] for row in json.loads(history.read_text())) if history.exists() else float("nan")
    return {"stage1_cnn_cpu": stage1 / 60, "stage2_set_encoder_wall": stage2 / 60}


def load_file_metadata(path: Path) -> dict:
    from safetensors import safe_open

    if not path.exists():
        return {}
    with safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})


def _worst(rows: dict, key: str, n: int) -> list[str]:
    return [name for name, _ in sorted(rows.items(), key=lambda kv: kv[1][key])[:n]]


def _describe_settings(settings: dict) -> str:
    return ", ".join(f"`{k}={v!r}`" for k, v in settings.items())


def markdown(result: dict) -> str:
    rows, mean = result["per_alphabet"], result["mean"]

    def table(title: str, columns: list[tuple[str, str]], extra=None) -> list[str]:
        head = "| Alphabet | " + " | ".join(c for c, _ in columns) + (" | " + extra[0] if extra else "") + " |"
        lines = [f"## {title}", "", head, "|---|" + "---:|" * (len(columns) + (1 if extra else 0))]
        for name, row in [*rows.items(), ("**mean**", mean)]:
            cells = [f"{row[key]:.4f}" for _, key in columns]
            if extra:
                cells.append(extra[1](row))
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        return [*lines, ""]

    k_err = ("k_hat / k (mean abs. error)", lambda r: f"{r['k_hat_mean']:.1f} / {r['k_true_mean']:.1f} "
                                                     f"({r['k_abs_error']:.2f})")
    t = result["training_minutes"]
    training = ("Training: not recorded (no training checkpoints in this checkout and no committed record)."
                if t is None else
                f"Training: stage 1 (conv4 CNN classifier) {t['stage1_cnn_cpu']:.1f} CPU-min, stage 2 (set encoder on "
                f"frozen embeddings, {len(result['stage2_seeds'])} members from different seeds, averaged) "
                f"{t['stage2_set_encoder_wall']:.1f} min wall in all, one thread each.")
    out = [
        "# Omniglot results",
        "",
        f"Measured by `{result['command']}` on the shipped weights `skabc.pretrained.load('omniglot')` "
        f"({result['protocol']}; evaluation seed {result['eval_seed']}; {result['seconds'] / 60:.1f} min). "
        "The 20 evaluation alphabets were never used for training or model selection.",
        "",
        training,
        "",
        "Paper (Table 2, ABC multiplicative): NMI 0.874 (k unknown), 0.893 (k known), 0.884 (k = 20).",
        "",
    ]
    best_free = max(("KMeans", mean["kmeans/known/nmi"]), ("SpectralClustering rbf", mean["spectral_rbf/known/nmi"]),
                    ("SpectralClustering kNN", mean["spectral_knn/known/nmi"]),
                    key=lambda kv: kv[1])
    out += [
        "## Summary",
        "",
        f"- k unknown ({_describe_settings(result['settings'])}, chosen on validation alphabets): NMI "
        f"{mean['abc/unknown/nmi']:.3f} (paper 0.874), mean |k_hat - k| {mean['k_abs_error']:.2f}; on average "
        f"k_hat is {mean['k_hat_mean']:.1f} for a true {mean['k_true_mean']:.1f}. The lowest NMI is on "
        f"{', '.join(_worst(rows, 'abc/unknown/nmi', 3))}; the largest k errors are on "
        f"{', '.join(_worst({n: {'e': -r['k_abs_error']} for n, r in rows.items()}, 'e', 3))}.",
        f"- k known: NMI {mean['abc/known/nmi']:.3f} (paper 0.893); k = 20: {mean['abc/k20/nmi']:.3f} (paper 0.884).",
        f"- The best context-free baseline on the same frozen CNN embeddings, given the true k, is "
        f"{best_free[0]}: {best_free[1]:.3f} with k known, "
        + ("below" if mean["abc/known/nmi"] > best_free[1] else "not below")
        + f" ABC's {mean['abc/known/nmi']:.3f}; per set, ABC minus KMeans: "
        f"{mean['abc/known/nmi'] - mean['kmeans/known/nmi']:+.4f} ± {result['known_minus_kmeans_sem']:.4f} (s.e.).",
        "",
    ]
    out += table("ABC, NMI (the paper's Table 4)", [("k unknown", "abc/unknown/nmi"), ("k known", "abc/known/nmi"),
                                                    ("k = 20", "abc/k20/nmi")], k_err)
    out += table("ABC, ARI", [("k unknown", "abc/unknown/ari"), ("k known", "abc/known/ari"),
                              ("k = 20", "abc/k20/ari")])
    out += table("Context-free baselines on the same CNN embeddings, given the true k, NMI",
                 [("KMeans k known", "kmeans/known/nmi"), ("KMeans k = 20", "kmeans/k20/nmi"),
                  ("Spectral rbf k known", "spectral_rbf/known/nmi"), ("Spectral rbf k = 20", "spectral_rbf/k20/nmi"),
                  ("Spectral kNN k known", "spectral_knn/known/nmi"), ("Spectral kNN k = 20", "spectral_knn/k20/nmi")])
    out += table("Context-free baselines on the same CNN embeddings, given the true k, ARI",
                 [("KMeans k known", "kmeans/known/ari"), ("KMeans k = 20", "kmeans/k20/ari"),
                  ("Spectral rbf k known", "spectral_rbf/known/ari"), ("Spectral rbf k = 20", "spectral_rbf/k20/ari"),
                  ("Spectral kNN k known", "spectral_knn/known/ari"), ("Spectral kNN k = 20", "spectral_knn/k20/ari")])
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--stage", type=int, choices=[1, 2, 3])
    parser.add_argument("--select", action="store_true", help="model selection on validation alphabets")
    parser.add_argument("--eval", action="store_true", help="Table 4 on the evaluation alphabets")
    parser.add_argument("--reproduce", action="store_true",
                        help="recompute the published per-set scores and compare them (bit for bit, or to 1e-12 "
                             "with other library builds; exit 1 if not)")
    parser.add_argument("--sets", type=int, default=EVAL_SETS_PER_ALPHABET, help="sets per alphabet and task")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-home", help="folder holding images_background.zip and images_evaluation.zip")
    parser.add_argument("--checkpoint-minutes", type=float, default=2.0)
    add_output_argument(parser, "omniglot.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tune_allocator()
    global DATA_HOME
    DATA_HOME = args.data_home
    if args.train:
        if args.stage in (None, 1):
            train_stage1(args.checkpoint_minutes)
        if args.stage in (None, 2):
            train_stage2(args.threads)
        if args.stage in (None, 3):
            assemble()
    if args.select:
        select()
    if args.eval:
        command = " ".join(["python benchmarks/omniglot.py", *(sys.argv[1:] if argv is None else argv)])
        evaluate(args.sets, args.jobs, command, args.output)
    if args.reproduce:
        return check_reproduction(DATA_HOME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
