"""The explorer in a real JupyterLab, driven in headless Chromium as a person would use it:
open notebook 07, Run All, read the live widget, move a slider, change the policy; and
``make lab`` started and stopped."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
from pathlib import Path

import pytest
from browser import ConsoleLog, JupyterLab

from evictlab.workbench import report

pytestmark = pytest.mark.slow

KERNEL_IDLE = "Python 3 (ipykernel) | Idle"
MIN_TRACK_PX = 300  # 0.01 of weight is then 3 px or more: a step can be set by hand


@pytest.fixture(scope="module", autouse=True)
def one_lab_at_a_time(tmp_path_factory):
    """Under pytest-xdist, the workers of one run take this module's tests in turn: two
    JupyterLabs, each with a kernel and a Chromium, at once on a 2-core machine would starve
    each other past the waits below. (``xdist_group`` is no help: with pytest 9 its
    ``--dist loadgroup`` no longer sends a group to one worker.) The lock file is in the run's
    own temporary folder, which all its workers share."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / "jupyterlab-chromium.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def open_notebook(context, lab, name):
    page = context.new_page()
    console = ConsoleLog(page)
    page.goto(lab.page_url(f"lab/tree/{name}"))
    page.locator("#jp-main-statusbar").get_by_text(KERNEL_IDLE).wait_for(timeout=90_000)
    return page, console


def run_all(page, notebook):
    """Run All, then wait until every code cell of ``notebook`` shows its execution count
    (``[n]:``, not ``[ ]:`` or ``[*]:``): the status bar still says Idle right after the click."""
    code_cells = sum(cell["cell_type"] == "code" for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"])
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    page.wait_for_function(
        r"""count => {
            const prompts = [...document.querySelectorAll(".jp-Notebook .jp-CodeCell .jp-InputPrompt")];
            return prompts.length === count && prompts.every(prompt => /^\[\d+\]:$/.test(prompt.textContent.trim()));
        }""", arg=code_cells, timeout=120_000)
    page.locator("#jp-main-statusbar").get_by_text(KERNEL_IDLE).wait_for(timeout=30_000)


def drag(page, handle, dx):
    # hover() scrolls the handle into view and waits until it is what the pointer hits at its
    # centre. Right after a scroll the press could land on the cell instead (seen on a loaded
    # machine: JupyterLab's content-visibility windowing draws a cell's content once in view).
    handle.hover()
    box = handle.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.down()
    page.mouse.move(x + dx, y, steps=8)
    page.mouse.up()


def changed(page, locator, before, timeout=30_000):
    """Wait until the element's text differs from ``before``; return the new text. ``locator``
    must be an element that stays (a widget's view), not content that a new value replaces."""
    page.wait_for_function("([element, old]) => element.textContent !== old",
                           arg=[locator.element_handle(), before], timeout=timeout)
    return locator.text_content()


def changed_source(page, image, before, timeout=30_000):
    """Wait until the image shows a new frame (a new ``src``, loaded); return the new ``src``."""
    page.wait_for_function("([element, old]) => element.src !== old && element.complete && element.naturalWidth > 0",
                           arg=[image.element_handle(), before], timeout=timeout)
    return image.get_attribute("src")


def title_lines(title) -> list[str]:
    """The explorer title's lines (its <br>-separated parts, as text)."""
    return title.evaluate("""element => element.querySelector('.widget-html-content').innerHTML.split(/<br\\s*\\/?>/)
        .map(part => { const node = document.createElement('div'); node.innerHTML = part; return node.textContent; })
    """)


def assert_shown_whole(element, container) -> None:
    """``element`` is drawn entirely inside ``container`` and none of its content is cut off."""
    element.scroll_into_view_if_needed()
    box, outer = element.bounding_box(), container.bounding_box()
    assert box["width"] > 0 and box["height"] > 0, box
    assert outer["x"] - 0.5 <= box["x"] and box["x"] + box["width"] <= outer["x"] + outer["width"] + 0.5, (box, outer)
    clipped = element.evaluate("""element => [element, ...element.querySelectorAll('*')].some(
        node => node.scrollWidth > node.clientWidth + 1 && getComputedStyle(node).overflowX !== 'visible')""")
    assert not clipped


def test_explorer_notebook_runs_and_responds_in_jupyterlab(chromium, tmp_path):
    # A copy, so that nothing JupyterLab saves touches the committed notebook.
    notebook = Path(shutil.copy(report.NOTEBOOK_DIR / "07_explorer.ipynb", tmp_path))
    with JupyterLab(tmp_path) as lab:
        page, console = open_notebook(chromium, lab, notebook.name)
        run_all(page, notebook)
        explorer = page.locator(".jp-OutputArea-output > .widget-vbox").first
        figure = explorer.locator(".evictlab-explorer-figure")  # the <img>; its src is replaced per move
        title = explorer.locator(".evictlab-explorer-title")
        figure.wait_for(timeout=60_000)
        sliders = explorer.locator(".widget-slider")
        assert sliders.count() == 6  # three weights, two half-lives, capacity
        details = explorer.locator(".widget-html-content").last

        # After Run All the live widget shows its own parameters, not what later cells set; the
        # title names them in full, inside the widget (nothing clipped), above the figure.
        lines = title_lines(title)
        assert lines[0] == "hybrid-v1 at capacity 5, preset pr4810-final"
        assert lines[1].startswith("hybrid-v1 weights (0.65, 0.25, 0.10), half-lives 90 / 30 days")
        assert "synthetic demo data" in lines[2]
        assert_shown_whole(title, explorer)
        assert_shown_whole(figure, explorer)
        assert [sliders.nth(i).locator(".widget-readout").text_content() for i in (0, 1, 2, 5)] == [
            "0.65", "0.25", "0.10", "5"]
        assert details.text_content().startswith("hybrid-v1 at capacity 5")

        # Wide tracks: a 40 px drag moves the confidence weight by about 0.1, not across the range.
        track = sliders.first.locator(".slider-container").bounding_box()
        assert track["width"] >= MIN_TRACK_PX, track
        before, shown = details.text_content(), figure.get_attribute("src")
        drag(page, sliders.first.locator(".noUi-handle"), -40)
        shown = changed_source(page, figure, shown)
        weight = float(sliders.first.locator(".widget-readout").text_content())
        assert 0.45 <= weight <= 0.6, weight
        page.wait_for_function("([element, text]) => element.textContent.includes(text)",
                               arg=[title.element_handle(), f"weights ({weight:.2f}, "], timeout=30_000)
        assert changed(page, details, before) != before

        # A policy that ignores weights and half-lives: their sliders are disabled, the rest is not.
        explorer.locator(".widget-dropdown select").first.select_option("confidence")
        changed_source(page, figure, shown)
        page.wait_for_function("element => element.textContent.startsWith('confidence at capacity 5, preset')",
                               arg=title.element_handle(), timeout=30_000)
        assert_shown_whole(title, explorer)
        page.wait_for_function("element => element.getAttribute('contenteditable') === 'false'",
                               arg=sliders.first.locator(".widget-readout").element_handle(), timeout=30_000)
        editable = [sliders.nth(i).locator(".widget-readout").get_attribute("contenteditable") for i in range(6)]
        assert editable == ["false"] * 5 + ["true"]
        assert re.match(r"confidence at capacity 5: support retained in \d+ of 45", details.text_content())
        assert not console.errors, console.errors


def test_make_lab_serves_the_notebooks_and_stops(chromium, make_overrides):
    root = Path(__file__).resolve().parents[1]
    if not (root / "Makefile").exists():
        pytest.skip("make lab: not a source checkout (no Makefile)")
    # Address and token come from the server's config folder: the command is `make lab`, with
    # only the overrides that keep it off the checkout's shared venv and git config.
    command = ["make", "--no-print-directory", "lab", *make_overrides.variables]
    with JupyterLab(command=command, cwd=root, env=make_overrides.environment, startup_seconds=240) as lab:
        page = chromium.new_page()
        console = ConsoleLog(page)
        page.goto(lab.page_url("lab"))
        listing = page.locator(".jp-DirListing-content")
        listing.get_by_text("07_explorer.ipynb").wait_for(timeout=60_000)
        assert not console.errors, console.errors
        assert lab.stop() is not None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", lab.port), timeout=2).close()
