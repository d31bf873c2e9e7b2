"""What a user installing the built wheel gets: every file of the package, its licence, its requirements."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    pytest.importorskip("setuptools")
    out, build = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("build")
    # Built from a copy: setuptools writes build/ and *.egg-info next to the sources.
    shutil.copytree(ROOT / "skabc", build / "skabc", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.cfg", "pyproject.toml", "MANIFEST.in", "LICENSE", "README.md"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, build / name)
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                             "-w", str(out), str(build)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = out.glob("skabc-*.whl")
    return zipfile.ZipFile(path)


def _package_files() -> set[str]:
    return {path.relative_to(ROOT).as_posix() for path in (ROOT / "skabc").rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


def test_wheel_holds_every_file_of_the_package_and_nothing_else(wheel):
    names = set(wheel.namelist())
    package = {name for name in names if name.startswith("skabc/")}
    assert package == _package_files()
    assert {name.split("/")[0] for name in names} == {"skabc", next(n.split("/")[0] for n in names
                                                                    if ".dist-info/" in n)}


def test_wheel_carries_the_licence_and_the_requirements(wheel):
    names = wheel.namelist()
    licence = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
    assert licence and b"BSD 3-Clause" in wheel.read(licence[0])
    metadata = wheel.read(next(name for name in names if name.endswith(".dist-info/METADATA"))).decode()
    required = {line.split(":", 1)[1].strip().split(">")[0].split(";")[0].strip()
                for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line}
    assert required == {"numpy", "scipy", "scikit-learn", "torch", "skorch", "joblib", "safetensors", "tqdm",
                        "threadpoolctl"}


def _versions(text: str, operator: str) -> dict[str, str]:
    """Requirement lines -> {name: the version given with ``operator``}, comments and blank lines dropped."""
    from packaging.requirements import Requirement

    found = {}
    for line in filter(None, (line.split("#")[0].strip() for line in text.splitlines())):
        requirement = Requirement(line)
        found.update({requirement.name.lower(): spec.version for spec in requirement.specifier
                      if spec.operator == operator})
    return found


def test_minimum_versions_pin_every_declared_floor():
    """``make test-min`` installs .ci/min-versions.txt: each install requirement at its floor's release series, so a
    raised floor (skorch 1.2, once a probe found 1.0 unable to pickle a fitted model on a recent torch) is tested
    where it is declared.  torch is left out: only one CPU wheel installs here, and the code uses no API after 2.2."""
    import configparser

    from packaging.version import Version

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    floors = _versions(config["options"]["install_requires"], ">=")
    floors.pop("torch")
    pins = _versions((ROOT / ".ci" / "min-versions.txt").read_text(), "==")
    assert set(floors) <= set(pins), f"no pinned minimum for {sorted(set(floors) - set(pins))}"
    for name, floor in floors.items():
        pin, low = Version(pins[name]), Version(floor)
        # The floor itself, or a patch release of it where the floor has no wheel for this Python (numpy 1.23.5).
        assert pin >= low and pin.release[:len(low.release)] == low.release, (name, floor, pins[name])
