"""`jupyter nbconvert --to html` of a saved notebook shows each output once, offline.

`%job` is one output: the widget's view with its text/plain, text/html and our marker. A
notebook saved by JupyterLab or Notebook 7 holds no widget state (their default), so nbconvert
skips the view and exports the HTML. A notebook run by nbclient stores the state: nbconvert then
exports the view (drawn by a widget manager from a CDN, so nothing offline) and no HTML copy.
A `%%remote` run that outlasts the grid's delay has the grid in its place while it runs and the
result there at the end: the export shows the result once."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from harness import nbconvert_html

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
        nbformat.v4.new_code_cell("%job"),
        nbformat.v4.new_code_cell("%job apply --local hosts=2"),
        nbformat.v4.new_code_cell("%%remote\necho exported-line; sleep 1"),
        nbformat.v4.new_code_cell("%job kill"),
    ]
    # as JupyterLab saves: no widget state in the notebook
    client = NotebookClient(
        nb, timeout=180, store_widget_state=False, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    job_outputs = [sorted(o.get("data", {})) for o in nb.cells[1].outputs]
    assert job_outputs == [sorted([WIDGET, JOB, "text/html", "text/plain"])], job_outputs
    run_outputs = nb.cells[3].outputs
    kinds = [o.get("name") or sorted(o.get("data", {})) for o in run_outputs]
    # the lines as they were streamed (no view drew them: nbclient has no widget manager) and
    # the result where the grid stood; no empty output, no "still running" copy
    results = [k for k in kinds if k != "stdout"]
    assert results == [sorted([RUN, "text/html", "text/plain"])] and "stdout" in kinds, kinds
    streamed = "".join(o["text"] for o in run_outputs if o.get("name") == "stdout")
    assert sorted(streamed.splitlines()) == ["[hosts=0] exported-line", "[hosts=1] exported-line"], streamed
    assert next(o for o in run_outputs if "data" in o)["data"][RUN]["state"] == "finished"
    shown = _export(nb, tmp_path)
    assert shown.count("Monarch job") == 1, shown.count("Monarch job")
    assert "no job" in shown[shown.index("Monarch job") :][:3000]
    assert "still running when saved" not in shown
    assert shown.count("exported-line") >= 1


def test_nbconvert_after_nbclient_exports_the_view_not_a_second_copy(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext monarch_jupyter"), nbformat.v4.new_code_cell("%job")]
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert len(nb.cells[1].outputs) == 1
    model_id = nb.cells[1].outputs[0]["data"][WIDGET]["model_id"]
    assert model_id in nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    shown = _export(nb, tmp_path)
    assert shown.count("Monarch job") == 0  # the view's script, for a widget manager: never two copies
