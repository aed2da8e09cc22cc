"""``evictlab report``: the notebook suite end to end, failures that keep their evidence, reruns."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from evictlab import cli, results
from evictlab.analysis.qa.report import REFERENCE_DIR
from evictlab.analysis.traces.inference import FINDING_CAPACITY, finding_sentences
from evictlab.cli import report as report_command
from evictlab.core.demo import DEMO_DIR
from evictlab.core.runspec import parse_spec
from evictlab.errors import ContractError, DatasetError, OutputExistsError
from evictlab.workbench import loaders, report
from evictlab.workbench.report_document import CAPTIONS, Finding, render, table_view, zoo_finding
from evictlab.workbench.tables import Table, read_table, read_tables

DEMO_DATASET = DEMO_DIR / "longmemeval-demo.json"

pytestmark = pytest.mark.slow  # the report end to end: most tests here run the notebooks


def links(path: Path) -> list[str]:
    """Every link target of a report.md or report.html."""
    text = path.read_text(encoding="utf-8")
    pattern = r"\]\(([^)]+)\)" if path.suffix == ".md" else r'(?:src|href)="([^"]+)"'
    return re.findall(pattern, text)


# --------------------------------------------------------------------------- end to end


def test_the_command_prints_the_retention_table(smoke_report):
    printed = smoke_report.printed
    assert "Support retention" in printed
    assert re.search(r"total\s+20/45 \[30\.9, 58\.8\]\s+35/45 \[63\.7, 87\.5\]"
                     r"\s+27/45 \[45\.5, 73\.0\]\s+45/45", printed)


def test_report_succeeds_and_executes_every_notebook(smoke_report):
    code, output = smoke_report.code, smoke_report.output
    assert code == 0
    for name in report.NOTEBOOKS:
        executed = nbformat.read(output / "notebooks" / name, as_version=4)
        assert executed.metadata["papermill"]["parameters"]["figures_dir"] == str(output / "figures")
        assert all(cell.execution_count is not None for cell in executed.cells if cell.cell_type == "code")


def test_report_writes_png_and_svg_for_every_figure(smoke_report):
    output = smoke_report.output
    pngs = {path.stem for path in (output / "figures").glob("*.png")}
    svgs = {path.stem for path in (output / "figures").glob("*.svg")}
    assert pngs and pngs == svgs
    manifest = json.loads((output / report.MANIFEST_FILE).read_text())
    figures = sorted(f"figures/{stem}{suffix}" for stem in pngs for suffix in (".png", ".svg"))
    assert sorted(manifest["summary"]["figures"]) == figures


@pytest.mark.parametrize("document", ["report.md", "report.html"])
def test_every_link_of_the_report_resolves(smoke_report, document):
    output = smoke_report.output
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
    output = smoke_report.output
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
    shown = [table for table in read_tables(output / "tables").values() if table.shown]
    assert len(shown) == 9  # 02's retention, 05's cascade, 06's three... as the notebooks saved them
    assert html.count("<table") == 1 + len(shown) and "<td>20/45 [30.9, 58.8]</td>" in html
    # Every registered policy at every capacity; the oracle bound keeps every support.
    for capacity in (5, 7, 9):
        assert f"## Policy zoo at capacity {capacity}" in markdown
    assert markdown.count("| oracle | 10/10 | 10/10 | 10/10 | 10/10 | 5/5 | 45/45 |") == 3
    # Trace mode: both bounds in the capacity-curve table; the paired table over the seeds.
    assert "## Memory over time: capacity curves on the default generated workload" in markdown
    assert "| optimum | " in markdown and "| keep-all | " in markdown and "| hybrid-v1 | " in markdown
    assert "## Memory over time: hybrid-v1 against confidence and the best other policy" in markdown
    assert "largest" not in markdown.split("## Memory over time")[0].split("Memory over time.**")[-1]


def test_the_report_opens_with_findings_and_the_headline_figure(smoke_report):
    output = smoke_report.output
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
    output = smoke_report.output
    markdown = (output / "report.md").read_text(encoding="utf-8")
    captions = re.findall(r"^\*Figure \d+\. (.+?)\.\* (.*) \(\[PNG\]", markdown, flags=re.M)
    assert len(captions) == len(list((output / "figures").glob("*.png")))
    assert all(len(explanation) > 40 for _, explanation in captions)  # more than the title again


def test_notebooks_are_exported_to_html_and_no_local_path_leaks(smoke_report):
    output = smoke_report.output
    for name in report.NOTEBOOKS:
        exported = (output / "notebooks" / name).with_suffix(".html")
        assert exported.is_file() and "<html" in exported.read_text(encoding="utf-8")[:2000]
    for document in ("report.md", "report.html"):
        text = (output / document).read_text(encoding="utf-8")
        assert f"notebooks/{Path(report.NOTEBOOKS[0]).stem}.html" in text
        for local in (str(output), str(Path(report.__file__).resolve().parents[1]), str(Path.home())):
            assert local not in text, f"{document} mentions {local}"


def test_no_progress_still_prints_each_notebook(smoke_report):
    printed = smoke_report.printed
    # Two notebooks run at once, so they finish in any order; each line gives its wall time.
    success = re.compile(r"\S+\.ipynb: success \([\d.]+ s\)")
    lines = [line for line in printed.splitlines() if success.fullmatch(line)]
    assert sorted(line.split(":")[0] for line in lines) == report.NOTEBOOKS


def test_report_manifest_records_provenance_and_status(smoke_report):
    output = smoke_report.output
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
        assert entry["duration_seconds"] > 0
        assert (output / entry["output"]).is_file()
    assert manifest["started_at"] <= manifest["finished_at"]
    assert manifest["summary"]["files"] == ["report.md", "report.html", "report.pdf"]


def test_the_report_is_also_a_pdf_with_a_page_per_figure(smoke_report):
    pdf = (smoke_report.output / "report.pdf").read_bytes()
    assert pdf.startswith(b"%PDF")
    pages = pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages")
    figures = len(list((smoke_report.output / "figures").glob("*.png")))
    assert figures < pages <= figures + 3  # the findings' pages, then one page per figure


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
    parameters = "spec = 'pr4810-final'  # s\nsmoke = False  # s\nfigures_dir = None  # f\ntables_dir = None  # t"
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
    result = report.run_report(output, notebook_dir=folder, available=names, notebooks=["01"], progress=False,
                               replace=True)  # another notebook set: replaced only when asked
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


def test_default_names_separate_demo_smoke_presets_specs_and_subsets():
    assert report.default_name(parse_spec("pr4810-final")) == "report-pr4810-final-demo"
    on_file = parse_spec("pr4810-run1:dataset=/data/longmemeval_oracle.json")
    assert report.default_name(on_file, True) == "report-pr4810-run1-smoke"
    custom = parse_spec("pr4810-final:confidence_weight=0.55,confirmation_weight=0.35")
    other = parse_spec("pr4810-final:confidence_weight=0.5,confirmation_weight=0.4")
    named = report.default_name(custom)
    assert named.startswith("report-pr4810-final-") and named.endswith("-demo")
    assert len({report.default_name(spec) for spec in (custom, other, parse_spec("pr4810-final"))}) == 3
    subset = report.default_name(parse_spec("pr4810-final"), False, ["05_variants.ipynb", "08_policy_zoo.ipynb"])
    assert subset == "report-pr4810-final-demo-nb-05-08"


def test_notebooks_are_selected_by_number_stem_or_file_name():
    available = ["01_pools.ipynb", "02_retention.ipynb", "06_qa_report.ipynb"]
    assert report.select_notebooks(None, available) == available
    assert report.select_notebooks(["06", "01_pools"], available) == ["01_pools.ipynb", "06_qa_report.ipynb"]
    assert report.select_notebooks(["02_retention.ipynb"], available) == ["02_retention.ipynb"]
    with pytest.raises(ContractError, match="no notebook '09'"):
        report.select_notebooks(["09"], available)


@pytest.mark.parametrize("text, value", [("None", None), ("true", True), ("False", False), ("7", 7),
                                         ("0.25", 0.25), ("results/run", "results/run"), ("[3,5]", [3, 5]),
                                         ("[3, 5]", [3, 5]), ("{horizon_days: 90}", {"horizon_days": 90}),
                                         ("a: b: c", "a: b: c")])
def test_parameter_values_are_read_as_yaml(text, value):
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
        "tables": [table_view(Table("t", "T", "note", frame), "table-1")], "manifest_file": "report.json",
    }
    markdown = render(context, "md")
    assert "| key | value |\n|---|---|\n| x | a\\|b |\n| y | <script> |" in markdown
    assert "1 < 2 \\[a\\]" in markdown
    page = render(context, "html")
    assert "<script>" not in page and "&lt;script&gt;" in page and "1 &lt; 2 [a]" in page and "a &amp; b" in page


def test_multiindex_columns_give_one_header_row():
    columns = pd.MultiIndex.from_tuples([(5, "a"), (5, "b"), (7, "a")], names=["capacity", "scenario"])
    frame = pd.DataFrame([["1/2", "2/2", "0/2"]], index=pd.Index(["lru"], name="policy"), columns=columns)
    view = table_view(Table("t", "T", "", frame), "t")
    assert view.header == ["policy", "5 / a", "5 / b", "7 / a"] and view.rows == [["lru", "1/2", "2/2", "0/2"]]
    page = render({"title": "t", "status": "success", "error": None, "headline": None, "contents": [],
                   "notebooks": [], "findings": [], "figure_number": {}, "run": [], "tables": [view],
                   "manifest_file": "report.json"}, "html")
    section = page[page.index('<section id="t">'):]
    head = section[section.index("<thead>"):section.index("</thead>")]
    assert head.count("<tr>") == 1 and "<th></th>" not in head
    assert "<th>policy</th><th>5 / a</th>" in head


def test_key_tables_follow_the_qa_parameters_given_with_p(tmp_path):
    """-p values reach notebook 06 (YAML read), and its saved tables, not a recomputation, make
    the report's QA tables and finding."""
    v1 = REFERENCE_DIR / "v1"
    output = tmp_path / "qa"
    assert cli.main(["report", "--smoke", "--notebooks", "06", "--output-dir", str(output), "--no-progress",
                     "-p", "qa_run_dir", str(v1), "-p", "interval_method", "clopper-pearson",
                     "-p", "alpha", "0.1"]) == 0
    tables = read_tables(output / "tables")
    assert sorted(tables) == ["06_qa_accuracy", "06_qa_paired", "06_qa_stats"]
    stats = tables["06_qa_paired"]
    assert "v1" in stats.note and str(v1) not in stats.note  # named, without a local path
    assert tuple(stats.frame.loc["official", ["only confidence", "only hybrid-v1"]]) == (2, 14)
    assert tables["06_qa_accuracy"].title == "Live QA: accuracy with 90% exact Clopper-Pearson intervals"
    markdown = (output / "report.md").read_text(encoding="utf-8")
    assert "hybrid-v1 40/45, confidence 24/45" in markdown and "Source: DeerFlow's published run v1" in markdown
    assert "* **Retention.**" not in markdown  # notebook 02 did not run: no finding of its


def test_findings_are_read_from_the_tables_the_notebooks_saved(smoke_report):
    output = smoke_report.output
    markdown = " ".join((output / "report.md").read_text(encoding="utf-8").split()).replace("\\[", "[")
    markdown = markdown.replace("\\]", "]")
    # Spec 2.10 totals, with the paired difference and its bootstrap interval (notebook 02's table).
    assert "35/45, 45/45, 45/45 cases and confidence in 20/45, 27/45, 35/45" in markdown
    assert "+33.3 [+20.0, +46.7], +40.0 [+26.7, +53.3], +22.2 [+11.1, +35.6] percentage points" in markdown
    assert "confirmation_help at capacity 5: confidence 0/10, hybrid-v1 10/10" in markdown
    assert "pr4810-run2 to pr4810-final changes 0/45 pools, 2/90 kept sets at capacity 7" in markdown
    assert "(+35.6 points, 95 % interval +20.0 to +51.1, exact McNemar p = 0.00014)" in markdown
    assert "random is its exact expectation" in markdown and "mean over 100 seeds" not in markdown
    paired = read_table(output / "tables" / "10_trace_paired.csv")
    assert (paired.frame["capacity"] == FINDING_CAPACITY).any()  # fixed in advance, also in smoke mode


def test_the_zoo_finding_says_how_many_cases_a_tie_decided():
    """A policy's count with a decimal is an expectation over tied orders: the finding says how many
    of its cases a tie at the cut decided, read from notebook 08's table at that capacity."""
    totals = Table("08_zoo_totals", "totals", "Data: made here.", pd.DataFrame(
        [{"policy": name, "role": role, "capacity": 7, "retained": kept, "cases": 45}
         for name, role, kept in (("confidence", "deermem", 27.0), ("hybrid-v1", "deermem", 45.0),
                                  ("lfu-aging", "zoo", 35.3), ("lru", "zoo", 30.0))]))
    by_scenario = Table("08_zoo_k7", "at 7", "", pd.DataFrame(
        {"all cases": ["27/45", "45/45", "35.3/45", "30/45"], "tied": [0, 0, 25, 0]},
        index=pd.Index(["confidence", "hybrid-v1", "lfu-aging", "lru"], name="policy")))
    finding = zoo_finding(totals, 7, by_scenario)
    assert finding is not None
    assert "lfu-aging 35.3/45 (a tie at the cut decided 25 of its cases) keeps the most" in finding.headline
    assert "lru 30/45 the fewest" in finding.headline and "confidence 27/45," in finding.headline
    assert "exact expectation over the tied orders" in finding.detail
    assert "a tie at the cut" not in zoo_finding(totals, 7).headline  # without the table: no count claimed


def trace_sentences(markdown: str) -> list[str]:
    """The report's trace finding, one clause per metric: 'answerable rate: hybrid-v1 is lower than ...'."""
    finding = markdown[markdown.index("**Memory over time.**"):].split(" * **")[0]
    return re.findall(r"(\w[\w ]*?): hybrid-v1 is (higher|lower|level) (?:than|with) (.+?)(?: by [\d.]+)? \(", finding)


def test_the_trace_finding_agrees_in_sign_with_the_table_it_cites(smoke_report):
    output = smoke_report.output
    markdown = " ".join((output / "report.md").read_text(encoding="utf-8").split())
    paired = read_table(output / "tables" / "10_trace_paired.csv").frame
    sentences = trace_sentences(markdown)
    assert len(sentences) == 2 * paired["metric"].nunique()  # against confidence and the best other policy
    at = paired[paired["capacity"] == FINDING_CAPACITY]
    for metric, way, against in sentences:
        comparison = "hybrid-v1 - confidence" if against == "confidence" else "hybrid-v1 - best other policy"
        row = at[(at["metric"] == metric.replace(" ", "_")) & (at["comparison"] == comparison)].iloc[0]
        expected = "level" if abs(row["mean"]) < 0.0005 else "higher" if row["mean"] > 0 else "lower"
        assert way == expected, (metric, against, row["mean"])
    assert f"over {int(at['seeds'].max())} seeds" in markdown and "tied in" in markdown


def test_a_sign_check_that_can_fail():
    """The check above fails when a sentence states the opposite sign of its table."""
    table = pd.DataFrame([{"metric": "answerable_rate", "capacity": FINDING_CAPACITY,
                           "comparison": "hybrid-v1 - confidence", "first": "hybrid-v1", "second": "confidence",
                           "seeds": 20, "first_mean": 0.5,
                           "second_mean": 0.6, "mean": -0.1, "low": -0.2, "high": -0.05, "higher": 0, "lower": 20,
                           "tied": 0}])
    headline, _ = finding_sentences(table)
    sentences = trace_sentences(f"* **Memory over time.** {headline}")
    assert sentences == [("answerable rate", "lower", "confidence")]
    flipped = headline.replace("is lower than", "is higher than")
    assert trace_sentences(f"* **Memory over time.** {flipped}")[0][1] != "lower"


def test_every_caption_states_no_setting_its_figure_may_not_show():
    """Captions explain how to read a figure; the settings and numbers are in the figure's own title
    (drawn from its data), so a caption never names weights, seed counts or pool sizes that a
    spec or a parameter can change."""
    for pattern, caption in CAPTIONS.items():
        assert not re.search(r"\b0\.\d|\b\d+ (?:seeds|facts|cases)\b|\b45\b", caption), (pattern, caption)


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
    """Two notebooks save figures into the same folder at the same time: each run lists the
    figures named with its number, in saving order."""
    folder = tmp_path / "suite"
    folder.mkdir()
    parameters = "spec = 'pr4810-final'  # s\nsmoke = False  # s\nfigures_dir = None  # f\ntables_dir = None  # t"
    draw = ("import time\nfrom matplotlib.figure import Figure\nfrom evictlab.workbench import plots\n"
            "def draw(name):\n    fig = Figure()\n    fig.subplots().plot([1, 2])\n"
            "    plots.save(fig, f'{figures_dir}/{name}')\n    time.sleep(0.3)")
    write_notebook(folder / "01_a.ipynb", parameters, draw,
                   "for name in ('01_zeta', '01_alpha', '01_mid'):\n    draw(name)")
    write_notebook(folder / "02_b.ipynb", parameters, draw, "for name in ('02_beta', '02_omega'):\n    draw(name)")
    result = report.run_report(tmp_path / "out", notebook_dir=folder, available=["01_a.ipynb", "02_b.ipynb"],
                               progress=False)
    assert result.ok, result.error
    first, second = ([path.name for path in run.figures] for run in result.notebooks)
    assert first == ["01_zeta.png", "01_zeta.svg", "01_alpha.png", "01_alpha.svg", "01_mid.png", "01_mid.svg"]
    assert second == ["02_beta.png", "02_beta.svg", "02_omega.png", "02_omega.svg"]
    markdown = (result.output_dir / "report.md").read_text(encoding="utf-8")
    assert (markdown.index("figures/01_zeta.png") < markdown.index("figures/01_alpha.png")
            < markdown.index("figures/02_beta.png"))


def test_the_longest_notebooks_start_first_by_the_last_report_else_their_own_estimate(tmp_path):
    """A fresh report starts the notebook that says it takes longest first; the previous report's
    durations win over the estimates; a notebook with neither starts ahead (it may be long)."""
    def notebook(name: str, seconds: float | None) -> report.NotebookRun:
        book = new_notebook(cells=[new_code_cell("pass")])
        if seconds is not None:
            book.metadata["evictlab"] = {"typical_seconds": seconds}
        nbformat.write(book, tmp_path / name)
        return report.NotebookRun(name, tmp_path / name, tmp_path / "out" / name)

    runs = [notebook("01_a.ipynb", 5), notebook("02_b.ipynb", 200), notebook("03_c.ipynb", None),
            notebook("04_d.ipynb", 40), report.NotebookRun("05_gone.ipynb", tmp_path / "gone", tmp_path / "x")]
    assert report.longest_first(runs, None) == [2, 4, 1, 3, 0]
    earlier = SimpleNamespace(summary={"notebooks": [{"name": "01_a.ipynb", "duration_seconds": 300.0},
                                                     {"name": "03_c.ipynb", "duration_seconds": 1.0}]})
    assert report.longest_first(runs, earlier) == [4, 0, 1, 3, 2]  # only the record's summary is read
    shipped = [report.NotebookRun(path.name, path, tmp_path / path.name)
               for path in sorted(report.NOTEBOOK_DIR.glob("*.ipynb"))]
    assert shipped[report.longest_first(shipped, None)[0]].name.startswith("10_")  # the traces' 20 seeds


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
    assert "allow_unpinned are set by the report itself; use --spec, --dataset, --allow-unpinned" in (
        capsys.readouterr().err)
    assert not output.exists()


def test_allow_unpinned_is_passed_to_every_notebook(tmp_path):
    result = report.run_report(tmp_path / "out", smoke=True, notebooks=["05"], allow_unpinned=True, progress=False)
    assert result.ok, result.error
    manifest = json.loads(result.manifest_path.read_text())
    assert manifest["parameters"]["allow_unpinned"] is True
    assert "pinned" not in manifest["dataset"]  # the embedded demo is pinned; the flag only permits
    executed = nbformat.read(result.output_dir / "notebooks" / "05_protocol_variants.ipynb", as_version=4)
    assert executed.metadata["papermill"]["parameters"]["spec"] == "pr4810-final:allow_unpinned=true"


def test_no_kernel_outlives_the_report(tmp_path, tiny_suite):
    import psutil

    folder, names = tiny_suite
    result = report.run_report(tmp_path / "out", notebook_dir=folder, available=names, progress=False)
    assert [run.status for run in result.notebooks] == ["success", "error"]
    kernels = [child for child in psutil.Process().children(recursive=True)
               if "ipykernel" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE]
    assert not kernels


def test_each_kernel_talks_over_unix_sockets_in_a_folder_of_its_own(tmp_path):
    """No TCP ports, so no port another process can take between jupyter_client's choice and the
    kernel's bind (CI once lost a report to "Address already in use"); the folder goes with the run."""
    folder = tmp_path / "suite"
    folder.mkdir()
    parameters = "spec = 'pr4810-final'  # s\nsmoke = False  # s\nfigures_dir = None  # f\ntables_dir = None  # t"
    names = ["01_a.ipynb", "02_b.ipynb"]
    for name in names:
        write_notebook(folder / name, parameters, "from ipykernel.connect import get_connection_info\n"
                       "info = get_connection_info(unpack=True)\nprint(info['transport'], info['ip'])")
    result = report.run_report(tmp_path / "out", notebook_dir=folder, available=names, progress=False)
    assert result.ok, result.error
    seen = []
    for name in names:
        executed = nbformat.read(tmp_path / "out" / "notebooks" / name, as_version=4)
        transport, ip = executed.cells[-1].outputs[0]["text"].split()
        assert transport == "ipc"
        seen.append(Path(ip).parent)
    assert seen[0] != seen[1] and not any(path.exists() for path in seen)


def test_a_report_of_other_notebooks_or_another_spec_is_refused_unless_replaced(tmp_path, tiny_suite):
    folder, names = tiny_suite
    output = tmp_path / "out"
    assert report.run_report(output, notebook_dir=folder, available=names, notebooks=["01"], progress=False).ok
    before = (output / "report.md").read_bytes()
    with pytest.raises(OutputExistsError) as refused:
        report.run_report(output, notebook_dir=folder, available=names, progress=False)
    message = str(refused.value)
    assert "holds a report of notebooks 01 on spec 'pr4810-final'" in message
    assert "this one is notebooks 01, 02 on spec 'pr4810-final'" in message and "--replace" in message
    with pytest.raises(OutputExistsError, match="spec 'pr4810-run2'"):
        report.run_report(output, notebook_dir=folder, available=names, notebooks=["01"], preset="pr4810-run2",
                          progress=False)
    assert (output / "report.md").read_bytes() == before  # refused before anything is touched
    replaced = report.run_report(output, notebook_dir=folder, available=names, preset="pr4810-run2", replace=True,
                                 progress=False)
    assert [run.name for run in replaced.notebooks] == names


def test_a_subset_goes_into_a_folder_of_its_own(tmp_path, tiny_suite, monkeypatch):
    folder, names = tiny_suite
    monkeypatch.chdir(tmp_path)
    full = report.run_report(notebook_dir=folder, available=names, progress=False)
    subset = report.run_report(notebook_dir=folder, available=names, notebooks=["01"], progress=False)
    assert full.output_dir.name == "report-pr4810-final-demo"
    assert subset.output_dir.name == "report-pr4810-final-demo-nb-01"
    assert sorted(p.name for p in (full.output_dir / "notebooks").glob("*.ipynb")) == names  # the full one intact


def test_spec_and_preset_exclude_each_other_and_a_bad_spec_writes_nothing(tmp_path, capsys):
    output = tmp_path / "out"
    assert cli.main(["report", "--spec", "pr4810-run2", "--preset", "pr4810-final", "--output-dir", str(output)]) == 2
    assert "give --spec or --preset, not both" in capsys.readouterr().err
    assert cli.main(["report", "--spec", "pr4810-final:confidence_weight=2", "--output-dir", str(output)]) == 2
    assert "confidence_weight" in capsys.readouterr().err
    assert not output.exists()


def test_the_readme_example_spec_gives_a_report_of_every_notebook_and_a_subset_leaves_it_intact(
    tmp_path, monkeypatch
):
    """Custom weights: every notebook runs; the published totals are not checked, and notebook 02 says so.
    Then ``--notebooks 05`` on the same spec, into the default folder too, goes to a folder of its
    own and leaves every file of the full report as it was (issue #25's acceptance)."""
    spec = "pr4810-final:confidence_weight=0.55,confirmation_weight=0.35"
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "--smoke", "--spec", spec, "--no-progress"]) == 0
    (output,) = (tmp_path / "results").iterdir()
    assert output.name == report.default_name(parse_spec(spec), True)
    record = json.loads((output / report.MANIFEST_FILE).read_text())
    assert [entry["status"] for entry in record["summary"]["notebooks"]] == ["success"] * len(report.NOTEBOOKS)
    assert record["parameters"]["spec"] == spec
    executed = nbformat.read(output / "notebooks" / "02_retention.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for cell in executed.cells if cell.cell_type == "code" for o in cell.outputs)
    assert "is not a published preset: its totals are not checked against the published ones" in printed

    def files(folder: Path) -> dict[str, tuple[int, str]]:
        return {str(path.relative_to(folder)): (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
                for path in sorted(folder.rglob("*")) if path.is_file()}  # fmt: skip

    full = files(output)
    assert len([name for name in full if name.startswith("figures/")]) > 20  # the full report's figures
    assert cli.main(["report", "--smoke", "--spec", spec, "--notebooks", "05", "--no-progress"]) == 0
    subset = output.with_name(output.name + "-nb-05")
    assert sorted(path.name for path in (tmp_path / "results").iterdir()) == sorted([output.name, subset.name])
    assert files(output) == full  # not one file of the full report rewritten, added or removed
    made = json.loads((subset / report.MANIFEST_FILE).read_text())
    assert [entry["name"] for entry in made["summary"]["notebooks"]] == ["05_protocol_variants.ipynb"]
    assert sorted(path.name for path in (subset / "notebooks").glob("*.ipynb")) == ["05_protocol_variants.ipynb"]


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
