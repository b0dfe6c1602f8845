"""Measure runs that outlive their kernel, on real kernels and ``--local hosts=2`` workers.

    .venv/bin/python benchmarks/bench_runs.py [--lines 10000] [--restarts 10]

1. Attach to a running run whose 2 ranks printed ``--lines`` lines each: time from the
   ``%remote attach`` request until the replayed tail (each rank's last line) is on IOPub, and
   the latency of live lines after it (the run prints time stamps), p50 / p95.
2. Restart the kernel ``--restarts`` times while a run prints a counter; after each restart,
   ``%load_ext`` and attach for a moment (Ctrl-C stops following). At the end, every number each
   rank printed must be in its log exactly once, in order, and every attach must have shown
   its lines in order without repeats.
3. Per idle finished run on the workers: processes and open file descriptors left.

Every process carries a tag and is reaped at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from harness import Kernel, scratch_kernel, tagged_pids, worker_pids  # noqa: E402
from monarch_jupyter.remote.host import layout, runs  # noqa: E402


def ok(k, code, timeout=300):
    r = k.execute(code, timeout)
    if r.error:
        raise RuntimeError(f"{code[:60]!r} failed: {r.error['evalue']}")
    return r


def run_id_of(text: str) -> str:
    return re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", text).group(1)


def interrupt_after(k: Kernel, seconds: float) -> None:
    threading.Thread(target=lambda: (time.sleep(seconds), k.interrupt()), daemon=True).start()


def rank_files(run_id: str) -> dict[str, Path]:
    return {p.name: p / "out" for p in sorted((layout.runs_path() / run_id).iterdir()) if p.is_dir()}


def p95(values):
    values = sorted(values)
    return values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--restarts", type=int, default=10)
    opts = parser.parse_args()
    rows = []

    def row(metric, value, unit):
        rows.append((metric, value, unit))
        print(f"  {metric}: {value:.3f} {unit}", flush=True)

    with scratch_kernel("bench-runs-", kill=True) as k:
        tag = k.tag
        ok(k, "%load_ext monarch_jupyter")
        ok(k, "%job apply --local hosts=2")
        ok(k, "%remote true")

        # 1. attach: replayed tail, then live latency
        n = opts.lines
        r = ok(k, f"%%remote --detach\nseq 1 {n}\nwhile true; do echo STAMP $(date +%s.%N); sleep 0.1; done")
        run_id = run_id_of(r.text)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            files = rank_files(run_id)
            if len(files) == 2 and all(f"\n{n}\n" in f.read_text() for f in files.values()):
                break
            time.sleep(0.05)
        seen: dict[str, float] = {}
        live = []

        def on_output(out):
            if out.msg_type != "stream":
                return
            now = time.time()
            for line in out.content["text"].splitlines():
                m = re.match(r"\[(hosts=\d)\]\s+(\S+)(?: (\S+))?", line)
                if not m:
                    continue
                if m.group(2) == str(n) and m.group(1) not in seen:
                    seen[m.group(1)] = out.t
                elif m.group(2) == "STAMP" and len(seen) == 2:
                    live.append(now - float(m.group(3)))

        interrupt_after(k, 4.0)
        k.execute(f"%remote attach {run_id}", 60, on_output=on_output)
        row(
            f"attach, 2 ranks × {n:,} lines printed: replayed tail on IOPub (both ranks' last line)",
            max(seen.values()) * 1e3 if len(seen) == 2 else float("nan"),
            "ms",
        )
        if live:
            row(
                "  then live lines: latency after the remote print, median",
                statistics.median(live) * 1e3,
                "ms",
            )
            row("  same, p95", p95(live) * 1e3, "ms")
        ok(k, f"%remote stop {run_id}")

        # 2. restarts mid-run: every line once, in order
        count = 12000
        r = ok(k, f"%%remote --detach\nfor i in $(seq 1 {count}); do echo $i; sleep 0.005; done")
        run_id = run_id_of(r.text)
        bad_attaches = 0
        shown = 0
        for _ in range(opts.restarts):
            time.sleep(0.3)
            k.restart()
            ok(k, "%load_ext monarch_jupyter")
            interrupt_after(k, 1.0)
            text = k.execute(f"%remote attach {run_id}", 60).stream("stdout")
            for label in ("hosts=0", "hosts=1"):
                got = [int(x) for x in re.findall(rf"^\[{label}\]\s+(\d+)$", text, re.MULTILINE)]
                shown += len(got)
                if got != sorted(set(got)) or (got and got != list(range(got[0], got[0] + len(got)))):
                    bad_attaches += 1
        still_running = any(
            runs.leader_alive(layout.read_json(p.parent / "meta.json")) for p in rank_files(run_id).values()
        )
        r = k.execute(f"%remote attach {run_id}", 400)  # to the end
        whole = 0
        for path in rank_files(run_id).values():
            if path.read_text().split() == [str(i) for i in range(1, count + 1)]:
                whole += 1
        row(
            f"{opts.restarts} kernel restarts mid-run: ranks whose log has every line once, in order (of 2)",
            whole,
            "ranks",
        )
        row("  the run was still running after the last restart (1 = yes)", float(still_running), "")
        row("  attaches that showed a line twice or out of order", bad_attaches, "attaches")
        row("  the final attach ended without error (1 = yes)", float(r.error is None), "")

        # 3. idle finished runs: no process, no fd on the workers
        time.sleep(0.5)
        root = str(layout.runs_path())
        fds = 0
        for pid in worker_pids(tag) + [p for p in tagged_pids(tag)]:
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    try:
                        if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(root):
                            fds += 1
                    except OSError:
                        pass
            except OSError:
                pass
        marked = runs.marked_pids({run_id})
        row("idle finished runs: open fds into the runs folder on the workers", fds, "fds")
        row("  processes left by the finished run", len(marked.get(run_id, [])), "processes")
    print()
    width = max(len(m) for m, _, _ in rows)
    for metric, value, unit in rows:
        print(f"{metric:<{width}}  {value:>10.1f} {unit}")


if __name__ == "__main__":
    main()
