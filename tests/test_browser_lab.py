"""The explorer in a real JupyterLab, driven in headless Chromium as a person would use it:
open notebook 07, Run All, and move a slider."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from evictlab import report
from evictlab.browser import ConsoleLog, JupyterLab

pytestmark = pytest.mark.slow

KERNEL_IDLE = "Python 3 (ipykernel) | Idle"


def open_notebook(context, lab, name):
    page = context.new_page()
    console = ConsoleLog(page)
    page.goto(lab.page_url(f"lab/tree/{name}"))
    page.locator("#jp-main-statusbar").get_by_text(KERNEL_IDLE).wait_for(timeout=90_000)
    return page, console


def run_all(page):
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def test_explorer_notebook_runs_and_responds_in_jupyterlab(chromium, tmp_path):
    # A copy, so that nothing JupyterLab saves touches the committed notebook.
    shutil.copy(report.NOTEBOOK_DIR / "07_explorer.ipynb", tmp_path)
    with JupyterLab(tmp_path) as lab:
        page, console = open_notebook(chromium, lab, "07_explorer.ipynb")
        run_all(page)
        explorer = page.locator(".jp-OutputArea-output .widget-vbox").first
        sliders = explorer.locator(".widget-slider")
        sliders.first.wait_for(timeout=120_000)
        assert sliders.count() == 6  # three weights, two half-lives, capacity
        image = explorer.locator(".widget-image")
        details = explorer.locator(".widget-html-content").last
        details.get_by_text("support retained in").wait_for()
        before = (image.get_attribute("src"), details.inner_text())

        handle = sliders.first.locator(".noUi-handle")
        box = handle.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] / 2 - 40, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()
        page.wait_for_function(
            "([element, old]) => element.getAttribute('src') !== old", arg=[image.element_handle(), before[0]],
            timeout=30_000,
        )
        assert details.inner_text() != before[1]
        assert not console.errors, console.errors


def test_make_lab_serves_the_notebooks_and_stops(chromium):
    root = Path(__file__).resolve().parents[1]
    if not (root / "Makefile").exists():
        pytest.skip("make lab: not a source checkout (no Makefile)")
    # Address and token come from the server's config folder: the command is exactly `make lab`.
    with JupyterLab(command=["make", "--no-print-directory", "lab"], cwd=root, startup_seconds=240) as lab:
        page = chromium.new_page()
        console = ConsoleLog(page)
        page.goto(lab.page_url("lab"))
        listing = page.locator(".jp-DirListing-content")
        listing.get_by_text("07_explorer.ipynb").wait_for(timeout=60_000)
        assert not console.errors, console.errors
        assert lab.stop() is not None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", lab.port), timeout=2).close()
