"""The sweep, variant, explorer and zoo figures of :mod:`evictlab.workbench.plots`, checked against their data.

The notebooks that draw them are checked with the others in ``test_notebooks.py``.
"""

from __future__ import annotations

import html
import io
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.patches import PathPatch
from PIL import Image

from evictlab.analysis.diff import diff_specs
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.core.demo import DEMO_DATASET, DEMO_MANIFEST
from evictlab.core.runspec import RunSpec
from evictlab.selection.explain import explain
from evictlab.workbench import loaders, plots

SVG = "{http://www.w3.org/2000/svg}"
SOURCE = "longmemeval-demo.json (sha256 145cc9337f80, synthetic demo data), spec pr4810-final"


@pytest.fixture(scope="module")
def pool_set():
    return loaders.load_pool_set()


@pytest.fixture(scope="module")
def simplex(pool_set):
    grid = make_grid(weights_step=0.1, capacities=(5, 7), policies=["hybrid-v1"])
    return run_sweep({"pr4810-final": pool_set}, grid, progress=False).summary


def test_ternary_coordinates_put_each_weight_at_its_corner():
    corners = plots.ternary_xy(np.eye(3))
    assert np.allclose(corners, [[0.5, math.sqrt(3) / 2], [0, 0], [1, 0]])
    assert np.allclose(plots.ternary_xy([1 / 3, 1 / 3, 1 / 3]), [[0.5, math.sqrt(3) / 6]])
    assert plots.lattice_step([[0.5, 0.25, 0.25], [0.75, 0.0, 0.25]]) == 0.25
    with pytest.raises(ValueError, match="not on the simplex lattice"):
        plots.lattice_step([[0.5, 0.25, 0.25], [0.65, 0.25, 0.10]])


def test_control_losses_count_the_control_cases_lost(simplex):
    losses = plots.control_losses(simplex)
    assert len(losses) == simplex["setting"].nunique() * 2
    for row in losses.sample(20, random_state=0).itertuples():
        cells = simplex[(simplex["setting"] == row.setting) & (simplex["capacity"] == row.capacity)]
        controls = cells[cells["scenario"].isin(plots.CONTROL_SCENARIOS)]
        assert row.control_lost == (controls["cases"] - controls["support_retained"]).sum()
        assert row.retained == cells["support_retained"].sum() and row.cases == 45
        assert row.safe == (row.control_lost == 0)
    # Every weight on confidence loses no control case; every weight on access loses some.
    corner = losses[(losses["confidence_weight"] == 1.0)]
    assert corner["safe"].all()
    assert not losses[losses["access_weight"] == 1.0]["safe"].any()


def test_weight_simplex_maps_colour_every_cell_and_hatch_the_safe_region(simplex):
    fig = plots.weight_simplex_maps(simplex, 5)
    assert "capacity 5" in plots.figure_title(fig) and fig.legends
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split(" (")[0] for ax in panels] == [*plots.SCENARIOS, plots.ALL_CASES]
    safe = plots.control_losses(simplex).query("capacity == 5")
    settings = simplex["setting"].nunique()
    for ax in panels:
        cells = next(c for c in ax.collections if isinstance(c, PolyCollection))
        assert len(cells.get_array()) == settings and np.nanmax(cells.get_array()) <= 100
        hatch = next(p for p in ax.patches if isinstance(p, PathPatch))
        assert hatch.get_hatch() == "///"
        assert len(hatch.get_path().to_polygons()) == safe["safe"].sum()
        assert any(isinstance(c, LineCollection) for c in ax.collections)  # the outline
    all_cases = panels[-1]
    values = next(c for c in all_cases.collections if isinstance(c, PolyCollection)).get_array()
    expected = 100 * safe.sort_values("setting")["retained"].to_numpy() / 45
    assert np.allclose(values, expected)
    with pytest.raises(ValueError, match="no rows at capacity 6"):
        plots.weight_simplex_maps(simplex, 6)


def cielab(rgba) -> np.ndarray:
    """CIE L*a*b* (D65) of an sRGB colour, to measure how far apart two colours look."""
    rgb = np.asarray(rgba[:3], dtype=float)
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    x, y, z = xyz / np.array([0.95047, 1.0, 1.08883])
    f = lambda t: np.cbrt(t) if t > 0.008856 else 7.787 * t + 16 / 116  # noqa: E731
    return np.array([116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))])


@pytest.fixture(scope="module")
def fine_simplex(pool_set):
    """Step 0.05: DeerMem's (0.65, 0.25, 0.10) is a lattice point."""
    grid = make_grid(weights_step=0.05, capacities=(5,), policies=["hybrid-v1"])
    return run_sweep({"pr4810-final": pool_set}, grid, progress=False).summary


def test_the_deermem_mark_leaves_its_cell_visible_and_states_its_value(fine_simplex):
    fig = plots.weight_simplex_maps(fine_simplex, 5)
    panels = [ax for ax in fig.axes if ax.get_title()]
    at_default = fine_simplex[
        np.isclose(fine_simplex["confidence_weight"], 0.65) & np.isclose(fine_simplex["confirmation_weight"], 0.25)
    ]
    x, y = plots.ternary_xy(plots.DEERMEM_WEIGHTS)[0]
    for ax in panels:
        marks = [line for line in ax.get_lines() if np.allclose(line.get_xydata(), [[x, y]])]
        assert marks and all(line.get_markerfacecolor() == "none" for line in marks)  # a ring: the cell shows
        title = " ".join(ax.get_title().split())  # wrapped to the panel's width
        scenario = title.split(" (")[0]
        rows = at_default if scenario == plots.ALL_CASES else at_default[at_default["scenario"] == scenario]
        assert f"DeerMem default: {rows['support_retained'].sum()}/{rows['cases'].sum()} kept" in title
    assert "35/45" in panels[-1].get_title()  # the demo's capacity-5 total under hybrid-v1


def test_simplex_cells_are_cut_to_the_triangle_without_clip_paths(simplex):
    """The cells tile exactly the triangle, cut geometrically: a clip path would make the SVG
    writer spell out its transform once per cell."""
    ax = next(ax for ax in plots.weight_simplex_maps(simplex, 5).axes if ax.get_title())
    cells = next(c for c in ax.collections if isinstance(c, PolyCollection))
    outline = next(c for c in ax.collections if isinstance(c, LineCollection) and c.get_linewidths()[0] > 1)
    assert cells.get_clip_path() is None and outline.get_clip_path() is None
    height = math.sqrt(3) / 2
    area = 0.0
    for path in cells.get_paths():
        x, y = path.vertices[:, 0], path.vertices[:, 1]
        assert (y >= -1e-9).all() and (y <= height * (1 - np.abs(2 * x - 1)) + 1e-9).all()
        area += abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2
    assert area == pytest.approx(height / 2, rel=1e-6)  # the triangle, neither gaps nor overlaps
    for x, y in np.concatenate(outline.get_segments()):
        assert y >= -1e-9 and y <= height * (1 - abs(2 * x - 1)) + 1e-9


def test_the_colour_scale_sets_every_case_kept_apart_from_nearly_all(fine_simplex):
    all_cases = [ax for ax in plots.weight_simplex_maps(fine_simplex, 5).axes if ax.get_title()][-1]
    cells = next(c for c in all_cases.collections if isinstance(c, PolyCollection))
    colour = lambda share: cielab(cells.cmap(cells.norm(share)))  # noqa: E731
    for cases in (5, 10, 45):
        nearest = min(np.linalg.norm(colour(100 * kept / cases) - colour(100.0)) for kept in range(cases))
        assert nearest > 20, f"{cases - 1}/{cases} looks like {cases}/{cases} (delta E {nearest:.1f})"


def test_half_life_heatmaps_show_the_retained_counts(pool_set):
    grid = make_grid(confirmation_half_lives=[2, 30, 90], access_half_lives=[30, 90], capacities=[5],
                     policies=["hybrid-v1"])
    summary = run_sweep({"pr4810-final": pool_set}, grid, progress=False).summary
    fig = plots.half_life_heatmaps(summary, 5, source=SOURCE)
    assert plots.figure_title(fig).endswith(f"over the half-lives\n{SOURCE}")
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == 6 and all(ax.get_xlabel() for ax in panels)
    assert all(bool(ax.get_ylabel()) == (index % 3 == 0) for index, ax in enumerate(panels))  # the first column
    help_panel = panels[0]
    assert help_panel.get_title().startswith("confirmation_help")
    image = help_panel.get_images()[0].get_array()
    cells = summary[summary["scenario"] == "confirmation_help"].pivot_table(
        index="confirmation_half_life_days", columns="access_half_life_days", values="support_retained")
    assert np.allclose(image, 10 * cells.to_numpy())
    assert [t.get_text() for t in help_panel.texts] == [str(int(v)) for v in cells.to_numpy().ravel()]
    assert len(help_panel.patches) == 2  # DeerMem's (90, 30) outlined: white halo and black frame


def test_variant_cascade_tables_and_figure(pool_set):
    steps = [
        diff_specs(RunSpec.from_preset("pr4810-run1"), RunSpec.from_preset("pr4810-run2")).summary,
        diff_specs(RunSpec.from_preset("pr4810-run2"), RunSpec.from_preset("pr4810-final")).summary,
    ]
    changes = plots.cascade_changes(steps)
    assert list(dict.fromkeys(changes["step"])) == ["pr4810-run1 -> pr4810-run2", "pr4810-run2 -> pr4810-final"]
    last = changes[changes["step"] == "pr4810-run2 -> pr4810-final"].set_index("measure")
    assert last.loc["pools: other records or metadata", "changed"] == steps[1]["pools_changed"] == 0
    assert last.loc["kept sets, capacity 7", "changed"] == steps[1]["kept_sets_changed"]["7"]
    assert last.loc["answer prompts, capacity 7", "total"] == 90
    retention = plots.cascade_retention(steps)
    assert list(dict.fromkeys(retention["preset"])) == ["pr4810-run1", "pr4810-run2", "pr4810-final"]
    totals = retention.set_index(["preset", "policy", "capacity"])["retained"]
    assert totals[("pr4810-final", "confidence", 7)] == 27 and totals[("pr4810-run1", "hybrid-v1", 5)] == 35
    fig = plots.variant_cascade(changes, retention, source=SOURCE)
    assert plots.figure_title(fig) == f"Protocol variants: pr4810-run1 -> pr4810-run2 -> pr4810-final\n{SOURCE}"
    left, right = fig.axes
    assert len(left.patches) == len(changes) and fig.legends
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in (left, right))
    assert {t.get_text() for t in left.texts} >= {"45/45", "2/90"}


def test_explanation_figure_stacks_the_weighted_components(pool_set):
    case = pool_set.case("correction_language")
    params = pool_set.protocol.config.hybrid
    explanation = explain(case.facts, 5, policy="hybrid-v1", usage=case.usage,
                          now=pool_set.protocol.evaluation_time, params=params)
    frame = explanation.to_frame()
    weights = plots.score_weights("hybrid-v1", params)
    assert weights == {"confidence": 0.65, "confirmationFreshness": 0.25, "accessHeat": 0.1}
    assert plots.score_weights("lru", params) is None
    fig = plots.explanation_figure(frame, policy="hybrid-v1", capacity=5,
                                           support_fact_ids=case.support_fact_ids, weights=weights, source=SOURCE)
    ax = fig.axes[0]
    ordered = frame.sort_values("rank")
    # Stacked bars end at each fact's score.
    ends = {}
    for patch in ax.patches[: 3 * len(frame)]:
        y = round(patch.get_y() + patch.get_height() / 2)
        ends[y] = max(ends.get(y, 0.0), patch.get_x() + patch.get_width())
    assert np.allclose([ends[i] for i in range(len(frame))], ordered["score"])
    bold = [t.get_text() for t in ax.get_yticklabels() if t.get_fontweight() == "bold"]
    assert bold == [f"{case.support_fact_ids[0]} (reserved)"]
    # The cut line closes the facts kept on rank alone; the support's reserved slot is below it.
    (cut,) = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    above = ordered["status"].to_numpy()[: int(cut.get_ydata()[0] + 0.5)]
    assert set(above) == {"kept"} and len(above) == (ordered["status"] == "kept").sum()
    assert ordered.set_index("fact_id").loc[case.support_fact_ids[0], "rank"] > len(above)
    assert cut.get_label() == f"cut line: {len(above)} kept above it, 1 reserved below"
    assert "capacity 5" in plots.figure_title(fig) and plots.figure_title(fig).endswith(f"(support in bold)\n{SOURCE}")
    legend = fig.legends[0]
    swatch = legend.legend_handles[[text.get_text() for text in legend.get_texts()].index("evicted (hatched)")]
    # An opaque, outlined swatch: a translucent edgeless one renders as stray hatch marks.
    assert swatch.get_hatch() == "//" and swatch.get_linewidth() > 0 and swatch.get_alpha() in (None, 1)


def test_a_reserved_fact_ranked_above_the_cut_stays_above_it(pool_set):
    """A reserved slot goes to the best-ranked correction wherever it ranks: here rank 2, so the
    line still closes the four kept facts and no reserved fact lies below it."""
    facts = [{"id": f"f{index}", "confidence": 0.9 - index / 20, "createdAt": "2025-01-01T00:00:00Z",
              "category": "correction" if index == 1 else "context"} for index in range(7)]
    now = pool_set.protocol.evaluation_time
    frame = explain(facts, 4, policy="hybrid-v1", now=now, params=pool_set.protocol.config.hybrid).to_frame()
    assert list(frame["status"][:5]) == ["kept", "reserved", "kept", "kept", "evicted"]
    ax = plots.explanation_figure(frame, policy="hybrid-v1", capacity=4).axes[0]
    (cut,) = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert cut.get_ydata()[0] == 3.5 and cut.get_label() == "cut line: 4 kept above it"


def test_the_live_image_stays_right_after_the_figure_is_saved(tmp_path):
    from evictlab.workbench.widgets import Explorer

    explorer = Explorer(capacity=5)
    png, _ = plots.save(explorer.figure, tmp_path / "explorer")  # draws at another resolution
    explorer.set(capacity=6)
    fresh = Explorer(capacity=6, case_id=explorer.case_id)
    assert explorer.title.value == fresh.title.value
    assert bytes(explorer.image.value) == bytes(fresh.image.value)
    assert Path(png).read_bytes().startswith(b"\x89PNG")


def live_pixels(explorer) -> np.ndarray:
    with Image.open(io.BytesIO(bytes(explorer.image.value))) as image:
        return np.asarray(image.convert("RGB"), dtype=np.int16)


def test_the_live_frame_is_the_figure_as_matplotlib_draws_it():
    """The blitted frame (static raster + the changing artists drawn on it) shows what a full
    draw of the figure shows below its title; they differ only where a static artist lies on
    a changing one (a spine over a bar's end), which the frame draws underneath."""
    from evictlab.workbench.widgets import Explorer

    explorer = Explorer(capacity=5)
    explorer.set(policy="lru", capacity=7, case_id="04598720")
    figure = explorer._figure
    full = FigureCanvasAgg(figure.figure)
    full.draw()
    drawn = np.asarray(full.buffer_rgba())[figure._top:, :, :3].astype(np.int16)
    figure.figure.set_canvas(figure.canvas)
    live = live_pixels(explorer)
    assert live.shape == drawn.shape and live.shape[1] == round(11.5 * plots.EXPLORER_DPI)
    # JPEG at quality 95 stays within 8 % at edges; a misplaced artist differs far more.
    differing = np.abs(live - drawn).max(axis=2) > 24
    assert differing.mean() < 0.002, differing.mean()
    assert np.abs(live - drawn).mean() < 1
    # The frame follows a move: the bars of another capacity change many pixels.
    explorer.set(capacity=2)
    assert (np.abs(live_pixels(explorer) - live).max(axis=2) > 24).mean() > 0.01


def test_the_explorer_title_names_policy_and_capacity_and_fits_the_figure():
    """The live title is page text whose first line names the setting; the saved figure's title
    (the same lines) stays inside the figure even for the longest policy names and half-lives."""
    from evictlab.policies import known_policies
    from evictlab.workbench.widgets import Explorer

    policy = max(known_policies(), key=len)
    explorer = Explorer(capacity=5, preset="pr4810-run1")
    explorer.set(policy=policy, capacity=9, confirmation_half_life_days=3650.0, access_half_life_days=1.234)
    first = explorer.title.value.split("<br>")[0]
    assert first.endswith(f"><b>{policy} at capacity 9, preset pr4810-run1</b>")
    figure = explorer.figure
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    extent = figure.get_suptitle() and figure._suptitle.get_window_extent(canvas.get_renderer())
    assert extent.x0 >= 0 and extent.x1 <= figure.bbox.width and extent.y1 <= figure.bbox.height
    figure.set_canvas(explorer._figure.canvas)


def test_the_explorer_names_its_dataset_under_the_title(tmp_path):
    """The demo is named synthetic on the explorer's figure, through every move; a dataset the
    spec names is named by its file and hash instead, and not called synthetic."""
    from evictlab.workbench.widgets import Explorer

    explorer = Explorer(capacity=5)
    explorer.set(policy="lru", capacity=7)
    setting, weights, source = plots.figure_title(explorer.figure).split("\n")
    assert setting == "lru at capacity 7, preset pr4810-final" and weights.startswith("hybrid-v1 weights (0.65, ")
    assert source == "longmemeval-demo.json (sha256 145cc9337f80, synthetic demo data)"
    assert explorer.title.value.endswith("<br>" + html.escape(source) + "</div>")
    copy = tmp_path / "named.json"
    copy.write_bytes(DEMO_DATASET.read_bytes() + b"\n")  # valid rows under another hash
    spec = f"pr4810-final:dataset={copy},allow_unpinned=true,official_manifest={DEMO_MANIFEST}"
    with pytest.warns(UserWarning, match="not the pinned"):
        named = Explorer.from_spec(spec, capacity=5)
    source = plots.figure_title(named.figure).split("\n")[-1]
    assert source.startswith("named.json (sha256 ") and source.endswith(", unpinned)") and "synthetic" not in source
