"""A ``\\r`` progress bar on two real ranks (``--local hosts=2``) in a real JupyterLab, in Debian's
Chromium: while the cell runs, each rank's tile shows its bar as its last line, moving; the
cell shows the grid alone (no progress display beside it, no line per refresh); at the end, the
result. Screenshots land in ``test-artifacts/browser-progress/`` (gitignored)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from browser_util import (
    LAB,
    NEEDS_BUILD,
    NEEDS_CHROMIUM,
    REPO,
    chromium_page,
    jupyter_server,
    notebook,
    open_and_run,
    run_cell,
    wait_prompt,
    wait_until,
)

pytestmark = [NEEDS_CHROMIUM, NEEDS_BUILD, pytest.mark.timeout(300), pytest.mark.browser]

ARTIFACTS = REPO / "test-artifacts" / "browser-progress"
FILE = "progress.ipynb"
BAR = """%%remote python
import sys, time
for step in range(61):
    sys.stderr.write(f"\\r{step * 100 // 60:3d}%|{'#' * (step // 6):<10}| {step}/60")
    sys.stderr.flush()
    time.sleep(0.1)
sys.stderr.write("\\n")
print("trained", flush=True)"""
CELLS = ["%load_ext monarch_jupyter", "%job apply --local hosts=2", "%remote true", BAR, "%job kill"]


def _last_lines(grid) -> dict[str, str]:
    return grid.evaluate(
        """g => Object.fromEntries([...g.querySelectorAll('.monarch-run-tile')].map(
             t => [t.dataset.rank, (t.querySelector('.monarch-run-last') || {}).textContent || '']))"""
    )


def test_a_bar_moves_in_each_tiles_last_line(tmp_path: Path, tag: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / FILE).write_text(json.dumps(notebook(CELLS)))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with jupyter_server(root, tmp_path / "jupyter", tag, LAB) as server, chromium_page(tag) as page:
        open_and_run(server, page, FILE, 3, 120)
        run_cell(page, 3, wait=False)
        cell = page.locator(".jp-Notebook .jp-Cell").nth(3)
        grid = cell.locator(".monarch-run-widget")
        grid.locator(".monarch-run-tile").nth(1).wait_for(timeout=30_000)
        bar = re.compile(r"^\s*\d+%\|[# ]{10}\| (\d+)/60$")
        first = wait_until(
            lambda: (seen := _last_lines(grid)) and all(bar.match(v) for v in seen.values()) and seen,
            30,
            "a bar in every tile",
        )
        later = wait_until(
            lambda: (
                (seen := _last_lines(grid))
                and all(bar.match(v) for v in seen.values())
                and seen != first
                and seen
            ),
            10,
            "the bars moving",
        )
        page.screenshot(path=str(ARTIFACTS / "01-bars.png"))
        steps = {rank: int(bar.match(text).group(1)) for rank, text in later.items()}  # type: ignore[union-attr]
        assert all(steps[r] >= int(bar.match(first[r]).group(1)) for r in steps), (first, later)  # type: ignore[union-attr]
        # the grid alone: no progress display and no stream lines beside it while it runs
        outputs = cell.locator(".jp-OutputArea-output:not(:has(.monarch-run-widget))").all_inner_texts()
        assert not [t for t in outputs if "%|" in t], outputs
        wait_prompt(cell, 3, 60)
        page.screenshot(path=str(ARTIFACTS / "02-done.png"))
        run_cell(page, 4, 60)
