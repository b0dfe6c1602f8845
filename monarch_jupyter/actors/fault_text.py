"""A supervision fault as one compact line (pure: no threads, no Monarch).

Monarch says a proc died as ``SupervisionError: Endpoint call sleepers.nap() failed, The actor
<root>.<__main__.S sleepers{'gpus': 1/2}> and all its descendants have failed:\\n  the process
this actor was running on failed: Killed(sig=9)``; a notebook needs
``sleepers.nap() failed: gpus=1's process was killed by SIGKILL``. A proc the kernel watches
itself (:mod:`.proc_watch`) is said as ``proc gpus=1 of anon (pid 7156) died: killed by SIGKILL``.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

_CALL = re.compile(r"Endpoint call (?P<call>[^\s(]+)\(\) failed")
# "<root>.<__main__.S sleepers{'gpus': 1/2}>" or "logger-tBTvvJHMkij{'gpus': 1/2}"
_ACTOR = re.compile(r"actor (?:<root>\.<(?:\S+ )?)?(?P<mesh>[^\s{<>]+)\{(?P<point>[^}]*)\}")
_DIM = re.compile(r"'(?P<name>[^']+)':\s*(?P<value>\d+)/\d+")
_KILLED = re.compile(r"Killed\(sig=(?P<sig>\d+)\)")
_EXITED = re.compile(r"(?:Exited|exit code|exit status)[(: ]+(?P<code>-?\d+)")
_UID = re.compile(r"-[A-Za-z0-9]{11}$")  # Monarch's suffix on a mesh's actor name: "sleepers-B9jEHftmapA"


@dataclass(frozen=True)
class Fault:
    call: str  # "sleepers.nap" ("" when not a call's error)
    mesh: str  # the actor mesh, "" when not said
    point: str  # "gpus=1" or "hosts=0,gpus=1", "" when not said
    cause: str  # "killed by SIGKILL", "exited with code 3", or Monarch's own last words


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def cause_of(text: str) -> str:
    """What ended the process, in words, from Monarch's text (its last line when not known)."""
    killed = _KILLED.search(text)
    if killed:
        return f"killed by {signal_name(int(killed['sig']))}"
    exited = _EXITED.search(text)
    if exited:
        return f"exited with code {exited['code']}"
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "failed"
    return last.rpartition("failed: ")[2] or last


def parse(text: str) -> Fault:
    """The call, mesh, point and cause in a SupervisionError's or a MeshFailure report's text."""
    call = _CALL.search(text)
    actor = _ACTOR.search(text)
    point = ",".join(f"{m['name']}={m['value']}" for m in _DIM.finditer(actor["point"])) if actor else ""
    mesh = _UID.sub("", actor["mesh"]) if actor else ""
    return Fault(call["call"] if call else "", mesh, point, cause_of(text))


def call_line(fault: Fault) -> str:
    """``sleepers.nap() failed: gpus=1's process was killed by SIGKILL``."""
    head = f"{fault.call}() failed" if fault.call else f"{fault.mesh or 'a mesh'} failed"
    who = f"{fault.point}'s process" if fault.point else "its process"
    return f"{head}: {who} {_verb(fault.cause)}"


def proc_line(point: str, mesh: str, pid: int, cause: str, cell: int | None) -> str:
    """``monarch_jupyter: proc gpus=1 of anon (pid 7156) died: killed by SIGKILL (in cell [4])``."""
    where = f" (during cell [{cell}])" if cell is not None else ""
    return f"monarch_jupyter: proc {point or '?'} of {mesh} (pid {pid}) died: {cause}{where}; calls to its actors fail"


def hosts_line(workers: list[int], procs: int, cell: int | None) -> str:
    """One line for job workers gone with their procs (nobody asked for a kill)."""
    where = f" (during cell [{cell}])" if cell is not None else ""
    them = (
        f"worker (pid {workers[0]}) is"
        if len(workers) == 1
        else f"workers (pids {', '.join(map(str, workers))}) are"
    )
    return (
        f"monarch_jupyter: the job's {them} gone, with {procs} actor proc{'s' if procs != 1 else ''}{where}: "
        "calls to their actors fail; %job shows the job, %job apply starts it again"
    )


def _verb(cause: str) -> str:
    if cause.startswith("killed"):
        return f"was {cause}"
    return cause if cause.startswith("exited") else f"failed: {cause}"
