"""Kernel CPU per ``%%remote`` message at N simulated ranks, in one process without a kernel.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_message.py [--ranks 4096] [--rounds 10]
        [--repeat 5] [--trees /tmp/before .] [--distinct-off]

``rounds × ranks`` one-line ``Data`` messages (one line each, every rank in turn, as the
simulated fleet of ``_scale_driver.py`` sends them at 10 lines/s a rank), made and encoded
before the clock starts, then through the real code in two timed halves (``time.thread_time``):

- drive: ``protocol.decode`` → ``Drive._handle`` (sink puts, the run log's ``Spool.write``; a
  ``maybe_flush`` every 64 messages, as a drained batch does) and the log's close;
- model: the events from the sink → ``RunState.apply`` → ``TextRenderer.add``, with a
  ``flush_streams`` every 800 events (the pump's 20 ms tick at 40,000 messages/s).

No grid observer (``widgets/``). Prints µs a message per half (one JSON line with ``--json``).
``--trees A B …``: runs this script ``--repeat`` times per tree, alternated, each tree on
``PYTHONPATH``, and prints the medians (and min–max) per tree.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUN_ID = "bench"
MESH = "hosts"
FLUSH_EVERY = 800  # events between two flushes of the renderer
SPOOL_EVERY = 64  # messages between two maybe_flush calls of the run log


def line(rank: int, n: int, distinct: bool) -> str:
    if not distinct:
        return f"step {n:6d} loss 0.{(7919 + n) % 10000:04d} lr 3.0e-4\n"
    return f"step {n:6d} rank {rank:5d} loss 0.{(rank * 7919 + n) % 10000:04d} lr 3.0e-4\n"


def measure(ranks: int, rounds: int, distinct: bool) -> dict[str, Any]:
    from monarch_jupyter.remote.run.drive import Drive, Plan, RunHandle, Target
    from monarch_jupyter.remote.view.model import Exited, Finished, RankState, RunState
    from monarch_jupyter.remote.view.quiet import QuietWatch
    from monarch_jupyter.remote.view.render import TextRenderer
    from monarch_jupyter.remote.wire.protocol import OUT, Chunk, Data, Exit, RunSpec, decode, encode

    folder = Path(tempfile.mkdtemp(prefix="bench-message-"))
    log = folder / "run.log"
    states = [RankState(label=f"hosts={i}", mesh=MESH, point={"hosts": i}, rank=i) for i in range(ranks)]
    plan = Plan(states, [Target(MESH, None, {i: i for i in range(ranks)})], f"mesh hosts ({ranks} ranks)")
    spec = RunSpec("bash", "simulated", {}, None, None, None)
    sink: queue.SimpleQueue[Any] = queue.SimpleQueue()
    drive = Drive(RUN_ID, plan, sink, RunHandle(None), forget=lambda mesh: None, spec=spec, log_path=log)
    wires = [
        encode(Data(RUN_ID, MESH, rank, 1000 + rank, [Chunk(OUT, line(rank, n, distinct), 1)]))
        for n in range(rounds)
        for rank in range(ranks)
    ]
    exits = [encode(Exit(RUN_ID, MESH, rank, 1000 + rank, [], 0, 1.0, None)) for rank in range(ranks)]
    drive._open_spool()  # the drive's own set-up, without a Monarch channel
    handle = drive._handle
    began = time.thread_time()
    for k, wire in enumerate(wires):
        handle(decode(wire))
        if k % SPOOL_EVERY == SPOOL_EVERY - 1:
            drive.spool.maybe_flush()
    drive_cpu = time.thread_time() - began
    for wire in exits:
        handle(decode(wire))
    began = time.thread_time()
    drive.spool.close()
    close_cpu = time.thread_time() - began
    events = []
    while True:
        try:
            events.append(sink.get_nowait())
        except queue.Empty:
            break
    data_events = len(events) - ranks  # the Exited events come last
    state = RunState("simulated", "bash", plan.target, states, started=time.time(), log_path=str(log))
    renderer = TextRenderer(state, quiet=QuietWatch(state, None))
    now = time.monotonic()
    writes = 0
    began = time.thread_time()
    for k, event in enumerate(events[:data_events]):
        renderer.add(state.apply(event))
        if k % FLUSH_EVERY == FLUSH_EVERY - 1:
            now += 0.02
            writes += len(renderer.flush_streams(now))
    model_cpu = time.thread_time() - began
    for event in events[data_events:]:
        assert isinstance(event, Exited)
        renderer.add(state.apply(event))
    renderer.add(state.apply(Finished()))
    renderer.finish_streams()
    lines = sum(r.total_lines for r in state.ranks)
    logged = log.stat().st_size
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    return {
        "ranks": ranks,
        "messages": len(wires),
        "events": data_events,
        "lines": lines,
        "log_bytes": logged,
        "writes": writes,
        "drive_us": drive_cpu / len(wires) * 1e6,
        "log_close_ms": close_cpu * 1e3,
        "model_us": model_cpu / len(wires) * 1e6,
    }


def alternate(trees: list[str], opts: argparse.Namespace) -> None:
    runs: dict[str, list[dict[str, Any]]] = {tree: [] for tree in trees}
    args = [sys.executable, __file__, "--json", "--ranks", str(opts.ranks), "--rounds", str(opts.rounds)]
    if not opts.distinct:
        args.append("--same")
    for _ in range(opts.repeat):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            out = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
            runs[tree].append(json.loads(out.strip().splitlines()[-1]))
    print(f"load average {os.getloadavg()[0]:.2f}; {opts.repeat} alternated runs, medians (min–max):")
    for tree, results in runs.items():
        parts = []
        for key in ("drive_us", "model_us", "log_close_ms"):
            values = [r[key] for r in results]
            parts.append(f"{key} {statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})")
        print(f"  {tree}: " + ", ".join(parts) + f", log {results[0]['log_bytes']} B")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=10, help="one-line messages per rank")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--same", dest="distinct", action="store_false", help="every rank's lines alike")
    parser.add_argument("--trees", nargs="+", help="checkouts to alternate (each on PYTHONPATH)")
    parser.add_argument("--json", action="store_true", help="one run, one JSON line")
    opts = parser.parse_args()
    if opts.trees:
        alternate(opts.trees, opts)
        return
    if opts.json:
        print(json.dumps(measure(opts.ranks, opts.rounds, opts.distinct)))
        return
    for _ in range(opts.repeat):
        result = measure(opts.ranks, opts.rounds, opts.distinct)
        print(
            f"{result['messages']} messages over {result['ranks']} ranks: drive {result['drive_us']:.2f} µs, "
            f"model {result['model_us']:.2f} µs a message; log close {result['log_close_ms']:.1f} ms"
        )


if __name__ == "__main__":
    main()
