"""Say at once that an actor proc on this machine died, instead of ~10 s later in a raw error.

Monarch notices a dead proc by its supervision poll (~9 s on this machine, measured with a
SIGKILLed ``this_host()`` proc, idle or mid-call) and then only raises ``SupervisionError`` from
the next call. The procs on this machine announced themselves (``system/actor_procs``: pid,
start tick, parent); a daemon thread reads their ``/proc`` entries every :data:`POLL` s and,
for one gone while its parent (the kernel or the job's worker) lives on and no ``stop()`` is
under way (``runtime/faults.expect_ends``: ``%job kill``, ``JobTrait.kill``, ``ProcMesh.stop``),
calls ``on_death`` with one line (:func:`.fault_text.proc_line`). Procs whose parent went too
died with their host: the job's workers gone, said once for all of them
(:func:`.fault_text.hosts_line`) instead of after the next call's 30-60 s timeout. A proc of the
kernel that exited 0 was stopped. Procs on other hosts are left to Monarch's own supervision.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable

from ..runtime import faults as _faults
from ..system import actor_procs, procfs
from . import fault_text

POLL = 0.2  # how often the procs' /proc entries are read: a death is said within ~2 polls
STOP_GRACE = 5.0  # a proc that ends within this of an expected end (a kill, a stop) is no fault


def child_status(pid: int) -> str | None:
    """How a child of this process ended, read without reaping it (Monarch reaps its own), or
    None when it is not a child, not ended or already reaped."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, OSError):
        return None
    if info is None:
        return None
    if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return f"killed by {fault_text.signal_name(info.si_status)}"
    return f"exited with code {info.si_status}"


class Watch:
    def __init__(self, on_death: Callable[[str], None], cell: Callable[[], int | None]) -> None:
        self.on_death, self.cell = on_death, cell
        self.host = socket.gethostname()
        self.said: set[tuple[int, int | None]] = set()  # (pid, start tick) already judged
        self.suspects: dict[tuple[int, int | None], tuple[actor_procs.Proc, str | None]] = {}
        self.hosts_said: set[int] = set()  # parents (job workers) already said to be gone
        self.orphaned: dict[int, list[actor_procs.Proc]] = {}  # gone workers not said yet
        threading.Thread(target=self._run, name="monarch-jupyter-procs", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(POLL)
            with contextlib.suppress(Exception):  # a bad record must not end the watch
                self.tick()

    def tick(self) -> None:
        # judged one poll after found gone: a host killed as a whole loses its worker meanwhile
        orphaned: dict[int, list[actor_procs.Proc]] = {}  # a gone worker → its procs gone with it
        for key, (proc, status) in list(self.suspects.items()):
            del self.suspects[key]
            parent = self._judge(proc, status)
            if parent is not None:
                orphaned.setdefault(parent, []).append(proc)
        # workers found gone in consecutive polls (one host killed just after another) are one line
        for parent, procs in orphaned.items():
            self.orphaned.setdefault(parent, []).extend(procs)
        if self.orphaned and not orphaned:
            self._hosts_gone(self.orphaned)
            self.orphaned = {}
        for proc in actor_procs.known():
            key = (proc["pid"], proc["start"])
            if proc["host"] != self.host or key in self.said or procfs.alive(*key):
                continue
            self.said.add(key)
            self.suspects[key] = (proc, child_status(proc["pid"]))

    def _judge(self, proc: actor_procs.Proc, status: str | None) -> int | None:
        """Say a proc's own death; return its parent when it died with it (a job's worker)."""
        if _faults.ends_expected(STOP_GRACE) or status == "exited with code 0":
            return None
        parent = proc.get("ppid")
        if not isinstance(parent, int):
            return None
        if not procfs.alive(parent):
            return parent if parent != os.getpid() else None
        point = ",".join(f"{name}={value}" for name, value in proc["point"])
        cause = status or "its process is gone (a signal, a crash or the OOM killer)"
        self.on_death(fault_text.proc_line(point, proc["mesh"], proc["pid"], cause, self.cell()))
        return None

    def _hosts_gone(self, orphaned: dict[int, list[actor_procs.Proc]]) -> None:
        """Job workers gone with their procs, no kill asked for: one line for all of them."""
        new = sorted(set(orphaned) - self.hosts_said)
        self.hosts_said.update(new)
        if new:
            procs = sum(len(orphaned[pid]) for pid in new)
            self.on_death(fault_text.hosts_line(new, procs, self.cell()))
