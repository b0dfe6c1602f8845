"""The first tensor pull of a kernel (issue 44, item 8): a fresh kernel has no torch, and
unpickling the pulled tensors imports it. Through a real kernel and real workers (``--local
hosts=2``, 2 ranks), each try after a kernel restart:

- ``plain``: a session started without ``--torch``: the pull imports torch itself (and says so);
- ``--torch, at once``: a ``--torch`` session's cell, then the pull right after it (the kernel
  started importing torch in the background when the cell ran);
- ``--torch, after 5 s``: the same with a 5 s pause, as between a user's cells.

Each row: the session cell's and the pull cell's round trips (median and range over the
tries), and whether the pull said it was importing torch.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_first_pull.py [--tries 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import job_kernel

NOTES = ("importing torch in this kernel", "torch is still being imported")


def one(kernel, session: str, torch: bool, pause: float) -> tuple[float, float, bool]:
    """(the session cell's round trip, the pull's, whether the pull said it imports torch)"""
    kernel.restart()
    kernel.ok("%load_ext monarch_jupyter")
    cell = kernel.ok(
        f"%%remote python --session {session}{' --torch' if torch else ''}\nt = torch.ones(1000)"
    )
    time.sleep(pause)
    r = kernel.ok(f"v = %remote pull --session {session} t")
    return cell.duration, r.duration, any(note in r.text for note in NOTES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args()
    cases = {
        "plain (no --torch)": ("plain", False, 0.0),
        "--torch, pull at once": ("tt", True, 0.0),
        "--torch, pull after 5 s": ("tt", True, 5.0),
    }
    with tempfile.TemporaryDirectory() as tmp, job_kernel(Path(tmp) / "nb", "hosts=2") as kernel:
        kernel.ok("%%remote python --session plain\nimport torch")
        kernel.ok("%%remote python --session tt --torch\nimport torch")
        results: dict[str, list[tuple[float, float, bool]]] = {label: [] for label in cases}
        for _ in range(args.tries):
            for label, (session, torch, pause) in cases.items():
                results[label].append(one(kernel, session, torch, pause))
    print("| after a kernel restart | first session cell | first pull of a tensor | said so |")
    print("| --- | --- | --- | --- |")
    for label, found in results.items():
        said = sum(1 for *_, s in found if s)
        print(
            f"| {label} | {_spread([c for c, _, _ in found])} | {_spread([p for _, p, _ in found])} | {said} of {len(found)} |"
        )


def _spread(times: list[float]) -> str:
    """median (min–max)"""
    return f"{statistics.median(times):.2f} s ({min(times):.2f}–{max(times):.2f})"


if __name__ == "__main__":
    main()
