"""The `%job` widget (one anywidget model, job.js) in a real JupyterLab in Debian's Chromium: its
live topology shows a user actor of a real `--admin` job with its messages processed, sampled
while the widget is on screen, and Kill (asked first) ends the job and empties the topology."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from browser_util import (
    LAB,
    NEEDS_CHROMIUM,
    JupyterServer,
    chromium_page,
    jupyter_server,
    notebook,
    open_and_run,
    wait_until,
)
from harness import worker_pids
from test_browser import ARTIFACTS, Shots

NOTEBOOK = "monarch_topology.ipynb"
SETUP = """from monarch.actor import Actor, endpoint
import monarch_jupyter

class Counter(Actor):
    @endpoint
    def incr(self) -> int:
        return 1

procs = monarch_jupyter.state().hosts.spawn_procs(per_host={"gpus": 1})
counter = procs.spawn("counter", Counter)
for _ in range(5):
    counter.incr.call().get()"""
CELLS = ["%load_ext monarch_jupyter", "%job apply --local hosts=1 --admin", SETUP, "%job"]

pytestmark = [
    NEEDS_CHROMIUM,
    pytest.mark.timeout(240),
    pytest.mark.browser,
]


def test_job_widget_topology_and_kill(tmp_path: Path, tag: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / NOTEBOOK).write_text(json.dumps(notebook(CELLS), indent=1))
    with jupyter_server(root, tmp_path / "jupyter", tag, LAB) as server, chromium_page(tag) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        shot = Shots(page, ARTIFACTS / "topology")
        try:
            _scenario(server, page, shot, tag)
        except Exception:
            with contextlib.suppress(Exception):
                shot("failure")
            raise
        assert not [e for e in errors if "monarch" in e.lower()], errors


def _scenario(server: JupyterServer, page, shot, tag: str) -> None:
    open_and_run(server, page, NOTEBOOK, 4, 120, query="reset&")
    widget = page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".monarch-job-widget")
    widget.wait_for()
    assert widget.locator(".monarch-job-state").inner_text() == "running"
    # on screen: the kernel samples the admin and the actor shows with its messages processed
    actor = widget.locator(".monarch-topo-actor[data-actor='counter']")
    actor.wait_for(timeout=60_000)
    assert actor.locator(".monarch-topo-messages").inner_text() == "5"
    assert actor.get_attribute("data-stuck") == "false"
    assert "actor" in widget.locator(".monarch-topology-summary").inner_text()
    shot("topology")

    widget.locator(".monarch-job-kill").click()
    confirm = widget.locator(".monarch-job-confirm")
    confirm.wait_for(state="visible")
    widget.locator(".monarch-job-cancel").click()
    confirm.wait_for(state="hidden")
    assert widget.locator(".monarch-job-state").inner_text() == "running"
    widget.locator(".monarch-job-kill").click()
    confirm.click()
    widget.locator(".monarch-job-state[data-state='no job']").wait_for(timeout=60_000)
    wait_until(lambda: not worker_pids(tag), 30, "the workers to be reaped")
    wait_until(lambda: "killed the job of context 'default'" in widget.inner_text(), 15, "the kill message")
    assert widget.locator(".monarch-topology").count() == 0  # no job, no topology
    shot("killed")
