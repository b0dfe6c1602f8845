"""The first `%%remote` on a fresh job: how long its cell shows nothing (issue 43: "an empty
output for 2 s").

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_first_output.py [--rounds 3]

Each round applies a fresh `--local hosts=2` job in a real kernel (jupyter_client), runs
`%%remote echo first` at once, and times (from the execute request) the first IOPub output, the
first remote line and the cell's end; then a warm run for comparison. Every process it starts
carries a tag and is reaped at the end. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import scratch_kernel

OUTPUTS = ("stream", "display_data", "update_display_data")


def first(result, test) -> float | None:
    return next((o.t for o in result.outputs if o.msg_type in OUTPUTS and test(o)), None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"first output": [], "first remote line": [], "cell": []}
    warm: list[float] = []
    with scratch_kernel("mj-bench-first-", kill=True) as kernel:
        kernel.execute("%load_ext monarch_jupyter")
        for _ in range(args.rounds):
            kernel.execute("%job apply --local hosts=2", timeout=180)
            result = kernel.execute("%%remote\necho first", timeout=120)
            rows["first output"].append(first(result, lambda o: True) or float("nan"))
            rows["first remote line"].append(
                first(result, lambda o: "] first" in o.content.get("text", "")) or float("nan")
            )
            rows["cell"].append(result.duration)
            print(
                "  first output:",
                repr(next(o.content.get("text", "") for o in result.outputs if o.msg_type == "stream")),
            )
            warm.append(kernel.execute("%%remote\necho warm").duration)
            kernel.execute("%job kill", timeout=120)
    print(f"{args.rounds} fresh jobs, median [range] in seconds from the execute request:")
    for name, values in rows.items():
        print(f"  {name:<18} {statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]")
    print(f"  warm run (cell)    {statistics.median(warm):.3f} [{min(warm):.3f}–{max(warm):.3f}]")


if __name__ == "__main__":
    main()
