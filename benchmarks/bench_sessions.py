"""``%%remote python --session`` through a real kernel and real workers (``--local hosts=N``):
a warm session cell ``pass`` against Monarch's bare actor round trip (the warm actors' ``ping``,
the floor any run pays) and an empty cell, alternated; the kernel's CPU of each (its
``/proc/<pid>/stat`` ticks over the batch); ``%remote pull`` of a 1 MB array from every rank;
``%remote push`` of 100 MB: refused at the default limit, then sent with ``--max-bytes``.

    .venv/bin/python benchmarks/bench_sessions.py [--n 60] [--hosts 2] [--pull-hosts 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import job_kernel

FLOOR_SETUP = (
    "_mj_remote = get_ipython().magics_manager.registry['RemoteMagics']\n"
    "_mj_actors = next(iter(_mj_remote.runner._warm.values())).actors\n"
    "async def _mj_ping():\n"
    "    await _mj_actors.ping.call()\n"
)
CELLS = {
    "empty cell": "pass",
    "actor round trip (floor)": "_mj_remote.session.loop.run(_mj_ping())",
    "warm session pass": "%%remote python --session\npass",
    "warm %%remote bash true": "%%remote bash\ntrue",
}


def kernel_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def median_ms(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values) * 1e3:.2f} ms (IQR {q[0] * 1e3:.2f}–{q[2] * 1e3:.2f})"


def round_trips(kernel, n: int) -> None:
    pid = int(kernel.ok("import os; print(os.getpid())").stream("stdout").strip())
    kernel.ok("%%remote python --session\npass")
    kernel.ok(FLOOR_SETUP)
    times: dict[str, list[float]] = {k: [] for k in CELLS}
    ticks: dict[str, int] = dict.fromkeys(CELLS, 0)
    for i in range(n):
        for label, code in CELLS.items() if i % 2 == 0 else reversed(list(CELLS.items())):
            before = kernel_ticks(pid)
            r = kernel.ok(code)
            ticks[label] += kernel_ticks(pid) - before
            times[label].append(r.duration)
    hz = os.sysconf("SC_CLK_TCK")
    for label in CELLS:
        cpu = ticks[label] / hz / n * 1e3
        print(f"  {label:<28} {median_ms(times[label])} · kernel CPU {cpu:.2f} ms a cell", flush=True)
    floor = statistics.median(times["actor round trip (floor)"])
    warm = statistics.median(times["warm session pass"])
    print(f"  warm session pass = floor + {(warm - floor) * 1e3:.2f} ms", flush=True)
    print(
        f"  kernel CPU: session pass / empty cell = {ticks['warm session pass'] / max(1, ticks['empty cell']):.2f}×"
    )


def pull_push(kernel, n: int) -> None:
    kernel.ok("%%remote python --session\nimport numpy as np\nblock = np.ones(1 << 17)")  # 1 MiB of float64
    pulls = [kernel.ok("v = %remote pull block").duration for _ in range(n)]
    ranks = kernel.ok("print(len(v), sum(a.nbytes for a in v))").stream("stdout").split()
    print(f"  pull of a 1 MiB array from {ranks[0]} ranks ({int(ranks[1]) / 1e6:.1f} MB): {median_ms(pulls)}")
    kernel.ok("import numpy as np\nbig = np.ones(100_000_000 // 8)")
    refused = kernel.execute("%remote push big")
    line = (refused.error or {}).get("evalue", refused.text).strip().splitlines()[0]
    print(f"  push of 100 MB at the default limit: refused in {refused.duration * 1e3:.1f} ms: {line}")
    sent = kernel.ok("%remote push --max-bytes 200MB big", timeout=600)
    print(f"  push of 100 MB with --max-bytes 200MB: {sent.duration:.2f} s ({sent.stream('stdout').strip()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--pull-hosts", type=int, default=8)
    parser.add_argument("--n-pull", type=int, default=10)
    opts = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        print(f"round trips, {opts.hosts} ranks, {opts.n} each, alternated:", flush=True)
        with job_kernel(Path(folder) / "rt", f"hosts={opts.hosts}", "%remote true") as kernel:
            round_trips(kernel, opts.n)
        print(f"values, {opts.pull_hosts} ranks:", flush=True)
        with job_kernel(Path(folder) / "pp", f"hosts={opts.pull_hosts}") as kernel:
            pull_push(kernel, opts.n_pull)
    print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
