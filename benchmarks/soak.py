"""Soak: many consecutive warm ``%%remote`` cells; does anything grow?

    .venv/bin/python benchmarks/soak.py [--cells 1000] [--hosts 2] [--json]

Starts a kernel (jupyter_client) in a temporary folder, applies
``--local hosts=N``, warms the actors, then runs ``--cells`` small ``%%remote``
cells one after another. Before the first measured cell, after a tenth of
them and after the last it samples, from ``/proc`` (outside the kernel, so the
sampling itself adds nothing): kernel and worker RSS, open file descriptors and
threads, plus the median and p95 latency of the surrounding cells. Prints one
table (start, early, end, growth). Growth should be about 0; on a busy machine
latencies are noisy. Every process it starts carries a tag and is reaped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import scratch_kernel, worker_pids

CELL = "%%remote\necho soak-$RANDOM"


def proc_sample(pid: int) -> dict[str, float]:
    """RSS (MB), open fds and threads of one process."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "rss_mb": int(fields["VmRSS"].split()[0]) / 1024,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "threads": int(fields["Threads"]),
    }


def sample(kernel_pid: int, workers: list[int], latencies: list[float]) -> dict[str, float]:
    k = proc_sample(kernel_pid)
    ws = [proc_sample(p) for p in workers]
    window = latencies[-50:] or [float("nan")]
    return {
        "kernel RSS (MB)": k["rss_mb"],
        "kernel fds": k["fds"],
        "kernel threads": k["threads"],
        "worker RSS max (MB)": max(w["rss_mb"] for w in ws),
        "worker fds max": max(w["fds"] for w in ws),
        "worker threads max": max(w["threads"] for w in ws),
        "cell latency median (ms)": statistics.median(window) * 1000,
        "cell latency p95 (ms)": sorted(window)[int(0.95 * (len(window) - 1))] * 1000,
    }


def run(cells: int, hosts: int) -> dict[str, dict[str, float]]:
    with scratch_kernel("monarch-soak-") as kernel:
        tag = kernel.tag

        def ok(code: str) -> float:
            start = time.monotonic()
            r = kernel.execute(code, timeout=120)
            if r.error:
                raise RuntimeError(f"{code[:40]!r} failed: {r.error['evalue']}")
            return time.monotonic() - start

        ok("%load_ext monarch_jupyter")
        ok(f"%job apply --local hosts={hosts}")
        for _ in range(20):  # warm: actors spawned, code paths imported
            ok(CELL)
        kernel_pid = kernel.km.provisioner.process.pid
        workers = sorted(worker_pids(tag))
        latencies: list[float] = []
        for _ in range(10):
            latencies.append(ok(CELL))
        points = {"start": sample(kernel_pid, workers, latencies)}
        early = max(1, cells // 10)
        for i in range(cells):
            latencies.append(ok(CELL))
            if i + 1 == early:
                points["early"] = sample(kernel_pid, workers, latencies)
        points["end"] = sample(kernel_pid, workers, latencies)
        points["growth"] = {k: points["end"][k] - points["start"][k] for k in points["start"]}
        ok("%job kill")
        return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    started = time.monotonic()
    points = run(args.cells, args.hosts)
    if args.json:
        print(json.dumps(points, indent=1))
        return
    columns = list(points)
    print(
        f"soak: {args.cells} warm %%remote cells on --local hosts={args.hosts} "
        f"({time.monotonic() - started:.0f} s)"
    )
    print(f"{'metric':28}" + "".join(f"{c:>10}" for c in columns))
    for metric in points["start"]:
        print(f"{metric:28}" + "".join(f"{points[c][metric]:>10.1f}" for c in columns))


if __name__ == "__main__":
    main()
