"""``evictlab report``: the notebook suite end to end, failures that keep their evidence, reruns."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from evictlab import cli, results
from evictlab.analysis.qa.report import REFERENCE_DIR
from evictlab.cli import report as report_command
from evictlab.core.demo import DEMO_DIR
from evictlab.errors import ContractError, DatasetError, OutputExistsError
from evictlab.workbench import loaders, report
from evictlab.workbench.report_document import render, table_view
from evictlab.workbench.report_findings import Finding, Table, analyse
from evictlab.workbench.report_kernels import KernelPlan, WarmKernels

DEMO_DATASET = DEMO_DIR / "longmemeval-demo.json"

pytestmark = pytest.mark.slow  # the report end to end: most tests here run the notebooks


def links(path: Path) -> list[str]:
    """Every link target of a report.md or report.html."""
    text = path.read_text(encoding="utf-8")
    pattern = r"\]\(([^)]+)\)" if path.suffix == ".md" else r'(?:src|href)="([^"]+)"'
    return re.findall(pattern, text)


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory):
    output = tmp_path_factory.mktemp("report") / "smoke"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli.main(["report", "--smoke", "--output-dir", str(output), "--no-progress"])
    (output.parent / "stdout.txt").write_text(printed.getvalue(), encoding="utf-8")
    return code, output


def test_the_command_prints_the_retention_table(smoke_report):
    _, output = smoke_report
    printed = (output.parent / "stdout.txt").read_text(encoding="utf-8")
    assert "Support retention" in printed
    assert re.search(r"total\s+20/45 \[30\.9, 58\.8\]\s+35/45 \[63\.7, 87\.5\]"
                     r"\s+27/45 \[45\.5, 73\.0\]\s+45/45", printed)


def test_report_succeeds_and_executes_every_notebook(smoke_report):
    code, output = smoke_report
    assert code == 0
    for name in report.NOTEBOOKS:
        executed = nbformat.read(output / "notebooks" / name, as_version=4)
        assert executed.metadata["papermill"]["parameters"]["figures_dir"] == str(output / "figures")
        assert all(cell.execution_count is not None for cell in executed.cells if cell.cell_type == "code")


def test_report_writes_png_and_svg_for_every_figure(smoke_report):
    _, output = smoke_report
    pngs = {path.stem for path in (output / "figures").glob("*.png")}
    svgs = {path.stem for path in (output / "figures").glob("*.svg")}
    assert pngs and pngs == svgs
    manifest = json.loads((output / report.MANIFEST_FILE).read_text())
    figures = sorted(f"figures/{stem}{suffix}" for stem in pngs for suffix in (".png", ".svg"))
    assert sorted(manifest["summary"]["figures"]) == figures


@pytest.mark.parametrize("document", ["report.md", "report.html"])
def test_every_link_of_the_report_resolves(smoke_report, document):
    _, output = smoke_report
    targets = links(output / document)
    figures = {f"figures/{path.name}" for path in (output / "figures").iterdir()}
    assert figures <= set(targets), "every figure file is linked"
    assert {f"notebooks/{name}" for name in report.NOTEBOOKS} <= set(targets)
    text = (output / document).read_text(encoding="utf-8")
    for target in targets:
        assert "://" not in target and not target.startswith("/"), f"{target} is not a relative link"
        if target.startswith("#"):  # the table of contents: an anchor of the same document
            assert f'id="{target[1:]}"' in text, f"{document} has no anchor {target}"
        else:
            assert (output / target).is_file(), f"{document} links to missing {target}"


def test_report_shows_the_key_tables(smoke_report):
    _, output = smoke_report
    markdown = (output / "report.md").read_text(encoding="utf-8")
    # Spec 2.10: the run-policy totals, confidence vs hybrid-v1 at capacities 5, 7 and 9.
    assert ("| total | 20/45 [30.9, 58.8] | 35/45 [63.7, 87.5] | 27/45 [45.5, 73.0] | 45/45 [92.1, 100.0]"
            " | 35/45 [63.7, 87.5] | 45/45 [92.1, 100.0] |") in markdown
    # Spec 6.3: the published v3 statistics, recomputed from its rows.
    assert "| official | 40 | 23/40 | 35/40 | 1 | 13 | 0.001831 | +0.300 [+0.150, +0.450] |" in markdown
    assert "qa.summary.json: identical, qa.stats.json: identical" in markdown
    # The synthetic suite's interval is not a bare percentile bootstrap on 5 pairs.
    assert "| synthetic | 5 | 1/5 | 5/5 |" in markdown and "[+0.193, +0.964] | only 5 pairs (< 30)" in markdown
    # Every key table names its data: the demo is synthetic, the QA run is DeerFlow's on LongMemEval.
    assert markdown.count("Data: evictlab's embedded demo dataset: synthetic text and ids") >= 4
    assert "Data: DeerFlow's published run v3 (PR #4810): the real LongMemEval oracle file" in markdown
    html = (output / "report.html").read_text(encoding="utf-8")
    assert html.count("<table") == 8 and "<td>20/45 [30.9, 58.8]</td>" in html  # the notebooks, then seven key tables
    # Every registered policy at every capacity; the oracle bound keeps every support.
    for capacity in (5, 7, 9):
        assert f"## Policy zoo at capacity {capacity}" in markdown
    assert markdown.count("| oracle | 10/10 | 10/10 | 10/10 | 10/10 | 5/5 | 45/45 |") == 3
    # Trace mode: both bounds in the capacity-curve table, and the computed largest gap.
    assert "## Memory over time: capacity curves on the default generated workload" in markdown
    assert "| optimum | " in markdown and "| keep-all | " in markdown and "| hybrid-v1 | " in markdown
    assert ("Where hybrid-v1 and confidence differ most: answerable rate:"
            " the largest difference is at capacity") in markdown


def test_the_report_opens_with_findings_and_the_headline_figure(smoke_report):
    _, output = smoke_report
    markdown = (output / "report.md").read_text(encoding="utf-8")
    marks = ("## Findings", "* **Retention.**", "](figures/02_retention_by_scenario.png)",
             "## Contents", "## Notebooks", "## Support retention")
    order = [markdown.index(mark) for mark in marks]
    assert order == sorted(order)
    assert "35/45, 45/45, 45/45 cases and confidence in 20/45, 27/45, 35/45" in markdown
    html = (output / "report.html").read_text(encoding="utf-8")
    assert html.index('id="findings"') < html.index('id="headline-figure"') < html.index('id="contents"')
    assert "@media print" in html and "<script" not in html


def test_figures_have_captions_that_explain_them(smoke_report):
    _, output = smoke_report
    markdown = (output / "report.md").read_text(encoding="utf-8")
    captions = re.findall(r"^\*Figure \d+\. (.+?)\.\* (.*) \(\[PNG\]", markdown, flags=re.M)
    assert len(captions) == len(list((output / "figures").glob("*.png")))
    assert all(len(explanation) > 40 for _, explanation in captions)  # more than the title again


def test_notebooks_are_exported_to_html_and_no_local_path_leaks(smoke_report):
    _, output = smoke_report
    for name in report.NOTEBOOKS:
        exported = (output / "notebooks" / name).with_suffix(".html")
        assert exported.is_file() and "<html" in exported.read_text(encoding="utf-8")[:2000]
    for document in ("report.md", "report.html"):
        text = (output / document).read_text(encoding="utf-8")
        assert f"notebooks/{Path(report.NOTEBOOKS[0]).stem}.html" in text
        for local in (str(output), str(Path(report.__file__).resolve().parents[1]), str(Path.home())):
            assert local not in text, f"{document} mentions {local}"


def test_no_progress_still_prints_each_notebook(smoke_report):
    _, output = smoke_report
    printed = (output.parent / "stdout.txt").read_text(encoding="utf-8")
    # Two notebooks run at once, so they finish in any order; each line gives wall and CPU time.
    success = re.compile(r"\S+\.ipynb: success \([\d.]+ s, [\d.]+ s CPU\)")
    lines = [line for line in printed.splitlines() if success.fullmatch(line)]
    assert sorted(line.split(":")[0] for line in lines) == report.NOTEBOOKS


def test_report_manifest_records_provenance_and_status(smoke_report):
    _, output = smoke_report
    manifest = json.loads((output / report.MANIFEST_FILE).read_text())
    assert manifest["kind"] == report.REPORT_KIND and manifest["status"] == "success" and manifest["error"] is None
    assert {"evictlab_version", "git", "python", "packages"} <= set(manifest["provenance"])
    assert manifest["dataset"]["embedded_demo"] is True
    assert manifest["dataset"]["sha256"] == hashlib.sha256(DEMO_DATASET.read_bytes()).hexdigest()
    assert set(manifest["summary"]["protocol"]["artifacts"]) == {
        "config_sha256", "official_manifest_sha256", "synthetic_manifest_sha256", "answer_prompt_sha256"}
    assert manifest["parameters"]["smoke"] is True and manifest["parameters"]["preset"] == "pr4810-final"
    assert manifest["parameters"]["spec"] == "pr4810-final"  # what every notebook received
    assert [entry["name"] for entry in manifest["summary"]["notebooks"]] == report.NOTEBOOKS
    for entry in manifest["summary"]["notebooks"]:
        assert entry["status"] == "success" and entry["error"] is None
        assert entry["duration_seconds"] > 0 and entry["cpu_seconds"] > 0
        assert (output / entry["output"]).is_file()
    assert manifest["started_at"] <= manifest["finished_at"]
    assert manifest["summary"]["files"] == ["report.md", "report.html"]


# --------------------------------------------------------------------------- failures and reruns


def write_notebook(path: Path, *sources: str) -> None:
    notebook = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                     "language": "python"}})
    cells = [new_code_cell(source) for source in sources]
    cells[0].metadata["tags"] = ["parameters"]
    for index, cell in enumerate(cells):
        cell["id"] = f"cell-{index}"
    notebook.cells = cells
    nbformat.write(notebook, path)


@pytest.fixture
def tiny_suite(tmp_path):
    folder = tmp_path / "suite"
    folder.mkdir()
    parameters = "dataset = None  # d\npreset = 'pr4810-final'  # p\nsmoke = False  # s\nfigures_dir = None  # f"
    write_notebook(folder / "01_ok.ipynb", parameters, "answer = 42")
    write_notebook(folder / "02_fail.ipynb", parameters, "before = 1",
                   "raise RuntimeError('deliberate failure')", "after = 2")
    return folder, ["01_ok.ipynb", "02_fail.ipynb"]


def test_a_failing_notebook_is_kept_named_and_fails_the_command(tiny_suite, tmp_path, monkeypatch, capsys):
    folder, names = tiny_suite
    monkeypatch.setattr(report_command, "run_report",
                        functools.partial(report.run_report, notebook_dir=folder, available=names))
    output = tmp_path / "out"
    code = cli.main(["report", "--smoke", "--output-dir", str(output), "--no-progress"])
    assert code == 1
    captured = capsys.readouterr()
    assert "02_fail.ipynb failed at In [4]" in captured.err and "RuntimeError: deliberate failure" in captured.err

    manifest = json.loads((output / report.MANIFEST_FILE).read_text())
    assert manifest["status"] == "error"
    assert "02_fail.ipynb failed" in manifest["error"]
    ok, failed = manifest["summary"]["notebooks"]
    assert ok["status"] == "success"  # the other notebooks still run
    assert failed["status"] == "error"
    # papermill adds its injected-parameters cell after ours: the raise is the fourth cell, In [4].
    assert failed["error"]["cell_index"] == 3 and failed["error"]["execution_count"] == 4
    assert (failed["error"]["ename"], failed["error"]["evalue"]) == ("RuntimeError", "deliberate failure")
    assert "raise RuntimeError" in failed["error"]["source"]

    partial = nbformat.read(output / "notebooks" / "02_fail.ipynb", as_version=4)
    outputs = [[o.output_type for o in cell.outputs] for cell in partial.cells if cell.cell_type == "code"]
    assert "error" in outputs[3]
    assert partial.cells[-1].execution_count is None  # the cell after the failure never ran
    markdown = (output / "report.md").read_text(encoding="utf-8")
    assert "Status: error." in markdown
    assert "02_fail.ipynb failed at In [4] (cell index 3): RuntimeError: deliberate failure" in markdown

    # The report is a regenerated artifact: a rerun into the same folder replaces it.
    result = report.run_report(output, notebook_dir=folder, available=names, notebooks=["01"], progress=False)
    assert result.ok
    assert not (output / "notebooks" / "02_fail.ipynb").exists()
    assert json.loads((output / report.MANIFEST_FILE).read_text())["status"] == "success"


def test_a_foreign_folder_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "results.csv").write_text("precious\n")
    with pytest.raises(OutputExistsError, match=r"holds no report\.run\.json"):
        report.run_report(tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]


def test_a_rerun_removes_only_what_the_previous_report_wrote(tmp_path, tiny_suite):
    """A forged record naming user files deletes nothing; figures the report wrote are replaced."""
    folder, names = tiny_suite
    output = tmp_path / "out"
    assert report.run_report(output, notebook_dir=folder, available=names, notebooks=["01"], progress=False).ok
    (output / "figures" / "mine.png").write_bytes(b"a user's figure")
    (output / "notes.txt").write_text("precious\n")
    record = json.loads((output / report.MANIFEST_FILE).read_text())
    record["outputs"]["figures/mine.png"] = {"bytes": 1, "sha256": "0" * 64}  # forged: wrong hash
    record["outputs"]["notes.txt"] = results.file_digest(output / "notes.txt")  # forged: not a report file
    record["outputs"]["../outside.txt"] = {"bytes": 0, "sha256": "0" * 64}
    (output / report.MANIFEST_FILE).write_text(json.dumps(record))
    (tmp_path / "outside.txt").write_text("outside\n")
    assert report.run_report(output, notebook_dir=folder, available=names, notebooks=["01"], progress=False).ok
    assert (output / "figures" / "mine.png").read_bytes() == b"a user's figure"
    assert (output / "notes.txt").read_text() == "precious\n" and (tmp_path / "outside.txt").exists()


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "/"])
def test_a_report_name_cannot_leave_the_results_folder(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ContractError, match="plain folder name"):
        report.run_report(name=name, progress=False)
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------- options and rendering


def test_default_names_separate_demo_smoke_and_presets():
    assert report.default_name("pr4810-final", None, False) == "report-pr4810-final-demo"
    assert report.default_name("pr4810-run1", "/data/longmemeval_oracle.json", True) == "report-pr4810-run1-smoke"


def test_notebooks_are_selected_by_number_stem_or_file_name():
    available = ["01_pools.ipynb", "02_retention.ipynb", "06_qa_report.ipynb"]
    assert report.select_notebooks(None, available) == available
    assert report.select_notebooks(["06", "01_pools"], available) == ["01_pools.ipynb", "06_qa_report.ipynb"]
    assert report.select_notebooks(["02_retention.ipynb"], available) == ["02_retention.ipynb"]
    with pytest.raises(ContractError, match="no notebook '09'"):
        report.select_notebooks(["09"], available)


@pytest.mark.parametrize("text, value", [("None", None), ("true", True), ("False", False), ("7", 7),
                                         ("0.25", 0.25), ("results/run", "results/run")])
def test_parameter_values(text, value):
    assert report.parse_parameter_value(text) == value


def test_invalid_inputs_fail_before_anything_is_written(tmp_path):
    with pytest.raises(ContractError, match=r"figures_dir.*set by the report"):
        report.run_report(tmp_path / "a", parameters={"figures_dir": "x"}, progress=False)
    with pytest.raises(ContractError, match="unknown preset"):
        report.run_report(tmp_path / "b", preset="pr9999", progress=False)
    with pytest.raises(ContractError, match=r"not found.*missing\.ipynb"):
        report.run_report(tmp_path / "c", notebook_dir=tmp_path, available=["missing.ipynb"], progress=False)
    assert not any(tmp_path.iterdir())


def test_an_unknown_kernel_is_named():
    with pytest.raises(ContractError, match="no Jupyter kernel 'no-such-kernel'"):
        report.check_kernel("no-such-kernel")
    report.check_kernel(report.KERNEL_NAME)  # the venv's python3 kernel runs this interpreter


def test_markdown_and_html_escape_cell_text():
    frame = pd.DataFrame({"value": ["a|b", "<script>"]}, index=pd.Index(["x", "y"], name="key"))
    context = {
        "title": "t", "status": "success", "error": None, "headline": None, "contents": [], "notebooks": [],
        "findings": [Finding("data", "1 < 2 [a]", "a & b")], "figure_number": {}, "run": [],
        "tables": [table_view(Table("T", "note", frame), "table-1")], "manifest_file": "report.json",
    }
    markdown = render(context, "md")
    assert "| key | value |\n|---|---|\n| x | a\\|b |\n| y | <script> |" in markdown
    assert "1 < 2 \\[a\\]" in markdown
    page = render(context, "html")
    assert "<script>" not in page and "&lt;script&gt;" in page and "1 &lt; 2 [a]" in page and "a &amp; b" in page


def test_multiindex_columns_give_one_header_row():
    columns = pd.MultiIndex.from_tuples([(5, "a"), (5, "b"), (7, "a")], names=["capacity", "scenario"])
    frame = pd.DataFrame([["1/2", "2/2", "0/2"]], index=pd.Index(["lru"], name="policy"), columns=columns)
    view = table_view(Table("T", "", frame), "t")
    assert view.header == ["policy", "5 / a", "5 / b", "7 / a"] and view.rows == [["lru", "1/2", "2/2", "0/2"]]
    page = render({"title": "t", "status": "success", "error": None, "headline": None, "contents": [],
                   "notebooks": [], "findings": [], "figure_number": {}, "run": [], "tables": [view],
                   "manifest_file": "report.json"}, "html")
    section = page[page.index('<section id="t">'):]
    head = section[section.index("<thead>"):section.index("</thead>")]
    assert head.count("<tr>") == 1 and "<th></th>" not in head
    assert "<th>policy</th><th>5 / a</th>" in head


def test_key_tables_follow_the_qa_parameters_of_notebook_06():
    inputs = report.describe_inputs("pr4810-final")
    v1 = REFERENCE_DIR / "v1"
    analysis = analyse(inputs.pool_set, preset="pr4810-final", dataset=None, smoke=True,
                       parameters={"qa_run_dir": str(v1), "interval_method": "clopper-pearson", "alpha": 0.1})
    retention, stats, accuracy, *zoo_tables, traces = analysis.tables
    assert list(traces.frame.columns) == ["capacity 10", "capacity 50"]
    assert traces.frame.index[:2].tolist() == ["optimum", "keep-all"]
    assert [table.title for table in zoo_tables] == [f"Policy zoo at capacity {k}" for k in (5, 7, 9)]
    assert zoo_tables[1].frame.loc["hybrid-v1", "all cases"] == "45/45"
    assert retention.frame.loc["total", "confidence @ 7"] == "27/45 [45.5, 73.0]"
    assert "v1" in stats.note and str(v1) not in stats.note  # named, without a local path
    assert tuple(stats.frame.loc["official", ["only confidence", "only hybrid-v1"]]) == (2, 14)
    assert accuracy.title == "Live QA: accuracy with 90% exact Clopper-Pearson intervals"
    qa = next(finding for finding in analysis.findings if finding.topic == "qa")
    assert "hybrid-v1 40/45, confidence 24/45" in qa.headline and "Source: DeerFlow's published run v1" in qa.headline


def test_findings_are_computed_from_the_run():
    inputs = report.describe_inputs("pr4810-final")
    findings = {finding.topic: finding for finding in analyse(inputs.pool_set, preset="pr4810-final",
                                                               dataset=None).findings}
    assert list(findings) == ["retention", "scenarios", "zoo", "variants", "qa", "traces", "data"]
    # Spec 2.10 totals, with the paired difference and its bootstrap interval.
    assert "35/45, 45/45, 45/45 cases and confidence in 20/45, 27/45, 35/45" in findings["retention"].headline
    assert "+33.3 [+20.0, +46.7], +40.0 [+26.7, +53.3], +22.2 [+11.1, +35.6] percentage points" in (
        findings["retention"].headline)
    assert "confirmation_help at capacity 5: confidence 0/10, hybrid-v1 10/10" in findings["scenarios"].headline
    assert "never keeps fewer" in findings["scenarios"].headline
    assert "pr4810-run2 to pr4810-final changes 0/45 pools, 2/90 kept sets at capacity 7" in (
        findings["variants"].headline)
    assert "(+35.6 points, 95 % interval +20.0 to +51.1, exact McNemar p = 0.00014)" in findings["qa"].headline
    assert "v3" in findings["qa"].headline and "not from this report's dataset" in findings["qa"].detail
    assert "embedded demo dataset" in findings["data"].headline
    # Trace mode on the default generated workload: where hybrid-v1 and confidence differ most.
    assert "answerable rate: the largest difference is at capacity" in findings["traces"].headline
    assert "where hybrid-v1 is" in findings["traces"].headline and "optimum" in findings["traces"].detail


def test_a_missing_dataset_leaves_no_folder_and_an_old_report_untouched(tmp_path, capsys):
    assert cli.main(["report", "--dataset", str(tmp_path / "nope.json"), "--output-dir", str(tmp_path / "out"),
                     "--no-progress"]) != 0
    assert "dataset file not found" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    old = tmp_path / "old"
    old.mkdir()
    (old / "report.json").write_text(json.dumps({"kind": report.REPORT_KIND}))
    (old / "report.md").write_text("previous\n")
    with pytest.raises(DatasetError):
        report.run_report(old, dataset=tmp_path / "nope.json", progress=False)
    assert (old / "report.md").read_text() == "previous\n"


def test_each_notebook_is_reported_as_soon_as_it_finishes(tmp_path, tiny_suite):
    folder, names = tiny_suite
    seen = []

    def finished(run: report.NotebookRun) -> None:  # what exists at that moment
        seen.append((run.name, run.status, sorted(p.name for p in (tmp_path / "out" / "notebooks").glob("*.ipynb"))))

    report.run_report(tmp_path / "out", notebook_dir=folder, available=names, progress=False, on_finish=finished)
    # The two run at once: each is reported once, with its executed copy already written.
    expected = [("01_ok.ipynb", "success"), ("02_fail.ipynb", "error")]
    assert sorted((name, status) for name, status, _ in seen) == expected
    assert all(name in copies for name, _, copies in seen)

    seen.clear()  # one at a time: in suite order, each reported before the next starts
    report.run_report(tmp_path / "one", notebook_dir=folder, available=names, progress=False, on_finish=finished,
                      jobs=1)
    assert [(name, status) for name, status, _ in seen] == expected


def test_notebooks_running_at_once_each_list_only_their_own_figures(tmp_path):
    """Two notebooks save figures into the same folder at the same time (one rewrites a file of
    the other's name pattern): each run lists what its own kernel saved, in saving order."""
    folder = tmp_path / "suite"
    folder.mkdir()
    parameters = "dataset = None  # d\npreset = 'pr4810-final'  # p\nsmoke = False  # s\nfigures_dir = None  # f"
    draw = ("import time\nfrom matplotlib.figure import Figure\nfrom evictlab.workbench import plots\n"
            "def draw(name):\n    fig = Figure()\n    fig.subplots().plot([1, 2])\n"
            "    plots.save(fig, f'{figures_dir}/{name}')\n    time.sleep(0.3)")
    write_notebook(folder / "01_a.ipynb", parameters, draw, "for name in ('zeta', 'alpha', 'mid'):\n    draw(name)")
    write_notebook(folder / "02_b.ipynb", parameters, draw, "for name in ('beta', 'omega'):\n    draw(name)")
    result = report.run_report(tmp_path / "out", notebook_dir=folder, available=["01_a.ipynb", "02_b.ipynb"],
                               progress=False)
    assert result.ok, result.error
    first, second = ([path.name for path in run.figures] for run in result.notebooks)
    assert first == ["zeta.png", "zeta.svg", "alpha.png", "alpha.svg", "mid.png", "mid.svg"]
    assert second == ["beta.png", "beta.svg", "omega.png", "omega.svg"]
    markdown = (result.output_dir / "report.md").read_text(encoding="utf-8")
    assert markdown.index("figures/zeta.png") < markdown.index("figures/alpha.png") < markdown.index("figures/beta.png")


# --------------------------------------------------------------------------- unpinned datasets


def unpinned_copy(folder: Path) -> Path:
    """The demo dataset plus one trailing newline: valid rows, a SHA-256 no config pins."""
    copy = folder / "unpinned.json"
    copy.write_bytes(DEMO_DATASET.read_bytes() + b"\n")
    return copy


def test_an_unpinned_dataset_is_refused_without_allow_unpinned(tmp_path, capsys):
    output = tmp_path / "out"
    argv = ["report", "--dataset", str(unpinned_copy(tmp_path)), "--notebooks", "01",
            "--output-dir", str(output), "--no-progress"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "is not the pinned" in err and "--allow-unpinned" in err
    assert not output.exists()  # refused before anything is written


def test_allow_unpinned_reaches_the_pin_check_of_the_key_tables(tmp_path):
    """With the flag the pin no longer stops the report; the demo's rows then disagree with the
    LongMemEval manifest, which is the next check (the report has no --official-manifest)."""
    copy = unpinned_copy(tmp_path)
    with pytest.raises(DatasetError, match="--allow-unpinned"):
        report.describe_inputs(f"pr4810-final:dataset={copy}")
    with pytest.warns(UserWarning, match="not the pinned"), pytest.raises(DatasetError, match="manifest disagrees"):
        report.describe_inputs(f"pr4810-final:dataset={copy},allow_unpinned=true")


def test_allow_unpinned_is_a_reserved_parameter(tmp_path, capsys):
    output = tmp_path / "out"
    assert cli.main(["report", "-p", "allow_unpinned", "True", "--output-dir", str(output), "--no-progress"]) == 2
    assert "allow_unpinned are set by the report itself; use --dataset, --allow-unpinned" in capsys.readouterr().err
    assert not output.exists()


def test_allow_unpinned_is_passed_to_every_notebook(tmp_path):
    result = report.run_report(tmp_path / "out", smoke=True, notebooks=["01"], allow_unpinned=True, progress=False)
    assert result.ok, result.error
    manifest = json.loads(result.manifest_path.read_text())
    assert manifest["parameters"]["allow_unpinned"] is True
    assert "pinned" not in manifest["dataset"]  # the embedded demo is pinned; the flag only permits
    executed = nbformat.read(result.output_dir / "notebooks" / "01_pools.ipynb", as_version=4)
    assert executed.metadata["papermill"]["parameters"]["spec"] == "pr4810-final:allow_unpinned=true"


def test_a_warm_kernel_has_imported_its_notebook_s_modules_before_it_runs():
    """The imports reach the kernel (a request sent while it booted was dropped) and it still
    answers the next client (one sent too early could leave it deaf), every time."""
    plan = KernelPlan({"EVICTLAB_PROBE": "yes"}, ("evictlab.analysis.robustness", "no_such_module"))
    with WarmKernels("python3", [plan] * 3) as kernels:
        for index in range(3):
            client = kernels.take(index).client()
            client.start_channels()
            try:
                client.wait_for_ready(timeout=60)
                outputs = []
                code = ("import os, sys;"
                        " print('evictlab.analysis.robustness' in sys.modules, os.environ['EVICTLAB_PROBE'])")
                reply = client.execute_interactive(code, timeout=60, output_hook=outputs.append)
            finally:
                client.stop_channels()
            kernels.release(index)
            assert reply["content"]["status"] == "ok"
            assert [m["content"]["text"] for m in outputs if m["msg_type"] == "stream"] == ["True yes\n"]


def test_warm_kernels_serve_each_notebook_once_and_none_outlives_the_report(tmp_path, tiny_suite):
    import psutil

    folder, names = tiny_suite
    started = []
    original = WarmKernels._start

    def recording(self, plan):
        manager = original(self, plan)
        started.append(manager)
        return manager

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WarmKernels, "_start", recording)
        result = report.run_report(tmp_path / "out", notebook_dir=folder, available=names, progress=False)
    assert [run.status for run in result.notebooks] == ["success", "error"]
    assert len(started) == len(names)  # one fresh kernel per notebook, no spare one
    assert not any(manager.is_alive() for manager in started)
    # papermill's client of each kernel is closed too, or a session runs out of file descriptors.
    assert all(manager.clients for manager in started)
    assert not any(client.channels_running for manager in started for client in manager.clients)
    kernels = [child for child in psutil.Process().children(recursive=True)
               if "ipykernel" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE]
    assert not kernels


def test_the_notebooks_spec_names_the_reports_dataset_and_preset(tmp_path):
    # The SPEC string run_report passes to every notebook opens the pools its own tables use.
    text = loaders.spec_text("pr4810-run2", DEMO_DATASET, allow_unpinned=True)
    assert text == f"pr4810-run2:dataset={DEMO_DATASET.resolve()},allow_unpinned=true"
    spec = loaders.run_spec(text)
    assert (spec.preset, spec.dataset, spec.allow_unpinned) == ("pr4810-run2", DEMO_DATASET.resolve(), True)
    assert loaders.spec_text() == "pr4810-final" and loaders.spec_label(spec) == "pr4810-run2"
    comma = tmp_path / "a,b.json"
    comma.write_bytes(DEMO_DATASET.read_bytes())
    with pytest.raises(ContractError, match="may hold no comma"):
        report.run_report(tmp_path / "out", dataset=comma, notebooks=["01"], progress=False)
    assert not (tmp_path / "out").exists()
