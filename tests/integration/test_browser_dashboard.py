"""The "Monarch dashboard" panel in a real JupyterLab and Notebook 7, in Debian's Chromium: a
notebook applies a telemetry job; the ``%job`` widget's link and the sidebar's Dashboard button
open Monarch's dashboard through the server extension's proxy (its API calls included): in a
main-area panel in Lab, in a new browser tab in Notebook 7."""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path

import pytest

from browser_util import (
    LAB,
    NEEDS_CHROMIUM,
    NOTEBOOK,
    Frontend,
    JupyterServer,
    chromium_page,
    jupyter_server,
    notebook,
    open_and_run,
)
from harness import poll

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
FOLDER = "nb"
NOTEBOOK_FILE = f"{FOLDER}/dash.ipynb"
PREFIX = f"/monarch-jupyter/dashboard/{FOLDER}/.monarch/default/"

pytestmark = [
    NEEDS_CHROMIUM,
    pytest.mark.timeout(420),
    pytest.mark.browser,
]


CELLS = ["%load_ext monarch_jupyter", "%job apply --local hosts=2 --telemetry", "%job"]


def _dashboard_shows_data(view, responses: list[tuple[str, int]]) -> None:
    """``view`` (the panel's iframe, or a page) renders Monarch's dashboard, and its API calls
    came back through the proxy (prefixed, 200), none to the server's own /api."""
    view.locator("text=System Health").first.wait_for(timeout=60_000)
    ok = lambda: [u for u, code in responses if f"{PREFIX}api/" in u and code == 200]  # noqa: E731
    assert poll(ok, 30, 0.2), responses
    assert not [u for u, _ in responses if re.search(r"//[^/]+/api/(summary|dag|meshes)", u)], responses


@pytest.mark.parametrize("ui", [LAB, NOTEBOOK], ids=lambda ui: ui.name)
def test_dashboard_from_the_widget_and_the_sidebar(tmp_path: Path, tag: str, ui: Frontend) -> None:
    root = tmp_path / "root"
    (root / FOLDER).mkdir(parents=True)
    (root / NOTEBOOK_FILE).write_text(json.dumps(notebook(CELLS)))
    with jupyter_server(root, tmp_path / "jupyter", tag, ui) as server, chromium_page(tag) as page:
        responses: list[tuple[str, int]] = []
        page.context.on("response", lambda r: responses.append((r.url, r.status)))
        try:
            _open_notebook(server, page)
            (_in_lab if ui is LAB else _in_notebook)(server, page, responses)
        except Exception:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(_shots(ui) / "failure.png"))
            raise


def _shots(ui: Frontend) -> Path:
    folder = ARTIFACTS / ui.name / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _open_notebook(server: JupyterServer, page) -> None:
    """The notebook open, its three cells run: the %job widget shows a running telemetry job."""
    open_and_run(server, page, NOTEBOOK_FILE, 3, 90)
    page.locator(".jp-Notebook .jp-Cell").nth(2).locator("a.monarch-job-dashboard").wait_for()


def _sidebar_button(server: JupyterServer, page):
    server.ui.open_sidebar(page)
    item = page.locator(".jp-MonarchPanel-item").filter(
        has=page.locator(".jp-MonarchPanel-folder", has_text=FOLDER)
    )
    return item.locator(".jp-MonarchPanel-dashboard")


def _in_lab(server: JupyterServer, page, responses: list[tuple[str, int]]) -> None:
    frame = page.frame_locator(".jp-MonarchDashboard:not(.lm-mod-hidden) .jp-MonarchDashboard-frame")
    # ── from the %job widget: its link opens the panel, not the loopback URL ──
    link = page.locator(".jp-Notebook .jp-Cell").nth(2).locator("a.monarch-job-dashboard")
    pages_before = len(page.context.pages)
    link.click()
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tabLabel", has_text="Monarch dashboard · default")
    tab.wait_for()
    _dashboard_shows_data(frame, responses)
    time.sleep(0.5)
    assert len(page.context.pages) == pages_before  # no new browser tab
    page.screenshot(path=str(_shots(LAB) / "01-dashboard-panel.png"))

    # ── from the sidebar: close the panel, then the context's Dashboard button opens it again ──
    tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Monarch dashboard · default")
    tabs.locator(".lm-TabBar-tabCloseIcon").click()
    tab.wait_for(state="detached")
    responses.clear()
    _sidebar_button(server, page).click()
    tab.wait_for()
    _dashboard_shows_data(frame, responses)
    page.screenshot(path=str(_shots(LAB) / "02-dashboard-from-sidebar.png"))


def _in_notebook(server: JupyterServer, page, responses: list[tuple[str, int]]) -> None:
    """Notebook 7's main area holds one document: the dashboard opens in a new browser tab."""
    link = page.locator(".jp-Notebook .jp-Cell").nth(2).locator("a.monarch-job-dashboard")
    for n, trigger in enumerate((link.click, lambda: _sidebar_button(server, page).click()), 1):
        responses.clear()
        with page.context.expect_page(timeout=30_000) as opened:
            trigger()
        tab = opened.value
        tab.wait_for_load_state()
        assert tab.url == f"{server.url}{PREFIX}", tab.url  # the proxy, not the loopback URL
        _dashboard_shows_data(tab, responses)
        tab.screenshot(path=str(_shots(NOTEBOOK) / f"0{n}-dashboard-tab.png"))
        tab.close()
