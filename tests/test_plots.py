"""Figures: headless, titled and labelled, consistently coloured, and saved byte for byte the same."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from figure_builders import figure_builders
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from evictlab.analysis.qa import report as qa_report
from evictlab.policies import known_policies
from evictlab.workbench import loaders, plots


@pytest.fixture(scope="module")
def pool_set():
    return loaders.load_pool_set()


@pytest.fixture(scope="module")
def retention(pool_set):
    return loaders.retention(pool_set)


@pytest.fixture(scope="module")
def qa_rows():
    return qa_report.rows_frame(qa_report.load_reference_run().rows)


@pytest.fixture(scope="module")
def builders(tmp_path_factory):
    """Every figure function with real inputs: the demo pools and DeerFlow's published v3 run."""
    return figure_builders(tmp_path_factory.mktemp("figures"))


FIGURES = [
    "pool_overview", "pool_metadata", "evidence_lengths", "retention_by_scenario", "support_rank_distribution",
    "qa_accuracy", "qa_paired", "qa_grade_rules", "qa_tokens",
]


def labelled(ax, axis: str) -> bool:
    """The axes carries a label on ``axis``, or shares that axis with one that does."""
    get = "get_xlabel" if axis == "x" else "get_ylabel"
    shared = ax.get_shared_x_axes() if axis == "x" else ax.get_shared_y_axes()
    return any(getattr(other, get)() for other in shared.get_siblings(ax))


@pytest.mark.parametrize("name", FIGURES)
def test_figures_have_titles_labelled_axes_and_a_legend(builders, name):
    fig = builders[name]()
    assert isinstance(fig, Figure)
    assert plots.figure_title(fig), f"{name}: no figure title"
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert panels, f"{name}: no visible axes"
    for ax in panels:
        assert labelled(ax, "x"), f"{name}: panel {ax.get_title()!r} has no x label"
        assert labelled(ax, "y"), f"{name}: panel {ax.get_title()!r} has no y label"
    assert fig.legends or any(ax.get_legend() is not None for ax in fig.axes), f"{name}: no legend"


def test_figure_functions_need_no_pyplot_and_leave_rcparams_alone():
    # A fresh interpreter, so that no other test has imported pyplot already.
    code = (
        "import sys, matplotlib\n"
        "before = {k: matplotlib.rcParams[k] for k in ('font.size', 'axes.spines.top', 'svg.hashsalt')}\n"
        "from evictlab.workbench import plots\n"
        "import pandas as pd\n"
        "frame = pd.DataFrame({'case_id': ['a', 'a', 'b', 'b'], 'scenario': ['access_help'] * 4,"
        " 'policy': ['confidence', 'hybrid-v1'] * 2, 'capacity': [7] * 4,"
        " 'support_retained': [True, True, False, True], 'support_rank': [3, 1, 8, 2]})\n"
        "plots.retention_by_scenario(frame); plots.support_rank_distribution(frame)\n"
        "after = {k: matplotlib.rcParams[k] for k in before}\n"
        "assert before == after, (before, after)\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)


def test_policies_keep_their_colour_across_figures(builders):
    retention_fig = builders["retention_by_scenario"]()
    accuracy_fig = builders["qa_accuracy"]()
    hybrid = plots.policy_color("hybrid-v1")
    assert hybrid == plots.OKABE_ITO["blue"]
    assert plots.policy_color("confidence") == plots.OKABE_ITO["vermillion"]
    bar_colours = {to_hex(patch.get_facecolor()).upper() for ax in retention_fig.axes for patch in ax.patches}
    marker_colours = {to_hex(line.get_color()).upper() for ax in accuracy_fig.axes for line in ax.get_lines()}
    assert hybrid.upper() in bar_colours and hybrid.upper() in marker_colours
    assert plots.policy_color("confidence").upper() in bar_colours & marker_colours


def test_every_registered_policy_has_its_own_fixed_colour():
    policies = known_policies()
    assert set(policies) <= set(plots.POLICY_COLORS)
    colours = [plots.policy_color(p).upper() for p in policies]
    assert len(set(colours)) == len(colours), dict(zip(policies, colours))
    palette = {c.upper() for c in (*plots.OKABE_ITO.values(), *plots.OKABE_ITO_SHADES.values())}
    assert set(colours) <= palette


def test_unknown_policies_get_a_stable_palette_colour():
    colour = plots.policy_color("some-new-policy")
    assert colour in plots.OKABE_ITO.values()
    assert colour == plots.policy_color("some-new-policy")


def test_figure_modules_share_no_private_names():
    # Helpers shared between the figure modules live, public, in evictlab.workbench.plots.style.
    package = Path(plots.__file__).parent
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("evictlab")):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from {node.module}"


def test_scenario_and_policy_order():
    assert plots.scenario_order(["zeta", "correction_reserve", "access_help", "confirmation_help"]) == [
        "confirmation_help", "access_help", "correction_reserve", "zeta"]
    assert plots.policy_order(["lru", "hybrid-v1", "fifo", "confidence"]) == ["confidence", "hybrid-v1", "fifo", "lru"]


def test_retention_bars_carry_counts(builders):
    fig = builders["retention_by_scenario"]()
    texts = {text.get_text() for ax in fig.axes for text in ax.texts}
    assert {"20/45", "35/45", "27/45", "45/45"} <= texts
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles[-1] == f"{plots.ALL_CASES} (45 cases)"


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="support_retained"):
        plots.retention_by_scenario(pd.DataFrame({"scenario": ["x"], "policy": ["p"], "capacity": [7]}))
    with pytest.raises(ValueError, match="at least one row"):
        plots.qa_tokens(pd.DataFrame(columns=["scenario", "policy", "prompt_tokens", "completion_tokens"]))


def test_support_rank_distribution_refuses_an_absent_capacity(retention):
    with pytest.raises(ValueError, match="capacity 6"):
        plots.support_rank_distribution(retention, capacity=6)


def test_evidence_length_bins_never_straddle_the_inclusive_bank_bounds():
    cases = pd.DataFrame({"scenario": ["access_help"], "source": ["longmemeval"], "support_chars": [300]})
    lengths = [40, 41, 120, 350, 697, 700]
    bank = pd.DataFrame({"evidence_chars": lengths, "question_type": ["single-session-user"] * len(lengths)})
    ax = plots.evidence_lengths(cases, bank, bank_limits=(40, 700)).axes[1]
    edges = sorted(line.get_xdata()[0] for line in ax.get_lines())
    assert edges == [39.5, 700.5]  # records at exactly 40 and 700 lie inside the drawn bounds
    bars = [(patch.get_x(), patch.get_x() + patch.get_width(), patch.get_height()) for patch in ax.patches]
    assert all(not (left < edge < right) for left, right, _ in bars for edge in edges)
    for length in lengths:  # each record sits in a bin inside the bounds
        assert any(left <= length < right and left >= 39.5 and right <= 700.5 and height > 0
                   for left, right, height in bars)
    outside = plots.evidence_lengths(cases, pd.DataFrame({"evidence_chars": [10, 40, 700, 900],
                                                           "question_type": ["single-session-user"] * 4}),
                                     bank_limits=(40, 700)).axes[1]
    assert min(p.get_x() for p in outside.patches) <= 10
    assert max(p.get_x() + p.get_width() for p in outside.patches) > 900


def test_support_rank_distribution_hatches_supports_kept_by_a_reserved_slot(retention):
    fig = plots.support_rank_distribution(retention, capacity=7)
    panel = next(ax for ax in fig.axes if ax.get_title().startswith("correction_reserve"))
    hatched = [patch for patch in panel.patches if patch.get_hatch() and patch.get_height() > 0]
    expected = retention[(retention["capacity"] == 7) & retention["support_retained"] & (retention["support_rank"] > 7)]
    assert len(expected) == 4 and set(expected["policy"]) == {"hybrid-v1"}
    assert sum(patch.get_height() for patch in hatched) == len(expected)
    assert {round(patch.get_x() + patch.get_width() / 2) for patch in hatched} == set(expected["support_rank"])
    others = [ax for ax in fig.axes if ax.get_title() and not ax.get_title().startswith("correction_reserve")]
    assert not any(patch.get_hatch() for ax in others for patch in ax.patches)
    assert "kept by a reserved slot" in [text.get_text() for text in fig.legends[0].get_texts()]


def test_save_is_byte_deterministic(builders, tmp_path):
    first = plots.save(builders["retention_by_scenario"](), tmp_path / "a" / "figure")
    second = plots.save(builders["retention_by_scenario"](), tmp_path / "b" / "figure")
    assert [p.name for p in first] == ["figure.png", "figure.svg"]
    for one, other in zip(first, second):
        assert one.read_bytes() == other.read_bytes(), one.name
    # Saving one figure object twice gives the same bytes as well.
    fig = builders["qa_paired"]()
    once = [path.read_bytes() for path in plots.save(fig, tmp_path / "c")]
    twice = [path.read_bytes() for path in plots.save(fig, tmp_path / "d")]
    assert once == twice


def test_saved_files_carry_the_title_and_no_dates_or_versions(builders, tmp_path):
    png, svg = plots.save(builders["qa_tokens"](), tmp_path / "tokens")
    svg_text = svg.read_text(encoding="utf-8")
    assert "<dc:date>" not in svg_text and "<dc:creator>" not in svg_text
    assert "<dc:title>Token use of the answer requests</dc:title>" in svg_text
    from PIL import Image

    with Image.open(png) as image:
        assert image.format == "PNG"
        assert image.text == {"Title": "Token use of the answer requests"}


def test_a_figure_is_laid_out_once_for_both_files(builders, tmp_path, monkeypatch):
    """One layout serves the PNG and the SVG; the PNG is the raster savefig would draw, and the
    figure comes back with its own layout engine, resolution and canvas."""
    import io

    import numpy as np
    from PIL import Image

    reference = io.BytesIO()
    builders["retention_by_scenario"]().savefig(reference, format="png", dpi=plots.FIGURE_DPI)
    fig = builders["retention_by_scenario"]()
    engine, dpi, canvas = fig.get_layout_engine(), fig.dpi, fig.canvas
    layouts = []
    original = engine.execute
    monkeypatch.setattr(engine, "execute", lambda figure: (layouts.append(figure), original(figure))[1])
    png, svg = plots.save(fig, tmp_path / "figure")
    assert len(layouts) == 1
    assert (fig.get_layout_engine(), fig.dpi, fig.canvas) == (engine, dpi, canvas)
    with Image.open(png) as saved, Image.open(reference) as drawn:
        assert np.array_equal(np.asarray(saved), np.asarray(drawn))
    assert svg.read_text(encoding="utf-8").startswith("<?xml")


def test_save_wants_a_path_without_suffix(builders, tmp_path):
    with pytest.raises(ValueError, match="without a suffix"):
        plots.save(builders["qa_tokens"](), tmp_path / "tokens.png")


def test_save_into_writes_only_when_given_a_folder(builders, tmp_path):
    fig = builders["qa_grade_rules"]()
    assert plots.save_into(fig, None, "rules") is fig
    assert not any(tmp_path.iterdir())
    saved = plots.save_into(fig, tmp_path / "figures", "rules")
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["rules.png", "rules.svg"]
    # Displayed from the file just written: the notebook does not draw the figure again.
    png, size = saved._repr_png_()
    assert saved.figure is fig and png == (tmp_path / "figures" / "rules.png").read_bytes()
    assert size == {"width": round(fig.get_size_inches()[0] * 100), "height": round(fig.get_size_inches()[1] * 100)}


def test_saving_restores_the_svg_salt(builders, tmp_path):
    before = matplotlib.rcParams["svg.hashsalt"]
    plots.save(builders["qa_grade_rules"](), tmp_path / "rules")
    assert matplotlib.rcParams["svg.hashsalt"] == before


def test_the_source_goes_under_the_title(qa_rows):
    fig = plots.qa_grade_rules(qa_rows, source="DeerFlow's published run v3 (PR #4810)")
    assert plots.figure_title(fig) == "Grader rule that decided each answer\nDeerFlow's published run v3 (PR #4810)"


@pytest.mark.parametrize("name", FIGURES)
def test_each_figure_puts_its_source_on_a_line_under_the_title(builders, name):
    source = "longmemeval-demo.json (sha256 145cc9337f80, synthetic demo data), spec pr4810-final"
    assert plots.figure_title(builders[name](source=source)) == f"{plots.figure_title(builders[name]())}\n{source}"


def test_every_figure_function_takes_a_source():
    """A figure drawn without saying where its data comes from cannot be asked for one: every
    public function returning a Figure, and the explorer's figure, accept ``source``."""
    functions = [name for name in plots.__all__ if callable(getattr(plots, name))]
    figures = [name for name in functions
               if inspect.signature(getattr(plots, name)).return_annotation in ("Figure", Figure)]
    assert {"half_life_heatmaps", "capacity_curves", "variant_cascade", "explanation_figure"} <= set(figures)
    for name in figures:
        assert "source" in inspect.signature(getattr(plots, name)).parameters, f"{name} takes no source"
    for method in (plots.ExplorerFigure.__init__, plots.ExplorerFigure.update):
        assert "source" in inspect.signature(method).parameters, method
