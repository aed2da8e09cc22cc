"""The wheel: built from the source, installed into a fresh Python 3.12 venv, it runs the report.

The protocol files, the demo dataset, the reference results and the notebooks (the top-level
``data/`` and ``notebooks/`` of the source tree) must travel inside the installed package, so
the installed copy works from any folder with no source tree around.

The venv is made without a pip of its own (the test's pip installs into it with ``--python``).
Installing the dependencies from PyPI takes minutes, so their wheels are kept in a wheelhouse
(``$EVICTLAB_WHEELHOUSE``, default ``~/.cache/evictlab/wheelhouse-py3.12``): the first run fills
it with ``pip download``, later runs install from it offline. The wheelhouse is shared by every
run on the machine, so a run holds its lock (``<wheelhouse>.lock``) from the first install
attempt to the last: a second run waits instead of reading a half-filled folder.

The installed report runs notebooks 01 and 06 (the demo dataset, the protocol files and the
published QA rows, all read from the package); that every notebook ships is checked in the wheel.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from filelock import FileLock

from evictlab.workbench.report import MANIFEST_FILE, NOTEBOOKS

ROOT = Path(__file__).resolve().parents[1]
VERSION = "3.12"
TIMEOUT = 1200  # seconds for any one step; a hang fails the test instead of the suite


def find_python() -> str | None:
    """A working Python 3.12: ``$EVICTLAB_WHEEL_PYTHON``, ``python3.12`` on PATH or a pyenv version.

    A pyenv shim on PATH can exist without running (when 3.12 is not a selected version), so
    each candidate is tried.
    """
    if os.environ.get("EVICTLAB_WHEEL_PYTHON"):
        return os.environ["EVICTLAB_WHEEL_PYTHON"]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    installed = sorted(glob.glob(str(pyenv / "versions" / f"{VERSION}.*" / "bin" / f"python{VERSION}")), reverse=True)
    for candidate in [shutil.which(f"python{VERSION}"), *installed]:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return None


def run(argv: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    # PYTHONDONTWRITEBYTECODE goes too: the venv's dependencies are installed uncompiled, so the
    # first process that imports a module caches its bytecode in the venv (this test's own folder)
    # and the report's kernels reuse it instead of compiling pandas and matplotlib again each.
    dropped = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def build_wheel(folder: Path) -> Path:
    """Build the wheel from a copy of the sources (the build writes next to them)."""
    source = folder / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for folder_name in ("evictlab", "data", "notebooks"):  # data/ and notebooks/ sit beside the package
        shutil.copytree(ROOT / folder_name, source / folder_name, ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    dist = folder / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(source)], folder)
    (wheel,) = dist.glob("evictlab-*.whl")
    return wheel


def install(python: Path, wheel: Path, folder: Path) -> None:
    """Install the wheel and its dependencies, from the wheelhouse when it has them all."""
    default = Path.home() / ".cache" / "evictlab" / f"wheelhouse-py{VERSION}"
    wheelhouse = Path(os.environ.get("EVICTLAB_WHEELHOUSE", default))
    # This interpreter's pip installs into the venv (made without a pip of its own). --no-compile:
    # byte-compiling every dependency costs more than the report it serves.
    offline = [
        sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-compile", "--no-index",
        "--find-links", str(wheelhouse), str(wheel),
    ]  # fmt: skip
    wheelhouse.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(wheelhouse.with_name(wheelhouse.name + ".lock"))):
        if run(offline, folder, check=False).returncode == 0:
            return
        wheelhouse.mkdir(parents=True, exist_ok=True)
        download = [sys.executable, "-m", "pip", "--python", str(python), "download", "--quiet"]
        run([*download, "--dest", str(wheelhouse), str(wheel)], folder)
        for copy in wheelhouse.glob("evictlab-*.whl"):  # keep only the dependencies
            copy.unlink()
        run(offline, folder)


@pytest.mark.slow
def test_the_wheel_runs_the_report_in_a_fresh_python_3_12_venv(tmp_path):
    base = find_python()
    if base is None:
        pytest.skip(f"no Python {VERSION} found (set EVICTLAB_WHEEL_PYTHON)")
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    run([base, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    install(python, wheel, tmp_path)

    work = tmp_path / "work"  # no source tree here: everything must come from the installed wheel
    work.mkdir()
    probe = "import sys, evictlab.resources as r; print(sys.version_info[:2], r.DATA_DIR)"
    where = run([str(python), "-c", probe], work)
    assert where.stdout.split(")")[0] == f"(3, {VERSION.split('.')[1]}"
    assert Path(where.stdout.split(") ", 1)[1].strip()).is_relative_to(venv)
    installed = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith((".ipynb", ".json"))}
    assert {f"evictlab/notebooks/{name}" for name in NOTEBOOKS} <= installed
    assert "evictlab/data/demo/longmemeval-demo.json" in installed

    evictlab = str(venv / "bin" / "evictlab")
    run([evictlab, "validate-contracts"], work)
    done = run([evictlab, "report", "--smoke", "--notebooks", "01,06", "--no-progress"], work)
    output = work / "results" / "report-pr4810-final-demo-smoke-nb-01-06"
    assert str(output / "report.md") in done.stdout
    record = json.loads((output / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert record["status"] == "success"
    assert (output / "report.html").is_file()
