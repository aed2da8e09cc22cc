"""A few matplotlib artists as one small inline SVG, for the explorer's live layer.

:func:`artists_svg` writes rectangles, text, scatter collections and lines of a figure drawn
at 72 dpi (where a point is a pixel) in the figure's own display coordinates, so the SVG lands
exactly on a raster of the rest of the figure and scales with it. It reads everything from
the artists (positions through their transforms, colours, sizes, fonts), so what is shown is
what the figure holds. It is a thin writer, not a backend: matplotlib's SVG renderer draws
the same artists in about 50 times the time, which a slider move cannot afford.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Iterable
from typing import Any

import numpy as np
from matplotlib import font_manager
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex, to_rgba
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.path import Path as MplPath
from matplotlib.text import Text

#: Text alignment: matplotlib's names to SVG's.
_ANCHOR = {"left": "start", "center": "middle", "right": "end"}
_BASELINE = {"center": "central", "center_baseline": "central", "top": "text-before-edge",
             "bottom": "text-after-edge", "baseline": "alphabetic"}


def artists_svg(figure: Figure, artists: Iterable[Any]) -> str:
    """One ``<svg>`` element, as wide as its container, holding the visible ``artists``."""
    if figure.dpi != 72:
        raise ValueError(f"artists_svg needs a figure at 72 dpi (a point per pixel), got {figure.dpi:g}")
    width, height = figure.bbox.width, figure.bbox.height
    parts = []
    for artist in artists:
        if not artist.get_visible():
            continue
        if isinstance(artist, Rectangle):
            parts.append(_rectangle(artist, height))
        elif isinstance(artist, Text):
            parts.append(_text(artist, height))
        elif isinstance(artist, PathCollection):
            parts.append(_collection(artist, height))
        elif isinstance(artist, Line2D):
            parts.append(_line(artist, height))
        else:
            raise TypeError(f"artists_svg cannot draw a {type(artist).__name__}")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="100%"'
            f' style="display: block">{"".join(parts)}</svg>')


def _paint(color: Any, kind: str) -> str:
    """``fill="..."`` or ``stroke="..."`` with an opacity where the colour has one."""
    red, green, blue, alpha = to_rgba(color)
    return _paint_rgba((float(red), float(green), float(blue), float(alpha)), kind)


RGBA = tuple[float, float, float, float]


@functools.lru_cache(maxsize=256)
def _paint_rgba(rgba: RGBA, kind: str) -> str:
    if rgba[3] == 0:
        return f'{kind}="none"'
    opacity = f' {kind}-opacity="{rgba[3]:.3g}"' if rgba[3] < 1 else ""
    return f'{kind}="{to_hex(rgba)}"{opacity}'


def _rectangle(patch: Rectangle, height: float) -> str:
    (x0, y0), (x1, y1) = patch.get_transform().transform([(0, 0), (1, 1)])  # the unit square, placed
    left, right, top, bottom = min(x0, x1), max(x0, x1), height - max(y0, y1), height - min(y0, y1)
    return (f'<rect x="{left:.2f}" y="{top:.2f}" width="{right - left:.2f}" height="{bottom - top:.2f}"'
            f' {_paint(patch.get_facecolor(), "fill")} {_paint(patch.get_edgecolor(), "stroke")}'
            f' stroke-width="{patch.get_linewidth():g}"/>')


def _text(text: Text, height: float) -> str:
    if not text.get_text():
        return ""
    x, y = text.get_transform().transform(text.get_position())
    weight = text.get_fontweight()
    bold = ' font-weight="bold"' if weight == "bold" or (isinstance(weight, int) and weight >= 600) else ""
    return (f'<text x="{x:.2f}" y="{height - y:.2f}" font-size="{text.get_fontsize():g}"'
            f' font-family="{html.escape(_font_name(text.get_fontproperties()))}, sans-serif"{bold}'
            f' text-anchor="{_ANCHOR[text.get_horizontalalignment()]}"'
            f' dominant-baseline="{_BASELINE[text.get_verticalalignment()]}"'
            f' {_paint(text.get_color(), "fill")}>{html.escape(text.get_text())}</text>')


@functools.lru_cache(maxsize=32)
def _font_name(properties: FontProperties) -> str:
    """The family of the font file matplotlib draws these properties with (as in the background)."""
    return font_manager.get_font(font_manager.findfont(properties)).family_name


def _collection(collection: PathCollection, height: float) -> str:
    offsets = collection.get_offset_transform().transform(np.asarray(collection.get_offsets(), dtype=float))
    paths = collection.get_paths()
    # Marker sizes are areas in points^2; a marker path is drawn at sqrt(size) points.
    scales = np.sqrt(np.broadcast_to(collection.get_sizes(), len(offsets)))
    # Already RGBA rows: looked up as tuples, not parsed again.
    faces, edges = (_rgba_rows(colors) for colors in (collection.get_facecolor(), collection.get_edgecolor()))
    line_width = np.broadcast_to(collection.get_linewidth(), len(offsets))
    markers = []
    for index, (x, y) in enumerate(offsets):
        if not (np.isfinite(x) and np.isfinite(y)):
            continue
        face, edge = faces[index % len(faces)], edges[index % len(edges)]
        markers.append(f'<path d="{_path_data(paths[index % len(paths)], scales[index])}"'
                       f' transform="translate({x:.2f} {height - y:.2f})" {_paint_rgba(face, "fill")}'
                       f' {_paint_rgba(edge, "stroke")} stroke-width="{line_width[index]:g}"/>')
    return "".join(markers)


def _rgba_rows(colors: Any) -> list[RGBA]:
    """A collection's RGBA rows as tuples (transparent when it has none)."""
    rows = np.asarray(colors, dtype=float).reshape(-1, 4).tolist()
    return [(red, green, blue, alpha) for red, green, blue, alpha in rows] or [(0.0, 0.0, 0.0, 0.0)]


def _path_data(path: MplPath, scale: float) -> str:
    """SVG path data for a marker path scaled by ``scale`` (y pointing down)."""
    vertices = np.asarray(path.vertices, dtype=float)
    codes = None if path.codes is None else np.asarray(path.codes, dtype=np.uint8).tobytes()
    return _marker_data(vertices.tobytes(), codes, len(vertices), round(float(scale), 3))


@functools.lru_cache(maxsize=64)
def _marker_data(vertices: bytes, codes: bytes | None, count: int, scale: float) -> str:
    path = MplPath(np.frombuffer(vertices).reshape(count, 2), None if codes is None else np.frombuffer(codes, np.uint8))
    commands = []
    for points, code in path.iter_segments(simplify=False, curves=True):
        xy = [f"{scale * px:.2f} {-scale * py:.2f}" for px, py in points.reshape(-1, 2)]
        if code == MplPath.MOVETO:
            commands.append("M" + xy[0])
        elif code == MplPath.LINETO:
            commands.append("L" + xy[0])
        elif code == MplPath.CURVE3:
            commands.append("Q" + " ".join(xy))
        elif code == MplPath.CURVE4:
            commands.append("C" + " ".join(xy))
        elif code == MplPath.CLOSEPOLY:
            commands.append("Z")
    return "".join(commands)


def _line(line: Line2D, height: float) -> str:
    points = line.get_transform().transform(line.get_xydata())
    coordinates = " ".join(f"{x:.2f},{height - y:.2f}" for x, y in points)
    dashes = ""
    _, pattern = getattr(line, "_dash_pattern", (0, None))  # in points, scaled by the width as drawn
    if pattern:
        dashes = f' stroke-dasharray="{",".join(f"{value:.2f}" for value in pattern)}"'
    return (f'<polyline points="{coordinates}" fill="none" {_paint(line.get_color(), "stroke")}'
            f' stroke-width="{line.get_linewidth():g}"{dashes}/>')
