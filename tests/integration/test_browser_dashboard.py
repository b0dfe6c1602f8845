"""The "Monarch dashboard" panel in a real JupyterLab, in Debian's Chromium: a notebook applies a
telemetry job; the ``%job`` widget's link and the sidebar's Dashboard button open Monarch's
dashboard in a main-area panel, through the server extension's proxy (its API calls included)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path

import pytest

from browser_util import CHROMIUM, CHROMIUM_ARGS, LAB, JupyterServer
from harness import TAG_VAR, poll

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser" / "dashboard"
FOLDER = "nb"
NOTEBOOK_FILE = f"{FOLDER}/dash.ipynb"
PREFIX = f"/monarch-jupyter/dashboard/{FOLDER}/.monarch/default/"

pytestmark = [
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
    ),
    pytest.mark.timeout(240),
    pytest.mark.browser,
]


def _notebook() -> dict:
    def code(source: str) -> dict:
        meta = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
        return {**meta, "id": os.urandom(4).hex(), "source": source}

    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [
            code("%load_ext monarch_jupyter"),
            code("%job apply --local hosts=2 --telemetry"),
            code("%job"),
        ],
    }


def _run_cell(page, index: int, timeout: float = 90) -> None:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    prompt = cell.locator(".jp-InputArea-prompt")
    if not poll(lambda: re.fullmatch(r"\[\d+\]:", (prompt.inner_text() or "").strip()), timeout, 0.1):
        raise AssertionError(f"cell {index} did not finish in {timeout} s")


def _dashboard_shows_data(page, responses: list[tuple[str, int]]) -> None:
    """The open panel's iframe renders Monarch's dashboard, and its API calls came back through
    the proxy (prefixed, 200), none to the server's own /api."""
    frame = page.frame_locator(".jp-MonarchDashboard:not(.lm-mod-hidden) .jp-MonarchDashboard-frame")
    frame.locator("text=System Health").first.wait_for(timeout=60_000)
    ok = lambda: [u for u, code in responses if f"{PREFIX}api/" in u and code == 200]  # noqa: E731
    assert poll(ok, 30, 0.2), responses
    assert not [u for u, _ in responses if re.search(r"//[^/]+/api/(summary|dag|meshes)", u)], responses


def test_dashboard_panel_from_the_widget_and_the_sidebar(tmp_path: Path, tag: str) -> None:
    from playwright import sync_api

    root = tmp_path / "root"
    (root / FOLDER).mkdir(parents=True)
    (root / NOTEBOOK_FILE).write_text(json.dumps(_notebook()))
    server = JupyterServer(root, tmp_path / "jupyter", tag, LAB)
    try:
        server.wait_ready()
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, env={**os.environ, TAG_VAR: tag}
            )
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.set_default_timeout(30_000)
                responses: list[tuple[str, int]] = []
                page.on("response", lambda r: responses.append((r.url, r.status)))
                _scenario(server, page, responses)
            except Exception:
                with contextlib.suppress(Exception):
                    ARTIFACTS.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(ARTIFACTS / "failure.png"))
                raise
            finally:
                browser.close()
    except Exception:
        print(f"---- jupyter lab log ----\n{server.log()}")
        raise
    finally:
        server.stop()


def _scenario(server: JupyterServer, page, responses: list[tuple[str, int]]) -> None:
    page.goto(f"{server.url}{server.ui.notebook_url(NOTEBOOK_FILE)}?token={server.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    if not poll(lambda: server.kernel_state(NOTEBOOK_FILE) == "idle", 60, 0.25):
        raise AssertionError("the notebook's kernel never became idle")
    page.wait_for_function(server.ui.kernel_idle_js, timeout=60_000)
    for index in range(3):
        _run_cell(page, index)

    # ── from the %job widget: its link opens the panel, not the loopback URL ──
    link = page.locator(".jp-Notebook .jp-Cell").nth(2).locator("a.monarch-job-dashboard")
    link.wait_for()
    pages_before = len(page.context.pages)
    link.click()
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tabLabel", has_text="Monarch dashboard · default")
    tab.wait_for()
    _dashboard_shows_data(page, responses)
    time.sleep(0.5)
    assert len(page.context.pages) == pages_before  # no new browser tab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "01-dashboard-panel.png"))

    # ── from the sidebar: close the panel, then the context's Dashboard button opens it again ──
    tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Monarch dashboard · default")
    tabs.locator(".lm-TabBar-tabCloseIcon").click()
    tab.wait_for(state="detached")
    responses.clear()
    server.ui.open_sidebar(page)
    item = page.locator(".jp-MonarchPanel-item").filter(
        has=page.locator(".jp-MonarchPanel-folder", has_text=FOLDER)
    )
    item.locator(".jp-MonarchPanel-dashboard").click()
    tab.wait_for()
    _dashboard_shows_data(page, responses)
    page.screenshot(path=str(ARTIFACTS / "02-dashboard-from-sidebar.png"))
