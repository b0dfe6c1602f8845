"""``%remote stacks``: the hosts' answers (plain data, :mod:`.host.dumps`) as text, identical
stacks folded across ranks in clush's notation (pure: no Monarch, no threads).

Each rank's text is its command's processes, one line each (``pid 123 S hrtimer_nanosleep:
sleep 30``; a Python process's line is followed by its py-spy dump: the threads of
:mod:`..wire.pyspy`, printed as py-spy's own text prints them); the run's wrapper shell is left out
while anything else runs. Ranks fold when their texts are equal once what differs between
identical code paths is dropped (:func:`normalise`: pids, thread ids, thread states, addresses,
the rank's own folder); the largest group comes first::

    hosts=[0-6,8] (8):
        pid …: python -u -c …
            Thread … "MainThread"
                wait (<string>:4)
    hosts=7:
        …
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from ...text.rank_sets import rank_set
from ..wire.pyspy import Frame, Thread

Answer = Mapping[str, Any]  # one rank, as the host sent it
INDENT = "    "

_PID = re.compile(r"\bpid \d+")
_THREAD = re.compile(r"^(\s*Thread )(0x[0-9A-Fa-f]+|\d+)( \([^)]*\))?", re.MULTILINE)
_ADDRESS = re.compile(r"\b0x[0-9A-Fa-f]+\b")
RANK_DIR = "$RANK_DIR"


def merge(answers: Iterable[Iterable[Answer]]) -> list[Answer]:
    """Every host's ranks, once each (hosts sharing a machine may send a rank twice), by mesh
    and rank."""
    seen: dict[tuple[str, int], Answer] = {}
    for host in answers:
        for rank in host:
            seen.setdefault((str(rank.get("key")), int(rank.get("rank") or 0)), rank)
    return [seen[k] for k in sorted(seen)]


class CellFrame(Frame, total=False):
    """A frame of notebook code, named by its cell: ``(cell number, source line)``."""

    cell: tuple[int, str]


def frame_line(frame: Frame) -> list[str]:
    """A frame as py-spy's text prints it (``name (file:line)``; a native frame without a line:
    ``name (file)``); a notebook frame as its cell and line, then its source line."""
    cell = cast("CellFrame", frame).get("cell")
    if cell is not None:
        return [f"{frame['name']} (cell [{cell[0]}] line {frame['line']})", INDENT + cell[1].strip()]
    where = f"{frame['file']}:{frame['line']}" if frame["line"] else frame["file"]
    return [f"{frame['name']} ({where})"]


def stack_lines(threads: list[Thread]) -> list[str]:
    """Threads as py-spy's text dump prints them: ``Thread 123 (idle): "MainThread"``, then each
    frame, indented, innermost first."""
    out: list[str] = []
    for thread in threads:
        name = f': "{thread["name"]}"' if thread["name"] is not None else ""
        out.append(f"Thread {thread['id']} ({thread['status']}){name}")
        out += [INDENT + line for frame in thread["frames"] for line in frame_line(frame)]
    return out


def _idle_line(hidden: int, shown: bool) -> str:
    if not shown:
        return "(every thread idle in Monarch's loops: no endpoint running there)"
    return f"({hidden} more thread{'s' if hidden != 1 else ''} idle in Monarch's loops)"


def process_text(proc: Answer) -> str:
    """One process: its line, then (Python) its stack, indented, or why there is none."""
    if proc.get("python"):
        lines = [f"pid {proc['pid']}" + (f": {proc['cmd']}" if proc.get("cmd") else "")]
    else:
        lines = [f"pid {proc['pid']} {proc['state']} {proc['wchan']}: {proc['cmd']}"]
    threads, more, idle = proc.get("threads") or [], proc.get("more") or 0, proc.get("idle") or 0
    if threads or idle:
        stack = stack_lines(threads) + ([f"… {more} more lines"] if more else [])
        stack += [_idle_line(idle, bool(threads))] if idle else []
        lines += [INDENT + line for line in stack]
    elif proc.get("error"):
        lines.append(f"{INDENT}(no stack: {proc['error']})")
    return "\n".join(lines)


def rank_text(rank: Answer) -> str:
    """A rank's processes, or what became of them."""
    processes = rank.get("processes") or []
    commands = [p for p in processes if not p.get("wrapper")]
    processes = commands or processes  # the wrapper shell only when nothing else runs
    if processes:
        return "\n".join(process_text(p) for p in processes)
    if rank.get("state") == "exited":
        return f"(no process left: exited, rc {rank.get('returncode')})"
    if rank.get("state") == "lost":
        return "(no process left: killed or lost)"
    return "(no process found)"


def normalise(text: str, folder: str | None = None) -> str:
    """``text`` without what differs between ranks running the same code: pids, thread ids and
    states (idle, active, gil: timing), addresses, the rank's folder. A process's state and
    wchan are kept: they are a non-Python process's stack."""
    if folder:
        text = text.replace(folder, RANK_DIR)
    text = _PID.sub("pid …", text)
    text = _THREAD.sub(r"\1…", text)
    return _ADDRESS.sub("0x…", text)


def _label(ranks: list[Answer]) -> str:
    by_mesh: dict[str, list[tuple[tuple[str, int], ...]]] = {}
    for rank in ranks:
        by_mesh.setdefault(str(rank.get("key")), []).append(tuple((rank.get("point") or {}).items()))
    several = len(by_mesh) > 1
    return "; ".join(
        (f"{mesh}/" if several else "") + rank_set(points, brackets=True) for mesh, points in by_mesh.items()
    )


def fold(ranks: list[Answer]) -> list[tuple[list[Answer], str]]:
    """Groups of ranks whose normalised texts are equal, largest first (then by first rank):
    ``(ranks, text)``, the text normalised for a group of several, as the rank sent it for one."""
    groups: dict[str, list[Answer]] = {}
    raw: dict[str, str] = {}
    for rank in ranks:
        text = rank_text(rank)
        key = normalise(text, rank.get("folder"))
        groups.setdefault(key, []).append(rank)
        raw.setdefault(key, text)
    order = sorted(groups, key=lambda k: -len(groups[k]))  # stable: first seen first among equals
    return [(groups[k], k if len(groups[k]) > 1 else raw[k]) for k in order]


def render(run_id: str, command: str, ranks: list[Answer], title: str | None = None) -> str:
    """The verb's text: a header line (``title``, else the run and its command), then each
    group's ranks and its stack."""
    title = title or f"run {run_id} ({command!r})"
    if not ranks:
        return f"{title}: none of its ranks is on the hosts (pruned, or never started)\n"
    return _grouped(title, "rank", ranks)


def _grouped(title: str, unit: str, ranks: list[Answer], tail: str = "") -> str:
    """``title: N units, M different stacks`` and ``tail``, then each group's ranks and its
    stack (:func:`fold`): the one layout of a run's and the actor procs' stacks."""
    groups = fold(ranks)
    n = len(ranks)
    out = [
        f"{title}: {n} {unit}{'s' if n != 1 else ''}, "
        f"{len(groups)} different stack{'s' if len(groups) != 1 else ''}{tail}"
    ]
    for members, text in groups:
        count = f" ({len(members)})" if len(members) > 1 else ""
        out.append(f"{_label(members)}{count}:")
        out += [INDENT + line for line in text.splitlines()]
    return "\n".join(out) + "\n"


# ── the user's actor procs (%remote stacks --actors) ──────────────────────
Locate = Callable[[str, int], "tuple[int, str] | None"]  # (qualname, line) → (cell, source line)

DYNAMIC = "<dynamic-code>"  # cloudpickle's file name for notebook code sent by value
#: files of the threads every Monarch proc has (its event loops, the dispatch loop waiting, our
#: output pumps): a thread with only these frames is idle machinery, not shown
MACHINERY = (
    "monarch/_src/",
    "asyncio/",
    "threading.py",
    "selectors.py",
    "<frozen ",
    "concurrent/",
    "queue.py",
)


def _machinery(frame: Frame) -> bool:
    if not frame["line"]:
        return True  # a native frame without a line: neutral
    file = frame["file"]
    return file.startswith(MACHINERY) or (file == "<string>" and frame["name"] == "_pump")


def with_cells(frames: list[Frame], locate: Locate) -> list[Frame]:
    """``frames`` with each frame of notebook code named by its cell (``cell``: its number and
    source line) where ``locate`` finds it."""
    out: list[Frame] = []
    for frame in frames:
        found = locate(frame["name"], frame["line"]) if frame["file"] == DYNAMIC else None
        out.append(frame if found is None else CellFrame(**frame, cell=found))
    return out


def actor_stack(threads: list[Thread], locate: Locate | None = None) -> tuple[list[Thread], int]:
    """``(an actor proc's threads but its idle machinery ones, how many of those)``, its
    notebook frames named by cell."""
    shown = [t for t in threads if not all(_machinery(f) for f in t["frames"])]
    if locate is not None:
        shown = [{**t, "frames": with_cells(t["frames"], locate)} for t in shown]
    return shown, len(threads) - len(shown)


def actor_answers(answers: Iterable[Iterable[Answer]], locate: Locate | None = None) -> list[Answer]:
    """The hosts' answers for actor procs, merged (:func:`merge`), each dump trimmed and its
    cells named (:func:`actor_stack`)."""
    out: list[Answer] = []
    for rank in merge(answers):
        procs = []
        for p in rank.get("processes") or []:
            if p.get("threads"):
                shown, idle = actor_stack(p["threads"], locate)
                p = {**p, "cmd": "", "threads": shown, "idle": idle}
            procs.append(p)
        out.append({**rank, "processes": procs})
    return out


def render_actors(ranks: list[Answer], gone: int = 0) -> str:
    """``%remote stacks --actors``' text: a header line, then each group of procs and its stack."""
    meshes = sorted({str(r.get("key")) for r in ranks})
    tail = (
        f"; {gone} proc{'s' if gone != 1 else ''} spawned earlier {'are' if gone != 1 else 'is'} gone"
        if gone
        else ""
    )
    if not ranks:
        return f"no actor proc of this kernel is running{tail}\n"
    return _grouped(f"actors ({', '.join(meshes)})", "proc", ranks, tail)
