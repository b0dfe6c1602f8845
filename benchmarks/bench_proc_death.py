"""Measure how soon a SIGKILLed actor proc is said in the cell, against Monarch's own supervision.

    PYTHONPATH=$PWD /work/main/.venv/bin/python benchmarks/bench_proc_death.py [--trials N]

Loads the extension in a real kernel (no job: ``this_host()`` procs, as Monarch's examples
spawn them), and per trial spawns a fresh ``{gpus: 2}`` proc mesh, starts a 12 s call on it,
SIGKILLs rank 1's proc 1 s in and times (a) the extension's ``… died: …`` line on IOPub after
the kill and (b) Monarch's ``unhandled_fault_hook`` for that proc (wrapped in the kernel to
stamp its wall clock; our hook only records). Every process it starts carries a tag and is
reaped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import scratch_kernel

SETUP = """\
import os, time
import monarch.actor as _ma
from monarch.actor import Actor, endpoint, this_host

_hooked = []
_inner = _ma.unhandled_fault_hook
def _stamp(failure):
    _hooked.append((time.time(), failure.mesh_name))
    _inner(failure)
_ma.unhandled_fault_hook = _stamp

class Napper(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def nap(self, seconds: float) -> int:
        time.sleep(seconds)
        return 0
"""

TRIAL = """\
_procs = this_host().spawn_procs(per_host={{"gpus": 2}})
_n{i} = _procs.spawn("napper{i}", Napper)
print(list(_n{i}.pid.call().get().values()))
"""


def trial(kernel, i: int) -> tuple[float | None, float | None]:
    pids = json.loads(kernel.ok(TRIAL.format(i=i)).stream().strip().splitlines()[-1])
    killed: list[float] = []

    def kill() -> None:
        killed.append(time.time())
        os.kill(pids[1], signal.SIGKILL)

    threading.Timer(1.0, kill).start()
    sent = time.time()
    r = kernel.execute(f"_n{i}.nap.call(12).get()", timeout=120)
    said = [o for o in r.outputs if o.msg_type == "stream" and "died" in o.content["text"]]
    ours = sent + said[0].t - killed[0] if said else None  # o.t: seconds after the request
    hooked = kernel.ok(f"print(min((t for t, m in _hooked if m.startswith('napper{i}')), default=0))")
    stamp = float(hooked.stream().strip() or 0)
    monarch = stamp - killed[0] if stamp else None
    return ours, monarch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    ours: list[float] = []
    monarch: list[float] = []
    with scratch_kernel("bench-death") as kernel:
        kernel.ok("%load_ext monarch_jupyter")
        kernel.ok(SETUP)
        for i in range(args.trials):
            a, b = trial(kernel, i)
            print(
                f"trial {i}: said after {a if a is None else round(a, 3)} s; Monarch's hook after "
                f"{b if b is None else round(b, 3)} s",
                flush=True,
            )
            if a is not None:
                ours.append(a)
            if b is not None:
                monarch.append(b)
    for name, values in (("extension's line", ours), ("Monarch's fault hook", monarch)):
        if values:
            print(
                f"{name}: median {statistics.median(values):.3f} s, max {max(values):.3f} s "
                f"({len(values)} of {args.trials})"
            )
        else:
            print(f"{name}: never, in {args.trials} trials")


if __name__ == "__main__":
    main()
