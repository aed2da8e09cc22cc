"""``report.md`` and ``report.html``: the report's content as plain data, rendered by templates.

:func:`build_context` gathers what a report shows, in reading order: the findings beside the
headline figure, a table of contents, the notebooks (executed copy and its HTML export), the
key tables, every figure with a caption that says what it shows and how to read it, and the
run's provenance. The findings and key tables are the tables the notebooks saved
(:mod:`evictlab.workbench.tables`); :func:`findings` puts their numbers into sentences, with no
arithmetic beyond phrasing them (a count as a share, the widest of the listed cells, a rank).
Every link is relative to the report folder, so the folder can be moved or published as it is.
:func:`render` fills the jinja2 templates in ``evictlab/workbench/templates/`` (``report.md.j2``,
``report.html.j2``; the HTML page has inline CSS for screen and print, and no scripts).
:func:`export_notebook_html` writes an executed notebook's HTML twin with nbconvert.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis.traces.inference import FINDING_CAPACITY, finding_sentences
from ..results import atomic_write_text
from ..selection.tables import format_count
from .tables import Table

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"

#: How the report names the embedded demo dataset.
DEMO_LABEL = "embedded demo (synthetic text and ids; fact metadata made by the protocol's rules)"

#: The figure shown beside the findings, when the run drew it.
HEADLINE_FIGURE = "02_retention_by_scenario"

#: What each figure shows and how to read it, by file-name pattern (first match wins). The
#: figure's own title (stored in the PNG) precedes it in the caption.
CAPTIONS: dict[str, str] = {
    "01_pool_overview": "Each case with its scenario and loss rank: the rank at which the confidence"
    " policy would drop the support fact, set by how many distractors are built to outrank it.",
    "01_pool_metadata": "The metadata every policy reads, fact by fact: confidence, confirmation and access"
    " signals of the support fact and its distractors, per scenario.",
    "01_evidence_lengths": "Lengths of the rendered evidence. Left: the support of each official case against the"
    " selection limit. Right: the distractor bank; the dashed lines are the config's inclusive character"
    " bounds, drawn half a character outside so that records exactly at a bound sit inside.",
    "02_retention_by_scenario": "Share of cases whose support fact survives eviction, per scenario and capacity,"
    " for confidence and hybrid-v1; bar labels give kept/cases. This is the selector alone, no language model.",
    "02_support_rank_distribution": "Where the support fact ranks among its pool's facts. Right of the dashed line it"
    " is evicted at that capacity; hatched bars are supports kept anyway by a reserved correction slot.",
    "03_weight_simplex_k*": "Support retained at every weight triple of the simplex (one hexagon each), per"
    " scenario. The ring marks DeerMem's default weights, whose value each panel title states; the"
    " hatched region keeps every control case. 100 % has a colour of its own.",
    "03_weight_stability": "Knife edges of the weight simplex, one map per capacity: each point is coloured by"
    " how much retention changes within one lattice step of it (0 is a plateau, a dark cell a point where a small"
    " change of one weight changes the result); the ring marks DeerMem's default.",
    "04_half_lives_*": "Support retained over confirmation and access half-lives at the weights the title states;"
    " each cell is labelled with the supports kept (of the cases its panel title states), DeerMem's default"
    " half-lives outlined.",
    "04_capacity_curves": "Support retained against capacity for every registered policy, one panel per scenario."
    " Values are drawn as they are, so policies with equal values share a line; the bounds are dashed.",
    "05_variant_cascade": "What each step of the protocol-variant cascade (the presets the figure names, in"
    " order) changes: pools, kept sets and prompts, and whether support retention moves.",
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
    " random is its exact expectation over orders, oracle and keep-all are bounds.",
    "09_robustness_k*": "Robustness: support retained against the perturbation level, one panel per kind of"
    " perturbation; each policy's line is the mean over seeds, the band the 95 % range of single seeds, the"
    " dotted line its decision churn.",
    "10_capacity_curves": "Trace mode: the answerable and stale-kept rate against capacity on the generated"
    " workloads (one trace per seed, as many as the title states), replayed write by write in DeerMem's update"
    " order, for each policy beside the bounds: keep-all, the exact offline optimum and the rate-aware bound."
    " A policy's question (and keep-all's) counts as answerable when its needed fact is kept and, with the"
    " injection stage, shown to the model (the y label says which); the optimum's and the rate-aware bound's"
    " when it is in memory: they replay no injection stage. DeerMem's two policies, the best baseline (the"
    " other policy with the highest mean answerable rate at the capacity the title states: DeerMem's default,"
    " 100, where the paired findings choose theirs, when it was replayed) and the bounds strong, identical"
    " curves one line with both names.",
    "10_stage_losses": "Trace mode: where each unanswered question was lost, by lifecycle stage, per capacity, for"
    " DeerMem's two policies, the best baseline of the capacity curves and keep-all; each bar sums to 1.",
    "10_study_advantage": "Trace mode: each policy's answerable-rate advantage over the baseline per capacity"
    " across the study's workloads and seeds; bars span the 10th to 90th percentile, dots are medians, win"
    " rates above.",
    "10_loss_map": "Trace mode: over two of the study's parameters, the share of (seed, capacity) cells in which"
    " hybrid-v1 answers fewer questions than confidence.",
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
    csv: str = ""  # the saved file, relative to the report folder


def table_view(table: Table, anchor: str, csv: str = "") -> TableView:
    frame = table.frame
    index_name = " / ".join(str(name) for name in frame.index.names if name is not None)
    header = [index_name] + [_cell(column) for column in frame.columns]
    rows = [[_cell(index)] + [_cell(value) for value in values]
            for index, values in zip(frame.index, frame.itertuples(index=False))]
    return TableView(table.title, table.note, anchor, header, rows, csv)


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


# --------------------------------------------------------------------------- findings

#: How each topic is labelled in the report, in the order the findings are listed.
TOPIC_LABELS = {
    "retention": "Retention",
    "scenarios": "Where they differ",
    "zoo": "Other policies",
    "variants": "Protocol variants",
    "qa": "Live QA",
    "traces": "Memory over time",
    "data": "Data",
}


@dataclass(frozen=True)
class Finding:
    """One finding: ``topic`` (a key of :data:`TOPIC_LABELS`), ``headline`` (numbers), ``detail``
    (how they were made, caveats) and ``table``, the saved table it reads (None: the run record)."""

    topic: str
    headline: str
    detail: str
    table: str | None = None

    @property
    def label(self) -> str:
        return TOPIC_LABELS.get(self.topic, self.topic)


def _points(share: float) -> str:
    """A difference of shares as signed percentage points, ``+33.3``."""
    return f"{100 * share:+.1f}"


def retention_finding(paired: Table) -> Finding:
    """Retention of both DeerMem policies per capacity, with the paired difference (notebook 02)."""
    f = paired.frame

    def kept(policy: str) -> str:
        return ", ".join(f"{int(k)}/{int(n)}" for k, n in zip(f[policy], f["cases"]))

    differences = ", ".join(f"{_points(d)} [{_points(lo)}, {_points(hi)}]"
                            for d, lo, hi in zip(f["difference"], f["lower"], f["upper"]))
    return Finding(
        "retention",
        f"At capacities {', '.join(map(str, f['capacity']))}, hybrid-v1 keeps the support fact in {kept('hybrid-v1')}"
        f" cases and confidence in {kept('confidence')}: {differences} percentage points (95 % interval).",
        f"The selector alone (no language model), {int(f['cases'].max())} cases. {paired.note} The pools are built"
        " to show these effects, so it describes these cases, not a population of memories.",
        paired.name,
    )


def scenario_finding(counts: Table, first: str = "confidence", second: str = "hybrid-v1") -> Finding:
    """Where the two policies differ most, and where the second keeps fewer supports (notebook 02)."""
    cells = counts.frame.reset_index().pivot_table(index=["scenario", "capacity"], columns="policy",
                                                   values=["retained", "cases"], sort=False)
    gap = cells["retained"][second] / cells["cases"][second] - cells["retained"][first] / cells["cases"][first]
    scenario, capacity = gap.abs().idxmax()
    cell = cells.loc[(scenario, capacity)]
    headline = (f"The largest gap is in {scenario} at capacity {capacity}: {first} {int(cell['retained'][first])}/"
                f"{int(cell['cases'][first])}, {second} {int(cell['retained'][second])}/{int(cell['cases'][second])}.")
    worse = [f"{s} at capacity {k}" for (s, k), value in gap.items() if value < 0]
    headline += (f" {second} keeps fewer supports than {first} in " + ", ".join(worse) + "." if worse
                 else f" {second} never keeps fewer supports than {first} in any scenario.")
    return Finding(
        "scenarios", headline,
        "The largest of all scenario and capacity cells, every cell listed in the retention table; the two help"
        " scenarios reward the signal hybrid-v1 adds, the controls check that it costs nothing elsewhere.",
        counts.name,
    )


def zoo_finding(totals: Table, capacity: int, by_scenario: Table | None = None) -> Finding | None:
    """The best and worst of the other policies at ``capacity`` (notebook 08); None when the
    notebook did not evaluate that capacity. ``by_scenario``: notebook 08's table at that
    capacity, whose ``tied`` column counts the cases a tie at the cut decided, per policy."""
    at = totals.frame.reset_index()
    at = at[at["capacity"] == capacity].set_index("policy")
    others = at[at["role"] == "zoo"].sort_values("retained", ascending=False, kind="stable")
    if others.empty:
        return None
    ties = {} if by_scenario is None or "tied" not in by_scenario.frame else by_scenario.frame["tied"].to_dict()

    def kept(policy: str) -> str:
        tied = int(ties.get(policy, 0))
        settled = f" (a tie at the cut decided {tied} of its cases)" if tied else ""
        return f"{policy} {format_count(at.loc[policy, 'retained'])}/{int(at.loc[policy, 'cases'])}{settled}"

    reference = [kept(p) for p in ("confidence", "hybrid-v1", "random", "oracle") if p in at.index]
    return Finding(
        "zoo",
        f"At capacity {capacity}, of the {len(others)} other registered policies {kept(others.index[0])} keeps the"
        f" most supports and {kept(others.index[-1])} the fewest; for reference {', '.join(reference)}.",
        "Same pools and clock for every policy; random is its exact expectation (k/n per case), oracle keeps"
        " support facts first (an upper bound, not a policy); every other policy but DeerMem's two (which break"
        " ties by input order) counts a case a tie decides as its exact expectation over the tied orders."
        f" {totals.note}",
        totals.name,
    )


def variants_finding(cascade: Table) -> Finding:
    """What each step of the preset cascade changes (notebook 05)."""
    steps = [
        f"{row.before} to {row.after} changes {row.pools_changed}/{row.pools_total} pools,"
        f" {row.kept_sets_changed}/{row.kept_sets_total} kept sets at capacity {row.qa_capacity} and"
        f" {row.prompts_changed}/{row.prompts_total} prompts, support retention"
        f" {'changed' if row.retention_changed else 'unchanged'}"
        for row in cascade.frame.itertuples()
    ]
    return Finding(
        "variants", "; ".join(steps) + ".",
        "Each step switches the evidence header, the fact ids or the memory joiner (docs/protocol.md, section"
        " 0.4); kept sets are compared at every capacity, prompts at the QA capacity by request fingerprint"
        " (evictlab diff).",
        cascade.name,
    )


def qa_finding(stats: Table) -> Finding:
    """The paired QA result per suite (notebook 06)."""
    suites = stats.frame.reset_index().set_index("suite")
    first, second = suites["first_policy"].iloc[0], suites["second_policy"].iloc[0]

    def scores(row: pd.Series) -> str:
        return f"{second} {row['second_correct']}/{row['cases']}, {first} {row['first_correct']}/{row['cases']}"

    lead = suites.loc["overall"] if "overall" in suites.index else suites.iloc[-1]
    others = [f"{suite} {scores(row)} (p = {row['p_value']:.2g})" for suite, row in suites.iterrows()
              if suite != lead.name]
    model = lead.get("model")
    published = "DeerFlow" in str(lead["source"])
    return Finding(
        "qa",
        f"Questions answered right: {scores(lead)} ({_points(lead['mean_difference'])} points, 95 % interval"
        f" {_points(lead['lower'])} to {_points(lead['upper'])}, exact McNemar p = {lead['p_value']:.2g}); "
        + "; ".join(others) + f". Source: {lead['source']}" + (f", model {model}" if isinstance(model, str) else "")
        + ".",
        ("Recomputed from the published rows with evictlab's statistics; the rows come from DeerFlow's run on the"
         " real LongMemEval file, not from this report's dataset." if published else
         "Recomputed from the run's graded rows with evictlab's statistics.")
        + " One answer per case and policy from one model: the interval covers case sampling only.",
        stats.name,
    )


def traces_finding(paired: Table) -> Finding:
    """hybrid-v1 against confidence and the best other policy at capacity 100, over the seeds
    of notebook 10's paired table (no capacity picked after the replay)."""
    if FINDING_CAPACITY not in set(paired.frame["capacity"]):
        return Finding("traces", f"Notebook 10 replayed no capacity {FINDING_CAPACITY} (DeerMem's default, fixed in"
                       " advance), so there is no trace finding; its paired table lists the capacities it ran.",
                       paired.note, paired.name)
    headline, detail = finding_sentences(paired.frame, FINDING_CAPACITY)
    return Finding("traces", headline, detail, paired.name)


def data_finding(inputs: Mapping[str, Any]) -> Finding:
    """Which data the findings rest on, from the run record's inputs."""
    dataset = inputs["dataset"]
    if dataset.get("embedded_demo"):
        what = "The embedded demo dataset (synthetic text generated by evictlab; LongMemEval-shaped)"
        note = ("Retention depends only on fact metadata, which the demo shares with LongMemEval, so the totals"
                " match DeerFlow's published ones; pass --dataset for the real file.")
    else:
        what = f"{Path(str(dataset.get('path'))).name}{'' if dataset.get('pinned', True) else ' (not the pinned file)'}"
        note = "The dataset is identified by its SHA-256 in the run record."
    return Finding("data", f"{what}, sha256 {str(dataset.get('sha256'))[:12]}…, spec {inputs['spec']},"
                   f" {inputs['cases']} cases.", note)


def findings(tables: Mapping[str, Table], inputs: Mapping[str, Any], qa_capacity: int) -> list[Finding]:
    """The findings the saved ``tables`` support, in :data:`TOPIC_LABELS` order; a notebook that
    did not run (a subset report) gives none."""
    readers: dict[str, Callable[[Table], Finding | None]] = {
        "02_retention_paired": retention_finding,
        "02_retention_counts": scenario_finding,
        "08_zoo_totals": lambda table: zoo_finding(table, qa_capacity, tables.get(f"08_zoo_k{qa_capacity}")),
        "05_variant_cascade": variants_finding,
        "06_qa_stats": qa_finding,
        "10_trace_paired": traces_finding,
    }
    made = [read(tables[name]) for name, read in readers.items() if name in tables] + [data_finding(inputs)]
    return [finding for finding in made if finding is not None]


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
    table_views = [table_view(table, f"table-{table.name}", f"tables/{table.name}.csv")
                   for table in tables if table.shown]
    contents = [("findings", "Findings"), ("notebooks", "Notebooks")]
    contents += [(view.anchor, view.title) for view in table_views]
    contents += [(f"figures-{n.stem}", f"Figures of {n.stem}") for n in notebooks if n.figures]
    contents.append(("run", "How this report was made"))
    # Numbered as the page shows them: the headline figure first, then the notebooks' in order.
    shown = ([headline] if headline else []) + [f for f in figures if headline is None or f.name != headline.name]
    number = {figure.name: index + 1 for index, figure in enumerate(shown)}
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
