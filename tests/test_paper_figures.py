"""Every figure at both paper sizes: the width asked for, text of at least 8 pt, none of it off the canvas;
SVG text as text; the stability map and the robustness curves drawn from their values."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from figure_builders import SOURCE, figure_builders
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from evictlab.analysis import robustness, validation, zoo
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.workbench import loaders, plots
from evictlab.workbench.plots.style import MIN_TEXT_PT, PAPER_SIZES


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
    """(text, size in points, extent in pixels) of every text the renderer draws."""
    canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    drawn = []
    draw_text = renderer.draw_text

    def recording(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if mtext is not None and s.strip():
            drawn.append(mtext)
        return draw_text(gc, x, y, s, prop, angle, ismath, mtext)

    renderer.draw_text = recording
    canvas.draw()
    return [(text.get_text(), text.get_fontsize(), text.get_window_extent(renderer)) for text in dict.fromkeys(drawn)]


@pytest.mark.filterwarnings("error:constrained_layout not applied")
@pytest.mark.parametrize("size", list(PAPER_SIZES))
@pytest.mark.parametrize("name", sorted(figure_functions()))
def test_the_figure_fits_the_paper_width_with_readable_text_on_the_canvas(builders, name, size):
    fig = builders[name](size=size, source=SOURCE)
    assert fig.get_figwidth() == PAPER_SIZES[size]
    texts = drawn_texts(fig)
    assert texts, name
    width, height = fig.bbox.width, fig.bbox.height
    for text, points, extent in texts:
        assert points >= MIN_TEXT_PT, f"{name} ({size}): {text!r} at {points} pt"
        assert extent.x0 >= -1 and extent.y0 >= -1 and extent.x1 <= width + 1 and extent.y1 <= height + 1, (
            f"{name} ({size}): {text!r} leaves the canvas: {extent.bounds} of {width:.0f} x {height:.0f} px")


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
    assert len(panels) == 2  # no twin axis: retention and churn share one y axis and its zero
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
