"""Size of a saved notebook with N live run grids, executed by nbclient (which stores the
widget state in the notebook's metadata, as `jupyter execute`, papermill and
`scripts/run_notebook.py --save` do).

    .venv/bin/python benchmarks/bench_saved.py [--runs 50] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import TAG_VAR, new_tag, reap


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=1.0, help="how long each run lasts")
    parser.add_argument("--out", type=Path, help="keep the executed notebook here")
    args = parser.parse_args()
    tag = new_tag()
    os.environ[TAG_VAR] = tag
    try:
        with tempfile.TemporaryDirectory() as tmp:
            nb = nbformat.v4.new_notebook()
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
            cells = ["%load_ext monarch_jupyter", "%job apply --local hosts=2"]
            cells += [f"%%remote\necho start; sleep {args.seconds}; echo done"] * args.runs
            cells.append("%job kill")
            nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
            NotebookClient(nb, timeout=120, resources={"metadata": {"path": tmp}}).execute()
            text = nbformat.writes(nb)
            state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
            models = state.get("state", {})
            grids = [
                m
                for m in models.values()
                if m.get("state", {}).get("_anywidget_id", "").endswith("RunWidget")
            ]
            esm = sum(len(m["state"].get("_esm", "")) + len(m["state"].get("_css", "")) for m in grids)
            print(
                f"{args.runs} runs: saved notebook {len(text) / 1e3:.0f} KB, widget state "
                f"{len(json.dumps(state)) / 1e3:.0f} KB, {len(grids)} grids carrying "
                f"{esm / 1e3:.1f} KB of _esm/_css ({esm / max(1, len(grids)) / 1e3:.2f} KB each)"
            )
            if args.out:
                args.out.write_text(text)
    finally:
        reap(tag)


if __name__ == "__main__":
    main()
