"""The live grid's share of the kernel's CPU per line, and the size of its syncs, at N ranks.

    .venv/bin/python benchmarks/bench_grid_cpu.py [--ranks 4096] [--rounds 10] [--repeat 3]
                                                  [--same] [--json]

In one process, no kernel: the run model (``RunState.apply``) of N ranks, each printing one line
per event in rounds across the ranks (N × rounds one-line events: 40,960 at 4,096 × 10), with and
without the grid observer (``RemoteRunObserver`` → ``RunWidget``, its fold, syncs and lines
messages) ticked every 20 ms of simulated time as the magic's pump does after each batch; the
simulated clock advances ``1 / (10 × N)`` s an event (10 lines/s a rank), so the grid flushes at
its own pace. The ranks' start events, at which the grid is built, are timed apart (``open_ms``). The widget's
comm JSON-encodes every message as the kernel's session would (``jupyter_client``'s packer), so
the encoding is in the figure. Prints the kernel thread's CPU per line (``time.thread_time``,
median of ``--repeat`` alternated runs) without and with the grid, and the largest grid sync
(state update + its lines message, bytes of JSON).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import comm
from jupyter_client.session import json_packer

from monarch_jupyter.remote.view.model import OUT, Output, RankState, RunState, Started

TICK = 0.02  # the pump's batch: the observers are ticked once per this much simulated time
OPEN: list[float] = []  # CPU seconds of the ranks' start events (with the grid: its opening)
SIZES: list[tuple[str, int]] = []  # (method, bytes) of every message the grid's comm sent


class EncodingComm(comm.DummyComm):
    """A comm that encodes what it sends, as ipykernel's session does, and records the size."""

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        method = (data or {}).get("method", "") if isinstance(data, dict) else ""
        SIZES.append((method, len(json_packer(data)) + sum(len(b) for b in buffers or [])))

    def _reply_subshell_for(self, data: Any, default: Any) -> Any:  # ipykernel 7's routing hook
        return default


def largest_sync() -> int:
    """The largest state update plus the lines message that follows it."""
    best = pending = 0
    for method, nbytes in SIZES:
        if method == "update":
            pending = nbytes
        else:
            best = max(best, pending + nbytes)
            pending = 0
        best = max(best, pending)
    return best


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def line(rank: int, n: int, same: bool) -> str:
    if same:
        return f"step {n:6d} loss 0.{(7919 + n) % 10000:04d} lr 3.0e-4\n"
    return f"step {n:6d} rank {rank:5d} loss 0.{(rank * 7919 + n) % 10000:04d} lr 3.0e-4\n"


def run(ranks: int, rounds: int, same: bool, grid: bool) -> tuple[float, int, int]:
    """(CPU seconds per line, largest sync, flushes) of one run."""
    from monarch_jupyter.widgets import RemoteRunObserver

    clock = Clock()
    observers: list[Any] = []
    if grid:
        observers.append(
            RemoteRunObserver(show=lambda w: None, show_bundle=lambda *a: None, show_after=0.0, clock=clock)
        )
    state = RunState(
        command="train",
        mode="bash",
        target="mesh hosts",
        ranks=[RankState(f"hosts={i}", "hosts", {"hosts": i}, i) for i in range(ranks)],
        started=0.0,
        observers=observers,
        run_id="bench",
    )
    SIZES.clear()
    step = 1.0 / (10 * ranks)
    opened = time.thread_time()
    for i in range(ranks):  # every rank starts; the grid is built at the first event (once a run)
        state.apply(Started(i))
    began = time.thread_time()
    tick = TICK
    for n in range(rounds):
        for i in range(ranks):
            clock.t += step
            state.apply(Output(i, OUT, line(i, n, same)))
            if clock.t >= tick:  # the pump ticks the observers after each batch of events
                tick += TICK
                for observer in observers:
                    observer.on_tick(state)
    spent = time.thread_time() - began
    OPEN.append(began - opened)
    widget = observers[0].widget if grid else None
    flushes = widget.batches if widget is not None else 0
    if widget is not None:
        widget.close()
    return spent / (ranks * rounds), largest_sync(), flushes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--same", action="store_true", help="every rank prints the same lines (one group)")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    import ipykernel.ipkernel  # noqa: F401  # (sets its own create_comm when imported: first)

    comm.create_comm = EncodingComm  # type: ignore[assignment]  # ipywidgets opens its comm through this
    run(64, 2, options.same, True)  # imports and first-use costs out of the figures
    OPEN.clear()
    bare: list[float] = []
    with_grid: list[float] = []
    sync = flushes = 0
    for _ in range(options.repeat):
        bare.append(run(options.ranks, options.rounds, options.same, False)[0])
        cpu, sync, flushes = run(options.ranks, options.rounds, options.same, True)
        with_grid.append(cpu)
    result = {
        "ranks": options.ranks,
        "lines": options.ranks * options.rounds,
        "same": options.same,
        "model_us_per_line": round(1e6 * statistics.median(bare), 2),
        "with_grid_us_per_line": round(1e6 * statistics.median(with_grid), 2),
        "grid_us_per_line": round(1e6 * (statistics.median(with_grid) - statistics.median(bare)), 2),
        "largest_sync_bytes": sync,
        "open_ms": {
            "model": round(1e3 * statistics.median(OPEN[0::2]), 1),
            "grid": round(1e3 * statistics.median(OPEN[1::2]), 1),
        },
        "flushes": flushes,
        "runs": {"model": [round(1e6 * x, 2) for x in bare], "grid": [round(1e6 * x, 2) for x in with_grid]},
    }
    if options.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:<24} {value}")


if __name__ == "__main__":
    main()
