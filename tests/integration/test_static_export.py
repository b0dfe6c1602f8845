"""`jupyter nbconvert --to html` of a saved notebook shows the `%job` status as text, offline:
nbconvert renders a widget's view (a script for a widget manager from a CDN) in place of its
text/html, so `%job` adds an HTML-only copy that the export shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.kernel


def test_nbconvert_html_shows_the_job_status(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext monarch_jupyter"), nbformat.v4.new_code_cell("%job")]
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    kinds = [list(o.get("data", {})) for o in nb.cells[1].outputs]
    assert ["application/vnd.jupyter.widget-view+json", "text/html", "text/plain"] in [
        sorted(k) for k in kinds
    ]
    saved = tmp_path / "saved.ipynb"
    nbformat.write(nb, saved)
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(saved)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    page = (tmp_path / "saved.html").read_text()
    shown = re.sub(r"<script\b.*?</script>", "", page, flags=re.DOTALL)  # what shows with no JS
    assert 'class="monarch-static-fallback"' in shown
    copy = shown[shown.index('class="monarch-static-fallback"') :][:3000]
    assert "no job" in copy, copy
