"""Forged files, hostile checkpoints and command-line misuse (the hostile-input probe of issue 21).

Every case ends in the correct result or a ValueError / TypeError of ours that names the problem (and, for
files, the file); command-line cases exit 1 or 2 with a one-line message and no traceback.  Models are
tiny; the module runs in seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, make_blob_sets
from sklearn.frozen import FrozenEstimator

from skabc import ABCClustering, ContextualKernel
from skabc.cli import main

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------- hostile checkpoints
class _Exploit:
    """Unpickling this runs a shell command (what a hostile checkpoint would hold)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("name", ["params.pt", "optimizer.pt"])
def test_pickled_checkpoint_in_checkpoint_dir_is_refused_naming_the_file(name, blob_data, tmp_path):
    X, y, g = blob_data
    folder = tmp_path / "ckpt"
    ContextualKernel(**{**TINY, "checkpoint_dir": folder}).fit(X, y, groups=g)
    marker = tmp_path / "pwned"
    torch.save({"state": _Exploit(marker)}, folder / name)
    with pytest.raises(ValueError, match=rf"refusing to resume from .*{name}.*pickled Python objects") as info:
        ContextualKernel(**{**TINY, "checkpoint_dir": folder}).fit(X, y, groups=g)
    assert "weights_only" not in str(info.value)
    assert not marker.exists()


def test_corrupt_or_missing_checkpoint_files_are_named(blob_data, tmp_path):
    X, y, g = blob_data
    folder = tmp_path / "ckpt"
    ContextualKernel(**{**TINY, "checkpoint_dir": folder}).fit(X, y, groups=g)
    good = (folder / "params.pt").read_bytes()
    (folder / "params.pt").write_bytes(b"\x00garbage")
    with pytest.raises(ValueError, match=r"cannot resume from .*params\.pt.*corrupt"):
        ContextualKernel(**{**TINY, "checkpoint_dir": folder}).fit(X, y, groups=g)
    (folder / "params.pt").unlink()
    with pytest.raises(ValueError, match=r"holds no params\.pt"):
        ContextualKernel(**{**TINY, "checkpoint_dir": folder}).fit(X, y, groups=g)
    (folder / "params.pt").write_bytes(good)
    (folder / "history.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"cannot resume from .*history\.json"):
        ContextualKernel(**{**TINY, "checkpoint_dir": folder}).fit(X, y, groups=g)


# ------------------------------------------------------------------ saving the shipped clustering models
def test_model_around_a_shipped_kernel_saves_and_loads_frozen(tmp_path):
    """The probe's case: saving such a model failed with a message about custom modules."""
    X = make_blob_sets(n_sets=1, set_size=40, random_state=2)[0]
    model = ABCClustering.from_pretrained("circles", random_state=0).fit(X)
    model.save(tmp_path / "m.safetensors")
    loaded = ABCClustering.load(tmp_path / "m.safetensors")
    assert isinstance(loaded.kernel, FrozenEstimator)  # still frozen: fit with labels will not retrain it
    assert loaded.affinity_power_ == model.affinity_power_
    np.testing.assert_array_equal(loaded.labels_, model.labels_)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


# --------------------------------------------------------------------------------------- command line
@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    X, y, g = make_blob_sets(n_sets=3, set_size=10, random_state=5)
    np.save(folder / "X.npy", X)
    np.save(folder / "y.npy", y)
    np.save(folder / "groups20.npy", g[:20])
    lonely = g.copy()
    lonely[-1] = 99  # a one-row group
    np.save(folder / "lonely.npy", lonely)
    with open(folder / "bom.csv", "w", encoding="utf-8-sig") as f:
        f.writelines(",".join(f"{v:.6f}" for v in row) + "\n" for row in X)
    (folder / "a_file").write_text("x")
    return folder


def run_cli(argv, capsys) -> tuple[int, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse errors
        code = exc.code
    return code, capsys.readouterr().err


def assert_one_line_error(code: int, err: str, message: str) -> None:
    assert code in (1, 2), code
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("usage:", " "))]
    assert len(lines) == 1, err
    assert message in lines[0], err


def test_cli_groups_shorter_than_X_is_refused(cli_files, capsys):
    f = cli_files
    code, err = run_cli(["cluster", f / "X.npy", "--pretrained", "circles", "--groups", f / "groups20.npy",
                         "-o", f / "out.npy"], capsys)
    assert_one_line_error(code, err, "groups has 20 entries but X has 30 rows")
    assert not (f / "out.npy").exists()


def test_cli_one_row_group_is_its_own_cluster(cli_files, capsys):
    f = cli_files
    argv = ["cluster", f / "X.npy", "--pretrained", "circles", "--groups", f / "lonely.npy", "-o", f / "l.npy", "-q"]
    assert run_cli(argv, capsys)[0] == 0
    labels = np.load(f / "l.npy")
    groups = np.load(f / "lonely.npy")
    assert labels.shape == (30,) and labels.min() >= 0
    lonely = labels[groups == 99]
    assert len(lonely) == 1 and not np.isin(lonely, labels[groups != 99]).any()


def test_cli_csv_with_byte_order_mark_and_no_header_keeps_every_row(cli_files, capsys):
    f = cli_files
    argv = ["cluster", f / "bom.csv", "--pretrained", "circles", "-o", f / "bom_labels.txt", "-q"]
    assert run_cli(argv, capsys)[0] == 0
    assert len(np.loadtxt(f / "bom_labels.txt")) == 30


@pytest.mark.parametrize("command", ["cluster", "train"])
@pytest.mark.parametrize(
    "target, message",
    [("{dir}", "is a directory"), ("{file}/labels.npy", "is a file, not a folder")],
    ids=["directory", "under-a-file"],
)
def test_cli_output_that_cannot_be_written_is_refused_before_any_work(command, target, message, cli_files,
                                                                      capsys, monkeypatch):
    f = cli_files
    out = target.format(dir=f, file=f / "a_file")
    if command == "train":
        # Must fail before training starts: a fit here would be a bug.
        monkeypatch.setattr(ContextualKernel, "fit", lambda *a, **k: pytest.fail("trained before checking -o"))
        argv = ["train", f / "X.npy", f / "y.npy", "-o", out, "--epochs", "1"]
    else:
        argv = ["cluster", f / "X.npy", "--pretrained", "circles", "-o", out]
    assert_one_line_error(*run_cli(argv, capsys), message)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write into any folder")
def test_cli_output_into_an_unwritable_folder_is_refused(cli_files, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        argv = ["cluster", cli_files / "X.npy", "--pretrained", "circles", "-o", locked / "l.npy"]
        assert_one_line_error(*run_cli(argv, capsys), "is not writable")
    finally:
        locked.chmod(0o700)


def test_cli_os_errors_while_writing_give_one_line(cli_files, capsys, monkeypatch):
    """Whatever the check misses (a full disk, a folder locked meanwhile) still ends in one line, exit 1."""

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(cli_files / "l.npy"))

    monkeypatch.setattr(np, "save", refuse)
    argv = ["cluster", cli_files / "X.npy", "--pretrained", "circles", "-o", cli_files / "l.npy"]
    assert_one_line_error(*run_cli(argv, capsys), "Permission denied")


def test_cli_negative_threads_is_a_usage_error(capsys):
    code, err = run_cli(["demo", "--threads", "-2"], capsys)
    assert code == 2 and "Traceback" not in err
    assert "argument --threads: expected a non-negative integer, got '-2'" in err


def test_cli_errors_print_no_traceback_in_a_real_process(cli_files, tmp_path):
    """The same through ``python -m skabc``: exit status 1, one line on stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "skabc", "cluster", str(cli_files / "X.npy"), "--pretrained", "circles",
         "-o", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "is a directory" in result.stderr, result.stderr
