"""Measure the cell debugger: a breakpoint on 1 of 2 ranks, until the cell shows it.

    PYTHONPATH=$PWD /work/main/.venv/bin/python benchmarks/bench_actor_debug.py [--calls N]

Applies ``--local hosts=2`` in a temporary folder; each call stops rank 1 at a
``breakpoint()`` right after it noted the wall clock (``stamp``). Rows, from that
stamp (kernel, workers and this script share the machine's clock): the
``hosts=1 stopped at cell …`` line's arrival on IOPub, and the first debugger
prompt (``input_request``) on the stdin channel. Each call is then answered
``p stamp`` and ``c``. Every process it starts carries a tag and is reaped.
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

class Stopper(Actor):
    @endpoint
    def work(self) -> int:
        rank = current_rank().rank
        if rank == 1:
            stamp = time.time()
            breakpoint()
        return rank

stoppers = monarch_jupyter.state().hosts.spawn_procs().spawn("stoppers", Stopper)
"""
STAMP = re.compile(r"^(\d{9,}\.\d+)$", re.M)


def ok(kernel, code: str, timeout: float = 300):
    r = kernel.execute(code, timeout)
    if r.error:
        raise RuntimeError(f"{code[:60]!r} failed: {r.error['evalue']}\n{r.traceback}")
    return r


def one(kernel) -> tuple[float, float]:
    """(ms from the stop to the "stopped at" line, ms from the stop to the first prompt)."""
    prompts: list[float] = []
    replies = ["p stamp", "c"]

    def answer(prompt: str, _result) -> str:
        prompts.append(time.time())
        return replies.pop(0) if replies else "continue"

    sent_at = time.time()
    r = kernel.execute("stoppers.work.call().get()", timeout=120, on_input=answer)
    if r.error:
        raise RuntimeError(r.traceback)
    shown = next(
        sent_at + o.t for o in r.outputs if o.msg_type == "stream" and "stopped at" in o.content["text"]
    )
    stamp = float(STAMP.search(r.stream())[1])  # type: ignore[index]
    return (shown - stamp) * 1000, (prompts[0] - stamp) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="calls (default 10)")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {
        "stop → 'stopped at' line on IOPub": [],
        "stop → first prompt (stdin)": [],
    }
    with scratch_kernel("bench-debug", kill=True) as kernel:
        ok(kernel, "%load_ext monarch_jupyter")
        ok(kernel, "%job apply --local hosts=2")
        ok(kernel, ACTOR)
        for n in range(args.calls):
            shown, prompt = one(kernel)
            label = " (first)" if n == 0 else ""
            print(f"call {n}{label}: stopped-at line {shown:.1f} ms, prompt {prompt:.1f} ms")
            rows["stop → 'stopped at' line on IOPub"].append(shown)
            rows["stop → first prompt (stdin)"].append(prompt)
    print(f"{'breakpoint on 1 of 2 ranks':<36}  median ms  max ms   n")
    for name, values in rows.items():
        print(f"{name:<36}  {statistics.median(values):9.1f}  {max(values):6.1f}  {len(values):2d}")


if __name__ == "__main__":
    main()
