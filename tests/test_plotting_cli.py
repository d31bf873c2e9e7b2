"""Plot helpers (Agg backend) and the command line."""

from __future__ import annotations

import re
import warnings

import matplotlib
import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from skabc import ContextualKernel
from skabc.cli import main
from skabc.plotting import plot_affinity, plot_clusters, plot_eigengap


def test_plot_affinity_sorts_by_cluster_and_shows_truth():
    labels = np.array([1, 0, 1, 0])
    A = (labels[:, None] == labels[None, :]).astype(float)
    axes = plot_affinity(A, labels)
    learned = axes[0].images[0].get_array()
    truth = axes[1].images[0].get_array()
    # Sorted by cluster, a perfect affinity is block diagonal and equals the truth panel.
    np.testing.assert_array_equal(learned, [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]])
    np.testing.assert_array_equal(learned, truth)
    plt.close("all")


def test_plot_eigengap_marks_the_choice():
    ax = plot_eigengap([0.0, 0.01, 0.02, 0.9, 0.95], n_clusters=3)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.0, 0.01, 0.02, 0.9, 0.95])
    assert "k = 3" in ax.get_legend().get_texts()[0].get_text()
    plt.close("all")


def test_plot_eigengap_draws_one_spectrum_per_group():
    """eigenvalues_ after a fit with groups is a list: it was drawn as 51 two-point lines (groups of one size) or
    failed inside numpy (groups of different sizes)."""
    from skabc import ABCClustering
    from skabc.datasets import make_blobs_set

    X, _ = make_blobs_set(200, n_clusters=3, random_state=0)
    model = ABCClustering(random_state=0).fit(X, groups=np.where(np.arange(200) < 150, 0, 1))
    ax = plot_eigengap(model.eigenvalues_)
    assert len(ax.lines) == 2
    for line, spectrum in zip(ax.lines, model.eigenvalues_, strict=True):
        np.testing.assert_allclose(line.get_ydata(), spectrum)
        np.testing.assert_array_equal(line.get_xdata(), np.arange(1, len(spectrum) + 1))
    with pytest.raises(ValueError, match="n_clusters marks one spectrum; got 2"):
        plot_eigengap(model.eigenvalues_, n_clusters=3)
    plt.close("all")


@pytest.mark.parametrize(("eigenvalues", "n_clusters", "message"), [
    (np.zeros((3, 3)), None, r"non-empty 1-D array of eigenvalues, got shape \(3, 3\)"),
    ([], None, "non-empty 1-D"),
    ([0.0, np.nan, 1.0], None, "NaN or infinity"),
    ([0.0, 0.5, 1.0], 0, r"n_clusters=0 is outside the spectrum's 1..3"),
    ([0.0, 0.5, 1.0], 500, "n_clusters=500 is outside"),
    ([None, None], None, "no spectrum to plot"),
])
def test_plot_eigengap_refuses_what_it_cannot_draw(eigenvalues, n_clusters, message):
    with pytest.raises(ValueError, match=message):
        plot_eigengap(eigenvalues, n_clusters=n_clusters)
    plt.close("all")


@pytest.mark.parametrize("d", [1, 2, 5])
def test_plot_clusters_projects_to_2d(d):
    X = np.random.default_rng(0).normal(size=(30, d))
    ax = plot_clusters(X, np.arange(30) % 3, title="t")
    offsets = ax.collections[0].get_offsets()
    assert offsets.shape == (30, 2) and ax.get_title() == "t"
    plt.close("all")


def test_cli_version(capsys):
    from skabc import __version__

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"skabc {__version__}"


def test_cli_without_command_prints_help(capsys):
    assert main([]) == 2
    assert "demo" in capsys.readouterr().err  # a usage error: on stderr, as argparse reports them


@pytest.mark.parametrize("argv", [["demo", "--no-such-option"], ["demo", "--sets", "0"], ["demo", "--epochs", "x"],
                                  # Probe 53j: a negative block count got past argparse and exited 1, not 2.
                                  ["train", "X.npy", "y.npy", "-o", "k.safetensors", "--n-blocks", "-1"],
                                  # Probe 67c: these trained to the end and failed at the save, or overflowed in torch.
                                  ["train", "X.npy", "y.npy", "-o", "k.safetensors", "--epochs", "2147483649"],
                                  ["train", "X.npy", "y.npy", "-o", "k.safetensors", "--set-size", "2", "3000000000"],
                                  ["demo", "--threads", "3000000000"]])
def test_cli_rejects_bad_options(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_counts_a_saved_kernel_cannot_hold_are_refused_before_training():
    """Probe 67c: max_epochs or set_size above 2**31 trained to the end, then the save refused them."""
    X, y = np.random.default_rng(0).normal(size=(40, 2)), np.arange(40) % 2
    for params in ({"max_epochs": 2**31 + 1}, {"sets_per_epoch": 2**33}, {"set_size": 2**40}):
        with pytest.raises(ValueError, match="range"):
            ContextualKernel(**params).fit(X, y)
    with pytest.raises(ValueError, match=r"max <= 2147483648"):
        ContextualKernel(set_size=(2, 3_000_000_000)).fit(X, y)


@pytest.mark.parametrize("command", ["demo", "train X.npy y.npy -o k.safetensors", "cluster X.npy -o l.npy"])
@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_cli_seed_out_of_range_is_an_option_error(command, seed, capsys):
    """A negative --seed failed after loading, naming ABCClustering's 'random_state' parameter."""
    with pytest.raises(SystemExit) as info:
        main([*command.split(), "--seed", seed])
    assert info.value.code == 2
    assert f"argument --seed: expected an integer from 0 to 4294967295, got '{seed}'" in capsys.readouterr().err


def test_cli_demo_prints_table_and_saves_picture(tmp_path, capsys):
    out = tmp_path / "demo.png"
    assert main(["demo", "--sets", "2", "--plot", str(out), "--threads", "1"]) == 0
    text = capsys.readouterr().out
    assert "ABC multiplicative (eigengap k)" in text and "SpectralClustering rbf (true k)" in text
    assert out.stat().st_size > 10_000


def test_demo_baselines_keep_their_own_remarks_out_of_the_output():
    """The README's first command printed scikit-learn's 'Graph is not fully connected' warning from the kNN
    baseline, pointing into scikit-learn (probe /work/probe39b/r12_demo_leak.sh; the demo's seed 2024 at 300)."""
    from skabc.demo import compare_on_circles

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = compare_on_circles({}, set_sizes=(300,), n_sets=20, random_state=2024)
    assert not [str(w.message) for w in caught]
    assert [row["method"] for row in rows] == ["SpectralClustering rbf (true k)", "SpectralClustering kNN (true k)"]


def test_cli_train_cluster_evaluate_round_trip(tmp_path, capsys):
    """A user's own files: train a kernel, cluster with it, evaluate the labels."""
    from conftest import make_blob_sets

    X, y, g = make_blob_sets(n_sets=20, set_size=30, random_state=0)
    np.save(tmp_path / "X.npy", X)
    np.savetxt(tmp_path / "y.csv", y, fmt="%d", header="label", comments="")
    np.save(tmp_path / "g.npy", g)
    kernel = tmp_path / "k.safetensors"
    args = ["train", str(tmp_path / "X.npy"), str(tmp_path / "y.csv"), "--groups", str(tmp_path / "g.npy"),
            "-o", str(kernel), "--d-model", "16", "--n-blocks", "1", "--set-size", "10", "30", "--epochs", "1", "-q"]
    assert main(args) == 0 and kernel.exists()
    labels = tmp_path / "labels.npy"
    picture = tmp_path / "clusters.png"
    args = ["cluster", str(tmp_path / "X.npy"), "--kernel", str(kernel), "--groups", str(tmp_path / "g.npy"),
            "-o", str(labels), "--plot", str(picture)]
    assert main(args) == 0
    assert np.load(labels).shape == (600,) and picture.stat().st_size > 1000
    assert "clustering sets" in capsys.readouterr().err  # progress bar over the 20 sets
    quiet = tmp_path / "quiet.npy"
    assert main([*args[:-4], "-o", str(quiet), "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
    np.testing.assert_array_equal(np.load(quiet), np.load(labels))
    np.save(tmp_path / "truth.npy", y + 10 * g)
    capsys.readouterr()
    assert main(["evaluate", str(labels), str(tmp_path / "truth.npy")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ARI ") and "NMI " in out


def test_cli_train_fine_tunes_the_generic_kernel_by_default(tmp_path):
    """A probe: `skabc train` always trained a new network for 40 epochs, where ContextualKernel() fine-tunes the
    generic kernel (0.113 against 0.657 ARI on unseen digits in the guide's table)."""
    from conftest import make_blob_sets

    from skabc import ContextualKernel
    from skabc.training.plan import network_of

    X, y, _ = make_blob_sets(n_sets=8, set_size=30, random_state=0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    kernel = tmp_path / "k.safetensors"
    assert main(["train", str(tmp_path / "X.npy"), str(tmp_path / "y.npy"), "-o", str(kernel),
                 "--epochs", "1", "--set-size", "10", "30", "-q"]) == 0
    assert network_of(ContextualKernel.load(kernel)).canonical_features == 64  # the generic kernel's network
    scratch = tmp_path / "s.safetensors"
    assert main(["train", str(tmp_path / "X.npy"), str(tmp_path / "y.npy"), "-o", str(scratch), "--scratch",
                 "--d-model", "16", "--n-blocks", "1", "--epochs", "1", "--set-size", "10", "30", "-q"]) == 0
    assert network_of(ContextualKernel.load(scratch)).canonical_features is None


def test_cli_cluster_with_shipped_kernel(tmp_path):
    from skabc.datasets import make_circles_sets

    X, _, _ = make_circles_sets(n_sets=1, set_size=120, random_state=0)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",", header="a,b", comments="")
    argv = ["cluster", str(tmp_path / "X.csv"), "--pretrained", "circles", "-o", str(tmp_path / "l.txt"), "-q"]
    assert main(argv) == 0
    assert len(np.loadtxt(tmp_path / "l.txt")) == 120


def test_cli_cluster_defaults_to_the_generic_kernel_zero_shot(tmp_path, capsys):
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score

    X, y = make_blobs(n_samples=300, centers=3, n_features=5, cluster_std=0.5, random_state=0)
    np.save(tmp_path / "X.npy", X)
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.npy")]) == 0
    labels = np.load(tmp_path / "l.npy")
    assert adjusted_rand_score(y, labels) > 0.9
    assert "3 clusters" in capsys.readouterr().out


def test_cli_cluster_no_gaussian_split_keeps_touching_blobs_whole(tmp_path, capsys):
    from sklearn.datasets import make_blobs
    from sklearn.preprocessing import StandardScaler

    from skabc import ABCClustering

    X = StandardScaler().fit_transform(make_blobs(n_samples=500, random_state=211)[0])  # two of three blobs touch
    np.save(tmp_path / "X.npy", X)
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "on.npy"), "-q"]) == 0
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "off.npy"), "-q", "--no-gaussian-split"]) == 0
    on, off = np.load(tmp_path / "on.npy"), np.load(tmp_path / "off.npy")
    np.testing.assert_array_equal(on, ABCClustering(random_state=0).fit_predict(X))
    np.testing.assert_array_equal(off, ABCClustering(random_state=0, gaussian_split=False).fit_predict(X))
    assert len(np.unique(on)) == 3 and len(np.unique(off)) == 2


def test_cli_cluster_max_clusters_lets_the_estimate_past_50(tmp_path, capsys):
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n_samples=1200, centers=60, cluster_std=0.3, center_box=(-30, 30), random_state=1)
    np.save(tmp_path / "X.npy", X)
    with pytest.warns(UserWarning, match="reached max_clusters=50"):
        assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "a.npy")]) == 0
    assert "50 clusters" in capsys.readouterr().out
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "b.npy"), "--max-clusters", "100"]) == 0
    assert len(np.unique(np.load(tmp_path / "b.npy"))) > 50


@pytest.mark.parametrize(
    "argv, message",
    [
        (["cluster", "missing.npy", "--pretrained", "circles", "-o", "l.npy"], "does not exist"),
        (["cluster", "{bad}", "--pretrained", "circles", "-o", "l.npy"], "cannot read X"),
        (["cluster", "{X}", "--pretrained", "nope", "-o", "l.npy"], "unknown pretrained kernel"),
        (["cluster", "{X}", "--kernel", "{bad}", "-o", "l.npy"], "not a safetensors file"),
        (["evaluate", "{X1}", "{X2}"], "entries"),
        (["evaluate", "{empty}", "{empty}"], "holds no values"),  # scored ARI 1.0 and exit 0 before
        (["evaluate", "{header}", "{header}"], "holds no values"),
        (["evaluate", "{titles}", "{titles}"], "holds no values"),  # one row of titles: a header alone
        # A first row with one bad field was dropped as a "header": n - 1 labels, misaligned, exit status 0.
        (["cluster", "{na_first}", "-o", "l.npy"], "'NA' is not a number (line 1, column 2)"),
        (["cluster", "{semicolons}", "-o", "l.npy"], "values must be separated by commas"),
        # Probe 53j: an empty line between values was dropped, moving every later label one row up.
        (["evaluate", "{gap}", "{gap}"], "line 3 is empty"),
    ],
)
def test_cli_bad_files_give_a_message_not_a_traceback(tmp_path, capsys, argv, message):
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "header.csv").write_text("label\n")
    (tmp_path / "titles.csv").write_text("label,group\n")
    (tmp_path / "na_first.csv").write_text("1.0,NA\n" + "".join(f"{i},{i}\n" for i in range(9)))
    (tmp_path / "semicolons.csv").write_text("".join(f"{i};{i}\n" for i in range(10)))
    (tmp_path / "gap.csv").write_text("a\nb\n\na\nb\n\n")
    np.save(tmp_path / "X.npy", np.zeros((10, 2)))
    np.save(tmp_path / "X1.npy", np.zeros(10))
    np.save(tmp_path / "X2.npy", np.zeros(9))
    paths = {"bad": tmp_path / "bad.npy", "X": tmp_path / "X.npy", "X1": tmp_path / "X1.npy", "X2": tmp_path / "X2.npy",
             "empty": tmp_path / "empty.csv", "header": tmp_path / "header.csv", "titles": tmp_path / "titles.csv",
             "na_first": tmp_path / "na_first.csv", "semicolons": tmp_path / "semicolons.csv",
             "gap": tmp_path / "gap.csv"}
    argv, message = [a.format(**paths) for a in argv], message.format(**paths)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "input contained no data" must not reach the user either
        assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_evaluate_reads_the_text_labels_cluster_writes(tmp_path, capsys):
    """`cluster -o labels.out` writes text for any name but .npy; `evaluate` refused to read it back."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=90, centers=3, cluster_std=0.4, random_state=0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "labels.out"), "-q"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "labels.out"), str(tmp_path / "y.npy")]) == 0
    assert capsys.readouterr().out.startswith("ARI 1.0000")


def test_one_column_files_keep_a_header_set_off_by_an_empty_line(tmp_path):
    """Review 54f: only empty lines between values are refused; one after a header, or around the values, is not."""
    from skabc._cli_files import read_array

    (tmp_path / "labels.csv").write_text("\nspecies\n\na\nb\nb\na\n\n")
    assert read_array(str(tmp_path / "labels.csv"), "labels", 1).tolist() == ["a", "b", "b", "a"]
    (tmp_path / "gap.csv").write_text("species\na\nb\n\nb\na\n")
    with pytest.raises(ValueError, match="line 4 is empty"):
        read_array(str(tmp_path / "gap.csv"), "labels", 1)


@pytest.mark.parametrize("n_clusters", [None, 3])
def test_plot_candidates_shows_every_partition_and_marks_the_kept_one(n_clusters):
    from sklearn.datasets import make_blobs

    from skabc import ABCClustering
    from skabc.plotting import plot_candidates

    X, _ = make_blobs(n_samples=120, centers=3, cluster_std=0.5, random_state=0)
    model = ABCClustering(n_clusters=n_clusters, random_state=0).fit(X)
    axes = plot_candidates(model, X)
    kept = [ax for ax in axes if ax.get_title().endswith("(kept)")]
    assert len(axes) == (4 if n_clusters is None else 2) and len(kept) == 1
    assert kept[0].get_title().startswith(model.candidate_)  # the partition fit kept
    assert kept[0].title.get_fontweight() == "bold"
    with pytest.raises(ValueError, match="without an arbiter"):
        plot_candidates(ABCClustering(arbiter=None, random_state=0).fit(X), X)
    plt.close("all")


def test_plot_candidates_marks_a_panel_that_only_gave_k():
    """A probe (/work/probe42b): a counting arbiter (any scikit-learn affinity, k unknown) keeps a generic
    candidate's k and cuts the model's own affinity into it, yet its panel was titled "(kept)" though its partition
    was not the model's (ARI 0.26 with labels_ on moons); likewise the kNN-partition arbiter's."""
    from sklearn.datasets import make_moons

    from skabc import ABCClustering
    from skabc.plotting import plot_candidates

    X, _ = make_moons(120, noise=0.05, random_state=0)
    for model in (ABCClustering(affinity="rbf", random_state=0).fit(X),
                  ABCClustering(arbiter="generic-knn", random_state=0).fit(X)):
        titles = [ax.get_title() for ax in plot_candidates(model, X)]
        assert not any(t.endswith("(kept)") for t in titles)
        marked = [t for t in titles if t.endswith("(k kept)")]
        assert len(marked) == 1 and f"k = {model.n_clusters_}" in marked[0]
    plt.close("all")


def test_plot_candidates_refuses_a_set_predict_would_refuse():
    """A probe (/work/probe42b): X of another width or other feature names than fit saw was drawn without a word,
    where predict raises."""
    import pandas as pd
    from sklearn.datasets import make_blobs

    from skabc import ABCClustering
    from skabc.plotting import plot_candidates

    X, _ = make_blobs(n_samples=120, centers=3, cluster_std=0.5, random_state=0)
    model = ABCClustering(random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        plot_candidates(model, np.c_[X, X])
    named = ABCClustering(random_state=0).fit(pd.DataFrame(X, columns=["a", "b"]))
    with pytest.raises(ValueError, match="feature names"):
        plot_candidates(named, pd.DataFrame(X, columns=["x", "y"]))
    plt.close("all")


def test_plot_affinity_rejects_labels_of_another_length_and_non_square_matrices():
    A = np.eye(50)
    # Labels for 5 of the 50 rows used to draw a 5x5 sub-block without a word.
    with pytest.raises(ValueError, match="one entry per row of the 50x50 affinity"):
        plot_affinity(A, labels=np.arange(5))
    with pytest.raises(ValueError, match="square 2-D"):
        plot_affinity(np.ones((4, 3)))
    with pytest.raises(ValueError, match="square 2-D"):
        plot_affinity(np.ones(4), labels=np.zeros(4))
    plt.close("all")


def test_plot_affinity_needs_two_axes_with_labels():
    labels = np.array([0, 1, 0])
    A = np.eye(3)
    with pytest.raises(ValueError, match="must hold 2 Axes, one per panel, got a single Axes"):
        plot_affinity(A, labels, ax=plt.subplots()[1])
    _, axes = plt.subplots(1, 2)
    drawn = plot_affinity(A, labels, ax=list(axes))
    assert [a.get_title() for a in drawn] == ["learned affinity", "true same-cluster matrix"]
    with pytest.raises(TypeError, match="single matplotlib Axes"):
        plot_affinity(A, ax=axes)
    plt.close("all")


def test_plot_clusters_colours_string_labels_and_takes_sparse_x():
    import scipy.sparse as sp

    X = np.random.default_rng(0).normal(size=(6, 2))
    codes = np.array([2, 0, 1, 0, 2, 1])
    ax = plot_clusters(X, np.array(["a", "b", "c"])[codes])
    # String labels coloured as their sorted codes are: the same colours as the integer codes get.
    np.testing.assert_array_equal(ax.collections[0].get_facecolors(),
                                  plot_clusters(X, codes).collections[0].get_facecolors())
    assert len({tuple(c) for c in ax.collections[0].get_facecolors()}) == 3
    dense = plot_clusters(X, codes).collections[0].get_offsets()
    np.testing.assert_allclose(plot_clusters(sp.csr_matrix(X), codes).collections[0].get_offsets(), dense)
    plt.close("all")


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_plot_clusters_draws_a_single_point(d):
    ax = plot_clusters(np.ones((1, d)), [0])
    assert ax.collections[0].get_offsets().shape == (1, 2)
    plt.close("all")


@pytest.mark.parametrize(
    "X, labels, message",
    [
        (np.arange(5.0), np.zeros(5), "2D array"),
        (np.empty((5, 0)), np.zeros(5), "0 feature"),
        (np.array([[0.0, 1.0, 2.0], [np.nan, 1.0, 0.0]]), np.zeros(2), "NaN"),
        (np.zeros((5, 2)), np.zeros(4), r"one entry per sample of X \(5\)"),
    ],
)
def test_plot_clusters_rejects_bad_inputs_clearly(X, labels, message):
    with pytest.raises(ValueError, match=message):
        plot_clusters(X, labels)
    plt.close("all")


def test_plot_candidates_of_an_unfitted_model_says_not_fitted():
    """It said 'this model was fitted without an arbiter' of a model never fitted."""
    from sklearn.exceptions import NotFittedError

    from skabc import ABCClustering
    from skabc.plotting import plot_candidates

    with pytest.raises(NotFittedError, match="not fitted yet"):
        plot_candidates(ABCClustering(), np.random.default_rng(0).normal(size=(20, 2)))
    plt.close("all")


def test_plot_candidates_needs_one_axes_per_candidate():
    from sklearn.datasets import make_blobs

    from skabc import ABCClustering
    from skabc.plotting import plot_candidates

    X, _ = make_blobs(n_samples=60, centers=3, cluster_std=0.5, random_state=0)
    model = ABCClustering(n_clusters=3, random_state=0).fit(X)  # two candidates
    with pytest.raises(ValueError, match="must hold 2 Axes, one per panel, got a single Axes"):
        plot_candidates(model, X, axes=plt.subplots()[1])
    with pytest.raises(ValueError, match="must hold 2 Axes, one per panel, got 3 items"):
        plot_candidates(model, X, axes=plt.subplots(1, 3)[1])
    _, axes = plt.subplots(1, 2)
    assert len(plot_candidates(model, X, axes=axes)) == 2 and axes[0].get_title()
    plt.close("all")


def _blob_groups(tmp_path):
    from sklearn.datasets import make_blobs

    parts = [make_blobs(n_samples=30, centers=2, cluster_std=0.3, random_state=seed)[0] for seed in range(3)]
    np.save(tmp_path / "X.npy", np.vstack(parts))
    np.save(tmp_path / "g.npy", np.repeat(np.arange(3), 30))


def test_cli_cluster_plot_makes_missing_folders(tmp_path):
    _blob_groups(tmp_path)
    picture = tmp_path / "new" / "dir" / "p.png"
    argv = ["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.npy"), "--plot", str(picture), "-q"]
    assert main(argv) == 0
    assert picture.stat().st_size > 1000
    plt.close("all")


def test_cli_cluster_plot_title_counts_clusters_over_all_groups(tmp_path, monkeypatch):
    import skabc.plotting

    titles = []
    original = skabc.plotting.plot_clusters

    def recording(X, labels, **kwargs):
        titles.append(kwargs.get("title"))
        return original(X, labels, **kwargs)

    monkeypatch.setattr(skabc.plotting, "plot_clusters", recording)
    _blob_groups(tmp_path)
    argv = ["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.npy"), "--groups", str(tmp_path / "g.npy"),
            "--plot", str(tmp_path / "p.png"), "-q"]
    assert main(argv) == 0
    # Not the last group's count: every group adds its own clusters to the labels written.
    n_written = len(np.unique(np.load(tmp_path / "l.npy")))
    assert n_written >= 3 and titles == [f"ABC: {n_written} clusters"]


def test_cli_cluster_calls_no_group_an_affinity_matrix(tmp_path):
    """Probe 67c: a group of 2 rows of 2-D points got SpectralClustering's 'set affinity=precomputed' advice (the
    command has no such option, and fit(X, groups=...) does not say it)."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n_samples=154, centers=3, random_state=0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "g.npy", np.r_[np.zeros(2, int), np.ones(152, int)])
    argv = ["cluster", str(tmp_path / "X.npy"), "--groups", str(tmp_path / "g.npy"), "-o", str(tmp_path / "l.npy"),
            "-q"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    said = " ".join(str(w.message) for w in caught)
    assert "fewer than 80 rows" in said and "precomputed" not in said


def test_cli_cluster_refuses_a_picture_format_before_writing_the_labels(tmp_path, capsys):
    """`--plot p.xyz` wrote the labels first and then failed on the picture's format."""
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(40, 2)))
    argv = ["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "labels.npy"), "--plot", str(tmp_path / "p.xyz")]
    assert main(argv) == 1
    assert "must end in a picture format" in capsys.readouterr().err
    assert not (tmp_path / "labels.npy").exists()


@pytest.mark.parametrize("header", ["", "species\n"])
def test_cli_reads_class_and_group_names_from_text_files(tmp_path, capsys, header):
    """Names in a .csv lost their first value to a header and then failed to parse; as .npy they worked."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=60, centers=3, cluster_std=0.3, random_state=0)
    names = np.array(["cat", "dog", "fish"])[y]
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "truth.csv").write_text(header + "\n".join(names) + "\n")
    (tmp_path / "groups.csv").write_text(header + "\n".join(["setA"] * 30 + ["setB"] * 30) + "\n")
    np.save(tmp_path / "pred.npy", y)
    assert main(["evaluate", str(tmp_path / "pred.npy"), str(tmp_path / "truth.csv")]) == 0
    assert capsys.readouterr().out.startswith("ARI 1.0000")
    argv = ["cluster", str(tmp_path / "X.npy"), "--groups", str(tmp_path / "groups.csv"), "-o",
            str(tmp_path / "l.npy"), "-q"]
    assert main(argv) == 0
    labels = np.load(tmp_path / "l.npy")
    assert len(labels) == 60 and not set(labels[:30]) & set(labels[30:])  # ids unique across the two groups


@pytest.mark.parametrize("header", ["", "species\n"])
def test_cli_keeps_a_first_name_that_occurs_once_when_the_file_has_one_name_per_row(tmp_path, capsys, header):
    """Review 51b: a first name found nowhere else in the file was taken for a header and dropped, so 'evaluate'
    said the files differed in length, and two such files would have been scored on n - 1 rows."""
    truth = ["noise", "cat", "cat", "dog", "dog", "dog"]
    (tmp_path / "truth.csv").write_text(header + "\n".join(truth) + "\n")
    np.save(tmp_path / "pred.npy", np.array([2, 0, 0, 1, 1, 1]))
    assert main(["evaluate", str(tmp_path / "pred.npy"), str(tmp_path / "truth.csv")]) == 0
    assert capsys.readouterr().out.startswith("ARI 1.0000")
    (tmp_path / "groups.csv").write_text(header + "\n".join(["solo"] + ["rest"] * 5) + "\n")
    argv = ["evaluate", str(tmp_path / "pred.npy"), str(tmp_path / "truth.csv"),
            "--groups", str(tmp_path / "groups.csv")]
    assert main(argv) == 0  # six group names for six rows, the first one among them
    assert "(mean over 2 sets)" in capsys.readouterr().out


def test_cli_label_file_with_commas_on_several_lines_is_refused(tmp_path, capsys):
    (tmp_path / "y.csv").write_text("1,2\n3,4\n")
    np.save(tmp_path / "p.npy", np.zeros(4))
    assert main(["evaluate", str(tmp_path / "p.npy"), str(tmp_path / "y.csv")]) == 1
    assert "one value per line" in capsys.readouterr().err


def test_plot_clusters_refuses_labels_of_mixed_types():
    """A probe: None among integer labels failed inside numpy's unique."""
    with pytest.raises(TypeError, match="labels must be of one comparable type"):
        plot_clusters(np.random.default_rng(0).random((3, 2)), [0, None, 1])


def test_cli_demo_runs_at_the_largest_seed_it_accepts(capsys):
    """A probe: --seed 4294966996 printed the table header, then failed (the sets' seeds ran past 2**32 - 1)."""
    assert main(["demo", "--sets", "1", "--plot", "", "--seed", "4294967295", "--threads", "1", "-q"]) == 0


def test_plot_clusters_gives_every_cluster_its_own_colour():
    """A probe: tab10 coloured cluster 10 as cluster 0 (and 11 as 1...), silently."""
    X = np.random.default_rng(0).normal(size=(120, 2))
    for k in (3, 12, 25):
        ax = plot_clusters(X, np.arange(120) % k)
        colours = ax.collections[0].get_facecolors()
        assert len({tuple(np.round(c, 6)) for c in colours}) == k
        plt.close(ax.figure)


def test_plot_eigengap_marks_the_chosen_k_not_a_largest_gap():
    ax = plot_eigengap(np.array([0.0, 0.001, 0.08, 0.16, 0.46]), n_clusters=3)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["chosen k = 3"]
    plt.close(ax.figure)


def test_plot_candidates_takes_the_sparse_x_that_fit_takes():
    import scipy.sparse as sp
    from sklearn.datasets import make_blobs

    from skabc import ABCClustering
    from skabc.plotting import plot_candidates

    X, _ = make_blobs(100, centers=3, random_state=0)
    sparse = sp.csr_matrix(np.abs(X))
    model = ABCClustering(random_state=0).fit(sparse)
    axes = plot_candidates(model, sparse)
    dense = plot_candidates(model, sparse.toarray())
    assert [a.get_title() for a in axes] == [a.get_title() for a in dense]
    plt.close("all")


def test_plot_helpers_refuse_unusable_arguments_clearly():
    with pytest.raises(TypeError, match="n_clusters must be an integer"):
        plot_eigengap(np.array([0.0, 0.1, 0.5]), n_clusters=2.5)
    with pytest.raises(TypeError, match="n_clusters must be an integer"):
        plot_eigengap(np.array([0.0, 0.1, 0.5]), n_clusters=True)
    with pytest.raises(TypeError, match="one comparable type"):
        plot_affinity(np.eye(3), labels=np.array([1, None, 2], dtype=object))
    plt.close("all")


def test_plots_refuse_labels_and_eigenvalues_that_name_nothing():
    X = np.random.default_rng(0).normal(size=(5, 2))
    with pytest.raises(ValueError, match="labels hold NaN"):
        plot_clusters(X, [np.nan] * 5)
    with pytest.raises(TypeError, match="not complex"):
        plot_clusters(X, np.ones(5) * 1j)
    with pytest.raises(ValueError, match="labels hold NaN"):
        plot_affinity(np.eye(5), [0, 1, np.nan, 1, 0])
    with pytest.raises(TypeError, match="eigenvalues must be real"):
        plot_eigengap([0.0, 0.1 + 1j])
    with pytest.raises(ValueError, match="eigenvalues must be numbers"):
        plot_eigengap("nonsense")
    with pytest.raises(ValueError, match="X"):
        plot_clusters(np.full((5, 2), np.nan), np.zeros(5))
    plt.close("all")


def test_cli_names_an_npz_archive_given_as_npy(tmp_path, capsys):
    """A probe: an .npz saved under an .npy name ended in a traceback ('NpzFile' has no attribute 'size')."""
    np.savez(tmp_path / "points.npz", X=np.zeros((5, 2)))
    (tmp_path / "points.npz").rename(tmp_path / "points.npy")
    assert main(["cluster", str(tmp_path / "points.npy"), "-o", str(tmp_path / "labels.txt")]) != 0
    assert "is an .npz archive" in capsys.readouterr().err


def test_cli_names_numpys_binary_formats_under_other_names(tmp_path, capsys):
    """Probe 65a: scipy.sparse.save_npz's archive (TF-IDF rows) was read as text: a 'utf-8' codec error."""
    import scipy.sparse as sp

    sp.save_npz(tmp_path / "tfidf.npz", sp.random(20, 50, density=0.1, random_state=0, format="csr"))
    np.save(tmp_path / "points.npy", np.zeros((5, 2)))
    (tmp_path / "points.npy").rename(tmp_path / "points.dat")
    for name, said in (("tfidf.npz", "is an .npz archive (np.savez or scipy.sparse.save_npz)"),
                       ("points.dat", "is a .npy array under another name: name it .npy")):
        assert main(["cluster", str(tmp_path / name), "-o", str(tmp_path / "labels.txt")]) != 0
        err = capsys.readouterr().err
        assert said in err and "codec" not in err
    (tmp_path / "keys.csv").write_text("PK,x\n1,2\n3,4\n5,6\n")  # text that starts as a zip archive does
    assert main(["cluster", str(tmp_path / "keys.csv"), "-o", str(tmp_path / "labels.txt")]) == 0


@pytest.mark.parametrize("text, where", [("a,b\n1,2\n1,x\n", "'x' is not a number (line 3, column 2)"),
                                         (",a,b\nr1,1,2\nr2,3,y\n", "'y' is not a number (line 3, column 3)"),
                                         ("a,b\n# note\n\n1,2\n2,x\n", "'x' is not a number (line 5, column 2)")],
                         ids=["header", "named-index", "comment-and-blank"])
def test_cli_names_the_line_of_a_value_that_is_no_number(tmp_path, capsys, text, where):
    """Probe 47a: numpy's "at row 0, column 2" counted data rows from 0 after the header (and past comments)."""
    (tmp_path / "bad.csv").write_text(text)
    assert main(["cluster", str(tmp_path / "bad.csv"), "-o", str(tmp_path / "l.txt")]) == 1
    assert where in capsys.readouterr().err


def test_cli_line_of_a_bad_value_counts_lines_as_numpy_does(tmp_path, capsys):
    """Review 47c: a whitespace-only line is a (bad) data row to numpy, and a byte that does not decode after
    the bad value replaced the whole message with the decoding error."""
    (tmp_path / "spaces.csv").write_text("1\n   \n2\nx\n")
    assert main(["cluster", str(tmp_path / "spaces.csv"), "-o", str(tmp_path / "l.txt")]) == 1
    assert "'   ' is not a number (line 2, column 1)" in capsys.readouterr().err
    (tmp_path / "tail.csv").write_bytes(b"1,2\n1,x\n" + b"1,2\n" * 200_000 + b"\xff,1\n")
    assert main(["cluster", str(tmp_path / "tail.csv"), "-o", str(tmp_path / "l.txt")]) == 1
    err = capsys.readouterr().err
    assert "cannot read X from" in err and "'x'" in err


# ------------------------------------------------------------- the CLI and plots probe (/work/probe35f)
def test_cli_reads_pandas_default_header_as_a_header_and_integer_rows_as_data(tmp_path, capsys):
    """pandas writes unnamed columns as '0,1': the line was read as a point, and every label shifted by one."""
    X = np.random.default_rng(0).normal(size=(30, 2))
    (tmp_path / "pandas.csv").write_text("0,1\n" + "\n".join(f"{a},{b}" for a, b in X) + "\n")
    assert main(["cluster", str(tmp_path / "pandas.csv"), "-o", str(tmp_path / "l.txt"), "-q"]) == 0
    assert len(np.loadtxt(tmp_path / "l.txt")) == 30
    grid = "0,1\n" + "\n".join(f"{i},{i % 3}" for i in range(29)) + "\n"  # whole numbers: the first row is data
    (tmp_path / "grid.csv").write_text(grid)
    assert main(["cluster", str(tmp_path / "grid.csv"), "-o", str(tmp_path / "g.txt"), "-q"]) == 0
    assert len(np.loadtxt(tmp_path / "g.txt")) == 30


def test_cli_header_guesses_that_could_shift_labels_are_said_or_refused(tmp_path, capsys):
    """Probe 48d: pandas' '0,1' above whole-number rows (DataFrame(integers).to_csv(index=False)) was read as a
    row of data without a word (61 labels for 60 rows), and a first line of missing values ('NA,NA') was dropped
    as a header (59 labels for 60 lines): either way every label after it was misaligned."""
    rows = np.random.default_rng(0).integers(-9, 9, (60, 2))
    (tmp_path / "ints.csv").write_text("0,1\n" + "\n".join(f"{a},{b}" for a, b in rows) + "\n")
    out = str(tmp_path / "l.txt")
    with pytest.warns(UserWarning, match=r"first line of .*ints.csv.* \('0,1'\) .* read as a row of data; pass "
                                         r"--header"):
        assert main(["cluster", str(tmp_path / "ints.csv"), "-o", out, "-q"]) == 0
    assert len(np.loadtxt(out)) == 61
    for option, rows in (("--header", 60), ("--no-header", 61)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert main(["cluster", str(tmp_path / "ints.csv"), "-o", out, "-q", option]) == 0
        assert len(np.loadtxt(out)) == rows and not [w for w in caught if "--header" in str(w.message)]
    points = np.random.default_rng(1).normal(size=(60, 2))
    (tmp_path / "na.csv").write_text("NA,NA\n" + "\n".join(f"{a},{b}" for a, b in points) + "\n")
    assert main(["cluster", str(tmp_path / "na.csv"), "-o", out, "-q"]) == 1
    assert "'NA' is not a number (line 1, column 1)" in capsys.readouterr().err
    (tmp_path / "named.csv").write_text("a,b\n" + "\n".join(f"{a},{b}" for a, b in points) + "\n")
    assert main(["cluster", str(tmp_path / "named.csv"), "-o", out, "-q", "--no-header"]) == 1  # as asked
    assert "'a' is not a number (line 1, column 1)" in capsys.readouterr().err
    # Review 48f: a header below a comment or a blank line was read as data (numpy counts those lines in its
    # skiprows), with --header too; pandas' names above a float table whose first row is whole numbers were read
    # as a row (only the next line was looked at), with a warning that said the rows below were whole numbers.
    rows = "\n".join(f"{a},{b}" for a, b in points) + "\n"
    for lead in ("# exported\n", "\n"):
        (tmp_path / "lead.csv").write_text(lead + "x,y\n" + rows)
        for option in ([], ["--header"]):
            assert main(["cluster", str(tmp_path / "lead.csv"), "-o", out, "-q", *option]) == 0
            assert len(np.loadtxt(out)) == 60
    (tmp_path / "whole_first.csv").write_text("0,1\n1.0,2.0\n" + rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no word of a header read as data: it is read as a header
        from skabc._cli_files import read_array

        assert read_array(str(tmp_path / "whole_first.csv"), "X", 2).shape == (61, 2)


# ------------------------------------------------------------- the interoperability probe (/work/probe39a)
def test_cli_drops_the_row_index_that_pandas_writes_by_default(tmp_path, capsys):
    """DataFrame.to_csv() writes the row index first, under an empty name (',a,b,c' or ',0,1,2'): it was read
    as a feature, and the labels differed from the same data saved as .npy."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    truth = rng.permutation(np.repeat([0, 1], 30))  # shuffled: the row index says nothing of the clusters
    X = rng.normal(size=(60, 3))
    X[:, 0] += 6.0 * truth  # one column of signal: an index column read as a feature changes the labels
    np.save(tmp_path / "X.npy", X)
    pd.DataFrame(X, columns=list("abc")).to_csv(tmp_path / "named.csv")
    pd.DataFrame(X).to_csv(tmp_path / "unnamed.csv")
    for name in ("X.npy", "named.csv", "unnamed.csv"):
        assert main(["cluster", str(tmp_path / name), "-o", str(tmp_path / f"{name}.txt"), "-q"]) == 0
    reference = np.loadtxt(tmp_path / "X.npy.txt")
    for name in ("named.csv", "unnamed.csv"):
        assert np.array_equal(np.loadtxt(tmp_path / f"{name}.txt"), reference)
    # An empty first name above a column that is no row index (not distinct whole numbers) stays data.
    (tmp_path / "blank.csv").write_text(",a,b\n" + "\n".join(f"{r[0]},{r[1]},{r[2]}" for r in X) + "\n")
    assert main(["cluster", str(tmp_path / "blank.csv"), "-o", str(tmp_path / "blank.txt"), "-q"]) == 0
    assert np.array_equal(np.loadtxt(tmp_path / "blank.txt"), reference)
    # An index of names is dropped too; a header wider than its rows is no index header.
    pd.DataFrame(X, index=[f"row{i}" for i in range(len(X))]).to_csv(tmp_path / "names.csv")
    assert main(["cluster", str(tmp_path / "names.csv"), "-o", str(tmp_path / "names.txt"), "-q"]) == 0
    assert np.array_equal(np.loadtxt(tmp_path / "names.txt"), reference)
    # Note 63 left it: a row longer than such a header lost its extra fields in silence (numpy's usecols).
    lines = (tmp_path / "names.csv").read_text().splitlines()
    lines[5] += ",7.5"
    (tmp_path / "long.csv").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["cluster", str(tmp_path / "long.csv"), "-o", str(tmp_path / "long.txt"), "-q"]) == 1
    assert "line 6 has 5 fields where the header has 4; every row needs one per column" in capsys.readouterr().err
    two = np.c_[np.arange(len(X)), X[:, 0]]
    np.save(tmp_path / "two.npy", two)
    (tmp_path / "ragged.csv").write_text(",a,b\n" + "\n".join(f"{int(a)},{b:.17g}" for a, b in two) + "\n")
    for name in ("two.npy", "ragged.csv"):
        assert main(["cluster", str(tmp_path / name), "-o", str(tmp_path / f"{name}.txt"), "-q"]) == 0
    assert np.array_equal(np.loadtxt(tmp_path / "ragged.csv.txt"), np.loadtxt(tmp_path / "two.npy.txt"))
    # A Series written the same way (index, value) gives its values, numbers or names.
    pd.Series(truth).to_csv(tmp_path / "truth.csv")
    pd.Series(np.where(truth == 0, "a", "b"), name="species").to_csv(tmp_path / "names.csv")
    capsys.readouterr()
    for name in ("truth.csv", "names.csv"):
        assert main(["evaluate", str(tmp_path / "X.npy.txt"), str(tmp_path / name)]) == 0
        assert capsys.readouterr().out.startswith(f"ARI {adjusted_rand_score(truth, reference):.4f}")


@pytest.mark.parametrize("command, clash", [
    (["cluster", "{X}", "-o", "{X}"], "output '{X}' is also the X file"),
    (["cluster", "{X}", "-o", "{d}/l.png", "--plot", "{d}/l.png"], "--plot '{d}/l.png' is also the output"),
    (["train", "{X}", "{y}", "-o", "{y}", "--epochs", "1"], "output '{y}' is also the y file"),
])
def test_cli_never_writes_an_output_over_an_input(tmp_path, capsys, command, clash):
    X = np.random.default_rng(0).normal(size=(30, 2))
    paths = {"X": str(tmp_path / "X.csv"), "y": str(tmp_path / "y.csv"), "d": str(tmp_path)}
    np.savetxt(paths["X"], X, delimiter=",")
    np.savetxt(paths["y"], np.arange(30) % 2, fmt="%d")
    before = {name: (tmp_path / f"{name}.csv").read_bytes() for name in ("X", "y")}
    assert main([part.format(**paths) for part in command]) == 1
    assert clash.format(**paths) in capsys.readouterr().err
    assert {name: (tmp_path / f"{name}.csv").read_bytes() for name in ("X", "y")} == before


def test_cli_never_writes_an_output_over_an_input_named_through_a_new_folder(tmp_path, capsys, monkeypatch):
    """Probe 56g: `-o new/../X.npy` was compared by path (new/ did not exist yet) and the input by inode: the labels
    were written over the points, once new/ was made."""
    monkeypatch.chdir(tmp_path)
    np.save("X.npy", np.random.default_rng(0).normal(size=(30, 2)))
    before = (tmp_path / "X.npy").read_bytes()
    assert main(["cluster", "X.npy", "-o", "new/../X.npy", "-q"]) == 1
    assert "output 'new/../X.npy' is also the X file" in capsys.readouterr().err
    assert (tmp_path / "X.npy").read_bytes() == before


def test_cli_refuses_a_read_only_output_before_any_work(tmp_path, capsys, monkeypatch):
    """Probe 56g: train replaced a read-only kernel (a rename ignores the file's mode), cluster failed only after
    the clustering. (os.access is patched: the tests may run as root, for whom every file is writable.)"""
    import os

    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(30, 2)))
    (tmp_path / "l.npy").write_bytes(b"kept")
    writable = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path).endswith("l.npy") else writable(path, mode))
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.npy"), "-q"]) == 1
    assert "the file is read-only" in capsys.readouterr().err
    assert (tmp_path / "l.npy").read_bytes() == b"kept"


def test_cli_names_the_file_of_a_value_that_is_not_finite_and_options_by_their_flags(tmp_path, capsys):
    """Probe 56g: 'Input X contains NaN.' named no file; '--d-model 6' was answered in d_model's name."""
    X = np.random.default_rng(0).normal(size=(30, 2))
    X[4, 1] = np.inf
    np.save(tmp_path / "X.npy", X)
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.npy"), "-q"]) == 1
    assert f"X file '{tmp_path / 'X.npy'}' holds inf (row 5, column 2)" in capsys.readouterr().err
    np.save(tmp_path / "X.npy", np.nan_to_num(X, posinf=0.0))
    np.save(tmp_path / "y.npy", np.arange(30) % 2)
    assert main(["train", str(tmp_path / "X.npy"), str(tmp_path / "y.npy"), "-o", str(tmp_path / "k.safetensors"),
                 "--d-model", "6", "--epochs", "1"]) == 1
    assert "error: --d-model=6 must be divisible by n_heads=4" in capsys.readouterr().err
    # Review 56h: quoted file names keep their words ('set_size.csv' was reported as '--set-size.csv').
    assert main(["cluster", str(tmp_path / "set_size.csv"), "-o", str(tmp_path / "l.npy")]) == 1
    assert f"X file '{tmp_path / 'set_size.csv'}' does not exist" in capsys.readouterr().err
    # Review 56h: a text file's value is placed by the file's own line and column (header, comment, blank line and
    # pandas' row index counted).
    (tmp_path / "h.csv").write_text("# points\na,b\n1,2\n\n3,nan\n")
    (tmp_path / "i.csv").write_text(",a,b\n0,1,2\n1,3,inf\n")
    for name, where in (("h.csv", "nan (line 5, column 2)"), ("i.csv", "inf (line 3, column 3)")):
        assert main(["cluster", str(tmp_path / name), "-o", str(tmp_path / "l.npy")]) == 1
        assert f"holds {where}" in capsys.readouterr().err


def test_cli_train_writes_its_progress_to_stderr(tmp_path, capsys):
    """Probe 56g: the epoch log went to stdout, where a script reads results."""
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(40, 2)))
    np.save(tmp_path / "y.npy", np.repeat([0, 1], 20))
    assert main(["train", str(tmp_path / "X.npy"), str(tmp_path / "y.npy"), "-o", str(tmp_path / "k.safetensors"),
                 "--scratch", "--d-model", "8", "--n-blocks", "1", "--epochs", "1", "--set-size", "10", "20"]) == 0
    captured = capsys.readouterr()
    assert "train_loss" in captured.err and "train_loss" not in captured.out
    assert captured.out.strip() == f"Saved the kernel to {tmp_path / 'k.safetensors'}"


def test_cli_never_writes_an_output_over_a_hard_link_of_an_input(tmp_path, capsys):
    """Probe 53j: another name of the same file (a hard link) passed the check, which compared resolved paths, and
    `cluster hard.npy -o X.npy` wrote the labels over the points."""
    import os

    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(30, 2)))
    os.link(tmp_path / "X.npy", tmp_path / "hard.npy")
    before = (tmp_path / "X.npy").read_bytes()
    assert main(["cluster", str(tmp_path / "hard.npy"), "-o", str(tmp_path / "X.npy"), "-q"]) == 1
    assert f"output '{tmp_path / 'X.npy'}' is also the X file" in capsys.readouterr().err
    assert (tmp_path / "X.npy").read_bytes() == before


@pytest.mark.parametrize("command", [["train", "{X}", "{y}", "-o", "{d}/out/", "--epochs", "1"],
                                     ["cluster", "{X}", "-o", "{d}/out/"], ["cluster", "{X}", "-o", "{d}/out/."]])
def test_cli_refuses_an_output_that_names_a_folder_before_any_work(tmp_path, capsys, command):
    """Probe 44d: `train -o outdir/` trained, then wrote a file named 'outdir'."""
    paths = {"X": str(tmp_path / "X.csv"), "y": str(tmp_path / "y.csv"), "d": str(tmp_path)}
    np.savetxt(paths["X"], np.random.default_rng(0).normal(size=(30, 2)), delimiter=",")
    np.savetxt(paths["y"], np.arange(30) % 2, fmt="%d")
    assert main([part.format(**paths) for part in command]) == 1
    assert "names a directory; give a file name inside it" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_pictures_need_matplotlib_and_no_latex(tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(30, 2)))
    argv = ["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.txt"), "--plot", str(tmp_path / "p.pgf")]
    assert main(argv) == 1  # PGF needs LaTeX, which matplotlib only looks for once the picture is drawn
    assert "must end in a picture format" in capsys.readouterr().err and not (tmp_path / "l.txt").exists()
    monkeypatch.setitem(__import__("sys").modules, "matplotlib.backend_bases", None)  # as if not installed
    argv[-1] = str(tmp_path / "p.png")
    assert main(argv) == 1
    assert "--plot needs matplotlib: pip install 'skabc[plot]'" in capsys.readouterr().err


def test_cli_in_process_leaves_the_callers_matplotlib_as_it_was(tmp_path):
    """cluster --plot switched the caller's backend to Agg (matplotlib.use) and drew through pyplot."""
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(30, 2)))
    plt.close("all")
    backend = matplotlib.get_backend()
    matplotlib.use("svg")
    try:
        assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.txt"), "--plot",
                     str(tmp_path / "p.png"), "-q"]) == 0
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == []
    finally:
        matplotlib.use(backend)
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_cli_labels_under_an_upper_case_npy_name_and_space_separated_text(tmp_path, capsys):
    X = np.random.default_rng(0).normal(size=(30, 2))
    np.save(tmp_path / "X.npy", X)
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "L.NPY"), "-q"]) == 0
    assert np.load(tmp_path / "L.NPY").shape == (30,) and not (tmp_path / "L.NPY.npy").exists()
    np.savetxt(tmp_path / "space.txt", X)  # numpy's default: spaces
    assert main(["cluster", str(tmp_path / "space.txt"), "-o", str(tmp_path / "l.txt")]) == 1
    assert "values must be separated by commas (the first line has none, but ';', tabs or spaces)" in (
        capsys.readouterr().err)


def test_cli_evaluate_scores_each_group_alone(tmp_path, capsys):
    """True ids repeat from set to set (0..k-1 in each): the file scored as one partition read 0.11 where the sets
    scored 0.23-0.33."""
    truth = np.tile(np.repeat([0, 1], 10), 3)
    labels = np.concatenate([np.repeat([0, 1], 10), np.repeat([2, 3], 10), np.repeat([5, 4], 10)])
    groups = np.repeat([0, 1, 2], 20)
    for name, values in (("l", labels), ("t", truth), ("g", groups)):
        np.save(tmp_path / f"{name}.npy", values)
    files = [str(tmp_path / f"{name}.npy") for name in ("l", "t")]
    assert main(["evaluate", *files]) == 0
    assert float(capsys.readouterr().out.split()[1]) < 0.5
    assert main(["evaluate", *files, "--groups", str(tmp_path / "g.npy")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "ARI 1.0000 ± 0.0000 (mean over 3 sets)"
    np.save(tmp_path / "g.npy", np.zeros(60, dtype=int))  # probe 56g: one set read "± nan"
    assert main(["evaluate", *files, "--groups", str(tmp_path / "g.npy")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"ARI {adjusted_rand_score(truth, labels):.4f} (1 set)"


def test_plot_clusters_draws_noise_in_grey_without_taking_a_clusters_colour():
    """A probe (/work/probe35f): -1 (HDBSCAN's noise, skabc's unlabelled) was drawn as one more cluster."""
    from matplotlib.colors import to_rgba

    from skabc.plotting import NOISE_COLOUR

    X = np.random.default_rng(0).normal(size=(6, 2))
    colours = plot_clusters(X, [-1, 0, 0, 1, 1, -1]).collections[0].get_facecolors()
    plain = plot_clusters(X[1:5], [0, 0, 1, 1]).collections[0].get_facecolors()
    np.testing.assert_allclose(colours[[0, 5]], [to_rgba(NOISE_COLOUR)] * 2)
    np.testing.assert_allclose(colours[1:5], plain)  # the clusters keep the colours they have without noise
    plt.close("all")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_plot_clusters_finds_noise_in_float_labels_as_in_integer_ones(dtype):
    """Labels of a float column (-1.0 for noise, as a text file may hold them) are drawn as the same integer labels
    are (mutation survivor G28)."""
    X = np.random.default_rng(0).normal(size=(6, 2))
    labels = np.array([-1, 0, 0, 1, 1, -1])
    colours = plot_clusters(X, labels.astype(dtype)).collections[0].get_facecolors()
    np.testing.assert_allclose(colours, plot_clusters(X, labels).collections[0].get_facecolors())
    plt.close("all")


def test_plot_candidates_of_another_estimator_names_it(capsys):
    from sklearn.cluster import SpectralClustering

    from skabc.plotting import plot_candidates

    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(TypeError, match="the candidates are an ABCClustering's arbiter's; got a SpectralClustering"):
        plot_candidates(SpectralClustering(2, random_state=0).fit(X), X)


def test_demo_table_of_one_set_shows_no_standard_error():
    from skabc.demo import _row, format_table

    assert "0.500 |" in format_table([_row("m", 100, [0.5], 1.0, None)])
    assert "0.500 ± 0.100" in format_table([_row("m", 100, [0.4, 0.6], 1.0, None)])


def test_cli_says_a_warning_of_many_sets_once_and_as_a_command_line_message(tmp_path):
    """cluster --groups repeated the max_clusters warning once per capped set, each printed into the progress bar
    and attributed to '<frozen runpy>:88' (probe /work/probe39b/r11_cli_groups_warnings.sh)."""
    import subprocess
    import sys

    from skabc.datasets import make_circles_sets

    # Sets of 80 rows: smaller ones add the generic kernel's small-set warning (one more line, said once too).
    X, _, groups = make_circles_sets(n_sets=6, set_size=80, random_state=0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "g.npy", groups)
    argv = ["cluster", str(tmp_path / "X.npy"), "--groups", str(tmp_path / "g.npy"), "--max-clusters", "2",
            "-o", str(tmp_path / "l.npy"), "-q"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    said = [str(w.message) for w in caught if "max_clusters=2" in str(w.message)]
    # In the words of ABCClustering.fit(X, groups=...), which counts the sets itself.
    assert len(said) == 1 and re.search(r"of [1-6] of 6 sets reached max_clusters=2", said[0])
    done = subprocess.run([sys.executable, "-m", "skabc", *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [f"skabc: warning: {said[0]}".replace("max_clusters", "--max-clusters")]


def test_cli_warnings_name_the_options_not_the_parameters(capsys):
    """The small-set warning told a command-line user to 'Pass n_clusters'; the option is --n-clusters."""
    from skabc.cli import _print_warning
    from skabc.exceptions import SkabcWarning

    _print_warning("k was estimated on a small set. Pass n_clusters where you know it; n_clusters_ reached "
                   "max_clusters=2.", SkabcWarning, "x.py", 1)
    assert capsys.readouterr().err.strip() == ("skabc: warning: k was estimated on a small set. Pass --n-clusters "
                                              "where you know it; n_clusters_ reached --max-clusters=2.")
    # Another library's text speaks of its own parameters (review 46d): left as it is.
    _print_warning("n_samples=3 should be >= n_clusters=4.", UserWarning, "x.py", 1)
    assert capsys.readouterr().err.strip() == "skabc: warning: n_samples=3 should be >= n_clusters=4."


def test_cli_says_the_small_set_warning_of_many_sets_once_as_fit_with_groups_does(tmp_path):
    """Probe 45c: cluster --groups said the small-set warning once per set size (20 lines for 25 sets)."""
    from skabc import ABCClustering
    from skabc.datasets import make_circles_sets

    X, _, groups = make_circles_sets(n_sets=4, set_size=(30, 70), random_state=0)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "g.npy", groups)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["cluster", str(tmp_path / "X.npy"), "--groups", str(tmp_path / "g.npy"), "-o",
                     str(tmp_path / "l.npy"), "-q"]) == 0
    said = [str(w.message) for w in caught if "rows" in str(w.message)]
    with warnings.catch_warnings(record=True) as api:
        warnings.simplefilter("always")
        ABCClustering(random_state=0).fit(X, groups=groups)
    assert said == [str(w.message) for w in api if "rows" in str(w.message)]
    assert len(said) == 1 and "4 of 4 sets of fewer than 80 rows" in said[0]


def test_cli_ctrl_c_is_one_line_and_code_130(tmp_path, capsys, monkeypatch):
    """Probe 45c: Ctrl-C in cluster showed a traceback; in train it saved the partial kernel and exited 0."""
    from skabc import ABCClustering
    from skabc.training import early_stopping

    X = np.random.default_rng(0).normal(size=(40, 2))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", np.repeat([0, 1], 20))

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(ABCClustering, "fit_predict", interrupt)
        assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.npy")]) == 130
    assert capsys.readouterr().err.strip() == "skabc cluster: interrupted"
    assert not (tmp_path / "l.npy").exists()
    # A run that Ctrl-C ended keeps its kernel, as fit keeps it, but says so and does not exit 0.
    monkeypatch.setattr(early_stopping, "interrupted_by_user", lambda net: True)
    assert main(["train", str(tmp_path / "X.npy"), str(tmp_path / "y.npy"), "-o", str(tmp_path / "k.safetensors"),
                 "--scratch", "--d-model", "8", "--n-blocks", "1", "--epochs", "1", "--set-size", "10", "20",
                 "-q"]) == 130
    assert "interrupted; the partial kernel was saved to" in capsys.readouterr().err
    assert (tmp_path / "k.safetensors").exists()
    # Probe 56g: with a kernel already there, the partial one replaced it (exit 130, the old kernel gone).
    before = (tmp_path / "k.safetensors").read_bytes()
    assert main(["train", str(tmp_path / "X.npy"), str(tmp_path / "y.npy"), "-o", str(tmp_path / "k.safetensors"),
                 "--scratch", "--d-model", "8", "--n-blocks", "1", "--epochs", "1", "--set-size", "10", "20",
                 "--seed", "1", "-q"]) == 130
    partial = tmp_path / "k.interrupted.safetensors"
    assert f"saved to {partial}; {tmp_path / 'k.safetensors'} was left as it was" in capsys.readouterr().err
    assert (tmp_path / "k.safetensors").read_bytes() == before and partial.exists()
    # Review 56h: that name is never written over either (it may be an input, or the last partial kernel).
    np.save(tmp_path / "k.interrupted.npy", X)  # an input under the name a partial kernel of k.npy would take
    (tmp_path / "k.npy").write_bytes(b"kernel")
    assert main(["train", str(tmp_path / "k.interrupted.npy"), str(tmp_path / "y.npy"), "-o", str(tmp_path / "k.npy"),
                 "--scratch", "--d-model", "8", "--n-blocks", "1", "--epochs", "1", "--set-size", "10", "20",
                 "-q"]) == 130
    assert f"saved to {tmp_path / 'k.interrupted-1.npy'}" in capsys.readouterr().err
    np.testing.assert_array_equal(np.load(tmp_path / "k.interrupted.npy"), X)
    # Review 56h: './k2.safetensors' (no file there) is written as asked, and no "left as it was" is said.
    monkeypatch.chdir(tmp_path)
    assert main(["train", "X.npy", "y.npy", "-o", "./k2.safetensors", "--scratch", "--d-model", "8", "--n-blocks",
                 "1", "--epochs", "1", "--set-size", "10", "20", "-q"]) == 130
    assert "left as it was" not in capsys.readouterr().err and (tmp_path / "k2.safetensors").exists()
    # Probe 53j: `demo --train` scored the half-trained kernel as trained, saved its picture and exited 0.
    from skabc import ContextualKernel

    monkeypatch.setattr(ContextualKernel, "fit", lambda self, *args, **kwargs: setattr(self, "net_", None) or self)
    assert main(["demo", "--train", "--epochs", "1", "--sets", "1", "--plot", str(tmp_path / "d.png"), "-q"]) == 130
    assert capsys.readouterr().err.strip() == "skabc demo: interrupted"
    assert not (tmp_path / "d.png").exists()


def test_cli_messages_name_the_command_line_s_own_inputs(tmp_path, capsys):
    """Probe 45c: evaluate's groups error spoke of X, a NaN label file was not named, --max-time 0 or inf got
    ContextualKernel's parameter message, and 'in 1 clusters'."""
    np.save(tmp_path / "l.npy", np.array([0.0, 1.0, np.nan, 1.0]))
    np.save(tmp_path / "t.npy", np.array([0, 1, 1, 1]))
    np.save(tmp_path / "g.npy", np.array([0, 1]))
    assert main(["evaluate", str(tmp_path / "l.npy"), str(tmp_path / "t.npy")]) == 1
    assert f"labels ('{tmp_path / 'l.npy'}') holds NaN" in capsys.readouterr().err
    np.save(tmp_path / "l.npy", np.array([0, 1, 1, 1]))
    assert main(["evaluate", str(tmp_path / "l.npy"), str(tmp_path / "t.npy"), "--groups",
                 str(tmp_path / "g.npy")]) == 1
    assert "groups has 2 entries but labels and truth have 4" in capsys.readouterr().err
    for seconds in ("0", "-5", "inf", "nan"):
        with pytest.raises(SystemExit) as info:
            main(["train", "X.npy", "y.npy", "-o", "k.safetensors", "--max-time", seconds])
        assert info.value.code == 2 and "positive" in capsys.readouterr().err
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(30, 2)))
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "one.npy"), "--n-clusters", "1"]) == 0
    assert "30 points in 1 cluster; labels written" in capsys.readouterr().out


def test_plot_helpers_refuse_what_matplotlib_would_fail_on_deep_inside():
    """Probe 45c: a text, complex or empty affinity, and a negative marker size, reached matplotlib."""
    for bad in ([["a", "b"], ["c", "d"]], np.eye(3) * 1j, np.array([[None, 1], [1, None]], dtype=object)):
        with pytest.raises(TypeError, match="affinity must hold real numbers"):
            plot_affinity(bad)
    with pytest.raises(ValueError, match="non-empty square"):
        plot_affinity(np.zeros((0, 0)))
    with pytest.raises(ValueError, match="non-negative number"):
        plot_clusters(np.zeros((3, 2)), [0, 1, 1], s=-1)
    with pytest.raises(ValueError, match=r"or one per point \(3\)"):
        plot_clusters(np.zeros((3, 2)), [0, 1, 1], s=[1.0, 2.0])
    with pytest.raises(ValueError, match="eigenvalues is None"):
        plot_eigengap(None)
    assert not plt.get_fignums()  # refused before any figure was made
    plot_clusters(np.zeros((3, 2)), [0, 1, 1], s=np.full(3, 5.0))  # one size per point, as matplotlib takes them
    plt.close("all")


def test_cli_cluster_groups_of_one_row_each(tmp_path, capsys):
    """The final review of session 45: pooling the warnings read a model that no one-row group had fitted."""
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(5, 2)))
    np.save(tmp_path / "g.npy", np.arange(5))
    assert main(["cluster", str(tmp_path / "X.npy"), "--groups", str(tmp_path / "g.npy"), "-o",
                 str(tmp_path / "l.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), np.arange(5))


def test_cli_a_failed_write_names_the_file(tmp_path, capsys, monkeypatch):
    """Probe 45c: -o /dev/full said '[Errno 28] No space left on device' without the file."""
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(30, 2)))
    monkeypatch.setattr(np, "savetxt", full)
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.txt"), "-q"]) == 1
    assert f"cannot write the labels to '{tmp_path / 'l.txt'}': No space left on device" in capsys.readouterr().err


# --------------------------------------------------------------------------- plot_training


def _validated_fit(monkeypatch=None, constant_score=None, **params):
    """A tiny kernel trained from scratch for 3 epochs, validating on held-out groups (score fixed if given)."""
    from sklearn.datasets import make_blobs

    import skabc.training.early_stopping as early_stopping
    from skabc import ContextualKernel

    if constant_score is not None:
        monkeypatch.setattr(early_stopping, "score_sets", lambda *args: constant_score)
    X, y = make_blobs(n_samples=240, centers=6, n_features=3, random_state=0)
    network = {} if params.get("init") == "generic" else {"d_model": 8, "n_heads": 2, "n_blocks": 1, "init": "scratch"}
    params = {**network, "set_size": (2, 20), "batch_size": 4, "max_epochs": 3, **params}
    return ContextualKernel(device="cpu", random_state=0, early_stopping=True, n_iter_no_change=30, **params).fit(
        X.astype(np.float32), y, groups=np.repeat(np.arange(6), 40))


def test_plot_training_draws_the_loss_and_the_held_out_score_of_every_epoch():
    from sklearn.frozen import FrozenEstimator

    from skabc import ABCClustering
    from skabc.plotting import plot_training

    kernel = _validated_fit()
    history = kernel.net_.history
    start = dict(kernel.net_.callbacks_)["validation"].start_score_
    for given in (kernel, FrozenEstimator(kernel), ABCClustering(kernel=FrozenEstimator(kernel)).fit(np.ones((5, 3)))):
        loss, score = plot_training(given)
        np.testing.assert_allclose(loss.lines[0].get_ydata(), history[:, "train_loss"])
        curve = score.lines[0]
        np.testing.assert_array_equal(curve.get_xdata(), [0, 1, 2, 3])
        np.testing.assert_allclose(curve.get_ydata(), [start, *history[:, "valid_ari"]])
        best = [row["epoch"] for row in history if row["valid_ari_best"]]
        kept = best[-1] if best else 0
        star = score.lines[-1]
        assert kept > 0 and list(star.get_xdata()) == [kept] and star.get_label() == f"kept: epoch {kept}"
        plt.close("all")
    validation = dict(kernel.net_.callbacks_)["validation"]
    # The callback's record decides, not the history's flags (a resumed run's earlier epochs do not compete).
    validation.best_epoch_ = 2
    assert list(plot_training(kernel)[1].lines[-1].get_xdata()) == [2]
    # Where the start won the final comparison (its arbiter and settings included), the star is on the start.
    validation.kept_start_ = True
    star = plot_training(kernel)[1].lines[-1]
    assert list(star.get_xdata()) == [0] and star.get_label() == "kept: the start, which won the final comparison"
    # A stop inside an epoch (max_time, Ctrl-C) leaves a row without loss or score: the finished epochs are drawn.
    kernel.net_.history.new_epoch()
    kernel.net_.history.record("epoch", 4)
    loss, score = plot_training(kernel)
    assert list(loss.lines[0].get_xdata()) == [1, 2, 3] and loss.get_title() == "training loss, 3 epochs"
    assert list(score.lines[0].get_xdata()) == [0, 1, 2, 3]
    plt.close("all")


def test_plot_training_of_a_run_stopped_before_its_first_epoch_ended():
    """Review 46e: a validated run that max_time stopped inside epoch 1 was drawn as 'trained without
    validation', and a new network's start, which never competes, would have been starred as kept."""
    from skabc.exceptions import SkabcWarning
    from skabc.plotting import plot_training

    with pytest.warns(SkabcWarning, match="inside its first epoch"):
        kernel = _validated_fit(max_time=1e-9)
    loss, score = plot_training(kernel)
    assert list(loss.lines[0].get_xdata()) == [] and loss.get_title() == "training loss, 0 epochs"
    assert score.axison and list(score.lines[0].get_xdata()) == [0]  # the start's score, nothing else
    assert len(score.lines) == 1 and score.get_title() == "validation: no scored epoch kept"
    plt.close("all")


def test_plot_training_marks_the_start_when_no_epoch_beat_it(monkeypatch):
    """A fine-tune of the generic kernel whose epochs never beat its start keeps the start (epoch 0)."""
    from skabc.plotting import plot_training

    kernel = _validated_fit(monkeypatch, constant_score=0.5, init="generic", sets_per_epoch=4, max_epochs=2)
    _, score = plot_training(kernel)
    assert list(score.lines[-1].get_xdata()) == [0] and score.lines[-1].get_label() == "kept: the start"
    plt.close("all")


def test_plot_training_says_when_a_fit_did_not_validate_or_kept_no_history(tiny_kernel, tmp_path):
    from skabc import KernelEnsemble
    from skabc.kernels import PairwiseKernel
    from skabc.persistence import load
    from skabc.plotting import plot_training

    _, score = plot_training(tiny_kernel)  # one epoch, no held-out sets
    assert not score.axison and "without validation" in score.texts[0].get_text()
    tiny_kernel.save(tmp_path / "k.safetensors")
    with pytest.raises(ValueError, match="no training history: a kernel loaded from a file"):
        plot_training(load(tmp_path / "k.safetensors"))
    with pytest.raises(TypeError, match="plot each of the ensemble's kernels_"):
        plot_training(KernelEnsemble.from_fitted([tiny_kernel]))
    with pytest.raises(TypeError, match="got PairwiseKernel"):
        plot_training(PairwiseKernel("rbf").fit(np.eye(3)))
    plt.close("all")


def test_plot_helpers_edge_cases_from_probe_48e(monkeypatch):
    """Probe 48e: plot_clusters without matplotlib raised a bare import error from matplotlib.colors; -1 labels in
    an object array were drawn as a cluster; plot_eigengap reused its ten colours past ten sets and numbered them
    without their None entries; plot_affinity drew NaN as blanks, met ragged rows with numpy's message and made
    any sparse affinity dense; n_clusters equal to the spectrum's length marked a gap after its last value."""
    import sys

    import scipy.sparse as sp
    from matplotlib.colors import to_rgba

    import skabc.plotting as plotting

    X = np.random.default_rng(0).normal(size=(30, 2))
    labels = np.where(np.arange(30) < 10, -1, np.arange(30) % 3)
    ax = plot_clusters(X, labels.astype(object))
    grey = to_rgba(plotting.NOISE_COLOUR)
    colours = ax.collections[0].get_facecolors()
    assert all(tuple(c) == grey for c in colours[:10]) and not any(tuple(c) == grey for c in colours[10:])
    spectra = [None, *(np.linspace(0, 1, 6) + 0.01 * i for i in range(12))]
    ax = plot_eigengap(spectra)
    assert len({to_rgba(line.get_color()) for line in ax.lines}) == 12
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == ["set 1", "set 2"]
    ax = plot_eigengap(np.linspace(0, 1, 5), n_clusters=5)  # k = every eigenvalue (review 48f: 2-3-row fits)
    assert not ax.patches and ax.get_xlim()[1] < 6
    assert "no eigenvalue after it" in ax.get_legend().get_texts()[-1].get_text()
    with pytest.raises(ValueError, match="must be a non-empty square 2-D matrix, got shape"):
        plot_affinity(sp.csr_matrix((100_000, 2_000)))  # not square, whatever its size
    with pytest.raises(ValueError, match="affinity holds NaN or infinity"):
        plot_affinity(np.full((3, 3), np.nan))
    # numpy 2 refuses ragged rows (named); numpy 1.x makes them a 1-D array of objects (its shape named).
    with pytest.raises(ValueError, match=r"rows have different lengths|2-D matrix, got shape \(2,\)"):
        plot_affinity([[1, 0], [0]])
    with pytest.raises(ValueError, match=r"40000x40000 affinity would need it dense .* at most 10000 rows"):
        plot_affinity(sp.eye(40_000, format="csr"))
    assert set(plotting.__all__) >= {"plot_affinity", "plot_candidates", "plot_clusters", "plot_eigengap",
                                     "plot_training"} and "np" not in plotting.__all__
    plt.close("all")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    monkeypatch.setitem(sys.modules, "matplotlib.colors", None)
    with pytest.raises(ImportError, match=r"skabc.plotting needs matplotlib: pip install 'skabc\[plot\]'"):
        plot_clusters(X, labels)


def test_cluster_colours_are_never_the_noise_grey_and_neighbouring_codes_differ():
    """Probe 57i: with 11 to 20 clusters, tab20's light grey (cluster 15) was the noise colour to 0.004; past 20,
    evenly spaced hues made codes next to each other alike (40 clusters: 13 and 14 at CIELAB dE 1.4)."""
    from matplotlib.colors import to_rgb

    from skabc.plotting import NOISE_COLOUR, _colours

    noise = np.array(to_rgb(NOISE_COLOUR))
    for n in (1, 5, 9, 10, 15, 18, 19, 25, 40, 60):
        colours = _colours(np.arange(n))[:, :3]
        assert len({tuple(np.round(c, 6)) for c in colours}) == n
        assert np.abs(colours - noise).max(axis=1).min() > 0.08, n  # no cluster drawn as noise (0.004 was)
        assert np.ptp(colours, axis=1).min() > 0.05, n  # and none grey
        if n > 1:
            assert np.linalg.norm(np.diff(colours, axis=0), axis=1).min() > 0.25, n


def test_plot_affinity_draws_unlabelled_rows_in_no_true_cluster():
    """Probe 57i: 30 rows labelled -1 (unlabelled or noise, as fit's y and plot_clusters read it) were drawn as one
    30 x 30 block of the true same-cluster matrix."""
    labels = np.array([-1] * 6 + [0] * 4 + [1] * 5)
    _, truth = plot_affinity(np.eye(15), labels)
    drawn = truth.images[0].get_array()
    np.testing.assert_array_equal(drawn[:6, :], np.eye(15)[:6, :])  # sorted first: each alone
    assert drawn[6:10, 6:10].all() and drawn[10:, 10:].all() and not drawn[6:10, 10:].any()
    plt.close(truth.figure)


def test_plot_training_ticks_whole_epochs_and_eigengap_titles_say_spectra(tiny_kernel):
    """Probe 57i: ticks at 1.5 epochs; the title of several sets said 'spectrums'."""
    from skabc.plotting import plot_training

    for ax in plot_training(tiny_kernel):
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
    plt.close("all")
    ax = plot_eigengap([np.array([0.0, 0.01, 0.9]), np.array([0.0, 0.5, 0.9])])
    assert ax.get_title() == "eigengap spectra of 2 sets"
    plt.close(ax.figure)


def test_plot_affinity_without_labels_colours_zero_to_one():
    """The colour scale is the affinity's range [0, 1], not the data's: 0.4 to 0.6 must not look like 0 to 1."""
    ax = plot_affinity(np.array([[0.6, 0.4], [0.4, 0.6]]))
    assert ax.images[0].get_clim() == (0, 1)
    plt.close("all")


def test_cli_cluster_overwrites_an_existing_npy_labels_file(tmp_path):
    """A second `cluster -o labels.npy` replaces the file: np.load reads the new labels, not the old ones."""
    rng = np.random.default_rng(0)
    for n_rows in (30, 20):
        np.save(tmp_path / "X.npy", rng.normal(size=(n_rows, 2)))
        assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "labels.npy"), "--n-clusters", "2",
                     "-q"]) == 0
    assert np.load(tmp_path / "labels.npy").shape == (20,)


def test_cli_plot_takes_an_upper_case_picture_extension(tmp_path):
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(30, 2)))
    argv = ["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.npy"), "--n-clusters", "2",
            "--plot", str(tmp_path / "p.PNG"), "-q"]
    assert main(argv) == 0
    assert (tmp_path / "p.PNG").stat().st_size > 1000
    plt.close("all")


def test_cli_train_quiet_prints_no_epoch_log(tmp_path, capsys):
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(40, 2)))
    np.save(tmp_path / "y.npy", np.repeat([0, 1], 20))
    argv = ["train", str(tmp_path / "X.npy"), str(tmp_path / "y.npy"), "-o", str(tmp_path / "k.safetensors"),
            "--scratch", "--d-model", "8", "--n-blocks", "1", "--epochs", "1", "--set-size", "10", "20", "-q"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "train_loss" not in captured.err + captured.out
    assert captured.out == ""  # nor "Saved the kernel to ..."
    assert (tmp_path / "k.safetensors").is_file()


def test_cli_demo_train_quiet_prints_no_epoch_log(capsys, monkeypatch):
    """`skabc demo --train -q` trains without the epoch log (network and data shrunk here to run in a second)."""
    import skabc.datasets
    import skabc.kernels

    real_kernel, real_sets = skabc.kernels.ContextualKernel, skabc.datasets.make_circles_sets
    monkeypatch.setattr(skabc.kernels, "ContextualKernel", lambda **params: real_kernel(
        **{**params, "d_model": 8, "n_blocks": 1, "set_size": (20, 40), "sets_per_epoch": 8, "device": "cpu"}))
    monkeypatch.setattr(skabc.datasets, "make_circles_sets", lambda n_sets, set_size, **kw: real_sets(
        n_sets=min(n_sets, 8), set_size=min(set_size, 40), **kw))
    assert main(["demo", "--train", "--epochs", "1", "--sets", "1", "--plot", "", "-q"]) == 0
    captured = capsys.readouterr()
    assert "train_loss" not in captured.err + captured.out
    assert "ABC multiplicative (trained now) (eigengap k)" in captured.out


class _CountingModel:
    """Stands in for ABCClustering in the demo: records n_clusters; finds k = 5, 3, 5, 3, ... clusters."""

    made: list = []

    def __init__(self, n_clusters=None, **params):
        self.made.append(n_clusters)
        self.calls = 0

    def fit_predict(self, X):
        self.calls += 1
        return np.arange(len(X)) % (5 if self.calls % 2 else 3)


def test_demo_true_k_rows_are_given_k_and_k_errors_are_absolute(monkeypatch):
    import skabc.demo

    monkeypatch.setattr(skabc.demo, "ABCClustering", _CountingModel)
    monkeypatch.setattr(_CountingModel, "made", [])
    rows = skabc.demo.compare_on_circles({"m": None}, set_sizes=(40,), n_sets=2, n_circles=4, baselines=False)
    assert _CountingModel.made == [None, 4]  # the "(true k)" row clusters with the true k
    assert [(row["method"], row["mean_abs_k_error"]) for row in rows] == [
        ("ABC m (eigengap k)", 1.0),  # |5 - 4| and |3 - 4|: over- and under-estimates do not cancel
        ("ABC m (true k)", None),  # no k error where k was given
    ]


def test_demo_draws_other_sets_for_every_size(monkeypatch):
    """The sets of size n come from seed random_state + n (modulo 2**32), so the sizes do not share draws."""
    import skabc.demo

    seeds = []
    real = skabc.demo.make_circles_sets

    def recording(**kwargs):
        seeds.append(kwargs["random_state"])
        return real(**kwargs)

    monkeypatch.setattr(skabc.demo, "make_circles_sets", recording)
    skabc.demo.compare_on_circles({}, set_sizes=(30, 40), n_sets=1, random_state=2**32 - 35)
    assert seeds == [2**32 - 5, 5]


def test_cli_help_states_the_defaults_the_options_have():
    """Every "(default: N)" in an option's help is the value the option takes when it is left out (mutation
    survivor L30: demo's --sets could default to 10 under a help saying 20)."""
    import argparse

    from skabc.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    stated = [(name, action, int(match.group(1))) for name, command in commands.items() for action in command._actions
              if (match := re.search(r"\(default: (-?\d+)[),;]", action.help or ""))]
    assert {(name, action.dest) for name, action, _ in stated} >= {("demo", "sets"), ("demo", "seed"),
                                                                 ("demo", "epochs"), ("demo", "threads")}
    for name, action, value in stated:
        assert action.default == value, (name, action.dest, action.default, value)


def test_cli_non_negative_options_take_zero_and_refuse_minus_one(capsys):
    """--threads 0 is torch's choice and --n-blocks 0 a network without attention blocks (mutation survivor L26)."""
    from skabc.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["demo", "--threads", "0"]).threads == 0
    assert parser.parse_args(["train", "X.npy", "y.npy", "-o", "k.safetensors", "--n-blocks", "0"]).n_blocks == 0
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["demo", "--threads", "-1"])
    assert exited.value.code == 2 and "expected a non-negative integer, got '-1'" in capsys.readouterr().err


def _blobs_files(tmp_path):
    X = np.random.default_rng(0).normal(size=(40, 2)) + np.repeat([[0.0, 0.0], [8.0, 8.0]], 20, axis=0)
    np.save(tmp_path / "X.npy", X)
    return str(tmp_path / "X.npy")


class _LibraryDiskError(OSError):
    """An OSError as some libraries raise it: a message of their own that leaves out the file."""

    def __str__(self) -> str:
        return "the cache is full"


@pytest.mark.parametrize("error, said", [
    (MemoryError("Unable to allocate 7.45 GiB for an array"), "Unable to allocate 7.45 GiB for an array"),
    (_LibraryDiskError(28, "No space left on device", "/scratch/cache"), "the cache is full: '/scratch/cache'"),
    (FileNotFoundError(2, "No such file or directory", "/scratch/cache"),
     "[Errno 2] No such file or directory: '/scratch/cache'"),
])
def test_cli_memory_and_file_errors_are_one_line_naming_the_file(tmp_path, capsys, monkeypatch, error, said):
    """A MemoryError or an OSError from deep inside is one line and exit code 1, and an OSError names its file once,
    whether or not its message does (mutation survivors L36, L37)."""
    from skabc import ABCClustering

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(ABCClustering, "fit_predict", fail)
    assert main(["cluster", _blobs_files(tmp_path), "-o", str(tmp_path / "l.npy"), "-q"]) == 1
    assert capsys.readouterr().err.splitlines() == [f"skabc cluster: error: {said}"]


@pytest.mark.parametrize("name", ["l.npy", "l.txt"])
def test_cli_writes_labels_into_a_folder_it_creates(tmp_path, name):
    """-o into folders that do not exist yet creates them, as --plot does (mutation survivor F29)."""
    out = tmp_path / "new" / "deeper" / name
    assert main(["cluster", _blobs_files(tmp_path), "--n-clusters", "2", "-o", str(out), "-q"]) == 0
    labels = np.load(out) if name.endswith(".npy") else np.loadtxt(out, dtype=np.int64)
    assert adjusted_rand_score(np.repeat([0, 1], 20), labels) == 1.0


def test_cli_evaluate_gives_the_standard_error_of_the_mean_over_sets(tmp_path, capsys):
    """± is the sample standard deviation over the sets (ddof=1) over the square root of their number (mutation
    survivor L25)."""
    truth = np.tile(np.repeat([0, 1], 5), 3)
    labels = np.concatenate([np.repeat([0, 1], 5), [0, 0, 0, 0, 1, 1, 1, 1, 1, 0], [0, 1] * 5])
    groups = np.repeat([0, 1, 2], 10)
    for name, values in (("l", labels), ("t", truth), ("g", groups)):
        np.save(tmp_path / f"{name}.npy", values)
    assert main(["evaluate", str(tmp_path / "l.npy"), str(tmp_path / "t.npy"), "--groups",
                 str(tmp_path / "g.npy")]) == 0
    scores = [adjusted_rand_score(truth[groups == g], labels[groups == g]) for g in range(3)]
    expected = f"ARI {np.mean(scores):.4f} ± {np.std(scores, ddof=1) / np.sqrt(3):.4f} (mean over 3 sets)"
    assert capsys.readouterr().out.splitlines()[0] == expected


@pytest.mark.parametrize("n_groups", [1, 2])
def test_cli_counts_a_warning_over_the_sets_only_where_there_are_several(tmp_path, monkeypatch, n_groups):
    """A warning of the sets' fits ends "(in N of M sets)" with --groups of several sets, and is said as it is for
    one (mutation survivor L20)."""
    from skabc import ABCClustering

    fit_predict = ABCClustering.fit_predict

    def noted(self, X, *args, **kwargs):
        warnings.warn("a note from the fit", UserWarning, stacklevel=2)
        return fit_predict(self, X, *args, **kwargs)

    monkeypatch.setattr(ABCClustering, "fit_predict", noted)
    np.save(tmp_path / "g.npy", np.repeat(np.arange(n_groups), 40 // n_groups))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["cluster", _blobs_files(tmp_path), "--groups", str(tmp_path / "g.npy"), "--n-clusters", "2",
                     "-o", str(tmp_path / "l.npy"), "-q"]) == 0
    said = [str(w.message) for w in caught if "a note" in str(w.message)]
    assert said == ["a note from the fit" + (" (in 2 of 2 sets)" if n_groups == 2 else "")]


# ------------------------------------------------------------- probe 63b (/work/probe63b)
def test_cli_refuses_a_names_file_one_row_longer_whose_first_name_is_a_class(tmp_path, capsys):
    """A names file of one row too many lost its first row as a "header" although that name was a class further
    down: every prediction was scored against the next row's truth (ARI 0.03 for a perfect prediction, exit 0)."""
    from skabc._cli_files import read_array

    truth = ["dog", "cat"] * 50
    (tmp_path / "truth.csv").write_text("\n".join(truth) + "\n")
    np.save(tmp_path / "pred.npy", np.array([0, 1] * 50)[1:])  # 99 labels: the truth's rows 2 to 100
    assert main(["evaluate", str(tmp_path / "pred.npy"), str(tmp_path / "truth.csv")]) == 1
    assert "labels has 99 entries but truth has 100" in capsys.readouterr().err
    np.testing.assert_array_equal(read_array(str(tmp_path / "truth.csv"), "y", 1, rows=99), truth)
    (tmp_path / "titled.csv").write_text("species\n" + "\n".join(truth[1:]) + "\n")  # a title: still dropped
    np.testing.assert_array_equal(read_array(str(tmp_path / "titled.csv"), "y", 1, rows=99), truth[1:])


@pytest.mark.parametrize("text, line, mark", [("0\n1\nNA\n0\n", 3, "NA"), ("label\n0\n1\nn/a\n", 4, "n/a"),
                                              ("1\nNA\n", 2, "NA"), ("NA\n1\n2\n", 1, "NA"),  # review 63
                                              (",y\n0,1\n1,NA\n", 3, "NA"), (",y\n0,1\n1,\n", 3, "")])
def test_cli_refuses_a_missing_value_mark_among_numeric_labels(tmp_path, capsys, text, line, mark):
    """'NA' in a column of numbers became a class named 'NA' (ARI 0.57, exit 0) where 'nan' was refused; review 63:
    so it did after pandas' index, and as the only number's neighbour or a first line ('NA' dropped as a title)."""
    (tmp_path / "truth.csv").write_text(text)
    np.save(tmp_path / "pred.npy", np.zeros(3, dtype=int))  # the truth is refused as it is read, whatever its length
    assert main(["evaluate", str(tmp_path / "pred.npy"), str(tmp_path / "truth.csv")]) == 1
    assert f"line {line} holds '{mark}', a missing value among numbers" in capsys.readouterr().err
    (tmp_path / "names.csv").write_text("none\ncat\nnone\ncat\n")  # among names, 'none' may be a class
    np.save(tmp_path / "pred.npy", np.array([0, 1, 0, 1]))
    assert main(["evaluate", str(tmp_path / "pred.npy"), str(tmp_path / "names.csv")]) == 0


def test_cli_names_options_only_where_the_command_has_them(tmp_path, capsys):
    """Parameter names were rewritten as options inside unquoted paths ('--set-size/--n-clusters.txt') and in a
    model file's field names ('kernel.params.--set-size: --set-size must ...' from 'cluster', which has no such
    option)."""
    import json

    from conftest import forge, read_meta, read_tensors

    from skabc.pretrained import PRETRAINED_DIR

    (tmp_path / "set_size").mkdir()
    np.save(tmp_path / "set_size" / "n_clusters.npy", np.array([0.0, np.nan, 1.0]))
    (tmp_path / "pred.txt").write_text("0\n1\n1\n")
    assert main(["evaluate", str(tmp_path / "pred.txt"), str(tmp_path / "set_size" / "n_clusters.npy")]) == 1
    assert f"truth ('{tmp_path / 'set_size' / 'n_clusters.npy'}') holds NaN" in capsys.readouterr().err
    source = PRETRAINED_DIR / "circles_multiplicative.safetensors"
    meta = read_meta(source)
    meta["kernel"]["params"]["set_size"] = [40, 20]
    forge(tmp_path / "forged.safetensors", meta, read_tensors(source))
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(30, 2)))
    argv = ["cluster", str(tmp_path / "X.npy"), "--kernel", str(tmp_path / "forged.safetensors"), "-o",
            str(tmp_path / "l.txt")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "kernel.params.set_size: set_size must satisfy" in err and "--set-size" not in err, json.dumps(err)
    folder = tmp_path / "it's n_clusters run"  # repr quotes it with double quotes: still a quoted path
    folder.mkdir()
    np.save(folder / "X.npy", np.array([[0.0, 1.0], [np.nan, 2.0]]))
    assert main(["cluster", str(folder / "X.npy"), "-o", str(tmp_path / "l.txt")]) == 1
    assert f'"{folder / "X.npy"}" holds nan' in capsys.readouterr().err


def test_cli_names_the_line_of_a_row_of_another_width(tmp_path, capsys):
    """numpy's 'at row 3' counted data rows (past a comment, header and blank line) and advised `usecols`."""
    (tmp_path / "X.csv").write_text("# points\nx,y\n1,2\n\n3,4\n5\n7,8\n")
    (tmp_path / "i.csv").write_text(",a,b\nr1,1,2\nr2,3\n")
    for name, said in (("X.csv", "line 6 has 1 field where the rows before it have 2"),
                       ("i.csv", "line 3 has 2 fields, fewer than the header names")):
        assert main(["cluster", str(tmp_path / name), "-o", str(tmp_path / "l.txt")]) == 1
        err = capsys.readouterr().err
        assert said in err and "usecols" not in err


def test_cli_names_a_text_file_given_an_npy_name(tmp_path, capsys):
    """numpy called a CSV under an .npy name pickled data, and pointed to allow_pickle, which no option sets."""
    (tmp_path / "X.npy").write_text("1,2\n3,4\n")
    assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.txt")]) == 1
    err = capsys.readouterr().err
    assert "it is not a .npy file" in err and "name a text file .csv" in err and "pickle" not in err
    # Review 63: an empty file, and binary content, are not text files to rename.
    for content, said in ((b"", "the file is empty"), (b"\x80\x04\x95\x00\x01", "it is not a .npy file (numpy's")):
        (tmp_path / "X.npy").write_bytes(content)
        assert main(["cluster", str(tmp_path / "X.npy"), "-o", str(tmp_path / "l.txt")]) == 1
        err = capsys.readouterr().err
        assert said in err and ".csv" not in err


def test_plot_candidates_checks_the_marker_size_before_making_a_figure():
    from sklearn.datasets import make_blobs

    from skabc import ABCClustering
    from skabc.plotting import plot_candidates

    X, _ = make_blobs(n_samples=100, centers=2, random_state=0)
    model = ABCClustering(random_state=0).fit(X)
    plt.close("all")
    for bad in (-1, [1.0, 2.0], "10", True):  # probe 67c: '10' reached matplotlib after the figure was made
        with pytest.raises(ValueError, match="marker size"):
            plot_candidates(model, X, s=bad)
    assert plt.get_fignums() == []
