"""What the processes of a run's ranks on this host are doing: Python stacks by py-spy, a
process line (state, wchan, command) for the others. Plain data for ``%remote stacks``.

A rank's processes are its process group (the leader's pid, from ``meta.json``) and the
processes carrying the run's marker outside every group (strays), given to the rank whose
``MONARCH_RANK_<dim>`` variables they carry. py-spy ships with torchmonarch, next to the
worker's Python; its JSON (``dump --json``, parsed by :mod:`..wire.pyspy`) is bounded in time
(``DUMP_TIMEOUT``), size (``MAX_JSON``) and the lines kept (``MAX_LINES``), so one stuck
process never hangs the verb.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ...system import procfs as _procfs
from ..wire import pyspy
from .layout import META, check_run_id, read_json, read_status, runs_root
from .runs import leader_alive, leader_pid, marked_pids

DUMP_TIMEOUT = 5.0  # seconds one py-spy dump may take
MAX_LINES = 200  # lines (threads and frames) kept of one dump
MAX_JSON = 8 << 20  # bytes read of py-spy's output: far above a real dump (~300 bytes a frame)
CMD_WIDTH = 160  # characters kept of a command line
PLAIN = {"NO_COLOR": "1", "CLICOLOR": "0", "CLICOLOR_FORCE": "0", "TERM": "dumb"}  # py-spy without colours

Answer = dict[str, Any]  # one rank's stacks, plain data (see rank_stacks)


def py_spy() -> str | None:
    """The py-spy binary: next to this Python (torchmonarch's), else on the PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if os.access(beside, os.X_OK) else shutil.which("py-spy")


def _is_python(pid: int) -> bool:
    return "python" in os.path.basename(_procfs.exe(pid) or "")


def command_text(argv: list[str] | None) -> str:
    """A command line on one line (an argument of several lines: its first, then ``⏎…``), at
    most ``CMD_WIDTH`` characters."""
    text = " ".join(a.partition("\n")[0] + ("⏎…" if "\n" in a else "") for a in argv or [])
    return text if len(text) <= CMD_WIDTH else text[: CMD_WIDTH - 1] + "…"


async def _read(stream: asyncio.StreamReader | None, most: int) -> bytes | None:
    """At most ``most`` bytes of ``stream`` until its end; None if it had more."""
    out = b""
    while stream is not None and (chunk := await stream.read(1 << 16)):
        out += chunk
        if len(out) > most:
            return None
    return out


def stack(out: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """``({"threads", "more"}, None)`` from py-spy's JSON, at most ``MAX_LINES`` lines of it
    (``more``: how many were cut), or ``(None, why not)``."""
    try:
        threads = pyspy.parse(out)
    except pyspy.DumpError as error:
        return None, f"py-spy's output: {error}"
    kept, more = pyspy.trim(threads, MAX_LINES)
    return {"threads": kept, "more": more}, None


async def dump(pid: int, native: bool, binary: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """``({"threads", "more"}, None)`` from py-spy (:func:`stack`), or ``(None, why not)``."""
    if binary is None:
        return None, f"no py-spy next to {sys.executable} or on the PATH"
    argv = [binary, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else [])
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env={**os.environ, **PLAIN},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as error:
        return None, f"py-spy: {error}"
    try:
        out, err = await asyncio.wait_for(
            asyncio.gather(_read(proc.stdout, MAX_JSON), _read(proc.stderr, MAX_JSON)), DUMP_TIMEOUT
        )
    except asyncio.TimeoutError:
        out = err = b""
        why: str | None = f"py-spy took over {DUMP_TIMEOUT:g} s"
    else:
        why = None if out is not None and err is not None else f"py-spy wrote over {MAX_JSON >> 20} MiB"
    if why is not None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None, why
    await proc.wait()
    if proc.returncode != 0:
        lines = (err or out or b"").decode(errors="replace").strip().splitlines()
        lines = [line for line in lines if line.startswith("Error:")] or lines  # not its backtrace
        return None, f"py-spy failed: {lines[-1] if lines else f'rc {proc.returncode}'}"
    return stack(out or b"")


async def process(pid: int, native: bool, binary: str | None) -> dict[str, Any]:
    """One process: pid, state, wchan, command line, and for Python its dump (``threads``,
    :class:`.pyspy.Thread`, and ``more``, the lines cut) or why none (``error``)."""
    python = _is_python(pid)
    line = {  # read before py-spy, which pauses the process while it reads it
        "pid": pid,
        "state": _procfs.state(pid) or "?",
        "wchan": _procfs.wchan(pid) or "-",
        "cmd": command_text(_procfs.cmdline(pid)),
        "python": python,
    }
    stack, error = await dump(pid, native, binary) if python else (None, None)
    return {**line, "threads": None, "more": 0, **(stack or {}), "error": error}


def _owner(pid: int, points: dict[str, dict[str, int]]) -> str | None:
    """The rank folder whose point the stray's ``MONARCH_RANK_<dim>`` variables name."""
    for name, point in points.items():
        if point and all(_procfs.env_value(pid, f"MONARCH_RANK_{d}") == str(v) for d, v in point.items()):
            return name
    return None


def rank_folders(
    run_id: str, ranks: list[int] | None, point: dict[str, int] | None, mine: dict[str, int] | None
) -> list[tuple[Path, dict[str, Any]]]:
    """This host's rank folders of the run (with their meta), filtered: flat ``ranks``, ranks
    at ``point``, and those of this actor's host (``mine``: where hosts share one machine)."""
    try:
        folders = sorted(p for p in (runs_root() / check_run_id(run_id)).iterdir() if p.is_dir())
    except (OSError, ValueError):
        return []
    chosen = []
    for folder in folders:
        meta = read_json(folder / META)
        if meta is None:
            continue
        at = meta.get("point") or {}
        if ranks is not None and meta.get("rank") not in ranks:
            continue
        if any(at.get(d) != v for d, v in (point or {}).items()):
            continue
        if any(d in at and at[d] != v for d, v in (mine or {}).items()):  # another actor's host
            continue
        chosen.append((folder, meta))
    return chosen


async def run_stacks(
    run_id: str,
    ranks: list[int] | None,
    point: dict[str, int] | None,
    native: bool,
    mine: dict[str, int] | None = None,
) -> list[Answer]:
    """Each chosen rank of run ``run_id`` on this host: ``{"key", "rank", "point", "folder",
    "state", "returncode", "processes": [process…]}`` (see :func:`process`); a process's
    ``wrapper`` says it is the run's wrapper shell (the leader, or a subshell of it)."""
    chosen = rank_folders(run_id, ranks, point, mine)
    leaders = {folder.name: leader_pid(meta) or 0 for folder, meta in chosen if leader_alive(meta)}
    members = _procfs.group_members(set(leaders.values())) if leaders else {}
    pids = {name: list(members.get(leader, [])) for name, leader in leaders.items()}
    points = {folder.name: meta.get("point") or {} for folder, meta in chosen}
    for stray in marked_pids({run_id}).get(run_id, []):
        if _procfs.pgid(stray) not in members:
            owner = _owner(stray, points)
            if owner is not None:
                pids.setdefault(owner, []).append(stray)
    binary = py_spy()
    answers: list[Answer] = []
    for folder, meta in chosen:
        status = read_status(folder)
        state = "exited" if status is not None else "running" if folder.name in leaders else "lost"
        answers.append(
            {
                "key": meta.get("key"),
                "rank": meta.get("rank"),
                "point": points[folder.name],
                "folder": str(folder),
                "state": state,
                "returncode": status[0] if status is not None else None,
                "processes": [],
            }
        )
    jobs = [
        (answer, process(pid, native, binary))
        for answer, (folder, _) in zip(answers, chosen, strict=True)
        for pid in pids.get(folder.name, [])
    ]
    found = await asyncio.gather(*(job for _, job in jobs))
    for (answer, _), proc in zip(jobs, found, strict=True):
        answer["processes"].append(proc)
    for answer, (folder, meta) in zip(answers, chosen, strict=True):
        if meta.get("session"):  # a session cell's leader is the namespace: the user's code, no wrapper
            continue
        shell = next((p["cmd"] for p in answer["processes"] if p["pid"] == leaders.get(folder.name)), None)
        for proc in answer["processes"]:  # the run's wrapper shell: the leader and its subshells
            proc["wrapper"] = shell is not None and proc["cmd"] == shell
    return answers


def _parent(pid: int) -> int | None:
    fields = _procfs.stat_fields(pid)
    try:
        return int(fields[1]) if fields else None
    except (IndexError, ValueError):
        return None


async def actor_stacks(procs: list[dict[str, Any]], native: bool, parent: int) -> list[Answer]:
    """The user's actor procs (as they announced themselves: pid, start tick, mesh, rank, point)
    that are children of ``parent`` (this host's worker: our actor's siblings, so a pid of
    another machine is never dumped here) and still the process that announced: one answer
    each, as :func:`run_stacks` gives, ``key`` its mesh and ``pid`` its pid."""
    mine = [
        p for p in procs if _parent(int(p["pid"])) == parent and _procfs.alive(int(p["pid"]), p.get("start"))
    ]
    binary = py_spy()
    found = await asyncio.gather(*(process(int(p["pid"]), native, binary) for p in mine))
    return [
        {
            "key": p.get("mesh"),
            "rank": p.get("rank"),
            "point": dict(p.get("point") or []),
            "folder": None,
            "state": "running",
            "returncode": None,
            "pid": int(p["pid"]),
            "actor": True,
            "processes": [proc],
        }
        for p, proc in zip(mine, found, strict=True)
    ]
