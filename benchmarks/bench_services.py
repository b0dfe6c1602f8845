"""Time Monarch's job services from a real kernel: apply with telemetry against without, and
``%job query`` of ``SHOW TABLES`` and of a SELECT over 10k rows (Arrow), next to Monarch's own
JSON client on the same SQL.

    python benchmarks/bench_services.py [--repeat 30] [--applies 3]

Prints one table: median and max of each step.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _report import print_steps

from harness import Kernel, new_tag, reap

ROWS_10K = "SELECT value AS n, value * 2 AS twice, 'row' AS label FROM generate_series(1, 10000)"

IN_KERNEL = """
import time, statistics, monarch_jupyter
from monarch_jupyter.runtime import introspect as _introspect
from monarch._src.job._telemetry_query_client import QueryEngineClient
_job, _state, _, _ = monarch_jupyter.current_session().running()
_json = QueryEngineClient(_introspect.urls(_job, _state)["telemetry"])
def _med(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter(); fn(); out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out), max(out)
assert monarch_jupyter.query({sql!r}).num_rows == {rows}
print("ARROW %.2f %.2f" % _med(lambda: monarch_jupyter.query({sql!r}), {n}))
print("JSON %.2f %.2f" % _med(lambda: _json.query({sql!r}), {n}))
"""


def timed(kernel: Kernel, code: str, timeout: float = 180) -> tuple[float, str]:
    result = kernel.execute(code, timeout=timeout)
    if result.error or "UsageError" in result.text:
        raise SystemExit(f"{code!r} failed: {result.text}")
    return result.duration * 1000, result.text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--applies", type=int, default=3)
    args = parser.parse_args()
    steps: dict[str, list[float]] = {}
    tag = new_tag()
    try:
        for _ in range(args.applies):  # a fresh kernel each: one mesh admin per process
            for flags, name in (("", "without"), (" --telemetry", "with telemetry")):
                with tempfile.TemporaryDirectory() as folder:
                    kernel = Kernel(Path(folder), tag)
                    try:
                        timed(kernel, "%load_ext monarch_jupyter")
                        ms, _ = timed(kernel, f"%job apply --local hosts=2{flags}")
                        steps.setdefault(f"%job apply --local hosts=2, {name}", []).append(ms)
                        if flags and not any("SHOW" in k for k in steps):
                            query_steps(kernel, steps, args.repeat)
                        timed(kernel, "%job kill")
                    finally:
                        kernel.shutdown()
    finally:
        reap(tag)
    print_steps(steps, args.repeat, "2-host ProcessJob, real kernel")


def query_steps(kernel: Kernel, steps: dict[str, list[float]], repeat: int) -> None:
    for label, sql, rows in (("SHOW TABLES", "SHOW TABLES", None), ("SELECT 10k rows", ROWS_10K, 10000)):
        for _ in range(repeat):
            ms, _ = timed(kernel, f"%job query {sql}")
            steps.setdefault(f"%job query {label} (cell, displayed)", []).append(ms)
        if rows is None:
            code = "import monarch_jupyter\nprint(monarch_jupyter.query('SHOW TABLES').num_rows)"
            _, text = timed(kernel, code)
            rows = int(text.split()[-1])
        _, text = timed(kernel, IN_KERNEL.format(sql=sql, rows=rows, n=repeat))
        for kind in ("ARROW", "JSON"):
            median, worst = map(float, re.search(rf"{kind} (\S+) (\S+)", text).groups())
            what = "monarch_jupyter.query (Arrow)" if kind == "ARROW" else "Monarch's JSON client"
            steps[f"{label}: {what}, in kernel"] = [median, worst]


if __name__ == "__main__":
    main()
