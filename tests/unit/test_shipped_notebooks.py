"""The notebooks we ship (notebooks/, the docs' tutorials) are clean as saved: no widget state or
view (a front end without our labextension would show "model not found"), execution counts
1, 2, 3, …, and each ``%%remote`` cell holds each line once with its result last."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from saved_text import count_problems, run_cell_problems, view_problems  # tests/: conftest.py

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_a_shipped_notebook_is_clean(path: Path) -> None:
    nb = json.loads(path.read_text())
    problems = view_problems(nb) + count_problems(nb)
    for number, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and "".join(cell["source"]).lstrip().startswith("%%remote"):
            problems += [f"cell {number}: {p}" for p in run_cell_problems(cell.get("outputs", []))]
    assert not problems, f"{path.name}: " + "; ".join(problems)


def test_the_checks_see_what_they_check() -> None:
    """Each problem the checks name, on a made-up cell that has it."""
    run = {"state": "finished", "ranks": [{"label": "hosts=0", "lines": [["out", "hi"]]}]}
    result = {"output_type": "display_data", "data": {"application/vnd.monarch.remote+json": run}}
    stream = {"output_type": "stream", "name": "stdout", "text": "[hosts=0] hi\n"}
    assert run_cell_problems([stream, result]) == ["twice, streamed and in the result: [hosts=0] hi"]
    streamed = {**run, "streamed": True, "ranks": [{"label": "hosts=0", "lines": []}]}
    result = {"output_type": "display_data", "data": {"application/vnd.monarch.remote+json": streamed}}
    assert run_cell_problems([stream, result]) == []
    assert run_cell_problems([result, stream]) == ["a streamed line after the result"]
    view = {"output_type": "display_data", "data": {"application/vnd.jupyter.widget-view+json": {}}}
    nb = {"cells": [{"cell_type": "code", "execution_count": 2, "outputs": [view]}], "metadata": {}}
    assert view_problems(nb) == ["cell 0: a widget view"] and count_problems(nb) == ["execution counts [2]"]
