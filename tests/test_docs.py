"""The README and the pages under docs/: every relative link points at a file that exists, and
every Markdown table keeps its column count on every row (a row with a stray ``|`` or a missing
cell ends a table early on GitHub)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _outside_code(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _cells(row: str) -> int:
    # A pipe inside backticks is text, not a column border.
    return len(re.sub(r"`[^`]*`", "x", row).strip().strip("|").split("|"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_tables_keep_their_columns(page):
    table: list[str] = []
    for line in [*_outside_code(page.read_text(encoding="utf-8")), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            widths = {_cells(row) for row in table}
            assert len(widths) == 1, f"{page.name}: table starting {table[0][:40]!r} has rows of {widths} cells"
        table = []


def test_the_readme_defines_its_words():
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for word in ("**support**", "**loss rank**", "**five scenarios**"):
        assert word in text
    from evictlab.core.manifests import SCENARIO_ORDER, SYNTHETIC_SCENARIO

    for scenario in (*SCENARIO_ORDER, SYNTHETIC_SCENARIO):
        assert f"`{scenario}`" in text


def test_the_slow_lanes_first_tests_exist():
    """tests/conftest.py's LONGEST_FIRST names tests that are there (a renamed one would silently lose its place)."""
    import ast

    root = Path(__file__).resolve().parents[1]
    tree = ast.parse((root / "tests" / "conftest.py").read_text(encoding="utf-8"))
    (listed,) = [ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "LONGEST_FIRST"]
    assert listed
    for nodeid in listed:
        path, name = nodeid.split("::")
        assert f"def {name.split('[')[0]}(" in (root / path).read_text(encoding="utf-8"), nodeid
