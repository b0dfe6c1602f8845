"""The user's actor procs this kernel spawned, as they announced themselves (plain data).

Each proc spawned from the kernel sends one ``proc`` record at start-up (``actors/worker.py``:
pid, start tick, host, proc name, point); ``actors/kernel.py`` adds it here and registers how a
``<dynamic-code>`` frame maps to a notebook cell. ``%remote stacks --actors`` (``remote/cell/verbs.py``)
reads both: it lives at the package top because ``remote/`` and ``actors/`` do not import each other.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

Proc = dict[
    str, Any
]  # one proc: pid, start, host, proc, spawn, rank, point (list of pairs), ppid, output, mesh
Locate = Callable[[str, int], "tuple[int, str] | None"]  # (qualname, line) → (cell, source line)

_NAME = re.compile(r"^(?P<name>.+?)-\d+<")  # Monarch's proc names: "<mesh name>-<rank><uid>@…"
_lock = threading.Lock()
_procs: dict[tuple[str, int], Proc] = {}  # (host, pid) → its record
_locate: Locate | None = None


def mesh_name(proc_name: str) -> str:
    """The proc mesh's name in a Monarch proc name (``anon`` for ``anon-3<Xy…>@…``)."""
    match = _NAME.match(proc_name)
    return match["name"] if match else (proc_name.partition("@")[0] or "procs")


def add(record: dict[str, Any]) -> None:
    """Record one proc's announcement (a record that is not one is ignored)."""
    try:
        proc: Proc = {
            "pid": int(record["pid"]),
            "start": None if record.get("start") is None else int(record["start"]),
            "host": str(record.get("host") or ""),
            "proc": str(record.get("proc") or ""),
            "spawn": int(record.get("spawn") or 0),
            "rank": int(record.get("rank") or 0),
            "point": [(str(k), int(v)) for k, v in record.get("point") or []],
            "ppid": None if record.get("ppid") is None else int(record["ppid"]),
            "output": bool(record.get("output", True)),  # whether its output is forwarded
        }
    except (KeyError, TypeError, ValueError):
        return
    proc["mesh"] = mesh_name(proc["proc"])
    with _lock:
        _procs[(proc["host"], proc["pid"])] = proc


def known() -> list[Proc]:
    """Every proc recorded and not forgotten, by spawn and rank; a mesh name used by two spawns
    is told apart as ``name#spawn``."""
    with _lock:
        procs = [dict(p) for p in _procs.values()]
    spawns: dict[str, set[int]] = {}
    for proc in procs:
        spawns.setdefault(proc["mesh"], set()).add(proc["spawn"])
    for proc in procs:
        if len(spawns[proc["mesh"]]) > 1:
            proc["mesh"] = f"{proc['mesh']}#{proc['spawn']}"
    return sorted(procs, key=lambda p: (p["spawn"], p["rank"]))


def shared_shapes(procs: list[Proc]) -> dict[int, str]:
    """Spawn → its mesh's name (as :func:`known` gives it), for each proc mesh among ``procs`` whose
    dims another one has too: their ranks' labels alone (``gpus=0``) would be the same. A mesh
    whose output is not forwarded (``live_output(False)``) labels nothing: it does not count."""
    dims: dict[int, tuple[str, ...]] = {}
    names: dict[int, str] = {}
    for proc in procs:
        if not proc.get("output", True):
            continue
        dims[proc["spawn"]] = tuple(name for name, _ in proc["point"])
        names[proc["spawn"]] = proc["mesh"]
    count: dict[tuple[str, ...], int] = {}
    for shape in dims.values():
        count[shape] = count.get(shape, 0) + 1
    return {spawn: names[spawn] for spawn, shape in dims.items() if count[shape] > 1}


def forget(procs: list[Proc]) -> None:
    """Drop these procs (they are gone)."""
    with _lock:
        for proc in procs:
            _procs.pop((proc["host"], proc["pid"]), None)


def set_locator(locate: Locate | None) -> None:
    """How a frame of notebook code (qualified name, line) is found in the kernel's cells."""
    global _locate
    _locate = locate


def locate(qualname: str, line: int) -> tuple[int, str] | None:
    """``(cell number, source line)`` of a ``<dynamic-code>`` frame, or None."""
    finder = _locate
    if finder is None:
        return None
    try:
        return finder(qualname, line)
    except Exception:  # a bug in finding the cell must not lose the stacks
        return None
