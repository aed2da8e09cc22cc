"""The house style shared by every figure module: palette, rc settings and panel helpers.

Colours come from the Okabe-Ito palette (:mod:`evictlab.palette`), which stays
distinguishable under the common forms of colour blindness, plus darker and lighter shades of
it once its eight colours run out. A policy has the same colour in every figure: the one its
policy file declares (:data:`POLICY_COLORS`, :func:`policy_color`).
Sequential colour maps use ``cividis`` (:data:`SEQUENTIAL_CMAP`), which is designed to read
the same under the common colour-vision deficiencies.

Every figure is built for a paper (:data:`PAPER_SIZES`): each figure function takes
``size="two-column"`` (7 in, the text width) or ``"one-column"`` (3.5 in), draws its text at
:data:`MIN_TEXT_PT` points or more at that print size, and :func:`styled` wraps its titles and
folds its legends to the width (:func:`fit_text`), so no text leaves the canvas.

The names here are public within :mod:`evictlab.workbench.plots`; the package re-exports only the
palette and the orderings.
"""

from __future__ import annotations

import contextvars
import hashlib
import inspect
from collections.abc import Callable, Iterable, Sequence
from functools import wraps
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Patch
from matplotlib.textpath import TextToPath

from ...core.manifests import in_known_order, scenario_order
from ...palette import OKABE_ITO
from ...policies import known_policies, policy_class

#: Fixed colours of every registered policy, as each policy file declares it (the two DeerMem
#: policies have the two most distinct hues, the bounds black and grey).
POLICY_COLORS: dict[str, str] = {
    name: color for name in known_policies() if (color := policy_class(name).color) is not None
}

# Colours a policy without a fixed entry may get (black and grey stay reserved for baselines).
_FALLBACK_COLORS = tuple(
    OKABE_ITO[name]
    for name in ("orange", "sky_blue", "bluish_green", "yellow", "reddish_purple", "vermillion", "blue")
)

#: Name of the pooled group that figures add after the scenarios.
ALL_CASES = "all cases"

#: The colour map of every sequential scale (retention shares).
SEQUENTIAL_CMAP = "cividis"

#: Bins of the binned retention scale (:func:`retention_norm`): ten 10-point bins below 100 %
#: and a bin of its own for exactly 100 % (every case kept), so that "all kept" never shares a
#: colour with "most kept" (45/45 against 35/45).
RETENTION_BOUNDS = (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100 - 1e-6, 100 + 1e-6)

#: Markers that tell lines apart without colour, in order of use.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p", "8", "d")

#: One colour per scenario (the all-cases line is black), for figures whose colours are not policies.
SCENARIO_COLORS = {
    "confirmation_help": OKABE_ITO["sky_blue"],
    "access_help": OKABE_ITO["orange"],
    "confidence_control": OKABE_ITO["bluish_green"],
    "noisy_signal_control": OKABE_ITO["reddish_purple"],
    "correction_reserve": OKABE_ITO["vermillion"],
    ALL_CASES: OKABE_ITO["black"],
}

#: Figure widths in inches: one column of a two-column page, and the full text width.
PAPER_SIZES: dict[str, float] = {"one-column": 3.5, "two-column": 7.0}

#: The smallest text size, in points at print size, of any text in a figure.
MIN_TEXT_PT = 8.0

_SIZE: contextvars.ContextVar[str] = contextvars.ContextVar("paper_size", default="two-column")

#: The house style, applied by :func:`styled` while a figure is built (never globally).
STYLE: dict[str, Any] = {
    "font.size": MIN_TEXT_PT,
    "axes.titlesize": MIN_TEXT_PT + 0.5,
    "axes.labelsize": MIN_TEXT_PT,
    "xtick.labelsize": MIN_TEXT_PT,
    "ytick.labelsize": MIN_TEXT_PT,
    "legend.fontsize": MIN_TEXT_PT,
    "legend.title_fontsize": MIN_TEXT_PT,
    "figure.titlesize": MIN_TEXT_PT + 1,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,  # a panel that wants one turns it on (ax.grid(True)): light, below the data
    "grid.color": "#e5e5e5",
    "grid.linewidth": 0.7,
    "axes.axisbelow": True,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
}


def policy_color(policy: str) -> str:
    """The colour of ``policy``: its fixed entry, else a hue chosen by a hash of its name.

    The hash (not the order in which policies appear) makes the colour the same in every
    figure, whichever other policies share it.
    """
    if policy in POLICY_COLORS:
        return POLICY_COLORS[policy]
    digest = hashlib.sha256(policy.encode("utf-8")).digest()
    return _FALLBACK_COLORS[digest[0] % len(_FALLBACK_COLORS)]


def policy_order(values: Iterable[str]) -> list[str]:
    """The distinct policies in ``values``: ``confidence``, ``hybrid-v1``, then the rest sorted."""
    return in_known_order(values, ("confidence", "hybrid-v1"))


def styled(build: Callable[..., Figure]) -> Callable[..., Figure]:
    """Build the figure inside the house style at the paper ``size`` it is asked for (a key of
    :data:`PAPER_SIZES`, default two-column), then fit its text to that width (:func:`fit_text`)."""

    @wraps(build)
    def wrapper(*args: Any, size: str = "two-column", **kwargs: Any) -> Figure:
        if size not in PAPER_SIZES:
            raise ValueError(f"size must be one of {', '.join(PAPER_SIZES)}; got {size!r}")
        token = _SIZE.set(size)
        try:
            with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]  # the stubs want literal rc keys
                fig = build(*args, **kwargs)
                fit_text(fig)
                return fig
        finally:
            _SIZE.reset(token)

    signature = inspect.signature(build)
    size = inspect.Parameter("size", inspect.Parameter.KEYWORD_ONLY, default="two-column", annotation="str")
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), size])  # type: ignore[attr-defined]
    return wrapper


def paper_width() -> float:
    """The width in inches of the figure being built (:data:`PAPER_SIZES`)."""
    return PAPER_SIZES[_SIZE.get()]


def one_column() -> bool:
    """Whether the figure being built is one column wide."""
    return _SIZE.get() == "one-column"


def paper_figure(height: float, narrow: float | None = None) -> Figure:
    """A new figure as wide as the paper size being built, ``height`` inches high (``narrow``
    inches at one-column size, when given)."""
    return Figure(figsize=(paper_width(), narrow if narrow is not None and one_column() else height),
                  layout="constrained")


def side_by_side(fig: Figure, count: int = 2, **options: Any) -> Any:
    """``count`` panels in a row at two-column size, stacked in a column at one-column size."""
    if one_column():
        options.pop("width_ratios", None)
        return fig.subplots(count, 1, **options)
    return fig.subplots(1, count, **options)


def text_width(text: str, size: float) -> float:
    """Width in points of one line of ``text`` at ``size`` points in the default font."""
    return TextToPath().get_text_width_height_descent(text, FontProperties(size=size), ismath=False)[0]


def wrap_text(text: str, size: float, width: float) -> str:
    """``text`` with each line broken at spaces so that no line is wider than ``width`` points."""
    lines = []
    for line in text.splitlines():
        current = ""
        for word in line.split(" "):
            candidate = f"{current} {word}" if current else word
            if current and text_width(candidate, size) > width:
                lines.append(current)
                candidate = word
            current = candidate
        lines.append(current)
    return "\n".join(lines)


def fit_text(fig: Figure) -> None:
    """Wrap the figure title to the figure's width, each panel's title and axis labels to its panel:
    first to the panel's grid cell, then, once the layout has run, to the panel as laid out."""
    title = fig._suptitle  # type: ignore[attr-defined]  # matplotlib has no public getter for the Text
    if title is not None:
        fig.evictlab_title = title.get_text()  # type: ignore[attr-defined]  # figure_title reads it unwrapped
        title.set_text(wrap_text(title.get_text(), float(title.get_fontsize()), 0.96 * 72 * fig.get_figwidth()))
    _wrap_panels(fig, lambda ax: ax.get_subplotspec().get_position(fig) if ax.get_subplotspec() else ax.get_position())
    engine = fig.get_layout_engine()
    if engine is not None and fig.axes:
        engine.execute(fig)
        _wrap_panels(fig, lambda ax: ax.get_position())


def _wrap_panels(fig: Figure, box_of: Callable[[Any], Any]) -> None:
    width, height = 72 * fig.get_figwidth(), 72 * fig.get_figheight()
    for ax in fig.axes:
        box = box_of(ax)
        titles = (ax.title, ax._left_title, ax._right_title)  # type: ignore[attr-defined]
        for text in (*titles, ax.xaxis.label):
            text.set_text(wrap_text(text.get_text(), float(text.get_fontsize()), box.width * width))
        label = ax.yaxis.label
        label.set_text(wrap_text(label.get_text(), float(label.get_fontsize()), box.height * height))


def require_columns(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Raise a ValueError naming ``what`` and the missing ``columns``, or the lack of rows."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} needs columns {', '.join(missing)}; got {', '.join(map(str, frame.columns))}")
    if frame.empty:
        raise ValueError(f"{what} needs at least one row")


def grid_shape(count: int, columns: int) -> tuple[int, int]:
    """Rows and columns of a panel grid for ``count`` panels, at most ``columns`` wide at two-column
    size and half as many (rounded up) at one-column size."""
    if one_column():
        columns = -(-columns // 2)
    columns = min(columns, count)
    return -(-count // columns), columns


def hide_unused(axes: np.ndarray, used: int) -> None:
    """Hide the panels after the first ``used`` ones."""
    for ax in axes.flat[used:]:
        ax.set_visible(False)


def label_panels(axes: np.ndarray, used: int, xlabel: str, ylabel: str) -> None:
    """x label on every used panel (their x axes differ in meaning per row); y label on the
    first column, whose y axis the others share."""
    columns = axes.shape[1]
    for index, ax in enumerate(axes.flat[:used]):
        ax.set_xlabel(xlabel)
        if index % columns == 0:
            ax.set_ylabel(ylabel)


def policy_legend(fig: Figure, policies: Sequence[str], *, title: str = "policy", extra: Sequence[Any] = ()) -> None:
    """One legend for the figure: a colour patch per policy (then any ``extra`` handles), below the panels."""
    handles = [Patch(facecolor=policy_color(p), edgecolor="black", linewidth=0.5, label=p) for p in policies]
    bottom_legend(fig, [*handles, *extra], title=title)


def identical_lines(frame: pd.DataFrame, key: str, values: Sequence[str]) -> dict[str, list[str]]:
    """The values of ``key`` (policies) whose rows hold the same ``values`` (in the same order of
    rows), grouped: ``{first: [first, *same]}`` in order of appearance. A figure draws one line
    per group, labelled :func:`merged_label`, so that a legend never names two entries for one line."""
    groups: dict[tuple, list[str]] = {}
    for name, rows in frame.groupby(key, sort=False):
        groups.setdefault(tuple(map(tuple, rows[list(values)].to_numpy())), []).append(str(name))
    return {members[0]: members for members in groups.values()}


def merged_label(members: Sequence[str]) -> str:
    """``lru = lfu-aging``: the names of the policies one line stands for, on as many lines as the
    paper width needs (any number of tied policies fits a legend column)."""
    return wrap_text(" = ".join(members), MIN_TEXT_PT, 0.96 * 72 * paper_width() - LEGEND_PADDING)


#: A legend entry's width beyond its text, in points: the handle, the pads and the spacing.
LEGEND_PADDING = 4.5 * MIN_TEXT_PT


def legend_columns(labels: Sequence[str], most: int | None = None) -> int:
    """How many legend columns of ``labels`` fit the paper width (at most ``most``)."""
    column = max(text_width(line, MIN_TEXT_PT) for label in labels for line in label.splitlines() or [""])
    column += LEGEND_PADDING
    return max(1, min(most or len(labels), int(0.96 * 72 * paper_width() // column)))


def bottom_legend(fig: Figure, handles: Sequence[Any], labels: Sequence[str] | None = None, *,
                  most: int | None = None, **options: Any) -> Any:
    """The figure's legend below the panels, in as many columns as fit the width (at most ``most``).

    Below: matplotlib does not stack an outside-top legend under the suptitle."""
    labels = list(labels) if labels is not None else [handle.get_label() for handle in handles]
    return fig.legend(handles, labels, loc="outside lower center", ncols=legend_columns(labels, most),
                      frameon=False, **options)


def title_with_source(fig: Figure, title: str, source: str | None) -> None:
    """The figure title, with the data's origin on a second line so the file explains itself."""
    fig.suptitle(with_source(title, source))


def with_source(title: str, source: str | None) -> str:
    """``title``, and ``source`` (the data's origin) on a line of its own when there is one."""
    return title if not source else f"{title}\n{source}"


def dodge(count: int, width: float = 0.8) -> tuple[np.ndarray, float]:
    """Offsets and width of ``count`` bars sharing one x position."""
    bar = width / count
    return (np.arange(count) - (count - 1) / 2) * bar, bar


def wrap_labels(names: Sequence[str]) -> list[str]:
    """``confirmation_help`` -> ``confirmation\\nhelp`` so that long scenario names fit under a bar."""
    return [name.replace("_", "\n", 1) if len(name) > 12 else name for name in names]


def percent(retained: Any, cases: Any) -> np.ndarray:
    """``retained`` as a percentage of ``cases``, element-wise, as floats."""
    return 100 * np.asarray(retained, dtype=float) / np.asarray(cases, dtype=float)


def retention_cmap() -> ListedColormap:
    """:data:`SEQUENTIAL_CMAP` in one colour per bin of :data:`RETENTION_BOUNDS`: the bins below
    100 % spread over its first 80 %, the 100 % bin its brightest end, a visible step apart."""
    base = matplotlib.colormaps[SEQUENTIAL_CMAP]
    below = len(RETENTION_BOUNDS) - 2
    return ListedColormap([base(0.8 * i / (below - 1)) for i in range(below)] + [base(1.0)], name="retention")


def retention_norm() -> BoundaryNorm:
    """The binned colour scale of retention shares in percent (use with :func:`retention_cmap`)."""
    return BoundaryNorm(RETENTION_BOUNDS, len(RETENTION_BOUNDS) - 1)


def retention_colorbar(fig: Figure, mappable: Any, axes: Any, label: str) -> Any:
    """A colour bar for :func:`retention_norm`: equal-width bins, the 100 % bin labelled "100 (all)"."""
    colorbar = fig.colorbar(mappable, ax=axes, shrink=0.75, pad=0.02, spacing="uniform")
    colorbar.set_ticks([0, 20, 40, 60, 80, 100], labels=["0", "20", "40", "60", "80", "100 (all)"])
    colorbar.set_label(label)
    return colorbar


def text_color(cmap: Any, fraction: float) -> str:
    """Black or white, whichever reads better on the colour map at ``fraction``."""
    red, green, blue, _ = cmap(fraction)
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def scenario_groups(frame: pd.DataFrame) -> list[str]:
    """Scenarios in protocol order, then the all-cases group if present."""
    names = scenario_order(s for s in frame["scenario"] if s != ALL_CASES)
    return names + ([ALL_CASES] if ALL_CASES in set(frame["scenario"]) else [])
