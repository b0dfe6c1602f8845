"""What a %%remote flood's chunks cost on Monarch's port: str versus bytes.

    .venv/bin/python benchmarks/bench_port_send.py [--n 5]

One actor on a local proc reads ``seq 1000000`` (6.9 MB) and sends it to a
Channel port in chunks shaped like the flood path's messages, as ``str`` (what
the actor sends today, after decoding) or as ``bytes``. Prints, per variant,
the median time the actor spent in ``port.send`` and the median end-to-end time
until the client received the last chunk. The procs are stopped at the end.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from monarch.actor import Actor, Channel, endpoint, this_host

SEQ = ["seq", "1000000"]


class Sender(Actor):
    @endpoint
    async def flood(self, port, kind: str, size: int) -> float:
        data = subprocess.run(SEQ, capture_output=True, check=True).stdout
        pieces = [data[i:i + size] for i in range(0, len(data), size)]
        if kind == "str":
            pieces = [p.decode() for p in pieces]
        started = time.perf_counter()
        for piece in pieces:
            port.send(("data", "run", "mesh", 0, 1, [("out", piece, 0)]))
        port.send(("exit",))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5, help="repetitions per variant (default 5)")
    opts = parser.parse_args()
    procs = this_host().spawn_procs(per_host={"gpu": 1})
    try:
        actor = procs.spawn("sender", Sender)
        variants = [(kind, size) for size in (1 << 20, 1 << 16) for kind in ("str", "bytes")]
        sends: dict = {v: [] for v in variants}
        totals: dict = {v: [] for v in variants}
        for i in range(opts.n + 1):  # the first round warms up and is not counted
            for kind, size in variants:
                port, receiver = Channel.open()
                started = time.perf_counter()
                sent = actor.flood.call_one(port, kind, size)
                received = 0
                while True:
                    message = receiver.recv().get()
                    if message[0] == "exit":
                        break
                    received += len(message[5][0][1])
                total = time.perf_counter() - started
                if i:
                    sends[(kind, size)].append(sent.get())
                    totals[(kind, size)].append(total)
                else:
                    sent.get()
        print(f"{'chunks':>14} {'port.send on the actor':>24} {'end to end (incl. seq)':>24}")
        for kind, size in variants:
            print(f"{kind:>5} {size >> 10:5d} KiB {statistics.median(sends[(kind, size)]) * 1e3:21.1f} ms"
                  f" {statistics.median(totals[(kind, size)]) * 1e3:21.1f} ms")
    finally:
        procs.stop().get()


if __name__ == "__main__":
    main()
