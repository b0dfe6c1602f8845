"""A shell on a rank, in a real JupyterLab in Debian's Chromium: ``%remote shell --rank 1``
opens a terminal by itself, the sidebar's "Shell on rank" opens another; in each a typed
``echo $MONARCH_RANK_hosts`` prints that rank; closing a terminal's tab ends its shell (no
proc left under the worker). The server serves this checkout's build
(``cd labextension && jlpm build:prod`` first)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from browser_util import (
    LAB,
    NEEDS_BUILD,
    NEEDS_CHROMIUM,
    chromium_page,
    jupyter_server,
    notebook,
    run_cell,
    wait_kernel_idle,
)
from harness import child_pids, poll

pytestmark = [
    NEEDS_CHROMIUM,
    NEEDS_BUILD,
    pytest.mark.timeout(400),
    pytest.mark.browser,
]

CELLS = ["%load_ext monarch_jupyter", "%job apply --local hosts=2", "%remote shell --rank 1", "%job kill"]


def _terminal_text(page) -> str:
    """The text of the current terminal tab's screen (xterm's rows for screen readers: its
    renderer draws on a canvas)."""
    return page.evaluate(
        """() => {
            const term = document.querySelector('.jp-Terminal:not(.lm-mod-hidden)');
            const rows = term && term.querySelector('.xterm-accessibility-tree, .xterm-rows');
            return rows ? rows.innerText : '';
        }"""
    )


def _type_and_read(page, label: str) -> str:
    """Wait for the shell's prompt in the current terminal, type an echo, return its answer."""
    prompt = re.compile(r"exit or Ctrl-D ends it.*[#$]\s*$", re.S)
    assert poll(lambda: prompt.search(_terminal_text(page).rstrip() + " "), timeout=120), _terminal_text(page)
    page.locator(".jp-Terminal:not(.lm-mod-hidden) .xterm").click()
    page.keyboard.type(f"echo {label}=$MONARCH_RANK_hosts/$MONARCH_SIZE_hosts\n")
    answer = re.compile(rf"^{label}=(\d+)/(\d+)\s*$", re.M)
    found = poll(lambda: answer.search(_terminal_text(page)), timeout=60)
    assert found, _terminal_text(page)
    return found.group(1) + "/" + found.group(2)


def test_shell_from_the_cell_and_from_the_sidebar(tmp_path: Path, tag: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    name = "shell.ipynb"
    (root / name).write_text(json.dumps(notebook(CELLS)))
    settings = (
        tmp_path / "jupyter" / "config" / "lab" / "user-settings" / "@jupyterlab" / "terminal-extension"
    )
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"screenReaderMode": True}))
    with jupyter_server(root, tmp_path / "jupyter", tag, LAB) as server, chromium_page(tag, 120_000) as page:
        page.goto(f"{server.url}/lab/tree/{name}?token={server.token}")
        wait_kernel_idle(server, page, name, 90)
        for index in range(2):
            run_cell(page, index, 120)
        workers = json.loads((root / ".monarch" / "default" / "status.json").read_text())["worker_pids"]

        # the cell: its output opens a terminal by itself
        run_cell(page, 2, 120)
        # attached, not visible: the terminal it opens may already cover the notebook
        page.locator(".jp-MonarchShell-command").wait_for(state="attached")
        page.locator(".jp-Terminal").first.wait_for()
        assert _type_and_read(page, "cell") == "1/2"
        assert child_pids(workers["hosts_1"]), "the shell's proc runs under hosts_1"
        assert "opened in a terminal" in page.locator(".jp-MonarchShell-status").inner_text()

        # closing its tab ends the shell on the host
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon").click()
        assert poll(lambda: not child_pids(workers["hosts_1"]), timeout=30), "the shell outlived its tab"
        assert poll(lambda: not server.api("api/terminals"), timeout=10), server.api("api/terminals")

        # the sidebar: the context's "Shell on rank" row
        server.ui.open_sidebar(page)
        page.locator(".jp-MonarchPanel-itemHead").first.click()
        rank = page.locator(".jp-MonarchPanel-shellRank")
        rank.fill("0")
        page.locator(".jp-MonarchPanel-shellOpen").click()
        page.locator(".jp-Terminal").first.wait_for()
        assert _type_and_read(page, "side") == "0/2"
        assert child_pids(workers["hosts_0"])
        rank.fill("7")
        page.locator(".jp-MonarchPanel-shellOpen").click()
        status = page.locator(".jp-MonarchPanel-shellStatus")
        assert poll(lambda: "out of range" in status.inner_text(), timeout=30), status.inner_text()
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon").click()
        assert poll(lambda: not child_pids(workers["hosts_0"]), timeout=30), "the shell outlived its tab"

        # back in the notebook: %job kill
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=name).click()
        run_cell(page, 3, 120)
    shutil.rmtree(root, ignore_errors=True)
