"""The house style shared by every figure module: palette, rc settings and panel helpers.

Colours come from the Okabe-Ito palette (:mod:`evictlab.palette`), which stays
distinguishable under the common forms of colour blindness, plus darker and lighter shades of
it once its eight colours run out. A policy has the same colour in every figure: the one its
policy file declares (:data:`POLICY_COLORS`, :func:`policy_color`).
Sequential colour maps use ``cividis`` (:data:`SEQUENTIAL_CMAP`), which is designed to read
the same under the common colour-vision deficiencies.

The names here are public within :mod:`evictlab.workbench.plots`; the package re-exports only the
palette and the orderings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from functools import wraps
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ...core.manifests import SCENARIO_ORDER, SYNTHETIC_SCENARIO
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

#: Scenario order on every axis: the four official scenarios, then the synthetic one.
SCENARIOS: tuple[str, ...] = (*SCENARIO_ORDER, SYNTHETIC_SCENARIO)

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

#: The house style, applied by :func:`styled` while a figure is built (never globally).
STYLE: dict[str, Any] = {
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "figure.titlesize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
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


def scenario_order(values: Iterable[str]) -> list[str]:
    """The distinct scenarios in ``values``: protocol order first, unknown ones sorted after."""
    present = set(values)
    return [s for s in SCENARIOS if s in present] + sorted(present - set(SCENARIOS))


def policy_order(values: Iterable[str]) -> list[str]:
    """The distinct policies in ``values``: ``confidence``, ``hybrid-v1``, then the rest sorted."""
    present = set(values)
    head = [p for p in ("confidence", "hybrid-v1") if p in present]
    return head + sorted(present - set(head))


def styled(build: Callable[..., Figure]) -> Callable[..., Figure]:
    """Build the figure inside the house style; text sizes are fixed when artists are created."""

    @wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]  # the stubs want literal rc keys
            return build(*args, **kwargs)

    return wrapper


def require_columns(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Raise a ValueError naming ``what`` and the missing ``columns``, or the lack of rows."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} needs columns {', '.join(missing)}; got {', '.join(map(str, frame.columns))}")
    if frame.empty:
        raise ValueError(f"{what} needs at least one row")


def grid_shape(count: int, columns: int) -> tuple[int, int]:
    """Rows and columns of a panel grid for ``count`` panels, at most ``columns`` wide."""
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
    handles += list(extra)
    # Below the panels: matplotlib does not stack an outside-top legend under the suptitle.
    fig.legend(handles=handles, title=title, loc="outside lower center", ncols=min(len(handles), 7), frameon=False)


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


def format_count(value: float) -> str:
    """A count as text: whole numbers without decimals, expected counts (seed means) with one."""
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


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
