"""``report.md`` and ``report.html``: the report's content as plain data, rendered by templates.

:func:`build_context` gathers what a report shows, in reading order: the findings
(:mod:`evictlab.workbench.report_findings`) beside the headline figure, a table of contents, the
notebooks (executed copy and its HTML export), the key tables, every figure with a caption
that says what it shows and how to read it, and the run's provenance. Every link is relative
to the report folder, so the folder can be moved or published as it is. :func:`render` fills
the jinja2 templates in ``evictlab/workbench/templates/`` (``report.md.j2``, ``report.html.j2``; the HTML
page has inline CSS for screen and print, and no scripts). :func:`export_notebook_html` writes
an executed notebook's HTML twin with nbconvert.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import atomic_write_text
from .report_findings import Finding, Table

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"

#: How the report names the embedded demo dataset.
DEMO_LABEL = "embedded demo (synthetic text and ids; fact metadata made by the protocol's rules)"

#: The figure shown beside the findings, when the run drew it.
HEADLINE_FIGURE = "02_retention_by_scenario"

#: What each figure shows and how to read it, by file-name pattern (first match wins). The
#: figure's own title (stored in the PNG) precedes it in the caption.
CAPTIONS: dict[str, str] = {
    "01_pool_overview": "Each of the 45 cases with its scenario and loss rank: the rank at which the confidence"
    " policy would drop the support fact, set by how many distractors are built to outrank it.",
    "01_pool_metadata": "The metadata every policy reads, fact by fact: confidence, confirmation and access"
    " signals of the support fact and its nine distractors, per scenario.",
    "01_evidence_lengths": "Lengths of the rendered evidence. Left: the support of each official case against the"
    " selection limit. Right: the distractor bank; the dashed lines are the inclusive 40 and 700 character"
    " bounds, drawn half a character outside so that records at exactly 40 or 700 sit inside.",
    "02_retention_by_scenario": "Share of cases whose support fact survives eviction, per scenario and capacity,"
    " for confidence and hybrid-v1; bar labels give kept/cases. This is the selector alone, no language model.",
    "02_support_rank_distribution": "Where the support fact ranks among its 10 facts. Right of the dashed line it"
    " is evicted at that capacity; hatched bars are supports kept anyway by a reserved correction slot.",
    "03_weight_simplex_k*": "Support retained at every weight triple of the simplex (one hexagon each), per"
    " scenario. The ring marks DeerMem's default (0.65, 0.25, 0.10), whose value each panel title states; the"
    " hatched region keeps every control case. 100 % has a colour of its own.",
    "03_weight_stability": "Knife edges of the weight simplex, one map per capacity: each point is coloured by"
    " how much retention changes within one lattice step of it (0 is a plateau, a dark cell a point where a small"
    " change of one weight changes the result); the ring marks DeerMem's default.",
    "04_half_lives_*": "Support retained over confirmation and access half-lives at DeerMem's weights; each cell"
    " is labelled with kept/cases, DeerMem's 90/30 days outlined.",
    "04_capacity_curves": "Support retained against capacity for every registered policy, one panel per scenario."
    " Values are drawn as they are, so policies with equal values share a line; the bounds are dashed.",
    "05_variant_cascade": "What each step of the protocol-variant cascade (run 1, run 2, final) changes: pools,"
    " kept sets and prompts, and whether support retention moves.",
    "06_qa_accuracy": "Accuracy of the live QA per scenario and suite with its interval; both policies answered"
    " the same questions with the memory each kept.",
    "06_qa_paired": "The paired comparison: cases both policies got right or wrong, and those only one did, with"
    " the exact McNemar p and the paired bootstrap interval of the difference.",
    "06_qa_grade_rules": "Which grader rule decided each answer (exact, substring, numeric conflict, overlap,"
    " insufficient), per policy.",
    "06_qa_tokens": "Prompt and completion tokens of the answer requests, per scenario and policy.",
    "07_explorer_*": "A state of the interactive explorer (notebook 07): retention at the weights, half-lives and"
    " capacity set in that cell; open the notebook to move the sliders.",
    "08_zoo_heatmap": "Every registered policy on the same pools: support retained per scenario and capacity;"
    " random is a mean over seeds, oracle and keep-all are bounds.",
    "09_robustness_k*": "Robustness: support retained against the perturbation level, one panel per kind of"
    " perturbation; each policy's line is the mean over seeds, the band the 95 % range of single seeds, the"
    " dotted line its decision churn.",
    "10_capacity_curves": "Trace mode: the answerable rate against capacity on the default generated workload,"
    " replayed write by write in DeerMem's update order, for each policy between keep-all and the exact"
    " offline optimum.",
    "10_study_advantage": "Trace mode: each policy's answerable-rate advantage over the baseline per capacity"
    " across the study's workloads and seeds; bars span the 10th to 90th percentile, dots are medians, win"
    " rates above.",
    "10_loss_map": "Trace mode: the share of (seed, capacity) cells in which each policy loses, as a heat map.",
    "08_explanation": "One pool explained: each fact's score split into its weighted components, the cut line,"
    " evicted facts hatched, and the smallest change that would have kept the support.",
}


@dataclass(frozen=True)
class FigureView:
    name: str
    src: str
    svg: str | None
    title: str
    caption: str


@dataclass(frozen=True)
class NotebookView:
    """One notebook as the report lists it (links relative to the report folder)."""

    name: str
    status: str
    duration: str
    ipynb: str
    html: str | None
    figures: list[FigureView] = field(default_factory=list)
    failure: str | None = None

    @property
    def stem(self) -> str:
        return Path(self.name).stem


@dataclass(frozen=True)
class TableView:
    """A table with one header row: the index names, then the (flattened) column labels."""

    title: str
    note: str
    anchor: str
    header: list[str]
    rows: list[list[str]]


def table_view(table: Table, anchor: str) -> TableView:
    frame = table.frame
    index_name = " / ".join(str(name) for name in frame.index.names if name is not None)
    header = [index_name] + [_cell(column) for column in frame.columns]
    rows = [[_cell(index)] + [_cell(value) for value in values]
            for index, values in zip(frame.index, frame.itertuples(index=False))]
    return TableView(table.title, table.note, anchor, header, rows)


def _cell(value: Any) -> str:
    if isinstance(value, tuple):
        return " / ".join(map(str, value))
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def figure_view(png: Path, root: Path) -> FigureView:
    title = figure_title(png)
    return FigureView(
        name=png.stem,
        src=relative(png, root),
        svg=relative(png.with_suffix(".svg"), root) if png.with_suffix(".svg").exists() else None,
        title=title,
        caption=caption_for(png.stem),
    )


def caption_for(stem: str) -> str:
    """The explanation of :data:`CAPTIONS` for a figure file stem, else an empty string."""
    return next((text for pattern, text in CAPTIONS.items() if fnmatch.fnmatchcase(stem, pattern)), "")


def figure_title(png: Path) -> str:
    """The title :func:`evictlab.workbench.plots.save` stored in the PNG, else the file stem."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(png) as image:
            title = image.text.get("Title")  # type: ignore[attr-defined]
    except OSError:
        title = None
    # A figure's source line sits under its title; one line reads better in a caption.
    return " — ".join(title.splitlines()) if title else png.stem.replace("_", " ")


def relative(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` (POSIX separators), also when it lies outside it."""
    return Path(os.path.relpath(Path(path).resolve(), Path(root).resolve())).as_posix()


# --------------------------------------------------------------------------- the context


def build_context(
    root: Path,
    manifest: Mapping[str, Any],
    notebooks: Sequence[NotebookView],
    findings: Sequence[Finding],
    tables: Sequence[Table],
    status: str,
    error: str | None,
    *,
    manifest_file: str,
    hidden_parameters: Sequence[str] = (),
) -> dict[str, Any]:
    """Everything the templates need, in plain values; no absolute path survives into it."""
    figures = [figure for notebook in notebooks for figure in notebook.figures]
    headline = next((f for f in figures if f.name == HEADLINE_FIGURE), figures[0] if figures else None)
    table_views = [table_view(table, f"table-{index + 1}") for index, table in enumerate(tables)]
    contents = [("findings", "Findings"), ("notebooks", "Notebooks")]
    contents += [(view.anchor, view.title) for view in table_views]
    contents += [(f"figures-{n.stem}", f"Figures of {n.stem}") for n in notebooks if n.figures]
    contents.append(("run", "How this report was made"))
    number = {figure.name: index + 1 for index, figure in enumerate(figures)}
    return {
        "title": f"evictlab report: {root.name}",
        "status": status,
        "error": error,
        "findings": list(findings),
        "headline": headline,
        "contents": contents,
        "notebooks": list(notebooks),
        "tables": table_views,
        "figure_number": number,
        "run": provenance_items(manifest, hidden_parameters),
        "manifest_file": manifest_file,
    }


def provenance_items(manifest: Mapping[str, Any], hidden: Sequence[str]) -> list[str]:
    """The run's identity as short lines: software, data (by name and hash), protocol, parameters."""
    prov = manifest.get("provenance") or {}
    git = prov.get("git") or {}
    dataset = manifest.get("dataset") or {}
    parameters = manifest.get("parameters") or {}
    extra = {key: value for key, value in parameters.items() if key not in hidden}
    name = DEMO_LABEL if dataset.get("embedded_demo") else Path(str(dataset.get("path") or "?")).name
    items = [
        f"evictlab {prov.get('evictlab_version')}, git {git.get('head') or 'unknown'}"
        f"{' (uncommitted changes)' if git.get('dirty') else ''}, Python {prov.get('python')}",
        f"dataset: {name}, sha256 {dataset.get('sha256')}{'' if dataset.get('pinned', True) else ' (unpinned)'}",
        f"preset {manifest.get('preset')}: "
        + ", ".join(f"{key}={value}" for key, value in (manifest.get("variant") or {}).items()),
        f"protocol {(manifest.get('protocol') or {}).get('protocol_id')}; smoke={parameters.get('smoke')};"
        f" started {manifest.get('started_at')}",
    ]
    if extra:
        items.append("notebook parameters: " + ", ".join(f"{k}={_shown(v)!r}" for k, v in extra.items()))
    return items


def _shown(value: Any) -> Any:
    """A parameter as the report shows it: an absolute path by its file or folder name only."""
    if isinstance(value, str) and os.path.isabs(value):
        return Path(value).name
    return value


# --------------------------------------------------------------------------- rendering


def render(context: Mapping[str, Any], kind: str) -> str:
    """``kind`` ``"md"`` or ``"html"``: the filled template ``report.<kind>.j2``."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=kind == "html",
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters["md"] = _md_escape
    environment.filters["mdcell"] = _md_cell
    return environment.get_template(f"report.{kind}.j2").render(**context)


def _md_escape(text: str) -> str:
    """Link, image or emphasis text: brackets would end it early, ``*`` would close the emphasis."""
    return str(text).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("*", "\\*")


def _md_cell(text: str) -> str:
    """Table cell text: a bare ``|`` would end the cell, a newline the row."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def export_notebook_html(notebook: Path) -> Path:
    """Write ``notebook``'s HTML export beside it (same stem, ``.html``) and return its path.

    Images stay inside the page (nbconvert embeds them), so the file reads on its own; the
    ``lab`` template gives the look of JupyterLab.
    """
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nbformat.read(notebook, as_version=4))
    return atomic_write_text(notebook.with_suffix(".html"), body)
