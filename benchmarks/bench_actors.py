"""Measure actor output in the cell on a real kernel and real workers.

    PYTHONPATH=$PWD /work/main/.venv/bin/python benchmarks/bench_actors.py [--calls N] [--monarch]
        [--flood RANKS]

Applies ``--local hosts=2`` in a temporary folder and times, for each line an
actor prints, its arrival on IOPub after the print (the line carries the
worker's wall clock; kernel, workers and this script share the machine's
clock). Rows: the first line of the first call after ``%job apply``, of the
first call after a kernel restart + re-attach, of each later call, and every
line. ``--monarch`` adds the same rows for Monarch's own forwarding
(``logging_option(stream_to_client=True, aggregate_window_sec=None)``) on procs
spawned with ``live_output(False)``. ``--flood RANKS`` has RANKS procs print 100
lines/s each for 10 s and checks every line arrived, in order per rank, with
the IOPub message rate and the kernel's CPU and RSS growth. Every process it
starts carries a tag and is reaped at the end.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import scratch_kernel

ACTOR = """
from monarch.actor import Actor, endpoint, current_rank
import time, monarch_jupyter

class Talker(Actor):
    @endpoint
    def talk(self, lines: int, gap: float) -> None:
        for i in range(lines):
            print(f"L {current_rank().rank} {i} {time.time():.6f}")
            time.sleep(gap)
"""
LINE = re.compile(r"L (\d+) (\d+) (\d+\.\d+)")


def ok(kernel, code: str, timeout: float = 300):
    r = kernel.execute(code, timeout)
    if r.error:
        raise RuntimeError(f"{code[:60]!r} failed: {r.error['evalue']}\n{r.traceback}")
    return r


def latencies(result, sent_at: float) -> tuple[list[float], dict[int, list[int]]]:
    """(ms from print to arrival for each line, line numbers per rank in arrival order)."""
    found, order = [], {}
    for o in result.outputs:
        if o.msg_type != "stream":
            continue
        for m in LINE.finditer(o.content["text"]):
            found.append((sent_at + o.t - float(m[3])) * 1000)
            order.setdefault(int(m[1]), []).append(int(m[2]))
    return found, order


MISSING: dict[str, int] = {}  # lines per row that did not arrive in their call's cell


def call(kernel, handle: str, row: str, lines: int = 3, gap: float = 0.3) -> list[float]:
    """Latencies of one call's lines (2 ranks × ``lines``); a first line that never came to the
    cell counts as missing (Monarch's path can put it in a later cell)."""
    sent_at = time.time()
    r = ok(kernel, f"{handle}.talk.call({lines}, {gap}).get()")
    found, _ = latencies(r, sent_at)
    MISSING[row] = MISSING.get(row, 0) + 2 * lines - len(found)
    return found


def p95(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]


def spawn(kernel, name: str, per_host: str = "", monarch: bool = False) -> None:
    code = f"{name} = monarch_jupyter.state().hosts.spawn_procs({per_host}).spawn({name!r}, Talker)"
    if monarch:
        code = (
            "monarch_jupyter.actors.live_output(False)\n"
            f"{name}_procs = monarch_jupyter.state().hosts.spawn_procs()\n"
            "monarch_jupyter.actors.live_output(True)\n"
            f"await {name}_procs.logging_option(stream_to_client=True, aggregate_window_sec=None)\n"
            f"{name} = {name}_procs.spawn({name!r}, Talker)"
        )
    ok(kernel, code)


def measure(kernel, calls: int, monarch: bool) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    tag = " (Monarch logging_option)" if monarch else ""
    name = "m" if monarch else "a"
    spawn(kernel, name, monarch=monarch)
    head = f"first line, first call after apply{tag}"
    first = call(kernel, name, head)
    rows[head] = first[:1]
    later, every = [], list(first)
    for _ in range(calls):
        found = call(kernel, name, f"first line of later calls{tag}")
        later.extend(found[:1])
        every.extend(found)
    rows[f"first line of later calls{tag}"] = later
    rows[f"every line{tag}"] = every
    return rows


def flood(kernel, ranks: int) -> None:
    per_host = f"per_host={{'procs': {max(1, ranks // 2)}}}"
    spawn(kernel, "f", per_host)
    log = ok(kernel, "print(monarch_jupyter.actors.log_path())").stream().strip()
    start = Path(log).stat().st_size
    cpu0 = ok(kernel, "import os; print(sum(os.times()[:2]))").stream()
    rss0 = ok(kernel, "print(open('/proc/self/status').read())").stream()
    sent_at = time.time()
    r = ok(kernel, "f.talk.call(1000, 0.01).get()", timeout=900)
    cpu1 = ok(kernel, "print(sum(os.times()[:2]))").stream()
    rss1 = ok(kernel, "print(open('/proc/self/status').read())").stream()
    _, shown = latencies(r, sent_at)
    with open(log, encoding="utf-8") as f:
        f.seek(start)
        logged: dict[int, list[int]] = {}
        mislabelled = 0
        for line in f:
            m = re.match(r"\[hosts=(\d+),procs=(\d+)\] L (\d+) (\d+) ", line)
            if m:
                rank = int(m[1]) * max(1, ranks // 2) + int(m[2])
                mislabelled += rank != int(m[3])
                logged.setdefault(rank, []).append(int(m[4]))
    complete = sum(1 for lines in logged.values() if lines == list(range(1000)))
    ours = [o for o in r.outputs if o.msg_type == "stream" and o.content["text"].startswith("[hosts=")]
    others = [o.content["text"][:200] for o in r.outputs if o.msg_type == "stream" and o not in ours]
    times = sorted(o.t for o in ours)
    rate = max((sum(1 for u in times if t <= u < t + 1.0) for t in times), default=0)
    if others:
        print(f"  {len(others)} other stream messages in the cell, e.g. {others[:3]}")

    def rss(text: str) -> float:
        return next(int(line.split()[1]) / 1024 for line in text.splitlines() if line.startswith("VmRSS:"))

    print(
        f"flood: {ranks} ranks × 1000 lines at ~100/s, call took {r.duration:.1f} s: in the log "
        f"{complete}/{ranks} ranks complete and in order, {mislabelled} mislabelled; in the cell "
        f"{sum(len(v) for v in shown.values())} lines live ({len(times)} stream messages, max {rate} in 1 s); "
        f"kernel CPU {float(cpu1) - float(cpu0):.1f} s; kernel RSS {rss(rss0):.0f} → {rss(rss1):.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="calls after the first (default 20)")
    parser.add_argument("--monarch", action="store_true", help="also measure Monarch's logging_option path")
    parser.add_argument("--flood", type=int, default=0, metavar="RANKS", help="also the flood test")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    with scratch_kernel("bench-actors", kill=True) as kernel:
        ok(kernel, "%load_ext monarch_jupyter")
        ok(kernel, "%job apply --local hosts=2")
        ok(kernel, ACTOR)
        rows.update(measure(kernel, args.calls, monarch=False))
        kernel.restart()
        ok(kernel, "%load_ext monarch_jupyter")
        ok(kernel, ACTOR)
        spawn(kernel, "r")
        head = "first line, first call after restart + re-attach"
        rows[head] = call(kernel, "r", head)[:1]
        if args.monarch:
            rows.update(measure(kernel, args.calls, monarch=True))
        if args.flood:
            flood(kernel, args.flood)
    width = max(len(k) for k in rows)
    print(f"{'actor line → IOPub':<{width}}  median ms  p95 ms  max ms    n  lines not in their cell")
    for name, values in rows.items():
        if not values:
            print(f"{name:<{width}}  {'-':>9}  {'-':>6}  {'-':>6}    0  {MISSING.get(name, 0)}")
            continue
        med, hi = statistics.median(values), p95(values)
        missing = MISSING.get(name, 0) if not name.startswith("every") else ""
        print(f"{name:<{width}}  {med:9.1f}  {hi:6.1f}  {max(values):6.1f}  {len(values):3d}  {missing}")


if __name__ == "__main__":
    main()
