"""The report notebooks: committed clean and parameterised, and executable in smoke mode."""

from __future__ import annotations

import ast
import inspect
import io
import tokenize
from pathlib import Path

import nbformat
import pytest
from matplotlib.figure import Figure
from PIL import Image

from evictlab.analysis.qa import report as qa_report
from evictlab.core.demo import DEMO_DATASET, DEMO_MANIFEST
from evictlab.workbench import plots, report

REQUIRED_PARAMETERS = {"spec": "pr4810-final", "smoke": False, "figures_dir": None, "tables_dir": None}
FIGURES = {  # the figures each notebook saves in smoke mode
    "01_pools.ipynb": ["01_evidence_lengths", "01_pool_metadata", "01_pool_overview"],
    "02_retention.ipynb": ["02_retention_by_scenario", "02_support_rank_distribution"],
    "03_weight_sweep.ipynb": [
        "03_weight_simplex_k5", "03_weight_simplex_k7", "03_weight_simplex_k9", "03_weight_stability"
    ],
    "04_half_life_sweep.ipynb": ["04_capacity_curves", "04_half_lives_1", "04_half_lives_2"],
    "05_protocol_variants.ipynb": ["05_variant_cascade"],
    "06_qa_report.ipynb": ["06_qa_accuracy", "06_qa_grade_rules", "06_qa_paired", "06_qa_tokens"],
    "07_explorer.ipynb": ["07_explorer_capacity_7", "07_explorer_more_confirmation", "07_explorer_start"],
    "08_policy_zoo.ipynb": ["08_explanation", "08_zoo_heatmap"],
    "09_robustness.ipynb": ["09_robustness_k5", "09_robustness_k7", "09_robustness_k9"],
    "10_traces.ipynb": ["10_capacity_curves", "10_loss_map", "10_stage_losses", "10_study_advantage"],
}

#: What the last title line of every figure a notebook saves names: the QA run of notebook 06,
#: the generator of notebook 10's workloads, else the embedded demo the smoke runs use.
SOURCES = {
    "06_qa_report.ipynb": qa_report.load_reference_run().label,
    "10_traces.ipynb": "synthetic: evictlab's seeded workload generator",
}
DEMO_SOURCE = "synthetic demo data"


def load(name: str) -> nbformat.NotebookNode:
    return nbformat.read(report.NOTEBOOK_DIR / name, as_version=4)


def parameter_cells(notebook) -> list:
    return [cell for cell in notebook.cells if "parameters" in cell.get("metadata", {}).get("tags", [])]


def test_every_notebook_in_the_suite_has_its_expected_figures_listed():
    assert sorted(FIGURES) == sorted(report.NOTEBOOKS)


def test_the_suite_lists_exactly_the_committed_notebooks():
    committed = sorted(path.name for path in report.NOTEBOOK_DIR.glob("*.ipynb"))
    assert sorted(report.NOTEBOOKS) == committed


@pytest.mark.parametrize("name", report.NOTEBOOKS)
def test_committed_notebook_is_valid_and_has_no_outputs(name):
    notebook = load(name)
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name} cell {index} has outputs"
            assert cell.execution_count is None, f"{name} cell {index} has an execution count"
        assert "papermill" not in cell.metadata, f"{name} cell {index} carries papermill metadata"
    assert "papermill" not in notebook.metadata


@pytest.mark.parametrize("name", report.NOTEBOOKS)
def test_one_parameters_cell_of_commented_literals(name):
    notebook = load(name)
    cells = parameter_cells(notebook)
    assert len(cells) == 1, f"{name}: expected one cell tagged 'parameters', found {len(cells)}"
    first_code = next(cell for cell in notebook.cells if cell.cell_type == "code")
    assert first_code is cells[0], f"{name}: the parameters cell must be the first code cell"
    source = cells[0].source
    values = {}
    for statement in ast.parse(source).body:
        assert isinstance(statement, ast.Assign) and len(statement.targets) == 1, ast.unparse(statement)
        target = statement.targets[0]
        assert isinstance(target, ast.Name), ast.unparse(statement)
        values[target.id] = ast.literal_eval(statement.value)  # raises for anything but a plain literal
    commented = {
        token.start[0] for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    for number, line in enumerate(source.splitlines(), start=1):
        if line.strip():
            assert number in commented, f"{name}: parameter line {number} has no comment: {line!r}"
    replaced = {"dataset", "allow_unpinned", "preset"} & set(values)  # the spec carries them
    assert not replaced, f"{name}: parameters {sorted(replaced)} are part of spec"
    for parameter, default in REQUIRED_PARAMETERS.items():
        assert parameter in values, f"{name}: missing parameter {parameter!r}"
        assert values[parameter] == default, f"{name}: {parameter} defaults to {values[parameter]!r}"


@pytest.mark.parametrize("name", report.NOTEBOOKS)
def test_every_figure_call_passes_its_source(name):
    """Each call of a figure function of :mod:`evictlab.workbench.plots` says where its data comes
    from (the explorer's figure names its dataset itself)."""
    figure_functions = {name for name in plots.__all__ if callable(getattr(plots, name))
                        and inspect.signature(getattr(plots, name)).return_annotation in ("Figure", Figure)}
    calls = []
    for cell in load(name).cells:
        if cell.cell_type != "code":
            continue
        lines = [line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
                 for line in cell.source.splitlines()]  # IPython magics read as pass
        calls += [node for node in ast.walk(ast.parse("\n".join(lines))) if isinstance(node, ast.Call)
                  and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                  and node.func.value.id == "plots" and node.func.attr in figure_functions]
    assert calls or name == "07_explorer.ipynb", f"{name}: no figure call found"
    for call in calls:
        assert "source" in {keyword.arg for keyword in call.keywords}, f"{name}: {ast.unparse(call)} names no source"


@pytest.mark.parametrize("name", report.NOTEBOOKS)
def test_papermill_reads_every_parameter_without_a_warning(name):
    """papermill's own reading of the parameters cell finds every name the cell assigns, so
    passing one never prints 'Passed unknown parameter' (a comment holding '=' used to hide it)."""
    from papermill.translators import PythonTranslator

    source = parameter_cells(load(name))[0].source
    assigned = [statement.targets[0].id for statement in ast.parse(source).body]
    assert [parameter.name for parameter in PythonTranslator.inspect({"source": source})] == assigned


@pytest.mark.slow
@pytest.mark.parametrize("name", report.NOTEBOOKS)
def test_notebook_executes_in_smoke_mode(name, smoke_report):
    """papermill ran the notebook on the embedded demo with smoke=True (in the session's one smoke
    report); its figures landed in figures_dir, each naming its data under its title."""
    output = smoke_report.output
    executed = nbformat.read(output / "notebooks" / name, as_version=4)
    assert executed.metadata["papermill"]["parameters"]["smoke"] is True
    outputs = [output for cell in executed.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    warnings = [output.text for output in outputs if output.output_type == "stream" and output.name == "stderr"]
    assert not [text for text in warnings if "Warning" in text], warnings
    prefix = Path(name).stem.split("_")[0] + "_"
    pngs = sorted(path.stem for path in (output / "figures").glob(f"{prefix}*.png"))
    svgs = sorted(path.stem for path in (output / "figures").glob(f"{prefix}*.svg"))
    assert pngs == svgs == FIGURES[name]
    for stem, source in source_lines(output / "figures", prefix).items():  # each says what data it shows
        assert SOURCES.get(name, DEMO_SOURCE) in source, f"{stem}: no source under its title, only {source!r}"


@pytest.mark.slow
def test_a_dataset_the_spec_names_is_named_under_every_figure(tmp_path):
    """Notebook 04 on a dataset file of its own: its figures name that file and hash, never the demo."""
    copy = tmp_path / "named.json"
    copy.write_bytes(DEMO_DATASET.read_bytes() + b"\n")  # the demo's valid rows under another hash
    spec = f"pr4810-final:dataset={copy},allow_unpinned=true,official_manifest={DEMO_MANIFEST}"
    figures = tmp_path / "figures"
    run = report.NotebookRun("04_half_life_sweep.ipynb", report.NOTEBOOK_DIR / "04_half_life_sweep.ipynb",
                             tmp_path / "04.ipynb")
    report.execute(run, {"spec": spec, "smoke": True, "figures_dir": str(figures), "tables_dir": None}, figures)
    assert run.status == report.SUCCESS, report.describe_failure(run)
    sources = source_lines(figures)
    assert sorted(sources) == FIGURES["04_half_life_sweep.ipynb"]
    for stem, source in sources.items():
        assert source.startswith("named.json (sha256 ") and "unpinned), spec pr4810-final" in source, (stem, source)
        assert "synthetic" not in source, (stem, source)


def source_lines(figures: Path, prefix: str = "") -> dict[str, str]:
    """The last title line of every PNG in ``figures`` (the ``Title`` its saving stored), by stem."""
    lines = {}
    for png in sorted(figures.glob(f"{prefix}*.png")):
        with Image.open(png) as image:
            lines[png.stem] = (image.text.get("Title", "").splitlines() or [""])[-1]
    return lines
