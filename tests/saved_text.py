"""Text-level checks of a saved notebook: what any front end shows of it, read from the JSON.

A ``%%remote`` cell holds each line once (its stream, or its result panel's copy, not both), its
result after the last streamed line, at most one error; no output holds a widget view of ours or
any other (it would outrank the static copy wherever the widget's model is gone)."""

from __future__ import annotations

from typing import Any

RUN = "application/vnd.monarch.remote+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


def run_cell_problems(outputs: list[dict[str, Any]]) -> list[str]:
    """What is wrong with one ``%%remote`` cell's saved outputs (empty: nothing; a cell never run
    has none)."""
    if not outputs:
        return []
    problems = []
    results = [
        i
        for i, o in enumerate(outputs)
        if RUN in o.get("data", {}) and o["data"][RUN].get("state") != "running"
    ]
    streams = [i for i, o in enumerate(outputs) if o.get("output_type") == "stream"]
    errors = [i for i, o in enumerate(outputs) if o.get("output_type") == "error"]
    if len(results) != 1:
        return [f"{len(results)} finished results, not one"]
    result = outputs[results[0]]["data"][RUN]
    if streams and streams[-1] > results[0]:
        problems.append("a streamed line after the result")
    if len(errors) > 1 or (errors and errors[0] < results[0]):
        problems.append(f"{len(errors)} errors, or an error before the result")
    streamed = {line for i in streams for line in _text(outputs[i]).splitlines()}
    for rank in result.get("ranks", []):
        for _stream, line in rank.get("lines", []):
            if f"[{rank['label']}] {line}" in streamed:
                problems.append(f"twice, streamed and in the result: [{rank['label']}] {line}")
    return problems


def view_problems(nb: dict[str, Any]) -> list[str]:
    """Widget views and widget state saved in ``nb``, each named."""
    problems = []
    state = nb.get("metadata", {}).get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    if state.get("state"):
        problems.append(f"{len(state['state'])} saved widget models")
    for number, cell in enumerate(nb.get("cells", [])):
        for output in cell.get("outputs", []):
            if WIDGET in output.get("data", {}):
                problems.append(f"cell {number}: a widget view")
    return problems


def count_problems(nb: dict[str, Any]) -> list[str]:
    """Execution counts that are not 1, 2, 3, … in cell order (or all empty)."""
    counts = [c.get("execution_count") for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    if all(c is None for c in counts):
        return []
    if counts != list(range(1, len(counts) + 1)):
        return [f"execution counts {counts}"]
    return []


def _text(output: dict[str, Any]) -> str:
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text
