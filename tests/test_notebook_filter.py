"""The notebook output filter that `make setup` installs: git stages notebooks without outputs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git on PATH"
)


def executed_notebook() -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("print(42)", execution_count=3, id="parameters")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# title", id="title"), cell])


@pytest.mark.slow
def test_make_setup_filter_strips_outputs_from_staged_notebooks(tmp_path):
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml", "setup.py", ".gitattributes"):
        shutil.copy(ROOT / name, repo / name)
    (repo / ".venv").symlink_to(Path(sys.prefix))  # this environment stands in for the checkout's .venv
    stamp = repo / "stamp"
    stamp.touch()
    for prerequisite in ("pyproject.toml", "setup.py"):  # older than the stamp: make installs nothing
        os.utime(repo / prerequisite, (0, 0))
    environment = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

    def run(*command: str, cwd: Path = repo) -> str:
        return subprocess.run(command, cwd=cwd, env=environment, check=True, capture_output=True, text=True).stdout

    run("git", "init", "-q")
    run("make", "--no-print-directory", "notebook-filter", f"STAMP={stamp}", f"PYTHON={sys.executable}")
    assert run("git", "config", "filter.nbstripout.clean").startswith(".venv/bin/python -m nbstripout --keep-id")

    notebook = repo / "notebooks" / "n.ipynb"
    saved = executed_notebook()
    saved.metadata["language_info"] = {  # as JupyterLab writes it on saving
        "name": "python", "version": "3.11.2", "mimetype": "text/x-python", "file_extension": ".py",
        "codemirror_mode": {"name": "ipython", "version": 3}, "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3"}
    nbformat.write(saved, notebook)
    run("git", "add", "n.ipynb", cwd=repo / "notebooks")  # git runs the filter from the top level
    staged = nbformat.reads(run("git", "show", ":notebooks/n.ipynb"), as_version=4)
    code = [cell for cell in staged.cells if cell.cell_type == "code"]
    assert code and all(cell.outputs == [] and cell.execution_count is None for cell in code)
    assert [cell.id for cell in staged.cells] == ["title", "parameters"]  # ids name cells: kept
    assert staged.metadata["language_info"] == {"name": "python"}  # as committed: saving leaves no diff
    assert nbformat.read(notebook, as_version=4).cells[1].outputs  # the working copy keeps its outputs
