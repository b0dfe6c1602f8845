"""The saved-result renderer's "diff to majority", in a real JupyterLab and Notebook 7 (Chromium).

A notebook saved with a ``%%remote`` result of 8 ranks (payload from the real ``RunState``),
rank 5 failing with a different loss and rank 6 adding a warning, opens; the toggle is
switched from the keyboard; the diff lines read from the page are ``%%remote --diff``'s own
(``remote/view/diff.py``) for the same run; axe-core and the contrast check find nothing in light
and dark themes. Needs this checkout's build (``cd labextension && jlpm build:prod``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from browser_util import (
    LAB,
    NEEDS_BUILD,
    NEEDS_CHROMIUM,
    NOTEBOOK,
    Frontend,
    chromium_page,
    code_cell,
    jupyter_server,
    notebook,
)
from monarch_jupyter.remote.view.diff import diff_text
from monarch_jupyter.remote.view.model import (
    ERR,
    OUT,
    Exited,
    Finished,
    Output,
    RankState,
    RunState,
    Started,
)
from test_browser_views import AXE, AXE_RUN, CONTRAST, _theme

pytestmark = [
    NEEDS_CHROMIUM,
    NEEDS_BUILD,
    pytest.mark.skipif(not AXE.is_file(), reason="no axe-core: cd labextension && jlpm install"),
    pytest.mark.timeout(180),
    pytest.mark.browser,
]

NAME = "diff.ipynb"
LINES_JS = "n => Array.from(n.querySelectorAll('.jp-MonarchRun-line'), l => l.textContent)"


def saved_run() -> RunState:
    """8 ranks print a short training log; rank 5 fails at a NaN, rank 6 warns on stderr."""
    ranks = [RankState(label=f"hosts={i}", mesh="hosts", point={"hosts": i}, rank=i) for i in range(8)]
    state = RunState("python train.py", "bash", "mesh hosts (8 ranks)", ranks, started=0.0, clock=lambda: 2.0)
    for i in range(8):
        state.apply(Started(i))
        state.apply(Output(i, OUT, "epoch 1\nstep 1 loss 0.52\nstep 2 loss 0.48\n"))
        if i == 5:
            state.apply(Output(i, OUT, "step 3 loss nan\n"))
            state.apply(Output(i, ERR, "FloatingPointError: loss is nan\n"))
        else:
            state.apply(Output(i, OUT, "step 3 loss 0.45\ndone\n"))
        if i == 6:
            state.apply(Output(i, ERR, "warning: slow disk\n"))
        state.apply(Exited(i, 1 if i == 5 else 0, 1.5))
    state.apply(Finished())
    return state


def _saved(bundle: dict) -> dict:
    """The run's cell as saved: executed once, the bundle its display output."""
    output = {"output_type": "display_data", "metadata": {}, "data": bundle}
    return code_cell("%%remote\npython train.py", [output], execution_count=1)


@pytest.mark.parametrize("ui", [LAB, NOTEBOOK], ids=lambda ui: ui.name)
def test_diff_to_majority_on_a_saved_result(tmp_path: Path, tag: str, ui: Frontend) -> None:
    state = saved_run()
    expected = diff_text(state).splitlines()
    root = tmp_path / "root"
    root.mkdir()
    (root / NAME).write_text(json.dumps(notebook([_saved(state.mime_bundle())])))
    # every cell in the DOM, drawn: axe skips what content-visibility leaves out
    settings = (
        tmp_path / "jupyter" / "config" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    )
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    errors: list[str] = []
    with jupyter_server(root, tmp_path / "jupyter", tag, ui) as server, chromium_page(tag, 60_000) as page:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{server.url}{ui.notebook_url(NAME)}?token={server.token}")
        out = page.locator(".jp-MonarchRun").first
        out.locator(".jp-MonarchRun-rank").first.wait_for()
        ranks_before = out.locator(".jp-MonarchRun-rank").count()

        # from the keyboard: focus the toggle, Space ticks it
        toggle = out.locator(".jp-MonarchRun-diffToggle input")
        toggle.focus()
        page.keyboard.press(" ")
        out.locator(".jp-MonarchRun-diffHead").wait_for()
        head = out.locator(".jp-MonarchRun-diffHead").inner_text().splitlines()
        panels = out.locator(".jp-MonarchRun-outlier")
        shown = [panels.nth(i).evaluate(LINES_JS) for i in range(1, panels.count())]
        labels = out.locator(".jp-MonarchRun-outlier .jp-MonarchRun-label").all_inner_texts()

        # the majority's panel is closed; Enter on its summary opens and draws it
        majority = panels.nth(0)
        assert majority.evaluate(LINES_JS) == []
        majority.locator("summary").focus()
        page.keyboard.press("Enter")
        majority.locator(".jp-MonarchRun-line").first.wait_for()
        majority_lines = majority.evaluate(LINES_JS)

        page.on("console", lambda m: print(m.text) if m.text.startswith("axe:") else None)
        page.add_script_tag(path=str(AXE))
        found = {}
        for theme, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
            _theme(page, theme, light)
            found[theme] = page.evaluate(AXE_RUN, [".jp-MonarchRun"]) + page.evaluate(
                CONTRAST, [".jp-MonarchRun"]
            )

        # off again: the rank panels come back
        toggle.focus()
        page.keyboard.press(" ")
        out.locator(".jp-MonarchRun-diffHead").wait_for(state="detached")
        ranks_after = out.locator(".jp-MonarchRun-rank").count()
    shutil.rmtree(root, ignore_errors=True)
    assert head == ["--diff: hosts=[0-4,7] (6) agree; 2 outliers"], head
    assert labels == ["majority: hosts=[0-4,7] (6)", "hosts=5", "hosts=6"], labels
    # the page shows %%remote --diff's lines for the same run, in its order
    assert [line for lines in shown for line in lines] == expected[1:], (shown, expected)
    assert "+step 3 loss nan" in shown[0] and "+[err] FloatingPointError: loss is nan" in shown[0]
    assert "+[err] warning: slow disk" in shown[1]
    assert majority_lines == ["epoch 1", "step 1 loss 0.52", "step 2 loss 0.48", "step 3 loss 0.45", "done"]
    assert found == {"JupyterLab Light": [], "JupyterLab Dark": []}, json.dumps(found, indent=1)
    assert ranks_before == ranks_after == 8
    ours = [e for e in errors if "monarch" in e.lower()]
    assert not ours, ours
