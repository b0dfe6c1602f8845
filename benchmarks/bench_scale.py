"""What a run of N ranks costs the kernel, from a simulated fleet in a real kernel.

    .venv/bin/python benchmarks/bench_scale.py [--ranks 64 256 1024 4096] [--seconds 10] [--rate 10]
                                               [--burst 1000] [--json]

A real IPython kernel (jupyter_client) loads the extension; ``_scale_driver`` replaces only the
Monarch side of its ``%%remote`` runner: N simulated ranks send the actor's wire messages
(``protocol.encode``), each printing ``--rate`` lines/s for ``--seconds`` (``--burst K``: every
rank prints K lines at once and fails). From there on it is the real path: decode, drive, run
log, runs index, run model, text renderer, live grid, final display.

Per N, measured over the steady part of the run (from 2 s in to 0.5 s before its end):
kernel CPU (% of one core, whole kernel process, the simulator included), RSS, IOPub
messages/s and bytes/s (JSON of each message's content and buffers, on the client), the
largest grid sync (widget state update + its lines message), the run-log write rate, the
saved ``application/vnd.monarch.remote+json`` payload and the whole final display's size,
and the time from the last rank's exit to the final result arriving on the client.
``--json`` prints one JSON line per N (keys ``ranks``, ``kernel_cpu_pct``, ``rss_mb``,
``iopub_msgs_per_s``, ``iopub_bytes_per_s``, ``grid_sync_bytes``, ``payload_bytes``,
``log_lines_missing``, …).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from harness import Kernel, new_tag, reap  # noqa: E402

MIME = "application/vnd.monarch.remote+json"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith(key + ":"):
            return int(row.split()[1]) / 1024
    return 0.0


def size(msg: dict[str, Any]) -> int:
    body = len(json.dumps(msg["content"], default=str))
    return body + sum(len(b) for b in msg.get("buffers") or [])


def ok(kernel: Kernel, code: str) -> str:
    result = kernel.execute(code, timeout=120)
    if result.error:
        raise RuntimeError(f"{code[:60]!r}: {result.traceback}")
    return result.stream()


def measure(kernel: Kernel, pid: int, ranks: int, seconds: float, rate: float, burst: int) -> dict[str, Any]:
    ok(kernel, f"_scale_driver.SETTINGS.update(ranks={ranks}, seconds={seconds}, rate={rate}, burst={burst})")
    rss_before = rss_mb(pid)
    kc = kernel.kc
    msg_id = kc.execute("%%remote bash --no-raise\nsimulated", store_history=False)
    profile = os.environ.get("BENCH_SCALE_PYSPY")  # a py-spy flame graph of the kernel during the run
    spy = None
    if profile:
        command = [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-o", profile]
        spy = subprocess.Popen(
            [*command, "-d", str(int(seconds)), "-f", "raw", "--gil"], stdout=subprocess.DEVNULL
        )
    first: float | None = None
    window = (2.0, seconds - 0.5) if not burst else (0.0, float("inf"))
    cpu0 = cpu1 = None
    t0 = t1 = 0.0
    counted = 0
    counted_bytes = 0
    stream_bytes = 0
    kinds: dict[str, int] = {}
    total = 0
    grid_sync = 0
    pending_sync = 0
    payload = 0
    display_bytes = 0
    final_at = 0.0
    rss_peak = 0.0
    began = time.monotonic()
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=0.05)
        except queue.Empty:
            msg = None
        now = time.monotonic()
        if first is not None and not burst:
            if cpu0 is None and now - first >= window[0]:
                cpu0, t0 = cpu_seconds(pid), now
            if cpu1 is None and now - first >= window[1]:
                cpu1, t1 = cpu_seconds(pid), now
                rss_peak = rss_mb(pid)
        if msg is None:
            if now - began > seconds + 600:
                raise TimeoutError("the run did not end")
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "status" and msg["content"]["execution_state"] == "idle":
            break
        if kind == "status":
            continue
        if first is None and kind in ("stream", "display_data", "comm_msg", "comm_open"):
            first = now
            if burst:
                cpu0, t0 = cpu_seconds(pid), now
        nbytes = size(msg)
        total += 1
        if first is not None and cpu0 is not None and cpu1 is None:
            counted += 1
            counted_bytes += nbytes
            kinds[kind] = kinds.get(kind, 0) + 1
            if kind == "stream":
                stream_bytes += len(msg["content"]["text"])
        if kind == "comm_msg":
            data = msg["content"].get("data", {})
            if data.get("method") == "update":  # a state sync: its lines message follows it
                pending_sync = nbytes
            else:
                grid_sync = max(grid_sync, pending_sync + nbytes)
                pending_sync = 0
            grid_sync = max(grid_sync, pending_sync)
        if kind == "display_data" and MIME in msg["content"].get("data", {}):
            data = msg["content"]["data"]
            if data[MIME].get("state") == "finished":
                payload = len(json.dumps(data[MIME]))
                display_bytes = nbytes
                final_at = time.time()
    if burst:
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        rss_peak = rss_mb(pid)
    if spy is not None:
        spy.wait(timeout=60)
    log = json.loads(ok(kernel, "print(__import__('json').dumps(_scale_driver.check_log()))"))
    span = max(t1 - t0, 1e-9)
    sim = log["sim_seconds"]
    sim_share = log["sim_cpu"] / sim  # averaged over the run: the fleet's work is even over time
    return {
        "ranks": ranks,
        "case": f"burst {burst}" if burst else f"{rate:g} lines/s/rank",
        # the simulated fleet's own work (making the messages) is left out; its share is sim_cpu_pct
        "kernel_cpu_pct": round(100 * ((cpu1 - cpu0) / span - sim_share), 1),
        "sim_cpu_pct": round(100 * sim_share, 1),
        "rss_mb": round(rss_peak, 1),
        "rss_growth_mb": round(rss_peak - rss_before, 1),
        "iopub_msgs_per_s": round(counted / span, 1),
        "iopub_bytes_per_s": round(counted_bytes / span),
        "stream_bytes_per_s": round(stream_bytes / span),
        # what bench_remote.py's "IOPub stream messages" counts, and the grid's widget messages
        "stream_msgs_per_s": round(kinds.get("stream", 0) / span, 1),
        "comm_msgs_per_s": round(kinds.get("comm_msg", 0) / span, 1),
        "iopub_msgs": total,
        "grid_sync_bytes": grid_sync,
        "payload_bytes": payload,
        "final_display_bytes": display_bytes,
        "final_render_ms": round(1000 * (final_at - log["exits_sent"]), 1),
        "lines_per_s": round(log["lines_sent"] / sim) if not burst else None,
        "log_bytes_per_s": round(log["log_bytes"] / sim),
        "log_lines_missing": log["log_lines_missing"],
        "lines_sent": log["lines_sent"],
        "cell_seconds": round(time.monotonic() - began, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024, 4096])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=10.0, help="lines per second per rank")
    parser.add_argument("--burst", type=int, default=0, help="every rank prints this many lines at once")
    parser.add_argument("--json", action="store_true", help="one JSON line per N")
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    tag = new_tag()
    try:
        for ranks in options.ranks:  # a fresh kernel per N: RSS is that run's
            kernel = Kernel(folder, tag)
            try:
                pid = kernel.km.provisioner.process.pid  # type: ignore[union-attr]
                ok(kernel, f"import sys; sys.path.insert(0, {str(HERE)!r}); import _scale_driver")
                ok(kernel, "%load_ext monarch_jupyter")
                ok(kernel, f"_scale_driver.install(get_ipython(), {str(folder)!r})")
                row = measure(kernel, pid, ranks, options.seconds, options.rate, options.burst)
            finally:
                kernel.shutdown()
            if options.json:
                print(json.dumps(row), flush=True)
            else:
                print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    finally:
        reap(tag)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
