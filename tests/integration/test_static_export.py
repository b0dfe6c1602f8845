"""`jupyter nbconvert --execute`, to ipynb and HTML: a saved notebook is the truth, offline.

Static first: `%job` and a running grid are one output each of our payload, self-contained
text/html and text/plain, with no widget view, so nbconvert (and any front end without our
labextension) shows the HTML, whether or not the widget state was stored. A later `%job kill`
updates the earlier `%job` output by its display id. A `%%remote` cell holds each line once
(streamed, not repeated in its result) and its result after the last line."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from harness import nbconvert_html
from saved_text import count_problems, run_cell_problems, view_problems

pytestmark = pytest.mark.kernel

WIDGET = "application/vnd.jupyter.widget-view+json"
JOB = "application/vnd.monarch.job+json"
RUN = "application/vnd.monarch.remote+json"


def _export(nb: nbformat.NotebookNode, folder: Path) -> str:
    """The HTML nbconvert makes of ``nb``, without its scripts (what shows with no JS)."""
    saved = folder / "saved.ipynb"
    nbformat.write(nb, saved)
    page = nbconvert_html(saved).read_text()
    return re.sub(r"<script\b.*?</script>", "", page, flags=re.DOTALL)


def test_nbconvert_html_shows_the_job_status_and_run_result_once(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext monarch_jupyter"),
        nbformat.v4.new_code_cell("%job apply --local hosts=2"),
        nbformat.v4.new_code_cell("%job"),
        nbformat.v4.new_code_cell("%%remote\necho exported-line; sleep 1; echo tick-$MONARCH_RANK_hosts"),
        nbformat.v4.new_code_cell("%%remote\necho fast-line"),
        nbformat.v4.new_code_cell("%job kill"),
    ]
    # as JupyterLab saves: no widget state in the notebook
    client = NotebookClient(
        nb, timeout=180, store_widget_state=False, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    saved = nbformat.from_dict(nb)
    assert view_problems(saved) == [] and count_problems(saved) == []
    job_outputs = nb.cells[2].outputs
    assert [sorted(o.get("data", {})) for o in job_outputs] == [sorted([JOB, "text/html", "text/plain"])]
    # the later %job kill updated it: the saved copy is the last state, and says when
    job = job_outputs[0]["data"]
    assert job[JOB]["state"] == "no job" and "as of" in job["text/plain"], job["text/plain"]
    for cell in (3, 4):
        outputs = nb.cells[cell].outputs
        assert run_cell_problems(outputs) == [], (cell, outputs)
        assert outputs[-1]["data"][RUN]["state"] == "finished" and outputs[-1]["data"][RUN]["streamed"]
    slow = nb.cells[3].outputs
    streamed = "".join(o["text"] for o in slow if o.get("name") == "stdout").splitlines()
    # the first run on a fresh job may wait for its ranks' actors (spawned, or warmed after the
    # apply) and says so once, first
    if streamed and streamed[0] == "starting the ranks…":
        streamed = streamed[1:]
    assert sorted(streamed) == [
        "[hosts=0] exported-line",
        "[hosts=0] tick-0",
        "[hosts=1] exported-line",
        "[hosts=1] tick-1",
    ], streamed
    # the grid that stood while it ran (no widget manager drew it) is emptied, not the result's place
    grids = [o for o in slow if o["output_type"] == "display_data" and RUN not in o["data"]]
    assert [g["data"] for g in grids] == [{"text/plain": ""}], grids
    shown = _export(nb, tmp_path)
    assert shown.count("Monarch job") == 1, shown.count("Monarch job")
    assert "no job" in shown[shown.index("Monarch job") :][:3000]
    assert "still running when saved" not in shown and "model not found" not in shown
    # each line once (the source holds the words too: count the ranks' lines)
    assert shown.count("] exported-line") == 2 and shown.count("] fast-line") == 2
    # the result's table comes after the last streamed line
    result = (
        shown.index('class="monarch-remote"')
        if 'class="monarch-remote"' in shown
        else shown.index("monarch-remote'")
    )
    assert shown.index("] tick-0") < result and shown.index("] tick-1") < result


def test_nbconvert_after_nbclient_exports_the_html_even_with_widget_state(tmp_path: Path) -> None:
    """nbclient stores the widget state by default: no output holds a view of it, so the export
    shows the HTML copy, never a script for a widget manager from a CDN."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext monarch_jupyter"), nbformat.v4.new_code_cell("%job")]
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert len(nb.cells[1].outputs) == 1 and WIDGET not in nb.cells[1].outputs[0]["data"]
    shown = _export(nb, tmp_path)
    assert shown.count("Monarch job") == 1, shown.count("Monarch job")
