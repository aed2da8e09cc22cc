"""Every figure at both paper sizes: the width asked for, text of at least 8 pt, none of it off the canvas
or crowding another; SVG text as text; captions against their data; the stability map and the robustness
curves drawn from their values."""

from __future__ import annotations

import inspect
import re
from unittest import mock

import numpy as np
import pytest
from figure_builders import SOURCE, figure_builders
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.text import Text

from evictlab.analysis import robustness, validation, zoo
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.analysis.traces import study
from evictlab.policies import known_policies
from evictlab.workbench import loaders, plots, report_document
from evictlab.workbench.plots import style
from evictlab.workbench.plots import traces as plot_traces
from evictlab.workbench.plots.style import MIN_TEXT_PT, PAPER_SIZES
from evictlab.workbench.report import NOTEBOOKS


@pytest.fixture(scope="module")
def builders(tmp_path_factory):
    return figure_builders(tmp_path_factory.mktemp("figures"))


def figure_functions() -> set[str]:
    return {name for name in plots.__all__ if callable(getattr(plots, name))
            and inspect.signature(getattr(plots, name)).return_annotation in ("Figure", Figure)}


def test_every_figure_function_is_built_here(builders):
    assert set(builders) == figure_functions()
    for name in figure_functions():
        assert "size" in inspect.signature(getattr(plots, name)).parameters, name


def drawn_texts(fig: Figure) -> list[tuple[str, float, object]]:
    """(text, size in points, extent in pixels) of every text the figure draws, lines wrapped
    into several included (the renderer is handed those line by line, without their artist)."""
    canvas = FigureCanvasAgg(fig)
    drawn = []
    draw = Text.draw

    def recording(text, renderer):
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)
        return draw(text, renderer)

    with mock.patch.object(Text, "draw", recording):
        canvas.draw()
    renderer = canvas.get_renderer()
    return [(text.get_text(), text.get_fontsize(), text.get_window_extent(renderer)) for text in dict.fromkeys(drawn)]


#: Figures whose texts still run into each other or out of their panel at a size (tick labels of
#: neighbouring scenarios, bar labels of adjacent bars, heat-map cells, unbreakable panel titles):
#: the test below checks that they still do, so that it fails once one of them is mended.
CROWDED = {
    ("evidence_lengths", "one-column"), ("evidence_lengths", "two-column"),
    ("half_life_heatmaps", "one-column"), ("pool_metadata", "two-column"),
    ("pool_overview", "one-column"), ("pool_overview", "two-column"),
    ("qa_tokens", "one-column"), ("qa_tokens", "two-column"),
    ("retention_by_scenario", "one-column"), ("retention_by_scenario", "two-column"),
    ("variant_cascade", "one-column"), ("variant_cascade", "two-column"),
    ("zoo_heatmap", "one-column"), ("zoo_heatmap", "two-column"),
}


@pytest.mark.filterwarnings("error:constrained_layout not applied")
@pytest.mark.parametrize("size", list(PAPER_SIZES))
@pytest.mark.parametrize("name", sorted(figure_functions()))
def test_the_figure_fits_the_paper_width_with_readable_text_on_the_canvas(builders, name, size):
    """The width asked for, text of at least 8 pt, none of it off the canvas; and (outside
    :data:`CROWDED`) no text running into another or out of its panel."""
    fig = builders[name](size=size, source=SOURCE)
    assert fig.get_figwidth() == PAPER_SIZES[size]
    texts = drawn_texts(fig)
    assert texts, name
    width, height = fig.bbox.width, fig.bbox.height
    for text, points, extent in texts:
        assert points >= MIN_TEXT_PT, f"{name} ({size}): {text!r} at {points} pt"
        assert extent.x0 >= -1 and extent.y0 >= -1 and extent.x1 <= width + 1 and extent.y1 <= height + 1, (
            f"{name} ({size}): {text!r} leaves the canvas: {extent.bounds} of {width:.0f} x {height:.0f} px")
    crowded = crowding(fig, texts)
    if (name, size) in CROWDED:
        assert crowded, f"{name} ({size}) no longer crowds: take it out of CROWDED"
    else:
        assert crowded == [], f"{name} ({size})"


def crowding(fig: Figure, texts: list[tuple[str, float, object]]) -> list[str]:
    """Pairs of ``texts`` (:func:`drawn_texts` of ``fig``) that overlap, and axis labels or panel
    titles wider than their panel."""
    found = []
    for index, (text, _, extent) in enumerate(texts):
        for other, _, second in texts[index + 1:]:
            across = min(extent.x1, second.x1) - max(extent.x0, second.x0)
            up = min(extent.y1, second.y1) - max(extent.y0, second.y0)
            if across > 1 and up > 1:
                found.append(f"{text!r} runs into {other!r}")
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        if ax.get_visible() and ax.axison:
            panel = ax.get_window_extent(renderer)
            for label in (ax.xaxis.label, ax.title):
                extent = label.get_window_extent(renderer)
                if label.get_text().strip() and (extent.x0 < panel.x0 - 3 or extent.x1 > panel.x1 + 3):
                    found.append(f"{label.get_text()!r} is wider than its panel")
    return found


def test_the_crowding_check_can_fail():
    fig = Figure(figsize=(3.5, 2))
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, "one label")
    ax.text(0.5, 0.5, "another")
    ax.set_xlabel("an axis label far wider than the panel it sits under, on one line")
    found = crowding(fig, drawn_texts(fig))
    assert "'one label' runs into 'another'" in found and any("wider than its panel" in line for line in found)


def test_an_unknown_size_is_refused(builders):
    with pytest.raises(ValueError, match="size must be one of one-column, two-column"):
        builders["pool_overview"](size="a4")


def test_saved_svg_keeps_its_text_as_text(builders, tmp_path):
    _, svg = plots.save(builders["pool_overview"](), tmp_path / "overview")
    text = svg.read_text()
    assert "<text" in text and "The 45 prepared cases" in text


def face_colours(fig: Figure) -> list[set[tuple]]:
    """The distinct face colours each panel's cells are drawn in."""
    FigureCanvasAgg(fig).draw()
    return [{tuple(np.round(c, 4)) for collection in ax.collections if isinstance(collection, PolyCollection)
             for c in collection.get_facecolors()} for ax in fig.axes if ax.get_title().startswith("capacity")]


def test_the_stability_map_draws_different_ranges_in_different_colours(builders):
    grid = make_grid(weights_step=0.1, capacities=(7,), policies=["hybrid-v1"])
    stable = validation.stability(run_sweep({"pr4810-final": loaders.load_pool_set()}, grid, progress=False).rows)
    (colours,) = face_colours(plots.stability_maps(stable))
    assert stable["range"].nunique() > 2
    assert len(colours) == stable["range"].nunique()  # one colour per distinct range, none shared
    flat = stable.assign(range=0)
    (one,) = face_colours(plots.stability_maps(flat))
    assert len(one) == 1


def test_robustness_levels_sit_at_their_values_in_their_units_on_one_percent_axis(builders):
    fig = builders["robustness_curves"]()
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(robustness.PERTURBATIONS)  # no twin axis: retention and churn share one y axis
    jitter = next(ax for ax in panels if ax.get_xlabel().startswith("timestamp_jitter"))
    assert jitter.get_xlabel() == "timestamp_jitter (days (sd))" and jitter.get_xscale() == "symlog"
    levels = robustness.PERTURBATIONS["timestamp_jitter"].levels
    assert list(jitter.get_xticks()) == list(levels)
    assert all(list(line.get_xdata()) == list(levels) for line in jitter.get_lines())
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    assert legend[-2:] == ["support retained (mean)", "decision churn"]


def test_titles_state_the_numbers_and_settings_of_their_data():
    pool_set = loaders.load_pool_set()
    cases = loaders.cases_frame(pool_set)
    assert plots.figure_title(plots.pool_overview(cases.iloc[:30])) == "The 30 prepared cases"
    rows = zoo.zoo_rows(pool_set, capacities=(5,), seeds=range(2))
    title = plots.figure_title(plots.zoo_heatmap(zoo.zoo_summary(rows)))
    by_order = list(dict.fromkeys(rows.loc[rows["tie_break"] == "input-order", "policy"]))
    assert by_order and f"({', '.join(by_order)} break ties by input order; the others" in title
    for name in ("confidence", "hybrid-v1"):  # without DeerMem's policies the sentence changes with the data
        rows = rows[rows["policy"] != name]
    title = plots.figure_title(plots.zoo_heatmap(zoo.zoo_summary(rows)))
    assert "(every policy reports the expectation over tie orders)" in title


def caption(stem: str) -> str:
    return report_document.caption_for(stem)


def claim_colour_of_full_retention():
    """03's "100 % has a colour of its own": no share below 100 % is drawn in the 100 % colour."""
    cmap, norm = style.retention_cmap(), style.retention_norm()
    full = cmap(norm(100.0))
    assert "100 %" in caption("03_weight_simplex_k5")
    assert all(cmap(norm(share)) != full for share in np.linspace(0, 99.99, 500))


def claim_plateau_is_zero():
    """03_weight_stability's "0 is a plateau": the stability scale starts at a range of 0."""
    assert "0 is a plateau" in caption("03_weight_stability")
    grid = make_grid(weights_step=0.25, capacities=(7,), policies=["hybrid-v1"])
    stable = validation.stability(run_sweep({"pr4810-final": loaders.load_pool_set()}, grid, progress=False).rows)
    fig = plots.stability_maps(stable)
    (image, *_) = [c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)]
    assert image.norm.vmin == 0


def claim_band_of_single_seeds():
    """09's "the 95 % range of single seeds": the band is robustness's 2.5 % to 97.5 % quantiles."""
    low, high = robustness.QUANTILES
    share = round(100 * (high - low))
    assert f"the {share} % range of single seeds" in caption("09_robustness_k7")
    pool_set = loaders.load_pool_set()
    curves = robustness.robustness_curves(pool_set, ["confidence_noise"], capacities=[7], seeds=4)
    assert f"{share}% of single seeds (band)" in plots.figure_title(plots.robustness_curves(curves, 7))


def claim_study_percentiles():
    """10_study_advantage's "10th to 90th percentile": the summary's outer percentiles, which the bars span."""
    assert (study.PERCENTILES[0], study.PERCENTILES[-1]) == (10, 90)
    assert "bars span the 10th to 90th percentile, dots are medians" in caption("10_study_advantage")
    assert study.PERCENTILES[len(study.PERCENTILES) // 2] == 50


def claim_bank_bounds_half_a_character_out():
    """01_evidence_lengths's dashed lines "drawn half a character outside" the config's bounds."""
    assert "drawn half a character outside" in caption("01_evidence_lengths")
    pool_set = loaders.load_pool_set()
    fig = plots.evidence_lengths(loaders.cases_frame(pool_set), loaders.bank_frame(pool_set), support_limit=500,
                                 bank_limits=(40, 700))
    vertical = [line.get_xdata() for ax in fig.axes for line in ax.get_lines()
                if line.get_linestyle() == "--" and line.get_xdata()[0] == line.get_xdata()[-1]]
    assert sorted(xdata[0] for xdata in vertical) == [39.5, 700.5]


def claim_policies_of_the_retention_figure():
    """02_retention_by_scenario names "confidence and hybrid-v1": the policies loaders.retention decides."""
    assert "for confidence and hybrid-v1" in caption("02_retention_by_scenario")
    assert set(loaders.retention(loaders.load_pool_set())["policy"].astype(str)) == {"confidence", "hybrid-v1"}


def claim_the_loss_rank_policy():
    """01_pool_overview's loss rank is "the rank at which the confidence policy would drop the support"."""
    assert "the confidence policy would drop the support" in caption("01_pool_overview")
    pool_set = loaders.load_pool_set()
    cases = loaders.cases_frame(pool_set).set_index("case_id")
    ranks = loaders.retention(pool_set)
    at = ranks[(ranks["policy"] == "confidence") & ranks["scenario"].isin(["confirmation_help", "access_help"])]
    for row in at.itertuples():
        assert row.support_rank == cases.loc[row.case_id, "loss_rank"]


def claim_the_zoo_floor_and_bounds():
    """08_zoo_heatmap: "random is its exact expectation over orders, oracle and keep-all are bounds"."""
    assert "random is its exact expectation over orders, oracle and keep-all are bounds" in caption("08_zoo_heatmap")
    rows = zoo.zoo_rows(loaders.load_pool_set(), capacities=(5,), seeds=range(2))
    assert (rows.loc[rows["policy"] == "random", "seeds"] == 1).all()  # no seeds averaged: the expectation
    assert {zoo.policy_role(name) for name in ("oracle", "keep-all")} == {"bound"}


def claim_every_fact_of_every_pool():
    """01_pool_metadata: the confidence "of the support fact and its distractors": a mark for every fact."""
    assert "of the support fact and its distractors, per scenario" in caption("01_pool_metadata")
    facts = loaders.facts_frame(loaders.load_pool_set())
    fig = plots.pool_metadata(facts)
    FigureCanvasAgg(fig).draw()
    marks = sum(len(c.get_offsets()) for ax in fig.axes if ax.get_title() for c in ax.collections)
    assert marks >= len(facts)


def claim_explorer_notebook():
    """07_explorer_*'s "(notebook 07)": the notebook that saves those figures."""
    assert "(notebook 07)" in caption("07_explorer_start")
    assert any(name.startswith("07_") and "explorer" in name for name in NOTEBOOKS)


def claim_trace_bounds():
    """10_capacity_curves: each policy "between keep-all and the exact offline optimum", both drawn."""
    assert "between keep-all and the exact offline optimum" in caption("10_capacity_curves")
    assert {"keep-all", "optimum"} <= set(plot_traces.BOUND_NAMES)


#: Each caption that states a number or names a policy or a notebook, and the check that its data agree.
CAPTION_CLAIMS = {
    "03_weight_simplex_k*": claim_colour_of_full_retention,
    "03_weight_stability": claim_plateau_is_zero,
    "09_robustness_k*": claim_band_of_single_seeds,
    "10_study_advantage": claim_study_percentiles,
    "01_evidence_lengths": claim_bank_bounds_half_a_character_out,
    "02_retention_by_scenario": claim_policies_of_the_retention_figure,
    "01_pool_overview": claim_the_loss_rank_policy,
    "08_zoo_heatmap": claim_the_zoo_floor_and_bounds,
    "07_explorer_*": claim_explorer_notebook,
    "01_pool_metadata": claim_every_fact_of_every_pool,
    "10_capacity_curves": claim_trace_bounds,
}
NUMBER_WORDS = r"\d|%|\b(?:two|three|four|five|six|seven|eight|nine|ten|twice|half)\b(?!-)"


def test_every_caption_stating_a_number_or_a_policy_is_checked():
    names = [re.escape(name) for name in known_policies()]
    pattern = re.compile(rf"{NUMBER_WORDS}|\b(?:{'|'.join(names)}|optimum)\b")
    stating = {key for key, text in report_document.CAPTIONS.items() if pattern.search(text)}
    assert stating - set(CAPTION_CLAIMS) == set(), "captions stating numbers or policies with no check of their data"


@pytest.mark.parametrize("pattern", sorted(CAPTION_CLAIMS))
def test_the_caption_agrees_with_its_data(pattern):
    CAPTION_CLAIMS[pattern]()
