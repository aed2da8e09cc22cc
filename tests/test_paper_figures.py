"""Every figure at both paper sizes: the width asked for, text of at least 8 pt, none of it off the canvas
or crowding another; SVG text as text; captions and titles against their data; the stability map and the
robustness curves drawn from their values."""

from __future__ import annotations

import inspect
import itertools
import re
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from figure_builders import SOURCE, figure_builders
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from scipy import stats

from evictlab.analysis import robustness, validation, zoo
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.analysis.traces import inference, metrics, study
from evictlab.policies import PolicyParams, known_policies
from evictlab.workbench import loaders, plots, report, report_document
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


@pytest.mark.filterwarnings("error:constrained_layout not applied")
@pytest.mark.parametrize("size", list(PAPER_SIZES))
@pytest.mark.parametrize("name", sorted(figure_functions()))
def test_the_figure_fits_the_paper_width_with_readable_text_on_the_canvas(builders, name, size):
    """The width asked for, text of at least 8 pt, none of it off the canvas, running into another
    text or out of its panel."""
    fig = builders[name](size=size, source=SOURCE)
    assert fig.get_figwidth() == PAPER_SIZES[size]
    texts = drawn_texts(fig)
    assert texts, name
    width, height = fig.bbox.width, fig.bbox.height
    for text, points, extent in texts:
        assert points >= MIN_TEXT_PT, f"{name} ({size}): {text!r} at {points} pt"
        assert extent.x0 >= -1 and extent.y0 >= -1 and extent.x1 <= width + 1 and extent.y1 <= height + 1, (
            f"{name} ({size}): {text!r} leaves the canvas: {extent.bounds} of {width:.0f} x {height:.0f} px")
    assert crowding(fig, texts) == [], f"{name} ({size})"


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
    loss_rank_is_the_confidence_rank()


def loss_rank_is_the_confidence_rank():
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


def claim_trace_bounds(builders):
    """10_capacity_curves: the bounds drawn, what each curve counts as answerable (the policies' and
    keep-all's fact shown to the model under the injection stage, the optimum's and the rate-aware bound's in
    memory: they replay no injection stage), and the best baseline chosen "at the capacity the title states"."""
    stated = caption("10_capacity_curves")
    assert "keep-all, the exact offline optimum and the rate-aware bound" in stated
    assert ("A policy's question (and keep-all's) counts as answerable when its needed fact is kept and, with the"
            " injection stage, shown to the model (the y label says which); the optimum's and the rate-aware"
            " bound's when it is in memory: they replay no injection stage.") in stated
    # The rate-aware bound runs without injection; the optimum takes no stages by construction
    # (offline_optimum reads the outline, no lifecycle).
    assert "injection" not in metrics.RATE_AWARE_STAGES
    summary = builders["trace_capacity_curves"].args[0]
    for injection, needed in ((True, "needed fact shown to the model"), (False, "needed fact in memory")):
        fig = plots.trace_capacity_curves(summary, injection=injection)
        assert " ".join(fig.axes[0].get_ylabel().split()) == f"answerable rate ({needed})"
        bounds = {" ".join(line.get_label().split()) for line in fig.axes[0].get_lines()} & set(BOUND_LABELS)
        assert bounds == {"exact offline optimum (fact in memory)", "rate-aware bound (fact in memory)",
                          "keep-all (no cap)"}
    assert "the best baseline (the other policy with the highest mean answerable rate at the capacity the title" \
        " states: DeerMem's default, 100, where the paired findings choose theirs, when it was replayed)" in stated
    assert inference.FINDING_CAPACITY == 100


def claim_rank_line_and_reserved_slots(builders):
    """02_support_rank_distribution: right of the dashed line "evicted at that capacity", unless a reserved slot
    keeps it."""
    assert "Right of the dashed line it is evicted at that capacity; hatched bars are supports kept anyway by a" \
        " reserved correction slot" in caption("02_support_rank_distribution")
    frame = builders["support_rank_distribution"].args[0]
    beyond = frame[frame["support_rank"] > frame["capacity"]]
    assert len(beyond) and not beyond.loc[beyond["reserved_correction_slots"] == 0, "support_retained"].any()
    assert beyond.loc[beyond["support_retained"], "scenario"].eq("correction_reserve").all()


def claim_half_life_cells(builders):
    """04_half_lives_*: cells labelled with the supports kept, at "the weights the title states" (its title claim)."""
    assert "labelled with the supports kept (of the cases its panel title states)" in caption("04_half_lives_k5")
    build = builders["half_life_heatmaps"]
    summary, capacity = build.args
    fig = build()
    at = summary[(summary["capacity"] == capacity) & (summary["scenario"] == "access_help")]
    panel = next(ax for ax in fig.axes if ax.get_title().startswith("access_help"))
    assert sorted(int(text.get_text()) for text in panel.texts) == sorted(at["support_retained"].astype(int))


def claim_every_policy_one_line_each(builders):
    """04_capacity_curves: "every registered policy", equal values on one line, the bounds dashed."""
    assert "for every registered policy" in caption("04_capacity_curves") and "the bounds are dashed" in caption(
        "04_capacity_curves")
    build = builders["capacity_curves"]
    summary = build.args[0]
    fig = build()
    assert set(summary["policy"]) == set(known_policies())  # the notebook's zoo_rows ran every one
    roles = summary.drop_duplicates("policy").set_index("policy")["role"]
    drawn = set()
    for line in fig.axes[0].get_lines():
        names = [re.sub(r" \(.*\)$", "", name) for name in " ".join(line.get_label().split()).split(" = ")]
        assert (line.get_linestyle() != "-") == (roles[names[0]] == "bound"), names
        drawn.update(names)
    assert drawn == set(known_policies())  # each one on a line of the figure


def claim_presets_named(builders):
    """05_variant_cascade: "the presets the figure names, in order" (its title claim checks the order)."""
    assert "(the presets the figure names, in order)" in caption("05_variant_cascade")
    title_variant_cascade(builders["variant_cascade"])


def claim_the_loss_map_policies(builders):
    """10_loss_map: "hybrid-v1 answers fewer questions than confidence", as the figure's title."""
    assert "hybrid-v1 answers fewer questions than confidence" in caption("10_loss_map")
    title_loss_map_figure(builders["loss_map_figure"])


def claim_stage_bars(builders):
    """10_stage_losses: "for DeerMem's two policies, the best baseline of the capacity curves and keep-all; each
    bar sums to 1" (the notebook names the figure's own choice, :func:`plots.best_baseline`)."""
    stated = "for DeerMem's two policies, the best baseline of the capacity curves and keep-all; each bar sums to 1"
    assert stated in caption("10_stage_losses")
    notebook = (report.NOTEBOOK_DIR / "10_traces.ipynb").read_text()
    assert 'shown = [\\"confidence\\", \\"hybrid-v1\\", plots.best_baseline(summary), \\"keep-all\\"]' in notebook
    title_stage_losses(builders["stage_losses"])


# --------------------------------------------------------------------------- titles against their data


def titles(fig: Figure) -> list[str]:
    """The figure's title as written (before wrapping) and its panels' titles, each on one line."""
    texts = [plots.figure_title(fig) if fig.get_suptitle() else ""]
    texts += [ax.get_title(loc) for ax in fig.axes if ax.get_visible() for loc in ("center", "left", "right")]
    return [" ".join(text.split()) for text in texts if text.strip()]


def panel_cases(fig: Figure) -> dict[str, int]:
    """``{group: n}`` of the panels titled "group (n cases)" or "group (retained of n cases)"."""
    found = (re.match(r"(\S+(?: cases)?) \((?:retained of )?(\d+) cases\)", title) for title in titles(fig))
    return {match[1]: int(match[2]) for match in found if match}


def cases_of(frame, column: str | None = None) -> dict[str, int]:
    """Cases per scenario and in all, as distinct ``case_id`` values or from a ``cases`` column."""
    if column is None:
        return {**frame.groupby("scenario")["case_id"].nunique().to_dict(), style.ALL_CASES: frame["case_id"].nunique()}
    counts = frame[frame["scenario"] != style.ALL_CASES].groupby("scenario")[column].first().astype(int).to_dict()
    return {**counts, style.ALL_CASES: sum(counts.values())}


def legend_entries(fig: Figure, aliases: dict[str, str] | None = None) -> list[list[str]]:
    """The names each legend entry of ``fig`` stands for (``a (role) = b (role)`` -> ``[a, b]``; a
    label in ``aliases`` is replaced by its name)."""
    labels = (" ".join(text.get_text().split()) for legend in fig.legends for text in legend.get_texts())
    aliases = aliases or {}
    return [[aliases.get(name, re.sub(r" \(.*\)$", "", name)) for name in label.split(" = ")] for label in labels]


def check_one_entry_per_line(fig: Figure, frame, keys: list[str], values: list[str],
                             aliases: dict[str, str] | None = None) -> None:
    """Each policy of ``frame`` named in exactly one legend entry of ``fig``, and an entry naming several
    only where their curves (``values`` over ``keys``) are identical, as every such pair must be."""
    curves = {str(name): tuple(map(tuple, rows.sort_values(keys)[values].to_numpy()))
              for name, rows in frame.groupby("policy")}
    entries = [members for members in legend_entries(fig, aliases) if set(members) <= set(curves)]
    named = [name for members in entries for name in members]
    assert sorted(named) == sorted(curves), f"policies named in no or in two legend entries: {entries}"
    entry = {name: index for index, members in enumerate(entries) for name in members}
    for first, second in itertools.combinations(named, 2):
        same = curves[first] == curves[second]
        assert same == (entry[first] == entry[second]), (
            f"{first} and {second}: {'identical curves in two entries' if same else 'different curves in one entry'}")


def title_pool_overview(build):
    """"The N prepared cases" counts the cases drawn; the loss-rank panel names the policy that ranks."""
    cases = build.args[0]
    assert titles(build())[:3] == [f"The {len(cases)} prepared cases", "Cases per scenario, by question type",
                                   "Loss rank: the support's rank under the confidence policy"]
    assert titles(build.func(cases.iloc[:30]))[0] == "The 30 prepared cases"
    loss_rank_is_the_confidence_rank()


def title_pool_metadata(build):
    """"confidence and freshness signals" of "every pool": a mark per fact, a row per case, x the confidence."""
    facts = build.args[0]
    fig = build()
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert sum(len(ax.get_yticks()) for ax in panels) == facts["case_id"].nunique()
    assert sum(len(c.get_offsets()) for ax in panels for c in ax.collections) == len(facts)
    assert all(ax.get_xlabel().startswith("confidence") for ax in panels)


def title_evidence_lengths(build):
    """"Distractor bank (N records)" counts the bank; "bar = median" is each scenario's median support length."""
    cases, bank = build.args
    fig = build()
    assert f"Distractor bank ({len(bank)} records)" in titles(fig)
    official = cases[cases["source"] == "longmemeval"]
    medians = official.groupby("scenario")["support_chars"].median()
    bars = [segment[0][1] for c in fig.axes[0].collections if isinstance(c, LineCollection)
            for segment in c.get_segments()]
    assert sorted(bars) == sorted(medians.to_list())


def title_retention_by_scenario(build):
    """Each panel's "(N cases)" counts the cases of its scenario, also for a subset of them."""
    frame = build.args[0]
    assert panel_cases(build()) == cases_of(frame)
    fewer = frame[frame["case_id"].isin(frame["case_id"].unique()[::3])]
    assert panel_cases(build.func(fewer)) == cases_of(fewer)


def title_support_rank_distribution(build):
    """The panels' case counts, and "(dashed line: capacity K)": K is a capacity of the frame, the line at K + 0.5."""
    frame = build.args[0]
    fig = build()
    counts = cases_of(frame)
    del counts[style.ALL_CASES]
    assert panel_cases(fig) == counts
    capacity = int(re.search(r"\(dashed line: capacity (\d+)\)", titles(fig)[0])[1])
    assert capacity in set(frame["capacity"])
    dashed = {line.get_xdata()[0] for ax in fig.axes for line in ax.get_lines() if line.get_linestyle() == "--"}
    assert dashed == {capacity + 0.5}


def title_capacity_curves(build):
    """The panels' case counts, and "(a = b: equal values in every panel, one line)"."""
    summary = build.args[0]
    fig = build()
    assert panel_cases(fig) == cases_of(summary, "cases")
    check_one_entry_per_line(fig, summary, ["scenario", "capacity"], ["scenario", "capacity", "retained", "cases"])


def title_weight_simplex_maps(build):
    """Policy, capacity, lattice step and half-lives of the sweep; DeerMem's default weights (the ring, the
    legend) and its value per panel, off the lattice (the default) and on it."""
    summary, capacity = build.args
    fig = build()
    title = titles(fig)[0]
    (policy,) = summary["policy"].unique()
    step = 1 / (summary["confidence_weight"].nunique() - 1)
    (confirmation,), (access,) = (summary[f"{n}_half_life_days"].unique() for n in ("confirmation", "access"))
    assert title.startswith(f"{policy} at capacity {capacity}: ")
    assert f"lattice step {step:g}; half-lives {confirmation:g} / {access:g} days" in title
    default = PolicyParams().weights
    check_the_marked_weights(fig, summary, capacity, default, kept_at_marked=None)  # (0.65, 0.25, 0.1): off it
    on_lattice = (0.5, 0.25, 0.25)
    check_the_marked_weights(build(marked=on_lattice), summary, capacity, on_lattice, kept_at_marked=True)


def check_the_marked_weights(fig: Figure, summary, capacity: int, marked: tuple[float, float, float], *,
                             kept_at_marked: bool | None) -> None:
    """Each panel's ring at ``marked`` (confidence at the top corner, confirmation bottom left, access
    bottom right), the legend naming ``marked``, and each panel title's "DeerMem default: k/n kept" the
    supports the summary keeps at ``marked`` (``kept_at_marked``: True on the lattice, None off it)."""
    corners = np.array([[0.5, np.sqrt(3) / 2], [0.0, 0.0], [1.0, 0.0]])
    ring = np.asarray(marked) @ corners
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    for ax in panels:
        (drawn,) = [line for line in ax.get_lines()
                    if line.get_marker() == "o" and line.get_markerfacecolor() == "none"]
        assert np.allclose([drawn.get_xdata()[0], drawn.get_ydata()[0]], ring), ax.get_title()
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    assert f"DeerMem default {tuple(float(w) for w in marked)}" in legend
    at = summary[(summary["capacity"] == capacity)
                 & np.all(np.isclose(summary[list(plots.WEIGHT_COLUMNS)], marked), axis=1)]
    assert (len(at) > 0) == bool(kept_at_marked)
    kept = {**at.groupby("scenario")["support_retained"].sum(), style.ALL_CASES: at["support_retained"].sum()}
    cases = cases_of(summary, "cases")
    assert [" ".join(ax.get_title().split()) for ax in panels] == [
        f"{group} ({n} cases) DeerMem default: " + (f"{kept[group]}/{n} kept" if len(at) else "not on the lattice")
        for group, n in cases.items()]


def title_stability_maps(build):
    """One "capacity K" panel per capacity of the data, and "(all cases)": every case counted in each range."""
    stability = build.args[0]
    assert titles(build())[1:] == [f"capacity {c}" for c in sorted(stability["capacity"].unique())]
    assert set(stability["cases"]) == {len(loaders.cases_frame(loaders.load_pool_set()))}


def title_half_life_heatmaps(build):
    """Policy, capacity and weights of the sweep, the panels' case counts, DeerMem's default half-lives."""
    summary, capacity = build.args
    fig = build()
    (policy,) = summary["policy"].unique()
    weights = tuple(float(summary[column].unique().item()) for column in plots.WEIGHT_COLUMNS)
    assert titles(fig)[0].startswith(f"{policy} at capacity {capacity} with weights {weights}: ")
    assert panel_cases(fig) == cases_of(summary, "cases")
    params = PolicyParams()
    default = (f"{params.confirmation_half_life_days:g}", f"{params.access_half_life_days:g}")
    assert legend_entries(fig) == [[f"DeerMem default: confirmation {default[0]} days, access {default[1]} days"]]
    for ax in (ax for ax in fig.axes if ax.get_visible() and ax.get_title()):  # the outlined cell: the default's
        outlined = {(round(patch.get_x() + 0.5), round(patch.get_y() + 0.5)) for patch in ax.patches
                    if isinstance(patch, Rectangle) and not patch.get_fill()}
        access = [label.get_text() for label in ax.get_xticklabels()]
        confirmation = [label.get_text() for label in ax.get_yticklabels()]
        assert {(confirmation[i], access[j]) for j, i in outlined} == {default}, ax.get_title()


def title_variant_cascade(build):
    """"Protocol variants: a -> b -> c": the presets retained, in the order of the steps compared."""
    changes, retention = build.args
    presets = list(dict.fromkeys(retention["preset"]))
    assert titles(build())[0] == "Protocol variants: " + " -> ".join(presets)
    assert list(dict.fromkeys(changes["step"])) == [f"{a} -> {b}" for a, b in itertools.pairwise(presets)]


def title_explanation_figure(build):
    """Policy, capacity and case of the title: the capacity facts kept; the legend's weights the protocol's,
    under which the scores are the weighted sums the bars draw."""
    frame, options = build.args[0], build.keywords
    fig = build()
    title = titles(fig)[0]
    assert f": {options['policy']} at capacity {options['capacity']}, {options['case_label']} " in title
    assert int(frame["kept"].sum()) == options["capacity"]
    weights = plots.score_weights(options["policy"], loaders.load_pool_set().protocol.config.hybrid)
    legend = [text.get_text() for legend in fig.legends for text in legend.get_texts()]
    assert [f"{weight:g} x {name}" for name, weight in weights.items()] == [text for text in legend if " x " in text]
    weighted = sum(weight * frame[name] for name, weight in weights.items())
    assert np.allclose(weighted, frame["score"])
    ends: dict[float, float] = {}  # each fact's stacked bars end at its score (the hatched overlay is the score too)
    for bar in fig.axes[0].patches:
        centre = round(bar.get_y() + bar.get_height() / 2, 6)
        ends[centre] = max(ends.get(centre, -np.inf), bar.get_x() + bar.get_width())
    assert np.allclose([ends[rank] for rank in range(len(frame))], frame.sort_values("rank")["score"])
    assert set(options["support_fact_ids"]) <= set(frame["fact_id"])


def title_qa_accuracy(build):
    """"95% Wilson confidence intervals": each drawn interval (its error bar, in percent) is the Wilson score
    interval at that level of its cases."""
    accuracy = build.args[0]
    (method,), (alpha,) = accuracy["method"].unique(), accuracy["alpha"].unique()
    assert (method, alpha) == ("wilson", 0.05)
    fig = build()
    assert titles(fig)[0] == "QA accuracy with 95% Wilson confidence intervals"
    z, n, p = stats.norm.ppf(1 - alpha / 2), accuracy["cases"], accuracy["correct"] / accuracy["cases"]
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    wilson = sorted(zip(np.round(100 * (centre - half), 9), np.round(100 * (centre + half), 9)))
    drawn = sorted((round(segment[:, 0].min(), 9), round(segment[:, 0].max(), 9)) for ax in fig.axes
                   for container in ax.containers if isinstance(container, ErrorbarContainer)
                   for bars in container.lines[2] for segment in bars.get_segments())
    assert drawn == wilson


def title_qa_paired(build):
    """The two policies compared, the bootstrap's level, and the exact McNemar p drawn beside each suite."""
    frame = build.args[0]
    found = titles(build())
    (first,), (second,), (alpha,) = (frame[column].unique() for column in ("first_policy", "second_policy", "alpha"))
    assert found[0] == f"{second} vs {first} on the same cases"
    assert f"Paired bootstrap, {round(100 * (1 - alpha))}% percentile interval" in found
    assert "Paired outcomes per case (exact McNemar test)" in found
    suites = [label.get_text() for label in build().axes[0].get_yticklabels()]
    assert len(suites) == len(frame)
    for row, label in zip(frame.itertuples(), suites):  # the p drawn beside each suite: McNemar's exact p
        discordant = row.only_first_correct + row.only_second_correct
        cases = discordant + row.both_correct + row.both_wrong
        drawn = re.fullmatch(rf"{re.escape(row.suite)}\n\(n={cases}, McNemar p=([0-9.e+-]+)\)", label)
        assert drawn, label
        exact = stats.binomtest(row.only_first_correct, discordant, 0.5).pvalue
        assert np.isclose(float(drawn[1]), exact, rtol=0.05, atol=5e-5), (label, exact)


def title_qa_tokens(build):
    """"(sum: policy N, ...)": each policy's total tokens of that kind."""
    rows = build.args[0]
    for title, column in zip(titles(build())[1:], ("prompt_tokens", "completion_tokens")):
        stated = {name: int(count.replace(",", "")) for name, count in re.findall(r"([\w-]+) ([\d,]+)", title)}
        assert stated == rows.groupby("policy")[column].sum().astype(int).to_dict()


def title_zoo_heatmap(build):
    """The seeds a policy is averaged over, and which policies break ties by input order."""
    summary = build.args[0]
    title = titles(build())[0]
    seeds = summary.groupby("policy")["seeds"].max()
    for policy, count in seeds.items():
        assert (f"; {policy}: mean over {count} seeds" in title) == (count > 1), policy
    rows = zoo.zoo_rows(loaders.load_pool_set(), capacities=(5,), seeds=range(2))
    by_order = list(dict.fromkeys(rows.loc[rows["tie_break"] == "input-order", "policy"]))
    assert by_order and f"({', '.join(by_order)} break ties by input order; the others" in title
    rows = rows[~rows["policy"].isin(["confidence", "hybrid-v1"])]  # without them the sentence changes with the data
    title = titles(build.func(zoo.zoo_summary(rows)))[0]
    assert "(every policy reports the expectation over tie orders)" in title


def title_robustness_curves(build):
    """"Robustness at capacity K": curves of that capacity; "95% of single seeds (band)": robustness's quantiles."""
    curves, capacity = build.args
    title = titles(build())[0]
    assert title.startswith(f"Robustness at capacity {capacity}: ") and capacity in set(curves["capacity"])
    low, high = robustness.QUANTILES
    assert f"{round(100 * (high - low))}% of single seeds (band)" in title


def title_shadow_figure(build):
    """"disagreement P% of N events": the months' disagreeing events over all of them."""
    summary = build.args[0]
    events = sum(month["events"] for month in summary["months"])
    disagreeing = sum(month["disagreeing"] for month in summary["months"])
    assert f"disagreement {100 * disagreeing / events:.0f}% of {events} events" in titles(build())


def title_study_advantage(build):
    """"over confidence" and "bar: 10th-90th percentile": each bar spans a policy's p10 to p90 against that baseline."""
    summary = build.args[0]
    fig = build()
    assert titles(fig)[0].startswith("Answerable-rate advantage over confidence bar: 10th-90th percentile")
    assert (study.PERCENTILES[0], study.PERCENTILES[-1]) == (10, 90)
    drawn = sorted(tuple(np.round(segment[:, 1], 9)) for c in fig.axes[0].collections
                   if isinstance(c, LineCollection) for segment in c.get_segments())
    others = summary[summary["policy"] != "confidence"]
    spans = sorted(zip(*(np.round(others[f"advantage_vs_confidence_{p}"], 9) for p in ("p10", "p90"))))
    assert drawn == spans


def title_loss_map_figure(build):
    """"Where hybrid-v1 answers fewer questions than confidence": the map drawn is the loss map of those two."""
    rows, x, y = build.args
    fig = build()
    assert titles(fig)[0] == "Where hybrid-v1 answers fewer questions than confidence"
    (image,) = fig.axes[0].get_images()
    expected = study.loss_map(rows, x, y, policy="hybrid-v1", baseline="confidence").to_numpy(dtype=float)
    assert np.array_equal(np.asarray(image.get_array()), expected, equal_nan=True)
    flipped = study.loss_map(rows, x, y, policy="confidence", baseline="hybrid-v1").to_numpy(dtype=float)
    assert not np.array_equal(expected, flipped, equal_nan=True)


def title_stage_losses(build):
    """A panel per policy of the table, a bar per capacity, each bar's stages summing to 1."""
    table = build.args[0]
    fig = build()
    assert titles(fig)[1:] == style.policy_order(table["policy"].unique())
    capacities = [str(c) for c in sorted(table["capacity"].unique())]
    for ax in fig.axes[: table["policy"].nunique()]:
        assert [tick.get_text() for tick in ax.get_xticklabels()] == capacities
        tops = {}
        for bar in ax.patches:
            tops[round(bar.get_x(), 6)] = max(tops.get(round(bar.get_x(), 6), 0.0), bar.get_y() + bar.get_height())
        assert np.allclose(list(tops.values()), 1.0)


BOUND_LABELS = {label: name for name, (*_, label) in plot_traces.BOUND_STYLES.items()}


def check_intervals_apart(fig: Figure) -> int:
    """No two interval bars of one panel touch (bars of different policies, in pixels, their widths
    included); the number of bars."""
    FigureCanvasAgg(fig).draw()
    bars = 0
    for ax in fig.axes:
        drawn = [(collection.get_linewidth()[0] * fig.dpi / 72, ax.transData.transform(segment))
                 for collection in ax.collections if isinstance(collection, LineCollection)
                 for segment in collection.get_segments()]
        bars += len(drawn)
        for (width, first), (other, second) in itertools.combinations(drawn, 2):
            apart = abs(first[0, 0] - second[0, 0]) > (width + other) / 2
            below = max(first[:, 1].min(), second[:, 1].min()) > min(first[:, 1].max(), second[:, 1].max())
            assert apart or below, f"interval bars overlap in {ax.get_ylabel()!r}: {first.tolist()}, {second.tolist()}"
    return bars


def title_trace_capacity_curves(build):
    """The traces and the 95 % intervals of the title, the best baseline named and where it was chosen,
    strong and faint lines, one legend entry per line (bounds too), and interval bars that never overlap."""
    summary = build.args[0]
    fig = build()
    traces = int(summary["traces"].max())
    assert traces > 1 and f"(mean over {traces} traces; bars: 95 % bootstrap intervals, side by side)" in titles(fig)[0]
    assert inference.LEVEL == 0.95
    policies = summary[~summary["policy"].isin(plot_traces.BOUND_NAMES)]
    best = check_best_baseline(fig, policies)
    labels = {" ".join(line.get_label().split()): line for line in fig.axes[0].get_lines()}
    for label, line in labels.items():
        strong = all(name in ("confidence", "hybrid-v1", f"{best} (best baseline)", *BOUND_LABELS)
                     for name in label.split(" = "))
        assert (line.get_alpha() is None) == strong and (line.get_linewidth() >= 1.6) == strong, label
    check_one_entry_per_line(fig, policies, ["capacity"], ["capacity", "answerable_rate", "stale_kept_rate"])
    check_one_entry_per_line(fig, summary[summary["policy"].isin(plot_traces.BOUND_NAMES)], ["capacity"],
                             ["capacity", "answerable_rate"], BOUND_LABELS)
    assert check_intervals_apart(fig) == 2 * 3 * summary["capacity"].nunique()  # two panels, three strong policies


def check_best_baseline(fig: Figure, policies: pd.DataFrame) -> str:
    """The policy the figure names "(best baseline)", and where its title says it was chosen: the rule of the
    paired findings (:func:`inference.best_baseline`) at that capacity or over every capacity."""
    scope = re.search(r"the best baseline \(chosen (at capacity (\d+)|over every capacity)\)", titles(fig)[0])
    assert scope, titles(fig)[0]
    capacity = int(scope[2]) if scope[2] else None
    assert (capacity is None) == (inference.FINDING_CAPACITY not in set(policies["capacity"]))
    assert capacity in (None, inference.FINDING_CAPACITY)
    best = inference.best_baseline(policies, capacity)
    legend = [" ".join(text.get_text().split()) for legend in fig.legends for text in legend.get_texts()]
    named = [label.removesuffix(" (best baseline)").split(" = ") for label in legend if "(best baseline)" in label]
    assert len(named) == 1 and best in named[0], legend
    return best


def test_the_best_baseline_is_chosen_at_the_findings_capacity_when_it_is_drawn(builders):
    """At capacity 100 the paired findings' best other policy (fifo here), over every capacity when 100 is
    not drawn (lru here): the title says which, the legend names it, the notebook's stage panels take it."""
    summary = builders["trace_capacity_curves"].args[0]
    at_100 = summary.assign(capacity=summary["capacity"].replace({50: inference.FINDING_CAPACITY}))
    rate = np.select([(at_100["policy"] == "fifo") & (at_100["capacity"] == 10),
                      (at_100["policy"] == "fifo"), (at_100["policy"] == "lru") & (at_100["capacity"] == 10),
                      (at_100["policy"] == "lru")], [0.0, 0.7, 0.9, 0.6], at_100["answerable_rate"])
    at_100 = at_100.assign(answerable_rate=rate)
    policies = at_100[~at_100["policy"].isin(plot_traces.BOUND_NAMES)]
    fig = plots.trace_capacity_curves(at_100)
    assert "(chosen at capacity 100)" in titles(fig)[0] and check_best_baseline(fig, policies) == "fifo"
    assert plots.best_baseline(at_100) == "fifo"
    rows = policies[["policy", "capacity", "answerable_rate"]].assign(trace="seed-0", correction_survival=0.0,
                                                                     stale_kept_rate=0.0)
    paired = inference.paired_table(rows)
    assert set(paired.loc[paired["comparison"] == f"hybrid-v1 - {inference.BEST_OTHER}", "second"]) == {"fifo", "lru"}
    assert paired.loc[(paired["comparison"] == f"hybrid-v1 - {inference.BEST_OTHER}")
                      & (paired["capacity"] == inference.FINDING_CAPACITY), "second"].eq("fifo").all()
    elsewhere = at_100.assign(capacity=at_100["capacity"].replace({inference.FINDING_CAPACITY: 200}))
    fig = plots.trace_capacity_curves(elsewhere)
    assert "(chosen over every capacity)" in titles(fig)[0]
    assert check_best_baseline(fig, elsewhere[~elsewhere["policy"].isin(plot_traces.BOUND_NAMES)]) == "lru"
    assert plots.best_baseline(elsewhere) == "lru"


def test_identical_trace_curves_share_one_legend_entry_and_interval_bars_stay_apart(builders):
    """lfu-aging given lru's curves is one line with lru; the checks fail on two entries or bars that touch."""
    summary = builders["trace_capacity_curves"].args[0]
    twin = pd.concat([summary, summary[summary["policy"] == "lru"].assign(policy="lfu-aging")], ignore_index=True)
    fig = plots.trace_capacity_curves(twin)
    assert "lru = lfu-aging (best baseline)" in [" ".join(t.get_text().split()) for t in fig.legends[0].get_texts()]
    values = ["capacity", "answerable_rate", "stale_kept_rate"]
    check_one_entry_per_line(fig, twin[~twin["policy"].isin(plot_traces.BOUND_NAMES)], ["capacity"], values)
    apart = twin.assign(answerable_rate=twin["answerable_rate"] + np.where(twin["policy"] == "lfu-aging", 1e-3, 0))
    with pytest.raises(AssertionError, match="identical curves in two entries"):
        check_one_entry_per_line(plots.trace_capacity_curves(apart), twin[twin["policy"].isin(["lru", "lfu-aging"])],
                                 ["capacity"], values)
    crowded = Figure()
    ax = crowded.add_subplot()
    ax.vlines([10, 10], [0.2, 0.3], [0.5, 0.6])
    with pytest.raises(AssertionError, match="interval bars overlap"):
        check_intervals_apart(crowded)


#: Each caption (by file-name pattern) that states a number or names a policy or a notebook, and each figure
#: (by function) whose titles state a number or a setting, with the check that its data agree.
CLAIMS = {
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
    "02_support_rank_distribution": claim_rank_line_and_reserved_slots,
    "04_half_lives_*": claim_half_life_cells,
    "04_capacity_curves": claim_every_policy_one_line_each,
    "05_variant_cascade": claim_presets_named,
    "10_loss_map": claim_the_loss_map_policies,
    "10_stage_losses": claim_stage_bars,
}
TITLE_CLAIMS = {name.removeprefix("title_"): check for name, check in list(globals().items())
                if name.startswith("title_") and callable(check)}
CLAIMS.update(TITLE_CLAIMS)
NUMBER_WORDS = r"\d|%|\b(?:two|three|four|five|six|seven|eight|nine|ten|twice|half)\b(?!-)"
SETTING_WORDS = r"\b(?:capacity|capacities|weights?|half-lives|seeds?|spec|presets?|lattice|optimum)\b"


def stating(text: str) -> bool:
    """Whether ``text`` states a number, a setting or a policy's name."""
    names = "|".join(re.escape(name) for name in known_policies())
    return re.search(rf"{NUMBER_WORDS}|{SETTING_WORDS}|\b(?:{names})\b", text) is not None


def test_every_caption_and_title_stating_a_number_a_setting_or_a_policy_is_checked(builders):
    captions = {key for key, text in report_document.CAPTIONS.items() if stating(text)}
    assert captions - set(CLAIMS) == set(), "captions stating numbers or policies with no check of their data"
    figures = {name for name, build in builders.items() if any(map(stating, titles(build())))}
    assert figures - set(CLAIMS) == set(), "titles stating numbers or settings with no check of their data"
    assert stating("hybrid-v1 at capacity 5") and not stating("Grader rule that decided each answer")


@pytest.mark.parametrize("key", sorted(CLAIMS))
def test_the_caption_or_title_agrees_with_its_data(key, builders):
    """A caption's claim (keyed by its file-name pattern) or a figure's titles (keyed by its function,
    checked against the data it was built from)."""
    check = CLAIMS[key]
    if key in builders:
        check(builders[key])
    else:
        check(*([builders] if inspect.signature(check).parameters else []))
