"""The sidebar's server endpoint on hostile trees: CPU and response size of one poll.

Calls ``contexts_json`` (what ``/monarch-jupyter/contexts`` runs in its scan thread) on:
300 contexts with a 1 MB status.json each, 300 with a 60 KB one, and 100,000 empty folders.

    .venv/bin/python benchmarks/bench_server.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monarch_jupyter._server.contexts import contexts_json


def _tree(root: Path, contexts: int, status_bytes: int, folders: int) -> None:
    monarch = root / ".monarch"
    status = {"context": "c", "state": "running", "spec": "x" * status_bytes, "meshes": []}
    text = json.dumps(status)
    for i in range(contexts):
        (monarch / f"c{i:04d}").mkdir(parents=True)
        (monarch / f"c{i:04d}" / "status.json").write_text(text)
    for i in range(folders):
        (root / f"f{i:06d}").mkdir()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cases = [
        ("300 contexts x 1 MB status.json", 300, 1 << 20, 0),
        ("300 contexts x 60 KB status.json", 300, 60_000, 0),
        ("100,000 folders", 0, 0, 100_000),
    ]
    for name, n, size, folders in cases:
        with tempfile.TemporaryDirectory() as tmp:
            _tree(Path(tmp), n, size, folders)
            cpu, sizes = [], []
            for _ in range(args.repeat):
                start = time.process_time()
                sizes.append(len(contexts_json(tmp)))
                cpu.append(time.process_time() - start)
            print(
                f"{name}: CPU per poll median {statistics.median(cpu) * 1e3:.0f} ms, response {sizes[0] / 1e3:.0f} KB"
            )


if __name__ == "__main__":
    main()
