"""The live grid's grouped tiles and Stacks button in a real JupyterLab and a real Notebook 7, in
Debian's Chromium, on real ``--local hosts=2`` workers, while the cell still runs.

Both ranks print the same line and wait in the same frame: the grid (grouping switched on) shows
one tile ``hosts=[0-1] (2)``, whose Stacks button brings one folded stack for both. Then rank 0
prints a line rank 1 does not: rank 1 unfolds into a tile of its own, and its Stacks button names
the frame it is stuck in (``stuck_in_sleep``), with the cell still executing. Stop ends the run.
Screenshots land in ``test-artifacts/browser-grid/<lab|notebook>/`` (gitignored).
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest

from browser_util import (
    LAB,
    NOTEBOOK,
    REPO,
    Frontend,
    JupyterServer,
    chromium_page,
    jupyter_server,
    notebook,
    open_and_run,
    run_cell,
    wait_prompt,
    wait_until,
)

ARTIFACTS = REPO / "test-artifacts" / "browser-grid"
FILE = "grid.ipynb"
CELL = """%%remote python
import os, time
def stuck_in_sleep():
    time.sleep(120)
def waiting_together():
    time.sleep(12)
print("hello from every rank", flush=True)
waiting_together()
if os.environ["MONARCH_RANK_hosts"] == "0":
    print("rank 0 goes on", flush=True)
    time.sleep(120)
else:
    stuck_in_sleep()"""
CELLS = ["%load_ext monarch_jupyter", "%job apply --local hosts=2", "%remote true", CELL]


def _running(page, index: int) -> bool:
    prompt = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-prompt")
    return (prompt.inner_text() or "").strip() == "[*]:"


def _stacks_text(grid, label: str) -> str:
    """The newest stacks answer for ``label`` once it came ('' before)."""
    box = grid.locator(".monarch-run-stacksBox", has_text=f"stacks of {label}").first
    text = box.locator(".monarch-run-stacksText, .monarch-run-stacksError")
    return text.inner_text() if text.count() else ""


def _server_root(tmp_path: Path, name: str, cells: list[str], ui: Frontend) -> tuple[Path, Path]:
    """The server's root holding notebook ``name`` of ``cells``, and the folder for its screenshots."""
    root = tmp_path / "root"
    root.mkdir()
    (root / name).write_text(json.dumps(notebook(cells)))
    shots = ARTIFACTS / ui.name
    shots.mkdir(parents=True, exist_ok=True)
    return root, shots


@pytest.mark.parametrize("ui", [LAB, NOTEBOOK], ids=lambda ui: ui.name)
def test_grid_groups_and_stacks_in_the_browser(tmp_path: Path, tag: str, ui: Frontend) -> None:
    root, shots = _server_root(tmp_path, FILE, CELLS, ui)
    with jupyter_server(root, tmp_path / "jupyter", tag, ui) as server, chromium_page(tag) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            _scenario(server, page, shots)
        except Exception:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(shots / "failure.png"))
            raise
        assert not [e for e in errors if "monarch" in e.lower()], errors


def _scenario(server: JupyterServer, page, shots: Path) -> None:
    open_and_run(server, page, FILE, 3, 90)
    run_cell(page, 3, wait=False)
    grid = page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".monarch-run-widget")
    grid.wait_for(timeout=30_000)
    grid.locator(".monarch-run-groupToggle input").check()  # 2 ranks start ungrouped
    together = grid.locator(".monarch-run-group[data-count='2']", has_text="hosts=[0-1] (2)")
    together.wait_for(timeout=20_000)
    assert grid.locator(".monarch-run-tile").count() == 1
    together.locator(".monarch-run-stacksButton").click()
    text = wait_until(
        lambda: (
            "waiting_together" in _stacks_text(grid, "hosts=[0-1] (2)")
            and _stacks_text(grid, "hosts=[0-1] (2)")
        ),
        20,
        "the group's stacks",
    )
    assert "hosts=[0-1] (2):" in text, text  # one folded stack for both ranks
    page.screenshot(path=str(shots / "01-grouped-stacks.png"))
    # rank 0 prints a line rank 1 does not: rank 1 unfolds (after live --group's HOLD)
    stuck = grid.locator(".monarch-run-tile[data-rank='1']:not(.monarch-run-group)")
    stuck.wait_for(timeout=30_000)
    assert grid.locator(".monarch-run-group").count() == 0
    stuck.locator(".monarch-run-stacksButton").click()
    text = wait_until(
        lambda: "stuck_in_sleep" in _stacks_text(grid, "hosts=1") and _stacks_text(grid, "hosts=1"),
        20,
        "rank 1's stacks",
    )
    assert "time.sleep" in text or "sleep" in text, text
    assert _running(page, 3), "the stacks came only after the cell ended"
    page.screenshot(path=str(shots / "02-rank-stacks.png"))
    grid.locator(".monarch-run-stop").click()
    wait_prompt(page.locator(".jp-Notebook .jp-Cell").nth(3), 3, 60)  # the stopped cell
    deadline = time.monotonic() + 10
    while grid.locator(".monarch-run-tile[data-status='running']").count() and time.monotonic() < deadline:
        time.sleep(0.2)


FOUR = "four.ipynb"
FOUR_CELL = """%%remote
echo "rank $MONARCH_RANK_hosts warming up the data loader for the next epoch"; sleep 8"""
FIT_JS = """grid => {
  const cut = e => e.scrollWidth > e.clientWidth + 1;
  const statuses = [...grid.querySelectorAll('.monarch-run-tile .monarch-run-status')];
  const header = grid.querySelector('.monarch-run-header');
  const boxes = [...header.children].map(c => c.getBoundingClientRect()).filter(b => b.height > 0);
  return {
    tiles: grid.querySelectorAll('.monarch-run-tile').length,
    rows: new Set([...grid.querySelectorAll('.monarch-run-tile')].map(t => Math.round(t.getBoundingClientRect().top))).size,
    cut: statuses.filter(cut).map(e => e.textContent),
    statuses: statuses.map(e => e.textContent),
    // one line: every part of the header overlaps every other vertically
    parts: [...header.children].map(c => [c.className, Math.round(c.getBoundingClientRect().top), Math.round(c.getBoundingClientRect().bottom)]),
    oneLine: Math.max(...boxes.map(b => b.top)) < Math.min(...boxes.map(b => b.bottom)),
    width: grid.getBoundingClientRect().width,
  };
}"""


@pytest.mark.parametrize("ui", [LAB, NOTEBOOK], ids=lambda ui: ui.name)
def test_four_ranks_fit_one_row_with_whole_statuses(tmp_path: Path, tag: str, ui: Frontend) -> None:
    """Four running ranks at the test's 1400 px viewport: one row of tiles, every status whole
    (the label gives way first), the header on one line."""
    cells = [
        "%load_ext monarch_jupyter",
        "%job apply --local hosts=4",
        "%remote true",
        FOUR_CELL,
        "%job kill",
    ]
    root, shots = _server_root(tmp_path, FOUR, cells, ui)
    with jupyter_server(root, tmp_path / "jupyter", tag, ui) as server, chromium_page(tag) as page:
        open_and_run(server, page, FOUR, 3, 120)
        run_cell(page, 3, wait=False)
        cell = page.locator(".jp-Notebook .jp-Cell").nth(3)
        grid = cell.locator(".monarch-run-widget")
        grid.locator(".monarch-run-tile").nth(3).wait_for(timeout=30_000)
        wait_until(
            lambda: grid.locator(".monarch-run-tile[data-status='running']").count() == 4, 20, "4 running"
        )
        fit = grid.evaluate(FIT_JS)
        page.screenshot(path=str(shots / "03-four-ranks.png"))
        wait_prompt(cell, 3, 60)
        run_cell(page, 4, 60)
    assert fit["tiles"] == 4 and fit["rows"] == 1, fit
    assert not fit["cut"] and all("running" in s for s in fit["statuses"]), fit
    assert fit["oneLine"], fit["parts"]
