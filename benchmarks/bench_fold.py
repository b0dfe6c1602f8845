"""``--group``'s live fold against the plain live view: the kernel-side CPU of 64 identical ranks.

    .venv/bin/python benchmarks/bench_fold.py [--ranks 64] [--rate 100] [--seconds 10]

Feeds :class:`~monarch_jupyter.remote.view.render.TextRenderer` what the pump feeds it: ``--ranks``
ranks each printing ``--rate`` lines a second (one chunk per line, in rounds across the ranks),
applied to the run model, and a flush every 20 ms of simulated time. Prints the CPU seconds
(process time) of the model + renderer per simulated second, without and with the fold, and the
lines written to the cell. No kernel, no workers: the cost the kernel pays, not IOPub's.
"""

from __future__ import annotations

import argparse
import time

from monarch_jupyter.remote.view.model import OUT, Output, RankState, RunState
from monarch_jupyter.remote.view.render import TextRenderer


def run(ranks: int, rate: int, seconds: int, fold: bool) -> tuple[float, int]:
    state = RunState(
        command="train",
        mode="bash",
        target="mesh hosts",
        ranks=[RankState(f"hosts={i}", "hosts", {"hosts": i}, i) for i in range(ranks)],
        started=0.0,
    )
    renderer = TextRenderer(state, fold=fold)
    written = 0
    start = time.process_time()
    for n in range(rate * seconds):
        now = n / rate
        for i in range(ranks):
            renderer.add(state.apply(Output(i, OUT, f"step {n} loss {1 / (n + 1):.6f}\n")))
        if n % max(1, rate // 50) == 0:
            written += renderer.flush(now).count("\n")
    written += renderer.finish().count("\n")
    return (time.process_time() - start) / seconds, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=10)
    options = parser.parse_args()
    for fold in (False, True):
        cpu, written = run(options.ranks, options.rate, options.seconds, fold)
        print(
            f"{'--group (live fold)' if fold else 'plain live view':<20} {cpu * 1000:6.0f} ms CPU per second, {written:,} lines written"
        )


if __name__ == "__main__":
    main()
