"""One readable output per cell, in JupyterLab and Notebook 7, light and dark, in real Chromium.

A `%%remote` cell shows the live grid alone while it runs (no stream beside it) and its result
alone once it ends; SGR colours are coloured (computed styles, not classes) in the grid and in
the result; a multi-line command keeps its lines. The `%job` widget follows the theme, uses
JupyterLab's buttons, offers Apply where there is no job and looks disabled where it is. A
notebook reopened without its kernel shows one static copy of each output; a page with a widget
manager but without our extensions shows each output once; so does nbconvert's HTML.
Screenshots of each view go to test-artifacts/one-view/.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from browser_util import (
    LAB,
    NEEDS_BUILD,
    NEEDS_CHROMIUM,
    NOTEBOOK,
    Frontend,
    JupyterServer,
    chromium_page,
    code_cell,
    jupyter_server,
    notebook,
    run_cell,
    saved_cells,
    screenshot,
    wait_kernel_idle,
    wait_prompt,
    wait_theme,
    wait_until,
)
from harness import nbconvert_html
from monarch_jupyter.jobs import formatting
from monarch_jupyter.jobs.status import RUNNING, JobStatus, MeshStatus
from monarch_jupyter.remote.view import model

pytestmark = [NEEDS_CHROMIUM, NEEDS_BUILD, pytest.mark.timeout(300), pytest.mark.browser]

WIDGET = "application/vnd.jupyter.widget-view+json"
STDOUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']"
# ansi-green-fg (run.css, base.css): readable on the light and on the dark panes
GREEN = {"light": "rgb(0, 107, 53)", "dark": "rgb(111, 220, 140)"}
# two lines of command, an SGR-coloured line, then long enough for the grid to show
COLOURED = "%%remote\nprintf '\\033[32mgreen\\033[0m plain\\n'\nsleep 5; echo done"
UIS = pytest.mark.parametrize("ui", [LAB, NOTEBOOK], ids=["lab", "notebook"])
THEMES = pytest.mark.parametrize("theme", ["light", "dark"])


def _luminance(colour: str) -> float:
    """Relative luminance (0 black … 1 white) of a computed ``rgb(…)``/``rgba(…)`` colour."""
    r, g, b = (float(v) / 255 for v in re.findall(r"[\d.]+", colour)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@contextlib.contextmanager
def _page(
    tmp_path: Path, tag: str, files: dict[str, dict], ui: Frontend, theme: str = "light", ours: bool = True
) -> Iterator[tuple[JupyterServer, Any, Path]]:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    for name, content in files.items():
        (root / name).write_text(json.dumps(content))
    with (
        jupyter_server(root, tmp_path / "jupyter", tag, ui, theme=theme, ours=ours) as server,
        chromium_page(tag, 120_000) as page,
    ):
        yield server, page, root


def _open(server: JupyterServer, page: Any, name: str, theme: str = "light") -> None:
    page.goto(f"{server.url}{server.ui.notebook_url(name)}?token={server.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    wait_theme(page, theme)
    wait_kernel_idle(server, page, name)


def _visible(locator: Any) -> int:
    """How many of ``locator``'s elements are drawn (not display:none, not in a hidden one)."""
    return locator.evaluate_all("els => els.filter(e => e.getClientRects().length > 0).length")


def _save(page: Any, root: Path, name: str, done: Any) -> list[dict]:
    page.locator(".jp-Notebook").click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    return wait_until(
        lambda: (lambda cells: cells if done(cells) else None)(saved_cells(root / name)), 15, "the save"
    )


@UIS
@THEMES
def test_one_live_view_then_the_result_and_a_themed_job_widget(
    tmp_path: Path, tag: str, ui: Frontend, theme: str
):
    name = "one.ipynb"
    nb = notebook(["%load_ext monarch_jupyter", "%job", COLOURED, "%job kill"])
    shots = ("one-view", f"{ui.name}-{theme}")
    with _page(tmp_path, tag, {name: nb}, ui, theme) as (server, page, root):
        _open(server, page, name, theme)
        run_cell(page, 0)
        run_cell(page, 1)
        cells = page.locator(".jp-Notebook .jp-Cell")
        job = cells.nth(1).locator(".monarch-job-widget")
        job.wait_for()
        # ── the %job widget: the theme's colours, JupyterLab's buttons, Apply, a disabled Kill ──
        kill, apply = job.locator(".monarch-job-kill"), job.locator(".monarch-job-apply")
        assert "jp-mod-styled" in (kill.get_attribute("class") or "") and kill.is_disabled()
        assert float(kill.evaluate("b => getComputedStyle(b).opacity")) < 0.6  # looks disabled
        assert kill.get_attribute("title")  # and says why
        assert "jp-mod-accept" in (apply.get_attribute("class") or "")
        text = _luminance(job.evaluate("e => getComputedStyle(e).color"))
        refresh = _luminance(
            job.locator(".monarch-job-refresh").evaluate("b => getComputedStyle(b).backgroundColor")
        )
        assert (text < 0.3) if theme == "light" else (text > 0.6), (theme, text)
        assert refresh < 0.8, refresh  # not the light grey it was hard-coded to in both themes
        assert _visible(cells.nth(1).locator(".jp-OutputArea-child")) == 1
        screenshot(page, *shots, "job-no-job", locator=cells.nth(1))
        apply.click()  # the job starts from the widget, as `%job apply --local hosts=2`
        job.locator(".monarch-job-state[data-state='running']").wait_for(timeout=90_000)
        ago = job.locator(".monarch-job-ago")
        ago.wait_for()
        first = ago.inner_text()
        assert re.fullmatch(r" · \d+ s ago", first), first
        wait_until(lambda: ago.inner_text() != first, 12, "the apply time's age to move on")
        screenshot(page, *shots, "job-running", locator=cells.nth(1))

        # ── %%remote: the live grid alone, then the result alone ──
        run_cell(page, 2, wait=False)
        cell = cells.nth(2)
        grid = cell.locator(".monarch-run-widget")
        grid.locator(".monarch-run-tile").nth(1).wait_for(timeout=30_000)
        grid.locator(".monarch-run-tile[data-rank='0']").click()
        line = grid.locator(".monarch-run-output .ansi-green-fg").first
        line.wait_for()
        live_colour = line.evaluate("e => getComputedStyle(e).color")
        plain_colour = grid.locator(".monarch-run-output").evaluate("e => getComputedStyle(e).color")
        running = cell.locator(".jp-InputArea-prompt").inner_text().strip() == "[*]:"
        stream_shown = _visible(cell.locator(STDOUT))
        screenshot(page, *shots, "grid-live", locator=cell)
        wait_prompt(cell, 2, 60)
        result = cell.locator(".jp-MonarchRun")
        result.wait_for(timeout=15_000)
        outputs = cell.locator(".jp-OutputArea-child").count()
        grids_after = grid.count()
        commands = result.locator(".jp-MonarchRun-command").count()
        result.locator("details.jp-MonarchRun-rank").first.evaluate("d => { d.open = true; }")
        coloured = result.locator(".ansi-green-fg").first
        coloured.wait_for()
        result_colour = coloured.evaluate("e => getComputedStyle(e).color")
        screenshot(page, *shots, "result", locator=cell)
        run_cell(page, 3)
        job.locator(".monarch-job-state[data-state='no job']").wait_for(timeout=30_000)
        job_alive = _visible(job) == 1
        saved = _save(page, root, name, lambda cells: bool(cells[3].get("outputs")))
    assert running and stream_shown == 0, (running, stream_shown)  # the lines were the grid's alone
    assert live_colour == GREEN[theme] and plain_colour != GREEN[theme], (live_colour, plain_colour)
    assert outputs == 1 and grids_after == 0, (outputs, grids_after)  # the result took the grid's place
    assert commands == 0  # the cell's source is its input, not repeated in the result
    assert result_colour == GREEN[theme], result_colour
    run_out = saved[2]["outputs"]
    assert [o["output_type"] for o in run_out] == ["display_data"], run_out  # no stream, no empty output
    assert run_out[0]["data"][model.MIME_TYPE]["state"] == "finished"
    job_out = saved[1]["outputs"]
    assert len(job_out) == 1 and WIDGET not in job_out[0]["data"], job_out  # static first
    # the %job kill of the last cell updated it by its display id: the saved copy is the last state
    assert job_out[0]["data"][formatting.JOB_MIME]["state"] == "no job", job_out
    assert job_alive, "the live %job view gave way when the kill re-published its copy"


def _job_output(model_id: str) -> dict:
    status = JobStatus(
        context="default",
        state=RUNNING,
        job_class="ProcessJob",
        meshes=[MeshStatus("hosts", 2, 2)],
        spec="x.y",
    )
    return {"output_type": "display_data", "metadata": {}, "data": formatting.job_bundle(status, model_id)}


def _midrun_output(model_id: str) -> dict:
    state = model.RunState(
        command="sleep 600",
        mode="bash",
        target="mesh hosts (2 ranks)",
        ranks=[
            model.RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(2)
        ],
        started=time.time(),
    )
    state.run_id = "20261207-010203-abc123"
    state.apply(model.Started(0))
    data = {"text/plain": "%%remote", **state.running_bundle(model_id=model_id)}
    return {"output_type": "display_data", "metadata": {}, "data": data}


@UIS
@THEMES
def test_reopened_without_the_kernel_each_output_shows_one_static_copy(
    tmp_path: Path, tag: str, ui: Frontend, theme: str
):
    """The outputs as the kernel saves them, their widget models gone (a new kernel): the job's
    HTML and the run's "still running" note, once each, no "model not found". Saved by the page
    and reloaded, the notebook opens clean (a file written by hand is dirtied by JupyterLab
    itself, which completes its language_info from the kernel)."""
    name = "reopened.ipynb"
    nb = notebook(
        [
            code_cell("%job", [_job_output("0" * 32)], execution_count=2),
            code_cell("%%remote\nsleep 600", [_midrun_output("1" * 32)], execution_count=3),
        ]
    )
    nb["metadata"]["widgets"] = {}  # as Lab saves: no widget state
    with _page(tmp_path, tag, {name: nb}, ui, theme) as (server, page, root):
        _open(server, page, name, theme)
        page.locator(".jp-Notebook").click(position={"x": 5, "y": 5})
        page.keyboard.press("Control+s")
        # saved by the page: the language_info JupyterLab completed from the kernel is in the file
        wait_until(lambda: "codemirror_mode" in (root / name).read_text(), 15, "the save")
        page.reload()
        _open(server, page, name, theme)
        cells = page.locator(".jp-Notebook .jp-Cell")
        note = cells.nth(1).locator(".jp-MonarchRun-isRunning")
        note.wait_for(timeout=20_000)
        wait_until(lambda: "Monarch job" in cells.nth(0).inner_text(), 15, "the job's static copy")
        time.sleep(2)  # what the widget manager would do to these outputs, done
        body = page.locator(".jp-Notebook").inner_text()
        jobs = _visible(cells.nth(0).locator("table"))
        notes = _visible(page.locator(".jp-MonarchRun-isRunning"))
        dirty = page.evaluate("() => document.querySelectorAll('.jp-mod-dirty').length")
        screenshot(page, "one-view", f"{ui.name}-{theme}", "reopened")
    assert "model not found" not in body and "Error displaying widget" not in body, body
    assert body.count("Monarch job") == 1 and jobs >= 1, body
    assert notes == 1 and "still running when saved" in body
    assert dirty == 0, dirty


def test_a_page_without_our_extensions_shows_each_output_once(tmp_path: Path, tag: str):
    """A widget manager, but neither our labextension nor our server extension (as VS Code,
    Colab): every output is its static copy, never "model not found": the `%job` HTML (updated
    by the later kill), the run's lines streamed and its result after them, each line once."""
    name = "plain.ipynb"
    nb = notebook(["%load_ext monarch_jupyter", "%job apply --local hosts=2", "%job", COLOURED, "%job kill"])
    with _page(tmp_path, tag, {name: nb}, LAB, ours=False) as (server, page, root):
        _open(server, page, name)
        assert page.locator(".jp-MonarchPanel").count() == 0  # the labextension is off
        for index in range(3):
            run_cell(page, index, timeout=90)
        cells = page.locator(".jp-Notebook .jp-Cell")
        wait_until(lambda: "running" in cells.nth(2).locator(".jp-OutputArea").inner_text(), 15, "the job")
        job_text = cells.nth(2).locator(".jp-OutputArea").inner_text()
        job_outputs = cells.nth(2).locator(".jp-OutputArea-child").count()
        screenshot(page, "one-view", "without-ours", "job", locator=cells.nth(2))
        run_cell(page, 3, wait=False)
        wait_until(lambda: _visible(cells.nth(3).locator(STDOUT)) > 0, 30, "the streamed lines")
        screenshot(page, "one-view", "without-ours", "run-live", locator=cells.nth(3))
        wait_prompt(cells.nth(3), 3, 60)
        wait_until(lambda: "2 ok" in cells.nth(3).locator(".jp-OutputArea").inner_text(), 10, "the result")
        run_text = cells.nth(3).locator(".jp-OutputArea").inner_text()
        run_cell(page, 4)
        wait_until(lambda: "no job" in cells.nth(2).locator(".jp-OutputArea").inner_text(), 15, "the update")
        screenshot(page, "one-view", "without-ours", "page", locator=page.locator(".jp-Notebook"))
        body = page.locator(".jp-Notebook").inner_text()
        saved = _save(page, root, name, lambda cells: bool(cells[4].get("outputs")))
    assert "model not found" not in body and "Error displaying widget" not in body, body
    assert job_outputs == 1 and job_text.count("Monarch job") == 1 and "running" in job_text, job_text
    assert run_text.count("green plain") == 2, run_text  # each rank's line once: streamed, not repeated
    assert run_text.index("done") < run_text.index("2 ok"), run_text  # the result after the last line
    assert all(WIDGET not in o.get("data", {}) for c in saved for o in c.get("outputs", []))
    assert saved[2]["outputs"][0]["data"][formatting.JOB_MIME]["state"] == "no job"


def test_nbconvert_html_shows_each_output_once(tmp_path: Path, tag: str):
    """A notebook as Lab saves it (no widget state), exported to HTML and opened in Chromium
    offline: the job's table and the run's result, once each."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    sources = ["%load_ext monarch_jupyter", "%job apply --local hosts=2", "%job", COLOURED, "%job kill"]
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    env_path = {"metadata": {"path": str(tmp_path)}}
    NotebookClient(nb, timeout=180, store_widget_state=False, resources=env_path).execute()
    saved = tmp_path / "exported.ipynb"
    nbformat.write(nb, saved)
    exported = nbconvert_html(saved)
    with chromium_page(tag) as page:
        page.route(
            "**/*",
            lambda route: route.abort() if not route.request.url.startswith("file:") else route.continue_(),
        )
        page.goto(exported.as_uri())
        page.wait_for_load_state("load")
        text = page.locator("body").inner_text()
        screenshot(page, "one-view", "nbconvert", "page")
    assert text.count("Monarch job") == 1, text
    assert text.count("still running when saved") == 0
    assert "2 ok" in text


def _left_current(server: JupyterServer) -> str | None:
    """The left-area widget JupyterLab saved in the default workspace, if any."""
    try:
        workspace = server.api("/lab/api/workspaces/default")
    except OSError:
        return None
    data = workspace.get("data", {}) if isinstance(workspace, dict) else {}
    left = data.get("layout-restorer:data", {}).get("left", {}) if isinstance(data, dict) else {}
    return left.get("current") if isinstance(left, dict) else None


@pytest.mark.parametrize(
    ("ui", "theme"),
    [(LAB, "light"), (LAB, "dark"), (NOTEBOOK, "light")],
    ids=["lab-light", "lab-dark", "notebook"],
)
def test_the_sidebar_refreshes_shows_local_times_and_comes_back_on_reload(
    tmp_path: Path, tag: str, ui: Frontend, theme: str
):
    name = "side.ipynb"
    nb = notebook(["%load_ext monarch_jupyter", "%job apply --local hosts=2", "%job kill"])
    with _page(tmp_path, tag, {name: nb}, ui, theme) as (server, page, _root):
        _open(server, page, name, theme)
        run_cell(page, 0)
        run_cell(page, 1, timeout=90)
        server.ui.open_sidebar(page)
        panel = page.locator(".jp-MonarchPanel")
        head = panel.locator(".jp-MonarchPanel-itemHead").first
        head.wait_for()
        head.click()
        panel.locator(".jp-MonarchPanel-detailsTitle").wait_for()
        rows = dict(
            zip(
                panel.locator(".jp-MonarchPanel-detailsTable th").all_inner_texts(),
                panel.locator(".jp-MonarchPanel-detailsTable td").all_inner_texts(),
                strict=True,
            )
        )
        fetches: list[str] = []
        page.on("request", lambda r: fetches.append(r.url) if "/monarch-jupyter/contexts" in r.url else None)
        panel.locator(".jp-MonarchPanel-refresh").click()
        wait_until(lambda: fetches, 5, "the refresh button to list the contexts")
        screenshot(page, "one-view", f"sidebar-{ui.name}-{theme}", locator=panel)
        # the palette has the sidebar's commands
        page.keyboard.press("Control+Shift+c")
        palette = page.locator(".lm-CommandPalette-input")
        palette.wait_for()
        palette.fill("Monarch Sidebar")
        labels = page.locator(".lm-CommandPalette-itemLabel").all_inner_texts()
        page.keyboard.press("Escape")
        restored = None
        if ui is LAB:  # Notebook 7's pages have no layout restorer
            # the layout is saved a moment after it changes: reload once the workspace has it
            wait_until(lambda: _left_current(server) == "monarch-jupyter-sidebar", 20, "the layout saved")
            page.reload()
            page.wait_for_selector(".jp-Notebook .jp-Cell")
            restored = page.locator(".jp-MonarchPanel").first
            restored.wait_for(timeout=30_000)
            restored = restored.is_visible()
        _open(server, page, name, theme)
        run_cell(page, 2)
    local = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
    assert local.fullmatch(rows["applied"]) and local.fullmatch(rows["updated"]), rows
    assert {"Show Monarch Sidebar", "Refresh Monarch Sidebar"} <= set(labels), labels
    assert restored in (None, True), "the sidebar was not restored with the layout"
