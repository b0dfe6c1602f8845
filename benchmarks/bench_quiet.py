"""Quiet ranks: how soon one stuck rank of many is flagged, and what a look costs the kernel.

    .venv/bin/python benchmarks/bench_quiet.py [--ranks 64 4096] [--quiet-after 5]

Simulates a run on the model (no kernel, no workers) with a clock stepped every 20 ms, as the
pump flushes: every rank prints a line every 100 ms but one, which stops at t = 1 s. Prints when
:class:`~monarch_jupyter.remote.view.quiet.QuietWatch` flags it (with ``--quiet-after`` and with the
default threshold), as a multiple of the threshold, and the CPU time of one look.
"""

from __future__ import annotations

import argparse
import time

from monarch_jupyter.remote.view.model import OUT, Output, RankState, RunState, Started
from monarch_jupyter.remote.view.quiet import FLOOR, QuietWatch


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def flagged_after(ranks: int, quiet_after: float | None) -> tuple[float, float, str]:
    clock = Clock()
    state = RunState(
        "train",
        "bash",
        "mesh",
        [RankState(f"hosts={i}", "hosts", {"hosts": i}, i) for i in range(ranks)],
        0.0,
        clock=clock,
    )
    for i in range(ranks):
        state.apply(Started(i, i + 1))
    watch = QuietWatch(state, quiet_after)
    looks: list[float] = []
    step = 0
    while True:
        step += 1
        clock.now = step * 0.02
        if step % 5 == 0:
            for i in range(ranks):
                if i != 7 or clock.now < 1.0:
                    state.apply(Output(i, OUT, "step\n"))
        start = time.process_time()
        note = watch.check(clock.now)
        looks.append(time.process_time() - start)
        if note:
            return clock.now - 1.0, max(looks), note
        if clock.now > 600:
            return float("inf"), max(looks), ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 4096])
    parser.add_argument("--quiet-after", type=float, default=5.0)
    options = parser.parse_args()
    for ranks in options.ranks:
        for quiet_after in (options.quiet_after, None):
            after, look, note = flagged_after(ranks, quiet_after)
            threshold = quiet_after if quiet_after is not None else FLOOR
            print(
                f"{ranks:>5} ranks, threshold {threshold:g} s ({'--quiet-after' if quiet_after else 'default'}): "
                f"flagged {after:.2f} s after its last line ({after / threshold:.2f}x), "
                f"longest look {look * 1000:.1f} ms CPU: {note!r}"
            )


if __name__ == "__main__":
    main()
