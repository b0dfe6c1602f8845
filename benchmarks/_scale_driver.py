"""Imported into the benchmark's kernel by ``bench_scale.py``: a simulated fleet behind the real
``%%remote`` path.

:class:`SimRunner` is the session's :class:`~monarch_jupyter.remote.run.runner.RemoteRunner` with
only the Monarch parts replaced: ``plan`` makes N ranks without spawning actors, and the drive
(:class:`SimDrive`) takes its messages from simulated ranks instead of a Monarch port. Everything
after the port is the real code: ``protocol.decode`` → ``Drive._handle`` (spool, sink, runs index)
→ the magic's pump (``RunState``, ``TextRenderer``, the grid's ``GridSync``) → IOPub.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from monarch_jupyter.remote.run.drive import Drive, Plan, RunHandle, Sink, Target
from monarch_jupyter.remote.run.index import Where
from monarch_jupyter.remote.run.runner import RemoteRunner
from monarch_jupyter.remote.view.model import RankState
from monarch_jupyter.remote.wire.protocol import FLUSH_EVERY, OUT, Chunk, Data, Exit, decode, encode

MESH = "hosts"
TICK = FLUSH_EVERY  # the actor's: a rank sends at most one message this often (unless the
# run's spec spaces them out: RunSpec.flush_every)
# same: every rank prints the same lines (they fold into one group); fail_every: every K-th rank
# exits with rc 1 (the grid's failing ranks)
SETTINGS: dict[str, Any] = {
    "ranks": 64,
    "rate": 10.0,
    "seconds": 10.0,
    "burst": 0,
    "same": False,
    "fail_every": 0,
}
RESULT: dict[str, Any] = {}  # what the kernel side measured (read by the client after the cell)


def line(rank: int, n: int) -> str:
    if SETTINGS["same"]:
        return f"step {n:6d} loss 0.{(7919 + n) % 10000:04d} lr 3.0e-4\n"
    return f"step {n:6d} rank {rank:5d} loss 0.{(rank * 7919 + n) % 10000:04d} lr 3.0e-4\n"


def returncode(rank: int) -> int:
    every = SETTINGS["fail_every"]
    return 1 if every and rank % every == every - 1 else 0


class SimDrive(Drive):
    """A drive whose ranks are simulated: the same decoded messages into the same handler."""

    async def _drive(self) -> None:
        self._open_spool()
        n = len(self.plan.ranks)
        rate, seconds, burst = SETTINGS["rate"], SETTINGS["seconds"], SETTINGS["burst"]
        start = time.monotonic()
        self.heard = dict.fromkeys(self.remaining, start)
        # a rank's messages are as far apart as the real actor sends them for this run
        every = (self.spec.flush_every if self.spec is not None else None) or TICK
        sent = [0] * n
        messages = 0
        made_cpu = 0.0
        if burst:  # every rank prints `burst` lines at once (a stack trace), then fails
            for rank in range(n):
                text = "".join(line(rank, k) for k in range(burst))
                chunk = Chunk(OUT, text, burst)
                self._feed(encode(Exit(self.run_id, MESH, rank, 1000 + rank, [chunk], 1, 0.1, None)))
                sent[rank] = burst
                messages += 1
                if rank % 64 == 63:
                    await asyncio.sleep(0)
                    self.spool.maybe_flush()
        else:
            tick = 0
            failing = [rank for rank in range(n) if returncode(rank)]
            ended: set[int] = set()
            while (now := time.monotonic()) - start < seconds:
                # ranks are spread evenly over a period; a rank due for k lines sends them in one message
                made = []
                began = time.thread_time()  # what making the messages costs is the fleet's, not the kernel's
                if failing and now - start >= seconds / 2:  # the failing ranks end half-way
                    for rank in failing:
                        self._feed(
                            encode(Exit(self.run_id, MESH, rank, 1000 + rank, [], 1, now - start, None))
                        )
                    ended, failing = set(failing), []
                for rank in range(n):
                    due = int((now - start) * rate + rank / n)
                    if due > sent[rank] and rank not in ended:
                        text = "".join(line(rank, k) for k in range(sent[rank], due))
                        message = Data(
                            self.run_id, MESH, rank, 1000 + rank, [Chunk(OUT, text, due - sent[rank])]
                        )
                        made.append(encode(message))
                        sent[rank] = due
                made_cpu += time.thread_time() - began
                for wire in made:
                    self._feed(wire)
                messages += len(made)
                self.spool.maybe_flush()
                self._save_entry()
                tick += 1
                await asyncio.sleep(max(0.0, start + tick * every - time.monotonic()))
            for rank in range(n):
                if rank not in ended:
                    self._feed(encode(Exit(self.run_id, MESH, rank, 1000 + rank, [], 0, seconds, None)))
        RESULT.update(
            lines_sent=sent,
            messages=messages,
            sim_seconds=time.monotonic() - start,
            sim_cpu=made_cpu,
            exits_sent=time.time(),
        )

    def _feed(self, wire: Any) -> None:
        self._handle(decode(wire))


class SimRunner(RemoteRunner):
    """The real runner but for Monarch: N simulated ranks on mesh ``hosts``."""

    def __init__(self, session: Any, folder: Path) -> None:
        super().__init__(session)
        self.where = Where(folder, folder / ".monarch" / "bench" / "runs", "bench")

    def plan(self, args: Any) -> Plan:
        n = SETTINGS["ranks"]
        ranks = [RankState(label=f"hosts={i}", mesh=MESH, point={"hosts": i}, rank=i) for i in range(n)]
        target = Target(MESH, None, {i: i for i in range(n)})
        return Plan(ranks, [target], f"mesh hosts ({n} ranks)", {}, self.where, None)

    drive_type = SimDrive

    def start(
        self, args: Any, plan: Plan, sink: Sink, log_path: Path, handle: RunHandle | None = None
    ) -> RunHandle:
        RESULT.clear()
        RESULT["log_path"] = str(log_path)
        return super().start(args, plan, sink, log_path, handle)


def install(ipython: Any, folder: str) -> None:
    """Put a :class:`SimRunner` under this kernel's ``%%remote``."""
    from monarch_jupyter.remote.cell.magic import current

    magics = current()
    assert magics is not None, "%load_ext monarch_jupyter first"
    magics.runner = SimRunner(magics.session, Path(folder))


def check_log() -> dict[str, Any]:
    """Lines missing from the run's log (compared with what every rank sent), its size."""
    from monarch_jupyter.remote.run.spool import read_log

    path = Path(RESULT["log_path"])
    logged = read_log(path)
    missing = 0
    for rank, count in enumerate(RESULT["lines_sent"]):
        got = logged.get(f"hosts={rank}", [])
        expected = [line(rank, k).rstrip("\n") for k in range(count)]
        missing += sum(1 for a, b in zip(expected, got, strict=False) if a != b) + max(0, count - len(got))
    return {
        "log_lines_missing": missing,
        "log_bytes": path.stat().st_size,
        "lines_sent": sum(RESULT["lines_sent"]),
        "messages": RESULT["messages"],
        "sim_seconds": RESULT["sim_seconds"],
        "sim_cpu": RESULT["sim_cpu"],
        "exits_sent": RESULT["exits_sent"],
    }
