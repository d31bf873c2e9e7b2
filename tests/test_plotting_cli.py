"""Plot helpers (Agg backend) and the command line."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt

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


@pytest.mark.parametrize("d", [1, 2, 5])
def test_plot_clusters_projects_to_2d(d):
    X = np.random.default_rng(0).normal(size=(30, d))
    ax = plot_clusters(X, np.arange(30) % 3, title="t")
    offsets = ax.collections[0].get_offsets()
    assert offsets.shape == (30, 2) and ax.get_title() == "t"
    plt.close("all")


def test_cli_without_command_prints_help(capsys):
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["demo", "--no-such-option"], ["demo", "--sets", "0"], ["demo", "--epochs", "x"]])
def test_cli_rejects_bad_options(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_cli_demo_prints_table_and_saves_picture(tmp_path, capsys):
    out = tmp_path / "demo.png"
    assert main(["demo", "--sets", "2", "--plot", str(out), "--threads", "1"]) == 0
    text = capsys.readouterr().out
    assert "ABC multiplicative (eigengap k)" in text and "SpectralClustering rbf (true k)" in text
    assert out.stat().st_size > 10_000
