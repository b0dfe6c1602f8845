"""The whole notebook experience in a real JupyterLab and a real Notebook 7, in Debian's Chromium.

One scenario, as a user would do it: open a notebook, wait for its kernel, load
the extension, apply a local two-host job, look at the ``%job`` widget, kill the
job from the widget (with its confirmation step), check the workers are gone
and the "Monarch" sidebar agrees, save, reload, and check that a saved
``%%remote`` result re-renders through our MIME renderer.

The same steps run against ``jupyter lab`` and ``jupyter notebook`` (7): Notebook 7
loads the same prebuilt labextension (widgets, MIME renderer, sidebar). What the
two UIs do differently lives in ``browser_util.Frontend``, not in two tests.

Screenshots land in ``test-artifacts/browser/<lab|notebook>/`` (gitignored).
Needs /usr/bin/chromium (``apt-get install chromium``; scripts/setup.sh does it
when MONARCH_JUPYTER_BROWSER_TESTS=1) and the ``playwright`` wheel — never
``playwright install``: we use Debian's browser.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from pathlib import Path

import pytest

from browser_util import (
    LAB,
    NEEDS_CHROMIUM,
    NOTEBOOK,
    Frontend,
    JupyterServer,
    chromium_page,
    code_cell,
    jupyter_server,
    new_page,
    notebook,
    on_screen,
    run_cell,
    saved_cells,
    wait_kernel_idle,
    wait_prompt,
    wait_until,
)
from harness import worker_pids

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
NOTEBOOK_FILE = "monarch_browser.ipynb"

pytestmark = [
    NEEDS_CHROMIUM,
    pytest.mark.timeout(180),
    pytest.mark.browser,
]

# A saved %%remote result, in the format of labextension/src/model.ts (version 1).
REMOTE_RESULT = {
    "version": 1,
    "command": "echo hello from $MONARCH_RANK_hosts",
    "mode": "bash",
    "target": "hosts (2 ranks)",
    "started": "2026-11-30T15:00:00Z",
    "duration": 0.42,
    "log_path": ".monarch/default/runs/saved.log",
    "summary": {"ok": 1, "failed": 1, "timed_out": 0, "skipped": 0, "interrupted": 0},
    "ranks": [
        {
            "label": "hosts=0",
            "mesh": "hosts",
            "point": {"hosts": 0},
            "rank": 0,
            "status": "ok",
            "returncode": 0,
            "duration": 0.21,
            "lines": [["out", "hello from 0"]],
            "truncated": 0,
        },
        {
            "label": "hosts=1",
            "mesh": "hosts",
            "point": {"hosts": 1},
            "rank": 1,
            "status": "failed",
            "returncode": 3,
            "duration": 0.4,
            "lines": [["out", "hello from 1"], ["err", "boom"]],
            "truncated": 0,
        },
    ],
}


# rank 1 fails at once; rank 0 ticks for up to 60 s until Stop interrupts it
REMOTE_CELL = """%%remote --quiet
if [ "$MONARCH_RANK_hosts" = 1 ]; then echo "bad input" >&2; exit 3; fi
for i in $(seq 1200); do echo "tick $i"; sleep 0.05; done"""


# a detached run that ticks for up to 2 minutes, until the grid's Stop ends it
DETACH_CELL = """%%remote --detach
for i in $(seq 1200); do echo "tick $i"; sleep 0.1; done"""
MIDRUN_FILE = "saved_midrun.ipynb"
RUN_MIME = "application/vnd.monarch.remote+json"


def _notebook() -> dict:
    saved_remote = {
        "output_type": "display_data",
        "metadata": {},
        "data": {
            "application/vnd.monarch.remote+json": REMOTE_RESULT,
            "text/plain": "remote hosts (2 ranks): 1 ok (rc 0), 1 failed: hosts=1 (rc 3) · 0.42 s",
        },
    }
    return notebook(
        [
            "%load_ext monarch_jupyter",
            "%job apply --local hosts=2",
            "%job",
            REMOTE_CELL,
            code_cell("# a %%remote result saved earlier (re-rendered by the MIME renderer)", [saved_remote]),
            DETACH_CELL,
        ]
    )


class Shots:
    def __init__(self, page, folder: Path) -> None:
        self.page = page
        self.n = 0
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.png"):
            old.unlink()

    def __call__(self, name: str) -> None:
        self.n += 1
        self.page.screenshot(path=str(self.folder / f"{self.n:02d}-{name}.png"))


def _cell_text(page, index: int) -> str:
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea").inner_text()


@pytest.mark.parametrize("ui", [LAB, NOTEBOOK], ids=lambda ui: ui.name)
def test_browser_scenario(tmp_path: Path, tag: str, ui: Frontend) -> None:
    # The `test` extra installs the playwright wheel; its driver ships inside it.
    # We never run `playwright install`: the browser is Debian's (browser_util.chromium).
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / "quickstart.ipynb", root / "quickstart.ipynb")
    (root / NOTEBOOK_FILE).write_text(json.dumps(_notebook(), indent=1))
    with jupyter_server(root, tmp_path / "jupyter", tag, ui) as server, chromium_page(tag) as page:
        # e.g. "Plugin 'monarch_jupyter:sidebar' failed to activate" when a UI lacks what it needs
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        shot = Shots(page, ARTIFACTS / ui.name)
        try:
            _scenario(server, page, shot, root, tag)
            ours = [e for e in errors if "monarch" in e.lower()]
            assert not ours, f"browser console errors from our extension: {ours}"
        except Exception:
            with contextlib.suppress(Exception):
                shot("failure")
            raise


def _scenario(server: JupyterServer, page, shot, root: Path, tag: str) -> None:
    page.goto(f"{server.url}{server.ui.notebook_url(NOTEBOOK_FILE)}?token={server.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    # the page's config loads our prebuilt labextension, and nothing disables it
    config = page.evaluate("() => JSON.parse(document.getElementById('jupyter-config-data').textContent)")
    assert "monarch_jupyter" in [ext["name"] for ext in config.get("federated_extensions", [])], config
    assert not [d for d in config.get("disabledExtensions", []) if d.startswith("monarch_jupyter")], config
    wait_kernel_idle(server, page, NOTEBOOK_FILE)

    # ── load, apply, %job ──
    run_cell(page, 0)
    wait_until(lambda: "monarch_jupyter" in _cell_text(page, 0), 10, "the %load_ext output")
    run_cell(page, 1)
    wait_until(lambda: "applied: context 'default'" in _cell_text(page, 1), 10, "the %job apply output")
    assert len(worker_pids(tag)) == 2
    run_cell(page, 2)
    widget = page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".monarch-job-widget")
    widget.wait_for()
    state = widget.locator(".monarch-job-state")
    assert state.inner_text() == "running"
    assert widget.locator(".monarch-job-context").inner_text() == "default"
    mesh = widget.locator("tr.monarch-job-mesh[data-mesh='hosts']")
    assert mesh.locator(".monarch-job-hosts").inner_text() == "2"
    assert mesh.locator(".monarch-job-live").inner_text() == "2"
    assert widget.locator(".monarch-job-class").inner_text() == "ProcessJob"

    # ── the Monarch sidebar lists the context as running ──
    server.ui.open_sidebar(page)
    item = page.locator(".jp-MonarchPanel-item").filter(
        has=page.locator(".jp-MonarchPanel-name", has_text="default")
    )
    item.locator(".jp-MonarchPanel-state", has_text="running").wait_for(timeout=10_000)
    assert "hosts ×2" in item.locator(".jp-MonarchPanel-meshes").inner_text()
    shot("job-running")

    # ── LIVE RUN GRID: %%remote on both ranks, one tile each, Stop interrupts ──
    run_cell(page, 3, wait=False)
    grid = page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".monarch-run-widget")
    grid.wait_for()
    tile0 = grid.locator(".monarch-run-tile[data-rank='0']")
    tile1 = grid.locator(".monarch-run-tile[data-rank='1']")
    grid.locator(".monarch-run-tile[data-rank='1'][data-status='failed']").wait_for(timeout=20_000)
    assert "rc 3" in tile1.locator(".monarch-run-status").inner_text()
    grid.locator(".monarch-run-tile[data-rank='0'][data-status='running']").wait_for()
    page.wait_for_function(  # live lines reach the tile while the cell runs
        "() => /tick \\d+/.test(document.querySelector(\".monarch-run-tile[data-rank='0'] .monarch-run-last\")?.textContent || '')",
        timeout=10_000,
    )
    first = tile0.locator(".monarch-run-last").inner_text()
    tile0.click()  # shows that rank's output, while the cell still runs
    grid.locator(".monarch-run-output .monarch-run-line", has_text="tick 1").first.wait_for()
    wait_until(lambda: tile0.locator(".monarch-run-last").inner_text() != first, 5, "more live lines")
    # its pane follows the new lines while the reader is at its end, and keeps their place once
    # they scroll up (the pane appends what arrives: its scroll is ours to keep)
    output = grid.locator(".monarch-run-output")
    at_end = "p => p.scrollHeight > p.clientHeight + 20 && p.scrollTop + p.clientHeight >= p.scrollHeight - 4"
    wait_until(lambda: output.evaluate(at_end), 10, "the pane overflowing, at its end")
    count = output.locator(".monarch-run-line").count
    seen = count()
    wait_until(lambda: count() > seen + 5 and output.evaluate(at_end), 10, "the pane following new lines")
    output.evaluate("p => { p.scrollTop = 0; }")
    seen = count()
    wait_until(lambda: count() > seen + 5, 10, "more lines while scrolled up")
    assert output.evaluate("p => p.scrollTop") == 0, "the pane jumped while the reader was scrolled up"
    grid.locator(".monarch-run-filter input").check()  # failing only
    wait_until(
        lambda: grid.locator(".monarch-run-tile").count() == 1 and tile1.is_visible(), 5, "failing only"
    )
    grid.locator(".monarch-run-filter input").uncheck()
    grid.scroll_into_view_if_needed()
    shot("run-grid-live")
    grid.locator(".monarch-run-stop").click()
    run_cell_3 = page.locator(".jp-Notebook .jp-Cell").nth(3)
    wait_prompt(run_cell_3, 3, 20)
    # one view per cell: the result takes the grid's place, with the lines the grid showed
    result = run_cell_3.locator(".jp-MonarchRun")
    result.wait_for(timeout=20_000)
    assert grid.count() == 0 and result.locator(".jp-MonarchRun-label").all_inner_texts() == [
        "hosts=0",
        "hosts=1",
    ]
    assert (
        run_cell_3.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']").count()
        == 0
    )
    wait_until(
        lambda: "KeyboardInterrupt: %%remote stopped on every rank" in _cell_text(page, 3),
        10,
        "the one-line interrupt message",
    )
    assert "Traceback" not in _cell_text(page, 3)
    assert len(worker_pids(tag)) == 2  # Stop ends the command, not the job
    shot("run-grid-stopped")

    _detached_run(server, page, shot, root)

    # ── Kill asks first; Cancel keeps the job ──
    widget.scroll_into_view_if_needed()
    widget.locator(".monarch-job-kill").click()
    confirm = widget.locator(".monarch-job-confirm")
    confirm.wait_for(state="visible")
    shot("kill-confirm")
    widget.locator(".monarch-job-cancel").click()
    confirm.wait_for(state="hidden")
    assert state.inner_text() == "running" and len(worker_pids(tag)) == 2

    widget.locator(".monarch-job-kill").click()
    confirm.click()
    widget.locator(".monarch-job-state[data-state='no job']").wait_for(timeout=30_000)
    wait_until(lambda: not worker_pids(tag), 15, "the workers to be reaped")
    wait_until(lambda: "killed the job of context 'default'" in widget.inner_text(), 10, "the kill message")
    item.locator(".jp-MonarchPanel-state", has_text="no job").wait_for(timeout=10_000)
    shot("job-killed")

    # ── save, and what the file keeps for non-widget readers ──
    page.locator(".jp-Notebook").click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")

    def saved_job_output():
        # the file was saved before (mid-run, above): wait for this save, which has the kill
        # (it re-published the output by its display id: the saved copy is the last state)
        outputs = _saved_cells(root)[2].get("outputs", [])
        data = outputs[0]["data"] if outputs else {}
        return data if "state     no job" in "".join(data.get("text/plain", "")) else None

    data = wait_until(saved_job_output, 15, "the notebook to be saved with the killed %job output")
    assert "application/vnd.jupyter.widget-view+json" not in data  # static first
    assert "Monarch job, context 'default'" in "".join(data["text/plain"])
    assert "as of" in "".join(data["text/plain"]) and "<table style=" in "".join(data["text/html"])

    # ── reload: the saved run result re-renders through the MIME renderer ──
    page.reload()
    # the restored workspace may hold other notebooks' panels too (hidden tabs): this one's cells
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")
    cells.first.wait_for()
    wait_kernel_idle(server, page, NOTEBOOK_FILE)
    job_cell = cells.nth(2)
    job_cell.scroll_into_view_if_needed()
    wait_until(
        lambda: "Monarch job" in job_cell.locator(".jp-OutputArea").inner_text(),
        15,
        "the reloaded %job output",
    )
    shot("reloaded-job")
    # the real %%remote run's result, saved with the notebook, re-renders too
    real = cells.nth(3).locator(".jp-MonarchRun")
    real.wait_for()
    ranks = ".jp-MonarchRun-label"
    on_screen(
        real,
        lambda: real.locator(ranks).all_inner_texts() == ["hosts=0", "hosts=1"],
        15,
        "the real run's ranks",
    )
    badges = real.locator(".jp-MonarchRun-badge-failed").all_inner_texts()
    assert len(badges) == 2 and badges[1] == "rc=3", (
        badges
    )  # hosts=0 interrupted (its rc: the signal), hosts=1 failed
    run = cells.nth(4).locator(".jp-MonarchRun")
    run.wait_for()
    filter_box = run.locator(".jp-MonarchRun-filter input")
    on_screen(
        run,
        lambda: filter_box.is_visible() and run.locator(ranks).all_inner_texts() == ["hosts=0", "hosts=1"],
        15,
        "the saved result's ranks on screen",
    )
    assert run.locator(".jp-MonarchRun-command").inner_text() == REMOTE_RESULT["command"]
    assert "1 ok, 1 failed" in run.locator(".jp-MonarchRun-meta").inner_text()
    assert run.locator(".jp-MonarchRun-badge-failed").inner_text() == "rc=3"
    on_screen(run, lambda: filter_box.check(timeout=2000) or True, 15, "'failing only' checked")
    on_screen(run, lambda: run.locator(ranks).all_inner_texts() == ["hosts=1"], 5, "failing only (saved)")
    run.scroll_into_view_if_needed()
    shot("reloaded-run-result")


def _saved_cells(root: Path, name: str = NOTEBOOK_FILE) -> list[dict]:
    return saved_cells(root / name)


def _detached_run(server: JupyterServer, page, shot, root: Path) -> None:
    """%%remote --detach: its grid updates live with the cell done, the sidebar lists the run
    with its attach line, a notebook saved mid-run and opened with another kernel says the
    run was still going and how to attach, and the grid's Stop stops the run."""
    run_cell(page, 5)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(5)
    wait_until(lambda: "started detached" in _cell_text(page, 5), 20, "the --detach output")
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6}) started detached", _cell_text(page, 5)).group(1)
    # the grid keeps updating with no cell running
    grid = cell.locator(".monarch-run-widget")
    grid.wait_for()
    last = grid.locator(".monarch-run-tile[data-rank='0'] .monarch-run-last")
    wait_until(
        lambda: re.search(r"tick \d+", last.inner_text() or ""), 20, "the detached run's lines in its grid"
    )
    first = last.inner_text()
    wait_kernel_idle(server, page, NOTEBOOK_FILE, 10)
    wait_until(
        lambda: last.inner_text() != first, 5, "more live lines in the detached grid while the kernel is idle"
    )
    # beside the live grid, the "started detached" note is hidden
    note = cell.locator(".jp-MonarchRun-isRunning")
    note.wait_for(state="attached")
    assert not note.is_visible()
    # the sidebar lists the running run with the line to attach to it
    run = page.locator(f".jp-MonarchPanel-run[data-run='{run_id}']")
    run.wait_for(timeout=10_000)
    assert run.locator(".jp-MonarchPanel-attach").inner_text() == f"%remote attach {run_id}"
    assert "for i in $(seq 1200)" in run.locator(".jp-MonarchPanel-runCommand").inner_text()
    assert "mesh hosts (2 ranks)" in run.locator(".jp-MonarchPanel-runMeta").inner_text()
    cell.scroll_into_view_if_needed()
    shot("detached-grid-and-sidebar")

    # ── save mid-run; open the saved file with another kernel (the grid's model is gone) ──
    page.locator(".jp-Notebook").click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")

    def saved_running():
        outputs = _saved_cells(root)[5].get("outputs", [])
        return [o["data"][RUN_MIME] for o in outputs if RUN_MIME in o.get("data", {})]

    payloads = wait_until(saved_running, 15, "the notebook saved with the running payload")
    assert payloads[0]["state"] == "running" and payloads[0]["run_id"] == run_id, payloads
    assert payloads[0]["detached"] is True, payloads
    # the grid cell that ran to its end earlier keeps no running payload (its end emptied it)
    for output in _saved_cells(root)[3].get("outputs", []):
        assert output.get("data", {}).get(RUN_MIME, {}).get("state") != "running", output
    shutil.copy(root / NOTEBOOK_FILE, root / MIDRUN_FILE)
    other = new_page(page.context.browser)
    try:
        # reset: a fresh Lab workspace shows only this file (Notebook 7 ignores it)
        other.goto(f"{server.url}{server.ui.notebook_url(MIDRUN_FILE)}?reset&token={server.token}")
        other.wait_for_selector(".jp-Notebook .jp-Cell")
        wait_until(lambda: "saved_midrun" in other.title(), 15, f"{MIDRUN_FILE} to be the page's notebook")
        saved = other.locator(".jp-Notebook .jp-Cell").nth(5)
        saved.scroll_into_view_if_needed()
        note = saved.locator(".jp-MonarchRun-isRunning")
        note.wait_for(state="visible", timeout=20_000)
        text = note.locator(".jp-MonarchRun-runningNote").inner_text()
        # no cell replaces a detached run's payload when it ends: the note says only how to see it
        assert text.startswith(f"Run {run_id} was started detached and may have ended since"), text
        assert note.locator(".jp-MonarchRun-attach").inner_text() == f"%remote attach {run_id}"
        shot.n += 1  # numbered with the main page's shots
        other.screenshot(path=str(shot.folder / f"{shot.n:02d}-saved-midrun-reopened.png"))
    finally:
        other.close()

    # ── the detached grid's Stop stops the run (a message to the idle kernel) ──
    grid.scroll_into_view_if_needed()
    grid.locator(".monarch-run-stop").click()
    # the run's end replaces the grid with its result (by display id, the kernel idle): a saved
    # notebook says how it ended, not that it "may have ended since"
    meta = cell.locator(".jp-MonarchRun-meta")
    wait_until(
        lambda: meta.count() == 1 and "interrupted" in meta.inner_text(), 20, "the detached run's result"
    )
    assert cell.locator(".monarch-run-widget").count() == 0
    page.locator(f".jp-MonarchPanel-run[data-run='{run_id}']").wait_for(state="detached", timeout=15_000)
    shot("detached-stopped")
