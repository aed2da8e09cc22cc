"""``report.pdf``: the report's findings, then every figure with its number and caption, on A4
pages drawn by matplotlib's PDF backend (no LaTeX, no browser: nothing beyond the dependencies
the report already has). Text stays text in the file, so it can be searched and copied."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

A4 = (8.27, 11.69)  # inches
LINES_PER_PAGE, WIDTH = 70, 100  # 8.5 pt text


def _text_pages(pdf: Any, lines: list[str]) -> None:
    from matplotlib.figure import Figure

    for start in range(0, max(len(lines), 1), LINES_PER_PAGE):
        page = Figure(figsize=A4)
        page.text(0.07, 0.95, "\n".join(lines[start:start + LINES_PER_PAGE]), va="top", ha="left", fontsize=8.5,
                  family="DejaVu Sans", linespacing=1.35)
        pdf.savefig(page)


def report_pdf(title: str, findings: Sequence[Any], figures: Sequence[Any], numbers: Mapping[str, int],
               root: Path) -> bytes:
    """The PDF's bytes: ``findings`` (``label``, ``headline``, ``detail``) as text pages, then each
    of ``figures`` (``name``, ``src`` relative to ``root``, ``title``, ``caption``) on a page of
    its own, in the order of ``numbers``."""
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure
    from matplotlib.image import imread

    lines = [title, ""]
    for finding in findings:
        lines += textwrap.wrap(f"{finding.label}. {finding.headline}", WIDTH)
        lines += [*textwrap.wrap(finding.detail, WIDTH, initial_indent="    ", subsequent_indent="    "), ""]
    buffer = io.BytesIO()
    with PdfPages(buffer, metadata={"Title": title, "Creator": "evictlab report"}) as pdf:
        _text_pages(pdf, lines)
        for figure in sorted(figures, key=lambda f: numbers.get(f.name, len(numbers) + 1)):
            page = Figure(figsize=A4)
            image = imread(root / figure.src)
            axes = page.add_axes((0.07, 0.3, 0.86, 0.64))
            axes.imshow(image)
            axes.set_axis_off()
            caption = f"Figure {numbers.get(figure.name, '')}. {figure.title}. {figure.caption}"
            page.text(0.07, 0.27, "\n".join(textwrap.wrap(caption, WIDTH)), va="top", fontsize=8.5)
            pdf.savefig(page)
    return buffer.getvalue()
