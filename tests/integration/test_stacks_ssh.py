"""``%remote stacks`` over SSH hosts (a real sshd on loopback, tests/daemons.py): a run's Python
ranks and the user's own actor procs, each stuck rank named by its frame, the others folded."""

from __future__ import annotations

import re
import time

from harness import poll
from test_ssh import write_jobs

RUN = """import os, time
def waits_here():
    time.sleep(120)
def the_odd_one():
    time.sleep(120)
(the_odd_one if os.environ["MONARCH_RANK_hosts"] == "1" else waits_here)()
"""

ACTOR = """from monarch.actor import Actor, current_rank, endpoint
import time
import monarch_jupyter

def allreduce(rank):
    if rank == 1:
        time.sleep(600)
    return rank

class Trainer(Actor):
    @endpoint
    def step(self) -> int:
        return allreduce(current_rank().rank)

    @endpoint
    def ready(self) -> int:
        return current_rank().rank

procs = monarch_jupyter.state().hosts.spawn_procs()
trainers = procs.spawn("trainers", Trainer)
trainers.ready.call().get()
"""


def until(kernel, line: str, needle: str, timeout: float = 30.0) -> str:
    def once() -> str:
        text = kernel.ok(line).stream()
        return text if needle in text else ""

    return poll(once, timeout, 0.3) or kernel.ok(line).stream()


def test_stacks_of_a_run_and_of_actors_on_ssh_hosts(sshd, start_kernel, tag, workdir):
    write_jobs(workdir, sshd)
    kernel = start_kernel()
    kernel.ok("%load_ext monarch_jupyter")
    kernel.ok("%job apply jobs.ssh2", timeout=120)
    try:
        started = kernel.ok("%%remote --detach python\n" + RUN, timeout=120).text
        run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", started)
        assert run_id, started
        text = until(kernel, "%remote stacks", "the_odd_one (<string>:5)")
        assert "2 ranks, 2 different stacks" in text.splitlines()[0], text
        assert re.search(r"^hosts=1:\n(    .*\n)*?\s+the_odd_one \(<string>:5\)", text, re.MULTILINE), text
        kernel.ok(f"%remote stop {run_id[1]}", timeout=60)

        kernel.ok(ACTOR, timeout=120)
        kernel.ok("fut = trainers.step.call()")
        start = time.monotonic()
        text = until(kernel, "%remote stacks --actors", "2 different stacks")
        print(f"\n%remote stacks --actors over ssh: {time.monotonic() - start:.2f} s to name the stuck rank")
        assert text.splitlines()[0] == "actors (anon): 2 procs, 2 different stacks", text
        odd = text.split("hosts=1:\n", 1)[1]
        assert re.search(r"allreduce \(cell \[\d+\] line 7\)\n\s+time\.sleep\(600\)", odd), text
        assert "hosts=0:" in text and "every thread idle" in text.split("hosts=1:")[0], text
    finally:
        kernel.ok("%job kill", timeout=60)
