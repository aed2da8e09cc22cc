"""Deterministic saving: :func:`save` writes PNG and SVG files whose bytes depend only on the figure.

No dates, no software version, a fixed SVG id salt; the SVG's text is text (``svg.fonttype``
``none``: editable, searchable); the figure title is the files' ``Title`` metadata. This is the
only part of :mod:`evictlab.workbench.plots` that touches the file system.

A figure is laid out and drawn once: the PNG is encoded from that raster, the SVG is written
from the same layout (only the vector renderer runs again) and a notebook displays the PNG.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from ...results import atomic_write_bytes

# A 12-inch figure at 150 dpi is 1800 px wide: still sharp when a report page scales it to ~900 px.
FIGURE_DPI = 150
SVG_HASH_SALT = "evictlab"


def save_into(fig: Figure, figures_dir: str | os.PathLike | None, name: str) -> Figure | SavedFigure:
    """:func:`save` ``fig`` as ``figures_dir/name`` when ``figures_dir`` is set.

    Lets a notebook cell end with ``plots.save_into(fig, figures_dir, "01_x")`` to both keep
    the files (when run by the report) and display the figure. Without a folder it returns
    ``fig``; with one, a :class:`SavedFigure` that displays the PNG just written, so the figure
    is not drawn a third time for the notebook.
    """
    if figures_dir is None:
        return fig
    paths = save(fig, Path(figures_dir) / name)
    return SavedFigure(fig, paths[0])


class SavedFigure:
    """A saved figure that Jupyter displays from its PNG file instead of drawing it again.

    ``figure`` is the matplotlib figure and ``path`` the PNG; the display is as wide as the
    inline backend would show the figure (100 pixels per inch), sharp on high-density screens.
    """

    def __init__(self, figure: Figure, path: Path) -> None:
        self.figure = figure
        self.path = Path(path)

    def _repr_png_(self) -> tuple[bytes, dict[str, int]]:
        width, height = self.figure.get_size_inches()
        return self.path.read_bytes(), {"width": round(width * 100), "height": round(height * 100)}

    def __repr__(self) -> str:
        return f"<SavedFigure {self.path.name}>"


def figure_title(fig: Figure) -> str:
    """The figure's suptitle as written (before :func:`.style.fit_text` wrapped it to the width),
    else its first axes title, else an empty string."""
    if fig.get_suptitle():
        return getattr(fig, "evictlab_title", None) or fig.get_suptitle()
    for ax in fig.axes:
        if ax.get_title():
            return ax.get_title()
    return ""


def save(fig: Figure, path_without_suffix: str | os.PathLike, *, dpi: int = FIGURE_DPI) -> list[Path]:
    """Write ``fig`` as ``<path>.png`` and ``<path>.svg``; return both paths.

    The bytes depend only on the figure: PNG without the ``Software`` entry, SVG without date
    and creator and with a fixed id salt (matplotlib otherwise salts ids randomly). The figure
    title is stored as the files' ``Title`` metadata. Each file is written atomically; the
    parent folder is created when missing.

    The figure is laid out and rasterised once, at ``dpi``; the PNG is that raster, and the
    SVG reuses the layout (``savefig`` would lay the figure out again for each format).
    """
    base = Path(path_without_suffix)
    if base.suffix in (".png", ".svg"):
        raise ValueError(f"give the path without a suffix, got {base}")
    title = figure_title(fig)
    png, svg = io.BytesIO(), io.BytesIO()
    engine, original_dpi, original_canvas = fig.get_layout_engine(), fig.dpi, fig.canvas
    canvas = FigureCanvasAgg(fig)
    try:
        fig.dpi = dpi
        # The layout engine iterates from the panels' current positions (text in data coordinates
        # moves with them): start it from the grid's, so that each save gives the same layout.
        if isinstance(engine, ConstrainedLayoutEngine):  # not a frozen layout (the explorer's)
            for ax in fig.axes:
                if (spec := ax.get_subplotspec()) is not None:  # set_position would take it out of the layout
                    ax._set_position(spec.get_position(fig))  # type: ignore[attr-defined]
        canvas.draw()  # the layout engine runs here, once
        info = {"Title": title} if title else {}
        Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).save(
            png, format="png", dpi=(dpi, dpi), pnginfo=_png_info(info))
        fig.set_layout_engine("none")  # keep the positions just computed
        with matplotlib.rc_context({"svg.hashsalt": SVG_HASH_SALT, "svg.fonttype": "none"}):  # text as text
            fig.savefig(svg, format="svg", dpi=dpi, metadata={"Date": None, "Creator": None, **info})
    finally:
        fig.set_layout_engine(engine)
        fig.dpi = original_dpi
        fig.set_canvas(original_canvas)
    return [atomic_write_bytes(base.with_name(base.name + suffix), buffer.getvalue())
               for suffix, buffer in ((".png", png), (".svg", svg))]


def _png_info(entries: dict[str, str]) -> PngInfo:
    info = PngInfo()
    for key, value in entries.items():
        info.add_text(key, value)
    return info

