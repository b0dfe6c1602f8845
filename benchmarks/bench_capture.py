"""The worker side of a warm short command, without Monarch: where the actor's milliseconds go.

    .venv/bin/python benchmarks/bench_capture.py [--n 200] [--command true]
    .venv/bin/python benchmarks/bench_capture.py --churn [--n 3000]

Times, per run, what ``RemoteActor._launch`` does on the path of a command that ends within
the quick wait: the rank folder, handing the command to a run shell forked ahead
(:mod:`monarch_jupyter.remote.host.shell`), the wait for its exit, reading its output, and
the meta.json written after the answer (with the rank folder made ahead with the shell, or on
the path). Medians and quartiles in µs.
Each run's shell is forked ahead and given time to settle, as in a notebook between cells.

``--churn`` times the files of a warm loop instead: per run, the next rank folder made ahead
(``Spares.make`` and ``Spares.make_run``), placed, its status written, and every 50 runs a prune keeping 50, as an
actor does; with pruned folders emptied and reused (``reuse``) or deleted and every spare
created anew (``fresh``, ``KEEP_FREE = 0``), in alternating blocks. CPU time of this process
per run (what a worker pays for its files), and the median time of ``Spares.make``. On ext4
without a journal the fresh case grows with the rate of deletions (``recently_deleted``).
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from monarch_jupyter.remote.host import layout, runs, shell, spares

_ids = itertools.count()


def quart(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values) * 1e6:7.0f} µs (IQR {q[0] * 1e6:.0f}–{q[2] * 1e6:.0f})"


def captured(command: str, n: int, root: Path, settle: float, spare: bool) -> dict[str, list[float]]:
    phases: dict[str, list[float]] = {}
    env = dict(os.environ)
    maker = spares.Spares() if spare else None
    for _ in range(n):
        i = next(_ids)  # a new run each time, as in a notebook
        warm = shell.RunShell(env, None, maker)
        time.sleep(settle)
        t0 = time.perf_counter()
        folder = layout.rank_dir(f"r{i}", "mesh", 0, root)
        time.perf_counter()
        proc = warm.take(folder, f"r{i}", "bash", command)
        t2 = time.perf_counter()
        rc = proc.finish_now(0.05)
        t3 = time.perf_counter()
        chunks = proc.take()
        layout.write_meta(folder, {"run": f"r{i}", "pid": proc.pid})
        t4 = time.perf_counter()
        if rc is None:  # not answered within the quick wait (a stall of this machine): not timed
            proc.popen.wait()
            proc.tail.close()
            phases.setdefault("slow path", []).append(t3 - t2)
            continue
        assert rc == 0, (rc, chunks)
        for name, value in (
            ("hand over", t2 - t0),
            ("exit + read", t3 - t2),
            ("meta after", t4 - t3),
            ("answer", t3 - t0),
        ):
            phases.setdefault(name, []).append(value)
    return phases


def churn(n: int, root: Path) -> None:
    block = 500
    cpu: dict[str, list[float]] = {"reuse": [], "fresh": []}
    spare_times: dict[str, list[float]] = {"reuse": [], "fresh": []}
    keep_free = spares.KEEP_FREE
    maker = spares.Spares()
    try:
        for start in range(0, n, block):
            for label in ("fresh", "reuse") if start // block % 2 else ("reuse", "fresh"):
                spares.KEEP_FREE = keep_free if label == "reuse" else 0
                t0 = time.process_time()
                for _ in range(block // 2):
                    i = next(_ids)
                    s0 = time.perf_counter()
                    spare = maker.make(root)
                    spare_times[label].append(time.perf_counter() - s0)
                    spare_run = maker.make_run(spare)
                    folder = layout.rank_dir(f"r{i}", "mesh", 0, root)
                    spares.place(folder, spare, spare_run)
                    (folder / layout.STATUS).write_text(f"0 {time.time()}\n")
                    if i % 50 == 0:
                        runs.prune(root, keep=50, min_age=0)
                cpu[label].append((time.process_time() - t0) / (block // 2))
    finally:
        spares.KEEP_FREE = keep_free
    for label in ("reuse", "fresh"):
        print(
            f"{label}: CPU per run {statistics.median(cpu[label]) * 1e6:6.0f} µs "
            f"(blocks {min(cpu[label]) * 1e6:.0f}–{max(cpu[label]) * 1e6:.0f}); make_spare {quart(spare_times[label])}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--command", default="true")
    parser.add_argument("--settle", type=float, default=0.02, help="seconds a shell waits before its run")
    parser.add_argument("--churn", action="store_true", help="time a warm loop's files (see above)")
    opts = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    os.environ["MONARCH_JUPYTER_RUNS_DIR"] = str(root)  # spares are made there too
    try:
        if opts.churn:
            churn(opts.n if opts.n != 200 else 3000, root)
            return
        results = {}
        for _ in range(2):  # alternate the two, so both see the same noise
            for label, run in (
                (
                    "host capture, folder made ahead",
                    lambda: captured(opts.command, opts.n // 2, root, opts.settle, True),
                ),
                (
                    "host capture, folder made on the path",
                    lambda: captured(opts.command, opts.n // 2, root, opts.settle, False),
                ),
            ):
                for name, values in run().items():
                    results.setdefault(label, {}).setdefault(name, []).extend(values)
        for label, phases in results.items():
            print(f"{label}:")
            for name, values in phases.items():
                if name == "slow path":
                    print(f"  ({len(values)} runs took the slow path, not timed)")
                    continue
                print(f"  {name:12} {quart(values)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
